"""A second held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind2Kernel(None)`` is a correct NumPy kernel for ten ops (layer_norm, rms_norm, group_norm, batch_norm,
instance_norm, gated_norm, dyt, poly_norm, group_norm_silu, norm_quant_block) written the way a fused float32
GPU kernel computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each
row summed pairwise, one rounding to the output dtype at the end (round to nearest even), statistics
(mean, rstd, amax, scales) returned in float32. It declares the "strict" contract and must pass refnorm's
check on the golden cases of its ops (tests/test_blind.py). The correct pieces the blind sets share are in
tests/planted/_blind_math.py; every bug is planted here.

``Blind2Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, from the taxonomy of tests/planted/blind.py
(``MECHANISMS``), or None where none fits. ``source`` is a public bug report or fix where the mistake
really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same mistake
in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol and public bug reports only, by an author who did not read refnorm's diagnosis (issue 33). None
of its bugs repeats one of tests/planted/blind.py.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, BlindKernelBase, block_layout, bn_normalize, bn_running_update,
                          centred_dx as _centred_dx, channel_dy_and_g, channel_grads, channel_outputs, channel_params,
                          channel_rows, dy_and_g, dyt_inputs, e8m0_scale, eps_value as _eps, frexp_exp as _frexp_exp,
                          gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_normalize, group_dims, group_params,
                          GroupNormPair, half as _half, instance_grads, instance_momentum, instance_momentum_value,
                          instance_outputs, instance_params, instance_rows, instance_stats, nan_running,
                          normalized_rows, normalized_shape as _ns, nqb_format, nqb_normalized, nqb_quantized,
                          nvfp4_encode, poly_combine, poly_rstd, pow2 as _pow2, pow2_up, rms_dx, rsum as _rsum,
                          running_in, running_setup, running_state, sigmoids as _sigmoids, store as _store,
                          weight_offset)
from planted.blind import MECHANISMS

OPS = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "gated_norm", "dyt",
       "poly_norm", "group_norm_silu", "norm_quant_block")
__all__ = ("BUGS", "MECHANISMS", "OPS", "Blind2Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_eps_added_to_std": (
        "layer_norm", "eps",
        "rstd = 1 / (sqrt(var) + eps): eps added to the standard deviation instead of inside the square root",
        "pattern: a_2 * (x - mean) / (std + eps) (the annotated-transformer LayerNorm) ported as a kernel "
        "of the inside-eps op"),
    "ln_rstd_output_is_std": (
        "layer_norm", "semantics",
        "the saved statistic handed out as 'rstd' is sqrt(var + eps) (the kernel's sigma), not its reciprocal",
        "pattern: a kernel saving 'sigma' or 'invvar' under the other name (apex's invvar vs rstd conventions)"),
    "ln_last_axis_only": (
        "layer_norm", "window",
        "a multi-axis normalized_shape normalized over its last axis only (statistics per trailing row); "
        "the kernel returns no mean/rstd",
        "cf. " + GH + "Qualcomm-AI-research/geometric-algebra-transformer/pull/8 and reczoo/FuxiCTR#23 "
        "(layer norm over the wrong set of axes)"),
    "ln_bwd_recompute_from_y": (
        "layer_norm", "precision",
        "memory-efficient backward: x_hat recomputed as (y - bias) / weight from the output y already "
        "rounded to the 16-bit input dtype",
        GH + "NVIDIA/apex/pull/1715 (LayerNorm/RMSNorm memory_efficient: backward from the saved output)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_dweight_sum_in_half": (
        "rms_norm", "precision",
        "dweight: the products dy * x_hat rounded to the 16-bit input dtype and the sum over rows "
        "accumulated in it",
        GH + "linkedin/Liger-Kernel/pull/950 (block RMSNorm backward: tl.sum over bfloat16 terms)"),
    "rms_rstd_saved_in_input_dtype": (
        "rms_norm", "precision",
        "rstd computed in float32 but stored (and reused by the normalization and the backward) in the "
        "16-bit input dtype",
        GH + "pytorch/helion/pull/2273 (rms_norm: save inv_rms in fp32 to fix bf16 backward)"),
    "rms_outside_bwd_inside_formula": (
        "rms_norm", "backward",
        "eps_placement='outside': the forward is right, the backward uses the inside-eps derivative "
        "(projection on x_hat instead of on x / rms)",
        "pattern: one backward kernel shared by both eps placements"),
    "rms_mean_over_block": (
        "rms_norm", "block",
        "mean(x^2) divided by the power-of-two block width instead of the row length n",
        "pattern: tl.sum(x * x) / BLOCK_SIZE in a masked Triton row kernel"),
    "rms_divides_by_rsqrt": (
        "rms_norm", "semantics",
        "y = x / rsqrt(mean(x^2) + eps) (multiplies by the rms) instead of x * rsqrt(...)",
        GH + "mosaicml/llm-foundry/pull/372 (RMSNorm divided by torch.rsqrt)"),
    # ------------------------------------------------------------------ group_norm
    "gn_merge_without_delta": (
        "group_norm", "merge",
        "group variance as the average of the per-channel variances: the parallel (Chan) combine of the "
        "channels' partial moments drops the mean-difference term",
        "cf. " + GH + "speechbrain/speechbrain/pull/2835 (normalization variance combine fixed) and "
        "Oneflow-Inc/oneflow#7471 (WelfordCombine's delta term)"),
    "gn_dweight_first_sample": (
        "group_norm", "reduction",
        "dweight and dbias reduced over the spatial axes of sample 0 only (the sum over the batch missing)",
        "pattern: per-sample partial dgamma buffers of which only the first is read"),
    "gn_channels_last_as_nchw": (
        "group_norm", "layout",
        "each sample's memory read as (spatial, channel) (channels_last) while x is NCHW-contiguous: groups, "
        "statistics and the per-channel affine land on the wrong elements",
        "pattern: an NHWC GroupNorm kernel (diffusion UNets) handed an NCHW tensor without .contiguous("
        "memory_format=torch.channels_last); cf. pytorch/pytorch#111824"),
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_bwd_train_formula": (
        "batch_norm", "mode",
        "eval with running statistics: the backward uses the training formula at the batch statistics "
        "(centred dx) instead of dx = g * rstd_running",
        GH + "pytorch/xla/issues/913 (BatchNorm produces a wrong gradient in eval mode)"),
    "bn_momentum_none_as_default": (
        "batch_norm", "running",
        "momentum=None (the cumulative average 1 / num_batches_tracked) treated as the default 0.1",
        "cf. " + GH + "pytorch/pytorch/issues/31498 (the native kernel has no momentum=None; a port that "
        "passes the module default)"),
    "bn_bessel_batch_count_only": (
        "batch_norm", "bessel",
        "the unbiased running_var factor n / (n - 1) uses n = the batch size N instead of N times the "
        "spatial size",
        "pattern: the element count taken from x.shape[0] in a spatial BatchNorm's running update"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_var_from_rstd_plus_eps": (
        "instance_norm", "running",
        "running_var updated from the variance recovered as 1 / rstd^2 + eps (var + 2 eps) instead of "
        "1 / rstd^2 - eps",
        GH + "flagos-ai/FlagGems/issues/4885 (fixed by PR #4955)"),
    "in_running_var_biased": (
        "instance_norm", "bessel",
        "running_var updated with the biased instance variance (no S / (S - 1))",
        GH + "kakaobrain/trident/pull/125 (InstanceNorm running_var needs the correction)"),
    "in_eval_uses_instance_stats": (
        "instance_norm", "mode",
        "eval with running statistics still normalizes each instance with its own statistics",
        GH + "apache/tvm/pull/14963 (instance_norm ignored use_input_stats=False)"),
    "in_running_last_writer": (
        "instance_norm", "running",
        "each (n, c) program writes its own running update to running[c]: the last sample's wins instead "
        "of the mean over the batch",
        "pattern: a non-atomic per-instance store of a per-channel buffer"),
    # ------------------------------------------------------------------ gated_norm
    "gated_bwd_ignores_groups": (
        "gated_norm", "backward",
        "the forward normalizes per group of group_size values; the backward's row reductions run over "
        "the whole hidden dimension",
        GH + "state-spaces/mamba/pull/547 (Consider group_size in layer_norm_bwd)"),
    "gated_group_size_ignored": (
        "gated_norm", "window",
        "group_size not passed to the gated norm: one group over the whole hidden dimension",
        GH + "state-spaces/mamba/pull/910 (RMSNormGated built without group_size for ngroups > 1)"),
    "gated_nbg_inverted": (
        "gated_norm", "semantics",
        "norm_before_gate read the wrong way round: the gate multiplies x before the norm when the option "
        "says after, and vice versa",
        "pattern: the flag's sense inverted between a model port and the fused kernel"),
    "gated_dz_sigmoid_only": (
        "gated_norm", "backward",
        "dz uses sigmoid(z) as the derivative of silu(z), dropping the z * s * (1 - s) term",
        "pattern: silu' written as sigmoid in a hand-derived backward"),
    # ------------------------------------------------------------------ dyt
    "dyt_dalpha_last_block_wins": (
        "dyt", "reduction",
        "each program (4 rows) stores its partial dalpha to the scalar instead of adding it: the last "
        "row block's partial is returned",
        "pattern: tl.store instead of tl.atomic_add for a scalar parameter's gradient"),
    "dyt_bwd_from_rounded_t": (
        "dyt", "precision",
        "the backward's tanh' computed as 1 - t^2 from t = tanh(alpha x) saved in the 16-bit input dtype",
        "pattern: saving the activation in the input dtype to recompute the derivative (1 - t^2 cancels "
        "where tanh saturates)"),
    "dyt_dweight_uses_y": (
        "dyt", "affine",
        "dweight = sum(dy * y) (the output, weight and bias included) instead of sum(dy * tanh(alpha x))",
        "pattern: the saved output reused for the parameter gradient"),
    "dyt_dalpha_without_weight": (
        "dyt", "backward",
        "dalpha sums dy * tanh' * x without the weight (g = dy instead of dy * weight)",
        "pattern: a chain-rule factor dropped in one of the reductions only"),
    # ------------------------------------------------------------------ poly_norm
    "poly_weight_order_reversed": (
        "poly_norm", "semantics",
        "weight[0] multiplies the x term and weight[2] the x^3 term (the powers indexed 1, 2, 3)",
        "pattern: PolyCom's w0 x^3 + w1 x^2 + w2 x read as w_p x^p"),
    "poly_powers_in_input_dtype": (
        "poly_norm", "precision",
        "x^2 and x^3 computed in the 16-bit input dtype before the float32 statistics (float16 overflows "
        "beyond x^3 = 65504)",
        "pattern: x.pow(p) on the half tensor before .float()"),
    "poly_bwd_missing_power_factor": (
        "poly_norm", "backward",
        "dx = x^2 du_3 + x du_2 + du_1: the factors 3 and 2 of d(x^p)/dx left out",
        "pattern: hand-derived chain rule through x^p"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_before_affine": (
        "group_norm_silu", "affine",
        "y = silu(x_hat) * weight + bias: the SiLU applied before the affine instead of after",
        "pattern: GroupNorm+SiLU fusion placing the activation inside the normalization"),
    "gns_unfused_rounds_p": (
        "group_norm_silu", "precision",
        "the pre-activation p = x_hat * weight + bias stored in the 16-bit input dtype and the SiLU applied "
        "to that (two roundings, the unfused group_norm then silu), forward and backward",
        "pattern: F.silu(F.group_norm(x)) (diffusers' ResnetBlock) taken as the fused kernel's behaviour"),
    "gns_bwd_silu_grad_at_y": (
        "group_norm_silu", "backward",
        "the SiLU derivative evaluated at the output y = silu(p) instead of at the pre-activation p",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/186 (fused activation backward differentiating the "
        "wrong tensor)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_pow2_rule_ignored": (
        "norm_quant_block", "quant_scale",
        "fp8_group with scale_rule='pow2' emits the raw float32 group scales (amax / qmax), not powers of two",
        GH + "vllm-project/vllm/pull/51477 (norm+quant fusion ignoring scale_ue8m0)"),
    "nqb_e8m0_round_nearest": (
        "norm_quant_block", "quant_scale",
        "mxfp8 scale_rule='floor': the E8M0 exponent rounded to nearest instead of floored",
        GH + "ROCm/FlyDSL/pull/590 and ROCm/aiter/pull/3212 (E8M0 scale rounding mismatches)"),
    "nqb_nvfp4_unrounded_block_scale": (
        "norm_quant_block", "quant_scale",
        "nvfp4: q = y * 6 / amax_j (the unrounded block scale, no tensor scale) instead of y divided by the "
        "E4M3-rounded block scale times the tensor scale",
        GH + "pytorch/FBGEMM/pull/4884 (scaled_A = A * 6 / local_amax fixed)"),
    "nqb_nvfp4_no_tensor_scale": (
        "norm_quant_block", "quant_scale",
        "nvfp4 without the tensor-level scale: block scale E4M3(amax_j / 6) (saturating at 448), "
        "tensor_scale 1",
        GH + "kekzl/imp/issues/1544 (NVFP4 activation quant has no global scale)"),
    "nqb_nvfp4_scale_truncated": (
        "norm_quant_block", "rounding",
        "nvfp4: the block scale converted to E4M3 by truncating the mantissa instead of rounding to nearest",
        GH + "1bit-MONSTER/1bit-MONSTER/issues/304 (fp32_to_fp8e4m3 truncates the block scale)"),
    "nqb_pow2_zero_floor": (
        "norm_quant_block", "quant_scale",
        "fp8_group pow2: the scale floored at 1e-10 before rounding up, so an all-zero group gets 2^-33 "
        "instead of 0",
        GH + "vllm-project/vllm/issues/53339 (UE8M0 per_token_group_quant_fp8 floors at 1e-10)"),
    "nqb_tail_block_reads_next_row": (
        "norm_quant_block", "block",
        "the last, partial block of a row loaded without a mask: its amax (and scale) also sees the first "
        "values of the next row (zeros after the last row)",
        "pattern: a block loop over a flattened tensor missing the column mask"),
}


class Blind2Kernel(GroupNormPair, BlindKernelBase):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct);
    ``options``: see BlindKernelBase."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind2"
    options = {k: None for k in (
        "normalized_shape", "eps", "weight_offset", "eps_placement", "num_groups", "momentum", "convention",
        "norm", "norm_before_gate", "group_size", "format", "block_size", "element_dtype", "scale_rule",
        "min_scale", "residual_in_fp32")}

    # ------------------------------------------------------------ shared row statistics (2-D: rows x n)
    def _ln_stats(self, x, eps):
        """mean, rstd (rows, 1), two-pass."""
        n = x.shape[1]
        mean = _rsum(x) / n
        d = x - mean
        var = _rsum(d * d) / n
        if self.bug == "ln_eps_added_to_std":
            return mean, 1 / (np.sqrt(var) + eps)
        return mean, 1 / np.sqrt(var + eps)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns = _ns(call.config)
        N = math.prod(ns)
        lead = x0.shape[:x0.ndim - len(ns)]
        last_only = b == "ln_last_axis_only" and len(ns) > 1
        row = ns[-1] if last_only else N
        x = x0.astype(acc).reshape(-1, row)
        off = weight_offset(call, acc)
        w, bias = call.inputs.get("weight"), call.inputs.get("bias")
        w = None if w is None else (w.astype(acc) + off).reshape(-1, row)
        bias = None if bias is None else bias.astype(acc).reshape(-1, row)
        eps = _eps(call.config["eps"], acc)
        mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd

        def affine(a):                      # a: (rows, row) -> x.shape with weight/bias over ns
            a = a.reshape((-1,) + ns)
            a = a if w is None else a * w.reshape(ns)
            a = a if bias is None else a + bias.reshape(ns)
            return a.reshape(x0.shape)
        y = affine(xhat)
        stat = lead + (1,) * len(ns)
        out = {"y": _store(y, d)}
        if not last_only:
            sig = np.sqrt(1 / rstd ** 2) if b == "ln_rstd_output_is_std" else rstd
            out["mean"] = mean.reshape(stat).astype(acc)
            out["rstd"] = sig.reshape(stat).astype(acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            wN = None if w is None else w.reshape(1, N)
            xh = xhat.reshape(-1, N)
            if b == "ln_bwd_recompute_from_y" and wN is not None:
                yr = _half(y.reshape(-1, N).astype(acc), d)
                bN = 0 if bias is None else bias.reshape(1, N)
                xh = (yr - bN) / wN
            g = dy if wN is None else dy * wN
            gv, xv = g.reshape(-1, row), xh.reshape(-1, row)
            grads["x"] = _store(_centred_dx(gv, xv, rstd).reshape(x0.shape), d)
            if w is not None:
                grads["weight"] = _store((dy * xh).sum(axis=0).reshape(ns), d)
            if bias is not None:
                grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        placement = call.config.get("eps_placement", "inside")
        off = weight_offset(call, acc)
        w = call.inputs.get("weight")
        w = None if w is None else w.astype(acc).reshape(1, N) + off
        eps = _eps(call.config["eps"], acc)
        n_div = _pow2(N) if b == "rms_mean_over_block" else N
        ms = _rsum(x * x) / n_div
        rms = np.sqrt(ms)
        rstd = 1 / (rms + eps) if placement == "outside" else 1 / np.sqrt(ms + eps)
        if b == "rms_rstd_saved_in_input_dtype":
            rstd = _half(rstd, d)
        xhat = x / rstd if b == "rms_divides_by_rsqrt" else x * rstd
        y = xhat if w is None else xhat * w
        lead = x0.shape[:x0.ndim - len(ns)]
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(lead + (1,) * len(ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy if w is None else dy * w
            proj = _rsum(g * xhat) / N
            if placement == "outside" and b != "rms_outside_bwd_inside_formula":
                u = np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
            else:
                u = xhat
            grads["x"] = _store((rstd * (g - u * proj)).reshape(x0.shape), d)
            if w is not None:
                t = dy * xhat
                if b == "rms_dweight_sum_in_half" and d in ("float16", "bfloat16"):
                    dw = self._half_tree_sum(_half(_half(dy, d) * _half(xhat, d), d), d)
                else:
                    dw = t.sum(axis=0)
                grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    @staticmethod
    def _half_tree_sum(t, dtype):
        """Column sums of (rows, n) with every partial sum rounded to the 16-bit ``dtype`` (a pairwise tree)."""
        while t.shape[0] > 1:
            if t.shape[0] % 2:
                t = np.concatenate([t, np.zeros((1, t.shape[1]), t.dtype)])
            t = _half(t[0::2] + t[1::2], dtype)
        return t[0]

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        """(out, grads) of group_norm, or of group_norm_silu when ``silu``."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg = group_dims(x0, call.config)
        swap = b == "gn_channels_last_as_nchw" and S > 1

        def view(a):                          # (Nb, C, S) as the kernel indexes it
            a = a.reshape(Nb, C, S)
            return np.ascontiguousarray(a.reshape(Nb, S, C).transpose(0, 2, 1)) if swap else a

        def unview(a):                        # back to x's memory
            a = a.reshape(Nb, C, S)
            return np.ascontiguousarray(a.transpose(0, 2, 1)).reshape(x0.shape) if swap else a.reshape(x0.shape)
        x = view(x0.astype(acc))
        xv = x.reshape(Nb * G, cg * S)
        eps = _eps(call.config["eps"], acc)
        mean, rstd = self._ln_stats(xv, eps)
        if b == "gn_merge_without_delta":
            xc = x.reshape(Nb * C, S)
            _, var_c = self._ln_stats(xc, 0)      # per-channel 1 / sqrt(var_c)
            var_c = 1 / var_c ** 2
            var = var_c.reshape(Nb * G, cg).mean(axis=1, keepdims=True)
            rstd = 1 / np.sqrt(var + eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        if silu and b == "gns_silu_before_affine":
            s, _ = _sigmoids(xhat)
            p = xhat * s
            p = p if w is None else p * w
            p = p if bias is None else p + bias
            y = p
        else:
            p = affine(xhat, w, bias)
            if silu and b == "gns_unfused_rounds_p":
                p = _half(p, d)
            y = p
            if silu:
                s, _ = _sigmoids(p)
                y = p * s
        out = {"y": _store(unview(y), d), "mean": mean.reshape(Nb, G).astype(acc),
               "rstd": rstd.reshape(Nb, G).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = view(call.cotangents["y"].astype(acc))
            if silu:
                at = y if b == "gns_bwd_silu_grad_at_y" else p
                s, rest = _sigmoids(at)
                dy = dy * (s * (1 + at * rest))
            g = dy if w is None else dy * w
            dx = _centred_dx(g.reshape(Nb * G, cg * S), xhat.reshape(Nb * G, cg * S), rstd)
            grads["x"] = _store(unview(dx), d)
            rows = slice(0, 1) if b == "gn_dweight_first_sample" else slice(None)

            def per_channel(a):
                a = a[rows]
                return _rsum(np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(C, -1)).reshape(C)
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
        batch = call.training or not has_run
        mean, rstd, xhat = bn_normalize(x, st, eps, batch, acc, self._ln_stats)
        w, bias = channel_params(call.inputs, acc, C)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                mom = cfg["momentum"]
                if mom is None and b == "bn_momentum_none_as_default":
                    mom = 0.1
                m = acc(1.0 / float(nbt)) if mom is None else acc(mom)
                cnt = x0.shape[0] if b == "bn_bessel_batch_count_only" else n
                rm, rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc, count=cnt)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy, g = channel_dy_and_g(call, acc, w)
            if batch:
                dx = _centred_dx(g, xhat, rstd)
            elif b == "bn_eval_bwd_train_formula":
                bmean, brstd = self._ln_stats(x, eps)
                dx = _centred_dx(g, (x - bmean) * brstd, brstd)
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
        inst = call.training or not has_run or b == "in_eval_uses_instance_stats"
        mean, rstd, xhat = instance_stats(x, st, Nb, eps, acc, inst, self._ln_stats)
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                m = instance_momentum_value(cfg, acc)
                if b == "in_running_var_from_rstd_plus_eps":
                    var = 1 / rstd ** 2 + eps
                else:
                    var = _rsum((x - mean) ** 2) / S
                ub = var if b == "in_running_var_biased" else var * acc(S / (S - 1) if S > 1 else np.inf)
                new_m, new_v = instance_momentum(rm, rv, m, mean, ub, Nb, C)
                if b == "in_running_last_writer":
                    rm, rv = new_m[-1], new_v[-1]
                else:
                    rm, rv = new_m.mean(axis=0), new_v.mean(axis=0)
            state = running_state(rm, rv, nbt, d)
        return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, inst, acc), state)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        R = x0.size // H if H else 0
        K = H if cfg["group_size"] is None or b == "gated_group_size_ignored" else int(cfg["group_size"])
        Kb = H if b == "gated_bwd_ignores_groups" else K
        nbg = bool(cfg["norm_before_gate"]) != (b == "gated_nbg_inverted")
        x, z = x0.astype(acc).reshape(R, H), inp["z"].astype(acc).reshape(R, H)
        w = inp["weight"].astype(acc).reshape(1, H)
        bias = inp.get("bias")
        bias = None if bias is None else bias.astype(acc).reshape(1, H)
        sig, rest = _sigmoids(z)
        s = z * sig
        ds = sig if b == "gated_dz_sigmoid_only" else sig * (1 + z * rest)
        v = x if nbg else x * s
        eps = _eps(cfg["eps"], acc)
        rstd, vhat, nrm = gated_normalize(v, w, bias, eps, K, cfg["norm"], self._ln_stats)
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, Kb)
            vh = vhat.reshape(-1, Kb)
            if Kb != K:                      # the backward's statistics over the whole row
                vr = v.reshape(-1, Kb)
                if cfg["norm"] == "layer_norm":
                    mb, rb = self._ln_stats(vr, eps)
                else:
                    mb, rb = 0, 1 / np.sqrt(_rsum(vr * vr) / Kb + eps)
                vh, r = (vr - mb) * rb, rb
            else:
                r = rstd
            dv = gated_dx(cfg["norm"], g, vh, r)
            dx, dz = gated_dx_dz(dv.reshape(R, H), dy, nrm, x, s, ds, nbg)
            grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        y = affine(t, w, bias)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, x.shape, w)
            if b == "dyt_bwd_from_rounded_t" and d in ("float16", "bfloat16"):
                tr = _half(t, d)
                D = 1 - tr * tr
            else:
                r = 1 / np.cosh(a * x)
                D = r * r
            gd = g * D
            grads["x"] = _store((gd * a).reshape(x0.shape), d)
            ga = dy * D if b == "dyt_dalpha_without_weight" else gd
            part = _rsum(ga * x)                                  # (rows, 1)
            if b == "dyt_dalpha_last_block_wins" and part.shape[0] > 4:
                k = (part.shape[0] - 1) // 4 * 4
                da = part[k:].sum()
            else:
                da = part.sum()
            alpha = np.asarray(inp["alpha"])
            grads["alpha"] = _store(np.reshape(da, alpha.shape), d)
            if w is not None:
                src = y if b == "dyt_dweight_uses_y" else t
                grads["weight"] = _store((dy * src).sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy.sum(axis=0), d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        wt = inp["weight"].astype(acc)
        if b == "poly_weight_order_reversed":
            wt = wt[::-1]
        bias = inp.get("bias")
        eps = _eps(call.config["eps"], acc)
        powers = (3, 2, 1)
        hs, rs, us = [], [], []
        for p in powers:
            if b == "poly_powers_in_input_dtype" and d in ("float16", "bfloat16"):
                u = _half(x ** p, d)
            else:
                u = x ** p
            r = poly_rstd(u, eps, acc)
            hs.append(u * r)
            rs.append(r)
            us.append(u)
        y = poly_combine(wt, hs, bias, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            dx = np.zeros_like(x)
            for k, p in enumerate(powers):
                g = dy * wt[k]
                du = rms_dx(g, hs[k], rs[k])
                fac = 1 if b == "poly_bwd_missing_power_factor" else p
                dx = dx + (du if p == 1 else fac * x ** (p - 1) * du)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            dw = np.array([_rsum(dy * h).sum() for h in hs], dtype=acc)
            if b == "poly_weight_order_reversed":
                dw = dw[::-1]
            grads["weight"] = _store(dw, d)
            if bias is not None:
                grads["bias"] = _store(np.reshape(_rsum(dy).sum(), np.shape(bias)), d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ norm_quant_block
    @staticmethod
    def _e4m3_truncate(v):
        """float32 v >= 0 to float8_e4m3fn keeping the top 3 mantissa bits (normal range; subnormals and
        zero through the exact conversion of the truncated value)."""
        bits = v.view(np.uint32) & np.uint32(0xFFF00000)
        return bits.view(np.float32).astype(ml_dtypes.float8_e4m3fn)

    def _norm_quant_block(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        R, H, nb, pad = block_layout(y, B)
        if b == "nqb_tail_block_reads_next_row" and pad:
            nxt = np.concatenate([y[1:], np.zeros((1, H), acc)], axis=0)[:, :pad] if R else np.zeros((0, pad), acc)
            yb = np.concatenate([y, nxt], axis=1).reshape(R, nb, B)
        else:
            yb = np.concatenate([y, np.zeros((R, pad), acc)], axis=1).reshape(R, nb, B)
        amax = np.max(np.abs(yb), axis=-1, initial=0.0)                 # (R, nb)
        ts = acc(1.0)
        if fmt == "fp8_group":
            v = np.maximum(amax / acc(qmax), acc(cfg["min_scale"] or 0.0))
            if rule == "pow2" and b != "nqb_pow2_rule_ignored":
                vv = np.maximum(v, acc(1e-10)) if b == "nqb_pow2_zero_floor" else v
                m, e = _frexp_exp(vv)
                k = np.where(m == 0.5, e - 1, e)
                S = np.where(vv > 0, np.ldexp(1.0, k.astype(np.int64)), 0.0).astype(acc)
            else:
                S = v
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            if rule == "floor":
                v = amax / acc(2.0 ** emax)
                m, e = _frexp_exp(v)
                k = e - 1
                if b == "nqb_e8m0_round_nearest":
                    k = np.where(m >= 0.75, e, e - 1)              # to the nearest power of two (1.5 2^k up)
            else:
                v = amax / acc(qmax)
                m, e = _frexp_exp(v)
                k = pow2_up(m, e)
            S, scale_out = e8m0_scale(v, k, acc)
        else:                                                            # nvfp4
            if b == "nqb_nvfp4_no_tensor_scale":
                enc = acc(1.0)
            else:
                enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts = acc(1) / enc
            v = amax / acc(6.0) * enc
            if b == "nqb_nvfp4_scale_truncated":
                Sb = self._e4m3_truncate(np.clip(v, -448.0, 448.0).astype(np.float32))
            else:
                Sb = np.clip(v, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
            S = Sb.astype(acc) * ts
            if b == "nqb_nvfp4_unrounded_block_scale":
                S = amax / acc(6.0)
            scale_out = Sb
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)
