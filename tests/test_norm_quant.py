"""Issue 18, norm_quant: a norm with a quantized output (float8 e4m3fn / e5m2, int8; static or dynamic scale).

* the reference: the scale rules (amax / qmax, scale_ub, the min_scale floor, the static scale), the
  saturation, q as the pre-rounding value and ``quantize`` as one correct rounding; bad input refused,
  naming the value (exit 2 from the command line);
* the judge's rule for quantized outputs: one step off only within the bound of a rounding boundary or
  of the saturation point, exact elsewhere; a q returned in another dtype is an error, never a pass; an
  unconstrained q is never verified;
* the torch adapter and the emulated fused kernel pass every golden case; each planted pitfall (R-qround,
  R-qnan, R-qub, R-qrcp16) fails at least two golden cases and the diagnosis names it on every one.
"""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import refnorm
from refnorm.check.backends.base import Returned
from refnorm.check.core import _judge_quantized, check_case, reference, run_check
from refnorm.check.diagnosis import matched_ids
from refnorm.cli import main
from refnorm.golden import commands, store
from refnorm.norms.norm_quant import QUANT_DTYPES, quantize

from helpers import StrictTestBackend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
E4M3 = ml_dtypes.float8_e4m3fn


def _eval(x, cfg, **inputs):
    return refnorm.evaluate("norm_quant", {"x": x, **inputs}, config={"normalized_shape": [x.shape[-1]], **cfg})


# ------------------------------------------------------------------------------------- the reference
def test_dynamic_scale_puts_each_rows_amax_on_qmax():
    x = np.array([[1.0, -2.0, 3.0, 0.5], [4.0, 0.0, 0.0, 0.0]])
    for qd, qmax in (("float8_e4m3fn", 448.0), ("float8_e5m2", 57344.0), ("int8", 127.0)):
        r = _eval(x, {"quant_dtype": qd})
        y = refnorm.evaluate("rms_norm", {"x": x}, config={"normalized_shape": [4], "eps": 1e-5}).outputs["y"]
        amax = np.abs(y).max(axis=1, keepdims=True)
        np.testing.assert_array_equal(r.outputs["amax"], amax)
        np.testing.assert_array_equal(r.outputs["scale"], amax / qmax)
        np.testing.assert_array_equal(r.outputs["q"], y / (amax / qmax))
        assert np.abs(r.outputs["q"]).max(axis=1).tolist() == [qmax, qmax]


def test_scale_ub_caps_the_scale_and_the_values_beyond_saturate():
    x = np.array([[1.0, 1.0, 1.0, 100.0], [1.0, -1.0, 1.0, -1.0]])
    r = _eval(x, {"quant_dtype": "int8", "scale_ub": 0.01})
    y = refnorm.evaluate("rms_norm", {"x": x}, config={"normalized_shape": [4], "eps": 1e-5}).outputs["y"]
    assert r.outputs["scale"][0, 0] == 0.01 and r.outputs["scale"][1, 0] == np.abs(y[1]).max() / 127
    assert r.outputs["q"][0, 3] == 127.0 and y[0, 3] / 0.01 > 127     # saturated at qmax
    assert r.outputs["amax"][0, 0] == np.abs(y[0]).max()               # amax before the bound


def test_min_scale_floor_on_zero_and_tiny_rows():
    x = np.array([[0.0, 0.0, 0.0], [1e-9, -2e-9, 3e-9]])
    r = _eval(x, {})
    assert (r.outputs["scale"] == 1.0 / (448 * 512)).all()
    assert (r.outputs["q"][0] == 0).all() and np.abs(r.outputs["q"][1]).max() < 448
    r = _eval(x, {"min_scale": 2.0 ** -23, "quant_dtype": "int8"})
    assert (r.outputs["scale"] == 2.0 ** -23).all()


def test_static_scale_saturates_and_nan_stays_in_its_row():
    x = np.array([[1.0, -3.0, 2.0], [np.nan, 1.0, 2.0]])
    r = _eval(x, {"norm": "layer_norm"}, static_scale=np.array([1.0 / 448]))
    assert (r.outputs["scale"] == 1.0 / 448).all()
    assert np.abs(r.outputs["q"][0]).max() == 448.0                   # |y| > 1 saturates
    assert np.isnan(r.outputs["q"][1]).all() and np.isnan(r.outputs["amax"][1]).all()
    assert not np.isnan(r.outputs["q"][0]).any()


def test_quantize_is_one_saturating_round_to_nearest_even():
    q = np.array([0.0, 0.3, 448.0, 500.0, -1e9, 1.0625, 1.1875])        # 1.0625: a tie between 1 and 1.125
    got = quantize(q, "float8_e4m3fn")
    assert got.dtype == np.dtype(E4M3)
    assert got.astype(np.float64).tolist() == [0.0, 0.3125, 448.0, 448.0, -448.0, 1.0, 1.25]
    assert quantize(np.array([2.5, 3.5, -200.0, 200.0]), "int8").tolist() == [2, 4, -128, 127]
    assert quantize(np.array([70000.0]), "float8_e5m2").astype(np.float64).tolist() == [57344.0]


@pytest.mark.parametrize("config,inputs,needle", [
    ({"quant_dtype": "float8_e4m3"}, {}, "quant_dtype='float8_e4m3'"),
    ({"quant_dtype": "uint8"}, {}, "quant_dtype='uint8'"),
    ({"scale_ub": 0.0}, {}, "scale_ub=0.0; expected a number > 0"),
    ({"scale_ub": -1.0}, {}, "scale_ub=-1.0"),
    ({"min_scale": -1e-9}, {}, "min_scale=-1e-09; expected a number >= 0 (0: no floor)"),
    ({}, {"static_scale": np.array([0.0])}, "static_scale=0.0; expected a finite number > 0"),
    ({}, {"static_scale": np.array([-0.5])}, "static_scale=-0.5"),
    ({}, {"static_scale": np.array([0.5, 0.5])}, "'static_scale' has shape (2,)"),
    ({"scale_ub": 1.0}, {"static_scale": np.array([0.5])}, "scale_ub=1.0"),
    ({"norm": "rms_norm"}, {"bias": np.zeros(3)}, "takes no 'bias'"),
    ({"norm": "group_norm"}, {}, "norm='group_norm'"),
])
def test_bad_input_names_the_value(config, inputs, needle):
    with pytest.raises(refnorm.RefnormError) as e:
        _eval(np.ones((2, 3)), config, **inputs)
    assert needle in str(e.value)


def test_bad_input_exits_2_from_the_command_line(tmp_path, capsys):
    s = tmp_path / "s.npy"
    np.save(s, np.array([-0.5]))
    assert main(["eval", "norm_quant", "--random", "x=2,3", "--input", f"static_scale={s}",
                 "--config", '{"normalized_shape": [3]}']) == 2
    assert "static_scale=-0.5" in capsys.readouterr().err
    assert main(["eval", "norm_quant", "--random", "x=2,3", "--config",
                 '{"normalized_shape": [3], "quant_dtype": "fp8"}']) == 2
    assert "quant_dtype='fp8'" in capsys.readouterr().err
    assert main(["eval", "norm_quant", "--random", "x=2,3", "--config",
                 '{"normalized_shape": [3], "scale_ub": -2}']) == 2
    assert "scale_ub=-2" in capsys.readouterr().err


def test_forward_only():
    assert refnorm.get("norm_quant").differentiable == ()
    r = refnorm.evaluate("norm_quant", {"x": np.ones((2, 3))}, config={"normalized_shape": [3]}, grad_outputs={})
    assert dict(r.grads) == {}
    with pytest.raises(refnorm.RefnormError, match="forward-only"):
        refnorm.evaluate("norm_quant", {"x": np.ones((2, 3))}, config={"normalized_shape": [3]},
                         grad_outputs={"q": np.ones((2, 3))})


# ------------------------------------------------------------------------------------------ the judge
def _jq(got, ref, E, qd):
    return _judge_quantized(0, "outputs", "q", np.asarray(got, dtype=QUANT_DTYPES[qd][0]),
                            np.asarray(ref, dtype=np.float64), np.asarray(E, dtype=np.float64), qd)


def test_one_step_off_only_within_the_bound_of_a_rounding_boundary():
    # int8: boundary 10.5. 10.49 is within 0.02 of it: 10 and 11 both pass; 12 never
    assert _jq([10], [10.49], [0.02], "int8").passed
    assert _jq([11], [10.49], [0.02], "int8").passed
    assert not _jq([12], [10.49], [0.02], "int8").passed
    # 10.3 is 0.2 from the boundary: only the correct rounding passes
    a = _jq([11], [10.3], [0.02], "int8")
    assert not a.passed and a.ratio == pytest.approx(0.2 / 0.02) and a.over == 1
    assert _jq([10], [10.3], [0.02], "int8").verdict == "verified"
    # e4m3fn: between 1.0 and 1.125 the boundary is 1.0625
    assert _jq([1.125], [1.0624], [2e-4], "float8_e4m3fn").passed
    assert not _jq([1.125], [1.0624], [1e-5], "float8_e4m3fn").passed


def test_saturation_point_and_nan():
    # the reference's q is clipped: 448 exactly is the saturation point; 416 is one step below, whose
    # interval ends at 432: it passes only with a bound of 16
    assert _jq([448], [448.0], [0.0], "float8_e4m3fn").passed
    assert not _jq([416], [448.0], [1.0], "float8_e4m3fn").passed
    assert _jq([416], [448.0], [16.0], "float8_e4m3fn").passed
    assert _jq([127], [127.0], [0.0], "int8").passed and _jq([-128], [-128.0], [0.0], "int8").passed
    assert _jq([57344], [57344.0], [0.0], "float8_e5m2").passed
    nan = np.array([np.nan]).astype(E4M3)
    assert not _jq(nan, [448.0], [1.0], "float8_e4m3fn").passed        # NaN where saturation is due
    assert _jq(nan, [np.nan], [1.0], "float8_e4m3fn").passed
    inf = np.array([np.inf]).astype(ml_dtypes.float8_e5m2)
    assert not _jq(inf, [57344.0], [1e6], "float8_e5m2").passed        # a saturating quantizer never overflows


def test_a_bound_as_large_as_the_values_is_unconstrained_never_verified():
    a = _jq([3, 100], [3.2, 100.0], [200.0, 200.0], "int8")
    assert a.passed and a.verdict == "unconstrained"


def test_q_in_another_dtype_is_an_error():
    with pytest.raises(TypeError, match="expected the quantized dtype float8_e4m3fn"):
        _judge_quantized(0, "outputs", "q", np.array([1.0], dtype=np.float32), np.array([1.0]), np.array([0.0]),
                         "float8_e4m3fn")
    with pytest.raises(TypeError, match="expected the quantized dtype int8"):
        _judge_quantized(0, "outputs", "q", np.array([1], dtype=np.int16), np.array([1.0]), np.array([0.0]), "int8")


class _Ref(StrictTestBackend):
    """The reference, rounded once per output dtype, with an optional defect."""
    name = "nq-test"

    def __init__(self, defect=None):
        self.defect = defect

    def run(self, call):
        r = reference(call.op, call.config, call.training, call.inputs, {}, {})
        qd = call.config.get("quant_dtype", "float8_e4m3fn")
        w = np.float64 if call.dtype == "float64" else np.float32
        q = r.outputs["q"]
        if self.defect == "truncate" and qd == "int8":
            out = {"q": np.trunc(q).astype(np.int8)}
        elif self.defect == "float32":
            out = {"q": quantize(q, qd).astype(np.float32)}
        else:
            out = {"q": quantize(q, qd)}
        if self.defect != "no_scale":
            out["scale"] = r.outputs["scale"].astype(w)
        out["amax"] = r.outputs["amax"].astype(w)
        return Returned(out)


def _cases(**kw):
    man = store.read_manifest(GOLDEN)
    return [commands.load_case(GOLDEN, e["id"], manifest=man) for e in man["cases"]
            if e["case"]["op"] == "norm_quant" and all(e["case"]["config"].get(k) == v for k, v in kw.items())]


# constant rows (const; mean1e4 in float16 rounds the rows to constants): a float32 kernel's statistics are
# noise amplified by rstd, every bound exceeds the values' scale: unconstrained, never verified
ILL_POSED = ("const", "mean1e4")


def _as_expected(r, case):
    """A correct backend: passed, or on an ill-posed case partial with every array unconstrained."""
    if case.regime in ILL_POSED:
        return r.status == "partial" and all(a.verdict == "unconstrained" for a in r.arrays) and not r.unchecked
    return r.status == "passed" and {a.name: a.verdict for a in r.arrays} == \
        {"q": "verified", "scale": "verified", "amax": "verified"}


def test_correct_quantization_is_verified_and_defects_are_not_passed():
    cases = _cases()
    assert len(cases) >= 20 and sum(c.regime in ILL_POSED for c in cases) == 2
    for c in cases:
        r = check_case(_Ref(), c)
        assert _as_expected(r, c), (c.id, r.status, r.message)
    for c in [c for c in _cases(quant_dtype="int8") if c.regime != "zero"]:   # (all-zero rows: q = 0 either way)
        # round toward zero: one step off, far from a boundary
        r = check_case(_Ref("truncate"), c, diagnose=False)
        assert r.status == "failed" and r.failing_arrays() == ["output.q"], (c.id, r.message)
    c = cases[0]
    r = check_case(_Ref("float32"), c, diagnose=False)
    assert r.status == "error" and "expected the quantized dtype" in r.message
    r = check_case(_Ref("no_scale"), c, diagnose=False)
    assert r.status == "error" and "returned no output 'scale'" in r.message


def test_torch_adapter_passes_every_golden_case():
    pytest.importorskip("torch")
    from refnorm.check.backends.torch_backend import TorchBackend
    rep = run_check(TorchBackend(), GOLDEN, ops=["norm_quant"])
    by_id = {c.id: c for c in _cases()}
    assert len(rep.cases) == len(by_id) and rep.count("failed") == rep.count("error") == 0
    assert all(_as_expected(r, by_id[r.id]) for r in rep.cases), \
        [(c.id, c.status, c.message[:200]) for c in rep.cases if not _as_expected(c, by_id[c.id])]


# ------------------------------------------------------------------------------------------ pitfalls
sys.path.insert(0, os.path.join(ROOT, "tests"))
from planted import report  # noqa: E402
from planted.pitfalls import SUPPLEMENTARY  # noqa: E402

QUANT_ROWS = [p for p in SUPPLEMENTARY if p.ops == ("norm_quant",)]


def test_the_emulated_fused_kernel_passes_every_golden_case():
    o = report.run(None, "norm_quant")
    ill = {c.id for c in _cases() if c.regime in ILL_POSED}
    assert len(o.cases) >= 20 and all(c.status == ("partial" if c.id in ill else "passed") for c in o.cases), \
        [(c.id, c.status, c.message[:200]) for c in o.cases if c.status != "passed"]


@pytest.mark.parametrize("planted", QUANT_ROWS, ids=[p.pitfall_id for p in QUANT_ROWS])
def test_each_quantization_pitfall_fails_two_golden_cases_and_is_named(planted):
    o = report.run(planted.mutation, "norm_quant")
    failed = [c for c in o.cases if c.status == "failed"]
    assert len(failed) >= 2, (planted.pitfall_id, [c.id for c in failed])
    for c in failed:
        assert planted.pitfall_id in matched_ids(c.diagnosis), (c.id, c.diagnosis)


def test_four_quantization_rows_are_planted():
    assert sorted(p.pitfall_id for p in QUANT_ROWS) == ["R-qnan", "R-qrcp16", "R-qround", "R-qub"]


# ---------------------------------------------------------------------------- the bound and its derivation
def test_the_checkers_bound_is_the_derived_one_and_holds_for_perturbations():
    from refnorm.check.bounds import _one
    from refnorm.check.bounds import norm_quant as NB
    from refnorm.derivations import norm_quant as D
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 40))
    w = 1 + 0.5 * rng.standard_normal(40)
    u = 2.0 ** -24
    for qd in ("float8_e4m3fn", "int8"):
        ub = 3.2 / QUANT_DTYPES[qd][2]                   # rows with an amax above 3.2 are capped
        cfg = {**refnorm.get("norm_quant").options, "normalized_shape": [40], "quant_dtype": qd, "scale_ub": ub}
        o, _, _ = NB.bound({"x": x, "weight": w}, cfg, True, None, u, "block", "strict", "float32")
        E_y = _one("rms_norm", {"x": x, "weight": w}, {"normalized_shape": [40], "eps": 1e-5}, True, None, {}, None,
                   u, "block", "strict", "float32")[0]["y"]
        r = refnorm.evaluate("norm_quant", {"x": x, "weight": w}, config=cfg)
        s, q = r.outputs["scale"], r.outputs["q"]
        y = refnorm.evaluate("rms_norm", {"x": x, "weight": w}, config={"normalized_shape": [40], "eps": 1e-5}).outputs["y"]
        np.testing.assert_allclose(o["amax"], E_y.max(axis=1, keepdims=True), rtol=1e-12)
        dyn = s < ub                                      # rows whose scale is amax / qmax (not capped)
        assert dyn.any() and (~dyn).any()
        E_s = o["scale"]
        np.testing.assert_allclose(E_s, o["amax"] / QUANT_DTYPES[qd][2] + 3 * u * (s + o["amax"] / QUANT_DTYPES[qd][2]),
                                   rtol=1e-12)
        np.testing.assert_allclose(o["q"], D.E_q(E_y, np.abs(y / s), s, E_s / s, u), rtol=1e-12)
        # perturbations at the ends of the derived ranges stay within the bound
        for _ in range(20):
            eta = rng.choice([-1.0, 1.0], y.shape) * E_y / np.abs(y)
            es = rng.choice([-1.0, 1.0], s.shape) * E_s / s
            d1, d2 = (rng.choice([-u, u], y.shape) for _ in range(2))
            qb = y * (1 + eta) / (s * (1 + es)) * (1 + d1) * (1 + d2)
            lo, hi = QUANT_DTYPES[qd][1:]
            assert (np.abs(np.clip(qb, lo, hi) - q) <= o["q"]).all()


# ---------------------------------------------------------------------------------- generated cases
def test_a_recipe_regenerates_a_golden_row_and_the_production_recipes_pass_torch():
    from refnorm.check.core import run_generated
    from refnorm.golden import cases as T
    from refnorm.golden import generate as G
    row = T.by_id()["norm_quant/outlier_rms_e4m3_dyn_ub8_bf16_8x256"]
    r = G.parse(f"norm_quant shape=8x256 dtype=bfloat16 regime=outlier ub=8.0 seed={row.seed}")
    got, want = G.materialize(r), commands.load_case(GOLDEN, row.id)
    assert set(got.steps[0].inputs) == set(want.steps[0].inputs) == {"x", "weight"}
    for k in want.steps[0].inputs:
        assert np.array_equal(np.asarray(got.steps[0].inputs[k], dtype=np.float64),
                              np.asarray(want.steps[0].inputs[k], dtype=np.float64))
    assert dict(got.steps[0].cotangents) == {} and got.steps[0].compare["grads"] == ()
    pytest.importorskip("torch")
    from refnorm.check.backends.torch_backend import TorchBackend
    from refnorm.golden.suites import PRODUCTION
    recipes = [G.parse(t) for t, _ in PRODUCTION if t.startswith("norm_quant ")]
    assert len(recipes) >= 5
    rep = run_generated(TorchBackend(), recipes)
    assert rep.verdict == "ok", [(c.id, c.status, c.message[:200]) for c in rep.cases if c.status != "passed"]


def test_quantize_rounds_once_from_float64():
    """Earlier ml_dtypes releases cast float64 to float8 through float32, rounding twice: -151.99999999999997
    became the float32 midpoint -152 and then -160 (ml_dtypes 0.7.0 rounds once). refnorm's quantizers round
    once whatever the installed ml_dtypes does (refnorm/norms/_rounding.py)."""
    from refnorm.norms import norm_quant_block as NB
    from refnorm.norms.norm_quant import quantize
    v = np.array([-151.99999999999997, 151.99999999999997, 152.00000000000003, 152.0, 4.999999999999999])
    assert list(quantize(v[:4], "float8_e4m3fn").astype(np.float64)) == [-144.0, 144.0, 160.0, 160.0]
    assert list(NB.quantize(v[:4], "float8_e4m3fn").astype(np.float64)) == [-144.0, 144.0, 160.0, 160.0]
    assert float(NB.quantize(v[4:], "float4_e2m1fn").astype(np.float64)[0]) == 4.0
    assert list(NB.round_e4m3(v[:2])) == [-144.0, 144.0]
