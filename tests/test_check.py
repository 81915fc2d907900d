"""The checker: the rounding-interval test, statuses (a case that could not be judged is never a
pass), error handling of misbehaving backends, the CLI's exit codes and JSON report."""
from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from refnorm.check import Returned, run_check
from refnorm.check.backends.numpy_backend import NumpyBackend
from refnorm.check.precision import NP, excess, round_to, rounding_interval
from refnorm.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
LN = "layer_norm/normal_f32_6x100"        # a small float32 layer_norm case
BN = "batch_norm/normal_cumavg_nbt2_train3_f32_5x3x4"   # three training steps, running stats


def _some_ids(op, n=3):
    man = json.loads(Path(os.path.join(GOLDEN, "MANIFEST.json")).read_text())
    return [e["id"] for e in man["cases"] if e["case"]["op"] == op][:n]


# ------------------------------------------------------------------------- rounding interval
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rounding_interval_is_the_set_that_rounds_to_the_value(dtype):
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.standard_normal(2000), rng.standard_normal(200) * 1e-6, [1.0, 2.0, 0.5, -4.0]])
    got = round_to(vals, dtype)
    lo, hi = rounding_interval(got)
    assert np.all(lo <= vals) and np.all(vals <= hi)
    # just inside the interval rounds to got, just outside does not (binade edges included)
    width = hi - lo
    inside_lo, inside_hi = lo + width * 1e-3, hi - width * 1e-3
    outside_lo, outside_hi = lo - width * 1e-3, hi + width * 1e-3
    g = got.astype(np.float64)
    assert np.array_equal(round_to(inside_lo, dtype).astype(np.float64), g)
    assert np.array_equal(round_to(inside_hi, dtype).astype(np.float64), g)
    assert not np.any(round_to(outside_lo, dtype).astype(np.float64) == g)
    assert not np.any(round_to(outside_hi, dtype).astype(np.float64) == g)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_overflow_to_infinity_is_exact(dtype):
    fmax = float(ml_dtypes.finfo(NP[dtype]).max)
    inf = np.array([np.inf], dtype=NP[dtype])
    lo, hi = rounding_interval(inf)
    assert hi[0] == np.inf and lo[0] > fmax
    assert excess(inf, np.array([lo[0] * 1.0000001]))[0] == 0      # beyond the threshold: inf is correct
    assert excess(inf, np.array([fmax]))[0] > 0                    # max itself must not become inf
    top = np.array([fmax], dtype=NP[dtype])
    assert excess(top, np.array([(lo[0] + fmax) / 2]))[0] == 0     # below the threshold: max is correct


def test_nan_rules():
    got = np.array([np.nan, np.nan, 1.0, np.inf], dtype=np.float32)
    ref = np.array([np.nan, 1.0, np.nan, np.inf])
    assert list(excess(got, ref)) == [0.0, np.inf, np.inf, 0.0]


def test_float64_bfloat16_rounding_is_correct_where_ml_dtypes_rounds_twice():
    """ml_dtypes before 0.7 rounds this value twice (through float32) to -0.23046875; 0.7.0 rounds once.
    refnorm's rounding is correct whichever is installed."""
    v = np.array([-0.22998046564085178])
    assert float(round_to(v, "bfloat16")[0]) == -0.2294921875


# --------------------------------------------------------------------------------- statuses
def test_numpy_backend_passes_every_golden_case():
    rep = run_check(NumpyBackend(), GOLDEN)
    s = rep.summary()
    assert s["failed"] == 0 and s["errors"] == 0 and s["skipped"] == 0, [c.message for c in rep.cases
                                                                         if c.status != "passed"][:5]
    # the exact contract's bound is the golden tolerance times the case's condition number: on the two
    # float64 constant-row cases of min_max_scale and z_score (condition ~1e16) it exceeds every array's
    # scale, so those arrays are unconstrained and the cases partial, never passed
    partial = sorted(c.id for c in rep.cases if c.status == "partial")
    assert partial == ["min_max_scale/const_f64_4x6", "z_score/const_f64_4x6"], partial
    assert s["passed"] + s["partial"] == len(rep.cases) > 500 and rep.verdict == "partial" and not rep.ok


class _Mutant(NumpyBackend):
    """The reference with one change to its returned arrays."""
    name = "mutant"

    def __init__(self, change):
        self.change = change

    def contract(self, call):
        from refnorm.check import Contract
        return Contract("strict", "block")

    def run(self, call):
        r = super().run(call)
        out, grads, state = dict(r.outputs), dict(r.grads), dict(r.state)
        self.change(out, grads, state)
        return Returned(out, grads, state)


def _one(backend, case_id, **kw):
    rep = run_check(backend, GOLDEN, case_ids=[case_id], **kw)
    assert len(rep.cases) == 1
    return rep, rep.cases[0]


def test_strict_contract_accepts_the_exactly_rounded_reference():
    rep, c = _one(_Mutant(lambda o, g, s: None), LN)
    assert c.status == "passed" and rep.ok, c.message
    assert all(a.ratio == 0 for a in c.arrays)


def _output_set(name, where, value):
    """A _Mutant change: output ``name`` (a copy) with ``value`` at ``where``."""
    def change(o, g, s):
        o[name] = o[name].copy()
        o[name][where] = value
    return change


def _nudge(arr, ulps, where=(0, 0)):
    a = arr.copy()
    for _ in range(ulps):
        a[where] = np.nextafter(a[where], np.array(np.inf, dtype=a.dtype))
    return a


@pytest.mark.parametrize("part,name", [("outputs", "y"), ("grads", "x"), ("grads", "weight"), ("grads", "bias")])
def test_a_wrong_element_fails_and_is_located(part, name):
    def change(o, g, s):
        d = {"outputs": o, "grads": g}[part]
        d[name] = d[name].copy()
        idx = (3, 4) if d[name].ndim == 2 else (4,)
        d[name][idx] = d[name][idx] * np.float32(1.001) + np.float32(1e-3)
    rep, c = _one(_Mutant(change), LN)
    assert c.status == "failed" and not rep.ok
    bad = [a for a in c.arrays if not a.passed]
    assert [(a.part, a.name) for a in bad] == [(part, name)]
    assert bad[0].over == 1 and list(bad[0].worst[0][0]) == ([3, 4] if name in ("y", "x") else [4])


def test_a_few_ulps_of_noise_pass_under_strict_but_nan_fails():
    rep, c = _one(_Mutant(lambda o, g, s: o.__setitem__("y", _nudge(o["y"], 2))), LN)
    assert c.status == "passed", c.message
    rep, c = _one(_Mutant(_output_set("y", (1, 1), np.nan)), LN)
    assert c.status == "failed" and math.isinf(c.worst_ratio)


def test_state_is_judged_step_by_step():
    def change(o, g, s):
        s["running_var"] = (s["running_var"] * np.float32(1.01)).astype(np.float32)
    rep, c = _one(_Mutant(change), BN)
    assert c.status == "failed"
    assert {a.name for a in c.arrays if not a.passed} == {"running_var"}

    def count(o, g, s):
        s["num_batches_tracked"] = np.asarray(s["num_batches_tracked"]) + 1
    rep, c = _one(_Mutant(count), BN)
    assert c.status == "failed" and {a.name for a in c.arrays if not a.passed} == {"num_batches_tracked"}


@pytest.mark.parametrize("change,match", [
    (lambda o, g, s: o.pop("y"), "returned no output 'y'"),
    (lambda o, g, s: g.pop("x"), "returned no grad 'x'"),
    (lambda o, g, s: o.__setitem__("y", o["y"][:-1]), "has shape"),
    (lambda o, g, s: o.__setitem__("y", o["y"].astype(np.float16)), "less precise than the case dtype"),
    (lambda o, g, s: o.__setitem__("y", o["y"].astype(np.int32)), "has dtype int32"),
    (lambda o, g, s: o.__setitem__("y", o["y"].tolist()), "expected a numpy.ndarray"),
])
def test_malformed_results_are_errors_not_passes(change, match):
    rep, c = _one(_Mutant(change), LN)
    assert c.status == "error" and match in c.message, c.message
    assert not rep.ok


@pytest.mark.parametrize("where,how", [("run", "value"), ("supports", "value"), ("state", "value"), ("run", "nan")])
def test_a_backend_that_writes_into_its_inputs_is_an_error(where, how):
    """Any bit of an input, cotangent or state array changed by the backend (in run, or in supports on the
    copies it is then given) is an error naming the array (test_unchanged_compares_bits_whatever_the_layout:
    down to a zero's sign or a NaN's payload). The same case passes where nothing is written."""
    def poke(a):
        i = np.unravel_index(0, a.shape)
        a[i] = {"value": a[i] + 1.0, "nan": np.nan}[how]

    class Writer(NumpyBackend):
        name = "writer"

        def supports(self, call):
            if where == "supports":
                poke(call.inputs["x"])
            return super().supports(call)

        def run(self, call):
            r = super().run(call)
            if where == "run":
                poke(call.cotangents["y"])
            if where == "state":
                poke(call.state["running_mean"])
            return r
    case = BN if where == "state" else LN
    base, _ = _one(NumpyBackend(), case)
    rep, c = _one(Writer(), case)
    what = {"run": "cotangent", "supports": "input", "state": "state"}[where]
    assert base.ok and c.status == "error" and f"modified its {what} array(s)" in c.message, c.message


def test_unchanged_compares_bits_whatever_the_layout():
    from refnorm.check.core import _unchanged
    from refnorm.golden import layouts
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4, 5)).astype(ml_dtypes.bfloat16)
    a.reshape(-1)[:3] = np.array([np.nan, -0.0, 0.0]).astype(ml_dtypes.bfloat16)
    for layout in layouts.LAYOUTS:
        mine = layouts.apply(layout, a)
        assert _unchanged(mine, a)
        mine[np.unravel_index(1, a.shape)] = ml_dtypes.bfloat16(0.0)     # -0 -> +0: equal values, another bit
        assert not _unchanged(mine, a)
    nan = np.array([np.nan, 1.0])
    other = nan.copy()
    other.view(np.uint64)[0] |= 1                                # another NaN payload
    assert _unchanged(nan.copy(), nan) and not _unchanged(other, nan)
    assert _unchanged(a.astype(np.float32), a.astype(np.float32))
    assert not _unchanged(a[:1], a)                              # a replaced entry of another shape


def test_missing_state_is_an_error():
    rep, c = _one(_Mutant(lambda o, g, s: s.clear()), BN)
    assert c.status == "error" and "state" in c.message


def test_a_raising_backend_errors_that_case_and_the_rest_still_run():
    class Flaky(NumpyBackend):
        name = "flaky"

        def run(self, call):
            if call.op == "layer_norm":
                raise RuntimeError("kernel launch failed")
            return super().run(call)
    ids = _some_ids("layer_norm", 2) + _some_ids("rms_norm", 2)
    rep = run_check(Flaky(), GOLDEN, case_ids=ids)
    st = {c.id: c.status for c in rep.cases}
    assert [st[i] for i in ids] == ["error", "error", "passed", "passed"]
    assert "kernel launch failed" in rep.cases[0].message and not rep.ok


def test_a_hanging_backend_times_out():
    class Hang(NumpyBackend):
        name = "hang"

        def run(self, call):
            while True:
                time.sleep(0.01)
    t0 = time.perf_counter()
    rep, c = _one(Hang(), LN, timeout=0.3)
    assert c.status == "error" and "did not return within 0.3 s" in c.message
    assert time.perf_counter() - t0 < 5


def test_everything_skipped_is_not_a_pass():
    class Nothing(NumpyBackend):
        name = "nothing"

        def supports(self, call):
            return "this backend implements nothing"
    rep = run_check(Nothing(), GOLDEN, ops=["layer_norm"])
    assert rep.count("skipped") == len(rep.cases) > 0 and rep.count("passed") == 0
    assert not rep.ok


def test_prepare_is_a_hint_given_ahead_that_changes_no_verdict():
    """A backend's optional ``prepare`` gets each case's calls (every step, shapes of the case) before
    the case is run, in order; one that raises, or is absent, changes no verdict."""
    from refnorm.check import core
    ids = [BN] + _some_ids("layer_norm", 4)
    events = []

    class Hinted(NumpyBackend):
        def prepare(self, calls):
            events.append(("prepare", calls[0].op, len(calls), calls[0].inputs["x"].shape))
            if len(events) % 2:
                raise RuntimeError("a failing hint")

        def run(self, call):
            events.append(("run", call.op))
            return super().run(call)
    plain = run_check(NumpyBackend(), GOLDEN, case_ids=ids)
    hinted = run_check(Hinted(), GOLDEN, case_ids=ids)
    assert [(c.id, c.status, c.verdicts(), c.worst_ratio) for c in hinted.cases] == \
        [(c.id, c.status, c.verdicts(), c.worst_ratio) for c in plain.cases]
    hints = [e for e in events if e[0] == "prepare"]
    assert [h[1] for h in hints] == [c.op for c in plain.cases] and len(hints) == len(ids)
    assert [h[2] for h in hints if h[1] == "batch_norm"] == [3]                           # BN: three steps
    first_run = next(i for i, e in enumerate(events) if e[0] == "run")
    assert first_run == min(len(ids), core.PREPARE_AHEAD + 1)         # the next cases are hinted before


def test_an_op_without_a_derived_bound_is_skipped_under_strict():
    from refnorm.check import bounds
    unbounded = [n for n in ("unified_norm",) if n not in bounds.BOUNDED]
    if not unbounded:
        pytest.skip("every op has a derived bound now")
    rep = run_check(_Mutant(lambda o, g, s: None), GOLDEN, ops=unbounded)
    assert rep.count("skipped") == len(rep.cases) > 0 and not rep.ok
    assert "no derived tolerance" in rep.cases[0].message


# ------------------------------------------------------------------------------------- CLI
def test_cli_check_numpy_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["check", "--backend", "numpy", "--ops", "layer_norm", "group_norm", "--golden", GOLDEN,
               "--json", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0, text
    data = json.loads(out.read_text())
    assert data["summary"]["failed"] == 0 and data["summary"]["passed"] == len(data["cases"]) > 0
    assert {c["status"] for c in data["cases"]} == {"passed"}
    assert "layer_norm" in text and "refnorm check: OK" in text


def test_cli_exit_codes(tmp_path, capsys, monkeypatch):
    from refnorm.check import backends
    assert main(["check", "--backend", "no-such-backend"]) == 2
    assert main(["check", "--backend", "numpy", "--ops", "not_a_norm"]) == 2
    assert main(["check", "--backend", "numpy", "--case", "layer_norm/does_not_exist", "--golden", GOLDEN,
                 "--no-progress"]) == 2
    assert main(["check", "--backend", "numpy", "--golden", str(tmp_path / "missing"), "--no-progress"]) == 2

    class Unavailable(NumpyBackend):
        def available(self):
            return "no device"
    monkeypatch.setitem(backends.BUILTIN, "gone", Unavailable)
    assert main(["check", "--backend", "gone"]) == 3
    assert "unavailable: no device" in capsys.readouterr().err

    monkeypatch.setitem(backends.BUILTIN, "bad", lambda: _Mutant(lambda o, g, s: o.__setitem__("y", o["y"] * 2)))
    rc = main(["check", "--backend", "bad", "--case", LN, "--golden", GOLDEN, "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 1 and "FAILED " + LN in text
    assert f"reproduce: refnorm check --backend bad --golden {GOLDEN} --case {LN}" in text


def test_cli_tampered_golden_is_exit_2(tmp_path):
    d = tmp_path / "golden"
    shutil.copytree(GOLDEN, d)
    f = d / (LN + ".npz")
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 1
    f.write_bytes(bytes(data))
    assert main(["check", "--backend", "numpy", "--case", LN, "--golden", str(d), "--no-progress"]) == 2


# --------------------------------------------------------------- issue 8: bias, defects, warnings
BF16_ROWS = "layer_norm/normal_bf16_6x100"


class _Unrounded(NumpyBackend):
    """The float64 reference, changed by ``f(outputs64)`` BEFORE the single rounding to the case dtype."""
    name = "unrounded"

    def __init__(self, f, kind="strict"):
        self.f, self.kind = f, kind

    def contract(self, call):
        from refnorm.check import Contract
        return Contract(self.kind, "block")

    def run(self, call):
        import refnorm
        from refnorm.check.precision import round_to
        res = refnorm.evaluate(call.op, {k: np.asarray(v, np.float64) for k, v in call.inputs.items()},
                               config=dict(call.config), grad_outputs={k: np.asarray(v, np.float64)
                                                                       for k, v in call.cotangents.items()})
        outs = {k: np.asarray(v) for k, v in res.outputs.items()}
        self.f(outs, {k: np.asarray(v, np.float64) for k, v in call.inputs.items()})
        return Returned({k: round_to(v, call.dtype) for k, v in outs.items()},
                        {k: round_to(v, call.dtype) for k, v in res.grads.items()})


def test_a_scale_bias_below_half_an_ulp_fails():
    """llama.cpp's class of bug: every element scaled by 1 + 2^-9 before its rounding, under half a
    bfloat16 ulp each. The strict per-element bound already sees the rounding flips it causes (the bias
    test is the second line: tests/test_bias.py); the unbiased control passes both."""
    def scale(o, i):
        o["y"] = o["y"] * (1 + 2.0 ** -9)
    rep, c = _one(_Unrounded(scale), BF16_ROWS)
    assert c.status == "failed", c.message
    y = next(a for a in c.arrays if a.name == "y")
    assert y.err_u < 1.0                              # under one unit roundoff of bfloat16 per element
    rep, c = _one(_Unrounded(lambda o, i: None), BF16_ROWS)       # the control
    assert c.status == "passed" and max(a.bias for a in c.arrays) <= 1


def test_infinity_where_the_reference_is_representable_fails_whatever_the_bound():
    rep, c = _one(_Mutant(_output_set("y", (0, 0), np.inf)), LN)
    assert c.status == "failed" and math.isinf(c.worst_ratio)


def test_relaxed_contract_reports_strict_violations_as_warnings():
    from refnorm.check.precision import round_to

    def rstd_in_bf16(o, i):   # y as if rstd had been rounded to bfloat16, row by row
        rs = o["rstd"]
        b = i.get("bias", 0.0)
        o["y"] = (o["y"] - b) * round_to(rs, "bfloat16").astype(np.float64) / rs + b
    rep, c = _one(_Unrounded(rstd_in_bf16, kind="stats_d"), BF16_ROWS)
    assert c.status == "passed", c.message                    # allowed by stats_d ...
    assert c.warnings and c.to_json()["precision_warnings"]   # ... and reported against strict
    rep, c = _one(_Unrounded(rstd_in_bf16), BF16_ROWS)
    assert c.status == "failed"                                # and it fails a strict backend
