"""Bound for lp_normalize (y = x / max(||x||_p, eps); zero_rule "onnx": y = 0 where ||x||_p == 0).

Rows: one row per slice over ``dim`` (n values). float64, from the inputs the backend saw; u, g(n) as in
_rows.py; eta = half the smallest subnormal of the accumulation dtype; u_d, eta_d of the case dtype.
p: 1, 2 or any finite p > 0 (refnorm refuses p <= 0 and p = inf, so those have no bound).

    N = ||x||_p  S = N^p = sum|x|^p  D = max(N, eps) (onnx: N)  U = x/N  W = sign(U)|U|^(p-1) (0 at U = 0)
    T = sum(dy U)  Ta = sum|dy U|  dx = (dy - W T)/N (norm branch), dy/eps (torch, N < eps), 0 (onnx, N = 0)

    dN  = ((g(n) + cS) u + n eta/S)/p + cR u        the relative error of N
        cS = 1, 3, p+2 (p = 1, 2, other): each |x|^p term's rounding, scaling by s = max|x| included (as
        the reference: (1+u)^p, then the product or pow); n eta: underflow of the terms; /p: the root
        divides S's relative error by p; cR = 1, 2, 3: the root (sqrt 1u, pow 2u) and the product by s.
    E_norm = dN N = E_N       E_e = u eps (eps rounded)
    E_D = E_N where surely N > eps (N - E_N > eps + E_e), E_e where surely N < eps, else max(E_N, E_e):
        max() is 1-Lipschitz in each argument, so y needs no branch analysis.
    E_y = |y| (E_D/D + 4u)                           division or reciprocal and product (k = 4)
    E_dx = dN (|dy| + (|p-1|+2)|W||T|)/N + u[(g(n)+2)|W| Ta + (4 + cW)|W||T| + 4|dy|]/N    (norm branch)
        N-sensitivity: dy/N scales as 1/N, W T/N = sign(x)|x|^(p-1) sum(dy x) N^(-p-1) as N^(-p-1);
        |p-1|+2 (>= p+1) also covers kernels whose N^(p-1), 1/N and T see differently rounded N's.
        g(n)+2: the sum T with U and dy U rounded; cW = 1, 0, |p-1|+3 (p = 2, 1, other): U's rounding
        reaches W times |p-1|, plus the pow; 4: product, difference, division.
    E_dx = (e/(1-e) + 3u)|dy|/eps, e = E_e/eps       (N < eps: the rounded eps, the division)
    E_dx = 0                                         (onnx, N = 0: exact)
    Branch ambiguity (torch rule, eps > 0): where neither branch is sure (|N - eps| <= E_N + E_e) a
    correct kernel may take either branch of the discontinuous gradient; there E_dx = max(E_this,
    E_other + |dx_other - dx_this|), which covers both (not ill-posed: nothing is left unconstrained).

Contracts. h(m1, m2, ..) = r/(1 - r), r = sum_i (u_d + eta_d/|m_i|) bounds the relative error that one
rounding to d of each intermediate of magnitude m_i causes (subnormals and second order included:
u_d^2 is 4 float32 units for float16; r >= 1: inf). stats_d (the norm, D and 1/D held in d):
dN += h(N, 1/D) in y and dx, h(N) in the norm; E_e += u_d eps + eta_d (eps in d: 1e-12 is 0 in
float16, which matters only where the clamp may act, and there dy/eps is unbounded); dx += 2u_d|W||T|/N
(T held in d). epi_d additionally 2u_d times each pointwise bracket (y: |y|, plus 2 eta_d; dx: (|dy| +
|W||T| + |W| Ta)/N, the products dy U rounded to d before the sum).
Not covered: |x|^p or the norm overflowing the accumulation dtype or d (torch overflows too, see
norms/lp_normalize.py). E = 0 where the reference is NaN (only NaN passes there).
"""
from __future__ import annotations

import numpy as np

from ...norms import lp_normalize as ref
from ..precision import ETA, UNIT_ROUNDOFF, gamma
from .standardize import Layout


def eta_of(u):
    """Half the smallest subnormal of the accumulation dtype whose unit roundoff is ``u``."""
    return ETA["float64"] if u <= UNIT_ROUNDOFF["float64"] else ETA["float32"]


def clean(E, refv):
    """E = 0 where the reference is NaN (then only NaN passes); a NaN bound elsewhere (non-finite
    inputs) means unconstrained (inf)."""
    E = np.asarray(E, dtype=np.float64)
    refv = np.broadcast_to(np.asarray(refv, dtype=np.float64), E.shape)
    return np.where(np.isnan(refv), 0.0, np.where(np.isnan(E), np.inf, E))


def held(case_dtype, *mags):
    """Relative error of a result through intermediates of magnitudes ``mags`` each rounded once to the
    case dtype d (used as factors or divisors): each rounding errs by u_d + eta_d/|m| relatively
    (gradual underflow), and r roundings by at most r/(1 - r) with r their sum (second order included:
    u_d^2 is a few float32 units). r >= 1: unconstrained (inf)."""
    ud, eta = UNIT_ROUNDOFF[case_dtype], ETA[case_dtype]
    with np.errstate(all="ignore"):
        r = sum(ud + eta / np.abs(np.asarray(m, dtype=np.float64)) for m in mags)
        return np.where(r < 1, r / (1 - r), np.inf)


def norm_rel_error(N, p, n, u, gn, eta):
    """dN: the relative error of a computed ||x||_p of n terms (module docstring)."""
    cS = {1.0: 1.0, 2.0: 3.0}.get(p, p + 2.0)
    cR = {1.0: 1.0, 2.0: 2.0}.get(p, 3.0)
    with np.errstate(all="ignore"):
        S = N ** p
        under = np.where(N > 0, n * eta / S, 0.0)
    return ((gn + cS) * u + under) / p + cR * u


def bound(inputs, cfg, training, dy, u, reduction, contract, case_dtype):
    x = np.asarray(inputs["x"], dtype=np.float64)
    p = float(cfg.get("p", 2.0))
    eps = float(cfg.get("eps", ref.DEFAULT_EPS))
    rule = cfg.get("zero_rule", "torch")
    axes = ref._axes(cfg.get("dim", 1), x.ndim)
    L = Layout(x.shape, axes)
    X = L.rows(x)
    n = L.n
    gn = gamma(n, reduction)
    eta = eta_of(u)
    ud = UNIT_ROUNDOFF[case_dtype]
    lowp = contract in ("stats_d", "epi_d")
    with np.errstate(all="ignore"):
        N = ref.lp_norm(X, p, (1,))                                  # (m, 1)
        torch_rule = rule == "torch"
        D = np.maximum(N, eps) if torch_rule else N
        dN0 = norm_rel_error(N, p, n, u, gn, eta)
        dN = dN0 + (held(case_dtype, N, 1 / D) if lowp else 0.0)
        E_N = dN * N
        E_e = (u * eps + ((ud * eps + ETA[case_dtype]) if lowp else 0.0)) if torch_rule else 0.0  # eps rounded
        sure_N = N - E_N > eps + E_e
        sure_e = eps - E_e > N + E_N
        E_D = np.where(sure_N, E_N, np.where(sure_e, E_e, np.maximum(E_N, E_e))) if torch_rule else E_N
        safeD = np.where(D > 0, D, 1.0)
        Y = np.where(D > 0, X / safeD, 0.0)
        E_y = np.abs(Y) * (np.where(D > 0, E_D / safeD, 0.0) + 4 * u)
        if contract == "epi_d":
            E_y = E_y + 2 * ud * np.abs(Y) + 2 * ETA[case_dtype]
        kshape = [1 if i in axes else s for i, s in enumerate(x.shape)]
        E_norm = (dN0 + (held(case_dtype, N) if lowp else 0.0)) * N
        outs = {"y": clean(L.back(E_y), L.back(Y)), "norm": clean(E_norm.reshape(kshape), N.reshape(kshape))}
        grads = {}
        if dy is not None:
            G = L.rows(dy)
            big = (N >= eps) if torch_rule else (N != 0)
            safeN = np.where(N > 0, N, 1.0)
            U = X / safeN
            if p == 2.0:
                W, cW = U, 1.0
            elif p == 1.0:
                W, cW = np.sign(U), 0.0
            else:
                W, cW = np.where(U == 0, 0.0, np.sign(U) * np.abs(U) ** (p - 1.0)), abs(p - 1.0) + 3.0
            T = (G * U).sum(axis=1, keepdims=True)
            Ta = np.abs(G * U).sum(axis=1, keepdims=True)
            aW, aT, aG = np.abs(W), np.abs(T), np.abs(G)
            dx_proj = (G - W * T) / safeN
            E_proj = (dN * (aG + (abs(p - 1.0) + 2.0) * aW * aT)
                      + u * ((gn + 2) * aW * Ta + (4 + cW) * aW * aT + 4 * aG)) / safeN
            if lowp:
                E_proj = E_proj + 2 * ud * aW * aT / safeN
                if contract == "epi_d":
                    E_proj = E_proj + 2 * ud * (aG + aW * aT + aW * Ta) / safeN
            if torch_rule and eps > 0:
                dx_small = G / eps
                re = E_e / eps                                      # relative error of the rounded eps
                E_small = ((re / (1 - re) if re < 1 else np.inf) + 3 * u + (2 * ud if contract == "epi_d" else 0.0)) \
                    * aG / eps
                zone = ~sure_N & ~sure_e & (N > 0)
                E_dx = np.where(big, E_proj, E_small)
                other = np.where(big, E_small + np.abs(dx_small - dx_proj), E_proj + np.abs(dx_proj - dx_small))
                E_dx = np.where(zone, np.maximum(E_dx, other), E_dx)
                dx = np.where(big, dx_proj, dx_small)
            else:
                E_dx = np.where(big, E_proj, 0.0)
                dx = np.where(big, dx_proj, 0.0)
            grads["x"] = clean(L.back(E_dx), L.back(dx))
    return outs, grads, {}
