"""Torch kernels as their authors write them, for the README's one-line wrapping (``from_torch``,
``from_module``) and its tests (tests/test_from_torch.py, tests/test_from_module.py):

    LayerNormFunction      a torch.autograd.Function (torch.native_layer_norm and its backward)
    FusedLayerNorm         an apex-style fused LayerNorm module (that Function inside; normalized_shape, eps)
    LlamaRMSNorm           Hugging Face's LlamaRMSNorm: float32 statistics, x_hat rounded to the input dtype
                           before the weight (``variance_epsilon``)
    GemmaRMSNorm           Hugging Face's GemmaRMSNorm: the weight stored as an offset, y * (1 + w), in float32
    fused_add_layer_norm   residual add + LayerNorm with a per-row ``rowscale`` on x, whose backward does not
                           compute rowscale's gradient (returns None for it, as some fused kernels do)
    rms_norm_fp8_quant     RMSNorm then per-token dynamic float8_e4m3fn quantization (q, scale, amax)

Each computes in float32 (float64 for float64 inputs) and rounds its outputs once, unless said otherwise.
"""
from __future__ import annotations

import torch
from torch import nn


class LayerNormFunction(torch.autograd.Function):
    """LayerNorm over the trailing ``normalized_shape``: apply(x, weight, bias, normalized_shape, eps)."""

    @staticmethod
    def forward(ctx, x, weight, bias, normalized_shape, eps):
        y, mean, rstd = torch.native_layer_norm(x, normalized_shape, weight, bias, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.normalized_shape = normalized_shape
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            dy, x, ctx.normalized_shape, mean, rstd, weight, bias, [True, weight is not None, bias is not None])
        return dx, dw, db, None, None


class FusedLayerNorm(nn.Module):
    """apex.normalization.FusedLayerNorm's shape: the module holds normalized_shape, eps and the affine
    parameters, and calls a fused autograd Function."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return LayerNormFunction.apply(x, self.weight, self.bias, self.normalized_shape, self.eps)


class LlamaRMSNorm(nn.Module):
    """transformers' LlamaRMSNorm, as written there."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class GemmaRMSNorm(nn.Module):
    """transformers' GemmaRMSNorm: the weight is stored as an offset from 1 (refnorm: weight_offset=1.0)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


def _acc(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


class _AddLayerNorm(torch.autograd.Function):
    """s = x * rowscale[..., None] + residual; y = layer_norm(s) * weight + bias; returns (y, s). The
    backward gives dx, dresidual, dweight, dbias and None for rowscale (not computed)."""

    @staticmethod
    def forward(ctx, x, residual, weight, bias, rowscale, eps):
        W = _acc(x)
        s = x.to(W) if rowscale is None else x.to(W) * rowscale.to(W)[..., None]
        s = s + residual.to(W)
        mean = s.mean(-1, keepdim=True)
        rstd = torch.rsqrt((s - mean).pow(2).mean(-1, keepdim=True) + eps)
        xhat = (s - mean) * rstd
        y = xhat * weight.to(W) if weight is not None else xhat
        y = y + bias.to(W) if bias is not None else y
        ctx.save_for_backward(xhat, rstd, weight, rowscale)
        ctx.dtypes = (x.dtype, residual.dtype, bias is not None)
        return y.to(x.dtype), s.to(x.dtype)

    @staticmethod
    def backward(ctx, dy, dres):
        xhat, rstd, weight, rowscale = ctx.saved_tensors
        x_dt, r_dt, has_b = ctx.dtypes
        W = xhat.dtype
        dy = dy.to(W)
        g = dy * weight.to(W) if weight is not None else dy
        ds = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) + dres.to(W)
        lead = tuple(range(dy.dim() - 1))
        dx = ds if rowscale is None else ds * rowscale.to(W)[..., None]
        dw = None if weight is None else (dy * xhat).sum(lead).to(weight.dtype)
        db = dy.sum(lead).to(x_dt if weight is None else weight.dtype) if has_b else None
        return dx.to(x_dt), ds.to(r_dt), dw, db, None, None        # None: rowscale's gradient, not computed


def fused_add_layer_norm(x, residual, weight=None, bias=None, rowscale=None, *, eps=1e-5):
    """Residual add + LayerNorm over the last axis (a fused kernel's interface): returns (y, residual_out)."""
    return _AddLayerNorm.apply(x, residual, weight, bias, rowscale, eps)


def rms_norm_fp8_quant(x, weight=None, *, eps=1e-5, scale_ub=None):
    """RMSNorm over the last axis, then per-token dynamic float8_e4m3fn quantization (vLLM's floor
    1 / (448 * 512) on the scale): returns (q, scale, amax), scale and amax in float32."""
    W = _acc(x)
    xf = x.to(W)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = y * weight.to(W) if weight is not None else y
    amax = y.abs().amax(-1, keepdim=True)
    scale = amax / 448.0
    scale = scale.clamp(max=scale_ub) if scale_ub is not None else scale
    scale = scale.clamp(min=1.0 / (448.0 * 512.0))
    q = (y * scale.reciprocal()).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q, scale.float(), amax.float()
