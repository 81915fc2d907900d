"""GroupNorm + SiLU fused, the specification (module docstring of refnorm/norms/group_norm_silu.py).

    p = (x - mean_g(x)) * rstd_g * weight_c + bias_c         (group_norm, refnorm/specs/group_norm.py)
    y = silu(p) = p * sigmoid(p),                            rstd_g = (var_g(x) + eps)^(-1/2)

x: (N, C, *), viewed as (N, G, m) as group_norm: biased variance, eps inside the sqrt, the channel axis 1,
groups of C/G consecutive channels; the affine is applied before the SiLU. mean and rstd: (N, G).
Backward: dp = dy * silu'(p), silu'(p) = s * (1 + p * (1 - s)), s = sigmoid(p); then group_norm's
backward with dp as its cotangent (dx, dweight, dbias).
Agreement with the fast path: the same bits (it runs group_norm's fast path, whose bits are the group_norm
specification's, and the same SiLU expressions).
"""
from __future__ import annotations

import numpy as np

from ..norms.group_norm import check as group_norm_check
from ..spec import Backward, Forward
from ._math import sigmoids
from .group_norm import group_norm, group_norm_backward

AGREEMENT = {}          # every array: the same bits


def sigmoid(p):
    """1 / (1 + exp(-p))."""
    return sigmoids(p)[0]


def silu(p):
    """p * sigmoid(p) (torch.nn.functional.silu)."""
    return p * sigmoid(p)


def silu_grad(p):
    """d silu / dp = s * (1 + p * (1 - s)), s = sigmoid(p)."""
    s, rest = sigmoids(p)
    return s * (1.0 + p * rest)


def group_norm_silu(x, weight, bias, num_groups, eps):
    """Returns y: x.shape, mean and rstd: (N, G), xhat and the pre-activation p: x.shape."""
    p, mean, rstd, xhat = group_norm(x, weight, bias, num_groups, eps)     # the affine inside
    return silu(p), mean, rstd, xhat, p


def group_norm_silu_backward(dy, p, xhat, rstd, weight, has_bias, num_groups):
    """dy, p: x.shape. Returns dx: x.shape, dweight, dbias: (C,) (or None)."""
    dp = dy * silu_grad(p)                                           # dL/dp, x.shape
    return group_norm_backward(dp, xhat, rstd, weight, has_bias, num_groups)


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias")
    G, _, eps = group_norm_check(x, w, b, config["num_groups"], config["eps"], name="group_norm_silu")
    y, mean, rstd, xhat, p = group_norm_silu(x, w, b, G, eps)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, (p, xhat, rstd, w, b is not None, G))


def backward(ctx, cot):
    p, xhat, rstd, weight, has_bias, G = ctx
    dx, dw, db = group_norm_silu_backward(np.ascontiguousarray(cot["y"]), p, xhat, rstd, weight, has_bias, G)
    return Backward.of(x=dx, weight=dw, bias=db)
