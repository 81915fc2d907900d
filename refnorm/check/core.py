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
* ``unchecked``      not judged: the backend did not return it (a forward-only backend's gradients),
                     declared it not computed (``Returned.not_computed``, with its reason), or
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
from .backends.base import Call, Contract, complete_config, declared_config
# one call's judgement (judge.py), re-exported: refnorm.testing, users and tests import these from here
from .judge import (SINGULAR, WORST_SHOWN, ArrayResult, _judge, _judge_quantized, _num,  # noqa: F401
                    array_scale, declared_not_computed, derive_bounds, judge_call, judge_returned, reference,
                    unknown_names)

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
                "weakly_verified": [f"step{a.step}.{a.part}.{a.name}" for a in self.arrays if a.weak],
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
    platform: dict | None = None     # where it ran (platform.probe): set by platform_info(), at the first report

    def platform_info(self) -> dict:
        """The platform record (CPU model and numeric flags, GPU, library versions: check/platform.py),
        probed once, when first asked for (after the run: the backend's framework is imported by then)."""
        if self.platform is None:
            from . import platform
            self.platform = platform.probe()
        return self.platform

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

    def weak_count(self) -> int:
        """Verified arrays of the judged cases with fewer than half their elements constrained (ArrayResult.weak)."""
        return sum(a.weak for c in self.cases if c.status in JUDGED for a in c.arrays)

    def summary(self):
        return {"backend": self.backend, "golden": self.golden, "cases": len(self.cases),
                "passed": self.count("passed"), "partial": self.count("partial"), "failed": self.count("failed"),
                "skipped": self.count("skipped"), "errors": self.count("error"),
                "expected_failures": self.count("xfail"), "judged": sum(self.count(s) for s in JUDGED),
                "arrays": self.array_counts(), "weakly_verified": self.weak_count(),
                "seconds": round(self.seconds, 2), "ok": self.ok,
                "verdict": self.verdict}

    def headroom(self) -> list:
        """How tight the check is, per (op, dtype): over the verified arrays of the PASSED and PARTIAL
        cases, the worst ratio excess / bound (``worst_ratio``, <= 1) and the headroom 1 / worst_ratio;
        "exact" when every ratio was 0. Rows with no such case are left out.

        What it measures (docs/tolerances.md, section 9, "Headroom"): the excess is the distance from the
        reference to the returned value's rounding interval (precision.excess), 0 for any result inside
        it (a correctly rounded one among them), so "exact" means every element was inside its rounding
        interval, and a headroom h means the worst element could have been h times further OUTSIDE its
        interval and still pass: not that an error h times larger than |got - ref| passes. A result one
        ulp off lands about half an ulp outside its interval, i.e. ulp / (2 * bound) times the bound:
        where the bound is far below the dtype's ulp (float16/bfloat16 outputs computed in float32,
        rms_norm bfloat16: ~3e3x) one ulp off fails although the headroom is huge or "exact"."""
        rows = {}
        for c in self.cases:
            if c.status not in ("passed", "partial"):
                continue
            key = (c.op, c.dtype)
            n, w = rows.get(key, (0, 0.0))
            rows[key] = (n + 1, max([w] + [a.ratio for a in c.arrays if a.verdict == "verified"]))
        order = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}
        return [{"op": op, "dtype": dt, "passed": n, "worst_ratio": _num(w),
                 "headroom": _num(1 / w) if w > 0 else "exact"}
                for (op, dt), (n, w) in sorted(rows.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 9)))]

    def to_json(self):
        return {"summary": self.summary(), "platform": self.platform_info(), "headroom": self.headroom(),
                "cases": [c.to_json() for c in self.cases]}


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
        # every option, defaults filled in; only the declared ones for a backend declaring its options (base.py)
        cfg, undeclared = declared_config(case.op, case.config, getattr(backend, "options", None))
        if undeclared:
            out.status, out.message = "skipped", undeclared
            return out
        full_cfg = complete_config(case.op, case.config)       # every option: what a drawn mask is checked with
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
                told = getattr(ret, "masks", None)
                drawn = {} if not told else masks.drawn_masks(i, case.op, full_cfg, st.inputs, told)
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
                                    out.unchecked_why, out.not_returned, cond=st.cond, blocks=not stored,
                                    not_computed=getattr(ret, "not_computed", None))
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
        cfg, undeclared = declared_config(case.op, case.config, getattr(backend, "options", None))
        layout = getattr(case, "layout", "contiguous")
        if getattr(case, "expect_error", False) or undeclared:
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


def merge_reports(reports, name) -> Report:
    """One report of several runs of the same backend (``refnorm check --layout all``: a run per layout;
    each case keeps its ``layout``)."""
    out = Report(reports[0].backend, name, platform=reports[0].platform)
    for r in reports:
        out.cases.extend(r.cases)
        out.seconds += r.seconds
    return out


# ----------------------------------------------------------------------- expected failures
LAYOUT_NAMES = tuple(layouts.LAYOUTS)


@dataclass(frozen=True)
class ExpectedFailure:
    """One line of an expected-failures file: what a listed case must fail with to count as expected.

    ``fails``: the arrays that fail ("output.y", "grad.x", "state.running_var"; any step), exactly;
    ``error``: instead of ``fails``, a text the case's error message must contain;
    ``diagnosis``: the variant the diagnosis must name (``none``: no known pitfall may match), or None
    (not compared); ``reason``: why, in words; ``platform``: the CPUs it holds on (platform.parse_scope:
    ((flag, wanted), ...); () = every CPU); ``layouts``: the memory layouts it holds in
    (refnorm/golden/layouts.py; every layout unless the line has ``layout=``)."""
    fails: frozenset | None
    error: str | None
    diagnosis: str | None
    reason: str
    platform: tuple = ()
    layouts: frozenset = frozenset(LAYOUT_NAMES)

    def describe(self) -> str:
        from .platform import describe_scope
        what = f"error containing {self.error!r}" if self.error is not None else f"fails={','.join(sorted(self.fails))}"
        return (what + (f" diagnosis={self.diagnosis}" if self.diagnosis is not None else "")
                + (f" platform={describe_scope(self.platform)}" if self.platform else "")
                + (f" layout={','.join(sorted(self.layouts))}" if self.layouts != frozenset(LAYOUT_NAMES) else ""))


FIELDS = ("fails", "error", "diagnosis", "platform", "layout")
EXPECT_FORMAT = ("'CASE-ID fails=ARRAY[,ARRAY...] [diagnosis=VARIANT|none] [platform=[!]FLAG[,...]] "
                 "[layout=[!]LAYOUT[,...]] reason' or "
                 "'CASE-ID error=\"TEXT\" reason' (ARRAY: output.y, grad.x, state.running_var, ...; FLAG: a CPU "
                 "flag such as avx512_fp16; LAYOUT: " + ", ".join(LAYOUT_NAMES) + ")")


def parse_layouts(text: str) -> frozenset:
    """The layouts of a ``layout=`` field: ``channels_last,strided`` (these), ``!contiguous`` (every other
    one). A ValueError names an unknown layout or a mix of both forms."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    neg = [w[1:] for w in words if w.startswith("!")]
    pos = [w for w in words if not w.startswith("!")]
    if not words or (neg and pos):
        raise ValueError(f"layout={text!r}: expected LAYOUT[,LAYOUT...] or !LAYOUT[,!LAYOUT...] with LAYOUT one of "
                         f"{', '.join(LAYOUT_NAMES)}")
    bad = [w for w in neg + pos if w not in LAYOUT_NAMES]
    if bad:
        raise ValueError(f"layout={text!r}: unknown layout {bad[0]!r}; expected one of {', '.join(LAYOUT_NAMES)}")
    return frozenset(LAYOUT_NAMES) - frozenset(neg) if neg else frozenset(pos)


def read_expected_failures(path, flags=None, layout="contiguous") -> dict:
    """Parse an expected-failures file (docs: README, "Expected failures"): one listed case per line,
    ``#`` starts a comment; the fields come first (a value may be quoted), the rest is the reason:

        CASE-ID  fails=output.y,grad.x  [diagnosis=VARIANT|none]  [platform=[!]FLAG,...]  why, in words
        CASE-ID  error="text the error message contains"  why

    ``platform=`` scopes an entry to the CPUs with (``avx512_fp16``) or without (``!avx512_fp16``) a
    numeric flag (check/platform.py); an entry whose scope does not match ``flags`` (default: this
    machine's, platform.cpu()) is left out of the result: ignored for this run. ``layout=`` scopes it to
    memory layouts the same way (``layout=channels_last``, ``layout=!channels_last``; no field: every
    layout); the entries kept are those of ``layout``, the run's (``refnorm check --layout``). A case may
    be listed more than once only with scopes no (CPU, layout) matches together.

    Returns {case id: ExpectedFailure} of the entries that apply. A line without ``fails=`` or
    ``error=``, without a reason, with a misspelt field name or an unknown platform flag, or a case
    listed twice for one platform is a GoldenError naming the line. The first word that is not a field
    begins the reason (it may itself contain "=")."""
    import re
    from . import platform as P
    if flags is None:
        flags = P.cpu()["flags"]
    lines = {}                                   # case id -> line number of each entry (all platforms)
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
        late = [w for w in words if w.startswith(("platform=", "layout="))]
        if late and late[0] == words[0] and late[0].endswith("="):
            raise GoldenError(f"{path}:{n}: {late[0]} has no value; expected {EXPECT_FORMAT}")
        if late:                                 # it would silently scope nothing: the fields come first
            raise GoldenError(f"{path}:{n}: {late[0]!r} is in the reason (after {words[0]!r}): the fields, "
                              f"platform= and layout= among them, come before the reason; expected {EXPECT_FORMAT}")
        try:
            scope = P.parse_scope(fields["platform"]) if "platform" in fields else ()
        except P.ScopeError as e:
            raise GoldenError(f"{path}:{n}: {e}") from None
        try:
            lays = parse_layouts(fields["layout"]) if "layout" in fields else frozenset(LAYOUT_NAMES)
        except ValueError as e:
            raise GoldenError(f"{path}:{n}: {e}") from None
        for m_, other, other_lays in lines.get(cid, ()):
            if not P.scopes_exclusive(scope, other) and lays & other_lays:
                raise GoldenError(f"{path}:{n}: {cid!r} is listed twice (line {m_}) for the same platform and layout "
                                  f"({', '.join(sorted(lays & other_lays))}): scope the entries with platform= or "
                                  "layout= so that no run matches both")
        lines.setdefault(cid, []).append((n, scope, lays))
        if P.scope_matches(scope, flags) and (layout is None or layout in lays):
            out[cid] = ExpectedFailure(fails, fields.get("error"), fields.get("diagnosis"), " ".join(words), scope,
                                       lays)
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
    (``expected_outcome``); an id not in ``known_ids`` (the golden set's; the CLI adds the suites' and the
    generated cases') is an error. Generated and suite cases are matched by their ids as golden ones are."""
    unknown = [c for c in expected if c not in set(known_ids)]
    if unknown:
        raise GoldenError(f"expected failures name case(s) not in the golden set, a suite or the generated "
                          f"cases: {', '.join(unknown)}")
    for c in report.cases:
        if c.id in expected and (getattr(c, "layout", None) or "contiguous") in expected[c.id].layouts:
            expected_outcome(c, expected[c.id], diagnosed)
