"""Bounds for add_norm (residual add + layer_norm/rms_norm) and adaptive_layer_norm (docs/tolerances.md,
section "Fused residual add and adaptive LayerNorm").

add_norm. A correct kernel forms s = x * c + residual in its accumulator (c = mask * rowscale / (1 - p)),
so the norm sees s + delta with, per element,
    delta = u (k_c |x c| + |s|)                  k_c = roundings of x * c (rowscale: 1, 1/(1 - p): 2)
(plus u_d |s| under the declared epi_d contract when the residual is held in the case dtype: the sum
rounded to the stored residual once, e.g. a backward that recomputes x_hat from it). The plain op's
bound (_rows) is taken at the exact s; the input error delta moves the normalized values by at most
(first order; xh = x_hat, r = rstd, means over the row):
    e = r (delta + mean(delta)) + |xh| D,     D = r mean(|xh| delta)       (rms_norm: no mean(delta) term)
since d xh = r (d s - mean(d s) - xh mean(xh d s)) and d r / r = -r mean(xh d s). Hence
    E_y   += |w| e                      E_residual_out = delta
    E_ds  += D |dx| + r (e |B| + |xh| mean(|g| e)) + u (|dx| + |dresidual_out|)    (g = dy w, B = mean(g xh))
    E_dresidual = E_ds,   E_dx = |c| E_ds + 2 u |c ds|,   E_dweight += sum over rows |dy| e
    E_drowscale = sum_row |x mask / (1 - p)| E_ds + u (g(n) + 3) sum_row |ds x c / rowscale|
The parallel branch: s = x * c + x1 * c1 + residual adds u (k_c1 |x1 c1| + |x c + x1 c1|) to delta (the
second branch's roundings and one more addition); y1 is bounded as y with weight1/bias1 (the plain op's
bound plus |w1| e); its cotangent joins the norm's backward, which is linear in the cotangent: E_ds is the
sum of the plain bounds for dy (weight) and dy1 (weight1), the perturbation terms with |g| = |dy w| + |dy1 w1|
and |B| + |B1|, and the additions of the paths' contributions: an autograd composition (torch's two
F.rms_norm calls) accumulates ds from up to five terms (per norm the path through x_hat and the one
through the statistic, and the returned residual's), in the order they arrive, so each of the 3 additions
beyond the one counted for dresidual_out rounds at most u (P + |dresidual_out|), P = r (|g| + |g1| +
|xh| (|B| + |B1|) (+ |mean g| + |mean g1| centred)), the sum of the terms' magnitudes;
    E_dx1 = |c1| E_ds + 2 u |c1 ds|,   E_dweight1 += sum over rows |dy1| e,   E_dbias1 as the plain op's.
adaptive_layer_norm is layer_norm with a per-sample weight (1 + scale) and bias shift, shared over the
tokens: the _rows bound with those parameters, their gradients summed over the tokens (the rounding of
1 + scale is one of the pointwise roundings the bound counts).
"""
from __future__ import annotations

import numpy as np

from ..precision import UNIT_ROUNDOFF, gamma
from . import standardize as S

LOW = ("float16", "bfloat16")


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def residual_dtype(config, case_dtype):
    """The dtype residual_out is returned and judged in: float32 when residual_in_fp32 asks it of a
    16-bit case, the case dtype otherwise."""
    return "float32" if bool(config.get("residual_in_fp32", False)) and case_dtype in LOW else case_dtype


def _scale(x, mask, rowscale, p, k):
    c, n_mul = np.ones(x.shape), 0
    if mask is not None:
        c = c * mask                                        # exact (0/1)
    if rowscale is not None:
        c = c * rowscale.reshape(rowscale.shape + (1,) * k)
        n_mul += 1
    if p:
        c = c / (1.0 - p)
        n_mul += 2                                          # 1/(1 - p) rounded, then the product
    return c, n_mul


def add_norm(inputs, cfg, cots, u, red, contract, dt):
    """{outputs}, {grads}, {} for one add_norm call (module docstring)."""
    x, res = _f64(inputs["x"]), _f64(inputs.get("residual"))
    w, b = _f64(inputs.get("weight")), _f64(inputs.get("bias"))
    mask, rs = _f64(inputs.get("mask")), _f64(inputs.get("rowscale"))
    x1, w1, b1 = _f64(inputs.get("x1")), _f64(inputs.get("weight1")), _f64(inputs.get("bias1"))
    ns = cfg["normalized_shape"]
    ns = (ns,) if isinstance(ns, int) else tuple(ns)
    k = len(ns)
    A = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    p = float(cfg.get("dropout_p", 0.0))
    centered = cfg.get("norm", "layer_norm") == "layer_norm"
    eps = float(cfg.get("eps", 1e-5))
    off = float(cfg.get("weight_offset", 0.0))
    we = None if w is None else w + off
    c, n_mul = _scale(x, mask, rs, p, k)
    xc = x * c
    if x1 is not None:                                      # the parallel branch and one more addition
        c1, n_mul1 = _scale(x1, _f64(inputs.get("mask1")), None, p, k)
        x1c = x1 * c1
        s = xc + x1c if res is None else xc + x1c + res
        delta = u * (n_mul * np.abs(xc) + n_mul1 * np.abs(x1c) + np.abs(xc + x1c) + np.abs(s))
    else:
        s = xc if res is None else xc + res
        delta = u * (n_mul * np.abs(xc) + np.abs(s))
    if contract == "epi_d" and residual_dtype(cfg, dt) == dt and dt in LOW:
        delta = delta + UNIT_ROUNDOFF[dt] * np.abs(s)       # the sum held in the stored residual's dtype
    dy = _f64(cots.get("y")) if cots else None
    pb = (1,) * (x.ndim - k) + ns
    o, g, _, _ = S.standardize(s, A, weight=we, bias=b, pshape_bcast=pb, dy=dy, eps=eps, u=u, reduction=red,
                               contract=contract, case_dtype=dt, centered=centered)
    we1 = None if w1 is None else w1 + off
    dy1 = _f64(cots.get("y1")) if cots and w1 is not None else None
    if w1 is not None:                                      # y1: the plain op's bound with weight1, bias1
        o1, g1, _, _ = S.standardize(s, A, weight=we1, bias=b1, pshape_bcast=pb, dy=dy1, eps=eps, u=u,
                                     reduction=red, contract=contract, case_dtype=dt, centered=centered)
    with np.errstate(all="ignore"):
        mu = s.mean(axis=A, keepdims=True) if centered else 0.0
        var = ((s - mu) ** 2).mean(axis=A, keepdims=True)
        r = 1.0 / np.sqrt(var + eps)
        xh = (s - mu) * r
        D = r * (np.abs(xh) * delta).mean(axis=A, keepdims=True)
        e = r * (delta + (delta.mean(axis=A, keepdims=True) if centered else 0.0)) + np.abs(xh) * D
        aw = 1.0 if we is None else np.abs(we)
        outs = {"y": o["y"] + aw * e, "residual_out": delta}
        if w1 is not None:
            outs["y1"] = o1["y"] + np.abs(we1) * e
        grads = {}
        if dy is None:
            return outs, grads, {}
        gw = dy * (1.0 if we is None else we)
        B = (gw * xh).mean(axis=A, keepdims=True)
        dx_n = r * (gw - (gw.mean(axis=A, keepdims=True) if centered else 0.0) - xh * B)
        prenorm = bool(cfg.get("prenorm", True))
        dro = _f64(cots.get("residual_out")) if prenorm else None
        if dy1 is None:
            E_ds = g["x"] + D * np.abs(dx_n) + r * (e * np.abs(B) + np.abs(xh) * (np.abs(gw) * e).mean(axis=A,
                                                                                                    keepdims=True))
        else:                                               # both paths (module docstring)
            gw1 = dy1 * we1
            B1 = (gw1 * xh).mean(axis=A, keepdims=True)
            dx_n = dx_n + r * (gw1 - (gw1.mean(axis=A, keepdims=True) if centered else 0.0) - xh * B1)
            ag = np.abs(gw) + np.abs(gw1)
            P = r * (ag + np.abs(xh) * (np.abs(B) + np.abs(B1)))    # the magnitudes of the paths' terms
            if centered:
                P = P + r * (np.abs(gw.mean(axis=A, keepdims=True)) + np.abs(gw1.mean(axis=A, keepdims=True)))
            E_ds = g["x"] + g1["x"] + 3 * u * (P + (0.0 if dro is None else np.abs(dro))) + D * np.abs(dx_n) \
                + r * (e * (np.abs(B) + np.abs(B1)) + np.abs(xh) * (ag * e).mean(axis=A, keepdims=True))
        ds = dx_n
        if dro is not None:
            E_ds = E_ds + u * (np.abs(dx_n) + np.abs(dro))
            ds = dx_n + dro
        grads["x"] = np.abs(c) * E_ds + 2 * u * np.abs(c * ds)
        if res is not None:
            grads["residual"] = E_ds
        if w is not None:
            grads["weight"] = g["weight"] + (np.abs(dy) * e).sum(axis=lead).reshape(ns)
        if b is not None:
            grads["bias"] = g["bias"]
        if x1 is not None:
            grads["x1"] = np.abs(c1) * E_ds + 2 * u * np.abs(c1 * ds)
        if dy1 is not None:
            grads["weight1"] = g1["weight"] + (np.abs(dy1) * e).sum(axis=lead).reshape(ns)
            if b1 is not None:
                grads["bias1"] = g1["bias"]
        if rs is not None:
            n = int(np.prod(ns))
            xm = np.abs(x * (1.0 if mask is None else mask)) / (1.0 - p)
            grads["rowscale"] = (xm * E_ds).sum(axis=A) + u * (gamma(n, red) + 3) * (xm * np.abs(ds)).sum(axis=A)
    return outs, grads, {}


def adaptive_layer_norm(inputs, cfg, cots, u, red, contract, dt):
    """{outputs}, {grads}, {} for one adaptive_layer_norm call: layer_norm with per-sample parameters."""
    x = _f64(inputs["x"])
    scale, shift = _f64(inputs.get("scale")), _f64(inputs.get("shift"))
    pb = (x.shape[0],) + (1,) * (x.ndim - 2) + (x.shape[-1],)
    w = None if scale is None else 1.0 + scale
    dy = _f64(cots.get("y")) if cots else None
    o, g, _, _ = S.standardize(x, (x.ndim - 1,), weight=w, bias=shift, pshape_bcast=pb, dy=dy,
                               eps=float(cfg.get("eps", 1e-6)), u=u, reduction=red, contract=contract, case_dtype=dt,
                               stat_shape=x.shape[:-1] + (1,))
    grads = dict(g)
    if "weight" in grads:
        grads["scale"] = grads.pop("weight")
    if "bias" in grads:
        grads["shift"] = grads.pop("bias")
    return o, grads, {}
