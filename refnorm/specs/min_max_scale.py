"""Min-max scaling, the specification (module docstring of refnorm/norms/min_max_scale.py for the conventions).

    y = (x - min_A(x)) / (max_A(x) - min_A(x) + eps) * weight + bias

A = ``dim``; weight, bias shaped (x.shape[a] for a in A). A constant slice with eps = 0 (range 0) gives
y = 0 and dx = 0. Where the range overflows although min and max are finite, numerator and range are
both scaled by s = 1/4 first (a power of two: no rounding changes). The gradient reaching the min (max)
is split evenly among the elements that tie for it; dx is NaN over a slice whose min or max is not finite.
Agreement with the fast path: the same bits (the same whole-array reductions).
"""
from __future__ import annotations

import numpy as np

from ..norms.min_max_scale import check
from ..spec import Backward, Forward

AGREEMENT = {}          # every array: the same bits


def min_max_scale(x, weight, bias, A, eps):
    """x: any shape; weight, bias: (x.shape[a] for a in A) or None. Returns y: x.shape, min and max: keepdims."""
    P = [s if i in A else 1 for i, s in enumerate(x.shape)]          # a parameter's broadcast shape
    lo = x.min(axis=A, keepdims=True)                                # (.., 1 on A)
    hi = x.max(axis=A, keepdims=True)
    s = np.where(np.isinf(hi - lo + eps) & np.isfinite(hi) & np.isfinite(lo), 0.25, 1.0)
    D = (hi * s - lo * s) + eps * s                                  # the range, scaled by s
    const = D == 0                                                   # a constant slice, eps = 0
    yhat = np.where(const, 0.0, (x * s - lo * s) / np.where(const, 1.0, D))     # x.shape
    y = yhat if weight is None else yhat * weight.reshape(P)
    y = y if bias is None else y + bias.reshape(P)
    return y, lo, hi, (yhat, s, D)


def min_max_scale_backward(dy, x, weight, has_bias, A, lo, hi, yhat, s, D):
    """dy: x.shape. Returns dx: x.shape, dweight, dbias: (x.shape[a] for a in A) (or None)."""
    P = [n if i in A else 1 for i, n in enumerate(x.shape)]
    other = tuple(i for i in range(x.ndim) if i not in A)            # the axes a parameter is shared over
    g = dy if weight is None else dy * weight.reshape(P)             # dL/dyhat, x.shape
    at_min, at_max = x == lo, x == hi                                # the ties, x.shape
    n_min = np.maximum(at_min.sum(axis=A, keepdims=True), 1)         # 0 only in a NaN slice
    n_max = np.maximum(at_max.sum(axis=A, keepdims=True), 1)
    S1 = g.sum(axis=A, keepdims=True)                                # (.., 1 on A)
    S2 = (g * yhat).sum(axis=A, keepdims=True)
    num = g + np.where(at_min, (S2 - S1) / n_min, 0.0) - np.where(at_max, S2 / n_max, 0.0)
    dx = np.where(D == 0, 0.0, num * s / np.where(D == 0, 1.0, D))    # num / (max - min + eps)
    dx = np.where(np.isfinite(lo) & np.isfinite(hi), dx, np.nan)     # no gradient in a non-finite slice
    dweight = None if weight is None else (dy * yhat).sum(axis=other).reshape(weight.shape)
    dbias = dy.sum(axis=other).reshape([x.shape[a] for a in A]) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    A, eps = check(x, w, b, config["dim"], config["eps"])
    y, lo, hi, (yhat, s, D) = min_max_scale(x, w, b, A, eps)
    return Forward({"y": y, "min": lo, "max": hi}, {}, (x, w, b is not None, A, lo, hi, yhat, s, D))


def backward(ctx, cot):
    x, w, has_bias, *rest = ctx
    dx, dw, db = min_max_scale_backward(cot["y"], x, w, has_bias, *rest)
    return Backward.of(x=dx, weight=dw, bias=db)
