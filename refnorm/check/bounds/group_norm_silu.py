"""Bounds for group_norm_silu: y = silu(p), p = group_norm(x) * weight + bias (docs/group_norm_silu.md, "Bounds";
derivations/group_norm_silu.md for the derivatives used here).

The pre-activation p is group_norm's output: its bound E_p is group_norm's y bound (standardize, the same
contract; under ``plus_strict`` E_acc + E_ref of both contracts). A kernel then evaluates silu at its p~,
|p~ - p| <= E_p. With s = sigmoid(p), q = s (1 - s) and the derivatives (silu' = s (1 + p (1 - s)),
silu'' = q (2 + p (1 - 2 s)), |silu'''| <= q (3 + 1.5 |p|), q <= min(1/4, exp(-|p|))), over the interval
|t - p| <= E_p:
    M2 = qmax (2 + |p| + E_p),  M3 = qmax (3 + 1.5 (|p| + E_p)),  qmax = min(1/4, exp(-max(|p| - E_p, 0)))
bound |silu''| and |silu'''| there (Taylor with the remainder), so
    |silu(p~) - silu(p)|   <= min(|silu'(p)| E_p + M2 E_p^2 / 2, 1.1 E_p)
    |silu'(p~) - silu'(p)| <= min(|silu''(p)| E_p + M3 E_p^2 / 2, 0.5 E_p, 1.2)
(the caps: max |silu'| = 1.0998, max |silu''| = 0.5, silu' spans [-0.0998, 1.0998]; they bind where E_p is
large, in the ill-posed slices)
The SiLU's own evaluation in the accumulation dtype (u; and the float64 reference's, u_ref) adds
    forward:  C_F u (|y| + |silu'(p)| E_p) + 4 eta_A (1 + |p|),  C_F = 8: exp within 2 ulp (4 u), then
              1 + e, the division (or the product p * sigmoid) and a margin; relative, since 1 + exp(-p) >= 1
    backward: C_B u |dy| s (1 + 2 |p|),  C_B = 12: s (exp, the add, the division: 7 u), 1 - s, p (1 - s),
              1 + p (1 - s), s * (...), dy * silu': the terms' magnitudes are at most s (1 + 2|p|) |dy|
              (silu' itself cancels at p = -1.278, so the bound is on the magnitudes, not on |silu'|)
Where exp(-p) may overflow the accumulation dtype (p - E_p < -ln(max)), a kernel's p / (1 + exp(-p)) is -0
and its dp too: the whole |y| (|dy silu'|) is added there (silu(-90) = -7e-38 in float32). eta_A: half the
accumulation dtype's smallest subnormal (the sigmoid's gradual underflow, times |p|). Not covered, by design
(float32 holds silu's far-negative tail to its full relative precision): a sigmoid through tanh,
0.5 (1 + tanh(p / 2)), which errs by u absolute where s << 1, and fast-math exp (2 + 1.16 |p| ulp).
epi_d: the pointwise intermediates held in the case dtype d (a composition F.silu(F.group_norm(x)) in
float16/bfloat16: p rounded to d, then dp = dy * silu'(p) rounded to d): p's rounding is in E_p already
(standardize's epi_d terms: 2 u_d |p| + 2 eta_d (1 + |w|)); dp's adds u_d (|dp| + delta) + eta_d to delta.
The backward is group_norm's with the cotangent dp = dy silu'(p): its bounds (standardize, at the exact dp)
plus the propagation of dp's error delta through that linear map (g = dp w, r = rstd, xh = x_hat, means
over the (sample, group) slice A):
    E_dx += r (|w| delta + mean_A(|w| delta) + |xh| mean_A(|w xh| delta))
    E_dweight_c += sum over n and space of |xh| delta,     E_dbias_c += sum of delta
(first order in delta: the products of delta with the backward's own roundings, O(u^2), are left out as
the second-order terms of _rows are, except its explicit K^2 terms).
"""
from __future__ import annotations

import math

import numpy as np

from ...specs.group_norm import group_norm
from ...specs.group_norm_silu import sigmoid, silu_grad
from ..precision import ETA, UNIT_ROUNDOFF
from . import standardize as S

C_F, C_B = 8, 12
# max |silu'| = 1.0998 (at p = 2.40), silu' spans [-0.0998, 1.0998], max |silu''| = 0.5 (at 0): caps of the
# Taylor bounds where E_p is large (derivations/group_norm_silu.md)
D1_MAX, D1_SPAN, D2_MAX = 1.1, 1.2, 0.5
LN_MAX = {"float64": math.log(np.finfo(np.float64).max), "float32": math.log(np.finfo(np.float32).max)}


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def _acc(u):
    """The accumulation dtype of unit roundoff ``u`` (float64 or float32)."""
    return "float64" if u <= UNIT_ROUNDOFF["float64"] else "float32"


def _envelope(p, E, cubic):
    """max |silu''| (cubic: |silu'''|) over |t - p| <= E (module docstring)."""
    ap = np.abs(p)
    qmax = np.minimum(0.25, np.exp(-np.maximum(ap - E, 0.0)))
    return qmax * ((3.0 + 1.5 * (ap + E)) if cubic else (2.0 + ap + E))


def bound(inputs, cfg, training, dy, u, red, contract, dt):
    """{outputs}, {grads}, {} for one group_norm_silu call (module docstring)."""
    x = _f64(inputs["x"])
    w, b = _f64(inputs.get("weight")), _f64(inputs.get("bias"))
    G, eps = int(cfg["num_groups"]), float(cfg.get("eps", 1e-5))
    N, C = x.shape[:2]
    pb = (1, C) + (1,) * (x.ndim - 2)
    u_ref = S.second_u()                      # the float64 reference's unit roundoff under plus_strict, else 0
    with np.errstate(all="ignore"):
        p, _, rstd, xh = group_norm(x, w, b, G, eps)
        s = sigmoid(p)
        d1 = silu_grad(p)
        dp = None if dy is None else dy * d1
    o, g, _, _ = S.standardize(x, (2,), view=(N, G, -1) if x.size else (N, G, 0), weight=w, bias=b,
                               pshape_bcast=pb, dy=dp, eps=eps, u=u, reduction=red, contract=contract,
                               case_dtype=dt, stat_shape=(N, G), groups=G)
    acc = _acc(u)
    eta = ETA[acc] + (ETA["float64"] if u_ref else 0.0)
    uu = u + u_ref
    with np.errstate(all="ignore"):
        E = np.asarray(o["y"], dtype=np.float64)
        ap, ad1 = np.abs(p), np.abs(d1)
        prop = np.minimum(ad1 * E + _envelope(p, E, False) * E * E / 2, D1_MAX * E)
        E_y = prop + C_F * uu * (np.abs(p * s) + prop) + 4 * eta * (1 + ap)
        E_y = E_y + np.where(p - E < -LN_MAX[acc], np.abs(p * s) + prop, 0.0)    # exp(-p) overflows: y = -0
        E_y = np.where(np.isfinite(E), E_y, np.inf)
        outs = {"y": E_y, "mean": o["mean"], "rstd": o["rstd"]}
        grads = {}
        if dy is None:
            return outs, grads, {}
        ady = np.abs(dy)
        q = s * (1.0 - s)
        d2 = q * (2.0 + p * (1.0 - 2.0 * s))
        dd1 = np.minimum(np.minimum(np.abs(d2) * E + _envelope(p, E, True) * E * E / 2, D2_MAX * E), D1_SPAN)
        delta = ady * dd1 + ady * (C_B * uu * s * (1 + 2 * ap) + 4 * eta * (1 + ap)) + uu * np.abs(dp)
        delta = delta + np.where(p - E < -LN_MAX[acc], ady * (ad1 + dd1), 0.0)    # exp(-p) overflows: dp = -0
        if contract == "epi_d":                       # dp rounded to the case dtype
            delta = delta + UNIT_ROUNDOFF[dt] * (np.abs(dp) + delta) + ETA[dt]
        delta = np.where(np.isfinite(E), delta, np.inf)
        view = (N, G, x.size // (N * G) if N * G else 0)
        aw = np.ones(x.shape) if w is None else np.broadcast_to(np.abs(w).reshape(pb), x.shape)
        r = np.broadcast_to(rstd.reshape(N, G, 1), view)
        wd, wxd, axh = (aw * delta).reshape(view), (aw * np.abs(xh) * delta).reshape(view), np.abs(xh).reshape(view)
        if view[2]:
            extra = r * (wd + wd.mean(axis=2, keepdims=True) + axh * wxd.mean(axis=2, keepdims=True))
        else:
            extra = np.zeros(view)
        grads["x"] = g["x"] + extra.reshape(x.shape)
        other = (0,) + tuple(range(2, x.ndim))
        if w is not None:
            grads["weight"] = g["weight"] + (np.abs(xh) * delta).sum(axis=other)
        if b is not None:
            grads["bias"] = g["bias"] + delta.sum(axis=other)
    return outs, grads, {}
