"""Bounds for the element-wise replacements of a norm: dyt (dynamic tanh) and poly_norm (PolyCom)
(docs/dyt_poly_norm.md, section "Bounds"). Everything in float64 from the inputs the backend saw; u is the
unit roundoff of the accumulation dtype, g(N) the reduction multiplier of the declared reduction model
(precision.gamma); u_d, eta_d those of the case dtype (contracts stats_d and epi_d).

dyt: z = alpha x, t = tanh z, D = tanh'(z) = sech^2 z, w = weight (1 when absent), g = dy w.
    E_t  = u (4|t| + D|z|)                tanh within 2 ulps (4u relative), and z = alpha x rounded once
                                          (moves t by D |z| u)
    E_D  = 2|t| E_t + E_t^2 + u (t^2 + 8D)
        covers D formed as 1 - t*t from the computed t (|t_c^2 - t^2| <= 2|t| E_t + E_t^2, the square and
        the difference rounded: u (t^2 + D)) and D formed from exponentials (within 8u relative). Where
        tanh saturates in float32 (t = 1, D = 0 computed) the bound is 2|t| E_t ~ 8u: a correct float32
        kernel may lose tanh' there; one that rounds t to float16 first errs by u_d, 250 times more.
    E_y  = |w| E_t + 2u (|t w| + |b| + |y|)
    E_dx = |alpha g| E_D + 4u |dx|
    E_dalpha  = sum over every element of |g x| E_D + (3 + g(N)) u sum |g D x|      N = x.size
    E_dweight = sum over the rows of |dy| E_t + (1 + g(M)) u sum |dy t|,   E_dbias = g(M) u sum |dy|
        (M = x.size / C rows)
  stats_d (parameter-gradient accumulators in d): + g(.) u_d times the same sums of |terms|.
  epi_d: t rounded to d before the epilogue and the backward (E_t += u_d |t| + eta_d), y and dx rounded to
  d once more each (2 u_d |y| + 2 eta_d, 2 u_d |dx|).

poly_norm: per power p (3, 2, 1) with its weight c_p (w0, w1, w2), U_p = x^p in rows of H, h_p = U_p r_p.
    The plain rms_norm row bound (_rows.row_bounds, not centred, eps inside; weight c_p, no bias) of U_p
    gives E_y_p (of c_p h_p), E_du_p (of du_p with g = dy c_p) and the terms T_p of sum(dy h_p) with g(N)
    for their sum over all N elements; around it:
    - U_p is formed with k_p roundings (k = 3, 1, 0 for p = 3, 2, 1: x*x*x or pow; x*x): relative error
      k_p u, which moves h_p by at most 2 k_p u |h_p| (dh = r (dU - h mean(h dU)), mean(h^2) <= 1), r_p by
      k_p u relative and du_p by k_p u r_p (|g_p| + 3|h_p||B_p| + 2|h_p| mean(|g_p h_p|)), B_p = mean(g_p h_p);
    - y = sum_p c_p h_p + b: E_y = sum_p (E_y_p + 2 k_p u |c_p h_p|) + 3u (sum_p |c_p h_p| + |b|);
    - dx = sum_p q_p du_p, q_p = p x^(p-1): E_dx = sum_p |q_p| (E_du_p + the U_p term) + 6u sum_p |q_p du_p|
      (q_p's roundings, the product, the two additions);
    - E_dweight[k] = sum(T_p) + sum(|dy| 2 k_p u |h_p|),  E_dbias = g(N) u sum |dy|.
  stats_d and epi_d: _rows' own contract terms for each power (statistics r_p held in d), and g(N) u_d sum |dy|
  for dbias under both.
Not covered: x^(2p) overflowing the accumulation dtype (|x| > 2.6e6 in float32: beyond every float16 value).
"""
from __future__ import annotations

import numpy as np

from ..precision import ETA, UNIT_ROUNDOFF, gamma
from . import _rows

LOWP = ("stats_d", "epi_d")
ROUNDINGS = {3: 3, 2: 1, 1: 0}          # k_p: roundings forming x^p


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def dyt(inputs, cfg, cots, u, red, contract, dt):
    """{outputs}, {grads}, {} for one dyt call (module docstring)."""
    x = _f64(inputs["x"])
    alpha = _f64(inputs["alpha"])
    a = float(alpha.reshape(()))
    w, b = _f64(inputs.get("weight")), _f64(inputs.get("bias"))
    ud, eta_d = UNIT_ROUNDOFF[dt], ETA[dt]
    lowp, epi = contract in LOWP, contract == "epi_d"
    N = x.size
    M = N // x.shape[-1] if x.shape[-1] else 0
    lead = tuple(range(x.ndim - 1))
    with np.errstate(all="ignore"):
        z = a * x
        t = np.tanh(z)
        r = 1.0 / np.cosh(z)
        D = r * r
        E_t = u * (4 * np.abs(t) + D * np.abs(z)) + ((ud * np.abs(t) + eta_d) if epi else 0.0)
        E_D = 2 * np.abs(t) * E_t + E_t * E_t + u * (t * t + 8 * D)
        aw = 1.0 if w is None else np.abs(w)
        tw = t if w is None else t * w
        y = tw if b is None else tw + b
        E_y = aw * E_t + 2 * u * (np.abs(tw) + (0.0 if b is None else np.abs(b)) + np.abs(y))
        if epi:
            E_y = E_y + 2 * ud * np.abs(y) + 2 * eta_d
        outs = {"y": E_y}
        grads = {}
        dy = _f64(cots.get("y")) if cots else None
        if dy is not None:
            g = dy if w is None else dy * w
            dx = a * g * D
            E_dx = np.abs(a * g) * E_D + 4 * u * np.abs(dx)
            if epi:
                E_dx = E_dx + 2 * ud * np.abs(dx) + 2 * eta_d
            terms = np.abs(g * D * x)
            sum_terms = float(terms.sum())
            E_da = float((np.abs(g * x) * E_D).sum()) + (3 + gamma(N, red)) * u * sum_terms
            if lowp:
                E_da += gamma(N, red) * ud * sum_terms
            grads = {"x": E_dx, "alpha": np.full(alpha.shape, E_da)}
            adyt = np.abs(dy * t).sum(axis=lead)
            ady = np.abs(dy).sum(axis=lead)
            if w is not None:
                grads["weight"] = (np.abs(dy) * E_t).sum(axis=lead) + (1 + gamma(M, red)) * u * adyt \
                    + (gamma(M, red) * ud * adyt if lowp else 0.0)
            if b is not None:
                grads["bias"] = gamma(M, red) * (u + (ud if lowp else 0.0)) * ady
    return outs, grads, {}


def poly_norm(inputs, cfg, cots, u, red, contract, dt):
    """{outputs}, {grads}, {} for one poly_norm call (module docstring)."""
    x = _f64(inputs["x"])
    w, b = _f64(inputs["weight"]), _f64(inputs.get("bias"))
    eps = float(cfg.get("eps", 1e-6))
    H = x.shape[-1]
    X = x.reshape(-1, H)
    N = x.size
    ud = UNIT_ROUNDOFF[dt]
    dy = _f64(cots.get("y")) if cots else None
    G = None if dy is None else dy.reshape(-1, H)
    E_y = np.zeros(X.shape)
    mag_y = np.zeros(X.shape) + (0.0 if b is None else float(np.abs(b).reshape(())))
    E_dx = None if G is None else np.zeros(X.shape)
    mag_dx = None if G is None else np.zeros(X.shape)
    E_dw = np.zeros(3)
    with np.errstate(all="ignore"):
        for k, p in enumerate((3, 2, 1)):
            kp, c = ROUNDINGS[p], float(w[k])
            U = X ** p
            rb = _rows.row_bounds(U, np.full((1, 1), c), None, G, eps=eps, u=u, reduction=red, m_param=N,
                                  centered=False, contract=contract, case_dtype=dt)
            r = 1.0 / np.sqrt(rb.var + eps)[:, None]             # r_p per row (var: mean(U^2), not centred)
            h = U * r
            ah = np.abs(h)
            E_y += rb.y + 2 * kp * u * abs(c) * ah
            mag_y += abs(c) * ah
            if G is not None:
                gp = G * c
                B = (gp * h).mean(axis=1, keepdims=True)
                Bg = (np.abs(gp) * ah).mean(axis=1, keepdims=True)
                du = r * (gp - h * B)
                q = np.ones_like(X) if p == 1 else p * X ** (p - 1)
                E_du = rb.dx + kp * u * r * (np.abs(gp) + 3 * ah * np.abs(B) + 2 * ah * Bg)
                E_dx += np.abs(q) * E_du
                mag_dx += np.abs(q * du)
                E_dw[k] = float(rb.t_w.sum()) + float((np.abs(G) * 2 * kp * u * ah).sum())
        outs = {"y": (E_y + 3 * u * mag_y).reshape(x.shape)}
        grads = {}
        if G is not None:
            grads["x"] = (E_dx + 6 * u * mag_dx).reshape(x.shape)
            grads["weight"] = E_dw
            if b is not None:
                s = float(np.abs(G).sum())
                grads["bias"] = np.full(b.shape, gamma(N, red) * (u + (ud if contract in LOWP else 0.0)) * s)
    return outs, grads, {}
