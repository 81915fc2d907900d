"""A twenty-eighth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind28Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln28``, ``_rms28``, ``_an28``, ``_nq28``, ``_gated28``, ``_dyt28``,
``_poly28``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind28Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind27.py (the same mistake on the same op; the twenty-ninth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx_dz,
                          gated_grads, gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned,
                          normalized_rows, np_dtype, poly_combine, poly_grads, poly_inputs, poly_normalize, pow2,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias,
                          rsum as _rsum, sigmoids, silu_gate, stat_shape, static_scale, store as _store,
                          weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind20 import _norm_dx
from .blind23 import _toward_zero
from .blind26 import _directed, _half_rowsum

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind28Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_mean_over_pow2_block": (
        "layer_norm", "block",
        "N not a power of two: the row's sum divided by the tile width next_pow2(N) (the padded lanes' count) "
        "for the mean, the variance then taken about that mean with the right count N: mean (returned), rstd, "
        "y and the backward's x_hat",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/518 (a layer-norm kernel's row statistics over a power-of-two "
        "BLOCK_SIZE wider than the feature dimension)"),
    "ln_var_as_raw_mean_square": (
        "layer_norm", "one_pass",
        "the one-pass variance written sum(x^2) / N without subtracting mean^2 (the mean's correction term "
        "left out): rstd = 1 / sqrt(mean(x^2) + eps), the normalization still centred: rstd, y and the "
        "backward from them; the mean right",
        "cf. " + GH + "huggingface/transformers/issues/14772 (a layer norm's variance computed without "
        "subtracting the mean)"),
    "ln_rstd_approx_11_bits": (
        "layer_norm", "precision",
        "float32 compute: rstd from a hardware reciprocal square root estimate without its Newton step, "
        "modelled as rstd rounded to nearest at 11 significant bits: rstd (returned), y and the backward",
        "cf. " + GH + "Xilinx/finn/pull/1667 (a LayerNorm's reciprocal-square-root approximation too coarse "
        "without more Newton steps)"),
    "ln_mean_output_negated": (
        "layer_norm", None,
        "the fused kernel keeps -mean (the shift it adds: y = x * rstd + (-mean * rstd)) and stores that "
        "register to the mean output: mean returned negated; y, rstd and the gradients right",
        "pattern: a kernel storing the negated statistic it folds into an FMA"),
    "ln_bwd_mean_term_sign_flipped": (
        "layer_norm", "backward",
        "dx = rstd * (g + mean(g) - x_hat * mean(g * x_hat)): the mean(g) term's sign flipped (added); the "
        "forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a layernorm backward's mean(dy * gamma) term of dx "
        "wrong)"),
    "ln_bwd_rstd_eps_outside": (
        "layer_norm", "eps",
        "the backward recomputes rstd from the saved variance as 1 / (sqrt(var) + eps) (eps outside the root) "
        "and x_hat from it: dx and dweight; the forward (y, mean, rstd) and dbias right",
        "cf. " + GH + "hkproj/pytorch-transformer/pull/31 (a layer norm dividing by std + eps instead of sqrt(var "
        "+ eps))"),
    "ln_dweight_store_shifted_one_column": (
        "layer_norm", "layout",
        "dweight's column sums written at column j + 1 (the store offset computed from a 1-based column "
        "index): dweight[0] left 0, each column holding its left neighbour's sum, the last one dropped; dbias, "
        "dx and the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm parameter-gradient kernel's column index "
        "wrong)"),
    "ln_dbias_last_block_partial_only": (
        "layer_norm", "reduction",
        "more than 32 rows, with a bias: dbias's per-block partials (32 rows a block) stored into the output "
        "instead of added, so the last block's partial sum is returned; dweight, dx and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a layernorm backward reduction keeping only the last "
        "block's contribution)"),
    "ln_f16_dweight_round_toward_zero": (
        "layer_norm", "rounding",
        "float16 inputs: dweight converted to float16 by a round-toward-zero conversion instead of to "
        "nearest even; dx, dbias and the forward right",
        "cf. " + GH + "dmlc/mshadow/pull/368 (float to half conversions rounding toward zero instead of to "
        "nearest even)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_eps_as_rms_clamp": (
        "rms_norm", "eps",
        "eps inside: rstd = 1 / max(sqrt(mean(x^2)), eps) (eps used as a clamp on the rms, the F.normalize "
        "convention) instead of 1 / sqrt(mean(x^2) + eps): rstd, y and the backward on it (an all-zero row's "
        "rstd 1 / eps)",
        "cf. " + GH + "tenstorrent/tt-mlir/pull/8999 (an RMS norm written with clamp(eps) on the root instead of "
        "eps inside it)"),
    "rms_sumsq_of_tf32_inputs": (
        "rms_norm", "precision",
        "float32 compute: the sum of squares taken of x rounded to TF32 (10 explicit mantissa bits) before "
        "squaring (the reduction done by a TF32 dot), accumulated in float32: rstd, y and the backward",
        "cf. " + GH + "tenstorrent/tt-metal/pull/53636 (float32 reductions truncating their operands to TF32)"),
    "rms_normalized_by_mean_abs": (
        "rms_norm", "semantics",
        "the root mean square replaced by the mean absolute value: rstd = 1 / (mean(|x|) + eps) (the "
        "L1 variant), y = x * rstd * weight and the backward of that equation",
        "pattern: another norm of the row than its root mean square"),
    "rms_rstd_written_at_stride_2": (
        "rms_norm", "layout",
        "more than one row: rstd stored at element 2r of its buffer (the (mean, rstd) pair stride of the "
        "layer-norm kernel it was copied from): slot i holds row i / 2's rstd for even i, odd slots left 0; "
        "y and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/57223 (a norm kernel's statistics at the stride of another "
        "quantity)"),
    "rms_bwd_proj_over_pow2_block": (
        "rms_norm", "block",
        "N not a power of two: the backward's mean(g * x_hat) divided by the tile width next_pow2(N) "
        "instead of N: dx; the forward and dweight right",
        "cf. " + GH + "ROCm/composable_kernel/pull/315 (a normalization's reduce length taken from the padded "
        "tile length)"),
    "rms_bwd_weight_outside_projection": (
        "rms_norm", "backward",
        "with a weight: dx = weight * rstd * (dy - x_hat * mean(dy * x_hat)) (the weight applied to the "
        "whole unweighted dx, as if it were a scalar) instead of rstd * (g - x_hat * mean(g * x_hat)), "
        "g = dy * weight; dweight and the forward right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (an RMSNorm input gradient applying the weight to the wrong "
        "term)"),
    "rms_dweight_first_row_counted_twice": (
        "rms_norm", "reduction",
        "with a weight: dweight's accumulator initialised with row 0's dy * x_hat and the loop over the rows "
        "then starting at row 0: row 0 counted twice; dx and the forward right",
        "pattern: an accumulator initialised with the first term and the loop not advanced past it"),
    "rms_bf16_dx_truncated": (
        "rms_norm", "rounding",
        "bfloat16 inputs: dx converted to bfloat16 by dropping the low 16 bits (round toward zero) instead of "
        "to nearest even; y, rstd and dweight right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/19882 (float32 to bfloat16 by truncation instead of round to "
        "nearest even)"),
    # ------------------------------------------------------------------ add_norm
    "an_rms_eps_outside_root": (
        "add_norm", "eps",
        "norm='rms_norm': rstd = 1 / (sqrt(mean(s^2)) + eps) (eps added to the rms) instead of 1 / sqrt("
        "mean(s^2) + eps), forward (y, y1) and the backward's formula on that rstd",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/508 (a fused norm's eps moved between inside and "
        "outside the root)"),
    "an_stats_tail_tile_skipped": (
        "add_norm", "block",
        "N > 16: the statistics' loop over column tiles of 16 runs over the full tiles only (range(0, N - 15, "
        "16)): the last N mod 16 columns left out of the sums (still divided by N): the mean and variance (or "
        "mean square), y, y1 and the backward; residual_out right",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a layer-norm kernel leaving out the columns past its "
        "first block)"),
    "an_rms_mean_square_over_n_minus_1": (
        "add_norm", "bessel",
        "norm='rms_norm', N > 1: the sum of squares of s divided by N - 1: rstd, y, y1 and the backward's "
        "formula on that rstd",
        "cf. " + GH + "mlichvar/ntpperf/pull/7 (an RMS computed with n - 1 in its denominator)"),
    "an_zc_bwd_offset_missing": (
        "add_norm", "affine",
        "weight_offset set (zero-centred weight): the backward's g = dy * weight (and dy1 * weight1) without "
        "the offset, while the forward multiplies by weight + offset: dx, dresidual, dx1, drowscale; the "
        "forward and the parameter gradients right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/67 (zero-centred gamma: the backward kernels not receiving "
        "the +1)"),
    "an_dx1_from_y1_branch_only": (
        "add_norm", "backward",
        "the parallel input x1 with y1: dx1 = ds1 * c1 with ds1 the norm's backward of dy1 alone (x1 taken to "
        "feed y1 only) instead of the full ds (y's branch and residual_out's cotangent included); dx, "
        "dresidual and the rest right",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (a fused add + RMSNorm backward routing its gradients wrong)"),
    "an_dropout_multiplied_by_keep_prob": (
        "add_norm", "dropout",
        "dropout: the kept values multiplied by the keep probability 1 - p instead of divided by it, forward "
        "(x and x1 branches) and backward (dx, dx1, drowscale)",
        "cf. " + GH + "nelson-liu/paraphrase-id-tensorflow/pull/33 (un-dropped values multiplied by the keep "
        "probability)"),
    "an_residual_out_row_pointer_late": (
        "add_norm", "layout",
        "more than one row: residual_out's store pointer advanced before the store: row r's sum written at "
        "row r + 1 (row 0 left 0, the last row's dropped); y and the gradients from the right sum",
        "cf. " + GH + "tenstorrent/tt-metal/pull/57039 (a LayerNorm/RMSNorm kernel's row indexing corrupting "
        "rows)"),
    "an_noprenorm_residual_out_unwritten": (
        "add_norm", None,
        "prenorm=False: the kernel skips the residual_out store (the sum taken as unused without prenorm): "
        "residual_out returned zeros; y and the gradients right",
        "cf. " + GH + "Dao-AILab/quack/pull/39 (a fused RMSNorm's residual_out handled by the prenorm flag)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_e5m2_scale_from_e4m3_max": (
        "norm_quant", "quant_scale",
        "float8_e5m2, dynamic scale: scale = amax / 448 (float8_e4m3fn's largest value, the fp8 constant "
        "hard-coded) instead of amax / 57344, its floor from 448 alike; the clip at 57344 right: scale and q",
        "cf. " + GH + "huggingface/optimum-quanto/issues/240 (a float8 quantization scale from another format's "
        "range)"),
    "nq_e4m3_clipped_at_240": (
        "norm_quant", "saturation",
        "float8_e4m3fn: the quotients clipped to [-240, 240] (e4m3fnuz's largest value) while the scale is "
        "amax / 448: q saturated above 240; scale and amax right",
        "cf. " + GH + "uccl-project/uccl/pull/804 (fp8 max 240 of e4m3fnuz mixed with e4m3fn's 448)"),
    "nq_dyn_scale_rounded_up_to_bf16": (
        "norm_quant", "scale_rounding",
        "dynamic scale: after its clamps rounded up (toward +inf) to a bfloat16 value (the scale buffer "
        "bfloat16, the conversion chosen so the quotients never exceed qmax): the scale, and q divided by it",
        "cf. " + GH + "tracel-ai/burn/pull/5261 (quantization scales rounded to their narrower storage dtype)"),
    "nq_int8_quotient_in_f16": (
        "norm_quant", "precision",
        "int8 with float16 inputs: the quotient y / scale held in a float16 register (rounded to nearest) "
        "before its round to an integer: q (values within a float16 half-step of an integer's midpoint land "
        "on the other integer); scale and amax right",
        "cf. " + GH + "microsoft/onnxruntime/pull/32452 (a float16 QuantizeLinear path rounding its quotient "
        "wrong)"),
    "nq_rms_chunk_mean_squares_averaged": (
        "norm_quant", "merge",
        "norm='rms_norm', N not a multiple of 64: the row's mean square merged from chunks of 64 columns as "
        "the plain average of the chunks' mean squares (the short last chunk weighted like a full one): "
        "rstd, y, amax, the dynamic scale and q",
        "cf. " + GH + "FederatedAI/FATE/issues/93 (a mean computed as the average of partition means)"),
    "nq_amax_output_of_next_row": (
        "norm_quant", "layout",
        "more than one row: the amax output pointer advanced before the store: amax[r] holds row r + 1's "
        "amax (the last row its own); the scale and q from the right amax",
        "cf. " + GH + "ROCm/rocm-libraries/pull/12002 (a normalize kernel reading another sample's statistics "
        "through a wrong stride)"),
    "nq_amax_of_even_columns": (
        "norm_quant", "block",
        "amax reduced over packed pairs (half2 / float2 loads) taking only each pair's low lane: the odd "
        "columns never enter amax: amax, the dynamic scale and q (clipped where an odd column is larger)",
        "cf. " + GH + "NVIDIA/TensorRT-LLM/pull/16190 (a quantizer's lane amax reduction over part of its lanes)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_gate_quick_gelu": (
        "gated_norm", "gate",
        "the gate function instantiated as quick_gelu, z * sigmoid(1.702 z), instead of silu(z) = z * "
        "sigmoid(z), forward and the backward's gate derivative of that function",
        "cf. " + GH + "togethercomputer/stripedhyena/pull/9 (a model's gate activation silu where gelu belongs)"),
    "gated_sumsq_in_half": (
        "gated_norm", "precision",
        "16-bit inputs: each group's sum of squares (of the deviations for layer_norm) accumulated left to "
        "right in the input dtype, each term and partial sum rounded to it: rstd, y and the backward",
        "cf. " + GH + "ekzhang/jax-js/pull/80 (f16 sum reductions performed in f16 instead of f32)"),
    "gated_eps_added_to_group_sum": (
        "gated_norm", "eps",
        "each group's eps added to its sum of squares (of deviations) before the division by the group "
        "size: rstd = 1 / sqrt((sum + eps) / K) (an effective eps / K), forward and the backward on that "
        "rstd",
        "cf. " + GH + "apple/coremltools/pull/2822 (an rms_norm's effective eps changed by where it is added)"),
    "gated_ln_var_over_row_about_group_means": (
        "gated_norm", "group",
        "norm='layer_norm', group_size < H: each value centred by its group's mean but the variance taken "
        "over the whole row (the squared deviations summed over every group, divided by H): rstd per row, y "
        "and the backward on it",
        "pattern: two reductions of one statistic over different extents"),
    "gated_ln_bwd_proj_on_centred_v": (
        "gated_norm", "backward",
        "norm='layer_norm': dv = rstd * (g - mean(g) - v_hat * mean(g * (v - mean))) (the projection's row sum "
        "taken of g times the centred value, one factor rstd left out): dx (and dz where the gate sits before "
        "the norm); the forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/12633 (a layer norm backward's dx written with the centred input "
        "and its rstd factors)"),
    "gated_dbias_partials_averaged": (
        "gated_norm", "reduction",
        "with a bias, more than 4 rows: dbias's per-block partials (4 rows a block) averaged over the blocks "
        "instead of summed; dweight, dx, dz and the forward right",
        "cf. " + GH + "kvfrans/notes/issues/5 (a bias gradient taken as a mean where the sum belongs)"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_argument_clamped_at_5": (
        "dyt", None,
        "tanh's argument clamped to [-5, 5] (the range of a rational approximation) before an accurate tanh: "
        "t = tanh(clip(alpha x, -5, 5)), y and dweight from it, and the backward's 1 - t^2 from that t (dx "
        "and dalpha)",
        "cf. " + GH + "deeplearning4j/deeplearning4j/pull/2666 (a rational tanh approximation checked against "
        "tanh's gradient)"),
    "dyt_dalpha_accumulated_twice": (
        "dyt", "constant",
        "alpha's gradient accumulated by the row kernel's atomics into a buffer the host then adds to itself "
        "(the partial reduction launched twice): dalpha twice its value; dx, dweight and dbias right",
        "cf. " + GH + "pecos/tps/pull/19 (a partial gradient added to the previous buffer instead of overwriting "
        "it)"),
    "dyt_param_column_from_padded_stride": (
        "dyt", "layout",
        "C not a power of two: the elementwise kernel over the flattened input takes each element's "
        "channel as flat_index mod next_pow2(C) (the block width) instead of mod C, columns >= C masked to "
        "weight 0 and bias 0: y, and the backward's g, dweight and dbias at those channels",
        "cf. " + GH + "LeelaChessZero/lc0/pull/676 (the padded channel count used where the unpadded one belongs)"),
    "dyt_dweight_rows_from_one": (
        "dyt", "reduction",
        "with a weight, more than one row: dweight's loop over the rows starts at row 1 (range(1, M)): row "
        "0's dy * t never added; dbias, dx, dalpha and the forward right",
        "pattern: a reduction loop starting at 1"),
    "dyt_dweight_times_weight": (
        "dyt", "backward",
        "dweight = sum(dy * weight * t) (the weighted g = dy * weight reused where dy belongs); dbias, dx, "
        "dalpha and the forward right",
        "pattern: a parameter gradient from the weighted upstream gradient"),
    # ------------------------------------------------------------------ poly_norm
    "poly_weight_plus_one": (
        "poly_norm", "affine",
        "each weight taken zero-centred: y = sum_p (1 + w_p) h_p + bias, and the backward's dx from the "
        "(1 + w_p); dweight and dbias right",
        "cf. " + GH + "huggingface/candle/pull/2436 (the (1 + weight) norm convention of Gemma's fused rmsnorm)"),
    "poly_f16_y_rounded_up": (
        "poly_norm", "rounding",
        "float16 outputs: y converted by the round-up conversion (toward +inf) instead of to nearest even; "
        "the gradients right",
        "cf. " + GH + "KhronosGroup/OpenCL-CTS/pull/2223 (a device converting float results to half with another "
        "rounding mode)"),
    "poly_bwd_cube_factor_from_square_factor": (
        "poly_norm", "backward",
        "dx's chain factor of the cube term computed as 3 * (2 x) (the square term's factor register reused) "
        "instead of 3 x^2: dx; the forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/40449 (a fused PolyNorm3 backward's k x^(k - 1) chain factors)"),
    "poly_f64_rstd_in_float32": (
        "poly_norm", "precision",
        "float64 inputs: each power's rstd computed in float32 (its mean square rounded to float32, the "
        "single-precision rsqrt), widened and used for y and the backward",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/30452 (a float64 layer norm computing its rsqrt in single "
        "precision)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _mantissa(a, bits):
    """``a`` rounded to nearest (half to even) at ``bits`` significant bits, in its own dtype."""
    m, e = np.frexp(np.asarray(a, np.float64))
    return np.ldexp(np.rint(m * 2.0 ** bits) / 2.0 ** bits, e).astype(np.asarray(a).dtype)


def _late(a):
    """Row r of ``a`` (rows, k) written at row r + 1 (row 0 left 0, the last row dropped)."""
    out = np.zeros_like(a)
    out[1:] = a[:-1]
    return out


class Blind28Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind28"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln28(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln28(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        cnt = acc(pow2(N)) if b == "ln_mean_over_pow2_block" else acc(N)
        mean = _rsum(x) / cnt
        dev = x - mean
        if b == "ln_var_as_raw_mean_square":
            var = _rsum(x * x) / N                           # E[x^2], the mean^2 term never subtracted
        else:
            var = _rsum(dev * dev) / N
        rstd = 1 / np.sqrt(var + eps)
        if b == "ln_rstd_approx_11_bits" and acc is np.float32:
            rstd = _mantissa(rstd, 11)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if b == "ln_mean_output_negated":
            out["mean"] = -out["mean"]
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        rb, xb = rstd, xhat
        if b == "ln_bwd_rstd_eps_outside":
            rb = 1 / (np.sqrt(var) + eps)
            xb = dev * rb
        if b == "ln_bwd_mean_term_sign_flipped":
            dx = rb * (g + _rsum(g) / N - xb * (_rsum(g * xb) / N))
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            dw = (dy * xb).sum(axis=0)
            if b == "ln_dweight_store_shifted_one_column":
                dw = np.concatenate([np.zeros(1, acc), dw[:-1]])
            if b == "ln_f16_dweight_round_toward_zero" and d == "float16":
                grads["weight"] = _toward_zero(dw.reshape(ns), np.dtype(np.float16))
            else:
                grads["weight"] = _store(dw.reshape(ns), d)
        if bias is not None:
            if b == "ln_dbias_last_block_partial_only" and R > 32:
                db = dy[((R - 1) // 32) * 32:].sum(axis=0)     # the last block's partial, stored last
            else:
                db = dy.sum(axis=0)
            grads["bias"] = _store(db.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms28(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms28(self, call, acc, b):
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
        xs = _mantissa(x, 11) if b == "rms_sumsq_of_tf32_inputs" and acc is np.float32 else x
        l1 = b == "rms_normalized_by_mean_abs"
        if l1:
            ms = _rsum(np.abs(x)) / N
            rms = ms
            rstd = 1 / (ms + eps)
        else:
            ms = _rsum(xs * xs) / N
            rms = np.sqrt(ms)
            if not inside:
                rstd = 1 / (rms + eps)
            elif b == "rms_eps_as_rms_clamp":
                rstd = 1 / np.maximum(rms, eps)
            else:
                rstd = 1 / np.sqrt(ms + eps)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        rs = rstd.reshape(R)
        if b == "rms_rstd_written_at_stride_2" and R > 1:
            buf = np.zeros(R, acc)
            buf[0::2] = rs[:(R + 1) // 2]                    # row r at slot 2r, the slots past R dropped
            rs = buf
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if l1:
            dx = rstd * (g - np.sign(x) * (_rsum(g * xhat) / N))
        elif b == "rms_bwd_proj_over_pow2_block":
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - u * (_rsum(g * xhat) / acc(pow2(N))))
        elif b == "rms_bwd_weight_outside_projection" and w is not None:
            dx = w * rms_norm_dx(dy, x, xhat, rstd, rms, placement)
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        if b == "rms_bf16_dx_truncated" and d == "bfloat16":
            grads = {"x": _toward_zero(dx.reshape(x0.shape), np_dtype("bfloat16"))}
        else:
            grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xhat
            dw = t.sum(axis=0)
            if b == "rms_dweight_first_row_counted_twice":
                dw = dw + t[0]
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an28(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an28(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        if b == "an_dropout_multiplied_by_keep_prob" and p:
            keep = acc(1.0 - p)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        k = (N // 16) * 16 if b == "an_stats_tail_tile_skipped" and N > 16 else N   # the columns summed
        if centred:
            dev = s - _rsum(s[:, :k]) / N
        else:
            dev = s
        cnt = acc(N - 1) if b == "an_rms_mean_square_over_n_minus_1" and not centred and N > 1 else acc(N)
        var = _rsum((dev * dev)[:, :k]) / cnt
        if b == "an_rms_eps_outside_root" and not centred:
            rstd = 1 / (np.sqrt(var) + eps)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_residual_out_row_pointer_late" and R > 1:
            out["residual_out"] = np.ascontiguousarray(_late(out["residual_out"].reshape(R, N)).reshape(x0.shape))
        if b == "an_noprenorm_residual_out_unwritten" and not cfg["prenorm"]:
            out["residual_out"] = np.zeros_like(out["residual_out"])
        if "y" not in call.cotangents:
            return Returned(out, {})
        wb, wb1 = (w, w1) if b == "an_zc_bwd_offset_missing" and off != 0 else (we, we1)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = _norm_dx(dy, wb, xhat, rstd, centred, _rsum)
        dy1 = ds1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds1 = _norm_dx(dy1, wb1, xhat, rstd, centred, _rsum)
            ds = ds + ds1
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xhat, params, x, mask,
                               keep, p, ns, d)
        if b == "an_dx1_from_y1_branch_only" and c1 is not None and ds1 is not None:
            grads["x1"] = _store((ds1 * c1).reshape(x0.shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq28(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq28(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            if b == "nq_rms_chunk_mean_squares_averaged" and N % 64:
                chunks = [x[:, j:j + 64] for j in range(0, N, 64)]
                ms = sum(_rsum(t * t) / t.shape[1] for t in chunks) / len(chunks)
            else:
                ms = _rsum(x * x) / N
            rstd = 1 / np.sqrt(ms + eps)
        y = row_affine((x - mean) * rstd, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        if b == "nq_amax_of_even_columns":
            amax = np.max(np.abs(y[:, 0::2]), axis=1, keepdims=True, initial=0.0)
        else:
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            smax = 448.0 if b == "nq_e5m2_scale_from_e4m3_max" and cfg["quant_dtype"] == "float8_e5m2" else hi
            scale = dynamic_scale(amax, smax, cfg, acc)
            if b == "nq_dyn_scale_rounded_up_to_bf16":
                scale = _directed(scale, np_dtype("bfloat16"), up=True).astype(acc)
        if b == "nq_e4m3_clipped_at_240" and cfg["quant_dtype"] == "float8_e4m3fn":
            lo, hi = -240.0, 240.0
        v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_int8_quotient_in_f16" and qdt.kind == "i" and call.dtype == "float16":
            v = _half(v, "float16")
        q = quantize(v, qdt)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        out = dict(r.outputs)
        if b == "nq_amax_output_of_next_row" and R > 1:
            a = amax.reshape(R, 1)
            out["amax"] = np.concatenate([a[1:], a[-1:]]).reshape(out["amax"].shape).astype(acc)
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated28(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated28(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_gate_quick_gelu":
            sig, rest = sigmoids(acc(1.702) * z)
            s, ds = z * sig, sig * (1 + acc(1.702) * z * rest)
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        half_sums = b == "gated_sumsq_in_half" and d in HALF
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            sq = dev * dev
        else:
            mean = acc(0)
            sq = vg * vg
        ssum = _half_rowsum(sq, d) if half_sums else _rsum(sq)
        if b == "gated_ln_var_over_row_about_group_means" and norm == "layer_norm" and K < H:
            rowv = _rsum(sq.reshape(R, H)) / H
            rstd = (1 / np.sqrt(rowv + eps)) * np.ones((R, H // K), acc)
            rstd = rstd.reshape(-1, 1)
        elif b == "gated_eps_added_to_group_sum":
            rstd = 1 / np.sqrt((ssum + eps) / K)
        else:
            rstd = 1 / np.sqrt(ssum / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if norm == "layer_norm" and b == "gated_ln_bwd_proj_on_centred_v":
            dv = rstd * (g - _rsum(g) / K - vv * (_rsum(g * (vg - mean)) / K))
        elif norm == "layer_norm":
            dv = _centred_dx(g, vv, rstd)
        else:
            dv = rms_dx(g, vv, rstd)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if b == "gated_dbias_partials_averaged" and bias is not None and R > 4:
            grads["bias"] = _store(dn.sum(axis=0) / acc(-(-R // 4)), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt28(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt28(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        M, C = x.shape
        clamp = b == "dyt_tanh_argument_clamped_at_5"
        if clamp:
            t = np.tanh(np.clip(a * x, acc(-5), acc(5)))
        padded = b == "dyt_param_column_from_padded_stride" and C != pow2(C) and (w is not None or bias is not None)
        if padded:
            col = (np.arange(M * C).reshape(M, C)) % pow2(C)  # the channel the kernel computes per element
            live = col < C
            cc = np.minimum(col, C - 1)
            wf = None if w is None else np.where(live, w.reshape(C)[cc], acc(0))
            bf = None if bias is None else np.where(live, bias.reshape(C)[cc], acc(0))
            y = affine(t, wf, bf)
        else:
            y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        wg = wf if padded else w
        g = dy if wg is None else dy * wg
        if clamp:
            dt = 1 - t * t
        else:
            r = 1 / np.cosh(a * x)
            dt = r * r
        gd = g * dt
        dx = gd * a
        da = _rsum(gd * x).sum()
        if b == "dyt_dalpha_accumulated_twice":
            da = da + da
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if padded:
            for key, tt, given in (("weight", dy * t, w), ("bias", dy, bias)):
                if given is not None:
                    acc_c = np.zeros(C, acc)
                    np.add.at(acc_c, cc[live], tt[live])
                    grads[key] = _store(acc_c, d)
        if b == "dyt_dweight_rows_from_one" and w is not None and M > 1:
            grads["weight"] = _store((dy * t)[1:].sum(axis=0), d)
        if b == "dyt_dweight_times_weight" and w is not None:
            grads["weight"] = _store((dy * w * t).sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly28(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly28(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        if b == "poly_f64_rstd_in_float32" and d == "float64":
            rs = [(np.float32(1) / np.sqrt((_rsum(u * u) / H).astype(np.float32) + np.float32(eps))).astype(acc)
                  for u in us]
            hs = [u * r for u, r in zip(us, rs, strict=True)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        we = wt + acc(1) if b == "poly_weight_plus_one" else wt
        y = poly_combine(we, hs, bias, acc)
        if b == "poly_f16_y_rounded_up" and d == "float16":
            out = {"y": _directed(y.reshape(x0.shape), np.dtype(np.float16), up=True)}
        else:
            out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        grads = poly_grads(dy, x, we, hs, rs, bias, x0.shape, d, acc)
        if b == "poly_weight_plus_one":
            grads["weight"] = _store(np.array([_rsum(dy * h).sum() for h in hs], dtype=acc), d)
        if b == "poly_bwd_cube_factor_from_square_factor":
            f2 = 2 * x                                       # the square term's chain factor
            dx = (3 * f2 * rms_dx(dy * wt[0], hs[0], rs[0]) + f2 * rms_dx(dy * wt[1], hs[1], rs[1])
                  + rms_dx(dy * wt[2], hs[2], rs[2]))
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)
