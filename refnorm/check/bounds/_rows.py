"""Running error bounds for normalizers that standardize rows (docs/tolerances.md, section 3).

One row is one reduction set of n values (a layer_norm token, a (sample, group) of group_norm, a
channel of batch_norm over N*spatial, ...). Every quantity below is computed in float64 from the
very inputs the backend saw; u is the unit roundoff of the accumulation dtype, g(n) the reduction
multiplier of the declared reduction model (precision.gamma), k = 4 pointwise roundings.

    mu = mean(x) (rms: 0)   var = sum((x-mu)^2)/(n-ddof) (rms: mean(x^2))   r = 1/sqrt(var+eps)
    (eps_mode "std": r = 1/(sqrt(var)+eps))   xh = (x-mu) r   y = xh w + b
    S = mean|x|   K = r S (rms: 0)   kap = r(|x|+|mu|) (rms: |xh|)   rho = (1+K)/2
    gw = g w   A = mean(gw) (rms: 0)   B = mean(gw xh)   Ag = mean|gw|  Bg = mean|gw xh|  Kg = mean(|gw| kap)

    E_y  = u[g(n)|w|(K + rho|xh|) + 4(|w|kap + |b| + |y|)] + (g(n)u)^2 |w|(|xh|+1) K^2/2
    E_dx = u[g(n)(r(Ag + |xh|((1+rho)Bg + Kg) + |B|(K + 3rho|xh|)) + rho|dx|)
             + 4r(|gw| + |A| + |xh||B| + |B|kap + |xh|Kg)] + (g(n)u)^2 (|dx| + r(|B|+Ag)(|xh|+1)) K^2/2
    dw, db (sums over the m contributions of each parameter element):
    T_w  = u[g(m)|g|kap + g(n)|g|(K + rho|xh|) + 4|g|kap] + (g(n)u)^2 |g|(|xh|+1) K^2/2,   T_b = u g(m)|g|
    statistics: E_mean = u(g(n) S + 4|mu|),  E_rstd = u r (g(n) rho + 4)

The terms: the mean's error ~ g(n) u S is amplified by r (the cancellation x - mu), hence the K
terms; the variance of a Welford or pairwise-merge kernel errs relatively by g(n) u K
(Chan-Golub-LeVeque), so rstd by g(n) u rho; kap covers kernels that compute x (r w) + (b - mu r w)
(rounding at magnitude r|x|, not r|x - mu|); the squared terms are second order and matter only where
g(n) u K -> 1, where the problem is ill-posed and the bound rightly becomes vacuous.

Contract extensions (u_d, eta_d of the case dtype; D = r(|mu| + eta_d/u_d) + |xh|, Kmu = r|mu|):
    stats_d adds  y: 2u_d|w|D + 2u_d^2|w|(|xh|+1)Kmu^2
                  dx: 2u_d(r(|B|D + |xh| mean(|gw|D)) + |dx|) + 2u_d^2(|dx| + r(|B|+Ag)(|xh|+1))Kmu^2
                  T_w: u_d(2|g|D + g(m)|g xh|) + 2u_d^2|g|(|xh|+1)Kmu^2,  T_b: u_d g(m)|g|
                  mean: 2u_d|mu|,  rstd: 2u_d r + 2u_d^2 r Kmu^2
    epi_d adds, on top of stats_d, 2u_d times each bracket multiplied by 4 above, plus 2 eta_d(1+|w|).
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import numpy as np

from ..precision import ETA, UNIT_ROUNDOFF, gamma


@dataclass
class RowBounds:
    """Per-element (m, n) bounds for y and dx, per-element parameter-gradient terms (sum them per
    parameter element), per-row (m,) bounds for the saved statistics, and row magnitudes."""
    y: np.ndarray
    dx: np.ndarray | None
    t_w: np.ndarray | None
    t_b: np.ndarray | None
    mean: np.ndarray
    rstd: np.ndarray
    S: np.ndarray
    K: np.ndarray
    var: np.ndarray
    mu: np.ndarray
    t_w_pat: np.ndarray | None = None    # the compiled path: t_w, t_b summed per element of the parameter
    t_b_pat: np.ndarray | None = None    # pattern (row_bounds' ``pattern``) instead of per element (with
                                         # ``second``, both contracts' terms)


_SEEN = contextvars.ContextVar("row_bounds_seen", default=None)
_PLAIN = contextvars.ContextVar("plain_statistics", default=None)


@contextlib.contextmanager
def plain_statistics(u: float, input_bits: int, acc_bits: int, orders=(("block", None),)):
    """Within: rows bounded with unit roundoff ``u`` (the contract's, not the reference's) take the
    statistics as plain two-pass sums of the widened inputs (a contract declaring acc "mean" and "var"):
    the mean's error is that of its sum, 0 where the sum is exact (``exact_rows``), plus the division's
    u |mu|, instead of the g(n) u S a Welford or merge kernel may commit; K (= r S, the mean's error
    amplification) becomes K_eff = r err_mean / (g(n) u) in every term (docs/tolerances.md); ``orders``: the
    sums' declared (order, block) pairs (g(n) the largest of theirs and the contract's). NumPy path only
    (the compiled row bounds do not take it)."""
    token = _PLAIN.set((float(u), int(input_bits), int(acc_bits), tuple(orders)))
    try:
        yield
    finally:
        _PLAIN.reset(token)


def plain_active(u) -> bool:
    p = _PLAIN.get()
    return p is not None and p[0] == float(u)


def exact_rows(x, input_bits: int, acc_bits: int) -> np.ndarray:
    """(m, 1) bools: whether a row's plain sum in any order is exact in a float of ``acc_bits`` significand
    bits: every value a multiple of q (the smallest ulp among the row's nonzero values, in a float of
    ``input_bits`` bits: the inputs are on that grid) and sum |x| <= 2^acc_bits q, so that every partial sum
    is an integer multiple of q below 2^acc_bits q: representable, each addition exact."""
    ax = np.abs(x)
    nz = ax > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(nz, np.floor(np.log2(np.where(nz, ax, 1.0))), np.inf)
    q = np.exp2(np.min(e, axis=1, keepdims=True) - (input_bits - 1))
    q = np.where(np.isfinite(q), q, 1.0)
    on_grid = np.all(np.where(nz, np.mod(x, q) == 0, True), axis=1, keepdims=True)
    small = ax.sum(axis=1, keepdims=True) <= np.exp2(acc_bits) * q
    return on_grid & small & np.isfinite(ax).all(axis=1, keepdims=True)


@contextlib.contextmanager
def seen_calls(dry=False):
    """Within: every call of the compiled row bounds appends its arguments to the list this yields (its
    scalars in _judge.judge_rows' order, the parameter pattern, wdiv, runs, the rows' shape): the
    streaming judge's compiled block pipeline runs the very bounds the bounds layer chose for its first
    block on the others (stream.py). ``dry``: the calls are only seen, not made: their bounds are zeros
    (read-only broadcast zeros: no memory, nothing computed), for a caller that wants the calls and the
    names only."""
    calls = []
    token = _SEEN.set((calls, dry))
    try:
        yield calls
    finally:
        _SEEN.reset(token)


def _native_rows(x, pattern, g, eps, u, gn, gm, centered, ddof, eps_mode, contract, ud, eta, second=None, runs=1):
    """The compiled row_bounds (refnorm.check._judge.row_bounds: the formulas below, the row sums in
    interleaved partial sums, equal within rounding) for parameters given as a ``pattern`` (w, b, wdiv): w, b
    None or (wrows, wcols) arrays; row i uses pattern row (i // wdiv) % wrows; wcols dividing n: element j
    uses value j // (n // wcols) of it), or None when the compiled module is not built."""
    from ..compare import native
    mod = native()
    if mod is None or x.ndim != 2 or x.shape[1] < 1:
        return None
    w, b, wdiv = pattern
    wp, bp = (None if a is None else np.ascontiguousarray(a, dtype=np.float64) for a in (w, b))
    shp = next((a.shape for a in (wp, bp) if a is not None), (1, 1))
    m, n = x.shape
    x = np.ascontiguousarray(x)
    tw = tb = None
    if g is not None:
        g = np.ascontiguousarray(g, dtype=np.float64)
        tw, tb = np.zeros(shp), np.zeros(shp)
    lowp = contract in ("stats_d", "epi_d")
    u2, gn2, gm2 = (0.0, 0.0, 0.0) if second is None else (float(v) for v in second)
    scalars = (float(eps), float(u), float(gn), float(gm), float(ud), float(eta), int(centered), int(ddof),
               int(eps_mode == "std"), int(lowp), int(contract == "epi_d"), u2, gn2, gm2)
    seen, dry = _SEEN.get() or (None, False)
    if seen is not None:
        seen.append(dict(scalars=scalars, w=wp, b=bp, pattern=shp, wdiv=int(wdiv), runs=int(runs), shape=(m, n),
                         with_g=g is not None))
    if dry:                                     # seen only (seen_calls): zeros, read-only, no memory at all
        st = np.zeros((6, m))
        zero = np.broadcast_to(0.0, (m, n))
        return RowBounds(zero, None if g is None else zero, None, None, *st, tw, tb)
    E_y, E_dx, stats = np.empty((m, n)), None if g is None else np.empty((m, n)), np.empty((m, 6))
    mod.row_bounds(x, wp, bp, g, E_y, E_dx, tw, tb, stats, *scalars[:5], *scalars[6:11], scalars[5],
                   shp[0], shp[1], u2, gn2, gm2, int(runs), int(wdiv))
    st = stats.T
    return RowBounds(E_y, E_dx, None, None, st[0].copy(), st[1].copy(), st[2].copy(), st[3].copy(), st[4].copy(),
                     st[5].copy(), tw, tb)


def row_bounds(x, w=None, b=None, g=None, *, eps, u, reduction, m_param=1, centered=True, ddof=0,
               eps_mode="inside", contract="strict", case_dtype="float32", pattern=None, second=None,
               runs=1) -> RowBounds:
    """Bounds for rows ``x`` (m, n); ``w``, ``b``, ``g`` broadcast to (m, n) or None (see module doc).
    ``pattern``: (w, b, wdiv): w, b as (wrows, wcols) patterns (row i uses pattern row (i // wdiv) % wrows; wcols
    dividing n: element j uses value j // (n // wcols); wcols 1: one value
    per row, n: per element), when the caller has them: then the compiled path (when built) runs, and
    returns t_w, t_b summed per pattern element (``t_w_pat``, ``t_b_pat``); ``w`` and ``b`` may then be None.
    ``second`` (u2, gn2, gm2), compiled path only: the bounds of the strict contract of unit roundoff u2
    and multipliers gn2 = g(n), gm2 = g(m) added to y, dx, mean and rstd's and to the parameter terms
    (standardize.plus_strict). ``runs`` P > 1 (compiled path only): ``x`` and ``g`` are given as they lie
    in a (P, m, n / P) array, row i being the P runs [p, i] (batch_norm's channels), not as rows."""
    x = np.asarray(x, dtype=np.float64)
    m, n = x.shape
    gn, gm = gamma(n, reduction), gamma(m_param, reduction)
    if plain_active(u):
        gn = max([gn] + [gamma(n, o, b) for o, b in _PLAIN.get()[3]])
    if (second is not None or runs > 1) and pattern is None:
        raise ValueError("row_bounds: a second contract or rows in runs need the compiled path (a parameter pattern)")
    if pattern is not None:
        fast = _native_rows(x, pattern, g, eps, u, gn, gm, centered, ddof, eps_mode, contract,
                            UNIT_ROUNDOFF[case_dtype], ETA[case_dtype], second, runs)
        if fast is None:
            raise RuntimeError("row_bounds: a parameter pattern needs the compiled module (refnorm.check._judge)")
        return fast
    with np.errstate(all="ignore"):
        if centered:
            mu = x.mean(axis=1, keepdims=True)
            var = ((x - mu) ** 2).sum(axis=1, keepdims=True) / max(n - ddof, 1)
        else:
            mu = np.zeros((m, 1))
            var = (x * x).mean(axis=1, keepdims=True)
        r = 1.0 / (np.sqrt(var) + eps) if eps_mode == "std" else 1.0 / np.sqrt(var + eps)
        xh = (x - mu) * r
        aw = np.ones_like(x) if w is None else np.abs(np.broadcast_to(w, x.shape))
        ab = np.zeros_like(x) if b is None else np.abs(np.broadcast_to(b, x.shape))
        y = xh * (1.0 if w is None else np.broadcast_to(w, x.shape)) + (0.0 if b is None else b)
        S = np.abs(x).mean(axis=1, keepdims=True)
        axh = np.abs(xh)
        plain = plain_active(u)
        if centered and plain and gn > 0:
            _, ib, ab_, _ = _PLAIN.get()
            err_mean = np.where(exact_rows(x, ib, ab_), 0.0, gn * u * S) + u * np.abs(mu)
            K = r * err_mean / (gn * u)
            kap = r * (np.abs(x) + np.abs(mu))
        elif centered:
            K = r * S
            kap = r * (np.abs(x) + np.abs(mu))
        else:
            K = np.zeros_like(S)
            kap = axh
        rho = (1.0 + K) / 2
        E_y = u * (gn * aw * (K + rho * axh) + 4 * (aw * kap + ab + np.abs(y))) \
            + (gn * u) ** 2 * aw * (axh + 1) * K ** 2 / 2
        E_mean = u * (gn * S + 4 * np.abs(mu))
        E_rstd = u * r * (gn * rho + 4)
        E_dx = t_w = t_b = None
        ud, eta = UNIT_ROUNDOFF[case_dtype], ETA[case_dtype]
        lowp = contract in ("stats_d", "epi_d")
        D = r * (np.abs(mu) + eta / ud) + axh
        Kmu = r * np.abs(mu)
        if g is not None:
            g = np.asarray(g, dtype=np.float64)
            wv = 1.0 if w is None else np.broadcast_to(w, x.shape)
            gw = g * wv
            agw = np.abs(gw)
            A = gw.mean(axis=1, keepdims=True) if centered else np.zeros((m, 1))
            B = (gw * xh).sum(axis=1, keepdims=True) / (max(n - ddof, 1) if centered else n)
            aA, aB = np.abs(A), np.abs(B)
            Ag = agw.mean(axis=1, keepdims=True) if centered else np.zeros((m, 1))
            Bg = (agw * axh).mean(axis=1, keepdims=True)
            Kg = (agw * kap).mean(axis=1, keepdims=True)
            dx = r * (gw - A - xh * B)
            adx = np.abs(dx)
            pw_dx = r * (agw + aA + axh * aB + aB * kap + axh * Kg)
            E_dx = u * (gn * (r * (Ag + axh * ((1 + rho) * Bg + Kg) + aB * (K + 3 * rho * axh)) + rho * adx)
                        + 4 * pw_dx) + (gn * u) ** 2 * (adx + r * (aB + Ag) * (axh + 1)) * K ** 2 / 2
            ag = np.abs(g)
            # the terms summed over the rows: dy (x - mu) r at magnitude kap (a kernel may split the sum), or,
            # declared plain (plain_statistics: x_hat formed per element first), |dy| (|x_hat| + its 4 u kap)
            kap_sum = axh + 4 * u * kap if plain else kap
            t_w = u * (gm * ag * kap_sum + gn * ag * (K + rho * axh) + 4 * ag * kap) \
                + (gn * u) ** 2 * ag * (axh + 1) * K ** 2 / 2
            t_b = u * gm * ag
            if lowp:
                E_dx = E_dx + 2 * ud * (r * (aB * D + axh * (agw * D).mean(axis=1, keepdims=True)) + adx) \
                    + 2 * ud ** 2 * (adx + r * (aB + Ag) * (axh + 1)) * Kmu ** 2
                t_w = t_w + ud * (2 * ag * D + gm * ag * axh) + 2 * ud ** 2 * ag * (axh + 1) * Kmu ** 2
                t_b = t_b + ud * gm * ag
                if contract == "epi_d":
                    E_dx = E_dx + 2 * ud * pw_dx
                    t_w = t_w + 2 * ud * ag * kap
        if lowp:
            E_y = E_y + 2 * ud * aw * D + 2 * ud ** 2 * aw * (axh + 1) * Kmu ** 2
            E_mean = E_mean + 2 * ud * np.abs(mu)
            E_rstd = E_rstd + 2 * ud * r + 2 * ud ** 2 * r * Kmu ** 2   # variance about the d-rounded mean
            if contract == "epi_d":
                E_y = E_y + 2 * ud * (aw * kap + ab + np.abs(y)) + 2 * eta * (1 + aw)
    return RowBounds(E_y, E_dx, t_w, t_b, E_mean[:, 0], E_rstd[:, 0], S[:, 0], K[:, 0], var[:, 0], mu[:, 0])
