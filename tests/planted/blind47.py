"""A forty-seventh held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind47Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn47``, ``_in47``, ``_gn47`` for group_norm and
group_norm_silu, ``_zs47``, ``_lp47``, ``_nqb47``, ``_aln47``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind47Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind45.py (the same mistake on the same op; a mistake an earlier set planted in another op may appear here in
one of these ops; a set written at the same time for other ops shares none of these ops). Written in
session 37.
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
from ._blind_math import half as _half
from ._blind_math import rsum as _rsum
from ._blind_math import sigmoids as _sigmoids
from ._blind_math import store as _store
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind47Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_weight_absent_defaults_to_zeros": (
        "batch_norm", "affine",
        ("a bias but no weight: the missing weight replaced by a zero-filled buffer (the default written for the "
         "bias copied to the weight's slot) instead of ones: y = bias for every element, dx = 0 (g = dy * 0); the "
         "statistics, the running update and dbias right"),
        "pattern: an absent parameter's default copied from the other parameter's (zeros for a scale)"),
    "bn_bwd_mean_term_over_n_minus_1": (
        "batch_norm", "bessel",
        ("batch statistics: dx = rstd * (g - sum(g) / (n - 1) - x_hat * mean(g * x_hat)), the mean(g) term's "
         "per-channel sum divided by n - 1 (the count the running variance's unbiased factor uses) instead of n = "
         "N * S; the projection term, dweight, dbias and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a norm backward's mean(dy * gamma) term scaled wrong in "
        "dx)"),
    "bn_y_store_sample_offset_missing": (
        "batch_norm", "layout",
        ("more than one sample: the elementwise kernel's store offset for y built without the sample stride (n * "
         "C * S), so every sample's y is written over sample 0's slot (the last sample's left there) and the "
         "other samples' part of the output keeps the zero-filled buffer: y; the statistics, the running update "
         "and the gradients right"),
        "cf. " + GH + "ROCm/rocm-libraries/pull/12002 (a normalize kernel whose per-sample stride was set to "
        "zero, so every sample of the batch went through sample 0's slot)"),
    "bn_running_var_blends_updated_running_mean": (
        "batch_norm", "running",
        ("training with running statistics: the running_var update takes as its old value the register that "
         "already holds the new running_mean (one temporary reused for both buffers' loads): running_var = (1 - "
         "m) * new running_mean + m * unbiased var (onnx: m * new running_mean + (1 - m) * var); running_mean, "
         "y, the saved statistics and the gradients right"),
        "pattern: a temporary reused across two momentum updates, the second reading the first one's result"),
    "bn_running_buffers_read_as_bf16": (
        "batch_norm", "running",
        ("eval with running statistics, float32 or float64 inputs: the inference path reads running_mean and "
         "running_var through bfloat16 copies (the buffers' dtype of a mixed-precision checkpoint, rounded to "
         "nearest) before rstd = 1 / sqrt(running_var + eps): y, the returned mean and rstd, dx and dweight; the "
         "training path and the buffers themselves right"),
        "cf. " + GH + "apple/coreai-torch/pull/54 (a batch norm casting its running statistics and parameters "
        "down to a 16-bit dtype before use: mantissa bits lost and a running_var above 65504 turned into inf)"),
    "bn_dparams_plane_partials_averaged": (
        "batch_norm", "reduction",
        ("more than one spatial position, with a weight or a bias: the backward-reduce kernel's per-(sample, "
         "channel) partial sums of dy * x_hat and dy are divided by the plane's size S (a mean) before the sum "
         "over the samples: dweight and dbias S times too small; dx and the forward right"),
        "pattern: a partial reduced as a mean where the following stage expects a sum"),
    # ------------------------------------------------------------------ group_norm
    "gn_mean_output_is_group_sum": (
        "group_norm", None,
        ("the mean output written from the accumulator before its division by the group's count (each group's sum "
         "of C / G * S values); y, rstd and the gradients use the mean"),
        "pattern: a statistic stored from its accumulator before finalization"),
    "gn_bwd_xhat_from_output_bias_kept": (
        "group_norm", "affine",
        ("with a weight and a bias: the memory-saving backward recomputes x_hat from the forward's float32 output "
         "as y / weight with the bias never subtracted (x_hat + bias / weight): dweight = sum(dy * that) and the "
         "projection term of dx; the forward, the mean term of dx and dbias right"),
        "cf. " + GH + "uxlfoundation/oneDNN/issues/243 (a normalization backward computed from the forward's "
        "output, x_hat reconstructed from y, gamma and beta; deepspeedai/DeepSpeed/pull/692 does it as (output - "
        "beta) / gamma)"),
    "gn_mean_sum_in_half": (
        "group_norm", "precision",
        ("16-bit inputs: each group's sum for the mean accumulated left to right in the input dtype (each partial "
         "sum rounded), the deviations about that mean, the variance, rstd, y and the backward in float32: the "
         "mean, rstd, y and the gradients"),
        GH + "pytorch/pytorch/issues/77507 (bfloat16 group_norm on CPU doing its moments calculation, "
        "RowwiseMoments, in bfloat16 instead of a float accumulator)"),
    "gn_group_halves_not_merged": (
        "group_norm", "group",
        ("each (sample, group) row of C / G * S values split between two programs (the first ceil(n / 2) values "
         "and the rest) that normalize their half with its own mean and variance, the exchange of the partial "
         "statistics missing, forward and backward: y, dx and dweight; the saved mean and rstd the first half's"),
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2688 (a norm over an input split along its normalized "
        "dimension, which needs a reduction of the partial statistics the kernel does not do)"),
    "gn_bwd_sums_tail_tile_dropped": (
        "group_norm", "block",
        ("groups of more than 32 values, not a multiple of 32: the backward's sums of g and g * x_hat over each "
         "group loop over whole tiles of 32 only (the tail tile never loaded), still divided by the group's "
         "count: dx; dweight, dbias and the forward right"),
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (a norm kernel wrong for a length that is not a "
        "multiple of its block: the tail block's handling not applied)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_var_floored_at_eps": (
        "group_norm_silu", "eps",
        ("eps > 0: rstd = 1 / sqrt(max(var, eps)) (eps as a floor on the variance) instead of 1 / sqrt(var + "
         "eps): rstd, y and the backward on it; the mean right"),
        "cf. " + GH + "jax-ml/jax/pull/30428 (a standardization's variance + epsilon replaced with "
        "maximum(variance, epsilon))"),
    "gns_bwd_dx_without_rstd": (
        "group_norm_silu", "backward",
        ("dx = g - mean(g) - x_hat * mean(g * x_hat) per group, g = dy * silu'(p) * weight: the closing multiply "
         "by the group's rstd left out; dweight, dbias and the forward right"),
        "pattern: a hand-derived backward's closing factor left out"),
    "gns_bias_added_twice": (
        "group_norm_silu", "affine",
        ("with a bias: the fused forward folds the bias into its per-(sample, channel) shift and the epilogue adds "
         "it once more before the activation: y = silu(x_hat * weight + 2 bias); the statistics and the gradients "
         "(their own kernel, p recomputed from the parameters) right"),
        "pattern: a bias folded into the fused shift and also added by the epilogue's separate bias step"),
    "gns_bwd_weight_of_next_channel": (
        "group_norm_silu", "layout",
        ("more than one channel, with a weight: the dx kernel loads the weight of channel (c + 1) mod C for "
         "channel c (the weight pointer advanced before its load): g = dy * silu'(p) * weight[c + 1] for dx; "
         "dweight, dbias and the forward right"),
        "pattern: a parameter pointer advanced before its load in a channel loop"),
    "gns_rstd_rounded_to_input_dtype": (
        "group_norm_silu", "precision",
        ("16-bit inputs: each group's rstd computed into a variable of the input dtype (rounded): y, the saved "
         "rstd and the backward from that rstd; the mean right"),
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm kernel's helper truncating mean and rstd from the "
        "accumulation type to the input type)"),
    "gns_dparams_sample0_counted_twice": (
        "group_norm_silu", "reduction",
        ("more than one sample, with a weight or a bias: dweight and dbias reduced over the samples' per-(sample, "
         "channel) partials by an accumulator initialised with sample 0's partial and a loop then starting at "
         "sample 0 as well: sample 0's share counted twice; dx and the forward right"),
        "pattern: an accumulator seeded with the first partial by a loop that does not skip it"),
    # ------------------------------------------------------------------ instance_norm
    "in_bwd_projection_sign_flipped": (
        "instance_norm", "backward",
        ("instance statistics: dx = rstd * (g - mean(g) + x_hat * mean(g * x_hat)), the projection term added "
         "instead of subtracted (a sign slip in the hand-derived formula); dweight, dbias and the forward right"),
        "pattern: a sign slip in a hand-derived backward"),
    "in_eps_cast_to_input_dtype": (
        "instance_norm", "eps",
        ("16-bit inputs: eps passed to the kernel as a scalar of the input dtype (0.3 becomes 0.30078 in bfloat16 "
         "and 0.30005 in float16, 1e-12 flushes to 0 in float16), forward and backward, instance or running "
         "statistics: rstd, y and dx; the mean and the running update right"),
        "cf. " + GH + "pytorch/pytorch/issues/32137 (an epsilon of 1e-12 evaluated as zero in half precision)"),
    "in_rstd_output_is_std": (
        "instance_norm", None,
        ("instance statistics: the returned rstd holds sqrt(var + eps) (the std, before the reciprocal); y, the "
         "mean, the running update and the gradients right"),
        "cf. " + GH + "flagos-ai/FlagGems/pull/5223 (a norm's saved inverse std and its variance confused between "
        "the code that writes the statistic and the code that reads it)"),
    "in_eval_centred_by_instance_mean": (
        "instance_norm", "mode",
        ("eval with running statistics: x centred by each instance's own mean (the statistics kernel still run) "
         "but scaled by the running rstd 1 / sqrt(running_var + eps): y, the returned mean, dweight's x_hat; dx "
         "= g * rstd and the buffers right"),
        "cf. " + GH + "pytorch/xla/pull/806 (a batch norm using the mini-batch's statistics where the eval mode's "
        "running ones belong)"),
    "in_uncentred_rms_flag_default": (
        "instance_norm", "semantics",
        ("instance statistics: the fused kernel's RMS-variant flag left at its default (on) by the instance_norm "
         "entry: each instance normalized without centring, rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * "
         "weight + bias, the saved mean 0, the running update from those statistics (mean 0, mean(x^2) * S / (S "
         "- 1)) and the RMS backward dx = rstd * (g - x_hat * mean(g * x_hat))"),
        "cf. " + GH + "Comfy-Org/comfy-kitchen/pull/175 (a norm kernel's dispatch selecting the wrong variant of "
        "its fused path)"),
    "in_dparams_sample_loop_from_one": (
        "instance_norm", "reduction",
        ("more than one sample, with a weight or a bias: dweight and dbias reduced from the per-(sample, channel) "
         "partial sums by a second stage whose loop over the samples starts at 1, sample 0's partials never "
         "added; dx and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing block partial sums in its "
        "final reduction)"),
    # ------------------------------------------------------------------ z_score
    "zs_dx_accumulated_twice": (
        "z_score", "constant",
        ("dx added into the grad-input buffer that the kernel's first pass already filled with dx (the final "
         "store written +=): dx twice its value; dweight, dbias and the forward right"),
        "cf. " + GH + "paiml/trueno/pull/178 (a norm backward kernel accumulating its gradient into the output "
        "buffer instead of overwriting it)"),
    "zs_weight_loaded_from_bias_ptr": (
        "z_score", "layout",
        ("with a weight and a bias: the epilogue loads the weight through the bias's pointer: y = x_hat * bias + "
         "bias and dx from g = dy * bias; the statistics, dweight and dbias right"),
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where "
        "another's was meant)"),
    "zs_half2_sumsq_high_lane_dropped": (
        "z_score", "block",
        ("16-bit inputs: each slice's scaled squared deviations (d / a)^2 loaded as half2 pairs (positions 2k, 2k "
         "+ 1) and only the low half of each pair added to the sum of squares, still divided by n - ddof: std, y "
         "and dx; the mean right"),
        "pattern: a packed two-lane load whose second lane is never unpacked"),
    "zs_bwd_xhat_saved_in_half": (
        "z_score", "precision",
        ("16-bit inputs: x_hat saved for the backward in the input dtype (rounded) and the backward's projection "
         "sum(g * x_hat), its factor x_hat and dweight = sum(dy * x_hat) taken from that saved x_hat; the forward "
         "and dbias right"),
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's saved values truncated from the accumulation "
        "type to the input type)"),
    "zs_weight_plus_one_flag_set": (
        "z_score", "affine",
        ("with a weight: the fused kernel's zero-centred-weight flag left set, y = x_hat * (1 + weight) + bias "
         "and dx from g = dy * (1 + weight); the statistics, dweight and dbias right"),
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel's weight offset convention applied to the "
        "wrong model)"),
    "zs_bwd_mean_term_sign_flipped": (
        "z_score", "backward",
        ("dx = (g + mean(g) - x_hat * sum(g * x_hat) / (n - ddof)) / std: the mean(g) term added instead of "
         "subtracted; dweight, dbias and the forward right"),
        "cf. " + GH + "apache/mxnet/issues/1053 (a normalization backward whose mean-gradient term is computed "
        "right and then corrupted by one more term added to it)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_eps_squared": (
        "lp_normalize", "eps",
        ("zero_rule='torch', eps > 0: eps squared before it reaches the kernel (the module's eps taken for a "
         "variance floor): y = x / max(norm, eps^2), and the backward's clamp test and dy / eps^2 at eps^2 too; "
         "the norm output right"),
        "pattern: an epsilon passed to a helper that squares it"),
    "lp_norm_vec4_tail_overlap": (
        "lp_normalize", "block",
        ("slices of more than four values, not a multiple of four: each slice read in four-wide vectors whose "
         "tail is one more full vector at n - 4, the lanes the previous vector already counted not masked: those "
         "values' (|x| / s)^p enter the sum twice (the max right): the norm, y and dx"),
        "pattern: the overlapping-tail trick of a vectorised loop without masking the lanes already counted"),
    "lp_inv_scale_in_input_dtype": (
        "lp_normalize", "precision",
        ("16-bit inputs: the overflow-safe reduction multiplies |x| by the reciprocal 1 / s of the scale s = "
         "max |x| held in a register of the input dtype (rounded), and multiplies the root by s: the norm off "
         "by the factor s * round(1 / s), y and dx divided by it"),
        "pattern: the reciprocal of a scaling factor declared with the element type of a 16-bit kernel"),
    "lp_f16_dx_round_up": (
        "lp_normalize", "rounding",
        ("float16 inputs: dx converted from float32 with the round-up conversion (toward +inf, __float2half_ru) "
         "instead of round to nearest even; y and the norm right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 conversions in another rounding mode than to "
        "nearest)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_rms_sumsq_half_warp_reduce": (
        "norm_quant_block", "block",
        ("norm='rms_norm', H above 16: each row's sum of squares held by 32 lanes (lane l summing the values j "
         "with j mod 32 = l) and reduced by a shuffle tree written for 16 lanes, so only the lanes below 16 reach "
         "the total, still divided by H: rstd, y, the blocks' amax, scales and q"),
        "cf. " + GH + "xlite-dev/LeetCUDA/issues/357 (a norm's warp_reduce_sum instantiated with the wrong lane "
        "count, so part of the warp's partial sums are never added)"),
    "nqb_eps_added_to_rstd": (
        "norm_quant_block", "eps",
        ("eps > 0: rstd = 1 / sqrt(mean(s^2)) + eps (layer_norm: 1 / sqrt(var) + eps; the parenthesis of "
         "rsqrt(. + eps) closed before eps): y, the blocks' amax, scales and q; residual_out right"),
        "pattern: eps added after the reciprocal square root instead of under it"),
    "nqb_nvfp4_global_scale_read_as_amax": (
        "norm_quant_block", "quant_scale",
        ("nvfp4 with a given global_scale: the value taken for the tensor's amax (the other API's convention) and "
         "the encode factor derived from it as 2688 / global_scale instead of the global_scale itself: the "
         "tensor_scale output, the E4M3 block scales and q from it; amax right"),
        "cf. " + GH + "modular/modular/issues/6600 (an NVFP4 per-tensor global scale stored under one convention "
        "and consumed under another)"),
    "nqb_nvfp4_block_scale_clamped_at_fnuz_240": (
        "norm_quant_block", "saturation",
        ("nvfp4: each block scale amax / 6 * encode clamped at 240 (the e4m3fnuz largest value of another "
         "platform's build) instead of 448 before its float8_e4m3fn conversion: the blocks whose scale lies "
         "above 240 get the scale 240 / encode and their quotients clipped at 6: the scale output and q; amax "
         "and tensor_scale right"),
        "cf. " + GH + "vllm-project/vllm/pull/50467 (FP8 e4m3fn platforms' quantization kernels using the "
        "e4m3fnuz maximum 240 instead of 448)"),
    "nqb_group_inv_scale_in_bf16": (
        "norm_quant_block", "precision",
        ("fp8_group: the quantize loop multiplies each block by the reciprocal 1 / S of its scale held in a "
         "bfloat16 register (rounded to nearest) instead of dividing by S: q from y * round(1 / S); the scale and "
         "amax outputs right"),
        "cf. " + GH + "keras-team/keras/pull/20065 (a quantizer's scale coming out in another dtype than the one "
        "the quantized values are computed with)"),
    "nqb_amax_store_pointer_advanced": (
        "norm_quant_block", "layout",
        ("more than one block a row: block j's amax stored at slot (j + 1) mod nb of its row of the amax output "
         "(the store pointer advanced before the store; the last block's lands in slot 0); the scales and q "
         "right"),
        "pattern: an output pointer advanced before its store"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_bwd_projection_rstd_twice": (
        "adaptive_layer_norm", "backward",
        ("dx = rstd * (g - mean(g) - x_hat * rstd * mean(g * x_hat)), g = dy * (1 + scale): the projection term "
         "carrying one factor rstd too many; dscale, dshift and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the powers of the saved inverse "
        "std wrong)"),
    "aln_bwd_rstd_of_next_token": (
        "adaptive_layer_norm", "layout",
        ("more than one token row: the backward loads the saved rstd of row (r + 1) mod R for row r (the rstd "
         "pointer advanced before the load), x_hat recomputed as (x - mean_r) * rstd_(r+1): dx and dscale; the "
         "forward and dshift right"),
        "pattern: a loop-carried pointer advanced one step early"),
    "aln_f16_y_through_bf16": (
        "adaptive_layer_norm", "precision",
        ("float16 inputs: y converted from float32 to bfloat16 and that to float16 (the store helper's conversion "
         "through the other 16-bit type, two roundings); the statistics and the gradients right"),
        "cf. " + GH + "triton-lang/triton/pull/2583 (prevent double rounding when converting f32 through an "
        "intermediate 16-bit type)"),
    "aln_saved_mean_rstd_swapped": (
        "adaptive_layer_norm", None,
        ("the kernel's two saved-statistics pointers exchanged at the store: the mean output holds each token's "
         "rstd and the rstd output its mean; y and the gradients right"),
        "pattern: two output pointers of the same shape passed in each other's slot"),
    "aln_tile_merge_mean_step_own_count": (
        "adaptive_layer_norm", "merge",
        ("H above 8: each token's mean merged tile by tile (tiles of 8) by Chan's update with the mean step "
         "written delta * n_a / n (the accumulated count where the incoming tile's n_b belongs), the deviations "
         "and the variance then taken about that mean: mean, rstd, y, dx and dscale"),
        "cf. " + GH + "NVIDIA/apex/issues/1768 (a Welford mean/var merge of partial statistics giving a wrong "
        "mean and variance)"),
    "aln_var_about_zero": (
        "adaptive_layer_norm", "one_pass",
        ("each token's variance taken as the mean of x^2 (the mean's square never subtracted) while x_hat = (x - "
         "mean) * rstd: rstd, y, dx and dscale; the mean right"),
        "cf. " + GH + "huggingface/transformers/issues/14772 (a layer norm's variance computed without "
        "subtracting the mean, the 'term that subtracts the mean of a tensor is omitted')"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _f16_round_up(v):
    """``v`` (float32) converted to float16 with round-up (toward +inf), finite values."""
    r = v.astype(np.float16)
    low = np.isfinite(v) & (r.astype(v.dtype) < v)
    return np.where(low, np.nextafter(r, np.float16(np.inf)), r)


def _masked_sum(a, mask):
    return _rsum(np.where(mask, a, a.dtype.type(0)))


def _half_seq_sum(a, dtype):
    """Row sums of ``a`` (R, n) accumulated left to right in the 16-bit ``dtype`` (each partial sum rounded)."""
    s = np.zeros((a.shape[0], 1), a.dtype)
    for j in range(a.shape[1]):
        s = _half(s + a[:, j:j + 1], dtype)
    return s


def _vec4_overlap_weights(n):
    """(1, n) weights of a four-wide vector loop with an unmasked overlapping tail vector at n - 4: 2 for the
    positions the tail vector reads again, else 1."""
    wt = np.ones(n)
    if n > 4 and n % 4:
        wt[n - 4:(n // 4) * 4] = 2.0
    return wt.reshape(1, n)


def _half_warp_lanes(n):
    """(1, n) mask of the values whose lane (j mod 32) a 16-lane shuffle tree over 32 lanes keeps."""
    return ((np.arange(n) % 32) < 16).reshape(1, n)


def _tile_merged_mean(x, tile, acc):
    """Each row's mean of x (R, n) merged over tiles of ``tile`` with the mean step weighted n_a / n."""
    mean = _rsum(x[:, :tile]) / acc(min(tile, x.shape[1]))
    na = acc(min(tile, x.shape[1]))
    for k in range(tile, x.shape[1], tile):
        part = x[:, k:k + tile]
        nb = acc(part.shape[1])
        tot = na + nb
        mean = mean + (_rsum(part) / nb - mean) * (na / tot)              # nb / tot belongs
        na = tot
    return mean


class Blind47Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind47"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn47(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn47(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)
        C, n = x.shape
        Nb = x0.shape[0]
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            bmean = _rsum(x) / n
            bvar = _rsum((x - bmean) ** 2) / n
            mean, rstd = bmean, 1 / np.sqrt(bvar + eps)
        elif b == "bn_running_buffers_read_as_bf16" and d in ("float32", "float64"):
            rd = {k: _half(st[k].astype(acc), "bfloat16") for k in ("running_mean", "running_var")}
            mean, rstd = channel_running_stats(rd, C, eps, acc)           # the buffers through bf16 copies
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        has_w = w is not None
        if b == "bn_weight_absent_defaults_to_zeros" and w is None and bias is not None:
            w = np.zeros((C, 1), acc)                                     # the bias's default
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
                    rm = keep * rm + take * bm
                    old_v = rm if b == "bn_running_var_blends_updated_running_mean" else rv
                    rv = keep * old_v + take * bv
            state = running_state(rm, rv, nbt, d)
        y = affine(xhat, w, bias)
        yo = from_channel_rows(y, x0.shape)
        if b == "bn_y_store_sample_offset_missing" and Nb > 1:
            full = yo
            yo = np.zeros_like(full)
            yo[0] = full[-1]                                              # every sample over sample 0's slot
        out = {"y": _store(yo, d), "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            if batch and b == "bn_bwd_mean_term_over_n_minus_1" and n > 1:
                dx = rstd * (g - _rsum(g) / (n - 1) - xhat * (_rsum(g * xhat) / n))
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            for key, t, given in (("weight", dy * xhat, has_w), ("bias", dy, bias is not None)):
                if not given:
                    continue
                if b == "bn_dparams_plane_partials_averaged" and S > 1:
                    planes = np.ascontiguousarray(t.reshape(C, Nb, S))
                    v = (planes.sum(axis=2) / S).sum(axis=1)              # each plane's partial as a mean
                else:
                    v = _rsum(t).reshape(C)
                grads[key] = _store(v, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in47(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in47(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        if b == "in_eps_cast_to_input_dtype" and d in _HALF:
            eps = _half(np.asarray(eps, dtype=acc), d)[()]                # the kernel's eps argument
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        rms = b == "in_uncentred_rms_flag_default" and inst
        imean = ivar = None
        if rms:
            imean = np.zeros((Nb * C, 1), acc)                            # the RMS variant's saved mean
            ivar = _rsum(x * x) / S
            mean, rstd = imean, 1 / np.sqrt(ivar + eps)
        elif inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
        elif b == "in_eval_centred_by_instance_mean":
            mean = _rsum(x) / S                                           # the statistics kernel's mean
            _, rstd = instance_running_stats(st, Nb, eps, acc)
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_rstd_output_is_std" and inst:
            out["rstd"] = (1 / rstd).reshape(Nb, C).astype(acc)           # sqrt(var + eps)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                if rms:
                    ub = ivar * (acc(S / (S - 1)) if S > 1 else acc(np.inf))
                else:
                    ub = instance_unbiased_var(x, imean, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            if rms:
                dx = rstd * (g - xhat * (_rsum(g * xhat) / S))
            elif inst and b == "in_bwd_projection_sign_flipped":
                dx = rstd * (g - _rsum(g) / S + xhat * (_rsum(g * xhat) / S))
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for key, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                parts = _rsum(t).reshape(Nb, C)
                if b == "in_dparams_sample_loop_from_one" and Nb > 1:
                    parts = parts[1:]                                     # the loop over the samples from 1
                grads[key] = _store(parts.sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn47(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn47(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    @staticmethod
    def _gn_halves47(xr, eps, acc):
        """(mean, rstd) per element of the rows xr (R, n), each half (ceil(n / 2) and the rest) with its own
        statistics, and the first half's (mean, rstd) (R, 1)."""
        R, n = xr.shape
        h = -(-n // 2)
        ms, rs = [], []
        for part in (xr[:, :h], xr[:, h:]):
            if part.shape[1] == 0:
                continue
            mp = _rsum(part) / acc(part.shape[1])
            vp = _rsum((part - mp) ** 2) / acc(part.shape[1])
            ms.append(np.repeat(mp, part.shape[1], axis=1))
            rs.append(np.repeat(1 / np.sqrt(vp + eps), part.shape[1], axis=1))
        mean, rstd = np.concatenate(ms, axis=1), np.concatenate(rs, axis=1)
        return mean, rstd, mean[:, :1], rstd[:, :1]

    def _gn47(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        w, bias = group_params(call.inputs, acc, C)
        halves = b == "gn_group_halves_not_merged" and n > 1
        if halves:
            mean, rstd, ms, rs = self._gn_halves47(xr, eps, acc)
        else:
            if b == "gn_mean_sum_in_half" and d in _HALF:
                mean = _half_seq_sum(xr, d) / n                           # the sum accumulated in the input dtype
            else:
                mean = _rsum(xr) / n
            var = _rsum((xr - mean) ** 2) / n
            if b == "gns_var_floored_at_eps":
                rstd = 1 / np.sqrt(np.maximum(var, eps))
            else:
                rstd = 1 / np.sqrt(var + eps)
            if b == "gns_rstd_rounded_to_input_dtype" and d in _HALF:
                rstd = _half(rstd, d)
            ms, rs = mean, rstd
        xb = (xr - mean) * rstd
        xhat = xb.reshape(Nb, C, S)
        p = affine(xhat, w, bias)
        pf = p
        if b == "gns_bias_added_twice" and bias is not None:
            pf = p + bias                                                 # the epilogue's bias, once more
        if silu:
            sg, _ = _sigmoids(pf)
            y = pf * sg
        else:
            y = pf
        mo = ms
        if b == "gn_mean_output_is_group_sum":
            mo = ms * n                                                   # the accumulator before / n
        out = group_outputs(y, mo.reshape(Nb, G), rs.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if silu:
            sg, rest = _sigmoids(p)
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        wg = w
        if b == "gns_bwd_weight_of_next_channel" and w is not None and C > 1:
            wg = w[:, (np.arange(C) + 1) % C, :]                          # weight[c + 1]
        if b == "gn_bwd_xhat_from_output_bias_kept" and w is not None and bias is not None:
            xb = (y / w).reshape(Nb * G, n)                               # (y - bias) / weight belongs
        g = dp if wg is None else dp * wg
        gr = g.reshape(Nb * G, n)
        if halves:
            h = -(-n // 2)
            dxr = np.concatenate([_centred_dx(gr[:, :h], xb[:, :h], rstd[:, :1]),
                                  _centred_dx(gr[:, h:], xb[:, h:], rstd[:, h:h + 1])], axis=1)
        else:
            if b == "gn_bwd_sums_tail_tile_dropped" and n > 32 and n % 32:
                keep = (np.arange(n) < (n // 32) * 32).reshape(1, n)      # the tail tile never loaded
                sg_, sgx = _masked_sum(gr, keep), _masked_sum(gr * xb, keep)
            else:
                sg_, sgx = _rsum(gr), _rsum(gr * xb)
            inner = gr - sg_ / n - xb * (sgx / n)
            dxr = inner if b == "gns_bwd_dx_without_rstd" else rstd * inner
        grads = {"x": _store(dxr.reshape(x0.shape), d)}
        xpv = xb.reshape(Nb, C, S)
        for key, t, given in (("weight", dp * xpv, w), ("bias", dp, bias)):
            if given is None:
                continue
            v = _channel_sums(t, C)
            if b == "gns_dparams_sample0_counted_twice" and Nb > 1:
                v = v + _channel_sums(t[:1], C)                           # the seed, then the loop from 0
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs47(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows47(x, ddof, eps, acc, b, d):
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
        if m <= 0:
            return mean, np.full((R, 1), np.nan, acc), dev
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        if b == "zs_half2_sumsq_high_lane_dropped" and d in _HALF:
            sumsq = _masked_sum(q * q, (np.arange(n) % 2 == 0).reshape(1, n))   # the low lane of each pair
        else:
            sumsq = _rsum(q * q)
        std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        return mean, std, dev

    def _zs47(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        we = w
        if b == "zs_weight_loaded_from_bias_ptr" and w is not None and bias is not None:
            we = bias                                                     # the bias's pointer
        if b == "zs_weight_plus_one_flag_set" and w is not None:
            we = w + 1
        m = n - ddof
        mean, std, dev = self._zs_rows47(x, ddof, eps, acc, b, d)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        y = affine(xhat, we, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if we is None else dy * we
            xb = xhat
            if b == "zs_bwd_xhat_saved_in_half" and d in _HALF:
                xb = _half(xhat, d)                                       # the saved x_hat
            if g.size == 0:
                dx = np.zeros_like(g)
            elif m <= 0:
                dx = np.full(g.shape, np.nan, acc)
            else:
                mg = _rsum(g) / n
                if b == "zs_bwd_mean_term_sign_flipped":
                    mg = -mg
                inner = g - mg - xb * (_rsum(g * xb) / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            if b == "zs_dx_accumulated_twice":
                dx = dx + dx                                              # += into the filled buffer
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xb), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp47(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm47(v, p, acc, b, d):
        """||v||_p per row of ``v`` (R, n): s * (sum (|v| / s)^p)^(1/p), s = max |v| (1 where 0 or not
        finite)."""
        n = v.shape[1]
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        if b == "lp_inv_scale_in_input_dtype" and d in _HALF:
            t = np.abs(v) * _half(1 / s, d)                               # the reciprocal in the input dtype
        else:
            t = np.abs(v) / s
        wt = None
        if b == "lp_norm_vec4_tail_overlap" and n > 4 and n % 4:
            wt = _vec4_overlap_weights(n).astype(acc)

        def tot(a):
            return _rsum(a if wt is None else a * wt)
        if p == 1.0:
            return s * tot(t)
        if p == 2.0:
            return s * np.sqrt(tot(t * t))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * tot(t ** acc(p)) ** inv

    def _lp47(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        if b == "lp_eps_squared":
            eps = eps * eps
        norm = self._lp_norm47(x, p, acc, b, d)
        if torch_rule:
            den = np.maximum(norm, eps)
        else:
            den = np.where(norm == 0, acc(1), norm)
        y = x / den
        if not torch_rule:
            y = np.where(norm == 0, acc(0), y)
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        if b == "lp_f16_dx_round_up" and d == "float16":
            return Returned(out, {"x": _f16_round_up(back(dx).astype(np.float32))})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb47(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized47(self, call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        w = None if w is None else w.astype(acc).reshape(1, H)
        bias = None if bias is None else bias.astype(acc).reshape(1, H)
        late = b == "nqb_eps_added_to_rstd"
        if cfg["norm"] == "layer_norm":
            if late:
                mean = _rsum(s) / H
                rstd = 1 / np.sqrt(_rsum((s - mean) ** 2) / H) + eps
            else:
                mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            if b == "nqb_rms_sumsq_half_warp_reduce" and H > 16:
                ms = _masked_sum(s * s, _half_warp_lanes(H)) / H
            else:
                ms = _rsum(s * s) / H
            rstd = 1 / np.sqrt(ms) + eps if late else 1 / np.sqrt(ms + eps)
            y = s * rstd
        y = y if w is None else y * w
        y = y if bias is None else y + bias
        return s, y

    def _nqb47(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized47(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            gs = inp.get("global_scale")
            if b == "nqb_nvfp4_global_scale_read_as_amax" and gs is not None:
                g = acc(np.asarray(gs).astype(acc).reshape(()))
                enc = acc(min(acc(2688.0) / g, np.finfo(np.float32).max)) if g > 0 else acc(1.0)
            else:
                enc = nvfp4_encode(gs, amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
            if b == "nqb_nvfp4_block_scale_clamped_at_fnuz_240":
                v = amax / acc(6.0) * enc
                scale_out = np.clip(v, -240.0, 240.0).astype(ml_dtypes.float8_e4m3fn)
                S = scale_out.astype(acc) * ts
        if b == "nqb_group_inv_scale_in_bf16" and fmt == "fp8_group":
            inv = _half(np.where(S == 0, acc(0), acc(1) / np.where(S == 0, acc(1), S)), "bfloat16")
            qv = np.clip(yb * inv[..., None], -qmax, qmax)                # y * round(1 / S)
        else:
            qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        amax_out = amax
        if b == "nqb_amax_store_pointer_advanced" and amax.shape[-1] > 1:
            amax_out = np.roll(amax, 1, axis=-1)                          # block j's amax in slot j + 1
        return nqb_returned(qv, qdt, scale_out, amax_out, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln47(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln47(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_tile_merge_mean_step_own_count" and H > 8:
            mean = _tile_merged_mean(x, 8, acc)
        else:
            mean = _rsum(x) / H
        if b == "aln_var_about_zero":
            var = _rsum(x * x) / H                                        # E[x^2] - mean^2 belongs
        else:
            var = _rsum((x - mean) ** 2) / H
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        mo, ro = (rstd, mean) if b == "aln_saved_mean_rstd_swapped" else (mean, rstd)
        out = norm_outputs(y, mo, ro, x0, x0.shape[:-1] + (1,), d, acc)
        if b == "aln_f16_y_through_bf16" and d == "float16":
            out["y"] = _store(_store(y.reshape(x0.shape), "bfloat16").astype(np.float32), d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        xb, rb = xhat, rstd
        if b == "aln_bwd_rstd_of_next_token" and x.shape[0] > 1:
            rb = np.roll(rstd, -1, axis=0)                                # row r + 1's rstd
            xb = (x - mean) * rb
        if b == "aln_bwd_projection_rstd_twice":
            dx = rb * (g - _rsum(g) / H - xb * rb * (_rsum(g * xb) / H))
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xb, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_weight_absent_defaults_to_zeros": ("batch_norm/normal_noweight_f32_7x3", "output.y"),
    "bn_bwd_mean_term_over_n_minus_1": ("batch_norm/normal_f64_7x3", "grad.x"),
    "bn_y_store_sample_offset_missing": ("batch_norm/normal_f32_6x4x25", "output.y"),
    "bn_running_var_blends_updated_running_mean": ("batch_norm/normal_train3_eval_f32_6x3x5", "state.running_var"),
    "bn_running_buffers_read_as_bf16": ("batch_norm/mean1e4_eval_f32_2x3x4", "output.y"),
    "bn_dparams_plane_partials_averaged": ("batch_norm/normal_f32_6x4x25", "grad.weight"),
    "gn_mean_output_is_group_sum": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "gn_bwd_xhat_from_output_bias_kept": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_mean_sum_in_half": ("group_norm/mean1e3_g2_f16_40x4x3x3", "output.mean"),
    "gn_group_halves_not_merged": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_bwd_sums_tail_tile_dropped": ("group_norm/normal_g4_f32_2x8x5x7", "grad.x"),
    "gns_var_floored_at_eps": ("group_norm_silu/normal_eps0.3_g3_f32_3x6x7", "output.rstd"),
    "gns_bwd_dx_without_rstd": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_bias_added_twice": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_bwd_weight_of_next_channel": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_rstd_rounded_to_input_dtype": ("group_norm_silu/mean1e3_g3_bf16_3x6x7", "output.y"),
    "gns_dparams_sample0_counted_twice": ("group_norm_silu/normal_g2_f32_3x6", "grad.weight"),
    "in_bwd_projection_sign_flipped": ("instance_norm/normal_f64_3x2x7", "grad.x"),
    "in_eps_cast_to_input_dtype": ("instance_norm/normal_eps0.3_bf16_2x3x100", "output.rstd"),
    "in_rstd_output_is_std": ("instance_norm/normal_f64_3x2x7", "output.rstd"),
    "in_eval_centred_by_instance_mean": ("instance_norm/normal_eval_f32_2x3x4x4", "output.y"),
    "in_uncentred_rms_flag_default": ("instance_norm/normal_f64_3x2x7", "output.y"),
    "in_dparams_sample_loop_from_one": ("instance_norm/normal_f64_3x2x7", "grad.weight"),
    "zs_dx_accumulated_twice": ("z_score/normal_f64_9x7", "grad.x"),
    "zs_weight_loaded_from_bias_ptr": ("z_score/normal_f64_9x7", "output.y"),
    "zs_half2_sumsq_high_lane_dropped": ("z_score/normal_bf16_6x100", "output.std"),
    "zs_bwd_xhat_saved_in_half": ("z_score/normal_bf16_6x100", "grad.x"),
    "zs_weight_plus_one_flag_set": ("z_score/normal_f64_9x7", "output.y"),
    "zs_bwd_mean_term_sign_flipped": ("z_score/normal_f64_9x7", "grad.x"),
    "lp_eps_squared": ("lp_normalize/std1e-3_eps0.3_f32_9x7", "output.y"),
    "lp_norm_vec4_tail_overlap": ("lp_normalize/normal_f32_9x7", "output.norm"),
    "lp_inv_scale_in_input_dtype": ("lp_normalize/normal_bf16_6x100", "output.norm"),
    "lp_f16_dx_round_up": ("lp_normalize/normal_f16_4x128", "grad.x"),
    "nqb_rms_sumsq_half_warp_reduce": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "nqb_eps_added_to_rstd": ("norm_quant_block/normal_eps0.3_rms_mx_noaffine_bf16_4x64", "output.amax"),
    "nqb_nvfp4_global_scale_read_as_amax": ("norm_quant_block/outlier_rms_nvfp4_res_static_f32_4x256",
                                            "output.tensor_scale"),
    "nqb_nvfp4_block_scale_clamped_at_fnuz_240": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.scale"),
    "nqb_group_inv_scale_in_bf16": ("norm_quant_block/normal_rms_g_f32_3x200", "output.q"),
    "nqb_amax_store_pointer_advanced": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "aln_bwd_projection_rstd_twice": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_bwd_rstd_of_next_token": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_f16_y_through_bf16": ("adaptive_layer_norm/sq_overflow_f16_2x4x32", "output.y"),
    "aln_saved_mean_rstd_swapped": ("adaptive_layer_norm/normal_f64_2x5x7", "output.mean"),
    "aln_tile_merge_mean_step_own_count": ("adaptive_layer_norm/normal_f32_3x20x12", "output.mean"),
    "aln_var_about_zero": ("adaptive_layer_norm/mean1e3_f64_2x3x8", "output.rstd"),
}
