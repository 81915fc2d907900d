"""PowerNorm (Shen et al. 2020, Algorithm 1), the specification (module docstring of
refnorm/norms/power_norm.py for the conventions).

x (..., C) is read as rows X (P, C): P = every position but the channel. Per channel, NO mean removed:
    training  psi_B^2 = mean_P(X^2)
              D = sqrt(psi_{t-1}^2 + eps),  z = X / D,  y = weight * z + bias      the RUNNING psi, before this batch
              psi_t^2 = alpha_fwd psi_{t-1}^2 + (1 - alpha_fwd) psi_B^2
    backward  g = weight * dy,  dx = (g - nu_{t-1} z) / D
              nu_t = nu_{t-1} (1 - (1 - alpha_bkw) Gamma) + (1 - alpha_bkw) Lambda,  Gamma = mean_P(z^2), Lambda = mean_P(g z)
              dweight = sum_P(dy z),  dbias = sum_P(dy)
    eval      z = X / sqrt(psi^2 + eps);  dx = g / sqrt(psi^2 + eps)
Both momenta weigh the OLD value. State: running_phi = psi^2 (C,) = 1, nu (C,) = 0, iters = 0 initially;
the forward updates running_phi and iters, the backward nu. Outputs: y, mean = 0 (no mean removed),
rstd = 1 / D, r = 1 (no gradient compensation). An empty batch (P = 0): psi_B^2 = 0/0 = NaN.
Agreement with the fast path: the same bits (the same reductions over the rows X).
"""
from __future__ import annotations

import math

import numpy as np

from ..norms.power_norm import check
from ..spec import Backward, Forward
from ._math import offline_state

AGREEMENT = {}          # every array: the same bits


def initial_state(C):
    return {"running_phi": np.ones(C), "nu": np.zeros(C), "iters": np.zeros(1, dtype=np.int64)}


def power_norm(X, weight, bias, state, training, alpha_fwd, eps):
    """X: (P, C) rows. Returns y (P, C), rstd (C,), the new state, z (P, C) and D (C,)."""
    phi = state["running_phi"]                                         # psi_{t-1}^2, (C,)
    D = np.sqrt(phi + eps)                                             # (C,)
    z = X / D                                                          # (P, C)
    y = z if weight is None else z * weight
    y = y if bias is None else y + bias
    if training:
        psi_B2 = (X * X).sum(axis=0) / X.shape[0]                      # (C,)
        state = {**state, "running_phi": alpha_fwd * phi + (1 - alpha_fwd) * psi_B2, "iters": state["iters"] + 1}
    return y, 1.0 / D, state, z, D


def power_norm_backward(dY, z, D, weight, has_bias, state, training, alpha_bkw):
    """dY: (P, C). Returns dx (P, C), dweight (C,) or None, dbias (C,) or None, the new state (or None)."""
    g = dY if weight is None else dY * weight                          # dL/dz, (P, C)
    if training:
        nu = state["nu"]                                               # nu_{t-1}, (C,)
        dx = (g - z * nu) / D                                          # (P, C)
        Gamma = (z * z).sum(axis=0) / z.shape[0]                       # (C,)
        Lambda = (g * z).sum(axis=0) / z.shape[0]                      # (C,)
        state = {**state, "nu": nu * (1 - (1 - alpha_bkw) * Gamma) + (1 - alpha_bkw) * Lambda}
    else:
        dx, state = g / D, None                                        # a fixed affine map
    dweight = None if weight is None else (dY * z).sum(axis=0)
    dbias = dY.sum(axis=0) if has_bias else None
    return dx, dweight, dbias, state


def rows(x):
    """(..., C) -> (P, C)."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    o = check(x, w, b, state, training, config)
    C = x.shape[-1]
    st = offline_state(initial_state(C), state)
    y, rstd, new, z, D = power_norm(rows(x), w, b, st, training, o["alpha_fwd"], o["eps"])
    outputs = {"y": y.reshape(x.shape), "mean": np.zeros(C), "rstd": rstd, "r": np.ones(C)}
    return Forward(outputs, new, (z, D, w, b is not None, new, training, o["alpha_bkw"]))


def backward(ctx, cot):
    z, D, w, has_bias, st, training, alpha_bkw = ctx
    dx, dw, db, new = power_norm_backward(rows(cot["y"]), z, D, w, has_bias, st, training, alpha_bkw)
    return Backward.of(new, x=dx.reshape(cot["y"].shape), weight=dw, bias=db)
