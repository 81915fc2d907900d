"""Bound for min_max_scale (y = (x - min)/(max - min + eps) * weight + bias over ``dim``).

Rows: one row per slice over ``dim`` (n values, m rows). float64 from the inputs the backend saw; u,
g() as in _rows.py, u_d of the case dtype; w = 1, b = 0 when absent.

    min, max: elements of x, exact in any dtype:  E_min = E_max = 0
    R = max - min + eps   yh = (x - min)/R   (R = 0: yh = 0, exact)   y = w yh + b
    E_y  = u (6|w yh| + 2|y|)     x - min (1), max - min and + eps (2), the division or reciprocal and
                                  product (2) -> yh errs by 5u relatively; * w (1); + b (|y|, 2 for the
                                  reciprocal/fused variants)
    g = dy w   S1 = sum g   G1 = sum|g|   S2 = sum g yh   G2 = sum|g yh|
    E_S1 = u (g(n) + 1) G1        E_S2 = u (g(n) + 7) G2    (g rounded; yh's 5u and the product)
    a_min = (S2 - S1)/n_min at the n_min elements equal to min, a_max = S2/n_max at those equal to max
    dx = (g + a_min - a_max)/R,    P = |g| + |a_min| + |a_max| (each where it applies)
    E_dx = [6u P + (E_S1 + E_S2)/n_min + E_S2/n_max (where they apply)]/R
                                  R's 2u and the division; the two additions, the difference S2 - S1
                                  and the division by n (6)
    E_dw = u (g(m) + 6) sum_m|dy yh|     E_db = u g(m) sum_m|dy|      (sums over the m rows)

Ties. The reference splits the gradient reaching the min (max) evenly among the n_min (n_max) tied
elements (torch amin/amax, JAX, TF); torch.min(dim)/argmin-based kernels route all of it to one
element, whichever their reduction order finds first. A correct kernel may put any share c_i in
[0, 1] (sum 1) of the mass a = S2 - S1 (a = S2) at each tied element; per element that is within
|a| (n-1)/n of the even share a/n. So where n_min > 1 (n_max > 1) E_dx adds |a|(n-1)/n/R and takes
the rounding terms at the full mass (P with |a|, E_S without /n). This is exactly the allowance a
kernel routing everything to one element needs, and it makes per-element checks blind, on tied
elements, to a kernel that gives the FULL mass to EVERY tied element (each element alone looks like
"routed here"): that bug is visible only through the slice sum sum_A dx = 0 (it breaks it by
(n-1) a/R), which a per-element bound cannot see. Untied elements and slices are judged as usual.

Contracts: stats_d (the range and its reciprocal held in d; parameter-gradient accumulators in d): yh
errs by h = h(R, R) more (lp_normalize.held: one rounding to d each, subnormal ranges included):
y += h|w yh|, dx += h (P + G2 (1/n_min + 1/n_max where they apply))/R, dweight += sum (u_d g(m)
+ h)|dy yh|, dbias += u_d g(m) sum|dy|. epi_d additionally 2u_d times each pointwise bracket (y: |w yh|
+ |y|, 2 eta_d (1 + |w|); dx: P + (G1 + G2)/n_min + G2/n_max; dweight: sum|dy yh|).
Not covered: the range's overflow (the reference rescales by 1/4 where max - min overflows).
"""
from __future__ import annotations

import math

import numpy as np

from ...norms import min_max_scale as ref
from ..precision import ETA, UNIT_ROUNDOFF, gamma
from .lp_normalize import clean, held
from .standardize import Layout


def bound(inputs, cfg, training, dy, u, reduction, contract, case_dtype):
    x = np.asarray(inputs["x"], dtype=np.float64)
    w_in, b_in = inputs.get("weight"), inputs.get("bias")
    eps = float(cfg.get("eps", 0.0))
    axes = ref._axes(x, cfg.get("dim", -1))
    L = Layout(x.shape, axes)
    X = L.rows(x)
    m, n = X.shape
    gn = gamma(n, reduction)
    ud = UNIT_ROUNDOFF[case_dtype]
    lowp = contract in ("stats_d", "epi_d")
    Wr = np.ones_like(X) if w_in is None else L.rows(ref._param_view(np.asarray(w_in, np.float64), x, axes))
    Br = np.zeros_like(X) if b_in is None else L.rows(ref._param_view(np.asarray(b_in, np.float64), x, axes))
    stat_shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    with np.errstate(all="ignore"):
        mn = X.min(axis=1, keepdims=True)
        mx = X.max(axis=1, keepdims=True)
        R = (mx - mn) + eps
        safeR = np.where(R == 0, 1.0, R)
        yh = np.where(R == 0, 0.0, (X - mn) / safeR)
        Y = Wr * yh + Br
        awy = np.abs(Wr * yh)
        E_y = u * (6 * awy + 2 * np.abs(Y))
        hR = np.where(R == 0, 0.0, held(case_dtype, R, R)) if lowp else 0.0     # the range (and 1/range) in d
        if lowp:
            E_y = E_y + hR * awy
            if contract == "epi_d":
                E_y = E_y + 2 * ud * (awy + np.abs(Y)) + 2 * ETA[case_dtype] * (1 + np.abs(Wr))
        zeros = np.zeros(stat_shape)
        outs = {"y": clean(L.back(E_y), L.back(Y)), "min": clean(zeros, mn.reshape(stat_shape)),
                "max": clean(zeros, mx.reshape(stat_shape))}
        grads = {}
        if dy is not None:
            DY = L.rows(dy)
            g = DY * Wr
            S1 = g.sum(axis=1, keepdims=True)
            G1 = np.abs(g).sum(axis=1, keepdims=True)
            S2 = (g * yh).sum(axis=1, keepdims=True)
            G2 = np.abs(g * yh).sum(axis=1, keepdims=True)
            E_S1, E_S2 = u * (gn + 1) * G1, u * (gn + 7) * G2
            at_min, at_max = X == mn, X == mx
            n_min = np.maximum(at_min.sum(axis=1, keepdims=True), 1)
            n_max = np.maximum(at_max.sum(axis=1, keepdims=True), 1)
            a_min, a_max = S2 - S1, S2
            # per tied element: the full mass (routing); untied: the single element's share (= the mass)
            f_min = np.where(n_min > 1, 1.0, 1.0 / n_min)
            f_max = np.where(n_max > 1, 1.0, 1.0 / n_max)
            P = np.abs(g) + at_min * np.abs(a_min) * f_min + at_max * np.abs(a_max) * f_max
            num = 6 * u * P + at_min * (E_S1 + E_S2) * f_min + at_max * E_S2 * f_max
            tie = at_min * np.abs(a_min) * (n_min - 1) / n_min + at_max * np.abs(a_max) * (n_max - 1) / n_max
            if lowp:
                num = num + hR * (P + G2 * (at_min * f_min + at_max * f_max))
                if contract == "epi_d":
                    num = num + 2 * ud * (P + at_min * (G1 + G2) * f_min + at_max * G2 * f_max)
            E_dx = np.where(R == 0, 0.0, (num + tie) / safeR)
            dx = np.where(R == 0, 0.0, (g + at_min * a_min / n_min - at_max * a_max / n_max) / safeR)
            grads["x"] = clean(L.back(E_dx), L.back(dx))
            other = tuple(i for i in range(x.ndim) if i not in axes)
            mp = max(1, math.prod(x.shape[i] for i in other))
            gm = gamma(mp, reduction)
            if w_in is not None:
                t = np.abs(DY * yh)
                cw = u * (gm + 6) + (ud * gm + hR if lowp else 0.0) + (2 * ud if contract == "epi_d" else 0.0)
                E_dw = L.back(cw * t).sum(axis=other).reshape(np.shape(w_in))
                grads["weight"] = clean(E_dw, (L.back(DY * yh)).sum(axis=other).reshape(np.shape(w_in)))
            if b_in is not None:
                cb = u * gm + (ud * gm if lowp else 0.0)
                E_db = (cb * np.abs(dy)).sum(axis=other).reshape(np.shape(b_in))
                grads["bias"] = clean(E_db, np.asarray(dy, np.float64).sum(axis=other).reshape(np.shape(b_in)))
    return outs, grads, {}
