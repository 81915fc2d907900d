"""A tenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind10Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind9.py's (the class derives from ``Blind9Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it.

``Blind10Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind9.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, centred_dx as _centred_dx, channel_params, channel_rows,
                          dy_and_g, dyt_grads, dyt_inputs, eps_value as _eps, frexp_exp, from_channel_rows,
                          gate_group_size, gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_inputs,
                          group_param_grads, group_params, group_rows, half as _half,
                          instance_grads, instance_momentum_value, instance_outputs, instance_params,
                          instance_rows, instance_running_update, instance_unbiased_var, ln_rows, ln_stats,
                          norm_outputs, nqb_format, nqb_normalized, nqb_quantized, norm_quant_returned,
                          normalized_rows,
                          padded_blocks, per_sample, poly_combine, poly_grads, poly_inputs, poly_normalize,
                          pow2_scale, pow2_up, QUANT as _QUANT, dynamic_scale, quant_quotients, quantize, rms_dx,
                          rms_rows, row_affine, row_param_grads, row_weight_bias, rsum as _rsum, running_in,
                          running_state, bn_momentum, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind9 import Blind9Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind10Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_xhat_uncentred": (
        "layer_norm", "backward",
        "the backward recomputes x_hat as x * rstd (the RMS norm kernel's recompute copied, the saved mean never "
        "loaded) for dx, dweight and dbias; the forward right",
        "pattern: a backward kernel adapted from the RMSNorm one without its mean load"),
    "ln_centred_in_input_dtype": (
        "layer_norm", "precision",
        "16-bit inputs: the deviations x - mean computed in the input dtype (the float32 mean cast to it, the "
        "difference rounded) and used for the variance and x_hat, forward and backward; the saved mean right",
        "pattern: x - mean.to(x.dtype) in a reference written in the activation dtype"),
    "ln_dbias_accumulated_twice": (
        "layer_norm", "reduction",
        "dbias written with += into a gradient buffer that the column-sum pass had already filled: every entry "
        "2 * sum(dy) (dweight and dx right)",
        "cf. " + GH + "karpathy/llm.c/pull/163 (a bias-gradient kernel's store switched between = and +=)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_weight_before_stats": (
        "rms_norm", "affine",
        "eps inside, with a weight: the weight multiplies x before the mean square, y = v / rms(v) with "
        "v = x * (weight + offset), forward and backward (dweight through the normalization)",
        "pattern: the scale applied on the kernel's load instead of after the normalization"),
    "rms_rstd_float32_for_float64": (
        "rms_norm", "precision",
        "float64 inputs: rstd from the float32 rsqrt (the single-precision intrinsic on a float64 mean square), "
        "rounded to float32, then used in float64 for y, the saved rstd and the backward",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling the single-precision sqrtf "
        "for double inputs)"),
    "rms_rows_of_first_sample": (
        "rms_norm", "layout",
        "inputs of three or more axes: a row's offset computed from its index within the sample (the batch "
        "stride left out): every sample reads sample 0's rows (y, rstd, dx and dweight from them)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding batches wrong: every "
        "batch after the first normalized the wrong data)"),
    # ------------------------------------------------------------------ add_norm
    "an_mask_read_column_major": (
        "add_norm", "dropout",
        "the dropout keep-mask of x read column-major (element (i, j) from the flat index j * rows + i) while x "
        "is row-major, forward and backward",
        "pattern: a mask's strides taken transposed"),
    "an_prenorm_dres_into_dx_only": (
        "add_norm", "backward",
        "prenorm=True: residual_out's cotangent added to the gradient flowing to x but not to the residual's "
        "(dresidual = ds alone)",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (a prenorm RMSNorm backward combining residual_out's gradient wrong)"),
    "an_x1_kept_unscaled": (
        "add_norm", "dropout",
        "with the parallel input x1: x1 dropped with mask1 but not scaled by 1 / (1 - p) (x's branch right), "
        "forward and dx1",
        "cf. " + GH + "NVIDIA/apex/pull/860 (a fused dropout-add's scaling miswired)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_round_half_up": (
        "norm_quant", "rounding",
        "int8: y / scale rounded by floor(v + 0.5) (half up) instead of to nearest even",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56525 (a quantize kernel rounding int8 half-way points toward "
        "+inf instead of to nearest even)"),
    "nq_int8_clip_high_128_wraps": (
        "norm_quant", "saturation",
        "int8: y / scale clipped to [-128, 128] (the range's magnitude on both sides); a value rounding to 128 "
        "wraps to -128 in the int8 store",
        "cf. " + GH + "microsoft/onnxruntime/pull/29728 (an int8 output clamp with the wrong upper bound: 128 "
        "wrapping to -128)"),
    "nq_amax_per_leading_index": (
        "norm_quant", "quant_scale",
        "dynamic scale, inputs of three or more axes: the amax reduction views x as (x.shape[0], -1), so every "
        "token of a sample shares the sample's amax and scale",
        "cf. " + GH + "vllm-project/compressed-tensors/issues/394 (per-token dynamic scales reduced over the wrong "
        "dimensions of a 3-D activation)"),
    # ------------------------------------------------------------------ group_norm
    "gn_group_count_and_size_swapped": (
        "group_norm", "group",
        "the kernel launched with (C / G) groups of G channels (the group count and the group size swapped), "
        "forward and backward; the statistics written into the (N, G) buffers in that order",
        "pattern: two integer launch arguments passed in the wrong order"),
    "gn_stats_stored_without_sample_offset": (
        "group_norm", "layout",
        "the saved mean and rstd stored at index group (the sample offset n * G left out): row 0 holds the "
        "last sample's statistics, the other rows stay zero; y and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/57223 (a group norm kernel's per-batch offset wrong)"),
    "gn_sq_dev_sum_in_half": (
        "group_norm", "precision",
        "16-bit inputs: the group's sum of squared deviations accumulated left to right in the input dtype "
        "(the mean in float32), forward and backward",
        "cf. " + GH + "Xilinx/mlir-air/pull/1679 (a norm kernel's sum of squares accumulated in bf16)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_ln_group_var_unbiased": (
        "gated_norm", "bessel",
        "norm='layer_norm': each group's variance divided by K - 1 (the unbiased variance) instead of K, "
        "forward and the backward's formula on it",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a LayerNorm computed with the unbiased std)"),
    "gated_dx_dz_swapped": (
        "gated_norm", None,
        "the gradients of x and z returned in each other's place (the backward's output tuple in the wrong "
        "order)",
        "pattern: a return tuple unpacked in the wrong order"),
    "gated_rms_eps_outside_root": (
        "gated_norm", "eps",
        "norm='rms_norm': rstd = 1 / (sqrt(mean(v^2)) + eps) instead of 1 / sqrt(mean(v^2) + eps), forward and "
        "the backward's formula on it",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/508 (a norm kernel's eps moved between inside and "
        "outside the square root)"),
    # ------------------------------------------------------------------ batch_norm
    "bn_stats_first_sample_only": (
        "batch_norm", "reduction",
        "batch statistics: the per-channel sums run over the first sample's positions only (the batch loop's "
        "bound 1), divided by that count: every sample normalized with sample 0's mean and variance, forward, "
        "backward and running update",
        "pattern: a loop over the batch dropped from the statistics kernel"),
    "bn_nbt_incremented_twice": (
        "batch_norm", "running",
        "training: num_batches_tracked incremented by the module and again by the kernel (by 2 per step), and "
        "momentum=None's cumulative factor taken from that count",
        "pattern: a counter incremented on both sides of a kernel call"),
    "bn_merge_delta_count_one": (
        "batch_norm", "merge",
        "batch statistics merged from per-sample partials (mean_i, M2_i) with the mean-difference term not "
        "weighted by the partial's count: M2 = sum M2_i + sum (mean_i - mean)^2, forward, backward and running "
        "update",
        "cf. " + GH + "Oneflow-Inc/oneflow/issues/7471 (a Welford combine's mean-difference term and its count "
        "weight questioned)"),
    # ------------------------------------------------------------------ instance_norm
    "in_dbias_averaged_over_batch": (
        "instance_norm", "reduction",
        "dbias summed per channel over the positions and averaged over the samples (divided by N) instead of "
        "summed",
        "cf. " + GH + "deeplearning4j/deeplearning4j/pull/366 (bias gradients taken as a mean over the batch where "
        "a sum belongs)"),
    "in_var_one_pass": (
        "instance_norm", "one_pass",
        "training: each instance's variance as E[x^2] - E[x]^2 from one pass of float32 sums (clamped at 0), "
        "forward, backward and running update",
        GH + "Tencent/ncnn/pull/874 (an InstanceNorm's one-pass variance going negative)"),
    "in_running_mean_bessel_scaled": (
        "instance_norm", "bessel",
        "training: the unbiased factor S / (S - 1) applied to the instances' means too in the running_mean "
        "update (running_var right)",
        "pattern: the Bessel correction applied to both running statistics"),
    # ------------------------------------------------------------------ dyt
    "dyt_grid_from_leading_dim": (
        "dyt", "block",
        "inputs of three or more axes: the grid launched with x.shape[0] row programs (a 2-D input assumed): "
        "only the first x.shape[0] rows of the flattened input processed (y and dx elsewhere 0, the parameter "
        "gradients from those rows)",
        "pattern: the row count taken from the first dimension instead of the flattened rows"),
    "dyt_tanh_grad_from_output": (
        "dyt", "backward",
        "with a weight or bias: the backward's tanh' computed as 1 - y^2 from the saved output y = weight * t + "
        "bias instead of 1 - t^2 (dx and dalpha)",
        "cf. " + GH + "davidrmiller/neural2d/issues/40 (a tanh derivative evaluated on the wrong saved value)"),
    "dyt_dalpha_accum_in_half": (
        "dyt", "precision",
        "16-bit inputs: alpha's gradient accumulated left to right in the input dtype (dx, dweight, dbias right)",
        "pattern: a scalar gradient accumulated in the activation dtype"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_bwd_stats_of_first_group": (
        "group_norm_silu", "layout",
        "the backward loads mean and rstd at the sample's offset only (the group index left out): every group "
        "of a sample uses group 0's statistics for x_hat, the SiLU's input and dx",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward loading the mean and rstd of the "
        "wrong group: every channel read group 0's)"),
    "gns_dp_rounded_to_input_dtype": (
        "group_norm_silu", "precision",
        "16-bit inputs: dp = dy * silu'(p) stored in a buffer of the input dtype before the group norm's "
        "backward reductions (dx, dweight and dbias from the rounded dp)",
        "pattern: an intermediate gradient allocated like the input"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_group_block_size_default": (
        "norm_quant_block", "quant_scale",
        "fp8_group with a block_size dividing 128: the kernel's block size left at its default 128 (the option "
        "not forwarded): each scale and amax taken over 128 values, written to the B-blocks they cover",
        "pattern: an option not forwarded to the kernel launch"),
    "nqb_rms_eps_dropped": (
        "norm_quant_block", "eps",
        "norm='rms_norm': the normalization launched without eps (its default argument 0), then quantized",
        "cf. " + GH + "ybubnov/metalchat/issues/81 (an RMS norm's eps not passed down the call chain)"),
    "nqb_pow2_amax_rounded_before_qmax": (
        "norm_quant_block", "scale_rounding",
        "fp8_group scale_rule='pow2': the scale taken as 2^ceil(log2 amax) / qmax (amax rounded up to a power of "
        "two before the division) instead of the smallest power of two >= amax / qmax",
        "cf. " + GH + "microsoft/onnxruntime/pull/32122 (a block scale's rounding to a power of two gotten wrong)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dshift_copied_from_dscale": (
        "adaptive_layer_norm", "backward",
        "dshift = sum over the tokens of dy * x_hat (the scale's reduction copied) instead of dy",
        "pattern: a copy-pasted reduction whose product was not edited"),
    "aln_dscale_from_raw_x": (
        "adaptive_layer_norm", "backward",
        "dscale = sum over the tokens of dy * x (the loaded input) instead of dy * x_hat",
        "pattern: the raw input used where the normalized value belongs"),
    "aln_var_one_pass": (
        "adaptive_layer_norm", "one_pass",
        "the variance as E[x^2] - E[x]^2 from one pass of sums (clamped at 0), forward and backward",
        "cf. " + GH + "camlab-ethz/poseidon/issues/6 (a time-conditioned layer norm computing the variance as "
        "E[X^2] - E[X]^2)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_weight_pointer_not_advanced": (
        "poly_norm", "layout",
        "the weight read at index 0 for each of the three power terms (the pointer never advanced): "
        "y = w0 (h3 + h2 + h1) + bias, and dx likewise; dweight right",
        "pattern: a parameter pointer not advanced in an unrolled loop"),
    "poly_bwd_linear_term_dropped": (
        "poly_norm", "backward",
        "dx sums the contributions of the x^3 and x^2 terms only (the loop over the powers stops before p = 1)",
        "pattern: an off-by-one loop bound in the backward"),
    "poly_eps_outside_root": (
        "poly_norm", "eps",
        "each power normalized by 1 / (rms(u) + eps) instead of 1 / sqrt(mean(u^2) + eps), forward and the "
        "backward's formula on it",
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (a normalization applying eps before the sqrt in some "
        "paths and after it in others)"),
    # ------------------------------------------------------------------ z_score
    "zs_dx_divided_by_variance": (
        "z_score", "backward",
        "dx = (g - mean(g) - x_hat mean'(g x_hat)) / std^2: the saved 1 / var (kept for the variance's "
        "gradient) used where 1 / std belongs",
        "pattern: a saved reciprocal of the wrong power reused in the backward"),
    "zs_mean_sum_in_half": (
        "z_score", "precision",
        "16-bit inputs: the mean's sum accumulated left to right in the input dtype (no re-centring), the "
        "deviations about that mean in float32, forward and backward",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's row sum accumulated in the fp16 input type)"),
    "zs_bwd_weight_after_projection": (
        "z_score", "backward",
        "with a weight: dx = weight * (dy - mean(dy) - x_hat mean'(dy x_hat)) / std, the weight applied after the "
        "projection instead of g = dy * weight entering it",
        "pattern: an elementwise factor commuted with a row reduction in the hand-written backward"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_torch_rule_read_as_onnx": (
        "lp_normalize", "eps",
        "zero_rule='torch': the ONNX rule applied (x / ||x||, 0 for a zero slice, no eps clamp), forward and "
        "backward",
        "cf. " + GH + "onnx/onnx/pull/1330 (LpNormalization's eps rule differing from the frameworks')"),
    "lp_norm_output_reciprocal": (
        "lp_normalize", None,
        "the returned norm is 1 / ||x|| (the multiplier the kernel applies); y and dx right",
        "pattern: the kernel's inverse norm stored to the norm output"),
    "lp_eps_added_to_norm": (
        "lp_normalize", "eps",
        "zero_rule='torch': y = x / (||x|| + eps) instead of x / max(||x||, eps), forward and backward",
        "cf. " + GH + "apple/axlearn/pull/21 (an L2 normalization's eps placement: added, inside the root, or a "
        "clamp as F.normalize)"),
}


def _with(call, config=None, inputs=None, cotangents=None, state=None):
    """``call`` with some config entries, inputs, cotangents or state entries replaced."""
    return dataclasses.replace(call, config={**call.config, **(config or {})},
                               inputs={**call.inputs, **(inputs or {})},
                               cotangents={**call.cotangents, **(cotangents or {})},
                               state={**call.state, **(state or {})})


def _half_row_sums(a, d):
    """Row sums (rows, 1) of ``a`` accumulated left to right in the 16-bit ``d``."""
    t = np.zeros((a.shape[0], 1), a.dtype)
    for j in range(a.shape[1]):
        t = _half(t + _half(a[:, j:j + 1], d), d)
    return t


def _one_pass_stats(x, eps):
    """(mean, rstd) of the rows of x from one pass of sums: var = E[x^2] - E[x]^2 clamped at 0."""
    n = x.shape[1]
    mean = _rsum(x) / n
    var = np.maximum(_rsum(x * x) / n - mean * mean, 0)
    return mean, 1 / np.sqrt(var + eps)


class Blind10Kernel(Blind9Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind10"

    def _patched_stats(self, fn, method, call, acc):
        """``method(call, acc)`` with the kernel's two-pass (mean, rstd) replaced by ``fn``."""
        self._ln_stats = fn
        try:
            return method(call, acc)
        finally:
            del self._ln_stats

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "ln_centred_in_input_dtype" and d in ("float16", "bfloat16"):
            return self._ln_centred_half(call, acc)
        r = super()._layer_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        ns, N, x = normalized_rows(call, acc)
        if b == "ln_bwd_xhat_uncentred" and N:
            _, rstd, _ = ln_rows(x, _eps(call.config["eps"], acc))
            w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
            xh = x * rstd
            dy, g = dy_and_g(call, acc, (-1, N), w)
            grads = {**r.grads, "x": _store(_centred_dx(g, xh, rstd).reshape(inp["x"].shape), d)}
            grads.update(row_param_grads(dy, xh, w, bias, ns, d))
            return Returned(r.outputs, grads)
        if b == "ln_dbias_accumulated_twice" and "bias" in r.grads:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            return Returned(r.outputs, {**r.grads, "bias": _store((2 * dy.sum(axis=0)).reshape(ns), d)})
        return r

    def _ln_centred_half(self, call, acc):
        """ln_centred_in_input_dtype: layer_norm with x - mean rounded to the 16-bit input dtype."""
        d, x0 = call.dtype, call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        mean = _rsum(x) / N
        dev = _half(x - _half(mean, d), d)
        rstd = 1 / np.sqrt(_rsum(dev * dev) / N + _eps(call.config["eps"], acc))
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
        inp = call.inputs
        x0 = inp["x"]
        placement = call.config.get("eps_placement", "inside")
        ns, N, x = normalized_rows(call, acc)
        if b == "rms_weight_before_stats" and inp.get("weight") is not None and placement != "outside" and N:
            w = inp["weight"].astype(acc).reshape(1, N) + weight_offset(call, acc)
            v = x * w
            _, rstd, vhat = rms_rows(v, _eps(call.config["eps"], acc))
            out = {"y": _store(vhat.reshape(x0.shape), d),
                   "rstd": rstd.reshape(x0.shape[:x0.ndim - len(ns)] + (1,) * len(ns)).astype(acc)}
            grads = {}
            if "y" in call.cotangents:
                dy = call.cotangents["y"].astype(acc).reshape(-1, N)
                dv = rms_dx(dy, vhat, rstd)
                grads = {"x": _store((dv * w).reshape(x0.shape), d),
                         "weight": _store((dv * x).sum(axis=0).reshape(ns), d)}
            return Returned(out, grads)
        if b == "rms_rstd_float32_for_float64" and d == "float64":
            base = self._rms_stats

            def stats(xx, eps, pl="inside"):
                rms, rstd = base(xx, eps, pl)
                return rms, rstd.astype(np.float32).astype(xx.dtype)
            self._rms_stats = stats
            try:
                return super()._rms_norm(call, acc)
            finally:
                del self._rms_stats
        if b == "rms_rows_of_first_sample" and x0.ndim >= len(ns) + 2 and x0.shape[0] > 1 and x0.size:
            fake = np.ascontiguousarray(np.broadcast_to(x0[:1], x0.shape))
            return super()._rms_norm(_with(call, inputs={"x": fake}), acc)
        return super()._rms_norm(call, acc)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        p = float(cfg["dropout_p"] or 0.0)
        mask = inp.get("mask")
        if b == "an_mask_read_column_major" and mask is not None and mask.ndim >= 2:
            R, N = mask.size // mask.shape[-1], mask.shape[-1]
            if R > 1 and N > 1:
                flat = mask.reshape(-1)
                m2 = np.ascontiguousarray(flat.reshape(N, R).T).reshape(mask.shape)
                return super()._add_norm(_with(call, inputs={"mask": m2}), acc)
        if b == "an_x1_kept_unscaled" and p and inp.get("x1") is not None:
            x1 = inp["x1"].astype(acc) * acc(1.0 - p)
            r = super()._add_norm(_with(call, inputs={"x1": x1}), acc)
            grads = dict(r.grads)
            if "x1" in grads:
                grads["x1"] = _store(grads["x1"].astype(acc) * acc(1.0 - p), d)
            return Returned(r.outputs, grads, r.state)
        r = super()._add_norm(call, acc)
        if (b == "an_prenorm_dres_into_dx_only" and cfg["prenorm"] and "residual" in r.grads
                and "residual_out" in call.cotangents):
            dr = call.cotangents["residual_out"].astype(acc)
            gres = r.grads["residual"]
            return Returned(r.outputs, {**r.grads, "residual": (gres.astype(acc) - dr.reshape(gres.shape))
                                        .astype(gres.dtype)}, r.state)
        return r

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        static = inp.get("static_scale")
        x0 = inp["x"]
        is_int8 = cfg["quant_dtype"] == "int8"
        lead = (b == "nq_amax_per_leading_index" and static is None and x0.ndim >= 3 and x0.shape[0] > 0)
        if (b in ("nq_int8_round_half_up", "nq_int8_clip_high_128_wraps") and is_int8) or lead:
            ns, N, x = normalized_rows(call, acc)
            _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, _eps(cfg["eps"], acc))
            y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
            if lead:
                B = x0.shape[0]
                amax = np.repeat(np.max(amax.reshape(B, -1), axis=1), amax.shape[0] // B).reshape(-1, 1)
            scale = dynamic_scale(amax, hi, cfg, acc) if static is None else static_scale(static, amax.shape, acc)
            if b == "nq_int8_round_half_up":
                v = quant_quotients(y, scale, lo, hi, acc)
                q = np.floor(np.nan_to_num(v, nan=0.0) + acc(0.5)).astype(np.int8)
            elif b == "nq_int8_clip_high_128_wraps":
                v = quant_quotients(y, scale, -128.0, 128.0, acc)
                q = np.rint(np.nan_to_num(v, nan=0.0)).astype(np.int16).astype(np.int8)
            else:
                q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
            return norm_quant_returned(q, scale, amax, x0, ns, acc)
        return super()._norm_quant(call, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        if b == "nqb_group_block_size_default" and fmt == "fp8_group" and B < 128 and 128 % B == 0:
            r = super()._norm_quant_block(_with(call, config={"block_size": None}), acc)
            nb = -(-inp["x"].shape[-1] // B)                # the caller's scale buffer: one per block of B
            out = dict(r.outputs)
            for k in ("scale", "amax"):                     # each 128-block's value over its B-blocks
                out[k] = np.repeat(r.outputs[k], 128 // B, axis=-1)[..., :nb]
            return Returned(out, r.grads)
        if b == "nqb_rms_eps_dropped" and cfg["norm"] == "rms_norm" and cfg["eps"] != 0:
            return super()._norm_quant_block(_with(call, config={"eps": 0.0}), acc)
        if b == "nqb_pow2_amax_rounded_before_qmax" and fmt == "fp8_group" and rule == "pow2":
            s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
            yb, amax = padded_blocks(y, B, acc)
            m, e = frexp_exp(amax)
            S = pow2_scale(amax, pow2_up(m, e), acc) / acc(qmax)
            S = np.maximum(S, acc(cfg["min_scale"] or 0.0))
            return nqb_quantized(yb, S, qmax, qdt, S.astype(acc), amax, acc(1.0), call, s, acc)
        return super()._norm_quant_block(call, acc)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _group_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        if call.op != "group_norm":
            return super()._group_norm(call, acc)
        Nb, C = x0.shape[0], x0.shape[1]
        G = int(call.config["num_groups"])
        if b == "gn_group_count_and_size_swapped" and G and C // G != G and x0.size:
            r = super()._group_norm(_with(call, config={"num_groups": C // G}), acc)
            out = dict(r.outputs)
            for k in ("mean", "rstd"):
                v = r.outputs[k].reshape(-1)
                buf = np.zeros(Nb * G, v.dtype)
                n = min(buf.size, v.size)
                buf[:n] = v[:n]
                out[k] = buf.reshape(Nb, G)
            return Returned(out, r.grads)
        if b == "gn_sq_dev_sum_in_half" and d in ("float16", "bfloat16"):
            def stats(x, eps):
                n = x.shape[1]
                mean = _rsum(x) / n
                dev = x - mean
                return mean, 1 / np.sqrt(_half_row_sums(dev * dev, d) / n + eps)
            return self._patched_stats(stats, super()._group_norm, call, acc)
        r = super()._group_norm(call, acc)
        if b == "gn_stats_stored_without_sample_offset" and Nb > 1 and G:
            out = dict(r.outputs)
            for k in ("mean", "rstd"):
                v = r.outputs[k]
                buf = np.zeros_like(v)
                buf[0] = v[-1]
                out[k] = buf
            return Returned(out, r.grads)
        return r

    def _group_norm_silu(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._group_norm_silu(call, acc)
        if "y" not in call.cotangents:
            return r
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        first = b == "gns_bwd_stats_of_first_group" and G > 1
        rounded = b == "gns_dp_rounded_to_input_dtype" and d in ("float16", "bfloat16")
        if not (first or rounded) or not x0.size:
            return r
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        if first:
            mean = np.repeat(mean.reshape(Nb, G)[:, :1], G, axis=1).reshape(-1, 1)
            rstd = np.repeat(rstd.reshape(Nb, G)[:, :1], G, axis=1).reshape(-1, 1)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        sg, rest = _sigmoids(p)
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        dp = dy * (sg * (1 + p * rest))
        if rounded:
            dp = _half(dp, d)
        g = dp if w is None else dp * w
        dx = _centred_dx(g.reshape(xv.shape), xhat.reshape(xv.shape), rstd)
        grads = {**r.grads, "x": _store(dx.reshape(x0.shape), d)}
        grads.update(group_param_grads(dp * xhat, dp, w, bias, C, d))
        return Returned(r.outputs, grads)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        if b == "gated_ln_group_var_unbiased" and cfg["norm"] == "layer_norm":
            return self._patched_stats(lambda v, eps: ln_stats(v, eps, ddof=1), super()._gated_norm, call, acc)
        if b == "gated_rms_eps_outside_root" and cfg["norm"] != "layer_norm":
            return self._gated_rms_outside(call, acc)
        r = super()._gated_norm(call, acc)
        if b == "gated_dx_dz_swapped" and "x" in r.grads and "z" in r.grads:
            return Returned(r.outputs, {**r.grads, "x": r.grads["z"], "z": r.grads["x"]})
        return r

    def _gated_rms_outside(self, call, acc):
        """gated_rms_eps_outside_root: the gated RMS norm with rstd = 1 / (rms + eps)."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg = bool(cfg["norm_before_gate"])
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        rstd = 1 / (np.sqrt(_rsum(vg * vg) / K) + _eps(cfg["eps"], acc))
        vhat = (vg * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            dv = gated_dx("rms_norm", g, vhat.reshape(-1, K), rstd).reshape(R, H)
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
        if b == "bn_nbt_incremented_twice" and has_run and call.training:
            nbt = np.asarray(st.get("num_batches_tracked", 0)).astype(np.int64)
            return super()._batch_norm(_with(call, state={"num_batches_tracked": nbt + 1}), acc)
        x = channel_rows(x0, acc)
        C, n = x.shape
        Nn = x0.shape[0]
        S = n // Nn if Nn else 0
        if b == "bn_stats_first_sample_only" and batch and Nn > 1 and S:
            xs = x[:, :S]
            mean = _rsum(xs) / S
            return self._bn_from_stats(call, acc, x, has_run, mean, _rsum((xs - mean) ** 2) / S)
        if b == "bn_merge_delta_count_one" and batch and Nn > 1 and S > 1:
            x3 = x.reshape(C, Nn, S)
            mi = x3.mean(axis=2)
            m2 = ((x3 - mi[..., None]) ** 2).sum(axis=2)
            mean = mi.mean(axis=1, keepdims=True)
            var = (m2.sum(axis=1, keepdims=True) + ((mi - mean) ** 2).sum(axis=1, keepdims=True)) / n
            return self._bn_from_stats(call, acc, x, has_run, mean, var)
        return super()._batch_norm(call, acc)

    def _bn_from_stats(self, call, acc, x, has_run, mean, var):
        """batch_norm's training/no-running forward, backward and running update from given batch statistics
        (C, 1): mean and (biased) var."""
        d, cfg, st = call.dtype, call.config, call.state
        x0 = call.inputs["x"]
        C, n = x.shape
        rstd = 1 / np.sqrt(var + _eps(cfg["eps"], acc))
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        out = {"y": _store(from_channel_rows(affine(xhat, w, bias), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            grads["x"] = _store(from_channel_rows(_centred_dx(g, xhat, rstd), x0.shape), d)
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                bm, bv = mean.reshape(C), var.reshape(C)
                if cfg["convention"] == "torch":
                    ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
                    rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * ub
                else:
                    rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        has_run = st.get("running_mean") is not None
        inst = call.training or not has_run
        if b == "in_var_one_pass" and inst and Nb and S:
            return self._in_one_pass(call, acc)
        r = super()._instance_norm(call, acc)
        if b == "in_dbias_averaged_over_batch" and "bias" in r.grads and Nb > 1:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            db = _rsum(dy).reshape(Nb, C).sum(axis=0) / acc(Nb)
            return Returned(r.outputs, {**r.grads, "bias": _store(db, d)}, r.state)
        if b == "in_running_mean_bessel_scaled" and has_run and call.training and Nb and S > 1:
            rm, rv, _ = running_in(st, acc)
            m = instance_momentum_value(cfg, acc)
            mi = _rsum(x) / S
            ub = instance_unbiased_var(x, mi, acc)
            new_m, _ = instance_running_update(rm, rv, m, mi * acc(S / (S - 1)), ub, Nb, C)
            return Returned(r.outputs, r.grads, {**r.state, "running_mean": _store(new_m, d)})
        return r

    def _in_one_pass(self, call, acc):
        """in_var_one_pass: instance_norm (instance statistics) with one-pass variances."""
        d, st, cfg = call.dtype, call.state, call.config
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        eps = _eps(cfg["eps"], acc)
        mean = _rsum(x) / S
        var = np.maximum(_rsum(x * x) / S - mean * mean, 0)
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if st.get("running_mean") is not None:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                m = instance_momentum_value(cfg, acc)
                ub = var * acc(S / (S - 1)) if S > 1 else var * acc(np.inf)
                rm, rv = instance_running_update(rm, rv, m, mean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, True, acc), state)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        if b == "dyt_grid_from_leading_dim" and x0.ndim >= 3 and x0.size:
            C = x0.shape[-1]
            R0 = x0.shape[0]
            xs = x0.reshape(-1, C)[:R0]
            cot = {k: v.reshape(-1, C)[:R0] for k, v in call.cotangents.items()}
            r = super()._dyt(dataclasses.replace(call, inputs={**inp, "x": xs}, cotangents=cot), acc)
            y = np.zeros((x0.size // C, C), r.outputs["y"].dtype)
            y[:R0] = r.outputs["y"]
            grads = dict(r.grads)
            if "x" in grads:
                dx = np.zeros((x0.size // C, C), grads["x"].dtype)
                dx[:R0] = grads["x"]
                grads["x"] = dx.reshape(x0.shape)
            return Returned({"y": y.reshape(x0.shape)}, grads)
        r = super()._dyt(call, acc)
        if "y" not in call.cotangents:
            return r
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_grad_from_output" and (w is not None or bias is not None):
            dy, g = dy_and_g(call, acc, x.shape, w)
            yv = affine(t, w, bias)
            gd = g * (1 - yv * yv)
            return Returned(r.outputs, dyt_grads(gd * a, _rsum(gd * x).sum(), dy, t, w, bias, inp, x0.shape, d))
        if b == "dyt_dalpha_accum_in_half" and d in ("float16", "bfloat16") and "alpha" in r.grads:
            dy, g = dy_and_g(call, acc, x.shape, w)
            gd = g * (1 - t * t)
            da = _half_row_sums((gd * x).reshape(1, -1), d).reshape(())
            return Returned(r.outputs, {**r.grads, "alpha": _store(np.reshape(da, np.shape(inp["alpha"])), d)})
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        if b == "aln_var_one_pass":
            return self._patched_stats(_one_pass_stats, super()._adaptive_layer_norm, call, acc)
        r = super()._adaptive_layer_norm(call, acc)
        if b == "aln_dscale_from_raw_x" and "scale" in r.grads:
            B, H, T, x, scale, shift = aln_inputs(inp, acc)
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            return Returned(r.outputs, {**r.grads, "scale": _store(per_sample(dy * x, B, T, H), d)})
        if b == "aln_dshift_copied_from_dscale" and "shift" in r.grads:
            B, H, T, x, scale, shift = aln_inputs(inp, acc)
            _, _, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            return Returned(r.outputs, {**r.grads, "shift": _store(per_sample(dy * xhat, B, T, H), d)})
        return r

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        if b == "poly_weight_pointer_not_advanced":
            w0 = inp["weight"]
            r = super()._poly_norm(_with(call, inputs={"weight": np.full_like(w0, w0.reshape(-1)[0])}), acc)
            if "weight" in r.grads:
                return Returned(r.outputs, {**r.grads, "weight": super()._poly_norm(call, acc).grads["weight"]})
            return r
        H, x, wt, bias, eps = poly_inputs(call, acc)
        if b == "poly_eps_outside_root":
            us = [x ** 3, x ** 2, x]
            rs = [1 / (np.sqrt(_rsum(u * u) / H) + eps) for u in us]
            hs = [u * r for u, r in zip(us, rs)]
            grads = {}
            if "y" in call.cotangents:
                dy = call.cotangents["y"].astype(acc).reshape(-1, H)
                grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
            return Returned({"y": _store(poly_combine(wt, hs, bias, acc).reshape(x0.shape), d)}, grads)
        r = super()._poly_norm(call, acc)
        if b == "poly_bwd_linear_term_dropped" and "x" in r.grads:
            hs, rs = poly_normalize([x ** 3, x ** 2, x], eps, acc)
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2)):
                dx = dx + p * x ** (p - 1) * rms_dx(dy * wt[k], hs[k], rs[k])
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        _, n, _ = _axes_rows(x0, cfg["dim"])
        if b == "zs_mean_sum_in_half" and d in ("float16", "bfloat16") and n:
            return self._zs_with_count(call, acc, n, half_mean=True)
        r = super()._z_score(call, acc)
        m = n - int(cfg["ddof"])
        if b == "zs_dx_divided_by_variance" and "x" in r.grads and m > 0:
            x, _, back = _axes_rows(x0.astype(acc), cfg["dim"])
            mean = _axes_rows(r.outputs["mean"].astype(acc), cfg["dim"])[0]
            std = _axes_rows(r.outputs["std"].astype(acc), cfg["dim"])[0]
            safe = np.where(std == 0, acc(1), std)
            xhat = np.where(std == 0, acc(0), (x - mean) / safe)
            dy = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])[0]
            w = inp.get("weight")
            g = dy if w is None else dy * w.astype(acc).reshape(1, n)
            inner = g - _rsum(g) / acc(n) - xhat * (_rsum(g * xhat) / acc(m))
            dx = np.where(std == 0, acc(0), inner / (safe * safe))
            return Returned(r.outputs, {**r.grads, "x": _store(back(dx), d)})
        if b == "zs_bwd_weight_after_projection" and "x" in r.grads and inp.get("weight") is not None and m > 0:
            x, _, back = _axes_rows(x0.astype(acc), cfg["dim"])
            mean = _axes_rows(r.outputs["mean"].astype(acc), cfg["dim"])[0]
            std = _axes_rows(r.outputs["std"].astype(acc), cfg["dim"])[0]
            safe = np.where(std == 0, acc(1), std)
            xhat = np.where(std == 0, acc(0), (x - mean) / safe)
            dy = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])[0]
            inner = dy - _rsum(dy) / acc(n) - xhat * (_rsum(dy * xhat) / acc(m))
            dx = np.where(std == 0, acc(0), inp["weight"].astype(acc).reshape(1, n) * inner / safe)
            return Returned(r.outputs, {**r.grads, "x": _store(back(dx), d)})
        return r

    def _zs_with_count(self, call, acc, cnt, half_mean=False):
        """z_score with the count ``cnt`` for the divisors and, when ``half_mean``, the mean summed in the
        16-bit input dtype (zs_mean_sum_in_half)."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        m = cnt - int(cfg["ddof"])
        if m <= 0:
            return super()._z_score(call, acc)
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        mean = (_half_row_sums(x, d) if half_mean else _rsum(x)) / acc(cnt)
        dev = x - mean
        std = np.sqrt(_rsum(dev * dev) / acc(m) + acc(cfg["eps"]))
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        out = {"y": _store(back(affine(xhat, w, bias)), d), "mean": back(mean, True).astype(acc),
               "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            inner = g - _rsum(g) / acc(cnt) - xhat * (_rsum(g * xhat) / acc(m))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        torch_rule = cfg["zero_rule"] == "torch"
        if b == "lp_torch_rule_read_as_onnx" and torch_rule:
            return super()._lp_normalize(_with(call, config={"zero_rule": "onnx"}), acc)
        r = super()._lp_normalize(call, acc)
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        if b == "lp_norm_output_reciprocal" and n:
            norm = r.outputs["norm"].astype(acc)
            with np.errstate(divide="ignore"):
                return Returned({**r.outputs, "norm": (acc(1) / norm).astype(acc)}, r.grads)
        if b == "lp_eps_added_to_norm" and torch_rule and n:
            p, eps = float(cfg["p"]), acc(cfg["eps"])
            norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
            den = norm + eps
            out = {**r.outputs, "y": _store(back(x / den), d)}
            grads = dict(r.grads)
            if "x" in grads:
                dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
                safe = np.where(norm > 0, norm, acc(1))
                u = x / safe
                wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
                dx = dy / den - wv * (_rsum(dy * x) / (den * den))
                grads["x"] = _store(back(dx), d)
            return Returned(out, grads)
        return r
