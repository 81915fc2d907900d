"""A forty-fourth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind44Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln44``, ``_rms44``, ``_an44``, ``_nq44``, ``_gated44``, ``_dyt44``,
``_poly44``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind44Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
the diagnosis on these bugs (session 36). None of its bugs repeats one of tests/planted/blind.py, blind2.py,
..., blind43.py (the same mistake on the same op).
"""
from __future__ import annotations

import math

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_input_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dy_and_g, dyt_grads, dyt_inputs, eps_value as _eps,
                          gate_group_size, gated_dx_dz, gated_grads, gated_inputs, kept, norm_outputs,
                          norm_quant_returned, normalized_rows, poly_combine, poly_grads, poly_inputs,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias,
                          rowscale_grad, rsum as _rsum, scale_floor, sigmoids, silu_gate, stat_shape,
                          static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind44Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
LN2 = math.log(2.0)
STALE = "pattern: a register of the previous iteration read in a software-pipelined row loop"
EXP2 = ("pattern: exp(v) rewritten as the faster exp2(v) without the log2(e) factor the identity "
        "exp(v) = exp2(v * log2(e)) needs")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_rows_of_first_axis": (
        "layer_norm", "reduction",
        "inputs of three or more axes: the backward views x and dy as (x.shape[0], -1) (a 2-D input assumed, "
        "M = x.shape[0], N = numel / M), so its two row sums, of g = dy * weight and of g * x_hat, run over "
        "every row of a sample at once and are divided by the sample's size: mean(g) and mean(g * x_hat) of "
        "each sample shared by its rows in dx; x_hat and rstd per row right; the forward, dweight and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (layer_norm_backward hard-codes M = input.shape[0], "
        "N = numel // M: silently wrong gradients for inputs of rank 3 or more)"),
    "ln_norm_pass_mean_of_previous_row": (
        "layer_norm", "layout",
        "more than one row: the software-pipelined normalization pass centres row r with the mean register "
        "still holding row r - 1's (row 0 its own): y[r] = (x[r] - mean[r - 1]) * rstd[r] * weight + bias; the "
        "returned mean and rstd right, the backward (its own kernel, from the saved statistics) right",
        STALE),
    "ln_dparams_column_mask_against_row_count": (
        "layer_norm", "block",
        "fewer rows than N: the column-parallel dweight/dbias kernel masks its columns with cols < M (the row "
        "count) instead of cols < N: the entries of dweight and dbias from column M on never written (left 0); "
        "dx and the forward right",
        "pattern: a load/store mask compared against the grid's other dimension"),
    "ln_dparams_row_block_offset_missing": (
        "layer_norm", "reduction",
        "the column kernel for dweight and dbias loops over blocks of 4 rows but loads rows = tl.arange(0, 4) "
        "without the loop's offset (masked to rows < M): every iteration adds rows 0..3 again, dweight = "
        "ceil(M / 4) * sum over rows 0..3 of dy * x_hat (dbias of dy); dx and the forward right",
        "pattern: a loop's block offset left out of the row indices in a blocked reduction"),
    "ln_f64_bwd_stats_from_float32_buffers": (
        "layer_norm", "precision",
        "float64 inputs: the forward hands the backward its mean and rstd through float32 buffers (rounded to "
        "nearest), so the backward's x_hat = (x - mean) * rstd, dx and dweight are computed from the rounded "
        "statistics; the forward (y and the returned mean, rstd) and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/221 (layer_norm's saved mean and rstd buffers given another "
        "dtype than the computation needs)"),
    "ln_bwd_xhat_saved_in_input_dtype": (
        "layer_norm", "precision",
        "16-bit inputs: the forward saves x_hat for the backward in a buffer of the input dtype (rounded to "
        "nearest) instead of recomputing it from x, mean and rstd: dx (its projection term x_hat * mean(g * "
        "x_hat)) and dweight = sum(dy * x_hat) from the rounded x_hat; the forward and dbias right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward's intermediate formed in bfloat16 "
        "before its float32 reduction)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_inv_n_in_input_dtype": (
        "rms_norm", "precision",
        "16-bit inputs: the mean of squares formed as sum(x^2) * (1 / N) with 1 / N held in the input's scalar "
        "type (rounded to nearest: exact for a power of two N, bfloat16 1 / 100 becomes 0.010009766): rstd, y "
        "and the backward's formula on that rstd",
        "cf. " + GH + "tinygrad/tinygrad/issues/4143 (a half mean multiplying by (half)(1/3), the reciprocal of "
        "the count rounded to half)"),
    "rms_row_split_halves_own_stats": (
        "rms_norm", "block",
        "eps inside, N > 64: the row split between two programs of ceil(N / 2) and floor(N / 2) columns (a two-CTA cluster) "
        "whose exchange of the partial sums of squares is missing: each half scaled by its own half's "
        "1 / sqrt(mean(x^2) + eps); the returned rstd is the first program's, and the backward (its own kernel) "
        "uses that saved rstd for the whole row",
        "cf. " + GH + "tenstorrent/tt-metal/pull/34760 (a norm's row reduction split across cores where only "
        "part of the partial sums contributed)"),
    "rms_dweight_xhat_of_previous_row": (
        "rms_norm", "layout",
        "with a weight, more than one row: the software-pipelined dweight loop multiplies dy of row r by the "
        "x_hat register still holding row r - 1's (row 0 by the register's initial 0): dweight = sum over r of "
        "dy[r] * x_hat[r - 1]; dx and the forward right",
        STALE),
    "rms_bwd_dy_from_output_buffer": (
        "rms_norm", "layout",
        "the backward kernel's dy argument given the saved output y (the forward's return value passed in the "
        "gradient's slot): dx and dweight computed with y (as stored) where dy belongs; the forward right",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/146 (a backward called with its output tensor in another "
        "argument's slot)"),
    "rms_rms_from_norm_over_n": (
        "rms_norm", "constant",
        "eps inside: the root mean square taken from the row's L2 norm divided by N instead of sqrt(N), rstd = "
        "N / sqrt(sum(x^2) + N eps) = sqrt(N) times the right one: rstd, y, and the backward of that function "
        "(dx and dweight sqrt(N) times theirs)",
        "cf. " + GH + "kyegomez/zeta/issues/180 (an RMSNorm written from the row's L2 norm with its dim ** -0.5 "
        "factor applied the wrong way)"),
    "rms_zc_offset_in_first_term_only": (
        "rms_norm", "affine",
        "weight_offset set, with a weight: the backward's first loop reduces the projection's row sum with the "
        "raw weight, mean(dy * weight * x_hat), and only the second loop forms g = dy * (weight + offset): "
        "dx = rstd * (g - x_hat * mean(dy * weight * x_hat)); the forward and dweight right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (an RMSNorm whose forward and backward disagreed on the "
        "zero-centred gamma's + 1)"),
    # ------------------------------------------------------------------ add_norm
    "an_stats_from_undropped_sum": (
        "add_norm", "dropout",
        "dropout_p > 0: the statistics pass loads x (and x1) without the keep-mask and 1 / (1 - p) (the rowscale "
        "applied), so the mean and variance (mean square) are those of x * rowscale (+ x1) + residual, while the "
        "normalization pass applies them to the dropped sum s: y (y1) and the backward's formula on those "
        "statistics; residual_out right",
        "pattern: a dropout applied in the pass that stores the sum but not in the statistics pass"),
    "an_y1_stored_into_y_buffer": (
        "add_norm", "layout",
        "with the parallel branch's weight1: the launcher passes y's buffer in y1's slot, so the kernel's y1 "
        "store overwrites y (y holds x_hat * (weight1 + offset) + bias1) and the y1 output stays at its zero "
        "initialisation; residual_out and the gradients right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (two outputs of a norm kernel assigned to each other's "
        "buffers)"),
    "an_norm_pass_rereads_inplace_residual": (
        "add_norm", "layout",
        "with a residual: the kernel stores s = x * c (+ x1 * c1) + residual in place into the residual's buffer "
        "after its statistics pass, and the normalization pass reloads x and 'residual' from their buffers: it "
        "normalizes x * c (+ x1 * c1) + s (the branch added twice) with the right mean and rstd: y (y1); "
        "residual_out and the backward (its own kernel, from the saved statistics and residual_out) right",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/272 (an in-place write corrupting a tensor that a later "
        "pass still reads)"),
    "an_dres_out_added_per_branch": (
        "add_norm", "backward",
        "prenorm with residual_out's cotangent and y1's: the helper computing a branch's normalization backward "
        "adds dresidual_out itself and is called once per branch, so ds = dnorm(dy) + dnorm(dy1) + 2 * "
        "dresidual_out: dx, dresidual, dx1 and drowscale; the forward and the parameter gradients right",
        "pattern: a term added inside a helper that is called once per branch"),
    "an_drowscale_missing_x": (
        "add_norm", "backward",
        "with a rowscale: its gradient reduced as sum(ds * mask) / (1 - p) per row, the factor x of d(x * "
        "rowscale)/d rowscale left out; dx, dresidual, the parameter gradients and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a hand-written norm backward missing one factor of a product)"),
    "an_ln_welford_m2_old_delta_squared": (
        "add_norm", "one_pass",
        "norm='layer_norm': the variance of s from a per-value Welford loop whose M2 update adds "
        "(s_k - mean_{k-1})^2 (the deviation from the previous mean, squared) instead of (s_k - mean_{k-1}) * "
        "(s_k - mean_k): var = M2 / N too large, rstd, y (y1) and the backward's formula on that rstd; "
        "residual_out right",
        "cf. " + GH + "pbstark/SHANGRLA/pull/89 (a hand-written Welford mean/variance update off by one factor)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_trunc_after_half": (
        "norm_quant", "rounding",
        "int8: y / scale rounded as (int)(v + 0.5) (one half added, then the C cast truncating toward zero): "
        "right for quotients above -1/2 (their ties rounded up), one code too high for every quotient at or "
        "below -1/2 (-1.7 gives -1, -2 gives -1): q; scale and amax right",
        "cf. " + GH + "EarthScope/libmseed/issues/119 (float samples converted to integers with (int)(v + 0.5), "
        "wrong for negative values)"),
    "nq_fp8_round_half_away": (
        "norm_quant", "rounding",
        "float8 outputs: y / scale converted by a hand-written float8 encoder rounding to nearest with ties away "
        "from zero instead of to even: the quotients exactly halfway between two float8 values (the ties) get "
        "the larger magnitude: q; scale and amax right",
        "cf. " + GH + "hw-native-sys/pypto-lib/pull/279 (an INT8 quantizer rounding half away from zero, fixed "
        "to round to nearest even)"),
    "nq_quant_pass_rstd_without_eps": (
        "norm_quant", "eps",
        "the quantizing pass recomputes the normalized row with rstd = 1 / sqrt(var) (1 / sqrt(mean(x^2)) for "
        "the rms norm), its eps left out, while the amax pass (amax and the dynamic scale) used the right rstd: "
        "q = clip(y' / scale) from that y'; scale and amax right",
        "pattern: a recompute in a second pass missing a term of the first pass's formula"),
    "nq_quant_pass_tile_offset_missing": (
        "norm_quant", "layout",
        "N > 64: the quantizing pass loops over 64-wide column tiles, loading x and the parameters at the "
        "tile's lanes without the tile's start (the store offset right): the codes of column j are those of "
        "column j mod 64 of the same row; amax and scale (their own pass) right",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel mishandling the columns past "
        "its first block)"),
    "nq_amax_second_warp_dropped": (
        "norm_quant", "block",
        "N > 32: the row's |y| strided over a block of 64 threads (two warps, thread t takes the columns j = t "
        "mod 64) and the shared-memory combine of the two warps' maxima reads warp 0's slot only: amax over the "
        "columns with j mod 64 < 32, the dynamic scale and q from it",
        "cf. " + GH + "flashinfer-ai/flashinfer/pull/3879 (a block reduction reading only part of its warps' "
        "partials)"),
    "nq_ln_bias_in_quantized_domain": (
        "norm_quant", "affine",
        "norm='layer_norm' with a bias: the quantizing epilogue adds the bias after the division by the scale, "
        "q = clip(x_hat * weight / scale + bias) instead of clip((x_hat * weight + bias) / scale); amax and the "
        "dynamic scale (from the right y) right",
        "pattern: an epilogue's bias folded on the wrong side of the scale"),
    # ------------------------------------------------------------------ gated_norm
    "gated_sigmoid_exp2_without_log2e": (
        "gated_norm", "gate",
        "the gate's sigmoid computed as 1 / (1 + exp2(-z)) (the fast exp2 without the log2(e) factor), i.e. "
        "sigmoid(z ln 2): the gate z * sigmoid(z ln 2), y (either side of the norm) and the backward's "
        "silu-derivative formula evaluated with that sigmoid (dx, dz, dweight, dbias)",
        EXP2),
    "gated_stats_over_group_pairs": (
        "gated_norm", "group",
        "group_size < H: each program takes a (2, group_size) tile of two neighbouring groups and reduces it "
        "without an axis, so groups 2k and 2k + 1 are normalized with their pooled statistics (over 2 * "
        "group_size values; an odd last group its own), forward and backward",
        "cf. " + GH + "state-spaces/mamba/pull/951 (a gated RMSNorm's group size wrong by a factor, groups "
        "merged or split)"),
    "gated_dbias_from_dweight_product": (
        "gated_norm", "backward",
        "with a bias: dbias reduced as sum over rows of dn * v_hat (the dweight line's product copied into the "
        "bias's accumulator) instead of dn; dweight, dx, dz and the forward right",
        "pattern: a reduction line copied for the next parameter with its product left unchanged"),
    "gated_ln_centre_with_previous_group_mean": (
        "gated_norm", "layout",
        "norm='layer_norm', group_size < H: the normalization pass over a row's groups centres group g with the "
        "mean register still holding group g - 1's (group 0 its own); each group's rstd right: y; the backward "
        "(its own kernel, from the saved statistics) right",
        STALE),
    "gated_ln_eps_missing": (
        "gated_norm", "eps",
        "norm='layer_norm': rstd = 1 / sqrt(var) per group, the eps added in the rms branch only: y and the "
        "backward's formula on that rstd",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a LayerNormalization whose eps was never applied)"),
    "gated_dx_adds_gate_derivative": (
        "gated_norm", "gate",
        "norm after the gate (norm_before_gate=False): dx = dv * (silu(z) + x * silu'(z)), the product rule "
        "applied as if the gate's input were x (a self-gated silu's derivative), where dv * silu(z) belongs; "
        "dz, dweight, dbias and the forward right",
        "pattern: a SwiGLU-style derivative copied into a gate whose input is another tensor"),
    # ------------------------------------------------------------------ dyt
    "dyt_fwd_inplace_bwd_reads_y": (
        "dyt", "backward",
        "the forward writes y in place into x's buffer (memory saving) and the backward recomputes "
        "t = tanh(alpha x) from that buffer: t' = tanh(alpha y) (y as stored), dx = g * alpha * (1 - t'^2), "
        "dalpha = sum(g * (1 - t'^2) * y), dweight = sum(dy * t'); dbias and the forward right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/21065 (an op run in place between X and Out, wrong because the "
        "backward needs X)"),
    "dyt_bwd_dy_tile_offset_missing": (
        "dyt", "layout",
        "C > 64: the backward's 2-D grid over (rows, 64-wide column tiles) adds the tile offset to x's and the "
        "parameters' pointers but not to dy's: column j reads dy of column j mod 64: dx, dalpha, dweight and "
        "dbias from that dy; the forward right",
        "pattern: a tile offset added to some of a kernel's pointers only"),
    "dyt_1d_input_as_one_channel": (
        "dyt", "layout",
        "a one-axis input: the launcher takes the channel count as x.shape[1] if x.ndim > 1 else 1, so every "
        "element uses weight[0] and bias[0] and the parameter gradients are reduced into their entry 0 (the "
        "other entries 0): y, dx, dalpha, dweight and dbias",
        "pattern: a launcher's channel count guessed from the rank"),
    "dyt_dparams_second_half_offset_missing": (
        "dyt", "reduction",
        "more than one row: dweight and dbias reduced by two programs, the first taking rows 0 .. ceil(M / 2) - 1 "
        "and the second floor(M / 2) rows from a start offset never added (rows 0 .. floor(M / 2) - 1 again): "
        "the first rows counted twice, the last ones never; dx, dalpha and the forward right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (a parameter-gradient reduction losing some rows' "
        "contributions)"),
    "dyt_tanh_exp2_without_log2e": (
        "dyt", None,
        "tanh(v) computed as 1 - 2 / (exp2(2 v) + 1) (the fast exp2 without the log2(e) factor), i.e. tanh(v ln "
        "2): y and dweight from that t, and the backward's 1 - t^2 on it (dx, dalpha)",
        EXP2),
    "dyt_f64_tanh_in_float32": (
        "dyt", "precision",
        "float64 inputs: tanh(alpha x) evaluated by the single-precision tanhf (its argument and result rounded "
        "to float32), the rest in float64: y, dweight and the backward's 1 - t^2 from that t (dx, dalpha)",
        "cf. " + GH + "google/flax/pull/1804 (a normalization layer computing in float32 whatever the input "
        "dtype)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_h_of_previous_row": (
        "poly_norm", "layout",
        "more than one row: the software-pipelined weight-gradient loop multiplies dy of row r by the normalized "
        "powers still held from row r - 1 (row 0 by the registers' initial 0): dweight[k] = sum over r of "
        "dy[r] * h_p[r - 1]; dx, dbias and the forward right",
        STALE),
    "poly_dparams_first_program_scratch_only": (
        "poly_norm", "reduction",
        "more than one row: two programs stride over the rows (rows p, p + 2, ...), each writing its partials of "
        "dweight and dbias into its own scratch row, and the host reduces scratch row 0 only: the odd rows "
        "never reach dweight and dbias; dx and the forward right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1114 (a poly_norm backward with per-program scratch buffers "
        "for dW/dB reduced afterwards)"),
    "poly_bwd_proj_over_row_pair_tile": (
        "poly_norm", "block",
        "more than one row: the backward's programs take (2, H) tiles of two rows and reduce each power's g_p * "
        "h_p without an axis: every row's projection mean(g_p h_p) is its pair's sum divided by H (the last row "
        "of an odd count its own): dx; dweight, dbias and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm kernel taking several rows per program reducing over "
        "the whole 2-D tile)"),
    "poly_dx_tail_tile_unwritten": (
        "poly_norm", "block",
        "H not a multiple of 32: dx stored in whole 32-wide column tiles only (the store loop's bound H // 32), "
        "its last H mod 32 columns (every column for H < 32) left 0; dweight, dbias and the forward right",
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (a norm kernel wrong for a row length not a multiple "
        "of its tile)"),
    "poly_dbias_from_linear_dweight_product": (
        "poly_norm", "backward",
        "with a bias: dbias reduced as sum(dy * h_1) (the linear term's dweight product reused) instead of "
        "sum(dy); dx, dweight and the forward right",
        "pattern: a reduction line copied for the next parameter with its product left unchanged"),
    "poly_f64_bias_through_float_arg": (
        "poly_norm", "precision",
        "float64 inputs with a bias: the scalar bias read on the host (.item()) and handed to the kernel as a "
        "float (float32) argument, rounded to nearest float32 before it is added: y; the gradients right",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a kernel computing a double input's value in single "
        "precision)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _prev_rows(a):
    """Row r of 2-D ``a`` replaced by row r - 1's, row 0 zero."""
    return np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a[:-1]], axis=0)


def _pair_sums(t):
    """Row sums of 2-D ``t`` pooled over pairs of rows (0, 1), (2, 3), ... (the last row of an odd count its
    own), each row given its pair's sum, (rows, 1)."""
    s = _rsum(t)
    out = s.copy()
    top = (t.shape[0] // 2) * 2
    pair = s[0:top:2] + s[1:top:2]
    out[0:top:2], out[1:top:2] = pair, pair
    return out


def _pair_rms_dx(g, h, r):
    """rms_dx with the projection's row sum pooled over pairs of rows (_pair_sums), divided by the row
    length."""
    return r * (g - h * (_pair_sums(g * h) / g.shape[1]))


def _fp8_ties_away(v, qdt):
    """``v`` (already clipped to the format's range) converted to the float8 dtype ``qdt`` by rounding to
    nearest with ties away from zero."""
    q = np.asarray(v).astype(qdt)
    r = q.astype(np.float64)
    vv = np.asarray(v).astype(np.float64)
    code = q.view(np.uint8).astype(np.int32)
    mag, sign = code & 0x7F, code & 0x80
    top = int(np.array(_QUANT_MAX[qdt.name]).astype(qdt).view(np.uint8)) & 0x7F
    up = np.abs(vv) > np.abs(r)
    other_mag = np.where(up, mag + 1, mag - 1)
    valid = (other_mag >= 0) & (other_mag <= top) & np.isfinite(vv)
    other_code = (sign | np.clip(other_mag, 0, top)).astype(np.uint8)
    other = other_code.view(qdt).astype(np.float64)
    tie = valid & (r != vv) & (np.abs(vv - r) == np.abs(vv - other))
    out = np.where(tie & up, other_code, code.astype(np.uint8)).astype(np.uint8)
    return out.view(qdt)


_QUANT_MAX = {dt.name: hi for dt, _, hi in _QUANT.values()}


class Blind44Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind44"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln44(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln44(self, call, acc, b):
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
        mean = _rsum(x) / N
        dv = x - mean
        rstd = 1 / np.sqrt(_rsum(dv * dv) / N + eps)
        xhat = (x - mean) * rstd
        if b == "ln_norm_pass_mean_of_previous_row" and R > 1:
            mp = np.concatenate([mean[:1], mean[:-1]], axis=0)     # the register of row r - 1
            y = affine((x - mp) * rstd, w, bias)
        else:
            y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        xb, rb = xhat, rstd
        if b == "ln_f64_bwd_stats_from_float32_buffers" and d == "float64":
            mb = mean.astype(np.float32).astype(acc)
            rb = rstd.astype(np.float32).astype(acc)
            xb = (x - mb) * rb
        if b == "ln_bwd_xhat_saved_in_input_dtype" and d in HALF:
            xb = _store(xhat, d).astype(acc)
        g = dy if w is None else dy * w
        if b == "ln_bwd_rows_of_first_axis" and x0.ndim > 2:
            S = x0.shape[0]
            per = R // S
            n = per * N
            m1 = np.repeat(_rsum(g.reshape(S, n)) / n, per, axis=0)
            m2 = np.repeat(_rsum((g * xb).reshape(S, n)) / n, per, axis=0)
            dx = rb * (g - m1 - xb * m2)
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        tw, tb = dy * xb, dy
        if b == "ln_dparams_row_block_offset_missing":
            k = -(-R // 4)
            dw, db = k * tw[:4].sum(axis=0), k * tb[:4].sum(axis=0)
        else:
            dw, db = tw.sum(axis=0), tb.sum(axis=0)
        if b == "ln_dparams_column_mask_against_row_count" and R < N:
            dw, db = dw.copy(), db.copy()
            dw[R:], db[R:] = 0, 0                                # cols < M
        if inp.get("weight") is not None:
            grads["weight"] = _store(dw.reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(db.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms44(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms44(self, call, acc, b):
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
        if b == "rms_inv_n_in_input_dtype" and d in HALF:
            ms = _rsum(x * x) * _store(acc(1) / acc(N), d).astype(acc)     # 1 / N in the input's type
        else:
            ms = _rsum(x * x) / N
        rms = np.sqrt(ms)
        if placement == "outside":
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        c = acc(1)
        if b == "rms_rms_from_norm_over_n" and placement == "inside":
            c = acc(np.sqrt(N))
            rstd = acc(N) / np.sqrt(_rsum(x * x) + acc(N) * eps)          # sqrt(sum) / N for the rms
        split = b == "rms_row_split_halves_own_stats" and N > 64 and placement == "inside"
        if split:
            h = (N + 1) // 2
            r1 = 1 / np.sqrt(_rsum(x[:, :h] * x[:, :h]) / h + eps)
            r2 = 1 / np.sqrt(_rsum(x[:, h:] * x[:, h:]) / (N - h) + eps)
            xhat = np.concatenate([x[:, :h] * r1, x[:, h:] * r2], axis=1)
            rstd = r1                                            # the first program's, saved
        else:
            xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_dy_from_output_buffer":
            dy = _store(y, d).astype(acc).reshape(-1, N)         # y's buffer in dy's slot
            g = dy if w is None else dy * w
        xb = x * rstd if split else xhat                         # the backward reloads x and the saved rstd
        if b == "rms_zc_offset_in_first_term_only" and w is not None and off != 0:
            proj = _rsum(dy * w0.astype(acc).reshape(1, N) * xb) / N
            dx = rstd * (g - xb * proj)
        elif c != 1:
            dx = c * rms_dx(g, x * (rstd / c), rstd / c)         # the derivative of sqrt(N) * the right y
        else:
            dx = rms_norm_dx(g, x, xb, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            xw = xb
            if b == "rms_dweight_xhat_of_previous_row" and R > 1:
                xw = _prev_rows(xb)
            grads["weight"] = _store((dy * xw).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an44(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an44(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        st = s
        if b == "an_stats_from_undropped_sum" and p:
            st = x if rs is None else x * rs                     # no mask, no 1 / (1 - p)
            if x1 is not None:
                st = st + x1
            if res is not None:
                st = st + res
        if centred:
            mean = _rsum(st) / N
            if b == "an_ln_welford_m2_old_delta_squared":
                mw = np.zeros((R, 1), acc)
                m2 = np.zeros((R, 1), acc)
                for k in range(N):
                    delta = st[:, k:k + 1] - mw
                    mw = mw + delta / acc(k + 1)
                    m2 = m2 + delta * delta                      # (s_k - mean_{k-1})^2
                mean, var = mw, m2 / N
            else:
                var = _rsum((st - mean) ** 2) / N
        else:
            mean = np.zeros((R, 1), acc)
            var = _rsum(st * st) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = (s - mean) * rstd
        sn = s
        if b == "an_norm_pass_rereads_inplace_residual" and res is not None:
            sn = s + (s - res)                                   # x * c (+ x1 * c1) + 'residual' (now s)
        out = add_norm_outputs((sn - mean) * rstd, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_y1_stored_into_y_buffer" and "y1" in out:
            out["y"], out["y1"] = out["y1"], np.zeros_like(out["y1"])
        if "y" not in call.cotangents:
            return Returned(out, {})
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        twice = b == "an_dres_out_added_per_branch" and dy1 is not None and dres_out is not None
        ds = self._an44_dnorm(dy, we, xhat, rstd, centred)
        if dy1 is not None:
            ds = ds + self._an44_dnorm(dy1, we1, xhat, rstd, centred)
        if dres_out is not None:
            ds = ds + dres_out
            if twice:
                ds = ds + dres_out                               # once in each branch's helper
        grads = add_norm_input_grads(ds, c, c1, None if res is None else ds, x0.shape, d)
        grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, (w, bias, w1, b1), ns, d))
        if inp.get("rowscale") is not None:
            if b == "an_drowscale_missing_x":
                t = ds if mask is None else ds * mask
                drs = _rsum(t) * keep if p else _rsum(t)
                grads["rowscale"] = _store(drs.reshape(inp["rowscale"].shape), d)
            else:
                grads["rowscale"] = rowscale_grad(ds, x, mask, keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    @staticmethod
    def _an44_dnorm(dy, wgt, xhat, rstd, centred):
        """add_norm's normalization backward of one branch (g = dy * wgt)."""
        g = dy if wgt is None else dy * wgt
        n = g.shape[1]
        proj = xhat * (_rsum(g * xhat) / n)
        if not centred:
            return rstd * (g - proj)
        return rstd * (g - _rsum(g) / n - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq44(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq44(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        ln = cfg["norm"] == "layer_norm"
        if ln:
            mean = _rsum(x) / N
            st = _rsum((x - mean) ** 2) / N
            xc = x - mean
        else:
            st = _rsum(x * x) / N
            xc = x
        rstd = 1 / np.sqrt(st + eps)
        y = row_affine(xc * rstd, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        ya = np.abs(y)
        if b == "nq_amax_second_warp_dropped" and N > 32:
            ya = ya[:, (np.arange(N) % 64) < 32]                 # warp 0's slot only
        amax = np.max(ya, axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        yq = y
        if b == "nq_quant_pass_rstd_without_eps":
            yq = row_affine(xc * (1 / np.sqrt(st)), w, bias, acc)
        if b == "nq_ln_bias_in_quantized_domain" and ln and bias is not None:
            v = quant_quotients(row_affine(xc * rstd, w, None, acc), scale, -np.inf, np.inf, acc)
            v = np.clip(v + bias.astype(acc).reshape(1, N), lo, hi)      # the bias after the division
        else:
            v = quant_quotients(yq, scale, lo, hi, acc)
        if b == "nq_int8_trunc_after_half" and qdt.kind == "i":
            q = np.trunc(np.nan_to_num(v, nan=0.0) + 0.5).astype(np.int8)  # (int)(v + 0.5)
        elif b == "nq_fp8_round_half_away" and qdt.kind != "i":
            q = _fp8_ties_away(v, qdt)
        else:
            q = quantize(v, qdt)
        if b == "nq_quant_pass_tile_offset_missing" and N > 64:
            q = q[:, np.arange(N) % 64]                          # the tile's start left out of the loads
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated44(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated44(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_sigmoid_exp2_without_log2e":
            sig, rest = sigmoids(z * acc(LN2))                   # 1 / (1 + exp2(-z))
            s, ds = z * sig, sig * (1 + z * rest)
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        eps = _eps(cfg["eps"], acc)
        no_eps = b == "gated_ln_eps_missing" and norm == "layer_norm"
        if b == "gated_stats_over_group_pairs" and K < H:
            segs = [(a, min(a + 2 * K, H)) for a in range(0, H, 2 * K)]
        else:
            segs = None
        if segs is None:
            vg = v.reshape(-1, K)
            if norm == "layer_norm":
                mean = _rsum(vg) / K
                st = _rsum((vg - mean) ** 2) / K
            else:
                mean = np.zeros((vg.shape[0], 1), acc)
                st = _rsum(vg * vg) / K
            rstd = 1 / np.sqrt(st) if no_eps else 1 / np.sqrt(st + eps)
            vhat = ((vg - mean) * rstd).reshape(R, H)
            mc = mean
            if b == "gated_ln_centre_with_previous_group_mean" and norm == "layer_norm" and K < H:
                m = mean.reshape(R, H // K)
                mc = np.concatenate([m[:, :1], m[:, :-1]], axis=1).reshape(-1, 1)
            yhat = ((vg - mc) * rstd).reshape(R, H)
        else:
            vhat = np.empty_like(v)
            rseg = []
            for a, e in segs:
                vs = v[:, a:e]
                L = e - a
                if norm == "layer_norm":
                    m = _rsum(vs) / L
                    sst = _rsum((vs - m) ** 2) / L
                else:
                    m = np.zeros((R, 1), acc)
                    sst = _rsum(vs * vs) / L
                r = 1 / np.sqrt(sst + eps)
                vhat[:, a:e] = (vs - m) * r
                rseg.append(r)
            yhat = vhat
        nrm = yhat * w if bias is None else yhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        nrm = vhat * w if bias is None else vhat * w + bias       # the backward recomputes from saved stats
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        if segs is None:
            vv = vhat.reshape(-1, K)
            g = (dn * w).reshape(-1, K)
            proj = vv * (_rsum(g * vv) / K)
            if norm == "layer_norm":
                dv = rstd * (g - _rsum(g) / K - proj)
            else:
                dv = rstd * (g - proj)
            dv = dv.reshape(R, H)
        else:
            dv = np.empty_like(v)
            gf = dn * w
            for (a, e), r in zip(segs, rseg, strict=True):
                L = e - a
                gs, vv = gf[:, a:e], vhat[:, a:e]
                proj = vv * (_rsum(gs * vv) / L)
                if norm == "layer_norm":
                    dv[:, a:e] = r * (gs - _rsum(gs) / L - proj)
                else:
                    dv[:, a:e] = r * (gs - proj)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if b == "gated_dx_adds_gate_derivative" and not nbg:
            dx = dv * (s + x * ds)
        db_from = None if bias is None else dn
        grads = gated_grads(dx, dz, dn, db_from, vhat, x0.shape, d)
        if b == "gated_dbias_from_dweight_product" and bias is not None:
            grads["bias"] = _store((dn * vhat).sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt44(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt44(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        R, C = x.shape
        one = b == "dyt_1d_input_as_one_channel" and x0.ndim == 1
        wf = None if w is None else (np.full_like(w, w[0, 0]) if one else w)
        bf = None if bias is None else (np.full_like(bias, bias[0, 0]) if one else bias)
        exp2 = b == "dyt_tanh_exp2_without_log2e"
        if exp2:
            t = np.tanh(a * x * acc(LN2))                        # 1 - 2 / (exp2(2 v) + 1)
        if b == "dyt_f64_tanh_in_float32" and d == "float64":
            t = np.tanh((a * x).astype(np.float32)).astype(acc)
        y = affine(t, wf, bf)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        if b == "dyt_bwd_dy_tile_offset_missing" and C > 64:
            dy = dy[:, np.arange(C) % 64]
        xb, tb = x, t
        if b == "dyt_fwd_inplace_bwd_reads_y":
            xb = _store(y, d).astype(acc)                        # x's buffer now holds y
            tb = np.tanh(a * xb)
        g = dy if wf is None else dy * wf
        if exp2 or (b == "dyt_f64_tanh_in_float32" and d == "float64"):
            gd = g * (1 - tb * tb)
        else:
            r = 1 / np.cosh(a * xb)
            gd = g * (r * r)
        dx = gd * a
        da = _rsum(gd * xb).sum()
        grads = dyt_grads(dx, da, dy, tb, w, bias, inp, x0.shape, d)
        if one:
            if w is not None:
                dw = np.zeros(C, acc)
                dw[0] = (dy * tb).sum()
                grads["weight"] = _store(dw, d)
            if bias is not None:
                dbv = np.zeros(C, acc)
                dbv[0] = dy.sum()
                grads["bias"] = _store(dbv, d)
        if b == "dyt_dparams_second_half_offset_missing" and R > 1:
            h = (R + 1) // 2
            rows = np.concatenate([np.arange(h), np.arange(R - h)])   # the second program from row 0
            if w is not None:
                grads["weight"] = _store((dy * tb)[rows].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[rows].sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly44(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly44(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        us = [x ** 3, x ** 2, x]
        rs = []
        for u in us:
            sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = sc * np.sqrt(_rsum((u / sc) ** 2) / H)
            rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        bf = bias
        if b == "poly_f64_bias_through_float_arg" and bias is not None and d == "float64":
            bf = np.asarray(bias).astype(np.float32)             # a float kernel argument
        y = poly_combine(wt, hs, bf, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = _pair_rms_dx if b == "poly_bwd_proj_over_row_pair_tile" and R > 1 else rms_dx
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_dweight_h_of_previous_row" and R > 1:
            dw = np.array([_rsum(dy * _prev_rows(h)).sum() for h in hs], dtype=acc)
            grads["weight"] = _store(dw.reshape(np.shape(inp["weight"])), d)
        if b == "poly_dparams_first_program_scratch_only" and R > 1:
            dw = np.array([_rsum(dy[0::2] * h[0::2]).sum() for h in hs], dtype=acc)
            grads["weight"] = _store(dw.reshape(np.shape(inp["weight"])), d)
            if bias is not None:
                grads["bias"] = _store(np.reshape(_rsum(dy[0::2]).sum(), np.shape(bias)), d)
        if b == "poly_dx_tail_tile_unwritten" and H % 32:
            gx = np.array(grads["x"]).reshape(-1, H)
            gx[:, (H // 32) * 32:] = 0
            grads["x"] = gx.reshape(x0.shape)
        if b == "poly_dbias_from_linear_dweight_product" and bias is not None:
            grads["bias"] = _store(np.reshape(_rsum(dy * hs[2]).sum(), np.shape(bias)), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_bwd_rows_of_first_axis": ("layer_norm/normal_bf16_2x3x7", "grad.x"),
    "ln_norm_pass_mean_of_previous_row": ("layer_norm/normal_f64_9x7", "output.y"),
    "ln_dparams_column_mask_against_row_count": ("layer_norm/normal_f32_6x100", "grad.weight"),
    "ln_dparams_row_block_offset_missing": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_f64_bwd_stats_from_float32_buffers": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_xhat_saved_in_input_dtype": ("layer_norm/normal_f16_4x128", "grad.weight"),
    "rms_inv_n_in_input_dtype": ("rms_norm/normal_eps1e-05_bf16_6x100", "output.rstd"),
    "rms_row_split_halves_own_stats": ("rms_norm/normal_eps1e-05_f32_6x100", "output.y"),
    "rms_dweight_xhat_of_previous_row": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_bwd_dy_from_output_buffer": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_rms_from_norm_over_n": ("rms_norm/normal_eps1e-05_f64_9x7", "output.y"),
    "rms_zc_offset_in_first_term_only": ("rms_norm/normal_eps1e-05_gemma_f16_4x128", "grad.x"),
    "an_stats_from_undropped_sum": ("add_norm/normal_p_rs_f64_9x7", "output.y"),
    "an_y1_stored_into_y_buffer": ("add_norm/normal_par_f64_5x12", "output.y"),
    "an_norm_pass_rereads_inplace_residual": ("add_norm/normal_f32_6x100", "output.y"),
    "an_dres_out_added_per_branch": ("add_norm/normal_p_par_f64_5x12", "grad.x"),
    "an_drowscale_missing_x": ("add_norm/normal_p_rs_f64_9x7", "grad.rowscale"),
    "an_ln_welford_m2_old_delta_squared": ("add_norm/normal_f32_6x100", "output.y"),
    "nq_int8_trunc_after_half": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_fp8_round_half_away": ("norm_quant/pm1_eps0_rms_e4m3_static_ties_f16_4x64", "output.q"),
    "nq_quant_pass_rstd_without_eps": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.q"),
    "nq_quant_pass_tile_offset_missing": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_amax_second_warp_dropped": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "nq_ln_bias_in_quantized_domain": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.q"),
    "gated_sigmoid_exp2_without_log2e": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_stats_over_group_pairs": ("gated_norm/normal_gs4_f64_3x7x12", "output.y"),
    "gated_dbias_from_dweight_product": ("gated_norm/normal_f32_4x64", "grad.bias"),
    "gated_ln_centre_with_previous_group_mean": ("gated_norm/normal_ln_nbg_gs16_f32_6x48", "output.y"),
    "gated_ln_eps_missing": ("gated_norm/normal_ln_gs2_f64_5x6", "output.y"),
    "gated_dx_adds_gate_derivative": ("gated_norm/normal_f32_4x64", "grad.x"),
    "dyt_fwd_inplace_bwd_reads_y": ("dyt/normal_f64_2x5x7", "grad.x"),
    "dyt_bwd_dy_tile_offset_missing": ("dyt/normal_bf16_6x96", "grad.x"),
    "dyt_1d_input_as_one_channel": ("dyt/normal_f32_7", "output.y"),
    "dyt_dparams_second_half_offset_missing": ("dyt/normal_f64_2x5x7", "grad.weight"),
    "dyt_tanh_exp2_without_log2e": ("dyt/normal_f64_2x5x7", "output.y"),
    "dyt_f64_tanh_in_float32": ("dyt/normal_f64_2x5x7", "output.y"),
    "poly_dweight_h_of_previous_row": ("poly_norm/normal_f64_3x7", "grad.weight"),
    "poly_dparams_first_program_scratch_only": ("poly_norm/normal_f64_3x7", "grad.weight"),
    "poly_bwd_proj_over_row_pair_tile": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_dx_tail_tile_unwritten": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_dbias_from_linear_dweight_product": ("poly_norm/normal_f64_3x7", "grad.bias"),
    "poly_f64_bias_through_float_arg": ("poly_norm/normal_f64_3x7", "output.y"),
}
