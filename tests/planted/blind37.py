"""A thirty-seventh held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind37Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn37``, ``_in37``, ``_gn37`` for group_norm and
group_norm_silu, ``_zs37``, ``_lp37``, ``_nqb37``, ``_aln37``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind37Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
the diagnosis on these bugs. None of its bugs repeats one of tests/planted/blind.py, blind2.py, ...,
blind35.py (the same mistake on the same op; the thirty-sixth set, written at the same time for the other
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
    frexp_exp,
    from_channel_rows,
    group_outputs,
    group_params,
    group_rows,
    group_scales,
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
    per_instance,
    per_sample,
    pow2_up,
    running_in,
    running_setup,
    running_state,
)
from ._blind_math import centred_dx as _centred_dx
from ._blind_math import channel_sums as _channel_sums
from ._blind_math import eps_value as _eps
from ._blind_math import half as _half
from ._blind_math import rsum as _rsum
from ._blind_math import sigmoids as _sigmoids
from ._blind_math import store as _store
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind11 import Blind11Kernel
from .blind27 import _toward_zero

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind37Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_running_blend_in_input_dtype": (
        "batch_norm", "running",
        ("16-bit inputs, training with running statistics: the running update kernel computes in the buffers' "
         "dtype: the momentum m and 1 - m, each product (1 - m) * running and m * batch (the unbiased variance "
         "under torch's convention) and their sum each rounded to the input dtype (nearest even) instead of one "
         "float32 blend rounded once: running_mean and running_var; y, the saved statistics and the gradients "
         "right"),
        "cf. " + GH + "NVIDIA/apex/pull/144 (BatchNorm moment tensors converted to half precision, hurting the "
        "accuracy of the moment estimators)"),
    "bn_weight_abs_plus_eps": (
        "batch_norm", "affine",
        ("with a weight: the affine written with InPlace-ABN's invertible convention, y = x_hat * (|weight| + eps) "
         "+ bias, and g = dy * (|weight| + eps) in dx; dweight = sign(weight) * sum(dy * x_hat); the statistics, "
         "the running update and dbias right"),
        GH + "mapillary/inplace_abn/issues/92 (InPlaceABN's affine takes the absolute value of the weight plus eps, "
        "not the standard linear form)"),
    "bn_dx_stored_channel_major": (
        "batch_norm", "layout",
        ("more than one sample and channel: dx computed right on the kernel's (C, N * S) channel-major work "
         "buffer but stored from it as it is, without the move of the channel axis back (element (c, n, s) of "
         "that buffer written at flat position (c * N + n) * S + s of the (N, C, *) grad-input): dx; the forward, "
         "dweight and dbias right"),
        "pattern: a transposed scratch layout written back without its inverse permute"),
    "bn_bwd_xhat_from_stored_output": (
        "batch_norm", "precision",
        ("16-bit inputs with a weight and a bias, batch statistics: the memory-saving backward recomputes x_hat "
         "from the stored 16-bit output as (y - bias) / weight (the output rounded to the input dtype): dx and "
         "dweight from that x_hat; the forward, the running update and dbias right"),
        "cf. " + GH + "mapillary/inplace_abn/issues/155 (an in-place BatchNorm whose backward, recomputed from the "
        "output, differs from nn.BatchNorm2d's)"),
    "bn_dbias_times_invstd": (
        "batch_norm", "backward",
        ("with a bias: the backward-reduce epilogue multiplies both per-channel sums by the saved invstd, dbias = "
         "rstd * sum(dy) (the line copied from dweight = rstd * sum(dy * (x - mean))); dx, dweight and the forward "
         "right"),
        "pattern: a vectorised epilogue applying one factor to both reductions it stores"),
    "bn_dx_proj_of_uncentred_x": (
        "batch_norm", "backward",
        ("batch statistics: dx = rstd * (g - mean(g) - x * rstd * mean(g * x_hat)), the projection term "
         "multiplied by the raw x times rstd (x loaded where x - mean belongs in the (x - mean) * k form); dweight, "
         "dbias and the forward right"),
        "pattern: a saved mean left out of a recomputed operand in the backward"),
    "bn_welford_count_in_half": (
        "batch_norm", "precision",
        ("float16 inputs, batch statistics, more than 2048 values a channel: each channel's statistics by a "
         "Welford loop whose element count is kept in float16, so it sticks at 2048 (2048 + 1 rounds back to "
         "2048): the mean's updates and M2 = sum of delta * (x - new mean) go on with that count, and var = M2 / "
         "count: the mean, rstd, y, the backward and the running update from them"),
        "cf. " + GH + "intel/torch-xpu-ops/pull/3072 (a Welford element count kept in a floating accumulator loses "
        "integer precision on large reductions)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_c2_times_xhat": (
        "group_norm", "backward",
        ("backward in the ds / db form (ds = sum g x, db = sum g per (sample, group), c2 = (db * mean - ds) * "
         "rstd^3 / n, c3 = -c2 * mean - db * rstd / n) with dx = rstd * g + c2 * x_hat + c3: c2 multiplied by "
         "the normalized x_hat where the raw x belongs; dweight, dbias and the forward right"),
        "pattern: a backward written in x terms mixing in the normalized operand"),
    "gn_bwd_weight_from_bias_ptr": (
        "group_norm", "layout",
        ("with a weight and a bias: the dx kernel loads the weight through the bias's pointer, g = dy * bias for "
         "dx (mean(g), the projection and the elementwise term); dweight, dbias and the forward right"),
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where "
        "another's was meant)"),
    "gn_param_grads_swapped": (
        "group_norm", None,
        ("with a weight and a bias: dweight and dbias returned in each other's slot (the backward's output tuple "
         "unpacked in the wrong order); dx and the forward right"),
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a LayerNorm backward assigning the weight and bias "
        "gradients the wrong way round)"),
    "gn_bwd_rstd_default_eps": (
        "group_norm", "eps",
        ("the backward kernel recomputes each group's rstd from the saved variance with its own default eps "
         "1e-5 (the configured eps not passed to it): x_hat, dx and dweight from that rstd; the forward and dbias "
         "right"),
        "cf. " + GH + "ggml-org/llama.cpp/pull/8818 (a group_norm kernel whose eps was a constant until it was "
        "made a parameter)"),
    "gn_folded_scale_shift_in_half": (
        "group_norm", "precision",
        ("16-bit inputs: the forward folds normalization and affine into y = x * a + b per (sample, channel) "
         "with a = weight * rstd and b = bias - mean * a each rounded to the input dtype (the fused kernel's "
         "scale / shift buffers of x's dtype): y; the saved statistics and the gradients right"),
        "cf. " + GH + "pytorch/TensorRT/pull/1450 (a norm's folded scale and bias computed in fp16, fixed by "
        "computing them in float)"),
    "gn_dparams_stored_at_channel_in_group": (
        "group_norm", "layout",
        ("more than one group, with a weight or a bias: the per-channel sums for dweight and dbias added into "
         "the output at the channel's index within its group (c mod C / G, the reduce kernel's local channel) "
         "instead of c: the first C / G slots hold the sums over the groups, the others 0; dx and the forward "
         "right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm gamma_grad kernel indexing by the core-local "
        "channel where the global channel belongs)"),
    "gn_bwd_weight_applied_twice": (
        "group_norm", "backward",
        ("with a weight: the wrapper hands the kernel dy already multiplied by the weight and the kernel "
         "multiplies by it again: g = dy * weight^2 for dx; dweight, dbias and the forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward's handling of the weight factor fixed)"),
    # ------------------------------------------------------------------ instance_norm
    "in_tail_tile_mean_over_tile_width": (
        "instance_norm", "block",
        ("instance statistics, more than 32 positions and not a multiple of 32: each instance reduced in tiles "
         "of 32 whose (mean, M2) are merged by Chan's update with their true counts, but each tile's mean taken "
         "as its sum / 32 (the tile width), so the short last tile's mean, its M2 about it and the merged mean "
         "and variance are wrong: y, the saved statistics and the backward on them"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (a fused norm's statistics wrong for a spatial size that "
        "is not a whole number of tiles)"),
    "in_dparams_summed_over_channels": (
        "instance_norm", "reduction",
        ("more than one channel, with a weight or a bias: dweight and dbias reduced over every instance (all "
         "samples and channels) and that one total stored to every channel (the per-instance partials summed "
         "with .sum() where .view(N, C).sum(0) belongs); dx and the forward right"),
        "pattern: a parameter gradient summed over one axis too many and broadcast back"),
    "in_mean_output_is_running_mean": (
        "instance_norm", None,
        ("training with running statistics: the returned mean output holds the just-updated running_mean (per "
         "channel, repeated over the samples) instead of each instance's mean; y, rstd, the state and the "
         "gradients right"),
        "pattern: an output pointer bound to the running buffer the update kernel wrote last"),
    "in_eval_running_at_sample_index": (
        "instance_norm", "running",
        ("eval with running statistics: the instance (n, c) reads running_mean and running_var at index n mod C "
         "(the sample index in the channel's slot) instead of c: y, the returned statistics and dx = g * rstd; "
         "the training path right"),
        "pattern: a per-instance program indexing a per-channel buffer with the wrong loop variable"),
    "in_weight_plus_one_flag_set": (
        "instance_norm", "affine",
        ("with a weight: the fused kernel's zero-centred-gamma flag left set, y = x_hat * (1 + weight) + bias and "
         "g = dy * (1 + weight) in dx; dweight = sum dy * x_hat, dbias and the statistics right"),
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel's weight offset convention applied to the "
        "wrong model)"),
    # ------------------------------------------------------------------ z_score
    "zs_f64_std_by_sqrtf": (
        "z_score", "precision",
        ("float64 inputs: each slice's standard deviation taken by the single-precision root (the scaled sum of "
         "squares and eps narrowed to float32, sqrt and hypot in float32, widened back): std, y and dx from it; "
         "the mean and the rest in float64"),
        "pattern: a kernel templated on the element type calling the float overload of sqrt"),
    "zs_zero_std_replaced_by_one": (
        "z_score", "eps",
        ("the standard deviation taken as sqrt(var) without eps, a zero std replaced by 1 (the scaler's "
         "zero-variance guard where eps belongs): std output, y = (x - mean) / std * weight + bias and dx from "
         "it; right only where eps is 0 and the slice not constant"),
        "cf. " + GH + "deeplearning4j/nd4j/issues/1374 (zero-variance handling: eps added to the std versus a zero "
        "std set to 1)"),
    "zs_y_axes_restored_transposed": (
        "z_score", "layout",
        ("dim a tuple of two or more axes whose last two are both longer than one: y computed right on the "
         "slices but stored with those two normalized axes' strides exchanged (element (i, j) of a slice written "
         "at flat position j * A + i of its A x B block); the statistics and dx right"),
        "pattern: an output store indexed with two axes' strides exchanged"),
    "zs_eps_added_twice": (
        "z_score", "eps",
        ("eps > 0: the variance handed over with eps already added and eps added again under the root: std = "
         "sqrt(var + 2 eps), y, the std output and dx from it; the mean right"),
        "cf. " + GH + "PaddlePaddle/Paddle/pull/11348 (a norm accumulator initialised to eps and eps added to it "
        "once more)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_dot_per_chunk": (
        "lp_normalize", "group",
        ("slices longer than 64: the backward's projection sum(dy * u) reduced per chunk of 64 values (each "
         "program's partial used as the slice's, the cross-chunk combine missing): dx; y and the norm right"),
        "pattern: a split reduction whose partials are never combined"),
    "lp_rows_read_column_major": (
        "lp_normalize", "layout",
        ("2-D inputs normalized along the last axis, more than one slice: the kernel addresses element (r, j) of "
         "the (R, n) buffers at j * R + r (column-major), so each norm is taken over a strided set of values and y "
         "and dx are written back with the same addressing: y, the norm output and dx"),
        "pattern: a row stride and a column stride exchanged in a 2-D kernel's addressing"),
    "lp_onnx_zero_slice_grad_passthrough": (
        "lp_normalize", "backward",
        ("zero_rule='onnx': a slice whose norm is 0 (output 0) gets dx = dy (its guard's branch differentiated as "
         "the identity) instead of 0; the other slices and the forward right"),
        "cf. " + GH + "pytorch/pytorch/issues/184575 (F.normalize's gradient at a degenerate slice)"),
    "lp_bwd_dot_over_all_slices": (
        "lp_normalize", "reduction",
        ("more than one slice: the backward's projection sum(dy * u) reduced over the whole tensor (every slice) "
         "instead of per slice: dx; y and the norm right"),
        "pattern: a reduction written without its axis"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_group_pair_first_rstd": (
        "group_norm_silu", "layout",
        ("more than one (sample, group) row: the kernel takes two rows per program and scales both with the "
         "first row's rstd (each its own mean): y, the saved rstd, and the backward from those saved statistics"),
        "pattern: a per-row statistic held in one register for the program's two rows"),
    "gns_affine_indexed_by_group": (
        "group_norm_silu", "layout",
        ("more than one group and channel a group, with a weight or a bias: weight and bias loaded at the "
         "channel's group index (weight[c // (C / G)]) instead of its channel, forward and backward (p, y, the SiLU "
         "derivative and g for dx); dweight and dbias reduced per channel as usual"),
        GH + "onnx/onnx/pull/5808 (GroupNormalization-18's scale and bias per group, changed to per channel in "
        "opset 21)"),
    "gns_eps_cast_to_input_dtype": (
        "group_norm_silu", "eps",
        ("16-bit inputs: eps passed to the kernel as a scalar of the input dtype (1e-12 flushed to 0 in float16, "
         "0.3 rounded to 0.30078 in bfloat16): rstd, y, the saved rstd and the backward"),
        "cf. " + GH + "pytorch/pytorch/issues/32137 (an epsilon of 1e-12 evaluated as zero in half precision)"),
    "gns_bwd_xhat_from_p_weight_not_divided": (
        "group_norm_silu", "backward",
        ("with a weight: the backward recomputes x_hat from the saved pre-activation as p - bias, the division "
         "by the weight left out (x_hat * weight where x_hat belongs) in dx's projection and dweight = sum dp * "
         "x_hat; the SiLU derivative, dbias and the forward right"),
        "pattern: a memory-saving backward recomputing the normalized input without one affine factor"),
    "gns_fused_shift_without_weight": (
        "group_norm_silu", "affine",
        ("with a weight: the forward folds normalization and affine into p = x * a + b per (sample, channel), a = "
         "rstd * weight, with the shift written b = bias - mean * rstd (the weight missing from it), then y = "
         "silu(p); the saved statistics and the gradients (their own kernel) right"),
        "pattern: a folded scale / shift pair whose shift drops one factor"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_fp4_via_e4m3_double_rounding": (
        "norm_quant_block", "precision",
        ("float4_e2m1 elements: each clipped quotient y / S converted to float8_e4m3fn first (to nearest even) "
         "and that converted to float4 (nearest even again): a value near an e2m1 midpoint lands on it and ties "
         "to even; the scales and amax right"),
        "cf. " + GH + "triton-lang/triton/pull/2583 (a narrow float conversion done as two roundings, fixed to "
        "round once)"),
    "nqb_blocks_over_flat_buffer": (
        "norm_quant_block", "block",
        ("H not a multiple of the block size, more than one row: the quantization blocks laid over the flattened "
         "(rows * H) buffer, so blocks straddle rows: each block's amax and scale over its flat span, q = y / that "
         "scale, and the scale and amax outputs filled with the flat blocks in order (zeros past their count)"),
        "pattern: a block loop over a flattened tensor without the per-row padding"),
    "nqb_nvfp4_zero_block_scale_min_subnormal": (
        "norm_quant_block", "quant_scale",
        ("nvfp4: each block scale clamped below at the smallest E4M3 subnormal 2^-9 (a guard against dividing by "
         "zero), so an all-zero block gets the scale 2^-9 instead of 0: the scale output there; q (0) and amax "
         "right"),
        "cf. " + GH + "HomericIntelligence/Odyssey/issues/2379 (an MX block of zeros encoded with a nonzero "
        "scale)"),
    "nqb_residual_added_twice": (
        "norm_quant_block", None,
        ("with a residual: the caller adds the residual to x and the fused kernel adds it again: s = x + 2 * "
         "residual, residual_out = s, and the normalization, amax, scales and q of that sum"),
        "cf. " + GH + "huggingface/pytorch-image-models/pull/2741 (a fused norm's result fed to the fallback, "
        "which applies its operation a second time)"),
    "nqb_nvfp4_block_scale_pow2": (
        "norm_quant_block", "scale_rounding",
        ("nvfp4: each block scale amax / 6 * encode rounded up to a power of two (the MXFP4 E8M0 rule) before its "
         "E4M3 store instead of rounded to the nearest E4M3 value: the scale output and q = y / (that scale times "
         "the tensor scale); amax right"),
        "cf. " + GH + "Noumena-Network/nmoe/issues/15 (an NVFP4 quantizer using power-of-two MXFP4 scales)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_eps_added_to_rstd": (
        "adaptive_layer_norm", "eps",
        ("rstd = 1 / sqrt(var) + eps (the parenthesis of rsqrt(var + eps) closed before eps): y, the returned rstd, "
         "dx and dscale from it (inf for a constant token)"),
        "pattern: eps added after the reciprocal square root instead of under it"),
    "aln_bwd_rstd_from_unbiased_var": (
        "adaptive_layer_norm", "bessel",
        ("H above 1: the backward recomputes each token's rstd as 1 / sqrt(var * H / (H - 1) + eps) (torch.var's "
         "unbiased default in its copy of the statistics): x_hat, dx and dscale from it; the forward and dshift "
         "right"),
        "cf. " + GH + "pytorch/pytorch/issues/19902 (the biased and the unbiased variance of a normalization easily "
        "taken for each other)"),
    "aln_dmod_bf16_truncated": (
        "adaptive_layer_norm", "rounding",
        ("bfloat16 inputs: dscale and dshift converted from float32 by dropping the low 16 bits (rounding toward "
         "zero) instead of round to nearest even; y, the statistics and dx right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
    "aln_bwd_proj_of_uncentred_x": (
        "adaptive_layer_norm", "backward",
        ("dx = rstd * (g - mean(g) - x_hat * rstd * mean(g * x)), the projection's reduction fed the raw x (the "
         "loaded input) where x - mean belongs; dscale, dshift and the forward right"),
        "pattern: a saved mean left out of one reduction of the backward"),
    "aln_gain_exp_of_scale": (
        "adaptive_layer_norm", "affine",
        ("with a scale: the gain taken as exp(scale) (a log-scale modulation convention) instead of 1 + scale: y "
         "= x_hat * exp(scale) + shift, g = dy * exp(scale) in dx, dscale = exp(scale) * sum over the tokens of dy "
         "* x_hat; the statistics and dshift right"),
        "pattern: a modulation convention of another conditioning layer"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _welford_f16_count(x, acc):
    """(mean, var) per row of ``x`` (C, n) by a Welford loop in ``acc`` whose count is kept in float16."""
    C, n = x.shape
    mean = np.zeros(C, acc)
    m2 = np.zeros(C, acc)
    cnt = np.float16(0)
    for k in range(n):
        cnt = np.float16(cnt + np.float16(1))                    # sticks at 2048
        c = acc(cnt)
        v = x[:, k]
        delta = v - mean
        mean = mean + delta / c
        m2 = m2 + delta * (v - mean)
    return mean.reshape(C, 1), (m2 / acc(cnt)).reshape(C, 1)


def _tile_stats_tail_over_width(x, T, acc):
    """(mean, var) per row of ``x`` (rows, S) from tiles of ``T`` merged by Chan's update with their true counts,
    each tile's mean taken as its sum / T."""
    S = x.shape[1]
    na = mean = m2 = None
    for k in range(0, S, T):
        t = np.ascontiguousarray(x[:, k:k + T])
        nb = t.shape[1]
        mb = _rsum(t) / acc(T)                                    # the tile width, not nb
        qb = _rsum((t - mb) ** 2)
        if na is None:
            na, mean, m2 = nb, mb, qb
            continue
        nn = na + nb
        delta = mb - mean
        mean = mean + delta * acc(nb / nn)
        m2 = m2 + qb + delta * delta * acc(na * nb / nn)
        na = nn
    return mean, m2 / acc(S)


class Blind37Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind37"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn37(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn37(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_welford_count_in_half" and d == "float16" and n > 2048:
                bmean, bvar = _welford_f16_count(x, acc)
            else:
                bmean = _rsum(x) / n
                bvar = _rsum((x - bmean) ** 2) / n
            mean, rstd = bmean, 1 / np.sqrt(bvar + eps)
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        we = w
        if b == "bn_weight_abs_plus_eps" and w is not None:
            we = np.abs(w) + eps                                       # InPlace-ABN's |weight| + eps
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        bv = bv * (acc(n / (n - 1)) if n > 1 else acc(np.inf))
                    keep, take = (1 - m, m) if torch else (m, 1 - m)
                    if b == "bn_running_blend_in_input_dtype" and d in _HALF:
                        def h(v):
                            return _half(np.asarray(v, acc), d)
                        k16, t16 = h(keep), h(take)
                        rm = h(h(k16 * h(rm)) + h(t16 * h(bm)))
                        rv = h(h(k16 * h(rv)) + h(t16 * h(bv)))
                    else:
                        rm, rv = keep * rm + take * bm, keep * rv + take * bv
            state = running_state(rm, rv, nbt, d)
        y = affine(xhat, we, bias)
        out = {"y": _store(from_channel_rows(y, x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if we is None else dy * we
            xb = xhat
            if (b == "bn_bwd_xhat_from_stored_output" and batch and d in _HALF and w is not None
                    and bias is not None):
                y16 = _half(y, d)
                xb = np.where(w == 0, xhat, (y16 - bias) / np.where(w == 0, acc(1), w))
            if batch and b == "bn_dx_proj_of_uncentred_x" and n:
                dx = rstd * (g - _rsum(g) / n - (x * rstd) * (_rsum(g * xhat) / n))
            elif batch:
                dx = _centred_dx(g, xb, rstd)
            else:
                dx = g * rstd
            if b == "bn_dx_stored_channel_major" and Nb > 1 and C > 1:
                dxs = np.ascontiguousarray(dx).reshape(x0.shape)          # the (C, N * S) buffer as it is
            else:
                dxs = from_channel_rows(dx, x0.shape)
            grads = {"x": _store(dxs, d)}
            if w is not None:
                dw = _rsum(dy * xb).reshape(C)
                if b == "bn_weight_abs_plus_eps":
                    dw = dw * np.sign(w.reshape(C))
                grads["weight"] = _store(dw, d)
            if bias is not None:
                db = _rsum(dy)
                if b == "bn_dbias_times_invstd":
                    db = db * rstd
                grads["bias"] = _store(db.reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in37(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in37(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        if b == "in_weight_plus_one_flag_set" and wr is not None:
            wr = 1 + wr                                                   # the zero-centred gamma flag
        imean = None
        if inst:
            if b == "in_tail_tile_mean_over_tile_width" and S > 32 and S % 32:
                imean, ivar = _tile_stats_tail_over_width(x, 32, acc)
                rstd = 1 / np.sqrt(ivar + eps)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        elif b == "in_eval_running_at_sample_index" and S:
            idx = np.repeat(np.arange(Nb) % C, C)                         # row n * C + c reads slot n mod C
            rmv = st["running_mean"].astype(acc).reshape(-1)[idx].reshape(-1, 1)
            rvv = st["running_var"].astype(acc).reshape(-1)[idx].reshape(-1, 1)
            mean, rstd = rmv, 1 / np.sqrt(rvv + eps)
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
                if b == "in_mean_output_is_running_mean":
                    out["mean"] = per_instance(rm.astype(acc), Nb).reshape(Nb, C).astype(acc)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            dx = _centred_dx(g, xhat, rstd) if inst else g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                v = _rsum(t).reshape(Nb, C).sum(axis=0)
                if b == "in_dparams_summed_over_channels":
                    v = np.full(C, v.sum(), acc)
                grads[k] = _store(v, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn37(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn37(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn37(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "gns_eps_cast_to_input_dtype" and d in _HALF:
            eps = _half(np.asarray(eps, acc), d)[()]
        n = xr.shape[1]
        mean = _rsum(xr) / n
        var = _rsum((xr - mean) ** 2) / n
        rstd = 1 / np.sqrt(var + eps)
        if b == "gns_group_pair_first_rstd" and Nb * G > 1:
            rows = np.arange(Nb * G)
            rstd = rstd[rows - rows % 2]                                  # the pair's first row's rstd
        xhat = ((xr - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "gns_affine_indexed_by_group" and G > 1 and cg > 1:
            gi = np.arange(C) // cg
            wf = None if w is None else w[:, gi, :]
            bf = None if bias is None else bias[:, gi, :]
        p = affine(xhat, wf, bf)
        if b == "gn_folded_scale_shift_in_half" and d in _HALF:
            rs = np.repeat(rstd.reshape(Nb, G), cg, axis=1)[:, :, None]
            mu = np.repeat(mean.reshape(Nb, G), cg, axis=1)[:, :, None]
            a = _half(rs if w is None else w * rs, d)
            sh = _half(-mu * a if bias is None else bias - mu * a, d)
            p = x * a + sh
        pf = p                                                            # what the forward's activation takes
        if b == "gns_fused_shift_without_weight" and w is not None:
            rs = np.repeat(rstd.reshape(Nb, G), cg, axis=1)[:, :, None]
            mu = np.repeat(mean.reshape(Nb, G), cg, axis=1)[:, :, None]
            sh = -mu * rs if bias is None else bias - mu * rs            # mean * rstd * weight belongs
            pf = x * (rs * w) + sh
        if silu:
            sg, _ = _sigmoids(pf)
            y = pf * sg
        else:
            y = pf
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        rb = rstd
        if b == "gn_bwd_rstd_default_eps":
            rb = 1 / np.sqrt(var + acc(1e-5))                             # the backward kernel's own eps
        xb = (xr - mean) * rb
        if silu:
            sg, rest = _sigmoids(p)
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        wg = wf
        if b == "gn_bwd_weight_from_bias_ptr" and w is not None and bias is not None:
            wg = bias
        elif b == "gn_bwd_weight_applied_twice" and w is not None:
            wg = w * w
        g = dp if wg is None else dp * wg
        gr = g.reshape(Nb * G, n)
        xp = xb
        if b == "gns_bwd_xhat_from_p_weight_not_divided" and w is not None:
            xp = (p - (0 if bias is None else bias)).reshape(Nb * G, n)     # p / weight belongs
        if b == "gn_bwd_c2_times_xhat":
            ds, db = _rsum(gr * xr), _rsum(gr)
            c2 = (db * mean - ds) * rb ** 3 / n
            c3 = -c2 * mean - db * rb / n
            dx = (rb * gr + c2 * xb + c3).reshape(Nb, C, S)               # c2 * x belongs
        else:
            dx = (rb * (gr - _rsum(gr) / n - xp * (_rsum(gr * xp) / n))).reshape(Nb, C, S)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        xpv = xp.reshape(Nb, C, S)
        for key, t, given in (("weight", dp * xpv, w), ("bias", dp, bias)):
            if given is None:
                continue
            v = _channel_sums(t, C)
            if b == "gn_dparams_stored_at_channel_in_group" and G > 1:
                vv = np.zeros_like(v)
                np.add.at(vv, np.arange(C) % cg, v)
                v = vv
            grads[key] = _store(v, d)
        if b == "gn_param_grads_swapped" and "weight" in grads and "bias" in grads:
            grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs37(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows37(x, ddof, eps, acc, b, d):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
        m = n - ddof
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                       # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        if m <= 0:
            return mean, np.full(a.shape, np.nan, acc), dev
        if b == "zs_f64_std_by_sqrtf" and d == "float64":
            f = np.float32
            std = np.hypot(a.astype(f) * np.sqrt((sumsq / acc(m)).astype(f)), np.sqrt(f(eps))).astype(acc)
        elif b == "zs_zero_std_replaced_by_one":
            std = a * np.sqrt(sumsq / acc(m))
            std = np.where(std == 0, acc(1), std)                    # the zero-variance guard, no eps
        elif b == "zs_eps_added_twice":
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps + eps))
        else:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        return mean, std, dev

    def _zs37(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, std, dev = self._zs_rows37(x, ddof, eps, acc, b, d)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        y = affine(xhat, w, bias)
        ax = [a % x0.ndim for a in (dims if isinstance(dims, (list, tuple)) else [dims])]
        if b == "zs_y_axes_restored_transposed" and len(ax) >= 2:
            A, B = (x0.shape[a] for a in sorted(ax)[-2:])
            if A > 1 and B > 1:
                y = np.ascontiguousarray(y.reshape(-1, A, B).transpose(0, 2, 1)).reshape(y.shape)
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
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp37(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm37(v, p, acc):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|."""
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = np.abs(v) / s
        if p == 1.0:
            return s * _rsum(t)
        if p == 2.0:
            return s * np.sqrt(_rsum(t * t))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * _rsum(t ** acc(p)) ** inv

    def _lp37(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        R = x.shape[0]
        colmajor = (b == "lp_rows_read_column_major" and x0.ndim == 2 and R > 1 and n > 1
                    and not isinstance(dims, (list, tuple)) and int(dims) % 2 == 1)
        if colmajor:                                          # element (r, j) addressed at j * R + r
            x = np.ascontiguousarray(x.reshape(-1).reshape(n, R).T)
            dy = None if dy is None else np.ascontiguousarray(dy.reshape(-1).reshape(n, R).T)
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        norm = self._lp_norm37(x, p, acc)
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            dot = _rsum(dy * u)
            if b == "lp_bwd_dot_per_chunk" and n > 64:
                parts = [_rsum(np.ascontiguousarray((dy * u)[:, k:k + 64])) for k in range(0, n, 64)]
                dot = np.concatenate([np.repeat(pt, min(64, n - k), axis=1)
                                      for pt, k in zip(parts, range(0, n, 64), strict=True)], axis=1)
            elif b == "lp_bwd_dot_over_all_slices" and R > 1:
                dot = np.full_like(dot, dot.sum())
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            if b == "lp_onnx_zero_slice_grad_passthrough" and not torch_rule:
                small = dy                                    # the guard's branch taken as y = x
            dx = np.where(used, proj, small)
        if colmajor:
            def cm(a):
                return np.ascontiguousarray(a.T).reshape(-1).reshape(R, -1)
            y = cm(y)
            dx = None if dx is None else cm(dx)
            nout = norm.reshape(R, 1)
        else:
            nout = norm
        out = {"y": _store(back(y), d), "norm": back(nout, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb37(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized37(self, call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        if res is None:
            s = x
        elif b == "nqb_residual_added_twice":
            r = res.astype(acc).reshape(-1, H)
            s = x + r + r                                            # the caller's add and the kernel's
        else:
            s = x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    @staticmethod
    def _nqb_scales37(fmt, amax, rule, qmax, emax, cfg, inp, acc, b):
        """(S, scale_out, ts) of the blocks' amax for ``fmt``."""
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            return S, S.astype(acc), ts
        if fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
            return S, scale_out, ts
        enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
        if b in ("nqb_nvfp4_block_scale_pow2", "nqb_nvfp4_zero_block_scale_min_subnormal"):
            ts = acc(1) / enc
            v = amax / acc(6.0) * enc
            if b == "nqb_nvfp4_block_scale_pow2":
                mm, e = frexp_exp(v)
                v = np.where(v > 0, np.ldexp(1.0, pow2_up(mm, e).astype(np.int64)), 0.0).astype(acc)
            else:
                v = np.maximum(v, acc(2.0 ** -9))                    # the divide-by-zero guard
            Sb = np.clip(v, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
            return Sb.astype(acc) * ts, Sb, ts
        ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        return S, scale_out, ts

    def _nqb37(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized37(call, cfg, acc, b)
        R, H = y.shape
        if b == "nqb_blocks_over_flat_buffer" and H % B and R > 1:
            nb = -(-H // B)
            flat = y.reshape(1, -1)
            fb, famax = padded_blocks(flat, B, acc)                  # blocks over the flat buffer
            S, scale_out, ts = self._nqb_scales37(fmt, famax, rule, qmax, emax, cfg, inp, acc, b)
            qf = np.clip(block_quotients(fb, S, acc), -qmax, qmax).reshape(-1)[:R * H].reshape(R, H)
            qv = np.concatenate([qf, np.zeros((R, nb * B - H), acc)], axis=1).reshape(R, nb, B)
            K = famax.shape[1]

            def fill(a, dt):
                a = np.asarray(a).reshape(-1)[:R * nb]
                pad = np.zeros(R * nb - a.size, a.dtype)
                return np.concatenate([a, pad]).reshape(R, nb).astype(dt)
            amax_out = fill(famax, acc)
            sc = fill(scale_out.astype(acc) if K else scale_out, acc).astype(np.asarray(scale_out).dtype)
            return nqb_returned(qv, qdt, sc, amax_out, ts, call, s, acc)
        yb, amax = padded_blocks(y, B, acc)
        S, scale_out, ts = self._nqb_scales37(fmt, amax, rule, qmax, emax, cfg, inp, acc, b)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        if b == "nqb_fp4_via_e4m3_double_rounding" and qdt == np.dtype(ml_dtypes.float4_e2m1fn):
            qv = qv.astype(ml_dtypes.float8_e4m3fn).astype(acc)       # the first of two roundings
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln37(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln37(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_gain_exp_of_scale" and gain is not None:
            gain = np.exp(gain - 1)                                   # exp(scale) where 1 + scale belongs
        mean = _rsum(x) / H
        var = _rsum((x - mean) ** 2) / H
        if b == "aln_eps_added_to_rstd":
            rstd = 1 / np.sqrt(var) + eps
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        rb, xb = rstd, xhat
        if b == "aln_bwd_rstd_from_unbiased_var" and H > 1:
            rb = 1 / np.sqrt(var * acc(H / (H - 1)) + eps)
            xb = (x - mean) * rb
        if b == "aln_bwd_proj_of_uncentred_x":
            dx = rstd * (g - _rsum(g) / H - xhat * rstd * (_rsum(g * x) / H))
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        trunc = b == "aln_dmod_bf16_truncated" and d == "bfloat16"
        if scale is not None:
            ds = per_sample(dy * xb, B, T, H)
            if b == "aln_gain_exp_of_scale":
                ds = ds * np.exp(scale.astype(acc).reshape(B, H))
            grads["scale"] = _toward_zero(ds, np_dtype(d)) if trunc else _store(ds, d)
        if shift is not None:
            dsh = per_sample(dy, B, T, H)
            grads["shift"] = _toward_zero(dsh, np_dtype(d)) if trunc else _store(dsh, d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_running_blend_in_input_dtype": ("batch_norm/mean1e3_train3_eval_bf16_6x3x5", "state.running_mean"),
    "bn_weight_abs_plus_eps": ("batch_norm/normal_eps0.3_n2_f64_2x2", "output.y"),
    "bn_dx_stored_channel_major": ("batch_norm/normal_eps0.3_n2_f64_2x2", "grad.x"),
    "bn_bwd_xhat_from_stored_output": ("batch_norm/normal_f16_8x2x4x4", "grad.x"),
    "bn_dbias_times_invstd": ("batch_norm/normal_eps0.3_n2_f64_2x2", "grad.bias"),
    "bn_dx_proj_of_uncentred_x": ("batch_norm/mean1e4_f64_6x4x25", "grad.x"),
    "bn_welford_count_in_half": ("batch_norm/mean1e3_noaffine_f16_4x1x128x130", "output.y"),
    "gn_bwd_c2_times_xhat": ("group_norm/normal_g2_f32_3x6", "grad.x"),
    "gn_bwd_weight_from_bias_ptr": ("group_norm/normal_g2_f32_3x6", "grad.x"),
    "gn_param_grads_swapped": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_bwd_rstd_default_eps": ("group_norm/normal_eps0.3_g3_f32_3x6x7", "grad.x"),
    "gn_folded_scale_shift_in_half": ("group_norm/normal_g5_bf16_2x5x3x4", "output.y"),
    "gn_dparams_stored_at_channel_in_group": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_bwd_weight_applied_twice": ("group_norm/normal_g2_f32_3x6", "grad.x"),
    "in_tail_tile_mean_over_tile_width": ("instance_norm/normal_f32_2x3x100", "output.mean"),
    "in_dparams_summed_over_channels": ("instance_norm/normal_f64_3x2x7", "grad.weight"),
    "in_mean_output_is_running_mean": ("instance_norm/normal_train3_eval_f32_4x3x6", "output.mean"),
    "in_eval_running_at_sample_index": ("instance_norm/normal_eval_f32_2x3x4x4", "output.y"),
    "in_weight_plus_one_flag_set": ("instance_norm/normal_f64_3x2x7", "output.y"),
    "zs_f64_std_by_sqrtf": ("z_score/normal_f64_9x7", "output.std"),
    "zs_zero_std_replaced_by_one": ("z_score/normal_eps0.3_f32_9x7", "output.y"),
    "zs_y_axes_restored_transposed": ("z_score/normal_dim23_f32_2x3x5x6", "output.y"),
    "zs_eps_added_twice": ("z_score/normal_eps0.3_f32_9x7", "output.std"),
    "lp_bwd_dot_per_chunk": ("lp_normalize/normal_f32_6x100", "grad.x"),
    "lp_rows_read_column_major": ("lp_normalize/normal_f32_9x7", "output.y"),
    "lp_onnx_zero_slice_grad_passthrough": ("lp_normalize/zero_onnx_bf16_3x7", "grad.x"),
    "lp_bwd_dot_over_all_slices": ("lp_normalize/normal_f32_9x7", "grad.x"),
    "gns_group_pair_first_rstd": ("group_norm_silu/normal_g2_f32_3x6", "output.rstd"),
    "gns_affine_indexed_by_group": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_eps_cast_to_input_dtype": ("group_norm_silu/normal_eps0.3_g4_bf16_2x8x5x7", "output.rstd"),
    "gns_bwd_xhat_from_p_weight_not_divided": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_fused_shift_without_weight": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "nqb_fp4_via_e4m3_double_rounding": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.q"),
    "nqb_blocks_over_flat_buffer": ("norm_quant_block/normal_rms_g_f32_3x200", "output.scale"),
    "nqb_nvfp4_zero_block_scale_min_subnormal": ("norm_quant_block/zero_runs_rms_nvfp4_bf16_4x512", "output.scale"),
    "nqb_residual_added_twice": ("norm_quant_block/normal_rms_g_res_f64_2x96", "output.residual_out"),
    "nqb_nvfp4_block_scale_pow2": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.scale"),
    "aln_eps_added_to_rstd": ("adaptive_layer_norm/normal_eps0.3_f32_1x10x24", "output.rstd"),
    "aln_bwd_rstd_from_unbiased_var": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_dmod_bf16_truncated": ("adaptive_layer_norm/normal_bf16_2x8x32", "grad.scale"),
    "aln_bwd_proj_of_uncentred_x": ("adaptive_layer_norm/mean1e3_f64_2x3x8", "grad.x"),
    "aln_gain_exp_of_scale": ("adaptive_layer_norm/normal_f64_2x5x7", "output.y"),
}
