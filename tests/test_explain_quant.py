"""Quantized outputs judged at the kernel's own returned scale (refnorm/check/explain_quant.py, issue 33): each
family on a kernel planted here (the float64 specification of norm_quant / norm_quant_block with one deviation,
its q quantized and its scales stored as a kernel stores them). Each test fails if its family stops naming the
mechanism (or names another); the correct kernel names nothing; a bug in y is not named a scale's."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from refnorm import registry  # noqa: E402
from refnorm.check import Returned, explain_quant  # noqa: E402
from refnorm.check.backends.base import Contract  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.check.precision import round_to  # noqa: E402
from refnorm.golden import load_case  # noqa: E402
from refnorm.norms import norm_quant as NQ  # noqa: E402
from refnorm.norms import norm_quant_block as NB  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")


class QuantSpec:
    """The specification as a quantizing kernel: ``post(call, outputs) -> outputs`` changes the float64 outputs
    (q before its rounding; scale: the pre-rounding scale), then q is quantized (to nearest even, saturating),
    the block scales stored by their rule (float32, E8M0, E4M3), amax and tensor_scale returned in float32
    (float64 for a float64 case). ``stored`` (call, outputs) -> the stored scale, when post sets it itself."""

    name = "quant-spec-kernel"

    def __init__(self, post=None, stored=None):
        self.post, self.stored = post, stored

    def available(self):
        return None

    def supports(self, call):
        return None

    def contract(self, call):
        return Contract("strict")

    def run(self, call):
        with np.errstate(all="ignore"):
            r = registry.evaluate(call.op, call.inputs, config=call.config)
            out = {k: np.asarray(v, dtype=np.float64) for k, v in r.outputs.items()}
            if self.post is not None:
                out = self.post(call, out)
        w = np.float64 if call.dtype == "float64" else np.float32
        if call.op == "norm_quant":
            res = {"q": NQ.quantize(out["q"], call.config["quant_dtype"]), "scale": out["scale"].astype(w),
                   "amax": out["amax"].astype(w)}
        else:
            c = NB.resolve(call.config)
            if self.stored is not None:
                s = self.stored(call, out)
            elif (c["format"], c["scale_rule"]) == ("fp8_group", "exact"):
                s = out["scale"].astype(w)
            else:
                s = NB.encode_scale(out["scale"], call.config)
            res = {"q": NB.quantize(out["q"], c["element_dtype"]), "scale": s, "amax": out["amax"].astype(w),
                   "tensor_scale": out["tensor_scale"].astype(w)}
        return Returned(res)


def y_of(call):
    """The float64 norm output y (of x + residual for norm_quant_block) the quantizer divides."""
    cfg = call.config
    x = np.asarray(call.inputs["x"], np.float64)
    if call.inputs.get("residual") is not None:
        x = x + np.asarray(call.inputs["residual"], np.float64)
    ins = {"x": x, **{k: call.inputs[k] for k in ("weight", "bias") if call.inputs.get(k) is not None}}
    return registry.evaluate(cfg.get("norm", "rms_norm"), ins, config={"normalized_shape": cfg["normalized_shape"],
                                                                      "eps": cfg.get("eps", 1e-5)}).outputs["y"]


def diag(kernel, case_id):
    r = check_case(kernel, load_case(GOLDEN, case_id))
    assert r.status == "failed", (case_id, r.status)
    return r.diagnosis


def expect(kernel, case_id, mechanism, words):
    """The kernel fails the case, and the diagnosis names ``mechanism`` with ``words`` in its message."""
    d = diag(kernel, case_id)
    assert d["mechanism"] == mechanism and words in d["message"], d["message"]


# ---------------------------------------------------------------- norm_quant (one scale per row, or static)
def _row_scale(call, scale_fn):
    """post: the scale scale_fn(call, y, amax) per row and q = clip(y / scale) (the right saturation)."""
    def post(call, d):
        y = y_of(call)
        _, lo, hi = NQ.QUANT_DTYPES[call.config["quant_dtype"]]
        s = scale_fn(call, y, d["amax"])
        return {**d, "scale": s, "q": np.clip(NQ.divide(y, s), lo, hi)}
    return post


def _floor(call):
    ms = call.config.get("min_scale")
    return NQ.default_min_scale(call.config["quant_dtype"]) if ms is None else ms


def test_the_correct_quant_kernel_passes():
    for cid in ("norm_quant/normal_rms_e4m3_dyn_f32_8x256", "norm_quant/normal_rms_i8_static_f32_8x256",
                "norm_quant_block/normal_rms_nvfp4_bf16_8x512", "norm_quant_block/normal_rms_mx_e5m2_bf16_8x256",
                "norm_quant_block/normal_rms_g_pow2_bf16_8x512"):
        assert check_case(QuantSpec(), load_case(GOLDEN, cid)).status == "passed", cid


def test_int8_scale_over_128_clipped_at_127_is_quant_scale():
    post = _row_scale(None, lambda call, y, amax: np.maximum(amax / 128.0, _floor(call)))
    expect(QuantSpec(post), "norm_quant/mean1e3_ln_i8_dyn_f16_8x256", "quant_scale", "amax / 128")


def test_a_static_scale_multiplied_is_quant_scale():
    def post(call, d):
        _, lo, hi = NQ.QUANT_DTYPES[call.config["quant_dtype"]]
        return {**d, "q": np.clip(y_of(call) * d["scale"], lo, hi)}
    expect(QuantSpec(post), "norm_quant/normal_rms_e4m3_static_bf16_8x256", "quant_scale", "multiplied")


def test_scale_ub_applied_to_amax_is_quant_scale():
    def scale(call, y, amax):
        qm = NQ.qmax(call.config["quant_dtype"])
        return np.maximum(np.minimum(amax, call.config["scale_ub"]) / qm, _floor(call))
    expect(QuantSpec(_row_scale(None, scale)), "norm_quant/outlier_rms_e4m3_dyn_ub8_bf16_8x256", "quant_scale",
           "applied to the amax before the division")


def test_scale_from_the_pre_norm_x_is_quant_scale():
    def scale(call, y, amax):
        x = np.asarray(call.inputs["x"], np.float64)
        return np.maximum(np.max(np.abs(x), axis=-1, keepdims=True) / NQ.qmax(call.config["quant_dtype"]), _floor(call))
    expect(QuantSpec(_row_scale(None, scale)), "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "quant_scale",
           "the amax of the pre-norm x")


def test_fp8_codes_through_float16_is_precision():
    """Two roundings to nearest (the quotient held in float16 on its way to float8): rule 8's precision, a value
    held in a lower dtype; the conversion's own mode (toward zero, down, up) is its rounding."""
    post = lambda call, d: {**d, "q": np.asarray(round_to(d["q"], "float16"), np.float64)}   # noqa: E731
    expect(QuantSpec(post), "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "precision", "two roundings")


def test_int8_codes_toward_zero_is_rounding():
    post = lambda call, d: {**d, "q": np.trunc(d["q"])}   # noqa: E731
    expect(QuantSpec(post), "norm_quant/normal_rms_i8_dyn_f16_1x1029", "rounding", "toward zero")


def test_a_bug_in_y_is_not_named_a_scale():
    """layer_norm's y with the bias added twice, then quantized by the spec's rule (amax, scale and q all of the
    wrong y): the codes do not follow from any scale of the right y; whatever the diagnosis says, it is not
    quant_scale, and the search at the kernel's scale explains nothing."""
    def post(call, d):
        y = y_of(call) + np.asarray(call.inputs["bias"], np.float64)
        q, s, a = NQ.quantized(y, (y.ndim - 1,), None, call.config["quant_dtype"], None, _floor(call))
        return {**d, "q": q, "scale": s, "amax": a}
    for cid in ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "norm_quant/normal_ln_e4m3_dyn_wb_bf16_16x64"):
        d = diag(QuantSpec(post), cid)
        assert d["mechanism"] != "quant_scale", d["message"]
        assert not any("scale" in e["text"] for e in d.get("explained", [])), d["message"]


# ---------------------------------------------------------------- norm_quant_block (block and tensor scales)
def _block(post_scales):
    """post: (v, decode scale S, tensor scale, amax) = post_scales(call, c, y, amax) per block; q = clip(y / S)."""
    def post(call, d):
        c = NB.resolve(call.config)
        y = y_of(call)
        v, S, ts, amax = post_scales(call, c, y, d["amax"])
        q = NB.divide_clip(NB.blocked(y, c["block_size"]), S[..., None], NB.qmax(c["element_dtype"]))
        q = q.reshape(y.shape[:-1] + (-1,))[..., :y.shape[-1]]
        return {**d, "q": q, "scale": v, "amax": amax, "tensor_scale": np.full((1,) * y.ndim, float(ts))}
    return post


def test_nvfp4_encode_factor_without_the_fp4_max_is_quant_scale():
    def scales(call, c, y, amax):
        enc = 448.0 / float(np.max(amax))
        v, S, ts = NB.block_scales(amax, c, enc)
        return v, S, ts, amax
    expect(QuantSpec(_block(scales)), "norm_quant_block/normal_rms_nvfp4_bf16_8x512", "quant_scale",
           "the FP4 maximum 6 left out")


def test_every_block_scale_from_the_tensor_amax_is_quant_scale():
    def scales(call, c, y, amax):
        a = np.full(amax.shape, np.max(amax))
        v, S, ts = NB.block_scales(a, c)
        return v, S, ts, a
    expect(QuantSpec(_block(scales)), "norm_quant_block/normal_rms_g_bf16_8x512", "quant_scale", "whole tensor's amax")


def test_group_scales_stored_in_the_input_dtype_is_precision():
    def scales(call, c, y, amax):
        v = np.asarray(round_to(np.maximum(amax / NB.qmax(c["element_dtype"]), c["min_scale"]), call.dtype), np.float64)
        return v, v, 1.0, amax
    expect(QuantSpec(_block(scales)), "norm_quant_block/normal_rms_g_bf16_8x512", "precision", "rounded to bfloat16")


def test_mxfp8_e5m2_with_e4m3s_emax_is_quant_scale():
    def scales(call, c, y, amax):
        v = amax / 2.0 ** 8
        return v, NB.pow2_floor(v, *NB.E8M0_EXP), 1.0, amax
    expect(QuantSpec(_block(scales)), "norm_quant_block/normal_rms_mx_e5m2_bf16_8x256", "quant_scale", "emax 8")


def test_e8m0_exponent_rounded_to_nearest_is_quant_scale():
    def scales(call, c, y, amax):
        v, _, _ = NB.block_scales(amax, c)
        S = explain_quant._pow2_nearest(v, *NB.E8M0_EXP)
        return v, S, 1.0, amax
    e8m0 = ml_dtypes.float8_e8m0fnu
    stored = lambda call, d: explain_quant._pow2_nearest(d["scale"], *NB.E8M0_EXP).astype(e8m0)   # noqa: E731
    expect(QuantSpec(_block(scales), stored), "norm_quant_block/normal_rms_mx_bf16_8x512", "quant_scale",
           "nearest power of two")


def test_nvfp4_block_scale_truncated_is_scale_rounding():
    """The block scale's own conversion to E4M3 truncated: its own rounding rule (docs/verdicts.md rule 5's
    scale_rounding, before rule 8's rounding)."""
    grid = explain_quant._grid((NB.ELEMENTS["float8_e4m3fn"][0], -448.0, 448.0))
    trunc = lambda v: explain_quant._grid_round(np.clip(v, -448.0, 448.0), grid, "zero")   # noqa: E731

    def scales(call, c, y, amax):
        v, _, ts = NB.block_scales(amax, c, NB.tensor_encode(amax, c))
        return v, trunc(v) * ts, ts, amax
    stored = lambda call, d: trunc(d["scale"]).astype(NB.ELEMENTS["float8_e4m3fn"][0])   # noqa: E731
    expect(QuantSpec(_block(scales), stored), "norm_quant_block/normal_rms_nvfp4_bf16_8x512", "scale_rounding",
           "toward zero")


def test_grid_rounding_toward_zero_and_half_away():
    g = explain_quant._grid((np.dtype(np.int8), -128.0, 127.0))
    v = np.array([2.5, -2.5, 2.49, -3.7, 200.0, np.nan])
    assert np.array_equal(explain_quant._grid_round(v, g, "zero"), [2, -2, 2, -3, 127, np.nan], equal_nan=True)
    assert np.array_equal(explain_quant._grid_round(v, g, "away"), [3, -3, 2, -4, 127, np.nan], equal_nan=True)


def test_other_ops_are_not_searched():
    class C:
        op, config = "layer_norm", {"normalized_shape": [4]}

    class R:
        inputs, failing, got = {"x": np.ones((2, 4))}, (("outputs", "y"),), {"outputs": {"y": np.ones((2, 4))}}
    assert explain_quant.quant_deviation(C, R, None, lambda *a: 0.0, 1 << 20) is None


def test_int8_codes_toward_zero_on_exact_ties_is_rounding_not_a_default_eps():
    """On the ties case (q exactly k + 1/2, bound 0) a default eps 1e-6 also moves every tie toward zero: the
    codes at the kernel's own scale are searched before the configuration values."""
    post = lambda call, d: {**d, "q": np.trunc(d["q"])}   # noqa: E731
    expect(QuantSpec(post), "norm_quant/pm1_eps0_rms_i8_static_ties_f32_4x64", "rounding", "toward zero")


def test_fit_ratio_judges_int8_codes_by_their_rounding_interval():
    """int8 codes are quantized, not exact integers (num_batches_tracked): 3 holds 2.6 and 3.4, not 3.6."""
    from refnorm.check import explain
    got = np.array([3, 3], dtype=np.int8)
    assert explain.fit_ratio(got, np.array([2.6, 3.4]), np.zeros(2)) == 0.0
    assert explain.fit_ratio(got, np.array([2.6, 3.6]), np.full(2, 0.05)) > 1
    assert explain.fit_ratio(np.array([3, 4], dtype=np.int64), np.array([3, 4]), 0.0) == 0.0


class _StubCtx:
    """A context whose candidates all fit (q = y / D), with the given mechanisms."""
    what = "scale"

    def __init__(self, mechs, reference_fits=False):
        self.y, self.mechs, self.reference_fits = np.array([[1.0, 2.0]]), mechs, reference_fits

    def kernel_D(self):
        return np.array([[1.0]])

    def widen(self, D):
        return 1.0

    def q_of(self, num, D, clip=True):
        return num / D

    def candidates(self):
        ref = {"arrays": {}, "D": np.array([[0.5 if not self.reference_fits else 1.0]]), "reference": True,
               "text": "", "mech": None}
        return [ref] + [{"arrays": {}, "D": np.array([[1.0]]), "text": f"is {m}", "mech": m} for m in self.mechs]

    def transforms(self, D):
        return []


class _StubRecord:
    got = {"outputs": {"q": np.array([[1.0, 2.0]])}}
    E = {"outputs": {"q": np.zeros((1, 2))}}


def _exact_fit(got, want, E):
    return 0.0 if np.array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64)) else np.inf


def test_two_fitting_mechanisms_or_a_fitting_reference_name_nothing():
    one = explain_quant._search(_StubCtx(["precision"]), _StubRecord, {"q"}, _exact_fit)
    assert one["mechanism"] == "precision" and "divided by a scale that is precision" in one["text"], one
    assert explain_quant._search(_StubCtx(["precision", "rounding"]), _StubRecord, {"q"}, _exact_fit) is None
    assert explain_quant._search(_StubCtx(["precision"], reference_fits=True), _StubRecord, {"q"}, _exact_fit) is None


def test_grid_rounding_reaches_int8s_lowest_value():
    """int8's grid is not symmetric: -128 is its own value toward zero (it was clipped to -127)."""
    g = explain_quant._grid((np.dtype(np.int8), -128.0, 127.0))
    assert np.array_equal(explain_quant._grid_round(np.array([-128.0, -127.6, -300.0]), g, "zero"), [-128, -127, -128])
    e4 = explain_quant._grid((NB.ELEMENTS["float8_e4m3fn"][0], -448.0, 448.0))
    assert np.array_equal(explain_quant._grid_round(np.array([3.3, -3.3, 3.25, -3.25]), e4, "zero"), [3.25, -3.25, 3.25, -3.25])
    assert np.array_equal(explain_quant._grid_round(np.array([3.375, -3.375]), e4, "away"), [3.5, -3.5])


def test_e8m0_exponent_rounded_up_where_floor_belongs_is_scale_rounding():
    def scales(call, c, y, amax):
        v, _, _ = NB.block_scales(amax, c)
        return v, NB.pow2_ceil(v, *NB.E8M0_EXP), 1.0, amax
    stored = lambda call, d: NB.pow2_ceil(d["scale"], *NB.E8M0_EXP).astype(ml_dtypes.float8_e8m0fnu)   # noqa: E731
    expect(QuantSpec(_block(scales), stored), "norm_quant_block/normal_rms_mx_bf16_8x512", "scale_rounding",
           "rounded up to a power of two")


def test_a_quantized_array_is_localized_as_the_judge_fails_it():
    """float8 codes made through float16: the judge fails the few elements whose two roundings land on another
    code; every code is about half a step from its exact value, so |got - ref| > E would count nearly all of
    them. The localization counts exactly the judge's failing elements."""
    post = lambda call, d: {**d, "q": np.asarray(round_to(d["q"], "float16"), np.float64)}   # noqa: E731
    r = check_case(QuantSpec(post), load_case(GOLDEN, "norm_quant/normal_rms_e4m3_dyn_f32_8x256"))
    assert r.status == "failed"
    q = next(a for a in r.arrays if a.name == "q")
    where = next(w for w in r.diagnosis["where"] if w["name"] == "q")
    assert 0 < where["failing"] == q.over < q.size // 4, (where["text"], q.over)


def test_amax_without_the_absolute_value_is_quant_scale():
    def scale(call, y, amax):
        a = np.maximum(np.max(y, axis=-1, keepdims=True), 0.0)           # max(y): |.| left out
        return np.maximum(a / NQ.qmax(call.config["quant_dtype"]), _floor(call))
    expect(QuantSpec(_row_scale(None, scale)), "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "quant_scale",
           "max(y) where max(|y|) belongs")


def test_the_scales_reciprocal_held_in_bfloat16_is_precision():
    """q = y * bf16(1 / scale) (tests/planted/blind18.py's nq_inverse_scale_in_input_dtype): the codes also fit
    within their bound as y / scale rounded twice (through bfloat16, also rule 8's precision); the exact codes tell
    them apart (none mismatched against dozens), so the reciprocal is what the explanation says (docs/verdicts.md
    rule 5: the reciprocal merely held in a lower dtype is rule 8's precision)."""
    from planted.blind18 import Blind18Kernel
    r = check_case(Blind18Kernel("nq_inverse_scale_in_input_dtype"),
                   load_case(GOLDEN, "norm_quant/normal_rms_e4m3_dyn_bf16_8x256"))
    assert r.status == "failed" and r.diagnosis["mechanism"] == "precision", r.diagnosis["message"]
    assert "reciprocal of the returned scale rounded to bfloat16" in r.diagnosis["message"]
