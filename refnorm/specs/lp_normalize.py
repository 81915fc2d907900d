"""Lp normalization, the specification (module docstring of refnorm/norms/lp_normalize.py).

    norm = ||x||_p = (sum_A |x|^p)^(1/p),   computed as s * (sum_A (|x|/s)^p)^(1/p), s = max_A |x|
    y = x / max(norm, eps)                          zero_rule="torch"
    y = 0 if norm == 0 else x / norm                zero_rule="onnx"
    dx = (dy - sign(u) |u|^(p-1) * sum_A(dy * u)) / norm,   u = x / norm    where the norm is used
    dx = dy / eps (torch, norm < eps),   dx = 0 (onnx, norm == 0)

A = ``dim``; sign(0) = 0 (torch's rule, also for p <= 1); a NaN norm takes the norm branch, so NaN
reaches y and dx; the norm (unclamped) is an output. s = 1 for an all-zero, empty or non-finite slice.
Agreement with the fast path: the same bits.
"""
from __future__ import annotations

import numpy as np

from ..norms.lp_normalize import check
from ..spec import Backward, Forward

AGREEMENT = {}          # every array: the same bits


def lp_norm(x, p, A):
    """||x||_p over A, keepdims, scaled by s = max_A |x| against overflow and underflow."""
    a = np.abs(x)                                                    # x.shape
    s = np.max(a, axis=A, keepdims=True, initial=0.0)                # (1 on A)
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    total = ((a / s) ** p).sum(axis=A, keepdims=True)                # sum_A (|x| / s)^p, (1 on A)
    return s * total ** (1.0 / p)


def lp_normalize(x, p, A, eps, zero_rule):
    """x: any shape. Returns y: x.shape, norm: (1 on A)."""
    norm = lp_norm(x, p, A)                                          # (1 on A)
    if zero_rule == "torch":
        return x / np.maximum(norm, eps), norm                       # maximum keeps a NaN norm
    return np.where(norm == 0, 0.0, x / np.where(norm == 0, 1.0, norm)), norm


def lp_normalize_backward(dy, x, norm, p, A, eps, zero_rule):
    """dy: x.shape. Returns dx: x.shape."""
    used = (norm >= eps if zero_rule == "torch" else norm != 0) | np.isnan(norm)   # the norm branch
    safe = np.where(used, norm, 1.0)                                 # (1 on A)
    u = x / safe                                                     # x.shape
    w = np.where(u == 0, 0.0, np.sign(u) * np.abs(u) ** (p - 1.0))   # d||u||_p/du = sign(u)|u|^(p-1)
    proj = (dy - w * (dy * u).sum(axis=A, keepdims=True)) / safe     # x.shape
    small = dy / eps if zero_rule == "torch" and eps > 0 else np.zeros_like(dy)
    return np.where(used, proj, small)


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x = inputs["x"]
    p, A, eps = check(x, config["p"], config["dim"], config["eps"], config["zero_rule"])
    y, norm = lp_normalize(x, p, A, eps, config["zero_rule"])
    return Forward({"y": y, "norm": norm}, {}, (x, norm, p, A, eps, config["zero_rule"]))


def backward(ctx, cot):
    return Backward({"x": lp_normalize_backward(cot["y"], *ctx)})
