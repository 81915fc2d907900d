"""PolyNorm, the specification (module docstring of refnorm/norms/poly_norm.py for the conventions).

    y = w0 * h_3 + w1 * h_2 + w2 * h_1 + bias,    h_p = x^p * r_p,   r_p = (mean_H(x^(2p)) + eps)^(-1/2)
    (the mean over the last axis H; r_p as rms_norm's: 1 / hypot(rms_p, sqrt(eps)), rms_p = s sqrt(mean((x^p / s)^2)),
    s = max_H |x^p|, so x^(2p) neither overflows nor underflows in float64)
Backward, per power p with its weight c_p (c_3 = w0, c_2 = w1, c_1 = w2), g_p = dy * c_p:
    du_p = r_p * (g_p - h_p * mean_H(g_p * h_p))                  (rms_norm's backward of h_p w.r.t. u_p = x^p)
    dx = 3 x^2 du_3 + 2 x du_2 + du_1
    dweight = (sum(dy * h_3), sum(dy * h_2), sum(dy * h_1)),  dbias = sum(dy): sums over EVERY element
x: (*, H); weight: (3,); bias: (1,) or () (optional).
"""
from __future__ import annotations

import numpy as np

from ..norms._poly_norm_check import check
from ..spec import Backward, Forward
from ._math import count

AGREEMENT = {}          # the fast path is this module: the same bits
POWERS = (3, 2, 1)      # weight[k] multiplies the term of x^POWERS[k]


def rms_normalize(u, eps):
    """u: (*, H). Returns h = u * r: u.shape, r = (mean_H(u^2) + eps)^(-1/2): (*, 1), without overflow."""
    A = (u.ndim - 1,)
    s = np.max(np.abs(u), axis=A, keepdims=True, initial=0.0)             # (*, 1) the row's scale
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    rms = s * np.sqrt(((u / s) ** 2).sum(axis=A, keepdims=True) / count(u, A))   # (*, 1) sqrt(mean_H(u^2))
    r = 1.0 / np.hypot(rms, np.sqrt(eps))                                  # (*, 1)
    return u * r, r


def poly_norm(x, weight, bias, eps):
    """Returns y: x.shape, hs: the three h_p (x.shape each, p = 3, 2, 1), rs: the three r_p ((*, 1) each)."""
    hs, rs = [], []
    for p in POWERS:
        h, r = rms_normalize(x ** p, eps)                                  # x.shape, (*, 1)
        hs.append(h)
        rs.append(r)
    y = weight[0] * hs[0] + weight[1] * hs[1] + weight[2] * hs[2]         # x.shape
    y = y if bias is None else y + np.reshape(bias, ())
    return y, hs, rs


def poly_norm_backward(dy, x, hs, rs, weight, bias_shape):
    """dy: x.shape. Returns dx: x.shape, dweight: (3,), dbias: bias_shape (or None)."""
    A = (dy.ndim - 1,)
    n = count(dy, A)
    dx = np.zeros_like(x)
    for k, p in enumerate(POWERS):
        g = dy * weight[k]                                                 # dL/dh_p, x.shape
        B = (g * hs[k]).sum(axis=A, keepdims=True) / n                     # (*, 1) mean_H(g h_p)
        du = rs[k] * (g - hs[k] * B)                                       # dL/du_p, x.shape
        dx = dx + (du if p == 1 else p * x ** (p - 1) * du)                # du_p/dx = p x^(p-1)
    dweight = np.array([np.sum(dy * h) for h in hs])                       # (3,)
    dbias = None if bias_shape is None else np.reshape(np.sum(dy), bias_shape)
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    eps = check(inputs, config)
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs["weight"], inputs.get("bias")
    y, hs, rs = poly_norm(x, w, b, eps)
    return Forward({"y": y}, {}, (x, hs, rs, w, None if b is None else b.shape))


def backward(ctx, cot):
    x, hs, rs, w, bshape = ctx
    dx, dw, db = poly_norm_backward(np.ascontiguousarray(cot["y"]), x, hs, rs, w, bshape)
    return Backward.of(x=dx, weight=dw, bias=db)
