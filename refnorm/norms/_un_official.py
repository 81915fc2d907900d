"""Unified Normalization, ``preset="official"``: one training call of the official code.

Restated from /work/shared/UN_SEMANTICS.md section 3 (no upstream source is used). Arrays are
flattened to (P, C): P = B*N positions, C channels; ``keep`` (P,) marks the non-padded positions K.
The public entry point and the documentation are in ``unified_norm.py``; the shared numerical helpers
below (mean square, geometric mean, AM - GM gap) are also used by the paper preset.

Forward, call t (t is incremented first; ring-buffer slots k = t mod M_f, j = t mod M_b):
    s      = mean_K(x^2)                           per channel, padding excluded
    theta  = Var_ddof1(sqrt(H_x))                  ONE scalar, pooled over the M_f*C entries, before s
    H_x[k] = s
    skip   = M_f <= 1
    if outlier_filtration and t >= T_w and any_c(A_c - G_c > M_f * theta):   A, G over H_x (with s)
        H_x[k] = v; skip = True; skip_counter += 1
    sig2   = s if (t <= M_f or t < T_w or skip) else G
    r      = 1 if (t <= max(1000, T_w) or skip) else clip(sqrt(sig2 + eps) / sqrt(v + eps), 1/5, 5)
    z = x / sqrt(sig2 + eps) (all positions);  y = weight * z + bias;  v = alpha * v + (1 - alpha) * sig2
Backward (the same call):
    g = dy * weight * r;  q = mean_P(g * z)        pads included, divided by P
    H_g[j] = psi_old if skip else q
    m = q if (t <= M_b or t < T_w or skip) else mean_i(H_g[i])
    psi = alpha * psi_old + (1 - alpha) * m        every call
    dx = (g - p * z) / sqrt(sig2 + eps),  p = q if skip else psi (the UPDATED EMA)
    dweight = sum_P(dy * r * z),  dbias = sum_P(dy)
"""
from __future__ import annotations

import numpy as np

from . import _common as C

R_AFTER = 1000  # the official code's hard-coded start of the gradient compensation r
R_MIN, R_MAX = 0.2, 5.0


# ------------------------------------------------------------------------ shared numerical helpers
def mean_square(x2d: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per-channel mean of x^2 over the kept rows of x2d (P, C); NaN where no row is kept.

    Padded rows are selected out (not multiplied by 0), so NaN/Inf at a padded position never
    reaches the statistic.
    """
    xs = x2d[keep]
    return np.sum(xs * xs, axis=0) / xs.shape[0] if xs.shape[0] else np.full(x2d.shape[1], np.nan)


def _log_ratio(H: np.ndarray):
    """(ref, h, L): ref = max_i H[i] per channel, h = H / ref in [0, 1], L = mean_i log(h).

    Scaling by the largest slot makes a constant history give h == 1, L == 0 EXACTLY, so its
    geometric mean is exactly the constant and its AM - GM gap exactly 0 (not a few ulps, which
    the outlier test could mistake for a fluctuation). Channels with ref 0, Inf or NaN fall back
    to the plain formulas (exp(mean log H): 0 for a zero slot, Inf/NaN propagate).
    """
    ref = H.max(axis=0) if H.shape[0] else np.zeros(H.shape[1:])
    good = np.isfinite(ref) & (ref > 0)
    safe = np.where(good, ref, 1.0)
    h = np.where(good, H / safe, H)
    return ref, good, h, np.log(h).mean(axis=0)


def geometric_mean(H: np.ndarray) -> np.ndarray:
    """exp(mean_i log H[i, c]) per channel of a window H (M, C) of non-negative statistics."""
    ref, good, _, L = _log_ratio(H)
    return np.where(good, ref * np.exp(L), np.exp(L))


def am_gm_gap(H: np.ndarray) -> np.ndarray:
    """A_c - G_c = mean_i H[i, c] - geometric_mean(H)[c], without cancelling the leading terms.

    With h = H / ref: A - G = ref * (mean(h - 1) - expm1(mean log h)); h - 1 is exact (Sterbenz)
    and both terms are accurate relative to themselves, so the O(spread^2) gap keeps its digits.
    """
    ref, good, h, L = _log_ratio(H)
    plain = H.mean(axis=0) - np.exp(L)
    return np.where(good, ref * ((h - 1.0).mean(axis=0) - np.expm1(L)), plain)


# ---------------------------------------------------------------------------------- training call
def forward(x2d, keep, st, *, Mf, Mb, warmup, filtration, eps, alpha):
    """One training forward. ``st`` is the state (copied here). Returns (z, sig2, r, new_state, aux)."""
    t = st["iters"] + 1
    hx, v = st["buffer_x2"].copy(), st["running_var"]
    nskip = st["skip_counter"]
    s = mean_square(x2d, keep)
    skip = Mf <= 1
    theta = C.moments(np.sqrt(st["buffer_x2"]).reshape(-1), (0,), ddof=1)[1][0]
    k = t % Mf
    hx[k] = s
    if filtration and t >= warmup and bool(np.any(am_gm_gap(hx) > Mf * theta)):
        hx[k] = v
        skip = True
        nskip += 1
    sig2 = s if (t <= Mf or t < warmup or skip) else geometric_mean(hx)
    if t <= max(R_AFTER, warmup) or skip:
        r = np.ones_like(sig2)
    else:
        r = np.clip(np.sqrt(sig2 + eps) / np.sqrt(v + eps), R_MIN, R_MAX)
    z = x2d / np.sqrt(sig2 + eps)
    new = {**st, "iters": t, "skip_counter": nskip, "buffer_x2": hx,
           "running_var": alpha * v + (1 - alpha) * sig2}
    return z, sig2, r, new, {"t": t, "skip": skip}


def backward(dy2d, z, sig2, r, weight, st, aux, *, Mb, warmup, eps, alpha):
    """One training backward after ``forward``. Returns (dx2d, dweight, dbias, new_state)."""
    t, skip = aux["t"], aux["skip"]
    g = dy2d * r if weight is None else dy2d * (weight * r)
    n = g.shape[0]
    q = np.sum(g * z, axis=0) / n if n else np.full(g.shape[1], np.nan)
    psi_old = st["ema_gz"]
    hg = st["buffer_gz"].copy()
    hg[t % Mb] = psi_old if skip else q
    m = q if (t <= Mb or t < warmup or skip) else hg.mean(axis=0)
    psi = alpha * psi_old + (1 - alpha) * m
    p = q if skip else psi
    dx = (g - p * z) / np.sqrt(sig2 + eps)
    dweight = np.sum(dy2d * r * z, axis=0)
    dbias = np.sum(dy2d, axis=0)
    return dx, dweight, dbias, {**st, "buffer_gz": hg, "ema_gz": psi}
