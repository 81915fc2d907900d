"""Batch Renormalization (Ioffe 2017, Algorithm 1), the specification (module docstring of
refnorm/norms/batch_renorm.py for the conventions).

x (N, C, *) is read as rows X (P, C): P = every position but the channel. Per channel, running mu, sigma:
    training  mu_B, sigma_B^2 - eps = mean_P(X), biased var_P(X)    (two-pass: d = X - mu_B)
              r = clip(sigma_B / sigma, 1/r_max, r_max),  dd = clip((mu_B - mu) / sigma, -d_max, d_max)
              x_hat = d / sigma_B * r + dd,  y = weight * x_hat + bias
              mu <- mu + momentum (mu_B - mu),  sigma <- sigma + momentum (sigma_B - sigma)
    backward  (r, dd constants) g = weight * dy,  x~ = d / sigma_B:
              dx = r / sigma_B * (g - mean_P(g) - x~ mean_P(g x~)),  dweight = sum_P(dy x_hat), dbias = sum_P(dy)
    eval      x_hat = (X - mu) / sigma;  dx = g / sigma
State: running_mean mu (C,) = 0, running_std sigma (C,) = 1, iters (training calls) = 0 initially.
Outputs: y, mean = mu_hat = mu_B - dd D and rstd = 1 / D with D = sigma_B / r (the framework's
x_hat = (x - mu_hat) / D), r = 1 (no gradient compensation; the output is not the renorm r).

Written in the framework's terms (the module docstring's last paragraph), which the fast path computes:
D = sigma_B / r, mu_hat = mu_B - dd D, x_hat = (d + (mu_B - mu_hat)) / D; backward psi_sigma = (mean_P(g x_hat)
- dd mean_P(g)) / r^2, psi_mu = mean_P(g) - dd psi_sigma, dx = (g - (psi_mu + x_hat psi_sigma)) / D.
Agreement with the fast path: the same bits. !! Algorithm 1 written directly (x_hat = d / sigma_B * r + dd,
dx = r / sigma_B (g - mean(g) - x~ mean(g x~))) is MORE accurate: this form cancels (mu_B - mu_hat when |mu_B|
>> dd D; mean(g x_hat) - dd mean(g) when |dd mean(g)| >> |mean(g x~)|). Measured against the direct form:
y 4e-9 relative on golden case const_eps1e-12_f16_3x2x5 (whose exact x_hat is dd = -5), dx up to 7e-5 relative
(3e11 units) on hypothesis inputs, unbounded as dx -> 0: no honest AGREEMENT k exists, so the spec follows
the fast path's form until the fast path is changed (open question, issue 17).
"""
from __future__ import annotations


import numpy as np

from ..norms.batch_renorm import check
from ..spec import Backward, Forward
from ._math import moments, offline_state, rows, unrows

AGREEMENT = {}          # every array: the same bits (see the docstring)


def initial_state(C):
    return {"running_mean": np.zeros(C), "running_std": np.ones(C), "iters": np.zeros(1, dtype=np.int64)}


def batch_renorm(X, weight, bias, state, training, momentum, r_max, d_max, eps):
    """X: (P, C) rows. Returns y (P, C), mean (C,), rstd (C,), the new state and the backward's context."""
    mu, sigma = state["running_mean"], state["running_std"]           # (C,)
    if training:
        mu_B, var, d = moments(X, (0,))                                # (1, C), (1, C), (P, C)
        sig_B = np.sqrt(var + eps)                                     # (1, C)
        r = np.clip(sig_B / sigma, 1 / r_max, r_max)                   # (1, C), a constant
        dd = np.clip((mu_B - mu) / sigma, -d_max, d_max)               # (1, C), a constant
        D = sig_B / r                                                  # the scale, (1, C)
        mu_hat = mu_B - dd * D                                         # the mean used, (1, C)
        x_hat = (d + (mu_B - mu_hat)) / D                              # = d / sig_B * r + dd, (P, C)
        mean, rstd = mu_hat[0], 1.0 / D[0]
        state = {"running_mean": mu + momentum * (mu_B[0] - mu), "running_std": sigma + momentum * (sig_B[0] - sigma),
                 "iters": state["iters"] + 1}
        ctx = (dd, r, D)
    else:
        x_hat = (X - mu) / sigma                                       # (P, C)
        mean, rstd, ctx = mu.copy(), 1.0 / sigma, (None, None, sigma)
    y = x_hat if weight is None else x_hat * weight
    y = y if bias is None else y + bias
    return y, mean, rstd, state, x_hat, ctx


def batch_renorm_backward(dY, x_hat, ctx, weight, has_bias):
    """dY: (P, C). Returns dx (P, C), dweight (C,) or None, dbias (C,) or None."""
    dd, r, D = ctx
    g = dY if weight is None else dY * weight                          # dL/dx_hat, (P, C)
    if dd is None:
        dx = g / D                                                     # eval: D = sigma, a fixed affine map
    else:
        gmean = g.sum(axis=0) / g.shape[0]                             # (C,)
        psi_sigma = ((g * x_hat).sum(axis=0) / g.shape[0] - dd * gmean) / (r * r)    # (1, C)
        psi_mu = gmean - dd * psi_sigma                                # (1, C)
        dx = (g - (psi_mu + x_hat * psi_sigma)) / D                    # (P, C)
    dweight = None if weight is None else (dY * x_hat).sum(axis=0)
    dbias = dY.sum(axis=0) if has_bias else None
    return dx, dweight, dbias


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    o = check(x, w, b, state, training, config)
    st = offline_state(initial_state(x.shape[1]), state)
    y, mean, rstd, st, x_hat, ctx = batch_renorm(rows(x), w, b, st, training, o["momentum"], o["r_max"], o["d_max"],
                                                 o["eps"])
    outputs = {"y": unrows(y, x.shape), "mean": mean, "rstd": rstd, "r": np.ones(x.shape[1])}
    return Forward(outputs, st, (x.shape, x_hat, ctx, w, b is not None))


def backward(ctx, cot):
    shape, x_hat, fctx, w, has_bias = ctx
    dx, dw, db = batch_renorm_backward(rows(cot["y"]), x_hat, fctx, w, has_bias)
    return Backward.of(x=unrows(dx, shape), weight=dw, bias=db)
