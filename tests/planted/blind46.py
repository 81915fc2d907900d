"""A forty-sixth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind46Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln46``, ``_rms46``, ``_an46``, ``_nq46``, ``_gated46``, ``_dyt46``,
``_poly46``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind46Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug by docs/verdicts.md's "Which mechanism a bug
is" (the first rule that applies), one of ``LABELS`` (the project's taxonomy, the same tuple as blind3's), or
None where none fits. ``source`` is a public bug report or fix where the mistake really happened (a GitHub
issue or pull request), "cf. ..." where a public report shows the same mistake in a neighbouring kernel, or
"pattern: ..." for a mistake common in hand-written kernels.

``CAUGHT_BY[name] = (case id, array)``: a small golden case of the bug's op on which the bug makes refnorm's check
fail, and one array among the failing ones there (the correct kernel passes that case).

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic, docs/verdicts.md's labelling rule and public bug reports
only, by an author who did not read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran
the diagnosis on these bugs (session 37). None of its bugs repeats one of tests/planted/blind.py, blind2.py,
..., blind45.py (the same mistake on the same op).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_input_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dyt_grads, dyt_inputs, eps_value as _eps,
                          gate_group_size, gated_dx_dz, gated_grads, gated_inputs, half as _half, kept,
                          norm_outputs, norm_quant_returned, normalized_rows, poly_combine, poly_grads,
                          poly_inputs, quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine,
                          row_weight_bias, rowscale_grad, rsum as _rsum, scale_floor, silu_gate,
                          stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind46Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
FIRST_AXIS = ("cf. " + GH + "flagos-ai/FlagGems/issues/5392 (layer_norm_backward hard-codes M = input.shape[0], "
              "N = numel // M: rows of a 3-D input pooled per sample)")
INPLACE = ("cf. " + GH + "linkedin/Liger-Kernel/pull/262 (in-place writes inside a Triton kernel corrupting a "
           "tensor that a later gradient computation still reads)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_k2_bwd_row_sums_over_last_axis": (
        "layer_norm", "group",
        "normalized_shape of two or more axes: the backward kernel takes its row length from dy.shape[-1] "
        "(the last normalized axis, K), so its two row sums, of g = dy * weight and of g * x_hat, run over each "
        "run of K values and are divided by K: mean(g) and mean(g * x_hat) of a part of the slice in dx; x_hat "
        "and rstd (the forward's, per full slice) right; the forward, dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (a LayerNorm backward using a size of the last axis where "
        "the product N of normalized_shape belongs)"),
    "ln_bwd_var_term_without_eps": (
        "layer_norm", "eps",
        "the backward derived through the variance, dx = rstd (g - mean(g)) + (x - mean) dvar 2 / N with "
        "dvar = -1/2 sum(g (x - mean)) var^(-3/2): the factor (var + eps)^(-3/2) of the variance's derivative "
        "written var^(-3/2) (eps left out of that term only; rstd elsewhere right): dx; the forward, dweight "
        "and dbias right",
        "cf. " + GH + "mlpack/mlpack/pull/2474 (a normalization backward written through dvar and dmean with a "
        "term of the chain wrong)"),
    "ln_fma_shift_in_half": (
        "layer_norm", "precision",
        "16-bit inputs: the epilogue written as one fused multiply-add per element, y = x * a + c with the "
        "per-row, per-column coefficients a = rstd * weight and c = bias - mean * a held in half2 registers "
        "(each rounded to the input dtype): the shift c loses the low bits of mean * a, so y is off where the "
        "mean is large against the spread; mean, rstd and the backward (its own kernel) right",
        "cf. " + GH + "NVIDIA/FasterTransformer/issues/375 (a half-precision layernorm kernel's epilogue "
        "off by about 0.01 against the float32 result)"),
    "ln_noweight_dbias_in_weight_branch": (
        "layer_norm", "backward",
        "a bias without a weight: the column kernel computes dbias inside its 'weight is not None' branch (the "
        "two parameter gradients assumed to come in pairs), so dbias is returned from its zero-initialised "
        "buffer; y, mean, rstd and dx right",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a layer_norm CUDA kernel assuming gamma and beta come in "
        "pairs: wrong results when either is missing)"),
    "ln_bwd_weight_at_tile_column": (
        "layer_norm", "layout",
        "N > 32, with a weight: the backward's g = dy * weight loads the weight at the column's index within "
        "its 32-wide tile (j mod 32), the tile's offset added to x's and dy's pointers only: dx; the forward, "
        "dweight and dbias right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm backward reading gamma and beta at the "
        "wrong index of the tile)"),
    "ln_stats_stored_sequence_major": (
        "layer_norm", "layout",
        "inputs with two or more leading axes (batch, seq, ...): the mean and rstd outputs written in the "
        "sequence-first layout, row (b, s) at s * batch + b (the [s, b, h] layout of the model the kernel was "
        "written for): both statistics outputs scrambled; y and the gradients right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/557 (kernels written for sequence-first [s, b, h] tensors "
        "fed batch-first ones)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_eps_inside_rescaled_mean_square": (
        "rms_norm", "eps",
        "eps inside: the overflow-safe form rescales each row by m = max |x| and adds eps inside the root of the "
        "rescaled mean, rstd = 1 / (m sqrt(mean((x / m)^2) + eps)) = 1 / sqrt(mean(x^2) + eps m^2): the "
        "effective eps inflated by m^2: rstd, y and the backward's formula on that rstd",
        GH + "apple/coremltools/pull/2822 (rms_norm rescaled by max |x| with eps added after the rescale: the "
        "effective epsilon inflated by m^2)"),
    "rms_inv_n_integer_division": (
        "rms_norm", None,
        "N > 1: the mean of squares formed as sum(x^2) * inv_n with inv_n = 1 / N evaluated in integer "
        "arithmetic (both operands int), which is 0: the mean square 0, so rstd = 1 / sqrt(eps) (1 / eps "
        "outside) for every row: rstd, y and the backward's formula on that rstd",
        "pattern: an integer division 1 / n in a kernel's scalar setup"),
    "rms_k2_dweight_buffer_of_last_axis": (
        "rms_norm", "reduction",
        "normalized_shape of two or more axes, with a weight: dweight's column partials reduced into a buffer "
        "sized by the last normalized axis (K), so each entry sums dy * x_hat over every row and every leading "
        "normalized index sharing its last-axis index, and that (K,) result is broadcast over the leading "
        "normalized axes; dx and the forward right",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (a norm's gamma backward using the size of the last axis "
        "where the product N of normalized_shape belongs)"),
    "rms_bwd_reads_rstd_as_rms": (
        "rms_norm", "backward",
        "the backward kernel, written for a forward that saved the denominator (rms with eps, sqrt(mean(x^2) + "
        "eps), or rms + eps outside), takes the reciprocal of the saved statistic, which is already rstd: "
        "rstd_b = 1 / rstd, x_hat_b = x * rstd_b, dx = rstd_b (g - u mean(g * x_hat_b)) and dweight = sum(dy * "
        "x_hat_b); the forward right",
        "cf. " + GH + "microsoft/onnxruntime/pull/8172 (a saved normalization statistic read as the inverse "
        "variance where it held the inverse std)"),
    "rms_sumsq_accumulator_not_reset_per_row": (
        "rms_norm", "block",
        "more than 4 rows: a persistent kernel of 4 programs takes rows p, p + 4, p + 8, ... with the sum of "
        "squares' accumulator initialised before its row loop instead of inside it: each row's mean square "
        "includes the squares of the program's earlier rows (rows 0..3 right): rstd, y and the backward's "
        "formula on that rstd",
        "pattern: an accumulator initialised outside the loop over the rows of a persistent kernel"),
    "rms_bwd_dot_reduced_over_rows": (
        "rms_norm", "backward",
        "more than one row: the backward's projection sum of g * x_hat reduced with tl.sum(..., axis=0) over "
        "the rows of the (rows, N) tile instead of axis=1: column j's sum of g * x_hat over every row, divided "
        "by N, where each row's own mean(g * x_hat) belongs: dx; the forward and dweight right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward's row sums reduced over the wrong axes of a "
        "2-D tile)"),
    # ------------------------------------------------------------------ add_norm
    "an_float_mask_read_as_bytes": (
        "add_norm", "dropout",
        "with a keep-mask: the kernel reads the masks through a uint8 (bool) pointer while the caller passes "
        "them in the activation's floating dtype, so element k's keep bit is byte k of the float buffer (non-zero "
        "or not): x (and x1) dropped by that byte pattern, forward and backward (dx, dx1, drowscale); dresidual "
        "and the parameter gradients through the wrong s",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/55184 (a dropout kernel reading its mask as the activation's "
        "type where the mask is uint8)"),
    "an_mask_tail_columns_read_as_kept": (
        "add_norm", "dropout",
        "with a keep-mask, N not a multiple of 8: the mask loaded in 8-wide byte vectors with the tail vector's "
        "load masked off and its other=1 (the value meaning 'keep'), so the last N mod 8 columns count as kept "
        "whatever the mask says (mask1 alike): s, residual_out, y and the backward (dx, drowscale)",
        "pattern: a masked load's default taken as a valid value for the lanes it masks"),
    "an_dresidual_stored_before_y1_branch": (
        "add_norm", "backward",
        "the parallel branch with y1's cotangent: the residual's gradient stored right after the y branch's "
        "term of ds (and residual_out's cotangent) were formed, before the y1 branch's term is added: dresidual "
        "misses dnorm(dy1 * weight1); dx, dx1, the parameter gradients and the forward right",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (an RMS prenorm backward accumulating the residual's gradient "
        "at the wrong point)"),
    "an_rows_from_first_axis": (
        "add_norm", "reduction",
        "inputs of three or more axes: the statistics of the sum s taken over x viewed as (x.shape[0], -1) (a "
        "2-D input assumed), so every row of a sample is normalized with the sample's pooled mean and variance "
        "(mean square for the rms norm): y, and the backward of that normalization (ds over the sample's "
        "values, dweight from that x_hat); residual_out right",
        FIRST_AXIS),
    "an_y1_bias_from_bias_ptr": (
        "add_norm", "affine",
        "the parallel branch with weight1 and bias1: y1's epilogue loads its bias through bias's pointer (the "
        "y branch's line copied), y1 = x_hat * (weight1 + offset) + bias; y, residual_out and the gradients "
        "(dbias1 = sum(dy1)) right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm's parameters of the same role handed in each "
        "other's place)"),
    "an_drowscale_from_dx_in_x_buffer": (
        "add_norm", "backward",
        "with a rowscale: the backward writes dx = ds * c in place into x's buffer before the rowscale's "
        "reduction reads 'x' from it: drowscale = sum(ds * dx * mask) / (1 - p) (dx rounded to the input "
        "dtype) where sum(ds * x * mask) / (1 - p) belongs; dx, dresidual, the parameter gradients and the "
        "forward right",
        INPLACE),
    # ------------------------------------------------------------------ norm_quant
    "nq_f64_amax_reduced_in_float32": (
        "norm_quant", "precision",
        "float64 inputs: the row's amax reduced by a float atomic max into a float32 buffer (each |y| rounded to "
        "float32), then read back for the dynamic scale: the amax returned and the scale from the rounded amax "
        "(q divided by that scale); y itself float64",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2355 (a normalization kernel's fused amax computed from "
        "another representation of y than the one quantized)"),
    "nq_dyn_scale_rounded_down_pow2": (
        "norm_quant", "scale_rounding",
        "dynamic scale: after its clamps the scale is rounded down to a power of two, 2^floor(log2(scale)) (its "
        "exponent bits kept, the mantissa dropped), where the exact amax / qmax belongs: the scale, and q "
        "(quotients up to twice qmax, saturated at the clamp); amax right",
        "cf. " + GH + "vllm-project/vllm/pull/43557 (an E8M0 scale taken from the exponent bits, one binade too "
        "small, so the block maximum saturates)"),
    "nq_scale_stored_token_major": (
        "norm_quant", "layout",
        "inputs with two or more leading axes (batch, seq, ...): the per-row scale output written in the "
        "sequence-first layout, row (b, s) at s * batch + b; q (divided by each row's own scale) and amax "
        "right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/557 (kernels written for sequence-first [s, b, h] tensors "
        "fed batch-first ones)"),
    "nq_noweight_loaded_as_zero": (
        "norm_quant", "affine",
        "no weight (and no bias): the absent weight read through a masked load with other=0.0 instead of taken "
        "as 1, so y = 0: amax 0, the dynamic scale its floor and q all 0",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (norm kernels passing absent weight and bias as tensor "
        "pointers)"),
    "nq_e4m3_codes_from_fnuz_encoder": (
        "norm_quant", None,
        "float8_e4m3fn outputs: the codes produced by the fnuz encoder of the other platform (clamp at 240, "
        "exponent bias 8) and stored as e4m3fn bytes (bias 7): every code read back as twice the quotient's "
        "fnuz value, and the saturated codes (0x7f, 0xff: +-240 in fnuz) read as NaN: q; scale and amax right",
        GH + "uccl-project/uccl/pull/804 (FP8 values encoded as E4M3 FNUZ by the kernel and read as "
        "float8_e4m3fn on the host: byte-level format mismatch)"),
    "nq_ln_welford_count_from_one": (
        "norm_quant", "block",
        "norm='layer_norm': the row's Welford state initialised with count = 1 (a phantom zero sample), so "
        "mean = sum / (N + 1) and the variance is that of the N values and a 0 (divided by N + 1): rstd, y, "
        "amax, the dynamic scale and q",
        "pattern: a Welford accumulator initialised with count = 1"),
    # ------------------------------------------------------------------ gated_norm
    "gated_group_sums_not_reset_per_group": (
        "gated_norm", "block",
        "group_size < H: the kernel loops over a row's groups with its statistics accumulators (the sum and the "
        "sum of squared deviations, or the sum of squares for the rms norm) initialised once per row instead of "
        "once per group: group g's statistics include the sums of the row's earlier groups (still divided by "
        "group_size; group 0 right): y and the backward's formula on those statistics",
        "pattern: an accumulator initialised outside the loop over the groups"),
    "gated_dsilu_evaluated_at_x": (
        "gated_norm", "gate",
        "the gate's derivative silu'(.) evaluated at the register holding x instead of z (the helper called "
        "with the wrong operand): dz = dy * n * silu'(x) (norm before the gate) or dv * x * silu'(x); y, dx, "
        "dweight and dbias right",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/187 (a fused norm + SiLU backward evaluating the "
        "activation's derivative at the wrong input)"),
    "gated_stable_sigmoid_sign_branch_dropped": (
        "gated_norm", "gate",
        "the gate's sigmoid computed in the overflow-safe form from e = exp(-|z|) as 1 / (1 + e) for every z, "
        "the negative-z branch e / (1 + e) dropped: sigmoid(|z|), the gate z * sigmoid(|z|) and its derivative "
        "from it: y (either side of the norm) and the backward",
        "cf. " + GH + "antirez/ds4/pull/498 (a numerically stable SiLU that must branch on the gate's sign)"),
    "gated_bwd_dv_missing_rstd": (
        "gated_norm", "backward",
        "the normalization's backward written dv = g - mean(g) - v_hat mean(g * v_hat) (g - v_hat mean(g * "
        "v_hat) for the rms norm), the group's factor rstd of the whole input gradient left out: dx and dz "
        "(norm after the gate); the forward, dweight and dbias right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a hand-written norm backward missing one factor of a "
        "product)"),
    "gated_bias_added_before_norm": (
        "gated_norm", "affine",
        "with a bias: the fused prologue adds the bias to the value the norm reads, v' = v + bias, and the "
        "epilogue multiplies by the weight only: n = norm(v') * weight, y = n (* silu(z)); the backward (its "
        "own kernel, recomputing from x and z) right",
        "pattern: an epilogue's bias moved into the prologue of a fused kernel"),
    "gated_dz_tail_tile_unwritten": (
        "gated_norm", "gate",
        "H not a multiple of 32: the gate's gradient dz stored in whole 32-wide column tiles only (the store "
        "loop's bound H // 32), its last H mod 32 columns of every row (every column for H < 32) left 0; y, "
        "dx, dweight and dbias right",
        "pattern: a tail tile dropped by a floor division of the store loop's bound"),
    # ------------------------------------------------------------------ dyt
    "dyt_noweight_bwd_g_from_bias_ptr": (
        "dyt", "layout",
        "a bias without a weight: the backward launcher builds the kernel's parameter arguments from the "
        "tensors present only (None dropped from the list), so the bias lands in the weight's slot, g = dy * "
        "bias: dx and dalpha; y, dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (absent affine parameters passed as another tensor's "
        "pointer)"),
    "dyt_dalpha_tree_drops_odd_partial": (
        "dyt", "reduction",
        "alpha's gradient: the per-row partials sum(g * sech^2(alpha x) * x) reduced over the rows by a pairwise "
        "tree that halves the count each level and drops the unpaired last partial whenever the count is odd: "
        "dalpha; dx, dweight, dbias and the forward right",
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd "
        "lengths)"),
    "dyt_alpha_as_temperature": (
        "dyt", None,
        "alpha taken as a temperature: t = tanh(x / alpha) where tanh(alpha x) belongs, y = weight * t + bias "
        "and the backward of that function (dx = g sech^2(x / alpha) / alpha, dalpha = -sum(g sech^2(x / "
        "alpha) x) / alpha^2, dweight from that t)",
        "pattern: a scalar parameter's convention (multiplier or divisor) inverted"),
    "dyt_dalpha_weight_at_row_index": (
        "dyt", "layout",
        "with a weight: alpha's reduction kernel (rows in the outer loop) loads the weight at the row index "
        "(weight[r mod C]) instead of the column's: dalpha = sum over rows of weight[r mod C] sum_j dy D x; dx, "
        "dweight, dbias and the forward right",
        "cf. " + GH + "kraiskil/onnx2c/issues/7 (a per-channel parameter indexed along the wrong dimension)"),
    "dyt_dparams_split_overlaps_middle_row": (
        "dyt", "reduction",
        "an odd row count: dweight and dbias reduced by two programs, the first over rows 0 .. ceil(M / 2) - 1, "
        "the second from row floor(M / 2) on: the middle row added by both; dx, dalpha and the forward right",
        "pattern: a work split whose two halves use ceil and floor of M / 2 for their bounds"),
    "dyt_persistent_loop_drops_last_row": (
        "dyt", "block",
        "more than one row: the persistent kernels' row loop written range(pid, rows - 1, programs) (off by "
        "one), forward and backward: the last row never processed, its y and dx left 0 (zero-initialised "
        "buffers) and its terms missing from dalpha, dweight and dbias",
        "pattern: an off-by-one loop bound in a persistent kernel"),
    # ------------------------------------------------------------------ poly_norm
    "poly_rescaled_rms_scale_not_restored": (
        "poly_norm", None,
        "each power's overflow-safe root mean square taken of u / m (m = max |x^p| of the row) and never "
        "multiplied back by m: r_p = 1 / sqrt(mean((x^p / m)^2) + eps), so h_p is m times too large for rows "
        "with m > 1 (and too small below): y and the backward's formula on those r_p",
        "pattern: an overflow-safe rescale by max |x| not undone after the root"),
    "poly_bwd_chain_coefficient_decremented": (
        "poly_norm", "backward",
        "dx: d(x^p)/dx written (p - 1) x^(p - 1) (the exponent's decrement applied to the coefficient too): "
        "dx = 2 x^2 du_3 + x du_2 + 0 * du_1; the forward, dweight and dbias right",
        "pattern: a hand-written power rule"),
    "poly_rows_of_first_axis_view": (
        "poly_norm", "reduction",
        "inputs of three or more axes: each power's mean of squares taken over x viewed as (x.shape[0], -1) (a "
        "2-D input assumed), one r_p per sample shared by its rows: y and the backward of that normalization "
        "(dx, dweight); dbias right",
        FIRST_AXIS),
    "poly_du_missing_rstd": (
        "poly_norm", "backward",
        "dx: each power's normalization gradient written du_p = g_p - h_p mean(g_p h_p), the factor r_p left "
        "out: dx; the forward, dweight and dbias right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a hand-written norm backward missing one factor of a "
        "product)"),
    "poly_sumsq_block_reset": (
        "poly_norm", "block",
        "H > 32: each power's sum of squares looped over 32-wide column blocks with its accumulator "
        "re-initialised inside the loop: only the last block's squares (still divided by H): the three r_p, y "
        "and the backward's formula on them",
        "pattern: an accumulator initialised inside the loop over column blocks"),
    "poly_signed_square_via_copysign": (
        "poly_norm", None,
        "the powers formed by one signed-power helper, copysign(|x|^p, x) (written for the odd powers, where pow "
        "of a negative base is NaN), applied to p = 2 too: the square term's power is x |x|, negative for x < 0 "
        "(its mean of squares, so r_2, unchanged): y and the backward's formula through that h_2",
        "pattern: a sign-restoring pow helper applied to an even power"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _seq_major(a, lead):
    """Per-row values ``a`` (one per row of the leading shape ``lead``, batch first) laid out sequence-first:
    row (b, s) at s * batch + b."""
    B = lead[0]
    return np.ascontiguousarray(a.reshape(B, -1).T).reshape(a.shape)


def _tree_sum(v):
    """Sum of 1-D ``v`` by a pairwise tree dropping the unpaired last partial at every odd level."""
    while v.shape[0] > 1:
        m = (v.shape[0] // 2) * 2
        v = v[0:m:2] + v[1:m:2]
    return v[0]


def _fnuz_as_fn(v):
    """float8_e4m3fn codes made by the e4m3fnuz encoder (clamp at 240) and read as float8_e4m3fn."""
    c = np.clip(v, -240.0, 240.0).astype(ml_dtypes.float8_e4m3fnuz)
    return c.view(np.uint8).view(ml_dtypes.float8_e4m3fn)


def _rstd_of(ms, rms, eps, placement):
    return 1 / (rms + eps) if placement == "outside" else 1 / np.sqrt(ms + eps)


class Blind46Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind46"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln46(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln46(self, call, acc, b):
        d = call.dtype
        inp = call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        w0 = inp.get("weight")
        mean = _rsum(x) / N
        dv = x - mean
        var = _rsum(dv * dv) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        if b == "ln_fma_shift_in_half" and d in HALF:
            a = rstd if w is None else rstd * w
            c = -mean * a if bias is None else bias - mean * a
            y = x * _half(np.broadcast_to(a, x.shape), d) + _half(np.broadcast_to(c, x.shape), d)
        else:
            y = affine(xhat, w, bias)
        stat = stat_shape(x0, ns)
        out = norm_outputs(y, mean, rstd, x0, stat, d, acc)
        lead = x0.shape[:x0.ndim - len(ns)]
        if b == "ln_stats_stored_sequence_major" and len(lead) > 1 and lead[0] > 1 and R > lead[0]:
            for k in ("mean", "rstd"):
                out[k] = _seq_major(out[k].reshape(-1), lead).reshape(stat)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        wb = w
        if b == "ln_bwd_weight_at_tile_column" and w is not None and N > 32:
            wb = w[:, np.arange(N) % 32]                     # the tile offset left out of W's pointer
        g = dy if wb is None else dy * wb
        if b == "ln_k2_bwd_row_sums_over_last_axis" and len(ns) > 1:
            K = ns[-1]
            rr = np.repeat(rstd, N // K, axis=0)
            dx = _centred_dx(g.reshape(-1, K), xhat.reshape(-1, K), rr).reshape(R, N)
        elif b == "ln_bwd_var_term_without_eps":
            dvar = -0.5 * _rsum(g * dv) * var ** -1.5        # (var + eps)^(-3/2) written var^(-3/2)
            dx = rstd * (g - _rsum(g) / N) + dv * (dvar * 2 / N)
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w0 is not None:
            grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        if bias is not None:
            if b == "ln_noweight_dbias_in_weight_branch" and w0 is None:
                grads["bias"] = _store(np.zeros(ns), d)      # never written
            else:
                grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms46(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms46(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        placement = cfg.get("eps_placement", "inside") or "inside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        eps = _eps(cfg["eps"], acc)
        ss = _rsum(x * x)
        if b == "rms_sumsq_accumulator_not_reset_per_row" and R > 4:
            ss = ss.copy()
            for r in range(4, R):
                ss[r] = ss[r] + ss[r - 4]                    # the program's earlier rows still in the sum
        if b == "rms_inv_n_integer_division" and N > 1:
            ms = ss * acc(0)                                 # inv_n = 1 / N in integer arithmetic
        else:
            ms = ss / N
        rms = np.sqrt(ms)
        if b == "rms_eps_inside_rescaled_mean_square" and placement == "inside":
            m = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
            m = np.where((m > 0) & np.isfinite(m), m, acc(1))
            rstd = 1 / (m * np.sqrt(_rsum((x / m) ** 2) / N + eps))
        else:
            rstd = _rstd_of(ms, rms, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        g = dy if w is None else dy * w
        rb = rstd
        if b == "rms_bwd_reads_rstd_as_rms":
            rb = 1 / rstd                                    # the saved rstd taken for the denominator
        xb = x * rb
        if b == "rms_bwd_dot_reduced_over_rows" and R > 1:
            proj = (g * xb).sum(axis=0, keepdims=True) / N  # axis=0 where axis=1 belongs
            u = xb if placement == "inside" else np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
            dx = rb * (g - u * proj)
        else:
            dx = rms_norm_dx(g, x, xb, rb, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xb
            if b == "rms_k2_dweight_buffer_of_last_axis" and len(ns) > 1:
                K = ns[-1]
                part = t.reshape(-1, K).sum(axis=0)
                grads["weight"] = _store(np.broadcast_to(part, ns), d)
            else:
                grads["weight"] = _store(t.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an46(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an46(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_float_mask_read_as_bytes":
            def as_bytes(name):
                raw = np.ascontiguousarray(inp[name]).view(np.uint8).reshape(-1)[:R * N]
                return (raw != 0).astype(acc).reshape(R, N)
            mask = None if mask is None else as_bytes("mask")
            mask1 = None if mask1 is None else as_bytes("mask1")
        if b == "an_mask_tail_columns_read_as_kept" and N % 8:
            t0 = (N // 8) * 8
            if mask is not None:
                mask = mask.copy()
                mask[:, t0:] = 1                             # the tail vector's other=1
            if mask1 is not None:
                mask1 = mask1.copy()
                mask1[:, t0:] = 1
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        lead = x0.shape[:x0.ndim - len(ns)]
        pooled = b == "an_rows_from_first_axis" and len(lead) > 1 and R > lead[0]
        sv = s.reshape(lead[0], -1) if pooled else s
        L = sv.shape[1]
        if centred:
            mean = _rsum(sv) / L
            var = _rsum((sv - mean) ** 2) / L
        else:
            mean = np.zeros((sv.shape[0], 1), acc)
            var = _rsum(sv * sv) / L
        rstd = 1 / np.sqrt(var + eps)
        xhat = ((sv - mean) * rstd).reshape(R, N)
        yb1 = bias if b == "an_y1_bias_from_bias_ptr" and we1 is not None and b1 is not None else b1
        out = add_norm_outputs(xhat, we, bias, we1, yb1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        rows = sv.shape
        ds = self._an46_dnorm(dy, we, xhat.reshape(rows), rstd, centred).reshape(R, N)
        if dres_out is not None:
            ds = ds + dres_out
        dres = ds
        if dy1 is not None:
            ds1 = self._an46_dnorm(dy1, we1, xhat.reshape(rows), rstd, centred).reshape(R, N)
            if b != "an_dresidual_stored_before_y1_branch":
                dres = dres + ds1
            ds = ds + ds1
        grads = add_norm_input_grads(ds, c, c1, None if res is None else dres, x0.shape, d)
        grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, (w, bias, w1, b1), ns, d))
        if inp.get("rowscale") is not None:
            xr = x
            if b == "an_drowscale_from_dx_in_x_buffer":
                xr = _store(ds * c, d).astype(acc)           # x's buffer now holds dx
            grads["rowscale"] = rowscale_grad(ds, xr, mask, keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    def _an46_dnorm(self, dy, wgt, xhat, rstd, centred):
        """add_norm's normalization backward of one branch (g = dy * wgt) over the rows of ``xhat``."""
        g = dy if wgt is None else dy * wgt
        g = g.reshape(xhat.shape)
        n = g.shape[1]
        proj = xhat * (_rsum(g * xhat) / n)
        if not centred:
            return rstd * (g - proj)
        return rstd * (g - _rsum(g) / n - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq46(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq46(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if b == "nq_noweight_loaded_as_zero" and w is None:
            w = np.zeros(N, acc)                             # the masked load's other=0.0
        ln = cfg["norm"] == "layer_norm"
        if ln and b == "nq_ln_welford_count_from_one":
            mean = _rsum(x) / (N + 1)                        # a phantom zero sample
            var = (_rsum((x - mean) ** 2) + mean * mean) / (N + 1)
            xhat = (x - mean) * (1 / np.sqrt(var + eps))
        elif ln:
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            xhat = (x - mean) * (1 / np.sqrt(var + eps))
        else:
            xhat = x * (1 / np.sqrt(_rsum(x * x) / N + eps))
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        ya = np.abs(y)
        amax = np.max(ya, axis=1, keepdims=True, initial=0.0)
        if b == "nq_f64_amax_reduced_in_float32" and acc is np.float64:
            amax = amax.astype(np.float32).astype(acc)       # a float atomic max
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
            if b == "nq_dyn_scale_rounded_down_pow2":
                _, e = np.frexp(np.where(scale > 0, scale, 1.0).astype(np.float64))
                scale = np.where(scale > 0, np.ldexp(1.0, (e - 1).astype(np.int64)), scale).astype(acc)
        v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_e4m3_codes_from_fnuz_encoder" and cfg["quant_dtype"] == "float8_e4m3fn":
            q = _fnuz_as_fn(v)
        else:
            q = quantize(v, qdt)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        lead = x0.shape[:x0.ndim - len(ns)]
        if b == "nq_scale_stored_token_major" and len(lead) > 1 and lead[0] > 1 and x.shape[0] > lead[0]:
            sc = r.outputs["scale"]
            r.outputs["scale"] = _seq_major(sc.reshape(-1), lead).reshape(sc.shape)
        return r

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated46(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated46(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_stable_sigmoid_sign_branch_dropped":
            e = np.exp(-np.abs(z))
            sig, rest = 1 / (1 + e), e / (1 + e)             # the z < 0 branch dropped
            s, ds = z * sig, sig * (1 + z * rest)
        else:
            s, ds = silu_gate(z)
        eps = _eps(cfg["eps"], acc)

        def normalize(v):
            vg = v.reshape(-1, K)
            if norm == "layer_norm":
                sm = _rsum(vg)
                if b == "gated_group_sums_not_reset_per_group" and K < H:
                    sm = np.cumsum(sm.reshape(R, H // K), axis=1).reshape(-1, 1)
                mean = sm / K
                sq = _rsum((vg - mean) ** 2)
            else:
                mean = np.zeros((vg.shape[0], 1), acc)
                sq = _rsum(vg * vg)
            if b == "gated_group_sums_not_reset_per_group" and K < H:
                sq = np.cumsum(sq.reshape(R, H // K), axis=1).reshape(-1, 1)
            st = sq / K
            rstd = 1 / np.sqrt(st + eps)
            return rstd, ((vg - mean) * rstd).reshape(R, H)

        v = x if nbg else x * s
        rstd, vhat = normalize(v)
        nrm = vhat * w if bias is None else vhat * w + bias
        if b == "gated_bias_added_before_norm" and bias is not None:
            nrm = normalize(v + bias)[1] * w                 # the bias in the prologue
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        nrm = vhat * w if bias is None else vhat * w + bias  # the backward recomputes from x and z
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        vv = vhat.reshape(-1, K)
        g = (dn * w).reshape(-1, K)
        proj = vv * (_rsum(g * vv) / K)
        dv = g - _rsum(g) / K - proj if norm == "layer_norm" else g - proj
        if b != "gated_bwd_dv_missing_rstd":
            dv = rstd * dv
        dv = dv.reshape(R, H)
        dsz = ds
        if b == "gated_dsilu_evaluated_at_x":
            dsz = silu_gate(x)[1]                            # silu'(x) where silu'(z) belongs
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, dsz, nbg)
        if b == "gated_dz_tail_tile_unwritten" and H % 32:
            dz = dz.copy()
            dz[:, (H // 32) * 32:] = 0
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt46(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt46(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        R, C = x.shape
        temp = b == "dyt_alpha_as_temperature"
        if temp:
            t = np.tanh(x / a)
        y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        wb = w
        if b == "dyt_noweight_bwd_g_from_bias_ptr" and w is None and bias is not None:
            wb = bias                                        # the weight slot given the bias pointer
        g = dy if wb is None else dy * wb
        r = 1 / np.cosh(x / a if temp else a * x)
        gd = g * (r * r)
        if temp:
            dx = gd / a
            da = -_rsum(gd * x).sum() / (a * a)
        else:
            dx = gd * a
            rows = _rsum(gd * x)
            if b == "dyt_dalpha_weight_at_row_index" and w is not None:
                wr = w.reshape(-1)[np.arange(R) % C].reshape(R, 1)
                rows = _rsum(dy * (r * r) * x) * wr
            if b == "dyt_dalpha_tree_drops_odd_partial":
                da = _tree_sum(rows.reshape(-1))
            else:
                da = rows.sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_persistent_loop_drops_last_row" and R > 1:
            yl = y.copy()
            yl[-1] = 0
            out["y"] = _store(yl.reshape(x0.shape), d)
            gx = np.array(grads["x"]).reshape(R, C)
            gx[-1] = 0
            grads["x"] = gx.reshape(x0.shape)
            grads["alpha"] = _store(np.reshape(_rsum(gd * x)[:-1].sum(), np.shape(inp["alpha"])), d)
            if w is not None:
                grads["weight"] = _store((dy * t)[:-1].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[:-1].sum(axis=0), d)
        if b == "dyt_dparams_split_overlaps_middle_row" and R % 2:
            h = (R + 1) // 2
            idx = np.concatenate([np.arange(h), np.arange(R // 2, R)])   # the middle row twice
            if w is not None:
                grads["weight"] = _store((dy * t)[idx].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[idx].sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly46(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly46(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        lead = x0.shape[:-1]
        pooled = b == "poly_rows_of_first_axis_view" and len(lead) > 1 and x.shape[0] > lead[0]
        xv = x.reshape(lead[0], -1) if pooled else x
        L = xv.shape[1]
        us = [xv ** 3, xv ** 2, xv]
        if b == "poly_signed_square_via_copysign":
            us[1] = np.copysign(np.abs(xv) ** 2, xv)         # the odd powers' helper used for p = 2
        rs = []
        for u in us:
            uu = u
            if b == "poly_sumsq_block_reset" and L > 32:
                uu = u[:, ((L - 1) // 32) * 32:]             # the last block's squares only
            sc = np.max(np.abs(uu), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = np.sqrt(_rsum((uu / sc) ** 2) / L)
            if b != "poly_rescaled_rms_scale_not_restored":
                rms = sc * rms
            rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc).reshape(x.shape)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(xv.shape)
        if b in ("poly_bwd_chain_coefficient_decremented", "poly_du_missing_rstd", "poly_signed_square_via_copysign"):
            dx = np.zeros_like(xv)
            for k, p in enumerate((3, 2, 1)):
                if b == "poly_du_missing_rstd":
                    dp = rms_dx(dy * wt[k], hs[k], acc(1))
                else:
                    dp = rms_dx(dy * wt[k], hs[k], rs[k])
                if b == "poly_bwd_chain_coefficient_decremented":
                    dx = dx + (p - 1) * xv ** (p - 1) * dp
                elif b == "poly_signed_square_via_copysign" and p == 2:
                    dx = dx + 2 * np.abs(xv) * dp           # d(x |x|)/dx
                else:
                    dx = dx + (dp if p == 1 else p * xv ** (p - 1) * dp)
            grads = poly_grads(dy, xv, wt, hs, rs, bias, x0.shape, d, acc)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            return Returned(out, grads)
        grads = poly_grads(dy, xv, wt, hs, rs, bias, x0.shape, d, acc, du=rms_dx)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_k2_bwd_row_sums_over_last_axis": ("layer_norm/normal_k2_f32_2x3x5x6", "grad.x"),
    "ln_bwd_var_term_without_eps": ("layer_norm/normal_eps0.3_f32_9x7", "grad.x"),
    "ln_fma_shift_in_half": ("layer_norm/normal_f16_4x128", "output.y"),
    "ln_noweight_dbias_in_weight_branch": ("layer_norm/normal_noweight_f32_9x7", "grad.bias"),
    "ln_bwd_weight_at_tile_column": ("layer_norm/normal_f32_6x100", "grad.x"),
    "ln_stats_stored_sequence_major": ("layer_norm/normal_bf16_2x3x7", "output.mean"),
    "rms_eps_inside_rescaled_mean_square": ("rms_norm/normal_eps0.3_f32_9x7", "output.rstd"),
    "rms_inv_n_integer_division": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "rms_k2_dweight_buffer_of_last_axis": ("rms_norm/heavy_tail_eps1e-05_k2_f32_2x3x5x6", "grad.weight"),
    "rms_bwd_reads_rstd_as_rms": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_sumsq_accumulator_not_reset_per_row": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "rms_bwd_dot_reduced_over_rows": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "an_float_mask_read_as_bytes": ("add_norm/normal_p_rs_f64_9x7", "output.residual_out"),
    "an_mask_tail_columns_read_as_kept": ("add_norm/heavy_tail_p_f64_3x12", "output.residual_out"),
    "an_dresidual_stored_before_y1_branch": ("add_norm/normal_par_f64_5x12", "grad.residual"),
    "an_rows_from_first_axis": ("add_norm/normal_fp32res_zc_f32_2x3x5", "output.y"),
    "an_y1_bias_from_bias_ptr": ("add_norm/normal_par_f64_5x12", "output.y1"),
    "an_drowscale_from_dx_in_x_buffer": ("add_norm/normal_p_rs_f64_9x7", "grad.rowscale"),
    "nq_f64_amax_reduced_in_float32": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_dyn_scale_rounded_down_pow2": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.scale"),
    "nq_scale_stored_token_major": ("norm_quant/heavy_tail_rms_e4m3_dyn_bf16_2x4x64", "output.scale"),
    "nq_noweight_loaded_as_zero": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.amax"),
    "nq_e4m3_codes_from_fnuz_encoder": ("norm_quant/pm1_eps0_rms_e4m3_static_ties_f16_3x48", "output.q"),
    "nq_ln_welford_count_from_one": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "gated_group_sums_not_reset_per_group": ("gated_norm/normal_gs4_f64_3x7x12", "output.y"),
    "gated_dsilu_evaluated_at_x": ("gated_norm/normal_f32_4x64", "grad.z"),
    "gated_stable_sigmoid_sign_branch_dropped": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_bwd_dv_missing_rstd": ("gated_norm/normal_gs4_f64_3x7x12", "grad.x"),
    "gated_bias_added_before_norm": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_dz_tail_tile_unwritten": ("gated_norm/heavy_tail_gs20_nobias_f32_4x80", "grad.z"),
    "dyt_noweight_bwd_g_from_bias_ptr": ("dyt/normal_noweight_f32_1x10x24", "grad.x"),
    "dyt_dalpha_tree_drops_odd_partial": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_alpha_as_temperature": ("dyt/normal_f64_2x5x7", "output.y"),
    "dyt_dalpha_weight_at_row_index": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_dparams_split_overlaps_middle_row": ("dyt/heavy_tail_f64_3x10", "grad.weight"),
    "dyt_persistent_loop_drops_last_row": ("dyt/normal_f64_2x5x7", "output.y"),
    "poly_rescaled_rms_scale_not_restored": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_bwd_chain_coefficient_decremented": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_rows_of_first_axis_view": ("poly_norm/normal_f32_2x3x40", "output.y"),
    "poly_du_missing_rstd": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_sumsq_block_reset": ("poly_norm/normal_f32_4x64", "output.y"),
    "poly_signed_square_via_copysign": ("poly_norm/normal_f64_3x7", "output.y"),
}
