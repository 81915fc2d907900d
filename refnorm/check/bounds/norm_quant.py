"""Bounds for norm_quant (docs/tolerances.md, "Quantized outputs"): the norm's output bound carried
through the scale and the division to the pre-rounding value q = clip(y / scale).

u: the unit roundoff of the accumulation dtype; E_y: the bound on y of layer_norm / rms_norm (_rows.py,
per element, with the declared reduction model and contract); s = the reference scale.

    E_amax = max_A E_y                       |max|y_b| - max|y|| <= max |y_b - y|  (the max is exact)
    E_s    = 0                               static: the scale is an input, exact in float32
    E_s    = E_amax / qmax + 3u (s + E_amax / qmax)
                                             dynamic: amax_b / qmax, or amax_b * fl(1 / qmax) (two roundings:
                                             2u + u^2 <= 3u); min(., scale_ub) and max(., min_scale) are
                                             1-Lipschitz, so they keep the bound
    e      = E_s / s                         (the relative error of the backend's scale; e >= 1: no bound)
    E_q    = (E_y / s + |y / s| e) / (1 - e) + 3u (|y / s| + that)
             |y_b / s_b - y / s| <= E_y / s_b + |y| |1/s_b - 1/s|, s_b >= s (1 - e); then the reciprocal
             (or the division) and the product rounded in the accumulation dtype (2u, and u of slack
             for the second order). clip() is 1-Lipschitz: the same bound holds for the clipped value.

q is judged in its quantized dtype Q: the backend's value g passes iff the reals that round to g in Q
(saturating: g = qmax takes everything above, g = qmin everything below) come within E_q of the
reference's q. So g may be one step away from round_Q(q) only where q lies within E_q of a rounding
boundary (or of the saturation point, whose interval is the last one); elsewhere it must be exact.
"""
from __future__ import annotations

import numpy as np

from ...norms.norm_quant import default_min_scale, qmax
from . import standardize as S


def bound(inputs, cfg, training, dy, u, red, contract, dt):
    x = np.asarray(inputs["x"], dtype=np.float64)
    w, b = inputs.get("weight"), inputs.get("bias")
    w = None if w is None else np.asarray(w, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    ns = cfg["normalized_shape"]
    ns = (ns,) if isinstance(ns, int) else tuple(ns)
    k = len(ns)
    axes = tuple(range(x.ndim - k, x.ndim))
    pb = (1,) * (x.ndim - k) + ns
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    centered = cfg.get("norm", "rms_norm") == "layer_norm"
    o, _, rb, L = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=None, eps=float(cfg.get("eps", 1e-5)),
                                u=u, reduction=red, contract=contract, case_dtype=dt, centered=centered,
                                stat_shape=stat_shape, stat_names=(None, "rstd"))
    E_y = o["y"]
    with np.errstate(all="ignore"):
        r = (1.0 / np.sqrt(rb.var + float(cfg.get("eps", 1e-5)))).reshape(stat_shape)
        mu = rb.mu.reshape(stat_shape) if centered else 0.0
        y = (x - mu) * r
        if w is not None:
            y = y * w.reshape(pb)
        if b is not None:
            y = y + b.reshape(pb)
        amax = np.max(np.abs(y), axis=axes, keepdims=True, initial=0.0)
        E_amax = np.max(E_y, axis=axes, keepdims=True, initial=0.0)
        qd = cfg.get("quant_dtype", "float8_e4m3fn")
        if inputs.get("static_scale") is not None:
            s = np.full(stat_shape, float(np.asarray(inputs["static_scale"], dtype=np.float64).reshape(())))
            E_s = np.zeros(stat_shape)
        else:
            s = amax / qmax(qd)
            if cfg.get("scale_ub") is not None:
                s = np.minimum(s, float(cfg["scale_ub"]))
            floor = cfg.get("min_scale")
            s = np.maximum(s, default_min_scale(qd) if floor is None else float(floor))
            E_s = E_amax / qmax(qd) + 3 * u * (s + E_amax / qmax(qd))
        e = E_s / s
        av = np.abs(y) / s
        E_q = np.where(e < 1, (E_y / s + av * e) / (1 - e), np.inf)
        E_q = E_q + 3 * u * (av + E_q)
    return {"q": E_q, "scale": E_s, "amax": E_amax}, {}, {}
