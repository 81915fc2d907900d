"""Pitfall variants: the float64 reference of a normalizer with exactly one documented mistake.

Each row of docs/pitfalls.md (the catalogue of bugs that shipped in public projects) that a value
check can see is written here as a ``Variant`` of its normalizer: the refnorm equations with that one
change, and, where the pitfall is about precision, only the step it names emulated in that precision
(``W``, the working precision: float32 for float16/bfloat16/float32 cases, float64 for float64
cases; ``d``, the case dtype). ``refnorm.check.diagnosis`` evaluates them on a failing case and names
the one the backend matches within its derived bound.

One module per normalizer (``layer_norm``, ``rms_norm``, ``group_norm``, ``batch_norm``, ``instance_norm``,
``local_response_norm``, ``lp_normalize``, ``norm_quant``, ``add_norm``, ``dyt``, ``poly_norm``; ``_centered``
holds the statistic variants the four centred ones share), each exporting ``VARIANTS``, a tuple of ``Variant``.
The equations of the five row normalizers live in ``_engine`` (the reference written over rows, with one
``Mods`` change at a time); the local_response_norm and lp_normalize variants call their reference module
with the one change, and the add_norm, dyt and poly_norm variants their specification with the one change.
Layer: beside the reference core; imports refnorm.norms, refnorm.spec and refnorm.registry only
(tests/test_pitfalls.py checks that no checker, golden or CLI module loads).
One module per normalizer (``layer_norm``, ``rms_norm``, ``group_norm``, ``batch_norm``,
``instance_norm``, ``local_response_norm``, ``lp_normalize``, ``norm_quant``, ``add_norm``; ``_centered`` holds the statistic
variants the four centred ones share), each exporting ``VARIANTS``, a tuple of ``Variant``. The
equations of the five row normalizers live in ``_engine`` (the reference written over rows, with one
``Mods`` change at a time); the local_response_norm and lp_normalize variants call their reference
module with the one change, and the add_norm variants its specification with the one change; the group_norm_silu
variants are its specification with the one change, or group_norm's engine variants on its pre-activation.
Layer: beside the reference core; imports refnorm.norms, refnorm.spec
and refnorm.registry only (tests/test_pitfalls.py checks that no checker, golden or CLI module loads).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Callable

from ._engine import OPS as _OPS
from ._engine import Mods, wname

MODULES = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "local_response_norm",
           "lp_normalize", "norm_quant", "add_norm", "weight_standardization", "weight_norm", "offline_batch_norm", "gated_norm",
           "dyt", "poly_norm", "norm_quant_block", "group_norm_silu")


@dataclass(frozen=True)
class Variant:
    """``id``: a short name; ``pitfall_ids``: the docs/pitfalls.md rows it models; ``title``: what it does
    ("{W}" and "{d}" stand for the case's working precision and dtype); ``op``: its normalizer;
    ``mods``: the change (_engine.Mods); ``when``: (config, training, inputs, state, cotangents) ->
    bool, the calls on which the change can make a difference (default: every call);
    ``bounds_training``: the parts ("outputs", "grads") a variant computes with batch/instance
    statistics in an eval-mode call, whose error bounds are therefore those of a training-mode call."""
    id: str
    pitfall_ids: tuple
    title: str
    op: str
    mods: Mods = field(default_factory=Mods)
    when: Callable | None = field(default=None, compare=False)
    bounds_training: tuple = ()     # parts whose bounds are those of a training-mode call (E10, E11)
    dtypes: tuple = ()              # the case dtypes it applies to (empty: every one)
    low_precision: bool = False     # an "in d" precision variant: only for float16/bfloat16 cases (for
    #                                 float32/float64 cases d is the working precision: no distinct pitfall)
    fn: Callable | None = field(default=None, compare=False)   # (inputs, config, cotangents, dtype, state,
    #                                                              training) -> Result, in place of _engine
    bounds_inputs: Callable | None = field(default=None, compare=False)
    # inputs -> the inputs the bounds are derived from when the variant computes with one input in place of
    # another (add_norm's x1 dropped with x's mask: dx1's bound is zero where mask1 drops, not where mask does)
    bounds_as: Callable | None = field(default=None, compare=False)
    # (config, dtype) -> (op or None: the variant's own, config): the variant computes another op's equation
    # (rms_norm as layer_norm) or places eps elsewhere, so its values carry that computation's rounding: the
    # diagnosis derives its bounds as the check would for that op and configuration (default: the case's own)
    slack: Callable | None = field(default=None, compare=False)
    # dtype -> [mods, ...]: the variant at the ends of the rounding its own change implies in the backward (a
    # statistic computed in {d} by a module differentiated by autograd: the gradient through it is rounded to
    # {d} too); the diagnosis always widens the variant's bounds by how far these move its results
    spread: Callable | None = field(default=None, compare=False)
    # gfun -> [Mods, ...]: the variant at the ends of its OWN rounding interval, where the pitfall makes the
    # result depend on the kernel's summation order (gfun(n): the reduction multiplier of the backend's
    # declared model); the diagnosis widens the match's bound by how far these move each result

    @property
    def mechanism(self) -> str:
        """The key of the mechanism (family) this variant is an instance of (mechanisms.MECHANISMS)."""
        from .mechanisms import FAMILY
        return FAMILY[self.id]

    @property
    def params_change_only(self) -> bool:
        """Whether the variant changes the parameter gradients alone: an engine variant of an op with
        PARAMS_ONLY whose Mods differ from the reference's in PARAMS_FIELDS only, with no computation,
        bounds or spread of its own. Its statistics, y and dx are the reference's, by its definition."""
        if self.op not in PARAMS_ONLY or self.bounds_training or any(
                f is not None for f in (self.fn, self.bounds_as, self.bounds_inputs, self.slack, self.spread)):
            return False
        changed = {f.name for f in dataclasses.fields(Mods) if getattr(self.mods, f.name) != getattr(Mods(), f.name)}
        return bool(changed) and changed <= set(PARAMS_FIELDS)

    def title_for(self, dtype: str) -> str:
        return self.title.format(W=wname(dtype), d=dtype)

    def label(self, dtype: str) -> str:
        """'A01/A02: variance as E[x^2]-E[x]^2 in float32'."""
        return f"{'/'.join(self.pitfall_ids)}: {self.title_for(dtype)}"

    def applies(self, config, training, inputs, state, cotangents, dtype=None) -> bool:
        """Whether the change can make a difference on this call (of a case of ``dtype``)."""
        if self.low_precision and dtype not in (None, "float16", "bfloat16"):
            return False
        if self.dtypes and dtype is not None and dtype not in self.dtypes:
            return False
        return self.when is None or bool(self.when(config, training, inputs, state or {}, cotangents or {}))

    def evaluate(self, inputs, config, state, training, cotangents, dtype, mods=None, params_only=False):
        """What refnorm.evaluate returns (a refnorm.spec.Result), for the variant, on one call whose
        arrays hold case-dtype values (``dtype``: the case dtype, for the precision it emulates).
        ``mods``: in place of the variant's own change (one of ``spread``'s). ``params_only``: a result
        that may hold only the statistics and the parameter gradients (layer_norm and rms_norm variants
        of the engine skip y and dx then, PARAMS_ONLY; every other variant computes everything)."""
        if self.fn is not None:     # (a fn that takes ``mods``: a variant of another op's, run on its translation)
            return self.fn(inputs, dict(config), cotangents or {}, dtype, state or {}, training,
                           **({} if mods is None else {"mods": mods}))
        extra = {"params_only": True} if params_only and self.op in PARAMS_ONLY else {}
        return _OPS[self.op](inputs, dict(config), cotangents or {}, dtype, mods or self.mods, state or {},
                             training, **extra)


def variants(op: str | None = None) -> tuple:
    """Every variant (of ``op``)."""
    out = []
    for name in MODULES:
        if op is None or name == op:
            out += importlib.import_module(f"refnorm.pitfalls.{name}").VARIANTS
    return tuple(out)


ENGINE_OPS = tuple(_OPS)
# engine ops whose variants can compute their statistics and parameter gradients alone (``params_only``):
# the (part, name) arrays such a result holds
PARAMS_ONLY = {"layer_norm": {("outputs", "mean"), ("outputs", "rstd"), ("grads", "weight"), ("grads", "bias")},
               "rms_norm": {("outputs", "rstd"), ("grads", "weight")}}


# the Mods fields that change the parameter gradients alone (dweight, dbias: _engine.param_sum and the terms it
# sums), nothing of the statistics, y or dx
PARAMS_FIELDS = ("dweight_dy", "dweight", "rows_mask")


def reference(op, inputs, config, state, training, cotangents, dtype):
    """The unchanged equations (_engine with Mods(), ops ENGINE_OPS): equal to refnorm.evaluate (tested)."""
    return _OPS[op](inputs, dict(config), cotangents or {}, dtype, Mods(), state or {}, training)
