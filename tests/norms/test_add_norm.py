"""add_norm (residual add + layer/rms norm), adaptive_layer_norm and layer_norm's weight_offset: the
gradients against central differences, the bad inputs, and what the checker holds the fused kernels to
(residual_out judged in float32 under residual_in_fp32; flash-attention's prenorm backward from a
float16 stored residual fails the default contract and passes only a declared epi_d)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import refnorm
from refnorm.check.core import run_check
from refnorm.errors import ConfigError, ShapeError

from helpers import VariantBackend, central_differences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "golden")


def _fd(op, inputs, config, cots, keys, h=1e-6):
    """Central differences of sum(cot * output) (residual_out's only with prenorm) for each input in keys."""
    def loss(a):
        o = refnorm.evaluate(op, a, config=config).outputs
        return sum(float((o[k] * c).sum()) for k, c in cots.items()
                   if k == "y" or config.get("prenorm", True))
    return {k: central_differences(loss, inputs, k, h) for k in keys}


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_add_norm_gradients_are_the_derivatives(norm, prenorm):
    rng = np.random.default_rng(18)
    x, res = rng.standard_normal((3, 6)), rng.standard_normal((3, 6)) + 2
    inputs = {"x": x, "residual": res, "weight": rng.standard_normal(6), "bias": rng.standard_normal(6),
              "mask": (rng.random((3, 6)) > 0.3).astype(float), "rowscale": rng.standard_normal(3)}
    cfg = {"normalized_shape": [6], "norm": norm, "dropout_p": 0.25, "prenorm": prenorm, "weight_offset": 0.5}
    cots = {"y": rng.standard_normal((3, 6)), "residual_out": rng.standard_normal((3, 6))}
    r = refnorm.evaluate("add_norm", inputs, config=cfg, grad_outputs=cots)
    keys = ["x", "residual", "weight", "bias", "rowscale"]
    fd = _fd("add_norm", inputs, cfg, cots, keys)
    for k in keys:
        np.testing.assert_allclose(r.grads[k], fd[k], rtol=1e-6, atol=1e-7, err_msg=k)
    np.testing.assert_array_equal(r.grads["mask"], 0.0)          # a 0/1 sample: not differentiable
    s = x * inputs["mask"] * inputs["rowscale"][:, None] / 0.75 + res
    np.testing.assert_allclose(r.outputs["residual_out"], s, rtol=1e-15)
    # without the branch's scale and the residual, add_norm is the plain op
    plain = refnorm.evaluate(norm, {"x": s, "weight": inputs["weight"] + 0.5},
                             config={"normalized_shape": [6], "eps": 1e-5}, grad_outputs={"y": cots["y"]})
    np.testing.assert_allclose(r.outputs["y"] - inputs["bias"], plain.outputs["y"], rtol=1e-12, atol=1e-14)


def test_adaptive_layer_norm_gradients_and_layer_norm_weight_offset():
    rng = np.random.default_rng(19)
    inputs = {"x": rng.standard_normal((2, 4, 5)), "scale": rng.standard_normal((2, 5)),
              "shift": rng.standard_normal((2, 5))}
    cots = {"y": rng.standard_normal((2, 4, 5))}
    r = refnorm.evaluate("adaptive_layer_norm", inputs, grad_outputs=cots)
    fd = _fd("adaptive_layer_norm", inputs, {}, cots, ["x", "scale", "shift"])
    for k in fd:
        np.testing.assert_allclose(r.grads[k], fd[k], rtol=1e-6, atol=1e-7, err_msg=k)
    # one sample is layer_norm with weight 1 + scale and bias shift
    ln = refnorm.evaluate("layer_norm", {"x": inputs["x"][0], "weight": 1 + inputs["scale"][0],
                                         "bias": inputs["shift"][0]},
                          config={"normalized_shape": [5], "eps": 1e-6})
    np.testing.assert_allclose(r.outputs["y"][0], ln.outputs["y"], rtol=1e-14, atol=1e-15)
    # zero-centred gamma: weight_offset=1 is the weight 1 + w, in both engines; dweight unchanged
    x, w, dy = rng.standard_normal((3, 7)), rng.standard_normal(7), rng.standard_normal((3, 7))
    for engine in ("fast", "spec"):
        a = refnorm.evaluate("layer_norm", {"x": x, "weight": w}, config={"normalized_shape": 7, "weight_offset": 1.0},
                             grad_outputs={"y": dy}, engine=engine)
        b = refnorm.evaluate("layer_norm", {"x": x, "weight": w + 1}, config={"normalized_shape": 7},
                             grad_outputs={"y": dy}, engine=engine)
        for k in ("x", "weight"):
            np.testing.assert_array_equal(a.grads[k], b.grads[k])
        np.testing.assert_array_equal(a.outputs["y"], b.outputs["y"])


@pytest.mark.parametrize("inputs,config,err,match", [
    ({"residual": np.ones((2, 4))}, {}, ShapeError, r"'residual' has shape \(2, 4\); expected the shape of 'x'"),
    ({"mask": np.full((2, 3), 0.5)}, {"dropout_p": 0.5}, ConfigError, r"'mask' holds 0.5; expected a keep-mask"),
    ({}, {"dropout_p": 1.0}, ConfigError, r"dropout_p=1.0; expected a number in \[0, 1\)"),
    ({}, {"dropout_p": -0.1}, ConfigError, r"dropout_p=-0.1"),
    ({}, {"dropout_p": 0.1}, ConfigError, r"dropout_p=0.1 needs a 'mask' input"),
    ({"rowscale": np.ones(3)}, {}, ShapeError, r"'rowscale' has shape \(3,\); expected one value per row"),
    ({}, {"norm": "batch_norm"}, ConfigError, r"norm='batch_norm'"),
    ({}, {"weight_offset": 1.0}, ConfigError, r"weight_offset=1.0 needs a 'weight'"),
])
def test_add_norm_bad_input_is_named(inputs, config, err, match):
    with pytest.raises(err, match=match):
        refnorm.evaluate("add_norm", {"x": np.ones((2, 3)), **inputs}, config={"normalized_shape": [3], **config})


def test_bad_input_exits_2_from_the_cli(capsys):
    from refnorm.cli import main
    code = main(["eval", "add_norm", "--random", "x=2,3", "--config",
                 '{"normalized_shape": [3], "dropout_p": 1.5}'])
    assert code == 2 and "dropout_p=1.5" in capsys.readouterr().err
    with pytest.raises(ShapeError, match=r"'scale' has shape \(3, 4\); expected \(batch, hidden\) = \(2, 4\)"):
        refnorm.evaluate("adaptive_layer_norm", {"x": np.ones((2, 3, 4)), "scale": np.ones((3, 4))})


def test_flash_attention_prenorm_backward_is_held_to_the_exact_gradient():
    """The backward recomputed from the float16 stored residual: fails on the mean-shifted float16 case
    under the default contract (named R-fa-prenorm), passes when the backend declares epi_d."""
    case = "add_norm/mean1e3_p_rs_xnormal_f16_4x128"
    strict = run_check(VariantBackend("add_norm", "bwd_from_stored_residual", "strict"), GOLDEN, case_ids=[case])
    c = strict.cases[0]
    assert c.status == "failed" and "grad" in c.message and "R-fa-prenorm" in c.diagnosis["message"], c.message
    epi = run_check(VariantBackend("add_norm", "bwd_from_stored_residual", "epi_d"), GOLDEN, case_ids=[case]).cases[0]
    # partial: drowscale's epi_d bound reaches its scale on these rows (the stored residual's rounding,
    # 1e3 * 2^-11, is the size of the N(0,1) branch it multiplies); every other array is verified
    assert epi.status in ("passed", "partial") and "unchecked" not in epi.message, epi.message
    verified = {a.name for a in epi.arrays if a.verdict != "unconstrained"}
    assert {"y", "residual_out", "x", "residual", "weight", "bias"} <= verified, verified
    assert all(a.passed for a in epi.arrays)


def test_residual_out_is_judged_in_float32_under_residual_in_fp32():
    """A residual rounded to float16 on the way out passes where the case asks a float16 residual and
    fails (by thousands of bounds) where residual_in_fp32 asks a float32 one."""
    b = VariantBackend("add_norm", "residual_out_in_d", "strict")
    rep = run_check(b, GOLDEN, case_ids=["add_norm/mean1e3_fp32res_xnormal_f16_6x100",
                                         "add_norm/mean1e3_p_rs_xnormal_f16_4x128"])
    by = {c.id: c for c in rep.cases}
    bad = by["add_norm/mean1e3_fp32res_xnormal_f16_6x100"]
    assert bad.status == "failed" and bad.message.startswith("step 0 output residual_out"), bad.message
    assert bad.worst_ratio > 1e3
    assert by["add_norm/mean1e3_p_rs_xnormal_f16_4x128"].status == "passed"


# ----------------------------------------------------------------- the parallel branch (x1, weight1, bias1)
PARALLEL = [c for c in ("normal_p_par_f64_5x12", "mean1e3_rms_xnormal_par_f32_6x40",
                        "mean1e3_p_fp32res_xnormal_par_f16_4x64", "mean1e3_nobias_rms_p_zc_xnormal_par_bf16_4x64",
                        "normal_noprenorm_parw1_f16_3x32", "normal_p_parx1_bf16_4x24")]


def _parallel_inputs(rng, R=3, M=6):
    return {"x": rng.standard_normal((R, M)), "residual": rng.standard_normal((R, M)) + 2,
            "weight": rng.standard_normal(M), "bias": rng.standard_normal(M),
            "mask": (rng.random((R, M)) > 0.3).astype(float), "x1": rng.standard_normal((R, M)),
            "mask1": (rng.random((R, M)) > 0.3).astype(float), "weight1": rng.standard_normal(M),
            "bias1": rng.standard_normal(M)}


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_parallel_branch_gradients_are_the_derivatives(norm, prenorm):
    rng = np.random.default_rng(1801)
    inputs = _parallel_inputs(rng)
    cfg = {"normalized_shape": [6], "norm": norm, "dropout_p": 0.25, "prenorm": prenorm, "weight_offset": 0.5}
    cots = {k: rng.standard_normal((3, 6)) for k in ("y", "residual_out", "y1")}
    r = refnorm.evaluate("add_norm", inputs, config=cfg, grad_outputs=cots)
    keys = ["x", "residual", "weight", "bias", "x1", "weight1", "bias1"]

    def loss(a):                      # y1's cotangent always; residual_out's only with prenorm
        o = refnorm.evaluate("add_norm", a, config=cfg).outputs
        return sum(float((o[k] * c).sum()) for k, c in cots.items() if k != "residual_out" or prenorm)
    for k in keys:
        np.testing.assert_allclose(r.grads[k], central_differences(loss, inputs, k), rtol=1e-6, atol=1e-7, err_msg=k)
    np.testing.assert_array_equal(r.grads["mask1"], 0.0)
    s = inputs["x"] * (inputs["mask"] / 0.75) + inputs["x1"] * (inputs["mask1"] / 0.75) + inputs["residual"]
    np.testing.assert_allclose(r.outputs["residual_out"], s, rtol=1e-15)
    # y1 is the plain op of the same sum with weight1, bias1 (the same x_hat as y)
    plain = refnorm.evaluate(norm, {"x": s, "weight": inputs["weight1"] + 0.5},
                             config={"normalized_shape": [6], "eps": 1e-5})
    np.testing.assert_allclose(r.outputs["y1"], plain.outputs["y"] + inputs["bias1"], rtol=1e-13, atol=1e-14)


def test_without_the_branch_nothing_changes():
    """x1 = 0 and no weight1: the call of the single branch, bit for bit (the sum adds an exact zero)."""
    rng = np.random.default_rng(1802)
    inputs = _parallel_inputs(rng)
    single = {k: v for k, v in inputs.items() if k not in ("x1", "mask1", "weight1", "bias1")}
    cfg = {"normalized_shape": [6], "dropout_p": 0.25}
    cots = {k: rng.standard_normal((3, 6)) for k in ("y", "residual_out")}
    a = refnorm.evaluate("add_norm", single, config=cfg, grad_outputs=cots)
    b = refnorm.evaluate("add_norm", {**single, "x1": np.zeros((3, 6)), "mask1": inputs["mask1"]}, config=cfg,
                         grad_outputs=cots)
    assert "y1" not in a.outputs and "y1" not in b.outputs
    for k in a.outputs:
        np.testing.assert_array_equal(a.outputs[k], b.outputs[k])
    for k in a.grads:
        np.testing.assert_array_equal(a.grads[k], b.grads[k])
    np.testing.assert_array_equal(b.grads["x1"], b.grads["residual"] * (inputs["mask1"] / 0.75))


@pytest.mark.parametrize("inputs,config,err,match", [
    ({"x1": np.ones((2, 4))}, {}, ShapeError, r"'x1' has shape \(2, 4\); expected the shape of 'x'"),
    ({"x1": np.ones((2, 3)), "rowscale": np.ones(2)}, {}, ConfigError,
     r"'rowscale' is given with 'x1'; expected no rowscale with the parallel branch"),
    ({"mask1": np.ones((2, 3))}, {}, ConfigError, r"'mask1' is given without 'x1'"),
    ({"x1": np.ones((2, 3)), "mask": np.ones((2, 3))}, {"dropout_p": 0.1}, ConfigError,
     r"dropout_p=0.1 with 'x1' needs a 'mask1' input"),
    ({"x1": np.ones((2, 3)), "mask1": np.full((2, 3), 2.0)}, {}, ConfigError, r"'mask1' holds 2.0"),
    ({"weight1": np.ones(4)}, {}, ShapeError, r"'weight1' has shape \(4,\); expected \(3,\)"),
    ({"bias1": np.ones(3)}, {}, ConfigError, r"'bias1' is given without 'weight1'"),
])
def test_parallel_bad_input_is_named(inputs, config, err, match):
    with pytest.raises(err, match=match):
        refnorm.evaluate("add_norm", {"x": np.ones((2, 3)), **inputs}, config={"normalized_shape": [3], **config})


def test_a_cotangent_for_y1_without_weight1_is_an_error():
    with pytest.raises(refnorm.RefnormError, match=r"grad_outputs\['y1'\] is given, but output 'y1' is produced "
                                                   r"only with input 'weight1'"):
        refnorm.evaluate("add_norm", {"x": np.ones((2, 3))}, config={"normalized_shape": [3]},
                         grad_outputs={"y": np.ones((2, 3)), "y1": np.ones((2, 3))})


@pytest.mark.parametrize("vid,pid", [("no_dy1", "R-pardy1"), ("parallel_shared_mask", "R-parmask")])
def test_parallel_pitfalls_fail_and_are_named(vid, pid):
    """Each parallel-branch pitfall, as its float64 variant and planted in the emulated float32 kernel,
    fails some golden case with the branch, and the diagnosis names it on every case it fails."""
    from planted.emulated import EmulatedBackend
    ids = ["add_norm/" + c for c in PARALLEL]
    for backend in (VariantBackend("add_norm", vid, "strict"), EmulatedBackend(vid)):
        rep = run_check(backend, GOLDEN, case_ids=ids)
        failed = [c for c in rep.cases if c.status == "failed"]
        assert len(failed) >= 3, [(c.id, c.status) for c in rep.cases]
        for c in failed:
            assert c.diagnosis["matched"] == vid and c.diagnosis["pitfalls"] == [pid], (c.id, c.diagnosis["message"])
        # the cases the pitfall cannot touch pass (no dropout: one mask; no y1: no dy1)
        assert all(c.status in ("passed", "partial") for c in rep.cases if c not in failed)
