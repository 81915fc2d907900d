"""Issue 8 part 2: the pitfall variants (refnorm/pitfalls) and the diagnosis (refnorm/check/diagnosis).

* the variants' equations without a change (_engine with Mods()) are refnorm.evaluate's, on every
  golden case of the five ops;
* every variant differs from the reference beyond the check's bound on at least one golden case
  (the case that exposes it; otherwise the diagnosis could never tell it from a correct backend);
* the diagnosis names nothing on a passing case, is skipped on request without changing any verdict,
  and says "no known pitfall matches" for a bug that is no pitfall (the closest variant labelled as
  not a match);
* the variants sit beside the reference core: importing them loads no checker, golden or CLI module.

The naming rate over the planted pitfalls is asserted in tests/test_planted.py.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import refnorm.pitfalls as P
from refnorm.check.backends.base import Contract, Returned
from refnorm.check.core import check_case, derive_bounds, reference, run_check
from refnorm.check.diagnosis import matched_ids
from refnorm.golden import commands, store

from helpers import StrictTestBackend, assert_loads_none_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
STRICT = Contract("strict", "block")


def _f64(d):
    return {k: np.asarray(v) if np.asarray(v).dtype.kind in "iu" else np.asarray(v, dtype=np.float64)
            for k, v in d.items()}


def _cases(op):
    man = store.read_manifest(GOLDEN)
    return [commands.load_case(GOLDEN, e["id"], manifest=man) for e in man["cases"] if e["case"]["op"] == op]


@pytest.mark.parametrize("op", P.ENGINE_OPS)
def test_unchanged_equations_are_the_reference(op):
    cases = _cases(op)
    assert len(cases) > 20
    for case in cases:
        state = dict(case.init_state)
        for st in case.steps:
            ref = reference(op, case.config, st.training, st.inputs, st.cotangents, state)
            mine = P.reference(op, _f64(st.inputs), case.config, _f64(state), st.training, _f64(st.cotangents),
                               case.dtype)
            for part in ("outputs", "grads", "state"):
                a, b = getattr(ref, part), getattr(mine, part)
                assert set(a) == set(b), (case.id, part, sorted(a), sorted(b))
                for k in a:
                    x, y = np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64)
                    assert x.shape == y.shape, (case.id, k)
                    assert np.array_equal(np.isnan(x), np.isnan(y)), (case.id, k)
                    scale = float(np.max(np.abs(x[np.isfinite(x)]), initial=0.0)) or 1.0
                    fin = np.isfinite(x)
                    assert np.array_equal(x[~fin & ~np.isnan(x)], y[~fin & ~np.isnan(x)]), (case.id, k)
                    assert float(np.max(np.abs(x[fin] - y[fin]), initial=0.0)) <= 1e-10 * scale, (case.id, part, k)
            state = ref.state


def _exposing_case(v, cases):
    """The first golden case (id, array) on which the variant's float64 values leave the reference's
    strict bound (or differ in NaN pattern or shape), else None."""
    for case in cases:
        state = dict(case.init_state)
        for st in case.steps:
            ref = reference(case.op, case.config, st.training, st.inputs, st.cotangents, state)
            if v.applies(case.config, st.training, st.inputs, state, st.cotangents, case.dtype):
                res = v.evaluate(_f64(st.inputs), case.config, _f64(state), st.training, _f64(st.cotangents),
                                 case.dtype)
                E = derive_bounds(case.op, case.dtype, case.config, st.training, st.inputs, st.cotangents, state,
                                  ref, STRICT)
                for part in ("outputs", "grads", "state"):
                    for k in st.compare[part]:
                        if k not in E[part] or k not in getattr(res, part):
                            continue
                        a = np.asarray(getattr(res, part)[k], dtype=np.float64)
                        b = np.asarray(getattr(ref, part)[k], dtype=np.float64)
                        if a.shape != b.shape:
                            return case.id, k
                        with np.errstate(all="ignore"):
                            beyond = np.abs(a - b) > np.broadcast_to(E[part][k], b.shape)
                        if (beyond | (np.isnan(a) != np.isnan(b))).any():
                            return case.id, k
            state = ref.state
    return None


@pytest.mark.parametrize("op", P.MODULES)
def test_every_variant_differs_from_the_reference_on_a_golden_case(op):
    cases = _cases(op)
    found = {v.id: _exposing_case(v, cases) for v in P.variants(op)}
    assert all(found.values()), [k for k, f in found.items() if f is None]


def test_variants_are_documented_and_unique():
    from refnorm.pitfalls.mechanisms import FAMILY, MECHANISMS
    for op in P.MODULES:
        vs = P.variants(op)
        assert vs and len({v.id for v in vs}) == len(vs), op
        for v in vs:
            assert v.op == op and v.pitfall_ids and v.title_for("float16"), v
            assert v.mechanism in MECHANISMS, v
            assert "{" not in v.title_for("bfloat16"), v
    mod = __import__("refnorm.pitfalls.layer_norm", fromlist=["x"])
    assert "D06" in mod.__doc__ and "F09" in mod.__doc__
    assert P.variants("layer_norm")[0].label("float16") == \
        "A01/A02: variance as E[x^2]-E[x]^2 in float32, clamped at 0"
    assert set(FAMILY) >= {v.id for v in P.variants()} and set(FAMILY.values()) == set(MECHANISMS)


def test_pitfalls_import_only_the_reference_core():
    assert_loads_none_of("import refnorm.pitfalls as P\nfor op in P.MODULES: P.variants(op)",
                         ("refnorm.check", "refnorm.golden", "refnorm.cli", "torch", "jax"))


# ------------------------------------------------------------------------------------- diagnosis
class _Numpy(StrictTestBackend):
    """A correct float64 backend (the reference itself) with an optional made-up defect."""
    name = "numpy-test"

    def __init__(self, defect=None):
        self.defect = defect

    def run(self, call):
        r = reference(call.op, call.config, call.training, call.inputs, call.cotangents, call.state)
        outs = {k: np.asarray(v, dtype=np.float64) for k, v in r.outputs.items()}
        if self.defect == "scale":                # no pitfall: the output scaled by 1 + 1e-3
            outs["y"] = outs["y"] * (1 + 1e-3)
        grads = {k: np.asarray(v, dtype=np.float64) for k, v in r.grads.items()}
        state = {k: np.asarray(v) for k, v in r.state.items()}
        return Returned(outs, grads, state)


class _Variant(_Numpy):
    """A backend that returns a variant's float64 values: the diagnosis must name that variant."""

    def __init__(self, variant):
        self.variant = variant

    def run(self, call):
        r = self.variant.evaluate(_f64(call.inputs), call.config, _f64(call.state), call.training,
                                  _f64(call.cotangents), call.dtype)
        return Returned({k: np.asarray(v, dtype=np.float64) for k, v in r.outputs.items()},
                        {k: np.asarray(v, dtype=np.float64) for k, v in r.grads.items()},
                        {k: np.asarray(v) for k, v in r.state.items()})


def test_no_diagnosis_on_passing_cases_and_no_match_for_a_bug_that_is_no_pitfall():
    good = run_check(_Numpy(), GOLDEN, ops=["layer_norm", "batch_norm"])
    assert good.verdict != "failed" and all(c.diagnosis is None for c in good.cases)
    bad = run_check(_Numpy("scale"), GOLDEN, ops=["layer_norm"], dtypes=["float64"])
    failed = [c for c in bad.cases if c.status == "failed"]
    assert failed
    for c in failed:
        d = c.diagnosis
        assert d["matched"] is None and d["message"].startswith("no known pitfall matches"), (c.id, d)
        assert d["closest"] is None or "not a match" in d["message"]
        assert c.to_json()["diagnosis"] == d


def test_no_diagnosis_leaves_the_verdicts_unchanged():
    b = _Numpy("scale")
    a1 = run_check(b, GOLDEN, ops=["rms_norm"], dtypes=["float64", "float16"])
    a2 = run_check(b, GOLDEN, ops=["rms_norm"], dtypes=["float64", "float16"], diagnose=False)
    assert [(c.id, c.status, c.message) for c in a1.cases] == [(c.id, c.status, c.message) for c in a2.cases]
    assert any(c.diagnosis for c in a1.cases) and not any(c.diagnosis for c in a2.cases)


@pytest.mark.parametrize("vid", ["eps_outside", "no_offset", "sq_in_d", "eps_none_f64"])
def test_a_backend_computing_a_variant_is_named_by_it(vid):
    v = [v for v in P.variants("rms_norm") if v.id == vid][0]
    rep = run_check(_Variant(v), GOLDEN, ops=["rms_norm"])
    failed = [c for c in rep.cases if c.status == "failed"]
    assert failed, vid
    for c in failed:
        assert set(v.pitfall_ids) <= matched_ids(c.diagnosis), (c.id, c.diagnosis)
        assert c.diagnosis["message"].startswith("matches pitfall ")
        # named by its mechanism; the instance may be another variant of it that fits as well (C04 for C01)
        assert c.diagnosis["mechanism"] == v.mechanism, (c.id, c.diagnosis["message"])


def test_diagnosis_lines_in_the_reports():
    from refnorm.check import report as R
    from refnorm.check.junit import junit_xml
    from refnorm.check.markdown import markdown
    v = [v for v in P.variants("rms_norm") if v.id == "eps_outside"][0]
    rep = run_check(_Variant(v), GOLDEN, ops=["rms_norm"], dtypes=["float64"])
    c = next(c for c in rep.cases if c.status == "failed")
    line = "  diagnosis: matches pitfall B01: eps outside the sqrt: x/(sqrt(mean x^2) + eps)"
    assert any(t.startswith(line + " [mechanism: eps: its placement or its value; ")
               for t in R.case_text(c, "x").splitlines()), R.case_text(c, "x")
    assert b"diagnosis: matches pitfall B01" in junit_xml(rep, "x")
    assert "matches pitfall B01" in markdown(rep, "x", None, {}, None)
    js = rep.to_json()
    assert js["cases"][rep.cases.index(c)]["diagnosis"]["pitfalls"] == ["B01"]


def test_headroom_is_the_worst_ratio_of_the_passed_cases():
    from planted.emulated import EmulatedBackend
    from refnorm.check import report as R
    rep = run_check(EmulatedBackend(), GOLDEN, ops=["layer_norm"], dtypes=["float64", "bfloat16"])
    rows = rep.headroom()
    assert [r["dtype"] for r in rows] == ["float64", "bfloat16"] and all(r["op"] == "layer_norm" for r in rows)
    for r in rows:
        passed = [c for c in rep.cases if c.status in ("passed", "partial") and c.dtype == r["dtype"]]
        assert r["passed"] == len(passed)
        w = max(a.ratio for c in passed for a in c.arrays if a.verdict == "verified")
        assert r["worst_ratio"] == w <= 1
        assert r["headroom"] == (1 / w if w > 0 else "exact")
    assert rep.to_json()["headroom"] == rows
    assert "HEADROOM" in R.headroom_table(rep)
    from refnorm.check.markdown import markdown
    assert "## Headroom (passed cases)" in markdown(rep, "x", None, {}, None)
    exact = run_check(_Numpy(), GOLDEN, ops=["rms_norm"], dtypes=["float64"])     # the reference itself: 0 error
    assert exact.headroom() == [{"op": "rms_norm", "dtype": "float64", "passed": exact.count("passed"),
                                 "worst_ratio": 0.0, "headroom": "exact"}]


def test_a_diagnosis_failure_never_changes_the_verdict(monkeypatch):
    from refnorm.check import diagnosis
    monkeypatch.setattr(diagnosis, "diagnose", lambda *a: 1 / 0)
    case = _cases("layer_norm")[0]
    r = check_case(_Numpy("scale"), case)
    assert r.status == "failed" and r.diagnosis["matched"] is None and "ZeroDivisionError" in r.diagnosis["error"]


def test_torch_cpu_known_value_failures_are_diagnosed():
    """torch's CPU float16 F.local_response_norm squares x in float16 and F.normalize rounds the norm
    to float16 (known_failures/torch-cpu.txt): the diagnosis names exactly those mechanisms."""
    pytest.importorskip("torch")
    from refnorm.check import get_backend
    from refnorm.check.core import read_expected_failures
    expected = read_expected_failures(os.path.join(ROOT, "known_failures", "torch-cpu.txt"))
    ids = [c for c in expected if c.startswith(("local_response_norm/", "lp_normalize/"))]
    assert len(ids) == 7
    rep = run_check(get_backend("torch-cpu"), GOLDEN, case_ids=ids)
    for c in rep.cases:
        assert c.status == "failed", (c.id, c.status, c.message)
        want = "lrn_sq_in_d" if c.op == "local_response_norm" else "lp_norm_in_d"
        assert c.diagnosis["matched"] == want, (c.id, c.diagnosis)



def test_one_pass_variance_in_another_summation_order_is_named_by_its_own_rounding_interval(monkeypatch):
    """jax.nn.standardize's one-pass variance (A08) sums in XLA's order, not NumPy's pairwise one; where
    E[x^2] - E[x]^2 cancels, the order sets the value. A float32 kernel with the one-pass variance summed
    serially is still named A01/A02 on ill-conditioned layer_norm cases, thanks to the variant's own
    rounding interval (Variant.spread): on more cases than the sharp variant alone names, and never as
    another pitfall."""
    import dataclasses
    sys.path.insert(0, ROOT)
    from tests.planted import emulated as EM
    monkeypatch.setattr(EM._K, "sum", lambda self, a: self.sum_serial(np.asarray(a, dtype=self.A)))
    backend = EM.EmulatedBackend("one_pass_clamp")
    rep = run_check(backend, GOLDEN, ops=["layer_norm"], dtypes=["float32"])
    failed = [c for c in rep.cases if c.status == "failed"]
    named = [c for c in failed if matched_ids(c.diagnosis)]
    assert named, [(c.id, c.diagnosis["message"]) for c in failed]
    assert all({"A01", "A02"} <= matched_ids(c.diagnosis) for c in named), [
        (c.id, c.diagnosis["message"]) for c in named]
    one_pass = [v for v in P.variants("layer_norm") if v.id == "one_pass_clamp"][0]
    monkeypatch.setattr(P, "variants", lambda op=None: (dataclasses.replace(one_pass, spread=None),))
    rep2 = run_check(backend, GOLDEN, case_ids=[c.id for c in failed])
    assert [c.status for c in rep2.cases] == ["failed"] * len(failed)
    sharp_named = {c.id for c in rep2.cases if matched_ids(c.diagnosis)}
    assert sharp_named < {c.id for c in named}, (sorted(sharp_named), sorted(c.id for c in named))
