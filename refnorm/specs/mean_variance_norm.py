"""Mean-variance normalization, the specification (module docstring of refnorm/norms/mean_variance_norm.py).

    y = d / (std + eps),   d = x - mean_A(x),   std = sqrt(mean_A(d^2))       (biased; eps on the std)
    dx = (g - mean_A(g) - y * mean_A(g * d / std)) / (std + eps),             g = dy

A = ``axes`` (ONNX's attribute, default [0, 2, 3]); eps default 1e-9, added to the std, not the
variance (ONNX's function body). Two-pass mean and re-centred deviations (_math.centered); std as
s * sqrt(mean_A((d / s)^2)), s an exact power of two (_math.pow2_scale). A constant slice (std = 0,
d = 0): y = 0 and mean_A(g d / std) is taken as 0, so dx = (g - mean_A(g)) / eps (the exact
derivative). An empty slice: mean 0, std NaN. mean and std (without eps) are outputs.
Agreement with the fast path: the same bits (also the sign of NaNs: a NaN std puts NaN itself into
mean_A(g d / std), as the fast path does).
"""
from __future__ import annotations

import numpy as np

from ..norms.mean_variance_norm import check
from ..spec import Backward, Forward
from ._math import centered, count, pow2_scale

AGREEMENT = {}          # every array: the same bits


def mean_variance_norm(x, A, eps):
    """x: any shape. Returns y, d: x.shape; mean, std: (1 on A)."""
    mean, d = centered(x, A)                                         # (1 on A), x.shape
    s = pow2_scale(d, A)                                             # (1 on A)
    n = count(x, A)
    std = s * np.sqrt(((d / s) ** 2).sum(axis=A, keepdims=True) / n) if n else np.full(s.shape, np.nan)
    return d / (std + eps), mean, std, d


def mean_variance_norm_backward(dy, y, std, d, A, eps):
    """dy: x.shape. Returns dx: x.shape."""
    if count(dy, A) == 0:                                            # empty slices: dx is empty
        return np.zeros_like(dy)
    proj = np.where(std > 0, (dy * (d / std)).mean(axis=A, keepdims=True), 0.0)   # mean_A(g d / std)
    proj[np.isnan(std)] = np.nan                                     # (1 on A); 0 at std = 0, NaN at NaN
    return (dy - dy.mean(axis=A, keepdims=True) - y * proj) / (std + eps)


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    A, eps = check(inputs["x"], config["axes"], config["eps"])
    y, mean, std, d = mean_variance_norm(inputs["x"], A, eps)
    return Forward({"y": y, "mean": mean, "std": std}, {}, (y, std, d, A, eps))


def backward(ctx, cot):
    return Backward({"x": mean_variance_norm_backward(cot["y"], *ctx)})
