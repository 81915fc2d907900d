"""A twenty-ninth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind29Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn29``, ``_in29``, ``_gn29`` for group_norm and
group_norm_silu, ``_zs29``, ``_lp29``, ``_nqb29``, ``_aln29``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind29Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind27.py (the same mistake on the same op; the twenty-eighth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import math

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
    channel_sums,
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
    np_dtype,
    nqb_format,
    nqb_returned,
    nvfp4_encode,
    nvfp4_scales,
    padded_blocks,
    per_instance,
    per_sample,
    running_in,
    running_setup,
    running_state,
)
from ._blind_math import centred_dx as _centred_dx
from ._blind_math import eps_value as _eps
from ._blind_math import half as _half
from ._blind_math import rsum as _rsum
from ._blind_math import sigmoids as _sigmoids
from ._blind_math import store as _store
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind11 import Blind11Kernel
from .blind25 import _widened
from .blind27 import _toward_zero

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind29Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_updates_running_stats": (
        "batch_norm", "running",
        ("eval with running statistics: y normalized with the running statistics (right), but the running "
         "update kernel still runs (keyed on track_running_stats, not on training): running_mean and "
         "running_var moved towards the eval batch's mean and unbiased variance with the momentum; y, the "
         "gradients and num_batches_tracked right"),
        "cf. " + GH + "mf1024/Batch-Renormalization-PyTorch/issues/1 (a batch renormalization layer updating "
        "its running averages at inference too)"),
    "bn_float64_via_float32": (
        "batch_norm", "precision",
        ("float64 inputs computed by the float32 instantiation of the kernel (x, the batch statistics, y, the "
         "running update and the gradients in float32, the results widened back to float64)"),
        "cf. " + GH + "google/flax/issues/612 (a normalization layer casting its input to float32 regardless of "
        "its dtype)"),
    "bn_affine_params_of_channel0": (
        "batch_norm", "layout",
        ("with a weight and a bias, more than one channel: the elementwise kernel loads weight and bias at "
         "offset 0 for every channel (the channel index never added to the parameter pointers): y = x_hat * "
         "weight[0] + bias[0] and dx from g = dy * weight[0]; the statistics, dweight and dbias right"),
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm kernel loading gamma and beta at an index that "
        "does not match the element's hidden offset)"),
    "bn_bwd_projection_sign_flipped": (
        "batch_norm", "backward",
        ("batch statistics: dx = rstd * (g - mean(g) + x_hat * mean(g * x_hat)), the projection term added "
         "instead of subtracted; dweight, dbias and the forward right"),
        "cf. " + GH + "mlpack/mlpack/issues/1923 (a BatchNorm layer's Backward implemented incorrectly while "
        "its forward was right)"),
    "bn_dweight_rstd_applied_twice": (
        "batch_norm", "backward",
        ("with a weight: dweight = rstd * sum(dy * x_hat) (the invstd factor of the sum(dy * (x - mean)) form "
         "applied to a sum already taken of the normalized x_hat); dx, dbias and the forward right"),
        "cf. " + GH + "intel/ipex-llm/pull/94 (a fix for a BatchNormalization's gradWeight and gradBias)"),
    "bn_dbias_accumulated_twice": (
        "batch_norm", "constant",
        ("with a bias: the per-channel sum of dy added into the dbias buffer that the reduce kernel already "
         "filled (the final store written +=): dbias twice its value; dx and dweight right"),
        "cf. " + GH + "apache/mxnet/issues/16297 (a BatchNorm beta gradient accumulated on top of the buffer's "
        "previous value)"),
    "bn_sample_m2_summed_without_spread": (
        "batch_norm", "one_pass",
        ("batch statistics: each (sample, channel) reduced to its own mean and sum of squared deviations, and "
         "the channel's variance taken as the sum of those M2 over the samples divided by n (the spread of the "
         "sample means left out; 0 for 2-D inputs); the mean right: rstd, y, dx and the running variance "
         "from that variance"),
        "cf. " + GH + "ryankurte/rust-rolling-stats/issues/2 (partial statistics merged without the parallel "
        "algorithm's mean-difference term)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_dx_without_rstd": (
        "group_norm", "backward",
        ("dx = g - mean(g) - x_hat * mean(g * x_hat), the closing multiply by the group's rstd left out; "
         "dweight, dbias and the forward right"),
        "pattern: a hand-derived backward's closing factor left out"),
    "gn_stats_stored_next_slot": (
        "group_norm", "layout",
        ("the mean and rstd outputs stored one slot on (the (sample, group) index's pointer advanced before "
         "the store): element i written at (i + 1) mod (N * G), the last one at 0; y and the gradients "
         "right"),
        "pattern: a store pointer advanced before the store instead of after it"),
    "gn_dparams_sum_in_half": (
        "group_norm", "precision",
        ("16-bit inputs with a weight and a bias: dweight and dbias accumulated element by element over the "
         "samples and positions in the input dtype (each partial product and the running sum rounded to "
         "it); dx and the forward right"),
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1253 (a GroupNorm backward's dW / dB accumulators cast to a "
        "16-bit type)"),
    "gn_dparams_spatial_mean": (
        "group_norm", "reduction",
        ("dweight and dbias: each (sample, channel)'s sum over the spatial positions divided by their count S "
         "(a mean) before the sum over the samples; dx and the forward right"),
        "pattern: a partial reduced as a mean where the following stage expects a sum"),
    "gn_fused_shift_without_rstd": (
        "group_norm", "affine",
        ("with a weight: the forward folds the normalization and the affine into y = x * a + b per (sample, "
         "channel), a = rstd * weight, but b = bias - mean * weight (the rstd factor of the shift left out); "
         "the statistics and the gradients right"),
        "pattern: the folded shift b - mean * a written with the weight where a = rstd * weight belongs"),
    "gn_dx_spatial_tail_unstored": (
        "group_norm", "block",
        ("a spatial size above 4 and not a multiple of 4: the dx kernel stores each (sample, channel)'s values "
         "in four-wide vector stores only, the last S mod 4 positions never written (0); the forward, "
         "dweight and dbias right"),
        "cf. " + GH + "amd/IRON/pull/198 (vector loops bounded on whole vectors: the tile's tail never written)"),
    "gn_bwd_mean_term_over_n_minus_1": (
        "group_norm", "bessel",
        ("dx = rstd * (g - sum(g) / (n - 1) - x_hat * mean(g * x_hat)): the mean(g) term divides the group's "
         "sum by its count minus one; the projection, dweight, dbias and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a norm backward's mean(dy * gamma) term scaled wrong "
        "in dx)"),
    # ------------------------------------------------------------------ instance_norm
    "in_eval_running_var_read_as_invstd": (
        "instance_norm", "running",
        ("eval with running statistics: the running_var buffer handed over as the inverse std: rstd = "
         "running_var (no eps, no reciprocal square root), y and dx = g * rstd from it"),
        "cf. " + GH + "ROCm/rocm-libraries/pull/11145 (a normalize kernel consuming a supplied stddev buffer as "
        "its direct multiplier)"),
    "in_train_bwd_eval_formula": (
        "instance_norm", "backward",
        ("training with running statistics tracked: the backward's branch keyed on track_running_stats, so dx "
         "= g * rstd (the fixed-statistics formula) at the instances' own rstd, the mean(g) and projection "
         "terms left out; the forward, dweight and dbias right"),
        "cf. " + GH + "facebookresearch/CrypTen/pull/143 (a training-mode norm backward ignoring that the "
        "statistics depend on the input)"),
    "in_input_read_channels_last": (
        "instance_norm", "layout",
        ("more than one channel and spatial position: the kernel indexes x, y, dy and dx with channels-last "
         "strides (each sample's memory read as (positions, channels)) while the buffers are NCHW-contiguous: "
         "the instances' statistics, y, dx, dweight and dbias over the wrong elements"),
        GH + "pytorch/pytorch/issues/111824 (GroupNorm and InstanceNorm not handling channels_last correctly)"),
    "in_eps_fixed_keras_default": (
        "instance_norm", "eps",
        ("the configured eps not forwarded: the kernel's default 1e-3 (Keras' InstanceNormalization epsilon) "
         "used for every call, forward and backward, instance or running statistics"),
        "cf. " + GH + "tensorlayer/TensorLayer/pull/11 (a normalization layer's default epsilon 1e-3 against "
        "the 1e-5 of other frameworks)"),
    "in_eval_affine_dropped": (
        "instance_norm", "affine",
        ("eval with running statistics: the inference kernel's affine flag not set, y = (x - running_mean) * "
         "rstd without weight and bias; the gradients and the training path right"),
        "pattern: the inference kernel's affine flag not forwarded"),
    "in_f16_y_round_toward_zero": (
        "instance_norm", "rounding",
        ("float16 inputs: y converted from float32 with a round-toward-zero conversion (__float2half_rz) "
         "instead of round to nearest even; the statistics and the gradients right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 stores rounding toward zero instead of to nearest)"),
    # ------------------------------------------------------------------ z_score
    "zs_weight_bias_swapped": (
        "z_score", "affine",
        ("with a weight and a bias: the kernel handed (bias, weight) in its (weight, bias) slots: y = x_hat * "
         "bias + weight and dx from g = dy * bias; dweight = sum dy * x_hat and dbias = sum dy right"),
        "pattern: two parameter pointers of the same shape passed in each other's slot"),
    "zs_dweight_from_g": (
        "z_score", "backward",
        ("with a weight: dweight = sum over the slices of g * x_hat, g = dy * weight (the weighted gradient "
         "the dx pass forms) instead of dy * x_hat; dx, dbias and the forward right"),
        "pattern: the weighted gradient the dx pass forms reused for the weight's own reduction"),
    "zs_dparams_rows_from_first_axis": (
        "z_score", "reduction",
        ("inputs of three or more axes, with a weight or a bias: dweight and dbias summed over the first "
         "x.shape[0] slices only (the row count taken from the first axis where the product of the kept axes "
         "belongs); dx and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm backward taking the row count from "
        "input.shape[0]: dW and dB wrong for inputs of three or more axes)"),
    "zs_bwd_dy_rows_by_plain_reshape": (
        "z_score", "layout",
        ("dim not the last axis: the backward views dy as (slices, n) by a plain reshape of its buffer (without "
         "moving the normalized axis last as the forward does): dx, dweight and dbias from the wrong dy "
         "elements; the forward right"),
        "cf. " + GH + "gpu-mode/reference-kernels/pull/39 (a reshape where a permute belongs)"),
    "zs_divided_by_variance": (
        "z_score", "semantics",
        ("the square root left out of the finalization: the kernel's std register holds var + eps, so the std "
         "output is the variance, y = (x - mean) / (var + eps) * weight + bias, and dx from that register"),
        GH + "mwaskom/seaborn/pull/650 (a z-score dividing by the variance instead of the standard deviation)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_dot_vec4_tail_dropped": (
        "lp_normalize", "block",
        ("slices of more than four values, not a multiple of four: the backward's sum(dy * u) reads each slice "
         "with four-wide vector loads only, the last n mod 4 values never entering it; the forward right"),
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorised path mishandling the row's tail for sizes not a "
        "multiple of its vector width)"),
    "lp_root_dropped": (
        "lp_normalize", "semantics",
        ("p other than 1: the p-th root left out, the norm register holding sum |x|^p: y = x / max(sum |x|^p, "
         "eps), the norm output sum |x|^p and dx from that register"),
        GH + "PaddlePaddle/Paddle/issues/11345 (an l2_normalize lacking the square root after its "
        "reduce_sum)"),
    "lp_row_chunks_normalized_separately": (
        "lp_normalize", "group",
        ("slices longer than 512: each slice split over programs of 512 values, each normalizing its chunk by "
         "the chunk's own norm (forward and backward); the norm output holds the last chunk's norm"),
        "pattern: a row split over programs whose partial reductions are never combined"),
    "lp_dims_flattened_to_end": (
        "lp_normalize", "reduction",
        ("dim a tuple of several axes: the kernel flattens x from the first of them to the end "
         "(x.flatten(dims[0])), so each norm is taken over the trailing axes too: y, dx and every norm slot "
         "of a sample the whole sample's norm"),
        "pattern: several reduction axes collapsed with flatten(start) instead of the listed axes"),
    "lp_eps_clamp_before_rescale": (
        "lp_normalize", "eps",
        ("zero_rule='torch': the clamp applied to the rescaled norm (sum (|x| / s)^p)^(1/p) before its product "
         "with the scale s = max |x|: y = x / (s * max(that, eps)), and dx = dy / (s * eps) where that is "
         "below eps; the returned norm right"),
        "pattern: an overflow-safe rescaled reduction whose clamp is applied before the scale is multiplied back"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_bias_dropped_without_weight": (
        "group_norm_silu", "affine",
        ("a bias without a weight: the affine epilogue guarded by 'weight is not None' alone, so p = x_hat "
         "(the bias never added), y = silu(p) and the backward through that p; dbias still reduced"),
        "cf. " + GH + "Comfy-Org/comfy-kitchen/pull/175 (review: a fused GroupNorm + SiLU's bias "
        "handled only when the weight is given)"),
    "gns_activation_mish": (
        "group_norm_silu", None,
        ("the fused kernel's activation selector set to Mish: y = p * tanh(softplus(p)) instead of p * "
         "sigmoid(p), forward and the backward's derivative of that function"),
        "cf. " + GH + "ooples/AiDotNet.Tensors/issues/179 (a fused GroupNorm + activation op selecting its "
        "activation by an enum)"),
    "gns_bwd_projection_from_unweighted_dp": (
        "group_norm_silu", "backward",
        ("with a weight: dx = rstd * (g - mean(g) - x_hat * mean(dp * x_hat)), the projection's reduction fed "
         "dp = dy * silu'(p) where g = dp * weight belongs; dweight, dbias and the forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "gns_dparams_sample_loop_from_one": (
        "group_norm_silu", "reduction",
        ("more than one sample: dweight and dbias reduced from per-(sample, channel) partials by a second stage "
         "whose loop over the samples starts at 1 (sample 0's partial never added); dx and the forward right"),
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/9560 (a group norm's batch-reduce kernel for the gamma / beta "
        "gradients fixed)"),
    "gns_5d_stats_per_depth_slice": (
        "group_norm_silu", "group",
        ("inputs of five axes (N, C, D, H, W): the 4-D kernel launched once per depth slice, each group's "
         "statistics over C / G * H * W values of one slice: y and dx per slice, the saved mean and rstd the "
         "last slice's (each launch overwriting them)"),
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1376 (a group norm backward wrong for inputs of more than "
        "three axes)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_grid_rows_from_first_axis": (
        "norm_quant_block", "block",
        ("inputs of three or more axes: the grid launched with x.shape[0] programs (one per row) where the "
         "product of the leading axes belongs: the rows beyond them never processed, their q, scales, amax "
         "and residual_out left 0 (nvfp4: the tensor amax from the processed rows)"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm kernel's row count taken as input.shape[0] for "
        "inputs of three or more axes)"),
    "nqb_rms_eps_added_to_sum_of_squares": (
        "norm_quant_block", "eps",
        ("norm='rms_norm': eps added to each row's sum of squares before the division by H: rstd = 1 / "
         "sqrt((sum s^2 + eps) / H), y, the blocks' amax, scales and q"),
        "cf. " + GH + "NVIDIA/apex/pull/1295 (a fused RMSNorm's eps placement relative to the "
        "mean of squares)"),
    "nqb_ln_weight_flag_dropped": (
        "norm_quant_block", "affine",
        ("norm='layer_norm' with a weight: the layer-norm path's HAS_WEIGHT flag never set, y = x_hat + bias "
         "(the weight not applied), then the blocks' amax, scales and q"),
        "pattern: a fused kernel's HAS_WEIGHT constexpr flag not passed for one path"),
    "nqb_nvfp4_block_scale_over_fp8_max": (
        "norm_quant_block", "quant_scale",
        ("nvfp4: each block scale computed as amax / 448 * encode (the FP8 maximum where the FP4 element "
         "maximum 6 belongs) before its E4M3 conversion: the scale output and q = y / the decode scale, "
         "clipped at 6"),
        "cf. " + GH + "NVIDIA/cudnn-frontend/issues/148 (NVFP4 block scales not matching amax / 6)"),
    "nqb_nvfp4_block_scale_unclamped": (
        "norm_quant_block", "saturation",
        ("nvfp4: each block scale amax / 6 * encode converted to float8_e4m3fn without the clamp at 448: with "
         "a given global_scale, a block whose scale exceeds 448 gets NaN (float8_e4m3fn has no infinity), its "
         "q NaN"),
        "cf. " + GH + "kekzl/imp/issues/1544 (an NVFP4 quantizer's UE4M3 block scale and its clamp at 448)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_rstd_rounded_to_input_dtype": (
        "adaptive_layer_norm", "precision",
        ("16-bit inputs: each token's rstd computed into a variable of the input dtype (rounded): y, the "
         "returned rstd and the backward from it"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm statistics computed in the input dtype instead of "
        "float32)"),
    "aln_var_shift_uncorrected": (
        "adaptive_layer_norm", "one_pass",
        ("each token's variance from the shifted-data sums about K = the token's first value, sum (x - K)^2 / "
         "H, without the correction - (mean - K)^2 (the mean itself right): rstd, y and the backward"),
        "pattern: shifted-data variance without its correction term"),
    "aln_dscale_from_deviation": (
        "adaptive_layer_norm", "backward",
        ("with a scale: dscale = the sum over a sample's tokens of dy * (x - mean) (the deviation the kernel "
         "holds, not multiplied by rstd) instead of dy * x_hat; dx, dshift and the forward right"),
        "pattern: the centred x the kernel holds used where x_hat = (x - mean) * rstd belongs"),
    "aln_modulated_before_norm": (
        "adaptive_layer_norm", "semantics",
        ("the modulation applied to the input before the normalization: y = LN(x * (1 + scale) + shift) "
         "without an affine after it, the statistics those of the modulated input, forward and the backward "
         "of that function"),
        "cf. " + GH + "lucas-maes/le-wm/issues/46 (an adaLN block whose modulated input is normalized "
        "again after the modulation)"),
    "aln_rstd_output_is_var": (
        "adaptive_layer_norm", None,
        ("the rstd output written from the variance register (each token's biased variance) instead of its "
         "rstd; y, the mean output and the gradients right"),
        "pattern: an output written from an intermediate of the statistic's finalization"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _sums_in_half(t, d):
    """Per-channel sums (C,) of ``t`` (N, C, S) accumulated element by element, samples then positions, in
    the 16-bit dtype ``d`` (each term and each partial sum rounded to it)."""
    N, C, S = t.shape
    npdt = np_dtype(d)
    s = np.zeros(C, npdt)
    for i in range(N):
        for j in range(S):
            s = (s.astype(np.float32) + t[i, :, j].astype(npdt).astype(np.float32)).astype(npdt)
    return s.astype(t.dtype)


def _mish(p):
    """(mish(p) = p tanh(softplus(p)), its derivative)."""
    t = np.tanh(np.logaddexp(p.dtype.type(0), p))
    sg, _ = _sigmoids(p)
    return p * t, t + p * (1 - t * t) * sg


class Blind29Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind29"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            if self.bug == "bn_float64_via_float32" and call.dtype == "float64":
                return _widened(self._bn29(call, np.float32, self.bug))
            return self._bn29(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn29(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_sample_m2_summed_without_spread" and n:
                bmean = _rsum(x) / n
                xs = x.reshape(C * Nb, n // Nb)                            # one row per (channel, sample)
                ms = _rsum(xs) / (n // Nb)
                bvar = _rsum((xs - ms) ** 2).reshape(C, Nb).sum(axis=1, keepdims=True) / n
                rstd = 1 / np.sqrt(bvar + eps)
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
            update = call.training or b == "bn_eval_updates_running_stats"
            if update:
                if call.training:
                    nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    if bmean is None:                                      # eval: the update kernel's own sums
                        bmean = _rsum(x) / n
                    bm = bmean.reshape(C)
                    bv = (_rsum((x - bmean) ** 2) / n if bvar is None else bvar).reshape(C)
                    if cfg["convention"] == "torch":
                        f = acc(n / (n - 1)) if n > 1 else acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        wf, bf = w, bias
        if b == "bn_affine_params_of_channel0":
            wf = None if w is None else np.repeat(w[:1], C, axis=0)
            bf = None if bias is None else np.repeat(bias[:1], C, axis=0)
        out = {"y": _store(from_channel_rows(affine(xhat, wf, bf), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if wf is None else dy * wf
            if batch and b == "bn_bwd_projection_sign_flipped":
                dx = rstd * (g - _rsum(g) / n + xhat * (_rsum(g * xhat) / n))
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                dw = _rsum(dy * xhat)
                if b == "bn_dweight_rstd_applied_twice":
                    dw = dw * rstd
                grads["weight"] = _store(dw.reshape(C), d)
            if bias is not None:
                db = _rsum(dy)
                if b == "bn_dbias_accumulated_twice":
                    db = db + _rsum(dy)
                grads["bias"] = _store(db.reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in29(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in29(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        cl = b == "in_input_read_channels_last" and C > 1 and S > 1

        def rows(a):                                                       # (Nb * C, S) instance rows
            a = np.asarray(a).astype(acc)
            if cl:
                return np.ascontiguousarray(a.reshape(Nb, S, C).transpose(0, 2, 1)).reshape(Nb * C, S)
            return a.reshape(Nb * C, S)

        def unrows(a):
            if cl:
                return np.ascontiguousarray(a.reshape(Nb, C, S).transpose(0, 2, 1)).reshape(x0.shape)
            return a.reshape(x0.shape)
        x = rows(x0)
        cfg, st, eps, has_run = running_setup(call, acc)
        if b == "in_eps_fixed_keras_default":
            eps = acc(1e-3)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        imean = None
        if inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
            if b == "in_eval_running_var_read_as_invstd":
                rstd = per_instance(st["running_var"].astype(acc), Nb)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_eval_affine_dropped" and not inst:
            out["y"] = _store(xhat.reshape(x0.shape), d)
        if cl:
            out["y"] = _store(unrows(affine(xhat, wr, br)), d)
        if b == "in_f16_y_round_toward_zero" and d == "float16":
            out["y"] = _toward_zero(affine(xhat, wr, br).reshape(x0.shape), np_dtype(d))
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
            dy = rows(call.cotangents["y"])
            g = dy if wr is None else dy * wr
            if inst and b == "in_train_bwd_eval_formula" and has_run:
                dx = g * rstd
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(unrows(dx), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn29(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn29(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn29(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        D = x0.shape[2] if b == "gns_5d_stats_per_depth_slice" and silu and x0.ndim == 5 else 1
        P = S // D

        def rows(v):                              # (Nb, C, S) -> one row per (sample, group[, depth slice])
            if D == 1:
                return v.reshape(Nb * G, cg * S)
            return np.ascontiguousarray(v.reshape(Nb, G, cg, D, P).transpose(0, 1, 3, 2, 4)).reshape(-1, cg * P)

        def unrows(r):
            if D == 1:
                return r.reshape(Nb, C, S)
            return np.ascontiguousarray(r.reshape(Nb, G, D, cg, P).transpose(0, 1, 3, 2, 4)).reshape(Nb, C, S)
        xr = xv if D == 1 else rows(x)
        n = xr.shape[1]
        mean, rstd = self._ln_stats(xr, eps)
        xhr = (xr - mean) * rstd
        xhat = unrows(xhr)
        ms, rs = mean, rstd
        if D > 1:                                                 # the last slice's launch wrote them last
            ms, rs = mean.reshape(Nb, G, D)[:, :, -1], rstd.reshape(Nb, G, D)[:, :, -1]
        elif b == "gn_stats_stored_next_slot":
            ms, rs = np.roll(mean.reshape(-1), 1), np.roll(rstd.reshape(-1), 1)
        w, bias = group_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "gns_bias_dropped_without_weight" and w is None:
            bf = None
        if b == "gn_fused_shift_without_rstd" and w is not None:
            mc = np.repeat(mean.reshape(Nb, G), cg, axis=1).reshape(Nb, C, 1)
            rc = np.repeat(rstd.reshape(Nb, G), cg, axis=1).reshape(Nb, C, 1)
            a = rc * w
            sh = -mc * w if bias is None else bias - mc * w
            p = x * a + sh
        else:
            p = affine(xhat, wf, bf)
        if silu and b == "gns_activation_mish":
            y, act_d = _mish(p)
        elif silu:
            sg, rest = _sigmoids(p)
            y, act_d = p * sg, sg * (1 + p * rest)
        else:
            y = p
        out = group_outputs(y, ms.reshape(Nb, G), rs.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        dp = dy * act_d if silu else dy
        g = dp if wf is None else dp * wf
        gr = rows(g)
        if b == "gn_bwd_dx_without_rstd":
            dxr = gr - _rsum(gr) / n - xhr * (_rsum(gr * xhr) / n)
        elif b == "gn_bwd_mean_term_over_n_minus_1" and n > 1:
            dxr = rstd * (gr - _rsum(gr) / (n - 1) - xhr * (_rsum(gr * xhr) / n))
        elif b == "gns_bwd_projection_from_unweighted_dp" and wf is not None:
            dxr = rstd * (gr - _rsum(gr) / n - xhr * (_rsum(rows(dp) * xhr) / n))
        else:
            dxr = _centred_dx(gr, xhr, rstd)
        dxv = unrows(dxr)
        if b == "gn_dx_spatial_tail_unstored" and S > 4 and S % 4:
            dxv = dxv.copy()
            dxv[..., (S // 4) * 4:] = 0
        grads = {"x": _store(dxv.reshape(x0.shape), d)}
        for key, t, given in (("weight", dp * xhat, w), ("bias", dp, bias)):
            if given is None:
                continue
            if b == "gn_dparams_sum_in_half" and d in _HALF:
                v = _sums_in_half(t, d)
            elif b == "gn_dparams_spatial_mean":
                v = (t.sum(axis=2) / acc(S)).sum(axis=0)
            elif b == "gns_dparams_sample_loop_from_one" and Nb > 1:
                v = channel_sums(t[1:], C)
            else:
                v = channel_sums(t, C)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs29(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs29(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        if n:
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
        if b == "zs_divided_by_variance":
            std = std * std
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        wa, ba = w, bias
        if b == "zs_weight_bias_swapped" and w is not None and bias is not None:
            wa, ba = bias, w
        y = affine(xhat, wa, ba)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            if b == "zs_bwd_dy_rows_by_plain_reshape":
                dy = np.ascontiguousarray(call.cotangents["y"]).astype(acc).reshape(R, n)
            else:
                dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if wa is None else dy * wa
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                sg, sgx = _rsum(g), _rsum(g * xhat)
                inner = g - sg / n - xhat * (sgx / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx), d)
            last = R
            if b == "zs_dparams_rows_from_first_axis" and x0.ndim > 2:
                last = x0.shape[0]
            dw_from = g if b == "zs_dweight_from_g" else dy
            for key, t in (("weight", dw_from * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t[:last].sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp29(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_rows29(x, dy, p, eps, torch_rule, acc, b):
        """(y, norm, dx) of the slices x (R, n) (dy: their cotangent, or None; dx None then)."""
        n = x.shape[1]

        def powsum(v):
            if p == 1.0:
                return _rsum(v)
            if p == 2.0:
                return _rsum(v * v)
            return _rsum(v ** acc(p))
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        total = powsum(np.abs(x) / s)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        scaled = total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv
        norm = s * scaled
        if b == "lp_root_dropped" and p != 1.0:
            norm = (s * s if p == 2.0 else s ** acc(p)) * total
        early = b == "lp_eps_clamp_before_rescale" and torch_rule
        if early:
            y = x / (s * np.maximum(scaled, eps))
        elif torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy is not None:
            if early:
                used = (scaled >= eps) | np.isnan(scaled)
            else:
                used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            if b == "lp_bwd_dot_vec4_tail_dropped" and n > 4 and n % 4:
                dot = _rsum(np.ascontiguousarray((dy * u)[:, :(n // 4) * 4]))
            else:
                dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            if early and eps > 0:
                small = dy / (s * eps)
            else:
                small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        return y, norm, dx

    def _lp29(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        R = x.shape[0]
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        several = isinstance(dims, (list, tuple)) and len(dims) > 1
        if b == "lp_row_chunks_normalized_separately" and n > 512:
            parts = [self._lp_rows29(np.ascontiguousarray(x[:, k:k + 512]),
                                     None if dy is None else np.ascontiguousarray(dy[:, k:k + 512]),
                                     p, eps, torch_rule, acc, b) for k in range(0, n, 512)]
            y = np.concatenate([t[0] for t in parts], axis=1)
            norm = parts[-1][1]
            dx = None if dy is None else np.concatenate([t[2] for t in parts], axis=1)
        elif b == "lp_dims_flattened_to_end" and several:
            nd = x0.ndim
            first = min(k % nd for k in dims)
            N0 = math.prod(x0.shape[:first])
            xf = x0.astype(acc).reshape(N0, -1)
            dyf = None if dy0 is None else dy0.astype(acc).reshape(N0, -1)
            yf, nf, dxf = self._lp_rows29(xf, dyf, p, eps, torch_rule, acc, b)
            kshape = back(np.zeros((R, 1), acc), True).shape
            nout = np.broadcast_to(nf.reshape((N0,) + (1,) * (nd - first)), kshape).astype(acc)
            out = {"y": _store(yf.reshape(x0.shape), d), "norm": nout}
            return Returned(out, {} if dxf is None else {"x": _store(dxf.reshape(x0.shape), d)})
        else:
            y, norm, dx = self._lp_rows29(x, dy, p, eps, torch_rule, acc, b)
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        return Returned(out, {} if dx is None else {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb29(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized29(self, call, cfg, acc, b):
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
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
            if b == "nqb_ln_weight_flag_dropped":
                w = None
        elif b == "nqb_rms_eps_added_to_sum_of_squares":
            y = s * (1 / np.sqrt((_rsum(s * s) + eps) / H))
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb29(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized29(call, cfg, acc, b)
        if b == "nqb_grid_rows_from_first_axis" and x0.ndim > 2:
            done = x0.shape[0]                                   # the rows the grid's programs cover
            s, y = s.copy(), y.copy()
            s[done:], y[done:] = 0, 0
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            if b == "nqb_nvfp4_block_scale_over_fp8_max":
                ts = acc(1) / enc
                scale_out = np.clip(amax / acc(448.0) * enc, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
                S = scale_out.astype(acc) * ts
            elif b == "nqb_nvfp4_block_scale_unclamped":
                ts = acc(1) / enc
                scale_out = (amax / acc(6.0) * enc).astype(ml_dtypes.float8_e4m3fn)
                S = scale_out.astype(acc) * ts
            else:
                ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln29(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln29(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_modulated_before_norm":
            z = affine(x, gain, sh)
            mean, rstd = self._ln_stats(z, eps)
            zhat = (z - mean) * rstd
            out = norm_outputs(zhat, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
            if "y" not in call.cotangents:
                return Returned(out, {})
            dy, _ = dy_and_g(call, acc, (-1, H))
            dz = _centred_dx(dy, zhat, rstd)
            grads = {"x": _store((dz if gain is None else dz * gain).reshape(x0.shape), d)}
            if scale is not None:
                grads["scale"] = _store(per_sample(dz * x, B, T, H), d)
            if shift is not None:
                grads["shift"] = _store(per_sample(dz, B, T, H), d)
            return Returned(out, grads)
        if b == "aln_var_shift_uncorrected":
            mean = _rsum(x) / H
            k = x[:, :1]
            var = _rsum((x - k) ** 2) / H
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        if b == "aln_rstd_rounded_to_input_dtype" and d in _HALF:
            rstd = _half(rstd, d)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        ro = rstd
        if b == "aln_rstd_output_is_var":
            ro = _rsum((x - mean) ** 2) / H
        out = norm_outputs(y, mean, ro, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            ds_from = (x - mean) if b == "aln_dscale_from_deviation" else xhat
            grads["scale"] = _store(per_sample(dy * ds_from, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)
