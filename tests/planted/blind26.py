"""A twenty-sixth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind26Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln26``, ``_rms26``, ``_an26``, ``_nq26``, ``_gated26``, ``_dyt26``,
``_poly26``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind26Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug by docs/verdicts.md's "Which mechanism a bug
is" (the first rule that applies), one of ``LABELS`` (the project's taxonomy, the same tuple as blind3's), or
None where none fits. ``source`` is a public bug report or fix where the mistake really happened (a GitHub
issue or pull request), "cf. ..." where a public report shows the same mistake in a neighbouring kernel, or
"pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic, docs/verdicts.md's labelling rule and public bug reports
only, by an author who did not read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran
the diagnosis on these bugs. None of its bugs repeats one of tests/planted/blind.py, blind2.py, ...,
blind25.py (the same mistake on the same op; the twenty-seventh set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx_dz,
                          gated_grads, gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned,
                          normalized_rows, np_dtype, poly_combine, poly_grads, poly_inputs, poly_normalize,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, rms_stats, row_affine, row_weight_bias,
                          rsum as _rsum, silu_gate, stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind20 import _next_row, _norm_dx
from .blind23 import _toward_zero

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind26Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_welford_m2_update_new_delta_squared": (
        "layer_norm", "merge",
        "the variance from a per-value Welford update whose M2 step adds (x - mean_new)^2 (the deviation from the "
        "updated running mean, squared) instead of (x - mean_old) * (x - mean_new): each value's spread term "
        "weighted (k - 1) / k too little, the variance too small (the mean right): rstd, y and the backward "
        "on that rstd",
        "cf. " + GH + "tenstorrent/tt-metal/issues/35291 (a layer norm's Welford accumulation giving wrong "
        "statistics)"),
    "ln_row_pitch_padded_to_8": (
        "layer_norm", "layout",
        "N not a multiple of 8: x's rows loaded at a row pitch of N rounded up to a multiple of 8 (an aligned "
        "allocation assumed) from the dense buffer: row r reads the N values from flat offset r * pitch on, "
        "the loads past the end masked to 0; the statistics, y and the backward's x_hat (dx, dweight) of the "
        "misread rows, dy read densely",
        "cf. " + GH + "unslothai/unsloth/pull/10675 (a LayerNorm kernel reading its rows with another stride "
        "than the tensor's)"),
    "ln_f64_stats_output_float32": (
        "layer_norm", "precision",
        "float64 inputs: the returned mean and rstd written through float32 buffers (rounded to nearest, the "
        "statistics' buffer dtype hard-coded), widened back; y and the gradients from the float64 statistics",
        "cf. " + GH + "gabrieldemarmiesse/torch-mojo-backend/pull/363 (native_layer_norm's mean and rstd "
        "returned in float32 whatever the input dtype)"),
    "ln_bwd_row_sums_last_column_masked": (
        "layer_norm", "block",
        "N > 1: the backward's row sums of g and g * x_hat loaded with the mask cols < N - 1 (off by one): the "
        "last column never enters mean(g) nor mean(g * x_hat) (still divided by N): dx; the forward, dweight "
        "and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer_norm backward kernel's column mask wrong in its row "
        "sums)"),
    "ln_dparams_rows_from_one": (
        "layer_norm", "reduction",
        "dweight and dbias: the column kernel's loop over the rows starts at row 1 (range(1, M)), row 0's "
        "dy * x_hat and dy never added; dx and the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm parameter-gradient kernel's row indexing "
        "wrong)"),
    "ln_bwd_proj_dot_of_centred_x": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g) - x_hat * mean(g * (x - mean))): the projection term's row sum taken of "
        "g times the centred input where g * x_hat belongs (one factor rstd left out of the dot, the x_hat "
        "multiplier right); the forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/12633 (a layer norm backward's dx written with the centred "
        "input and its rstd factors)"),
    "ln_mean_stored_one_row_late": (
        "layer_norm", "layout",
        "more than one row: the mean's store pointer advanced before the store: row r's mean written at row "
        "r + 1's slot (the last row's dropped, row 0's slot left 0); y, rstd and the gradients from the right "
        "mean",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm kernel's per-row value at another row's "
        "index)"),
    "ln_zc_bwd_offset_twice": (
        "layer_norm", "affine",
        "weight_offset set (zero-centred weight): the backward's g = dy * (weight + 2 * offset) (the weight "
        "already shifted by the parameter loader and the offset added again in the backward kernel): dx; "
        "the forward, dweight and dbias right",
        "cf. " + GH + "utensils/mold/pull/1078 (a norm weight's +1 applied twice)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_outside_dweight_inside_eps": (
        "rms_norm", "eps",
        "eps_placement='outside' with a weight: dweight = sum(dy * x / sqrt(mean(x^2) + eps)) (the "
        "weight-gradient kernel written for eps inside the root) while y and dx use 1 / (rms + eps)",
        "cf. " + GH + "allenai/OLMo/issues/281 (an RMSNorm written with eps outside the root against the "
        "reference's eps inside)"),
    "rms_zc_offset_subtracted": (
        "rms_norm", "affine",
        "weight_offset set (zero-centred weight): y = x_hat * (weight - offset) (the offset's sign flipped, "
        "as a converter undoing a +1 fold), and the backward's g = dy * (weight - offset); dweight right",
        "cf. " + GH + "vllm-project/vllm/pull/31464 (a norm weight's +1 convention corrected by subtracting "
        "1)"),
    "rms_bwd_dy_read_column_major": (
        "rms_norm", "layout",
        "more than one row: the backward reads dy column-major (element (i, j) from the flat index j * rows "
        "+ i, the layout of a transposed gradient assumed) while x is row-major: dx and dweight; the forward "
        "right",
        "cf. " + GH + "microsoft/DirectML/issues/588 (a norm producing wrong results on a permuted, "
        "non-contiguous input)"),
    "rms_persistent_loop_drops_last_row": (
        "rms_norm", "block",
        "more than one row: the persistent kernels' row loop written range(pid, rows - 1, programs) (off by "
        "one): the last row never processed, forward and backward: its y, rstd and dx left 0, its terms "
        "missing from dweight",
        "cf. " + GH + "openpaperwork/libpillowfight/pull/10 (the last rows of an image never processed by a "
        "row split)"),
    "rms_eps_none_as_zero": (
        "rms_norm", "eps",
        "eps=None: the kernel's eps resolved to 0.0 instead of the compute dtype's machine epsilon: rstd = 1 / "
        "sqrt(mean(x^2)), forward and backward (visible where mean(x^2) is near float32's epsilon)",
        "cf. " + GH + "microsoft/onnxruntime/issues/10228 (a normalization computed without its epsilon)"),
    "rms_f16_y_rounded_down": (
        "rms_norm", "rounding",
        "float16 outputs: y converted by the round-down intrinsic (__float2half_rd, toward -inf) instead of to "
        "nearest even; rstd and the gradients right",
        "cf. " + GH + "solvcon/solvcon/issues/1404 (float16 conversions under the downward and upward rounding "
        "modes)"),
    "rms_bwd_first_term_unweighted": (
        "rms_norm", "backward",
        "with a weight: dx = rstd * (dy - u * mean(g * x_hat)), g = dy * weight: the weight left out of dx's "
        "first term only (the projection's row sum weighted); dweight and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (an RMSNorm backward missing the weight's multiply)"),
    "rms_f64_y_stored_through_float32": (
        "rms_norm", "precision",
        "float64 inputs: y written through a float32 staging buffer (rounded to nearest, then widened); rstd "
        "and the gradients from the float64 values",
        "cf. " + GH + "google/flax/issues/612 (a normalization casting its values to float32 whatever the "
        "input dtype)"),
    # ------------------------------------------------------------------ add_norm
    "an_bwd_rstd_without_eps": (
        "add_norm", "eps",
        "the backward recomputes rstd from the fused sum's variance (or mean square) without eps, 1 / sqrt(var), "
        "and x_hat from it: ds (dx, dresidual, dx1, drowscale) and the parameter gradients; the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/5771 (an rms_norm backward recomputing its rstd from the stored "
        "mean square)"),
    "an_residual_out_is_dropped_x": (
        "add_norm", None,
        "with a residual: residual_out stored from the register holding the dropped branch x * c (+ x1 * c1) "
        "before the residual is added to it; the normalization, y and the gradients from the full sum",
        "cf. " + GH + "ROCm/aiter/pull/2011 (a fused add + rmsnorm kernel's residual_out store wrong)"),
    "an_mask_of_next_row": (
        "add_norm", "layout",
        "dropout with more than one row: the keep-mask's row pointer advanced before its load: row r of x "
        "dropped with row r + 1's mask (the last row its own), forward and backward (dx, drowscale)",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (a fused layer_norm backward not reusing the forward's "
        "dropout mask)"),
    "an_dweight_unnormalized": (
        "add_norm", "backward",
        "dweight (and dweight1) = sum over rows of dy * (s - mean) (of dy * s for the rms norm): the factor "
        "rstd of x_hat left out; dx, dresidual, dbias and the forward right",
        "cf. " + GH + "unslothai/unsloth/pull/4550 (an RMSNorm weight gradient computed from the wrong "
        "tensor)"),
    "an_f64_rstd_via_float32": (
        "add_norm", "precision",
        "float64 inputs: rstd taken by the single-precision rsqrtf of the float64 variance (or mean square) + eps "
        "converted to float (rounded to float32), then widened and used in float64 for y, y1 and the backward",
        "cf. " + GH + "proteneer/timemachine/issues/128 (rsqrt and rsqrtf mixed between a kernel's "
        "precisions)"),
    "an_x1_mask_ignored": (
        "add_norm", "dropout",
        "the parallel input x1 with dropout: x1 scaled by 1 / (1 - p) but its keep-mask mask1 never loaded "
        "(taken as all ones): s, residual_out, y and dx1",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (the x1 branch's factor left out of a fused layer_norm)"),
    "an_ln_dispatched_to_rms": (
        "add_norm", "semantics",
        "norm='layer_norm' computed by the RMS path (the is_rms_norm flag set from the wrong option): the sum "
        "s never centred, divided by its root mean square, forward and backward",
        "cf. " + GH + "keras-team/keras/pull/22393 (a layer norm's centred and uncentred variants computed by "
        "each other's formula)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_scale_held_in_bf16": (
        "norm_quant", "precision",
        "the per-row scale (dynamic or static) held in a bfloat16 register (rounded to nearest) for every "
        "input dtype: q divided by it and it returned; amax right",
        "cf. " + GH + "pytorch/ao/pull/4362 (quantization scales collapsing when computed in bf16)"),
    "nq_norm_eps_as_amax_floor": (
        "norm_quant", "quant_scale",
        "dynamic scale: amax clamped below by the normalization's eps before the division, scale = max(amax, "
        "eps) / qmax (then scale_ub and min_scale): an all-zero row without a floor gets eps / qmax for 0; the "
        "amax output right",
        "cf. " + GH + "deepseek-ai/DeepGEMM/issues/109 (a per-token quantizer clamping amax before computing "
        "the scale)"),
    "nq_min_scale_applied_as_ceiling": (
        "norm_quant", "quant_scale",
        "dynamic scale: the floor applied with min instead of max, scale = min(amax / qmax (at most scale_ub), "
        "floor): every row's scale the floor (0 with min_scale = 0), q saturated",
        "cf. " + GH + "vllm-project/vllm/pull/58032 (an FP8 quantizer's minimum-scale clamp)"),
    "nq_rows_grid_floor_pairs": (
        "norm_quant", "block",
        "programs of 2 rows launched on a grid of rows // 2 (floor, not cdiv): with an odd row count the last "
        "row never processed: its q, scale and amax left 0",
        "cf. " + GH + "openpaperwork/libpillowfight/pull/10 (a row split rounding down, the last rows never "
        "processed)"),
    "nq_rms_mean_square_over_n_minus_1": (
        "norm_quant", "bessel",
        "norm='rms_norm', N > 1: the sum of squares divided by N - 1 (the row-length constant of an unbiased "
        "estimate): rstd, y, amax, the dynamic scale and q",
        "cf. " + GH + "mlichvar/ntpperf/pull/7 (an RMS computed with n - 1 in its denominator)"),
    "nq_dyn_scale_rounded_to_nearest_pow2": (
        "norm_quant", "scale_rounding",
        "dynamic scale: after its clamps rounded to the nearest power of two in the log domain, exp2(rint("
        "log2(scale))) (neither up nor the exact value): the scale, and q (clipped where the scale was rounded "
        "down)",
        "cf. " + GH + "sgl-project/sglang/pull/28418 (an FP8 quantizer's power-of-two scale rounding)"),
    "nq_ln_mean_term_unweighted": (
        "norm_quant", "affine",
        "norm='layer_norm' with a weight: the fused epilogue y = x * (rstd * weight) - mean * rstd (+ bias): "
        "the folded shift's mean term not multiplied by the weight; amax, the scale and q from it",
        "cf. " + GH + "NVIDIA/FasterTransformer/issues/564 (a fused layer-norm epilogue's mean subtraction)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_silu_z_clamped": (
        "gated_norm", "gate",
        "the gate's input clamped to [-20, 20] before the silu (the clamp meant for exp(-z)'s argument applied "
        "to z itself): silu(z) = 20 sigmoid(20) for z > 20, forward and the backward's silu and silu' of the "
        "clamped value",
        "cf. " + GH + "trymirai/uzu/pull/747 (a gated activation's SiLU clipping)"),
    "gated_group_loop_last_skipped": (
        "gated_norm", "block",
        "group_size < H: the number of groups computed as (H - 1) // group_size: each row's last group never "
        "processed, forward and backward: its y, dx and dz left 0 and its columns of dweight and dbias 0",
        "cf. " + GH + "openpaperwork/libpillowfight/pull/10 (a split rounding down, its last part never "
        "processed)"),
    "gated_eps_squared": (
        "gated_norm", "eps",
        "each group's rstd = 1 / sqrt(var + eps * eps) (or mean(v^2) + eps * eps): the eps argument taken as a "
        "standard-deviation epsilon and squared, forward and the backward's formula on that rstd",
        "cf. " + GH + "keras-team/keras/pull/8726 (an epsilon meant for the standard deviation and one for "
        "the variance confused)"),
    "gated_dz_f16_round_toward_zero": (
        "gated_norm", "gate",
        "float16 inputs: dz converted to float16 by a round-toward-zero conversion instead of round to "
        "nearest even; y, dx, dweight and dbias right",
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (float32 to float16 conversions rounding toward zero)"),
    "gated_vhat_rounded_before_weight": (
        "gated_norm", "precision",
        "16-bit inputs: v_hat rounded to the input dtype before the weight and bias are applied (n = "
        "round(v_hat) * weight + bias, the Llama cast order), y from it; the backward from the float32 "
        "values",
        "cf. " + GH + "tenstorrent/tt-metal/issues/22800 (a norm's output cast to the 16-bit dtype before its "
        "weight multiplies)"),
    "gated_weight_plus_one": (
        "gated_norm", "affine",
        "n = v_hat * (1 + weight) + bias (the zero-centred weight convention of the model's other norms "
        "applied to the gated norm), forward and the backward's g = dn * (1 + weight); dweight and dbias "
        "right",
        "cf. " + GH + "NeuraLegion/shainet/pull/176 (a gated RMSNorm that must not take the (1 + weight) "
        "offset of its model's other norms)"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_sign_dropped": (
        "dyt", None,
        "tanh(alpha x) computed by the stable form (1 - exp(-2|v|)) / (1 + exp(-2|v|)) without restoring the "
        "sign: t = tanh(|alpha x|), y and dweight from it; dx and dalpha (from the even sech^2) right",
        "cf. " + GH + "ziglang/zig/pull/9081 (tanh wrong for negative inputs)"),
    "dyt_dtanh_one_plus_t2": (
        "dyt", "backward",
        "the backward's tanh'(alpha x) written 1 + t^2 (the derivative of tan) instead of 1 - t^2: dx and "
        "dalpha; y, dweight and dbias right",
        "cf. " + GH + "nicodjimenez/lstm/issues/41 (a tanh derivative written 1 + tanh^2)"),
    "dyt_dbias_first_row_block_only": (
        "dyt", "reduction",
        "with a bias, more than 4 rows: dbias reduced in two stages, one partial per block of 4 rows, the "
        "second stage loading only the first partial (its loop bound 1): dbias = the first 4 rows' sum of "
        "dy; dweight, dx and dalpha right",
        "cf. " + GH + "HKUSTDial/flash-sparse-attention/pull/194 (a dbias reduction keeping only part of its "
        "partials)"),
    "dyt_bf16_y_rounded_up": (
        "dyt", "rounding",
        "bfloat16 outputs: y converted by the round-up conversion (toward +inf) instead of to nearest even; "
        "the gradients right",
        "cf. " + GH + "CHIP-SPV/chipStar/pull/973 (float to 16-bit conversions with their rounding modes)"),
    "dyt_dbias_needs_weight": (
        "dyt", "backward",
        "a bias without a weight: the backward computes dbias inside the has-weight branch, so dbias is "
        "returned 0; y, dx and dalpha right",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/388 (a gradient kernel's parameter terms guarded by "
        "the wrong HAS_WEIGHT branch)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_from_weighted_h": (
        "poly_norm", "backward",
        "dweight[k] = sum(dy * w_k * h_p) (the weighted term w_k h_p of y reduced where h_p belongs); dx, dbias "
        "and the forward right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/901 (a PolyNorm kernel's closed-form weight gradient)"),
    "poly_sumsq_in_half": (
        "poly_norm", "precision",
        "16-bit inputs: each power's sum of squares accumulated left to right in the input dtype (each square "
        "and each partial sum rounded to it), divided by H in float32: the three rstd, y and the backward "
        "from them",
        "cf. " + GH + "apache/mxnet/issues/14073 (a norm's reductions performed in fp16 for fp16 inputs)"),
    "poly_linear_term_unnormalized": (
        "poly_norm", "semantics",
        "the linear term not normalized: y = w0 h_3 + w1 h_2 + w2 x + bias (x taken as already normalized), "
        "and the backward of that equation (dx's linear term dy * w2, dweight[2] = sum(dy * x))",
        "cf. " + GH + "tenstorrent/tt-metal/pull/40449 (PolyNorm3: each of its three terms RMS-normalized)"),
    "poly_eps_raised_to_power": (
        "poly_norm", "eps",
        "each power normalized with eps raised to its power (eps^3 for x^3, eps^2 for x^2, eps for x: the "
        "epsilon put in the units of the power), forward and the backward's formula on those rstd",
        "pattern: an epsilon rescaled to the units of the quantity it guards"),
    "poly_chain_factor_as_power_over_x": (
        "poly_norm", "backward",
        "dx's chain factor p x^(p - 1) computed as p * x^p / x (the forward's power registers reused): NaN "
        "wherever x = 0 (0 / 0), exact elsewhere up to rounding; dweight, dbias and the forward right",
        "pattern: a derivative's factor formed by dividing out a value that can be zero"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _directed(a, npdt, up):
    """``a`` converted to the 16-bit float ``npdt`` rounding toward +inf (``up``) or -inf (one step that way
    wherever the nearest-even conversion went the other way)."""
    r = np.asarray(np.asarray(a).astype(npdt))
    rv, av = r.astype(np.float64), np.asarray(a, np.float64)
    fix = ((rv < av) if up else (rv > av)) & np.isfinite(rv) & np.isfinite(av)
    bits = r.view(np.uint16).copy()
    grow = (rv > 0) == up                                  # the step increases the magnitude
    new = np.where(grow, bits + np.uint16(1), bits - np.uint16(1)).astype(np.uint16)
    new = np.where(rv == 0, np.uint16(0x0001 if up else 0x8001), new).astype(np.uint16)
    return np.where(fix, new, bits).astype(np.uint16).view(npdt)


def _half_rowsum(t, dtype):
    """Row sums (rows, 1) of ``t`` accumulated left to right in the 16-bit ``dtype`` (each term and each
    partial sum rounded to it), returned in ``t``'s dtype."""
    acc = np.zeros((t.shape[0], 1), t.dtype)
    th = _half(t, dtype)
    for j in range(t.shape[1]):
        acc = _half(acc + th[:, j:j + 1], dtype)
    return acc


class Blind26Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind26"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln26(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln26(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        if b == "ln_row_pitch_padded_to_8" and N % 8:
            pitch = -(-N // 8) * 8                           # the aligned row pitch the kernel assumes
            flat = x.reshape(-1)
            idx = np.arange(R)[:, None] * pitch + np.arange(N)[None, :]
            x = np.where(idx < flat.size, flat[np.minimum(idx, flat.size - 1)], acc(0))
        mean = _rsum(x) / N
        dev = x - mean
        if b == "ln_welford_m2_update_new_delta_squared":
            run = np.cumsum(x, axis=1) / np.arange(1, N + 1, dtype=acc)   # the running mean after each value
            dn = x - run
            var = _rsum(dn * dn) / N
        else:
            var = _rsum(dev * dev) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if b == "ln_f64_stats_output_float32" and d == "float64":
            for key in ("mean", "rstd"):
                out[key] = out[key].astype(np.float32).astype(acc)
        if b == "ln_mean_stored_one_row_late" and R > 1:
            late = np.zeros_like(mean)
            late[1:] = mean[:-1]
            out["mean"] = late.reshape(stat_shape(x0, ns)).astype(acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_zc_bwd_offset_twice" and off != 0 and w is not None:
            g = dy * (w + off)
        if b == "ln_bwd_row_sums_last_column_masked" and N > 1:
            k = N - 1                                        # the columns the off-by-one mask lets through
            dx = rstd * (g - _rsum(g[:, :k]) / N - xhat * (_rsum(g[:, :k] * xhat[:, :k]) / N))
        elif b == "ln_bwd_proj_dot_of_centred_x":
            dx = rstd * (g - _rsum(g) / N - xhat * (_rsum(g * dev) / N))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        rows = slice(1, None) if b == "ln_dparams_rows_from_one" else slice(None)
        for key, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
            if given is None:
                continue
            grads[key] = _store(t[rows].sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms26(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms26(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        placement = cfg.get("eps_placement", "inside") or "inside"
        inside = placement != "outside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        if b == "rms_zc_offset_subtracted" and w0 is not None and off != 0:
            w = w0.astype(acc).reshape(1, N) - off
        if b == "rms_eps_none_as_zero" and cfg["eps"] is None:
            eps = acc(0)
        else:
            eps = _eps(cfg["eps"], acc)
        rms, rstd = rms_stats(x, eps, placement)
        live = np.ones((R, 1), acc)                          # the rows the kernels process
        if b == "rms_persistent_loop_drops_last_row" and R > 1:
            live[-1] = 0
        xhat = x * rstd * live
        y = xhat if w is None else xhat * w
        if b == "rms_f16_y_rounded_down" and d == "float16":
            ys = _directed(y.reshape(x0.shape), np.dtype(np.float16), up=False)
        elif b == "rms_f64_y_stored_through_float32" and d == "float64":
            ys = y.reshape(x0.shape).astype(np.float32).astype(np.float64)
        else:
            ys = _store(y.reshape(x0.shape), d)
        out = {"y": ys, "rstd": (rstd * live).reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_dy_read_column_major" and R > 1:
            flat = dy.reshape(-1)
            dy = flat[np.arange(N)[None, :] * R + np.arange(R)[:, None]]
            g = dy if w is None else dy * w
        if b == "rms_bwd_first_term_unweighted" and w is not None:
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (dy - u * (_rsum(g * xhat) / N))
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store((dx * live).reshape(x0.shape), d)}
        if w is not None:
            xw = xhat
            if b == "rms_outside_dweight_inside_eps" and not inside:
                xw = x / np.sqrt(_rsum(x * x) / N + eps)    # the inside-eps x_hat of the copied kernel
            grads["weight"] = _store((dy * xw).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an26(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an26(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_mask_of_next_row" and mask is not None and R > 1:
            mask = _next_row(mask)
        c = kept(mask, rs, keep, p, (R, N), acc)
        if b == "an_x1_mask_ignored" and x1 is not None and p:
            mask1 = None                                     # c1 = 1 / (1 - p): x1's mask never loaded
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm" and b != "an_ln_dispatched_to_rms"
        if centred:
            dev = s - _rsum(s) / N
        else:
            dev = s
        var = _rsum(dev * dev) / N
        if b == "an_f64_rstd_via_float32" and d == "float64":
            rstd = (np.float32(1) / np.sqrt((var + eps).astype(np.float32))).astype(acc)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_residual_out_is_dropped_x" and res is not None:
            sx, _ = add_norm_sum(x, None, x1, mask1, c, keep, p, acc)     # the register before the residual add
            rd = "float32" if cfg.get("residual_in_fp32") and d in HALF else d
            out["residual_out"] = _store(sx.reshape(x0.shape), rd)
        if "y" not in call.cotangents:
            return Returned(out, {})
        rb, xb = rstd, xhat
        if b == "an_bwd_rstd_without_eps":
            rb = 1 / np.sqrt(var)
            xb = dev * rb
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = _norm_dx(dy, we, xb, rb, centred, _rsum)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + _norm_dx(dy1, we1, xb, rb, centred, _rsum)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xb, params, x, mask,
                               keep, p, ns, d)
        if b == "an_dweight_unnormalized":
            if w is not None:
                grads["weight"] = _store((dy * dev).sum(axis=0).reshape(ns), d)
            if w1 is not None and dy1 is not None:
                grads["weight1"] = _store((dy1 * dev).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq26(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq26(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        ln = cfg["norm"] == "layer_norm"
        if ln:
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            cnt = acc(N - 1) if b == "nq_rms_mean_square_over_n_minus_1" and N > 1 else acc(N)
            rstd = 1 / np.sqrt(_rsum(x * x) / cnt + eps)
        if b == "nq_ln_mean_term_unweighted" and ln and w is not None:
            y = x * (rstd * w.astype(acc).reshape(1, N)) - mean * rstd
            y = y if bias is None else y + bias.astype(acc).reshape(1, N)
        else:
            y = row_affine((x - mean) * rstd, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_norm_eps_as_amax_floor":
            scale = dynamic_scale(np.maximum(amax, eps), hi, cfg, acc)
        elif b == "nq_min_scale_applied_as_ceiling":
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            floor = 1.0 / (hi * 512.0) if cfg["min_scale"] is None else float(cfg["min_scale"])
            scale = np.minimum(scale, acc(floor))
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
            if b == "nq_dyn_scale_rounded_to_nearest_pow2":
                pos = scale > 0
                k = np.rint(np.log2(np.where(pos, scale, 1.0).astype(np.float64)))
                scale = np.where(pos, np.exp2(k), scale).astype(acc)
        if b == "nq_scale_held_in_bf16":
            scale = _half(scale, "bfloat16")
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        out = dict(r.outputs)
        if b == "nq_rows_grid_floor_pairs" and R % 2:
            qq = np.array(out["q"]).reshape(R, N)
            qq[-1] = np.zeros(N, qq.dtype)                   # the row no program takes
            out["q"] = qq.reshape(x0.shape)
            for key in ("scale", "amax"):
                v = np.array(out[key]).reshape(R)
                v[-1] = 0
                out[key] = v.reshape(out[key].shape)
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated26(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated26(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        zs = np.clip(z, acc(-20), acc(20)) if b == "gated_silu_z_clamped" else z
        s, ds = silu_gate(zs)
        if b == "gated_weight_plus_one":
            w = w + acc(1)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if b == "gated_eps_squared":
            eps = eps * eps
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / K + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(vg * vg) / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        nf = nrm                                             # the normalized value the forward stores from
        if b == "gated_vhat_rounded_before_weight" and d in HALF:
            vr = _half(vhat, d)
            nf = vr * w if bias is None else vr * w + bias
        y = nf * s if nbg else nf
        live = np.ones((1, H), acc)                          # the columns the kernel's groups cover
        if b == "gated_group_loop_last_skipped" and K < H:
            live[:, ((H - 1) // K) * K:] = 0
        out = {"y": _store((y * live).reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if norm == "layer_norm":
            dv = _centred_dx(g, vv, rstd)
        else:
            dv = rms_dx(g, vv, rstd)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        dnl = dn * live
        grads = gated_grads(dx * live, dz * live, dnl, None if bias is None else dnl, vhat, x0.shape, d)
        if b == "gated_dz_f16_round_toward_zero" and d == "float16":
            grads["z"] = _toward_zero(dz.reshape(x0.shape), np.dtype(np.float16))
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt26(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt26(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_sign_dropped":
            t = np.tanh(np.abs(a * x))
        y = affine(t, w, bias)
        if b == "dyt_bf16_y_rounded_up" and d == "bfloat16":
            out = {"y": _directed(y.reshape(x0.shape), np_dtype("bfloat16"), up=True)}
        else:
            out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(a * x)
        dt = r * r
        if b == "dyt_dtanh_one_plus_t2":
            dt = 1 + t * t
        gd = g * dt
        dx = gd * a
        da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dbias_first_row_block_only" and bias is not None and x.shape[0] > 4:
            grads["bias"] = _store(dy[:4].sum(axis=0), d)
        if b == "dyt_dbias_needs_weight" and w is None and bias is not None:
            grads["bias"] = _store(np.zeros(x.shape[1], acc), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly26(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly26(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        if b == "poly_eps_raised_to_power":
            hs, rs = [], []
            for u, pp in zip(us, (3, 2, 1), strict=True):
                (h,), (r,) = poly_normalize([u], eps ** pp, acc)
                hs.append(h)
                rs.append(r)
        elif b == "poly_sumsq_in_half" and d in HALF:
            rs = [1 / np.sqrt(_half_rowsum(u * u, d) / H + eps) for u in us]
            hs = [u * r for u, r in zip(us, rs, strict=True)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        raw = b == "poly_linear_term_unnormalized"
        if raw:
            hs = [hs[0], hs[1], x]                           # the linear term taken as already normalized
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
        if raw or b == "poly_chain_factor_as_power_over_x":
            dx = np.zeros_like(x)
            for k, pp in enumerate((3, 2, 1)):
                if pp == 1:
                    dx = dx + (dy * wt[2] if raw else rms_dx(dy * wt[2], hs[2], rs[2]))
                elif raw:
                    dx = dx + pp * x ** (pp - 1) * rms_dx(dy * wt[k], hs[k], rs[k])
                else:
                    dx = dx + pp * us[k] / x * rms_dx(dy * wt[k], hs[k], rs[k])
            grads["x"] = _store(dx.reshape(x0.shape), d)
        if b == "poly_dweight_from_weighted_h":
            dw = np.array([_rsum(dy * wt[k] * h).sum() for k, h in enumerate(hs)], dtype=acc)
            grads["weight"] = _store(dw, d)
        return Returned(out, grads)
