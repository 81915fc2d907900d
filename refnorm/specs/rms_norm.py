"""RMSNorm, the specification (module docstring of refnorm/norms/rms_norm.py for the conventions).

    y = x * rstd * (weight + weight_offset)
    rstd = (mean_A(x^2) + eps)^(-1/2)          eps_placement="inside"  (default), as 1 / hypot(rms, sqrt(eps))
    rstd = 1 / (rms + eps)                     eps_placement="outside"
    rms  = s * sqrt(mean_A((x / s)^2)),  s = max_A |x|  (1 on an all-zero, empty or non-finite row)

A = the trailing len(normalized_shape) axes; no mean removed; eps None = the machine epsilon of torch's opmath
dtype for x's dtype as given to evaluate (finfo(float32).eps for float32/float16/bfloat16, finfo(float64).eps
for float64; resolved before this module is called: refnorm/norms/rms_norm.py, default_eps).
Backward, g = dy * (weight + weight_offset), xhat = x * rstd:
    dx = rstd * (g - u * mean_A(g * xhat)),    u = xhat (inside), x / rms (outside; 0 where rms == 0)
    dweight = sum over the leading axes of dy * xhat
Agreement with the fast path: the same bits on the golden set and hypothesis inputs (the fast path sums
each row as NumPy does here). Beyond ~2 MiB of x the fast path sums dweight block of rows by block,
then over the blocks (_common.blocks), so there dweight is another order of the same sum (~10 units).
"""
from __future__ import annotations

import numpy as np

from ..norms.rms_norm import check
from ..spec import Backward, Forward
from ._math import count

AGREEMENT = {}          # every array: the same bits


def rms_norm(x, weight, normalized_shape, eps, eps_placement, weight_offset):
    """x: (*, *N); weight: N or None. Returns y: x.shape, rstd and rms: (*, 1...)."""
    A = tuple(range(x.ndim - len(normalized_shape), x.ndim))      # the normalized axes
    s = np.max(np.abs(x), axis=A, keepdims=True, initial=0.0)       # (*, 1..) the row's scale
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    rms = s * np.sqrt(((x / s) ** 2).sum(axis=A, keepdims=True) / count(x, A))   # (*, 1..) sqrt(mean_A(x^2))
    if eps_placement == "inside":
        rstd = 1.0 / np.hypot(rms, np.sqrt(eps))                    # (*, 1..) (rms^2 + eps)^(-1/2)
    else:
        rstd = 1.0 / (rms + eps)
    xhat = x * rstd                                                  # x.shape
    y = xhat if weight is None else xhat * (weight + weight_offset)
    return y, rstd, rms, xhat


def rms_norm_backward(dy, x, xhat, rstd, rms, weight, weight_offset, eps_placement, normalized_ndim):
    """dy: x.shape. Returns dx: x.shape, dweight: N (or None)."""
    A = tuple(range(dy.ndim - normalized_ndim, dy.ndim))
    lead = tuple(range(dy.ndim - normalized_ndim))                   # the axes weight is shared over
    g = dy if weight is None else dy * (weight + weight_offset)      # dL/dxhat, x.shape
    mgx = (g * xhat).sum(axis=A, keepdims=True) / count(x, A)        # (*, 1..) mean_A(g * xhat)
    if eps_placement == "inside":
        u = xhat
    else:
        u = np.where(rms == 0, 0.0, x / np.where(rms == 0, 1.0, rms))   # x / rms, 0 on an all-zero row
    dx = (g - u * mgx) * rstd                                        # x.shape
    dweight = None if weight is None else (dy * xhat).sum(axis=lead)
    return dx, dweight


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    # x and dy in C order (no copy when they are): NumPy then sums each slice in the order the fast
    # path does (it works on a C-ordered copy); a strided x would be summed in another order
    x, w = np.ascontiguousarray(inputs["x"]), inputs.get("weight")
    ns, eps, offset = check(x, w, config["normalized_shape"], config["eps"], config["eps_placement"],
                            config["weight_offset"])
    y, rstd, rms, xhat = rms_norm(x, w, ns, eps, config["eps_placement"], offset)
    return Forward({"y": y, "rstd": rstd}, {}, (x, xhat, rstd, rms, w, offset, config["eps_placement"], len(ns)))


def backward(ctx, cot):
    x, xhat, rstd, rms, w, offset, placement, k = ctx
    dx, dw = rms_norm_backward(np.ascontiguousarray(cot["y"]), x, xhat, rstd, rms, w, offset, placement, k)
    return Backward({"x": dx} if dw is None else {"x": dx, "weight": dw})
