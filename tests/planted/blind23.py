"""A twenty-third held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind23Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn23``, ``_in23``, ``_gn23`` for group_norm and
group_norm_silu, ``_zs23``, ``_lp23``, ``_nqb23``, ``_aln23``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind23Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind21.py (the same mistake on the same op; the twenty-second set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, bn_momentum, centred_dx as _centred_dx,
                          channel_params, channel_rows, channel_running_stats, channel_sums, dy_and_g,
                          eps_value as _eps, from_channel_rows, group_outputs, group_params, group_rows,
                          group_scales, half as _half, instance_momentum_value, instance_outputs,
                          instance_params, instance_running_stats, instance_running_update,
                          instance_unbiased_var, mx_scales, nan_running, norm_outputs, nqb_format,
                          nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_sample,
                          np_dtype, rsum as _rsum, running_in, running_setup, running_state,
                          sigmoids as _sigmoids, store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind23Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_dweight_from_uncentred_x": (
        "batch_norm", "backward",
        "batch statistics: the backward-reduce kernel forms dweight = rstd * sum(dy * x) (x loaded where the "
        "centred x - mean belongs) instead of sum(dy * (x - mean) * rstd); dx, dbias and the forward right",
        "pattern: a saved statistic left out of a recomputed x_hat in the parameter-gradient pass"),
    "bn_bwd_dy_read_channels_last": (
        "batch_norm", "layout",
        "more than one channel and spatial position: the backward kernels read the contiguous (N, C, *) dy "
        "buffer with channels-last strides (element (n, c, s) taken from flat position (n * S + s) * C + c): "
        "dx, dweight and dbias; the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (BatchNorm2d wrong for a channels-last tensor: its strides "
        "misread)"),
    "bn_eps_added_in_var_and_rsqrt": (
        "batch_norm", "eps",
        "batch statistics: the statistics kernel hands over var + eps and the normalize kernel adds eps again: "
        "rstd = 1 / sqrt(var + 2 eps), y, the saved rstd and dx from it; the running update (the plain "
        "variance) right",
        "pattern: eps added by two cooperating kernels each assuming the other leaves it out"),
    "bn_count_padded_to_spatial_tile": (
        "batch_norm", "block",
        "batch statistics on inputs whose spatial size is not a multiple of 32: the per-channel sums (padded "
        "lanes masked to 0) divided by N times the spatial size rounded up to the 32-wide tile instead of N "
        "times the spatial size: the mean and the variance, y, the saved statistics, dx and the running update",
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (a norm's statistics over tile-padded rows)"),
    "bn_saved_mean_rstd_swapped": (
        "batch_norm", None,
        "batch statistics: the kernel's two saved-statistics pointers exchanged at the store: the mean output "
        "holds rstd and the rstd output the mean; y, the gradients and the running state right",
        "pattern: two output pointers of the same shape passed in the wrong order"),
    "bn_bf16_y_truncated": (
        "batch_norm", "rounding",
        "bfloat16 inputs: y converted from float32 to bfloat16 by dropping the low 16 bits (rounding toward "
        "zero) instead of round to nearest even; the statistics and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
    "bn_dparams_second_program_offset_missing": (
        "batch_norm", "reduction",
        "more than one sample: the parameter-gradient reduction splits the samples between two programs "
        "(the first ceil(N / 2) and the rest) whose second program starts at sample 0 (its offset never "
        "added): the first samples counted twice, the last never, in dweight and dbias; dx and the forward "
        "right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel wrong once a program covers more than "
        "one row block)"),
    "bn_var_shifted_by_first_value_uncorrected": (
        "batch_norm", "one_pass",
        "batch statistics: each channel's variance from the shifted-data sums about K = the channel's first "
        "value, mean((x - K)^2) without the correction - (mean - K)^2: rstd, y, dx and the running variance",
        "pattern: the shifted-data variance algorithm with its correction term left out"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_var_blended_with_running_mean": (
        "instance_norm", "running",
        "training with running statistics: the running_var update reads the old running_mean buffer as the "
        "value to keep: running_var = (1 - m) * running_mean + m * var_unbiased (averaged over the batch); "
        "running_mean, y and the gradients right",
        "pattern: a buffer pointer copied from the line above in a pair of momentum updates"),
    "in_5d_stats_per_depth_slice": (
        "instance_norm", "group",
        "inputs of five axes (N, C, D, H, W): the 2-D kernel's view (N, C * D, H, W) normalizes each depth "
        "slice with its own mean and rstd (the returned statistics the last slice's); y, dx and dweight from "
        "them",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/1375 (a group norm measuring the per-channel size from the "
        "last axis only for inputs of more than three axes)"),
    "in_bwd_mean_g_term_dropped": (
        "instance_norm", "backward",
        "instance statistics: dx = rstd * (g - x_hat * mean(g * x_hat)) (the rms-norm backward's formula, the "
        "mean(g) term left out); dweight, dbias and the forward right",
        "pattern: a backward formula copied from the uncentred normalization"),
    "in_xhat_rounded_before_affine": (
        "instance_norm", "precision",
        "16-bit inputs: the normalize kernel stores x_hat in the input dtype and the affine kernel computes "
        "y = x_hat * weight + bias from that rounded x_hat; the statistics and the gradients right",
        "cf. " + GH + "huggingface/transformers/pull/29402 (x_hat cast to half before the weight in one model, "
        "after it in another)"),
    "in_bias_skipped_without_weight": (
        "instance_norm", "affine",
        "a bias without a weight: the affine epilogue guarded by 'weight is not None' alone, so y = x_hat (the "
        "bias never added); the bias gradient and dx right",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a fused norm assuming its two affine inputs come in "
        "pairs)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_c3_db_term_without_count": (
        "group_norm", "backward",
        "backward in the ds / db form (c2 = (db * mean - ds) * rstd^3 / n, c3 = -c2 * mean - db * rstd / n, "
        "dx = rstd * g + c2 * x + c3) with c3's db term not divided by the group's count n; dweight, dbias "
        "and the forward right",
        "cf. " + GH + "uxlfoundation/oneDNN/issues/3543 (a group normalization backward whose diff_src is "
        "wrong while the forward is right)"),
    "gn_eps_added_to_sum_of_squares": (
        "group_norm", "eps",
        "eps added to each group's sum of squared deviations before the division by its count: rstd = 1 / "
        "sqrt((sum (x - mean)^2 + eps) / n), y, the saved rstd and dx from it",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/317 (a norm kernel's eps grouped at the wrong place of its "
        "rsqrt expression)"),
    "gn_chunk_stats_merged_equal_counts": (
        "group_norm", "merge",
        "groups of more than 64 values, not a multiple of 64: each group reduced in chunks of 64 whose means "
        "and M2 are merged as if every chunk held 64 values (the short last chunk weighted like the others): "
        "the mean, the variance about it, y, the saved statistics and dx",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count Welford merge, valid only when every "
        "partial has the same count)"),
    "gn_rstd_output_holds_var": (
        "group_norm", None,
        "the rstd output written from the variance register (each group's biased variance) instead of its "
        "rstd; y, the mean output and the gradients right",
        "pattern: an output written from an intermediate register of the statistic's finalization"),
    "gn_bwd_c2_over_n_minus_1": (
        "group_norm", "bessel",
        "backward in the ds / db form with c2 = (db * mean - ds) * rstd^3 / (n - 1) (and c3 from it), the "
        "group's count taken unbiased; dweight, dbias and the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a group normalization written with an unbiased count "
        "disagreeing with nn.GroupNorm)"),
    "gn_affine_epilogue_in_input_dtype": (
        "group_norm", "precision",
        "16-bit inputs with a weight and a bias: the unfused epilogue computes in the input dtype, x_hat "
        "rounded, its product with the weight rounded, then the bias added and rounded; the statistics and the "
        "gradients right",
        "cf. " + GH + "NVIDIA/TensorRT-LLM/pull/17987 (a norm fusion's affine math moved to FP32)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_bwd_rstd_without_eps": (
        "group_norm_silu", "eps",
        "the backward recomputes each group's rstd from x as 1 / sqrt(var) (eps left out of its copy of the "
        "formula): x_hat, the SiLU derivative's input, dx and dweight from it; the forward right",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a normalization whose eps never reached the kernel: "
        "1 / sqrt(var))"),
    "gns_group_row_tail_tile_dropped": (
        "group_norm_silu", "block",
        "groups of more than 1024 values, not a multiple of 1024: the statistics loop over tiles of 1024 "
        "stops at n // 1024 tiles (the tail tile never loaded) while the sums are divided by n: the mean, the "
        "variance, y and the backward",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "gns_dparams_divided_by_batch": (
        "group_norm_silu", "reduction",
        "dweight and dbias divided by the number of samples (averaged over the batch where a sum belongs); dx "
        "and the forward right",
        "cf. " + GH + "deeplearning4j/deeplearning4j/pull/366 (bias gradients taken as a mean over the batch "
        "where a sum belongs)"),
    "gns_bwd_proj_sums_without_silu_grad": (
        "group_norm_silu", "backward",
        "the backward's group reductions mean(g) and mean(g * x_hat) formed from g = dy * weight (the SiLU "
        "derivative left out of the reduction pass) while the elementwise term uses dp * weight; dweight, "
        "dbias and the forward right",
        "pattern: a backward's reduction pass and elementwise pass written from different intermediates"),
    "gns_mean_output_is_group_sum": (
        "group_norm_silu", None,
        "the mean output written from the accumulator before the division by the group's count (each group's "
        "sum); y, rstd and the gradients right",
        "pattern: a statistic stored from its accumulator before finalization"),
    "gns_f16_y_round_toward_zero": (
        "group_norm_silu", "rounding",
        "float16 inputs: y converted to float16 by a round-toward-zero conversion (__float2half_rz) instead of "
        "round to nearest even; the statistics and the gradients right",
        "cf. " + GH + "NVlabs/cutile-rs/issues/250 (an encoder truncating the mantissa instead of rounding to "
        "nearest even)"),
    # ------------------------------------------------------------------ z_score
    "zs_stats_stored_outer_axis_fastest": (
        "z_score", "layout",
        "statistics with two or more kept axes longer than one: the mean and std buffers written with the "
        "outer kept axis varying fastest (element (i, j) stored at j * I + i); y and dx right",
        "cf. " + GH + "ROCm/aiter/pull/4506 (a buffer written column-major and read row-major)"),
    "zs_block_means_averaged_unweighted": (
        "z_score", "merge",
        "slices longer than 256, not a multiple of 256: the slice's mean the plain average of its 256-wide "
        "blocks' means (the short last block weighted like the others), the deviations and the std about that "
        "mean, without the re-centring pass: the mean and std outputs, y and dx",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (partials merged as if every one had the same count)"),
    "zs_bias_added_before_weight": (
        "z_score", "affine",
        "with a weight and a bias: y = (x_hat + bias) * weight, and its gradients dweight = sum dy * (x_hat + "
        "bias), dbias = sum dy * weight; dx and the statistics right",
        "cf. " + GH + "apple/coremltools/issues/1639 ('(value * scale) + bias or (value + bias) * scale?')"),
    "zs_bwd_projection_sign_flipped": (
        "z_score", "backward",
        "dx = (g - mean(g) + x_hat * sum(g * x_hat) / (n - ddof)) / std (the projection term added instead of "
        "subtracted); dweight, dbias and the forward right",
        "pattern: a sign slip in a hand-derived backward"),
    "zs_mean_std_outputs_swapped": (
        "z_score", None,
        "the mean and std outputs written to each other's buffers; y and the gradients right",
        "pattern: two output pointers of the same shape passed in the wrong order"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_divided_by_norm_twice": (
        "lp_normalize", "backward",
        "slices not clamped: dx = (dy - w * sum(dy * u)) / norm^2, u = x / norm already divided once and the "
        "result divided by the norm again; clamped slices and the forward right",
        "pattern: a normalization factor applied both to an intermediate and to the result"),
    "lp_prologue_tile_not_accumulated": (
        "lp_normalize", "block",
        "slices longer than 64: the software-pipelined reduction loads the first tile of 64 values in its "
        "prologue and loops over the tiles from the second on, the prologue's partial never added: the norm "
        "from the slice's values after the first 64, y and the backward on that norm",
        "pattern: a pipelined loop's prologue tile loaded but never accumulated"),
    "lp_bwd_dy_rows_by_plain_reshape": (
        "lp_normalize", "layout",
        "dims not the trailing axes: the backward views dy as (rows, n) by a plain reshape of its buffer "
        "(without moving the normalized axes last as the forward did for x): dx; the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (a normalization kernel giving wrong results when its "
        "input's memory layout is not the one it indexes with)"),
    "lp_norm_output_before_rescale": (
        "lp_normalize", None,
        "the norm output written from the scaled row's norm (sum (|x| / s)^p)^(1/p) before its product with "
        "the scale s = max |x|; y and dx right",
        "pattern: an output written from an intermediate register of the statistic's finalization"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_scale_output_is_reciprocal": (
        "norm_quant_block", "quant_scale",
        "fp8_group: the scale output written from the quantize multiplier qmax / amax (1 / S, the value the "
        "kernel multiplies by) instead of the dequantization scale S; q and amax right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1145 (fp8 quantization scale in the wrong direction: the "
        "quant multiplier returned where the dequant scale is meant)"),
    "nqb_fp8_q_truncated": (
        "norm_quant_block", "rounding",
        "fp8 elements: each quotient converted to float8 by truncating its mantissa (round toward zero) "
        "instead of round to nearest even; the scales and amax right",
        "cf. " + GH + "ROCm/rocm-systems/pull/6877 (f32_to_fp8_e4m3 using truncation)"),
    "nqb_ln_mean_rounded_to_input_dtype": (
        "norm_quant_block", "precision",
        "norm='layer_norm', 16-bit inputs: each row's mean rounded to the input dtype before the deviations "
        "are taken about it (variance and y), then quantized",
        "cf. " + GH + "Xilinx/mlir-air/pull/2007 (a LayerNorm row kernel holding its mean in bfloat16)"),
    "nqb_rms_block_partials_averaged_unweighted": (
        "norm_quant_block", "merge",
        "norm='rms_norm', H not a multiple of the block size: the mean of squares the plain average of each "
        "quant block's mean of squares (the short last block weighted like the full ones), then normalized and "
        "quantized",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count merge, valid only when every partial "
        "has the same count)"),
    "nqb_mx_clip_at_pow2_emax": (
        "norm_quant_block", "saturation",
        "mxfp8 with float8_e4m3fn elements: the quotients clipped at 2^emax = 256 (the largest power of two) "
        "instead of the element's largest value 448; the scales and amax right",
        "cf. " + GH + "uxlfoundation/oneDNN/pull/5626 (fp8: saturate the output after dynamic e8m0 scaling)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_sq_dev_sum_in_half": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: each token's sum of squared deviations accumulated left to right in the input dtype "
        "(the mean in float32): rstd, y and the backward",
        "cf. " + GH + "Xilinx/mlir-air/pull/1679 (a norm kernel's sum of squares accumulated in bf16)"),
    "aln_bwd_mean_term_over_h_minus_1": (
        "adaptive_layer_norm", "bessel",
        "the backward's mean(g) divides its sum by H - 1 instead of H; the projection mean(g * x_hat), dscale, "
        "dshift and the forward right",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a LayerNorm taking the unbiased count where "
        "the biased one belongs)"),
    "aln_bwd_var_term_rstd_squared": (
        "adaptive_layer_norm", "backward",
        "the backward written in x: dx = rstd * (g - mean(g)) - rstd^2 * (x - mean) * mean(g * (x - mean)), "
        "the variance term's rstd^3 written rstd^2; dscale, dshift and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the powers of the saved inverse "
        "std wrong)"),
    "aln_rstd_output_before_sqrt": (
        "adaptive_layer_norm", None,
        "the rstd output written as 1 / (var + eps) (the reciprocal before the square root) while y uses the "
        "right rstd; the mean output and the gradients right",
        "pattern: an output written from an intermediate of the statistic's finalization"),
    "aln_sample_index_divided_by_hidden": (
        "adaptive_layer_norm", "layout",
        "more than one sample: each token row's sample index for the modulation taken as row // H (the hidden "
        "size) instead of row // T (the tokens a sample), clamped to the last sample: y, dx and the dscale and "
        "dshift rows they accumulate into",
        "cf. " + GH + "vllm-project/compressed-tensors/issues/394 (per-token values indexed over the wrong "
        "dimensions of a 3-D activation)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _toward_zero(a, npdt):
    """``a`` converted to the 8/16-bit float ``npdt`` rounding toward zero (one step toward zero wherever the
    nearest-even conversion rounded away)."""
    r = np.asarray(a.astype(npdt))
    rv, av = r.astype(np.float64), np.asarray(a, np.float64)
    away = (np.abs(rv) > np.abs(av)) & np.isfinite(rv) & (rv != 0)
    bits = r.view(np.uint16 if npdt.itemsize == 2 else np.uint8).copy()
    bits[away] -= 1
    return bits.view(npdt)


class Blind23Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind23"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn23(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn23(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                          # (C, n)
        C, n = x.shape
        Nb = x0.shape[0]
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_count_padded_to_spatial_tile" and x0.ndim >= 3 and n and S % 32:
                cnt = acc(Nb * (-(-S // 32) * 32))
                bmean = _rsum(x) / cnt
                bvar = _rsum((x - bmean) ** 2) / cnt
                rstd = 1 / np.sqrt(bvar + eps)
            elif b == "bn_var_shifted_by_first_value_uncorrected" and n:
                bmean = _rsum(x) / n
                bvar = _rsum((x - x[:, :1]) ** 2) / n
                rstd = 1 / np.sqrt(bvar + eps)
            elif b == "bn_eps_added_in_var_and_rsqrt" and n:
                bmean = _rsum(x) / n
                bvar = _rsum((x - bmean) ** 2) / n
                rstd = 1 / np.sqrt((bvar + eps) + eps)
            else:
                bmean, rstd = self._ln_stats(x, eps)
            mean = bmean
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    bm = bmean.reshape(C)
                    bv = (_rsum((x - bmean) ** 2) / n if bvar is None else bvar).reshape(C)
                    if cfg["convention"] == "torch":
                        f = acc(n / (n - 1)) if n > 1 else acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        yv = affine(xhat, w, bias)
        ys = (_toward_zero(from_channel_rows(yv, x0.shape), np_dtype(d))
              if b == "bn_bf16_y_truncated" and d == "bfloat16" else _store(from_channel_rows(yv, x0.shape), d))
        out = {"y": ys, "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        if b == "bn_saved_mean_rstd_swapped" and batch:
            out["mean"], out["rstd"] = out["rstd"], out["mean"]
        grads = {}
        if "y" in call.cotangents:
            dy0 = call.cotangents["y"]
            if b == "bn_bwd_dy_read_channels_last" and x0.ndim >= 3 and C > 1 and S > 1:
                dy0 = np.moveaxis(np.ascontiguousarray(dy0).reshape((Nb,) + x0.shape[2:] + (C,)), -1, 1)
            dy = channel_rows(dy0, acc)
            g = dy if w is None else dy * w
            dw_from, db_from = dy * xhat, dy
            if batch and b == "bn_dweight_from_uncentred_x":
                dw_from = dy * x * rstd
            if batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if b == "bn_dparams_second_program_offset_missing" and Nb > 1 and S > 0:
                h = -(-Nb // 2)
                idx = np.concatenate([np.arange(h), np.arange(Nb - h)])       # program 2 starts at sample 0

                def by_samples(t):
                    return t.reshape(C, Nb, S)[:, idx, :].reshape(C, -1)
                dw_from, db_from = by_samples(dw_from), by_samples(db_from)
            if w is not None:
                grads["weight"] = _store(_rsum(dw_from).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(db_from).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in23(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in23(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        imean = None
        sliced = b == "in_5d_stats_per_depth_slice" and x0.ndim == 5 and x0.size > 0 and inst
        if inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        if sliced:                                       # one row per (sample, channel, depth)
            D = x0.shape[2]
            xs = x.reshape(Nb * C * D, S // D)
            ms, rs = self._ln_stats(xs, eps)
            xhat = ((xs - ms) * rs).reshape(Nb * C, S)
            mean = ms.reshape(Nb * C, D)[:, -1:]
            rstd = rs.reshape(Nb * C, D)[:, -1:]
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        yb = br
        if b == "in_bias_skipped_without_weight" and wr is None:
            yb = None
        xy = xhat
        if b == "in_xhat_rounded_before_affine" and d in _HALF:
            xy = _half(xhat, d)
        out = instance_outputs(xy, wr, yb, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                keep_v = rm if b == "in_running_var_blended_with_running_mean" else rv
                new_m, _ = instance_running_update(rm, rv, m, imean, ub, Nb, C)
                _, new_v = instance_running_update(rm, keep_v, m, imean, ub, Nb, C)
                rm, rv = new_m, new_v
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            if sliced:
                D = x0.shape[2]
                dxs = _centred_dx(g.reshape(Nb * C * D, -1), xhat.reshape(Nb * C * D, -1), rs)
                dx = dxs.reshape(Nb * C, S)
            elif inst and b == "in_bwd_mean_g_term_dropped":
                dx = rstd * (g - xhat * (_rsum(g * xhat) / acc(S)))
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
            return self._gn23(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn23(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn23(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        eps = _eps(call.config["eps"], acc)
        var = None
        if b == "gn_eps_added_to_sum_of_squares":
            mean = _rsum(xv) / n
            dev = xv - mean
            var = (_rsum(dev * dev) + eps) / n
            rstd = 1 / np.sqrt(var)
        elif b == "gn_chunk_stats_merged_equal_counts" and n > 64 and n % 64:
            ms, m2s = [], []
            for k in range(0, n, 64):
                xc = xv[:, k:k + 64]
                mk = _rsum(xc) / xc.shape[1]
                ms.append(mk)
                m2s.append(_rsum((xc - mk) ** 2))
            mean = sum(ms) / acc(len(ms))
            m2 = sum(m2s) + acc(64) * sum((mk - mean) ** 2 for mk in ms)
            rstd = 1 / np.sqrt(m2 / n + eps)
        elif b == "gns_group_row_tail_tile_dropped" and n > 1024 and n % 1024:
            xt = xv[:, :(n // 1024) * 1024]
            mean = _rsum(xt) / n
            rstd = 1 / np.sqrt(_rsum((xt - mean) ** 2) / n + eps)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xr = (xv - mean) * rstd
        xhat = xr.reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        if b == "gn_affine_epilogue_in_input_dtype" and d in _HALF and w is not None and bias is not None:
            p = _half(_half(_half(xhat, d) * w, d) + bias, d)
        else:
            p = affine(xhat, w, bias)
        if silu:
            sg, rest = _sigmoids(p)
            y = p * sg
        else:
            y = p
        ms_out, rs_out = mean.reshape(Nb, G), rstd.reshape(Nb, G)
        if b == "gn_rstd_output_holds_var":
            rs_out = (_rsum((xv - mean) ** 2) / n).reshape(Nb, G)
        if b == "gns_mean_output_is_group_sum":
            ms_out = _rsum(xv).reshape(Nb, G)
        out = group_outputs(y, ms_out, rs_out, x0.shape, d, acc)
        if b == "gns_f16_y_round_toward_zero" and d == "float16":
            out["y"] = _toward_zero(y.reshape(x0.shape), np_dtype(d))
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        dp = dy * (sg * (1 + p * rest)) if silu else dy
        g = dp if w is None else dp * w
        rb, xb = rstd, xr
        if b == "gns_bwd_rstd_without_eps":
            rb = 1 / np.sqrt(_rsum((xv - mean) ** 2) / n)
            xb = (xv - mean) * rb
            pb = affine(xb.reshape(Nb, C, S), w, bias)
            sb, restb = _sigmoids(pb)
            dp = dy * (sb * (1 + pb * restb))
            g = dp if w is None else dp * w
        if b in ("gn_bwd_c3_db_term_without_count", "gn_bwd_c2_over_n_minus_1"):
            ds_nc, db_nc = _rsum(dp.reshape(Nb * C, S) * x.reshape(Nb * C, S)), _rsum(dp.reshape(Nb * C, S))
            ds_nc, db_nc = ds_nc.reshape(Nb, C), db_nc.reshape(Nb, C)
            wc = np.ones(C, acc) if w is None else w.reshape(C)
            ds_g = (ds_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            db_g = (db_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            mg, rg = mean.reshape(Nb, G), rstd.reshape(Nb, G)
            cnt2 = acc(n - 1) if b == "gn_bwd_c2_over_n_minus_1" else acc(n)
            c2 = (db_g * mg - ds_g) * rg * rg * rg / cnt2
            cnt3 = acc(1) if b == "gn_bwd_c3_db_term_without_count" else acc(n)
            c3 = -c2 * mg - db_g * rg / cnt3

            def per_channel(v):
                return np.repeat(v, cg, axis=1).reshape(Nb, C, 1)
            dx = per_channel(rg) * g + per_channel(c2) * x + per_channel(c3)
            grads = {"x": _store(dx.reshape(x0.shape), d)}
        else:
            gr = g.reshape(Nb * G, n)
            if b == "gns_bwd_proj_sums_without_silu_grad" and silu:
                gd = (dy if w is None else dy * w).reshape(Nb * G, n)
                dxr = rb * (gr - _rsum(gd) / n - xb * (_rsum(gd * xb) / n))
            else:
                dxr = _centred_dx(gr, xb, rb)
            grads = {"x": _store(dxr.reshape(x0.shape), d)}
        xw = xb.reshape(Nb, C, S)
        for key, t, given in (("weight", dp * xw, w), ("bias", dp, bias)):
            if given is None:
                continue
            v = channel_sums(t, C)
            if b == "gns_dparams_divided_by_batch":
                v = v / acc(Nb)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs23(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs23(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        if b == "zs_block_means_averaged_unweighted" and n > 256 and n % 256:
            bms = [_rsum(x[:, k:k + 256]) / acc(x[:, k:k + 256].shape[1]) for k in range(0, n, 256)]
            mean = sum(bms) / acc(len(bms))
            dev = x - mean
        elif n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        fold = b == "zs_bias_added_before_weight" and w is not None and bias is not None
        y = (xhat + bias) * w if fold else affine(xhat, w, bias)
        mo, so = back(mean, True).astype(acc), back(std, True).astype(acc)
        if b == "zs_stats_stored_outer_axis_fastest":
            kept = [k for k, s in enumerate(mo.shape) if s > 1]
            if len(kept) >= 2:
                def outer_fastest(v):
                    flat = v.reshape([v.shape[k] for k in kept])
                    return np.ascontiguousarray(flat.reshape(flat.shape[0], -1).T).reshape(v.shape)
                mo, so = outer_fastest(mo), outer_fastest(so)
        if b == "zs_mean_std_outputs_swapped":
            mo, so = so, mo
        out = {"y": _store(back(y), d), "mean": mo, "std": so}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            sgn = acc(-1) if b == "zs_bwd_projection_sign_flipped" else acc(1)
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - sgn * xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx), d)
            dw_from, db_from = dy * xhat, dy
            if fold:
                dw_from, db_from = dy * (xhat + bias), dy * w
            for key, t in (("weight", dw_from), ("bias", db_from)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp23(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp23(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"

        def powsum(v):
            if p == 1.0:
                return _rsum(v)
            if p == 2.0:
                return _rsum(v * v)
            return _rsum(v ** acc(p))
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        if b == "lp_prologue_tile_not_accumulated" and n > 64:
            total = powsum(np.abs(x[:, 64:]) / s)            # the loop from the second tile of 64 on
        else:
            total = powsum(np.abs(x) / s)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        scaled = total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv
        norm = s * scaled
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            if b == "lp_bwd_dy_rows_by_plain_reshape":
                dy = np.ascontiguousarray(dy0).astype(acc).reshape(x.shape)
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            if b == "lp_bwd_divided_by_norm_twice":
                proj = proj / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = _store(back(np.where(used, proj, small)), d)
        nout = back(scaled if b == "lp_norm_output_before_rescale" else norm, True).astype(acc)
        out = {"y": _store(back(y), d), "norm": nout}
        return Returned(out, {} if dx is None else {"x": dx})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb23(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized23(self, call, cfg, acc, b, B):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            if b == "nqb_ln_mean_rounded_to_input_dtype" and call.dtype in _HALF and H:
                mean = _half(_rsum(s) / H, call.dtype)
                dev = s - mean
                rstd = 1 / np.sqrt(_rsum(dev * dev) / H + eps)
            else:
                mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            if b == "nqb_rms_block_partials_averaged_unweighted" and H > B and H % B:
                parts = [_rsum(s[:, k:k + B] ** 2) / acc(s[:, k:k + B].shape[1]) for k in range(0, H, B)]
                ms = sum(parts) / acc(len(parts))
            else:
                ms = _rsum(s * s) / H
            y = s * (1 / np.sqrt(ms + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb23(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized23(call, cfg, acc, b, B)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
            if b == "nqb_scale_output_is_reciprocal":
                scale_out = np.where(S == 0, acc(0), acc(1) / np.where(S == 0, acc(1), S)).astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        if b == "nqb_mx_clip_at_pow2_emax" and fmt == "mxfp8" and qmax == 448.0:
            qmax = acc(2.0 ** emax)
        if b == "nqb_fp8_q_truncated" and qdt.kind != "i" and qdt.itemsize == 1 and qmax > 6:
            Sx = S[..., None]
            qv = np.where(Sx == 0, acc(0) * yb, yb / np.where(Sx == 0, acc(1), Sx))
            qv = _toward_zero(np.clip(qv, -qmax, qmax), qdt).astype(acc)
            return nqb_quantized(qv, np.ones_like(S), qmax, qdt, scale_out, amax, ts, call, s, acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln23(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln23(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        R = x.shape[0]
        if b == "aln_sq_dev_sum_in_half" and d in _HALF and x.size:
            mean = _rsum(x) / H
            dev = x - mean
            var = _half_row_sums(dev * dev, d) / acc(H)
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        sidx = None
        if b == "aln_sample_index_divided_by_hidden" and B > 1 and R:
            sidx = np.minimum(np.arange(R) // H, B - 1)
            gain = None if scale is None else acc(1) + scale.astype(acc).reshape(B, H)[sidx]
            sh = None if shift is None else shift.astype(acc).reshape(B, H)[sidx]
        else:
            gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        rs_out = rstd
        if b == "aln_rstd_output_before_sqrt" and H:
            rs_out = 1 / (_rsum((x - mean) ** 2) / H + eps)
        out = norm_outputs(y, mean, rs_out, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_mean_term_over_h_minus_1" and H > 1:
            dx = rstd * (g - _rsum(g) / acc(H - 1) - xhat * (_rsum(g * xhat) / H))
        elif b == "aln_bwd_var_term_rstd_squared" and H:
            xc = x - mean
            dx = rstd * (g - _rsum(g) / H) - rstd * rstd * xc * (_rsum(g * xc) / H)
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}

        def to_samples(t):
            if sidx is None:
                return per_sample(t, B, T, H)
            o = np.zeros((B, H), acc)
            np.add.at(o, sidx, t)
            return o
        if scale is not None:
            grads["scale"] = _store(to_samples(dy * xhat), d)
        if shift is not None:
            grads["shift"] = _store(to_samples(dy), d)
        return Returned(out, grads)
