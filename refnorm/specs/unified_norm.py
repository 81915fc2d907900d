"""Unified Normalization, the specification: the official training/eval step and the paper's equations,
written out with their explicit state (module docstring of refnorm/norms/unified_norm.py for the conventions,
docs/unified_norm_semantics.md section 3 for the official algorithm).

x (B, N, C) or (N, C) is read as rows X (P, C); K = the rows that are not padding. Per channel, call t:
forward   t = iters + 1,  s = mean_K(X^2)                                  (NO mean removed; 0/0 = NaN if K is empty)
          H_x[t mod M_f] = s;  gate (if outlier_filtration and t >= T_w): fire when any channel has
            AM(H_x) - GM(H_x) > M_f theta
            official: theta = ONE var_ddof1(sqrt(H_x before s)) over all slots and channels; firing stores v in
                      the slot instead of s; a window M_f = 1 always skips (uncounted)
            paper:    theta per channel, only for M_f > 1 and t > M_f
          a firing gate skips the smoothing (skip) and counts skip_counter
          sig2 = s if t <= M_f or t < T_w or skip, else GM(H_x)                (the geometric mean per channel)
          official: r = clip(sqrt(sig2 + eps) / sqrt(v + eps), 1/5, 5) for t > max(1000, T_w) unskipped, else 1;
          paper: r = 1
          D = sqrt(sig2 + eps),  z = X / D,  y = weight * z + bias,  v <- alpha v + (1 - alpha) sig2
backward  g = dy * (weight r),  q = sum_P(g z) / n      n = P (official: pads included), |K| (paper)
          official: H_g[t mod M_b] = psi if skip else q;  psi <- alpha psi + (1 - alpha) m,  m = q if early else mean(H_g)
          paper:    H_g[t mod M_b] = q;                   psi <- q if early else alpha psi + (1 - alpha) mean(H_g)
          (early = t <= M_b or t < T_w or skip);  p = q if skip else psi
          dx = (g - p z) / D  (paper: p z at the kept rows only);  dweight = sum_P(dy r z),  dbias = sum_P(dy)
eval      z = X / sqrt(v + eps), r = 1, var = v;  dx = g / sqrt(v + eps);  state unchanged
State: running_var v (C,) = 1, ema_gz psi (C,) = 0, buffer_x2 H_x (M_f, C) = 0, buffer_gz H_g (M_b, C) = 0,
iters = 0, skip_counter = 0 initially. alpha (``momentum``) weighs the OLD value.
GM and AM - GM are taken relative to the largest slot (``geometric_mean``, ``am_gm_gap``): a constant window
gives its constant and a gap of 0 exactly.
Agreement with the fast path: the same bits (the same reductions over the rows X).
"""
from __future__ import annotations

import math

import numpy as np

from ..norms.unified_norm import check
from ..spec import Backward, Forward
from ._math import moments

AGREEMENT = {}          # every array: the same bits
STATE = ("running_var", "ema_gz", "buffer_x2", "buffer_gz", "iters", "skip_counter")


def initial_state(C, Mf, Mb):
    return {"running_var": np.ones(C), "ema_gz": np.zeros(C), "buffer_x2": np.zeros((Mf, C)),
            "buffer_gz": np.zeros((Mb, C)), "iters": np.zeros(1, np.int64), "skip_counter": np.zeros(1, np.int64)}


def _log_ratio(H):
    """ref = max_i H_i (C,), h = H / ref (M, C), L = mean_i log h (C,); ref 0, Inf or NaN: h = H."""
    ref = H.max(axis=0) if H.shape[0] else np.zeros(H.shape[1:])
    good = np.isfinite(ref) & (ref > 0)
    h = np.where(good, H / np.where(good, ref, 1.0), H)
    return ref, good, h, np.log(h).mean(axis=0)


def geometric_mean(H):
    """GM = exp(mean_i log H_i) per channel of a window H (M, C) >= 0, as ref * exp(mean_i log(H_i / ref))."""
    ref, good, h, L = _log_ratio(H)
    return np.where(good, ref * np.exp(L), np.exp(L))


def am_gm_gap(H):
    """AM - GM per channel, as ref * (mean_i (h_i - 1) - expm1(mean_i log h_i)): no cancellation."""
    ref, good, h, L = _log_ratio(H)
    return np.where(good, ref * ((h - 1.0).mean(axis=0) - np.expm1(L)), H.mean(axis=0) - np.exp(L))


def unified_norm(X, keep, weight, bias, st, official, Mf, Tw, filt, eps, alpha):
    """Training forward. X: (P, C), keep: (P,) bool or None. Returns y (P, C), sig2 (C,), r (C,), the new
    state, skip and D (C,)."""
    t = int(st["iters"][0]) + 1
    Xk = X if keep is None else X[keep]                                # (|K|, C)
    s = (Xk * Xk).sum(axis=0) / Xk.shape[0] if Xk.shape[0] else np.full(X.shape[1], np.nan)   # (C,)
    H, v, k = st["buffer_x2"].copy(), st["running_var"], t % Mf        # (M_f, C), (C,)
    H[k] = s
    skip, fire = official and Mf <= 1, False
    if filt and t >= Tw:
        roots = np.sqrt(st["buffer_x2"])                               # the window before s, (M_f, C)
        if official:
            fire = bool(np.any(am_gm_gap(H) > Mf * moments(roots.reshape(-1), (0,), ddof=1)[1][0]))
        elif Mf > 1 and t > Mf:
            fire = bool(np.any(am_gm_gap(H) > Mf * moments(roots, (0,), ddof=1)[1][0]))
    if fire and official:
        H[k] = v                                                       # official: the slot gets v, not s
    skip = skip or fire
    sig2 = s if (t <= Mf or t < Tw or skip) else geometric_mean(H)     # (C,)
    if official and not (t <= max(1000, Tw) or skip):
        r = np.clip(np.sqrt(sig2 + eps) / np.sqrt(v + eps), 0.2, 5.0)  # (C,)
    else:
        r = np.ones_like(sig2)
    D = np.sqrt(sig2 + eps)                                            # (C,)
    z = X / D                                                          # (P, C)
    y = z if weight is None else z * weight
    y = y if bias is None else y + bias
    new = {**st, "running_var": alpha * v + (1 - alpha) * sig2, "buffer_x2": H, "iters": np.array([t]),
           "skip_counter": st["skip_counter"] + fire}
    return y, sig2, r, new, skip, z, D


def unified_norm_backward(dY, keep, z, D, r, weight, st, skip, official, Mb, Tw, alpha):
    """Training backward. dY: (P, C). Returns dx (P, C), dweight (C,) or None, dbias (C,), the new state."""
    t = int(st["iters"][0])
    g = dY * r if weight is None else dY * (weight * r)                # (P, C)
    n = g.shape[0] if (official or keep is None) else int(keep.sum())  # official: pads included
    q = (g * z).sum(axis=0) / n if n else np.full(g.shape[1], np.nan)  # (C,)
    psi, Hg, j = st["ema_gz"], st["buffer_gz"].copy(), t % Mb
    Hg[j] = psi if (official and skip) else q
    early = t <= Mb or t < Tw or skip
    if official:
        psi = alpha * psi + (1 - alpha) * (q if early else Hg.mean(axis=0))
    else:
        psi = q if early else alpha * psi + (1 - alpha) * Hg.mean(axis=0)
    pz = z * (q if skip else psi)                                      # (P, C)
    pz = pz if (official or keep is None) else np.where(keep[:, None], pz, 0.0)
    dx = (g - pz) / D
    dweight = None if weight is None else (dY * r * z).sum(axis=0)
    return dx, dweight, dY.sum(axis=0), {**st, "ema_gz": psi, "buffer_gz": Hg}


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b, pad = inputs["x"], inputs.get("weight"), inputs.get("bias"), inputs.get("pad_mask")
    o, _ = check(x, w, b, pad, state, training, **config)
    C = x.shape[-1]
    st = {**initial_state(C, o["window_f"], o["window_b"]), **state}
    st.update({k: np.asarray(st[k], dtype=np.int64).reshape(1) for k in ("iters", "skip_counter")})
    X = x.reshape(math.prod(x.shape[:-1]), C)                          # (P, C)
    keep = None if pad is None else pad.reshape(-1) == 0               # (P,)
    official = o["preset"] == "official"
    if training:
        y, sig2, r, new, skip, z, D = unified_norm(X, keep, w, b, st, official, o["window_f"], o["warmup"],
                                                   o["outlier_filtration"], o["eps"], o["momentum"])
    else:
        sig2, r, new, skip = st["running_var"].copy(), np.ones(C), st, None
        D = np.sqrt(sig2 + o["eps"])
        z = X / D
        y = z if w is None else z * w
        y = y if b is None else y + b
    ctx = (x.shape, keep, z, D, r, w, b is not None, pad is not None, new, skip, official, o, training)
    return Forward({"y": y.reshape(x.shape), "var": sig2, "r": r}, {k: new[k] for k in STATE}, ctx)


def backward(ctx, cot):
    shape, keep, z, D, r, w, has_bias, has_pad, st, skip, official, o, training = ctx
    dY = cot["y"].reshape(z.shape)
    if training:
        dx, dw, db, new = unified_norm_backward(dY, keep, z, D, r, w, st, skip, official, o["window_b"], o["warmup"],
                                                o["momentum"])
        new = {k: new[k] for k in STATE}
    else:
        g = dY if w is None else dY * w
        dx, dw, db, new = g / D, (None if w is None else (dY * z).sum(axis=0)), dY.sum(axis=0), None
    grads = {"x": dx.reshape(shape)}
    if dw is not None:
        grads["weight"] = dw
    if has_bias:
        grads["bias"] = db
    if has_pad:
        grads["pad_mask"] = np.zeros(shape[:-1])
    return Backward(grads, new)
