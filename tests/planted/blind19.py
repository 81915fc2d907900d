"""A nineteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind19Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn19``, ``_in19``, ``_gn19`` for group_norm and
group_norm_silu, ``_zs19``, ``_lp19``, ``_nqb19``, ``_aln19``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind19Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind17.py (the same mistake on the same op; the eighteenth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import math

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, bn_momentum, bn_running_update,
                          centred_dx as _centred_dx, channel_params, channel_rows, channel_running_stats,
                          channel_sums, dy_and_g, eps_value as _eps, from_channel_rows, group_outputs,
                          group_params, group_rows, group_scales, half as _half, instance_momentum,
                          instance_momentum_value, instance_outputs, instance_params, instance_running_stats,
                          instance_running_update, instance_unbiased_var, mx_scales, nan_running, norm_outputs,
                          nqb_format, nqb_quantized, np_dtype, nvfp4_encode, nvfp4_scales, padded_blocks,
                          per_sample, pow2, rsum as _rsum, running_in, running_setup,
                          running_state, sigmoids as _sigmoids, store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind19Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_running_var_read_as_invstd": (
        "batch_norm", "running",
        "eval with running statistics: the running_var buffer handed to the normalization as the saved inverse "
        "std (cuDNN's save_invstd slot): rstd = running_var itself instead of 1 / sqrt(running_var + eps), y, "
        "the returned rstd, dx = g * rstd and dweight (from that x_hat); the buffers themselves untouched",
        "cf. " + GH + "microsoft/onnxruntime/pull/8172 (a batch norm kernel's saved variance and saved inverse "
        "std buffers taken for one another)"),
    "bn_bwd_reduce_sums_in_half": (
        "batch_norm", "precision",
        "16-bit inputs, batch statistics: the backward-reduce kernel's per-channel sum_dy and sum_dy_xhat "
        "accumulated left to right in the input dtype; dbias = sum_dy, dweight = sum_dy_xhat and dx = rstd * w * "
        "(dy - sum_dy / n - x_hat * sum_dy_xhat / n) from them; the forward right",
        GH + "pytorch/pytorch/issues/195701 (batch_norm_backward_reduce not reducing in float32 for half "
        "inputs)"),
    "bn_spatial_tail_tile_dropped": (
        "batch_norm", "block",
        "batch statistics, more than 16 spatial positions and not a multiple of 16: each sample's positions "
        "summed in tiles of 16 whose loop bound is S // 16, the tail positions never entering the sums for the "
        "mean and the variance, still divided by n = N * S; y, the saved statistics, the backward's formula on "
        "them and the running update from them",
        "pattern: a tile loop bound written with a floor division, the remainder tile never loaded"),
    "bn_5d_channel_index_from_last_two_axes": (
        "batch_norm", "layout",
        "inputs of five axes (N, C, D, H, W): the kernel, written for 4-D input, takes the channel of flat "
        "element i as (i // (H * W)) mod C instead of (i // (D * H * W)) mod C: the statistics, y, the running "
        "update, dx and the parameter gradients gathered over the wrong elements",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1376 (a norm kernel measuring the per-channel size from the "
        "last axes only for inputs of more than four dimensions)"),
    "bn_nostats_eval_bwd_fixed_stats": (
        "batch_norm", "backward",
        "eval without running statistics (the batch statistics normalize, rightly): the backward's branch taken "
        "on `training` alone, so dx = g * rstd (the fixed-statistics formula) instead of the centred one; the "
        "forward, dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/issues/30294 (batch statistics chosen by `training or not "
        "track_running_stats`, the two flags easy to read apart)"),
    "bn_running_mean_bessel_scaled": (
        "batch_norm", "bessel",
        "torch convention, training: the unbiased factor n / (n - 1) applied to both running buffers' new "
        "values in one loop: running_mean = (1 - m) running_mean + m * mean * n / (n - 1); running_var, y and "
        "the gradients right",
        "pattern: a correction factor applied to every buffer of an update loop"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_update_drops_last_sample": (
        "instance_norm", "running",
        "training with running statistics, more than one sample: the mean over the batch of the instances' "
        "momentum updates taken over samples 0 .. N - 2 only (loop bound n < N - 1, divided by N - 1); y and the "
        "gradients right",
        "pattern: an off-by-one loop bound in the reduction over the batch"),
    "in_tile_partials_merged_unweighted": (
        "instance_norm", "merge",
        "instance statistics, more than 32 positions and not a multiple of 32: each instance reduced in tiles of "
        "32 positions whose (mean, M2) partials are merged as if every tile held 32 values: mean = the average "
        "of the tile means, M2 = sum M2_t + 32 * sum (mean_t - mean)^2, var = M2 / S; forward and the "
        "backward's formula on those statistics",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count Welford merge, right only when every "
        "partial holds the same count)"),
    "in_dparams_first_sample_twice": (
        "instance_norm", "reduction",
        "dweight and dbias: the accumulator over the samples initialized with sample 0's partial sum and the "
        "loop then starting at sample 0, so sample 0 is counted twice; dx and the forward right",
        "pattern: an accumulator initialized with the first partial and the loop not starting after it"),
    "in_bwd_xhat_from_stored_output": (
        "instance_norm", "precision",
        "16-bit inputs with a weight and a bias, instance statistics: the backward recomputes x_hat from the "
        "stored 16-bit output as (y - bias) / weight (the memory-saving recompute), dx and dweight from it; the "
        "forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm backward recomputing x_hat from the stored "
        "output)"),
    "in_eps_momentum_swapped": (
        "instance_norm", "eps",
        "the functional call passes momentum and eps in each other's positional slot: the kernel's eps is the "
        "configured momentum (0.1, the module's default, when None) and its momentum the configured eps; y, the "
        "statistics, the gradients and any running update from them",
        "cf. " + GH + "FluxML/Flux.jl/issues/216 (BatchNorm's epsilon and momentum swapped when the layer is "
        "rebuilt)"),
    "in_bwd_stats_channel_major": (
        "instance_norm", "layout",
        "instance statistics, more than one sample and channel: the backward loads the saved mean and rstd of "
        "instance (n, c) at flat index c * N + n (channel-major) of the (N, C) buffers the forward wrote sample-"
        "major: x_hat, dx and dweight from another instance's statistics; the forward right",
        "pattern: a saved-statistics buffer indexed with the other axis order in the backward"),
    # ------------------------------------------------------------------ group_norm
    "gn_fused_shift_without_gamma": (
        "group_norm", "affine",
        "with a weight: the forward folds the normalization and the affine into y = x * a + b per (sample, "
        "channel) with a = rstd * weight but b = bias - mean * rstd (the weight missing from the shift's "
        "mean term); the saved statistics and the backward (from x_hat) right",
        "pattern: a folded scale / shift pair whose shift drops one factor"),
    "gn_eps_cast_to_input_dtype": (
        "group_norm", "eps",
        "16-bit inputs: eps passed to the kernel as a scalar of the input dtype (rounded: 0.3 becomes 0.30078 "
        "in bfloat16), forward and backward",
        "cf. " + GH + "ROCm/aiter/pull/3451 (a fused norm kernel's float32 parameters cast to bfloat16 before "
        "the launch)"),
    "gn_bf16_store_truncated": (
        "group_norm", "rounding",
        "bfloat16 outputs: y converted from float32 by dropping the low 16 bits (truncation toward zero) "
        "instead of rounding to nearest even; the statistics and the gradients right",
        "cf. " + GH + "ROCm/aiter/issues/5151 (a fused norm kernel truncating float32 to bfloat16 on store)"),
    "gn_rstd_output_is_std": (
        "group_norm", None,
        "the returned rstd holds sqrt(var + eps) (the std, before the reciprocal); y and the gradients right",
        "pattern: a saved statistic handed out before its last finalization step"),
    "gn_bwd_c3_mean_term_dropped": (
        "group_norm", "backward",
        "backward in the ds / db form (ds = sum g x, db = sum g, c2 = (db * mean - ds) * rstd^3 / n, c3 = -c2 "
        "* mean - db * rstd / n, dx = rstd * g + c2 * x + c3) with c3 written without its -c2 * mean term; "
        "dweight, dbias and the forward right",
        "cf. " + GH + "uxlfoundation/oneDNN/issues/3543 (a group normalization backward whose diff_src is wrong "
        "while the forward is right)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_stats_over_pow2_tile": (
        "group_norm_silu", "block",
        "each group (C / G * S values, not a power of two) loaded into a zero-padded tile of P = pow2 lanes, "
        "every lane counted: mean = sum / P, the padded lanes' deviations -mean entering the sum of squares, "
        "var divided by P; forward and the backward's formula on those statistics",
        "pattern: a reduction over a power-of-two tile dividing by the tile width"),
    "gns_var_unbiased": (
        "group_norm_silu", "bessel",
        "each group's variance divided by its count minus one (torch.var's unbiased default in the reference "
        "the kernel was ported from); forward and the backward's formula on that rstd",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a group normalization written with torch.var's unbiased "
        "estimator)"),
    "gns_input_read_channels_last": (
        "group_norm_silu", "layout",
        "more than one spatial position: the kernel indexes x, dy, y and dx with channels-last strides (each "
        "sample's memory as (positions, channels)) while the buffers are NCHW-contiguous: the groups, the "
        "statistics, the per-channel affine and the parameter gradients land on the wrong elements",
        "cf. " + GH + "pytorch/pytorch/issues/111824 (GroupNorm not handling channels_last inputs as their "
        "strides say)"),
    "gns_sigmoid_exp2_without_log2e": (
        "group_norm_silu", None,
        "the sigmoid computed on the exp2 fast path as 1 / (1 + exp2(-p)) without the log2(e) prescale: y = p "
        "/ (1 + 2^-p), forward and the backward's derivative of that function",
        "cf. " + GH + "flagos-ai/FlagTree/issues/1248 (exp2 and exp confused in a Triton kernel, results off by "
        "the factor ln 2 in the exponent)"),
    "gns_bwd_mean_term_from_unweighted_dp": (
        "group_norm_silu", "backward",
        "with a weight: the group norm part of the backward subtracts mean(dp) (dp = dy * silu'(p), before the "
        "weight) where mean(g), g = dp * weight, belongs; the projection term, dweight and dbias right",
        "pattern: one of the backward's two reductions fed the unweighted gradient"),
    # ------------------------------------------------------------------ z_score
    "zs_pad_lanes_in_sum_of_squares": (
        "z_score", "block",
        "slice length not a power of two: the slice loaded into a tile of pow2(n) lanes, the mean's sum masked "
        "but the deviations x - mean not, so each padded lane adds mean^2 to the sum of squares (still divided "
        "by n - ddof); std, y and dx from it",
        "pattern: a padded lane masked in one reduction and not in the next"),
    "zs_float64_via_float32": (
        "z_score", "precision",
        "float64 inputs computed by the float32 instantiation (x, the statistics, y and dx in float32, the "
        "results widened back)",
        "cf. " + GH + "google/flax/pull/1804 (normalization layers computing in float32 whatever the input "
        "dtype, a float64 input downcast)"),
    "zs_bwd_std_recomputed_without_eps": (
        "z_score", "eps",
        "the backward recomputes each slice's std from x as sqrt(sum (x - mean)^2 / (n - ddof)) (eps left out "
        "of its copy of the formula): x_hat, dx and dweight from it; the forward right",
        "pattern: a backward recomputing a statistic by a copy of the forward's formula without eps"),
    "zs_dweight_from_output": (
        "z_score", "backward",
        "with a weight: dweight = sum over the slices of dy * y (the affine output, x_hat * weight + bias) "
        "instead of dy * x_hat; dx and dbias right",
        "pattern: the saved output used where the saved normalized input belongs"),
    "zs_chunk_merge_without_mean_spread": (
        "z_score", "one_pass",
        "slices longer than 64: each chunk of 64 values reduced to its own sum of squared deviations about "
        "its own mean, the chunks' sums added without the spread of the chunk means about the slice mean; the "
        "mean right; std, y and dx from that variance",
        "pattern: partial sums of squares merged by a plain sum (the law of total variance's second term "
        "missing)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_row_tail_block_dropped": (
        "lp_normalize", "block",
        "slices longer than 512, not a multiple of 512: the reductions (the norm's sum of |x|^p and the "
        "backward's sum of dy * u) loop over whole blocks of 512 only, the tail block never added; the "
        "elementwise passes (y = x / norm, dx) cover every value",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "lp_bwd_dot_in_half": (
        "lp_normalize", "precision",
        "16-bit inputs: the backward's sum of dy * u over each slice accumulated left to right in the input "
        "dtype; the forward right",
        "cf. " + GH + "apache/mxnet/issues/14073 (a normalization op performing its reductions in fp16 for fp16 "
        "inputs)"),
    "lp_bf16_output_truncated": (
        "lp_normalize", "rounding",
        "bfloat16 outputs: the store helper converts y and dx from float32 by dropping the low 16 bits "
        "(truncation toward zero) instead of rounding to nearest even; the norm right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/19882 (a float32 to bfloat16 conversion truncating instead of "
        "rounding to nearest even)"),
    "lp_bwd_clamped_slices_zero_grad": (
        "lp_normalize", "eps",
        "zero_rule='torch': slices whose norm is below eps (clamped in the forward) get dx = 0 (the zero-slice "
        "branch of the onnx rule) instead of dy / eps; the forward and the other slices right",
        "cf. " + GH + "pytorch/pytorch/issues/184575 (F.normalize's gradient at a clamped slice, dy / eps)"),
    "lp_norm_as_power_mean": (
        "lp_normalize", "semantics",
        "the norm taken as the power mean (sum |x|^p / n)^(1/p) (the reduction written with mean instead of "
        "sum): the returned norm, y = x / that norm and the backward of that function (dx times n^(1/p))",
        "pattern: a norm reduction written with mean instead of sum"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_q_row_stride_padded": (
        "norm_quant_block", "layout",
        "H not a multiple of the block size, more than one row: the quantized values stored with the row "
        "stride of the padded row (blocks * block_size) into the packed (rows, H) q output: row r written from "
        "offset r * blocks * block_size (what falls past the end dropped), the gaps left 0; the scales right",
        "cf. " + GH + "deepseek-ai/DeepEP/pull/413 (kernels wrong for a hidden size that is not a multiple of "
        "128)"),
    "nqb_mx_round_up_flag_ignored": (
        "norm_quant_block", "scale_rounding",
        "mxfp8 with a scale_rule other than 'floor': the rule option not forwarded, so the scales are the floor "
        "rule's 2^(floor(log2 amax) - emax) instead of the smallest power of two >= amax / qmax; q divided by "
        "them (clipped)",
        GH + "pytorch/ao/pull/3569 (the mxfp8 scale-mode argument missing, RCEIL silently running as "
        "FLOOR)"),
    "nqb_norm_flag_inverted": (
        "norm_quant_block", "semantics",
        "the kernel's IS_RMS_NORM flag set from norm == 'layer_norm' (inverted): layer_norm rows normalized as "
        "rms_norm and rms_norm rows as layer_norm, then quantized",
        "pattern: a boolean template flag inverted at the dispatch"),
    "nqb_ln_bias_ignored_without_residual": (
        "norm_quant_block", "affine",
        "with a bias and no residual: the epilogue's HAS_BIAS flag taken from the residual pointer's null "
        "check, so the bias is never added (y = x_hat * weight), then quantized; with a residual right",
        "pattern: a constexpr flag computed from the wrong pointer argument"),
    "nqb_ln_var_unbiased": (
        "norm_quant_block", "bessel",
        "norm='layer_norm': the variance divided by H - 1 instead of H, then normalized and quantized",
        "cf. " + GH + "pytorch/pytorch/issues/3122 (biased and unbiased variances mixed between a norm's code "
        "paths)"),
    "nqb_min_scale_not_forwarded": (
        "norm_quant_block", "quant_scale",
        "fp8_group: the min_scale option not forwarded to the kernel (its default 0): a block whose amax / "
        "qmax falls below min_scale keeps the smaller scale (an all-zero block the scale 0)",
        "pattern: a configuration option not forwarded to the kernel launch"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_rows_grid_floor": (
        "adaptive_layer_norm", "block",
        "more than 4 token rows, not a multiple of 4: the kernel takes 4 rows per program on R // 4 programs, so "
        "the last R mod 4 rows are never processed: their y, mean, rstd and dx left 0, their terms missing "
        "from dscale and dshift",
        "cf. " + GH + "thu-ml/TurboDiffusion/pull/103 (Triton normalization kernels wrong when the row count is "
        "not a multiple of their rows per program)"),
    "aln_bwd_projection_of_unmodulated_dy": (
        "adaptive_layer_norm", "backward",
        "with a scale: dx = rstd * (g - mean(g) - x_hat * mean(dy * x_hat)), the projection's reduction fed the "
        "raw dy where g = dy * (1 + scale) belongs; dscale, dshift and the forward right",
        "pattern: one of the backward's two reductions fed the unmodulated gradient"),
    "aln_eps_added_to_sum_of_squares": (
        "adaptive_layer_norm", "eps",
        "rstd = 1 / sqrt((sum (x - mean)^2 + eps) / H): eps added to the sum of squares before the division by "
        "H instead of to the variance, forward and the backward's formula on that rstd",
        "pattern: eps added one step early in the variance's finalization"),
    "aln_stats_per_8_wide_tile": (
        "adaptive_layer_norm", "group",
        "H above 8: the row processed in tiles of 8 columns whose accumulators are reset per tile, each tile "
        "normalized with its own mean and rstd (the last tile's returned as the row's), forward and the "
        "backward's per-tile formula",
        "cf. " + GH + "amd/IRON/issues/40 (normalization kernels whose tile size changes the output, the "
        "statistics taken per tile)"),
    "aln_mean_output_is_row_sum": (
        "adaptive_layer_norm", None,
        "the returned mean holds each token's row sum (the accumulator before the division by H); y, rstd and "
        "the gradients right",
        "pattern: a saved statistic handed out before its finalization"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _grid_floor_rows(R, per):
    """The rows a grid of R // per programs of ``per`` rows each covers: a boolean mask (R,) (all when R is a
    multiple of per or at most per)."""
    keep = np.ones(R, bool)
    if R > per and R % per:
        keep[(R // per) * per:] = False
    return keep


def _bf16_truncated(a):
    """``a`` converted to bfloat16 by dropping the low 16 bits of its float32 value (toward zero)."""
    bits = np.ascontiguousarray(np.asarray(a, np.float32)).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(np_dtype("bfloat16"))


class Blind19Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind19"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn19(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn19(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]

        def rows(a):
            return channel_rows(a, acc)

        def unrows(r):
            return from_channel_rows(r, x0.shape)
        if b == "bn_5d_channel_index_from_last_two_axes" and x0.ndim == 5 and x0.size:
            Nb, C5, D, H, W = x0.shape
            order = np.argsort(np.arange(Nb * C5 * D) % C5, kind="stable")    # runs of H * W, by their channel
            inv = np.argsort(order)

            def rows(a):                                                   # noqa: F811
                return np.ascontiguousarray(a.astype(acc).reshape(-1, H * W)[order]).reshape(C5, -1)

            def unrows(r):                                                 # noqa: F811
                return r.reshape(-1, H * W)[inv].reshape(x0.shape)
        x = rows(x0)                                                       # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            S = n // x0.shape[0] if x0.shape[0] else 0
            if b == "bn_spatial_tail_tile_dropped" and S > 16 and S % 16:
                xs = np.ascontiguousarray(x.reshape(C, x0.shape[0], S)[:, :, :(S // 16) * 16]).reshape(C, -1)
                bmean = _rsum(xs) / n
                bvar = _rsum((xs - bmean) ** 2) / n
                brstd = 1 / np.sqrt(bvar + eps)
            else:
                bmean, brstd = self._ln_stats(x, eps)
            mean, rstd = bmean, brstd
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
            if b == "bn_eval_running_var_read_as_invstd":
                rstd = st["running_var"].astype(acc).reshape(C, 1)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                old_rm = rm
                if bvar is not None and n > 0:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    if cfg["convention"] == "torch":
                        ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * ub
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
                else:
                    rm, rv = bn_running_update(rm, rv, m, x, bmean, cfg["convention"], acc)
                if b == "bn_running_mean_bessel_scaled" and cfg["convention"] == "torch" and n > 1:
                    rm = (1 - m) * old_rm + m * (bmean.reshape(C) * acc(n / (n - 1)))
            state = running_state(rm, rv, nbt, d)
        out = {"y": _store(unrows(affine(xhat, w, bias)), d), "mean": mean.reshape(C).astype(acc),
               "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = rows(call.cotangents["y"])
            g = dy if w is None else dy * w
            dw_sum, db_sum = _rsum(dy * xhat), _rsum(dy)
            if batch and b == "bn_bwd_reduce_sums_in_half" and d in _HALF and n:
                dw_sum, db_sum = _half_row_sums(dy * xhat, d), _half_row_sums(dy, d)
                wf = acc(1) if w is None else w
                dx = rstd * wf * (dy - db_sum / n - xhat * (dw_sum / n))
            elif batch and b == "bn_nostats_eval_bwd_fixed_stats" and not call.training:
                dx = g * rstd
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(unrows(dx), d)}
            if w is not None:
                grads["weight"] = _store(dw_sum.reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(db_sum.reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in19(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in19(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        if b == "in_eps_momentum_swapped":
            eps, m = acc(0.1 if cfg["momentum"] is None else cfg["momentum"]), _eps(cfg["eps"], acc)
        inst = call.training or not has_run
        imean = irstd = None
        if inst:
            if b == "in_tile_partials_merged_unweighted" and S > 32 and S % 32:
                tiles = [x[:, k:k + 32] for k in range(0, S, 32)]
                tm = np.concatenate([_rsum(t) / t.shape[1] for t in tiles], axis=1)
                tm2 = np.concatenate([_rsum((t - tm[:, j:j + 1]) ** 2) for j, t in enumerate(tiles)], axis=1)
                imean = tm.mean(axis=1, keepdims=True)
                m2 = tm2.sum(axis=1, keepdims=True) + acc(32) * ((tm - imean) ** 2).sum(axis=1, keepdims=True)
                irstd = 1 / np.sqrt(m2 / S + eps)
            else:
                imean, irstd = self._ln_stats(x, eps)
            mean, rstd = imean, irstd
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_update_drops_last_sample" and Nb > 1:
                    new_m, new_v = instance_momentum(rm, rv, m, imean, ub, Nb, C)
                    rm, rv = new_m[:Nb - 1].mean(axis=0), new_v[:Nb - 1].mean(axis=0)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            xh, rb = xhat, rstd
            if inst and b == "in_bwd_xhat_from_stored_output" and d in _HALF and wr is not None and br is not None:
                xh = (out["y"].astype(acc).reshape(xhat.shape) - br) / wr
            if inst and b == "in_bwd_stats_channel_major" and Nb > 1 and C > 1:
                idx = (np.arange(Nb * C) % C) * Nb + np.arange(Nb * C) // C
                mb, rb = mean.reshape(-1)[idx].reshape(-1, 1), rstd.reshape(-1)[idx].reshape(-1, 1)
                xh = (x - mb) * rb
            dx = _centred_dx(g, xh, rb) if inst else g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xh, w), ("bias", dy, bias)):
                if given is None:
                    continue
                part = _rsum(t).reshape(Nb, C)
                s = part.sum(axis=0)
                if b == "in_dparams_first_sample_twice" and Nb:
                    s = s + part[0]
                grads[k] = _store(s, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn19(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn19(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn19(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        cl = b == "gns_input_read_channels_last" and S > 1

        def read(a):                                     # a buffer as the kernel indexes it, (N, C, S)
            a = a.astype(acc)
            if cl:
                return np.ascontiguousarray(a.reshape(Nb, S, C).transpose(0, 2, 1))
            return a.reshape(Nb, C, S)

        def write(a):                                    # (N, C, S) values to the buffer's memory, x0's shape
            if cl:
                return np.ascontiguousarray(a.reshape(Nb, C, S).transpose(0, 2, 1)).reshape(x0.shape)
            return a.reshape(x0.shape)
        if cl:
            x = read(x0)
            xv = x.reshape(Nb * G, n)
        eps = _eps(call.config["eps"], acc)
        if b == "gn_eps_cast_to_input_dtype" and d in _HALF:
            eps = _half(eps, d)
        P = pow2(n)
        if b == "gns_stats_over_pow2_tile" and P != n:
            mean = _rsum(xv) / acc(P)
            dev = xv - mean
            rstd = 1 / np.sqrt((_rsum(dev * dev) + acc(P - n) * mean * mean) / acc(P) + eps)
        elif b == "gns_var_unbiased" and n > 1:
            mean = _rsum(xv) / n
            dev = xv - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / acc(n - 1) + eps)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        k = acc(math.log(2.0)) if b == "gns_sigmoid_exp2_without_log2e" else acc(1)
        if silu:
            sg, rest = _sigmoids(k * p)
            y = p * sg
        elif b == "gn_fused_shift_without_gamma" and w is not None:
            a = (rstd.reshape(Nb, G, 1) * w.reshape(1, G, cg)).reshape(Nb, C, 1)
            sh = -(mean * rstd).reshape(Nb, G, 1) + np.zeros((1, 1, cg), acc)
            sh = sh.reshape(Nb, C, 1)
            y = affine(x * a + sh, None, bias)
        else:
            y = p
        out = group_outputs(write(y), mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if b == "gn_bf16_store_truncated" and d == "bfloat16":
            out["y"] = _bf16_truncated(y.reshape(x0.shape))
        if b == "gn_rstd_output_is_std":
            out["rstd"] = np.sqrt(_rsum((xv - mean) ** 2) / n + eps).reshape(Nb, G).astype(acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = read(call.cotangents["y"])
        dp = dy * (sg * (1 + k * p * rest)) if silu else dy
        g = dp if w is None else dp * w
        gr, xr = g.reshape(xv.shape), xhat.reshape(xv.shape)
        if b == "gn_bwd_c3_mean_term_dropped":
            ds, db = _rsum(gr * xv), _rsum(gr)
            c2 = (db * mean - ds) * rstd * rstd * rstd / acc(n)
            c3 = -db * rstd / acc(n)
            dx = rstd * gr + c2 * xv + c3
        elif b == "gns_bwd_mean_term_from_unweighted_dp" and w is not None:
            dx = rstd * (gr - _rsum(dp.reshape(xv.shape)) / n - xr * (_rsum(gr * xr) / n))
        else:
            dx = _centred_dx(gr, xr, rstd)
        grads = {"x": _store(write(dx), d)}
        for key, t, given in (("weight", dp * xhat, w), ("bias", dp, bias)):
            if given is not None:
                grads[key] = _store(channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs19(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs19(self, call, acc, b):
        d = call.dtype
        wide = acc
        if b == "zs_float64_via_float32" and d == "float64":
            acc = np.float32
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        m = n - ddof
        params = {}
        for k in ("weight", "bias"):
            v = inp.get(k)
            params[k] = None if v is None else v.astype(acc).reshape(1, n)
        w, bias = params["weight"], params["bias"]
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((x.shape[0], 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        if b == "zs_pad_lanes_in_sum_of_squares" and n and pow2(n) != n:
            sumsq = sumsq + acc(pow2(n) - n) * (mean / a) ** 2
        if b == "zs_chunk_merge_without_mean_spread" and n > 64:
            m2 = sum(_rsum((x[:, k:k + 64] - _rsum(x[:, k:k + 64]) / acc(x[:, k:k + 64].shape[1])) ** 2)
                     for k in range(0, n, 64))
            sumsq = m2 / (a * a)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(wide),
               "std": back(std, True).astype(wide)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            sb, xb = std, xhat
            if b == "zs_bwd_std_recomputed_without_eps" and m > 0:
                sb = a * np.sqrt(_rsum(q * q) / acc(m))
                xb = np.where(sb == 0, acc(0), dev / np.where(sb == 0, acc(1), sb))
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - xb * (_rsum(g * xb) / acc(m))
                dx = np.where(sb == 0, acc(0), inner / np.where(sb == 0, acc(1), sb))
            grads["x"] = _store(back(dx), d)
            for k, t in (("weight", dy * (y if b == "zs_dweight_from_output" else xb)), ("bias", dy)):
                if inp.get(k) is None:
                    continue
                grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp19(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp19(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        kept = n
        if b == "lp_row_tail_block_dropped" and n > 512 and n % 512:
            kept = (n // 512) * 512
        xr = x[:, :kept]
        s = np.max(np.abs(xr), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        q = np.abs(xr) / s
        if p == 1.0:
            total = _rsum(q)
        elif p == 2.0:
            total = _rsum(q * q)
        else:
            total = _rsum(q ** acc(p))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        norm = s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)
        scale = acc(1)
        if b == "lp_norm_as_power_mean" and n > 1 and p > 0:
            scale = acc(n) ** acc(1.0 / p)                       # the power mean is norm / n^(1/p)
        nk = norm / scale                                        # the norm the kernel computes and divides by
        if torch_rule:
            y = x / np.maximum(nk, eps)
        else:
            y = np.where(nk == 0, acc(0), x / np.where(nk == 0, acc(1), nk))
        store = _store
        if b == "lp_bf16_output_truncated" and d == "bfloat16":
            def store(a, dtype):                                # noqa: F811
                return _bf16_truncated(a)
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            used = ((nk >= eps) if torch_rule else (nk != 0)) | np.isnan(nk)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            t = dy * u
            if b == "lp_bwd_dot_in_half" and d in _HALF and n:
                proj_sum = _half_row_sums(t, d)
            else:
                proj_sum = _rsum(t[:, :kept])
            proj = (dy - wv * proj_sum) / safe * scale
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            if b == "lp_bwd_clamped_slices_zero_grad" and torch_rule:
                small = np.zeros_like(dy)
            dx = store(back(np.where(used, proj, small)), d)
        out = {"y": store(back(y), d), "norm": back(nk, True).astype(acc)}
        return Returned(out, {} if dx is None else {"x": dx})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb19(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized19(self, inp, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        is_ln = cfg["norm"] == "layer_norm"
        if b == "nqb_norm_flag_inverted":
            is_ln = not is_ln
        if is_ln:
            if b == "nqb_ln_var_unbiased" and H > 1:
                mean = _rsum(s) / H
                dev = s - mean
                rstd = 1 / np.sqrt(_rsum(dev * dev) / acc(H - 1) + eps)
            else:
                mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        if b == "nqb_ln_bias_ignored_without_residual" and res is None:
            bias = None
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb19(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized19(inp, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            gcfg = dict(cfg, min_scale=None) if b == "nqb_min_scale_not_forwarded" else cfg
            S = group_scales(amax, qmax, rule, gcfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            mrule = "floor" if b == "nqb_mx_round_up_flag_ignored" else rule
            S, scale_out = mx_scales(amax, mrule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        r = nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)
        R, nb = amax.shape
        H = y.shape[1]
        if b == "nqb_q_row_stride_padded" and R > 1 and H % B:
            qv = r.outputs["q"]
            rows = qv.reshape(R, H)
            flat = np.zeros(R * H, qv.dtype)
            for i in range(R):
                lo = i * nb * B
                if lo < R * H:
                    hi = min(lo + H, R * H)
                    flat[lo:hi] = rows[i, :hi - lo]
            return Returned({**r.outputs, "q": flat.reshape(qv.shape)})
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln19(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln19(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        R = x.shape[0]
        tiles = None
        if b == "aln_eps_added_to_sum_of_squares" and x.size:
            mean = _rsum(x) / H
            dev = x - mean
            rstd = 1 / np.sqrt((_rsum(dev * dev) + eps) / H)
            xhat = dev * rstd
        elif b == "aln_stats_per_8_wide_tile" and H > 8 and x.size:
            tiles = [slice(k, min(H, k + 8)) for k in range(0, H, 8)]
            xhat = np.empty_like(x)
            rt = []
            for t in tiles:
                mt, rs = self._ln_stats(np.ascontiguousarray(x[:, t]), eps)
                xhat[:, t] = (x[:, t] - mt) * rs
                rt.append(rs)
            mean, rstd = mt, rs
        else:
            mean, rstd = self._ln_stats(x, eps)
            xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        keep = np.ones((R, 1), bool)
        if b == "aln_rows_grid_floor":
            keep = _grid_floor_rows(R, 4)[:, None]
        z = acc(0)
        out = norm_outputs(np.where(keep, y, z), np.where(keep, mean, z), np.where(keep, rstd, z), x0,
                           x0.shape[:-1] + (1,), d, acc)
        if b == "aln_mean_output_is_row_sum" and x.size:
            out["mean"] = _rsum(x).reshape(out["mean"].shape).astype(acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        dy = np.where(keep, dy, z)
        g = np.where(keep, g, z)
        if tiles is not None:
            dx = np.empty_like(x)
            for t, rs in zip(tiles, rt):
                dx[:, t] = _centred_dx(np.ascontiguousarray(g[:, t]), np.ascontiguousarray(xhat[:, t]), rs)
        elif b == "aln_bwd_projection_of_unmodulated_dy" and H:
            dx = rstd * (g - _rsum(g) / H - xhat * (_rsum(dy * xhat) / H))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(np.where(keep, dx, z).reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)
