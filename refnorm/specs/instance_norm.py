"""InstanceNorm, the specification (module docstring of refnorm/norms/instance_norm.py for the conventions).

    y = (x - mean_nc) * rstd_nc * weight_c + bias_c,     rstd_nc = (var_nc + eps)^(-1/2)

x: (N, C, *); the statistics of each (sample n, channel c) are over the spatial axes A = 2.. (S values);
biased variance; eps inside the sqrt. mean and rstd: (N, C).
Instance statistics in training or without running statistics (S == 1 is an error there); in eval
with running statistics every instance is normalized with the per-channel running ones. Training
with running statistics updates them as torch does (batch_norm over the N*C instances, then the mean
of the N updated copies; momentum m weights the new value, None means 0):
    running_mean = mean_n((1 - m) * running_mean + m * mean_nc)
    running_var  = mean_n((1 - m) * running_var  + m * var_nc * S / (S - 1))      (unbiased)
S == 0 leaves them unchanged, N == 0 makes them NaN; num_batches_tracked is returned unchanged.
Backward, g = dy * weight_c, xhat = (x - mean) * rstd:
    instance statistics:  dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))
    running statistics:   dx = g * rstd
    dweight_c = sum over n and A of dy * xhat,   dbias_c = the same sum of dy
Agreement with the fast path: the same bits (its blocks of (sample, channel) rows sum each row, and
the parameter gradients over A and then over n, as NumPy does here).
"""
from __future__ import annotations

import math

import numpy as np

from ..norms.instance_norm import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments, per_channel

AGREEMENT = {}          # every array: the same bits


def instance_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """x: (N, C, *); weight, bias, running_*: (C,) or None. Returns y: x.shape, mean, rstd: (N, C),
    the running statistics after the call (C,) (or None) and xhat: x.shape."""
    A = tuple(range(2, x.ndim))                                      # the spatial axes
    N, C, S = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    if training or running_mean is None:                             # the instance statistics
        mean, var, d = moments(x, A)                                 # (N, C, 1..), (N, C, 1..), x.shape
        mean, var = mean.reshape(N, C), var.reshape(N, C)            # (N, C)
    else:                                                            # the running statistics
        mean = np.broadcast_to(running_mean, (N, C)).copy()          # (N, C)
        var = np.broadcast_to(running_var, (N, C))
        d = x - per_channel(running_mean, x)                         # x.shape
    rstd = 1.0 / np.sqrt(var + eps)                                  # (N, C)
    xhat = d * per_channel(rstd, x)                                  # x.shape
    y = xhat if weight is None else xhat * per_channel(weight, x)
    y = y if bias is None else y + per_channel(bias, x)
    if training and running_mean is not None and N == 0:             # the mean over no instances
        running_mean, running_var = np.full(C, np.nan), np.full(C, np.nan)
    elif training and running_mean is not None and S > 0:           # S == 0: unchanged
        running_mean = ((1 - momentum) * running_mean + momentum * mean).mean(axis=0)               # (C,)
        running_var = ((1 - momentum) * running_var + momentum * (var * (S / (S - 1)))).mean(axis=0)
    return y, mean, rstd, running_mean, running_var, xhat


def instance_norm_backward(dy, xhat, rstd, weight, has_bias, used_instance_stats):
    """dy: x.shape; rstd: (N, C). Returns dx: x.shape, dweight, dbias: (C,) (or None)."""
    A = tuple(range(2, dy.ndim))
    r = per_channel(rstd, dy)                                        # (N, C, 1..)
    g = dy if weight is None else dy * per_channel(weight, dy)       # dL/dxhat, x.shape
    dx = centered_backward(g, xhat, r, A) if used_instance_stats else g * r
    dweight = None if weight is None else (dy * xhat).sum(axis=(0,) + A)
    dbias = dy.sum(axis=(0,) + A) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    # x and dy in C order (no copy when they are): NumPy then sums each slice in the order the fast
    # path does (it works on a C-ordered copy); a strided x would be summed in another order
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias")
    rm, rv, nbt = state.get("running_mean"), state.get("running_var"), state.get("num_batches_tracked", 0)
    momentum, eps = check(x, w, b, rm, rv, nbt, config["momentum"], config["eps"], training, state=state)
    y, mean, rstd, rm2, rv2, xhat = instance_norm(x, w, b, rm, rv, training, momentum, eps)
    new_state = {} if rm is None else {"running_mean": np.array(rm2), "running_var": np.array(rv2),
                                       "num_batches_tracked": np.asarray(nbt, dtype=np.int64).copy()}
    return Forward({"y": y, "mean": mean, "rstd": rstd}, new_state,
                   (xhat, rstd, w, b is not None, training or rm is None))


def backward(ctx, cot):
    xhat, rstd, weight, has_bias, used_instance_stats = ctx
    dx, dw, db = instance_norm_backward(np.ascontiguousarray(cot["y"]), xhat, rstd, weight, has_bias, used_instance_stats)
    return Backward.of(x=dx, weight=dw, bias=db)
