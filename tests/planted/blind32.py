"""A thirty-second held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind32Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln32``, ``_rms32``, ``_an32``, ``_nq32``, ``_gated32``, ``_dyt32``,
``_poly32``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind32Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind31.py (the same mistake on the same op; the thirty-third set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dx_dz, gated_grads,
                          gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned, normalized_rows,
                          np_dtype, poly_combine, poly_grads, poly_inputs, poly_normalize, pow2, quant_quotients,
                          quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias, rsum as _rsum, silu_gate,
                          stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind23 import _toward_zero

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind32Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_var_grad_half_dropped": (
        "layer_norm", "backward",
        "dx derived through dvar = sum(g (x - mean)) * (-1/2) rstd^3 with the factor -1/2 written -1: dx = "
        "rstd * (g - mean(g) - 2 x_hat mean(g * x_hat)), the projection term doubled; the forward, dweight "
        "and dbias right",
        "cf. " + GH + "mlpack/mlpack/pull/2474 (a normalization backward written through dvar and dmean with a "
        "term of the chain wrong)"),
    "ln_x_recentred_in_norm_pass": (
        "layer_norm", None,
        "the variance pass reassigns the row register x = x - mean, and the normalization pass subtracts the "
        "mean from it once more: y = (x - 2 mean) * rstd * weight + bias; the returned mean and rstd right, "
        "the backward (its own kernel, from the saved statistics) right",
        "pattern: a register centred in place in one pass and centred again in the next"),
    "ln_half_eps_floored_1e-4": (
        "layer_norm", "eps",
        "16-bit inputs: eps raised to at least 1e-4 (the floor a half-precision eps argument was given so "
        "that it survives the conversion): rstd = 1 / sqrt(var + max(eps, 1e-4)), y and the backward on it",
        "cf. " + GH + "nntrainer/nntrainer/pull/4318 (a norm kernel taking eps as a half, floored to 1e-4 by the "
        "layer so it survived that type)"),
    "ln_welford_count_in_half": (
        "layer_norm", "precision",
        "16-bit inputs: the row's Welford count carried in the input's scalar type, so past 2048 (float16) or "
        "256 (bfloat16) count + 1 rounds back to the count: the running mean's update divides by the stuck "
        "count and the finalization divides M2 by it: mean (returned), rstd, y and the backward from them",
        "cf. " + GH + "pytorch/pytorch/pull/184151 (a Welford state held in too narrow an accumulation type)"),
    "ln_dparams_rows_of_first_axis": (
        "layer_norm", "reduction",
        "inputs of three or more axes: the dweight/dbias kernel's row count taken as x.shape[0] (a 2-D input "
        "assumed), so the column sums run over the first x.shape[0] rows of the flattened input only; dx and "
        "the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (layer_norm_backward taking its row count from "
        "input.shape[0])"),
    "ln_welford_merge_mean_weights_swapped": (
        "layer_norm", "merge",
        "N > 64: the row reduced in column chunks of 64, each chunk's (count, mean, M2) folded into the "
        "running state by a combine whose mean moves by delta * n_a / n (the running state's count) instead of "
        "delta * n_b / n (right only where the two counts merged are equal, as for N = 128); M2's merge formula "
        "right: mean (returned), y and the backward's x_hat from it; rstd exact for two chunks (N <= 128)",
        "cf. " + GH + "morinim/ultra/pull/23 (a pooled mean computed with the wrong quantities as the counts)"),
    "ln_bias_folded_times_rstd": (
        "layer_norm", "affine",
        "with a bias: the epilogue written y = x * (weight * rstd) + (bias - mean * weight) * rstd, rstd "
        "distributed over the bias too: y = x_hat * weight + bias * rstd; mean, rstd and the backward (its "
        "own kernel) right",
        "pattern: an affine folded into one multiply-add with a factor applied to the whole shift"),
    "ln_stats_butterfly_missing_16": (
        "layer_norm", "block",
        "N > 16: the row's columns strided over a warp's 32 lanes (lane l takes j = l mod 32) and the lane "
        "partials reduced by an xor butterfly with offsets 8, 4, 2, 1 (16 missing), lane 0's value used: the "
        "mean's and the variance's sums over the columns with j mod 32 < 16 only (divided by N): mean, rstd, "
        "y and the backward from them",
        "cf. " + GH + "1bit-MONSTER/1bit-MONSTER/issues/746 (a warp reduction's shuffle offsets wrong)"),
    "ln_dbias_from_dweight_accumulator": (
        "layer_norm", "backward",
        "with a bias: the column kernel's two accumulators mixed up at the store, dbias written from the "
        "dweight accumulator: dbias = sum(dy * x_hat); dweight, dx and the forward right",
        "pattern: the bias gradient's store given the weight gradient's register"),
    # ------------------------------------------------------------------ rms_norm
    "rms_eps_hardcoded_1e-6": (
        "rms_norm", "eps",
        "the kernel uses its hard-coded eps 1e-6 whatever the configured eps (None included): rstd = 1 / "
        "sqrt(mean(x^2) + 1e-6) (1 / (rms + 1e-6) outside), y and the backward on it",
        GH + "NVIDIA/cutlass/pull/1112 (the RMS norm kernel using a hard-coded epsilon of 1e-6)"),
    "rms_bwd_inplace_dx_aliases_dy": (
        "rms_norm", "backward",
        "the backward computes dx in place over the incoming gradient's buffer in steps (dx = u, dx *= "
        "-mean(g * x_hat), dx += g, dx *= rstd) and its third step re-reads the overwritten buffer: dx = rstd "
        "* (-2 u mean(g * x_hat)), g's own term replaced by the projection term a second time; the forward and "
        "dweight right",
        GH + "ggml-org/ggml/pull/1519 (rms_norm_back wrong under in-place aliasing of dst with the upstream "
        "gradient)"),
    "rms_half2_tail_reads_next_row": (
        "rms_norm", "block",
        "16-bit inputs, N odd: the row loaded in 2-wide vectors (half2) from a 4-byte-aligned start, the last "
        "vector straddling the row's end: the sum of squares takes the next row's first value too (0 after "
        "the last row), divided by N: rstd, y and the backward through that rstd",
        GH + "ROCm/aiter/issues/5044 (HIP RMSNorm corrupting row-boundary elements for odd hidden sizes)"),
    "rms_weight_loaded_at_row_index": (
        "rms_norm", "layout",
        "with a weight: the forward loads the weight at the row index (W + row, mod N) instead of the column's "
        "(W + cols): every value of row r scaled by weight[r mod N] (+ offset); rstd and the backward (its own "
        "kernel) right",
        "pattern: a 2-D index's row offset added to the weight pointer"),
    "rms_f16_input_through_bf16": (
        "rms_norm", "precision",
        "float16 inputs: x, the weight and dy converted to bfloat16 (rounded to nearest) for a kernel "
        "instantiated for bfloat16 only, its float32 results stored back as float16: rstd, y, dx and dweight "
        "from the rounded values",
        "cf. " + GH + "InternLM/lmdeploy/pull/4276 (half-precision tensors converted to bfloat16 for a kernel that "
        "takes bfloat16 only)"),
    "rms_rows_grid_capped_48": (
        "rms_norm", "block",
        "more than 48 rows: one row per program on a grid capped at 48 (the vector-core count) with no loop "
        "over the remaining rows: rows 48 on never processed, their y and rstd left 0, and the backward "
        "(from the saved rstd 0) gives them dx = 0 and no share of dweight",
        GH + "vllm-project/vllm-ascend/pull/5012 (an RMS norm kernel's grid capped at num_vectorcore = 48 rows)"),
    "rms_rstd_output_is_inverse_mean_square": (
        "rms_norm", None,
        "the returned rstd is 1 / (mean(x^2) + eps) (the squared reciprocal, an 'inv_var' buffer handed out as "
        "rstd; 1 / (rms + eps)^2 outside); y and the gradients from the right rstd",
        "cf. " + GH + "microsoft/onnxruntime/pull/8172 (a saved inverse variance that was really an inverse std)"),
    # ------------------------------------------------------------------ add_norm
    "an_x1_keep_scale_applied_twice": (
        "add_norm", "dropout",
        "dropout with the parallel input x1: x1's factor c1 = mask1 / (1 - p) multiplied by 1 / (1 - p) "
        "once more where it is added: s = x * c + x1 * mask1 / (1 - p)^2 (+ residual), and dx1 = ds * that "
        "factor: residual_out, y, y1 and the backward",
        "pattern: a keep scale folded into the saved factor and applied again by the add"),
    "an_var_floored_at_eps": (
        "add_norm", "eps",
        "rstd = 1 / sqrt(max(var, eps)) (max(mean(s^2), eps) for the rms norm): eps used as a floor of the "
        "statistic instead of added to it: y, y1 and the backward's formula on that rstd; residual_out right",
        "pattern: eps applied as a clamp, the form of normalize-style kernels"),
    "an_dparams_last_sample_only": (
        "add_norm", "reduction",
        "inputs of three or more axes: the parameter gradients' column partials written per sample (one "
        "program per sample storing into the buffer instead of adding to it), so dweight, dbias (dweight1, "
        "dbias1) hold the last sample's rows only; dx, dresidual and the forward right",
        "pattern: a per-program partial stored where it should be accumulated"),
    "an_bwd_xhat_from_stored_residual_out": (
        "add_norm", "precision",
        "16-bit residual_out (residual_in_fp32 off): the backward recomputes x_hat from the stored residual_out "
        "(s rounded to the input dtype) with the saved mean and rstd, while the forward normalized the float32 "
        "s: ds (dx, dresidual, drowscale) and dweight from it; the forward right",
        "cf. " + GH + "vllm-project/vllm/pull/52151 (a fused add + RMSNorm computing from the rounded sum where "
        "the float32 sum belongs)"),
    "an_ln_bwd_means_over_n_minus_1": (
        "add_norm", "bessel",
        "norm='layer_norm', N > 1: the normalization backward's row means mean(g) and mean(g * x_hat) divided by "
        "N - 1 (for y and y1): ds, so dx, dresidual, dx1 and drowscale; the forward and the parameter "
        "gradients right",
        "pattern: a backward derived for the unbiased variance paired with a biased forward"),
    "an_residual_added_twice": (
        "add_norm", None,
        "with a residual: the residual added inside the fused kernel and once more by the caller's add it "
        "replaced: s = x * c (+ x1 * c1) + 2 * residual, and dresidual = 2 * ds: residual_out, y, y1 and the "
        "backward of that equation",
        "cf. " + GH + "eole-nlp/eole/pull/286 (a decoder layer adding the residual twice)"),
    "an_dweight1_written_twice": (
        "add_norm", "constant",
        "with the parallel branch's weight1: dweight1's column partials both atomically added into the output "
        "and stored to it again by the final reduction: dweight1 twice its value; the rest right",
        "cf. " + GH + "karpathy/llm.c/pull/408 (gradient accumulation into a norm's parameter-gradient buffers)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_fp8_q_rounded_up": (
        "norm_quant", "rounding",
        "float8 outputs: y / scale converted with the round-toward-plus-infinity modifier (the one the scale's "
        "own conversion uses so that no quotient exceeds qmax) instead of to nearest even: q one step up "
        "wherever nearest-even rounded down (larger positive values, smaller negative magnitudes); scale and "
        "amax right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/45086 (a conversion's rounding mode not the documented "
        "nearest-even)"),
    "nq_static_scale_indexed_by_row": (
        "norm_quant", "quant_scale",
        "a static_scale given, more than one row: the one-element scale loaded at the row index (the per-token "
        "path's stride kept), the masked load giving rows past the first a scale of 0 (other=0): those rows "
        "quantized to 0 and returned with scale 0; row 0 and amax right",
        "cf. " + GH + "vllm-project/vllm/pull/20076 (a static quant kernel mixing per-tensor and per-token scale "
        "shapes)"),
    "nq_dyn_scale_margin_one": (
        "norm_quant", "quant_scale",
        "dynamic scale: the scale computed with a margin of 1 left on (amax / qmax * 2^margin), before the "
        "scale_ub and min_scale clamps: scale twice its value where unclamped, q from it; amax right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/427 (the fp8 scaling factor's margin, sf = (fp8_max / amax) "
        "/ 2^margin)"),
    "nq_int8_unsigned_lower_bound": (
        "norm_quant", "saturation",
        "int8: y / scale clipped to [0, 127] (the unsigned format's lower bound 0 kept with int8's upper one): "
        "every negative quotient becomes 0; scale and amax right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56327 (the int8 and uint8 quantize paths' clamps mixed up)"),
    "nq_q_from_unclamped_scale": (
        "norm_quant", "quant_scale",
        "dynamic scale: the quantizing pass divides by amax / qmax recomputed from the row's amax (before the "
        "scale_ub and min_scale clamps) while the returned scale is the clamped one: q wrong where a clamp "
        "applies; scale and amax right",
        "pattern: a value recomputed in a second pass without the clamps the first pass applied"),
    "nq_amax_in_bf16": (
        "norm_quant", "precision",
        "the row's amax held in a bfloat16 register (rounded to nearest) for every input dtype: the dynamic "
        "scale from it, and it returned; q from that scale",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2355 (a normalization's fused amax taken at the wrong "
        "precision)"),
    "nq_rms_eps_added_to_sum_of_squares": (
        "norm_quant", "eps",
        "norm='rms_norm': rstd = 1 / sqrt((sum(x^2) + eps) / N): eps added to the sum of squares before the "
        "division by N (an effective eps / N): y, amax, the dynamic scale and q",
        "pattern: eps added one step too early in a sum-then-divide"),
    # ------------------------------------------------------------------ gated_norm
    "gated_group_size_halved_tp2": (
        "gated_norm", "group",
        "group_size < H (even): the group length computed from the tensor-parallel-sharded hidden size and the "
        "unsharded group count (world size 2), K / 2: each half group normalized on its own, forward and "
        "backward",
        GH + "state-spaces/mamba/pull/908 (RMSNormGated's group_size too small by the world size under tensor "
        "parallelism)"),
    "gated_nbg_dx_gated_twice": (
        "gated_norm", "gate",
        "norm_before_gate=True: the norm-after-gate branch's dx *= silu(z) executed for both settings, dx = "
        "dv * silu(z) with dv already from dn = dy * silu(z): dx; y, dz, dweight and dbias right",
        "pattern: a branch's line left outside its flag's if"),
    "gated_ln_tile_stats_merged_without_spread": (
        "gated_norm", "one_pass",
        "norm='layer_norm', group size K > 16: each group read in tiles of 16, the tiles' centred sums of "
        "squares added without the spread of the tiles' means about the group mean (the mean itself right): "
        "rstd, y and the backward's formula on that rstd",
        "pattern: Chan's merge written without its delta^2 n_a n_b / n term"),
    "gated_norm_of_ungated_x": (
        "gated_norm", "gate",
        "norm='rms_norm', norm after the gate: the statistics of v = x * silu(z) right, but the normalization "
        "pass multiplies the reloaded x (not v) by rstd: y = x * rstd * weight + bias; the backward (its own "
        "kernel) right",
        "pattern: the pre-gate register reloaded in the second pass"),
    "gated_dz_from_dy_skipping_norm_bwd": (
        "gated_norm", "gate",
        "norm after the gate: dz = dy * x * silu'(z), the incoming gradient taken where the normalization's "
        "input gradient dv belongs: dz only; y, dx, dweight and dbias right",
        "cf. " + GH + "fla-org/flash-linear-attention/issues/155 (a gated layer norm backward's dz line written "
        "from the wrong quantity)"),
    "gated_group_pad_lanes_loaded_as_one": (
        "gated_norm", "block",
        "norm='rms_norm', group size K not a power of two: x and z loaded into next_pow2(K) tiles with other=1.0, "
        "so each padded lane adds v^2 (1 before the gate, silu(1)^2 after it) to the group's sum of squares, "
        "divided by K: rstd, y and the backward's formula on it",
        "cf. " + GH + "triton-lang/triton/issues/3281 (masked lanes of a tl.load filled with 1 entering a tl.sum)"),
    # ------------------------------------------------------------------ dyt
    "dyt_alpha_loaded_per_column": (
        "dyt", "layout",
        "the scalar alpha loaded with the parameters' column offsets (alpha_ptr + cols, mask cols < 1, "
        "other=0): column 0 uses alpha, every other column 0: t = tanh(alpha_j x), y, and the backward with "
        "that alpha_j (dx, dalpha summed over every column, dweight)",
        "pattern: a scalar parameter's load copied from the per-channel parameters' loads"),
    "dyt_dparams_from_dx_in_dy_buffer": (
        "dyt", "backward",
        "dx stored in place into dy's buffer before the column reduction reads 'dy' from it: dweight = sum(dx "
        "* t), dbias = sum(dx); dx, dalpha and the forward right",
        "cf. " + GH + "ggml-org/ggml/pull/1519 (a backward writing over the upstream gradient it reads again)"),
    "dyt_bias_added_twice": (
        "dyt", "affine",
        "with a bias: the fused kernel adds the bias and the module adds it again: y = weight * tanh(alpha x) + "
        "2 bias, and dbias = 2 sum(dy); dx, dalpha and dweight right",
        "cf. " + GH + "huggingface/pytorch-image-models/pull/2741 (a fused norm's affine applied a second time by "
        "the fallback)"),
    "dyt_dalpha_partials_from_row_one": (
        "dyt", "reduction",
        "alpha's gradient reduced in two stages, one partial per row, the second stage's loop starting at row 1: "
        "row 0's sum(g * sech^2(alpha x) * x) never added (dalpha 0 for one row); dx, dweight, dbias and the "
        "forward right",
        "pattern: a second-stage loop over partials starting at 1 onto a zeroed accumulator"),
    # ------------------------------------------------------------------ poly_norm
    "poly_eps_inside_rescaled_mean_square": (
        "poly_norm", "eps",
        "each power's rms taken overflow-safely as m sqrt(mean((u / m)^2)) with m = max |u|, eps added inside "
        "the root of the rescaled mean: r_p = 1 / (m sqrt(mean((u / m)^2) + eps)), an effective eps m^2: y and "
        "the backward from those r_p",
        "cf. " + GH + "apple/coremltools/pull/2822 (rms_norm's eps inflated by m^2 when added after a max-|x| "
        "rescale)"),
    "poly_bwd_proj_last_column_masked": (
        "poly_norm", "block",
        "H > 1: the backward's row sums of g_p * h_p loaded with the mask cols < H - 1 (off by one): the last "
        "column never enters mean(g_p h_p) (still divided by H): dx; the forward, dweight and dbias right",
        "pattern: an off-by-one bound in a masked load"),
    "poly_dx_bf16_truncated": (
        "poly_norm", "rounding",
        "bfloat16 inputs: dx converted to bfloat16 by dropping the low 16 bits (round toward zero) instead of "
        "to nearest even; y, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing their float32 results to 16 bits by "
        "truncation)"),
    "poly_dweight_cube_slot_from_square": (
        "poly_norm", "backward",
        "dweight[0] (the x^3 term's) reduced from dy * h_2, the square term's product (a copied line not "
        "updated); dweight[1], dweight[2], dx, dbias and the forward right",
        "pattern: a copied reduction line's operand not updated"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _welford_half_count(x, d, acc):
    """Each row's (mean, var) by a left-to-right Welford loop whose count is held in the 16-bit dtype ``d``."""
    R, N = x.shape
    n = np.zeros((R, 1), acc)
    mean = np.zeros((R, 1), acc)
    m2 = np.zeros((R, 1), acc)
    for j in range(N):
        n = _half(n + acc(1), d)                          # the count rounded to the input's scalar type
        v = x[:, j:j + 1]
        delta = v - mean
        mean = mean + delta / n
        m2 = m2 + delta * (v - mean)
    return mean, m2 / n


def _chunk_merge_swapped(x, acc, chunk=64):
    """Each row's (mean, var) from column chunks merged by a combine whose mean weights delta by n_a / n."""
    R, N = x.shape
    na, mean_a, m2_a = None, None, None
    for j in range(0, N, chunk):
        t = x[:, j:j + chunk]
        nb = t.shape[1]
        mean_b = _rsum(t) / acc(nb)
        m2_b = _rsum((t - mean_b) ** 2)
        if na is None:
            na, mean_a, m2_a = nb, mean_b, m2_b
            continue
        n = na + nb
        delta = mean_b - mean_a
        mean_a = mean_a + delta * acc(na / n)               # n_a / n where n_b / n belongs
        m2_a = m2_a + m2_b + delta * delta * acc(na * nb / n)
        na = n
    return mean_a, m2_a / acc(N)


def _fp8_round_up(v, qdt):
    """``v`` converted to the float8 dtype ``qdt`` rounding toward +infinity (one step up wherever the
    nearest-even conversion rounded down)."""
    r = np.asarray(v.astype(qdt))
    rv, av = r.astype(np.float64), np.asarray(v, np.float64)
    down = np.isfinite(rv) & (rv < av)
    bits = r.view(np.uint8).copy()
    neg = (bits & 0x80) != 0
    bits[down & ~neg] += 1                                   # a positive value one step up in magnitude
    bits[down & neg] -= 1                                    # a negative value one step down in magnitude
    return bits.view(qdt)


class Blind32Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind32"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln32(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln32(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        if b == "ln_half_eps_floored_1e-4" and d in HALF:
            eps = max(eps, acc(1e-4))                        # the half-precision eps argument's floor
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        inv = acc(1) / acc(N)
        if b == "ln_welford_count_in_half" and d in HALF and N > (256 if d == "bfloat16" else 2048):
            mean, var = _welford_half_count(x, d, acc)
            dev = x - mean
        elif b == "ln_welford_merge_mean_weights_swapped" and N > 64:
            mean, var = _chunk_merge_swapped(x, acc)
            dev = x - mean
        elif b == "ln_stats_butterfly_missing_16" and N > 16:
            lanes = (np.arange(N) % 32) < 16                 # the half-warp lane 0's butterfly reaches
            mean = _rsum(np.where(lanes, x, acc(0))) * inv
            dev = x - mean
            var = _rsum(np.where(lanes, dev * dev, acc(0))) * inv
        else:
            mean = _rsum(x) * inv
            dev = x - mean
            var = _rsum(dev * dev) * inv
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        if b == "ln_x_recentred_in_norm_pass":
            y = affine((dev - mean) * rstd, w, bias)         # the centred register centred again
        elif b == "ln_bias_folded_times_rstd" and bias is not None:
            y = affine(xhat, w, bias * rstd)
        else:
            y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_var_grad_half_dropped":
            dx = rstd * (g - _rsum(g) / N - 2 * xhat * (_rsum(g * xhat) / N))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        rows = np.arange(R)
        if b == "ln_dparams_rows_of_first_axis" and x0.ndim - len(ns) >= 2:
            rows = rows[:x0.shape[0]]                        # M = x.shape[0] rows of the flattened input
        if call.inputs.get("weight") is not None:
            dw = (dy * xhat)[rows].sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns), d)
        if bias is not None:
            src = dy * xhat if b == "ln_dbias_from_dweight_accumulator" else dy
            grads["bias"] = _store(src[rows].sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms32(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms32(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        via_bf16 = b == "rms_f16_input_through_bf16" and d == "float16"
        if via_bf16:
            x = _store(x, "bfloat16").astype(acc)            # the bfloat16-only kernel's input
        placement = cfg.get("eps_placement", "inside") or "inside"
        inside = placement != "outside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N)
        if w is not None and via_bf16:
            w = _store(w, "bfloat16").astype(acc)
        w = None if w is None else w + off
        eps = acc(1e-6) if b == "rms_eps_hardcoded_1e-6" else _eps(cfg["eps"], acc)
        ss = _rsum(x * x)
        if b == "rms_half2_tail_reads_next_row" and d in HALF and N % 2:
            nxt = np.concatenate([x[1:, :1], np.zeros((1, 1), acc)], axis=0)   # the next row's first value
            ss = ss + nxt * nxt
        ms = ss / N
        rms = np.sqrt(ms)
        if not inside:
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        if b == "rms_rows_grid_capped_48" and R > 48:
            rstd = rstd.copy()
            rstd[48:] = 0                                    # rows no program ever reaches: left 0
        xhat = x * rstd
        if b == "rms_weight_loaded_at_row_index" and w is not None:
            wr = w0.astype(acc).reshape(N)[np.arange(R) % N].reshape(R, 1) + off
            y = xhat * wr
        else:
            y = xhat if w is None else xhat * w
        rs = rstd * rstd if b == "rms_rstd_output_is_inverse_mean_square" else rstd
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if via_bf16:
            dy = _store(dy, "bfloat16").astype(acc)
            g = dy if w is None else dy * w
        if b == "rms_bwd_inplace_dx_aliases_dy":
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (-2 * u * (_rsum(g * xhat) / N))     # dz re-read from the buffer dx overwrote
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an32(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an32(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        twice = b == "an_residual_added_twice" and res is not None
        if twice:
            res = res + res                                  # added in the kernel and again by the caller
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        if b == "an_x1_keep_scale_applied_twice" and p and c1 is not None:
            s = s + x1 * c1 * (keep - 1)                     # x1 * c1 * keep where x1 * c1 belongs
            c1 = c1 * keep
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            dev = s - mean
        else:
            mean = acc(0)
            dev = s
        var = _rsum(dev * dev) / N
        if b == "an_var_floored_at_eps":
            rstd = 1 / np.sqrt(np.maximum(var, eps))
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        xb = xhat
        res_dtype = "float32" if cfg.get("residual_in_fp32") and d in HALF else d
        if b == "an_bwd_xhat_from_stored_residual_out" and res_dtype in HALF:
            sr = _store(s, res_dtype).astype(acc)            # x_hat recomputed from the stored residual_out
            xb = (sr - mean) * rstd
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = self._an32_dnorm(dy, we, xb, rstd, centred, b)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + self._an32_dnorm(dy1, we1, xb, rstd, centred, b)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        dres = None if res is None else (ds + ds if twice else ds)
        grads = add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xb, params, x, mask, keep, p, ns, d)
        if b == "an_dparams_last_sample_only" and x0.ndim - len(ns) >= 2:
            last = slice(R - R // x0.shape[0], R)            # the last sample's rows: its program stored last
            for key, t, gvn in (("weight", None if dy is None else dy * xb, w), ("bias", dy, bias),
                                ("weight1", None if dy1 is None else dy1 * xb, w1),
                                ("bias1", dy1, b1)):
                if gvn is not None and t is not None and key in grads:
                    grads[key] = _store(t[last].sum(axis=0).reshape(ns), d)
        if b == "an_dweight1_written_twice" and "weight1" in grads:
            grads["weight1"] = _store(2 * (dy1 * xb).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    @staticmethod
    def _an32_dnorm(dy, wgt, xhat, rstd, centred, b):
        """add_norm's normalization backward of one branch (g = dy * wgt) with this set's planted variants."""
        g = dy if wgt is None else dy * wgt
        n = g.shape[1]
        cnt = n - 1 if b == "an_ln_bwd_means_over_n_minus_1" and centred and n > 1 else n
        proj = xhat * (_rsum(g * xhat) / cnt)
        if not centred:
            return rstd * (g - proj)
        return rstd * (g - _rsum(g) / cnt - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq32(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq32(self, call, acc, b):
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
            rstd = 1 / np.sqrt(_rsum((x - mean) ** 2) / N + eps)
        else:
            mean = acc(0)
            if b == "nq_rms_eps_added_to_sum_of_squares":
                rstd = 1 / np.sqrt((_rsum(x * x) + eps) / N)
            else:
                rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        y = row_affine((x - mean) * rstd, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        if b == "nq_amax_in_bf16":
            amax = _store(amax, "bfloat16").astype(acc)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
            if b == "nq_static_scale_indexed_by_row" and R > 1:
                scale = scale.copy()
                scale[1:] = 0                                # loads past the one-element buffer: other=0
        elif b == "nq_dyn_scale_margin_one":
            scale = dynamic_scale(amax * acc(2), hi, cfg, acc)     # amax / qmax * 2^1, then the clamps
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
        qscale = scale
        if b == "nq_q_from_unclamped_scale" and static is None:
            qscale = amax / acc(hi)                          # the quantizing pass's own, unclamped scale
        qlo = 0.0 if b == "nq_int8_unsigned_lower_bound" and qdt.kind == "i" else lo
        v = quant_quotients(y, qscale, qlo, hi, acc)
        if b == "nq_fp8_q_rounded_up" and qdt.kind != "i":
            q = _fp8_round_up(v, qdt)
        else:
            q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated32(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated32(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_group_size_halved_tp2" and K < H and K % 2 == 0:
            K = K // 2                                       # sharded hidden size over the unsharded groups
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            if b == "gated_ln_tile_stats_merged_without_spread" and K > 16:
                ss = sum(_rsum((t - _rsum(t) / t.shape[1]) ** 2) for t in
                         (vg[:, j:j + 16] for j in range(0, K, 16)))
            else:
                ss = _rsum((vg - mean) ** 2)
        else:
            mean = acc(0)
            ss = _rsum(vg * vg)
            if b == "gated_group_pad_lanes_loaded_as_one" and pow2(K) > K:
                pad = acc(1) if nbg else silu_gate(np.ones(1, acc))[0][0]
                ss = ss + acc(pow2(K) - K) * pad * pad       # the padded lanes' v^2
        rstd = 1 / np.sqrt(ss / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        if b == "gated_norm_of_ungated_x" and not nbg and norm != "layer_norm":
            xr = (x.reshape(-1, K) * rstd).reshape(R, H)     # the reloaded x where v belongs
            nf = xr * w if bias is None else xr * w + bias
            y = nf
        else:
            y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        g = (dn * w).reshape(-1, K)
        vv = vhat.reshape(-1, K)
        proj = vv * (_rsum(g * vv) / K)
        if norm == "layer_norm":
            dv = rstd * (g - _rsum(g) / K - proj)
        else:
            dv = rstd * (g - proj)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if b == "gated_nbg_dx_gated_twice" and nbg:
            dx = dx * s
        if b == "gated_dz_from_dy_skipping_norm_bwd" and not nbg:
            dz = dy * x * ds
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt32(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt32(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        C = x.shape[1]
        aj = a
        if b == "dyt_alpha_loaded_per_column":
            aj = np.where(np.arange(C) == 0, a, acc(0)).astype(acc).reshape(1, C)
            t = np.tanh(aj * x)
        bb = bias
        if b == "dyt_bias_added_twice" and bias is not None:
            bb = bias + bias
        y = affine(t, w, bb)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(aj * x)
        gd = g * (r * r)
        dx = gd * aj
        parts = _rsum(gd * x)
        if b == "dyt_dalpha_partials_from_row_one":
            parts = parts[1:]
        da = parts.sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dparams_from_dx_in_dy_buffer":
            if w is not None:
                grads["weight"] = _store((dx * t).sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dx.sum(axis=0), d)
        if b == "dyt_bias_added_twice" and bias is not None:
            grads["bias"] = _store(2 * dy.sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly32(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly32(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        if b == "poly_eps_inside_rescaled_mean_square":
            rs = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rs.append(1 / (sc * np.sqrt(_rsum((u / sc) ** 2) / H + eps)))   # eps inside the rescaled root
            hs = [u * r for u, r in zip(us, rs, strict=True)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = rms_dx
        if b == "poly_bwd_proj_last_column_masked" and H > 1:
            def du(g, h, r):
                return r * (g - h * (_rsum((g * h)[:, :H - 1]) / H))
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_dx_bf16_truncated" and d == "bfloat16":
            dx = np.zeros_like(x)
            for k, pw in enumerate((3, 2, 1)):
                dp = du(dy * wt[k], hs[k], rs[k])
                dx = dx + (dp if pw == 1 else pw * x ** (pw - 1) * dp)
            grads["x"] = _toward_zero(dx.reshape(x0.shape), np_dtype("bfloat16"))
        if b == "poly_dweight_cube_slot_from_square":
            dw = np.array([_rsum(dy * h).sum() for h in (hs[1], hs[1], hs[2])], dtype=acc)
            grads["weight"] = _store(dw, d)
        return Returned(out, grads)
