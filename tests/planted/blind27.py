"""A twenty-seventh held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind27Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn27``, ``_in27``, ``_gn27`` for group_norm and
group_norm_silu, ``_zs27``, ``_lp27``, ``_nqb27``, ``_aln27``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind27Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind25.py (the same mistake on the same op; the twenty-sixth set, written at the same time for the other
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

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind27Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_2d_input_read_transposed": (
        "batch_norm", "layout",
        ("2-D inputs (N, C), N and C above one: the kernel takes the (N, C) buffer for C contiguous channel rows "
         "of N values (x.reshape(C, N) where the transpose belongs), and writes y and dx back the same way: the "
         "batch statistics, y, the saved mean and rstd, the running update, dx, dweight and dbias over the wrong "
         "elements"),
        "cf. " + GH + "NVIDIA/apex/pull/590 (a batch norm kernel's 1-D (N, C) inputs laid out wrong until the "
        "channels-last path was taken for them)"),
    "bn_eps_added_to_sum_of_squares": (
        "batch_norm", "eps",
        ("batch statistics: eps added to each channel's sum of squared deviations before the division by the "
         "count n: rstd = 1 / sqrt((sum (x - mean)^2 + eps) / n), y, the saved rstd and dx from it; the running "
         "update (the plain variance) right"),
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (a normalization applying eps at a different place in "
        "some paths)"),
    "bn_bwd_mean_term_of_dy": (
        "batch_norm", "backward",
        ("batch statistics with a weight: dx = rstd * (g - mean(dy) - x_hat * mean(g * x_hat)), the mean term "
         "reduced from the raw dy where g = dy * weight belongs; dweight, dbias and the forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "bn_running_stores_swapped": (
        "batch_norm", "running",
        ("training with running statistics: the updated running mean and running variance stored to each "
         "other's buffer (running_mean holds the new variance, running_var the new mean); y, the saved "
         "statistics, the gradients and num_batches_tracked right"),
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm kernel's two per-channel results written the wrong "
        "way round)"),
    "bn_dx_sample_grid_floor_quads": (
        "batch_norm", "block",
        ("more than four samples, not a multiple of four: the dx kernel takes four samples per program on N // 4 "
         "programs (floor instead of cdiv), so the last N mod 4 samples' dx is never written (0); the forward, "
         "dweight and dbias right"),
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering only part of its output: the "
        "rest of the torch.empty buffer never written)"),
    "bn_eval_bias_dropped": (
        "batch_norm", "affine",
        ("eval with running statistics and a bias: the inference kernel's folded shift leaves the bias out, y = "
         "(x - running_mean) * rstd * weight; the training path, dx and the parameter gradients right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/5317 (review: a folded batch norm's shift unaccounted for on one "
        "path of the fold)"),
    "bn_mean_rounded_to_input_dtype": (
        "batch_norm", "precision",
        ("16-bit inputs, batch statistics: each channel's mean rounded to the input dtype and the deviations, "
         "the variance, x_hat, the saved mean and the running update taken from that rounded mean, forward and "
         "backward"),
        "cf. " + GH + "pytorch/pytorch/issues/77507 (bfloat16 normalization computing its moments in bfloat16)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_weight_of_group_first_channel": (
        "group_norm", "layout",
        ("more than one channel a group, with a weight: the dx kernel loads the weight once per group, at the "
         "group's first channel, and forms g = dy * weight[c0] for every channel of the group; the forward, "
         "dweight and dbias right"),
        "cf. " + GH + "mlpack/mlpack/pull/3028 (review: a group norm's per-channel gamma expanded with the wrong "
        "index formula)"),
    "gn_bwd_xhat_saved_in_half": (
        "group_norm", "precision",
        ("16-bit inputs: x_hat saved for the backward in the input dtype (rounded), dx and dweight computed "
         "from that saved x_hat; the forward and dbias right"),
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's saved values truncated from the "
        "accumulation type to the input type)"),
    "gn_dparams_spatial_tail_dropped": (
        "group_norm", "reduction",
        ("more than four spatial positions, not a multiple of four: dweight and dbias reduced from each (sample, "
         "channel)'s positions in four-wide vector loads only, the last S mod 4 positions never entering them; "
         "dx and the forward right"),
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorised path mishandling the row's tail for sizes not a "
        "multiple of its vector width)"),
    "gn_bwd_rstd_without_eps": (
        "group_norm", "eps",
        ("the backward recomputes each group's rstd from x as 1 / sqrt(var) (eps left out of its copy of the "
         "formula): x_hat, dx and dweight from it; the forward and dbias right"),
        "pattern: a backward kernel recomputing a statistic with its own copy of the formula"),
    "gn_rstd_output_before_sqrt": (
        "group_norm", None,
        ("the rstd output written as 1 / (var + eps) (the reciprocal taken before the square root) while y and "
         "the gradients use the right rstd; the mean output right"),
        "pattern: an output written from an intermediate of the statistic's finalization"),
    "gn_dparams_sample0_counted_twice": (
        "group_norm", "reduction",
        ("more than one sample: dweight and dbias: the accumulator over the samples initialized with sample 0's "
         "partial and the loop then starting at sample 0, so sample 0 is counted twice; dx and the forward right"),
        "pattern: an accumulator seeded with the first partial and a loop that adds it again"),
    "gn_weight_plus_one_flag_set": (
        "group_norm", "affine",
        ("with a weight: the fused kernel's zero-centred-gamma flag left set, y = x_hat * (1 + weight) + bias and "
         "dx from g = dy * (1 + weight); dweight = sum dy * x_hat and dbias right"),
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel's weight offset convention applied to the "
        "wrong model)"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_mean_not_updated": (
        "instance_norm", "running",
        ("training with running statistics: only running_var updated; running_mean returned unchanged (its "
         "store missing from the update kernel); y, the saved statistics and the gradients right"),
        "cf. " + GH + "keras-team/keras-core/pull/339 (a batch norm whose moving variance was not updated in "
        "training)"),
    "in_bwd_projection_of_deviation": (
        "instance_norm", "backward",
        ("instance statistics: dx = rstd * (g - mean(g) - x_hat * mean(g * (x - mean))), the projection's "
         "reduction fed the centred x (the deviation the kernel holds) instead of x_hat: the projection term "
         "divided by rstd; dweight, dbias and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the powers of the saved inverse "
        "std wrong)"),
    "in_rstd_rounded_to_input_dtype": (
        "instance_norm", "precision",
        ("16-bit inputs, instance statistics: each instance's rstd computed into a variable of the input dtype "
         "(rounded): y, the saved rstd and the backward from it"),
        "cf. " + GH + "pytorch/helion/pull/2273 (a norm's inverse rms kept in bfloat16 where float32 belongs)"),
    "in_y_store_channel_offset_missing": (
        "instance_norm", "layout",
        ("more than one channel: the output pointer not advanced by the channel, every instance's y written to "
         "its sample's channel-0 slot (the last channel's values left there, the other channels never written, "
         "0); the statistics and the gradients right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/57223 (a norm kernel's per-channel offset wrong)"),
    "in_rows_grid_floor_quads": (
        "instance_norm", "block",
        ("more than four instances (N * C), not a multiple of four: the kernel takes four instances per program "
         "on N * C // 4 programs, the last N * C mod 4 instances never processed: their y, mean, rstd and dx "
         "left 0 and their x_hat 0 in dweight; dbias and the running update (its own reduction) right"),
        "cf. " + GH + "thu-ml/TurboDiffusion/pull/103 (Triton normalization kernels wrong when the row count is "
        "not a multiple of their rows per program)"),
    "in_eval_eps_missing": (
        "instance_norm", "eps",
        ("eval with running statistics: rstd = 1 / sqrt(running_var) without eps, forward and dx = g * rstd; "
         "the instance-statistics path right"),
        "cf. " + GH + "Tencent/ncnn/issues/303 (an inference BatchNorm taking sqrt(var) without eps)"),
    "in_halves_merged_without_mean_spread": (
        "instance_norm", "one_pass",
        ("instance statistics, more than one position: each instance reduced in two halves whose sums of squared "
         "deviations (each about its half's mean) are added without the spread of the two half means; the mean "
         "right: rstd, y, dx and the running variance from that sum"),
        "cf. " + GH + "speechbrain/speechbrain/pull/2835 (a normalization's variance combine fixed)"),
    # ------------------------------------------------------------------ z_score
    "zs_dparams_last_row_dropped": (
        "z_score", "reduction",
        ("more than one slice, with a weight or a bias: dweight and dbias summed over the slices 0 .. R - 2 (the "
         "loop bound one short), the last slice never entering them; dx and the forward right"),
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (a norm tutorial's dw / db partial buffers losing some "
        "rows' contributions)"),
    "zs_xhat_rounded_before_affine": (
        "z_score", "precision",
        ("16-bit inputs: the normalize pass writes x_hat in the input dtype and y = x_hat * weight + bias is "
         "computed from that rounded x_hat; the statistics and the gradients right"),
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/1132 (a norm's output cast to bfloat16 before the weight "
        "multiply in one implementation and after it in the other)"),
    "zs_bwd_std_of_next_slice": (
        "z_score", "layout",
        ("more than one slice: the backward loads the saved std at the next slice's index ((r + 1) mod R, the "
         "std pointer advanced before the load): x_hat = (x - mean) / that std, dx divided by it and dweight "
         "from that x_hat; the forward and dbias right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's saved "
        "statistics)"),
    "zs_bwd_projection_sum_of_g": (
        "z_score", "backward",
        ("dx = (g - mean(g) - x_hat * sum(g) / (n - ddof)) / std, the projection's reduction sum(g * x_hat) "
         "written sum(g) (the mean term's sum reused); dweight, dbias and the forward right"),
        "pattern: a reduction register reused for another term of the backward"),
    "zs_ddof_zero_read_as_one": (
        "z_score", "bessel",
        ("ddof = 0 given: the option read as `ddof or 1`, so an explicit 0 becomes torch.std's default 1: the "
         "variance divided by n - 1, std, y and dx"),
        "cf. " + GH + "andymai/stackchan-kai/pull/541 (a parameter of 0 replaced by the default through a falsy "
        "`or` fallback)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_eps_clamp_as_min": (
        "lp_normalize", "eps",
        ("zero_rule='torch': the denominator clamped with min instead of max, y = x / min(norm, eps) (clamp_max "
         "written for clamp_min): every slice whose norm exceeds eps divided by eps, and its dx = dy / eps"),
        "cf. " + GH + "apple/axlearn/pull/21 (an L2 normalization's eps: added, inside the root, or a clamp as "
        "F.normalize)"),
    "lp_norm_output_row_offset_missing": (
        "lp_normalize", "layout",
        ("more than one slice: the norm store not advanced by the slice index, every slice's norm written to slot "
         "0 (the last slice's left there, the other slots never written, 0); y and dx right"),
        "cf. " + GH + "NVIDIA/Model-Optimizer/issues/193 (per-row values stored at the wrong offset)"),
    "lp_bwd_projection_times_p": (
        "lp_normalize", "backward",
        ("p other than 1: dx = (dy - p * w * sum(dy * u)) / norm, the factor p of d sum|x|^p / dx kept in the "
         "projection (the 1 / p of the root's derivative not cancelled against it); the forward right"),
        "cf. " + GH + "pytorch/pytorch/issues/113527 (a hand-derived gradient of x / ||x|| disagreeing with "
        "autograd)"),
    "lp_divided_by_max_abs": (
        "lp_normalize", "semantics",
        ("y = x / s with s = max |x| (the scale the overflow-safe reduction divides by) instead of the norm s * "
         "(sum (|x| / s)^p)^(1/p): every slice max-abs normalized; the returned norm and dx (its own kernel) "
         "right"),
        "pattern: the epilogue dividing by the wrong register of the reduction"),
    "lp_bwd_clamped_dy_times_eps": (
        "lp_normalize", "eps",
        ("zero_rule='torch': slices whose norm is below eps (clamped in the forward) get dx = dy * eps instead of "
         "dy / eps; the forward and the other slices right"),
        "cf. " + GH + "pytorch/pytorch/issues/184575 (F.normalize's gradient at a clamped slice, dy / eps)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_weight_bias_swapped": (
        "group_norm_silu", "affine",
        ("with a weight and a bias: the fused kernel handed (bias, weight) in its (gamma, beta) slots: p = x_hat * "
         "bias + weight, y = silu(p), and dx from g = dp * bias; dweight = sum dp * x_hat and dbias = sum dp "
         "(the parameter-gradient kernel) right"),
        "pattern: two parameter pointers of the same shape passed in each other's slot"),
    "gns_silu_before_norm": (
        "group_norm_silu", "semantics",
        ("the activation applied to the input before the group norm (act -> norm ordering): y = GN(silu(x)) * "
         "weight + bias, the statistics those of silu(x), forward and the backward of that function"),
        "cf. " + GH + "ooples/AiDotNet/pull/1299 (review: a block running its activation before the GroupNorm "
        "instead of after it)"),
    "gns_rstd_output_is_var": (
        "group_norm_silu", None,
        ("the rstd output written from the variance register (each group's biased variance) instead of its "
         "rstd; y, the mean output and the gradients right"),
        "pattern: an output written from an intermediate of the statistic's finalization"),
    "gns_dbias_from_g": (
        "group_norm_silu", "backward",
        ("with a weight and a bias: dbias = sum dp * weight (the weighted g = dy * silu'(p) * weight the dx "
         "pass forms) instead of sum dp; dx and dweight right"),
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/187 (a fused GroupNorm + SiLU backward feeding its "
        "gradients the wrong tensor)"),
    "gns_stats_pooled_over_batch": (
        "group_norm_silu", "reduction",
        ("more than one sample: each group's mean and variance pooled over every sample (the batch folded into "
         "the reduction) instead of per sample: y, the saved statistics (repeated over the samples) and the "
         "backward over the pooled rows"),
        "cf. " + GH + "sonos/tract/pull/2863 (a normalization reduced over the batch axis as well, the statistics "
        "shared across samples)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_exact_rule_rounded_pow2": (
        "norm_quant_block", "scale_rounding",
        ("fp8_group with scale_rule 'exact': the scales rounded up to a power of two anyway (the kernel's UE8M0 "
         "flag set from the format alone): scale and q = y / scale; amax right"),
        "cf. " + GH + "PaddlePaddle/FastDeploy/pull/5563 (per_token_quant_fp8's UE8M0 option: the scale rounded "
        "up to a power of two)"),
    "nqb_nvfp4_tensor_amax_summed": (
        "norm_quant_block", "quant_scale",
        ("nvfp4 without a global_scale: the tensor amax behind the encode factor 2688 / amax accumulated from "
         "the rows' amax with an atomic add instead of an atomic max (the sum of the row maxima): the tensor "
         "scale, the block scales and q"),
        "cf. " + GH + "intel/torch-xpu-ops/pull/4374 (an atomicMax overload doing fetch_add, the values "
        "accumulated instead of their maximum)"),
    "nqb_rms_sumsq_first_tile_only": (
        "norm_quant_block", "block",
        ("norm='rms_norm', H above 128: each row's sum of squares loops over one column tile of 128 (the tile "
         "offset never advanced), the columns beyond it never entering it, still divided by H: rstd, y, the "
         "blocks' amax, scales and q"),
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "nqb_residual_of_row0": (
        "norm_quant_block", "layout",
        ("with a residual, more than one row: the residual pointer not advanced by the row, every row adds "
         "residual row 0: the sum, residual_out, the normalization, amax, scales and q"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding its batches wrong)"),
    "nqb_mx_clip_upper_only": (
        "norm_quant_block", "saturation",
        ("mxfp8: the quotients y / scale clipped with min(q, qmax) only (the lower bound -qmax left out): negative "
         "quotients below -448 overflow to NaN in float8_e4m3fn; the scales and amax right"),
        "cf. " + GH + "uxlfoundation/oneDNN/pull/5626 (fp8: saturate the output after dynamic e8m0 scaling "
        "instead of overflowing)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_stats_stored_token_major": (
        "adaptive_layer_norm", "layout",
        ("more than one sample and token: the mean and rstd outputs written with the token index varying "
         "slowest (element (b, t) stored at t * B + b) into the (B, T) buffers; y and the gradients right"),
        "cf. " + GH + "llvm/torch-mlir/pull/674 (a layer norm's mean and rstd outputs returned wrong)"),
    "aln_bwd_mean_g_term_dropped": (
        "adaptive_layer_norm", "backward",
        ("dx = rstd * (g - x_hat * mean(g * x_hat)) (the rms-norm backward's formula, the - mean(g) term left "
         "out), g = dy * (1 + scale); dscale, dshift and the forward right"),
        "cf. " + GH + "apache/mxnet/issues/1053 (a norm backward whose mean-gradient term was assembled wrong "
        "while the forward was right)"),
    "aln_dmod_last_token_dropped": (
        "adaptive_layer_norm", "reduction",
        ("more than one token a sample: dscale and dshift summed over the tokens 0 .. T - 2 (the loop bound one "
         "short), the last token of each sample never entering them; dx and the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing partial sums in its final "
        "reduction)"),
    "aln_stats_over_sample": (
        "adaptive_layer_norm", "semantics",
        ("the statistics taken per sample over all its tokens and channels (T * H values, a layer norm over the "
         "last two axes) instead of per token over H: the saved per-token mean and rstd the sample's, y and the "
         "backward over the sample"),
        "cf. " + GH + "jadore801120/attention-is-all-you-need-pytorch/pull/17 (a LayerNormalization computing "
        "its statistics over the sequence as well as the features)"),
    "aln_bf16_dx_truncated": (
        "adaptive_layer_norm", "rounding",
        ("bfloat16 inputs: dx converted from float32 by dropping the low 16 bits (rounding toward zero) instead "
         "of round to nearest even; y, the statistics, dscale and dshift right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _toward_zero(a, npdt):
    """``a`` converted to the 16-bit float ``npdt`` rounding toward zero (one step toward zero wherever the
    nearest-even conversion rounded away)."""
    r = np.asarray(np.asarray(a).astype(npdt))
    rv, av = r.astype(np.float64), np.asarray(a, np.float64)
    away = (np.abs(rv) > np.abs(av)) & np.isfinite(rv) & (rv != 0)
    bits = r.view(np.uint16).copy()
    bits[away] -= 1
    return bits.view(npdt)


def _first_rows(n, quads):
    """How many of ``n`` rows a grid of ``n // quads`` programs of ``quads`` rows each processes."""
    return (n // quads) * quads


class Blind27Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind27"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn27(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn27(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        flat = b == "bn_2d_input_read_transposed" and x0.ndim == 2 and x0.shape[0] > 1 and x0.shape[1] > 1

        def rows(a):                                                       # (C, n) channel rows
            if flat:
                return np.ascontiguousarray(a).astype(acc).reshape(a.shape[1], a.shape[0])
            return channel_rows(a, acc)

        def unrows(a):
            return a.reshape(x0.shape) if flat else from_channel_rows(a, x0.shape)
        x = rows(x0)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_eps_added_to_sum_of_squares" and n:
                bmean = _rsum(x) / n
                bvar = _rsum((x - bmean) ** 2) / n
                rstd = 1 / np.sqrt((_rsum((x - bmean) ** 2) + eps) / n)
            elif b == "bn_mean_rounded_to_input_dtype" and d in _HALF and n:
                bmean = _half(_rsum(x) / n, d)
                bvar = _rsum((x - bmean) ** 2) / n
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
                    if b == "bn_running_stores_swapped":
                        rm, rv = rv, rm
            state = running_state(rm, rv, nbt, d)
        bo = bias
        if b == "bn_eval_bias_dropped" and not batch:
            bo = None
        out = {"y": _store(unrows(affine(xhat, w, bo)), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = rows(call.cotangents["y"])
            g = dy if w is None else dy * w
            if batch and b == "bn_bwd_mean_term_of_dy" and w is not None:
                dx = rstd * (g - _rsum(dy) / n - xhat * (_rsum(g * xhat) / n))
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            if b == "bn_dx_sample_grid_floor_quads" and Nb > 4 and Nb % 4:
                dxs = dx.reshape(C, Nb, -1).copy()
                dxs[:, _first_rows(Nb, 4):, :] = 0
                dx = dxs.reshape(C, n)
            grads = {"x": _store(unrows(dx), d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in27(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in27(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        imean = None
        ub = None
        if inst:
            if b == "in_halves_merged_without_mean_spread" and S > 1:
                h = (S + 1) // 2
                xa, xb = x[:, :h], x[:, h:]
                ma, mb = _rsum(xa) / h, _rsum(xb) / (S - h)
                m2 = _rsum((xa - ma) ** 2) + _rsum((xb - mb) ** 2)
                imean = (ma * h + mb * (S - h)) / S
                rstd = 1 / np.sqrt(m2 / S + eps)
                ub = m2 / (S - 1)
            elif b == "in_rstd_rounded_to_input_dtype" and d in _HALF and S:
                imean, rstd = self._ln_stats(x, eps)
                rstd = _half(rstd, d)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        elif b == "in_eval_eps_missing":
            mean, rstd = instance_running_stats(st, Nb, acc(0), acc)
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        mo, ro = mean, rstd
        grid = b == "in_rows_grid_floor_quads" and Nb * C > 4 and (Nb * C) % 4
        if grid:
            done = _first_rows(Nb * C, 4)
            xhat = xhat.copy()
            xhat[done:] = 0
            mo, ro = mean.copy(), rstd.copy()
            mo[done:], ro[done:] = 0, 0
        out = instance_outputs(xhat, wr, br, mo, ro, x0.shape, d, acc)
        if grid:
            yv = out["y"].reshape(Nb * C, S).copy()
            yv[done:] = 0
            out["y"] = yv.reshape(x0.shape)
        if b == "in_y_store_channel_offset_missing" and C > 1:
            yv = np.zeros_like(out["y"]).reshape(Nb, C, S)
            yv[:, 0] = out["y"].reshape(Nb, C, S)[:, -1]
            out["y"] = yv.reshape(x0.shape)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                if ub is None:
                    ub = instance_unbiased_var(x, imean, acc)
                rm0 = rm
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
                if b == "in_running_mean_not_updated":
                    rm = rm0
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_projection_of_deviation":
                dx = rstd * (g - _rsum(g) / acc(S) - xhat * (_rsum(g * (x - mean)) / acc(S)))
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            if grid:
                dx = dx.copy()
                dx[done:] = 0
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn27(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn27(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn27(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        eps = _eps(call.config["eps"], acc)
        act_first = b == "gns_silu_before_norm" and silu
        pooled = b == "gns_stats_pooled_over_batch" and silu and Nb > 1
        if act_first:                                                      # the activation of the input
            x_in = x
            sx, rx = _sigmoids(x_in)
            x = x_in * sx
            xv = x.reshape(Nb * G, n)
        if pooled:
            xp = xv.reshape(Nb, G, n).transpose(1, 0, 2).reshape(G, Nb * n)
            mp, rp = self._ln_stats(xp, eps)
            xr = ((xp - mp) * rp).reshape(G, Nb, n).transpose(1, 0, 2).reshape(Nb * G, n)
            mean = np.tile(mp, (Nb, 1))
            rstd = np.tile(rp, (Nb, 1))
        else:
            mean, rstd = self._ln_stats(xv, eps)
            xr = (xv - mean) * rstd
        ro = rstd
        if b == "gn_rstd_output_before_sqrt":
            ro = 1 / (_rsum((xv - mean) ** 2) / n + eps)
        elif b == "gns_rstd_output_is_var" and silu:
            ro = _rsum((xv - mean) ** 2) / n
        xhat = xr.reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "gn_weight_plus_one_flag_set" and w is not None:
            wf = 1 + w
        elif b == "gns_weight_bias_swapped" and silu and w is not None and bias is not None:
            wf, bf = bias, w
        p = affine(xhat, wf, bf)
        if silu and not act_first:
            sg, rest = _sigmoids(p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, mean.reshape(Nb, G), ro.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if silu and not act_first:
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        if b == "gn_bwd_weight_of_group_first_channel" and wf is not None:
            wg = np.repeat(wf.reshape(G, cg)[:, :1], cg, axis=1).reshape(1, C, 1)
            g = dp * wg
        else:
            g = dp if wf is None else dp * wf
        gr = g.reshape(Nb * G, n)
        if pooled:
            gp = gr.reshape(Nb, G, n).transpose(1, 0, 2).reshape(G, Nb * n)
            xq = xr.reshape(Nb, G, n).transpose(1, 0, 2).reshape(G, Nb * n)
            dxr = _centred_dx(gp, xq, rp).reshape(G, Nb, n).transpose(1, 0, 2).reshape(Nb * G, n)
        elif b == "gn_bwd_rstd_without_eps":
            rb = 1 / np.sqrt(_rsum((xv - mean) ** 2) / n)
            xb = (xv - mean) * rb
            dxr = _centred_dx(gr, xb, rb)
            xhat = xb.reshape(Nb, C, S)
        elif b == "gn_bwd_xhat_saved_in_half" and d in _HALF:
            xs = _half(xr, d)
            dxr = _centred_dx(gr, xs, rstd)
            xhat = xs.reshape(Nb, C, S)
        else:
            dxr = _centred_dx(gr, xr, rstd)
        dxv = dxr.reshape(Nb, C, S)
        if act_first:
            dxv = dxv * (sx * (1 + x_in * rx))
        grads = {"x": _store(dxv.reshape(x0.shape), d)}
        db_from = g if b == "gns_dbias_from_g" and silu else dp
        for key, t, given in (("weight", dp * xhat, w), ("bias", db_from, bias)):
            if given is None:
                continue
            if b == "gn_dparams_spatial_tail_dropped" and S > 4 and S % 4:
                v = channel_sums(t[..., :(S // 4) * 4], C)
            elif b == "gn_dparams_sample0_counted_twice" and Nb > 1:
                v = channel_sums(t, C) + channel_sums(t[:1], C)
            else:
                v = channel_sums(t, C)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs27(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs27(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        if b == "zs_ddof_zero_read_as_one":
            ddof = int(cfg["ddof"] or 1)
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
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        xa = xhat
        if b == "zs_xhat_rounded_before_affine" and d in _HALF:
            xa = _half(xhat, d)
        y = affine(xa, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            if b == "zs_bwd_std_of_next_slice" and R > 1:
                std = np.roll(std, -1, axis=0)
                xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
            g = dy if w is None else dy * w
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                sg, sgx = _rsum(g), _rsum(g * xhat)
                if b == "zs_bwd_projection_sum_of_g":
                    sgx = sg
                inner = g - sg / n - xhat * (sgx / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx), d)
            last = R - 1 if b == "zs_dparams_last_row_dropped" and R > 1 else R
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t[:last].sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp27(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp27(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, _, back = _axes_rows(x0.astype(acc), dims)
        R = x.shape[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"

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
        as_min = b == "lp_eps_clamp_as_min" and torch_rule
        if as_min:
            y = x / np.minimum(norm, eps)
        elif b == "lp_divided_by_max_abs":
            y = np.where(norm == 0, acc(0), x / s)
        elif torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            nb = norm
            if as_min:
                used = (nb <= eps) | np.isnan(nb)                   # the clamp min(norm, eps) not taken
            else:
                used = ((nb >= eps) if torch_rule else (nb != 0)) | np.isnan(nb)
            safe = np.where(used, nb, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            if b == "lp_bwd_projection_times_p":
                proj = (dy - acc(p) * wv * _rsum(dy * u)) / safe
            else:
                proj = (dy - wv * _rsum(dy * u)) / safe
            if torch_rule and eps > 0 and b == "lp_bwd_clamped_dy_times_eps":
                small = dy * eps
            else:
                small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        nout = norm
        if b == "lp_norm_output_row_offset_missing" and R > 1:
            nout = np.zeros_like(norm)
            nout[0] = norm[-1]
        out = {"y": _store(back(y), d), "norm": back(nout, True).astype(acc)}
        return Returned(out, {} if dx is None else {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb27(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized27(self, call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        if res is None:
            s = x
        elif b == "nqb_residual_of_row0":
            s = x + res.astype(acc).reshape(-1, H)[:1]
        else:
            s = x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        elif b == "nqb_rms_sumsq_first_tile_only" and H > 128:
            y = s * (1 / np.sqrt(_rsum(s[:, :128] * s[:, :128]) / H + eps))
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb27(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized27(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, "pow2" if b == "nqb_exact_rule_rounded_pow2" else rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            gamax = amax
            if b == "nqb_nvfp4_tensor_amax_summed" and inp.get("global_scale") is None:
                gamax = np.max(amax, axis=1, initial=0.0).sum(keepdims=True)
            enc = nvfp4_encode(inp.get("global_scale"), gamax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = block_quotients(yb, S, acc)
        if b == "nqb_mx_clip_upper_only" and fmt == "mxfp8":
            qv = np.minimum(qv, qmax)
        else:
            qv = np.clip(qv, -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln27(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln27(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        whole = b == "aln_stats_over_sample"
        if whole:                                                  # one row per sample: its T * H values
            ms, rs = self._ln_stats(x.reshape(B, T * H), eps)
            mean, rstd = np.repeat(ms, T, axis=0), np.repeat(rs, T, axis=0)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if b == "aln_stats_stored_token_major" and B > 1 and T > 1:
            for k in ("mean", "rstd"):                         # element (b, t) stored at t * B + b
                v = out[k].reshape(B, T)
                out[k] = np.ascontiguousarray(v.T).reshape(out[k].shape)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if whole:
            dx = _centred_dx(g.reshape(B, T * H), xhat.reshape(B, T * H), rs).reshape(-1, H)
        elif b == "aln_bwd_mean_g_term_dropped":
            dx = rstd * (g - xhat * (_rsum(g * xhat) / H))
        else:
            dx = _centred_dx(g, xhat, rstd)
        if b == "aln_bf16_dx_truncated" and d == "bfloat16":
            grads = {"x": _toward_zero(dx.reshape(x0.shape), np_dtype(d))}
        else:
            grads = {"x": _store(dx.reshape(x0.shape), d)}

        def to_samples(t):
            if b == "aln_dmod_last_token_dropped" and T > 1:
                return t.reshape(B, T, H)[:, :T - 1, :].sum(axis=1)
            return per_sample(t, B, T, H)
        if scale is not None:
            grads["scale"] = _store(to_samples(dy * xhat), d)
        if shift is not None:
            grads["shift"] = _store(to_samples(dy), d)
        return Returned(out, grads)
