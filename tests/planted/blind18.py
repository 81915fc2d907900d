"""An eighteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind18Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln18``, ``_rms18``, ``_an18``, ``_nq18``, ``_gated18``, ``_dyt18``,
``_poly18``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind18Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind17.py (the same mistake on the same op; the nineteenth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs,
                          add_norm_params, add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx,
                          dy_and_g, dyt_grads, dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size,
                          gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_inputs, half as _half, kept,
                          norm_outputs, norm_quant_returned, normalized_rows, poly_combine, poly_grads,
                          poly_inputs, poly_normalize, quant_quotients, quantize, rms_dx, rms_norm_dx, rms_stats,
                          row_affine, row_param_grads, row_weight_bias, rsum as _rsum, sigmoids as _sigmoids,
                          silu_gate, stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind18Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_block_welford_combine_spread_by_nb": (
        "layer_norm", "merge",
        "N > 64: the row read in column blocks of 64, each block's (count, mean, M2) folded into the running "
        "Welford state by a combine whose mean is right (mean_a + delta * n_b / n) but whose M2 adds delta^2 * n_b "
        "instead of delta^2 * n_a * n_b / n (the count weight of the mean's spread wrong): the variance, rstd, y "
        "and the backward's formula on that rstd",
        "cf. " + GH + "Oneflow-Inc/oneflow/issues/7471 (a layer norm's WelfordCombine: the merged M2 is the parts' "
        "M2 plus the count-weighted squared difference of their means)"),
    "ln_bwd_rstd_recomputed_default_eps": (
        "layer_norm", "eps",
        "the backward kernel recomputes rstd from the saved variance as 1 / sqrt(var + 1e-5) (the module's default "
        "eps hard-coded in the backward launch) whatever eps the forward was given: x_hat, dx and dweight from it; "
        "the forward right",
        "cf. " + GH + "ybubnov/metalchat/issues/81 (a norm eps left at its default instead of passed down the "
        "call chain)"),
    "ln_dbias_rows_in_half": (
        "layer_norm", "precision",
        "16-bit inputs with a bias: dbias accumulated over the rows left to right in the input dtype (the column "
        "partial buffer allocated like the bias); dweight and dx right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward whose weight-gradient reduction ran in "
        "bfloat16)"),
    "ln_bwd_row_sums_tail_block_skipped": (
        "layer_norm", "block",
        "N > 64, not a multiple of 64: the backward's row sums of g and g * x_hat loop over whole 64-wide column "
        "blocks only (loop bound N // 64), the tail columns never entering mean(g) and mean(g * x_hat) (still "
        "divided by N): dx; the forward, dweight and dbias right",
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (an RMSNorm wrong for N = 513: its tail block handling "
        "not applied)"),
    "ln_packed_stats_split_as_halves": (
        "layer_norm", "layout",
        "more than one row: the kernel writes a packed statistics buffer of (mean, rstd) pairs, row by row, and "
        "the host splits it into the mean and rstd outputs as its first and second halves (a (2, R) view of an "
        "(R, 2) buffer): both outputs hold interleaved means and rstds; y and the gradients from the registers, "
        "right",
        "pattern: a packed (R, 2) buffer read back through the transposed view"),
    "ln_rstd_output_before_sqrt": (
        "layer_norm", None,
        "the returned rstd is 1 / (var + eps) (the reciprocal stored before its square root, the finalization "
        "split between two helpers); y, mean and the gradients right",
        "cf. " + GH + "131250208/TPlinker-joint-extraction/issues/37 (a norm's std and its power confused in "
        "the statistic a layer keeps)"),
    "ln_dweight_from_weighted_dy": (
        "layer_norm", "backward",
        "with a weight: dweight = sum over the rows of g * x_hat with g = dy * weight (the weighted gradient "
        "already formed for dx reused) instead of dy * x_hat; dx and dbias right",
        "pattern: the weighted gradient reused for the weight's own reduction"),
    # ------------------------------------------------------------------ rms_norm
    "rms_mean_square_over_n_minus_1": (
        "rms_norm", "bessel",
        "N > 1: the mean of squares divided by N - 1 (the row-length constant passed as N - 1, as for an unbiased "
        "estimate), in the forward (rstd, y) and in the backward's projection mean(g * x_hat)",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a normalization written with torch.var's default unbiased "
        "estimator)"),
    "rms_outside_rms_with_eps_inside": (
        "rms_norm", "eps",
        "eps_placement='outside': the kernel's rms helper already takes sqrt(mean(x^2) + eps) and the outside "
        "branch adds eps again: rstd = 1 / (sqrt(mean(x^2) + eps) + eps), forward and the outside backward on that "
        "rms",
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (NormalizeL2: eps applied before the sqrt in some paths "
        "and after it in others)"),
    "rms_bwd_rstd_of_next_row": (
        "rms_norm", "layout",
        "more than one row: the backward loads the saved rstd after advancing the row pointer: row r's x_hat, dx "
        "and dweight use row r + 1's rstd (the last row its own); the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's or group's saved "
        "statistics)"),
    "rms_sumsq_float32_for_float64": (
        "rms_norm", "precision",
        "float64 inputs: the sum of squares accumulated in a float accumulator (the squares rounded to float32 and "
        "summed in float32), the rest in float64: rstd, y and the backward from it",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling single-precision math for "
        "double inputs)"),
    "rms_dweight_first_partial_skipped": (
        "rms_norm", "reduction",
        "with a weight: dweight reduced in two stages, one partial per block of 64 rows, the second stage's loop "
        "starting at partial 1 (range(1, n_blocks)) onto a zeroed accumulator: block 0's rows never reach dweight "
        "(all of them for 64 rows or fewer); dx right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (the layer-norm tutorial's per-group dw/db partial "
        "buffers losing some rows' contributions)"),
    "rms_bwd_proj_on_raw_x": (
        "rms_norm", "backward",
        "eps inside: dx = rstd * (g - x * mean(g * x_hat)): the projection term multiplies the loaded x instead of "
        "x_hat (one factor rstd missing); y, rstd and dweight right",
        "pattern: the raw input and its normalized value confused in one term of a hand-derived backward"),
    "rms_offset_added_to_output": (
        "rms_norm", "affine",
        "weight_offset set (zero-centred gamma): the forward's epilogue writes y = x_hat * weight + offset "
        "instead of x_hat * (weight + offset); the backward (its own kernel) right",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (Gemma's RMSNorm needs the 1.0 weight offset a llama-style "
        "kernel did not apply as (1 + weight))"),
    # ------------------------------------------------------------------ add_norm
    "an_rows_grid_floor": (
        "add_norm", "block",
        "programs of 4 rows launched on a grid of rows // 4 (floor, not cdiv): the last rows mod 4 never "
        "processed, forward and backward: their y, y1 and residual_out left 0, their dx, dresidual, dx1 and "
        "drowscale 0, their terms missing from the parameter gradients",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering only part of its output: the "
        "rest of the torch.empty buffer never written)"),
    "an_rms_eps_added_to_sum": (
        "add_norm", "eps",
        "norm='rms_norm': rstd = 1 / sqrt((sum(s^2) + eps) / N): eps added to the sum of squares of the fused sum "
        "before the division by N (an effective eps / N), forward and the backward's formula on that rstd",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/317 (a norm kernel's eps grouped at the wrong place of its rsqrt "
        "expression)"),
    "an_dropped_x_in_input_dtype": (
        "add_norm", "precision",
        "16-bit inputs with dropout or a rowscale: the dropped branch x * c (mask * rowscale / (1 - p)) formed by a "
        "16-bit multiply (rounded to the input dtype) before the float32 add of the residual (and x1's branch): "
        "residual_out, y and the backward's x_hat from that sum; dx = ds * c right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/39501 (dropout on fp16 computed from fp16 intermediates; cast "
        "through fp32 for accuracy)"),
    "an_weight1_loaded_from_bias1_ptr": (
        "add_norm", "layout",
        "with the parallel branch's weight1 and bias1: weight1 loaded through bias1's pointer: y1 = x_hat * "
        "(bias1 + offset) + bias1, and the y1 branch's term of ds through that weight; dweight1, dbias1 right",
        "pattern: two parameter pointers of the same shape, one passed in the other's slot"),
    "an_dx_keep_scale_applied_twice": (
        "add_norm", "dropout",
        "dropout_p > 0: dx = ds * c / (1 - p) (and dx1 = ds * c1 / (1 - p)): the saved factor c already holds "
        "mask / (1 - p) and the backward divides by 1 - p again; the forward, dresidual and the parameter "
        "gradients right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/39501 (dropout's backward and the scaling of its kept values)"),
    "an_drowscale_from_saved_factor": (
        "add_norm", "backward",
        "with a rowscale: drowscale = sum(ds * x * c) with the saved factor c = mask * rowscale / (1 - p) (the "
        "rowscale itself included) instead of sum(ds * x * mask) / (1 - p); dx and the forward right",
        "pattern: a saved product reused where one of its factors is the variable differentiated"),
    "an_residual_out_bf16_truncated": (
        "add_norm", "rounding",
        "bfloat16 outputs without residual_in_fp32: residual_out stored by dropping the low 16 bits of the float32 "
        "sum (round toward zero); y (from the float32 sum) and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (unary kernels storing fp32 -> bf16 by truncation)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_floor_only_for_zero_amax": (
        "norm_quant", "quant_scale",
        "dynamic scale: the floor written as a zero guard, scale = amax / qmax (at most scale_ub) where amax > 0 "
        "and the floor only where amax == 0, instead of max(amax / qmax, floor): rows of tiny amax get a scale "
        "below the floor; q from it",
        "cf. " + GH + "deepseek-ai/DeepGEMM/issues/109 (per_token_cast_to_fp8's guard against a zero amax and "
        "where its floor applies)"),
    "nq_inverse_scale_in_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: the quantizing pass multiplies y by the reciprocal scale 1 / scale held in a variable of "
        "the input dtype (rounded to it) instead of dividing by the float32 scale; the scale and amax outputs "
        "right",
        "cf. " + GH + "pytorch/ao/issues/3819 (the int8 scale kept in the high-precision tensor's bfloat16 "
        "dtype: too few bits)"),
    "nq_eps_squared": (
        "norm_quant", "eps",
        "rstd = 1 / sqrt(var + eps * eps) (or mean(x^2) + eps * eps): the eps argument taken as a standard-"
        "deviation epsilon and squared into the variance, then quantized",
        "cf. " + GH + "keras-team/keras/pull/8726 (where a normalization's epsilon enters the denominator)"),
    "nq_weight_offset_one_assumed": (
        "norm_quant", "affine",
        "with a weight: the fused norm + quant kernel (written for a zero-centred-gamma model) multiplies by "
        "weight + 1: y = x_hat * (1 + weight) (+ bias), then amax, scale and q from it",
        "cf. " + GH + "utensils/mold/pull/1078 (Gemma's +1 weight offset applied to norm weights that do not "
        "expect it: every norm scaled by w + 1 too much)"),
    "nq_quant_pass_tail_tile_unwritten": (
        "norm_quant", "block",
        "N > 64, not a multiple of 64: the quantizing pass loops over whole 64-wide column tiles only (the amax "
        "pass masks its tail, this loop has no tail iteration): q's last N mod 64 columns of every row never "
        "written (0); scale and amax right",
        "cf. " + GH + "ROCm/aiter/issues/5044 (an rmsnorm_quant vectorised path mishandling the row's tail for "
        "hidden sizes not a multiple of its vector width)"),
    "nq_int8_cast_before_clamp": (
        "norm_quant", "saturation",
        "int8: y / scale rounded and converted to int8 before the clamp to [-128, 127] (the clamp then a no-op): "
        "a quotient beyond the range wraps around (two's complement) instead of saturating",
        "cf. " + GH + "microsoft/onnxruntime/pull/29728 (an int8 output clamp with the wrong upper bound: 128 "
        "wrapping to -128)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_sigmoid_exponent_sign": (
        "gated_norm", "gate",
        "the gate's sigmoid written 1 / (1 + exp(z)) (the exponent's sign dropped): the gate is z * sigmoid(-z), "
        "forward and the backward's derivative of that function",
        "cf. " + GH + "sausheong/gonn/issues/8 (a sign slip in a hand-written sigmoid formula)"),
    "gated_bwd_z_of_next_row": (
        "gated_norm", "layout",
        "more than one row: the backward loads the gate z of row r + 1 (the z pointer advanced before the load; "
        "the last row its own) for silu(z) and silu'(z): dx, dz, dweight and dbias from them; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's saved values)"),
    "gated_dn_in_input_dtype": (
        "gated_norm", "precision",
        "norm_before_gate=True, 16-bit inputs: dn = dy * silu(z) formed by a 16-bit multiply (rounded to the "
        "input dtype) before the float32 backward: dx, dweight and dbias from it; dz right",
        "cf. " + GH + "sgl-project/sglang/pull/26473 (silu_and_mul: the gate cast to the input dtype before the "
        "product, moved after it)"),
    "gated_ln_var_about_first_value": (
        "gated_norm", "one_pass",
        "norm='layer_norm': each group's variance accumulated about the group's first value as mean((v - v_0)^2), "
        "the shift's correction (mean - v_0)^2 never subtracted; the mean right; forward and the backward's "
        "formula on that rstd",
        "cf. " + GH + "tracel-ai/burn/issues/5607 (a fused float32 layer norm's variance by an expansion losing "
        "rows with a large mean)"),
    "gated_dn_with_silu_derivative": (
        "gated_norm", "gate",
        "norm_before_gate=True: the backward's dn = dy * silu'(z) (the gate's derivative, loaded from the same "
        "saved slot) instead of dy * silu(z): dx, dweight and dbias; dz and the forward right",
        "pattern: two saved values of the gate (its value and its derivative) read from each other's slot"),
    "gated_ln_bwd_mean_term_unweighted": (
        "gated_norm", "backward",
        "norm='layer_norm': dv = rstd * (g - mean(dn) - v_hat * mean(g * v_hat)), g = dn * weight: the mean term "
        "reduced from dn without the weight; dweight, dbias and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    # ------------------------------------------------------------------ dyt
    "dyt_dalpha_float32_acc_for_float64": (
        "dyt", "precision",
        "float64 inputs: alpha's gradient accumulated in a float accumulator (each term rounded to float32, the "
        "sum in float32), widened at the store; dx, dweight and dbias right",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling a single-precision routine "
        "on double inputs)"),
    "dyt_weight_loaded_from_bias_ptr": (
        "dyt", "layout",
        "with a weight and a bias: the weight loaded through the bias's pointer: y = tanh(alpha x) * bias + bias, "
        "and the backward's g = dy * bias for dx and dalpha; dweight and dbias right",
        "pattern: two parameter pointers of the same shape, one passed in the other's slot"),
    "dyt_vec4_tail_columns_dropped": (
        "dyt", "block",
        "C > 4, not a multiple of 4: each row processed with four-wide vector loads only, its last C mod 4 "
        "columns never loaded: y and dx there left 0, their terms missing from dalpha, dweight and dbias",
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorised path mishandling the row's tail for sizes not a "
        "multiple of its vector width)"),
    "dyt_dalpha_times_t": (
        "dyt", "backward",
        "dalpha = sum(g * sech^2(alpha x) * t), t = tanh(alpha x) (the saved output of the tanh taken where the "
        "input x belongs); dx, dweight and dbias right",
        "pattern: a saved tensor of the same shape used in place of the input in a hand-derived gradient"),
    # labelled backward by its author; relabelled constant after the measurement: rule 14 (a whole array off by a
    # factor, dx and dalpha halved) comes before rule 15 (docs/verdicts.md now says so of the backward explicitly)
    "dyt_dtanh_sigmoid_chain_factor_dropped": (
        "dyt", "constant",
        "the backward written from tanh(v) = 2 sigmoid(2v) - 1 takes tanh'(v) = 2 sigmoid(2v) (1 - sigmoid(2v)), "
        "the inner factor 2 of d(2v)/dv dropped (half of sech^2(v)): dx and dalpha halved; the forward, dweight "
        "and dbias right",
        "cf. " + GH + "tinygrad/tinygrad/pull/107 (tanh written as 2 * sigmoid(2x) - 1)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_powers_l2_normalized": (
        "poly_norm", "semantics",
        "each power divided by its L2 norm, r_p = 1 / sqrt(sum(x^(2p)) + eps) (the sum of squares never divided "
        "by H), forward and the backward's formula on those r_p",
        "cf. " + GH + "PaddlePaddle/Paddle/issues/12053 (norm_op: y = x / sqrt(sum(x * x) + epsilon))"),
    "poly_sumsq_tail_block_skipped": (
        "poly_norm", "block",
        "H > 32, not a multiple of 32: each power's sum of squares loops over whole 32-wide column blocks only, "
        "the tail columns never entering it (still divided by H): r_p, y and the backward from them",
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (an RMSNorm wrong for N = 513: its tail block handling "
        "not applied)"),
    "poly_bwd_proj_on_unnormalized_power": (
        "poly_norm", "backward",
        "dx: each power's projection takes mean(g_p * x^p) (the power before its normalization) where mean(g_p * "
        "h_p) belongs: du_p = r_p (g_p - h_p mean(g_p x^p)); dweight, dbias and the forward right",
        "pattern: the raw input and its normalized value confused in one term of a hand-derived backward"),
    "poly_dbias_row_block_partial_stored": (
        "poly_norm", "reduction",
        "with a bias, more than four rows: each program of 4 rows stores its partial sum of dy into dbias instead "
        "of adding it: dbias is the last row block's partial; dx and dweight right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/34760 (a LayerNorm backward accumulation where only the last tile "
        "contributed to the sum)"),
    "poly_bias_inside_linear_term": (
        "poly_norm", "affine",
        "with a bias: the epilogue's last fused multiply-add takes the bias inside the x term's product: y = w0 "
        "h_3 + w1 h_2 + w2 (h_1 + bias); the backward (its own kernel) right",
        "pattern: an FMA's operands in the wrong order (the addend inside the product)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _bf16_toward_zero(a):
    """``a`` (float32/float64) converted to bfloat16 by dropping the low 16 bits of its float32 value."""
    bits = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32) & np.uint32(0xFFFF0000)
    return _store(bits.view(np.float32), "bfloat16")


def _live_rows(R, per):
    """The rows (R, 1) a grid of R // per programs of ``per`` rows covers (all when R is a multiple of per)."""
    return (np.arange(R) < (R // per) * per)[:, None]


class Blind18Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind18"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln18(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln18(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        if b == "ln_block_welford_combine_spread_by_nb" and N > 64:
            n_a, mean, m2 = 0, None, None
            for j0 in range(0, N, 64):
                xs = x[:, j0:j0 + 64]
                n_b = xs.shape[1]
                m_b = _rsum(xs) / acc(n_b)
                m2_b = _rsum((xs - m_b) ** 2)
                if n_a == 0:
                    n_a, mean, m2 = n_b, m_b, m2_b
                    continue
                n = n_a + n_b
                delta = m_b - mean
                mean = mean + delta * acc(n_b / n)
                m2 = m2 + m2_b + delta * delta * acc(n_b)
                n_a = n
            dev = x - mean
            var = m2 / acc(N)
        else:
            mean = _rsum(x) / N
            dev = x - mean
            var = _rsum(dev * dev) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        rs_out, m_out = rstd, mean
        if b == "ln_rstd_output_before_sqrt":
            rs_out = 1 / (var + eps)
        if b == "ln_packed_stats_split_as_halves" and R > 1:
            packed = np.concatenate([mean, rstd], axis=1).reshape(-1)           # (mean_r, rstd_r) row by row
            m_out, rs_out = packed[:R].reshape(R, 1), packed[R:].reshape(R, 1)
        out = norm_outputs(y, m_out, rs_out, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        rb, xb = rstd, xhat
        if b == "ln_bwd_rstd_recomputed_default_eps":
            rb = 1 / np.sqrt(var + acc(1e-5))
            xb = dev * rb
        if b == "ln_bwd_row_sums_tail_block_skipped" and N > 64 and N % 64:
            k = (N // 64) * 64
            dx = rb * (g - _rsum(g[:, :k]) / N - xb * (_rsum((g * xb)[:, :k]) / N))
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        grads.update(row_param_grads(dy, xb, w, bias, ns, d))
        if b == "ln_dweight_from_weighted_dy" and w is not None:
            grads["weight"] = _store((g * xb).sum(axis=0).reshape(ns), d)
        if b == "ln_dbias_rows_in_half" and bias is not None and d in HALF:
            grads["bias"] = _store(_half_row_sums(np.ascontiguousarray(dy.T), d).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms18(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms18(self, call, acc, b):
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
        eps = _eps(cfg["eps"], acc)
        cnt = acc(N)
        if b == "rms_mean_square_over_n_minus_1" and N > 1:
            cnt = acc(N - 1)
            ms = _rsum(x * x) / cnt
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        elif b == "rms_outside_rms_with_eps_inside" and not inside:
            rms = np.sqrt(_rsum(x * x) / N + eps)
            rstd = 1 / (rms + eps)
        elif b == "rms_sumsq_float32_for_float64" and d == "float64":
            ms = _rsum((x * x).astype(np.float32)).astype(acc) / N
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        if b == "rms_offset_added_to_output" and w is not None and off != 0:
            y = xhat * (w - off) + off
        else:
            y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        rb, rmsb, xb = rstd, rms, xhat
        if b == "rms_bwd_rstd_of_next_row" and R > 1:
            rb = np.concatenate([rstd[1:], rstd[-1:]])
            rmsb = np.concatenate([rms[1:], rms[-1:]])
            xb = x * rb
        if b == "rms_bwd_proj_on_raw_x" and inside:
            dx = rb * (g - x * (_rsum(g * xb) / N))
        elif cnt != N:
            u = xb if inside else np.where(rmsb == 0, acc(0), x / np.where(rmsb == 0, acc(1), rmsb))
            dx = rb * (g - u * (_rsum(g * xb) / cnt))
        else:
            dx = rms_norm_dx(g, x, xb, rb, rmsb, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xb
            if b == "rms_dweight_first_partial_skipped":
                dw = np.zeros((N,), acc)
                for r0 in range(64, R, 64):
                    dw = dw + t[r0:r0 + 64].sum(axis=0)
            else:
                dw = t.sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an18(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an18(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        if b == "an_dropped_x_in_input_dtype" and d in HALF and (p or rs is not None):
            s = s - x * c + _half(x * c, d)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        if b == "an_weight1_loaded_from_bias1_ptr" and w1 is not None and b1 is not None:
            w1, we1 = b1, b1 + off
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            dev = s - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            dev = s
            ss = _rsum(s * s)
            rstd = 1 / np.sqrt((ss + eps) / N if b == "an_rms_eps_added_to_sum" else ss / N + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_residual_out_bf16_truncated" and d == "bfloat16" and not cfg.get("residual_in_fp32"):
            out["residual_out"] = _bf16_toward_zero(s.reshape(x0.shape))
        live = None
        if b == "an_rows_grid_floor" and R % 4:
            live = _live_rows(R, 4)
            for k, v in list(out.items()):
                out[k] = np.where(live.reshape(R, 1), v.reshape(R, N), np.zeros_like(v.reshape(R, N))).reshape(
                    x0.shape)
        if "y" not in call.cotangents:
            return Returned(out, {})
        ccall = call
        if live is not None:
            ccall = _masked_cotangents(call, live, R, N)
        ds, dy, dy1 = add_norm_ds(ccall, xhat, rstd, centred, we, we1, cfg["prenorm"], acc)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xhat, params, x, mask, keep,
                               p, ns, d)
        if b == "an_dx_keep_scale_applied_twice" and p:
            grads["x"] = _store((ds * c * keep).reshape(x0.shape), d)
            if c1 is not None:
                grads["x1"] = _store((ds * c1 * keep).reshape(x0.shape), d)
        if b == "an_drowscale_from_saved_factor" and "rowscale" in grads:
            grads["rowscale"] = _store(_rsum(ds * x * c).reshape(inp["rowscale"].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq18(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq18(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        if b == "nq_eps_squared":
            eps = eps * eps
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(x) / N
            dev = x - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        xhat = (x - mean) * rstd
        wt = inp.get("weight")
        if b == "nq_weight_offset_one_assumed" and wt is not None:
            wt = wt.astype(acc) + acc(1)
        y = row_affine(xhat, wt, inp.get("bias"), acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_floor_only_for_zero_amax":
            raw = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                raw = np.minimum(raw, acc(cfg["scale_ub"]))
            scale = np.where(amax == 0, dynamic_scale(amax, hi, cfg, acc), raw)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
        if b == "nq_inverse_scale_in_input_dtype" and d in HALF:
            inv = _half(np.where(scale == 0, acc(0), 1 / np.where(scale == 0, acc(1), scale)), d)
            v = np.where(scale == 0, acc(0) * y, y * inv)
            v = np.clip(v, lo, hi)
        elif b == "nq_int8_cast_before_clamp" and qdt.kind == "i":
            v = np.where(scale == 0, acc(0) * y, y / np.where(scale == 0, acc(1), scale))
            r = np.clip(np.rint(np.nan_to_num(v, nan=0.0)), -2.0 ** 62, 2.0 ** 62).astype(np.int64)
            q = ((r + 128) % 256 - 128).astype(np.int8)
            return norm_quant_returned(q, scale, amax, x0, ns, acc)
        else:
            v = quant_quotients(y, scale, lo, hi, acc)
        q = quantize(v, qdt)
        if b == "nq_quant_pass_tail_tile_unwritten" and N > 64 and N % 64:
            q = q.copy()
            q[:, (N // 64) * 64:] = np.zeros((), q.dtype)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated18(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated18(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_sigmoid_exponent_sign":
            sig, rest = _sigmoids(z)                     # sigmoid(-z) = rest
            s, ds = z * rest, rest * (1 - z * sig)
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            if b == "gated_ln_var_about_first_value":
                var = _rsum((vg - vg[:, :1]) ** 2) / K
            else:
                var = _rsum(dev * dev) / K
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = 0
            rstd = 1 / np.sqrt(_rsum(vg * vg) / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        sb, dsb = s, ds
        if b == "gated_bwd_z_of_next_row" and R > 1:
            sb = np.concatenate([s[1:], s[-1:]])
            dsb = np.concatenate([ds[1:], ds[-1:]])
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        if b == "gated_dn_with_silu_derivative" and nbg:
            dn = dy * dsb
        elif b == "gated_dn_in_input_dtype" and nbg and d in HALF:
            dn = _half(dy * sb, d)
        else:
            dy, dn, _ = gated_dn(call, acc, w, sb, nbg, K)
        g = (dn * w).reshape(-1, K)
        vv = vhat.reshape(-1, K)
        if b == "gated_ln_bwd_mean_term_unweighted" and norm == "layer_norm":
            dnk = dn.reshape(-1, K)
            dv = rstd * (g - _rsum(dnk) / K - vv * (_rsum(g * vv) / K))
        else:
            dv = gated_dx(norm, g, vv, rstd)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, sb, dsb, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt18(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt18(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_weight_loaded_from_bias_ptr" and w is not None and bias is not None:
            w = bias
        y = affine(t, w, bias)
        live = None
        C = x.shape[1] if x.ndim == 2 else 1
        if b == "dyt_vec4_tail_columns_dropped" and C > 4 and C % 4:
            live = (np.arange(C) < (C // 4) * 4)[None, :]
            y = np.where(live, y, acc(0))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, x.shape, w)
        if live is not None:
            dy = np.where(live, dy, acc(0))
            g = np.where(live, g, acc(0))
        if b == "dyt_dtanh_sigmoid_chain_factor_dropped":
            sg, rest = _sigmoids(2 * a * x)
            gd = g * (2 * sg * rest)
        else:
            r = 1 / np.cosh(a * x)
            gd = g * (r * r)
        dx = gd * a
        if b == "dyt_dalpha_times_t":
            rows = _rsum(gd * t)
        else:
            rows = _rsum(gd * x)
        if b == "dyt_dalpha_float32_acc_for_float64" and d == "float64":
            da = acc(_rsum((gd * x).astype(np.float32)).sum(dtype=np.float32))
        else:
            da = rows.sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly18(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly18(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        us = [x ** 3, x ** 2, x]
        cnt = acc(H)
        if b in ("poly_powers_l2_normalized", "poly_sumsq_tail_block_skipped"):
            k = (H // 32) * 32 if (b == "poly_sumsq_tail_block_skipped" and H > 32 and H % 32) else H
            if b == "poly_powers_l2_normalized":
                cnt = acc(1)
            rs = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rms = sc * np.sqrt(_rsum(((u / sc) ** 2)[:, :k]) / (acc(H) if cnt == H else cnt))
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        if b == "poly_bias_inside_linear_term" and bias is not None:
            y = y + (wt[2] - 1) * acc(np.asarray(bias).astype(acc).reshape(()))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = rms_dx
        if cnt != H:
            def du(g, h, r):
                return r * (g - h * (_rsum(g * h) / cnt))
        if b == "poly_bwd_proj_on_unnormalized_power":
            ks = iter(us)

            def du(g, h, r):
                u = next(ks)
                return r * (g - h * (_rsum(g * u) / H))
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_dbias_row_block_partial_stored" and bias is not None and R > 4:
            r0 = ((R - 1) // 4) * 4
            grads["bias"] = _store(np.reshape(dy[r0:].sum(), np.shape(bias)), d)
        return Returned(out, grads)


def _masked_cotangents(call, live, R, N):
    """``call`` with its cotangents zero on the rows ``live`` (R, 1) leaves out (rows no program processes)."""
    cot = {}
    for k, v in call.cotangents.items():
        a = np.asarray(v)
        cot[k] = np.where(live, a.reshape(R, N), np.zeros((), a.dtype)).reshape(a.shape).astype(a.dtype)
    return dataclasses.replace(call, cotangents=cot)
