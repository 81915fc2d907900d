"""LayerNorm, the specification (module docstring of refnorm/norms/layer_norm.py for the conventions).

    y = (x - mean_A(x)) * rstd * (weight + weight_offset) + bias,     rstd = (var_A(x) + eps)^(-1/2)

A = the trailing len(normalized_shape) axes; biased variance; eps inside the sqrt; weight_offset 1.0 is
the zero-centred gamma (the backward's weight is weight + weight_offset; dweight is unchanged).
Agreement with the fast path: the same bits (the fast path sums each row pairwise as NumPy does here).
"""
from __future__ import annotations

import numpy as np

from ..norms.layer_norm import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments

AGREEMENT = {}          # every array: the same bits


def layer_norm(x, weight, bias, normalized_shape, eps):
    """x: (*, *N); weight, bias: N or None. Returns y: x.shape, mean and rstd: (*, 1...)."""
    A = tuple(range(x.ndim - len(normalized_shape), x.ndim))      # the normalized axes
    mean, var, d = moments(x, A)                                     # (*, 1..), (*, 1..), x.shape
    rstd = 1.0 / np.sqrt(var + eps)                                  # (*, 1..)
    xhat = d * rstd                                                  # x.shape
    y = xhat if weight is None else xhat * weight                    # x.shape
    y = y if bias is None else y + bias
    return y, mean, rstd, xhat


def layer_norm_backward(dy, xhat, rstd, weight, has_bias, normalized_ndim):
    """dy: x.shape. Returns dx: x.shape, dweight: N (or None), dbias: N (or None)."""
    A = tuple(range(dy.ndim - normalized_ndim, dy.ndim))
    lead = tuple(range(dy.ndim - normalized_ndim))                   # the axes weight is shared over
    g = dy if weight is None else dy * weight                        # dL/dxhat, x.shape
    dx = centered_backward(g, xhat, rstd, A)                         # x.shape
    dweight = None if weight is None else (dy * xhat).sum(axis=lead)
    dbias = dy.sum(axis=lead) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    # x in C order (no copy when it is): NumPy then sums each row in the order the fast path does
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias")
    ns, eps = check(x, w, b, config["normalized_shape"], config["eps"], config["weight_offset"])
    offset = float(config["weight_offset"])
    w = w if w is None or offset == 0.0 else w + offset             # the effective weight
    y, mean, rstd, xhat = layer_norm(x, w, b, ns, eps)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, (xhat, rstd, w, "bias" in inputs, len(ns)))


def backward(ctx, cot):
    xhat, rstd, weight, has_bias, k = ctx
    dx, dw, db = layer_norm_backward(np.ascontiguousarray(cot["y"]), xhat, rstd, weight, has_bias, k)
    return Backward.of(x=dx, weight=dw, bias=db)
