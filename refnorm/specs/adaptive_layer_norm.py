"""Adaptive LayerNorm, the specification (module docstring of refnorm/norms/adaptive_layer_norm.py).

    y = xhat * (1 + scale_b) + shift_b,     xhat = (x - mean_H(x)) * rstd,  rstd = (var_H(x) + eps)^(-1/2)
Backward, g = dy * (1 + scale_b):
    dx = rstd * (g - mean_H(g) - xhat * mean_H(g * xhat))
    dscale = sum over the tokens of dy * xhat,    dshift = sum over the tokens of dy
x: (B, *, H); scale, shift: (B, H), shaped (B, 1.., H) to broadcast over the tokens.
"""
from __future__ import annotations

import numpy as np

from ..norms._adaptive_layer_norm_check import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments

AGREEMENT = {}          # the fast path is this module: the same bits


def per_sample(v, x):
    """(B, H) -> (B, 1.., H), broadcasting over the token axes of x (B, *, H)."""
    return v.reshape((v.shape[0],) + (1,) * (x.ndim - 2) + (v.shape[1],))


def adaptive_layer_norm(x, scale, shift, eps):
    """Returns y: x.shape, mean and rstd: (B, *, 1), xhat: x.shape."""
    mean, var, d = moments(x, (x.ndim - 1,))                         # (B, *, 1), (B, *, 1), x.shape
    rstd = 1.0 / np.sqrt(var + eps)                                  # (B, *, 1)
    xhat = d * rstd                                                  # x.shape
    if scale is None:
        y = xhat
    else:
        gain = 1.0 + per_sample(scale, x)                            # (B, 1.., H): the modulation 1 + scale
        y = xhat * gain
    y = y if shift is None else y + per_sample(shift, x)
    return y, mean, rstd, xhat


def adaptive_layer_norm_backward(dy, xhat, rstd, scale, has_shift):
    """dy: x.shape. Returns dx: x.shape, dscale: (B, H) (or None), dshift: (B, H) (or None)."""
    tokens = tuple(range(1, dy.ndim - 1))                            # the axes scale/shift are shared over
    gain = None if scale is None else 1.0 + per_sample(scale, dy)   # (B, 1.., H)
    g = dy if scale is None else dy * gain                           # dL/dxhat, x.shape
    dx = centered_backward(g, xhat, rstd, (dy.ndim - 1,))            # x.shape
    dscale = None if scale is None else (dy * xhat).sum(axis=tokens)
    dshift = dy.sum(axis=tokens) if has_shift else None
    return dx, dscale, dshift


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, scale, shift = np.ascontiguousarray(inputs["x"]), inputs.get("scale"), inputs.get("shift")
    eps = check(inputs, config)
    y, mean, rstd, xhat = adaptive_layer_norm(x, scale, shift, eps)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, (xhat, rstd, scale, shift is not None))


def backward(ctx, cot):
    xhat, rstd, scale, has_shift = ctx
    dx, dscale, dshift = adaptive_layer_norm_backward(np.ascontiguousarray(cot["y"]), xhat, rstd, scale, has_shift)
    return Backward.of(x=dx, scale=dscale, shift=dshift)
