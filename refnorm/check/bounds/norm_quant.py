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
    s = 0                                    (min_scale=0 on an all-zero row) E_q = 0 where E_s = 0 too (the
                                             backend's amax and scale are then exactly 0, and q is 0), else none
    E_q    = (E_y / s + |y / s| e) / (1 - e) + 3u (|y / s| + that)
             |y_b / s_b - y / s| <= E_y / s_b + |y| |1/s_b - 1/s|, s_b >= s (1 - e); then the reciprocal
             (or the division) and the product rounded in the accumulation dtype (2u, and u of slack
             for the second order). clip() is 1-Lipschitz: the same bound holds for the clipped value.

Exact rows (``exact_rows``): E_q = 0 on a row of rms_norm with a static scale where every intermediate of
every float32 evaluation order is exact (the squares, any partial sum of them, the mean, + eps, the sqrt and
its reciprocal, x * rstd, the products with the weight, y / scale, each a float32 number obtained exactly):
every kernel with correctly rounded +, -, *, /, sqrt then computes the reference's q itself, so an exact
tie (q = k + 0.5) must come back rounded half to even (precision.quant_excess). Not for layer_norm (a
Welford kernel's running mean divides by the count: inexact), nor for a dynamic scale (amax / qmax).

q is judged in its quantized dtype Q: the backend's value g passes iff the reals that round to g in Q
(saturating: g = qmax takes everything above, g = qmin everything below) come within E_q of the
reference's q. So g may be one step away from round_Q(q) only where q lies within E_q of a rounding
boundary (or of the saturation point, whose interval is the last one); elsewhere it must be exact.
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ...norms.norm_quant import default_min_scale, qmax
from ..precision import round_to
from . import standardize as S

F32_BITS = 24
_EXTRA = contextvars.ContextVar("norm_quant_extra", default=None)


@contextlib.contextmanager
def extra_y(terms, factor: float):
    """Within: ``bound`` takes y's bound as factor * E_y + ``terms`` (x's shape): the terms of a contract's
    rounding points before the quantizer (bounds/points.py), so that amax, the scale and q carry them."""
    token = _EXTRA.set((terms, float(factor)))
    try:
        yield
    finally:
        _EXTRA.reset(token)


def _exact(v, dtype="float32"):
    """Whether each value is finite and a ``dtype`` number."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.isfinite(v) & (np.asarray(round_to(v, dtype), dtype=np.float64) == v)


def _any_order_sum_exact(t, axes):
    """Whether every partial sum of the terms ``t`` along ``axes``, in any order, is a float32 number: the
    terms are float32 numbers, all multiples of g (the lowest set bit among them), and sum |t| < 2^24 g."""
    t = np.asarray(t, dtype=np.float64)
    f, e = np.frexp(np.where(_exact(t), t, 0.0))
    m = np.abs(np.ldexp(f, F32_BITS)).astype(np.int64)          # the 24-bit significand, an integer
    low = np.ldexp((m & -m).astype(np.float64), e - F32_BITS)     # its lowest set bit, as a value
    g = np.min(np.where(m != 0, low, np.inf), axis=axes, keepdims=True)
    total = np.sum(np.abs(t), axis=axes, keepdims=True)
    return np.all(_exact(t), axis=axes, keepdims=True) & ((total == 0) | (total < np.ldexp(g, F32_BITS)))


def exact_rows(x, w, s, eps, axes, pb, case_dtype, in_d):
    """Mask (keepdims over ``axes``) of the rms_norm rows whose quantizer input x * rstd * w / s every float32
    kernel computes exactly (module docstring); ``in_d``: the contract lets rstd (stats_d), x_hat and y (epi_d)
    be rounded to the case dtype, so they must be ``case_dtype`` numbers too."""
    n = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(all="ignore"):
        sq = x * x
        ss = np.sum(sq, axis=axes, keepdims=True)
        ms = ss / n
        v = ms + eps
        r = np.sqrt(v)
        rstd = 1.0 / r
        inv = 1.0 / s
        wb = np.ones(pb) if w is None else w.reshape(pb)
        xhat = x * rstd
        y = xhat * wb
        each = (_exact(sq) & _exact(sq / n) & _exact(xhat) & (x / r == xhat) & _exact(y) & _exact(x * wb)
                & _exact(rstd * wb) & _exact(wb * inv) & _exact(y * inv) & (y * inv == y / s))
        if in_d:
            each &= _exact(xhat, case_dtype) & _exact(y, case_dtype) & _exact(rstd * np.ones(pb), case_dtype)
        ok = np.all(each, axis=axes, keepdims=True) & _any_order_sum_exact(sq, axes)
        ok &= _exact(ms) & (ms * n == ss) & _exact(v) & (v - ms == eps) & _exact(r) & (r * r == v)
        ok &= _exact(rstd) & (rstd * r == 1.0)
        ok &= _exact(s) & (np.abs(np.frexp(s)[0]) == 0.5) & _exact(inv)      # a power of two: 1 / s exact
    return ok


def bound(inputs, cfg, training, dy, u, red, contract, dt):
    x = np.asarray(inputs["x"], dtype=np.float64)
    w, b = inputs.get("weight"), inputs.get("bias")
    w = None if w is None else np.asarray(w, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    axes, pb, stat_shape = S.trailing(x.shape, cfg["normalized_shape"])
    centered = cfg.get("norm", "rms_norm") == "layer_norm"
    o, _, rb, L = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=None, eps=float(cfg.get("eps", 1e-5)),
                                u=u, reduction=red, contract=contract, case_dtype=dt, centered=centered,
                                stat_shape=stat_shape, stat_names=(None, "rstd"))
    E_y = o["y"]
    extra = _EXTRA.get()
    if extra is not None:                             # a contract's points before the quantizer
        E_y = extra[1] * E_y + extra[0]
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
        zero = (s == 0) & (E_s == 0)                  # min_scale=0, an all-zero row known exactly: q = 0
        s1 = np.where(s == 0, 1.0, s)
        e = np.where(s == 0, np.where(zero, 0.0, np.inf), E_s / s1)
        av = np.abs(y) / s1
        E_q = np.where(e < 1, (E_y / s1 + av * e) / (1 - e), np.inf)
        E_q = E_q + 3 * u * (av + E_q)
        E_q = np.where(zero, 0.0 * E_y, E_q)
        if inputs.get("static_scale") is not None and not centered:
            E_q = np.where(exact_rows(x, w, s, float(cfg.get("eps", 1e-5)), axes, pb, dt,
                                      getattr(contract, "kind", contract) in ("stats_d", "epi_d")
                                      or extra is not None), 0.0, E_q)
    return {"q": E_q, "scale": E_s, "amax": E_amax}, {}, {}
