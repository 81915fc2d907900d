"""The backend interface: what the checker asks of an implementation under test.

A backend is any object with these members (``typing.Protocol`` below; no base class needed, so a
user's kernel plugs in without importing anything from refnorm but the dataclasses):

    name: str                                   shown in reports
    available() -> str | None                   None when usable, else the reason it is not (exit 3)
    supports(call: Call) -> str | None          None when the backend implements that call, else the
                                                reason; the case is then reported SKIPPED with it
    contract(call: Call) -> Contract            the precision contract it declares for that call
                                                (tolerances; asked once per case, with step 0's call)
    run(call: Call) -> Returned                 one call of the op; raising NotImplementedError means
                                                "not supported" (the case is SKIPPED with the message)

Optional members:

    forward_only: bool = False                  True: the backend computes no gradients (it may ignore
                                                ``Call.cotangents``); the checker then lists the golden
                                                case's gradients it does not return as unchecked, never
                                                as passed, instead of making the case an error.
                                                Per array: ``Returned.not_computed`` (below)
    prepare(calls: list[Call]) -> None          a hint: ``run_check`` hands it the calls of each case a
                                                few cases before their turn (every step with the golden
                                                initial state), so a backend that compiles per shape can
                                                compile them meanwhile (the jax adapter, in threads). It
                                                must never change what ``run`` returns; what it raises
                                                is ignored (``run`` raises it again in its place)
    options: Mapping[str, tuple | None]         the options the backend implements, any op's: name -> None
                                                (any value) or a tuple of the values it implements, e.g.
                                                {"eps": None, "normalized_shape": None, "weight_offset": (0.0,)}.
                                                Declared, a case that sets an undeclared option to other
                                                than its default (or a declared one to a value outside its
                                                tuple) is SKIPPED with the reason, and ``Call.config`` holds
                                                only the declared options: an option refnorm adds later,
                                                with a default, never reaches the backend
                                                (``declared_config``). Absent (None): every option is handed
                                                over (``complete_config``)

``supports`` and ``contract`` see the whole call (shapes, which inputs are present), because what a
kernel supports, and how precisely, can depend on them: torch CPU has no float16 avg_pool3d for
4-D local_response_norm inputs, and runs batch_norm without parameters in an all-float16 kernel.

Arrays cross the boundary as NumPy arrays, never framework tensors. ``Call`` carries every input,
cotangent and state array in the case dtype (bfloat16 as ``ml_dtypes.bfloat16``); ``Returned``
holds NumPy arrays in the backend's output dtype (the checker converts bfloat16 and friends itself).

Names and conventions are refnorm's (``refnorm.get(op)``: input, output, option and state names,
options with refnorm's meaning, e.g. ``batch_norm``'s ``momentum`` under ``convention``). A backend
translates names, layouts, dtypes and conventions to its framework and back, and nothing else.

``Call.config`` is complete (a backend that declares ``options`` gets those only): the checker hands
every option of the op, the case's values over the defaults of ``refnorm.get(op).options`` (``complete_config`` below, public for a backend's own use), so
a backend reads ``call.config["eps"]`` without knowing which options a golden case sets. A default the
module picks (batch_norm's momentum: 0.1 under convention "torch", 0.9 under "onnx") is resolved to
that value. Mask inputs (unified_norm's ``pad_mask``, 1 = padding) come as 0/1 arrays in the case
dtype; refnorm also accepts them as booleans.

Multi-step cases (running statistics, unified_norm's history): the checker calls ``run`` once per
step and passes, as ``Call.state``, the state the backend itself returned from the previous step
(the golden initial state for the first), so a backend keeps no hidden state between calls.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, runtime_checkable

import numpy as np

from ... import registry
from ...errors import ConfigError
from ...spec import REQUIRED

CONTRACTS = ("exact", "strict", "stats_d", "epi_d")
REDUCTIONS = ("tree", "block", "serial")


def complete_config(op: str, config: Mapping) -> dict:
    """Every option of ``op``: the values of ``config`` over the defaults of ``refnorm.get(op).options``,
    with a module-picked default (``DEFAULT``) resolved to its value. This is what ``Call.config``
    holds. ``ConfigError`` (a ``KeyError`` too) naming the option on an unknown or missing one."""
    spec = registry.get(op)
    unknown = [k for k in config if k not in spec.options]
    if unknown:
        raise _OptionError(f"{op}: unknown option(s) {', '.join(map(repr, unknown))}; "
                           f"expected: {', '.join(spec.options)}")
    out = {**spec.options, **dict(config)}
    missing = [k for k, v in out.items() if v is REQUIRED]
    if missing:
        raise _OptionError(f"{op}: missing required option(s) {', '.join(map(repr, missing))}")
    return dict(spec.resolve(out)) if spec.resolve is not None else out


def _plain(v):
    """An option value for comparison: tuples as lists (JSON's view: (8,) and [8] are the same value)."""
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


def declared_config(op: str, config: Mapping, declared: Mapping | None) -> tuple[dict | None, str | None]:
    """(what ``Call.config`` holds, None), or (None, why the case is skipped), for a backend that declares
    ``declared`` (its ``options`` member: option name -> None for any value, or a tuple of the values it
    implements; None: nothing declared, every option handed over). ``config`` is the case's own options
    (not completed). A case is skipped when it sets an undeclared option to other than its default (the
    value ``complete_config`` gives without it; a required option, having none, must be declared) or a
    declared option to a value outside its tuple; otherwise the backend gets the declared options only."""
    full = complete_config(op, config)
    if declared is None:
        return full, None
    if not isinstance(declared, Mapping):
        raise ConfigError(f"the backend's options={declared!r}; expected a mapping of option name -> None "
                          "(any value) or a tuple of the values it implements")
    spec = registry.get(op)
    for k, v in full.items():
        allowed = declared.get(k, ...)
        if allowed is ...:
            if spec.options[k] is REQUIRED:
                return None, f"{op}: the backend does not declare the required option {k!r} (its options: " \
                             f"{', '.join(declared) or 'none'})"
            default = complete_config(op, {j: w for j, w in config.items() if j != k})[k]
            if _plain(v) != _plain(default):
                return None, (f"{op}: the case sets {k}={v!r} (default {default!r}), an option the backend does "
                              f"not declare (its options: {', '.join(declared) or 'none'})")
        elif allowed is not None and _plain(v) not in [_plain(a) for a in allowed]:
            return None, (f"{op}: the case sets {k}={v!r}; the backend implements {k} only for "
                          f"{', '.join(map(repr, allowed))}")
    return {k: v for k, v in full.items() if k in declared}, None


class _OptionError(ConfigError, KeyError):
    """An unknown or missing option: a ConfigError, and a KeyError for the adapters that catch one."""

    def __str__(self):
        return str(self.args[0])


@dataclass(frozen=True)
class Contract:
    """The precision a backend promises for one (op, dtype): which intermediates of the op's
    specification it rounds, to which dtype, and how it accumulates each reduction; tolerances are
    derived from exactly that (docs/tolerances.md, "Contracts as rounding points"; the names:
    ``refnorm.check.contracts``).

    kind:      a named preset: "exact" (the float64 reference rounded once to the output dtype, the
               numpy backend), or one of three lists of rounding points (``contracts.PRESETS``):
               "strict"  nothing rounded but the outputs: float32 internals (float64 for float64 cases);
               "stats_d" the saved statistics (mean, rstd; the variance about the rounded mean) held in
                         the case dtype, the parameter-gradient partial sums accumulated in it;
               "epi_d"   stats_d plus the pointwise intermediates (x_hat, the affine product, g = dy * w,
                         dy * x_hat, dx's terms) rounded to it.
    reduction: the default order model of every reduction: "tree" (pairwise, gamma(n) = ceil(log2 n)
               + 2), "block" (serial chunks then a tree, gamma(n) = 2 sqrt(n) + 2; the default) or
               "serial" (gamma(n) = n + 2).
    acc:       the default accumulation dtype name (None: float32 for float32/float16/bfloat16 cases,
               float64 for float64 cases); or a mapping reduction -> (dtype, order, block) for the
               reductions accumulated otherwise (any of the three may be None: the default; a bare
               dtype string stands for (dtype, None, None)), e.g. {"dweight": ("float16", "serial", None)}.
    rounds:    point -> dtype: the intermediates rounded ("input" = the case dtype, or float16, bfloat16,
               float32), e.g. {"xhat": "input", "dy_xhat": "input"} (Llama-casting RMSNorm).
    recompute: point -> source: what the backward recomputes from a stored value, e.g.
               {"xhat": "residual_out"} (a prenorm add+norm recomputing x_hat from the rounded residual),
               {"xhat": "saved_stats"} (x_hat formed from the mean and rstd the kernel returns: the
               backward is judged at those statistics; layer_norm, rms_norm).

    ``Contract(rounds=..., acc=...)`` equal to a preset's lists IS that preset (``kind`` is set to it, and
    its bounds run on the compiled path); otherwise ``kind`` is the largest preset it contains (the base
    whose bound it extends) and ``custom`` is True. Names are checked here against every op's points;
    ``contracts.validate(op, contract)`` checks them against one op's (a ``ConfigError`` naming the bad
    point and the op's valid ones).
    """
    kind: str = "strict"
    reduction: str = "block"
    acc: object = None
    rounds: Mapping | None = None
    recompute: Mapping | None = None
    accs: Mapping | None = None                 # acc's per-reduction part (set from a mapping ``acc``)

    def __post_init__(self):
        from .. import contracts as K
        if self.kind not in CONTRACTS:
            raise ValueError(f"contract kind {self.kind!r}: expected one of {', '.join(CONTRACTS)}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"contract reduction {self.reduction!r}: expected one of {', '.join(REDUCTIONS)}")
        acc, accs = self.acc, self.accs
        if isinstance(acc, Mapping):
            acc, accs = None, {**(accs or {}), **acc}
        if acc not in (None, "float32", "float64"):
            raise ValueError(f"contract acc {acc!r}: expected None, 'float32', 'float64' or a mapping "
                             "reduction -> (dtype, order, block)")
        kind, rounds, recompute, accs = K.normalize(self.kind, self.rounds, self.recompute, accs)
        for name, v in (("kind", kind), ("acc", acc), ("rounds", rounds), ("recompute", recompute), ("accs", accs)):
            object.__setattr__(self, name, v)

    @property
    def custom(self) -> bool:
        """Whether the contract declares points beyond its preset ``kind`` (its bounds then add theirs)."""
        from .. import contracts as K
        return K.extras(self) != ({}, {}, {})

    @property
    def relaxed(self) -> bool:
        """Whether it declares any rounding or low-precision accumulation beyond strict (the judge then
        reports each array's strict ratio too: a precision warning when only the declared contract passes)."""
        from .. import contracts as K
        return K.relaxes(self)

    def describe(self) -> str:
        """One readable line: "strict/block" for a preset, else its points (``parse_contract`` reads it
        back), e.g. "rounds xhat=input, dy_xhat=input; reduction block"."""
        from .. import contracts as K
        return K.describe(self)

    def as_dict(self) -> dict:
        """The contract as plain JSON values (the JSON report's ``contract_points``)."""
        return {"kind": self.kind, "reduction": self.reduction, "acc": self.acc,
                "rounds": dict(self.rounds), "recompute": dict(self.recompute),
                "accumulate": {k: list(v) for k, v in self.accs.items()}}


def parse_contract(text: str, reduction: str = "block") -> Contract:
    """The Contract a one-line string declares ("strict", "stats_d/serial", "rounds xhat=input, dy_xhat=input",
    ...: refnorm/check/contracts.py); a ``ConfigError`` naming the bad part."""
    from ..contracts import parse_fields
    fields = parse_fields(text, reduction)
    try:
        return Contract(**fields)
    except ValueError as e:
        raise ConfigError(f"contract {text!r}: {e}") from None


@dataclass(frozen=True)
class Call:
    """One call of an op. ``cotangents`` is empty when no backward is wanted (then grads are not read)."""
    op: str
    dtype: str                                  # the case dtype: float64, float32, float16, bfloat16
    config: Mapping                             # every option of the op, by refnorm's names (complete_config)
    training: bool
    inputs: Mapping[str, np.ndarray]            # refnorm input names; absent optional inputs left out
    cotangents: Mapping[str, np.ndarray] = field(default_factory=dict)   # output name -> dL/d(output)
    state: Mapping[str, np.ndarray] = field(default_factory=dict)        # refnorm state names


@dataclass(frozen=True)
class Returned:
    """What a backend computed. ``outputs`` must hold every differentiable output of the op (``y``;
    ``w`` for weight_norm); statistics outputs (mean, rstd, ...) are optional and checked when given.
    ``grads``: input name -> gradient, for every floating input of the call when cotangents were
    given. ``state``: the new state, every key of the op's state, for stateful ops.
    ``not_computed``: "grad.NAME" or "output.NAME" -> why, for each array the kernel does not compute
    (a fused add+norm without rowscale's gradient): the checker lists it as unchecked with that reason
    (the case is partial, never passed), never requires or judges it. Declaring an array that is also
    returned, or a name the op does not have, makes the case an error. ``masks``: the dropout
    keep-masks the backend drew itself, from its own seed, instead of using the call's (add_norm's ``mask``,
    ``mask1``: 1 = kept): the checker validates each (shape, 0/1 values, a keep rate consistent with
    dropout_p) and judges the call against the reference computed with it (refnorm/check/masks.py)."""
    outputs: Mapping[str, np.ndarray]
    grads: Mapping[str, np.ndarray] = field(default_factory=dict)
    state: Mapping[str, np.ndarray] = field(default_factory=dict)
    not_computed: Mapping[str, str] = field(default_factory=dict)
    masks: Mapping[str, np.ndarray] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    name: str

    def available(self) -> str | None: ...

    def supports(self, call: Call) -> str | None: ...

    def contract(self, call: Call) -> Contract: ...

    def run(self, call: Call) -> Returned: ...
