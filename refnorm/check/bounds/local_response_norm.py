"""Bound for local_response_norm (y = x s^-beta, s = k + alpha/size * sum_{window} x^2, across channels).

Everything per element of x (N, C, *), float64 from the inputs the backend saw; u, g() as in _rows.py,
u_d of the case dtype; window sums use refnorm's own window (torch or onnx reach, clipped), the
transposed window (reaches swapped) for the backward. q = min(size, C) terms per window.

    s = k + c W, c = alpha/size, W = window sum of x^2      P = s^-beta
    E_s  = u[(g(q) + 4)(s - k) + 2s]      the window sum of the rounded squares (1 + g(q)), c applied
                                          as /size and *alpha or as a rounded constant (2), the product
                                          c W (1); k (rounded) and the sum k + cW (2s)
    ds   = E_s / s                        relative error of s
    E_y  = |y| (|beta| ds + 4u)           a relative error ds of s is beta ds in s^-beta; pow (2u: 1 ulp)
                                          and the product or division (k = 4)
    t_j  = dy_j x_j P_j / s_j             B = transposed-window sum of t, Ba = of |t|, Bd = of |t|(|beta|+1) ds
    dx   = dy P - c2 x B,  c2 = 2 alpha beta/size
    E_dx = |beta||dy| P ds + |c2 x| (Bd + (g(q) + 10) u Ba) + u (4|dy| P + |dx|)
        t_j = dy x s^(-beta-1) errs relatively by (|beta|+1) ds (s^-beta and 1/s from possibly differently
        rounded s: |beta|+1 >= |beta+1|) plus ~8u of pointwise roundings (autograd of x / s^beta forms
        dy x / (s^beta)^2 * beta s^(beta-1): three pows and three products); g(q): the window sum;
        2: the constant c2 and the product x B; 4|dy|P: pow and product; |dx|: the difference.

Contracts: stats_d (the scale s and its power s^beta held in d): E_s += s h(s), y += |y| h(s^beta),
dx += h(s^beta)(|dy| P + 2|c2 x| Ba) + 2u_d|c2 x| Ba (B in d); h = lp_normalize.held (one rounding to d
each, subnormals and second order included). epi_d additionally: E_s += 2u_d (s - k) (the squares and
the window sum rounded to d, as a composite in d does), and 2u_d times each pointwise bracket (y: |y| +
2 eta_d; dx: |dy| P + 2|c2 x| Ba + |dx|).
Not covered: sliding-window (running add/subtract) or prefix-sum window kernels (Caffe's CPU LRN): their
error carries over from earlier windows and is not bounded by g(q) u W of the window itself; squares
overflowing the accumulation dtype (|x| > 1.8e19 in float32).
"""
from __future__ import annotations

import numpy as np

from ...norms import local_response_norm as ref
from ..precision import ETA, UNIT_ROUNDOFF, gamma
from .lp_normalize import clean, held


def bound(inputs, cfg, training, dy, u, reduction, contract, case_dtype):
    x = np.asarray(inputs["x"], dtype=np.float64)
    size = int(cfg["size"])
    alpha, beta, k = float(cfg.get("alpha", 1e-4)), float(cfg.get("beta", 0.75)), float(cfg.get("k", 1.0))
    lo, hi = ref.reach(size, cfg.get("window", "torch"))
    C = x.shape[1] if x.ndim > 1 else 1
    gq = gamma(max(1, min(size, C)), reduction)
    ud = UNIT_ROUNDOFF[case_dtype]
    lowp = contract in ("stats_d", "epi_d")
    with np.errstate(all="ignore"):
        s = k + (alpha / size) * ref.window_sum(x * x, lo, hi)
        P = s ** -beta
        E_s = u * ((gq + 4) * (s - k) + 2 * s)
        if lowp:
            E_s = E_s + s * held(case_dtype, s)
            if contract == "epi_d":
                E_s = E_s + 2 * ud * (s - k)
        ds = E_s / s
        hp = held(case_dtype, 1 / P) if lowp else 0.0          # s^beta held in d (torch: x / s^beta)
        y = x * P
        E_y = np.abs(y) * (abs(beta) * ds + hp + 4 * u)
        if contract == "epi_d":
            E_y = E_y + 2 * ud * np.abs(y) + 2 * ETA[case_dtype]
        outs = {"y": clean(E_y, y), "scale": clean(E_s, s)}
        grads = {}
        if dy is not None:
            c2 = 2.0 * alpha * beta / size
            t = dy * x * P / s
            at = np.abs(t)
            B = ref.window_sum(t, hi, lo)
            Ba = ref.window_sum(at, hi, lo)
            Bd = ref.window_sum(at * (abs(beta) + 1.0) * ds, hi, lo)
            dx = dy * P - c2 * x * B
            acx, adyP = np.abs(c2 * x), np.abs(dy) * P
            E_dx = abs(beta) * adyP * ds + acx * (Bd + (gq + 10) * u * Ba) + u * (4 * adyP + np.abs(dx))
            if lowp:
                E_dx = E_dx + hp * (adyP + 2 * acx * Ba)          # s^beta in d: P and P^2 (autograd)
            if lowp:
                E_dx = E_dx + 2 * ud * acx * Ba
                if contract == "epi_d":
                    E_dx = E_dx + 2 * ud * (adyP + 2 * acx * Ba + np.abs(dx))
            grads["x"] = clean(E_dx, dx)
    return outs, grads, {}
