"""Weight Standardization, the specification (module docstring of refnorm/norms/weight_standardization.py).

    y = (x - mean_A(x)) * rstd,     rstd = (var_A(x) + eps)^(-1/2)
    dx = rstd * (g - mean_A(g) - y * mean_A(g * y)),     g = dy

x: a weight (out, in, *k); A = every axis but 0 (each output channel over its fan-in); biased
variance, eps inside the sqrt, no affine: layer_norm over x.shape[1:]. mean and rstd are outputs.
Agreement with the fast path: the same bits.
"""
from __future__ import annotations

import numpy as np

from ..norms.weight_standardization import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments

AGREEMENT = {}          # every array: the same bits


def weight_standardization(x, eps):
    """x: (out, in, *k). Returns y: x.shape, mean and rstd: (out, 1, ...)."""
    A = tuple(range(1, x.ndim))                                      # the fan-in axes
    mean, var, d = moments(x, A)                                     # (out, 1..), (out, 1..), x.shape
    rstd = 1.0 / np.sqrt(var + eps)                                  # (out, 1..)
    return d * rstd, mean, rstd


def weight_standardization_backward(dy, y, rstd):
    """dy: x.shape. Returns dx: x.shape."""
    return centered_backward(dy, y, rstd, tuple(range(1, dy.ndim)))


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    eps, _ = check(inputs["x"], config["eps"])
    y, mean, rstd = weight_standardization(inputs["x"], eps)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, (y, rstd))


def backward(ctx, cot):
    return Backward({"x": weight_standardization_backward(cot["y"], *ctx)})
