"""BatchNorm, the specification (module docstring of refnorm/norms/batch_norm.py for the conventions).

    y = (x - mean_c) * rstd_c * weight_c + bias_c,     rstd_c = (var_c + eps)^(-1/2)

x: (N, C, *); the statistics of each channel c are over A = the batch axis and every spatial axis
(n values); biased variance; eps inside the sqrt. mean and rstd: (C,).
Batch statistics in training or without running statistics (n == 1 is an error there); in eval with
running statistics x is normalized with them. Training with running statistics updates them and
counts the call in num_batches_tracked (an empty batch, n == 0, only counts it):
    "torch": running = (1 - m) * running + m * batch,  running_var takes the UNBIASED var * n / (n - 1);
             momentum None: m = 1 / num_batches_tracked (after the increment), the cumulative average
    "onnx":  running = m * running + (1 - m) * batch,  running_var takes the BIASED var
Backward, g = dy * weight_c, xhat = (x - mean) * rstd:
    batch statistics:    dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))
    running statistics:  dx = g * rstd
    dweight_c = sum_A(dy * xhat),   dbias_c = sum_A(dy)
Agreement with the fast path: the same bits. Its blocks of channels sum each channel over the
spatial axes (pairwise) and then over n one after the other, which is the order in which NumPy
takes sum(axis=(0, 2, ...)) of the whole (N, C, *) array here (_common.block_sum).
"""
from __future__ import annotations

import math

import numpy as np

from ..norms.batch_norm import check
from ..spec import Backward, Forward
from ._math import centered_backward, moments, per_channel

AGREEMENT = {}          # every array: the same bits


def batch_norm(x, weight, bias, running_mean, running_var, num_batches_tracked, training, momentum, eps,
               convention):
    """x: (N, C, *); weight, bias, running_*: (C,) or None. Returns y: x.shape, mean, rstd: (C,), the
    running statistics and num_batches_tracked after the call, and xhat: x.shape."""
    A = (0,) + tuple(range(2, x.ndim))                               # the batch and spatial axes
    n = math.prod(x.shape[a] for a in A)
    if training or running_mean is None:                             # the batch statistics
        mean, var, d = moments(x, A)                                 # (1, C, 1..), (1, C, 1..), x.shape
        mean, var = mean.reshape(-1), var.reshape(-1)                # (C,)
    else:                                                            # the running statistics
        mean, var = running_mean.copy(), running_var                 # (C,)
        d = x - per_channel(mean, x)                                 # x.shape
    rstd = 1.0 / np.sqrt(var + eps)                                  # (C,)
    xhat = d * per_channel(rstd, x)                                  # x.shape
    y = xhat if weight is None else xhat * per_channel(weight, x)
    y = y if bias is None else y + per_channel(bias, x)
    if training and running_mean is not None:
        num_batches_tracked = num_batches_tracked + 1                # every training call
        m = 1.0 / num_batches_tracked if momentum is None else momentum
        if n > 0 and convention == "torch":                          # m weights the new value
            running_mean = (1 - m) * running_mean + m * mean
            running_var = (1 - m) * running_var + m * (var * (n / (n - 1)))      # unbiased
        elif n > 0:                                                  # "onnx": m weights the old value
            running_mean = m * running_mean + (1 - m) * mean
            running_var = m * running_var + (1 - m) * var                        # biased
    return y, mean, rstd, running_mean, running_var, num_batches_tracked, xhat


def batch_norm_backward(dy, xhat, rstd, weight, has_bias, used_batch_stats):
    """dy: x.shape; rstd: (C,). Returns dx: x.shape, dweight, dbias: (C,) (or None)."""
    A = (0,) + tuple(range(2, dy.ndim))
    r = per_channel(rstd, dy)                                        # (1, C, 1..)
    g = dy if weight is None else dy * per_channel(weight, dy)       # dL/dxhat, x.shape
    dx = centered_backward(g, xhat, r, A) if used_batch_stats else g * r
    dweight = None if weight is None else (dy * xhat).sum(axis=A)
    dbias = dy.sum(axis=A) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    # x and dy in C order (no copy when they are): NumPy then sums each slice in the order the fast
    # path does (it works on a C-ordered copy); a strided x would be summed in another order
    x, w, b = np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias")
    rm, rv, nbt = state.get("running_mean"), state.get("running_var"), state.get("num_batches_tracked", 0)
    momentum, eps, convention = check(x, w, b, rm, rv, nbt, config["momentum"], config["eps"],
                                      config["convention"], training, state=state)
    y, mean, rstd, rm2, rv2, nbt2, xhat = batch_norm(x, w, b, rm, rv, np.asarray(nbt, dtype=np.int64),
                                                     training, momentum, eps, convention)
    new_state = {} if rm is None else {"running_mean": np.array(rm2), "running_var": np.array(rv2),
                                       "num_batches_tracked": np.array(nbt2, dtype=np.int64)}
    return Forward({"y": y, "mean": mean, "rstd": rstd}, new_state,
                   (xhat, rstd, w, b is not None, training or rm is None))


def backward(ctx, cot):
    xhat, rstd, weight, has_bias, used_batch_stats = ctx
    dx, dw, db = batch_norm_backward(np.ascontiguousarray(cot["y"]), xhat, rstd, weight, has_bias, used_batch_stats)
    return Backward.of(x=dx, weight=dw, bias=db)
