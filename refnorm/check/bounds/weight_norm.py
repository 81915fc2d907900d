"""Bound for weight_norm (w = g v / ||v||, the L2 norm over every axis but ``dim``; dim=None: all).

Rows: one row per index of ``dim`` (one row for dim=None), n = v.size / rows. float64 from the inputs
the backend saw; u, g(n) as in _rows.py, eta of the accumulation dtype, u_d of the case dtype.

    N = ||v||   U = v/N   w = g U   dg = sum(dw U)   Ga = sum|dw U|   dv = (g/N)(dw - U dg)

    dN     = ((g(n) + 3) u + n eta/N^2)/2 + 2u      lp_normalize's p = 2 term: squares (scaled by s), the
                                                     sum, sqrt halves S's relative error, sqrt and *s
    E_norm = dN N
    E_w    = |w| (dN + 4u)                           g/N or v/N, times g (k = 4)
    E_dg   = u (g(n) + 2) Ga + (dN + 2u)|dg|          the sum over the slice with U and dw U rounded;
                                                     dg = sum(dw v)/N scales as 1/N; the last division
    E_dv   = dN |g|(|dw| + 3|U||dg|)/N + u|g|[(g(n)+2)|U| Ga + 5|U||dg| + 4|dw|]/N
        dv = g dw/N - g v sum(dw v)/N^3: N-sensitivity 1 and 3 (lp_normalize with p = 2); the dg error
        reaches dv through |g U|/N; 5 and 4: the pointwise products, difference, g/N.

Contracts: stats_d (the norm and the scale g/N held in d; dg accumulated in d as rows' parameter
gradients): dN += h(N, g/N) in w and dv, h(N) in norm and dg (lp_normalize.held: one rounding to d
of each, a subnormal g/N included); dg += u_d (g(n) Ga + 2|dg|); dv += 2u_d|g||U||dg|/N (dg in d).
epi_d additionally 2u_d times each pointwise bracket: w: |w| (+ 2 eta_d); dg: Ga (dw U in d);
dv: |g|(|dw| + |U||dg| + |U| Ga)/N.
An all-zero slice has N = 0 and NaN w, dv, dg in the reference (as torch): judged NaN-for-NaN.
"""
from __future__ import annotations

import numpy as np

from ...norms import weight_norm as ref
from ..precision import ETA, UNIT_ROUNDOFF, gamma
from .lp_normalize import clean, eta_of, held, norm_rel_error
from .standardize import Layout


def bound(inputs, cfg, training, dy, u, reduction, contract, case_dtype):
    v = np.asarray(inputs["v"], dtype=np.float64)
    g = np.asarray(inputs["g"], dtype=np.float64)
    dim = ref._dim(cfg.get("dim", 0), v.ndim)
    axes = ref._axes(v.ndim, dim)
    keep = ref._keep_shape(v.shape, dim)
    gv = ref._g_view(g, v, dim)
    L = Layout(v.shape, axes)
    V = L.rows(v)
    Gn = L.rows(gv)                       # g per row, broadcast along it
    n = L.n
    gn = gamma(n, reduction)
    ud = UNIT_ROUNDOFF[case_dtype]
    lowp = contract in ("stats_d", "epi_d")
    with np.errstate(all="ignore"):
        N = ref.l2_norm(V, (1,))
        dN0 = norm_rel_error(N, 2.0, n, u, gn, eta_of(u))
        dNn = dN0 + (held(case_dtype, N) if lowp else 0.0)                  # the norm output, dg
        dN = dN0 + (held(case_dtype, N, Gn[:, :1] / N) if lowp else 0.0)    # w, dv: the scale g/N too
        U = V / N
        Wt = Gn * U
        E_w = np.abs(Wt) * (dN + 4 * u)
        if contract == "epi_d":
            E_w = E_w + 2 * ud * np.abs(Wt) + 2 * ETA[case_dtype]
        outs = {"w": clean(L.back(E_w), L.back(Wt)), "norm": clean((dNn * N).reshape(keep), N.reshape(keep))}
        grads = {}
        if dy is not None:
            DW = L.rows(dy)
            dg = (DW * U).sum(axis=1, keepdims=True)
            Ga = np.abs(DW * U).sum(axis=1, keepdims=True)
            adg, aU, aDW, ag = np.abs(dg), np.abs(U), np.abs(DW), np.abs(Gn)
            E_dg = u * (gn + 2) * Ga + (dNn + 2 * u) * adg
            E_dv = (dN * ag * (aDW + 3 * aU * adg) + u * ag * ((gn + 2) * aU * Ga + 5 * aU * adg + 4 * aDW)) / N
            if lowp:
                E_dg = E_dg + ud * (gn * Ga + 2 * adg)
                E_dv = E_dv + 2 * ud * ag * aU * adg / N
                if contract == "epi_d":
                    E_dg = E_dg + 2 * ud * Ga
                    E_dv = E_dv + 2 * ud * ag * (aDW + aU * adg + aU * Ga) / N
            dv = Gn / N * (DW - U * dg)
            grads["v"] = clean(L.back(E_dv), L.back(dv))
            grads["g"] = clean(E_dg.reshape(g.shape), dg.reshape(g.shape))
    return outs, grads, {}
