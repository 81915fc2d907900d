"""Judge a backend on golden cases: run each step, recompute the float64 reference from the very
inputs (and the state the backend itself carried), derive the bound of every array, and apply the
rounding-interval test (precision.excess). Nothing here imports a framework.

Every array of a golden case gets one of four verdicts (``ArrayResult.verdict`` and
``CaseResult.unchecked``; docs/tolerances.md, "Verdicts"):

* ``verified``       judged, every element within its bound, and the bound says something: at least
                     one element's bound is below the array's own scale (max |reference|), or zero;
* ``failed``         some element beyond its bound, or the bias test failed;
* ``unconstrained``  judged and within its bound, but every element's bound is infinite or at least
                     the array's scale: any value of that size would have passed, so nothing is verified;
* ``unchecked``      not judged: the backend did not return it (a forward-only backend's gradients) or
                     no bound is derived for it.

Statistics outputs (mean, rstd, norm, ...) are optional parts of a backend's result (``Returned``): one
it does not return is listed in ``CaseResult.not_returned`` (JSON ``statistics_not_returned``), not
counted as unchecked; one it returns is judged like any array.

Case statuses: ``passed`` every array of the case verified; ``partial`` none failed but some array was
unconstrained or unchecked (never reported as passed: ``Report.verdict`` is "partial", the command
line's exit status 4 unless --accept-partial); ``failed`` some array failed; ``error`` the backend
raised, timed out, or returned a missing, misshapen, unknown or wrongly typed array (the message says
which); ``skipped`` the backend does not support the op/dtype/config, or no tolerance is derived for
the op (the reason says which). A skipped or errored case never counts as passed; a run in which no
case was judged is not a pass either (``Report.ok``).

Dtypes: an output or gradient returned in a more precise floating dtype than the case dtype is rounded
to the case dtype (round to nearest even) and judged as the case dtype, as if the backend had rounded
it itself; the array's ``returned_dtype`` says so. A less precise one is an error. State arrays are
judged in the dtype returned (a backend may keep float32 running statistics for a bfloat16 model).

Multi-step cases: step 0 starts from the golden initial state; step k > 0 from the state the backend
returned at step k-1, so each step is judged on its own (errors do not compound across steps). Step
0's recomputed reference is checked against the golden expected values first (a mismatch means the
golden set and the installed reference disagree: a GoldenError, never a pass).
"""
from __future__ import annotations

import collections
import dataclasses
import difflib
import math
import signal
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .. import registry
from ..errors import RefnormError
from ..golden import commands as golden_commands
from ..golden import layouts
from ..golden.store import GoldenError
from . import bounds as B
from . import diagnosis, masks, stream
from .backends.base import Call, Contract, complete_config
from .compare import ArrayAccumulator
from .precision import NP, RANK, dtype_name, quant_excess, quant_interval, quant_name, ratio

WORST_SHOWN = 3
MAX_ARRAYS = 64     # the bias test's false-alarm budget P_CASE is split over this many arrays per case


class CaseTimeout(Exception):
    pass


@contextmanager
def _time_limit(seconds):
    """SIGALRM-based limit (main thread, POSIX); elsewhere no limit is enforced (documented)."""
    usable = seconds and hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _raise(signum, frame):
        raise CaseTimeout(f"backend did not return within {seconds:g} s (per-case limit, --timeout)")
    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


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
    def warning(self):
        """Passes its declared (relaxed) contract but not the strict one: a precision warning."""
        return self.strict_ratio is not None and self.strict_ratio > 1.0

    def to_json(self):
        return {"step": self.step, "part": self.part, "name": self.name, "verdict": self.verdict,
                "dtype": self.dtype, "returned_dtype": self.returned_dtype or self.dtype, "size": self.size,
                "scale": _num(self.scale), "max_bound": _num(self.max_bound), "ratio": _num(self.ratio), "err_u": _num(self.err_u), "unconstrained": self.unconstrained, "over": self.over,
                "bias": _num(self.bias), "bias_where": self.bias_where, "bias_is_upper_bound": self.bias_bound,
                "strict_ratio": None if self.strict_ratio is None else _num(self.strict_ratio),
                "worst": [{"index": list(i), "got": _num(g), "expected": _num(e), "bound": _num(b)}
                          for i, g, e, b in self.worst]}


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


@dataclass
class CaseResult:
    id: str
    op: str
    dtype: str
    status: str                      # passed | partial | failed | error | skipped | xfail
    message: str = ""
    contract: str = ""
    seconds: float = 0.0
    arrays: list = field(default_factory=list)
    unchecked: list = field(default_factory=list)   # "step<i>.<part>.<name>" of the arrays not judged
    unchecked_why: dict = field(default_factory=dict)   # the same keys -> why (not returned, no bound)
    not_returned: list = field(default_factory=list)    # optional statistics outputs the backend does not return
    expected: str = ""                              # why it is an expected failure (--expect-failures), if listed
    diagnosis: dict | None = None                   # failed cases: the pitfall the backend matches (diagnosis.py)
    layout: str = "contiguous"                      # the memory layout the backend was handed
    recipe: str = ""                                # a generated case: its recipe (refnorm.golden.generate)
    own_masks: list = field(default_factory=list)   # "step<i>.input.<name>": keep-masks the backend drew (masks.py)

    @property
    def worst_ratio(self):
        return max((a.ratio for a in self.arrays), default=0.0)

    @property
    def warnings(self):
        return [a for a in self.arrays if a.warning]

    def verdicts(self) -> dict:
        """{verified, failed, unconstrained, unchecked: count of arrays} of this case."""
        n = {v: 0 for v in VERDICTS}
        for a in self.arrays:
            n[a.verdict] += 1
        n["unchecked"] = len(self.unchecked)
        return n

    def failing_arrays(self) -> list:
        """Sorted "output.y", "grad.x", ... of the arrays that failed (at any step)."""
        return sorted({f"{SINGULAR[a.part]}.{a.name}" for a in self.arrays if a.verdict == "failed"})

    def to_json(self):
        return {"id": self.id, "op": self.op, "dtype": self.dtype, "status": self.status, "message": self.message,
                "layout": self.layout, "recipe": self.recipe, "contract": self.contract, "seconds": round(self.seconds, 4), "worst_ratio": _num(self.worst_ratio),
                "verdicts": self.verdicts(), "unchecked": self.unchecked,
                "unchecked_why": self.unchecked_why, "statistics_not_returned": self.not_returned, "unconstrained": [
                    f"step{a.step}.{a.part}.{a.name}" for a in self.arrays if a.verdict == "unconstrained"],
                "worst_bias": _num(max((a.bias for a in self.arrays), default=0.0)),
                "precision_warnings": [f"step {a.step} {SINGULAR[a.part]} {a.name}: {a.strict_ratio:.3g} x the strict "
                                       "bound" for a in self.warnings],
                "expected": self.expected, "diagnosis": self.diagnosis, "masks_drawn_by_backend": self.own_masks,
                "arrays": [a.to_json() for a in self.arrays]}


VERDICTS = ("verified", "failed", "unconstrained", "unchecked")
JUDGED = ("passed", "partial", "failed", "xfail")      # statuses of cases whose arrays were judged


@dataclass
class Report:
    backend: str
    golden: str
    cases: list = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status):
        return sum(c.status == status for c in self.cases)

    @property
    def ok(self):
        """No case failed or errored, at least one was judged, and every judged case passed (every array
        verified) or failed exactly as its expected-failure entry records."""
        return self.verdict == "ok"

    @property
    def verdict(self):
        """"ok" | "partial" (no failure, but some case left an array unconstrained or unchecked) | "failed"
        (some case failed or errored, or no case was judged at all)."""
        if self.count("failed") or self.count("error") or not sum(self.count(s) for s in JUDGED):
            return "failed"
        return "partial" if self.count("partial") else "ok"

    def array_counts(self) -> dict:
        """Arrays by verdict over the judged cases (expected failures included, skipped/errored cases not)."""
        n = {v: 0 for v in VERDICTS}
        for c in self.cases:
            if c.status in JUDGED:
                for k, v in c.verdicts().items():
                    n[k] += v
        return n

    def summary(self):
        return {"backend": self.backend, "golden": self.golden, "cases": len(self.cases),
                "passed": self.count("passed"), "partial": self.count("partial"), "failed": self.count("failed"),
                "skipped": self.count("skipped"), "errors": self.count("error"),
                "expected_failures": self.count("xfail"), "judged": sum(self.count(s) for s in JUDGED),
                "arrays": self.array_counts(), "seconds": round(self.seconds, 2), "ok": self.ok,
                "verdict": self.verdict}

    def headroom(self) -> list:
        """How tight the check is, per (op, dtype): over the verified arrays of the PASSED and PARTIAL
        cases, the worst error as a fraction of its bound (``worst_ratio``, <= 1) and the headroom
        1 / worst_ratio (how many times larger the worst error could be and still pass; "inf" when every
        error was 0, e.g. a backend returning the correctly rounded reference). Rows with no such case
        are left out."""
        rows = {}
        for c in self.cases:
            if c.status not in ("passed", "partial"):
                continue
            key = (c.op, c.dtype)
            n, w = rows.get(key, (0, 0.0))
            rows[key] = (n + 1, max([w] + [a.ratio for a in c.arrays if a.verdict == "verified"]))
        order = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}
        return [{"op": op, "dtype": dt, "passed": n, "worst_ratio": _num(w), "headroom": _num(1 / w) if w > 0 else "inf"}
                for (op, dt), (n, w) in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9)))]

    def to_json(self):
        return {"summary": self.summary(), "headroom": self.headroom(), "cases": [c.to_json() for c in self.cases]}


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
    """max |reference| over its finite elements (0 when none): the scale of "unconstrained"."""
    ref = np.asarray(ref, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        a = np.abs(ref)
    return float(np.max(np.where(np.isfinite(a), a, 0.0), initial=0.0))


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
    if quant_name(got.dtype) != qdtype:
        raise TypeError(f"step {step}: {what} {name!r} has dtype {got.dtype}, expected the quantized dtype "
                        f"{qdtype} (ml_dtypes' float8 types, numpy int8)")
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    ex = quant_excess(got, ref)
    finite_E = np.isfinite(E)
    r = np.where(finite_E, ratio(ex, np.where(finite_E, E, 0.0)), 0.0)
    g64 = got.astype(np.float64)
    r = np.where(~finite_E & np.isnan(g64) & ~np.isnan(ref), np.inf, r)
    scale = float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0))
    unconstrained = ~finite_E | ((E > 0) & (E >= scale))
    with np.errstate(all="ignore"):
        # the error in half steps of the quantized grid at the returned value (<= 1: correctly rounded)
        lo, hi = quant_interval(got)
        half = np.where(np.isfinite(hi) & np.isfinite(lo), (hi - lo) / 2, np.where(np.isfinite(lo), g64 - lo, hi - g64))
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


def _check_golden_agrees(case, res, step):
    tol = golden_commands.VERIFY_RTOL * (1 + step.cond)
    for part, want in (("outputs", step.outputs), ("grads", step.grads), ("state", step.state)):
        got = getattr(res, part)
        for k, w in want.items():
            g = np.asarray(got[k], dtype=np.float64)
            w = np.asarray(w, dtype=np.float64)
            scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0))
            same_nan = np.array_equal(np.isnan(g), np.isnan(w))
            with np.errstate(invalid="ignore"):
                d = np.abs(np.where(np.isfinite(w), g - w, 0.0))
            if not same_nan or float(np.max(d, initial=0.0)) > tol * scale:
                raise GoldenError(f"{case.id}: the installed reference's {SINGULAR[part]} {k!r} differs from the golden "
                                  "value: the golden set and this refnorm disagree (run `refnorm golden verify`)")


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
                   optional=None, judge=None):
    """Judge what a backend returned for one call (``got``: {"outputs"|"grads"|"state": {name: array}})
    against ``ref`` within ``E``, for the names in ``compare`` (same keys). Appends an ``ArrayResult``
    per judged array to ``arrays`` and "step<i>.<part>.<name>" to ``unchecked`` for arrays not returned
    or without a bound (and the reason to the dict ``why``, when given). ``optional``: a list to which
    the statistics outputs (mean, rstd, ...) the backend does not return are appended instead: they
    are optional parts of a backend's result (``Returned``), listed but not unchecked. Raises ValueError
    for a name the op does not have, for a missing differentiable output, gradient (when ``backward``)
    or state, or a misshapen array; TypeError for a wrongly typed one. ``judge``: called instead of
    ``_judge`` for each array (same arguments); what it returns is appended unless None."""
    spec = registry.get(op)
    judge = judge or _judge
    bad = unknown_names(op, got)
    if bad:
        raise ValueError(f"step {step}: the backend returned unknown name(s): {'; '.join(bad)}")
    why = {} if why is None else why
    for part in ("outputs", "grads", "state"):
        required = {"outputs": spec.differentiable + spec.returned, "grads": compare["grads"] if backward else (),
                    "state": compare["state"] if spec.state else ()}[part]
        for k in compare[part]:
            key = f"step{step}.{part}.{k}"
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


def judge_call(step, op, case_dtype, config, training, inputs, cotangents, state, got, compare, backward,
               contract, arrays, unchecked, why=None, optional=None, cond=0.0, blocks=True):
    """Reference, bounds and judgement of one call (what ``check_case`` and ``refnorm.testing`` do per
    step): appends to ``arrays`` / ``unchecked`` as ``judge_returned`` does, and under a relaxed
    contract sets each array's ``strict_ratio``. A large call of a row-wise op is judged in blocks of
    rows with bounded memory (stream.py; ``blocks=False`` never). ``compare`` may be a function of
    the reference (of the call, or of its first row) that returns the names to judge. Returns
    (reference, bounds, compare) of the whole-array path, or (None, None, compare) in blocks."""
    # the dtype-dependent defaults (rms_norm's eps=None) for the case dtype: the blocks below widen the arrays
    config = registry.resolve_options(op, config, case_dtype)
    relaxed = contract.kind in ("stats_d", "epi_d")
    contracts = [contract] + ([Contract("strict", contract.reduction, contract.acc)] if relaxed else [])
    p = stream.plan(op, config, training, inputs, state) if blocks and contract.kind != "exact" else None
    if p is not None:
        done = _judge_in_blocks(p, step, op, case_dtype, config, training, inputs, cotangents, state, got, compare,
                                backward, contracts, arrays, unchecked, why, optional)
        if done:
            return None, None, done
    ref = reference(op, config, training, inputs, cotangents, state)
    compare = compare(ref) if callable(compare) else compare
    E = derive_bounds(op, case_dtype, config, training, inputs, cotangents, state, ref, contract, cond=cond)
    first = len(arrays)
    judge_returned(step, op, compare, backward, got, ref, E, case_dtype, arrays, unchecked, why, optional)
    if relaxed:
        E_strict = derive_bounds(op, case_dtype, config, training, inputs, cotangents, state, ref, contracts[1])
        for a in arrays[first:]:
            if a.name in E_strict[a.part] and a.dtype in NP and a.verdict != "unconstrained":
                a.strict_ratio = _judge(step, a.part, a.name, np.asarray(got[a.part][a.name]),
                                        getattr(ref, a.part)[a.name], E_strict[a.part][a.name],
                                        E_strict.get("dtypes", {}).get((a.part, a.name), case_dtype)).ratio
    return ref, E, compare


def _judge_in_blocks(p, step, op, case_dtype, config, training, inputs, cotangents, state, got, compare, backward,
                     contracts, arrays, unchecked, why, optional):
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
                   judge=record)
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


def failure_message(arrays) -> str:
    """One line naming the arrays beyond their bound (the first four) and by how much."""
    bad = [a for a in arrays if not a.passed]

    def one(a):
        if a.ratio > 1:
            return f"step {a.step} {SINGULAR[a.part]} {a.name}: {a.ratio:.3g} x bound"
        return (f"step {a.step} {SINGULAR[a.part]} {a.name}: systematic bias {a.bias:.3g} x its allowance "
                f"({a.bias_where})")
    return "; ".join(one(a) for a in bad[:4])


def partial_message(arrays, unchecked, why) -> str:
    """Why a case is partial: how many arrays were verified, and which were not and why."""
    unc = [a for a in arrays if a.verdict == "unconstrained"]
    ver = sum(a.verdict == "verified" for a in arrays)
    total = len(arrays) + len(unchecked)
    parts = [f"{ver} of {total} arrays verified"]
    if unc:
        parts.append("unconstrained (every element's bound is infinite or >= the array's own scale max|ref|, so "
                     "any value of that size would pass): " + ", ".join(
                         f"step {a.step} {SINGULAR[a.part]} {a.name} (bound up to {a.max_bound:.3g}, scale "
                         f"{a.scale:.3g})" for a in unc))
    if unchecked:
        parts.append("unchecked: " + ", ".join(f"{k} ({why.get(k, 'not judged')})" for k in unchecked))
    return "; ".join(parts)


def check_case(backend, case, *, timeout=60.0, diagnose=True, variants=None) -> CaseResult:
    """Judge one golden case. ``diagnose``: on a failure, name the pitfall the backend matches
    (diagnosis.py; never changes the verdict; a passing case costs nothing more). ``variants``: the
    pitfall variants the diagnosis tries (default: the op's; the distributed runner's are bound to a split)."""
    t0 = time.perf_counter()
    layout = getattr(case, "layout", "contiguous")
    out = CaseResult(case.id, case.op, case.dtype, "passed", layout=layout)

    def laid(arrays):                   # private copies, activations and cotangents in the case's layout
        return {k: layouts.apply(layout, v) if np.ndim(v) >= 2 else np.array(v) for k, v in arrays.items()}
    try:
        act = max((v for v in case.steps[0].inputs.values()), key=np.ndim, default=None)
        try:
            layouts.check(layout, np.shape(act), case.id)
        except RefnormError as e:
            out.status, out.message = "skipped", str(e)
            return out
        cfg = complete_config(case.op, case.config)     # every option, defaults filled in (base.py)
        probes = [Call(case.op, case.dtype, dict(cfg), st.training, laid(st.inputs), laid(st.cotangents),
                       {k: np.array(v) for k, v in case.init_state.items()}) for st in case.steps]
        for probe in probes:
            reason = backend.supports(probe)
            if reason:
                out.status, out.message = "skipped", str(reason)
                return out
        contract = backend.contract(probes[0])
        if not isinstance(contract, Contract):
            raise TypeError(f"backend.contract returned {type(contract).__name__}, expected a Contract")
        out.contract = f"{contract.kind}/{contract.reduction}"
        if contract.kind != "exact" and case.op not in B.BOUNDED:
            out.status = "skipped"
            out.message = f"no derived tolerance for {case.op!r} yet (only the exact contract can be judged)"
            return out
        if getattr(case, "expect_error", False):
            return _check_raises(backend, case, probes, out, timeout)
        spec = registry.get(case.op)
        state = dict(case.init_state)
        records = []                                  # per step, for the diagnosis of a failure
        blocked = False                               # some step judged in blocks (stream.py)
        for i, st in enumerate(case.steps):
            # the backend gets private copies: whatever it does to them, the reference below is computed
            # from the golden arrays, and a backend that writes into its inputs is told so. The step's probe
            # made them (laid out; only supports() and contract() saw them, and what those changed counts
            # as changed too): no second copy, and the probe lets go of them
            given = (probes[i].inputs, probes[i].cotangents, {k: np.array(v) for k, v in state.items()})
            probes[i] = None
            call = Call(case.op, case.dtype, dict(cfg), st.training, *given)
            try:
                with _time_limit(timeout):
                    ret = backend.run(call)
            except GoldenError:
                raise
            except NotImplementedError as e:                         # the backend's own "not supported"
                out.status = "skipped"
                out.message = f"backend raised NotImplementedError: {e}".strip()
                out.arrays.clear()
                return out
            except Exception as e:                                   # noqa: BLE001 - the backend's failure
                out.status = "error"
                out.message = f"step {i}: backend raised {type(e).__name__}: {e}".strip()
                out.arrays.clear()
                return out
            for what, mine, orig in zip(("input", "cotangent", "state"), given,
                                        (st.inputs, st.cotangents, state)):
                changed = [k for k in orig if not _unchanged(mine[k], orig[k])]
                if changed:
                    out.status = "error"
                    out.message = f"step {i}: the backend modified its {what} array(s) {changed} in place"
                    out.arrays.clear()
                    return out
            try:
                got = {"outputs": dict(ret.outputs), "grads": dict(ret.grads), "state": dict(ret.state)}
                # keep-masks the backend drew itself (masks.py): checked, then the reference is computed with
                # them in place of the case's (a mask the case does not have is all ones, p = 0: nothing to use)
                drawn = masks.drawn_masks(i, case.op, cfg, st.inputs, getattr(ret, "masks", None) or {})
                drawn = {k: v for k, v in drawn.items() if k in st.inputs}
                if drawn:
                    st = dataclasses.replace(st, inputs={**st.inputs, **drawn})
                    out.own_masks += [f"step{i}.input.{k}" for k in drawn]
                # forward_only (base.py): a backend that declares it computes no gradients, so the golden
                # case's grads are not required: those it does not return are listed as unchecked (never
                # passed); any it does return are judged as usual
                backward = bool(st.cotangents) and getattr(backend, "forward_only", False) is not True
                first = len(out.arrays)
                # a stored case's expected values are compared with the whole reference: never in blocks
                stored = bool(st.outputs or st.grads or st.state)
                ref, E, _ = judge_call(i, case.op, case.dtype, case.config, st.training, st.inputs, st.cotangents,
                                    state, got, st.compare, backward, contract, out.arrays, out.unchecked,
                                    out.unchecked_why, out.not_returned, cond=st.cond, blocks=not stored)
            except (ValueError, TypeError) as e:
                out.status, out.message = "error", str(e)
                return out
            if i == 0 and ref is not None and not drawn:     # the golden values hold for the case's own masks
                _check_golden_agrees(case, ref, st)
            if ref is None:
                blocked = True
                if diagnose and any(not a.passed for a in out.arrays[first:]):
                    rec = _block_record(case, i, st, state, got, contract, out.arrays[first:])
                    if rec is None and np.size(st.inputs["x"]) <= WHOLE_DIAGNOSIS_ELEMENTS:
                        # only a sum over every row failed (a parameter gradient): the whole arrays
                        ref = reference(case.op, case.config, st.training, st.inputs, st.cotangents, state)
                        E = derive_bounds(case.op, case.dtype, case.config, st.training, st.inputs, st.cotangents,
                                          state, ref, contract)
                        rec = diagnosis.StepRecord(
                            i, st.training, st.inputs, st.cotangents, state, got, st.compare, E,
                            tuple((a.part, a.name) for a in out.arrays[first:] if not a.passed), ref)
                    if rec is not None:
                        records.append(rec)
            elif diagnose:
                records.append(diagnosis.StepRecord(
                    i, st.training, st.inputs, st.cotangents, state, got, st.compare, E,
                    tuple((a.part, a.name) for a in out.arrays[first:] if not a.passed), ref))
            if spec.state:
                state = {k: got["state"][k] for k in spec.state if k in got["state"]}
                missing = [k for k in case.init_state if k not in state]
                if missing:
                    out.status, out.message = "error", f"step {i}: the backend returned no state {missing}"
                    return out
        if any(not a.passed for a in out.arrays):
            out.status, out.message = "failed", failure_message(out.arrays)
            if diagnose and blocked and not records:
                out.diagnosis = {"matched": None, "message": "not diagnosed: the case was judged in blocks, only "
                                 "arrays summed over its rows (parameter gradients) failed, and it is too large "
                                 "to diagnose on the whole arrays (judge a smaller case of the same recipe)"}
            elif diagnose:
                try:
                    out.diagnosis = diagnosis.diagnose(case, records, contract, variants)
                except Exception as e:                               # noqa: BLE001 - never a verdict
                    out.diagnosis = {"matched": None, "error": f"{type(e).__name__}: {e}",
                                     "message": f"diagnosis failed: {type(e).__name__}: {e}"}
        elif not out.arrays:
            out.status, out.message = "error", "nothing was judged in this case"
        elif out.unchecked or any(a.verdict == "unconstrained" for a in out.arrays):
            out.status, out.message = "partial", partial_message(out.arrays, out.unchecked, out.unchecked_why)
        if out.own_masks:
            note = f"judged with the backend's own dropout mask(s) {', '.join(out.own_masks)}"
            out.message = f"{note}; {out.message}" if out.message else note
        return out
    except B.NotBounded as e:
        out.status, out.message = "skipped", str(e)
        return out
    except GoldenError:
        raise
    except Exception as e:                                           # noqa: BLE001 - a checker bug: say so
        out.status = "error"
        out.message = f"checker error: {type(e).__name__}: {e} | {traceback.format_exc(limit=3)}"
        return out
    finally:
        out.seconds = time.perf_counter() - t0


DIAGNOSED_UNITS = 32     # rows (channels) of a case judged in blocks that its diagnosis is made on
# a case judged in blocks whose only failing arrays are sums over every row is diagnosed on the whole
# arrays up to this many activation elements (~230 bytes each, only when it failed); beyond, not diagnosed
WHOLE_DIAGNOSIS_ELEMENTS = 1 << 25


def _block_record(case, step, st, state, got, contract, arrays):
    """The diagnosis record of a step judged in blocks (stream.py): the call cut to DIAGNOSED_UNITS of
    its rows (channels): the ones holding the worst elements of the failing arrays, and rows spread
    evenly over the rest. Only the arrays of those rows are compared (a parameter gradient summed over
    every row is left out). A variant is computed row by row, so a variant that explains the failing
    rows is judged on exactly those rows. None when no failing array has rows."""
    p = stream.plan(case.op, case.config, st.training, st.inputs, state)
    if p is None:
        return None
    units, rowwise = set(), False
    for a in arrays:
        ax = p.axis(a.part, a.name)
        if a.passed or ax is None:
            continue
        rowwise = True
        for idx, *_ in a.worst:
            units.add(int(np.ravel_multi_index(idx[:p.lead], np.shape(st.inputs["x"])[:p.lead]))
                      if p.kind == "rows" else int(idx[ax]))
    if not rowwise:
        return None
    spread = np.linspace(0, p.units - 1, max(DIAGNOSED_UNITS - len(units), 2)).astype(np.int64)
    pick = np.unique(np.concatenate([np.fromiter(units, np.int64), spread]))

    def cut(part, name, a):
        ax = p.axis(part, name)
        if ax is None:
            return a
        if p.kind == "rows":
            rows = stream._rows_view(a, p.lead, p.units)
            rows = np.reshape(a, (p.units, -1)) if rows is None else rows
            return rows[pick].reshape((pick.size,) + np.shape(a)[p.lead:])
        return np.take(np.asarray(a), pick, axis=ax)
    ins = {k: cut("inputs", k, v) for k, v in st.inputs.items()}
    cots = {k: cut("cotangents", k, v) for k, v in st.cotangents.items()}
    sub_state = {k: cut("state", k, v) for k, v in state.items()}
    per_unit = {part: tuple(k for k in st.compare[part] if k in got[part] and p.axis(part, k) is not None)
                for part in ("outputs", "grads", "state")}
    sub_got = {part: {k: cut(part, k, got[part][k]) for k in per_unit[part]} for part in per_unit}
    ref = reference(case.op, case.config, st.training, ins, cots, sub_state)
    E = derive_bounds(case.op, case.dtype, case.config, st.training, ins, cots, sub_state, ref, contract)
    judged = []
    judge_returned(step, case.op, per_unit, False, sub_got, ref, E, case.dtype, judged, [])
    failing = tuple((a.part, a.name) for a in judged if not a.passed)
    if not failing:
        return None
    return diagnosis.StepRecord(step, st.training, ins, cots, sub_state, sub_got, per_unit, E, failing, ref)


def _unchanged(mine, orig) -> bool:
    """The backend's private copy ``mine`` still holds ``orig``'s values bit for bit (a copy keeps every
    bit: a NaN's payload, a zero's sign), whatever its layout; compared as unsigned integers of the
    itemsize (an ml_dtypes comparison of 134M bfloat16 values took 1 s, this ~0.1 s). Another dtype or
    shape (an entry the backend replaced) falls back to the values compared."""
    mine, orig = np.asarray(mine), np.asarray(orig)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(orig.itemsize)
    if mine.dtype != orig.dtype or mine.shape != orig.shape or uint is None or orig.dtype.hasobject:
        return np.array_equal(mine, orig, equal_nan=orig.dtype.kind == "f")
    return bool(np.array_equal(mine.view(uint), orig.view(uint)))


def _check_raises(backend, case, probes, out, timeout):
    """An expected-error case (``case.expect_error``): the backend must raise on its first call.
    Raising passes (the message says what it raised); returning fails; NotImplementedError skips."""
    try:
        with _time_limit(timeout):
            backend.run(probes[0])
    except NotImplementedError as e:
        out.status, out.message = "skipped", f"backend raised NotImplementedError: {e}".strip()
        return out
    except CaseTimeout as e:
        out.status, out.message = "error", f"step 0: {e}"
        return out
    except Exception as e:                                           # noqa: BLE001 - what is wanted
        out.status, out.message = "passed", f"raised as required: {type(e).__name__}: {e}".strip()
        return out
    out.status = "failed"
    out.message = (f"the backend returned a result where it must raise (the reference refuses this input: "
                   f"{case.why})")
    return out


PREPARE_AHEAD = 16     # cases loaded and hinted to a backend's ``prepare`` before their turn (run_check)


def _hint(backend, case) -> None:
    """Hand ``backend.prepare`` (optional, base.py) the calls of ``case`` as ``check_case`` will make them
    (the golden initial state in every step: ``prepare`` chains its own bookkeeping). A hint only: an
    exception here is ignored, ``check_case`` makes the same calls and reports what they raise."""
    try:
        cfg = complete_config(case.op, case.config)
        layout = getattr(case, "layout", "contiguous")
        if getattr(case, "expect_error", False):
            return
        calls = [Call(case.op, case.dtype, dict(cfg), st.training,
                      {k: layouts.apply(layout, v) if np.ndim(v) >= 2 else v for k, v in st.inputs.items()},
                      dict(st.cotangents), dict(case.init_state)) for st in case.steps]
        backend.prepare(calls)
    except Exception:                                                # noqa: BLE001 - a hint, never a verdict
        pass


def run_check(backend, golden_dir, *, ops=None, dtypes=None, case_ids=None, timeout=60.0, progress=None,
              diagnose=True, layout="contiguous") -> Report:
    """Judge ``backend`` on the golden set at ``golden_dir`` (optionally some ops/dtypes/case ids);
    ``diagnose``: name the matching pitfall of every failed case (check_case)."""
    t0 = time.perf_counter()
    report = Report(getattr(backend, "name", type(backend).__name__), str(golden_dir))
    from ..golden import store
    manifest = store.read_manifest(golden_dir)
    entries = manifest["cases"]
    if case_ids:
        known = {e["id"] for e in entries}
        unknown = [c for c in case_ids if c not in known]
        if unknown:
            raise GoldenError(f"case(s) {', '.join(map(repr, unknown))} not in {golden_dir}")
        entries = [e for e in entries if e["id"] in set(case_ids)]
    if ops:
        entries = [e for e in entries if e["case"]["op"] in set(ops)]
    if dtypes:
        entries = [e for e in entries if e["case"]["dtype"] in set(dtypes)]
    def load(e):
        case = golden_commands.load_case(golden_dir, e["id"], manifest=manifest)
        return dataclasses.replace(case, layout=layout) if layout != "contiguous" else case

    ahead = collections.deque()               # the next cases, loaded, already hinted to backend.prepare
    for j, e in enumerate(entries):
        if progress:
            progress(j, len(entries), e["id"])
        if getattr(backend, "prepare", None) is None:
            case = load(e)
        else:
            while len(ahead) <= PREPARE_AHEAD and j + len(ahead) < len(entries):
                nxt = load(entries[j + len(ahead)])
                _hint(backend, nxt)
                ahead.append(nxt)
            case = ahead.popleft()
        report.cases.append(check_case(backend, case, timeout=timeout, diagnose=diagnose))
    if progress:
        progress(len(entries), len(entries), "")
    report.seconds = time.perf_counter() - t0
    return report


def too_big(recipe) -> str | None:
    """Why a generated case cannot be judged here (``generate.too_big`` with the bytes per element
    this checker needs for it: fewer when it judges the case in blocks), or None."""
    from ..golden import generate
    return generate.too_big(recipe, stream.bytes_per_element(recipe.case.op) or generate.BYTES_PER_ELEMENT)


def run_generated(backend, recipes, *, ops=None, dtypes=None, timeout=60.0, progress=None, diagnose=True,
                  layout=None, name="generated") -> Report:
    """Judge ``backend`` on generated cases (``refnorm.golden.generate.Recipe``s), each drawn when its
    turn comes (so at most one case's arrays are held); a recipe too big for the memory here is
    skipped, before anything is allocated, with the memory it needs. ``layout``: overrides each
    recipe's layout."""
    from ..golden import generate
    t0 = time.perf_counter()
    report = Report(getattr(backend, "name", type(backend).__name__), name)
    todo = [r for r in recipes if (not ops or r.case.op in set(ops)) and (not dtypes or r.case.dtype in set(dtypes))]
    for j, r in enumerate(todo):
        if layout and layout != r.layout:
            r = generate.with_layout(r, layout)
        if progress:
            progress(j, len(todo), r.id)
        big = too_big(r)
        if big:
            report.cases.append(CaseResult(r.id, r.case.op, r.case.dtype, "skipped", big, layout=r.layout))
            continue
        try:
            case = generate.materialize(r)
        except MemoryError:
            report.cases.append(CaseResult(r.id, r.case.op, r.case.dtype, "skipped",
                                           "out of memory while drawing the inputs", layout=r.layout))
            continue
        except Exception as e:                                       # noqa: BLE001 - a checker bug: say so
            report.cases.append(CaseResult(r.id, r.case.op, r.case.dtype, "error",
                                           f"checker error while drawing the case: {type(e).__name__}: {e}",
                                           layout=r.layout, recipe=r.text))
            continue
        res = check_case(backend, case, timeout=timeout, diagnose=diagnose)
        res.recipe = r.text
        report.cases.append(res)
        del case
    if progress:
        progress(len(todo), len(todo), "")
    report.seconds = time.perf_counter() - t0
    return report


# ----------------------------------------------------------------------- expected failures
@dataclass(frozen=True)
class ExpectedFailure:
    """One line of an expected-failures file: what a listed case must fail with to count as expected.

    ``fails``: the arrays that fail ("output.y", "grad.x", "state.running_var"; any step), exactly;
    ``error``: instead of ``fails``, a text the case's error message must contain;
    ``diagnosis``: the variant the diagnosis must name (``none``: no known pitfall may match), or None
    (not compared); ``reason``: why, in words."""
    fails: frozenset | None
    error: str | None
    diagnosis: str | None
    reason: str

    def describe(self) -> str:
        what = f"error containing {self.error!r}" if self.error is not None else f"fails={','.join(sorted(self.fails))}"
        return what + (f" diagnosis={self.diagnosis}" if self.diagnosis is not None else "")


FIELDS = ("fails", "error", "diagnosis")
EXPECT_FORMAT = ("'CASE-ID fails=ARRAY[,ARRAY...] [diagnosis=VARIANT|none] reason' or 'CASE-ID error=\"TEXT\" "
                 "reason' (ARRAY: output.y, grad.x, state.running_var, ...)")


def read_expected_failures(path) -> dict:
    """Parse an expected-failures file (docs: README, "Expected failures"): one listed case per line,
    ``#`` starts a comment; the fields come first (a value may be quoted), the rest is the reason:

        CASE-ID  fails=output.y,grad.x  [diagnosis=VARIANT|none]  why it fails, in words
        CASE-ID  error="text the error message contains"  why

    Returns {case id: ExpectedFailure}. A line without ``fails=`` or ``error=``, without a reason, with
    a misspelt field name, or a case listed twice is a GoldenError naming the line. The first word that
    is not a field begins the reason (it may itself contain "=")."""
    import re
    field_re = re.compile(r"""([A-Za-z_]\w*)=("([^"]*)"|'([^']*)'|(\S+))(\s+|$)""")
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise GoldenError(f"expected-failures file {path!r}: {e.strerror or e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        cid, _, rest = body.partition(" ")
        rest, fields = rest.strip(), {}
        while (m := field_re.match(rest)):
            key = m.group(1)
            if key not in FIELDS:             # the reason begins here ("eps=1e-12 rounds to 0 ..."), unless
                near = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)    # a misspelt field
                if near:
                    raise GoldenError(f"{path}:{n}: unknown field {key!r} (did you mean {near[0]!r}?); "
                                      f"expected {EXPECT_FORMAT}")
                break
            if key in fields:
                raise GoldenError(f"{path}:{n}: field {key!r} given twice")
            fields[key] = next(g for g in m.group(3, 4, 5) if g is not None)
            rest = rest[m.end():]
        if rest[:1] in ("'", '"'):
            raise GoldenError(f"{path}:{n}: unclosed quote in {rest!r}; expected {EXPECT_FORMAT}")
        words = rest.split()
        if ("fails" in fields) == ("error" in fields):
            raise GoldenError(f"{path}:{n}: {cid!r} must record what fails with exactly one of fails= or error=; "
                              f"expected {EXPECT_FORMAT}")
        fails = None
        if "fails" in fields:
            fails = frozenset(f for f in fields["fails"].split(",") if f)
            bad = sorted(f for f in fails if f.partition(".")[0] not in SINGULAR.values() or not f.partition(".")[2])
            if not fails or bad:
                raise GoldenError(f"{path}:{n}: fails={fields['fails']!r}: expected ARRAY[,ARRAY...] with ARRAY "
                                  "output.NAME, grad.NAME or state.NAME")
        if not words:
            raise GoldenError(f"{path}:{n}: {cid!r} has no reason; expected {EXPECT_FORMAT}")
        if cid in out:
            raise GoldenError(f"{path}:{n}: {cid!r} is listed twice")
        out[cid] = ExpectedFailure(fails, fields.get("error"), fields.get("diagnosis"), " ".join(words))
    return out


def expected_outcome(c: CaseResult, entry: ExpectedFailure, diagnosed=True) -> None:
    """Apply one expected-failure entry to one case result: ``xfail`` when the case fails exactly as
    recorded (the same failing arrays, or an error containing the recorded text, and the recorded
    diagnosis); otherwise ``failed`` with a message saying how it differs (a new failure of a listed
    case is never hidden by the old entry; a listed case that passes means the list is stale).
    ``diagnosed``: False when the run made no diagnosis (the diagnosis field is then not compared)."""
    c.expected = entry.reason
    listed = f"listed as an expected failure ({entry.describe()}: {entry.reason})"
    if c.status in ("skipped",):
        return
    if c.status in ("passed", "partial"):
        c.status, c.message = "failed", f"{listed} but it {c.status}: remove it from the list"
        return
    diff = []
    if entry.error is not None:
        if c.status != "error":
            diff.append(f"it failed instead of raising (fails={','.join(c.failing_arrays())})")
        elif entry.error not in c.message:
            diff.append("its error differs")
    else:
        if c.status == "error":
            diff.append("it errored instead of failing")
        elif frozenset(c.failing_arrays()) != entry.fails:
            diff.append(f"other arrays fail: fails={','.join(c.failing_arrays())}")
        if not diff and entry.diagnosis is not None and diagnosed:
            got = (c.diagnosis or {}).get("matched") or "none"
            if got != entry.diagnosis:
                diff.append(f"the diagnosis names {got}")
    if diff:                                     # the status stays failed / error: counted as such
        c.message = f"{listed}, but {'; '.join(diff)}: {c.message}"
    else:
        c.status, c.message = "xfail", f"expected failure ({entry.reason}): {c.message}"


def apply_expected_failures(report: Report, expected: dict, known_ids, diagnosed=True) -> None:
    """Apply ``expected`` ({case id: ExpectedFailure}) to every listed case of ``report``
    (``expected_outcome``); an id not in the golden set is an error."""
    unknown = [c for c in expected if c not in set(known_ids)]
    if unknown:
        raise GoldenError(f"expected failures name case(s) not in the golden set: {', '.join(unknown)}")
    for c in report.cases:
        if c.id in expected:
            expected_outcome(c, expected[c.id], diagnosed)
