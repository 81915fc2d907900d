"""A forty-ninth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind49Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn49``, ``_in49``, ``_gn49`` for group_norm and
group_norm_silu, ``_zs49``, ``_lp49``, ``_nqb49``, ``_aln49``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind49Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind47.py (the same mistake on the same op; a mistake an earlier set planted in another op may appear here in
one of these ops; a set written at the same time for other ops shares none of these ops). Written in
session 38.
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
    padded_blocks,
    pow2,
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
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind49Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_param_grads_swapped": (
        "batch_norm", None,
        ("with a weight and a bias: the backward-reduce kernel's two per-channel results stored through each "
         "other's output pointer: dweight holds sum(dy) and dbias holds sum(dy * x_hat); dx, the forward, the "
         "saved statistics and the running update right"),
        "cf. " + GH + "tensorflow/tensorflow/issues/107705 (a fused batch norm backward returning a wrong gradient "
        "for the scale while dx is right)"),
    "bn_fused_relu_flag_default": (
        "batch_norm", "semantics",
        ("the entry point calls the fused BN + ReLU kernel with its activation flag left at the default (on): y = "
         "max(x_hat * weight + bias, 0) (batch or running statistics), and the backward masks dy by y > 0 before "
         "dx, dweight and dbias; the statistics and the running update right"),
        "pattern: a fused-activation flag left at the default of the kernel entry it was copied from"),
    "bn_running_mean_delta_sign_flipped": (
        "batch_norm", "running",
        ("training with running statistics: running_mean updated in the incremental form running_mean += "
         "factor * (delta) with delta written running_mean - batch mean (the operands of the difference "
         "exchanged): running_mean = running_mean + m * (running_mean - mean) (onnx: (1 - m) for the factor); "
         "running_var, num_batches_tracked, y, the saved statistics and the gradients right"),
        "cf. " + GH + "RLE-Foundation/rllte/issues/47 (a running-mean update written in the incremental "
        "mean + delta * factor form with the wrong term)"),
    "bn_dparams_tree_drops_odd_sample": (
        "batch_norm", "reduction",
        ("more than one sample, with a weight or a bias: dweight and dbias combine the per-(sample, channel) "
         "partial sums by a pairwise halving tree written for a power-of-two sample count: at every level with an "
         "odd count the last, unpaired partial is dropped (N = 7: only samples 0 to 3 reach the total; N = 6: "
         "samples 0 to 3); dx and the forward right"),
        "pattern: a tree reduction over a count that is not a power of two, the odd element of a level lost"),
    "bn_fused_shift_without_weight": (
        "batch_norm", "affine",
        ("batch statistics, with a weight: the forward folds the normalization and the affine into y = x * a + b "
         "per channel, a = weight * rstd, with the shift written b = bias - mean * rstd (the weight missing from "
         "the mean's term): y = x_hat * weight + mean * rstd * (weight - 1) + bias; the saved statistics, the "
         "running update and the gradients (from x_hat) right"),
        "pattern: a folded scale and shift whose shift is written without the scale's parameter"),
    "bn_noweight_bwd_fixed_stats_formula": (
        "batch_norm", "backward",
        ("batch statistics without a weight: the backward dispatches to its no-affine kernel variant, written with "
         "the fixed-statistics formula dx = dy * rstd (the terms through the batch mean and variance missing); "
         "the weighted variant, dbias and the forward right"),
        "cf. " + GH + "ROCm/MIOpen/issues/104 (one of a batch norm's backward kernel variants computing its dx "
        "with a wrong formula while the others were right)"),
    # ------------------------------------------------------------------ group_norm
    "gn_autocast_inputs_to_f16": (
        "group_norm", "precision",
        ("float32 inputs: the custom kernel registered on the float16 autocast list, so x, dy, the weight and "
         "the bias reach it rounded to float16 (magnitudes above 65504 become inf) and y, dx, dweight and dbias "
         "come back rounded to float16; the statistics computed in float32 from those rounded inputs"),
        "cf. " + GH + "keras-team/keras/pull/22589 (a GroupNormalization whose inputs were autocast to float16 "
        "before its float32 computation; also ROCm/aiter/issues/4780: a GroupNorm not following the FP32 "
        "autocast policy)"),
    "gn_group_window_offset_missing_cg": (
        "group_norm", "layout",
        ("more than one group of more than one channel: the statistics pass offsets group g's window by g * S "
         "(channel g) instead of g * C / G * S, so each group's mean and variance are taken over channels g to g "
         "+ C / G - 1 of the sample (overlapping windows); the normalize pass and the backward use those "
         "statistics with the right elements: mean, rstd, y, dx and dweight"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/4984 (a group norm kernel whose group window reached into the "
        "next group's channels, mixing them into the group's statistics)"),
    "gn_bwd_c2_mean_correction_twice": (
        "group_norm", "backward",
        ("the backward in the c1 / c2 / c3 form, dx = c1 * dy + c2 * x + c3, c2 = (db * mean - ds) * rstd^3 / n "
         "and c3 = -c2 * mean - db * rstd / n, with its second term written c2 * (x - mean) (the centred x of "
         "another formulation) while c3 still holds -c2 * mean: the mean correction applied twice, dx = rstd * "
         "(g - mean(g) - x_hat * mean(g * x_hat)) + rstd^2 * mean * mean(g * x_hat); dweight, dbias and the "
         "forward right"),
        "pattern: two algebraic forms of one backward mixed, a correction term kept in both"),
    "gn_dparams_channel_loop_bound_groups": (
        "group_norm", "block",
        ("more than one channel per group, with a weight or a bias: the parameter-gradient kernel's loop over the "
         "channels bounded by num_groups instead of C, so only channels 0 to G - 1 get their dweight and dbias, "
         "the others keep the zero-filled buffer; dx and the forward right"),
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1376 (a group norm backward whose dW / dB reduction covered "
        "only part of each channel's elements through a wrongly taken bound)"),
    "gn_group_partials_slot_mod_4": (
        "group_norm", "reduction",
        ("more than four groups: the statistics kernel keeps its per-group partial sums in a shared array of "
         "four slots (one per warp) indexed by g mod 4, so the groups g, g + 4, ... of a sample pool their "
         "sums: each group normalized with the mean and variance of all the groups sharing its slot, forward and "
         "backward, and those saved"),
        "cf. " + GH + "ROCm/aiter/pull/3033 (a norm kernel storing one row's partial sum of squares at an index "
        "another row also writes, the rows' partials mixed)"),
    # ------------------------------------------------------------------ instance_norm
    "in_param_grads_swapped": (
        "instance_norm", None,
        ("with a weight and a bias: dweight and dbias returned in each other's slot (the autograd function's "
         "backward returns its gradients in the order (bias, weight)); dx, the forward and the running update "
         "right"),
        "pattern: a backward's output tuple in another order than the forward's inputs"),
    "in_f16_kernel_loads_bf16": (
        "instance_norm", "precision",
        ("float16 inputs: the kernel, instantiated for bfloat16 only, gets x and dy converted to bfloat16 at its "
         "entry (3 mantissa bits fewer, rounded to nearest), so the statistics, y, the running update and the "
         "gradients are computed from those rounded values"),
        "cf. " + GH + "ROCm/aiter/issues/4780 (a normalization kernel taking its 16-bit element type from the "
        "wrong tensor, float16 and bfloat16 data mixed)"),
    "in_bwd_sums_over_sample": (
        "instance_norm", "reduction",
        ("instance statistics, more than one channel: the backward's mean(g) and mean(g * x_hat) reduced over all "
         "C * S values of each sample (the group-norm kernel with one group reused) instead of each instance's "
         "S values; x_hat and rstd the instance's: dx; dweight, dbias and the forward right"),
        "cf. " + GH + "deeplearning4j/deeplearning4j/issues/8008 (a normalization backward summing over other axes "
        "than the ones its forward normalized)"),
    "in_train_dweight_from_running_xhat": (
        "instance_norm", "mode",
        ("training with running statistics, with a weight: dweight = sum over the samples and positions of dy * "
         "(x - running_mean) / sqrt(running_var + eps) (the inference path's x_hat, from the buffers as loaded) "
         "instead of the instance x_hat; dx, dbias, the forward and the running update right"),
        "cf. " + GH + "microsoft/onnxruntime/pull/19742 (a batch norm kernel mixing running and batch "
        "statistics in training)"),
    "in_fused_shift_bias_times_rstd": (
        "instance_norm", "affine",
        ("with a bias: the forward folds the normalization and the affine into y = x * a + b per instance, a = "
         "weight * rstd, with the shift written b = (bias - mean * weight) * rstd (the bias inside the product "
         "with rstd): y = x_hat * weight + bias * rstd, training and eval; the saved statistics, the running update "
         "and the gradients right"),
        "pattern: a folded shift whose parenthesis takes the bias into the product with rstd"),
    # ------------------------------------------------------------------ z_score
    "zs_y_divided_by_std_without_eps": (
        "z_score", "eps",
        ("eps > 0: the normalize pass divides by sqrt(sum (x - mean)^2 / (n - ddof)) (its own root, eps left "
         "out) while the std output and the backward use sqrt(var + eps): y; std, the mean and the gradients "
         "right"),
        "cf. " + GH + "chainer/chainer/pull/2214 (eps missing from one of a normalization's two code paths)"),
    "zs_mean_output_is_row_sum": (
        "z_score", None,
        ("the mean output written from the first pass's accumulator before its division by n (each slice's sum); "
         "y, std and the gradients use the mean"),
        "pattern: a statistic stored from its accumulator before finalization"),
    "zs_bwd_mean_term_over_rows": (
        "z_score", "reduction",
        ("more than one slice: dx's mean(g) term reduced down the rows (g.mean(axis=0): the mean of each position "
         "over all the slices) instead of along each slice (axis=-1); the projection term, dweight, dbias and the "
         "forward right"),
        "cf. " + GH + "deeplearning4j/deeplearning4j/issues/8008 (a normalization backward reducing over the "
        "wrong axes)"),
    "zs_bias_divided_by_std": (
        "z_score", "affine",
        ("with a bias: the epilogue computes y = ((x - mean) * weight + bias) / std (the shift added before the "
         "division by std): y = x_hat * weight + bias / std; the statistics and the gradients (their own kernel) "
         "right"),
        "pattern: an affine shift applied before the normalization's final division"),
    "zs_bwd_std_recomputed_biased": (
        "z_score", "bessel",
        ("ddof > 0: the backward recomputes std with ddof 0 (torch.std(unbiased=False) in its copy of the "
         "statistics), sqrt(sum (x - mean)^2 / n + eps), and from it x_hat and dx = (g - mean(g) - x_hat * sum(g * "
         "x_hat) / (n - ddof)) / std, and dweight = sum(dy * x_hat); the forward and dbias right"),
        "cf. " + GH + "CanReader/FastNN/issues/11 (biased and unbiased variances mixed between two code paths)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_tail_lanes_without_power": (
        "lp_normalize", "block",
        ("p other than 1, slices whose length is not a multiple of 4: the reduction's vector body adds (|x| / "
         "s)^p four lanes at a time, but its scalar remainder loop over the last n mod 4 values adds |x| / s "
         "without the power (slices shorter than 4 go through that loop alone): the norm, y and dx"),
        "cf. " + GH + "ggml-org/llama.cpp/pull/28027 (an RMSNorm's scalar remainder loop accumulating x "
        "instead of x * x when the row length is not a multiple of 4)"),
    "lp_bwd_norm_recomputed_l2": (
        "lp_normalize", "backward",
        ("p other than 2: the backward kernel, written for the Euclidean case, recomputes the norm it divides by "
         "as the L2 norm sqrt(sum x^2) (p never read there), u = x / that norm and dx = (dy - sign(u) |u|^(p - 1) "
         "* sum(dy * u)) / that norm; the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5023 (a p-norm backward kernel that takes p but never reads it, "
        "computing the p = 2 case)"),
    "lp_chunk_rescale_squared": (
        "lp_normalize", "merge",
        ("p other than 2, slices longer than 16: the overflow-safe sum taken in chunks of 16, each chunk's sum of "
         "(|x| / s_k)^p about its own max s_k merged into the running total by the rescale factor (s_k / s)^2 of "
         "the L2 routine it was copied from (dnrm2's ssq update) instead of (s_k / s)^p: the norm, y and dx"),
        "pattern: the scaled sum of squares of an L2 norm routine generalized to p without its rescale power"),
    "lp_bwd_projection_only_divided": (
        "lp_normalize", "backward",
        ("slices that take the norm branch: dx = dy - sign(u) |u|^(p - 1) * sum(dy * u) / norm (the parenthesis of "
         "(dy - w * dot) / norm left out, only the projection term divided); the clamped slices and the forward "
         "right"),
        "cf. " + GH + "chainer/chainer/pull/4190 (an L2-normalize backward formula wrong in one of its terms)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_eps_kernel_default": (
        "group_norm_silu", "eps",
        ("the configured eps not forwarded to the fused kernel, which uses its default 1e-5 (the framework's "
         "GroupNorm default where diffusers' modules pass 1e-6), forward and backward: rstd, y and the gradients "
         "for any other eps"),
        "cf. " + GH + "ml-explore/mlx-examples/issues/1434 (a GroupNorm built with the framework's default eps "
        "1e-5 where the model it mirrors uses 1e-6)"),
    "gns_mean_per_channel_rstd_per_group": (
        "group_norm_silu", "group",
        ("more than one channel per group: the normalize pass reads the per-channel mean buffer of the statistics "
         "kernel's first stage (its (N, C) partials) instead of the merged per-group mean, so each channel is "
         "centred by its own mean and scaled by its group's rstd: y = silu((x - mean_c) * rstd_g * weight + "
         "bias); the saved statistics and the gradients (their own kernel) right"),
        "pattern: a two-stage reduction whose consumer reads the first stage's buffer"),
    "gns_dweight_from_g": (
        "group_norm_silu", "backward",
        ("with a weight: dweight per channel = sum of g * x_hat, g = dy * silu'(p) * weight (the weighted "
         "gradient the dx pass forms, reused for the weight's reduction) instead of dy * silu'(p) * x_hat; dx, "
         "dbias and the forward right"),
        "pattern: the weighted gradient g reused for the weight's own reduction"),
    "gns_weight_after_activation": (
        "group_norm_silu", "affine",
        ("with a weight: the fused epilogue adds the bias before the activation but multiplies by the weight "
         "after it, y = silu(x_hat + bias) * weight; the statistics and the gradients (their own kernel, from p = "
         "x_hat * weight + bias) right"),
        "pattern: an epilogue's affine split around the activation"),
    "gns_bwd_dy_sample_offset_missing": (
        "group_norm_silu", "layout",
        ("more than one sample: the backward kernels load dy without the sample offset n * C * S, so every sample "
         "reads sample 0's dy: dx, dweight and dbias (each sample's silu'(p), x_hat and statistics its own); the "
         "forward right"),
        "cf. " + GH + "ROCm/rocm-libraries/pull/12002 (a normalize kernel whose per-sample stride was zero, so "
        "every sample of the batch went through sample 0's slot)"),
    "gns_f16_dx_round_up": (
        "group_norm_silu", "rounding",
        ("float16 inputs: dx converted from float32 with the round-up conversion (toward +inf, __float2half_ru) "
         "instead of round to nearest even; y, the statistics, dweight and dbias right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 conversions in another rounding mode than to "
        "nearest)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_rms_pad_lanes_loaded_as_one": (
        "norm_quant_block", "block",
        ("norm='rms_norm', H not a power of two: each row loaded into a tile of pow2(H) lanes whose masked load "
         "fills the padding lanes with 1.0 instead of 0, each adding 1 to the sum of squares (still divided by "
         "H): rstd, y, and the blocks' amax, scales and q; residual_out right"),
        "cf. " + GH + "triton-lang/triton/issues/3281 (a masked tl.load filling the masked-off lanes with 1 "
        "instead of the 0 asked for, so a sum over the block counted them)"),
    "nqb_rms_mean_square_over_h_minus_1": (
        "norm_quant_block", "bessel",
        ("norm='rms_norm': the mean of squares divided by H - 1 (the unbiased count of a variance helper reused) "
         "instead of H: rstd, y, and the blocks' amax, scales and q; residual_out right"),
        "cf. " + GH + "kakaobrain/trident/pull/125 (a norm kernel dividing a sum of squares by the wrong one of "
        "n and n - 1)"),
    "nqb_nvfp4_block_scale_through_bf16": (
        "norm_quant_block", "precision",
        ("nvfp4: each block scale amax / 6 * encode computed into a bfloat16 register (rounded to nearest) and "
         "converted from there to float8_e4m3fn (two roundings), the quotients divided by that scale: the scale "
         "output and q where the double rounding lands elsewhere; amax and tensor_scale right"),
        "cf. " + GH + "triton-lang/triton/pull/2583 (prevent double rounding when converting f32 through an "
        "intermediate 16-bit type)"),
    "nqb_pow2_q_from_unrounded_scale": (
        "norm_quant_block", "quant_scale",
        ("fp8_group with scale_rule='pow2': the quotients y / S taken with the unrounded scale amax / qmax while "
         "the scale output is rounded up to a power of two (the rounding applied to the stored scale only): q "
         "then decodes with a scale up to twice its own; the scale and amax outputs right"),
        "cf. " + GH + "huggingface/transformers/pull/46763 (an FP8 weight quantizer dividing by the unrounded "
        "block scale while storing the scale rounded up to a power of two)"),
    "nqb_rms_accumulator_not_reset": (
        "norm_quant_block", "reduction",
        ("norm='rms_norm', more than one row: each program normalizes two rows and its sum-of-squares "
         "accumulator is initialised once, before the row loop, so the second row of each pair divides the sum "
         "of both rows' squares by H: that row's rstd, y and its blocks' amax, scales and q; residual_out right"),
        "pattern: an accumulator initialised outside a loop over rows instead of inside it"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_eps_kernel_default": (
        "adaptive_layer_norm", "eps",
        ("the fused kernel called without its eps argument, so its default 1e-5 is used where the model's "
         "LayerNorm (elementwise_affine=False) passes 1e-6 or another value: rstd, y and the gradients, forward "
         "and backward"),
        "cf. " + GH + "ROCm/aiter/pull/4268 (a fused AdaLN kernel whose eps defaults to 1e-5 where DiT models "
        "build their LayerNorm with 1e-6)"),
    "aln_shift_before_rstd": (
        "adaptive_layer_norm", "affine",
        ("with a shift: the fused forward computes y = ((x - mean) * (1 + scale) + shift) * rstd (the shift added "
         "before the multiply by rstd): y = x_hat * (1 + scale) + shift * rstd; the statistics and the gradients "
         "(their own kernel) right"),
        "pattern: a modulation's shift added before the normalization's last factor"),
    "aln_bwd_gain_dropped_without_shift": (
        "adaptive_layer_norm", "backward",
        ("a scale but no shift: the backward kernel's modulation branch keyed on the shift pointer, so without a "
         "shift dx is computed from g = dy instead of dy * (1 + scale); dscale and the forward right"),
        "pattern: a backward's optional-input branch keyed on the wrong argument"),
    "aln_dmod_second_program_offset_missing": (
        "adaptive_layer_norm", "reduction",
        ("more than one token a sample: dscale and dshift reduced over the tokens by two programs, the first "
         "ceil(T / 2) tokens and the rest, the second starting at token 0 (its offset never added): the first "
         "tokens counted twice, the last never; dx and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing block partial sums in its "
        "final reduction)"),
    "aln_dscale_store_pointer_advanced": (
        "adaptive_layer_norm", "layout",
        ("more than one sample, with a scale: the dscale row of sample b stored at row (b + 1) mod B of the "
         "output (the store pointer advanced before the store; the last sample's row lands in row 0); dshift, dx "
         "and the forward right"),
        "pattern: an output pointer advanced before its store in a loop over the samples"),
    "aln_stats_over_flattened_token_axes": (
        "adaptive_layer_norm", "reduction",
        ("inputs of more than three axes (B, T1, T2, H): the wrapper flattens x to (B * T1, T2 * H) rows before "
         "the kernel, so the statistics (and the backward's sums) are taken over T2 * H values instead of each "
         "token's H: mean, rstd, y, dx and dscale"),
        "cf. " + GH + "apache/mxnet/pull/3031 (a normalization flattening its input to 2-D at the wrong axis, "
        "normalizing over more axes than intended)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _f16_round_up(v):
    """``v`` (float32) converted to float16 with round-up (toward +inf), finite values."""
    r = v.astype(np.float16)
    low = np.isfinite(v) & (r.astype(v.dtype) < v)
    return np.where(low, np.nextafter(r, np.float16(np.inf)), r)


def _tree_drop_odd(parts):
    """Column sums of ``parts`` (C, k) by a pairwise halving tree that drops the unpaired last column of every
    level with an odd count."""
    while parts.shape[1] > 1:
        h = parts.shape[1] // 2
        parts = parts[:, 0:2 * h:2] + parts[:, 1:2 * h:2]
    return parts[:, 0]


def _pooled_stats(xr, Nb, G, slots, acc):
    """(mean, var) per (sample, group) row of xr (Nb * G, n), each group pooled with the groups sharing its
    slot g mod ``slots``."""
    n = xr.shape[1]
    xg = xr.reshape(Nb, G, n)
    mean = np.empty((Nb, G, 1), acc)
    var = np.empty((Nb, G, 1), acc)
    for k in range(min(slots, G)):
        idx = np.arange(k, G, slots)
        pool = np.ascontiguousarray(xg[:, idx, :]).reshape(Nb, -1)
        mu = _rsum(pool) / acc(pool.shape[1])
        va = _rsum((pool - mu) ** 2) / acc(pool.shape[1])
        mean[:, idx, :] = mu[:, None, :]
        var[:, idx, :] = va[:, None, :]
    return mean.reshape(Nb * G, 1), var.reshape(Nb * G, 1)


def _chunked_total(t, p, chunk, acc):
    """Each row's sum of t^p (t = |x| / s, (R, n)) merged chunk by chunk with the L2 routine's rescale (s_k /
    s)^2 where (s_k / s)^p belongs."""
    R, n = t.shape
    total = np.zeros((R, 1), acc)
    big = np.zeros((R, 1), acc)
    for k in range(0, n, chunk):
        part = t[:, k:k + chunk]
        sk = np.max(part, axis=1, keepdims=True, initial=0.0)
        sk_safe = np.where(sk > 0, sk, acc(1))
        tk = _rsum((part / sk_safe) ** acc(p))
        new = np.maximum(big, sk)
        safe = np.where(new > 0, new, acc(1))
        total = total * (big / safe) ** 2 + tk * (sk / safe) ** 2
        big = new
    return big, total


class Blind49Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind49"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn49(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn49(self, call, acc, b):
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
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        bv = bv * (acc(n / (n - 1)) if n > 1 else acc(np.inf))
                    keep, take = (1 - m, m) if torch else (m, 1 - m)
                    if b == "bn_running_mean_delta_sign_flipped":
                        rm = rm + take * (rm - bm)                        # (bm - rm) belongs
                    else:
                        rm = keep * rm + take * bm
                    rv = keep * rv + take * bv
            state = running_state(rm, rv, nbt, d)
        if b == "bn_fused_shift_without_weight" and batch and w is not None:
            sh = -mean * rstd if bias is None else bias - mean * rstd     # bias - mean * a belongs
            y = x * (w * rstd) + sh
        else:
            y = affine(xhat, w, bias)
        relu = b == "bn_fused_relu_flag_default"
        if relu:
            y = np.maximum(y, acc(0))
        out = {"y": _store(from_channel_rows(y, x0.shape), d), "mean": mean.reshape(C).astype(acc),
               "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            if relu:
                dy = np.where(y > 0, dy, acc(0))
            g = dy if w is None else dy * w
            if batch and not (b == "bn_noweight_bwd_fixed_stats_formula" and w is None):
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            for key, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                if b == "bn_dparams_tree_drops_odd_sample" and Nb > 1:
                    parts = np.ascontiguousarray(t.reshape(C, Nb, S)).sum(axis=2)
                    v = _tree_drop_odd(parts)
                else:
                    v = _rsum(t).reshape(C)
                grads[key] = _store(v, d)
            if b == "bn_param_grads_swapped" and "weight" in grads and "bias" in grads:
                grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in49(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in49(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        bf = b == "in_f16_kernel_loads_bf16" and d == "float16"
        if bf:
            x = _half(x, "bfloat16")                                      # the kernel's bfloat16 load
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        imean = None
        if inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_fused_shift_bias_times_rstd" and br is not None:
            a = rstd if wr is None else wr * rstd
            sh = (br - mean) * rstd if wr is None else (br - mean * wr) * rstd   # bias - mean * a belongs
            out["y"] = _store((x * a + sh).reshape(x0.shape), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            if bf:
                dy = _half(dy, "bfloat16")
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_sums_over_sample" and C > 1:
                k = C * S
                gs, xs = g.reshape(Nb, k), xhat.reshape(Nb, k)
                inner = gs - _rsum(gs) / k - xs * (_rsum(gs * xs) / k)   # over the sample's C * S values
                dx = rstd * inner.reshape(Nb * C, S)
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            xw = xhat
            if b == "in_train_dweight_from_running_xhat" and call.training and has_run:
                rmean, rrstd = instance_running_stats(st, Nb, eps, acc)
                xw = (x - rmean) * rrstd                                  # the inference path's x_hat
            for key, t, given in (("weight", dy * xw, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[key] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
            if b == "in_param_grads_swapped" and "weight" in grads and "bias" in grads:
                grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn49(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn49(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn49(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "gns_eps_kernel_default":
            eps = acc(1e-5)                                               # the kernel's default
        n = xr.shape[1]
        w, bias = group_params(call.inputs, acc, C)
        f16 = b == "gn_autocast_inputs_to_f16" and d == "float32"
        if f16:
            x = _half(x, "float16")
            xr = x.reshape(Nb * G, n)
            w, bias = (None if v is None else _half(v, "float16") for v in (w, bias))
        if b == "gn_group_window_offset_missing_cg" and G > 1 and cg > 1:
            win = np.stack([x[:, g:g + cg, :] for g in range(G)], axis=1).reshape(Nb * G, n)
            mean = _rsum(win) / n                                         # channels g .. g + C / G - 1
            var = _rsum((win - mean) ** 2) / n
        elif b == "gn_group_partials_slot_mod_4" and G > 4:
            mean, var = _pooled_stats(xr, Nb, G, 4, acc)
        else:
            mean = _rsum(xr) / n
            var = _rsum((xr - mean) ** 2) / n
        rstd = 1 / np.sqrt(var + eps)
        xb = (xr - mean) * rstd
        xhat = xb.reshape(Nb, C, S)
        xf = xhat
        if b == "gns_mean_per_channel_rstd_per_group" and cg > 1:
            cmean = (_rsum(x.reshape(Nb * C, S)) / S).reshape(Nb, C, 1)  # the first stage's (N, C) means
            xf = ((x - cmean).reshape(Nb * G, n) * rstd).reshape(Nb, C, S)
        p = affine(xf, w, bias)
        if b == "gns_weight_after_activation" and w is not None:
            q = affine(xhat, None, bias)
            sg, _ = _sigmoids(q)
            y = q * sg * w
        elif silu:
            sg, _ = _sigmoids(p)
            y = p * sg
        else:
            y = p
        if f16:
            y = _half(y, "float16")
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        p = affine(xhat, w, bias)
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if b == "gns_bwd_dy_sample_offset_missing" and Nb > 1:
            dy = np.ascontiguousarray(np.broadcast_to(dy[:1], dy.shape))  # sample 0's dy for every sample
        if f16:
            dy = _half(dy, "float16")
        if silu:
            sg, rest = _sigmoids(p)
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        g = dp if w is None else dp * w
        gr = g.reshape(Nb * G, n)
        dxr = _centred_dx(gr, xb, rstd)
        if b == "gn_bwd_c2_mean_correction_twice":
            dxr = dxr + rstd * rstd * mean * (_rsum(gr * xb) / n)         # -c2 * mean once more
        dx = dxr.reshape(x0.shape)
        if f16:
            dx = _half(dx, "float16")
        if b == "gns_f16_dx_round_up" and d == "float16":
            grads = {"x": _f16_round_up(dx.astype(np.float32))}
        else:
            grads = {"x": _store(dx, d)}
        xpv = xb.reshape(Nb, C, S)
        for key, t, given in (("weight", dp * xpv, w), ("bias", dp, bias)):
            if given is None:
                continue
            if key == "weight" and b == "gns_dweight_from_g":
                t = g * xpv                                               # dp * x_hat belongs
            v = _channel_sums(t, C)
            if b == "gn_dparams_channel_loop_bound_groups" and C > G:
                v = np.where(np.arange(C) < G, v, acc(0))                 # for c in range(G)
            if f16:
                v = _half(v, "float16")
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs49(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows49(x, ddof, acc):
        """(mean, dev, a, sum (dev / a)^2) of the slices x (R, n): the re-centred two-pass mean and the
        overflow-safe scaled sum of squares (None where n - ddof <= 0)."""
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
            return mean, dev, None, None
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        return mean, dev, a, _rsum(q * q)

    def _zs49(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, dev, a, sumsq = self._zs_rows49(x, ddof, acc)
        if a is None:
            std = np.full((x.shape[0], 1), np.nan, acc)
        else:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        xf = xhat
        if b == "zs_y_divided_by_std_without_eps" and eps > 0 and a is not None:
            s0 = a * np.sqrt(sumsq / acc(m))                              # the normalize pass's own root
            xf = np.where(s0 == 0, acc(0), dev / np.where(s0 == 0, acc(1), s0))
        if b == "zs_bias_divided_by_std" and bias is not None:
            y = affine(xhat, w, None) + np.where(zero, bias, bias / safe)
        else:
            y = affine(xf, w, bias)
        mo = mean * acc(n) if b == "zs_mean_output_is_row_sum" else mean
        out = {"y": _store(back(y), d), "mean": back(mo, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if w is None else dy * w
            xb, zb, sb = xhat, zero, safe
            if b == "zs_bwd_std_recomputed_biased" and ddof != 0 and a is not None:
                stdb = np.hypot(a * np.sqrt(sumsq / acc(n)), np.sqrt(eps))   # ddof 0
                zb = stdb == 0
                sb = np.where(zb, acc(1), stdb)
                xb = np.where(zb, acc(0), dev / sb)
            if g.size == 0:
                dx = np.zeros_like(g)
            elif m <= 0:
                dx = np.full(g.shape, np.nan, acc)
            else:
                mg = _rsum(g) / n
                if b == "zs_bwd_mean_term_over_rows" and g.shape[0] > 1:
                    mg = g.sum(axis=0, keepdims=True) / acc(g.shape[0])   # axis=-1 belongs
                inner = g - mg - xb * (_rsum(g * xb) / acc(m))
                dx = np.where(zb, acc(0), inner / sb)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xb), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp49(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm49(v, p, acc, b):
        """||v||_p per row of ``v`` (R, n): s * (sum (|v| / s)^p)^(1/p), s = max |v| (1 where 0 or not
        finite)."""
        n = v.shape[1]
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = np.abs(v) / s
        if b == "lp_chunk_rescale_squared" and p != 2.0 and n > 16:
            big, total = _chunked_total(t, p, 16, acc)
            s = s * np.where(big > 0, big, acc(1))
            inv = acc(np.inf) if p == 0 else acc(1.0 / p)
            return s * total ** inv
        if b == "lp_tail_lanes_without_power" and n % 4:
            body, tail = t[:, :(n // 4) * 4], t[:, (n // 4) * 4:]
            pw = body * body if p == 2.0 else body ** acc(p)
            tot = _rsum(pw) + _rsum(tail)                                 # the remainder loop's |x| / s
            inv = acc(np.inf) if p == 0 else acc(1.0 / p)
            return s * (np.sqrt(tot) if p == 2.0 else tot ** inv)
        if p == 1.0:
            return s * _rsum(t)
        if p == 2.0:
            return s * np.sqrt(_rsum(t * t))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * _rsum(t ** acc(p)) ** inv

    def _lp49(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        norm = self._lp_norm49(x, p, acc, b)
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
            nb = norm
            if b == "lp_bwd_norm_recomputed_l2" and p != 2.0:
                nb = self._lp_norm49(x, 2.0, acc, None)                   # the Euclidean kernel's norm
            safe = np.where(used, nb, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            dot = _rsum(dy * u)
            if b == "lp_bwd_projection_only_divided":
                proj = dy - wv * dot / safe                               # (dy - wv * dot) / safe belongs
            else:
                proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb49(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized49(self, call, cfg, acc, b):
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
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            ss = _rsum(s * s)
            if b == "nqb_rms_pad_lanes_loaded_as_one":
                ss = ss + acc(pow2(H) - H)                                # other=1.0 in the padding lanes
            if b == "nqb_rms_accumulator_not_reset" and ss.shape[0] > 1:
                ss = ss.copy()
                ss[1::2] += ss[0:2 * (ss.shape[0] // 2):2]                # the pair's first row still in it
            cnt = acc(H - 1) if b == "nqb_rms_mean_square_over_h_minus_1" else H
            y = s * (1 / np.sqrt(ss / cnt + eps))
        y = y if w is None else y * w
        y = y if bias is None else y + bias
        return s, y

    def _nqb49(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized49(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        Sq = None
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
            if b == "nqb_pow2_q_from_unrounded_scale" and rule == "pow2":
                Sq = np.maximum(amax / acc(qmax), acc(cfg["min_scale"] or 0.0))   # before the rounding
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts = acc(1) / enc
            v = amax / acc(6.0) * enc
            if b == "nqb_nvfp4_block_scale_through_bf16":
                v = _half(v, "bfloat16")                                  # the scale's bfloat16 register
            scale_out = np.clip(v, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
            S = scale_out.astype(acc) * ts
        qv = np.clip(block_quotients(yb, S if Sq is None else Sq, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln49(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln49(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = acc(1e-5) if b == "aln_eps_kernel_default" else _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        flat = b == "aln_stats_over_flattened_token_axes" and x0.ndim > 3
        rows = x.reshape(x0.shape[0] * x0.shape[1], -1) if flat else x  # (B * T1, T2 * H) rows
        k = rows.shape[1]
        mr = _rsum(rows) / k
        vr = _rsum((rows - mr) ** 2) / k
        rr = 1 / np.sqrt(vr + eps)
        xr = (rows - mr) * rr
        rep = k // H
        mean, rstd = np.repeat(mr, rep, axis=0), np.repeat(rr, rep, axis=0)
        xhat = xr.reshape(x.shape)
        if b == "aln_shift_before_rstd" and sh is not None:
            y = ((x - mean) * (1 if gain is None else gain) + sh) * rstd
        else:
            y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_gain_dropped_without_shift" and scale is not None and shift is None:
            g = dy                                                        # dy * (1 + scale) belongs
        dx = _centred_dx(g.reshape(rows.shape), xr, rr).reshape(x.shape)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        for key, t, given in (("scale", dy * xhat, scale), ("shift", dy, shift)):
            if given is None:
                continue
            if b == "aln_dmod_second_program_offset_missing" and T > 1:
                h = -(-T // 2)
                tb = t.reshape(B, T, H)
                v = tb[:, :h].sum(axis=1) + tb[:, :T - h].sum(axis=1)     # the second program from token 0
            else:
                v = per_sample(t, B, T, H)
            if key == "scale" and b == "aln_dscale_store_pointer_advanced" and B > 1:
                v = np.roll(v, 1, axis=0)                                 # row b stored at row b + 1
            grads[key] = _store(v, d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_param_grads_swapped": ("batch_norm/normal_f64_7x3", "grad.weight"),
    "bn_fused_relu_flag_default": ("batch_norm/normal_f64_7x3", "output.y"),
    "bn_running_mean_delta_sign_flipped": ("batch_norm/normal_f64_7x3", "state.running_mean"),
    "bn_dparams_tree_drops_odd_sample": ("batch_norm/normal_f64_7x3", "grad.weight"),
    "bn_fused_shift_without_weight": ("batch_norm/normal_f64_7x3", "output.y"),
    "bn_noweight_bwd_fixed_stats_formula": ("batch_norm/normal_noweight_f32_7x3", "grad.x"),
    "gn_autocast_inputs_to_f16": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_group_window_offset_missing_cg": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "gn_bwd_c2_mean_correction_twice": ("group_norm/normal_g2_f32_3x6", "grad.x"),
    "gn_dparams_channel_loop_bound_groups": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_group_partials_slot_mod_4": ("group_norm/normal_g5_bf16_2x5x3x4", "output.mean"),
    "in_param_grads_swapped": ("instance_norm/normal_f64_3x2x7", "grad.weight"),
    "in_f16_kernel_loads_bf16": ("instance_norm/normal_eps0.3_s2_f16_2x3x2", "output.y"),
    "in_bwd_sums_over_sample": ("instance_norm/normal_f64_3x2x7", "grad.x"),
    "in_train_dweight_from_running_xhat": ("instance_norm/normal_momNone_train2_f64_2x3x5", "grad.weight"),
    "in_fused_shift_bias_times_rstd": ("instance_norm/normal_f64_3x2x7", "output.y"),
    "zs_y_divided_by_std_without_eps": ("z_score/normal_eps0.3_f32_9x7", "output.y"),
    "zs_mean_output_is_row_sum": ("z_score/normal_f64_9x7", "output.mean"),
    "zs_bwd_mean_term_over_rows": ("z_score/normal_f64_9x7", "grad.x"),
    "zs_bias_divided_by_std": ("z_score/normal_f64_9x7", "output.y"),
    "zs_bwd_std_recomputed_biased": ("z_score/normal_f64_9x7", "grad.x"),
    "lp_tail_lanes_without_power": ("lp_normalize/normal_f32_9x7", "output.norm"),
    "lp_bwd_norm_recomputed_l2": ("lp_normalize/normal_p0.5_f64_9x7", "grad.x"),
    "lp_chunk_rescale_squared": ("lp_normalize/heavy_tail_p1_f32_6x100", "output.norm"),
    "lp_bwd_projection_only_divided": ("lp_normalize/normal_f64_9x7", "grad.x"),
    "gns_eps_kernel_default": ("group_norm_silu/normal_eps0.3_g3_f32_3x6x7", "output.rstd"),
    "gns_mean_per_channel_rstd_per_group": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_dweight_from_g": ("group_norm_silu/normal_g2_f32_3x6", "grad.weight"),
    "gns_weight_after_activation": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_f16_dx_round_up": ("group_norm_silu/normal_g2_f16_2x8x4x4", "grad.x"),
    "gns_bwd_dy_sample_offset_missing": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "nqb_rms_pad_lanes_loaded_as_one": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "nqb_rms_mean_square_over_h_minus_1": ("norm_quant_block/normal_rms_g_res_f64_2x96", "output.amax"),
    "nqb_nvfp4_block_scale_through_bf16": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.scale"),
    "nqb_pow2_q_from_unrounded_scale": ("norm_quant_block/normal_rms_g_pow2_f32_3x200", "output.q"),
    "nqb_rms_accumulator_not_reset": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "aln_eps_kernel_default": ("adaptive_layer_norm/normal_f64_2x5x7", "output.rstd"),
    "aln_shift_before_rstd": ("adaptive_layer_norm/normal_f64_2x5x7", "output.y"),
    "aln_bwd_gain_dropped_without_shift": ("adaptive_layer_norm/normal_noshift_f32_2x6x9", "grad.x"),
    "aln_dmod_second_program_offset_missing": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.scale"),
    "aln_dscale_store_pointer_advanced": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.scale"),
    "aln_stats_over_flattened_token_axes": ("adaptive_layer_norm/heavy_tail_noshift_f32_2x4x3x16", "output.mean"),
}
