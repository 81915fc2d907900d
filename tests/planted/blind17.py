"""A seventeenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind17Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn17``, ``_in17``, ``_gn17`` for group_norm and
group_norm_silu, ``_zs17``, ``_lp17``, ``_nqb17``, ``_aln17``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind17Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind15.py (the same mistake on the same op; the sixteenth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import math

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, bn_momentum, bn_running_update,
                          centred_dx as _centred_dx, channel_outputs, channel_params, channel_rows,
                          channel_running_stats, channel_sums, dy_and_g, eps_value as _eps, from_channel_rows,
                          group_outputs, group_params, group_rows, group_scales, half as _half,
                          instance_momentum_value, instance_outputs, instance_params, instance_running_stats,
                          instance_running_update, instance_unbiased_var, mx_scales, nan_running, norm_outputs,
                          nqb_format, nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_instance,
                          per_sample, rsum as _rsum, running_in, running_setup, running_state,
                          sigmoids as _sigmoids, store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind17Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_channel_grid_floor_pairs": (
        "batch_norm", "block",
        "the kernel handles two channels per program and is launched on C // 2 programs (floor instead of "
        "cdiv): with an odd channel count the last channel is never processed: its y, mean and rstd left 0, its "
        "dx, dweight and dbias 0, its running statistics not updated",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering only part of its output: the "
        "rest of the torch.empty buffer never written)"),
    "bn_bwd_projection_from_dy": (
        "batch_norm", "backward",
        "batch statistics with a weight: dx = rstd * (g - mean(g) - x_hat * mean(dy * x_hat)): the projection "
        "term's reduction fed the raw dy instead of g = dy * weight (kept in the other terms); dweight and dbias "
        "right",
        "pattern: one of the backward's two reductions fed the unweighted gradient"),
    "bn_dparams_tail_samples_dropped": (
        "batch_norm", "reduction",
        "dweight and dbias reduced over the batch in blocks of four samples whose loop bound is N // 4 blocks: "
        "for a batch of more than four samples, not a multiple of four, the last N mod 4 samples never enter the "
        "parameter gradients; dx and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel wrong once a program covers more than "
        "one row block)"),
    "bn_rstd_output_is_var": (
        "batch_norm", None,
        "batch statistics: the returned rstd holds the biased batch variance (the buffer before eps and the "
        "reciprocal square root, as a save_var convention); y, the gradients and the running statistics right",
        "pattern: a saved statistic handed out at another stage of its finalization (variance vs inverse std)"),
    "bn_running_updated_twice": (
        "batch_norm", "running",
        "training with running statistics: the momentum update of running_mean and running_var applied twice "
        "with the same batch statistics (the forward recomputed, as activation checkpointing does, both passes "
        "updating the buffers); num_batches_tracked incremented once; y and the gradients right",
        "cf. " + GH + "pytorch/pytorch/issues/96136 (BatchNorm statistics updated twice when the forward is "
        "recomputed by checkpointing)"),
    "bn_saved_rstd_unbiased": (
        "batch_norm", "bessel",
        "batch statistics: the returned rstd is 1 / sqrt(var * n / (n - 1) + eps) (the unbiased variance "
        "computed for running_var reused for the saved statistic); y and the gradients use the biased one",
        "cf. " + GH + "CanReader/FastNN/issues/11 (biased and unbiased variances mixed between two code paths)"),
    # ------------------------------------------------------------------ instance_norm
    "in_batch_norm_without_reshape": (
        "instance_norm", "semantics",
        "instance statistics computed by calling the batch norm kernel on x as given, (N, C, *), without the "
        "(1, N * C, *) reshape: each channel's mean and variance pooled over the samples and positions, y, the "
        "saved (N, C) statistics (each channel's repeated over the samples), dx by the batch norm backward over "
        "those channels, and with running statistics the update from the pooled mean and unbiased variance",
        GH + "sonos/tract/pull/2863 (InstanceNorm reduced over the batch axis as well as the spatial ones, the "
        "statistics shared across samples)"),
    "in_weight_bias_swapped": (
        "instance_norm", "affine",
        "with a weight and a bias: the forward kernel's parameters passed in the order (bias, weight): y = x_hat "
        "* bias + weight, and dx from g = dy * bias; the parameter-gradient kernel (dweight = sum dy * x_hat, "
        "dbias = sum dy) right",
        "pattern: two parameter pointers of the same shape passed in each other's slot"),
    "in_bwd_rstd_without_eps": (
        "instance_norm", "eps",
        "instance statistics: the backward recomputes each instance's rstd from x as 1 / sqrt(var) (eps left out "
        "of its copy of the formula): x_hat, dx and dweight from it; the forward right",
        "pattern: a backward recomputing the statistics by a copy of the forward's formula without eps"),
    "in_spatial_tail_tile_dropped": (
        "instance_norm", "block",
        "instance statistics, more than 32 positions and not a multiple of 32: the sums for the mean and the "
        "variance loop over whole tiles of 32 positions (loop bound S // 32), the tail positions never "
        "entering them, still divided by S; forward and the backward's formula on those statistics",
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (a fused norm's statistics wrong for a spatial size "
        "that is not a whole number of tiles)"),
    "in_instance_sums_in_half": (
        "instance_norm", "precision",
        "16-bit inputs: each instance's sum of x for the mean accumulated left to right in the input dtype, the "
        "deviations and the variance in float32 about that mean; forward and backward",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's row sum accumulated in the fp16 input type)"),
    "in_running_update_args_swapped": (
        "instance_norm", "running",
        "training with running statistics: the instances' means and unbiased variances passed to the running "
        "update in each other's argument slot: running_mean moves toward the variances, running_var toward the "
        "means; y and the gradients right",
        "pattern: two arguments of the same type passed in swapped order to an update helper"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_c2_rstd_squared": (
        "group_norm", "backward",
        "backward in the ds / db form (ds = sum g x, db = sum g, c2 = (db * mean - ds) * rstd^3 / n, "
        "c3 = -c2 * mean - db * rstd / n, dx = rstd * g + c2 * x + c3) with c2 written with rstd^2: the projection "
        "term divided by rstd; dweight and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the powers of the saved inverse "
        "std wrong)"),
    "gn_bwd_dy_read_channels_last": (
        "group_norm", "layout",
        "more than one spatial position: the backward indexes dy with channels-last strides (each sample's "
        "memory read as (positions, channels)) while dy is NCHW-contiguous: dx, dweight and dbias from that dy; "
        "the forward right",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/883 (a group norm backward whose dY and dX addresses were "
        "not computed in the forward's form)"),
    "gn_bwd_rows_grid_floor": (
        "group_norm", "block",
        "the dx kernel takes four (sample, group) rows per program on N * G // 4 programs (floor instead of "
        "cdiv): when N * G is above four and not a multiple of it the last rows' dx is never written (0); "
        "dweight, dbias and the forward right",
        "cf. " + GH + "ServiceNow/Fast-LLM/pull/546 (a normalization backward distributing its rows over a fixed "
        "program count)"),
    "gn_rstd_in_input_dtype": (
        "group_norm", "precision",
        "16-bit inputs: each group's rstd computed into a variable of the input dtype (rounded) and y, the saved "
        "rstd and the backward taken from it",
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's helper truncating mean and rstd from the "
        "accumulation type to the input type)"),
    "gn_silu_flag_default_on": (
        "group_norm", "semantics",
        "the fused GroupNorm kernel's activation flag left at its default (SiLU on) by the plain group_norm "
        "entry: y = silu(x_hat * weight + bias), forward and the backward through the SiLU; the statistics "
        "right",
        "pattern: a fused kernel's epilogue flag defaulting to the fused variant"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_sigmoid_tanh_half_angle_dropped": (
        "group_norm_silu", None,
        "the sigmoid computed through tanh as 0.5 * (1 + tanh(p)) instead of 0.5 * (1 + tanh(p / 2)): y = p * "
        "(1 + tanh p) / 2, forward and the backward's derivative of that function",
        "cf. " + GH + "HIPS/autograd/issues/346 (sigmoid written 0.5 * (tanh(x) + 1) where tanh(x / 2) "
        "belongs)"),
    "gns_bwd_dx_without_weight": (
        "group_norm_silu", "backward",
        "with a weight: the group norm part of the backward takes g = dp (dy * silu'(p)) without the weight's "
        "factor for dx; dweight and dbias right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "gns_dparams_sample_partials_in_half": (
        "group_norm_silu", "precision",
        "16-bit inputs: dweight and dbias reduced from each (sample, channel) partial sum accumulated over the "
        "samples left to right in the input dtype",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward whose weight-gradient reduction ran in "
        "bfloat16)"),
    "gns_bwd_stats_of_next_sample": (
        "group_norm_silu", "layout",
        "more than one sample: the backward loads the saved mean and rstd at the next sample's offset ((n + 1) "
        "mod N, the sample pointer advanced before the load): x_hat, the SiLU's input p, dx and dweight from "
        "them; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward reading another group's mean and "
        "rstd)"),
    "gns_bwd_sums_per_channel_tile": (
        "group_norm_silu", "group",
        "more than four channels a group: the backward's sums of g and g * x_hat reduced per tile of four "
        "channels (each program's partial used as the group's, the cross-tile reduction missing), still divided "
        "by the group's count; the forward right",
        "pattern: a per-program partial reduction used where the cross-program total belongs"),
    # ------------------------------------------------------------------ z_score
    "zs_rows_grid_floor_blocks": (
        "z_score", "block",
        "more than 128 slices, not a multiple of 128: the kernel takes 128 slices per program on R // 128 "
        "programs, so the last R mod 128 slices are never processed: their y, mean, std and dx left 0, their "
        "terms missing from dweight and dbias",
        "pattern: a launch grid computed with a floor division instead of cdiv"),
    "zs_var_floored_at_eps": (
        "z_score", "eps",
        "std = sqrt(max(var, eps)) (eps as a floor of the variance) instead of sqrt(var + eps), forward and the "
        "backward on that std",
        "cf. " + GH + "vacancy/Synchronized-BatchNorm-PyTorch/issues/38 (the inverse std computed from max(var, "
        "eps) instead of var + eps)"),
    "zs_var_rounded_before_sqrt": (
        "z_score", "precision",
        "16-bit inputs: the variance (eps included) stored in the input dtype before the square root: std = "
        "sqrt(var rounded), y, the returned std and dx from it",
        "cf. " + GH + "deepspeedai/DeepSpeed/issues/581 (a norm kernel converting its variance to float16 before "
        "the square root)"),
    "zs_param_grads_swapped": (
        "z_score", None,
        "with a weight and a bias: dweight and dbias written to each other's output; dx right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a LayerNorm backward assigning the weight and bias "
        "gradients the wrong way round)"),
    "zs_dbias_averaged_over_rows": (
        "z_score", "reduction",
        "dbias = the mean of dy over the slices (sum divided by their count) instead of its sum; dweight and dx "
        "right",
        "cf. " + GH + "apache/mxnet/issues/2427 (a parameter gradient averaged over the batch where it is "
        "summed)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_vec4_tail_columns_dropped": (
        "lp_normalize", "block",
        "slices of more than four values, not a multiple of four: the slice read with four-wide vector loads "
        "only, the last n mod 4 values never loaded: missing from the norm, their y and dx never written (0)",
        "cf. " + GH + "ROCm/aiter/pull/5290 (a row kernel's vectorized accesses wrong for rows whose length is "
        "not a multiple of the vector width)"),
    "lp_bwd_projection_mean_not_sum": (
        "lp_normalize", "backward",
        "the backward's projection divides sum(dy * u) by the slice length (a mean, the layer-norm backward's "
        "form): dx = (dy - w * mean(dy * u)) / norm; the forward right",
        "pattern: a norm backward copied from layer norm's mean-based projection"),
    "lp_dims_read_as_trailing_axes": (
        "lp_normalize", "layout",
        "dim a tuple of several axes that are not the trailing ones: the kernel views x as rows of the product of "
        "their sizes taken from contiguous memory (as if they were the last axes), normalizes those rows, and "
        "writes the row norms in order into the norm output; y and dx from those rows",
        "pattern: a multi-axis reduction flattened with a plain reshape instead of moving the axes last"),
    "lp_root_exponent_integer_division": (
        "lp_normalize", "semantics",
        "an integer p other than 1 and 2: the root's exponent 1 / p evaluated in integer arithmetic (0): every "
        "slice's norm (sum |x|^p)^0 = 1, y = x, and the backward's formula at that norm",
        "pattern: 1 / p computed with an integer template parameter"),
    "lp_float64_via_float32": (
        "lp_normalize", "precision",
        "float64 inputs computed by the float32 instantiation (x, the norm and the gradient in float32, the "
        "results widened back)",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling single-precision math for "
        "double inputs)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_block_amax_before_weight": (
        "norm_quant_block", "quant_scale",
        "with a weight: each block's amax reduced over the normalized x_hat in the statistics pass, before the "
        "weight (and bias) are applied: the scales from it, q = the weighted y divided by them (clipped)",
        "pattern: the block absmax computed before the affine epilogue"),
    "nqb_group_qmax_e4m3_for_e5m2": (
        "norm_quant_block", "quant_scale",
        "fp8_group with float8_e5m2 elements: the block scale amax / 448 (e4m3's largest value, a hard-coded "
        "FP8_MAX) instead of amax / 57344; q = y / that scale",
        "cf. " + GH + "vllm-project/vllm/pull/50467 (FP8 quantization kernels using another FP8 format's "
        "largest value)"),
    "nqb_rms_eps_outside_sqrt": (
        "norm_quant_block", "eps",
        "norm='rms_norm': rstd = 1 / (sqrt(mean(s^2)) + eps) instead of 1 / sqrt(mean(s^2) + eps), then "
        "quantized",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/508 (a norm kernel's eps moved between inside and "
        "outside the square root)"),
    "nqb_scale_row_offset_missing": (
        "norm_quant_block", "layout",
        "fp8_group or nvfp4, more than one row: every row's block scales stored at row 0's offset of the scale "
        "output (the scale pointer not advanced by the row): row 0 holds the last row's scales, the other rows "
        "stay 0; q (from the in-register scales) right",
        "pattern: a per-row output pointer not advanced by the row index"),
    "nqb_rms_rstd_in_input_dtype": (
        "norm_quant_block", "precision",
        "norm='rms_norm', 16-bit inputs: rstd rounded to the input dtype before the multiply, then the blocks' "
        "amax, scales and q from that y",
        "cf. " + GH + "flagos-ai/FlagGems/pull/221 (a norm kernel keeping rstd in the half-precision input dtype "
        "instead of float32)"),
    "nqb_ln_var_one_pass": (
        "norm_quant_block", "one_pass",
        "norm='layer_norm': the variance as E[s^2] - E[s]^2 from one pass of float32 sums (clamped at 0), then "
        "normalized and quantized",
        "cf. " + GH + "tracel-ai/burn/issues/5607 (a fused float32 layer norm's E[x^2] - E[x]^2 losing rows with "
        "a large mean)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_eps_outside_sqrt": (
        "adaptive_layer_norm", "eps",
        "rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), forward and the backward's formula on that "
        "rstd",
        "cf. " + GH + "codertimo/BERT-pytorch/issues/30 (a norm dividing by std + eps where sqrt(var + eps) "
        "belongs)"),
    "aln_dscale_from_gained_dy": (
        "adaptive_layer_norm", "backward",
        "with a scale: dscale = the sum over a sample's tokens of g * x_hat, g = dy * (1 + scale) (the modulated "
        "gradient dx uses) instead of dy * x_hat; dx and dshift right",
        "pattern: the weighted gradient reused for the modulation's own reduction"),
    "aln_lane_partials_merged_unweighted": (
        "adaptive_layer_norm", "merge",
        "H above 8 and not a multiple of it: each token's H values strided over 8 lanes, each lane's (mean, M2) "
        "merged as if every lane held ceil(H / 8) values (the lanes' real counts not weighted): mean = the "
        "average of the lane means, M2 = sum M2_l + ceil(H / 8) * sum (mean_l - mean)^2, var = M2 / H; forward "
        "and the backward's formula on those statistics",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count Welford merge, valid only when every "
        "partial has the same count)"),
    "aln_shift_loaded_from_scale_ptr": (
        "adaptive_layer_norm", "layout",
        "with a scale and a shift: the shift loaded through the scale's pointer: y = x_hat * (1 + scale) + "
        "scale; dshift still reduced from dy, dscale and dx right",
        "pattern: two modulation pointers of the same shape, one passed in the other's slot"),
    "aln_bwd_row_sums_in_half": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: the backward's row sums of g and g * x_hat (for mean(g) and mean(g * x_hat)) accumulated "
        "left to right in the input dtype; dscale, dshift and the forward right",
        "cf. " + GH + "apache/mxnet/issues/14073 (a LayerNorm performing its reductions in fp16 for fp16 "
        "inputs)"),
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


class Blind17Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind17"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn17(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn17(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = None
        if call.training or not has_run:
            bmean, brstd = self._ln_stats(x, eps)
        if batch:
            mean, rstd = bmean, brstd
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        keep = np.ones(C, bool)
        if b == "bn_channel_grid_floor_pairs" and C % 2:
            keep[(C // 2) * 2:] = False
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                old_rm, old_rv = rm, rv
                rm, rv = bn_running_update(rm, rv, m, x, bmean, cfg["convention"], acc)
                if b == "bn_running_updated_twice" and n > 0:
                    rm, rv = bn_running_update(rm, rv, m, x, bmean, cfg["convention"], acc)
                rm, rv = np.where(keep, rm, old_rm), np.where(keep, rv, old_rv)
            state = running_state(rm, rv, nbt, d)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        if batch and n and b in ("bn_rstd_output_is_var", "bn_saved_rstd_unbiased"):
            var = _rsum((x - mean) ** 2) / n
            if b == "bn_rstd_output_is_var":
                out["rstd"] = var.reshape(C).astype(acc)
            elif n > 1:
                out["rstd"] = (1 / np.sqrt(var * acc(n / (n - 1)) + eps)).reshape(C).astype(acc)
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            if batch and b == "bn_bwd_projection_from_dy" and w is not None and n:
                dx = rstd * (g - _rsum(g) / n - xhat * (_rsum(dy * xhat) / n))
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            dyp, xhp = dy, xhat
            Nb = x0.shape[0]
            if b == "bn_dparams_tail_samples_dropped" and Nb > 4 and Nb % 4 and n:
                k = (Nb // 4) * 4
                dyp = np.ascontiguousarray(dy.reshape(C, Nb, -1)[:, :k]).reshape(C, -1)
                xhp = np.ascontiguousarray(xhat.reshape(C, Nb, -1)[:, :k]).reshape(C, -1)
            if w is not None:
                grads["weight"] = _store(_rsum(dyp * xhp).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dyp).reshape(C), d)
        if not keep.all():
            cshape = (1, C) + (1,) * (x0.ndim - 2)
            out["y"] = np.where(keep.reshape(cshape), out["y"], np.zeros_like(out["y"]))
            for k in ("mean", "rstd"):
                out[k] = np.where(keep, out[k], np.zeros_like(out[k]))
            for k, v in list(grads.items()):
                grads[k] = np.where(keep.reshape(cshape) if k == "x" else keep, v, np.zeros_like(v))
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in17(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in17(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        inst = call.training or not has_run
        pooled = b == "in_batch_norm_without_reshape" and inst and Nb > 0 and S > 0
        imean = irstd = None
        if call.training or not has_run:
            if pooled:
                xc = np.ascontiguousarray(x.reshape(Nb, C, S).transpose(1, 0, 2)).reshape(C, Nb * S)
                cmean, crstd = self._ln_stats(xc, eps)
                imean, irstd = per_instance(cmean.reshape(C), Nb), per_instance(crstd.reshape(C), Nb)
            elif b == "in_spatial_tail_tile_dropped" and S > 32 and S % 32:
                k = (S // 32) * 32
                imean = _rsum(x[:, :k]) / S
                dev = x - imean
                irstd = 1 / np.sqrt(_rsum((dev * dev)[:, :k]) / S + eps)
            elif b == "in_instance_sums_in_half" and d in _HALF and S:
                imean = _half_row_sums(x, d) / acc(S)
                dev = x - imean
                irstd = 1 / np.sqrt(_rsum(dev * dev) / S + eps)
            else:
                imean, irstd = self._ln_stats(x, eps)
        if inst:
            mean, rstd = imean, irstd
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        fw, fb = wr, br
        if b == "in_weight_bias_swapped" and wr is not None and br is not None:
            fw, fb = br, wr
        out = instance_outputs(xhat, fw, fb, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                m = instance_momentum_value(cfg, acc)
                if pooled:
                    cnt = Nb * S
                    cv = _rsum((xc - cmean) ** 2) / cnt
                    cub = cv * acc(cnt / (cnt - 1) if cnt > 1 else np.inf)
                    rm = (1 - m) * rm + m * cmean.reshape(C)
                    rv = (1 - m) * rv + m * cub.reshape(C)
                else:
                    ub = instance_unbiased_var(x, imean, acc)
                    if b == "in_running_update_args_swapped":
                        rm, rv = instance_running_update(rm, rv, m, ub, imean, Nb, C)
                    else:
                        rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if fw is None else dy * fw
            xh = xhat
            if pooled:
                def ch(a):
                    return np.ascontiguousarray(a.reshape(Nb, C, S).transpose(1, 0, 2)).reshape(C, Nb * S)
                dxc = _centred_dx(ch(g), ch(xhat), crstd)
                dx = np.ascontiguousarray(dxc.reshape(C, Nb, S).transpose(1, 0, 2)).reshape(Nb * C, S)
            elif inst and b == "in_bwd_rstd_without_eps" and S:
                rb = 1 / np.sqrt(_rsum((x - mean) ** 2) / S)
                xh = (x - mean) * rb
                dx = _centred_dx(g, xh, rb)
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xh, w), ("bias", dy, bias)):
                if given is None:
                    continue
                part = _rsum(t).reshape(Nb, C)
                grads[k] = _store(part.sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn17(call, acc, self.bug, silu=self.bug == "gn_silu_flag_default_on")
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn17(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn17(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        eps = _eps(call.config["eps"], acc)
        mean, rstd = self._ln_stats(xv, eps)
        if b == "gn_rstd_in_input_dtype" and d in _HALF:
            rstd = _half(rstd, d)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        tanh_sig = b == "gns_sigmoid_tanh_half_angle_dropped"
        if silu and tanh_sig:
            th = np.tanh(p)
            sg = acc(0.5) * (1 + th)
            y = p * sg
        elif silu:
            sg, rest = _sigmoids(p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if b == "gn_bwd_dy_read_channels_last" and S > 1:
            dy = np.ascontiguousarray(call.cotangents["y"].astype(acc).reshape(Nb, S, C).transpose(0, 2, 1))
        mb, rb, xh = mean, rstd, xhat
        if b == "gns_bwd_stats_of_next_sample" and Nb > 1:
            mb = np.roll(mean.reshape(Nb, G), -1, axis=0).reshape(-1, 1)
            rb = np.roll(rstd.reshape(Nb, G), -1, axis=0).reshape(-1, 1)
            xh = ((xv - mb) * rb).reshape(Nb, C, S)
            p = affine(xh, w, bias)
            sg, rest = _sigmoids(p)
        if not silu:
            dp = dy
        elif tanh_sig:
            dp = dy * (sg + p * acc(0.5) * (1 - th * th))
        else:
            dp = dy * (sg * (1 + p * rest))
        g = dp if (w is None or b == "gns_bwd_dx_without_weight") else dp * w
        gr, xr = g.reshape(xv.shape), xh.reshape(xv.shape)
        if b == "gn_bwd_c2_rstd_squared":
            dev = xv - mb
            dx = rb * (gr - _rsum(gr) / n) - dev * (rb * rb) * (_rsum(gr * dev) / n)
        elif b == "gns_bwd_sums_per_channel_tile" and cg > 4:
            g3, x3 = gr.reshape(-1, cg, S), xr.reshape(-1, cg, S)
            sg_t, sgx_t = np.zeros_like(g3), np.zeros_like(g3)
            for c0 in range(0, cg, 4):
                t = slice(c0, min(cg, c0 + 4))
                sg_t[:, t] = g3[:, t].sum(axis=(1, 2), keepdims=True)
                sgx_t[:, t] = (g3[:, t] * x3[:, t]).sum(axis=(1, 2), keepdims=True)
            dx = rb * (gr - sg_t.reshape(gr.shape) / n - xr * (sgx_t.reshape(gr.shape) / n))
        else:
            dx = _centred_dx(gr, xr, rb)
        if b == "gn_bwd_rows_grid_floor":
            dx = np.where(_grid_floor_rows(dx.shape[0], 4)[:, None], dx, acc(0))
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        for k, t, given in (("weight", dp * xh, w), ("bias", dp, bias)):
            if given is None:
                continue
            if b == "gns_dparams_sample_partials_in_half" and d in _HALF and Nb > 1:
                part = _rsum(np.ascontiguousarray(t).reshape(Nb * C, S)).reshape(Nb, C)
                grads[k] = _store(_half_row_sums(np.ascontiguousarray(part.T), d).reshape(C), d)
            else:
                grads[k] = _store(channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs17(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs17(self, call, acc, b):
        d = call.dtype
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
        if m > 0 and b == "zs_var_floored_at_eps":
            std = np.maximum(a * np.sqrt(_rsum(q * q) / acc(m)), np.sqrt(eps))
        elif m > 0:
            std = np.hypot(a * np.sqrt(_rsum(q * q) / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        if b == "zs_var_rounded_before_sqrt" and d in _HALF:
            std = np.sqrt(_half(std * std, d))
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        keep = np.ones((x.shape[0], 1), bool)
        if b == "zs_rows_grid_floor_blocks":
            keep = _grid_floor_rows(x.shape[0], 128)[:, None]
        out = {"y": _store(back(np.where(keep, y, acc(0))), d), "mean": back(np.where(keep, mean, acc(0)),
                                                                             True).astype(acc),
               "std": back(np.where(keep, std, acc(0)), True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(np.where(keep, dx, acc(0))), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is None:
                    continue
                s = np.where(keep, t, acc(0)).sum(axis=0)
                if k == "bias" and b == "zs_dbias_averaged_over_rows" and x.shape[0]:
                    s = s / acc(x.shape[0])
                grads[k] = _store(s.reshape(inp[k].shape), d)
            if b == "zs_param_grads_swapped" and "weight" in grads and "bias" in grads:
                grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp17(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp17(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        if b == "lp_float64_via_float32" and d == "float64":
            acc = np.float32
        if b == "lp_dims_read_as_trailing_axes" and isinstance(dims, (list, tuple)) and len(dims) > 1:
            axes = sorted(a % x0.ndim for a in dims)
            if axes != list(range(x0.ndim - len(axes), x0.ndim)):
                n = math.prod(x0.shape[a] for a in axes)
                rows = (-1, n)
                y, norm, dx = self._lp_core(x0.reshape(rows), None if dy0 is None else dy0.reshape(rows), -1, cfg,
                                            d, acc, b)
                nshape = tuple(1 if a in axes else s for a, s in enumerate(x0.shape))
                out = {"y": y.reshape(x0.shape), "norm": np.ascontiguousarray(norm).reshape(nshape)}
                return Returned(out, {} if dx is None else {"x": dx.reshape(x0.shape)})
        y, norm, dx = self._lp_core(x0, dy0, dims, cfg, d, acc, b)
        if b == "lp_float64_via_float32" and d == "float64":
            norm = norm.astype(np.float64)
        return Returned({"y": y, "norm": norm}, {} if dx is None else {"x": dx})

    def _lp_core(self, x0, dy0, dims, cfg, d, acc, b):
        """lp_normalize of x0 over ``dims``: (y rounded to d, the norm in keepdims shape, dx or None)."""
        x, n, back = _axes_rows(x0.astype(acc), dims)
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        tail = b == "lp_vec4_tail_columns_dropped" and n > 4 and n % 4
        if tail:
            x = x.copy()
            x[:, (n // 4) * 4:] = 0
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        q = np.abs(x) / s
        if p == 1.0:
            total = _rsum(q)
        elif p == 2.0:
            total = _rsum(q * q)
        else:
            total = _rsum(q ** acc(p))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        norm = s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)
        if b == "lp_root_exponent_integer_division" and p.is_integer() and p not in (0.0, 1.0, 2.0):
            norm = np.ones_like(norm)
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            if tail:
                dy = dy.copy()
                dy[:, (n // 4) * 4:] = 0
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            t = dy * u
            proj_sum = _rsum(t)
            if b == "lp_bwd_projection_mean_not_sum" and n:
                proj_sum = proj_sum / acc(n)
            proj = (dy - wv * proj_sum) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = _store(back(np.where(used, proj, small)), d)
        return _store(back(y), d), back(norm, True).astype(acc), dx

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb17(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized17(self, inp, cfg, acc, b, d):
        """(s, x_hat, y): s = x (+ residual) as (rows, H), x_hat its normalization, y = x_hat * weight + bias."""
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            if b == "nqb_ln_var_one_pass" and H:
                mean = _rsum(s) / H
                var = np.maximum(_rsum(s * s) / H - mean * mean, 0)
                rstd = 1 / np.sqrt(var + eps)
            else:
                mean, rstd = self._ln_stats(s, eps)
            xhat = (s - mean) * rstd
        else:
            ms = _rsum(s * s) / H
            if b == "nqb_rms_eps_outside_sqrt":
                rstd = 1 / (np.sqrt(ms) + eps)
            else:
                rstd = 1 / np.sqrt(ms + eps)
            if b == "nqb_rms_rstd_in_input_dtype" and d in _HALF:
                rstd = _half(rstd, d)
            xhat = s * rstd
        y = xhat if w is None else xhat * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, xhat, y

    def _nqb17(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, xhat, y = self._nqb_normalized17(inp, cfg, acc, b, d)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_block_amax_before_weight" and inp.get("weight") is not None:
            _, amax = padded_blocks(xhat, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            gq = 448.0 if (b == "nqb_group_qmax_e4m3_for_e5m2" and qmax != 448.0) else qmax
            S = group_scales(amax, gq, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        r = nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)
        out = dict(r.outputs)
        R, nb = amax.shape
        if b == "nqb_scale_row_offset_missing" and fmt != "mxfp8" and R > 1:
            sc = out["scale"]
            src = sc.reshape(R, nb)
            flat = np.zeros((R, nb), sc.dtype)
            flat[0] = src[R - 1]
            out["scale"] = flat.reshape(sc.shape)
        return Returned(out)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln17(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln17(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        L = 8
        if b == "aln_eps_outside_sqrt" and x.size:
            mean = _rsum(x) / H
            dev = x - mean
            rstd = 1 / (np.sqrt(_rsum(dev * dev) / H) + eps)
        elif b == "aln_lane_partials_merged_unweighted" and H > L and H % L and x.size:
            lane = np.arange(H) % L
            cnt = np.bincount(lane, minlength=L).astype(acc)
            lmean = np.stack([x[:, lane == k].sum(axis=1) for k in range(L)], axis=1) / cnt
            lm2 = np.stack([((x[:, lane == k] - lmean[:, k:k + 1]) ** 2).sum(axis=1) for k in range(L)], axis=1)
            c = acc(-(-H // L))
            mean = lmean.mean(axis=1, keepdims=True)
            m2 = lm2.sum(axis=1, keepdims=True) + c * ((lmean - mean) ** 2).sum(axis=1, keepdims=True)
            rstd = 1 / np.sqrt(m2 / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_shift_loaded_from_scale_ptr" and scale is not None and shift is not None:
            _, sh = aln_modulation(None, scale, B, H, T, acc)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_row_sums_in_half" and d in _HALF and H:
            dx = rstd * (g - _half_row_sums(g, d) / acc(H) - xhat * (_half_row_sums(g * xhat, d) / acc(H)))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            src = g if b == "aln_dscale_from_gained_dy" else dy
            grads["scale"] = _store(per_sample(src * xhat, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)
