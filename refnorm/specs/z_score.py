"""Z-score scaling, the specification (module docstring of refnorm/norms/z_score.py for the conventions).

    y = (x - mean_A(x)) / std * weight + bias,     std = sqrt(sum_A (x - mean)^2 / (n - ddof) + eps)

A = ``dim``; weight, bias shaped (x.shape[a] for a in A). The sum of squares is taken as a^2 sum (d/a)^2,
a = max_A |d|, and std = hypot(a sqrt(sum (d/a)^2 / (n - ddof)), sqrt(eps)): no overflow or underflow
where std is a finite float64. A constant slice with eps = 0 (std = 0) gives y = 0 and dx = 0;
n - ddof <= 0 gives std = NaN; an empty reduction gives mean NaN (as torch.mean).
Agreement with the fast path: the same bits (the same whole-array reductions).
"""
from __future__ import annotations

import numpy as np

from ..norms.z_score import check
from ..spec import Backward, Forward
from ._math import centered, count

AGREEMENT = {}          # every array: the same bits


def z_score(x, weight, bias, A, ddof, eps):
    """x: any shape; weight, bias: (x.shape[a] for a in A) or None. Returns y: x.shape, mean and std: keepdims."""
    P = [s if i in A else 1 for i, s in enumerate(x.shape)]          # a parameter's broadcast shape
    n, m = count(x, A), count(x, A) - ddof
    mean, d = centered(x, A)                                         # keepdims, x.shape: d = x - mean
    mean = mean if n else np.full(mean.shape, np.nan)                # torch.mean of nothing
    a = np.max(np.abs(d), axis=A, keepdims=True, initial=0.0)        # keepdims: the scale of d
    a = np.where((a > 0) & np.isfinite(a), a, 1.0)
    ss = ((d / a) ** 2).sum(axis=A, keepdims=True)                   # sum_A (d/a)^2
    std = np.hypot(a * np.sqrt(ss / m), np.sqrt(eps)) if m > 0 else np.full(a.shape, np.nan)
    xhat = np.where(std == 0, 0.0, d / np.where(std == 0, 1.0, std))     # x.shape
    y = xhat if weight is None else xhat * weight.reshape(P)
    y = y if bias is None else y + bias.reshape(P)
    return y, mean, std, xhat


def z_score_backward(dy, weight, has_bias, A, ddof, std, xhat):
    """dy: x.shape. Returns dx: x.shape, dweight, dbias: (x.shape[a] for a in A) (or None)."""
    P = [s if i in A else 1 for i, s in enumerate(dy.shape)]
    other = tuple(i for i in range(dy.ndim) if i not in A)           # the axes a parameter is shared over
    m = count(dy, A) - ddof
    g = dy if weight is None else dy * weight.reshape(P)             # dL/dxhat, x.shape
    if dy.size == 0 or m <= 0:
        dx = np.zeros_like(dy) if dy.size == 0 else np.full(dy.shape, np.nan)
    else:
        inner = g - g.mean(axis=A, keepdims=True) - xhat * (g * xhat).sum(axis=A, keepdims=True) / m
        dx = np.where(std == 0, 0.0, inner / np.where(std == 0, 1.0, std))
    dweight = None if weight is None else (dy * xhat).sum(axis=other).reshape(weight.shape)
    dbias = dy.sum(axis=other).reshape([dy.shape[a] for a in A]) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    A, ddof, eps = check(x, w, b, config["dim"], config["ddof"], config["eps"])
    y, mean, std, xhat = z_score(x, w, b, A, ddof, eps)
    return Forward({"y": y, "mean": mean, "std": std}, {}, (w, b is not None, A, ddof, std, xhat))


def backward(ctx, cot):
    w, has_bias, *rest = ctx
    dx, dw, db = z_score_backward(cot["y"], w, has_bias, *rest)
    return Backward.of(x=dx, weight=dw, bias=db)
