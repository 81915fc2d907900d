"""Diagnosis of a failing case: which known mistake (refnorm.pitfalls) the backend most likely makes.

For a case the check failed, every pitfall variant of the op that applies to one of its calls is
evaluated on each step's inputs, from the state the check itself handed the backend at that step.
The bounds around the variant's values are derived exactly as ``core.check_case`` derives them around
the reference (``derive_bounds`` with the backend's contract; for the stateless ops the bounds depend on
the reference only through its state, so the check's own bounds are reused), and the backend's returned
arrays are judged against them with ``judge_returned``. A variant **matches** when

* every array it can be compared on is within its bound (ratio <= 1 and the bias test passed), and
* it is compared on every array the check found beyond its bound (a variant that has no value for a
  failing array cannot explain it).

A variant whose value is set by the kernel's summation order (the one-pass variance:
``Variant.spread``) is judged within bounds widened by its own rounding interval when it does not fit
within the check's own, and such a widened fit counts only when ONE rounding error per row (the
variance var_r + s_r delta_r, |s_r| <= 1) reproduces every per-row array of that row at once
(consistent.py; cases up to CONSISTENT_MAX elements). A variant computing another computation's equation (``Variant.bounds_as``:
rms_norm as layer_norm, eps outside the root) is judged within that computation's bounds; one whose
change implies a rounding in an autograd backward (``Variant.slack``) within bounds widened by it. A
fit within the check's own bounds ranks before a widened one and is compared with the others by their
ratios within the check's bounds; a bounds_as fit whose bounds hold the reference too (on every
failing array) is vacuous: neither named, nor the closest, nor ruling its mechanism out.

Naming (issue 21): every variant belongs to a mechanism (refnorm/pitfalls/mechanisms.py). The variant
with the smallest worst ratio that fits is named, by its mechanism, only when it fits **clearly**: its
confidence, the smaller of (a) the worst ratio of the best variant of every other mechanism over its
own and (b) over every failing array, the backend's ratio against the reference (within the check's
own bounds) over its ratio against the variant (within the variant's, possibly widened, bounds), is at
least MARGIN (ratios floored at FLOOR). (b) is "better than no pitfall": a variant that fits where the
reference misses by MARGIN x explains the failure, even when only its own rounding interval holds the
backend's result (a one-pass variance on mean-shifted rows: any value in that interval is what the
kernel's summation order gives, and a correct kernel's is far outside). An array failing only by +-inf
is no evidence (an overflow: any variant amplifying there overflows alike, as every deviation of the
backward does on a constant float16 row with eps 1e-12): a failure of such arrays alone is localized (its
first non-finite values), not named. A NaN is an invalid operation (the square root of a negative one-pass
variance, 0 x inf): a variant giving NaN at the same elements is evidence. "Closest, not a match" is shown
only for a variant within CLOSE x its bound, and its mechanism is then not listed as ruled out. Every
failing array is localized (localize.py: the rows / channels / columns carrying the error, its shape,
the first non-finite values; for layer_norm/rms_norm parameter gradients, the rows whose terms are
missing or counted twice), named or not. Fitting variants of the named mechanism are ``indistinguishable``, fitting ones of others
``also_matching``. Otherwise "no known pitfall matches", with the best fit and its confidence, or the
closest variant, never as a match, and the mechanisms ruled out (none of their variants fits).
Large layer_norm/rms_norm cases are screened on a few rows first (``_screen_records``).
The diagnosis never changes a verdict, and a failure inside it is reported
in the diagnosis (``error``), not as a case error.
"""
from __future__ import annotations

import dataclasses
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import _memo, pitfalls, registry
from . import consistent, explain, localize
from .compare import multiplicities
from .judge import derive_bounds, judge_returned, reference
from .precision import gamma, unit

FLOOR = 0.05     # ratios below this are not told apart (a correct kernel's own rounding reaches about this)
SCREEN_MIN = 1 << 18   # elements of x from which a layer_norm/rms_norm case is screened on a few rows first
SCREEN_ROWS = 32
SPECULATE = 2    # survivors judged on the whole case beside the others' remaining arrays (_diagnose)
CLOSE = 4.0      # a variant that does not fit is shown as "closest" only within this many times its bound
TWO_SIDED = 0.8  # lower_precision: at most this share of the failing elements erring to one side (|got| < |ref|,
#                  or got < ref where at least SIDED_MIN fail: 6 of 7 below is a chance of 6%)
SIDED_MIN = 16
MARGIN = 4.0     # "clearly": the named variant fits at least MARGIN x better (floored ratios) than the best
#                  variant of every other mechanism and than no pitfall, on every failing array (tuned on
#                  fold A of the planted rows, measured on fold B: docs/pitfall_detection.md, section 9)


@dataclass
class StepRecord:
    """What the check used and got at one step of a case (kept only while the case is judged)."""
    step: int
    training: bool
    inputs: dict
    cotangents: dict
    state: dict          # the state handed to the backend
    got: dict            # {"outputs"|"grads"|"state": {name: array}} the backend returned
    compare: dict
    E: dict              # the check's bounds (around the reference)
    failing: tuple       # (part, name) of the arrays beyond their bound at this step
    ref: object = None   # the reference's Result at this step (None: recomputed when needed)
    f64: tuple = None    # (inputs, state, cotangents) as float64, converted once for every variant (_args)
    judged: dict = None  # {(part, name): ArrayResult} the check's own judgement of these whole arrays (_as_judged)


def _f64(d):
    return {k: (np.asarray(v) if np.asarray(v).dtype.kind in "iu" else np.asarray(v, dtype=np.float64))
            for k, v in d.items()}


def _args(r):
    """The record's inputs, state and cotangents as float64 (converted on first use, then kept)."""
    if r.f64 is None:
        r.f64 = (_f64(r.inputs), _f64(r.state), _f64(r.cotangents))
    return r.f64


def _num(v):
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else "inf")


def _judge_variant(variant, case, records, contract, only=None):
    """(arrays judged, worst ratio, widened, the bounds used per record) of the backend against
    ``variant``; None when it cannot be compared on some failing array or nothing was compared. A
    variant with a ``spread`` is judged within the check's own bounds first and, only if that fails,
    within the bounds widened by its own rounding interval (``widened`` says which). ``only``: judge
    just these (part, name) arrays (a lower bound of the ratio, for the screening; the failing arrays
    need not be among them). When ``only`` holds statistics and parameter gradients alone, the variant
    is asked for those alone (``Variant.evaluate``'s params_only, pitfalls.PARAMS_ONLY: no y and dx of
    a large case)."""
    spec = registry.get(case.op)
    arrays, wide, used, used_w, in_check = [], [], [], [], []
    # a variant changing the parameter gradients alone, on records judged whole by the check: computed for
    # those alone, the rest being the reference's (by the variant's definition), as the check judged it
    left = only is None and variant.params_change_only and all(r.judged and r.ref is not None for r in records)
    params = left or (only is not None and set(only) <= pitfalls.PARAMS_ONLY.get(case.op, set()))

    def evaluate(r, mods=None):
        inputs, state, cot = _args(r)
        return variant.evaluate(inputs, case.config, state, r.training, cot, case.dtype, mods=mods,
                                params_only=params)
    for r in records:
        res = evaluate(r)
        if left:
            res = type(res)(*({**getattr(r.ref, p), **getattr(res, p)} for p in ("outputs", "grads", "state")))
        # derive_bounds reads its inputs and cotangents in float64 (judge._f64, as _f64 here converts them):
        # handed the record's float64 copies (_args), it converts nothing again and derives the same bounds
        ins64, _, cot64 = _args(r)
        if spec.state or variant.bounds_inputs is not None or variant.bounds_as is not None:
            ins = ins64 if variant.bounds_inputs is None else variant.bounds_inputs(r.inputs)
            bop, bcfg = (None, case.config) if variant.bounds_as is None else variant.bounds_as(case.config,
                                                                                               case.dtype)
            bop = bop or case.op
            E = derive_bounds(bop, case.dtype, bcfg, r.training, ins, cot64, r.state, res, contract)
        else:
            E = r.E
        if variant.bounds_training and not r.training:
            # the variant normalizes this eval call with batch/instance statistics: those parts are bounded
            # as the check bounds them in a training call (without the running-statistics update)
            Et = derive_bounds(case.op, case.dtype, case.config, True, ins64, cot64, {},
                               type(res)(res.outputs, res.grads, {}), contract)
            E = {**E, **{part: {**E[part], **Et[part]} for part in variant.bounds_training}}
        if variant.slack is not None:          # the rounding the variant's own change implies (Variant.slack)
            E = _widened(E, res, [evaluate(r, m) for m in variant.slack(case.dtype)])
        compare = {part: [k for k in r.compare[part] if k in getattr(res, part) and k in r.got[part]
                          and k in E[part]] for part in ("outputs", "grads", "state")}
        if only is not None:
            compare = {part: [k for k in names if (part, k) in only] for part, names in compare.items()}
        elif any(name not in compare[part] for part, name in r.failing):
            return None
        taken = _as_judged(r, res, compare) if E is r.E else {}
        new = []
        judge_returned(r.step, case.op, {p: [k for k in ns if (p, k) not in taken] for p, ns in compare.items()},
                       False, r.got, res, E, case.dtype, new, [])
        new = {(a.part, a.name): a for a in new}
        arrays += [taken.get(key) or new[key] for key in ((p, k) for p, ns in compare.items() for k in ns)
                   if key in taken or key in new]
        if variant.bounds_as is not None:       # also within the check's own bounds (compared with the others)
            own = {part: [k for k in names if k in r.E.get(part, {})] for part, names in compare.items()}
            judge_returned(r.step, case.op, own, False, r.got, res, r.E, case.dtype, in_check, [])
        used.append((r, res, E, compare))
    # the spread is a forward variance's rounding error: where the forward's arrays (outputs, running
    # statistics) all pass, it explains a failing dx only (consistent.py), never a parameter gradient
    forward_fails = any(p != "grads" for r in records for p, _ in r.failing)
    dx_only = all((p, n) == ("grads", "x") for r in records for p, n in r.failing)
    widened = variant.spread is not None and not all(a.passed for a in arrays) and \
        (forward_fails or dx_only or only is not None)
    if widened:                                 # only now: the spread costs two more evaluations per step
        # the spread of every summation order: the serial one's gamma bounds them all (a kernel's
        # running sums, as torch CPU's channels_last GroupNorm keeps, are serial)
        gfun = lambda n: gamma(n, "serial")     # noqa: E731
        for r, res, E, compare in used:
            Ew = _widened(E, res, [evaluate(r, m) for m in variant.spread(gfun)])
            judge_returned(r.step, case.op, compare, False, r.got, res, Ew, case.dtype, wide, [])
            used_w.append(Ew)
        if all(a.passed for a in wide) and not all(_one_s_per_row(case, r, E, compare, evaluate, variant, gfun,
                                                                  with_dx=not forward_fails)
                                                   for r, res, E, compare in used):
            widened, wide, used_w = False, [], []      # no single rounding error per row: not this variant
    if not arrays:
        return None
    use = wide if widened else arrays
    for a in use + arrays:
        if math.isnan(a.ratio):                             # NaN where a number was due: as bad as it gets
            a.ratio = math.inf
    for a in in_check:
        if math.isnan(a.ratio):
            a.ratio = math.inf
    # within the check's own bounds (= worst unless widened or judged within another computation's bounds)
    tight = max(max(a.ratio, a.bias) for a in (in_check or arrays))
    return use, max(max(a.ratio, a.bias) for a in use), widened, used_w if widened else [u[2] for u in used], tight


TAKEN = 2.0 ** -30   # _as_judged: a variant's array within this share of the bound of the reference's values


def _as_judged(r, res, compare):
    """{(part, name): the check's own ArrayResult (a copy)} for the arrays in ``compare`` that the variant
    computes as the reference does: within TAKEN x the check's bound of the reference's values everywhere
    (the variants' own summation orders move an untouched array by float64 rounding only). Judged within
    the same bounds, such an array's figures are the check's to within TAKEN (its ratio) and TAKEN x the
    bias test's sum of bounds over its allowance; the check judged it already, so it is not judged again
    (a large array's judgement costs more than the variant's evaluation). Empty when the record carries
    no judgement of its own (a screened record). The check's figures of a case judged in blocks are its
    blocks' (within 1e-7 relative of the whole array's: tests/test_stream.py)."""
    if not r.judged or r.ref is None:
        return {}
    out = {}
    for part, names in compare.items():
        for k in names:
            a, want, E = r.judged.get((part, k)), getattr(r.ref, part).get(k), r.E.get(part, {}).get(k)
            mine = getattr(res, part).get(k)
            if a is None or a.note or want is None or E is None or mine is None or np.shape(mine) != np.shape(want):
                continue            # (a note: judged otherwise, at the backend's saved statistics: bounds/saved.py)
            mine, want = np.asarray(mine, dtype=np.float64), np.asarray(want, dtype=np.float64)
            with np.errstate(all="ignore"):
                same = (mine == want) | (np.abs(mine - want) <= TAKEN * np.asarray(E))
            if same.all():
                out[(part, k)] = dataclasses.replace(a)
    return out


CONSISTENT_MAX = 1 << 20    # elements of x up to which a widened fit is tested for one error per row


def _one_s_per_row(case, r, E, compare, evaluate, variant, gfun, with_dx=False):
    """Whether one rounding error per row (consistent.py) reproduces every per-row array of the step
    within CLOSE x the variant's bounds (dx among them when ``with_dx``); cases above CONSISTENT_MAX
    elements are not tested (True)."""
    x = r.inputs.get("x")
    if x is None or np.size(x) > CONSISTENT_MAX:
        return True
    alts = [evaluate(r, m) for m in variant.spread(gfun, signs=consistent.grid())]
    arrays = []
    for part in ("outputs", "grads", "state"):
        for name in compare[part]:
            vals = [getattr(a, part).get(name) for a in alts]
            if any(v is None or np.shape(v) != np.shape(r.got[part][name]) for v in vals):
                continue
            if part == "grads" and (name != "x" or not with_dx):
                continue
            arrays.append(("dx" if part == "grads" else name, r.got[part][name], E[part][name],
                           np.stack([np.asarray(v, dtype=np.float64) for v in vals])))
    return consistent.one_s_per_row(case, np.shape(x), arrays)


def _widened(E, res, alternatives):
    """The bounds E plus, per element, how far the variant's results move between the ends of its own
    rounding interval (``Variant.spread``): max |alt - res| over the alternatives, where both are numbers
    (an alternative that is NaN or infinite widens nothing: the match is never made easier by it)."""
    out = {}
    for part, bounds in E.items():
        out[part] = dict(bounds)
        for name, e in bounds.items():
            ref = getattr(res, part, {}).get(name)
            if ref is None:
                continue
            ref = np.asarray(ref, dtype=np.float64)
            extra = np.zeros(ref.shape)
            for alt in alternatives:
                a = getattr(alt, part, {}).get(name)
                if a is None or np.shape(a) != ref.shape:
                    continue
                with np.errstate(all="ignore"):
                    d = np.abs(np.asarray(a, dtype=np.float64) - ref)
                extra = np.maximum(extra, np.where(np.isfinite(d), d, 0.0))
            out[part][name] = np.asarray(e, dtype=np.float64) + extra
    return out


def _entry(v, dtype, worst=None):
    e = {"variant": v.id, "pitfalls": list(v.pitfall_ids), "title": v.title_for(dtype), "mechanism": v.mechanism}
    if worst is not None:
        e["worst_ratio"] = _num(worst)
    return e


def _fl(r):
    """A ratio floored at FLOOR (NaN: infinite): fits below FLOOR are not told apart."""
    return math.inf if r != r else max(float(r), FLOOR)


def _vs_unknown(case, records, contract, arrays, variant):
    """How much better the variant explains each failing array than "unknown" (the reference) does: the
    smallest, over the failing arrays, of ratio(backend vs reference, within the check's own bounds) /
    ratio(backend vs variant, within the variant's bounds, widened where the variant was), each floored
    at FLOOR. A variant that fits where the reference misses by 4x explains the failure, even when
    only its own rounding interval (its summation order's spread) holds the backend's result."""
    mine = {(a.step, a.part, a.name): _fl(max(a.ratio, a.bias)) for a in arrays}
    worst, only_nonfinite = math.inf, True
    own = variant["v"].bounds_as is not None and variant.get("bounds") and len(variant["bounds"]) == len(records)
    for i, r in enumerate(records):
        if not r.failing:
            continue
        ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                         r.state)
        compare = {part: [n for p, n in r.failing if p == part] for part in ("outputs", "grads", "state")}
        judged = []
        judge_returned(r.step, case.op, compare, False, r.got, ref, r.E, case.dtype, judged, [])
        if own:
            # a variant judged within another computation's bounds (Variant.bounds_as): the reference is also
            # judged within those, and the better of its two ratios counts (bounds so wide that the reference
            # fits them too, as layer_norm's on a constant row, are no evidence for the variant)
            alt = []
            judge_returned(r.step, case.op, compare, False, r.got, ref, variant["bounds"][i], case.dtype, alt, [])
            for a, b in zip(judged, alt):
                if (a.part, a.name) == (b.part, b.name) and max(b.ratio, b.bias) < max(a.ratio, a.bias):
                    a.ratio, a.bias = b.ratio, b.bias
        finite = explain.finite_failures(r, ref)
        for a in judged:
            if (a.part, a.name) in finite:
                only_nonfinite = False
                worst = min(worst, _fl(max(a.ratio, a.bias)) / mine.get((a.step, a.part, a.name), math.inf))
    # an array failing only by +-inf is reproduced by any variant that overflows there (on a constant float16
    # row with eps 1e-12 every deviation of the backward does): no evidence for one
    return 1.0 if only_nonfinite else worst


def _only_nonfinite(case, records):
    """Whether every failing array of every step fails only by non-finite values."""
    for r in records:
        if r.failing:
            ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                             r.state)
            if explain.finite_failures(r, ref):
                return False
    return True


def _reference_fits(case, records, s):
    """Whether the reference itself lies within the bounds the scored variant ``s`` was judged in, on every
    failing array of every step (those bounds then tell the variant from no pitfall nowhere)."""
    if not s.get("bounds") or len(s["bounds"]) != len(records):
        return False
    for r, E in zip(records, s["bounds"]):
        if not r.failing:
            continue
        ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                         r.state)
        compare = {part: [n for p, n in r.failing if p == part] for part in ("outputs", "grads", "state")}
        if any(n not in E.get(part, {}) for part, n in r.failing):
            return False
        judged = []
        with np.errstate(all="ignore"):
            judge_returned(r.step, case.op, compare, False, r.got, ref, E, case.dtype, judged, [])
        if not all(a.passed for a in judged):
            return False
    return True


def _try(v, case, records, contract, only=None):
    try:
        with np.errstate(all="ignore"):
            return _judge_variant(v, case, records, contract, only)
    except Exception:                                       # noqa: BLE001 - a variant that cannot run
        return None


def _count_ahead(records):
    """compare.multiplicities of every large array the backend returned (within the diagnosis's memo scope:
    computed once, for whichever judgement asks first); a failure here is left to that judgement. Where the
    record carries the check's own judgement, only the failing arrays: a variant that fits changes those, and
    an array it leaves as the reference computes it is taken as the check judged it (_as_judged)."""
    try:
        for r in records:
            for part in ("outputs", "grads"):
                for name in (r.compare.get(part, ()) if not r.judged else [n for p, n in r.failing if p == part]):
                    g = r.got.get(part, {}).get(name)
                    if isinstance(g, np.ndarray) and g.size >= SCREEN_MIN:
                        multiplicities(g)
    except Exception:                                       # noqa: BLE001 - only a head start
        pass


def _slow(v):
    """Whether judging ``v`` takes more than its evaluation with the reference's statistics (its own
    statistics or mean of squares, or bounds derived for another computation): the survivors' order only."""
    return v.mods.stats is not None or v.mods.ms is not None or v.bounds_as is not None or v.fn is not None


def _screen_records(case, records):
    """For a large layer_norm or rms_norm case, the records cut to SCREEN_ROWS rows (half the rows where
    the failing arrays exceed their bound most, half evenly spread), with y, the statistics and dx only.
    A variant that does not fit these rows cannot fit the case (its rows are computed row by row, and
    the bound of an element is the case's), so it is ruled out on them, with the ratio it reaches there
    (a lower bound of its ratio on the whole case); only the rest is judged on the whole case. None
    when the case is small or of another op."""
    if case.op not in ("layer_norm", "rms_norm"):
        return None
    x = np.asarray(records[0].inputs["x"])
    ns = case.config["normalized_shape"]
    k = 1 if np.ndim(ns) == 0 else len(ns)
    lead = x.shape[:x.ndim - k]
    m = int(np.prod(lead, dtype=np.int64))
    if x.size < SCREEN_MIN or m <= SCREEN_ROWS:
        return None
    out = []
    for r in records:
        ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                         r.state)
        worst = np.zeros(m)
        for part, name in r.failing:
            g, e = r.got[part].get(name), r.E[part].get(name)
            want = getattr(ref, part).get(name)
            if g is None or e is None or want is None or np.shape(want)[:len(lead)] != lead:
                continue
            d = np.abs(np.asarray(g, dtype=np.float64) - want) / np.broadcast_to(e, np.shape(want))
            worst = np.maximum(worst, np.nan_to_num(d, nan=np.inf).reshape(m, -1).max(axis=1))
        rows = np.unique(np.concatenate([np.argsort(-worst, kind="stable")[:SCREEN_ROWS // 2],
                                         np.linspace(0, m - 1, SCREEN_ROWS // 2).astype(np.int64)]))

        def take(a, full=None):
            a = np.asarray(a)
            a = np.broadcast_to(a, full) if full is not None else a
            return a.reshape(m, -1)[rows].reshape((len(rows),) + a.shape[len(lead):])
        rowwise = lambda a: np.ndim(a) >= len(lead) and np.shape(a)[:len(lead)] == lead   # noqa: E731
        outs = {n: take(v) for n, v in ref.outputs.items() if rowwise(v)}
        grads = {"x": take(ref.grads["x"])} if "x" in ref.grads else {}
        got = {"outputs": {n: take(v) for n, v in r.got["outputs"].items() if n in outs and rowwise(v)},
               "grads": {"x": take(r.got["grads"]["x"])} if "x" in grads and "x" in r.got["grads"] else {},
               "state": {}}
        compare = {"outputs": [n for n in r.compare["outputs"] if n in got["outputs"] and n in r.E["outputs"]],
                   "grads": [n for n in r.compare["grads"] if n in got["grads"] and n in r.E["grads"]],
                   "state": []}
        E = {"outputs": {n: take(r.E["outputs"][n], np.shape(ref.outputs[n])) for n in compare["outputs"]},
             "grads": {n: take(r.E["grads"][n], np.shape(ref.grads[n])) for n in compare["grads"]}, "state": {}}
        inputs = {n: (take(v) if n == "x" else v) for n, v in r.inputs.items()}
        cot = {n: take(v) for n, v in r.cotangents.items()}
        out.append(StepRecord(r.step, r.training, inputs, cot, {}, got, compare, E, (),
                              type(ref)(outs, grads, {})))
    return out


def diagnose(case, records, contract, variants=None) -> dict:
    """The diagnosis of one failing case (see the module docstring), as a JSON-able dict. ``variants``:
    the candidates (default: every variant of the op, ``pitfalls.variants``). The bias test's counts of
    the backend's arrays, and the terms the variants share, are computed once for all the variants
    (``refnorm._memo``)."""
    with _memo.scope():
        out = _diagnose(case, records, contract, variants)
    if not out.get("matched") or out.get("widened"):
        try:
            with np.errstate(all="ignore"):
                _explain(case, records, out, contract)
        except Exception as e:                               # noqa: BLE001 - the search failing costs no localization
            out["explain_error"] = f"{type(e).__name__}: {e}"
    with np.errstate(all="ignore"):
        out["where"] = where(case, records)
    first = localize.first_nonfinite(out["where"])
    if first:
        out["first_nonfinite"] = first
    lines = [d["text"] for d in out["where"]]
    if lines:
        out["message"] = out["message"] + "; where: " + " | ".join(([first] if first else []) + lines)
    return out


def _explain(case, records, out, contract=None):
    """No catalogue variant named: search the specification's arithmetic (explain.py). The failure is
    named by the explanations' mechanism when they explain every failing array of every step, or every
    failing output (the gradients and state that fail are computed from the outputs' values), and agree
    on one mechanism; otherwise what they explain is reported, unnamed. Where nothing is explained, a
    lower precision than the declared ``contract`` (``lower_precision``)."""
    found, failing, misses = [], 0, 0.0
    refs = {}
    # the bound of a deviation's arithmetic, derived at its own point under the check's contract
    bounds = None if contract is None else (lambda cfg, training, inputs, cot, state, res: derive_bounds(
        case.op, case.dtype, cfg, training, inputs, cot, state, res, contract))
    for r in records:
        if not r.failing:
            continue
        failing += len(r.failing)
        ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                         r.state)
        refs[r.step] = ref
        found += explain.explain(case, r, ref, reference, bounds)
    if not found and contract is not None and not out.get("matched"):
        found = lower_precision(case, [r for r in records if r.failing], refs, contract)
    with np.errstate(all="ignore"):
        for r in records:
            for e in (e for e in found if e["step"] == r.step):
                got, want, E = r.got[e["part"]].get(e["name"]), getattr(refs[r.step], e["part"]).get(e["name"]), \
                    r.E[e["part"]].get(e["name"])
                misses = max(misses, explain.fit_ratio(got, want, E))
    if not found:
        return
    mechs = {e["mechanism"] for e in found}
    texts = list(dict.fromkeys(e["text"] for e in found))
    # named only where the reference misses clearly (MARGIN x its bound on some explained array) and the
    # explanation fits within the bound: a failure barely beyond the bound is fitted by many small deviations
    clear = misses >= MARGIN
    full = clear and len(found) == failing and len(mechs) == 1
    # the forward's failure explained: the failing gradients and state are computed from its values (the
    # root cause is the first wrong computation), so one mechanism explaining every failing output names it
    outs = {(e["step"], e["name"]) for e in found if e["part"] == "outputs"}
    failing_outs = {(r.step, n) for r in records for p, n in r.failing if p == "outputs"}
    downstream = clear and not full and len(mechs) == 1 and failing_outs and outs == failing_outs
    if downstream:
        texts.append("the failing gradients and state follow from the forward's values")
        full = True
    if out.get("matched"):
        # the named variant fits only within its summation order's spread: an explanation of another
        # mechanism that reproduces the result within the check's own bounds is the better answer (named
        # where the reference misses clearly, else the spread's name withdrawn: neither is evidence enough); a
        # partial one, or one of the same mechanism, leaves the name as it is
        loose = (len(mechs) == 1 and None not in mechs          # (an unnamed change, a NaN for a NaN, is no rival)
                 and (len(found) == failing or bool(failing_outs) and outs == failing_outs))
        if not (full or loose) or next(iter(mechs)) == out["mechanism"]:
            return
        out.update(matched=None, pitfalls=[], title=None, instance=None, indistinguishable=[], also_matching=[],
                   closest=_closest_of(out), widened=False, confidence=None, mechanism=None)
        out["message"] = "no known pitfall matches (its best fit holds only within its own rounding interval)"
    out["explained"] = found
    if full:
        mech = by_where(case.op, {(p, n) for r in records for p, n in r.failing}, next(iter(mechs)),
                        equation=all(e.get("equation") for e in found))
        mechs = {mech}
        if mech == "backward" and _whole_factor(case, records, refs):
            mech = "constant"        # every failing array off by one factor: rule 14 before rule 15
    if full and mechs == {None}:
        # explained, by a mistake no mechanism of the list is (two returned arrays in each other's place)
        out["message"] = ("explained by the arithmetic (a mistake no mechanism of refnorm's list names): "
                          + "; ".join(texts) + "; no catalogue pitfall fits")
    elif full:
        from ..pitfalls.mechanisms import ARITHMETIC, MECHANISMS
        out.update(mechanism=mech, explained_by="arithmetic")
        out["ruled_out"] = [m for m in out["ruled_out"] if m != mech]
        out["message"] = (f"explained by the arithmetic [mechanism: {({**MECHANISMS, **ARITHMETIC})[mech]}]: "
                          + "; ".join(texts) + "; no catalogue pitfall fits (ruled out: "
                          + (", ".join(out["ruled_out"]) or "-") + ")")
    elif not clear:
        out["message"] += (f"; consistent with the arithmetic (the reference misses by only {misses:.2g}x its bound, "
                           f"under the {MARGIN:g}x that names an explanation): " + "; ".join(texts))
    else:
        out["message"] += "; partly explained by the arithmetic: " + "; ".join(texts)


def _lower(case_dtype):
    """The lower precisions tried for a case of ``case_dtype``: (what, contract), loosest last."""
    from .backends.base import Contract
    if case_dtype == "float64":
        return [("float32 arithmetic (its reductions and intermediates in float32)", Contract(acc="float32"))]
    if case_dtype in ("float16", "bfloat16"):
        return [(f"the saved statistics and the parameter gradients' partial sums held in {case_dtype}",
                 Contract(kind="stats_d")),
                (f"the statistics and every pointwise intermediate (x_hat, the affine product, the backward's "
                 f"terms) rounded to {case_dtype}", Contract(kind="epi_d"))]
    return []


# the lower contract's bound, relative to the expected value, beyond which (at the median failing element) it
# constrains too little to name a precision: a 16-bit mean stored for rows of mean 1e3 and std 1 (its rounding
# error up to 0.25) lets x_hat, and every gradient from it, move by a good part of their own size
LOOSE = 0.5


def lower_precision(case, records, refs, contract) -> list:
    """A kernel computing in a lower precision than its declared ``contract`` (mechanism "precision"): every
    failing array of every step within the bounds ``derive_bounds`` gives the case under a lower-precision
    contract (``_lower``: float32 arithmetic for a float64 case; the saved statistics, or every intermediate,
    in the 16-bit case dtype) and those bounds narrower than LOOSE times the expected values (the median failing
    element's), its error noise-like (no per-row model of localize.error_shape fits: a
    changed formula errs smoothly) and two-sided (at most TWO_SIDED of the failing elements smaller in
    magnitude than expected, or larger: a truncation errs to one side, rule 8's rounding; nor below expected,
    or above: a rounding down or up); never where a
    returned statistic fails (mean, rstd: a statistic's own deviation, the one-pass variance's cancellation,
    errs like noise in the activations it scales), nor a quantized array or one returned in another dtype,
    nor beside a catalogue match. Explanations of every failing
    array, or []."""
    if any(np.size(r.inputs.get("x", 0.0)) > explain.CONFIG_SIZE for r in records):
        return []           # (a bound derivation more: the diagnosis of a large case stays within 2x its judgement)
    if any(p == "outputs" and n in localize.STATISTICS and case.dtype != "float64"
           or r.E.get("dtypes", {}).get((p, n)) is not None
           or np.asarray(r.got[p].get(n, 0.0)).dtype.itemsize == 1 for r in records for p, n in r.failing):
        return []           # (nor a quantized array: its errors are steps of its codes; a float64 case's statistics
        #                     within float32's bounds are float32 arithmetic: its one-pass cancellation is orders
        #                     of magnitude smaller, and searched before)
    for what, lower in _lower(case.dtype):
        if (lower.kind, lower.acc) == (contract.kind, contract.acc) or getattr(contract, "custom", False):
            continue
        out = []
        for r in records:
            ref = refs[r.step]
            try:
                E2 = derive_bounds(case.op, case.dtype, case.config, r.training, r.inputs, r.cotangents, r.state,
                                   ref, lower)
            except Exception:                           # noqa: BLE001 - no bound derived for that contract
                return []
            x_shape, axes = _x_axes(case, r.inputs.get("x", next(iter(r.inputs.values()), None)))
            for part, name in r.failing:
                got, want, E, Ec = (r.got[part].get(name), getattr(ref, part).get(name), r.E[part].get(name),
                                    E2.get(part, {}).get(name))
                if got is None or want is None or Ec is None or np.shape(got) != np.shape(want) \
                        or explain.fit_ratio(got, want, Ec) > 1:
                    break
                bad = localize.failing_mask(got, want, E)
                g, w = np.asarray(got, dtype=np.float64)[bad], np.asarray(want, dtype=np.float64)[bad]
                if w.size and np.median(np.asarray(Ec, dtype=np.float64)[bad] / np.maximum(np.abs(w), 1e-300)) > LOOSE:
                    break           # a bound as wide as the values admits a changed formula: it names nothing
                names = localize.axis_names(np.shape(want), x_shape, axes)
                rows = {i for i, nm in enumerate(names) if nm in ("row", "sample", "channel")}
                # (one-sided in magnitude, toward zero; or in sign, down or up: a directed rounding's, a mode)
                small = float(np.mean(np.abs(g) < np.abs(w))) if g.size >= SIDED_MIN else 0.5   # (a few by
                below = float(np.mean(g < w)) if g.size >= SIDED_MIN else 0.5     # chance: any; three channels' rstd)
                # (a float64 case within float32's bounds: a float32 sum errs per row, smoothly; a changed
                # formula errs far beyond float32's rounding)
                smooth = case.dtype != "float64" and localize.error_shape(got, want, bad, rows)
                if smooth or not 1 - TWO_SIDED <= small <= TWO_SIDED or not 1 - TWO_SIDED <= below <= TWO_SIDED:
                    break
                out.append({"part": part, "name": name, "step": r.step, "mechanism": "precision",
                            "text": f"{explain._label(part, name)} is within the bounds of a kernel with {what} "
                                    f"(contract {lower.describe()}), its error noise-like and two-sided"})
            else:
                continue
            break
        else:
            return out
    return []


# the gate input's gradient of each gated op (docs/verdicts.md, "Which mechanism a bug is", rule 3)
_GATE_GRADS = {"gated_norm": ("grads", "z")}
# what rules 2, 3 and 16 leave to the mechanism the explanation found
_KEEP_STATE = {"bessel", "running", "mode", "merge", "collective"}


def by_where(op, failing, mech, equation=False):
    """The mechanism an explanation of mechanism ``mech`` names, by where the failure is (docs/verdicts.md,
    "Which mechanism a bug is"): running when only running state fails (the Bessel factor, the mode and the
    cross-rank merge excepted: rule 2; an explanation naming no mechanism as well, what is stored); gate when
    only the gate input's gradient fails (rule 3); backward
    where another normalizer's equation or a flag read the other way changes the gradients alone (the
    forward right: rule 15 before 16; not where the explanation is the other equation's forward and backward
    alike, ``equation``, its forward within the bounds of these data: the L1 variant on nearly constant rows);
    None where only returned statistics fail, holding the running ones (an array returned for another, y right:
    no mechanism). ``failing``: the (part, name) of every failing array."""
    parts = {p for p, _ in failing}
    if parts == {"state"} and mech not in _KEEP_STATE:
        return "running"            # (an explanation naming no mechanism too: running buffers' stores exchanged)
    if mech is None:
        return None
    if op in _GATE_GRADS and failing == {_GATE_GRADS[op]} and mech != "bessel":
        return "gate"
    if mech == "semantics" and parts == {"grads"} and not equation:
        return "backward"
    if mech == "mode" and parts == {"outputs"} and all(n in localize.STATISTICS for _, n in failing):
        return None         # the running statistics returned where the batch's belong, y right: an array returned
        #                     for another (no mechanism), not a call computing with them (rule 14's mode)
    return mech


def _whole_factor(case, records, refs) -> bool:
    """Every failing array of every step is its expected value times one factor (its own, not 0: an array
    never written is no factor; fitted by least squares: within its bound and one unit of got's dtype, the
    fitted factor's own error), over more than one slice of x (with one slice, any per-slice factor, an rstd
    applied twice, is one factor), the factor no per-slice statistic's value (an rstd applied twice on slices of
    one spread is one factor too): "a whole array off by a factor" (docs/verdicts.md, rule 14)."""
    for r in records:
        x = r.inputs.get("x", next(iter(r.inputs.values()), None))
        shape, axes = _x_axes(case, x)
        if int(np.prod([n for i, n in enumerate(shape) if i not in axes])) < 2:
            return False
        for part, name in r.failing:
            got, want, E = r.got[part].get(name), getattr(refs[r.step], part).get(name), r.E[part].get(name)
            if got is None or want is None or E is None:
                return False
            g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
            f = explain.ls_factor(g, w)             # (a least-squares factor: a fraction of a unit of got's dtype off)
            if np.size(g) < 2 or not (np.all(np.isfinite(g)) and np.all(np.isfinite(w))) or f is None \
                    or np.mean(np.abs(w) > np.broadcast_to(E, np.shape(w))) < 0.5:
                return False                # (a single value, or values within their bound of 0: any factor)
            if abs(f - 1) < 1e-3 or abs(f) < 1e-3 or explain.fit_ratio(
                    got, w * f, np.asarray(E) * max(1.0, abs(f)) + unit(got.dtype) * np.abs(w * f)) > 1:
                return False
            if any(abs(f * m - 1) < STAT_FACTOR or abs(f / m - 1) < STAT_FACTOR for m in _slice_means(refs[r.step], x)):
                return False                # (the factor is a per-slice statistic, alike in every slice of the data)
    return True


STAT_FACTOR = 0.02      # a factor within 2% of a per-slice statistic's mean (or its reciprocal) is that statistic


def _slice_means(ref, x):
    """The means of the reference's returned per-slice statistics (outputs smaller than x: rstd, std, the norm),
    each nonzero and finite: the values a factor alike in every slice may be (an rstd applied twice on data whose
    slices share one spread)."""
    out = []
    for v in ref.outputs.values():
        v = None if v is None else np.asarray(v, dtype=np.float64)
        if v is not None and 1 < v.size < np.size(x) and np.all(np.isfinite(v)) and np.mean(v) != 0:
            out.append(float(np.mean(v)))
    return out


def _closest_of(out):
    """The named variant, demoted to "closest" (an arithmetic explanation fits exactly where it fits
    only within its rounding interval)."""
    return {"variant": out["matched"], "pitfalls": out["pitfalls"], "title": out["title"],
            "mechanism": out["mechanism"], "worst_ratio": out["worst_ratio"]}


def _x_axes(case, x):
    """x's shape and the reduction axes its failing arrays are named by (localize.axis_names): the
    configuration's normalized_shape (trailing axes), dim or axes; every axis but 1 for the channel
    norms; else the last axis."""
    nd, cfg = np.ndim(x), case.config
    ns = cfg.get("normalized_shape")
    if ns is not None:
        k = 1 if np.ndim(ns) == 0 else len(ns)
        return np.shape(x), tuple(range(nd - k, nd))
    for key in ("axes", "dim"):
        v = cfg.get(key)
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return np.shape(x), (int(v) % max(nd, 1),)
        if isinstance(v, (tuple, list)) and v:
            return np.shape(x), tuple(int(a) % max(nd, 1) for a in v)
    if case.op in ("batch_norm", "instance_norm", "group_norm", "offline_batch_norm", "batch_renorm",
                   "unified_norm", "power_norm") and nd > 1:
        return np.shape(x), tuple(i for i in range(nd) if i != 1)
    return np.shape(x), (nd - 1,) if nd else ()


def where(case, records) -> list:
    """The localization (localize.py) of every failing array of every recorded step."""
    out = []
    for r in records:
        if not r.failing:
            continue
        x = r.inputs.get("x", next(iter(r.inputs.values()), None))
        x_shape, axes = _x_axes(case, x)
        ref = r.ref if r.ref is not None else reference(case.op, case.config, r.training, r.inputs, r.cotangents,
                                                         r.state)
        for part, name in r.failing:
            got, want, E = r.got[part].get(name), getattr(ref, part).get(name), r.E[part].get(name)
            if got is None or want is None or E is None:
                continue
            d = localize.localize(part, name, got, want, E, x_shape, axes, r.E.get("dtypes", {}).get((part, name)))
            # row_terms reads x and dy in float64: the record's float64 copies (_args) give the same terms
            ins64, _, cot64 = _args(r)
            terms = explain.row_terms(case, dataclasses.replace(r, inputs=ins64, cotangents=cot64), ref, part, name)
            rows = "" if terms is None else localize.missing_rows(np.asarray(got, dtype=np.float64) - want, terms)
            if rows and case.op == "batch_norm":          # (its terms are the samples')
                rows = rows.replace("rows", "samples")
            if rows:
                d["rows"] = rows
                d["text"] += f"; {rows}"
            if len(records) > 1:
                d["step"] = r.step
                d["text"] = f"step {r.step}: {d['text']}"
            out.append(d)
    return out


def _diagnose(case, records, contract, variants):
    from ..pitfalls.mechanisms import MECHANISMS
    # a rounding point (the mean, rstd or x_hat rounded) that leaves y and dx within their bounds cannot
    # explain a parameter gradient alone: not tried when only those fail (they would survive the screening)
    params_only = all(p == "grads" and n not in ("x",) and (p, n) in pitfalls.PARAMS_ONLY.get(case.op, set())
                      for r in records for p, n in r.failing)
    cands = [v for v in (pitfalls.variants(case.op) if variants is None else variants)
             if any(v.applies(case.config, r.training, r.inputs, r.state, r.cotangents, case.dtype) for r in records)
             and not (params_only and v.mods.round_at is not None)]
    scored = []
    with np.errstate(all="ignore"):
        sub = _screen_records(case, records)
    def add(got, v):
        arrays, worst, widened, bounds, tight = got
        scored.append({"worst": worst, "v": v, "ok": all(a.passed for a in arrays), "arrays": arrays,
                       "ratios": tuple(a.ratio for a in arrays), "widened": widened, "bounds": bounds,
                       "tight": tight})
        return scored[-1]
    survivors, ahead = [], {}      # ahead: {variant id: its whole-case judgement, made in the pool below}
    for v in cands:
        got = None
        if sub is not None and not v.mods.repeat_rows:      # rows >= 65536 depend on others: never screened
            got = _try(v, case, sub, contract)
            if got is not None and all(a.passed for a in got[0]):
                survivors.append((got[1], v.id, v))         # fits the screened rows: judged on the whole case
                continue
        if got is None:
            got = _try(v, case, records, contract)
        if got is not None:
            add(got, v)
    # the survivors by their ratio on the screened rows (a lower bound of their ratio on the case): one
    # whose lower bound is MARGIN x the best whole-case fit so far can neither be the best nor stop it
    # being named, so it keeps that lower bound ("ok" False) instead of a judgement of the whole case
    if survivors:            # the arrays the screened rows leave out (dweight, dbias): judged alone first
        rest = {(p, n) for r in records for p in ("outputs", "grads") for n in r.compare[p]
                if n not in sub[0].compare[p]}
        kept = []
        # each survivor on its own, two at a time (NumPy and the compiled loops release the GIL; the
        # results are taken in the survivors' order, so nothing depends on which finished first). The
        # variants with a spread (the one-pass variances: the same sums, and on most rows the same
        # statistics, for every guard) are started first and side by side, so that one computes the terms
        # they share (refnorm._memo) while the other waits for them, before other variants' terms push
        # them out of the memo
        # (then those keeping the reference's statistics and bounds, the quickest: one that fits the rest
        # starts its whole-case judgement below while the other worker is still busy with the others)
        order = sorted(range(len(survivors)), key=lambda i: (survivors[i][2].spread is None, _slow(survivors[i][2])))
        # a survivor that fits the rest too is judged on the whole case in the same task (at most SPECULATE
        # of them, while the other worker is still busy), unless the loop below is sure to skip it: its lower
        # bound only grows and best_full only shrinks there, so a skip decided on the values before is kept.
        # The loop takes that judgement only where it would have made it itself (the same function of the
        # same arrays: the same result), so nothing depends on which were judged ahead
        best0 = min((s["worst"] for s in scored if s["ok"]), default=math.inf)
        fitted0 = {s["v"].mechanism for s in scored if s["ok"]}
        budget = [SPECULATE]
        lock = threading.Lock()

        def task(i):
            lb, _, v = survivors[i]
            got = _try(v, case, records, contract, rest) if rest else None
            if got is None or not all(a.passed for a in got[0]) or lb >= MARGIN * _fl(best0) or v.mechanism in fitted0:
                return got, None
            with lock:
                if budget[0] <= 0:
                    return got, None
                budget[0] -= 1
            # the bias test's counts of the backend's large arrays (the same for every variant: memo) start
            # beside the variant's evaluation; the judgement takes them, or waits for them, from the memo
            pre = threading.Thread(target=_count_ahead, args=(records,), daemon=True)
            pre.start()
            try:
                return got, (_try(v, case, records, contract),)
            finally:
                pre.join()
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(task, order))
        alone = [None] * len(survivors)
        for i, got in zip(order, done):
            alone[i] = got
        for (lb, vid, v), (got, whole) in zip(survivors, alone):
            lb = lb if got is None else max(lb, got[1])
            if got is not None and not all(a.passed for a in got[0]):
                scored.append({"worst": lb, "v": v, "ok": False, "arrays": [], "ratios": (), "widened": False,
                               "bounds": None, "lower_bound": True})
            else:
                kept.append((lb, vid, v))
                if whole is not None:
                    ahead[vid] = whole[0]
        survivors = kept
    best_full = min((s["worst"] for s in scored if s["ok"]), default=math.inf)
    fitted = {s["v"].mechanism for s in scored if s["ok"]}
    for lb, _, v in sorted(survivors, key=lambda t: (t[0], t[1])):
        # nor is one whose mechanism already has a whole-case fit (it could only be another instance of it)
        if lb >= MARGIN * _fl(best_full) or v.mechanism in fitted:
            scored.append({"worst": lb, "v": v, "ok": False, "arrays": [], "ratios": (), "widened": False,
                           "bounds": None, "lower_bound": True})
            continue
        got = ahead[v.id] if v.id in ahead else _try(v, case, records, contract)
        if got is not None and add(got, v)["ok"]:
            best_full = min(best_full, got[1])
            fitted.add(v.mechanism)
    for s in scored:
        if s["ok"] and s["v"].bounds_as is not None and _reference_fits(case, records, s):
            # bounds of another computation so wide that they hold the reference as well: no evidence
            s.update(ok=False, vacuous=True)
    # a fit within the check's own bounds ranks before one only within a variant's own rounding interval
    # (its summation order's spread: on mean-shifted rows that interval holds almost anything)
    # (a vacuous fit last: it is shown neither as a match nor as the closest)
    scored.sort(key=lambda t: (not (t["ok"] and not t["widened"]), bool(t.get("vacuous")), t["worst"], t["v"].id))
    out = {"matched": None, "pitfalls": [], "title": None, "worst_ratio": None, "indistinguishable": [],
           "also_matching": [], "closest": None, "tried": len(scored), "widened": False, "mechanism": None,
           "instance": None, "confidence": None, "vs_runner_up": None, "vs_unknown": None, "runner_up": None,
           "ruled_out": []}
    # per mechanism, its best-fitting variant; a mechanism is ruled out when none of its variants fits
    fams = {}
    for s in scored:
        fams.setdefault(s["v"].mechanism, s)
    # (a vacuous fit, or a lower bound within the bound, leaves its mechanism open)
    open_ = {s["v"].mechanism for s in scored
             if s["ok"] or s.get("vacuous") or (s.get("lower_bound") and s["worst"] <= 1)}
    out["ruled_out"] = sorted(k for k in fams if k not in open_)
    best = next((s for s in scored if s["ok"]), None)          # (a lower bound may sort before it)
    if best is not None:
        others = [s for k, s in fams.items() if k != best["v"].mechanism]
        runner = min(others, key=lambda s: _vs_worst(s, best)) if others else None
        vs_runner = math.inf if runner is None else _fl(_vs_worst(runner, best)) / _fl(best["worst"])
        with np.errstate(all="ignore"):
            vs_unknown = _vs_unknown(case, records, contract, best["arrays"], best)
        conf = min(vs_runner, vs_unknown)
        out.update(confidence=_num(conf), vs_runner_up=_num(vs_runner), vs_unknown=_num(vs_unknown),
                   runner_up=None if runner is None else _entry(runner["v"], case.dtype, runner["worst"]))
        if conf >= MARGIN:
            v = best["v"]
            same = [s for s in scored[1:] if s["ok"] and s["v"].mechanism == v.mechanism]
            other = [s for s in scored[1:] if s["ok"] and s["v"].mechanism != v.mechanism]
            out.update(matched=v.id, pitfalls=list(v.pitfall_ids), title=v.title_for(case.dtype),
                       worst_ratio=_num(best["worst"]), mechanism=v.mechanism, instance=v.title_for(case.dtype),
                       indistinguishable=[_entry(s["v"], case.dtype) for s in same],
                       also_matching=[_entry(s["v"], case.dtype, s["worst"]) for s in other],
                       widened=best["widened"])
            msg = (f"matches pitfall {'/'.join(v.pitfall_ids)}: {out['title']} [mechanism: {MECHANISMS[v.mechanism]}; "
                   f"{_times(vs_runner)} better than the next mechanism"
                   + (f" ({runner['v'].id}, {runner['worst']:.3g} x bound)" if runner else "")
                   + f", {_times(vs_unknown)} better than no pitfall]")
            if best["widened"]:
                msg += " (within the variant's own rounding interval: its value depends on the summation order)"
            out["message"] = msg
            return out
    if best is not None and vs_unknown == 1.0 and _only_nonfinite(case, records):
        out["closest"] = _entry(best["v"], case.dtype, best["worst"])
        out["message"] = (f"no known pitfall matches clearly (every failing array fails only by +-inf, an overflow any "
                          f"variant amplifying there reproduces: no evidence for the best fit, "
                          f"{'/'.join(best['v'].pitfall_ids)}: {best['v'].title_for(case.dtype)}; ruled out: "
                          f"{', '.join(out['ruled_out']) or '-'})")
    elif best is not None:
        why = (f"the best fit, {'/'.join(best['v'].pitfall_ids)}: {best['v'].title_for(case.dtype)} "
               f"({best['worst']:.3g} x bound), is only {_times(min(vs_runner, vs_unknown))} better than "
               + ("no pitfall" if vs_unknown <= vs_runner else f"{runner['v'].id} ({runner['v'].mechanism})")
               + f", not the {MARGIN:g}x that names it")
        out["closest"] = _entry(best["v"], case.dtype, best["worst"])
        out["message"] = f"no known pitfall matches clearly ({why}; ruled out: {', '.join(out['ruled_out']) or '-'})"
    elif scored:
        c, worst = scored[0]["v"], scored[0]["worst"]
        out["message"] = "no known pitfall matches"
        if math.isfinite(worst) and worst <= CLOSE and not scored[0].get("vacuous"):
            # a near miss says something a user can act on; a variant missing by more, or with NaN, does not
            out["closest"] = _entry(c, case.dtype, worst)
            out["message"] += (f" (closest, not a match: {'/'.join(c.pitfall_ids)}: {c.title_for(case.dtype)}, "
                               f"{worst:.3g} x bound")
            out["ruled_out"] = [m for m in out["ruled_out"] if m != c.mechanism]
        else:
            out["message"] += " (no variant comes within " + f"{CLOSE:g} x its bound"
        out["message"] += f"; ruled out: {', '.join(out['ruled_out']) or '-'})"
    elif not pitfalls.variants(case.op):
        out["message"] = f"no known pitfall matches (refnorm has no pitfall variants of {case.op})"
    else:
        out["message"] = "no known pitfall matches (no variant could be compared on this case)"
    return out


def _vs_worst(other, best):
    """The worst ratio of ``other`` as compared with the named candidate ``best``: a fit within the check's
    own bounds is compared with the others' fits within the same bounds (a variant fitting only within
    its own rounding interval, or judged within another computation's bounds, competes by its ratio within
    the check's bounds)."""
    if other.get("tight") is None:
        return other["worst"]
    if other.get("widened") and not best.get("widened"):
        return max(other["worst"], other["tight"])
    if other["v"].bounds_as is not None and best["v"].bounds_as is None and not best.get("widened"):
        return max(other["worst"], other["tight"])
    return other["worst"]


def _times(r):
    return "inf x" if r == math.inf else f"{r:.3g}x"


def matched_ids(diag) -> set:
    """Every pitfall id the diagnosis names as a match (the named variant and those indistinguishable
    from it on the case); empty when nothing matches."""
    if not diag or not diag.get("matched"):
        return set()
    ids = set(diag["pitfalls"])
    for e in diag.get("indistinguishable", ()):
        ids |= set(e["pitfalls"])
    return ids
