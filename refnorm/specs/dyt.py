"""DyT (dynamic tanh), the specification (module docstring of refnorm/norms/dyt.py for the conventions).

    t = tanh(alpha * x),     y = t * weight + bias
Backward, g = dy * weight, D = tanh'(alpha x) = 1 - t^2 = sech^2(alpha x):
    dx = g * D * alpha
    dalpha = sum over EVERY element of g * D * x        (alpha is one scalar shared by all of x)
    dweight = sum over the leading axes of dy * t,      dbias = sum over the leading axes of dy
x: (*, C); alpha: () or (1,); weight, bias: (C,), each optional (1 and 0 when absent).
D is computed as (1 / cosh(alpha x))^2, not as 1 - t^2: where tanh saturates (|alpha x| > ~19, t = 1 in
float64) 1 - t^2 is 0 while the true D is e^(-2|alpha x|) * 4; cosh overflowing (|alpha x| > 710) gives
D = 0 (the true value is below float64's smallest subnormal there).
"""
from __future__ import annotations

import numpy as np

from ..norms._dyt_check import check
from ..spec import Backward, Forward

AGREEMENT = {}          # the fast path is this module: the same bits


def dyt(x, alpha, weight, bias):
    """x: (*, C); alpha: () or (1,). Returns y: x.shape and t = tanh(alpha x): x.shape."""
    a = float(np.reshape(alpha, ()))
    t = np.tanh(a * x)                                               # x.shape
    y = t if weight is None else t * weight                          # x.shape
    y = y if bias is None else y + bias
    return y, t


def sech2(z):
    """tanh'(z) = (1 / cosh(z))^2: 1/cosh first, so it underflows gradually instead of overflowing (cosh(z) = inf
    beyond |z| = 710 gives 0, where the true value is below float64's smallest subnormal too)."""
    with np.errstate(over="ignore"):
        r = 1.0 / np.cosh(z)
    return r * r


def dyt_backward(dy, x, alpha, t, weight, has_bias):
    """dy: x.shape. Returns dx: x.shape, dalpha: alpha.shape, dweight: (C,) (or None), dbias: (C,) (or None)."""
    a = float(np.reshape(alpha, ()))
    lead = tuple(range(dy.ndim - 1))                                 # the axes weight and bias are shared over
    g = dy if weight is None else dy * weight                        # dL/dt, x.shape
    gd = g * sech2(a * x)                                            # dL/d(alpha x), x.shape
    dx = gd * a                                                      # x.shape
    dalpha = np.reshape(np.sum(gd * x), np.shape(alpha))             # a full reduction: every element
    dweight = None if weight is None else (dy * t).sum(axis=lead)    # (C,)
    dbias = dy.sum(axis=lead) if has_bias else None                  # (C,)
    return dx, dalpha, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    check(inputs)
    x, alpha, w, b = np.ascontiguousarray(inputs["x"]), inputs["alpha"], inputs.get("weight"), inputs.get("bias")
    y, t = dyt(x, alpha, w, b)
    return Forward({"y": y}, {}, (x, alpha, t, w, b is not None))


def backward(ctx, cot):
    x, alpha, t, w, has_bias = ctx
    dx, da, dw, db = dyt_backward(np.ascontiguousarray(cot["y"]), x, alpha, t, w, has_bias)
    return Backward.of(x=dx, alpha=da, weight=dw, bias=db)
