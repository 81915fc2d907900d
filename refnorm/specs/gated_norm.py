"""Gated RMSNorm / LayerNorm, the specification (module docstring of refnorm/norms/gated_norm.py).

    s = silu(z) = z * sigmoid(z),   v = x * s (norm_before_gate=False) or x (True)
    v viewed as (*, G, K): G = H / group_size groups of K = group_size values
    vhat = (v - mean_K(v)) * rstd, rstd = (var_K(v) + eps)^(-1/2)      (layer_norm)
    vhat = v * rstd,                rstd = (mean_K(v^2) + eps)^(-1/2)    (rms_norm)
    n = vhat * weight + bias;   y = n * s (norm_before_gate) or n
Backward, s' = sigmoid(z) * (1 + z * (1 - sigmoid(z))):
    dn = dy * s (norm_before_gate) or dy;    g = dn * weight
    dv = rstd * (g - mean_K(g) - vhat * mean_K(g * vhat))   (rms_norm: no mean_K(g) term)
    dweight = sum_lead(dn * vhat),  dbias = sum_lead(dn)
    norm_before_gate: dx = dv, dz = dy * n * s';   otherwise: dx = dv * s, dz = dv * x * s'
sigmoid(z) and 1 - sigmoid(z) are each formed from e = exp(-|z|) without cancellation, so s and s' keep
full relative accuracy where the gate saturates (z large positive or negative).
"""
from __future__ import annotations

import numpy as np

from ..norms._gated_norm_check import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments, sigmoids

AGREEMENT = {}          # the fast path is this module: the same bits


def silu(z):
    """(silu(z), silu'(z)): z * sigmoid(z) and sigmoid(z) * (1 + z * (1 - sigmoid(z)))."""
    sig, rest = sigmoids(z)
    return z * sig, sig * (1.0 + z * rest)


def grouped(a, K):
    """(*, H) -> (*, H / K, K): the groups of the hidden dimension, a view."""
    return a.reshape(a.shape[:-1] + (a.shape[-1] // K, K))


def gated_norm(x, z, weight, bias, norm, norm_before_gate, K, eps):
    """x, z: (*, H); weight, bias: (H,) (bias may be None). Returns y: x.shape and the saved values."""
    s, ds_dz = silu(z)                                               # x.shape
    v = x if norm_before_gate else x * s                             # x.shape, the normalized input
    vg = grouped(v, K)                                               # (*, G, K)
    if norm == "layer_norm":
        mean, var, d = moments(vg, (vg.ndim - 1,))                   # (*, G, 1), (*, G, 1), (*, G, K)
    else:
        var, d = (vg * vg).mean(axis=-1, keepdims=True), vg          # mean_K(v^2), (*, G, 1)
    rstd = 1.0 / np.sqrt(var + eps)                                  # (*, G, 1)
    vhat = (d * rstd).reshape(x.shape)                               # x.shape
    n = vhat * weight if bias is None else vhat * weight + bias      # x.shape
    y = n * s if norm_before_gate else n
    return y, (x, s, ds_dz, vhat, rstd, n, weight, bias is not None, norm, norm_before_gate, K)


def gated_norm_backward(dy, saved):
    """dy: x.shape. Returns dx, dz: x.shape; dweight, dbias: (H,) (dbias None without a bias)."""
    x, s, ds_dz, vhat, rstd, n, weight, has_bias, norm, nbg, K = saved
    lead = tuple(range(dy.ndim - 1))
    dn = dy * s if nbg else dy                                       # dL/dn, x.shape
    dweight = (dn * vhat).sum(axis=lead)                             # (H,)
    dbias = dn.sum(axis=lead) if has_bias else None
    g, vh = grouped(dn * weight, K), grouped(vhat, K)                # dL/dvhat, (*, G, K)
    if norm == "layer_norm":
        dv = centered_backward(g, vh, rstd, (g.ndim - 1,))
    else:
        dv = rstd * (g - vh * (g * vh).mean(axis=-1, keepdims=True))
    dv = dv.reshape(x.shape)                                         # dL/dv
    if nbg:
        return dv, dy * n * ds_dz, dweight, dbias
    return dv * s, dv * x * ds_dz, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    norm, nbg, K, eps = check(inputs, config)
    x, z = np.ascontiguousarray(inputs["x"]), np.ascontiguousarray(inputs["z"])
    y, saved = gated_norm(x, z, inputs["weight"], inputs.get("bias"), norm, nbg, K, eps)
    return Forward({"y": y}, {}, saved)


def backward(ctx, cot):
    dx, dz, dw, db = gated_norm_backward(np.ascontiguousarray(cot["y"]), ctx)
    return Backward.of(x=dx, z=dz, weight=dw, bias=db)
