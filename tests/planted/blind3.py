"""A third held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind3Kernel(None)`` is a correct NumPy kernel for thirteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to
float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the
output dtype at the end (round to nearest even), statistics (mean, rstd, amax, scales) returned in float32.
It declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Its arithmetic follows tests/planted/blind.py and blind2.py (the same conventions);
the correct pieces the three sets share are in tests/planted/_blind_math.py, and each bug is planted here,
where a kernel author would make it.

``Blind3Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy),
or None where none fits. ``source`` is a public bug report or fix where the mistake really happened (a
GitHub issue or pull request), "cf. ..." where a public report shows the same mistake in a neighbouring
kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol and public bug reports only, by an author who did not read refnorm's diagnosis (issue 33). None
of its bugs repeats one of tests/planted/blind.py or blind2.py.
"""
from __future__ import annotations

import functools

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, aln_inputs, BlindKernelBase, block_quotients,
                          bn_running_update, centred_dx as _centred_dx, channel_dy_and_g, channel_grads,
                          channel_outputs, channel_params, channel_rows, channel_sums, dyt_gd, dyt_grads, dyt_inputs,
                          eps_value as _eps, frexp_exp as _frexp_exp, FUSED_OPTIONS, gate_group_size, gated_dn,
                          gated_dx, gated_grads, gated_inputs, gated_normalize, group_params, group_rows,
                          GroupNormPair, half as _half, instance_grads, instance_momentum_value, instance_outputs,
                          instance_params, instance_rows, instance_running_update, instance_stats,
                          instance_unbiased_var, kept, ln_rows, ln_stats, mx_scales, nan_running, norm_outputs,
                          norm_quant_returned, normalized_rows, nqb_format, nqb_normalized, nqb_returned,
                          nvfp4_block_scales, nvfp4_encode, padded_blocks, per_token, poly_combine, poly_grads,
                          poly_inputs, poly_normalize, pow2_scale, pow2_up, QUANT as _QUANT, quant_quotients,
                          rms_norm_dx, rms_rows, rms_stats, row_affine, rsum as _rsum, running_in, running_setup,
                          running_state, scale_floor, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)

LABELS = ("one_pass", "precision", "block", "eps", "bessel", "running", "mode", "backward", "reduction",
          "layout", "affine", "semantics", "window", "quant_scale", "saturation", "merge", "collective",
          "dropout", "rounding", "gate", "group", "scale_rounding", "constant")
OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind3Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_stats_stored_in_input_dtype": (
        "layer_norm", "precision",
        "mean and rstd written to buffers of the 16-bit input dtype (and the normalization reads them back "
        "from there)",
        GH + "flagos-ai/FlagGems/pull/221 (layer_norm: save mean and rstd in float32 when the inputs are "
        "half-precision)"),
    "ln_dweight_unnormalized": (
        "layer_norm", "backward",
        "dweight = sum over rows of dy * (x - mean): the factor rstd of x_hat left out",
        "pattern: the centred x kept in registers and reused for the weight gradient"),
    "ln_bwd_proj_without_rstd": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g)) - x_hat * mean(g * x_hat): rstd multiplies the first two terms only",
        "pattern: a misplaced parenthesis in a hand-derived LayerNorm backward"),
    "ln_float64_in_float32": (
        "layer_norm", "precision",
        "float64 inputs computed with float32 statistics and arithmetic (x.to(float32) whatever the input)",
        "pattern: a Triton kernel casting every load with .to(tl.float32), float64 included"),
    "ln_dweight_first_block_twice": (
        "layer_norm", "reduction",
        "dweight/dbias partial sums per block of 4 rows; the final reduction starts from block 0's partial "
        "and then adds every block, block 0 included",
        "pattern: a partial-sum buffer initialised with the first program's result and then summed whole"),
    # ------------------------------------------------------------------ rms_norm
    "rms_llama_cast_before_weight": (
        "rms_norm", "affine",
        "x_hat rounded to the 16-bit input dtype before the multiply by the weight (two roundings: "
        "weight * x_hat.to(dtype)), the Llama order instead of one rounding of x_hat * weight",
        GH + "huggingface/transformers/pull/29402 (Llama casts x_hat to half before the weight, Gemma "
        "after; cf. InternLM/lmdeploy/pull/2842)"),
    "rms_offset_added_in_input_dtype": (
        "rms_norm", "affine",
        "weight_offset (Gemma's 1 + weight) added in the 16-bit input dtype: (1 + weight) rounded to "
        "bfloat16/float16 before the float32 multiply",
        GH + "vllm-project/vllm/pull/29810 (review: weight_bias + weight must be added in fp32) and "
        "vllm-project/vllm/pull/53203"),
    "rms_bwd_no_projection": (
        "rms_norm", "backward",
        "dx = g * rstd: the projection term - x_hat * mean(g * x_hat) missing (rstd treated as a constant)",
        GH + "ooples/AiDotNet/pull/695 (review: RmsNormBackward ignores the dependency of rms on the input, "
        "gradInput = go * g * invRms)"),
    "rms_eps_none_as_1e-6": (
        "rms_norm", "eps",
        "eps=None resolved to 1e-6 (the Llama default) instead of finfo(float32).eps",
        "cf. " + GH + "apache/tvm/pull/15856 (the CUTLASS RMS kernel hard-coded eps = 1e-6 instead of the "
        "model's value)"),
    "rms_dweight_rows_in_half": (
        "rms_norm", "precision",
        "dweight's per-row-block partial sums (blocks of 4 rows) stored in the 16-bit input dtype before "
        "the final float32 sum over blocks",
        "pattern: the _dw partial buffer allocated with x's dtype (triton tutorial 05's DW buffer in "
        "the input dtype)"),
    # ------------------------------------------------------------------ add_norm
    "an_stats_from_rounded_sum": (
        "add_norm", "precision",
        "the statistics and the normalization use s = x + residual rounded to the 16-bit input dtype, "
        "while residual_out is the exact sum",
        GH + "vllm-project/vllm/issues/52104 (fused_add_rms_norm rounds the residual sum before the "
        "variance; fixed by PR #52151)"),
    "an_prenorm_dresidual_dropped": (
        "add_norm", "backward",
        "prenorm=True: the cotangent of residual_out is not added to ds (dx and dresidual miss it)",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (RMS prenorm backward combined dresidual_out wrongly) and "
        "Dao-AILab/quack/pull/52 (no gradient returned for the residual)"),
    "an_dresidual_scaled": (
        "add_norm", "dropout",
        "dresidual = ds * c: the branch's dropout / rowscale factor applied to the residual's gradient too",
        "pattern: one gradient buffer written for both x and residual in a fused dropout-add-norm backward"),
    "an_y1_uses_weight": (
        "add_norm", "affine",
        "the parallel branch's output y1 = x_hat * weight + bias1: weight1 ignored (weight used twice)",
        "pattern: flash-attention's parallel-residual LayerNorm port reading W instead of W1"),
    "an_mask_on_residual": (
        "add_norm", "dropout",
        "the dropout mask and 1 / (1 - p) applied to the sum x + residual instead of to x alone",
        "cf. " + GH + "hyunwoongko/transformer/issues/8 (dropout must come before the residual add, not after)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_round_half_away": (
        "norm_quant", "rounding",
        "int8: y / scale rounded half away from zero (roundf) instead of to nearest even",
        GH + "hw-native-sys/pypto-lib/pull/279 (INT8 quant mode='round' half-away-from-zero, fixed to rint); "
        "cf. tenstorrent/tt-metal/issues/56525"),
    "nq_scale_is_reciprocal": (
        "norm_quant", "quant_scale",
        "the returned scale is qmax / amax (the multiplier the kernel applies) instead of amax / qmax",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1145 (fp8 quantization scale in the wrong direction: "
        "the quant multiplier returned where the dequant scale is meant)"),
    "nq_amax_before_affine": (
        "norm_quant", "quant_scale",
        "amax taken over x_hat before the weight and bias are applied; q = y / that scale",
        "pattern: the row's absmax computed in the statistics pass, before the affine"),
    "nq_ln_one_pass_variance": (
        "norm_quant", "one_pass",
        "layer_norm + quant: the variance as E[x^2] - E[x]^2 from one pass of float32 sums (clamped at 0)",
        GH + "tracel-ai/burn/issues/5607 (fused f32 layer_norm's E[x^2] - E[x]^2 loses rows with a large "
        "mean); cf. pytorch/pytorch/pull/55044"),
    "nq_min_scale_dropped": (
        "norm_quant", "quant_scale",
        "the dynamic scale's floor (min_scale, default 1 / (qmax * 512)) never applied",
        "cf. vllm csrc/quantization/fp8/common.cuh (min_scaling_factor = 1 / (FP8_MAX * 512)) missing in "
        "a port"),
    # ------------------------------------------------------------------ group_norm
    "gn_spatial_tail_dropped": (
        "group_norm", "block",
        "the spatial loop runs over whole blocks of 4 positions only: the last partial block of each "
        "channel never enters the sums (the count stays cg * S)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (fused group_norm statistics wrong for a "
        "non-tile-aligned H*W; fixed by PR #51159)"),
    "gn_bwd_count_per_channel": (
        "group_norm", "group",
        "the backward's mean(g) and mean(g * x_hat) divided by S (one channel's count) instead of "
        "cg * S (the group's)",
        "pattern: the element count of the forward's per-channel loop reused for the group's mean"),
    "gn_dweight_group_summed": (
        "group_norm", "group",
        "dweight and dbias reduced over the whole group's channels (one value per group, repeated over "
        "its channels) instead of per channel",
        "pattern: the per-(sample, group) partials of dx reused for the parameter gradients"),
    # ------------------------------------------------------------------ gated_norm
    "gated_sigmoid_gate": (
        "gated_norm", "gate",
        "the gate is sigmoid(z) instead of silu(z) = z * sigmoid(z), forward and backward",
        "cf. " + GH + "vllm-project/vllm/pull/40245 (RMSNormGated's sigmoid vs silu gate differing between "
        "its two implementations)"),
    "gated_bwd_dx_ungated": (
        "gated_norm", "gate",
        "norm_before_gate=False: dx = dv, the gate's factor silu(z) of d(x * silu(z))/dx left out",
        "pattern: the gate treated as applied after the norm in the backward only"),
    "gated_dweight_ungated_dy": (
        "gated_norm", "gate",
        "norm_before_gate=True: dweight and dbias summed from dy instead of dy * silu(z)",
        "pattern: the parameter reductions fed the incoming cotangent before the gate's product"),
    # ------------------------------------------------------------------ batch_norm
    "bn_nbt_not_incremented": (
        "batch_norm", "running",
        "training returns num_batches_tracked unchanged (the update itself uses the incremented count)",
        "cf. " + GH + "NVIDIA/Fuser/pull/1206 (review: num_stats unused, momentum=None unsupported) and "
        "Oneflow-Inc/oneflow/issues/7440 (num_batches_tracked missing)"),
    "bn_running_var_not_updated": (
        "batch_norm", "running",
        "training updates running_mean only; running_var is returned unchanged",
        GH + "keras-team/keras-core/pull/339 (Fix Batch Norm Variance: moving_variance not updated in "
        "training, issue #338)"),
    "bn_nostats_eval_unit_stats": (
        "batch_norm", "mode",
        "eval without running statistics (track_running_stats=False): normalized with the buffers' initial "
        "values (mean 0, var 1) instead of the batch statistics",
        "cf. " + GH + "pytorch/pytorch/issues/37823 (which statistics BatchNorm uses in eval with "
        "track_running_stats=False; fixed by PR #38084)"),
    "bn_eval_eps_missing": (
        "batch_norm", "eps",
        "eval with running statistics: rstd = 1 / sqrt(running_var) without eps",
        GH + "Tencent/ncnn/issues/303 (inference BatchNorm sqrt(var) without eps; PR #311) and "
        "chainer/chainer/pull/2214 (eps added to fixed_batch_normalization's variance)"),
    # ------------------------------------------------------------------ instance_norm
    "in_eval_updates_running": (
        "instance_norm", "running",
        "eval with running statistics: the output is right, but the running buffers are still updated "
        "with the instances' statistics",
        "cf. " + GH + "pytorch/pytorch/issues/20967 (running statistics tracked when they should not be)"),
    "in_unbiased_normalization": (
        "instance_norm", "bessel",
        "each instance normalized with its unbiased variance (S - 1) instead of the biased one",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a normalization written with torch.var's default "
        "unbiased estimator disagreeing with GroupNorm)"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_in_input_dtype": (
        "dyt", "precision",
        "tanh(alpha * x) evaluated on and rounded to the 16-bit input dtype before the float32 affine "
        "(two roundings)",
        "pattern: torch.tanh(self.alpha * x) on the half tensor, then the affine in float32"),
    "dyt_dalpha_mean_over_rows": (
        "dyt", "reduction",
        "dalpha averaged over the rows (divided by the row count) instead of summed",
        "pattern: .mean() instead of .sum() in the scalar parameter's reduction"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_bwd_no_silu_grad": (
        "group_norm_silu", "backward",
        "the backward ignores the SiLU: dx, dweight and dbias are group_norm's gradients of dy",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/185 (fused norm/conv + activation backward: an "
        "activation without a case passes the gradient through, '_ => gradOutput')"),
    "gns_silu_of_xhat_times_weight": (
        "group_norm_silu", "affine",
        "y = silu(x_hat * weight) + bias: the bias added after the SiLU",
        "pattern: the epilogue's bias add placed after the activation"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_no_saturation": (
        "norm_quant_block", "saturation",
        "mxfp8 (floor rule): y / scale converted to float8_e4m3fn without a clamp at 448; a value in "
        "(464, 512) becomes NaN",
        GH + "uxlfoundation/oneDNN/pull/5626 (fp8: saturate the output after dynamic e8m0 scaling instead "
        "of overflowing)"),
    "nqb_tensor_scale_inverted": (
        "norm_quant_block", "quant_scale",
        "nvfp4: the tensor scale handed out (and used in the dequantization) as the encode factor "
        "2688 / amax instead of its reciprocal",
        GH + "modular/modular/issues/6600 (NVFP4 per-tensor global scale not re-inverted: applied as its "
        "reciprocal)"),
    "nqb_pow2_rounded_down": (
        "norm_quant_block", "scale_rounding",
        "fp8_group scale_rule='pow2': the scale amax / qmax rounded down to a power of two (floor of the "
        "exponent) instead of up, so y / scale reaches up to 2 qmax and is clipped",
        GH + "inclusionAI/humming/pull/39 (UE8M0 scale rounding: (bits & 0x7F800000) + 1 floored the "
        "exponent; fixed to round up)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_scale_without_one": (
        "adaptive_layer_norm", "affine",
        "y = x_hat * scale + shift instead of x_hat * (1 + scale) + shift (and g = dy * scale)",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/789 (adaLN's weight passed as scale vs 1 + scale); "
        "DiT's modulate x * (1 + scale) + shift"),
    "aln_shift_scale_swapped": (
        "adaptive_layer_norm", "affine",
        "shift and scale swapped: y = x_hat * (1 + shift) + scale",
        "pattern: adaLN's chunk order (shift, scale, gate) read as (scale, shift, gate)"),
    "aln_modulation_row_mod_batch": (
        "adaptive_layer_norm", "layout",
        "x flattened to (B * T, H) rows and the per-sample scale and shift read at row % B instead of "
        "row // T (the sample of a row taken from the wrong stride)",
        "pattern: a per-row program indexing the (B, H) modulation with pid % B in a fused adaLN kernel"),
    "aln_dscale_over_batch": (
        "adaptive_layer_norm", "reduction",
        "dscale and dshift summed over the batch as well as the tokens (one vector broadcast to every "
        "sample)",
        "pattern: the reduction over all leading axes of a LayerNorm's dweight kept for per-sample "
        "modulation"),
    # ------------------------------------------------------------------ poly_norm
    "poly_shared_rms": (
        "poly_norm", "semantics",
        "the three powers divided by one rms (that of x^3) instead of each by its own",
        "pattern: one reduction reused for the three normalizations"),
}


class Blind3Kernel(GroupNormPair, BlindKernelBase):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct);
    ``options``: see BlindKernelBase."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind3"
    options = dict.fromkeys(FUSED_OPTIONS)

    # ------------------------------------------------------------ shared row statistics (2-D: rows x n)
    _ln_stats, _rms_stats = staticmethod(ln_stats), staticmethod(rms_stats)

    @staticmethod
    def _block_col_sums(t, block, dtype=None):
        """Column sums of (rows, n) as partial sums over blocks of ``block`` rows, then over the blocks;
        ``dtype``: the partials rounded to that 16-bit dtype."""
        rows = t.shape[0]
        parts = [t[i:i + block].sum(axis=0) for i in range(0, rows, block)] or [np.zeros(t.shape[1], t.dtype)]
        parts = np.stack(parts)
        if dtype is not None:
            parts = _half(parts, dtype)
        return parts

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        if b == "ln_float64_in_float32":
            acc = np.float32
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        off = weight_offset(call, acc)
        w, bias = call.inputs.get("weight"), call.inputs.get("bias")
        w = None if w is None else w.astype(acc).reshape(1, N) + off
        bias = None if bias is None else bias.astype(acc).reshape(1, N)
        mean, rstd = self._ln_stats(x, _eps(call.config["eps"], acc))
        if b == "ln_stats_stored_in_input_dtype":
            mean, rstd = _half(mean, d), _half(rstd, d)
        xc = x - mean
        xhat = xc * rstd
        y = affine(xhat, w, bias)
        sdt = np.float64 if d == "float64" else np.float32              # the statistics' buffers
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, sdt)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy if w is None else dy * w
            if b == "ln_bwd_proj_without_rstd":
                dx = rstd * (g - _rsum(g) / N) - xhat * (_rsum(g * xhat) / N)
            else:
                dx = _centred_dx(g, xhat, rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            tw = dy * (xc if b == "ln_dweight_unnormalized" else xhat)

            def colsum(t):
                if b == "ln_dweight_first_block_twice":
                    parts = self._block_col_sums(t, 4)
                    return parts[0] + parts.sum(axis=0)
                return t.sum(axis=0)
            if w is not None:
                grads["weight"] = _store(colsum(tw).reshape(ns), d)
            if bias is not None:
                grads["bias"] = _store(colsum(dy).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        placement = call.config.get("eps_placement", "inside")
        off = weight_offset(call, acc)
        w = call.inputs.get("weight")
        if w is not None and b == "rms_offset_added_in_input_dtype" and off:
            w = _store(w.astype(acc) + off, d).astype(acc).reshape(1, N)
        elif w is not None:
            w = w.astype(acc).reshape(1, N) + off
        eps = call.config["eps"]
        eps = acc(1e-6) if eps is None and b == "rms_eps_none_as_1e-6" else _eps(eps, acc)
        rms, rstd = self._rms_stats(x, eps, placement)
        xhat = x * rstd
        if b == "rms_llama_cast_before_weight":
            y = _half(xhat, d) if w is None else _half(xhat, d) * w
        else:
            y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy if w is None else dy * w
            dx = g * rstd if b == "rms_bwd_no_projection" else rms_norm_dx(g, x, xhat, rstd, rms, placement)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if w is not None:
                t = dy * xhat
                if b == "rms_dweight_rows_in_half" and d in ("float16", "bfloat16"):
                    dw = self._block_col_sums(t, 4, d).sum(axis=0)
                else:
                    dw = t.sum(axis=0)
                grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        """(out, grads) of group_norm, or of group_norm_silu when ``silu``."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "gn_spatial_tail_dropped" and S % 4:
            keep = x[:, :, :S - S % 4].reshape(Nb * G, -1)          # whole blocks of 4 positions only
            mean = _rsum(keep) / (cg * S)
            dk = keep - mean
            rstd = 1 / np.sqrt(_rsum(dk * dk) / (cg * S) + eps)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = xhat if w is None else xhat * w
        if silu and b == "gns_silu_of_xhat_times_weight":
            s, _ = _sigmoids(p)
            y = p * s if bias is None else p * s + bias
            p = p if bias is None else p + bias
        else:
            p = p if bias is None else p + bias
            y = p
            if silu:
                s, _ = _sigmoids(p)
                y = p * s
        out = {"y": _store(y.reshape(x0.shape), d), "mean": mean.reshape(Nb, G).astype(acc),
               "rstd": rstd.reshape(Nb, G).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            if silu and b != "gns_bwd_no_silu_grad":
                s, rest = _sigmoids(p)
                dy = dy * (s * (1 + p * rest))
            g = (dy if w is None else dy * w).reshape(Nb * G, cg * S)
            xh = xhat.reshape(Nb * G, cg * S)
            if b == "gn_bwd_count_per_channel":
                dx = rstd * (g - _rsum(g) / S - xh * (_rsum(g * xh) / S))
            else:
                dx = _centred_dx(g, xh, rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)

            def per_channel(a):
                v = channel_sums(a, C)
                if b == "gn_dweight_group_summed":
                    v = np.repeat(v.reshape(G, cg).sum(axis=1), cg)
                return v
            if w is not None:
                grads["weight"] = _store(per_channel(dy * xhat), d)
            if bias is not None:
                grads["bias"] = _store(per_channel(dy), d)
        return out, grads

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or (not has_run and b != "bn_nostats_eval_unit_stats")
        if batch:
            mean, rstd = self._ln_stats(x, eps)
        elif not has_run:                                        # the buffers' initial values
            mean, rstd = np.zeros((C, 1), acc), np.full((C, 1), 1 / np.sqrt(acc(1) + eps), acc)
        else:
            mean = st["running_mean"].astype(acc).reshape(C, 1)
            e = acc(0) if b == "bn_eval_eps_missing" else eps
            rstd = 1 / np.sqrt(st["running_var"].astype(acc).reshape(C, 1) + e)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt_out = nbt if b == "bn_nbt_not_incremented" else nbt + 1    # the count handed back
                nbt = nbt + 1
                mom = cfg["momentum"]
                m = acc(1.0 / float(nbt)) if mom is None else acc(mom)
                rm, new_rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc)
                rv = rv if b == "bn_running_var_not_updated" else new_rv
                nbt = nbt_out
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy, g = channel_dy_and_g(call, acc, w)
            if batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = channel_grads(dx, dy, xhat, w, bias, x0.shape, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        cfg, st, eps, has_run = running_setup(call, acc)
        inst = call.training or not has_run
        stats = functools.partial(ln_stats, ddof=1 if b == "in_unbiased_normalization" else 0)
        mean, rstd, xhat = instance_stats(x, st, Nb, eps, acc, inst, stats)
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif (call.training or b == "in_eval_updates_running") and S > 0:
                m = instance_momentum_value(cfg, acc)
                mi, _ = self._ln_stats(x, eps)                 # the instances' own statistics
                rm, rv = instance_running_update(rm, rv, m, mi, instance_unbiased_var(x, mi, acc), Nb, C)
            state = running_state(rm, rv, nbt, d)
        return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, inst, acc), state)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        nbg = bool(cfg["norm_before_gate"])
        if b == "gated_sigmoid_gate":
            sig, rest = _sigmoids(z)
            s, ds = sig, sig * rest
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        eps = _eps(cfg["eps"], acc)
        rstd, vhat, nrm = gated_normalize(v, w, bias, eps, K, cfg["norm"], self._ln_stats)
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            vh = vhat.reshape(-1, K)
            dv = gated_dx(cfg["norm"], g, vh, rstd)
            dv = dv.reshape(R, H)
            if nbg:
                dx, dz = dv, dy * nrm * ds
            else:
                dx = dv if b == "gated_bwd_dx_ungated" else dv * s
                dz = dv * x * ds
            dp = dy if nbg and b == "gated_dweight_ungated_dy" else dn
            grads = gated_grads(dx, dz, dp, None if bias is None else dp, vhat, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_in_input_dtype":
            t = _half(np.tanh(_half(a * x, d)), d)
        y = affine(t, w, bias)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(x.shape)
            gd = dyt_gd(dy, w, a, x)
            part = _rsum(gd * x)                                  # (rows, 1)
            da = part.sum()
            if b == "dyt_dalpha_mean_over_rows" and part.shape[0]:
                da = da / acc(part.shape[0])
            grads = dyt_grads(gd * a, da, dy, t, w, bias, inp, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        powers = (3, 2, 1)
        us = [x ** p for p in powers]
        hs, rs = poly_normalize(us, eps, acc)
        if b == "poly_shared_rms":
            hs, rs = [u * rs[0] for u in us], [rs[0]] * 3
        y = poly_combine(wt, hs, bias, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        yb, amax = padded_blocks(y, B, acc)                              # amax: (R, nb)
        ts = acc(1.0)
        if fmt == "fp8_group":
            v = np.maximum(amax / acc(qmax), acc(cfg["min_scale"] or 0.0))
            if rule == "pow2":
                m, e = _frexp_exp(v)
                S = pow2_scale(v, e - 1 if b == "nqb_pow2_rounded_down" else pow2_up(m, e), acc)
            else:
                S = v
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts = enc if b == "nqb_tensor_scale_inverted" else acc(1) / enc
            S, scale_out = nvfp4_block_scales(amax, enc, ts, acc)
        q = block_quotients(yb, S, acc)
        if not (b == "nqb_mx_no_saturation" and fmt == "mxfp8"):
            q = np.clip(q, -qmax, qmax)
        return nqb_returned(q, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ add_norm
    _ln_rows, _rms_rows = staticmethod(ln_rows), staticmethod(rms_rows)

    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        c1 = None
        if b == "an_mask_on_residual" and res is not None and (mask is not None or p):
            md = np.ones((R, N), acc) if mask is None else mask
            md = md * keep if p else md
            s = x * (c / md if mask is None else np.where(md == 0, 0, c / np.where(md == 0, 1, md)))
            s = s + res
            if x1 is not None:
                c1 = kept(mask1, None, keep, p, (R, N), acc)
                s = s + x1 * c1
            s = s * md
        else:
            s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        if b == "an_y1_uses_weight" and w1 is not None and we is not None:
            we1 = we
        sn = _half(s, d) if b == "an_stats_from_rounded_sum" else s     # the sum the norm reads
        if cfg["norm"] == "layer_norm":
            _, rstd, xhat = self._ln_rows(sn, eps)
            rms = None
        else:
            rms, rstd, xhat = self._rms_rows(sn, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        grads = {}
        if "y" in call.cotangents:
            prenorm = cfg["prenorm"] and b != "an_prenorm_dresidual_dropped"
            ds, dy, dy1 = add_norm_ds(call, xhat, rstd, cfg["norm"] == "layer_norm", we, we1, prenorm, acc)
            dres = None if res is None else (ds * c if b == "an_dresidual_scaled" else ds)
            grads = add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xhat, (w, bias, w1, b1), x, mask, keep, p, ns, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm" and b == "nq_ln_one_pass_variance":
            mean = _rsum(x) / N
            var = np.maximum(_rsum(x * x) / N - mean * mean, 0)
            xhat = (x - mean) / np.sqrt(var + eps)
        elif cfg["norm"] == "layer_norm":
            _, _, xhat = self._ln_rows(x, eps)
        else:
            _, _, xhat = self._rms_rows(x, eps)
        y = row_affine(xhat, w, bias, acc)
        qd = cfg["quant_dtype"]
        qdt, lo, hi = _QUANT[qd]
        qmax = hi
        amax = np.max(np.abs(xhat if b == "nq_amax_before_affine" else y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
            scale_out = scale
        else:
            scale = amax / acc(qmax)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            if b != "nq_min_scale_dropped":
                scale = scale_floor(scale, cfg, hi, acc)
            scale_out = 1 / scale if b == "nq_scale_is_reciprocal" else scale
        v = quant_quotients(y, scale, lo, hi, acc)
        if qdt.kind == "i":
            v = np.nan_to_num(v, nan=0.0)
            if b == "nq_int8_round_half_away":
                q = (np.sign(v) * np.floor(np.abs(v) + acc(0.5))).astype(np.int8)
            else:
                q = np.rint(v).astype(np.int8)
        else:
            q = v.astype(qdt)
        return norm_quant_returned(q, scale_out, amax, x0, ns, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)     # T: tokens per sample
        if b == "aln_shift_scale_swapped" and scale is not None and shift is not None:
            scale, shift = shift, scale

        def per_row(v):                                     # (B, H) -> (B * T, H)
            if b == "aln_modulation_row_mod_batch":
                return np.tile(v.astype(acc).reshape(B, H), (T, 1))       # row r reads sample r % B
            return per_token(v, B, H, T, acc)
        mean, rstd, xhat = self._ln_rows(x, _eps(call.config["eps"], acc))
        if scale is None:
            gain = None
        else:
            gain = per_row(scale) if b == "aln_scale_without_one" else acc(1) + per_row(scale)
        y = xhat if gain is None else xhat * gain
        y = y if shift is None else y + per_row(shift)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            g = dy if gain is None else dy * gain
            grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)

            def per_sample(t):                              # (B * T, H) -> (B, H), summed over the tokens
                v = t.reshape(B, T, H).sum(axis=1)
                if b == "aln_dscale_over_batch":
                    v = np.broadcast_to(v.sum(axis=0, keepdims=True), v.shape)
                return v
            ds_, dsh = (per_sample(dy * xhat) if scale is not None else None,
                        per_sample(dy) if shift is not None else None)
            if b == "aln_shift_scale_swapped" and scale is not None and shift is not None:
                ds_, dsh = dsh, ds_
            if ds_ is not None:
                grads["scale"] = _store(ds_, d)
            if dsh is not None:
                grads["shift"] = _store(dsh, d)
        return Returned(out, grads)
