"""A sixth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind6Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind5.py's (the class derives from ``Blind5Kernel``, whose own planted
branches are keyed on blind5's names and never taken here) and tests/planted/_blind_math.py's. It declares
the "strict" contract and must pass refnorm's check on the golden cases of its ops (tests/test_blind.py).
Each bug is planted in an override of the op's method here, where a kernel author would make it.

``Blind6Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy,
the same tuple as blind3's), or None where none fits. ``source`` is a public bug report or fix where the
mistake really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same
mistake in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic and public bug reports only, by an author who did not
read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran the diagnosis on these bugs.
None of its bugs repeats one of tests/planted/blind.py, blind2.py, blind3.py, blind4.py or blind5.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_rows, affine, aln_inputs, aln_modulation, bn_momentum,
                          centred_dx as _centred_dx, channel_rows, dyt_inputs, e8m0_scale, eps_value as _eps,
                          from_channel_rows, frexp_exp, gate_group_size,
                          gated_dn, gated_dx, gated_inputs, gated_stats, group_params, group_rows, half as _half,
                          instance_rows, kept, ln_rows, ln_stats, norm_outputs, norm_quant_returned, normalized_rows,
                          nqb_format, nqb_normalized, nqb_quantized, padded_blocks, per_sample, per_token, pow2_scale,
                          pow2_up, QUANT as _QUANT, quant_quotients, quantize, rms_rows, rms_stats, row_affine,
                          rsum as _rsum, running_in, scale_floor, sigmoids as _sigmoids, silu_gate, static_scale,
                          store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows, Blind5Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind6Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_eps_squared": (
        "layer_norm", "eps",
        "rstd = rsqrt(var + eps * eps): the eps meant for the standard deviation squared into the variance",
        "pattern: eps given for sigma converted to the variance's eps (eps ** 2) in a port"),
    "ln_bwd_sums_over_block_width": (
        "layer_norm", "block",
        "the backward's mean(g) and mean(g * x_hat) divide the row sums by the power-of-two BLOCK_N instead of "
        "N (the forward divides by N)",
        "pattern: tl.sum(...) / BLOCK_SIZE_N in the backward, the forward's / N not copied"),
    "ln_weight_bias_swapped": (
        "layer_norm", "affine",
        "the weight and bias pointers swapped at the launch: y = x_hat * bias + weight, forward and backward "
        "(dweight and dbias handed out in each other's place consistently with that)",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (LayerNorm backward: the weight and bias gradients "
        "assigned in each other's place)"),
    "ln_mean_output_is_sum": (
        "layer_norm", None,
        "the saved mean is the row sum (the accumulator stored before its division by N); y, rstd and the "
        "gradients are right",
        "pattern: tl.store(Mean + row, acc) where acc / N was computed into another variable"),
    # ------------------------------------------------------------------ rms_norm
    "rms_offset_added_twice": (
        "rms_norm", "affine",
        "weight_offset applied twice: y = x_hat * (weight + 2 * offset) (the checkpoint's weights already "
        "shifted by the offset at load time and the kernel adding it again), forward and backward",
        GH + "utensils/mold/pull/1078 (Gemma's RMSNorm x * (w + 1) applied to GGUF weights that already carry the "
        "+1 fold: every norm scaled by w + 2; issue #1074)"),
    "rms_bwd_projection_unweighted": (
        "rms_norm", "backward",
        "dx = rstd * (g - x_hat * mean(dy * x_hat)): the projection's sum taken of dy instead of g = dy * w "
        "(the first term uses g)",
        "cf. " + GH + "karpathy/llm.c/pull/763 (review: 'I forgot to multiply by the weight in the backward pass' "
        "of an RMSNorm)"),
    "rms_rstd_stored_bf16": (
        "rms_norm", "precision",
        "rstd rounded to bfloat16 (its buffer's dtype) for every input dtype, and x_hat, y and the backward "
        "computed from the rounded value",
        "cf. " + GH + "pytorch/helion/pull/2273 (rms_norm: save inv_rms in fp32 to fix the bf16 backward)"),
    "rms_pad_lanes_loaded_as_one": (
        "rms_norm", "block",
        "the row loaded into a power-of-two block of BLOCK_N lanes with other=1.0 (the weight load's default "
        "copied): sum(x^2) includes BLOCK_N - N ones, divided by N, forward and backward",
        "cf. " + GH + "tenstorrent/tt-metal/pull/51159 (fused group_norm reduced over the tile-padding rows: the "
        "padded lanes entered the statistics; issue #50682)"),
    # ------------------------------------------------------------------ add_norm
    "an_keep_mask_inverted": (
        "add_norm", "dropout",
        "the given mask (1 = kept) read as a drop-mask: the kept elements are those where mask == 0, forward "
        "and backward",
        "cf. " + GH + "lucidrains/DALLE2-pytorch/issues/35 (a mask helper taking the keep probability called with "
        "the drop probability: the kept and dropped sets inverted)"),
    "an_dx_rowscale_twice": (
        "add_norm", "backward",
        "dx = ds * keep * rowscale * rowscale: the rowscale applied again on the gradient already multiplied "
        "by the saved factor (dresidual and the forward right)",
        "pattern: the saved dropout factor already includes the rowscale and the backward multiplies by it again"),
    "an_bias1_dropped": (
        "add_norm", "affine",
        "the parallel branch's output y1 = x_hat * weight1 without bias1 (the forward's bias1 pointer never "
        "read); dbias1 right",
        "pattern: the second output's bias argument left at its None default in the fused call"),
    "an_residual_out_without_x1": (
        "add_norm", None,
        "with the parallel input x1: residual_out = x * keep + residual, the x1 branch left out of the stored "
        "sum (the normalization uses the full sum)",
        "pattern: the residual store written before the x1 branch was added to the fused kernel"),
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_of_input": (
        "norm_quant", "quant_scale",
        "the dynamic scale's amax taken over |x| (the input before the normalization) instead of the "
        "normalized output y",
        "pattern: the amax reduction placed on the loaded input in the first pass"),
    "nq_e4m3_range_of_e5m2": (
        "norm_quant", "saturation",
        "float8_e4m3fn outputs quantized with float8_e5m2's largest value 57344 (the range looked up by the "
        "wrong dtype key): scale = amax / 57344 and the clamp at 57344",
        "cf. " + GH + "flashinfer-ai/flashinfer/pull/2612 (RMSNorm quant kernels clamped every fp8 output dtype "
        "with e4m3's 448) and huggingface/optimum-quanto/issues/240 (the float8 range of the wrong format)"),
    "nq_int8_floor": (
        "norm_quant", "rounding",
        "int8 outputs: y / scale converted with floor (floorf) instead of rounding to nearest even",
        "cf. " + GH + "sgl-project/sglang-jax/pull/1598 (int8 quantization cast without rounding: codes biased "
        "by up to 1 LSB) and ShiqiYu/libfacedetection/issues/296 ('if you don't add 0.499f it is floor')"),
    "nq_scale_ub_as_floor": (
        "norm_quant", "quant_scale",
        "scale_ub applied with max instead of min: scale = max(amax / qmax, scale_ub)",
        "pattern: fmaxf and fminf swapped in the clamp of the dynamic scale"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_frexp_exponent": (
        "norm_quant_block", "quant_scale",
        "mxfp8 floor rule: the E8M0 exponent taken as frexp's exponent of amax (mantissa in [0.5, 1)) minus "
        "emax, one more than floor(log2 amax) - emax: every block scale twice too large",
        "cf. " + GH + "microsoft/onnxruntime/pull/32122 (review: frexpf's exponent used for the power-of-two "
        "scale doubles the scales where amax / 448 is a power of two)"),
    "nqb_scales_column_major": (
        "norm_quant_block", "layout",
        "the block scales written column-major (block-major, as a TMA-aligned scale layout) into the row-major "
        "(rows, blocks) scale output; q right",
        GH + "ROCm/aiter/pull/4506 (fused_rms_fp8_group_quant: the per-group scale buffer written column-major "
        "and reinterpreted row-major with .view(): the scales scrambled)"),
    "nqb_min_scale_as_cap": (
        "norm_quant_block", "quant_scale",
        "fp8_group: min_scale applied with min instead of max, as an upper bound of the block scale: "
        "scale = min(amax / qmax, min_scale), so every block whose amax / qmax exceeds it saturates",
        "pattern: torch.clamp(scale, max=min_scale) where min= was meant"),
    # ------------------------------------------------------------------ group_norm
    "gn_unbiased_group_var": (
        "group_norm", "bessel",
        "the group variance divides by C / G * S - 1 (unbiased) instead of the group's count, forward (the "
        "backward's formula unchanged)",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a group normalization written with torch.var's default "
        "unbiased variance differs from nn.GroupNorm)"),
    "gn_bwd_sums_per_channel": (
        "group_norm", "group",
        "the backward's mean(g) and mean(g * x_hat) taken per channel (over S) instead of over the group's "
        "channels and positions",
        "pattern: the backward's reduction written per channel as the forward's partials are"),
    "gn_bwd_stats_of_first_sample": (
        "group_norm", "layout",
        "the backward loads the mean and rstd at index group (the sample's offset n * G left out): every "
        "sample's dx and dweight use sample 0's statistics; the forward is right",
        "pattern: Mean + group instead of Mean + n * G + group in the backward kernel"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_sigmoid_in_input_dtype": (
        "group_norm_silu", "precision",
        "16-bit inputs: sigmoid(p) computed on p rounded to the input dtype and itself rounded to it before "
        "the float32 product p * sigmoid",
        "cf. " + GH + "sgl-project/sglang/pull/26473 (silu_and_mul: the activation cast to the input dtype before "
        "the float32 product)"),
    "gns_dweight_from_dy": (
        "group_norm_silu", "backward",
        "dweight = sum(dy * x_hat) (the SiLU's derivative left out of the weight's reduction only); dx and "
        "dbias use dp = dy * silu'(p)",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/185 (fused norm + activation backward: the activation's "
        "derivative skipped, '_ => gradOutput')"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dz_from_vhat": (
        "gated_norm", "gate",
        "norm_before_gate=False: dz = dv * v_hat * silu'(z) (the normalized value) instead of dv * x * silu'(z)",
        "pattern: the gate's backward fed the normalized tensor the other branch uses"),
    "gated_groups_strided": (
        "gated_norm", "layout",
        "with several groups per row, the group of column j taken as j % ngroups (strided) instead of "
        "j // group_size (contiguous), forward and backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/15507 (the grouped post-SSM norm laid out as {d_inner / n_group, "
        "n_group} against transformers' layout: a different grouping, different outputs)"),
    # ------------------------------------------------------------------ batch_norm
    "bn_normalize_unbiased": (
        "batch_norm", "bessel",
        "the batch statistics normalize with the unbiased variance (n / (n - 1)) instead of the biased one "
        "(the running update right)",
        "cf. " + GH + "pytorch/pytorch/issues/3122 (proposal to normalize the batch with the unbiased variance "
        "the running update uses: sum / (n - 1) in the invstd line)"),
    "bn_running_var_from_std": (
        "batch_norm", "running",
        "training: running_var updated with the batch's standard deviation (the square root of the variance) "
        "instead of its variance",
        "cf. " + GH + "torch/nn/issues/567 (BatchNormalization's running average kept of the (inverse) standard "
        "deviation, 'it should be fixed to running variance')"),
    "bn_bwd_count_batch_only": (
        "batch_norm", "backward",
        "training backward: mean(g) and mean(g * x_hat) divide the sums over the batch and spatial axes by the "
        "batch size N instead of N times the spatial size",
        "pattern: the reduction's count taken from x.shape[0]"),
    "bn_eval_increments_nbt": (
        "batch_norm", "running",
        "eval with running statistics: num_batches_tracked incremented (the counter updated outside the "
        "training branch); y and the running statistics right",
        "pattern: num_batches_tracked += 1 placed before the training check"),
    # ------------------------------------------------------------------ instance_norm
    "in_momentum_flipped": (
        "instance_norm", "running",
        "the running update weights the running value by momentum: m * running + (1 - m) * instance stat",
        "cf. " + GH + "torch/nn/issues/567 (running = momentum * running + (1 - momentum) * batch proposed against "
        "torch's convention) and cs231n/cs231n.github.io/issues/180"),
    "in_dweight_last_sample": (
        "instance_norm", "reduction",
        "dweight and dbias reduced over the last sample only (each sample's partial stored, not accumulated)",
        "pattern: a per-sample partial written with tl.store instead of tl.atomic_add"),
    "in_bwd_no_projection": (
        "instance_norm", "backward",
        "training backward: dx = rstd * (g - mean(g)): the - x_hat * mean(g * x_hat) term left out",
        "cf. " + GH + "ooples/AiDotNet/pull/695 (review: a norm backward ignoring the dependency of the statistic "
        "on the input)"),
    # ------------------------------------------------------------------ dyt
    "dyt_dbias_times_weight": (
        "dyt", "backward",
        "dbias = sum(dy * weight) over the rows instead of sum(dy)",
        "pattern: the bias reduction fed g = dy * weight"),
    "dyt_dx_without_weight": (
        "dyt", "backward",
        "dx = dy * alpha * (1 - tanh^2(alpha x)): the weight left out of dx (dalpha uses it)",
        "pattern: the dx line written from the unweighted dy"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dscale_from_y": (
        "adaptive_layer_norm", "backward",
        "dscale = sum over tokens of dy * y (the modulated output) instead of dy * x_hat",
        "pattern: the output reused for the scale's reduction"),
    "aln_gain_offset_twice": (
        "adaptive_layer_norm", "affine",
        "y = x_hat * (2 + scale) + shift: the 1 + added to a scale that already includes it, forward and "
        "backward",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/789 (adaLN's modulation passed as scale vs 1 + scale "
        "between the caller and the fused norm)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dbias_mean": (
        "poly_norm", "reduction",
        "dbias = mean of dy over every element instead of its sum",
        "pattern: a scalar's gradient reduced with .mean()"),
    "poly_bias_ignored": (
        "poly_norm", "affine",
        "the scalar bias never added to y (the kernel's has_bias flag left False); dbias right",
        "pattern: an optional bias flag not forwarded to the kernel"),
    # ------------------------------------------------------------------ z_score
    "zs_eps_added_to_std": (
        "z_score", "eps",
        "std = sqrt(var) + eps instead of sqrt(var + eps), forward and backward",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/508 (a norm's eps moved between inside and outside the "
        "square root)"),
    "zs_bwd_no_mean_term": (
        "z_score", "backward",
        "dx = (g - x_hat * sum(g * x_hat) / (n - ddof)) / std: the - mean(g) term left out",
        "pattern: the mean treated as a constant in the backward"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_norm_always_l2": (
        "lp_normalize", "semantics",
        "p ignored: the L2 norm for every p, forward and backward",
        "pattern: F.normalize(x) called without p"),
    "lp_bwd_projection_of_x": (
        "lp_normalize", "backward",
        "the backward's projection sums dy * x instead of dy * x / ||x||: dx = (dy - w * sum(dy * x)) / norm",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/11348 (a bug in l2_normalize's backward fixed: dx = dy / norm * "
        "(1 - x * sum(x dy) / sum(x x)))"),
    "lp_eps_clamps_sum": (
        "lp_normalize", "eps",
        "the torch rule's eps clamp applied to sum |x|^p before the root: y = x / max(sum |x|^p, eps)^(1/p) "
        "instead of x / max(||x||_p, eps) (the returned norm right)",
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (NormalizeL2: eps applied before the sqrt in some paths "
        "and after it in others)"),
}


def _with(call, config=None, inputs=None):
    """``call`` with some config entries or inputs replaced."""
    return dataclasses.replace(call, config={**call.config, **(config or {})},
                               inputs={**call.inputs, **(inputs or {})})


class Blind6Kernel(Blind5Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind6"

    def run(self, call):
        self._op = call.op
        return super().run(call)

    def _ln_stats(self, x, eps, ddof=0):
        b, op = self.bug, getattr(self, "_op", None)
        if (b == "gn_unbiased_group_var" and op == "group_norm") or (
                b == "bn_normalize_unbiased" and op == "batch_norm"):
            return ln_stats(x, eps, ddof=1)
        return ln_stats(x, eps, ddof)

    def _rms_stats(self, x, eps, placement="inside"):
        rms, rstd = rms_stats(x, eps, placement)
        if self.bug == "rms_rstd_stored_bf16" and self._op == "rms_norm":
            rstd = _half(rstd, "bfloat16")                          # the buffer's dtype, read back
        return rms, rstd

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        both = inp.get("weight") is not None and inp.get("bias") is not None
        if b == "ln_eps_squared" and call.config["eps"] is not None:
            call = _with(call, {"eps": float(call.config["eps"]) ** 2})
        if b == "ln_weight_bias_swapped" and both:
            r = super()._layer_norm(_with(call, inputs={"weight": inp["bias"], "bias": inp["weight"]}), acc)
            grads = dict(r.grads)
            if grads:
                grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
            return Returned(r.outputs, grads)
        r = super()._layer_norm(call, acc)
        out, grads = dict(r.outputs), dict(r.grads)
        ns, N, x = normalized_rows(call, acc)
        if b == "ln_mean_output_is_sum":
            out["mean"] = (_rsum(x)).reshape(out["mean"].shape).astype(acc)
        if b == "ln_bwd_sums_over_block_width" and "y" in call.cotangents and N:
            B = 1 << max(0, (N - 1).bit_length())
            eps = _eps(call.config["eps"], acc)
            mean, rstd, xhat = ln_rows(x, eps)
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            w = inp.get("weight")
            off = acc(call.config.get("weight_offset", 0.0) or 0.0)
            g = dy if w is None else dy * (w.astype(acc).reshape(1, N) + off)
            dx = rstd * (g - _rsum(g) / B - xhat * (_rsum(g * xhat) / B))
            grads["x"] = _store(dx.reshape(inp["x"].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        off = call.config.get("weight_offset", 0.0) or 0.0
        if b == "rms_offset_added_twice" and off:
            call = _with(call, {"weight_offset": 2 * off})
        if b == "rms_pad_lanes_loaded_as_one" and call.config.get("eps_placement", "inside") != "outside":
            return self._rms_pad_ones(call, acc)
        r = super()._rms_norm(call, acc)
        w0 = call.inputs.get("weight")
        if (b == "rms_bwd_projection_unweighted" and "y" in call.cotangents and w0 is not None
                and call.config.get("eps_placement", "inside") != "outside"):
            ns, N, x = normalized_rows(call, acc)
            _, rstd, xhat = rms_rows(x, _eps(call.config["eps"], acc))
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy * (w0.astype(acc).reshape(1, N) + acc(off))
            dx = rstd * (g - xhat * (_rsum(dy * xhat) / N))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(call.inputs["x"].shape), d)})
        return r

    def _rms_pad_ones(self, call, acc):
        """rms_pad_lanes_loaded_as_one: the padded lanes of the power-of-two block count as ones."""
        d, x0 = call.dtype, call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        B = 1 << max(0, (N - 1).bit_length())
        eps = _eps(call.config["eps"], acc)
        rstd = 1 / np.sqrt((_rsum(x * x) + acc(B - N)) / N + eps)
        xhat = x * rstd
        w0 = call.inputs.get("weight")
        off = acc(call.config.get("weight_offset", 0.0) or 0.0)
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        y = xhat if w is None else xhat * w
        stat = x0.shape[:x0.ndim - len(ns)] + (1,) * len(ns)
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy if w is None else dy * w
            grads["x"] = _store((rstd * (g - xhat * (_rsum(g * xhat) / N))).reshape(x0.shape), d)
            if w is not None:
                grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "an_keep_mask_inverted" and inp.get("mask") is not None:
            call = _with(call, inputs={"mask": (1 - inp["mask"].astype(np.float64)).astype(inp["mask"].dtype)})
        if b == "an_bias1_dropped" and inp.get("bias1") is not None:
            call = _with(call, inputs={"bias1": np.zeros_like(inp["bias1"])})
        r = super()._add_norm(call, acc)
        if b == "an_residual_out_without_x1" and inp.get("x1") is not None:
            ns, N, R, p, keep, off = add_norm_dims(call, acc)
            x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
            part = x * kept(mask, rs, keep, p, (R, N), acc)
            part = part if res is None else part + res
            ro = r.outputs["residual_out"]
            return Returned({**r.outputs, "residual_out": part.reshape(ro.shape).astype(ro.dtype)}, r.grads, r.state)
        if b == "an_dx_rowscale_twice" and inp.get("rowscale") is not None and "x" in r.grads:
            rs = inp["rowscale"].astype(acc).reshape(-1, 1)
            ns_size = r.grads["x"].size // max(rs.shape[0], 1)
            dx = r.grads["x"].astype(acc).reshape(-1, ns_size) * rs
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(inp["x"].shape), d)}, r.state)
        return r

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, eps)
        y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        if b == "nq_e4m3_range_of_e5m2" and cfg["quant_dtype"] == "float8_e4m3fn":
            lo, hi = _QUANT["float8_e5m2"][1:]
        src = x if b == "nq_amax_of_input" else y
        amax = np.max(np.abs(src), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is None:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                pick = np.maximum if b == "nq_scale_ub_as_floor" else np.minimum
                scale = pick(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        else:
            scale = static_scale(static, amax.shape, acc)
        v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_int8_floor" and qdt.kind == "i":
            q = np.floor(np.nan_to_num(v, nan=0.0)).astype(np.int8)
        else:
            q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b = self.bug
        cfg = call.config
        r = super()._norm_quant_block(call, acc)
        fmt = cfg["format"]
        if b == "nqb_scales_column_major":
            sc = r.outputs["scale"]
            nb = sc.shape[-1]
            flat = sc.reshape(-1, nb)
            moved = np.ascontiguousarray(flat.T).reshape(flat.shape).reshape(sc.shape)
            return Returned({**r.outputs, "scale": moved}, r.grads)
        if b == "nqb_mx_frexp_exponent" and nqb_format(cfg)[:3:2] == ("mxfp8", "floor"):
            return self._mx_frexp(call, acc)
        if b == "nqb_min_scale_as_cap" and fmt == "fp8_group" and cfg["min_scale"]:
            return self._group_min_cap(call, acc)
        return r

    def _group_min_cap(self, call, acc):
        """fp8_group with min_scale applied as an upper bound (the planted bug)."""
        fmt, B, rule, qdt, qmax, emax = nqb_format(call.config)
        s, y = nqb_normalized(call.inputs, call.config, acc, self._ln_stats)
        yb, amax = padded_blocks(y, B, acc)
        v = np.minimum(amax / acc(qmax), acc(call.config["min_scale"]))
        if rule == "pow2":
            m, e = frexp_exp(v)
            v = pow2_scale(v, pow2_up(m, e), acc)
        return nqb_quantized(yb, v, qmax, qdt, v.astype(acc), amax, acc(1.0), call, s, acc)

    def _mx_frexp(self, call, acc):
        """mxfp8 floor rule with the scale exponent taken as frexp's (the planted bug)."""
        fmt, B, rule, qdt, qmax, emax = nqb_format(call.config)
        s, y = nqb_normalized(call.inputs, call.config, acc, self._ln_stats)
        yb, amax = padded_blocks(y, B, acc)
        m, e = frexp_exp(amax)
        S, scale_out = e8m0_scale(amax, e - emax, acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, acc(1.0), call, s, acc)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        b, d = self.bug, call.dtype
        out, grads = super()._gn_core(call, acc, silu)
        if "y" not in call.cotangents or b not in ("gn_bwd_sums_per_channel", "gn_bwd_stats_of_first_sample",
                                                   "gns_dweight_from_dy"):
            return out, grads
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if b == "gn_bwd_sums_per_channel" and not silu and S:
            g = dy if w is None else dy * w
            rc = np.repeat(rstd.reshape(Nb, G), cg, axis=1).reshape(Nb * C, 1)
            gr, xr = g.reshape(Nb * C, S), xhat.reshape(Nb * C, S)
            dx = rc * (gr - _rsum(gr) / S - xr * (_rsum(gr * xr) / S))
            grads = {**grads, "x": _store(dx.reshape(x0.shape), d)}
        if b == "gn_bwd_stats_of_first_sample" and not silu and Nb > 1 and S:
            m0, r0 = mean.reshape(Nb, G)[:1], rstd.reshape(Nb, G)[:1]        # sample 0's, for every sample
            mb, rb = np.repeat(m0, Nb, axis=0).reshape(-1, 1), np.repeat(r0, Nb, axis=0).reshape(-1, 1)
            xh = (xv - mb) * rb
            g = dy if w is None else dy * w
            dx = _centred_dx(g.reshape(xv.shape), xh, rb)
            grads = {**grads, "x": _store(dx.reshape(x0.shape), d)}
            if w is not None:
                xh3 = xh.reshape(Nb, C, S)
                grads["weight"] = _store(_rsum(np.ascontiguousarray((dy * xh3).transpose(1, 0, 2))
                                               .reshape(C, -1)).reshape(C), d)
        if b == "gns_dweight_from_dy" and silu and w is not None:
            grads = {**grads, "weight": _store(_rsum(np.ascontiguousarray((dy * xhat).transpose(1, 0, 2))
                                                      .reshape(C, -1)).reshape(C), d)}
        return out, grads

    def _group_norm_silu(self, call, acc):
        r = super()._group_norm_silu(call, acc)
        d = call.dtype
        if self.bug != "gns_sigmoid_in_input_dtype" or d not in ("float16", "bfloat16"):
            return r
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        s, _ = _sigmoids(_half(p, d))
        y = p * _half(s, d)
        return Returned({**r.outputs, "y": _store(y.reshape(x0.shape), d)}, r.grads)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        H = inp["x"].shape[-1]
        K = gate_group_size(cfg, H)
        ng = H // K if K else 0
        if b == "gated_groups_strided" and ng > 1:
            perm = np.arange(H).reshape(K, ng).T.reshape(-1)         # group j holds columns j, j + ng, ...
            inv = np.argsort(perm)
            moved = {k: v[..., perm] for k, v in inp.items() if v is not None and k in ("x", "z")}
            moved.update({k: v[..., perm] for k, v in inp.items() if v is not None and k in ("weight", "bias")})
            cot = {k: v[..., perm] for k, v in call.cotangents.items()}
            r = super()._gated_norm(dataclasses.replace(_with(call, inputs=moved), cotangents=cot), acc)
            back = lambda a: a[..., inv]                              # noqa: E731
            return Returned({k: back(v) for k, v in r.outputs.items()}, {k: back(v) for k, v in r.grads.items()})
        r = super()._gated_norm(call, acc)
        if b == "gated_dz_from_vhat" and not cfg["norm_before_gate"] and "y" in call.cotangents and K:
            R, H, x, z, w, bias = gated_inputs(inp, acc)
            s, ds = silu_gate(z)
            vg = (x * s).reshape(-1, K)
            mean, rstd = gated_stats(vg, _eps(cfg["eps"], acc), cfg["norm"], ln_stats)
            vhat = ((vg - mean) * rstd).reshape(R, H)
            dy, dn, g = gated_dn(call, acc, w, s, False, K)
            dv = gated_dx(cfg["norm"], g, vhat.reshape(-1, K), rstd).reshape(R, H)
            dz = dv * vhat * ds
            return Returned(r.outputs, {**r.grads, "z": _store(dz.reshape(inp["z"].shape), d)})
        return r

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._batch_norm(call, acc)
        st = call.state
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)
        C, n = x.shape
        if b == "bn_eval_increments_nbt" and has_run and not call.training:
            nbt = np.asarray(st.get("num_batches_tracked", 0)).astype(np.int64) + 1
            return Returned(r.outputs, r.grads, {**r.state, "num_batches_tracked": nbt})
        if b == "bn_running_var_from_std" and has_run and call.training and n > 0:
            rm, rv, nbt = running_in(st, acc)
            m = bn_momentum(call.config["momentum"], nbt + 1, acc)
            mean = _rsum(x) / n
            bv = (_rsum((x - mean) ** 2) / n).reshape(C)
            if call.config["convention"] == "torch":
                ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
                rv = (1 - m) * rv + m * np.sqrt(ub)
            else:
                rv = m * rv + (1 - m) * np.sqrt(bv)
            return Returned(r.outputs, r.grads, {**r.state, "running_var": _store(rv, d)})
        batch = call.training or not has_run
        if b == "bn_bwd_count_batch_only" and batch and "y" in call.cotangents and n and x0.ndim > 2:
            mean, rstd = ln_stats(x, _eps(call.config["eps"], acc))
            xhat = (x - mean) * rstd
            dy = channel_rows(call.cotangents["y"], acc)
            w = call.inputs.get("weight")
            g = dy if w is None else dy * w.astype(acc).reshape(C, 1)
            Nn = x0.shape[0]
            dx = rstd * (g - _rsum(g) / Nn - xhat * (_rsum(g * xhat) / Nn))
            return Returned(r.outputs, {**r.grads, "x": _store(from_channel_rows(dx, x0.shape), d)}, r.state)
        return r

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._instance_norm(call, acc)
        st = call.state
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        inst = call.training or not has_run
        eps = _eps(call.config["eps"], acc)
        if b == "in_momentum_flipped" and has_run and call.training and Nb and S > 0:
            rm, rv, nbt = running_in(st, acc)
            mom = call.config["momentum"]
            m = acc(0.1 if mom is None else mom)
            mi = _rsum(x) / S
            var = _rsum((x - mi) ** 2) / S
            ub = var * acc(S / (S - 1) if S > 1 else np.inf)
            rm = m * rm + (1 - m) * mi.reshape(Nb, C).mean(axis=0)
            rv = m * rv + (1 - m) * ub.reshape(Nb, C).mean(axis=0)
            return Returned(r.outputs, r.grads, {**r.state, "running_mean": _store(rm, d),
                                                 "running_var": _store(rv, d)})
        if b in ("in_dweight_last_sample", "in_bwd_no_projection") and inst and "y" in call.cotangents and Nb:
            mean, rstd = ln_stats(x, eps)
            xhat = (x - mean) * rstd
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            w, bias = call.inputs.get("weight"), call.inputs.get("bias")
            grads = dict(r.grads)
            if b == "in_dweight_last_sample":
                last = slice((Nb - 1) * C, Nb * C)
                if w is not None:
                    grads["weight"] = _store(_rsum(dy[last] * xhat[last]).reshape(C), d)
                if bias is not None:
                    grads["bias"] = _store(_rsum(dy[last]).reshape(C), d)
            elif S:
                wr = None if w is None else np.tile(w.astype(acc), Nb).reshape(-1, 1)
                g = dy if wr is None else dy * wr
                grads["x"] = _store((rstd * (g - _rsum(g) / S)).reshape(x0.shape), d)
            return Returned(r.outputs, grads, r.state)
        return r

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._dyt(call, acc)
        inp = call.inputs
        if "y" not in call.cotangents or inp.get("weight") is None:
            return r
        x, a, w, bias, t = dyt_inputs(inp, acc)
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        if b == "dyt_dbias_times_weight" and bias is not None:
            return Returned(r.outputs, {**r.grads, "bias": _store((dy * w).sum(axis=0), d)})
        if b == "dyt_dx_without_weight":
            sech = 1 / np.cosh(a * x)
            dx = dy * (sech * sech) * a
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(inp["x"].shape), d)})
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "aln_gain_offset_twice" and inp.get("scale") is not None:
            return self._aln_gain_twice(call, acc)
        r = super()._adaptive_layer_norm(call, acc)
        if b == "aln_dscale_from_y" and inp.get("scale") is not None and "y" in call.cotangents:
            B, H, T, x, scale, shift = aln_inputs(inp, acc)
            mean, rstd, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            gain, sh = aln_modulation(scale, shift, B, H, T, acc)
            y = affine(xhat, gain, sh)
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            return Returned(r.outputs, {**r.grads, "scale": _store(per_sample(dy * y, B, T, H), d)})
        return r

    def _aln_gain_twice(self, call, acc):
        """aln_gain_offset_twice: y = x_hat * (2 + scale) + shift and its backward (the planted bug)."""
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        mean, rstd, xhat = ln_rows(x, _eps(call.config["eps"], acc))
        gain = acc(2) + per_token(scale, B, H, T, acc)
        sh = None if shift is None else per_token(shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            g = dy * gain
            grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)
            grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
            if shift is not None:
                grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "poly_bias_ignored" and inp.get("bias") is not None:
            call = _with(call, inputs={"bias": np.zeros_like(inp["bias"])})
        r = super()._poly_norm(call, acc)
        if b == "poly_dbias_mean" and "bias" in r.grads:
            dy = call.cotangents["y"].astype(acc)
            v = _rsum(dy.reshape(1, -1)).sum() / max(dy.size, 1)
            return Returned(r.outputs, {**r.grads, "bias": _store(np.reshape(v, np.shape(inp["bias"])), d)})
        return r

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        if b not in ("zs_eps_added_to_std", "zs_bwd_no_mean_term"):
            return super()._z_score(call, acc)
        cfg, inp = call.config, call.inputs
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        m = n - int(cfg["ddof"])
        eps = acc(cfg["eps"])
        r = super()._z_score(call, acc)
        if n == 0 or m <= 0:
            return r
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        mean = _rsum(x) / n
        dev = x - mean
        var = _rsum(dev * dev) / acc(m)
        std = np.sqrt(var) + eps if b == "zs_eps_added_to_std" else np.sqrt(var + eps)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        out = dict(r.outputs)
        if b == "zs_eps_added_to_std":
            out["y"] = _store(back(affine(xhat, w, bias)), d)
            out["std"] = back(std, True).astype(acc)
        grads = dict(r.grads)
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            mt = acc(0) if b == "zs_bwd_no_mean_term" else _rsum(g) / n
            inner = g - mt - xhat * (_rsum(g * xhat) / acc(m))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))), d)
            if b == "zs_eps_added_to_std" and w is not None:
                grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(inp["weight"].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        if b == "lp_norm_always_l2":
            return super()._lp_normalize(_with(call, {"p": 2.0}), acc)
        r = super()._lp_normalize(call, acc)
        if b == "lp_eps_clamps_sum" and call.config["zero_rule"] == "torch":
            return self._lp_clamped_sum(call, acc, r)
        if b != "lp_bwd_projection_of_x" or "y" not in call.cotangents:
            return r
        cfg = call.config
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
        dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
        used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
        safe = np.where(used, norm, acc(1))
        u = x / safe
        wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
        proj = (dy - wv * _rsum(dy * x)) / safe
        small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
        return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(used, proj, small)), d)})

    def _lp_clamped_sum(self, call, acc, r):
        """lp_eps_clamps_sum: y = x / max(||x||^p, eps)^(1/p), and its backward (the planted bug)."""
        d, cfg = call.dtype, call.config
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
        used = (norm ** acc(p) >= eps) | np.isnan(norm)
        den = np.where(used, norm, eps ** acc(1.0 / p))
        out = {**r.outputs, "y": _store(back(x / den), d)}
        grads = dict(r.grads)
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            grads["x"] = _store(back(np.where(used, proj, dy / den)), d)
        return Returned(out, grads)
