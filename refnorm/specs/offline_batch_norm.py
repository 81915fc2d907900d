"""BatchNorm in training mode as the offline framework's current-batch instance, the specification
(module docstrings of refnorm/norms/offline_batch_norm.py and offline.py for the conventions).

x (N, C, *) is read as rows X (P, C): P = every position but the channel. Per channel c:
    training  mu, sigma^2 = mean_P(X), biased var_P(X)     (two-pass: d = X - mu)
              D = sqrt(sigma^2 + eps),  z = d / D,  y = weight * z + bias
              running_mean <- (1 - m) running_mean + m mu
              running_var  <- (1 - m) running_var + m sigma^2 P / (P - 1)      (m weighs the NEW value)
    backward  g = weight * dy,  dx = (g - (mean_P(g) + z mean_P(g z))) / D      (the exact gradient)
    eval      z = (X - running_mean) / D,  D = sqrt(running_var + eps);  dx = g / D
State: running_mean (C,) = 0, running_var (C,) = 1, iters (training calls) = 0 initially.
Outputs: y, mean (the mean used), rstd = 1 / D, r = 1 (no gradient compensation).
Agreement with the fast path: the same bits (the same reductions over the rows X).
"""
from __future__ import annotations


import numpy as np

from ..norms.offline_batch_norm import check
from ..spec import Backward, Forward
from ._math import moments, offline_state, rows, unrows

AGREEMENT = {}          # every array: the same bits


def initial_state(C):
    return {"running_mean": np.zeros(C), "running_var": np.ones(C), "iters": np.zeros(1, dtype=np.int64)}


def offline_batch_norm(X, weight, bias, state, training, momentum, eps):
    """X: (P, C) rows. Returns y (P, C), mean (C,), rstd (C,), the new state and z, D for the backward."""
    P = X.shape[0]
    if training:
        mu, var, d = moments(X, (0,))                                  # (1, C), (1, C), (P, C)
        D = np.sqrt(var + eps)                                         # (1, C)
        z = d / D                                                      # (P, C)
        state = {"running_mean": (1 - momentum) * state["running_mean"] + momentum * mu[0],
                 "running_var": (1 - momentum) * state["running_var"] + momentum * (var[0] * (P / (P - 1))),
                 "iters": state["iters"] + 1}
    else:
        mu, D = state["running_mean"], np.sqrt(state["running_var"] + eps)          # (C,)
        z = (X - mu) / D                                               # (P, C)
    y = z if weight is None else z * weight
    y = y if bias is None else y + bias
    return y, mu.reshape(-1).copy(), 1.0 / D.reshape(-1), state, z, D


def offline_batch_norm_backward(dY, z, D, weight, has_bias, training):
    """dY: (P, C). Returns dx (P, C), dweight (C,) or None, dbias (C,) or None."""
    g = dY if weight is None else dY * weight                          # dL/dz, (P, C)
    if training:
        dx = (g - (g.sum(axis=0) / g.shape[0] + z * ((g * z).sum(axis=0) / g.shape[0]))) / D
    else:
        dx = g / D                                                     # a fixed affine map
    dweight = None if weight is None else (dY * z).sum(axis=0)
    dbias = dY.sum(axis=0) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    opts = check(x, w, b, state, training, config)
    st = offline_state(initial_state(x.shape[1]), state)
    y, mean, rstd, st, z, D = offline_batch_norm(rows(x), w, b, st, training, opts["momentum"], opts["eps"])
    outputs = {"y": unrows(y, x.shape), "mean": mean, "rstd": rstd, "r": np.ones(x.shape[1])}
    return Forward(outputs, st, (x.shape, z, D, w, b is not None, training))


def backward(ctx, cot):
    shape, z, D, w, has_bias, training = ctx
    dx, dw, db = offline_batch_norm_backward(rows(cot["y"]), z, D, w, has_bias, training)
    return Backward.of(x=unrows(dx, shape), weight=dw, bias=db)
