"""GroupNorm, the specification (module docstring of refnorm/norms/group_norm.py for the conventions).

    y = (x - mean_g(x)) * rstd_g * weight_c + bias_c,     rstd_g = (var_g(x) + eps)^(-1/2)

x: (N, C, *), viewed as (N, G, m): the statistics of each (sample n, group g) are over the last axis,
its C/G channels and every spatial position (m values); biased variance; eps inside the sqrt;
weight and bias per channel (C,). mean and rstd: (N, G).
Backward, g = dy * weight_c, xhat = (x - mean_g) * rstd_g, over the same (N, G, m) view:
    dx = rstd_g * (g - mean_A(g) - xhat * mean_A(g * xhat))
    dweight_c = sum over n and the spatial axes of dy * xhat,   dbias_c = the same sum of dy
Agreement with the fast path: the same bits (its blocks of (sample, group) rows sum each row, and
the parameter gradients over the spatial axes and then over n, as NumPy does here).
"""
from __future__ import annotations

import math

import numpy as np

from ..norms.group_norm import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments, per_channel

AGREEMENT = {}          # every array: the same bits


def group_norm(x, weight, bias, num_groups, eps):
    """x: (N, C, *); weight, bias: (C,) or None. Returns y: x.shape, mean and rstd: (N, G)."""
    N, G = x.shape[0], num_groups
    v = x.reshape(N, G, math.prod(x.shape[1:]) // G)                # (N, G, m) one row per (n, group)
    mean, var, d = moments(v, (2,))                                  # (N, G, 1), (N, G, 1), (N, G, m)
    rstd = 1.0 / np.sqrt(var + eps)                                  # (N, G, 1)
    xhat = (d * rstd).reshape(x.shape)                               # x.shape
    y = xhat if weight is None else xhat * per_channel(weight, x)   # x.shape
    y = y if bias is None else y + per_channel(bias, x)
    return y, mean.reshape(N, G), rstd.reshape(N, G), xhat


def group_norm_backward(dy, xhat, rstd, weight, has_bias, num_groups):
    """dy: x.shape; rstd: (N, G). Returns dx: x.shape, dweight, dbias: (C,) (or None)."""
    view = (dy.shape[0], num_groups, math.prod(dy.shape[1:]) // num_groups)      # (N, G, m)
    other = (0,) + tuple(range(2, dy.ndim))                          # the axes weight is shared over
    g = dy if weight is None else dy * per_channel(weight, dy)       # dL/dxhat, x.shape
    dx = centered_backward(g.reshape(view), xhat.reshape(view), rstd.reshape(view[:2] + (1,)), (2,))
    dweight = None if weight is None else (dy * xhat).sum(axis=other)
    dbias = dy.sum(axis=other) if has_bias else None
    return dx.reshape(dy.shape), dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    # x and dy in C order (no copy when they are): NumPy then sums each slice in the order the fast
    # path does (it works on a C-ordered copy); a strided x would be summed in another order
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias")
    G, _, eps = check(x, w, b, config["num_groups"], config["eps"])
    y, mean, rstd, xhat = group_norm(x, w, b, G, eps)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, (xhat, rstd, w, b is not None, G))


def backward(ctx, cot):
    xhat, rstd, weight, has_bias, G = ctx
    dx, dw, db = group_norm_backward(np.ascontiguousarray(cot["y"]), xhat, rstd, weight, has_bias, G)
    return Backward.of(x=dx, weight=dw, bias=db)
