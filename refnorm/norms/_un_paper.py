"""Unified Normalization, ``preset="paper"``: the seed's equations (seeds/000_3e1db211412e1377.txt).

Arrays are flattened to (P, C); ``keep`` (P,) marks the non-padded positions K. The documentation
(and why the filter's threshold is taken from the previous window) is in ``unified_norm.py``.

Forward, call t (t incremented first; slots k = t mod M_f, j = t mod M_b):
    s      = mean_K(x^2)                               sigma_t^2, per channel (mu_hat = 0)
    theta_c = M_f * Var_ddof1(sqrt(H_x[:, c]))        per channel, the M_f statistics BEFORE s
    H_x[k] = s                                         always (no overwrite)
    early  = t < T_w or t <= M_f                       no full window yet, or warm-up
    skip   = outlier_filtration and M_f > 1 and not early and any_c(A_c - G_c > theta_c)
    sig2   = s if (early or skip) else G               G: geometric mean of H_x (with s)
    z = x / sqrt(sig2 + eps);  y = weight * z + bias;  v = alpha * v + (1 - alpha) * sig2;  r = 1
Backward:
    dz = weight * dy;  g = sum_P(dz * z) / |K|         the exact gradient statistic of sigma_t^2
    H_g[j] = g                                         always
    psi = g if (skip or t < T_w or t <= M_b) else alpha * psi_old + (1 - alpha) * mean_i(H_g[i])
    dx = (dz - [keep] * psi * z) / sqrt(sig2 + eps);  dweight = sum_P(dy * z);  dbias = sum_P(dy)
With psi = g and sig2 = s this dx is the true gradient of the forward, padding included.
"""
from __future__ import annotations

import numpy as np

from . import _common as C
from ._un_official import am_gm_gap, geometric_mean, mean_square


def forward(x2d, keep, st, *, Mf, Mb, warmup, filtration, eps, alpha):
    """One training forward. Returns (z, sig2, r, new_state, aux) like the official preset."""
    t = st["iters"] + 1
    hx, v = st["buffer_x2"].copy(), st["running_var"]
    nskip = st["skip_counter"]
    s = mean_square(x2d, keep)
    early = t < warmup or t <= Mf
    skip = False
    hx[t % Mf] = s
    if filtration and Mf > 1 and not early:
        theta = Mf * C.moments(np.sqrt(st["buffer_x2"]), (0,), ddof=1)[1][0]
        if bool(np.any(am_gm_gap(hx) > theta)):
            skip = True
            nskip += 1
    sig2 = s if (early or skip) else geometric_mean(hx)
    z = x2d / np.sqrt(sig2 + eps)
    new = {**st, "iters": t, "skip_counter": nskip, "buffer_x2": hx,
           "running_var": alpha * v + (1 - alpha) * sig2}
    return z, sig2, np.ones_like(sig2), new, {"t": t, "skip": skip, "keep": keep}


def backward(dy2d, z, sig2, r, weight, st, aux, *, Mb, warmup, eps, alpha):
    """One training backward after ``forward``. Returns (dx2d, dweight, dbias, new_state)."""
    t, skip, keep = aux["t"], aux["skip"], aux["keep"]
    dz = dy2d if weight is None else dy2d * weight
    nk = int(np.count_nonzero(keep))
    g = np.sum(dz * z, axis=0) / nk if nk else np.full(dz.shape[1], np.nan)
    hg = st["buffer_gz"].copy()
    hg[t % Mb] = g
    if skip or t < warmup or t <= Mb:
        psi = g
    else:
        psi = alpha * st["ema_gz"] + (1 - alpha) * hg.mean(axis=0)
    dx = (dz - np.where(keep[:, None], psi * z, 0.0)) / np.sqrt(sig2 + eps)
    return dx, np.sum(dy2d * z, axis=0), np.sum(dy2d, axis=0), {**st, "buffer_gz": hg, "ema_gz": psi}
