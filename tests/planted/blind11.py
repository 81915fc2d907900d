"""An eleventh held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind11Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind10.py's (the class derives from ``Blind10Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it.

``Blind11Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind10.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, centred_dx as _centred_dx, channel_rows, channel_running_stats,
                          dy_and_g, dynamic_scale, dyt_inputs, eps_value as _eps, from_channel_rows,
                          gate_group_size, gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_inputs,
                          gated_normalize, group_outputs, group_param_grads, group_params, group_rows,
                          group_scales, half as _half, instance_rows, ln_rows, ln_stats, nqb_format,
                          nqb_normalized, nqb_quantized, norm_quant_returned, normalized_rows, padded_blocks,
                          poly_inputs, poly_normalize, QUANT as _QUANT, quant_quotients, quantize, rms_dx,
                          rms_rows, row_affine, row_weight_bias, rsum as _rsum, sigmoids as _sigmoids,
                          silu_gate, store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import Blind10Kernel, _half_row_sums, _with

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind11Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_dx_mean_term_twice": (
        "layer_norm", "backward",
        "dx = rstd * (g - 2 mean(g) - x_hat mean(g x_hat)): the accumulator for the second term still held "
        "mean(g) when x_hat mean(g x_hat) was added to it, so mean(g) is subtracted twice (dweight, dbias right)",
        GH + "tenstorrent/tt-metal/issues/53204 (a layernorm backward subtracting mean(dy * gamma) twice)"),
    "ln_dparams_buffer_of_last_axis": (
        "layer_norm", "reduction",
        "normalized_shape of two or more axes: the column-partial buffer for dweight and dbias sized by the "
        "last axis of normalized_shape instead of its product, so each entry sums dy * x_hat (dy) over every "
        "element sharing its last-axis index, the result broadcast over the leading normalized axes",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (a LayerNorm gamma/beta backward using dgamma.size(-1) where "
        "the product N of normalized_shape belongs)"),
    "ln_dbias_times_weight": (
        "layer_norm", "backward",
        "with a weight and a bias: dbias = sum over the rows of dy * weight (the already-scaled g reduced) "
        "instead of dy",
        "pattern: the weighted gradient g reused for the bias reduction"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_weight_tile_index": (
        "rms_norm", "layout",
        "with a weight, N > 32: the backward recomputes x_hat from the saved output as y / weight with the "
        "weight loaded at the column index within a 32-wide tile (j mod 32) instead of j: dx and dweight from "
        "that x_hat",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm backward recomputing x_hat from the output "
        "with gamma and beta read at the wrong index)"),
    "rms_bwd_gemma_offset_missing": (
        "rms_norm", "affine",
        "weight_offset set (Gemma's 1 + w): the forward scales by weight + offset but the backward's dx uses the "
        "raw weight (g = dy * w); dweight right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (an RMSNorm whose forward and backward disagreed on the "
        "zero-centred gamma's + 1)"),
    "rms_sumsq_tail_block_skipped": (
        "rms_norm", "block",
        "N not a multiple of 64 and above it: the sum of squares loops over whole 64-wide blocks only (the tail "
        "block skipped) and is divided by N: rstd, y and the backward from it",
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (an RMSNorm wrong for N = 513: its tail block "
        "handling not applied)"),
    # ------------------------------------------------------------------ add_norm
    "an_dresidual_row_pointer_early": (
        "add_norm", "layout",
        "the residual's gradient of row i stored from row i + 1's value (the store pointer advanced before the "
        "store); the last row keeps its own",
        "pattern: a row pointer incremented before the store in a row loop"),
    "an_drowscale_divided_by_n": (
        "add_norm", "reduction",
        "rowscale's gradient (each row's sum over the columns) divided by the row length N, a mean where the "
        "sum belongs",
        "pattern: a row reduction written with mean instead of sum"),
    "an_dx_missing_keep_scale": (
        "add_norm", "dropout",
        "dropout_p > 0: the gradient of x multiplied by the keep-mask but not by 1 / (1 - p) (the forward "
        "scales); residual, weight, bias and rowscale gradients right",
        "cf. " + GH + "foundation-model-stack/fms-acceleration/issues/97 (a fused op's dropout input gradient "
        "computed differently from its forward)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_dyn_scale_per_tensor": (
        "norm_quant", "quant_scale",
        "dynamic scale: one amax over the whole tensor (the per-row maxima reduced once more) used for every "
        "row's scale, and stored as every row's amax",
        "cf. " + GH + "ROCm/TransformerEngine/pull/230 (a fused RMSNorm-FP8 kernel's amax reduced across "
        "rows/workgroups)"),
    "nq_eps_kernel_default": (
        "norm_quant", "eps",
        "the normalization launched with the kernel's default eps 1e-6 (the configured eps not forwarded), then "
        "quantized",
        "cf. " + GH + "vllm-project/vllm/pull/10906 (an RMSNorm + quant fusion that had to carry each norm's own "
        "epsilon instead of one value)"),
    "nq_weight_loaded_from_bias_ptr": (
        "norm_quant", "layout",
        "norm='layer_norm' with a weight and a bias: the weight loaded from the bias pointer (y = x_hat * bias "
        "+ bias), then quantized",
        "pattern: two pointer arguments of the same type passed in the wrong slot"),
    # ------------------------------------------------------------------ group_norm
    "gn_count_padded_to_tile": (
        "group_norm", "block",
        "each group's elements loaded into 32-lane tiles, the zero-padded lanes counted: mean and variance "
        "divided by the count rounded up to a multiple of 32 (the padding's zeros in the sum of squared "
        "deviations), forward and backward",
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (a group norm's statistics over tile-padded rows)"),
    "gn_5d_stats_per_depth_slice": (
        "group_norm", "group",
        "inputs of five axes (N, C, D, H, W): the kernel written for 4-D input launched once per depth slice, "
        "each group's statistics over C / G * H * W of one slice; the saved mean and rstd are the last slice's",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/1375 (a group norm measuring the per-channel size from the "
        "last axis only for inputs of more than three axes)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_z_group_pointer_not_advanced": (
        "gated_norm", "layout",
        "group_size < H: the gate z read at the first group's columns for every group (z's pointer not advanced "
        "by the group offset), forward and backward",
        "pattern: a per-group pointer offset applied to one operand only"),
    "gated_silu_grad_missing_one_minus_s": (
        "gated_norm", "gate",
        "the gate's derivative taken as s (1 + z s) instead of s (1 + z (1 - s)) (the 1 - sigmoid factor "
        "replaced by sigmoid): dz only",
        "pattern: a hand-derived SiLU derivative"),
    "gated_ln_mean_over_row": (
        "gated_norm", "group",
        "norm='layer_norm' with groups: the mean taken over the whole row while the variance is per group (about "
        "that row mean), forward and backward",
        "pattern: one of two reductions missing the group reshape"),
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_mean_from_var_buffer": (
        "batch_norm", "running",
        "eval with running statistics: the running mean loaded from running_var's buffer (x - running_var) / "
        "sqrt(running_var + eps), and the backward from that x_hat; the buffers themselves untouched",
        "cf. " + GH + "NVIDIA/apex/pull/233 (a sync batchnorm kernel naming the wrong running buffer)"),
    "bn_eval_dx_without_weight": (
        "batch_norm", "backward",
        "eval with running statistics and a weight: dx = dy * rstd (the weight's factor left out of the eval "
        "backward); dweight and dbias right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (an RMSNorm backward that forgot to multiply by the weight)"),
    "bn_stats_tail_samples_dropped": (
        "batch_norm", "block",
        "batch statistics: the per-channel reduction loops over the batch in blocks of four samples and skips "
        "the tail block, the sums still divided by the full count, forward, backward and running update",
        "pattern: a tail block dropped by a floor division of the loop bound"),
    "bn_train_dweight_from_running_xhat": (
        "batch_norm", "backward",
        "training with running statistics: dweight = sum dy * (x - running_mean) / sqrt(running_var + eps) (the "
        "eval path's x_hat, from the statistics as loaded) instead of the batch x_hat",
        "cf. " + GH + "microsoft/onnxruntime/pull/19742 (a batch norm kernel mixing running and batch "
        "statistics in training)"),
    # ------------------------------------------------------------------ instance_norm
    "in_eval_running_of_channel0": (
        "instance_norm", "running",
        "eval with running statistics: every channel normalized with running_mean[0] and running_var[0] (the "
        "running buffers' pointer not advanced by the channel), forward and backward; the buffers untouched",
        "pattern: a per-channel pointer offset missing"),
    "in_mean_output_averaged_over_batch": (
        "instance_norm", "reduction",
        "the saved mean output holds each channel's instance means averaged over the samples (the buffer the "
        "running update reduces into); y, rstd and the gradients right",
        "cf. " + GH + "pytorch/pytorch/issues/59864 (instance norm's per-sample means averaged over the batch for "
        "the running statistics)"),
    "in_rstd_saved_from_unbiased_var": (
        "instance_norm", "bessel",
        "instance statistics: the saved rstd is 1 / sqrt(unbiased var + eps) (the S - 1 variance computed for the "
        "running update reused); y and the gradients from the biased one",
        "cf. " + GH + "CanReader/FastNN/issues/11 (biased and unbiased variances mixed between two code paths)"),
    # ------------------------------------------------------------------ dyt
    "dyt_weight_offset_one": (
        "dyt", "affine",
        "with a weight: y = (1 + weight) * tanh(alpha x) + bias (the Gemma RMSNorm's weight offset copied), "
        "forward and backward",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel's weight offset convention applied to the "
        "wrong model)"),
    "dyt_alpha_loaded_as_bf16": (
        "dyt", "precision",
        "32/64-bit inputs: alpha loaded through a bfloat16 pointer (rounded to bfloat16) for the forward and "
        "backward",
        "pattern: a scalar parameter's pointer typed as the 16-bit build's dtype"),
    "dyt_dx_missing_alpha": (
        "dyt", "backward",
        "dx = g * (1 - t^2) without the chain factor alpha",
        "pattern: an inner derivative dropped from the chain rule"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_activation_sigmoid_gelu": (
        "group_norm_silu", None,
        "the activation computed as p * sigmoid(1.702 p) (the sigmoid GELU approximation) instead of "
        "p * sigmoid(p), forward and backward",
        "pattern: the activation template instantiated with the wrong functor"),
    "gns_bias_after_activation": (
        "group_norm_silu", "affine",
        "with a bias: y = silu(x_hat * weight) + bias (the bias added in the epilogue after the activation), "
        "forward and backward",
        "pattern: an epilogue's operations reordered"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_group_scale_shared_across_rows": (
        "norm_quant_block", "quant_scale",
        "fp8_group: each block-column's amax reduced over all the rows too (one scale per column block, shared "
        "by every token), stored as every row's scale and amax",
        "cf. " + GH + "vllm-project/vllm/pull/53110 (an MXFP8 quantizer's block scale derived wrong)"),
    "nqb_group_scale_from_row_amax": (
        "norm_quant_block", "quant_scale",
        "fp8_group, more than one block a row: every block of a row scaled by the row's amax (per-token scale "
        "instead of per-block), stored as each block's scale and amax",
        "cf. " + GH + "ROCm/ATOM/pull/670 (a fused rmsnorm-quant path forcing the wrong quant granularity)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dmod_partial_overwritten": (
        "adaptive_layer_norm", "reduction",
        "more than four tokens a sample: dscale and dshift accumulated in blocks of four tokens with each "
        "block's partial overwriting the sample's sum (only the last block's tokens kept)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a norm backward where only the last block's "
        "contribution to a reduction survived)"),
    "aln_modulation_read_transposed": (
        "adaptive_layer_norm", "layout",
        "scale and shift (B, H) read column-major (element (b, h) from flat index h * B + b), and their "
        "gradients written back the same way",
        "pattern: a small parameter tensor's strides taken transposed"),
    "aln_bwd_scale_of_next_sample": (
        "adaptive_layer_norm", "layout",
        "more than one sample: the backward's g = dy * (1 + scale) loads the next sample's scale ((b + 1) mod B, "
        "the sample pointer advanced before the load) for dx; the forward, dscale and dshift right",
        "pattern: a per-sample pointer advanced too early in the backward loop"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_partial_overwritten": (
        "poly_norm", "reduction",
        "more than four rows: the weight's gradient accumulated over blocks of four rows with each block's "
        "partial overwriting the sum (only the last block's rows kept)",
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing all but the last block's "
        "partial sums)"),
    "poly_bwd_power_not_decremented": (
        "poly_norm", "backward",
        "dx chains each power's normalization gradient by p x^p instead of p x^(p - 1)",
        "pattern: an off-by-one exponent in a hand-derived derivative"),
    "poly_dbias_per_power": (
        "poly_norm", "reduction",
        "with a bias: dbias accumulated inside the loop over the three power terms (3 * sum(dy))",
        "pattern: a reduction placed inside the wrong loop"),
    # ------------------------------------------------------------------ z_score
    "zs_std_output_without_eps": (
        "z_score", "eps",
        "the returned std is sqrt(var) (eps left out of the stored statistic); y and dx use sqrt(var + eps)",
        "pattern: a statistic stored before eps is added"),
    "zs_ddof_applied_twice": (
        "z_score", "bessel",
        "ddof > 0: the variance divided by n - 2 ddof (the correction subtracted by the caller and again by the "
        "kernel), forward and backward",
        "pattern: a correction applied on both sides of an API boundary"),
    "zs_dweight_rows_in_half": (
        "z_score", "precision",
        "16-bit inputs with a weight: dweight's sum of dy * x_hat over the rows accumulated left to right in the "
        "input dtype",
        "pattern: a parameter-gradient accumulator declared in the activation dtype"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_dim_tuple_first_axis_only": (
        "lp_normalize", "group",
        "dim a tuple of several axes: the norm taken over the first of them only, forward and backward; the norm "
        "output holds the last slice written along the other axes",
        "pattern: a dim tuple read as its first element"),
    "lp_bwd_abs_without_sign": (
        "lp_normalize", "backward",
        "zero_rule='torch', no slice clamped: the norm's derivative |u|^(p - 1) without sign(u) in dx",
        "cf. " + GH + "facebookarchive/caffe2/issues/1429 (a Normalize op's GPU gradient wrong)"),
    "lp_bwd_power_of_raw_x": (
        "lp_normalize", "backward",
        "zero_rule='torch', no slice clamped: the norm's derivative taken as sign(x) |x|^(p - 1) (x not divided "
        "by the norm) in dx",
        "cf. " + GH + "pytorch/pytorch/issues/113527 (a hand-derived gradient of x / ||x|| disagreeing with "
        "autograd)"),
}


class Blind11Kernel(Blind10Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind11"

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        r = super()._layer_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return r
        eps = _eps(call.config["eps"], acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        if b == "ln_bwd_dx_mean_term_twice" and "x" in r.grads:
            _, rstd, xhat = ln_rows(x, eps)
            dy, g = dy_and_g(call, acc, (-1, N), w)
            dx = rstd * (g - 2 * _rsum(g) / acc(N) - xhat * (_rsum(g * xhat) / acc(N)))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(inp["x"].shape), d)})
        if b == "ln_dparams_buffer_of_last_axis" and len(ns) >= 2 and ("weight" in r.grads or "bias" in r.grads):
            _, _, xhat = ln_rows(x, eps)
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            grads = dict(r.grads)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if k in grads:
                    col = t.reshape(-1, ns[-1]).sum(axis=0)
                    grads[k] = _store(np.ascontiguousarray(np.broadcast_to(col, tuple(ns))), d)
            return Returned(r.outputs, grads)
        if b == "ln_dbias_times_weight" and "bias" in r.grads and w is not None:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            return Returned(r.outputs, {**r.grads, "bias": _store((dy * w).sum(axis=0).reshape(ns), d)})
        return r

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        placement = call.config.get("eps_placement", "inside")
        ns, N, x = normalized_rows(call, acc)
        if b == "rms_sumsq_tail_block_skipped" and N > 64 and N % 64:
            full = (N // 64) * 64

            def stats(xx, eps, pl="inside"):
                ms = _rsum(xx[:, :full] * xx[:, :full]) / xx.shape[1]
                rms = np.sqrt(ms)
                return rms, (1 / (rms + eps) if pl == "outside" else 1 / np.sqrt(ms + eps))
            self._rms_stats = stats
            try:
                return super()._rms_norm(call, acc)
            finally:
                del self._rms_stats
        r = super()._rms_norm(call, acc)
        if ("y" not in call.cotangents or inp.get("weight") is None or placement == "outside" or not N
                or not x.size or "x" not in r.grads):
            return r
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        _, rstd, xhat = rms_rows(x, eps)
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        w = inp["weight"].astype(acc).reshape(1, N) + off
        if b == "rms_bwd_weight_tile_index" and N > 32:
            wr = w[:, np.arange(N) % 32]
            xr = np.where(wr == 0, xhat, xhat * w / np.where(wr == 0, acc(1), wr))
            grads = {**r.grads, "x": _store(rms_dx(dy * w, xr, rstd).reshape(x0.shape), d)}
            if "weight" in r.grads:
                grads["weight"] = _store((dy * xr).sum(axis=0).reshape(ns), d)
            return Returned(r.outputs, grads)
        if b == "rms_bwd_gemma_offset_missing" and off != 0:
            wraw = inp["weight"].astype(acc).reshape(1, N)
            return Returned(r.outputs, {**r.grads, "x": _store(rms_dx(dy * wraw, xhat, rstd).reshape(x0.shape), d)})
        return r

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b = self.bug
        p = float(call.config["dropout_p"] or 0.0)
        r = super()._add_norm(call, acc)
        grads = dict(r.grads)
        if b == "an_dresidual_row_pointer_early" and "residual" in grads:
            g = grads["residual"]
            H = g.shape[-1] if g.ndim else 1
            g2 = g.reshape(-1, H).copy()
            if g2.shape[0] > 1:
                g2[:-1] = g2[1:]
                grads["residual"] = g2.reshape(g.shape)
                return Returned(r.outputs, grads, r.state)
        if b == "an_drowscale_divided_by_n" and "rowscale" in grads:
            N = call.inputs["x"].shape[-1]
            if N > 1:
                g = grads["rowscale"]
                grads["rowscale"] = (g.astype(acc) / acc(N)).astype(g.dtype)
                return Returned(r.outputs, grads, r.state)
        if b == "an_dx_missing_keep_scale" and p and "x" in grads:
            g = grads["x"]
            grads["x"] = (g.astype(acc) * acc(1.0 - p)).astype(g.dtype)
            return Returned(r.outputs, grads, r.state)
        return r

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        static = inp.get("static_scale")
        x0 = inp["x"]
        if b == "nq_dyn_scale_per_tensor" and static is None and x0.size and x0.size > x0.shape[-1]:
            ns, N, x = normalized_rows(call, acc)
            _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, _eps(cfg["eps"], acc))
            y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
            amax = np.full_like(amax, np.max(amax))
            scale = dynamic_scale(amax, hi, cfg, acc)
            q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
            return norm_quant_returned(q, scale, amax, x0, ns, acc)
        if b == "nq_eps_kernel_default" and cfg["eps"] is not None and float(cfg["eps"]) != 1e-6:
            return super()._norm_quant(_with(call, config={"eps": 1e-6}), acc)
        if (b == "nq_weight_loaded_from_bias_ptr" and cfg["norm"] == "layer_norm" and inp.get("weight") is not None
                and inp.get("bias") is not None):
            return super()._norm_quant(_with(call, inputs={"weight": inp["bias"]}), acc)
        return super()._norm_quant(call, acc)

    # ------------------------------------------------------------ group_norm
    def _group_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        if call.op != "group_norm":
            return super()._group_norm(call, acc)
        if b == "gn_count_padded_to_tile":
            def stats(x, eps):
                n = x.shape[1]
                npad = -(-n // 32) * 32
                mean = _rsum(x) / npad
                dev = x - mean
                var = (_rsum(dev * dev) + (npad - n) * mean * mean) / npad
                return mean, 1 / np.sqrt(var + eps)
            return self._patched_stats(stats, super()._group_norm, call, acc)
        if b == "gn_5d_stats_per_depth_slice" and x0.ndim == 5 and x0.shape[2] > 1 and x0.size:
            D = x0.shape[2]
            outs = []
            for k in range(D):
                cot = {kk: np.ascontiguousarray(v[:, :, k]) for kk, v in call.cotangents.items()}
                sub = dataclasses.replace(call, inputs={**call.inputs, "x": np.ascontiguousarray(x0[:, :, k])},
                                          cotangents=cot)
                outs.append(super()._group_norm(sub, acc))
            out = {**outs[-1].outputs, "y": np.stack([o.outputs["y"] for o in outs], axis=2)}
            grads = dict(outs[-1].grads)
            if "x" in grads:
                grads["x"] = np.stack([o.grads["x"] for o in outs], axis=2)
            for kk in ("weight", "bias"):
                if kk in grads:
                    grads[kk] = _store(sum(o.grads[kk].astype(acc) for o in outs), d)
            return Returned(out, grads)
        return super()._group_norm(call, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        H = inp["x"].shape[-1]
        K = gate_group_size(cfg, H)
        if b == "gated_z_group_pointer_not_advanced" and K < H:
            z0 = inp["z"]
            zr = z0.reshape(-1, H)[:, :K]
            z2 = np.ascontiguousarray(np.tile(zr, (1, H // K))).reshape(z0.shape)
            return super()._gated_norm(_with(call, inputs={"z": z2}), acc)
        if b == "gated_silu_grad_missing_one_minus_s" and "y" in call.cotangents:
            return self._gated_full(call, acc, ds_fn=lambda z, s: s * (1 + z * s))
        if b == "gated_ln_mean_over_row" and cfg["norm"] == "layer_norm" and K < H:
            G = H // K

            def stats(v, eps):
                n = v.shape[1]
                rows = v.reshape(-1, G * n)
                mean = np.repeat(_rsum(rows) / (G * n), G, axis=0)
                dev = v - mean
                return mean, 1 / np.sqrt(_rsum(dev * dev) / n + eps)
            return self._gated_full(call, acc, stats=stats)
        return super()._gated_norm(call, acc)

    def _gated_full(self, call, acc, ds_fn=None, stats=None):
        """gated_norm written out: the gate's derivative by ``ds_fn(z, s)``, the layer-norm statistics by
        ``stats``, when given."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        if ds_fn is not None:
            ds = ds_fn(z, s)
        v = x if nbg else x * s
        rstd, vhat, nrm = gated_normalize(v, w, bias, _eps(cfg["eps"], acc), K, norm, stats or self._ln_stats)
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            dv = gated_dx(norm, g, vhat.reshape(-1, K), rstd).reshape(R, H)
            dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
            grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        batch = call.training or not has_run
        if b == "bn_eval_mean_from_var_buffer" and has_run and not call.training:
            ok = super()._batch_norm(call, acc)
            r = super()._batch_norm(_with(call, state={"running_mean": st["running_var"]}), acc)
            return Returned(r.outputs, r.grads, ok.state)
        if b == "bn_stats_tail_samples_dropped" and batch and x0.shape[0] > 4 and x0.shape[0] % 4:
            x = channel_rows(x0, acc)
            C, n = x.shape
            S = n // x0.shape[0]
            xs = x[:, :(x0.shape[0] // 4) * 4 * S]
            mean = _rsum(xs) / n
            return self._bn_from_stats(call, acc, x, has_run, mean, _rsum((xs - mean) ** 2) / n)
        r = super()._batch_norm(call, acc)
        if "y" not in call.cotangents or not has_run or not x0.size:
            return r
        x = channel_rows(x0, acc)
        C = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        dy = channel_rows(call.cotangents["y"], acc)
        w = call.inputs.get("weight")
        if b == "bn_eval_dx_without_weight" and not call.training and w is not None and "x" in r.grads:
            _, rstd = channel_running_stats(st, C, eps, acc)
            return Returned(r.outputs, {**r.grads, "x": _store(from_channel_rows(dy * rstd, x0.shape), d)}, r.state)
        if b == "bn_train_dweight_from_running_xhat" and call.training and "weight" in r.grads:
            mean, rstd = channel_running_stats(st, C, eps, acc)
            dw = _rsum(dy * (x - mean) * rstd).reshape(C)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw, d)}, r.state)
        return r

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        x0 = call.inputs["x"]
        has_run = st.get("running_mean") is not None
        if b == "in_eval_running_of_channel0" and has_run and not call.training and st["running_mean"].size > 1:
            ok = super()._instance_norm(call, acc)
            rm, rv = st["running_mean"], st["running_var"]
            fake = {"running_mean": np.full_like(rm, rm.reshape(-1)[0]),
                    "running_var": np.full_like(rv, rv.reshape(-1)[0])}
            r = super()._instance_norm(_with(call, state=fake), acc)
            return Returned(r.outputs, r.grads, ok.state)
        r = super()._instance_norm(call, acc)
        if b == "in_mean_output_averaged_over_batch" and "mean" in r.outputs and x0.shape[0] > 1:
            m = r.outputs["mean"]
            avg = np.broadcast_to(m.astype(acc).mean(axis=0, keepdims=True), m.shape)
            return Returned({**r.outputs, "mean": np.ascontiguousarray(avg).astype(m.dtype)}, r.grads, r.state)
        if b == "in_rstd_saved_from_unbiased_var" and "rstd" in r.outputs:
            Nb, C, S, x = instance_rows(x0, acc)
            if S > 1 and Nb:
                mean = _rsum(x) / S
                var = _rsum((x - mean) ** 2) / (S - 1)
                ro = r.outputs["rstd"]
                rs = (1 / np.sqrt(var + _eps(cfg["eps"], acc))).reshape(ro.shape).astype(ro.dtype)
                return Returned({**r.outputs, "rstd": rs}, r.grads, r.state)
        return r

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "dyt_weight_offset_one" and inp.get("weight") is not None:
            return super()._dyt(_with(call, inputs={"weight": inp["weight"].astype(np.float64) + 1.0}), acc)
        if b == "dyt_alpha_loaded_as_bf16" and d in ("float32", "float64"):
            a = np.asarray(inp["alpha"]).astype(np.float64)
            return super()._dyt(_with(call, inputs={"alpha": _half(a, "bfloat16")}), acc)
        r = super()._dyt(call, acc)
        if b == "dyt_dx_missing_alpha" and "x" in r.grads:
            x, a, w, bias, t = dyt_inputs(inp, acc)
            _, g = dy_and_g(call, acc, x.shape, w)
            return Returned(r.outputs, {**r.grads, "x": _store((g * (1 - t * t)).reshape(inp["x"].shape), d)})
        return r

    # ------------------------------------------------------------ group_norm_silu
    def _group_norm_silu(self, call, acc):
        b = self.bug
        if b == "gns_activation_sigmoid_gelu" and call.inputs["x"].size:
            return self._gns_full(call, acc, k=1.702)
        if b == "gns_bias_after_activation" and call.inputs.get("bias") is not None and call.inputs["x"].size:
            return self._gns_full(call, acc, bias_after=True)
        return super()._group_norm_silu(call, acc)

    def _gns_full(self, call, acc, k=1.0, bias_after=False):
        """group_norm_silu written out with the activation p * sigmoid(k p), the bias after it when
        ``bias_after``."""
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, None if bias_after else bias)
        sg, rest = _sigmoids(k * p)
        y = p * sg
        if bias_after:
            y = affine(y, None, bias)
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            dp = dy * (sg * (1 + k * p * rest))
            g = dp if w is None else dp * w
            dx = _centred_dx(g.reshape(xv.shape), xhat.reshape(xv.shape), rstd)
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            grads.update(group_param_grads(dp * xhat, dy if bias_after else dp, w, bias, C, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        if b in ("nqb_group_scale_shared_across_rows", "nqb_group_scale_from_row_amax") and fmt == "fp8_group":
            s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
            yb, amax = padded_blocks(y, B, acc)
            axis = 0 if b == "nqb_group_scale_shared_across_rows" else 1
            if amax.shape[axis] > 1:
                am = np.ascontiguousarray(np.broadcast_to(amax.max(axis=axis, keepdims=True), amax.shape))
                S = group_scales(am, qmax, rule, cfg, acc)
                return nqb_quantized(yb, S, qmax, qdt, S.astype(acc), am, acc(1.0), call, s, acc)
        return super()._norm_quant_block(call, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        if b == "aln_modulation_read_transposed" and B > 1 and H > 1:
            def tr(v):
                return None if v is None else np.ascontiguousarray(v.reshape(-1).reshape(H, B).T).reshape(v.shape)

            def back(g):
                return np.ascontiguousarray(g.reshape(B, H).T).reshape(g.shape)
            r = super()._adaptive_layer_norm(_with(call, inputs={"scale": tr(scale), "shift": tr(shift)}), acc)
            grads = dict(r.grads)
            for k in ("scale", "shift"):
                if k in grads:
                    grads[k] = back(grads[k])
            return Returned(r.outputs, grads)
        r = super()._adaptive_layer_norm(call, acc)
        if b == "aln_bwd_scale_of_next_sample" and B > 1 and "x" in r.grads and scale is not None:
            sr = np.ascontiguousarray(np.roll(scale.reshape(B, -1), -1, axis=0)).reshape(scale.shape)
            rb = super()._adaptive_layer_norm(_with(call, inputs={"scale": sr}), acc)
            return Returned(r.outputs, {**r.grads, "x": rb.grads["x"]})
        if b == "aln_dmod_partial_overwritten" and T > 4 and ("scale" in r.grads or "shift" in r.grads):
            _, _, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            t0 = ((T - 1) // 4) * 4
            grads = dict(r.grads)
            for k, t in (("scale", dy * xhat), ("shift", dy)):
                if k in grads:
                    part = t.reshape(B, T, H)[:, t0:].sum(axis=1)
                    grads[k] = _store(part.reshape(grads[k].shape), d)
            return Returned(r.outputs, grads)
        return r

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        r = super()._poly_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        H, x, wt, bias, eps = poly_inputs(call, acc)
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        if b == "poly_dweight_partial_overwritten" and "weight" in r.grads and x.shape[0] > 4:
            hs, _ = poly_normalize([x ** 3, x ** 2, x], eps, acc)
            r0 = ((x.shape[0] - 1) // 4) * 4
            dw = np.array([(dy[r0:] * h[r0:]).sum() for h in hs])
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(inp["weight"].shape), d)})
        if b == "poly_bwd_power_not_decremented" and "x" in r.grads:
            hs, rs = poly_normalize([x ** 3, x ** 2, x], eps, acc)
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2, 1)):
                dx = dx + p * x ** p * rms_dx(dy * wt[k], hs[k], rs[k])
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(inp["x"].shape), d)})
        if b == "poly_dbias_per_power" and "bias" in r.grads:
            g = r.grads["bias"]
            return Returned(r.outputs, {**r.grads, "bias": _store(3 * g.astype(acc), d)})
        return r

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        _, n, _ = _axes_rows(x0, cfg["dim"])
        ddof = int(cfg["ddof"])
        if b == "zs_ddof_applied_twice" and ddof > 0 and n - 2 * ddof > 0:
            return super()._z_score(_with(call, config={"ddof": 2 * ddof}), acc)
        r = super()._z_score(call, acc)
        if b == "zs_std_output_without_eps" and cfg["eps"] and n - ddof > 0:
            x, _, back = _axes_rows(x0.astype(acc), cfg["dim"])
            mean = _rsum(x) / acc(n)
            std = np.sqrt(_rsum((x - mean) ** 2) / acc(n - ddof))
            return Returned({**r.outputs, "std": back(std, True).astype(r.outputs["std"].dtype)}, r.grads)
        if b == "zs_dweight_rows_in_half" and d in ("float16", "bfloat16") and "weight" in r.grads:
            x, _, _ = _axes_rows(x0.astype(acc), cfg["dim"])
            mean = _axes_rows(r.outputs["mean"].astype(acc), cfg["dim"])[0]
            std = _axes_rows(r.outputs["std"].astype(acc), cfg["dim"])[0]
            xhat = np.where(std == 0, acc(0), (x - mean) / np.where(std == 0, acc(1), std))
            dy = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])[0]
            dw = _half_row_sums(np.ascontiguousarray((dy * xhat).T), d)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(inp["weight"].shape), d)})
        return r

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        x0 = call.inputs["x"]
        dims = cfg["dim"]
        if b == "lp_dim_tuple_first_axis_only" and isinstance(dims, (list, tuple)) and len(dims) > 1:
            nd = x0.ndim
            axes = [int(a) % nd for a in dims]
            r = super()._lp_normalize(_with(call, config={"dim": axes[0]}), acc)
            norm = r.outputs["norm"]
            for a in axes[1:]:
                norm = np.take(norm, [-1], axis=a)
            return Returned({**r.outputs, "norm": np.ascontiguousarray(norm)}, r.grads)
        r = super()._lp_normalize(call, acc)
        if b in ("lp_bwd_abs_without_sign", "lp_bwd_power_of_raw_x") and "x" in r.grads and cfg["zero_rule"] == "torch":
            x, n, back = _axes_rows(x0.astype(acc), dims)
            p, eps = float(cfg["p"]), acc(cfg["eps"])
            norm = _axes_rows(r.outputs["norm"].astype(acc), dims)[0]
            if not n or not np.all(norm > eps):
                return r
            dy = _axes_rows(call.cotangents["y"].astype(acc), dims)[0]
            if b == "lp_bwd_abs_without_sign":
                wv = np.abs(x / norm) ** acc(p - 1.0)
            else:
                wv = np.where(x == 0, acc(0), np.sign(x) * np.abs(x) ** acc(p - 1.0))
            dx = dy / norm - wv * (_rsum(dy * x) / (norm * norm))
            return Returned(r.outputs, {**r.grads, "x": _store(back(dx), d)})
        return r
