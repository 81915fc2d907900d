"""An eighth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind8Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind7.py's (the class derives from ``Blind7Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it.

``Blind8Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy,
the same tuple as blind3's), or None where none fits. ``source`` is a public bug report or fix where the
mistake really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same
mistake in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic and public bug reports only, by an author who did not
read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran the diagnosis on these bugs.
None of its bugs repeats one of tests/planted/blind.py, blind2.py, ..., blind7.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, aln_inputs, centred_dx as _centred_dx, channel_dy_and_g,
                          channel_params, channel_rows, channel_sums, dy_and_g, dynamic_scale, dyt_grads, dyt_inputs,
                          eps_value as _eps, from_channel_rows, gate_group_size, gated_dn, gated_dx, gated_dx_dz,
                          gated_grads, gated_inputs, gated_normalize, group_outputs, group_param_grads, group_params,
                          group_rows, group_scales, half as _half, instance_momentum_value, instance_rows,
                          instance_unbiased_var, kept, ln_rows, ln_stats, mx_scales, norm_outputs, norm_quant_returned,
                          normalized_rows, nqb_format, nqb_normalized, nqb_quantized, nvfp4_encode, nvfp4_scales,
                          padded_blocks, poly_combine, poly_grads, poly_inputs, poly_rstd, QUANT as _QUANT,
                          quant_quotients, quantize, rms_dx, rms_rows, rms_stats, row_affine, row_param_grads,
                          row_weight_bias, rowscale_grad, rsum as _rsum, running_in, running_state,
                          bn_momentum, bn_running_update, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind7 import Blind7Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind8Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_var_about_first_value": (
        "layer_norm", "one_pass",
        "the variance accumulated about the row's first value (shifted data, shift = x[0]) as mean((x - x0)^2) "
        "without subtracting (mean - x0)^2: var too large, forward (the backward's formula on that rstd)",
        "cf. " + GH + "gm-spacagna/sparkz/issues/8 (a running variance missing a term of its expansion)"),
    "ln_eps_added_twice": (
        "layer_norm", "eps",
        "eps added in the variance's finalization and again under the rsqrt: rstd = 1 / sqrt(var + 2 eps), "
        "forward (the backward's formula on that rstd)",
        "pattern: var = m2 / n + eps returned by the Welford helper, then rsqrt(var + eps) at the call site"),
    "ln_bwd_rstd_of_next_row": (
        "layer_norm", "layout",
        "the backward loads rstd after the row pointers were advanced: row r's x_hat and dx use the rstd of row "
        "r + 1 (the last row its own); y, dweight and dbias right",
        "pattern: Rstd += stride before the load in the backward's row loop"),
    "ln_bwd_row_sums_in_half": (
        "layer_norm", "precision",
        "16-bit inputs: the backward's row sums of g and g * x_hat accumulated left to right in the input dtype "
        "(its mean(g) and mean(g * x_hat) terms), dx",
        "cf. " + GH + "apache/mxnet/issues/14073 (LayerNorm performing its reductions in fp16 for fp16 inputs)"),
    "ln_rows_past_grid_limit": (
        "layer_norm", "block",
        "one program per row on a grid dimension capped at 65535: rows from 65535 on are never processed (y, "
        "mean, rstd and dx left 0, dweight and dbias without them)",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/31144 (a layernorm grad kernel launched with its rows on the grid's y "
        "dimension, at most 65535)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_norm_centred": (
        "rms_norm", "semantics",
        "eps inside: the RMS norm computed by the LayerNorm kernel without a bias: x centred by its row mean "
        "before the mean square and the scaling (rstd the LayerNorm's), forward and backward",
        GH + "mit-han-lab/omniserve/issues/32 (rms_norm_general invokes the layer norm kernel with beta = nullptr: the "
        "mean is still subtracted)"),
    "rms_outside_rstd_saved_inside": (
        "rms_norm", "eps",
        "eps_placement='outside': the saved rstd written as 1 / sqrt(mean(x^2) + eps) (the inside formula); "
        "y and the gradients use 1 / (rms + eps)",
        "pattern: the rstd store shared by both eps placements"),
    "rms_bwd_rstd_hoisted_per_block": (
        "rms_norm", "block",
        "the backward's programs take 4 rows each and load rstd once before their row loop: every row uses its "
        "block's first row's rstd for x_hat, dx and dweight (y right)",
        "pattern: a per-row load hoisted out of the row loop as loop-invariant"),
    "rms_dweight_from_saved_half_xhat": (
        "rms_norm", "precision",
        "16-bit inputs: dweight = sum(dy * x_hat) with x_hat read from a buffer of the input dtype (the "
        "normalized activation saved for the backward); dx right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (an RMSNorm dW reduced from dY * (X * rstd).to(X_dtype))"),
    # ------------------------------------------------------------------ add_norm
    "an_dx_without_rowscale": (
        "add_norm", "backward",
        "with a rowscale: dx = ds * mask / (1 - p), the rowscale left out of x's gradient (the forward, "
        "drowscale and dresidual right)",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (dx1 written without the rowscale the forward applies)"),
    "an_prenorm_dres_after_dx": (
        "add_norm", "backward",
        "prenorm=True: residual_out's cotangent added to dresidual only, after dx (and drowscale) were computed "
        "from the normalization's ds alone",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (an RMS PreNorm backward combining the residual_out gradient at the "
        "wrong place)"),
    "an_rowscale_indexed_by_column": (
        "add_norm", "layout",
        "the rowscale read at the column index (rowscale[j], modulo the row count) instead of the row's, "
        "forward and backward (drowscale accumulated at those indices)",
        "pattern: the rowscale pointer offset by the column index"),
    "an_drowscale_from_dy": (
        "add_norm", "backward",
        "drowscale = sum(dy * x * mask) / (1 - p): y's cotangent instead of the normalization's input gradient "
        "ds (the forward and dx right)",
        "pattern: the rowscale gradient reduced from the incoming dy"),
    "an_keep_scale_in_input_dtype": (
        "add_norm", "precision",
        "16-bit inputs with dropout: the factor 1 / (1 - p) rounded to the input dtype (p = 0.25: 1.3359 in "
        "bfloat16), forward and backward",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/39501 (dropout on fp16 inputs computed in fp16; cast through fp32 for "
        "accuracy)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_symmetric_clip": (
        "norm_quant", "saturation",
        "int8: y / scale clipped to [-127, 127] instead of [-128, 127]",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56526 (quantize never produces -128: everything at or below -127.5 "
        "saturates to -127)"),
    "nq_fp8_clamp_upper_only": (
        "norm_quant", "saturation",
        "float8 outputs: y / scale clamped with min(v, qmax) only; below -qmax the cast gives NaN (e4m3fn) or "
        "-inf (e5m2)",
        "cf. " + GH + "huggingface/transformers/pull/42775 (static FP8 quantization without the clamp to the float8 "
        "range before the downcast: NaN)"),
    "nq_amax_loop_skips_last_block": (
        "norm_quant", "block",
        "rows of more than 128 columns: the amax loop over column blocks of 128 runs range(0, N - 128, 128), "
        "so the last column block never enters amax (the scale from the others, its values saturating)",
        "cf. " + GH + "AMD-AGI/Primus-Turbo/pull/306 (an amax reduction returning the first tile's max only: wrong "
        "FP8 scales)"),
    "nq_scale_output_unclamped": (
        "norm_quant", "quant_scale",
        "dynamic scale: the returned scale is amax / qmax before the scale_ub and min_scale clamps; q is "
        "divided by the clamped scale",
        "pattern: the intermediate amax / qmax stored to the scale output"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_zero_block_divides_by_zero": (
        "norm_quant_block", "quant_scale",
        "fp8_group: an all-zero block (scale 0) quantized as 0 / 0: NaN instead of 0",
        GH + "huggingface/kernels-community/issues/681 (act_quant: s = max|x| / 448 with no floor, an all-zero "
        "block quantized as 0 / 0 = NaN)"),
    "nqb_residual_added_after_norm": (
        "norm_quant_block", "semantics",
        "with a residual: the residual added to the normalized x (post-norm) and that quantized, instead of "
        "normalizing x + residual; residual_out right",
        "pattern: pre-norm and post-norm residual placement confused"),
    "nqb_residual_out_is_normalized": (
        "norm_quant_block", None,
        "with a residual: residual_out stores the normalized value y instead of the sum x + residual; q right",
        "pattern: the output pointers of the sum and the normalized value swapped"),
    # ------------------------------------------------------------------ group_norm
    "gn_stats_pooled_over_batch": (
        "group_norm", "reduction",
        "each group's statistics pooled over the whole batch (x viewed as (G, -1) after a transpose) instead of "
        "per sample, forward and backward; mean and rstd repeated over the samples",
        "pattern: x.view(G, -1) instead of x.view(N, G, -1)"),
    "gn_saved_mean_of_shifted_data": (
        "group_norm", None,
        "the saved mean is the mean of the shifted data (mean - x_first, the group's first value as the shift); "
        "y, rstd and the gradients right",
        "pattern: the shift of the shifted-data algorithm not added back before the mean is stored"),
    "gn_bwd_reads_rstd_as_var": (
        "group_norm", "backward",
        "the backward takes the saved rstd for the variance: rstd' = 1 / sqrt(rstd + eps), and x_hat, dx and "
        "dweight from it (y right)",
        "cf. " + GH + "microsoft/onnxruntime/pull/8172 (a BatchNorm backward: the saved inverse std and inverse "
        "variance confused)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_g1_fast_path_without_silu": (
        "group_norm_silu", "semantics",
        "num_groups == 1 dispatched to a plain (layer-norm-like) fast path that never applies the SiLU: "
        "group_norm's forward and backward",
        "cf. " + GH + "Comfy-Org/comfy-kitchen/pull/175 (a group-norm kernel's dispatch selecting the wrong SiLU "
        "variant for a special path)"),
    "gns_dweight_from_p": (
        "group_norm_silu", "backward",
        "dweight = sum(dp * p): the pre-activation p = x_hat * w + b instead of x_hat (dx and dbias right)",
        "pattern: the saved pre-activation reused for the weight gradient"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dz_from_xhat_without_affine": (
        "gated_norm", "gate",
        "norm_before_gate=True: dz = dy * x_hat * silu'(z), the weight and bias left out of the normalized "
        "value the gate multiplies (dx, dweight right)",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/1071 (a gated norm's backward using the wrong recomputed "
        "intermediate of the gated output)"),
    "gated_unfused_gate_rounded": (
        "gated_norm", "precision",
        "norm_before_gate=False, 16-bit inputs: x * silu(z) rounded to the input dtype before the norm (an "
        "unfused gate), forward and backward",
        "cf. " + GH + "mudler/vllm.cpp/pull/2957 (silu(gate) narrowed to the 16-bit dtype before the multiply or not: "
        "different results)"),
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_dx_without_rstd": (
        "batch_norm", "backward",
        "eval with running statistics: dx = dy * weight, the factor rstd left out (y right)",
        "cf. " + GH + "pytorch/xla/issues/913 (BatchNorm in eval mode producing a wrong input gradient)"),
    "bn_eval_fold_shift_unscaled": (
        "batch_norm", "affine",
        "eval with running statistics, folded: y = x * (w * rstd) + (b - running_mean) instead of b - "
        "running_mean * w * rstd (the gradients right)",
        "cf. " + GH + "vlfeat/matconvnet/issues/772 (mergeBatchNorm: a term of the folded bias not multiplied by the "
        "scale)"),
    "bn_running_var_includes_eps": (
        "batch_norm", "running",
        "torch convention, training: running_var updated with (var + eps) * n / (n - 1), the batch variance "
        "recovered from the saved rstd as 1 / rstd^2",
        "cf. " + GH + "keras-team/keras-contrib/pull/287 (BatchRenorm's running variance updated from a std that "
        "includes eps: too large by eps)"),
    "bn_nbt_reset_to_one": (
        "batch_norm", "running",
        "training: num_batches_tracked written as 1 (the counter not loaded: 0 + 1), and momentum=None's "
        "factor 1 / 1 (running statistics replaced by the batch's)",
        "pattern: a local counter instead of the buffer"),
    # ------------------------------------------------------------------ instance_norm
    "in_dweight_from_dy": (
        "instance_norm", "backward",
        "dweight = sum(dy) per channel (dbias's reduction copied; x_hat left out)",
        "pattern: the weight gradient's reduction copied from the bias's"),
    "in_running_var_from_mean_std": (
        "instance_norm", "running",
        "training: running_var updated with the square of the batch mean of the instances' unbiased standard "
        "deviations instead of the mean of their variances",
        "pattern: averaging standard deviations then squaring"),
    "in_eval_running_var_read_as_std": (
        "instance_norm", "running",
        "eval with running statistics: running_var read as a standard deviation (the old running_std buffer): "
        "rstd = 1 / sqrt(running_var^2 + eps), forward and backward; the state unchanged",
        "cf. " + GH + "torch/nn/pull/700 (the batch normalization's running buffer changed from the std to the "
        "variance)"),
    # ------------------------------------------------------------------ dyt
    "dyt_bias_inside_weight": (
        "dyt", "affine",
        "y = weight * (tanh(alpha x) + bias) instead of weight * tanh(alpha x) + bias, forward and backward",
        "pattern: a misplaced parenthesis in the affine"),
    "dyt_missing_weight_as_zero": (
        "dyt", "affine",
        "no weight: the weight loaded as 0 (the masked load's other=0): y = bias, dx and dalpha 0",
        "pattern: an absent parameter's load defaulting to 0 instead of 1"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dmodulation_mean_over_tokens": (
        "adaptive_layer_norm", "backward",
        "dscale and dshift averaged over the tokens (divided by T) instead of summed",
        "cf. " + GH + "kvfrans/notes/issues/5 (a bias gradient taken as the mean over the batch instead of the sum)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_powers_of_normalized_x": (
        "poly_norm", "semantics",
        "the powers taken of x normalized by its own rms: h_p = x_hat^p (x_hat = x / rms(x)) instead of each "
        "power x^p divided by its own rms, forward and backward",
        "pattern: norm(x)^p read for norm(x^p)"),
    # ------------------------------------------------------------------ z_score
    "zs_std_output_biased": (
        "z_score", "bessel",
        "ddof > 0: the returned std computed with the divisor n (the biased variance) while y and the gradients "
        "use n - ddof",
        "cf. " + GH + "El3ssar/ResDAG/issues/247 (a standardization's std computed with another ddof than the "
        "convention expected)"),
    "zs_bwd_mean_term_over_n_minus_ddof": (
        "z_score", "bessel",
        "ddof > 0: dx's -mean(g) term divides sum(g) by n - ddof instead of n",
        "pattern: one divisor n - ddof used for every mean of the backward"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_ignores_eps_clamp": (
        "lp_normalize", "eps",
        "torch rule: the backward differentiates x / ||x|| for every slice, ignoring the clamp max(||x||, eps) "
        "(where ||x|| < eps dx should be dy / eps)",
        "cf. " + GH + "chainer/chainer/pull/4190 (NormalizeL2's backward wrong for a non-negligible eps)"),
    "lp_root_as_sqrt": (
        "lp_normalize", "semantics",
        "p other than 1 and 2: the norm's root taken as the square root (the p = 2 path's) of sum |x|^p, "
        "forward and backward",
        "cf. " + GH + "mikera/core.matrix/pull/292 (a norm's default implementation taking the wrong root, the "
        "general p-norm forgotten)"),
    "lp_norm_output_clamped": (
        "lp_normalize", "eps",
        "torch rule: the returned norm is max(||x||, eps) (the clamped denominator) instead of ||x||; y right",
        "pattern: the denominator returned as the norm"),
}


def _with(call, config=None, inputs=None, cotangents=None):
    """``call`` with some config entries, inputs or cotangents replaced."""
    return dataclasses.replace(call, config={**call.config, **(config or {})},
                               inputs={**call.inputs, **(inputs or {})},
                               cotangents={**call.cotangents, **(cotangents or {})})


def _silu_grad(p):
    """silu'(p) = s (1 + p (1 - s))."""
    s, rest = _sigmoids(p)
    return s * (1 + p * rest)


def _half_row_sums(a, d):
    """Row sums (rows, 1) of ``a`` accumulated left to right in the 16-bit ``d`` (ln_bwd_row_sums_in_half)."""
    t = np.zeros((a.shape[0], 1), a.dtype)
    for j in range(a.shape[1]):
        t = _half(t + a[:, j:j + 1], d)
    return t


GRID_Y = 65535                                   # CUDA's gridDim.y limit (ln_rows_past_grid_limit)
AMAX_BLOCK = 128                                 # nq_amax_loop_skips_last_block's column block


class Blind8Kernel(Blind7Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind8"

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b = self.bug
        if b in ("ln_var_about_first_value", "ln_eps_added_twice", "ln_bwd_rstd_of_next_row",
                 "ln_bwd_row_sums_in_half", "ln_rows_past_grid_limit"):
            return self._ln8(call, acc)
        return super()._layer_norm(call, acc)

    def _ln8(self, call, acc):
        """layer_norm with one of this set's layer_norm bugs planted (the correct arithmetic otherwise)."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        R = x.shape[0]
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        eps = _eps(call.config["eps"], acc)
        mean = _rsum(x) / N
        xc = x - mean
        if b == "ln_var_about_first_value" and N:
            var = _rsum((x - x[:, :1]) ** 2) / N         # the shift's (mean - x0)^2 never subtracted
        else:
            var = _rsum(xc * xc) / N
        if b == "ln_eps_added_twice":
            var = var + eps                              # the finalization's eps, then the rsqrt's
        rstd = 1 / np.sqrt(var + eps)
        xhat = xc * rstd
        y = affine(xhat, w, bias)
        done = min(R, GRID_Y) if b == "ln_rows_past_grid_limit" else R
        y[done:] = 0
        ms, rs = mean.copy(), rstd.copy()
        ms[done:], rs[done:] = 0, 0
        out = norm_outputs(y, ms, rs, x0, stat_shape(x0, ns), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            if b == "ln_bwd_rstd_of_next_row" and R > 1:
                rb = np.concatenate([rstd[1:], rstd[-1:]])
                xb = xc * rb
                dx = _centred_dx(g, xb, rb)
            elif b == "ln_bwd_row_sums_in_half" and d in ("float16", "bfloat16"):
                dx = rstd * (g - _half_row_sums(g, d) / N - xhat * (_half_row_sums(g * xhat, d) / N))
            else:
                dx = _centred_dx(g, xhat, rstd)
            dx[done:] = 0
            grads["x"] = _store(dx.reshape(x0.shape), d)
            grads.update(row_param_grads(dy[:done], xhat[:done], w, bias, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        placement = call.config.get("eps_placement", "inside")
        ns, N, x = normalized_rows(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        w0 = call.inputs.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + weight_offset(call, acc)
        if b == "rms_norm_centred" and placement != "outside" and N:
            mean, rstd, xhat = ln_rows(x, eps)
            out = {"y": _store(affine(xhat, w, None).reshape(x0.shape), d),
                   "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
            grads = {}
            if "y" in call.cotangents:
                dy, g = dy_and_g(call, acc, (-1, N), w)
                grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)
                grads.update(row_param_grads(dy, xhat, w, None, ns, d))
            return Returned(out, grads)
        r = super()._rms_norm(call, acc)
        if b == "rms_outside_rstd_saved_inside" and placement == "outside" and N:
            _, rin = rms_stats(x, eps, "inside")
            return Returned({**r.outputs, "rstd": rin.reshape(r.outputs["rstd"].shape).astype(acc)}, r.grads)
        if b == "rms_bwd_rstd_hoisted_per_block" and "y" in call.cotangents and R > 1 and placement != "outside":
            _, rstd = rms_stats(x, eps, placement)
            rb = rstd[np.arange(R) - np.arange(R) % 4]
            xb = x * rb
            dy, g = dy_and_g(call, acc, (-1, N), w)
            grads = {**r.grads, "x": _store(rms_dx(g, xb, rb).reshape(x0.shape), d)}
            if w is not None:
                grads["weight"] = _store((dy * xb).sum(axis=0).reshape(ns), d)
            return Returned(r.outputs, grads)
        if (b == "rms_dweight_from_saved_half_xhat" and w is not None and "y" in call.cotangents
                and d in ("float16", "bfloat16") and placement != "outside"):
            _, rstd = rms_stats(x, eps, placement)
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            dw = (dy * _half(x * rstd, d)).sum(axis=0)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(ns), d)})
        return r

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self.bug in ("an_dx_without_rowscale", "an_prenorm_dres_after_dx", "an_rowscale_indexed_by_column",
                        "an_drowscale_from_dy", "an_keep_scale_in_input_dtype"):
            return self._an8(call, acc)
        return super()._add_norm(call, acc)

    def _an8(self, call, acc):
        """add_norm with one of this set's add_norm bugs planted (the correct arithmetic otherwise)."""
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if b == "an_keep_scale_in_input_dtype" and p:
            keep = _half(keep, d)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        rs_x = rs
        if b == "an_rowscale_indexed_by_column" and rs is not None and R:
            rs_x = rs.reshape(-1)[np.arange(N) % R].reshape(1, N)
        c = kept(mask, rs_x, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        _, rstd, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(s, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        grads = {}
        if "y" in call.cotangents:
            centred = cfg["norm"] == "layer_norm"
            late = b == "an_prenorm_dres_after_dx" and cfg["prenorm"] and "residual_out" in call.cotangents
            ds, dy, dy1 = add_norm_ds(call, xhat, rstd, centred, we, we1, cfg["prenorm"] and not late, acc)
            dres = None if res is None else ds
            if late and res is not None:
                dres = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
            cx = c
            if b == "an_dx_without_rowscale" and rs is not None:
                cx = kept(mask, None, keep, p, (R, N), acc)
            grads = add_norm_grads(inp, ds, dres, cx, c1, dy, dy1, xhat, (w, bias, w1, b1), x, mask, keep, p, ns, d)
            if rs is not None and b == "an_rowscale_indexed_by_column":
                t = ds * x if mask is None else ds * x * mask
                t = t * keep if p else t
                drs = np.zeros(R, acc)
                np.add.at(drs, np.arange(N) % R, t.sum(axis=0))
                grads["rowscale"] = _store(drs.reshape(inp["rowscale"].shape), d)
            elif rs is not None and b == "an_drowscale_from_dy":
                grads["rowscale"] = rowscale_grad(dy, x, mask, keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self.bug in ("nq_int8_symmetric_clip", "nq_fp8_clamp_upper_only", "nq_amax_loop_skips_last_block",
                        "nq_scale_output_unclamped"):
            return self._nq8(call, acc)
        return super()._norm_quant(call, acc)

    def _nq8(self, call, acc):
        """norm_quant with one of this set's norm_quant bugs planted (the correct arithmetic otherwise)."""
        b = self.bug
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, eps)
        y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        cols = N
        if b == "nq_amax_loop_skips_last_block" and N > AMAX_BLOCK:
            cols = (N - 1) // AMAX_BLOCK * AMAX_BLOCK        # range(0, N - BLOCK, BLOCK): the last block left out
        amax_k = np.max(np.abs(y[:, :cols]), axis=1, keepdims=True, initial=0.0)
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0) if cols == N else amax_k
        static = inp.get("static_scale")
        scale = dynamic_scale(amax, hi, cfg, acc) if static is None else static_scale(static, amax.shape, acc)
        if b == "nq_int8_symmetric_clip" and qdt.kind == "i":
            lo = -hi
        if b == "nq_fp8_clamp_upper_only" and qdt.kind != "i":
            v = np.minimum(quant_quotients(y, scale, -np.inf, np.inf, acc), hi)
        else:
            v = quant_quotients(y, scale, lo, hi, acc)
        scale_out = amax / acc(hi) if b == "nq_scale_output_unclamped" and static is None else scale
        return norm_quant_returned(quantize(v, qdt), scale_out, amax, x0, ns, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b = self.bug
        res = call.inputs.get("residual")
        if b in ("nqb_residual_added_after_norm", "nqb_residual_out_is_normalized") and res is not None:
            return self._nqb8(call, acc)
        r = super()._norm_quant_block(call, acc)
        if b == "nqb_zero_block_divides_by_zero" and (call.config["format"] or "fp8_group") == "fp8_group":
            q0, sc = r.outputs["q"], r.outputs["scale"].astype(np.float32)
            H = q0.shape[-1]
            B = nqb_format(call.config)[1]
            zero = np.repeat(sc.reshape(-1, sc.shape[-1]) == 0, B, axis=1)[:, :H]
            q = q0.astype(np.float32).reshape(-1, H)
            q[zero] = np.nan                                 # 0 / 0
            return Returned({**r.outputs, "q": q.astype(q0.dtype).reshape(q0.shape)})
        return r

    def _nqb8(self, call, acc):
        """norm_quant_block with a residual, one of this set's residual bugs planted."""
        b = self.bug
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        s_out = s
        if b == "nqb_residual_added_after_norm":
            _, y = nqb_normalized({**inp, "residual": None}, cfg, acc, self._ln_stats)
            y = y + inp["residual"].astype(acc).reshape(y.shape)
        else:
            s_out = y
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            ts, S, scale_out = nvfp4_scales(amax, nvfp4_encode(inp.get("global_scale"), amax, acc), acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s_out, acc)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _group_norm(self, call, acc):
        b = self.bug
        if b in ("gn_stats_pooled_over_batch", "gn_bwd_reads_rstd_as_var"):
            return self._gn8(call, acc)
        r = super()._group_norm(call, acc)
        if b == "gn_saved_mean_of_shifted_data":
            Nb, C, G, S, cg, x, xv = group_rows(call.inputs["x"], call.config, acc)
            mean = _rsum(xv) / xv.shape[1] - xv[:, :1]
            return Returned({**r.outputs, "mean": mean.reshape(Nb, G).astype(acc)}, r.grads)
        return r

    def _gn8(self, call, acc):
        """group_norm with one of this set's group_norm bugs planted (the correct arithmetic otherwise)."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        pooled = b == "gn_stats_pooled_over_batch"
        rows = np.ascontiguousarray(xv.reshape(Nb, G, -1).transpose(1, 0, 2)).reshape(G, -1) if pooled else xv
        mean, rstd = self._ln_stats(rows, eps)
        xh_rows = (rows - mean) * rstd

        def to_nc(a):                                     # rows back to (N, C, S)
            return (np.ascontiguousarray(a.reshape(G, Nb, -1).transpose(1, 0, 2)) if pooled else a).reshape(Nb, C, S)
        xhat = to_nc(xh_rows)
        w, bias = group_params(call.inputs, acc, C)
        ms = np.tile(mean.reshape(1, G), (Nb, 1)) if pooled else mean.reshape(Nb, G)
        rs = np.tile(rstd.reshape(1, G), (Nb, 1)) if pooled else rstd.reshape(Nb, G)
        out = group_outputs(affine(xhat, w, bias), ms, rs, x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            g = dy if w is None else dy * w
            if pooled:
                gr = np.ascontiguousarray(g.reshape(Nb, G, -1).transpose(1, 0, 2)).reshape(G, -1)
                dx = to_nc(_centred_dx(gr, xh_rows, rstd))
                xw = xhat
            else:
                rb = 1 / np.sqrt(rstd + eps)                 # the saved rstd read as the variance
                xb = (rows - mean) * rb
                dx = _centred_dx(g.reshape(rows.shape), xb, rb)
                xw = xb.reshape(Nb, C, S)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            grads.update(group_param_grads(dy * xw, dy, w, bias, C, d))
        return Returned(out, grads)

    def _group_norm_silu(self, call, acc):
        b, d = self.bug, call.dtype
        if b == "gns_g1_fast_path_without_silu" and call.config["num_groups"] == 1:
            return self._group_norm(call, acc)
        r = super()._group_norm_silu(call, acc)
        if b == "gns_dweight_from_p" and "weight" in r.grads:
            x0 = call.inputs["x"]
            Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
            mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
            xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
            w, bias = group_params(call.inputs, acc, C)
            p = affine(xhat, w, bias)
            dp = call.cotangents["y"].astype(acc).reshape(Nb, C, S) * _silu_grad(p)
            return Returned(r.outputs, {**r.grads, "weight": _store(channel_sums(dp * p, C), d)})
        return r

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        nbg = bool(cfg["norm_before_gate"])
        if b == "gated_unfused_gate_rounded" and not nbg and d in ("float16", "bfloat16"):
            return self._gated_rounded_gate(call, acc)
        r = super()._gated_norm(call, acc)
        if b == "gated_dz_from_xhat_without_affine" and nbg and "y" in call.cotangents:
            R, H, x, z, w, bias = gated_inputs(inp, acc)
            K = gate_group_size(cfg, H)
            _, vhat, _ = gated_normalize(x, w, bias, _eps(cfg["eps"], acc), K, cfg["norm"], self._ln_stats)
            _, ds = silu_gate(z)
            dy = call.cotangents["y"].astype(acc).reshape(R, H)
            return Returned(r.outputs, {**r.grads, "z": _store((dy * vhat * ds).reshape(inp["z"].shape), d)})
        return r

    def _gated_rounded_gate(self, call, acc):
        """gated_unfused_gate_rounded: v = x * silu(z) rounded to the 16-bit input dtype, then normalized."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        v = _half(x * s, d)
        rstd, vhat, nrm = gated_normalize(v, w, bias, _eps(cfg["eps"], acc), K, cfg["norm"], self._ln_stats)
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, False, K)
            dv = gated_dx(cfg["norm"], g, vhat.reshape(-1, K), rstd).reshape(R, H)
            dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, False)
            grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned({"y": _store(nrm.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)
        C, n = x.shape
        eps = _eps(cfg["eps"], acc)
        r = super()._batch_norm(call, acc)
        if has_run and not call.training:
            rm = st["running_mean"].astype(acc).reshape(C, 1)
            rstd = 1 / np.sqrt(st["running_var"].astype(acc).reshape(C, 1) + eps)
            w, bias = channel_params(call.inputs, acc, C)
            if b == "bn_eval_dx_without_rstd" and "y" in call.cotangents:
                dy, g = channel_dy_and_g(call, acc, w)
                return Returned(r.outputs, {**r.grads, "x": _store(from_channel_rows(g, x0.shape), d)}, r.state)
            if b == "bn_eval_fold_shift_unscaled" and w is not None and bias is not None:
                y = x * (w * rstd) + (bias - rm)
                return Returned({**r.outputs, "y": _store(from_channel_rows(y, x0.shape), d)}, r.grads, r.state)
            return r
        if not (has_run and call.training and n) or cfg["convention"] != "torch":
            return r
        rm, rv, nbt = running_in(st, acc)
        mean = _rsum(x) / n
        if b == "bn_running_var_includes_eps":
            m = bn_momentum(cfg["momentum"], nbt + 1, acc)
            bv = (_rsum((x - mean) ** 2) / n).reshape(C) + eps       # var recovered as 1 / rstd^2
            ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
            return Returned(r.outputs, r.grads, {**r.state, "running_var": _store((1 - m) * rv + m * ub, d)})
        if b == "bn_nbt_reset_to_one":
            m = bn_momentum(cfg["momentum"], 1, acc)
            rm, rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc)
            return Returned(r.outputs, r.grads, running_state(rm, rv, 1, d))
        return r

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        r = super()._instance_norm(call, acc)
        if b == "in_eval_running_var_read_as_std" and st.get("running_var") is not None and not call.training:
            rv = st["running_var"].astype(np.float64)
            read = {**st, "running_var": (rv * rv).astype(st["running_var"].dtype)}
            rb = super()._instance_norm(dataclasses.replace(call, state=read), acc)
            return Returned(rb.outputs, rb.grads, r.state)
        if b == "in_dweight_from_dy" and "weight" in r.grads:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            dw = _rsum(dy).reshape(Nb, C).sum(axis=0)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw, d)}, r.state)
        if (b == "in_running_var_from_mean_std" and st.get("running_mean") is not None and call.training
                and Nb and S > 1):
            m = instance_momentum_value(cfg, acc)
            rv = running_in(st, acc)[1]
            ub = instance_unbiased_var(x, _rsum(x) / S, acc).reshape(Nb, C)
            rv = (1 - m) * rv + m * np.sqrt(ub).mean(axis=0) ** 2
            return Returned(r.outputs, r.grads, {**r.state, "running_var": _store(rv, d)})
        return r

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x, a, w, bias, t = dyt_inputs(inp, acc)
        x0 = inp["x"]
        if b == "dyt_bias_inside_weight" and w is not None and bias is not None:
            y = w * (t + bias)
            grads = {}
            if "y" in call.cotangents:
                dy, g = dy_and_g(call, acc, x.shape, w)
                gd = g * (1 - t * t)
                grads = dyt_grads(gd * a, _rsum(gd * x).sum(), dy, t + bias, w, None, inp, x0.shape, d)
                grads["bias"] = _store(g.sum(axis=0), d)
            return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)
        if b == "dyt_missing_weight_as_zero" and w is None:
            y = affine(t * 0, None, bias)
            grads = {}
            if "y" in call.cotangents:
                dy = call.cotangents["y"].astype(acc).reshape(x.shape)
                grads = dyt_grads(dy * 0, acc(0), dy, t, None, bias, inp, x0.shape, d)
            return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)
        return super()._dyt(call, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        r = super()._adaptive_layer_norm(call, acc)
        if self.bug == "aln_dmodulation_mean_over_tokens" and r.grads:
            B, H, T, *_ = aln_inputs(call.inputs, acc)
            grads = dict(r.grads)
            for k in ("scale", "shift"):
                if k in grads:
                    grads[k] = _store(grads[k].astype(acc) / acc(T), call.dtype)
            return Returned(r.outputs, grads)
        return r

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self.bug != "poly_powers_of_normalized_x":
            return super()._poly_norm(call, acc)
        d, x0 = call.dtype, call.inputs["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        rstd = poly_rstd(x, eps, acc)
        xh = x * rstd
        hs = [xh ** 3, xh ** 2, xh]
        y = poly_combine(wt, hs, bias, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            dh = dy * (wt[0] * 3 * xh * xh + wt[1] * 2 * xh + wt[2])
            grads = poly_grads(dy, x, wt, hs, [rstd] * 3, bias, x0.shape, d, acc)
            grads["x"] = _store(rms_dx(dh, xh, rstd).reshape(x0.shape), d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._z_score(call, acc)
        cfg, inp = call.config, call.inputs
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        m = n - int(cfg["ddof"])
        if n == 0 or m <= 0 or b not in ("zs_std_output_biased", "zs_bwd_mean_term_over_n_minus_ddof"):
            return r
        mean = _axes_rows(r.outputs["mean"].astype(acc), cfg["dim"])[0]
        std = _axes_rows(r.outputs["std"].astype(acc), cfg["dim"])[0]
        if b == "zs_std_output_biased":
            if m == n:
                return r
            std_n = np.sqrt(_rsum((x - mean) ** 2) / acc(n) + acc(cfg["eps"]))
            return Returned({**r.outputs, "std": back(std_n, True).astype(acc)}, r.grads)
        if "y" not in call.cotangents or m == n:
            return r
        w = None if inp.get("weight") is None else inp["weight"].astype(acc).reshape(1, n)
        xhat = np.where(std == 0, acc(0), (x - mean) / np.where(std == 0, acc(1), std))
        dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
        g = dy if w is None else dy * w
        inner = g - _rsum(g) / acc(m) - xhat * (_rsum(g * xhat) / acc(m))
        dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
        return Returned(r.outputs, {**r.grads, "x": _store(back(dx), d)})

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        if b == "lp_root_as_sqrt" and float(cfg["p"]) not in (1.0, 2.0):
            return self._lp_sqrt_root(call, acc)
        r = super()._lp_normalize(call, acc)
        if cfg["zero_rule"] != "torch" or b not in ("lp_bwd_ignores_eps_clamp", "lp_norm_output_clamped"):
            return r
        eps = acc(cfg["eps"])
        if b == "lp_norm_output_clamped":
            return Returned({**r.outputs, "norm": np.maximum(r.outputs["norm"].astype(acc), eps).astype(acc)},
                            r.grads)
        if "y" not in call.cotangents:
            return r
        p = float(cfg["p"])
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
        dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
        used = norm != 0
        safe = np.where(used, norm, acc(1))
        u = x / safe
        wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
        proj = (dy - wv * _rsum(dy * u)) / safe
        small = dy / eps if eps > 0 else np.zeros_like(dy)
        return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(used, proj, small)), d)})

    def _lp_sqrt_root(self, call, acc):
        """lp_root_as_sqrt: the norm sqrt(sum |x|^p) for any p, and its backward (the planted bug)."""
        d, cfg = call.dtype, call.config
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        p, eps, torch_rule = acc(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        norm = np.sqrt(_rsum(np.abs(x) ** p))
        used = (norm >= eps) if torch_rule else (norm != 0)
        safe = np.where(used, norm, acc(1))
        y = np.where(used, x / safe, x / eps if torch_rule else acc(0) * x)
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            wv = np.where(x == 0, acc(0), np.sign(x) * np.abs(x) ** (p - 1)) / safe
            proj = (dy - p / 2 * wv * _rsum(dy * (x / safe))) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            grads["x"] = _store(back(np.where(used, proj, small)), d)
        return Returned(out, grads)
