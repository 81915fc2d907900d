"""A held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``BlindKernel(None)`` is a small, correct NumPy kernel for six ops (layer_norm, rms_norm, group_norm,
batch_norm, add_norm, norm_quant) written the way a fused float32 GPU kernel computes them: inputs upcast
to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to
the output dtype at the end (round to nearest even), statistics (mean, rstd) returned in float32. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops. The correct
pieces the blind sets share are in tests/planted/_blind_math.py; every bug is planted here.

``BlindKernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, from the taxonomy of mechanisms the lead
measures against (one_pass, precision, block, eps, bessel, running, mode, backward, reduction, layout,
affine, semantics, window, quant_scale, saturation, merge, collective, dropout, rounding), or None
where none fits. ``source`` is where the mistake really happened in public code, or "pattern: ..." for
a mistake seen in many hand-written kernels without a single citable fix.

The set is held out: it was written from the specifications (refnorm/specs), the backend protocol and
public bug reports only, for measuring the diagnosis honestly (issue 33).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_affine_grads, add_norm_params, add_norm_rows, affine, BlindKernelBase,
                          channel_dy_and_g, channel_grads, channel_outputs, channel_params, channel_rows,
                          channel_running_stats, eps_value, group_dims, normalized_rows, pow2 as _pow2,
                          QUANT as _QUANT, rsum as _rsum, running_in, running_state, static_scale, store,
                          weight_offset)

MECHANISMS = ("one_pass", "precision", "block", "eps", "bessel", "running", "mode", "backward", "reduction",
              "layout", "affine", "semantics", "window", "quant_scale", "saturation", "merge", "collective",
              "dropout", "rounding")
OPS = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "add_norm", "norm_quant")

BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_unbiased_var": (
        "layer_norm", "bessel",
        "the variance divides by n - 1 (torch.var's default unbiased=True) instead of n",
        "pytorch/pytorch#60528 and #19902 (biased vs unbiased confusion); hand-written LayerNorm modules "
        "calling x.var(-1, keepdim=True), e.g. harvardnlp annotated-transformer's LayerNorm (x.std(-1))"),
    "ln_one_pass": (
        "layer_norm", "one_pass",
        "variance as E[x^2] - E[x]^2 from one fused pass of float32 sums (sum and sum of squares)",
        "triton-lang/triton PR #6413 (merge the mean and variance loops of the layer-norm tutorial)"),
    "ln_pad_lanes_in_var": (
        "layer_norm", "block",
        "row loaded into a power-of-two block with other=0; the padded lanes' (0 - mean)^2 enter the variance",
        "triton-lang/triton#9838; linkedin/Liger-Kernel#518"),
    "ln_bwd_mean_detached": (
        "layer_norm", "backward",
        "dx drops the -mean(g) term (the mean treated as a constant in a hand-written backward)",
        "keras-team/keras PR #19102 (the torch backend's moments returned mean.detach(), cutting the "
        "mean's gradient from the normalizations built on it)"),
    "ln_dweight_drops_tail_rows": (
        "layer_norm", "reduction",
        "dweight/dbias partial sums over blocks of 64 rows; the last partial block of rows is never added",
        "triton tutorial 05-layer-norm's dw partial buffers; flagos-ai/FlagGems PR #59 (BLOCK_ROW_SIZE > 1)"),
    "ln_zc_bwd_no_offset": (
        "layer_norm", "affine",
        "zero-centred gamma: the forward uses weight + 1, the backward's dx uses weight alone",
        "ROCm/TransformerEngine PR #171 (ZERO_CENTERED_GAMMA: w += 1 needed in the backward too)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_sq_in_half": (
        "rms_norm", "precision",
        "x^2 computed in the input dtype (float16 overflows beyond 256) before the float32 mean",
        "pytorch/pytorch PR #133085; xlite-dev/LeetCUDA PR #335"),
    "rms_eps_outside": (
        "rms_norm", "eps",
        "rstd = 1 / (rms + eps) when the configured placement is inside the square root",
        "bzhangGo/rmsnorm (the RMSNorm paper's code: x / (rms_x + eps)) ported as the inside-eps op"),
    "rms_gemma_no_offset": (
        "rms_norm", "affine",
        "weight_offset (Gemma's 1 + weight) ignored: y = x_hat * weight",
        "linkedin/Liger-Kernel#74; NVIDIA/Megatron-LM PR #6859 (forward drops zero_centered_gamma)"),
    "rms_bwd_weight_twice": (
        "rms_norm", "backward",
        "dx's projection term multiplied by the weight twice: rstd * (g - w * x_hat * mean(g * x_hat))",
        "NVIDIA/Megatron-LM PR #6859 (BatchInvariantRMSNormFn input gradient)"),
    "rms_bf16_truncation": (
        "rms_norm", "rounding",
        "the float32 result stored to bfloat16 by truncation (dropping the low 16 bits)",
        "vllm-project/vllm-ascend PR #7492 review (CAST_TRUNC); Triton's interpreter bfloat16 store"),
    "rms_eps_none_input_dtype": (
        "rms_norm", "eps",
        "eps=None resolved to finfo(input dtype).eps (bfloat16: 2^-7) instead of the compute dtype's",
        "torch.nn.RMSNorm docs: 'eps ... default: torch.finfo(x.dtype).eps', taken literally for 16-bit x"),
    # ------------------------------------------------------------------ group_norm
    "gn_one_pass": (
        "group_norm", "one_pass",
        "group variance as E[x^2] - E[x]^2 in float32",
        "pytorch/pytorch#54293 (CPU GroupNorm's one-pass moments); PaddlePaddle PR #33176"),
    "gn_pad_lanes_next_group": (
        "group_norm", "block",
        "channels of a group loaded in a power-of-two block masked only by c < C: padding lanes read the "
        "next group's channels into the sums, divided by the true group size",
        "flagos-ai/FlagGems PR #4985"),
    "gn_per_group_affine": (
        "group_norm", "affine",
        "weight and bias indexed per group (weight[g]) instead of per channel",
        "onnx/onnx PR #5808 (GroupNormalization-18's per-group scale/bias, fixed to per-channel in opset 21)"),
    "gn_interleaved_groups": (
        "group_norm", "layout",
        "channels assigned to groups interleaved (c % G) by a (N, C/G, G, *) view instead of (N, G, C/G, *)",
        "pattern: rearrange 'b (c g) h w' vs 'b (g c) h w' in NHWC GroupNorm kernels"),
    # ------------------------------------------------------------------ batch_norm
    "bn_running_var_biased": (
        "batch_norm", "bessel",
        "running_var updated with the biased batch variance (torch expects var * n / (n - 1))",
        "tinygrad/tinygrad PR #807; ml-explore/mlx PR #3817; pytorch/pytorch PR #40600 (NaiveSyncBN)"),
    "bn_momentum_tf_convention": (
        "batch_norm", "running",
        "torch convention run with TensorFlow's rule: running = m * running + (1 - m) * batch",
        "pytorch/examples#289; ludwig-ai/ludwig PR #2100; gmalivenko/pytorch2keras#70"),
    "bn_eval_uses_batch_stats": (
        "batch_norm", "mode",
        "eval with running statistics still normalizes with the batch statistics",
        "pattern: a custom BatchNorm ignoring self.training / track_running_stats"),
    "bn_bwd_stats_detached": (
        "batch_norm", "backward",
        "training backward dx = g * rstd: the batch statistics' gradient terms missing",
        "facebookresearch/CrypTen PR #143 (batchnorm backward ignored that mean and variance depend on the "
        "input); keras-team/keras PR #19102"),
    # ------------------------------------------------------------------ add_norm
    "an_residual_out_in_input_dtype": (
        "add_norm", "precision",
        "residual_in_fp32: residual_out stored in the 16-bit input dtype instead of float32",
        "NVIDIA/Megatron-LM PR #3504 (the fp32 residual silently cast down to the compute dtype)"),
    "an_dropout_not_rescaled": (
        "add_norm", "dropout",
        "the kept values of x not scaled by 1 / (1 - p)",
        "pattern: dropout written as x * mask; cf. NVIDIA/apex PR #816 and kaldi-asr/kaldi#2814 (dropout "
        "scaled by the wrong factor)"),
    "an_rowscale_after_norm": (
        "add_norm", None,
        "rowscale applied to the normalized output instead of to x before the residual add",
        "pattern: flash-attention dropout_add_layer_norm's rowscale misplaced in a port"),
    "an_drowscale_without_mask": (
        "add_norm", "backward",
        "drowscale = sum(ds * x) / (1 - p): the keep-mask left out of the product",
        "pattern: rowscale gradient in fused dropout-add-norm backward ports"),
    # ------------------------------------------------------------------ norm_quant
    "nq_fnuz_max_240": (
        "norm_quant", "quant_scale",
        "float8_e4m3fn quantized with e4m3fnuz's maximum 240 (scale = amax / 240, clip at 240)",
        "ROCm/TransformerEngine PR #485; modelscope/DiffSynth-Studio PR #1528"),
    "nq_e5m2_clamp_448": (
        "norm_quant", None,
        "the clamp before the float8 conversion hard-coded to e4m3's 448 for float8_e5m2 outputs too",
        "flashinfer-ai/flashinfer PR #2612"),
    "nq_no_saturation": (
        "norm_quant", "saturation",
        "y / scale converted to float8 without a clamp: beyond the range it becomes NaN",
        "NVIDIA/Model-Optimizer#1633; jax-ml/ml_dtypes#260"),
    "nq_int8_truncation": (
        "norm_quant", "rounding",
        "int8 conversion truncates toward zero instead of rounding to nearest even",
        "ROCm/aiter PR #4637; sgl-project/sglang-jax PR #1598"),
    "nq_scale_ub_ignored": (
        "norm_quant", "quant_scale",
        "the dynamic scale's upper bound scale_ub never applied",
        "sgl-project/sglang PR #9880 (per_token_quant_fp8 had no scale_ub, which fbgemm_fp8 checkpoints "
        "need; vLLM's is vllm-project/vllm PR #6593)"),
    "nq_scale_from_rounded_y": (
        "norm_quant", "quant_scale",
        "amax and q taken from y already rounded to the 16-bit input dtype (an unfused norm then quant)",
        "pattern: vLLM's unfused rms_norm + dynamic_scaled_fp8_quant path used as the fused kernel"),
}


# ---------------------------------------------------------------- helpers
def _store(a, dtype, truncate=False):
    """One rounding to ``dtype`` (nearest even); ``truncate``: bfloat16 by dropping the low 16 bits."""
    a = np.asarray(a)
    if truncate and dtype == "bfloat16":
        bits = a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
        return bits.view(np.float32).astype(ml_dtypes.bfloat16)
    return store(a, dtype)


def _eps(value, acc, dtype, bug):
    if value is None:
        if bug == "rms_eps_none_input_dtype" and dtype in ("float16", "bfloat16"):
            return acc(float(ml_dtypes.finfo(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16).eps))
    return eps_value(value, acc)


class BlindKernel(BlindKernelBase):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct);
    ``options``: see BlindKernelBase."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind"
    options = {k: None for k in ("normalized_shape", "eps", "weight_offset", "eps_placement", "num_groups",
                                 "momentum", "convention", "norm", "dropout_p", "prenorm", "residual_in_fp32",
                                 "quant_dtype", "scale_ub", "min_scale")}

    # ------------------------------------------------------------ shared row kernels (2-D: rows x n)
    def _ln_rows(self, x, eps, bug_pad=False):
        """mean, rstd (rows, 1) and x_hat of the rows of x."""
        b, n = self.bug, x.shape[1]
        if b in ("ln_one_pass", "gn_one_pass"):
            mean = _rsum(x) / n
            var = np.maximum(_rsum(x * x) / n - mean * mean, 0)
        else:
            mean = _rsum(x) / n
            d = x - mean
            if bug_pad:                                        # padded lanes hold 0 - mean
                pad = _pow2(n) - n
                var = (_rsum(d * d) + pad * mean * mean) / n
            else:
                var = _rsum(d * d) / (n - 1 if b == "ln_unbiased_var" and n > 1 else n)
        rstd = 1 / np.sqrt(var + eps)
        return mean, rstd, (x - mean) * rstd

    def _ln_dx(self, g, xhat, rstd):
        n = g.shape[1]
        centre = 0 if self.bug == "ln_bwd_mean_detached" else _rsum(g) / n
        return rstd * (g - centre - xhat * (_rsum(g * xhat) / n))

    def _rms_rows(self, x, eps, placement, dtype):
        b, n = self.bug, x.shape[1]
        sq = x * x
        if b == "rms_sq_in_half" and dtype in ("float16", "bfloat16"):
            sq = _store(sq, dtype).astype(x.dtype)            # x.pow(2) in the input dtype
        ms = _rsum(sq) / n
        rms = np.sqrt(ms)
        if placement == "outside" or b == "rms_eps_outside":
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        return rms, rstd, x * rstd

    def _rms_dx(self, g, x, xhat, rstd, rms, placement, w2=None):
        n = g.shape[1]
        proj = _rsum(g * xhat) / n
        if placement == "outside":
            with np.errstate(divide="ignore", invalid="ignore"):
                u = np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
        else:
            u = xhat
        if self.bug == "rms_bwd_weight_twice" and w2 is not None:
            u = u * w2
        return rstd * (g - u * proj)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        off = weight_offset(call, acc)
        w = call.inputs.get("weight")
        w = None if w is None else w.astype(acc).reshape(1, N) + off
        bias = call.inputs.get("bias")
        bias = None if bias is None else bias.astype(acc).reshape(1, N)
        mean, rstd, xhat = self._ln_rows(x, _eps(call.config["eps"], acc, d, b),
                                         bug_pad=b == "ln_pad_lanes_in_var")
        y = affine(xhat, w, bias)
        lead = x0.shape[:x0.ndim - len(ns)]
        stat = lead + (1,) * len(ns)
        out = {"y": _store(y.reshape(x0.shape), d), "mean": mean.reshape(stat).astype(acc),
               "rstd": rstd.reshape(stat).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            wb = w if w is None or b != "ln_zc_bwd_no_offset" else w - off
            g = dy if wb is None else dy * wb
            grads["x"] = _store(self._ln_dx(g, xhat, rstd).reshape(x0.shape), d)
            rows = dy.shape[0]
            keep = rows - rows % 64 if b == "ln_dweight_drops_tail_rows" and rows > 64 else rows
            if w is not None:
                grads["weight"] = _store((dy * xhat)[:keep].sum(axis=0).reshape(ns), d)
            if bias is not None:
                grads["bias"] = _store(dy[:keep].sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        placement = call.config.get("eps_placement", "inside")
        off = 0.0 if b == "rms_gemma_no_offset" else (call.config.get("weight_offset", 0.0) or 0.0)
        w = call.inputs.get("weight")
        w = None if w is None else w.astype(acc).reshape(1, N) + acc(off)
        rms, rstd, xhat = self._rms_rows(x, _eps(call.config["eps"], acc, d, b), placement, d)
        y = xhat if w is None else xhat * w
        lead = x0.shape[:x0.ndim - len(ns)]
        out = {"y": _store(y.reshape(x0.shape), d, truncate=b == "rms_bf16_truncation"),
               "rstd": rstd.reshape(lead + (1,) * len(ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            g = dy if w is None else dy * w
            dx = self._rms_dx(g, x, xhat, rstd, rms, placement, w)
            grads["x"] = _store(dx.reshape(x0.shape), d, truncate=b == "rms_bf16_truncation")
            if w is not None:
                grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d,
                                         truncate=b == "rms_bf16_truncation")
        return Returned(out, grads)

    # ------------------------------------------------------------ group_norm
    def _group_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg = group_dims(x0, call.config)
        x = x0.astype(acc).reshape(Nb, C, S)
        if b == "gn_interleaved_groups":                         # group g = channels g, g + G, ...
            order = np.concatenate([np.arange(g, C, G) for g in range(G)])
        else:
            order = np.arange(C)
        xv = np.ascontiguousarray(x[:, order, :]).reshape(Nb * G, cg * S)
        eps = _eps(call.config["eps"], acc, d, b)
        if b == "gn_pad_lanes_next_group" and _pow2(cg) != cg:
            mean, rstd = self._gn_padded_stats(x, G, cg, S, eps)
            xhat_v = (xv - mean) * rstd
        else:
            mean, rstd, xhat_v = self._ln_rows(xv, eps)
        inv = np.argsort(order)
        xhat = xhat_v.reshape(Nb, C, S)[:, inv, :]                # back to channel order
        w, bias = call.inputs.get("weight"), call.inputs.get("bias")
        if b == "gn_per_group_affine":
            w = None if w is None else np.repeat(w[:G], cg)
            bias = None if bias is None else np.repeat(bias[:G], cg)
        w = None if w is None else w.astype(acc).reshape(1, C, 1)
        bias = None if bias is None else bias.astype(acc).reshape(1, C, 1)
        y = affine(xhat, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d), "mean": mean.reshape(Nb, G).astype(acc),
               "rstd": rstd.reshape(Nb, G).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            g = dy if w is None else dy * w
            gv = np.ascontiguousarray(g[:, order, :]).reshape(Nb * G, cg * S)
            dx = self._ln_dx(gv, xhat_v, rstd).reshape(Nb, C, S)[:, inv, :]
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if w is not None:
                grads["weight"] = _store(_rsum(np.ascontiguousarray(
                    (dy * xhat).transpose(1, 0, 2)).reshape(C, -1)).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(np.ascontiguousarray(
                    dy.transpose(1, 0, 2)).reshape(C, -1)).reshape(C), d)
        return Returned(out, grads)

    @staticmethod
    def _gn_padded_stats(x, G, cg, S, eps):
        """FlagGems #4985: group g loads channels g*cg .. g*cg + pow2(cg) - 1 (those < C), divides by cg*S."""
        Nb, C, _ = x.shape
        blk = _pow2(cg)
        means, rstds = [], []
        for g in range(G):
            chans = [c for c in range(g * cg, g * cg + blk) if c < C]
            v = np.ascontiguousarray(x[:, chans, :]).reshape(Nb, -1)
            m = _rsum(v) / (cg * S)
            dd = np.ascontiguousarray(x[:, g * cg:(g + 1) * cg, :]).reshape(Nb, -1) - m
            extra = np.ascontiguousarray(x[:, chans[cg:], :]).reshape(Nb, -1) - m
            var = (_rsum(dd * dd) + _rsum(extra * extra)) / (cg * S)
            means.append(m)
            rstds.append(1 / np.sqrt(var + eps))
        mean = np.stack(means, axis=1).reshape(Nb * G, 1)
        rstd = np.stack(rstds, axis=1).reshape(Nb * G, 1)
        return mean, rstd

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg = call.config
        eps = _eps(cfg["eps"], acc, d, b)
        st = call.state
        has_run = st.get("running_mean") is not None
        batch = call.training or not has_run or b == "bn_eval_uses_batch_stats"
        if batch:
            mean, rstd, xhat = self._ln_rows(x, eps)
            var = _rsum((x - mean) ** 2) / n
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
            xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                mom = cfg["momentum"]
                m = acc(1.0 / float(nbt)) if mom is None else acc(mom)
                bm, bv = mean.reshape(C), var.reshape(C)
                if n > 0 and cfg["convention"] == "torch":
                    ub = bv if b == "bn_running_var_biased" else bv * acc(n / (n - 1))
                    if b == "bn_momentum_tf_convention":
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * ub
                    else:
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * ub
                elif n > 0:
                    rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy, g = channel_dy_and_g(call, acc, w)
            if batch and b != "bn_bwd_stats_detached":
                dx = self._ln_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = channel_grads(dx, dy, xhat, w, bias, x0.shape, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns = cfg["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        N = math.prod(ns)
        R = x0.size // N if N else 0
        p = float(cfg["dropout_p"] or 0.0)
        keep = acc(1.0) if b == "an_dropout_not_rescaled" else acc(1.0 / (1.0 - p))
        off = acc(cfg.get("weight_offset", 0.0) or 0.0)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = np.ones((R, N), acc) if mask is None else mask.copy()
        if rs is not None and b != "an_rowscale_after_norm":
            c = c * rs
        c = c * keep if p else c
        s = x * c
        if x1 is not None:
            c1 = np.ones((R, N), acc) if mask1 is None else mask1.copy()
            c1 = c1 * keep if p else c1
            s = s + x1 * c1
        if res is not None:
            s = s + res
        eps = _eps(cfg["eps"], acc, d, b)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        if cfg["norm"] == "layer_norm":
            _, rstd, xhat = self._ln_rows(s, eps)
            rms = None
        else:
            rms, rstd, xhat = self._rms_rows(s, eps, "inside", d)
        y = xhat if we is None else xhat * we
        y = y if bias is None else y + bias
        if b == "an_rowscale_after_norm" and rs is not None:
            y = y * rs
        res_dtype = "float32" if cfg.get("residual_in_fp32") and d in ("float16", "bfloat16") else d
        s_out = s
        if b == "an_residual_out_in_input_dtype" and res_dtype != d:
            s_out = _store(s, d).astype(np.float32)             # rounded to the input dtype, handed out as float32
        out = {"y": _store(y.reshape(x0.shape), d), "residual_out": _store(s_out.reshape(x0.shape), res_dtype)}
        if w1 is not None:
            y1 = xhat * we1
            y1 = y1 if b1 is None else y1 + b1
            out["y1"] = _store(y1.reshape(x0.shape), d)
        grads = {}
        if "y" in call.cotangents:
            def norm_bwd(dy, wgt):
                g = dy if wgt is None else dy * wgt
                if cfg["norm"] == "layer_norm":
                    return self._ln_dx(g, xhat, rstd)
                return self._rms_dx(g, s, xhat, rstd, rms, "inside", wgt)
            dy = call.cotangents["y"].astype(acc).reshape(R, N)
            if b == "an_rowscale_after_norm" and rs is not None:
                dy = dy * rs
            ds = norm_bwd(dy, we)
            dy1 = None
            if w1 is not None and "y1" in call.cotangents:
                dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
                ds = ds + norm_bwd(dy1, we1)
            if cfg["prenorm"] and "residual_out" in call.cotangents:
                ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
            shape = x0.shape
            grads["x"] = _store((ds * c).reshape(shape), d)
            if res is not None:
                grads["residual"] = _store(ds.reshape(shape), d)
            if x1 is not None:
                grads["x1"] = _store((ds * c1).reshape(shape), d)
            grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, (w, bias, w1, b1), ns, d))
            if rs is not None:
                t = ds * x if mask is None or b == "an_drowscale_without_mask" else ds * x * mask
                drs = _rsum(t) * keep if p else _rsum(t)
                grads["rowscale"] = _store(drs.reshape(inp["rowscale"].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc, d, b)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            _, _, y = self._ln_rows(x, eps)
        else:
            _, _, y = self._rms_rows(x, eps, "inside", d)
        y = y if w is None else y * w.astype(acc).reshape(1, N)
        y = y if bias is None else y + bias.astype(acc).reshape(1, N)
        if b == "nq_scale_from_rounded_y" and d in ("float16", "bfloat16"):
            y = _store(y, d).astype(acc)
        qd = cfg["quant_dtype"]
        qdt, lo, hi = _QUANT[qd]
        qmax = hi
        if b == "nq_fnuz_max_240" and qd == "float8_e4m3fn":
            lo, hi, qmax = -240.0, 240.0, 240.0
        if b == "nq_e5m2_clamp_448" and qd.startswith("float8"):
            lo, hi = -448.0, 448.0
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = amax / acc(qmax)
            if cfg["scale_ub"] is not None and b != "nq_scale_ub_ignored":
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            floor = 1.0 / (_QUANT[qd][2] * 512.0) if cfg["min_scale"] is None else float(cfg["min_scale"])
            scale = np.maximum(scale, acc(floor))
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(scale == 0, acc(0) * y, y / np.where(scale == 0, acc(1), scale))
        if b != "nq_no_saturation":
            v = np.clip(v, lo, hi)
        if qdt.kind == "i":
            v = np.nan_to_num(v, nan=0.0)
            q = (np.trunc(v) if b == "nq_int8_truncation" else np.rint(v)).astype(np.int8)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                q = v.astype(qdt)
        lead = x0.shape[:x0.ndim - len(ns)]
        stat = lead + (1,) * len(ns)
        return Returned({"q": q.reshape(x0.shape), "scale": scale.reshape(stat).astype(acc),
                         "amax": amax.reshape(stat).astype(acc)})
