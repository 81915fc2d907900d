"""A seventh held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind7Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind6.py's and blind5.py's (the class derives from ``Blind6Kernel``,
whose own planted branches are keyed on the earlier sets' names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it.

``Blind7Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy,
the same tuple as blind3's), or None where none fits. ``source`` is a public bug report or fix where the
mistake really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same
mistake in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic and public bug reports only, by an author who did not
read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran the diagnosis on these bugs.
None of its bugs repeats one of tests/planted/blind.py, blind2.py, blind3.py, blind4.py, blind5.py or
blind6.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          aln_inputs, bn_momentum, bn_running_update, centred_dx as _centred_dx, channel_grads,
                          channel_outputs, channel_params, channel_rows, channel_sums, dy_and_g, dyt_grads,
                          dyt_inputs, eps_value as _eps, gate_group_size, gated_dx,
                          gated_inputs, gated_stats, group_outputs, group_param_grads, group_params, group_rows,
                          group_scales, half as _half, instance_grads, instance_momentum_value, instance_outputs,
                          instance_params, instance_rows, instance_running_update, kept, ln_rows, ln_stats,
                          mx_scales, norm_outputs, norm_quant_returned, normalized_rows, nqb_format, nqb_quantized,
                          nvfp4_encode, nvfp4_scales, padded_blocks, per_sample, QUANT as _QUANT, quant_quotients,
                          quantize, rms_rows, rms_stats, row_affine, row_param_grads, row_weight_bias,
                          rowscale_grad, rsum as _rsum, running_in, running_state, scale_floor, sigmoids as _sigmoids,
                          stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind6 import Blind6Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind7Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bias_needs_weight": (
        "layer_norm", "affine",
        "the affine step guarded by 'weight is not None': with a bias but no weight the bias is never added "
        "(dbias right)",
        GH + "pytorch/pytorch/issues/69208 (layer_norm cuda kernel assumes gamma and beta come in pairs: wrong "
        "results when either is missing)"),
    "ln_rstd_saved_without_eps": (
        "layer_norm", "eps",
        "the saved rstd recomputed at the store as 1 / sqrt(var) without eps; y and the gradients use the "
        "right rstd",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a LayerNormalization whose eps never reached the kernel: "
        "1 / sqrt(var) without eps)"),
    "ln_affine_rounded_between_ops": (
        "layer_norm", "precision",
        "16-bit inputs: x_hat * weight rounded to the input dtype before the bias is added (the affine done as "
        "two rounded ops, mul then add)",
        "pattern: y = (x_hat * w).to(dtype) + b, the scale and shift split across two kernels"),
    "ln_welford_count_from_one": (
        "layer_norm", "reduction",
        "the Welford state initialised with count = 1 (one phantom zero sample): mean = sum / (N + 1) and the "
        "variance over N + 1 values including a 0, forward (the backward's formula on those statistics)",
        "pattern: Welford accumulator initialised as (mean=0, m2=0, count=1) instead of count=0"),
    # ------------------------------------------------------------------ rms_norm
    "rms_rows_flattened_from_first_dim": (
        "rms_norm", "layout",
        "x viewed as (x.shape[0], -1): the mean square taken over every trailing axis of a sample (all its "
        "rows) instead of over normalized_shape, forward and backward",
        "cf. " + GH + "bkitano/llama-from-scratch/issues/4 (an RMSNorm computing the RMS over (T, D) instead of "
        "D: normalization per sequence instead of per token)"),
    "rms_dweight_block_boundary_row_twice": (
        "rms_norm", "block",
        "the dweight partials loop over the rows of a 4-row block with an inclusive end (range(start, start + "
        "5)): the first row of every following block is added twice",
        "cf. " + GH + "BobMcDear/attorch/issues/18 (LayerNorm and RMSNorm per-program weight-gradient partials "
        "whose row blocks and buffer disagree: a block of rows wrongly reduced)"),
    "rms_rstd_stored_at_row_stride": (
        "rms_norm", "layout",
        "the per-row rstd stored at Rstd + row * stride_x_row (the input pointer's offset copied): only the "
        "rows whose offset falls inside the buffer write, at the wrong index; y and dx right",
        "cf. " + GH + "ModelTC/LightLLM/issues/1467 (an rmsnorm kernel indexing one of its passes with the wrong "
        "stride)"),
    "rms_outside_bwd_rstd_without_eps": (
        "rms_norm", "eps",
        "eps_placement='outside': the backward recomputes the scale as 1 / rms (without eps) for dx; the "
        "forward and dweight are right",
        "pattern: the backward recomputing rstd = 1 / sqrt(mean(x^2)) and dropping the eps the forward added"),
    # ------------------------------------------------------------------ add_norm
    "an_dx1_uses_x_mask": (
        "add_norm", "dropout",
        "with the parallel input x1: dx1 = ds * mask (x's dropout factor) instead of ds * mask1; the forward "
        "and dx are right",
        "pattern: the dx1 store reusing the keep factor loaded for dx"),
    "an_drowscale_without_keep": (
        "add_norm", "dropout",
        "drowscale = sum(ds * x * mask) without the dropout's 1 / (1 - p) (dx and the forward are right)",
        "pattern: the rowscale gradient reduced from the mask instead of the saved dropout factor"),
    "an_dresidual_only_with_prenorm": (
        "add_norm", "backward",
        "prenorm=False with a residual: no gradient is written for the residual (zeros); the backward "
        "computes dresidual only when residual_out is an output",
        GH + "Dao-AILab/quack/pull/52 ('if prenorm were False and a residual were passed in, no gradient would "
        "be returned for it')"),
    "an_weight_offset_on_bias": (
        "add_norm", "affine",
        "weight_offset (zero-centred gamma) added to the bias too: y = x_hat * (weight + offset) + bias + "
        "offset (the gradients right)",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/67 (zero-centred gamma: review of which kernels and parameters "
        "the + 1 must reach)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_scale_stored_in_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: the returned per-row scale rounded to the input dtype (its buffer allocated like x); "
        "q is quantized with the unrounded float32 scale",
        "cf. " + GH + "pytorch/ao/issues/3819 (the int8 scale kept in the high-precision tensor's bfloat16 "
        "dtype: too few bits)"),
    "nq_ln_bias_dropped": (
        "norm_quant", "affine",
        "norm='layer_norm' with a bias: y = x_hat * weight without the bias before the quantization (the "
        "fused quant kernel's bias pointer never read)",
        "pattern: the rms_norm + quant kernel (no bias) reused for layer_norm + quant"),
    "nq_amax_output_from_scale": (
        "norm_quant", "quant_scale",
        "the returned amax recomputed as scale * qmax (after the scale's clamps) instead of the row's max |y|",
        "pattern: amax reconstructed from the stored scale for the output"),
    "nq_min_scale_on_amax": (
        "norm_quant", "quant_scale",
        "the dynamic scale's floor applied to amax before the division: scale = max(amax, floor) / qmax "
        "instead of max(amax / qmax, floor)",
        "cf. " + GH + "deepseek-ai/DeepGEMM/issues/109 (per_token_cast_to_fp8 clamping amax to 1e-4 before the "
        "division by 448: a floor in amax units)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_residual_out_is_x": (
        "norm_quant_block", None,
        "with a residual: residual_out stores x (the loaded input) instead of the sum x + residual; the "
        "quantization uses the sum",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (AddBiasResidualLayerNorm kernel adding input[index] "
        "where the loaded sum in_val was meant)"),
    "nqb_stats_without_residual": (
        "norm_quant_block", None,
        "with a residual: the normalization's statistics taken of x alone, then the sum x + residual "
        "normalized with them",
        "pattern: the statistics pass reading the input pointer, the normalize pass the residual-added sum"),
    "nqb_nvfp4_global_scale_as_decode": (
        "norm_quant_block", "quant_scale",
        "nvfp4 with a given global_scale: the value taken as the decode scale (the encode factor 1 / "
        "global_scale) instead of the encode factor itself",
        "cf. " + GH + "modular/modular/issues/6600 (NVFP4 per-tensor global scale stored as a divisor and "
        "consumed as a multiplier without re-inverting)"),
    # ------------------------------------------------------------------ group_norm
    "gn_var_clamped_to_eps": (
        "group_norm", "eps",
        "rstd = 1 / sqrt(max(var, eps)) instead of 1 / sqrt(var + eps), forward (the backward's formula on "
        "that rstd)",
        "cf. " + GH + "vacancy/Synchronized-BatchNorm-PyTorch/issues/38 (invstd computed as sqrt(max(var, eps)) "
        "instead of sqrt(var + eps))"),
    "gn_mean_rstd_outputs_swapped": (
        "group_norm", None,
        "the saved mean and rstd handed out in each other's place (the kernel's return tuple unpacked in the "
        "wrong order); y and the gradients right",
        "pattern: mean, rstd = kernel(...) where the kernel returns (rstd, mean)"),
    "gn_affine_only_with_bias": (
        "group_norm", "affine",
        "the per-channel affine applied only when both weight and bias are given: with no bias the weight is "
        "ignored, forward and dx (dweight still reduced)",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (group_norm and layer_norm kernels that do not support a "
        "weight or a bias given alone)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_applied_twice": (
        "group_norm_silu", "semantics",
        "the activation applied twice: y = silu(silu(p)) (the fused kernel's SiLU and the caller's), forward "
        "and backward",
        "cf. " + GH + "tenstorrent/tt-metal/pull/39638 (SiLU applied twice in an MLP: a workaround activation and the "
        "fused one)"),
    "gns_bwd_silu_at_rounded_p": (
        "group_norm_silu", "precision",
        "16-bit inputs: the backward evaluates silu'(p) at the pre-activation p saved in the input dtype",
        "cf. " + GH + "sgl-project/sglang/pull/26473 (the activation's input cast to the 16-bit dtype before the "
        "float32 math)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_nbg_dx_ungated": (
        "gated_norm", "gate",
        "norm_before_gate=True: dx through the normalization from dy * weight, the gate silu(z) left out of "
        "dx only (dz, dweight and dbias right)",
        "pattern: the dx pass loading dy where the gated dy * silu(z) was meant"),
    "gated_weight_indexed_in_group": (
        "gated_norm", "layout",
        "with several groups per row, the weight read at the column's index within its group (j % group_size) "
        "instead of j, forward and backward (dweight accumulated at those indices)",
        "pattern: the weight pointer offset by the in-group column index"),
    # ------------------------------------------------------------------ batch_norm
    "bn_dweight_from_g": (
        "batch_norm", "backward",
        "dweight = sum(dy * weight * x_hat): the weighted g = dy * weight the dx pass uses fed to the weight's "
        "reduction too (dbias and dx right)",
        "pattern: one g = dy * w computed for the whole backward and reused for dweight"),
    "bn_onnx_running_var_unbiased": (
        "batch_norm", "bessel",
        "convention='onnx' (biased running variance): running_var updated with the unbiased batch variance "
        "(torch's n / (n - 1)) as well",
        "cf. " + GH + "tenstorrent/tt-metal/issues/55438 (running_var biased vs unbiased across frameworks' "
        "conventions)"),
    "bn_nbt_plus_batch_size": (
        "batch_norm", "running",
        "training: num_batches_tracked incremented by the batch size N instead of 1 (and momentum=None's "
        "cumulative factor taken from that count)",
        "pattern: the counter updated with x.shape[0]"),
    "bn_eval_eps_outside_sqrt": (
        "batch_norm", "eps",
        "eval with running statistics: rstd = 1 / (sqrt(running_var) + eps) instead of 1 / sqrt(running_var + "
        "eps), forward and backward",
        "pattern: the eval path's folded scale w / (sqrt(var) + eps)"),
    # ------------------------------------------------------------------ instance_norm
    "in_momentum_none_cumavg": (
        "instance_norm", "running",
        "momentum=None read as batch norm's cumulative average 1 / (num_batches_tracked + 1) instead of 0",
        "cf. " + GH + "pytorch/pytorch/issues/31498 (momentum=None's cumulative average handled on the Python "
        "side of one norm only)"),
    "in_count_last_spatial_axis": (
        "instance_norm", "reduction",
        "inputs with several spatial axes: the instance sums divided by the last spatial size W instead of "
        "the spatial size S (the kernel's count taken from x.shape[-1])",
        "pattern: HxW = x.shape[-1] for a kernel written for (N, C, L) inputs"),
    "in_bessel_count_pooled": (
        "instance_norm", "bessel",
        "the running_var update's unbiased factor uses the pooled count N * S (batch norm's) instead of S",
        "pattern: the running update copied from batch norm with its count"),
    # ------------------------------------------------------------------ dyt
    "dyt_dweight_tanh_without_alpha": (
        "dyt", "backward",
        "dweight = sum(dy * tanh(x)): alpha left out of the recomputed tanh in the weight's reduction",
        "pattern: the recompute in the weight-gradient kernel written as tanh(x)"),
    "dyt_dtanh_as_one_minus_t": (
        "dyt", "backward",
        "the derivative of tanh written as 1 - t instead of 1 - t^2 (dx and dalpha)",
        "cf. " + GH + "microsoft/knossos-ksc/pull/505 (wrong derivatives for tanh)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_modulation_needs_shift": (
        "adaptive_layer_norm", "affine",
        "the modulation applied only when shift is given: with a scale but no shift, y = x_hat (dscale still "
        "reduced)",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a fused norm assuming its two affine inputs come in pairs)"),
    "aln_scale_of_first_sample": (
        "adaptive_layer_norm", "layout",
        "the scale and shift read with a batch stride of 0: every sample modulated with sample 0's, forward "
        "and dx (dscale and dshift per sample right)",
        "pattern: the modulation's batch stride taken from a (1, H) view"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_reversed": (
        "poly_norm", "backward",
        "the weight's gradient handed out in reverse order (the x term's first); forward right",
        "cf. " + GH + "apache/mxnet/pull/5980 (input gradients handed out in a different order from the inputs)"),
    "poly_rms_over_tensor": (
        "poly_norm", "reduction",
        "each power's root mean square taken over the whole tensor instead of per row, forward and backward",
        "pattern: a .mean() without dim=-1"),
    # ------------------------------------------------------------------ z_score
    "zs_mean_divided_by_n_minus_ddof": (
        "z_score", "bessel",
        "the ddof correction applied to the mean too: mean = sum / (n - ddof), and the deviations taken "
        "about it, forward (the backward's formula on those statistics)",
        "pattern: one divisor n - ddof reused for both moments"),
    "zs_std_output_is_variance": (
        "z_score", None,
        "the returned std is the variance (the accumulator before its square root); y and the gradients right",
        "cf. " + GH + "131250208/TPlinker-joint-extraction/issues/37 (a layer norm's std computed as (variance + "
        "epsilon) ** 2 instead of ** 0.5)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_l1_without_abs": (
        "lp_normalize", "semantics",
        "p = 1: the norm summed as sum(x) without the absolute value, forward and backward",
        GH + "onnx/onnx/pull/8427 (LpNormalization's reference computing sum(x ** p): for p = 1 a signed sum "
        "rather than the L1 norm)"),
    "lp_bwd_power_p": (
        "lp_normalize", "backward",
        "the backward's derivative of the norm taken with |u|^p instead of |u|^(p - 1)",
        "pattern: the exponent p - 1 of d||x||_p / dx written as p"),
    "lp_norm_output_before_root": (
        "lp_normalize", None,
        "the returned norm is sum |x|^p (the value before the p-th root); y right",
        "cf. " + GH + "dganguli/robust-pca/issues/3 (norm_p returning the sum of powers without the 1/p root)"),
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


class Blind7Kernel(Blind6Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind7"

    def _ln_stats(self, x, eps, ddof=0):
        if self.bug == "gn_var_clamped_to_eps" and getattr(self, "_op", None) == "group_norm":
            n = x.shape[1]
            mean = _rsum(x) / n
            d = x - mean
            var = _rsum(d * d) / n
            return mean, 1 / np.sqrt(np.maximum(var, eps))
        return super()._ln_stats(x, eps, ddof)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "ln_bias_needs_weight" and inp.get("weight") is None and inp.get("bias") is not None:
            r = super()._layer_norm(_with(call, inputs={"bias": None}), acc)
            grads = dict(r.grads)
            if "y" in call.cotangents:
                ns, N, _ = normalized_rows(call, acc)
                dy = call.cotangents["y"].astype(acc).reshape(-1, N)
                grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
            return Returned(r.outputs, grads)
        if b == "ln_welford_count_from_one":
            return self._ln_phantom(call, acc)
        r = super()._layer_norm(call, acc)
        ns, N, x = normalized_rows(call, acc)
        if b == "ln_rstd_saved_without_eps" and N:
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            return Returned({**r.outputs, "rstd": (1 / np.sqrt(var)).reshape(r.outputs["rstd"].shape).astype(acc)},
                            r.grads)
        if (b == "ln_affine_rounded_between_ops" and d in ("float16", "bfloat16") and inp.get("weight") is not None
                and inp.get("bias") is not None and N):
            w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
            _, _, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            y = _half(xhat * w, d) + bias
            return Returned({**r.outputs, "y": _store(y.reshape(inp["x"].shape), d)}, r.grads)
        return r

    def _ln_phantom(self, call, acc):
        """ln_welford_count_from_one: the row's statistics with one phantom zero value (the planted bug)."""
        d, x0 = call.dtype, call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        eps = _eps(call.config["eps"], acc)
        mean = _rsum(x) / (N + 1)
        dev = x - mean
        var = (_rsum(dev * dev) + mean * mean) / (N + 1)
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = norm_outputs(affine(xhat, w, bias), mean, rstd, x0, stat_shape(x0, ns), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)
            grads.update(row_param_grads(dy, xhat, w, bias, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        placement = call.config.get("eps_placement", "inside")
        ns, N, x = normalized_rows(call, acc)
        if (b == "rms_rows_flattened_from_first_dim" and placement != "outside" and x0.ndim and x0.shape[0]
                and x0.size // x0.shape[0] > N):
            return self._rms_per_sample(call, acc)
        r = super()._rms_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        w0 = call.inputs.get("weight")
        if b == "rms_rstd_stored_at_row_stride" and R:
            rs = r.outputs["rstd"].reshape(-1)
            flat = np.zeros_like(rs)
            for row in range(R):
                if row * N < R:
                    flat[row * N] = rs[row]
            return Returned({**r.outputs, "rstd": flat.reshape(r.outputs["rstd"].shape)}, r.grads)
        if b == "rms_dweight_block_boundary_row_twice" and "weight" in r.grads and R > 4:
            _, rstd = rms_stats(x, eps, placement)
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            t = dy * (x * rstd)
            dw = t.sum(axis=0) + t[4::4].sum(axis=0)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(ns), d)})
        if b == "rms_outside_bwd_rstd_without_eps" and placement == "outside" and "y" in call.cotangents and N:
            rms, _ = rms_stats(x, eps, placement)
            r0 = 1 / rms
            w = None if w0 is None else w0.astype(acc).reshape(1, N) + weight_offset(call, acc)
            dy, g = dy_and_g(call, acc, (-1, N), w)
            u = np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
            dx = r0 * (g - u * (_rsum(g * (x * r0)) / N))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    def _rms_per_sample(self, call, acc):
        """rms_rows_flattened_from_first_dim: the mean square over every trailing axis of a sample."""
        d, x0 = call.dtype, call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        B = x0.shape[0]
        M = x0.size // B
        xs = x.reshape(B, M)
        eps = _eps(call.config["eps"], acc)
        rstd_b = 1 / np.sqrt(_rsum(xs * xs) / M + eps)                  # (B, 1)
        rstd = np.repeat(rstd_b, M // N, axis=0)                          # per normalized row
        xhat = x * rstd
        w0 = call.inputs.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + weight_offset(call, acc)
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            gb, xb = g.reshape(B, M), xhat.reshape(B, M)
            dx = rstd_b * (gb - xb * (_rsum(gb * xb) / M))
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if w is not None:
                grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        off = float(call.config.get("weight_offset", 0.0) or 0.0)
        if b == "an_weight_offset_on_bias" and off and inp.get("bias") is not None:
            shifted = (inp["bias"].astype(np.float64) + off).astype(inp["bias"].dtype)
            r = super()._add_norm(_with(call, inputs={"bias": shifted}), acc)
            return r
        r = super()._add_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        if b == "an_dresidual_only_with_prenorm" and not call.config["prenorm"] and inp.get("residual") is not None:
            return Returned(r.outputs, {**r.grads, "residual": np.zeros_like(r.grads["residual"])}, r.state)
        if b == "an_dx1_uses_x_mask" and inp.get("x1") is not None:
            ds, c, c1, x, mask, keep, p = self._an_ds(call, acc)
            return Returned(r.outputs, {**r.grads, "x1": _store((ds * c).reshape(inp["x1"].shape), d)}, r.state)
        if b == "an_drowscale_without_keep" and inp.get("rowscale") is not None and call.config["dropout_p"]:
            ds, c, c1, x, mask, keep, p = self._an_ds(call, acc)
            return Returned(r.outputs, {**r.grads, "rowscale": rowscale_grad(ds, x, mask, keep, 0.0,
                                                                            inp["rowscale"].shape, d)}, r.state)
        return r

    def _an_ds(self, call, acc):
        """add_norm's (ds, c, c1, x, mask, keep, p): the gradient of the normalized sum and the inputs'
        dropout factors, as the correct kernel computes them."""
        cfg, inp = call.config, call.inputs
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        _, rstd, xhat = (ln_rows if centred else rms_rows)(s, _eps(cfg["eps"], acc))
        ds, _, _ = add_norm_ds(call, xhat, rstd, centred, we, we1, cfg["prenorm"], acc)
        return ds, c, c1, x, mask, keep, p

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        if b not in ("nq_scale_stored_in_input_dtype", "nq_ln_bias_dropped", "nq_amax_output_from_scale",
                     "nq_min_scale_on_amax"):
            return super()._norm_quant(call, acc)
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        ln = cfg["norm"] == "layer_norm"
        _, _, xhat = (ln_rows if ln else rms_rows)(x, eps)
        bias = None if (b == "nq_ln_bias_dropped" and ln) else inp.get("bias")
        y = row_affine(xhat, inp.get("weight"), bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_min_scale_on_amax":
            floor = 1.0 / (hi * 512.0) if cfg["min_scale"] is None else float(cfg["min_scale"])
            scale = np.maximum(amax, acc(floor)) / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
        else:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        scale_out, amax_out = scale, amax
        if b == "nq_scale_stored_in_input_dtype":
            scale_out = _half(scale, d)
        if b == "nq_amax_output_from_scale" and static is None:
            amax_out = scale * acc(hi)
        return norm_quant_returned(q, scale_out, amax_out, x0, ns, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        res = inp.get("residual")
        if b == "nqb_residual_out_is_x" and res is not None:
            r = super()._norm_quant_block(call, acc)
            ro = r.outputs["residual_out"]
            return Returned({**r.outputs, "residual_out": inp["x"].astype(acc).astype(ro.dtype)}, r.grads)
        if b == "nqb_stats_without_residual" and res is not None:
            return self._nqb_custom(call, acc, stats_of_x=True)
        fmt = cfg["format"] or "fp8_group"
        if b == "nqb_nvfp4_global_scale_as_decode" and fmt == "nvfp4" and inp.get("global_scale") is not None:
            return self._nqb_custom(call, acc, decode_gs=True)
        return super()._norm_quant_block(call, acc)

    def _nqb_custom(self, call, acc, stats_of_x=False, decode_gs=False):
        """norm_quant_block with the statistics of x alone (``stats_of_x``) or the given global_scale read as
        the decode scale (``decode_gs``): the planted bugs; the rest as the correct kernel."""
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        src = x if stats_of_x else s
        eps = _eps(cfg["eps"], acc)
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(src, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(src * src) / H + eps))
        w, bias = inp.get("weight"), inp.get("bias")
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            gs = inp.get("global_scale")
            if decode_gs and gs is not None:
                enc = acc(1) / acc(np.asarray(gs).astype(acc).reshape(()))
            else:
                enc = nvfp4_encode(gs, amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if (b == "gn_affine_only_with_bias" and not silu and inp.get("weight") is not None
                and inp.get("bias") is None):
            out, grads = super()._gn_core(_with(call, inputs={"weight": None}), acc, silu)
            if "y" in call.cotangents:
                x0 = inp["x"]
                Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
                mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
                xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
                dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
                grads = {**grads, "weight": _store(channel_sums(dy * xhat, C), d)}
            return out, grads
        out, grads = super()._gn_core(call, acc, silu)
        if b == "gn_mean_rstd_outputs_swapped" and not silu:
            out = {**out, "mean": out["rstd"], "rstd": out["mean"]}
        return out, grads

    def _group_norm_silu(self, call, acc):
        b, d = self.bug, call.dtype
        if b == "gns_silu_applied_twice" or (b == "gns_bwd_silu_at_rounded_p" and d in ("float16", "bfloat16")):
            return self._gns_custom(call, acc)
        return super()._group_norm_silu(call, acc)

    def _gns_custom(self, call, acc):
        """group_norm_silu with the SiLU applied twice, or its derivative at the rounded p (the planted bugs)."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        s, _ = _sigmoids(p)
        a = p * s
        twice = b == "gns_silu_applied_twice"
        if twice:
            s2, _ = _sigmoids(a)
            y = a * s2
        else:
            y = a
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            dp = dy * _silu_grad(a) * _silu_grad(p) if twice else dy * _silu_grad(_half(p, d))
            g = dp if w is None else dp * w
            shape = xv.shape
            grads["x"] = _store(_centred_dx(g.reshape(shape), xhat.reshape(shape), rstd).reshape(x0.shape), d)
            grads.update(group_param_grads(dp * xhat, dp, w, bias, C, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        H = inp["x"].shape[-1]
        K = gate_group_size(cfg, H)
        ng = H // K if K else 0
        if b == "gated_weight_indexed_in_group" and ng > 1:
            idx = np.arange(H) % K
            w0 = inp["weight"]
            r = super()._gated_norm(_with(call, inputs={"weight": w0[..., idx]}), acc)
            grads = dict(r.grads)
            if "weight" in grads:
                dw = np.zeros(H, acc)
                np.add.at(dw, idx, grads["weight"].astype(acc).reshape(-1))
                grads["weight"] = _store(dw.reshape(w0.shape), d)
            return Returned(r.outputs, grads)
        r = super()._gated_norm(call, acc)
        if b == "gated_nbg_dx_ungated" and cfg["norm_before_gate"] and "y" in call.cotangents and K:
            R, H, x, z, w, bias = gated_inputs(inp, acc)
            vg = x.reshape(-1, K)
            mean, rstd = gated_stats(vg, _eps(cfg["eps"], acc), cfg["norm"], self._ln_stats)
            vhat = (vg - mean) * rstd
            dy = call.cotangents["y"].astype(acc).reshape(R, H)
            dv = gated_dx(cfg["norm"], (dy * w).reshape(-1, K), vhat, rstd).reshape(R, H)
            return Returned(r.outputs, {**r.grads, "x": _store(dv.reshape(inp["x"].shape), d)})
        return r

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)
        C, n = x.shape
        eps = _eps(cfg["eps"], acc)
        if b == "bn_eval_eps_outside_sqrt" and has_run and not call.training:
            mean = st["running_mean"].astype(acc).reshape(C, 1)
            rstd = 1 / (np.sqrt(st["running_var"].astype(acc).reshape(C, 1)) + eps)
            xhat = (x - mean) * rstd
            w, bias = channel_params(call.inputs, acc, C)
            out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
            grads = {}
            if "y" in call.cotangents:
                dy = channel_rows(call.cotangents["y"], acc)
                g = dy if w is None else dy * w
                grads = channel_grads(g * rstd, dy, xhat, w, bias, x0.shape, d)
            r = super()._batch_norm(call, acc)
            return Returned(out, grads, r.state)
        r = super()._batch_norm(call, acc)
        if b == "bn_dweight_from_g" and "weight" in r.grads and n:
            batch = call.training or not has_run
            mean, rstd = self._ln_stats(x, eps) if batch else (
                st["running_mean"].astype(acc).reshape(C, 1),
                1 / np.sqrt(st["running_var"].astype(acc).reshape(C, 1) + eps))
            dy = channel_rows(call.cotangents["y"], acc)
            w = call.inputs["weight"].astype(acc).reshape(C, 1)
            dw = _rsum(dy * w * ((x - mean) * rstd)).reshape(C)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw, d)}, r.state)
        if has_run and call.training and n and b in ("bn_onnx_running_var_unbiased", "bn_nbt_plus_batch_size"):
            rm, rv, nbt = running_in(st, acc)
            mean = _rsum(x) / n
            if b == "bn_onnx_running_var_unbiased" and cfg["convention"] != "torch":
                m = bn_momentum(cfg["momentum"], nbt + 1, acc)
                bv = (_rsum((x - mean) ** 2) / n).reshape(C)
                ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
                rv = m * rv + (1 - m) * ub
                return Returned(r.outputs, r.grads, {**r.state, "running_var": _store(rv, d)})
            if b == "bn_nbt_plus_batch_size":
                nbt = nbt + x0.shape[0]
                state = dict(r.state)
                if cfg["momentum"] is None:
                    m = bn_momentum(None, nbt, acc)
                    rm, rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc)
                    state = running_state(rm, rv, nbt, d)
                state["num_batches_tracked"] = np.asarray(nbt, dtype=np.int64)
                return Returned(r.outputs, r.grads, state)
        return r

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        inst = call.training or not has_run
        eps = _eps(cfg["eps"], acc)
        if b == "in_count_last_spatial_axis" and inst and x0.ndim > 3 and Nb and S:
            W = x0.shape[-1]
            mean = _rsum(x) / W
            var = _rsum((x - mean) ** 2) / W
            rstd = 1 / np.sqrt(var + eps)
            xhat = (x - mean) * rstd
            w, bias, wr, br = instance_params(call.inputs, Nb, acc)
            out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
            r = super()._instance_norm(call, acc)
            return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, True, acc), r.state)
        r = super()._instance_norm(call, acc)
        if has_run and call.training and Nb and S > 1 and b in ("in_momentum_none_cumavg", "in_bessel_count_pooled"):
            rm, rv, nbt = running_in(st, acc)
            mi = _rsum(x) / S
            var = _rsum((x - mi) ** 2) / S
            if b == "in_momentum_none_cumavg" and cfg["momentum"] is None:
                m = acc(1.0 / float(nbt + 1))
                ub = var * acc(S / (S - 1))
            elif b == "in_bessel_count_pooled":
                m = instance_momentum_value(cfg, acc)
                k = Nb * S
                ub = var * acc(k / (k - 1))
            else:
                return r
            rm, rv = instance_running_update(rm, rv, m, mi, ub, Nb, C)
            return Returned(r.outputs, r.grads, {**r.state, "running_mean": _store(rm, d),
                                                 "running_var": _store(rv, d)})
        return r

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._dyt(call, acc)
        inp = call.inputs
        if "y" not in call.cotangents:
            return r
        x, a, w, bias, t = dyt_inputs(inp, acc)
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        if b == "dyt_dweight_tanh_without_alpha" and w is not None:
            return Returned(r.outputs, {**r.grads, "weight": _store((dy * np.tanh(x)).sum(axis=0), d)})
        if b == "dyt_dtanh_as_one_minus_t":
            g = dy if w is None else dy * w
            gd = g * (1 - t)
            return Returned(r.outputs, dyt_grads(gd * a, _rsum(gd * x).sum(), dy, t, w, bias, inp, inp["x"].shape, d))
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        scale, shift = inp.get("scale"), inp.get("shift")
        if b == "aln_modulation_needs_shift" and scale is not None and shift is None:
            x0 = inp["x"]
            B, H, T, x, _, _ = aln_inputs(inp, acc)
            mean, rstd, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            out = norm_outputs(xhat, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
            grads = {}
            if "y" in call.cotangents:
                dy = call.cotangents["y"].astype(acc).reshape(-1, H)
                grads["x"] = _store(_centred_dx(dy, xhat, rstd).reshape(x0.shape), d)
                grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
            return Returned(out, grads)
        if b == "aln_scale_of_first_sample" and scale is not None and inp["x"].shape[0] > 1:
            B = inp["x"].shape[0]

            def first(v):
                return None if v is None else np.broadcast_to(v.reshape(B, -1)[:1], (B, v.size // B)).reshape(v.shape)
            return super()._adaptive_layer_norm(_with(call, inputs={"scale": first(scale), "shift": first(shift)}), acc)
        return super()._adaptive_layer_norm(call, acc)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b = self.bug
        x0 = call.inputs["x"]
        if b == "poly_rms_over_tensor" and x0.ndim and x0.size:
            flat = (1, x0.size)
            cot = {k: v.reshape(flat) for k, v in call.cotangents.items()}
            r = super()._poly_norm(_with(call, inputs={"x": x0.reshape(flat)}, cotangents=cot), acc)
            grads = dict(r.grads)
            if "x" in grads:
                grads["x"] = grads["x"].reshape(x0.shape)
            return Returned({"y": r.outputs["y"].reshape(x0.shape)}, grads)
        r = super()._poly_norm(call, acc)
        if b == "poly_dweight_reversed" and "weight" in r.grads:
            return Returned(r.outputs, {**r.grads, "weight": np.ascontiguousarray(r.grads["weight"][::-1])})
        return r

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._z_score(call, acc)
        cfg, inp = call.config, call.inputs
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        m = n - int(cfg["ddof"])
        if n == 0 or m <= 0:
            return r
        eps = acc(cfg["eps"])
        if b == "zs_std_output_is_variance":
            mean = _rsum(x) / n
            var = _rsum((x - mean) ** 2) / acc(m)
            return Returned({**r.outputs, "std": back(var + eps, True).astype(acc)}, r.grads)
        if b != "zs_mean_divided_by_n_minus_ddof" or m == n:
            return r
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        mean = _rsum(x) / acc(m)
        dev = x - mean
        std = np.sqrt(_rsum(dev * dev) / acc(m) + eps)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        out = {"y": _store(back(affine(xhat, w, bias)), d), "mean": back(mean, True).astype(acc),
               "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        p = float(cfg["p"])
        if b == "lp_l1_without_abs" and p == 1.0:
            return self._lp_signed_l1(call, acc)
        r = super()._lp_normalize(call, acc)
        if b == "lp_norm_output_before_root":
            return Returned({**r.outputs, "norm": (r.outputs["norm"].astype(acc) ** acc(p)).astype(acc)}, r.grads)
        if b != "lp_bwd_power_p" or "y" not in call.cotangents:
            return r
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        eps, torch_rule = acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
        dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
        used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
        safe = np.where(used, norm, acc(1))
        u = x / safe
        wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p))
        proj = (dy - wv * _rsum(dy * u)) / safe
        small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
        return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(used, proj, small)), d)})

    def _lp_signed_l1(self, call, acc):
        """lp_l1_without_abs: the L1 norm as the signed sum, and its backward (the planted bug)."""
        d, cfg = call.dtype, call.config
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        eps, torch_rule = acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        norm = _rsum(x)
        used = (norm >= eps) if torch_rule else (norm != 0)
        safe = np.where(used, norm, acc(1))
        if torch_rule:
            den = np.where(used, norm, eps)
            y = x / den
        else:
            y = np.where(used, x / safe, acc(0))
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            proj = (dy - _rsum(dy * (x / safe))) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            grads["x"] = _store(back(np.where(used, proj, small)), d)
        return Returned(out, grads)
