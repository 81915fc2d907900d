"""A thirty-fifth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind35Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn35``, ``_in35``, ``_gn35`` for group_norm and
group_norm_silu, ``_zs35``, ``_lp35``, ``_nqb35``, ``_aln35``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind35Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind33.py (the same mistake on the same op; the thirty-fourth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (
    affine,
    aln_inputs,
    aln_modulation,
    block_quotients,
    bn_momentum,
    channel_params,
    channel_rows,
    channel_running_stats,
    dy_and_g,
    e8m0_scale,
    frexp_exp,
    from_channel_rows,
    group_outputs,
    group_params,
    group_rows,
    group_scales,
    instance_momentum,
    instance_momentum_value,
    instance_outputs,
    instance_params,
    instance_running_stats,
    instance_running_update,
    instance_unbiased_var,
    mx_scales,
    nan_running,
    norm_outputs,
    np_dtype,
    nqb_format,
    nqb_returned,
    nvfp4_encode,
    nvfp4_scales,
    padded_blocks,
    per_sample,
    running_in,
    running_setup,
    running_state,
)
from ._blind_math import centred_dx as _centred_dx
from ._blind_math import channel_sums as _channel_sums
from ._blind_math import eps_value as _eps
from ._blind_math import rsum as _rsum
from ._blind_math import sigmoids as _sigmoids
from ._blind_math import store as _store
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind11 import Blind11Kernel
from .blind27 import _toward_zero

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind35Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_spatial_tile_mask_local": (
        "batch_norm", "block",
        ("batch statistics, a spatial size S above 16 and not a multiple of 16: each (sample, channel) plane of the "
         "NCHW buffer read in tiles of 16 positions whose mask tests the lane against the end of the buffer only, so "
         "the last tile's padding lanes read the next plane's first values (the next channel's, or the next "
         "sample's first channel's) into the channel's sums for the mean and the variance, still divided by N * S: "
         "y, the saved statistics, the backward and the running update on them"),
        "cf. " + GH + "tile-ai/TileOPs/issues/429 (norm kernels copying a padded tile length past the end of "
        "unpadded rows)"),
    "bn_stats_sample_partials_from_one": (
        "batch_norm", "reduction",
        ("batch statistics, more than one sample: each channel's sums (of x for the mean, then of (x - mean)^2 for "
         "the variance) formed per sample and combined by a second stage whose loop over the samples starts at 1, "
         "sample 0's partials never added, the totals still divided by N * S: the mean, the variance, y, the saved "
         "statistics, the backward and the running update on them"),
        "cf. " + GH + "c3d/db48x/issues/1103 (a variance whose accumulation skipped the first term of its sum)"),
    "bn_dx_f16_round_down": (
        "batch_norm", "rounding",
        ("float16 inputs: dx converted from float32 with the round-down conversion (toward -inf, __float2half_rd) "
         "instead of round to nearest even; y, the statistics, the running update, dweight and dbias right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 conversions in another rounding mode than to "
        "nearest)"),
    "bn_bwd_sums_per_sample": (
        "batch_norm", "group",
        ("batch statistics, more than one sample: the backward's mean(g) and mean(g * x_hat) reduced per (sample, "
         "channel) over the S positions of one sample (the instance-norm backward kernel reused) instead of over "
         "the whole batch of the channel; x_hat and rstd the channel's; dweight, dbias and the forward right"),
        "pattern: a backward kernel shared with instance norm launched with the per-plane reduction"),
    "bn_chan_merge_mean_over_old_count": (
        "batch_norm", "merge",
        ("batch statistics, more than one sample: each channel's statistics merged sample by sample from per-sample "
         "partials (S, mean_i, M2_i) by Chan's update with the mean step written delta * n_b / n_a (the count "
         "before the merge where the merged count n_a + n_b belongs): the mean drifts, M2 = M2_a + M2_b + delta^2 "
         "n_a n_b / n about it, var = M2 / n: y, the saved statistics, the backward and the running update"),
        "pattern: the parallel-variance merge's mean update divided by the wrong count"),
    "bn_first_batch_copied_into_running": (
        "batch_norm", "running",
        ("training with running statistics and num_batches_tracked 0 on entry: the first step copies the batch "
         "mean and variance (unbiased under torch's convention) into running_mean and running_var (a warm start) "
         "instead of the momentum update from the initial buffers; later steps, num_batches_tracked, y and the "
         "gradients right"),
        "cf. " + GH + "patrick-kidger/equinox/issues/659 (a BatchNorm whose very first forward pass sets the "
        "running statistics to the batch's)"),
    # ------------------------------------------------------------------ group_norm
    "gn_f64_rstd_by_rsqrtf": (
        "group_norm", "precision",
        ("float64 inputs: each group's rstd evaluated by the single-precision reciprocal square root (var + eps "
         "narrowed to float32, the result widened back): y, the saved rstd and the backward from it; the mean "
         "and every other step in float64"),
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a kernel templated on T calling sqrtf, the "
        "single-precision root, for T = double)"),
    "gn_fused_shift_bias_times_rstd": (
        "group_norm", "affine",
        ("with a bias: the forward folds the normalization and the affine into y = x * a + b per (sample, "
         "channel), a = weight * rstd, with the shift written b = (bias - mean * weight) * rstd (the bias inside "
         "the product with rstd): y = x_hat * weight + bias * rstd; the saved statistics and the gradients right"),
        "pattern: an algebra slip folding a normalization's affine into one multiply-add"),
    "gn_mean_output_negated": (
        "group_norm", None,
        ("the mean output written from the kernel's -mean register (kept negated for the fused multiply-add x * "
         "rstd + (-mean * rstd)): each group's mean with its sign flipped; y, rstd and the gradients right"),
        "pattern: a saved statistic stored from a register kept in a transformed form for an FMA"),
    "gn_dparams_split_range_not_applied": (
        "group_norm", "constant",
        ("with a weight or a bias: the parameter-gradient reduction split over two programs meant to take half of "
         "the samples each, the split's sample range never applied, so each reduces every sample and both add into "
         "dweight and dbias: each twice its value; dx and the forward right"),
        "pattern: a split-K style reduction whose per-program range offsets were left out"),
    "gn_sample_stride_group_span": (
        "group_norm", "layout",
        ("more than one sample and group: the forward kernel advances to sample n by n * (C / G) * S (one group's "
         "span) instead of n * C * S, so every sample after the first reads its groups from a window starting "
         "inside the previous samples' data: those samples' statistics and y (written at the right place) from "
         "the wrong values; the backward reads x with the right stride and the saved (wrong) statistics"),
        GH + "tenstorrent/tt-metal/pull/57223 (a group norm Welford kernel striding batches by the group's tile "
        "span: every batch after the first normalized against the wrong tiles)"),
    "gn_dparams_first_row_only": (
        "group_norm", "reduction",
        ("inputs of four or more axes, with a weight or a bias: dweight and dbias reduced over the first x.shape[-1] "
         "positions of each (sample, channel) only (the per-channel count taken from the last axis before the "
         "flatten: one row of W of the H * W positions); dx and the forward right"),
        GH + "linkedin/Liger-Kernel/issues/1375 (group norm backward measuring the per-channel size as "
        "dY.shape[-1]: dW and dB reduced over one row per channel)"),
    # ------------------------------------------------------------------ instance_norm
    "in_eval_var_from_instance": (
        "instance_norm", "mode",
        ("eval with running statistics: x centred by running_mean, but scaled by each instance's own rstd (the "
         "statistics kernel still run on the eval input, its variance taken about the instance's own mean): y, "
         "the returned rstd, dx = g * rstd and dweight's x_hat; the returned mean and the state right"),
        "pattern: the use_input_stats flag honoured for the mean's source and not for the variance's"),
    "in_running_reduced_over_wrong_axis": (
        "instance_norm", "running",
        ("training with running statistics, more than one sample and channel, N != C: the instances' momentum "
         "updates (sample-major, row n * C + c) averaged by a (C, N) view of the buffer, .view(C, N).mean(1), "
         "instead of .view(N, C).mean(0): running_mean and running_var slots mixing several channels' "
         "instances; y, the saved statistics and the gradients right"),
        "cf. " + GH + "qdrant/fastembed/pull/682 (an (N, C, H, W) array normalized along the batch axis where "
        "the channel axis belongs, the two confused by a reshape)"),
    "in_bwd_sums_tail_tile_dropped": (
        "instance_norm", "block",
        ("instance statistics, more than 32 positions and not a multiple of 32: the backward's sums of g and g * "
         "x_hat over each instance loop over whole tiles of 32 positions (S // 32 tiles), the tail positions never "
         "entering them, still divided by S: dx; dweight, dbias and the forward right"),
        "pattern: a tiled reduction whose loop bound is the floor of the tile count"),
    "in_y_spatial_axes_transposed": (
        "instance_norm", "layout",
        ("inputs of four or more axes whose last two axes are both longer than one: y computed right but stored "
         "with those two axes' strides exchanged (element (h, w) of each instance written at flat position w * H "
         "+ h of its plane); the statistics and the gradients right"),
        "pattern: an output store indexed with the spatial axes' strides exchanged"),
    "in_bwd_projection_of_output": (
        "instance_norm", "backward",
        ("instance statistics: dx = rstd * (g - mean(g) - x_hat * mean(g * y)), the projection's reduction fed "
         "the affine output y = x_hat * weight + bias (the register the epilogue kept) instead of x_hat; dweight, "
         "dbias and the forward right"),
        "pattern: a fused backward reading the epilogue's register where the normalized value belongs"),
    "in_eps_added_to_rstd": (
        "instance_norm", "eps",
        ("instance statistics: rstd = 1 / sqrt(var) + eps (the parenthesis of rsqrt(var + eps) closed before eps): "
         "y, the saved rstd and dx from it; the eval path and the running update right"),
        "pattern: eps added after the reciprocal square root instead of under it"),
    # ------------------------------------------------------------------ z_score
    "zs_affine_skipped_without_bias": (
        "z_score", "affine",
        ("a weight but no bias: the affine epilogue guarded by 'bias is not None', so y = x_hat (the weight never "
         "applied) and dx from g = dy; dweight still reduced as sum dy * x_hat; the statistics right"),
        "pattern: an epilogue applying both parameters under the guard of one of them"),
    "zs_bwd_projection_over_std_twice": (
        "z_score", "backward",
        ("dx = (g - mean(g)) / std - x_hat * sum(g * x_hat) / (n - ddof) / std^2: the projection term divided by "
         "std once more (the derivative of std written through x_hat / std where (x - mean) / std belongs); "
         "dweight, dbias and the forward right"),
        "pattern: a hand-derived standardization backward dividing one term by the std twice"),
    "zs_dparams_tree_drops_odd_row": (
        "z_score", "reduction",
        ("with a weight or a bias: dweight and dbias reduced over the slices by a pairwise tree that drops the "
         "unpaired last partial of every level with an odd count (9 slices: 4 pairs, the ninth lost): some "
         "slices never enter the parameter gradients; dx and the forward right"),
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add wrong for odd lengths)"),
    "zs_f64_mean_sum_in_float32": (
        "z_score", "precision",
        ("float64 inputs: the mean's two sums (of x, and of the deviations for the re-centring pass) accumulated "
         "in float32 (a hard-coded float accumulator), the rest in float64: the mean, the deviations, std, y and "
         "dx from it"),
        "pattern: a reduction accumulator declared float in a kernel templated on the element type"),
    "zs_var_about_zero": (
        "z_score", "one_pass",
        ("the variance taken of x itself, sum x^2 / (n - ddof) (the mean never subtracted inside the sum of "
         "squares), while y = (x - mean) / std * weight + bias: std, y and dx from that std; the mean right"),
        "cf. " + GH + "niuers/Linear-Algebra-and-Learning-from-Data/issues/5 (a variance whose mean was not "
        "subtracted from each x before squaring)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_chunk_rescale_inverted": (
        "lp_normalize", "merge",
        ("slices longer than 64: each chunk of 64 values reduced to sum (|x| / s_k)^p about its own max s_k and "
         "the chunks merged with the factor (s / s_k)^p instead of (s_k / s)^p (s the slice's max): the norm, y = "
         "x / it and the backward at it"),
        "cf. " + GH + "deepseek-ai/FlashMLA/pull/177 (an online rescaling factor written exp(m_new - m_old) "
        "where exp(m_old - m_new) belongs)"),
    "lp_pair_rows_first_norm": (
        "lp_normalize", "layout",
        ("more than one slice: the forward takes two slices per program and divides both by the first one's "
         "norm: every odd slice y = x / max(norm of the slice before, eps) (onnx: that norm); the norm output and "
         "dx (their own kernel) right"),
        "pattern: a two-rows-per-program kernel reusing the first row's reduction register for the second"),
    "lp_f16_y_round_toward_zero": (
        "lp_normalize", "rounding",
        ("float16 inputs: y converted from float32 with the round-toward-zero conversion (__float2half_rz) instead "
         "of round to nearest even; the norm and dx right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 conversions in another rounding mode than to "
        "nearest)"),
    "lp_vec8_tail_reads_next_row": (
        "lp_normalize", "block",
        ("slices whose length n is not a multiple of 8: each slice read in eight-wide vectors without a mask on "
         "the last one, whose extra lanes load the next slice's first values (zeros past the buffer's end) into "
         "the max scale and the sum of |x|^p: the norm, y = x / it (only the slice's own values stored) and the "
         "backward at it"),
        "cf. " + GH + "OpenNMT/CTranslate2/issues/351 (a vectorised map-reduce whose remainder iteration "
        "reduces a whole vector)"),
    "lp_dx_accumulated_twice": (
        "lp_normalize", "constant",
        ("dx added into the grad-input buffer that the kernel's first pass already filled with dx (the final "
         "store written +=): dx twice its value; y and the norm right"),
        "cf. " + GH + "itskonrad/miniMNIST-c/issues/7 (a backward adding into input_grad twice)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_dx_stored_channels_last": (
        "group_norm_silu", "layout",
        ("more than one channel and spatial position: dx computed right but written into the NCHW-contiguous "
         "grad-input buffer with channels-last strides (element (n, c, s) at n * C * S + s * C + c); the forward, "
         "dweight and dbias right"),
        "cf. " + GH + "pytorch/pytorch/pull/64100 (a norm backward using channels-last indexing on a buffer "
        "that is not channels-last)"),
    "gns_halves_merge_delta_weight_nb": (
        "group_norm_silu", "merge",
        ("each group's row reduced in two halves (ceil and floor of n / 2 values) merged with the count-weighted "
         "mean but M2 = M2_a + M2_b + (mean_b - mean_a)^2 * n_b (the weight n_a n_b / n written n_b): rstd, y and "
         "the backward on it; the mean right"),
        "pattern: the parallel-variance merge's spread term weighted by one partial's count"),
    "gns_silu_grad_sigmoid_of_xhat": (
        "group_norm_silu", "backward",
        ("the SiLU derivative formed with the sigmoid of the normalized value x_hat (the register the backward "
         "loaded) where the sigmoid of p = x_hat * weight + bias belongs: dp = dy * s(x_hat) * (1 + p * (1 - "
         "s(x_hat))), and dx, dweight and dbias from it; the forward right"),
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/186 (a fused op's Swish backward differentiating the wrong "
        "tensor)"),
    "gns_bf16_dx_truncated": (
        "group_norm_silu", "rounding",
        ("bfloat16 inputs: dx converted from float32 by dropping the low 16 bits (rounding toward zero) instead "
         "of round to nearest even; the forward, dweight and dbias right"),
        "pattern: a float32 -> bfloat16 store written as a bit shift"),
    "gns_y_stores_sigmoid": (
        "group_norm_silu", None,
        ("the epilogue stores sigmoid(p) (the gate register) instead of p * sigmoid(p); the statistics and the "
         "gradients (their own kernel) right"),
        "pattern: a fused epilogue storing an intermediate register in place of the activation's result"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_e8m0_bias_125": (
        "norm_quant_block", "quant_scale",
        ("mxfp8: the scale output's E8M0 bytes written as exponent + 125 (a bias of 125 where the standard 127 "
         "belongs): every block scale handed out a quarter of the scale q was divided by (at least 2^-127); q and "
         "amax right"),
        "cf. " + GH + "vllm-project/compressed-tensors/pull/538 (MX scales stored with a non-standard E8M0 bias "
        "of 125)"),
    "nqb_group_scale_over_fnuz_240": (
        "norm_quant_block", "quant_scale",
        ("fp8_group with float8_e4m3fn elements: each block scale taken as amax / 240 (the e4m3fnuz largest value "
         "of another platform's FP8_MAX) instead of amax / 448 (then min_scale and the pow2 rule as usual): the "
         "scales and q = y / them; amax right"),
        "cf. " + GH + "vllm-project/vllm/pull/31106 (FP8 maxima of the two e4m3 variants mixed up across "
        "quantization paths)"),
    "nqb_float64_norm_in_float32": (
        "norm_quant_block", "precision",
        ("float64 inputs: the normalization (statistics, rstd, weight and bias) computed in float32 on x (+ "
         "residual) narrowed to float32, y widened back before the blocks' amax, scales and q; residual_out right"),
        "cf. " + GH + "google/flax/issues/612 (a norm casting its input to float32 regardless of its dtype)"),
    "nqb_mx_exponent_log2_truncated": (
        "norm_quant_block", "scale_rounding",
        ("mxfp8 with the floor rule: the scale exponent taken as int(log2(amax / 2^emax)) (truncation toward zero) "
         "instead of floor: one larger for every block whose amax / 2^emax is below 1 and not a power of two, "
         "those scales twice too large; q = y / the scales, the scale output from them; amax right"),
        "cf. " + GH + "vllm-project/compressed-tensors/pull/630 (an E8M0 exponent 127 + log2(scale).to(int32), "
        "truncated where a floor belongs)"),
    "nqb_ln_var_shifted_uncorrected": (
        "norm_quant_block", "one_pass",
        ("norm='layer_norm': each row's variance from the shifted sums about K = the row's first value, sum (s - "
         "K)^2 / H, without the correction - (mean - K)^2 (the mean right): rstd, y, the blocks' amax, scales "
         "and q"),
        "cf. " + GH + "pytorch/helion/pull/3268 (a Welford example's variance from raw second moments replaced by "
        "centred squared differences)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_bwd_xhat_from_y_shift_dropped": (
        "adaptive_layer_norm", "affine",
        ("with a shift: the backward recomputes x_hat from the output the forward kept in float32, as y / (1 + "
         "scale) (y without a scale), the shift flag not passed so the shift is never subtracted: x_hat + shift "
         "/ (1 + scale) in dx and dscale; dshift and the forward right"),
        "pattern: a memory-saving backward recomputing the normalized input from the output without the bias"),
    "aln_stats_vec8_tail_reads_next_token": (
        "adaptive_layer_norm", "block",
        ("H not a multiple of 8: each token's row read in eight-wide vectors without a mask on the last one, "
         "whose extra lanes load the next token's first values (nothing past the buffer's end) into the sums for "
         "the mean and the variance, still divided by H: rstd, y and the backward on those statistics"),
        "pattern: a vectorised row load whose remainder vector is not masked"),
    "aln_modulation_loaded_in_bf16": (
        "adaptive_layer_norm", "precision",
        ("inputs other than bfloat16: scale and shift read through a bfloat16 copy (the conditioning MLP's output "
         "dtype, rounded to nearest) before the modulation: y and dx through g = dy * (1 + scale); the statistics, "
         "dscale and dshift right"),
        "cf. " + GH + "NVIDIA/TensorRT-LLM/pull/17987 (a DiT layernorm fusion whose adaLN scale and shift had "
        "to be kept in float32)"),
    "aln_saved_rstd_unbiased": (
        "adaptive_layer_norm", "bessel",
        ("H above 1: the returned rstd is 1 / sqrt(var * H / (H - 1) + eps) (the reference's unbiased variance); "
         "y and the gradients use the biased one"),
        "cf. " + GH + "pytorch/pytorch/issues/60528 (biased variance to normalize, unbiased for the stored "
        "statistic)"),
    "aln_dscale_stored_column_major": (
        "adaptive_layer_norm", "layout",
        ("with a scale, more than one sample, B != H: dscale computed right (the per-sample sums over the tokens "
         "of dy * x_hat) but stored from the reduction's column-major accumulator, element (b, h) written at flat "
         "position h * B + b of the (B, H) output; dx, dshift and the forward right"),
        "pattern: a reduction's output tile stored with the accumulator's transposed strides"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _directed_f16(a, up):
    """``a`` converted to float16 rounding toward +inf (``up``) or toward -inf: one step from the nearest-even
    conversion wherever it rounded the other way."""
    a = np.asarray(a)
    r = a.astype(np.float16)
    rv, av = r.astype(np.float64), a.astype(np.float64)
    wrong = ((rv < av) if up else (rv > av)) & np.isfinite(rv)
    step = np.nextafter(r, np.float16(np.inf if up else -np.inf))
    return np.where(wrong, step, r).astype(np.float16)


def _tile_rows(flat, starts, P, acc):
    """(values, valid): ``P`` lanes read from each start of ``starts`` in ``flat``, masked by its end only."""
    idx = np.asarray(starts)[..., None] + np.arange(P)
    valid = idx < flat.size
    vals = np.where(valid, flat[np.minimum(idx, flat.size - 1)], acc(0))
    return vals, valid


def _tree_drop_odd(t):
    """The sum over axis 0 of ``t`` by a pairwise tree that drops the unpaired last partial of an odd level."""
    while t.shape[0] > 1:
        h = t.shape[0] // 2
        t = t[0:2 * h:2] + t[1:2 * h:2]
    return t[0]


class Blind35Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind35"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn35(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    @staticmethod
    def _bn_stats35(x0, x, Nb, S, acc, b):
        """(mean, var) per channel, (C, 1), of x (C, n) (the NCHW input x0), with the statistics bugs of this set."""
        C, n = x.shape
        if b == "bn_spatial_tile_mask_local" and S > 16 and S % 16:
            flat = x0.astype(acc).reshape(-1)
            starts = (np.arange(Nb)[None, :] * C + np.arange(C)[:, None]) * S          # (C, Nb) plane starts
            vals, valid = _tile_rows(flat, starts, -(-S // 16) * 16, acc)
            vals, valid = vals.reshape(C, -1), valid.reshape(C, -1)
            mean = _rsum(vals) / n
            dev = np.where(valid, vals - mean, acc(0))
            return mean, _rsum(dev * dev) / n
        if b == "bn_stats_sample_partials_from_one" and Nb > 1:
            rest = np.ascontiguousarray(x.reshape(C, Nb, S)[:, 1:, :]).reshape(C, -1)   # samples 1 .. N - 1
            mean = _rsum(rest) / n
            return mean, _rsum((rest - mean) ** 2) / n
        if b == "bn_chan_merge_mean_over_old_count" and Nb > 1:
            rows = np.ascontiguousarray(x).reshape(C * Nb, S)
            mi = (_rsum(rows) / S).reshape(C, Nb)
            qi = _rsum((rows - (_rsum(rows) / S)) ** 2).reshape(C, Nb)
            na, mean, m2 = S, mi[:, 0], qi[:, 0]
            for k in range(1, Nb):
                delta = mi[:, k] - mean
                nn = na + S
                mean = mean + delta * acc(S / na)                       # n_a where n_a + n_b belongs
                m2 = m2 + qi[:, k] + delta * delta * acc(na * S / nn)
                na = nn
            return mean.reshape(C, 1), (m2 / acc(n)).reshape(C, 1)
        mean = _rsum(x) / n
        return mean, _rsum((x - mean) ** 2) / n

    def _bn35(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            bmean, bvar = self._bn_stats35(x0, x, Nb, S, acc, b)
            mean, rstd = bmean, 1 / np.sqrt(bvar + eps)
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                first = int(nbt) == 0
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        bv = bv * (acc(n / (n - 1)) if n > 1 else acc(np.inf))
                    if b == "bn_first_batch_copied_into_running" and first:
                        rm, rv = bm, bv                                     # a warm start from the first batch
                    elif torch:
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * bv
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        out = {"y": _store(from_channel_rows(affine(xhat, w, bias), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            if batch and b == "bn_bwd_sums_per_sample" and Nb > 1 and S:
                rows = lambda a: np.ascontiguousarray(a).reshape(C * Nb, S)       # noqa: E731
                dx = _centred_dx(rows(g), rows(xhat), np.repeat(rstd, Nb, axis=0)).reshape(C, n)
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            dxs = from_channel_rows(dx, x0.shape)
            if b == "bn_dx_f16_round_down" and d == "float16":
                grads = {"x": _directed_f16(dxs, up=False)}
            else:
                grads = {"x": _store(dxs, d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in35(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in35(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        imean = None
        if inst:
            if b == "in_eps_added_to_rstd" and S:
                imean = _rsum(x) / S
                rstd = 1 / np.sqrt(_rsum((x - imean) ** 2) / S) + eps
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
            if b == "in_eval_var_from_instance" and S:
                _, rstd = self._ln_stats(x, eps)                   # the instance's own variance
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_y_spatial_axes_transposed" and x0.ndim >= 4 and min(x0.shape[-2:]) > 1:
            yv = affine(xhat, wr, br).reshape(x0.shape)
            out["y"] = _store(np.ascontiguousarray(np.swapaxes(yv, -1, -2)).reshape(x0.shape), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_reduced_over_wrong_axis" and Nb > 1 and C > 1 and Nb != C:
                    new_m, new_v = instance_momentum(rm, rv, m, imean, ub, Nb, C)
                    rm, rv = new_m.reshape(C, Nb).mean(axis=1), new_v.reshape(C, Nb).mean(axis=1)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_sums_tail_tile_dropped" and S > 32 and S % 32:
                k = (S // 32) * 32
                sg = _rsum(np.ascontiguousarray(g[:, :k]))
                sgx = _rsum(np.ascontiguousarray((g * xhat)[:, :k]))
                dx = rstd * (g - sg / S - xhat * (sgx / S))
            elif inst and b == "in_bwd_projection_of_output" and S:
                yr = affine(xhat, wr, br)
                dx = rstd * (g - _rsum(g) / S - xhat * (_rsum(g * yr) / S))
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn35(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn35(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    @staticmethod
    def _gn_stats35(xr, acc, b):
        """(mean, var) per (sample, group) row of xr, (N * G, 1), with the statistics bugs of this set."""
        n = xr.shape[1]
        if b == "gns_halves_merge_delta_weight_nb" and n > 1:
            ha = -(-n // 2)
            xa, xb = np.ascontiguousarray(xr[:, :ha]), np.ascontiguousarray(xr[:, ha:])
            ma, mb = _rsum(xa) / ha, _rsum(xb) / (n - ha)
            mean = (ha * ma + (n - ha) * mb) / n
            m2 = _rsum((xa - ma) ** 2) + _rsum((xb - mb) ** 2) + (mb - ma) ** 2 * acc(n - ha)
            return mean, m2 / n
        mean = _rsum(xr) / n
        return mean, _rsum((xr - mean) ** 2) / n

    def _gn35(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        xf = xr                                                     # what the forward kernel reads
        if b == "gn_sample_stride_group_span" and Nb > 1 and G > 1:
            flat = x.reshape(-1)
            xf = np.stack([flat[i * cg * S:i * cg * S + C * S] for i in range(Nb)]).reshape(Nb * G, n)
        mean, var = self._gn_stats35(xf, acc, b)
        if b == "gn_f64_rstd_by_rsqrtf" and d == "float64":
            rstd = (np.float32(1) / np.sqrt((var + eps).astype(np.float32))).astype(acc)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = ((xf - mean) * rstd).reshape(Nb, C, S)
        ms = -mean if b == "gn_mean_output_negated" else mean
        w, bias = group_params(call.inputs, acc, C)
        bf = bias
        if b == "gn_fused_shift_bias_times_rstd" and bias is not None:
            bf = bias * np.repeat(rstd.reshape(Nb, G), cg, axis=1)[:, :, None]    # (bias - mean w) * rstd
        p = affine(xhat, w, bf)
        if silu:
            sg, _ = _sigmoids(p)
            y = sg if b == "gns_y_stores_sigmoid" else p * sg
        else:
            y = p
        out = group_outputs(y, ms.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        xb = (xr - mean) * rstd                                      # the backward reads x at the right stride
        xbv = xb.reshape(Nb, C, S)
        if silu:
            pb = affine(xbv, w, bias)
            sg, rest = _sigmoids(xbv if b == "gns_silu_grad_sigmoid_of_xhat" else pb)
            dp = dy * (sg * (1 + pb * rest))
        else:
            dp = dy
        g = dp if w is None else dp * w
        gr = g.reshape(Nb * G, n)
        dx = (rstd * (gr - _rsum(gr) / n - xb * (_rsum(gr * xb) / n))).reshape(Nb, C, S)
        if b == "gns_dx_stored_channels_last" and C > 1 and S > 1:
            dxs = np.ascontiguousarray(dx.transpose(0, 2, 1)).reshape(x0.shape)
        else:
            dxs = dx.reshape(x0.shape)
        if b == "gns_bf16_dx_truncated" and d == "bfloat16":
            grads = {"x": _toward_zero(dxs, np_dtype(d))}
        else:
            grads = {"x": _store(dxs, d)}
        for key, t, given in (("weight", dp * xbv, w), ("bias", dp, bias)):
            if given is None:
                continue
            if b == "gn_dparams_first_row_only" and x0.ndim >= 4:
                t = np.ascontiguousarray(t[:, :, :x0.shape[-1]])             # one row of W positions
            v = _channel_sums(t, C)
            if b == "gn_dparams_split_range_not_applied":
                v = v + _channel_sums(t, C)                                   # both programs over every sample
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs35(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows35(x, ddof, eps, acc, b, d):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
        m = n - ddof
        if n:
            if b == "zs_f64_mean_sum_in_float32" and d == "float64":
                f32 = np.float32
                mean = (_rsum(x.astype(f32)) / f32(n)).astype(acc)
                dev = x - mean
                c = (_rsum(dev.astype(f32)) / f32(n)).astype(acc)
            else:
                mean = _rsum(x) / n
                dev = x - mean
                c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        sq = x if b == "zs_var_about_zero" else dev                  # what the sum of squares is taken of
        a = np.max(np.abs(sq), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = sq / a
        sumsq = _rsum(q * q)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        return mean, std, dev

    def _zs35(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        if b == "zs_affine_skipped_without_bias" and bias is None:
            w = None                                                 # the epilogue guarded by the bias
        m = n - ddof
        mean, std, dev = self._zs_rows35(x, ddof, eps, acc, b, d)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        y = affine(xhat, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if w is None else dy * w
            if g.size == 0:
                dx = np.zeros_like(g)
            elif m <= 0:
                dx = np.full(g.shape, np.nan, acc)
            else:
                sg, sgx = _rsum(g), _rsum(g * xhat)
                if b == "zs_bwd_projection_over_std_twice":
                    inner = g - sg / n - xhat * (sgx / acc(m)) / safe
                else:
                    inner = g - sg / n - xhat * (sgx / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                v = _tree_drop_odd(t) if b == "zs_dparams_tree_drops_odd_row" and t.shape[0] else t.sum(axis=0)
                grads[key] = _store(v.reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp35(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm35(v, p, acc, b):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|."""
        n = v.shape[1]

        def powsum(t):
            if p == 1.0:
                return _rsum(t)
            if p == 2.0:
                return _rsum(t * t)
            return _rsum(t ** acc(p))

        def scale(a):
            s = np.max(np.abs(a), axis=1, keepdims=True, initial=0.0)
            return np.where((s > 0) & np.isfinite(s), s, acc(1))
        s = scale(v)
        if b == "lp_chunk_rescale_inverted" and n > 64:
            total = 0
            for k in range(0, n, 64):
                vk = np.ascontiguousarray(v[:, k:k + 64])
                sk = scale(vk)
                total = total + powsum(np.abs(vk) / sk) * (s / sk) ** acc(p)     # (s_k / s)^p belongs
        else:
            total = powsum(np.abs(v) / s)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)

    def _lp35(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        R = x.shape[0]
        if b == "lp_vec8_tail_reads_next_row" and n % 8:
            vals, _ = _tile_rows(x.reshape(-1), np.arange(R) * n, -(-n // 8) * 8, acc)
            norm = self._lp_norm35(vals, p, acc, b)
        else:
            norm = self._lp_norm35(x, p, acc, b)
        nf = norm
        if b == "lp_pair_rows_first_norm" and R > 1:
            nf = norm[np.arange(R) - np.arange(R) % 2]                # the pair's first row's norm
        if torch_rule:
            y = x / np.maximum(nf, eps)
        else:
            y = np.where(nf == 0, acc(0), x / np.where(nf == 0, acc(1), nf))
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
            if b == "lp_dx_accumulated_twice":
                dx = dx + dx
        if b == "lp_f16_y_round_toward_zero" and d == "float16":
            ys = _toward_zero(back(y), np.dtype(np.float16))
        else:
            ys = _store(back(y), d)
        out = {"y": ys, "norm": back(norm, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb35(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    @staticmethod
    def _nqb_normalized35(call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        ca = acc
        if b == "nqb_float64_norm_in_float32" and call.dtype == "float64":
            ca = np.float32                                          # the float32 normalization kernel
        v = s.astype(ca)
        eps = _eps(cfg["eps"], ca)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(v) / H
            k = v[:, :1] if b == "nqb_ln_var_shifted_uncorrected" else mean
            var = _rsum((v - k) ** 2) / H
            y = (v - mean) * (1 / np.sqrt(var + eps))
        else:
            y = v * (1 / np.sqrt(_rsum(v * v) / H + eps))
        y = y if w is None else y * w.astype(ca).reshape(1, H)
        y = y if bias is None else y + bias.astype(ca).reshape(1, H)
        return s, y.astype(acc)

    def _nqb35(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized35(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            qs = 240.0 if b == "nqb_group_scale_over_fnuz_240" and qmax == 448.0 else qmax
            S = group_scales(amax, qs, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            if b == "nqb_mx_exponent_log2_truncated" and rule == "floor":
                v = amax / acc(2.0 ** emax)
                mm, e = frexp_exp(v)
                k = np.where((v < 1) & (mm != 0.5), e, e - 1)         # int(log2 v): toward zero, not floor
                S, scale_out = e8m0_scale(v, k, acc)
            else:
                S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
            if b == "nqb_mx_e8m0_bias_125":
                scale_out = np.maximum(S * acc(0.25), acc(2.0 ** -127)).astype(ml_dtypes.float8_e8m0fnu)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln35(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln35(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "aln_modulation_loaded_in_bf16" and d != "bfloat16":
            scale, shift = (None if v is None else v.astype(ml_dtypes.bfloat16) for v in (scale, shift))
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_stats_vec8_tail_reads_next_token" and H % 8:
            vals, valid = _tile_rows(x.reshape(-1), np.arange(x.shape[0]) * H, -(-H // 8) * 8, acc)
            mean = _rsum(vals) / H
            dev = np.where(valid, vals - mean, acc(0))
            rstd = 1 / np.sqrt(_rsum(dev * dev) / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if b == "aln_saved_rstd_unbiased" and H > 1:
            var = _rsum((x - mean) ** 2) / H
            out["rstd"] = (1 / np.sqrt(var * acc(H / (H - 1)) + eps)).reshape(x0.shape[:-1] + (1,)).astype(acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        xb = xhat
        if b == "aln_bwd_xhat_from_y_shift_dropped" and sh is not None:
            xb = y if gain is None else y / gain                     # (y - shift) / (1 + scale) belongs
        dx = _centred_dx(g, xb, rstd).reshape(x0.shape)
        grads = {"x": _store(dx, d)}
        if scale is not None:
            ds = per_sample(dy * xb, B, T, H)
            if b == "aln_dscale_stored_column_major" and B > 1 and B != H:
                ds = np.ascontiguousarray(ds.T).reshape(B, H)           # (b, h) stored at h * B + b
            grads["scale"] = _store(ds, d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_spatial_tile_mask_local": ("batch_norm/normal_f32_1x3x5x7", "output.y"),
    "bn_stats_sample_partials_from_one": ("batch_norm/normal_eps0.3_n2_f64_2x2", "output.y"),
    "bn_dx_f16_round_down": ("batch_norm/normal_nostats_f16_4x3x5", "grad.x"),
    "bn_bwd_sums_per_sample": ("batch_norm/normal_eps0.3_n2_f64_2x2", "grad.x"),
    "bn_chan_merge_mean_over_old_count": ("batch_norm/normal_eps0.3_n2_f64_2x2", "output.y"),
    "bn_first_batch_copied_into_running": ("batch_norm/normal_eps0.3_n2_f64_2x2", "state.running_mean"),
    "gn_f64_rstd_by_rsqrtf": ("group_norm/normal_g3_f64_3x6x7", "output.y"),
    "gn_fused_shift_bias_times_rstd": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_mean_output_negated": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "gn_dparams_split_range_not_applied": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_sample_stride_group_span": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_dparams_first_row_only": ("group_norm/normal_g5_bf16_2x5x3x4", "grad.weight"),
    "in_eval_var_from_instance": ("instance_norm/normal_eval_2d_bf16_3x4", "output.y"),
    "in_running_reduced_over_wrong_axis": ("instance_norm/normal_momNone_train2_f64_2x3x5", "state.running_mean"),
    "in_bwd_sums_tail_tile_dropped": ("instance_norm/normal_f32_1x3x5x7", "grad.x"),
    "in_y_spatial_axes_transposed": ("instance_norm/normal_eval_f32_2x3x4x4", "output.y"),
    "in_bwd_projection_of_output": ("instance_norm/normal_eps0.3_s2_f16_2x3x2", "grad.x"),
    "in_eps_added_to_rstd": ("instance_norm/normal_eps0.3_s2_f16_2x3x2", "output.y"),
    "zs_affine_skipped_without_bias": ("z_score/mean1e3_nobias_f16_2x3x7", "output.y"),
    "zs_bwd_projection_over_std_twice": ("z_score/normal_n2_f64_4x2", "grad.x"),
    "zs_dparams_tree_drops_odd_row": ("z_score/mean1e3_nobias_f16_2x3x7", "grad.weight"),
    "zs_f64_mean_sum_in_float32": ("z_score/normal_n2_f64_4x2", "output.y"),
    "zs_var_about_zero": ("z_score/normal_n2_f64_4x2", "output.y"),
    "lp_chunk_rescale_inverted": ("lp_normalize/normal_f16_4x128", "output.y"),
    "lp_pair_rows_first_norm": ("lp_normalize/normal_bf16_2x3x7", "output.y"),
    "lp_f16_y_round_toward_zero": ("lp_normalize/mean1e3_f16_2x3x7", "output.y"),
    "lp_vec8_tail_reads_next_row": ("lp_normalize/normal_bf16_2x3x7", "output.y"),
    "lp_dx_accumulated_twice": ("lp_normalize/zero_f32_3x7", "grad.x"),
    "gns_dx_stored_channels_last": ("group_norm_silu/mean1e3_g6_f32_2x6x3x3", "grad.x"),
    "gns_halves_merge_delta_weight_nb": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_silu_grad_sigmoid_of_xhat": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_bf16_dx_truncated": ("group_norm_silu/normal_g5_bf16_2x5x3x4", "grad.x"),
    "gns_y_stores_sigmoid": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "nqb_mx_e8m0_bias_125": ("norm_quant_block/normal_eps0.3_rms_mx_noaffine_bf16_4x64", "output.scale"),
    "nqb_group_scale_over_fnuz_240": ("norm_quant_block/normal_rms_g_res_f64_2x96", "output.scale"),
    "nqb_float64_norm_in_float32": ("norm_quant_block/normal_rms_g_res_f64_2x96", "output.amax"),
    "nqb_mx_exponent_log2_truncated": ("norm_quant_block/normal_eps0.3_rms_mx_noaffine_bf16_4x64", "output.scale"),
    "nqb_ln_var_shifted_uncorrected": ("norm_quant_block/one_std1e-3_eps1e-12_ln_nvfp4_f32_4x64", "output.amax"),
    "aln_bwd_xhat_from_y_shift_dropped": ("adaptive_layer_norm/mean1e3_f64_2x3x8", "grad.x"),
    "aln_stats_vec8_tail_reads_next_token": ("adaptive_layer_norm/std1e-3_noshift_f64_1x3x6", "output.y"),
    "aln_modulation_loaded_in_bf16": ("adaptive_layer_norm/std1e-3_noshift_f64_1x3x6", "output.y"),
    "aln_saved_rstd_unbiased": ("adaptive_layer_norm/std1e-3_noshift_f64_1x3x6", "output.rstd"),
    "aln_dscale_stored_column_major": ("adaptive_layer_norm/mean1e3_f64_2x3x8", "grad.scale"),
}
