"""Bounds for gated_norm (docs/ops_gated.md, section "Bounds"): the group normalization's bound (group_norm's,
bounds/standardize.py, on x viewed as (rows, G, K) with the per-element weight and bias as its pattern), composed
with the SiLU gate's own rounding and with the first-order propagation of the gate's error through the norm.

The gate. A correct kernel forms sigmoid(z) = 1 / (1 + exp(-z)) and silu(z) = z * sigmoid(z) in its accumulator
(unit roundoff u; u_p = u, or u_d under epi_d where the pointwise products round to the case dtype). exp(-z) errs
by at most u (|z| + 3) relative (the argument's scaling to base 2 and the library's ulps), the add and the
reciprocal by u each, so with sig = sigmoid(z), rho = 1 - sig, A = |z|:
    theta = rho u_p (A + 3) + 2 u_p                    (relative error of sig)
    E_s   = |s| (theta + u_p)                          (s = silu(z) = z sig, one more product)
    E_s'  = sig theta (1 + A |1 - 2 sig|) + u_p (2 A sig rho + 3 |s'|)      (s' = sig (1 + z (1 - sig)), four roundings)
Where exp(-z) overflows the accumulator (z < -(ln(max) - 1)), sig = 0, s = 0 and s' = 0: the whole value is the
error (|s|, |s'| added). Subnormal intermediates may flush to zero (GPU ex2.approx.ftz): 2 tiny_acc more on each.

norm_before_gate=False (y = N(x s)): v = x s is formed with error delta = |x| E_s + u_p |v|; N's bound is taken at
the exact v, and delta moves it by (first order, per group, r = rstd, vh = vhat, means over the group; the rms
norm has no mean(delta) term), as bounds/add_norm.py derives for its input error:
    e = r (delta + mean(delta)) + |vh| D,   D = r mean(|vh| delta)
    E_y += |w| e;   E_dv = E_dv(N) + D |dv| + r (e |B| + |vh| mean(|g| e))   (g = dy w, B = mean(g vh))
    E_dx = |s| E_dv + |dv| E_s + u_p |dx|;   E_dz = |x s'| E_dv + |dv x| E_s' + 2 u_p |dz|
    E_dweight += sum over rows |dy| e
norm_before_gate=True (y = N(x) s): N at the exact x, then the gate:
    E_y = |s| E_n + |n| E_s + u_p |y|
    dn = dy s is formed with error dd = |dy| E_s + u_p |dy s|; N's backward bound is taken at the exact dn and the
    backward is linear in dn:  E_dx += r (|w| dd + mean(|w| dd) + |vh| mean(|vh| |w| dd))  (rms: no mean term)
    E_dweight += sum |vh| dd,  E_dbias += sum dd;   E_dz = |dy s'| E_n + |dy n| E_s' + 2 u_p |dz|
"""
from __future__ import annotations

import numpy as np

from ..precision import UNIT_ROUNDOFF
from . import standardize as S


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def _acc_limits(u):
    """(ln(max), tiny) of the accumulator whose unit roundoff is u."""
    dt = np.float64 if u <= UNIT_ROUNDOFF["float64"] else np.float32
    return float(np.log(np.finfo(dt).max)), float(np.finfo(dt).tiny)


def gate_bounds(z, u_p, u):
    """(s, s', E_s, E_s'): silu(z), silu'(z) in float64 and the bounds of a correct kernel's (module docstring)."""
    from ...specs._math import sigmoids
    sig, rho = sigmoids(z)
    A = np.abs(z)
    s, ds = z * sig, sig * (1.0 + z * rho)
    theta = rho * u_p * (A + 3.0) + 2.0 * u_p
    E_s = np.abs(s) * (theta + u_p)
    E_ds = sig * theta * (1.0 + A * np.abs(1.0 - 2.0 * sig)) + u_p * (2.0 * A * sig * rho + 3.0 * np.abs(ds))
    lnmax, tiny = _acc_limits(u)
    over = z < -(lnmax - 1.0)                      # exp(-z) overflows: sig, s, s' come out 0
    E_s = E_s + np.where(over, np.abs(s), 0.0) + 2.0 * tiny
    E_ds = E_ds + np.where(over, np.abs(ds), 0.0) + 2.0 * tiny
    return s, ds, E_s, E_ds


def _group_stats(v, K, centered, eps):
    """(r, vh, mean over the group keepdims as a function): float64 statistics of v viewed in groups of K."""
    vg = v.reshape(v.shape[:-1] + (v.shape[-1] // K, K))
    mu = vg.mean(axis=-1, keepdims=True) if centered else 0.0
    d = vg - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(var + eps)
    def gmean(a):                    # the group mean of a (x.shape), broadcast back to x.shape
        return np.broadcast_to(a.reshape(vg.shape).mean(axis=-1, keepdims=True), vg.shape).reshape(v.shape)
    return np.broadcast_to(r, vg.shape).reshape(v.shape), (d * r).reshape(v.shape), gmean


def gated_norm(inputs, cfg, cots, u, red, contract, dt):
    """{outputs}, {grads}, {} for one gated_norm call (module docstring)."""
    from ...norms._gated_norm_check import group_size
    x, z = _f64(inputs["x"]), _f64(inputs["z"])
    w, b = _f64(inputs["weight"]), _f64(inputs.get("bias"))
    H = x.shape[-1]
    K = group_size(H, cfg.get("group_size"))
    G = H // K
    centered = cfg.get("norm", "rms_norm") == "layer_norm"
    nbg = bool(cfg.get("norm_before_gate", False))
    eps = float(cfg.get("eps", 1e-5))
    u_p = max(u, UNIT_ROUNDOFF[dt]) if contract == "epi_d" else u
    dy = _f64(cots.get("y")) if cots else None
    s, ds, E_s, E_ds = gate_bounds(z, u_p, u)
    v = x if nbg else x * s
    M = int(np.prod(x.shape[:-1]))
    o, g, _, _ = S.standardize(v.reshape(M, H), (2,), view=(M, G, K), weight=w, bias=b, pshape_bcast=(1, H),
                               dy=None if dy is None else (dy * s if nbg else dy).reshape(M, H), eps=eps, u=u,
                               reduction=red, contract=contract, case_dtype=dt, centered=centered, groups=G)
    E_n = o["y"].reshape(x.shape)
    lead = tuple(range(x.ndim - 1))
    with np.errstate(all="ignore"):
        r, vh, gmean = _group_stats(v, K, centered, eps)
        n = vh * w + (0.0 if b is None else b)
        aw = np.abs(w)
        if nbg:
            y = n * s
            outs = {"y": np.abs(s) * E_n + np.abs(n) * E_s + u_p * np.abs(y)}
        else:
            delta = np.abs(x) * E_s + u_p * np.abs(v)
            D = r * gmean(np.abs(vh) * delta)
            e = r * (delta + (gmean(delta) if centered else 0.0)) + np.abs(vh) * D
            outs = {"y": E_n + aw * e}
        if dy is None:
            return outs, {}, {}
        grads = {}
        E_dx0 = g["x"].reshape(x.shape)
        if nbg:
            dn = dy * s
            dd = np.abs(dy) * E_s + u_p * np.abs(dn)
            gw = dn * w
            B = gmean(gw * vh)
            dv = r * (gw - (gmean(gw) if centered else 0.0) - vh * B)
            wd = aw * dd
            grads["x"] = E_dx0 + r * (wd + (gmean(wd) if centered else 0.0) + np.abs(vh) * gmean(np.abs(vh) * wd))
            grads["weight"] = g["weight"] + (np.abs(vh) * dd).sum(axis=lead)
            if b is not None:
                grads["bias"] = g["bias"] + dd.sum(axis=lead)
            dz = dy * n * ds
            grads["z"] = np.abs(dy * ds) * E_n + np.abs(dy * n) * E_ds + 2 * u_p * np.abs(dz)
        else:
            gw = dy * w
            B = gmean(gw * vh)
            dv = r * (gw - (gmean(gw) if centered else 0.0) - vh * B)
            E_dv = E_dx0 + D * np.abs(dv) + r * (e * np.abs(B) + np.abs(vh) * gmean(np.abs(gw) * e))
            dx = dv * s
            grads["x"] = np.abs(s) * E_dv + np.abs(dv) * E_s + u_p * np.abs(dx)
            dz = dv * x * ds
            grads["z"] = np.abs(x * ds) * E_dv + np.abs(dv * x) * E_ds + 2 * u_p * np.abs(dz)
            grads["weight"] = g["weight"] + (np.abs(dy) * e).sum(axis=lead)
            if b is not None:
                grads["bias"] = g["bias"]
    return outs, grads, {}
