"""The terms a contract's declared rounding points add to its preset's bound (docs/tolerances.md,
"Contracts as rounding points"), for layer_norm, rms_norm and add_norm.

Rows as in _rows.py: x (m, n) (add_norm: the residual sum s), mu (rms: 0), r = rstd, xh = x_hat,
w the gain, g = dy * w, A = mean(g) (rms: 0), B = mean(g xh), dn = r (g - A - xh B) (dx of the norm).
A value v rounded to dtype d becomes v (1 + delta) + eta, |delta| <= u_d, |eta| <= eta_d (subnormals);
each declared point adds |d out / d v| (u_d |v| + eta_d) to each array it reaches (first order):

    mean      e = r (u_d |mu| + eta_d), a constant shift of xh:      y |w| e,  dx r (e |B| + |xh| mean(|g|) e),
              dweight |dy| e; and the variance about the rounded mean, var + (e / r)^2, moves r by at most
              e^2 / 2 relative (1 - (1 + t)^-1/2 <= t / 2): the rstd terms below with u_d -> e^2 / 2;
              e is not small where |mu| >> std (a bfloat16 mean of a row with std 1e-3 |mu| moves xh by
              ~2): dx' - dx = r [(s-1)(g-A) - (s^3-1) xh B - s^3 (e B + e xh A + e^2 A)], s = (1+e^2)^-1/2,
              so dx also gets its exact second-order terms r e^2 (|A| + |xh||B|)
    rstd      relative u_d on r and xh:         y u_d |w xh|,  dx u_d (|dn| + 2 r |xh||B|),  dweight u_d |dy xh|
    xhat      e_j = u_d |xh_j| + eta_d:         y |w| e,  dx r (e |B| + |xh| mean(|g| e)),  dweight |dy| e
    xhat_w    y u_d |xh w| + eta_d
    g         e_j = u_d |g_j| + eta_d:          dx r (e + mean(e) + |xh| mean(|xh| e))   (rms: no mean(e))
    dy_xhat   dweight u_d |dy xh| + eta_d
    dx_terms  dx 2 (u_d r (|g| + |A| + |xh||B|) + eta_d)
    residual_out (add_norm)  e_s = u_d |s| + eta_d moves xh by X = r (e_s + mean(e_s)) + |xh| R,
              R = r mean(|xh| e_s) (rms: no mean(e_s)), r by R relative:
              y |w| X,  ds R |dn| + r (X |B| + |xh| mean(|g| X)),  dweight |dy| X,  residual_out 0 (its
              own rounding is the output's); with recompute xhat=residual_out only the backward reads
              the rounded sum (the forward normalizes the unrounded one, flash-attention's way): no y term.
A reduction accumulated otherwise (acc: dtype d, order o, block b) adds the difference of its gamma
terms, c = max(0, u_d gamma_o(k) - u gamma(k)) (k its length, u, gamma the contract's defaults):
    mean      as the mean's rounding with u_d |mu| -> c S (S = mean|x|)
    var       as the rstd's rounding with u_d -> c (1 + K) / 2 (K = r S; rms: c / 2)
    dweight   dweight c sum|dy xh|         dbias  dbias c sum|dy|
    dx_sums   dx r (c mean|g| + |xh| c mean|g xh|)     (rms: no mean|g| term)
Second order: every term is multiplied by (1 + U), U the sum of the declared u_d, and U times the
preset's own bound is added to every array (a rounding of a value that already carries the preset's error).
"""
from __future__ import annotations

import numpy as np

from ..precision import ETA, UNIT_ROUNDOFF, acc_dtype, gamma
from .. import contracts as K


def _dt(d, case_dtype):
    return case_dtype if d == "input" else d


class _Rows:
    """Row quantities of one call (module docstring)."""

    def __init__(self, x, w, dy, eps, centered, eps_mode="inside", stats=None):
        """``stats``: (mean, rstd) as (m, 1) rows to use in place of x's own (bounds/saved.py)."""
        with np.errstate(all="ignore"):
            self.x = x
            n = x.shape[1]
            self.mu = x.mean(axis=1, keepdims=True) if centered else np.zeros((x.shape[0], 1))
            var = ((x - self.mu) ** 2).mean(axis=1, keepdims=True)
            self.r = 1.0 / (np.sqrt(var) + eps) if eps_mode == "std" else 1.0 / np.sqrt(var + eps)
            if stats is not None:
                self.mu, self.r = (stats[0] if centered else self.mu), stats[1]
            self.xh = (x - self.mu) * self.r
            self.w = np.ones_like(x) if w is None else np.broadcast_to(w, x.shape)
            self.S = np.abs(x).mean(axis=1, keepdims=True)
            self.K = self.r * self.S if centered else np.zeros_like(self.S)
            self.centered, self.n = centered, n
            self.dy = dy
            if dy is not None:
                self.g = dy * self.w
                self.A = self.g.mean(axis=1, keepdims=True) if centered else np.zeros_like(self.S)
                self.B = (self.g * self.xh).mean(axis=1, keepdims=True)
                self.dn = self.r * (self.g - self.A - self.xh * self.B)


def _mean(a):
    return a.mean(axis=1, keepdims=True)


def extra_rows(R: _Rows, rounds, accs, case_dtype, u, reduction, m_param, recompute=None, forward_residual=True,
               plain=False):
    """{"y", "dx", "t_w", "t_b", "mean", "rstd"}: the extra per-element terms (rows) of the declared
    points (module docstring); t_w, t_b per element, to be summed per parameter element. ``plain``: the
    contract declares plain statistics (contracts.plain_statistics): its mean and var entries are in the
    preset's bound already (_rows.plain_statistics)."""
    recompute = recompute or {}
    z = np.zeros_like(R.x)
    out = {"y": z.copy(), "mean": np.zeros(R.x.shape[0]), "rstd": np.zeros(R.x.shape[0])}
    bwd = R.dy is not None
    if bwd:
        out.update(dx=z.copy(), t_w=z.copy(), t_b=z.copy())
    aw, axh = np.abs(R.w), np.abs(R.xh)
    with np.errstate(all="ignore"):
        def shift(e):                               # xh moved by e (per element or per row)
            out["y"] += aw * e
            if bwd:
                ag = np.abs(R.g)
                out["dx"] += R.r * (e * np.abs(R.B) + axh * _mean(ag * e))
                out["t_w"] += np.abs(R.dy) * e

        def rel_r(eps_r):                            # r (and so xh) relatively off by eps_r
            out["y"] += eps_r * aw * axh
            out["rstd"] += (eps_r * R.r)[:, 0]
            if bwd:
                out["dx"] += eps_r * (np.abs(R.dn) + 2 * R.r * axh * np.abs(R.B))
                out["t_w"] += eps_r * np.abs(R.dy) * axh

        for p, d in rounds.items():
            d = _dt(d, case_dtype)
            ud, eta = UNIT_ROUNDOFF[d], ETA[d]
            if p == "mean" and R.centered:
                e = R.r * (ud * np.abs(R.mu) + eta)
                shift(e)
                rel_r(e * e / 2)         # the variance about the rounded mean: var + delta^2 (exact to t/2)
                if bwd:                  # e need not be small (a 16-bit mean of a row with |mu| >> std):
                    out["dx"] += R.r * e * e * (np.abs(R.A) + axh * np.abs(R.B))     # its exact e^2 terms
                out["mean"] += (ud * np.abs(R.mu) + eta)[:, 0]
            elif p == "rstd":
                rel_r(ud + eta / R.r)    # r rounded: relative u_d, absolute eta_d (a subnormal r)
            elif p == "xhat":
                shift(ud * axh + eta)
            elif p == "xhat_w":
                out["y"] += ud * aw * axh + eta
            elif p == "g" and bwd:
                e = ud * np.abs(R.g) + eta
                out["dx"] += R.r * (e + (_mean(e) if R.centered else 0) + axh * _mean(axh * e))
            elif p == "dy_xhat" and bwd:
                out["t_w"] += ud * np.abs(R.dy) * axh + eta
            elif p == "dx_terms" and bwd:
                out["dx"] += 2 * (ud * R.r * (np.abs(R.g) + np.abs(R.A) + axh * np.abs(R.B)) + eta)
            elif p == "residual_out":
                e_s = ud * np.abs(R.x) + eta
                Rr = R.r * _mean(axh * e_s)
                X = R.r * (e_s + (_mean(e_s) if R.centered else 0)) + axh * Rr
                if forward_residual and recompute.get("xhat") != "residual_out":
                    out["y"] += aw * X
                if bwd:
                    ag = np.abs(R.g)
                    out["dx"] += Rr * np.abs(R.dn) + R.r * (X * np.abs(R.B) + axh * _mean(ag * X))
                    out["t_w"] += np.abs(R.dy) * X
        u0 = u
        for red, (d, order, block) in accs.items():
            if plain and red in ("mean", "var"):
                continue                 # in the preset's bound already (bounds/_rows.py, plain_statistics)
            d = acc_dtype(case_dtype) if d is None else _dt(d, case_dtype)
            ud = UNIT_ROUNDOFF[d]
            k = m_param if red in ("dweight", "dbias") else R.n
            c = max(0.0, ud * gamma(k, order or reduction, block) - u0 * gamma(k, reduction))
            if red == "mean" and R.centered:
                shift(R.r * c * R.S)
                out["mean"] += (c * R.S)[:, 0]
            elif red == "var":
                rel_r(c * (1 + R.K) / 2)
            elif red == "dweight" and bwd:
                out["t_w"] += c * np.abs(R.dy) * axh
            elif red == "dbias" and bwd:
                out["t_b"] += c * np.abs(R.dy)
            elif red == "dx_sums" and bwd:
                out["dx"] += R.r * (c * (_mean(np.abs(R.g)) if R.centered else 0) + axh * c * _mean(np.abs(R.g) * axh))
    return out


def total_u(contract, case_dtype) -> float:
    """U: the sum of the unit roundoffs the contract's extra points declare (the second-order factor)."""
    r, a, _ = K.extras(contract)
    return sum(UNIT_ROUNDOFF[_dt(d, case_dtype)] for d in r.values()) + \
        sum(UNIT_ROUNDOFF[acc_dtype(case_dtype) if v[0] is None else _dt(v[0], case_dtype)] for v in a.values())


def _layer_rows(inputs, cfg, cots, case_dtype, centered, stats=None):
    """(rows layout, _Rows, m_param) for layer_norm / rms_norm (weight offset applied); ``stats``: _Rows'."""
    from ...norms.rms_norm import default_eps
    from .standardize import Layout
    x = np.asarray(inputs["x"], dtype=np.float64)
    ns = cfg["normalized_shape"]
    ns = (ns,) if isinstance(ns, int) else tuple(ns)
    k = len(ns)
    L = Layout(x.shape, tuple(range(x.ndim - k, x.ndim)))
    w = inputs.get("weight")
    off = float(cfg.get("weight_offset", 0.0) or 0.0)
    w = None if w is None else np.asarray(w, dtype=np.float64) + off
    if centered:
        eps, mode = float(cfg.get("eps", 1e-5)), "inside"
    else:
        eps = cfg.get("eps", None)
        eps = default_eps(case_dtype) if eps is None else float(eps)
        mode = "std" if cfg.get("eps_placement", "inside") == "outside" else "inside"
    dy = cots.get("y")
    rows_w = None if w is None else L.rows(np.broadcast_to(w.reshape((1,) * (x.ndim - k) + ns), x.shape))
    R = _Rows(L.rows(x), rows_w, None if dy is None else L.rows(np.asarray(dy, dtype=np.float64)), eps, centered,
              mode, stats)
    return L, R, ns


def add_extras(op, E, contract, *, inputs, config, cotangents, case_dtype):
    """``E`` (bounds' {"outputs", "grads", "state"}) plus the terms of ``contract``'s points beyond its
    preset (module docstring); ``contracts.validate`` has checked them against ``op``."""
    rounds, accs, recompute = K.extras(contract)
    u = UNIT_ROUNDOFF[acc_dtype(case_dtype, contract.acc)]
    U = total_u(contract, case_dtype)
    cots = {k: np.asarray(v, dtype=np.float64) for k, v in (cotangents or {}).items()}
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    out = {part: {k: np.asarray(v, dtype=np.float64) * (1 + U) for k, v in d.items()} for part, d in E.items()}
    if op in ("layer_norm", "rms_norm"):
        L, R, ns = _layer_rows(inputs, config, cots, case_dtype, op == "layer_norm")
        m = L.m
        t = extra_rows(R, rounds, accs, case_dtype, u, contract.reduction, m, recompute,
                       plain=K.plain_statistics(contract))
        _put(out, L, t, ns, (1 + U), {"x": 1.0}, inputs)
        return out
    if op == "add_norm":
        from .add_norm import _scale
        x = inputs["x"]
        ns = config["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        k = len(ns)
        c, _ = _scale(x, inputs.get("mask"), inputs.get("rowscale"), float(config.get("dropout_p", 0.0)), k)
        s = x * c + (inputs["residual"] if "residual" in inputs else 0.0)
        centered = config.get("norm", "layer_norm") == "layer_norm"
        cfg = {**config, "eps": float(config.get("eps", 1e-5))}
        L, R, _ = _layer_rows({**inputs, "x": s}, cfg, cots, case_dtype, centered)
        t = extra_rows(R, rounds, accs, case_dtype, u, contract.reduction, L.m, recompute,
                       plain=K.plain_statistics(contract))
        _put(out, L, t, ns, (1 + U), {"x": np.abs(c), "residual": 1.0}, inputs)
        if "rowscale" in out["grads"] and "dx" in t:     # drowscale = sum_A(ds x mask) / (1 - p)
            keep = 1.0 if "mask" not in inputs else inputs["mask"]
            xm = np.abs(x * keep) / (1.0 - float(config.get("dropout_p", 0.0)))
            A = tuple(range(x.ndim - k, x.ndim))
            out["grads"]["rowscale"] = out["grads"]["rowscale"] + (1 + U) * (xm * L.back(t["dx"])).sum(axis=A)
        return out
    if op == "norm_quant":
        return E                                      # its points are in already (bounds: y_extra)
    raise AssertionError(f"add_extras: {op}")        # contracts.validate admits no other op


def y_extra(op, contract, *, inputs, config, case_dtype):
    """(terms on y in x's shape, the factor 1 + U on the preset's E_y) of ``contract``'s points for norm_quant
    (its norm's y before the quantizer: layer_norm or rms_norm per ``config["norm"]``)."""
    rounds, accs, recompute = K.extras(contract)
    u = UNIT_ROUNDOFF[acc_dtype(case_dtype, contract.acc)]
    U = total_u(contract, case_dtype)
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    L, R, ns = _layer_rows(inputs, {**config, "eps": float(config.get("eps", 1e-5))}, {}, case_dtype,
                           config.get("norm", "rms_norm") == "layer_norm")
    t = extra_rows(R, rounds, accs, case_dtype, u, contract.reduction, L.m, recompute,
                   plain=K.plain_statistics(contract))
    return (1 + U) * L.back(t["y"]), 1 + U


def _put(out, L, t, ns, f, dx_to, inputs):
    """Adds the rows' terms ``t`` (times ``f``) to the arrays of ``out`` that have them."""
    o, g = out["outputs"], out["grads"]
    if "y" in o:
        o["y"] = o["y"] + f * L.back(t["y"])
    for name in ("mean", "rstd"):
        if name in o:
            o[name] = o[name] + f * t[name].reshape(np.shape(o[name]))
    if "dx" in t:
        dx = f * L.back(t["dx"])
        for name, scale in dx_to.items():
            if name in g:
                g[name] = g[name] + scale * dx
        lead = tuple(range(len(L.shape) - len(ns)))
        for name, key in (("weight", "t_w"), ("bias", "t_b")):
            if name in g:
                g[name] = g[name] + f * L.back(t[key]).sum(axis=lead).reshape(np.shape(g[name]))
