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

The checker by what it does: this module runs a case (``check_case``: the calls, the in-place and state
checks, the golden agreement, the diagnosis hook on a failure) and a set of cases (``run_check``,
``run_generated``); judge.py judges the arrays one call returned; results.py builds the case result and
the report; expected.py applies an expected-failures file. Their names are re-exported here.
"""
from __future__ import annotations

import collections
import dataclasses
import signal
import threading
import time
import traceback
from contextlib import contextmanager

import numpy as np

from .. import registry
from ..errors import RefnormError
from ..golden import commands as golden_commands
from ..golden import layouts
from ..golden.store import GoldenError
from . import bounds as B
from . import contracts, diagnosis, masks, stream
from .backends.base import Call, Contract, complete_config, declared_config
# one call's judgement (judge.py), re-exported: refnorm.testing, users and tests import these from here
from .judge import (SINGULAR, WORST_SHOWN, ArrayResult, _judge, _judge_quantized, _num,  # noqa: F401
                    array_scale, declared_not_computed, derive_bounds, judge_call, judge_returned, reference,
                    unknown_names)
# the case report (results.py) and expected failures (expected.py), re-exported: imported from here too
from .expected import (EXPECT_FORMAT, FIELDS, LAYOUT_NAMES, ExpectedFailure, apply_expected_failures,  # noqa: F401
                       expected_outcome, parse_layouts, read_expected_failures)
from .results import (JUDGED, VERDICTS, CaseResult, Report, failure_message, merge_reports,  # noqa: F401
                      partial_message)

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
        out.contract = contract.describe()          # "strict/block" for a preset, else its points
        out.contract_points = contract.as_dict()
        try:
            contracts.validate(case.op, contract)   # a point the op has no bound for: skipped, naming it
        except RefnormError as e:
            out.status, out.message = "skipped", str(e)
            return out
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
                            tuple((a.part, a.name) for a in out.arrays[first:] if not a.passed), ref,
                            judged={(a.part, a.name): a for a in out.arrays[first:]})
                    if rec is not None:
                        records.append(rec)
            elif diagnose:
                records.append(diagnosis.StepRecord(
                    i, st.training, st.inputs, st.cotangents, state, got, st.compare, E,
                    tuple((a.part, a.name) for a in out.arrays[first:] if not a.passed), ref,
                    judged={(a.part, a.name): a for a in out.arrays[first:]}))
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
    return diagnosis.StepRecord(step, st.training, ins, cots, sub_state, sub_got, per_unit, E, failing, ref,
                                judged={(a.part, a.name): a for a in judged})


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

