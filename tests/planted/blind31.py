"""A thirty-first held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind31Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn31``, ``_in31``, ``_gn31`` for group_norm and
group_norm_silu, ``_zs31``, ``_lp31``, ``_nqb31``, ``_aln31``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind31Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind29.py (the same mistake on the same op; the thirtieth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

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
    np_dtype,
    nqb_format,
    nqb_returned,
    nvfp4_encode,
    nvfp4_scales,
    padded_blocks,
    per_sample,
    per_token,
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
from .blind26 import _directed, _half_rowsum
from .blind27 import _toward_zero

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind31Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_cumavg_factor_one_past": (
        "batch_norm", "running",
        ("training with running statistics and momentum=None: the cumulative-average factor taken as 1 / "
         "(num_batches_tracked + 1) with the counter already incremented (one batch too many): running_mean "
         "and running_var moved by too small a step; y, the gradients and num_batches_tracked right"),
        GH + "soumith/cudnn.torch/issues/91 (cuDNN's cumulative-moving-average factor 1 / (1 + n) at the N-th "
        "call, whose count convention a caller must match)"),
    "bn_dy_sample_offset_missing": (
        "batch_norm", "layout",
        ("more than one sample: the backward kernels load dy without the sample offset (every sample reads "
         "sample 0's dy): dx, dweight and dbias from that dy; the forward and the running state right"),
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm kernel's loads at an index missing one of its "
        "offsets)"),
    "bn_dbias_from_dy_xhat": (
        "batch_norm", "backward",
        ("with a bias: dbias reduced as sum(dy * x_hat) per channel (the dweight reduction's product copied into "
         "the bias's line) instead of sum(dy); dx, dweight and the forward right"),
        GH + "intel/ipex-llm/pull/94 (a fix for a BatchNormalization's gradBias and gradWeight)"),
    "bn_bwd_g_rounded_to_input_dtype": (
        "batch_norm", "precision",
        ("16-bit inputs with a weight: the backward's g = dy * weight written to a buffer of the input dtype "
         "(rounded) before the reductions and dx; dweight, dbias and the forward right"),
        "cf. " + GH + "deepspeedai/DeepSpeed/issues/581 (a norm kernel's intermediate converted to float16 "
        "between two steps of the float32 computation)"),
    "bn_var_floored_at_eps": (
        "batch_norm", "eps",
        ("batch statistics: rstd = 1 / sqrt(max(var, eps)) (eps as a floor of the variance) instead of 1 / "
         "sqrt(var + eps): y, the saved rstd and dx from it; the running update (the plain variance) right"),
        "cf. " + GH + "jax-ml/jax/pull/30428 (jax.nn.standardize: variance + epsilon replaced with "
        "maximum(variance, epsilon))"),
    "bn_stats_per_sample": (
        "batch_norm", "group",
        ("training or no running statistics, more than one sample: the statistics kernel launched per (sample, "
         "channel) plane (the instance-norm reduction, the batch never folded in): each sample normalized with "
         "its own mean and rstd, forward and the per-plane backward; the mean and rstd outputs and the running "
         "update from the last sample's statistics (written last)"),
        "cf. " + GH + "sonos/tract/pull/2863 (a norm reducing over the wrong set of axes: instance statistics "
        "shared across the batch, the reverse of this)"),
    "bn_eval_centred_by_batch_mean": (
        "batch_norm", "mode",
        ("eval with running statistics: x centred by the eval batch's own per-channel mean (the statistics "
         "kernel still run) but scaled by the running rstd: y, the returned mean, dweight's x_hat; dx = g * "
         "rstd and the state right"),
        "cf. " + GH + "pytorch/xla/pull/806 (a batch norm using the mini-batch's statistics where the eval "
        "mode's running ones belong)"),
    # ------------------------------------------------------------------ group_norm
    "gn_channel_welford_merge_count_one": (
        "group_norm", "merge",
        ("more than one spatial position: each group's statistics merged from per-channel partials (mean_c, "
         "M2_c) with the mean-difference term not weighted by the channel's count S: M2 = sum M2_c + sum "
         "(mean_c - mean)^2; the mean right; rstd, y and the backward from it"),
        "cf. " + GH + "ryankurte/rust-rolling-stats/issues/2 (partial statistics merged with the parallel "
        "algorithm's mean-difference term wrong)"),
    "gn_bwd_mean_term_sign_flipped": (
        "group_norm", "backward",
        ("dx = rstd * (g + mean(g) - x_hat * mean(g * x_hat)), the mean(g) term added instead of subtracted; "
         "dweight, dbias and the forward right"),
        "cf. " + GH + "mlpack/mlpack/issues/1923 (a norm layer's Backward implemented incorrectly while its "
        "forward was right)"),
    "gn_count_from_last_axis": (
        "group_norm", "reduction",
        ("inputs of four or more axes: each group's sums divided by C / G * x.shape[-1] (the count taken from the "
         "last axis) instead of C / G times the spatial size: the mean, the variance, y, the saved statistics "
         "and the backward's means"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm kernel's count taken from one axis of the input "
        "shape where the product of several belongs)"),
    "gn_dx_bf16_truncated": (
        "group_norm", "rounding",
        ("bfloat16 inputs: dx converted from float32 by dropping the low 16 bits (rounding toward zero) instead "
         "of round to nearest even; y, the statistics, dweight and dbias right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (a conversion to a 16-bit float rounding toward zero "
        "instead of to nearest)"),
    "gn_weight_bias_swapped": (
        "group_norm", "affine",
        ("with a weight and a bias: the kernel handed (bias, weight) in its (gamma, beta) slots: y = x_hat * "
         "bias + weight and dx from g = dy * bias; dweight = sum dy * x_hat and dbias = sum dy right"),
        "cf. " + GH + "keras-team/keras/pull/3248 (a norm's same-shape parameter arrays taken in another order "
        "without any error)"),
    "gn_rstd_output_without_eps": (
        "group_norm", "eps",
        ("the returned rstd computed as 1 / sqrt(var) (eps left out of the line that fills the output); y and "
         "the gradients use 1 / sqrt(var + eps)"),
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a LayerNormalization whose eps never reached the kernel: "
        "1 / sqrt(var) without eps)"),
    "gn_bwd_mean_of_next_group": (
        "group_norm", "layout",
        ("the backward loads the saved mean of (sample, group) row (i + 1) mod (N * G) (the mean pointer advanced "
         "before the load; the rstd loaded right): x_hat = (x - that mean) * rstd, dx and dweight from it; the "
         "forward and dbias right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward reading another group's saved "
        "mean and rstd)"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_first_sample_only": (
        "instance_norm", "running",
        ("training with running statistics, more than one sample: the running update's loop over the batch "
         "bounded at 1: running_mean and running_var moved by sample 0's instance means and unbiased "
         "variances only; y, the saved statistics and the gradients right"),
        "cf. " + GH + "flagos-ai/FlagGems/pull/296 (review: an instance norm kernel's running-statistics update "
        "over the batch)"),
    "in_eval_dx_without_weight": (
        "instance_norm", "backward",
        ("eval with running statistics and a weight: dx = dy * rstd (the weight's factor left out of the "
         "fixed-statistics backward); dweight, dbias and the forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "in_saved_mean_rstd_swapped": (
        "instance_norm", None,
        ("the kernel's two saved-statistics pointers exchanged at the store: the mean output holds rstd and the "
         "rstd output the mean; y, the gradients and the running state right"),
        "pattern: two output pointers of the same shape passed in each other's slot"),
    "in_dx_spatial_tail_unstored": (
        "instance_norm", "block",
        ("a spatial size above 4 and not a multiple of 4: the dx kernel stores each instance's values in "
         "four-wide vector stores only, the last S mod 4 positions never written (0); the forward, dweight and "
         "dbias right"),
        "cf. " + GH + "amd/IRON/pull/198 (vector loops bounded on whole vectors: the tile's tail never written)"),
    "in_affine_epilogue_in_input_dtype": (
        "instance_norm", "precision",
        ("16-bit inputs with a weight and a bias: the unfused epilogue computes in the input dtype, x_hat "
         "rounded, its product with the weight rounded, then the bias added and rounded; the statistics and "
         "the gradients right"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (a norm's arithmetic done in the input dtype instead of "
        "float32)"),
    "in_eps_added_twice": (
        "instance_norm", "eps",
        ("instance statistics: the statistics kernel hands over var + eps and the normalize kernel adds eps "
         "again: rstd = 1 / sqrt(var + 2 eps), y, the saved rstd and dx; the eval path and the running update "
         "right"),
        "pattern: eps added by two cooperating kernels, each assuming the other leaves it out"),
    # ------------------------------------------------------------------ z_score
    "zs_f16_y_round_up": (
        "z_score", "rounding",
        ("float16 inputs: y converted from float32 with the round-up conversion (toward +inf, __float2half_ru) "
         "instead of round to nearest even; the statistics and dx right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 stores in another rounding mode than to "
        "nearest)"),
    "zs_dim_tuple_first_axis_only": (
        "z_score", "group",
        ("dim a tuple of several axes: the statistics taken over the first of them only (one slice per position "
         "of the others), y and dx from those; the mean and std outputs hold each slice's last run's"),
        "cf. " + GH + "pytorch/pytorch/issues/9703 (std and var over a tuple of dims, once reduced one dim at "
        "a time)"),
    "zs_y_stored_without_axis_restore": (
        "z_score", "layout",
        ("dim a single axis that is not the last: y computed on the rows with dim moved last but stored from "
         "that (rows, n) buffer as it is (the inverse permute before the store left out); the statistics and "
         "dx right"),
        "cf. " + GH + "gpu-mode/reference-kernels/pull/39 (a reshape where a permute belongs)"),
    "zs_scaled_sumsq_in_half": (
        "z_score", "precision",
        ("16-bit inputs: the overflow-safe variance's sum of the scaled squares (d / a)^2 accumulated left to "
         "right in the input dtype (the mean and the scale a in float32): std, y and dx"),
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1253 (a norm kernel's accumulators cast to a 16-bit type)"),
    "zs_bwd_weight_applied_twice": (
        "z_score", "backward",
        ("with a weight: the backward's g = dy * weight multiplied by the weight again (the wrapper passes the "
         "weighted dy to a kernel that applies the weight itself): dx from g * weight; dweight, dbias and the "
         "forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward's handling of the weight factor fixed)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_root_exponent_p": (
        "lp_normalize", "semantics",
        ("p other than 1 and 2: the general path's root written (sum |x|^p)^p (pow(total, p) where pow(total, 1 "
         "/ p) belongs): the norm output, y = x / that norm and dx at it"),
        "cf. " + GH + "dganguli/robust-pca/issues/3 (a p-norm function returning the sum of powers without its "
        "1 / p root)"),
    "lp_bwd_projection_of_w": (
        "lp_normalize", "backward",
        ("p other than 2: the backward's projection sum(dy * u) written sum(dy * w), w = sign(u) |u|^(p - 1) "
         "(the derivative vector used on both sides): dx = (dy - w * sum(dy * w)) / norm; the forward right"),
        "cf. " + GH + "pytorch/pytorch/issues/113527 (a hand-derived gradient of x / ||x|| disagreeing with "
        "autograd)"),
    "lp_y_store_row_pitch_padded": (
        "lp_normalize", "layout",
        ("slices whose length is not a multiple of 8, more than one slice: y stored with the row pitch of the "
         "8-aligned tile (ceil(n / 8) * 8) into the packed (rows, n) output: row r written from offset r * "
         "pitch, the rows shifted, the gaps left 0, the rows beyond the buffer dropped; the norm and dx right"),
        "cf. " + GH + "ROCm/aiter/pull/2900 (a kernel writing a buffer with one row stride while its reader "
        "uses the padded one)"),
    "lp_chunk_norms_added": (
        "lp_normalize", "merge",
        ("slices longer than 64: each chunk of 64 values reduced to its own p-norm by its program and the "
         "chunks' norms added (atomic add of the partial norms) where their p-th powers should be summed before "
         "the root: the norm output, y = x / it and the backward at it"),
        "cf. " + GH + "iree-org/wave/pull/913 (a split reduction whose partials are combined by an atomic add)"),
    "lp_grid_rows_from_first_axis": (
        "lp_normalize", "block",
        ("inputs of three or more axes: the grid launched with x.shape[0] programs (one per slice) where the "
         "number of slices belongs: the slices beyond them never processed, their y, norm and dx left 0"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm kernel's row count taken as input.shape[0] for "
        "inputs of three or more axes)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_bwd_projection_of_p": (
        "group_norm_silu", "backward",
        ("dx = rstd * (g - mean(g) - x_hat * mean(g * p)), the projection's reduction fed the pre-activation p "
         "= x_hat * weight + bias (the register the epilogue kept) instead of x_hat; dweight, dbias and the "
         "forward right"),
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/188 (review: a fused GroupNorm + activation backward fed "
        "the wrong saved tensor)"),
    "gns_eps_squared": (
        "group_norm_silu", "eps",
        ("eps squared before it reaches the kernel (the module's eps taken for the std's epsilon and squared to "
         "go under the root): rstd = 1 / sqrt(var + eps^2), y, the saved rstd and the backward"),
        "cf. " + GH + "keras-team/keras/pull/8726 (a norm's epsilon taken for the std's where the variance's "
        "belongs: sqrt(epsilon) much larger than epsilon)"),
    "gns_weight_index_channels_last": (
        "group_norm_silu", "layout",
        ("more than one spatial position: the fused epilogue loads weight and bias at (flat index within the "
         "sample) mod C (the channels-last channel index) instead of index // S: p, y and dx (g = dp * that "
         "weight); the statistics, dweight and dbias right"),
        GH + "pytorch/pytorch/issues/111824 (GroupNorm not handling channels_last correctly)"),
    "gns_mean_rounded_to_input_dtype": (
        "group_norm_silu", "precision",
        ("16-bit inputs: each group's mean rounded to the input dtype and the deviations, the variance, x_hat "
         "and the saved mean taken about that rounded mean, forward and backward"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm statistics computed in the input dtype instead of "
        "float32)"),
    "gns_dweight_accumulated_twice": (
        "group_norm_silu", "constant",
        ("with a weight: the per-channel sum of dp * x_hat added into the dweight buffer that the reduce kernel "
         "already filled (the final store written +=): dweight twice its value; dx and dbias right"),
        "cf. " + GH + "apache/mxnet/issues/16297 (a norm parameter gradient accumulated on top of the buffer's "
        "previous value)"),
    "gns_bwd_mean_term_over_n_minus_1": (
        "group_norm_silu", "bessel",
        ("dx = rstd * (g - sum(g) / (n - 1) - x_hat * mean(g * x_hat)): the mean(g) term divides the group's sum "
         "by its count minus one; the projection, dweight, dbias and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a norm backward's mean(dy * gamma) term scaled wrong "
        "in dx)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_q_times_scale": (
        "norm_quant_block", "quant_scale",
        ("q = y * S (the block's dequantization scale used as the quantize multiplier) instead of y / S, "
         "clipped to the element range; the scale and amax outputs right"),
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/477 (FP8 quantization multiplying by its scale: the "
        "scale / scale_inv conventions)"),
    "nqb_nvfp4_static_global_scale_ignored": (
        "norm_quant_block", "quant_scale",
        ("nvfp4 with a given global_scale: the kernel computes the encode factor 2688 / the tensor amax anyway "
         "(the static input never read): the tensor scale, the E4M3 block scales and q from it"),
        "cf. " + GH + "intel/auto-round/pull/2366 (review: the static NVFP4 global scale against the one from a "
        "running amax)"),
    "nqb_rstd_of_first_row_in_pair": (
        "norm_quant_block", "layout",
        ("more than one row: the kernel takes two rows per program and scales both with the first row's rstd "
         "(each row's own mean for layer_norm): y, the blocks' amax, scales and q of every second row"),
        "pattern: a per-row statistic held in one register for the program's two rows"),
    "nqb_amax_rounded_to_input_dtype": (
        "norm_quant_block", "precision",
        ("16-bit inputs: each block's amax written to a buffer of the input dtype (rounded) and the scale taken "
         "from it: the amax output, the scales and q"),
        "cf. " + GH + "deepspeedai/DeepSpeed/issues/581 (an intermediate converted to float16 before the next "
        "step of the kernel)"),
    "nqb_ln_block_vars_merged_without_spread": (
        "norm_quant_block", "one_pass",
        ("norm='layer_norm': each row's variance merged from the quant blocks' own sums of squared deviations "
         "(each about its block's mean) without the spread of the block means; the mean right: rstd, y, the "
         "blocks' amax, scales and q"),
        "cf. " + GH + "ryankurte/rust-rolling-stats/issues/2 (partial statistics merged without the parallel "
        "algorithm's mean-difference term)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_eps_cast_to_input_dtype": (
        "adaptive_layer_norm", "eps",
        ("16-bit inputs: eps passed to the kernel as a scalar of the input dtype (rounded: 1e-5 loses its low "
         "bits, 1e-12 becomes 0 in float16, a constant token's rstd then inf): rstd, y and the backward"),
        GH + "pytorch/pytorch/issues/32137 (an epsilon of 1e-12 evaluated as zero in half precision: NaN for a "
        "zero norm)"),
    "aln_dmod_reduced_over_hidden": (
        "adaptive_layer_norm", "reduction",
        ("dscale and dshift reduced over the hidden axis as well as the tokens (sum over axes (1, 2) where axis "
         "1 belongs): each sample's one total broadcast to its H slots; dx and the forward right"),
        "pattern: a parameter gradient summed over one axis too many and broadcast back"),
    "aln_dx_tail_unstored": (
        "adaptive_layer_norm", "block",
        ("H above 4 and not a multiple of 4: the dx kernel stores each token's row in four-wide vector stores "
         "only, the last H mod 4 columns never written (0); the forward, dscale and dshift right"),
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorised path mishandling the row's tail for sizes not a "
        "multiple of its vector width)"),
    "aln_shift_of_next_sample": (
        "adaptive_layer_norm", "layout",
        ("more than one sample, with a shift: the forward loads each token's shift from the next sample's row "
         "((b + 1) mod B, the shift pointer advanced before the load): y; the statistics, dx, dscale and dshift "
         "right"),
        "cf. " + GH + "ROCm/aiter/pull/4268 (a fused AdaLN kernel indexing the per-sample scale and shift by "
        "the token row's sample)"),
    "aln_xhat_saved_in_half": (
        "adaptive_layer_norm", "precision",
        ("16-bit inputs: x_hat saved for the backward in the input dtype (rounded), dx and dscale computed from "
         "that saved x_hat; the forward and dshift right"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm intermediates kept in the input dtype instead of "
        "float32)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


class Blind31Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind31"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn31(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn31(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        per_inst = b == "bn_stats_per_sample" and batch and Nb > 1 and n > 0
        if per_inst:                                                   # one row per (channel, sample)
            xs = x.reshape(C * Nb, n // Nb)
            ms, rs = self._ln_stats(xs, eps)
            mean = np.repeat(ms, n // Nb, axis=1).reshape(C, n)
            rstd = np.repeat(rs, n // Nb, axis=1).reshape(C, n)
            bmean = ms.reshape(C, Nb)[:, -1:]                            # the last sample's, written last
            bvar = (_rsum((xs - ms) ** 2) / (n // Nb)).reshape(C, Nb)[:, -1:]
            mean_out, rstd_out = bmean, rs.reshape(C, Nb)[:, -1:]
        elif batch:
            if b == "bn_var_floored_at_eps" and n:
                bmean = _rsum(x) / n
                v = _rsum((x - bmean) ** 2) / n
                rstd = 1 / np.sqrt(np.maximum(v, eps))
            else:
                bmean, rstd = self._ln_stats(x, eps)
            mean = bmean
            mean_out, rstd_out = mean, rstd
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
            if b == "bn_eval_centred_by_batch_mean" and n:
                mean = _rsum(x) / n
            mean_out, rstd_out = mean, rstd
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                mom = cfg["momentum"]
                k = nbt + 1 if b == "bn_cumavg_factor_one_past" and mom is None else nbt
                m = bn_momentum(mom, k, acc)
                if n > 0:
                    bm = bmean.reshape(C)
                    bv = (_rsum((x - bmean) ** 2) / n if bvar is None else bvar).reshape(C)
                    if cfg["convention"] == "torch":
                        f = acc(n / (n - 1)) if n > 1 else acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        out = {"y": _store(from_channel_rows(affine(xhat, w, bias), x0.shape), d),
               "mean": mean_out.reshape(C).astype(acc), "rstd": rstd_out.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy0 = call.cotangents["y"]
            if b == "bn_dy_sample_offset_missing" and Nb > 1:
                dy0 = np.broadcast_to(dy0[:1], dy0.shape)
            dy = channel_rows(dy0, acc)
            g = dy if w is None else dy * w
            if b == "bn_bwd_g_rounded_to_input_dtype":
                g = _half(g, d)
            if per_inst:
                gi, xi = g.reshape(C * Nb, n // Nb), xhat.reshape(C * Nb, n // Nb)
                dx = _centred_dx(gi, xi, rstd.reshape(C * Nb, n // Nb)[:, :1]).reshape(C, n)
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                db = _rsum(dy * xhat) if b == "bn_dbias_from_dy_xhat" else _rsum(dy)
                grads["bias"] = _store(db.reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in31(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in31(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        imean = None
        if inst:
            if b == "in_eps_added_twice":
                imean, rstd = self._ln_stats(x, eps + eps)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_affine_epilogue_in_input_dtype" and d in _HALF and wr is not None and br is not None:
            out["y"] = _store(_half(_half(_half(xhat, d) * wr, d) + br, d).reshape(x0.shape), d)
        if b == "in_saved_mean_rstd_swapped":
            out["mean"], out["rstd"] = out["rstd"], out["mean"]
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_first_sample_only" and Nb > 1:
                    rm, rv = instance_running_update(rm, rv, m, imean[:C], ub[:C], 1, C)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            if inst:
                dx = _centred_dx(g, xhat, rstd)
            elif b == "in_eval_dx_without_weight":
                dx = dy * rstd
            else:
                dx = g * rstd
            if b == "in_dx_spatial_tail_unstored" and S > 4 and S % 4:
                dx = dx.copy()
                dx[:, (S // 4) * 4:] = 0
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn31(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn31(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn31(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "gns_eps_squared":
            eps = eps * eps
        n = xr.shape[1]
        if b == "gn_count_from_last_axis" and x0.ndim >= 4:
            n = cg * x0.shape[-1]                                # the kernel's count: cg * W
        if b == "gn_channel_welford_merge_count_one" and S > 1:
            xc = x.reshape(Nb * C, S)                                # per-channel partials (mean_c, M2_c)
            mc = _rsum(xc) / S
            m2c = _rsum((xc - mc) ** 2)
            mean = (mc.reshape(Nb * G, cg).sum(axis=1, keepdims=True)) / cg
            spread = ((mc.reshape(Nb * G, cg) - mean) ** 2).sum(axis=1, keepdims=True)
            var = (m2c.reshape(Nb * G, cg).sum(axis=1, keepdims=True) + spread) / xr.shape[1]
        else:
            mean = _rsum(xr) / n
            var = _rsum((xr - mean) ** 2) / n
        if b == "gns_mean_rounded_to_input_dtype" and d in _HALF:
            mean = _half(mean, d)
            var = _rsum((xr - mean) ** 2) / n
        rstd = 1 / np.sqrt(var + eps)
        xhr = (xr - mean) * rstd
        xhat = xhr.reshape(Nb, C, S)
        ms, rs = mean, rstd
        if b == "gn_rstd_output_without_eps":
            rs = 1 / np.sqrt(var)
        w, bias = group_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "gn_weight_bias_swapped" and w is not None and bias is not None:
            wf, bf = bias, w
        if b == "gns_weight_index_channels_last" and S > 1:
            ch = np.arange(C * S).reshape(1, C, S) % C                   # (flat index in the sample) mod C
            wf = None if w is None else w.reshape(C)[ch]
            bf = None if bias is None else bias.reshape(C)[ch]
        p = affine(xhat, wf, bf)
        if silu:
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
        gr = g.reshape(Nb * G, cg * S)
        xb = xhr
        if b == "gn_bwd_mean_of_next_group":
            xb = (xr - np.roll(mean, -1, axis=0)) * rstd                  # the mean of row (i + 1) mod (N * G)
        if b == "gn_bwd_mean_term_sign_flipped":
            dxr = rstd * (gr + _rsum(gr) / n - xb * (_rsum(gr * xb) / n))
        elif b == "gns_bwd_projection_of_p":
            dxr = rstd * (gr - _rsum(gr) / n - xb * (_rsum(gr * p.reshape(Nb * G, -1)) / n))
        elif b == "gns_bwd_mean_term_over_n_minus_1" and n > 1:
            dxr = rstd * (gr - _rsum(gr) / (n - 1) - xb * (_rsum(gr * xb) / n))
        else:
            dxr = rstd * (gr - _rsum(gr) / n - xb * (_rsum(gr * xb) / n))
        dxv = dxr.reshape(x0.shape)
        if b == "gn_dx_bf16_truncated" and d == "bfloat16":
            grads = {"x": _toward_zero(dxv, np_dtype(d))}
        else:
            grads = {"x": _store(dxv, d)}
        xbv = xb.reshape(Nb, C, S)
        for key, t, given in (("weight", dp * xbv, w), ("bias", dp, bias)):
            if given is None:
                continue
            v = _channel_sums(t, C)
            if b == "gns_dweight_accumulated_twice" and key == "weight":
                v = v + _channel_sums(t, C)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs31(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows31(x, ddof, eps, acc, b, d):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
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
        if b == "zs_scaled_sumsq_in_half" and d in _HALF:
            sumsq = _half_rowsum(q * q, d)
        else:
            sumsq = _rsum(q * q)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        return mean, std, dev

    @staticmethod
    def _zs_dx31(g, xhat, std, n, m, acc):
        if g.size == 0:
            return np.zeros_like(g)
        if m <= 0:
            return np.full(g.shape, np.nan, acc)
        sg, sgx = _rsum(g), _rsum(g * xhat)
        inner = g - sg / n - xhat * (sgx / acc(m))
        return np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))

    def _zs31(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        several = isinstance(dims, (list, tuple)) and len(dims) > 1
        if b == "zs_dim_tuple_first_axis_only" and several:
            return self._zs_first_axis31(call, acc, x, n, back, w, bias, ddof, eps)
        m = n - ddof
        mean, std, dev = self._zs_rows31(x, ddof, eps, acc, b, d)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        ys = back(y)
        if b == "zs_y_stored_without_axis_restore" and not several and ys.shape == x0.shape:
            axis = (dims[0] if isinstance(dims, (list, tuple)) else dims) % x0.ndim
            if axis != x0.ndim - 1:
                ys = np.ascontiguousarray(y).reshape(x0.shape)          # the (rows, n) buffer as it is
        out = {"y": _store(ys, d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        if b == "zs_f16_y_round_up" and d == "float16":
            out["y"] = _directed(ys, np_dtype(d), True)
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if w is None else dy * w
            if b == "zs_bwd_weight_applied_twice" and w is not None:
                g = g * w
            dx = self._zs_dx31(g, xhat, std, n, m, acc)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    def _zs_first_axis31(self, call, acc, x, n, back, w, bias, ddof, eps):
        """zs_dim_tuple_first_axis_only: the statistics over the first of the dim axes only, one slice per
        position of the others (their last run's statistics stored as the slice's)."""
        d, inp = call.dtype, call.inputs
        R = x.shape[0]
        a = call.inputs["x"].shape[min(k % call.inputs["x"].ndim for k in call.config["dim"])]
        k = n // a

        def cols(v):                                              # (R, n) -> (R * k, a)
            return np.ascontiguousarray(v.reshape(R, a, k).transpose(0, 2, 1)).reshape(R * k, a)

        def uncols(v):
            return np.ascontiguousarray(v.reshape(R, k, a).transpose(0, 2, 1)).reshape(R, n)
        xc = cols(x)
        mean, std, dev = self._zs_rows31(xc, ddof, eps, acc, None, d)
        xhc = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        xhat = uncols(xhc)
        y = affine(xhat, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean.reshape(R, k)[:, -1:], True).astype(acc),
               "std": back(std.reshape(R, k)[:, -1:], True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), call.config["dim"])
            g = dy if w is None else dy * w
            dx = uncols(self._zs_dx31(cols(g), xhc, std, a, a - ddof, acc))
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp31(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_rows31(x, dy, p, eps, torch_rule, acc, b):
        """(y, norm, dx) of the slices x (R, n) (dy: their cotangent, or None; dx None then)."""
        n = x.shape[1]

        def powsum(v):
            if p == 1.0:
                return _rsum(v)
            if p == 2.0:
                return _rsum(v * v)
            return _rsum(v ** acc(p))

        def pnorm(v):
            s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
            s = np.where((s > 0) & np.isfinite(s), s, acc(1))
            total = powsum(np.abs(v) / s)
            inv = acc(np.inf) if p == 0 else acc(1.0 / p)
            if b == "lp_root_exponent_p" and p not in (1.0, 2.0):
                inv = acc(p)
            return s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)
        if b == "lp_chunk_norms_added" and n > 64:
            norm = sum(pnorm(np.ascontiguousarray(x[:, k:k + 64])) for k in range(0, n, 64))
        else:
            norm = pnorm(x)
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
            if b == "lp_bwd_projection_of_w" and p != 2.0:
                dot = _rsum(dy * wv)
            else:
                dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        return y, norm, dx

    def _lp31(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        R = x.shape[0]
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        y, norm, dx = self._lp_rows31(x, dy, p, eps, torch_rule, acc, b)
        if b == "lp_grid_rows_from_first_axis" and x0.ndim > 2 and R > x0.shape[0]:
            done = x0.shape[0]                                   # the rows the grid's programs cover
            y, norm = y.copy(), norm.copy()
            y[done:], norm[done:] = 0, 0
            if dx is not None:
                dx = dx.copy()
                dx[done:] = 0
        ys = back(y)
        if b == "lp_y_store_row_pitch_padded" and n % 8 and R > 1:
            P = -(-n // 8) * 8                                   # the 8-aligned tile's row pitch
            flat = np.zeros(R * n, acc)
            for r in range(R):
                start = r * P
                if start >= R * n:
                    break
                seg = y[r, :min(n, R * n - start)]
                flat[start:start + seg.size] = seg
            ys = back(flat.reshape(R, n))
        out = {"y": _store(ys, d), "norm": back(norm, True).astype(acc)}
        return Returned(out, {} if dx is None else {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb31(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized31(self, call, cfg, acc, b, B):
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
            mean = _rsum(s) / H
            if b == "nqb_ln_block_vars_merged_without_spread":
                m2 = 0
                for k in range(0, H, B):                         # each quant block about its own mean
                    sk = np.ascontiguousarray(s[:, k:k + B])
                    m2 = m2 + _rsum((sk - _rsum(sk) / sk.shape[1]) ** 2)
                var = m2 / H
            else:
                var = _rsum((s - mean) ** 2) / H
            rstd = 1 / np.sqrt(var + eps)
            c = s - mean
        else:
            rstd = 1 / np.sqrt(_rsum(s * s) / H + eps)
            c = s
        if b == "nqb_rstd_of_first_row_in_pair":
            rstd = np.repeat(rstd[0::2], 2, axis=0)[:rstd.shape[0]]
        y = c * rstd
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb31(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized31(call, cfg, acc, b, B)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_amax_rounded_to_input_dtype":
            amax = _half(amax, call.dtype)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            gs = inp.get("global_scale")
            if b == "nqb_nvfp4_static_global_scale_ignored":
                gs = None
            enc = nvfp4_encode(gs, amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        if b == "nqb_q_times_scale":
            qv = np.clip(yb * S[..., None], -qmax, qmax)
        else:
            qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln31(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln31(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "aln_eps_cast_to_input_dtype":
            eps = _half(eps, d)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        shf = sh
        if b == "aln_shift_of_next_sample" and shift is not None and B > 1:
            shf = per_token(np.roll(shift.reshape(B, H), -1, axis=0), B, H, T, acc)
        mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, shf)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        xb = _half(xhat, d) if b == "aln_xhat_saved_in_half" else xhat
        dx = _centred_dx(g, xb, rstd)
        if b == "aln_dx_tail_unstored" and H > 4 and H % 4:
            dx = dx.copy()
            dx[:, (H // 4) * 4:] = 0
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            ds = per_sample(dy * xb, B, T, H)
            if b == "aln_dmod_reduced_over_hidden":
                ds = np.broadcast_to(ds.sum(axis=1, keepdims=True), ds.shape)
            grads["scale"] = _store(ds, d)
        if shift is not None:
            dsh = per_sample(dy, B, T, H)
            if b == "aln_dmod_reduced_over_hidden":
                dsh = np.broadcast_to(dsh.sum(axis=1, keepdims=True), dsh.shape)
            grads["shift"] = _store(dsh, d)
        return Returned(out, grads)
