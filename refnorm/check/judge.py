"""One call judged: the float64 reference recomputed from the arrays the backend was given (``reference``),
the bound of every array under the contract (``derive_bounds``), and every returned array judged within
its bound (``judge_returned``: an ``ArrayResult`` each); ``judge_call`` does the three, on the whole
arrays or in blocks of rows (stream.py). The verdicts, the dtype rule and the errors a returned array
raises: refnorm/check/core.py's docstring. Nothing here imports a framework.

Within the checker, this module knows nothing of the diagnosis: diagnosis.py reads what it produces (and
judges the pitfall variants with it), and core.py runs a case: each step's call judged here, then, on a
failure, the diagnosis (core's one call into diagnosis.py). core.py re-exports these names, where
refnorm.testing and users import them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import registry
from ..golden import commands as golden_commands
from . import bounds as B
from . import contracts as K
from . import stream
from .backends.base import Contract
from .bounds import saved as saved_bounds
from .compare import ArrayAccumulator
from .plain import FRACTION_WEAK, constrained_fraction
from .precision import DIRECTED, NP, RANK, dtype_name, quant_accepts, quant_excess, quant_interval, quant_name, ratio

WORST_SHOWN = 3


@dataclass
class ArrayResult:
    step: int
    part: str            # outputs | grads | state
    name: str
    dtype: str           # dtype the backend returned
    size: int
    ratio: float         # max excess / bound over judged elements (< 1 passes)
    err_u: float         # max |got - ref| / (u_d * max|ref|) over the constrained elements (NaN: none)
    unconstrained: int   # elements whose bound is infinite or >= the array's scale max|ref| (nothing verified there)
    worst: list          # [(index, got, expected, bound)] of the worst elements
    over: int = 0        # elements beyond their bound
    bias: float = 0.0    # the bias test (bias.py): max over groups of |signed error| / allowance (< 1 passes)
    bias_where: str = "" # the group it was worst for ("all", "axis 0 = 3", ...)
    strict_ratio: float | None = None   # under a relaxed contract: the ratio the strict contract would give
    returned_dtype: str = ""            # the dtype the backend returned, when it differs from ``dtype`` (judged)
    scale: float = 0.0                  # max |reference| over its finite elements
    max_bound: float = 0.0              # the largest bound (inf when some element's bound is infinite)
    bias_bound: bool = False            # ``bias`` is an upper bound of the bias test's figure, which passed
                                        # (multiplicities taken as 1: stream.py, "Multiplicities")
    note: str = ""                      # how it was judged, where a contract changes it (bounds/saved.py)

    @property
    def passed(self):
        """Within its bound (ratio <= 1 and the bias test passed): not failed. Not the same as verified."""
        return self.ratio <= 1.0 and self.bias <= 1.0

    @property
    def verdict(self):
        """verified | failed | unconstrained (module docstring)."""
        if not self.passed:
            return "failed"
        return "unconstrained" if self.size and self.unconstrained >= self.size else "verified"

    @property
    def constrained_fraction(self):
        """The fraction of the elements whose bound is below the array's scale max|ref| (or 0): where the
        array verifies something (1 for an empty array; plain.constrained_fraction)."""
        return constrained_fraction(self.unconstrained, self.size)

    @property
    def weak(self):
        """Verified, but fewer than half its elements constrained (plain.FRACTION_WEAK): the report says
        "verified (weakly: 12% constrained)". Not a fifth verdict: the verdict stays "verified"."""
        return self.verdict == "verified" and self.constrained_fraction < FRACTION_WEAK

    @property
    def shown_verdict(self):
        """The verdict as the reports print it: "verified (weakly: 12% constrained)" for a weak one."""
        return f"verified (weakly: {percent(self.constrained_fraction)} constrained)" if self.weak else self.verdict

    @property
    def warning(self):
        """Passes its declared (relaxed) contract but not the strict one: a precision warning."""
        return self.strict_ratio is not None and self.strict_ratio > 1.0

    def to_json(self):
        return {"step": self.step, "part": self.part, "name": self.name, "verdict": self.verdict,
                "dtype": self.dtype, "returned_dtype": self.returned_dtype or self.dtype, "size": self.size,
                "scale": _num(self.scale), "max_bound": _num(self.max_bound), "ratio": _num(self.ratio), "err_u": _num(self.err_u), "unconstrained": self.unconstrained, "over": self.over,
                "constrained_fraction": self.constrained_fraction, "weakly_verified": self.weak,
                "bias": _num(self.bias), "bias_where": self.bias_where, "bias_is_upper_bound": self.bias_bound,
                "strict_ratio": None if self.strict_ratio is None else _num(self.strict_ratio),
                "note": self.note,
                "worst": [{"index": list(i), "got": _num(g), "expected": _num(e), "bound": _num(b)}
                          for i, g, e, b in self.worst]}


def percent(f) -> str:
    """A fraction as a percentage that never rounds to 0% or 100% unless it is exactly that."""
    if f in (0.0, 1.0) or 0.01 <= f <= 0.99:
        return f"{100 * f:.0f}%"
    return f"{100 * f:.2g}%" if f < 0.01 else f"{100 * f:.4g}%"


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


# ------------------------------------------------------------------------------------ one case
def _as_np(name, what, a):
    if isinstance(a, np.generic):          # a NumPy scalar is a 0-d array
        return np.asarray(a)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{what} {name!r} is a {type(a).__name__}, expected a numpy.ndarray "
                        "(arrays cross the backend boundary as NumPy)")
    return a


def _f64(v):
    """``v`` in float64 (integers as they are); a float64 array is used as it is, not copied: the
    reference and the bounds only read their inputs (evaluate hands normalizers read-only views)."""
    v = np.asarray(v)
    return v if v.dtype.kind in "iu" else np.asarray(v, dtype=np.float64)


SINGULAR = {"outputs": "output", "grads": "grad", "state": "state"}


def _judge(step, part, name, got, ref, E, case_dtype, integer=False):
    ref = np.asarray(ref, dtype=np.float64)
    prepared = _prepare(step, part, name, got, ref.shape, case_dtype, integer, ref)
    if isinstance(prepared, ArrayResult):
        return prepared
    got, returned = prepared
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    acc = ArrayAccumulator(got, array_scale(ref), dtype_name(got.dtype))
    acc.add(ref, E, 0)
    return ArrayResult(step, part, name, returned_dtype=returned, **acc.figures())


def _prepare(step, part, name, got, shape, case_dtype, integer=False, ref=None):
    """Check a returned array's shape and dtype: (got in the case dtype, the dtype returned when it
    was rounded to the case dtype, else ""). An integer state array is judged here, exactly (it
    needs ``ref``): its ArrayResult is returned instead. Raises ValueError/TypeError (module docstring)."""
    what = SINGULAR[part]
    if got.shape != tuple(shape):
        raise ValueError(f"step {step}: {what} {name!r} has shape {got.shape}, expected {tuple(shape)}")
    if integer:
        if got.dtype.kind not in "iu":
            raise TypeError(f"step {step}: {what} {name!r} has dtype {got.dtype}, expected an integer dtype")
        bad = got.astype(np.int64) != np.asarray(ref).astype(np.int64)
        worst = [(tuple(int(i) for i in idx), float(got[tuple(idx)]), float(np.asarray(ref)[tuple(idx)]), 0.0)
                 for idx in np.argwhere(bad)[:WORST_SHOWN]]
        return ArrayResult(step, part, name, str(got.dtype), got.size, math.inf if bad.any() else 0.0,
                           math.inf if bad.any() else 0.0, 0, worst, int(bad.sum()))
    dn = dtype_name(got.dtype)
    if dn is None:
        raise TypeError(f"step {step}: {what} {name!r} has dtype {got.dtype}, expected one of "
                        f"{', '.join(NP)}")
    if RANK[dn] < RANK[case_dtype] and part != "state":
        raise TypeError(f"step {step}: {what} {name!r} has dtype {dn}, less precise than the case dtype "
                        f"{case_dtype}")
    returned = ""
    if dn != case_dtype and part != "state":
        # the conversion rule (module docstring): judged as the case dtype, rounded to nearest even
        returned = dn
        with np.errstate(over="ignore"):
            got = got.astype(NP[case_dtype])
    return got, returned


def array_scale(ref) -> float:
    """max |reference| over its finite elements (0 when none): the scale of "unconstrained". Taken a block
    of SCALE_BLOCK elements at a time (a maximum is the same number in any order; no temporaries of the
    array's size)."""
    flat = np.asarray(ref, dtype=np.float64).reshape(-1)
    best = 0.0
    with np.errstate(invalid="ignore"):
        for i in range(0, flat.size, SCALE_BLOCK):
            a = np.abs(flat[i:i + SCALE_BLOCK])
            best = max(best, float(np.max(np.where(np.isfinite(a), a, 0.0), initial=0.0)))
    return best


SCALE_BLOCK = 1 << 18


def _judge_quantized(step, part, name, got, ref, E, qdtype):
    """A quantized output (docs/tolerances.md, "Quantized outputs"): ``got`` must have the quantized dtype
    ``qdtype``; ``ref`` is the exact pre-rounding value, ``E`` its bound. Pass iff the reals that a
    saturating quantizer rounds to ``got`` come within E of ``ref`` (precision.quant_excess): one step
    off only where ``ref`` is within E of a rounding boundary or the saturation point, exact elsewhere.
    No bias test (the rounding steps of a quantized dtype are far coarser than any bias it could see).
    ``err_u``: the worst |got - ref| in half steps of the grid at ``got`` (<= 1 where correctly rounded)."""
    ref = np.asarray(ref, dtype=np.float64)
    what = SINGULAR[part]
    if got.shape != ref.shape:
        raise ValueError(f"step {step}: {what} {name!r} has shape {got.shape}, expected {ref.shape}")
    if not quant_accepts(got.dtype, qdtype):
        raise TypeError(f"step {step}: {what} {name!r} has dtype {got.dtype}, expected the quantized dtype "
                        f"{qdtype} (ml_dtypes' float8/float4 types, numpy int8; 'pow2:...': float32)")
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    ex = quant_excess(got, ref, qdtype)
    finite_E = np.isfinite(E)
    r = np.where(finite_E, ratio(ex, np.where(finite_E, E, 0.0)), 0.0)
    g64 = got.astype(np.float64)
    r = np.where(~finite_E & np.isnan(g64) & ~np.isnan(ref), np.inf, r)
    scale = float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0))
    unconstrained = ~finite_E | ((E > 0) & (E >= scale))
    with np.errstate(all="ignore"):
        # the error in half steps of the quantized grid at the returned value (<= 1: correctly rounded)
        lo, hi = quant_interval(got, qdtype)
        half = np.where(np.isfinite(hi) & np.isfinite(lo), (hi - lo) / 2, np.where(np.isfinite(lo), g64 - lo, hi - g64))
        if qdtype in DIRECTED:              # a power-of-two grid: the step at got (its end intervals are open)
            half = np.where(g64 > 0, g64 / 2, np.inf)
        diff = np.where((g64 == ref) | (np.isnan(g64) & np.isnan(ref)), 0.0, np.abs(g64 - ref) / half)
        dmax = float(np.max(np.where(np.isnan(diff), np.inf, diff)[~unconstrained], initial=0.0))
    err_u = math.nan if (unconstrained.all() and ref.size) else dmax
    worst = []
    flat = np.argsort(-np.where(np.isnan(r), np.inf, r).ravel(), kind="stable")[:WORST_SHOWN]
    for f in flat:
        idx = np.unravel_index(f, r.shape)
        if r[idx] > 0:
            worst.append((tuple(int(i) for i in idx), float(g64[idx]), float(ref[idx]), float(E[idx])))
    return ArrayResult(step, part, name, qdtype, got.size, float(np.max(r, initial=0.0)), err_u,
                       int(unconstrained.sum()), worst, int((r > 1).sum()), scale=scale,
                       max_bound=float(np.max(E, initial=0.0)))


def _exact_bounds(res, cond):
    """Contract "exact" (the reference rounded once): the golden reproducibility bound per array."""
    tol = golden_commands.VERIFY_RTOL * (1 + cond)

    def b(a):
        a = np.asarray(a)
        if a.dtype.kind in "iu":
            return np.zeros(a.shape)
        fin = np.abs(a[np.isfinite(a)])
        return np.full(a.shape, tol * float(np.max(fin, initial=0.0)))
    return {"outputs": {k: b(v) for k, v in res.outputs.items()}, "grads": {k: b(v) for k, v in res.grads.items()},
            "state": {k: b(v) for k, v in res.state.items()}}


# ------------------------------------------------------------ one call (shared with refnorm.testing)
def reference(op, config, training, inputs, cotangents, state):
    """The float64 reference of one call, computed from the (case-dtype) arrays the backend is given.
    The inputs reach ``evaluate`` in their own dtype (it widens them), so a default that depends on the
    input dtype (rms_norm's eps=None) is resolved from it; a caller holding widened arrays resolves the
    config with the case dtype first (``judge_call``)."""
    return registry.evaluate(op, {k: np.asarray(v) for k, v in inputs.items()}, config=dict(config),
                             grad_outputs={k: _f64(v) for k, v in cotangents.items()} or None,
                             state={k: _f64(v) for k, v in state.items()}, training=training)


def derive_bounds(op, case_dtype, config, training, inputs, cotangents, state, ref, contract, cond=0.0):
    """{"outputs"|"grads"|"state": {name: E}}: the bound of every array of one call under ``contract``
    (``bounds.NotBounded`` when none is derived for the op; ``cond`` is used by the exact contract only)."""
    spec = registry.get(op)
    dtypes = {} if spec.output_dtypes is None else dict(spec.output_dtypes(config, case_dtype))
    if contract.kind == "exact":
        E = _exact_bounds(ref, cond)
    else:
        E = B.bounds(op, inputs={k: _f64(v) for k, v in inputs.items()}, config=config, training=training,
                    cotangents={k: _f64(v) for k, v in cotangents.items()},
                    state={k: _f64(v) for k, v in state.items()}, ref_state=ref.state,
                     contract=contract, case_dtype=case_dtype)
    # "dtypes": {(part, name): the dtype it is returned and judged in} where that is not the case dtype
    # (norm_quant's q in its quantized dtype and scale in float32; add_norm's float32 residual_out)
    dtypes = {("outputs", k): t for k, t in dtypes.items() if t != case_dtype}
    dtypes.update(B.array_dtypes(op, config, case_dtype))
    return {**E, "dtypes": dtypes} if dtypes else E


def unknown_names(op, got) -> list:
    """The names in ``got`` ({"outputs"|"grads"|"state": {name: array}}) that ``op`` does not have, each
    with the names it has: a backend that returns "Mean" for "mean" must be told, never ignored."""
    spec = registry.get(op)
    have = {"outputs": spec.outputs, "grads": spec.inputs, "state": spec.state}
    out = []
    for part, d in got.items():
        bad = sorted(k for k in d if k not in have[part])
        if bad:
            out.append(f"{SINGULAR[part]} {', '.join(map(repr, bad))} ({op} has "
                       f"{', '.join(map(repr, have[part])) or 'none'})")
    return out


def judge_returned(step, op, compare, backward, got, ref, E, case_dtype, arrays, unchecked, why=None,
                   optional=None, judge=None, not_computed=None):
    """Judge what a backend returned for one call (``got``: {"outputs"|"grads"|"state": {name: array}})
    against ``ref`` within ``E``, for the names in ``compare`` (same keys). Appends an ``ArrayResult``
    per judged array to ``arrays`` and "step<i>.<part>.<name>" to ``unchecked`` for arrays not returned
    or without a bound (and the reason to the dict ``why``, when given). ``optional``: a list to which
    the statistics outputs (mean, rstd, ...) the backend does not return are appended instead: they
    are optional parts of a backend's result (``Returned``), listed but not unchecked. Raises ValueError
    for a name the op does not have, for a missing differentiable output, gradient (when ``backward``)
    or state, or a misshapen array; TypeError for a wrongly typed one. ``judge``: called instead of
    ``_judge`` for each array (same arguments); what it returns is appended unless None.
    ``not_computed``: the backend's ``Returned.not_computed`` ("grad.NAME"/"output.NAME" -> why): each is
    neither required nor judged but unchecked with that reason (``declared_not_computed``)."""
    spec = registry.get(op)
    judge = judge or _judge
    bad = unknown_names(op, got)
    if bad:
        raise ValueError(f"step {step}: the backend returned unknown name(s): {'; '.join(bad)}")
    why = {} if why is None else why
    declared = declared_not_computed(op, got, not_computed)
    for part in ("outputs", "grads", "state"):
        required = {"outputs": spec.differentiable + spec.returned, "grads": compare["grads"] if backward else (),
                    "state": compare["state"] if spec.state else ()}[part]
        for k in compare[part]:
            key = f"step{step}.{part}.{k}"
            if (part, k) in declared:
                if part == "outputs" and k not in required and optional is not None:
                    optional.append(key)        # a statistic: an optional part of the result anyway
                    continue
                unchecked.append(key)
                why[key] = f"not computed by the backend: {declared[(part, k)]}"
                continue
            if k not in got[part]:
                if k in required:
                    raise ValueError(f"step {step}: the backend returned no {SINGULAR[part]} {k!r}")
                if part == "outputs" and optional is not None:
                    optional.append(key)        # a statistic the backend does not return: not part of its result
                    continue
                unchecked.append(key)
                why[key] = "not returned" + (" (the backend is forward-only)" if part == "grads" else "")
                continue
            a = _as_np(k, SINGULAR[part], got[part][k])
            if k not in E[part]:
                unchecked.append(key)
                why[key] = "no bound is derived for it"
                continue
            dt = E.get("dtypes", {}).get((part, k), case_dtype)
            if dt not in NP:                         # a quantized output (norm_quant's q)
                arrays.append(_judge_quantized(step, part, k, a, getattr(ref, part)[k], E[part][k], dt))
                continue
            res = judge(step, part, k, a, getattr(ref, part)[k], E[part][k], dt,
                        integer=part == "state" and k in spec.integer_state)
            if res is not None:
                arrays.append(res)


def declared_not_computed(op, got, not_computed) -> dict:
    """``Returned.not_computed`` ({"grad.NAME"|"output.NAME": why}) as {(part, name): why}. ValueError
    for a malformed key, a name ``op`` does not have, an empty reason, or an array also returned."""
    have = {"output": ("outputs", registry.get(op).outputs), "grad": ("grads", registry.get(op).inputs)}
    out = {}
    for key, reason in dict(not_computed or {}).items():
        kind, _, name = str(key).partition(".")
        if kind not in have or name not in have[kind][1]:
            raise ValueError(f"the backend declared {key!r} not computed; expected 'grad.NAME' or 'output.NAME' "
                             f"with NAME one of {op}'s inputs ({', '.join(have['grad'][1])}) or outputs "
                             f"({', '.join(have['output'][1])})")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"the backend declared {key!r} not computed with reason {reason!r}; expected a "
                             "non-empty string saying why")
        part = have[kind][0]
        if name in got[part]:
            raise ValueError(f"the backend returned {kind} {name!r} and declared it not computed ({reason})")
        out[(part, name)] = reason
    return out


def judge_call(step, op, case_dtype, config, training, inputs, cotangents, state, got, compare, backward,
               contract, arrays, unchecked, why=None, optional=None, cond=0.0, blocks=True, not_computed=None):
    """Reference, bounds and judgement of one call (what ``check_case`` and ``refnorm.testing`` do per
    step): appends to ``arrays`` / ``unchecked`` as ``judge_returned`` does, and under a relaxed
    contract sets each array's ``strict_ratio``. A large call of a row-wise op is judged in blocks of
    rows with bounded memory (stream.py; ``blocks=False`` never). ``not_computed``: as for
    ``judge_returned``. Under a contract declaring saved statistics (contracts.saved_statistics) the
    gradients are judged at the backend's returned statistics (bounds/saved.py, each array's
    ``note`` says where), and the reference and bounds returned stay those at x's own statistics. ``compare`` may be a function of
    the reference (of the call, or of its first row) that returns the names to judge. Returns
    (reference, bounds, compare) of the whole-array path, or (None, None, compare) in blocks."""
    # the dtype-dependent defaults (rms_norm's eps=None) for the case dtype: the blocks below widen the arrays
    config = registry.resolve_options(op, config, case_dtype)
    relaxed = contract.relaxed
    contracts = [contract] + ([Contract("strict", contract.reduction, contract.acc)] if relaxed else [])
    # a contract beyond the presets: its points' terms are NumPy (bounds/points.py), judged whole
    blocks = blocks and not contract.custom
    p = stream.plan(op, config, training, inputs, state) if blocks and contract.kind != "exact" else None
    if p is not None:
        done = _judge_in_blocks(p, step, op, case_dtype, config, training, inputs, cotangents, state, got, compare,
                                backward, contracts, arrays, unchecked, why, optional, not_computed)
        if done:
            return None, None, done
    ref = reference(op, config, training, inputs, cotangents, state)
    compare = compare(ref) if callable(compare) else compare
    E = derive_bounds(op, case_dtype, config, training, inputs, cotangents, state, ref, contract, cond=cond)
    ref0, E0, saved, notes = ref, E, backward and K.saved_statistics(contract), {}
    E_strict = derive_bounds(op, case_dtype, config, training, inputs, cotangents, state, ref, contracts[1]) \
        if relaxed else None
    if saved:                  # the backward at the backend's own statistics (bounds/saved.py), when they hold
        ref, E, E_strict, note = _at_saved(step, op, case_dtype, config, inputs, cotangents, got, ref, E, contract,
                                           E_strict)
        notes = {("grads", k): note for k in ("x", "weight")}
    first = len(arrays)
    judge_returned(step, op, compare, backward, got, ref, E, case_dtype, arrays, unchecked, why, optional,
                   not_computed=not_computed)
    for a in arrays[first:]:
        a.note = notes.get((a.part, a.name), a.note)
    if relaxed:
        for a in arrays[first:]:
            if a.name in E_strict[a.part] and a.dtype in NP and a.verdict != "unconstrained":
                a.strict_ratio = _judge(step, a.part, a.name, np.asarray(got[a.part][a.name]),
                                        getattr(ref, a.part)[a.name], E_strict[a.part][a.name],
                                        E_strict.get("dtypes", {}).get((a.part, a.name), case_dtype)).ratio
    return ref0, E0, compare


def _at_saved(step, op, case_dtype, config, inputs, cotangents, got, ref, E, contract, E_strict=None):
    """(reference, bounds, strict bounds, note) with the gradients at the backend's returned statistics
    (bounds/saved.py); the strict bounds None without ``E_strict``."""
    grads, bounds, strict, note = saved_bounds.substitute(
        op, contract, inputs=inputs, config=config, cotangents=cotangents, case_dtype=case_dtype, got=got,
        ref=ref, E=E, judge_stat=lambda k, a, r, e: _judge(step, "outputs", k, a, r, e, case_dtype),
        E_strict=E_strict)
    strict = None if E_strict is None else {**E_strict, "grads": strict}
    return dataclasses.replace(ref, grads=grads), {**E, "grads": bounds}, strict, note


def _judge_in_blocks(p, step, op, case_dtype, config, training, inputs, cotangents, state, got, compare, backward,
                     contracts, arrays, unchecked, why, optional, not_computed=None):
    """``judge_call`` in blocks (stream.py): the names compared, or None when some array cannot be cut
    into blocks (nothing is appended then)."""
    # the names, shapes and bounds judged: from the call on the first unit (one row or channel), made as the
    # blocks' stages make it (judge_blocked reuses it); where the compiled pipeline may judge the blocks, its
    # row bounds only seen (dry: the probe needs the calls, this the names), not computed
    first = stream.first_unit(p, op, case_dtype, config, training,
                              {"inputs": inputs, "cotangents": cotangents, "state": state}, contracts, reference,
                              derive_bounds)
    ref1, E1 = first[1], first[2][0]
    compare = compare(ref1) if callable(compare) else compare

    class Shapes:                                   # zero-memory stand-ins with the whole call's shapes
        pass
    shapes = Shapes()
    for part in ("outputs", "grads", "state"):
        d = {}
        for k, a in getattr(ref1, part).items():
            ax = p.axis(part, k)
            if ax is None:
                whole = np.shape(a)
            elif p.kind == "rows":
                whole = np.shape(inputs["x"])[:p.lead] + np.shape(a)[1:]
            else:
                whole = tuple(p.units if i == ax else n for i, n in enumerate(np.shape(a)))
            d[k] = np.broadcast_to(np.asarray(a).dtype.type(0), whole)
        setattr(shapes, part, d)
    prepared, integer_state = {}, []

    def record(step_, part, k, a, ref_stub, E_, case_dtype_, integer=False):
        if integer:                                  # judged exactly at the end, with the real reference
            integer_state.append((k, a))
            return None
        prepared[(part, k)] = _prepare(step_, part, k, a, ref_stub.shape, case_dtype_)
        return None
    n_unc, n_opt = len(unchecked), len(optional) if optional is not None else 0
    judge_returned(step, op, compare, backward, got, shapes, E1, case_dtype, [], unchecked, why, optional,
                   judge=record, not_computed=not_computed)
    judged = {part: tuple(k for q, k in prepared if q == part) + (tuple(k for k, _ in integer_state)
                                                                   if part == "state" else ())
              for part in ("outputs", "grads", "state")}
    mine = {part: {k: prepared[(part, k)][0] for k in judged[part] if (part, k) in prepared}
            for part in ("outputs", "grads", "state")}
    mine["state"].update(dict(integer_state))
    res = stream.judge_blocked(p, op, case_dtype, config, training, inputs, cotangents, state, mine, judged,
                               contracts, reference, derive_bounds, first)
    if res is None:                              # the whole-array path will list them again
        del unchecked[n_unc:]
        if optional is not None:
            del optional[n_opt:]
        return None
    spec = registry.get(op)
    for part in ("outputs", "grads", "state"):
        for k in judged[part]:
            figs = res[(part, k)]
            a, returned = prepared.get((part, k), (mine[part][k], ""))
            if isinstance(figs, tuple):          # ("whole", reference, [bound per contract])
                _, ref_k, Es = figs
                r = _judge(step, part, k, a, ref_k, Es[0], case_dtype, integer=k in spec.integer_state)
                if len(Es) > 1 and r.verdict != "unconstrained" and r.dtype in NP:
                    r.strict_ratio = _judge(step, part, k, a, ref_k, Es[1], case_dtype).ratio
                r.returned_dtype = returned
            else:
                r = ArrayResult(step, part, k, returned_dtype=returned, **figs[0])
                if len(figs) > 1 and r.verdict != "unconstrained":
                    r.strict_ratio = figs[1]["ratio"]
            arrays.append(r)
    return compare
