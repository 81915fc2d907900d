"""Pitfall variants of poly_norm (the specification, refnorm/specs/poly_norm.py, with one change each).

* R-pneps: eps outside the square root: h_p = x^p / (sqrt(mean(x^(2p))) + eps) (and its backward).
* R-pnpow16: the powers x^2, x^3 formed in the input dtype d (rounded once to d, as a tensor power of a
  float16 tensor does) before the float32 statistics: float16's x^3 overflows to inf beyond |x| = 40.3 and
  the row becomes NaN (inf / inf).
* R-pnwrev: the weight read in the reverse order: weight[0] on the linear term, weight[2] on the cubic one.
* R-pnchain: dx without the chain rule through the powers: du_3 + du_2 + du_1 instead of
  3 x^2 du_3 + 2 x du_2 + du_1.
"""
from __future__ import annotations

import numpy as np

from ..norms._poly_norm_check import check
from ..spec import Result
from ..specs import poly_norm as S
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "poly_norm"


def _evaluate(inputs, config, cot, dtype, *, eps_outside=False, pow_in_d=False, reverse=False, chain=True):
    cfg = {"eps": 1e-6, **config}
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items() if v is not None}
    eps = check(inputs, cfg)
    x, w, b = inputs["x"], inputs["weight"], inputs.get("bias")
    wu = w[::-1] if reverse else w
    A = (x.ndim - 1,)
    n = x.shape[-1]
    y = np.zeros(x.shape) + (0.0 if b is None else float(b.reshape(())))
    dy = np.asarray(cot["y"], dtype=np.float64) if cot and "y" in cot else None
    dx = np.zeros(x.shape)
    dw = np.zeros(3)
    with np.errstate(all="ignore"):
        for k, p in enumerate(S.POWERS):
            U = x ** p
            if pow_in_d and p > 1:
                U = to_d(in_w(U, dtype), dtype).astype(np.float64)
            if eps_outside:
                rms = np.sqrt((U * U).mean(axis=A, keepdims=True))
                r = 1.0 / (rms + eps)
            else:
                h0, r = S.rms_normalize(U, eps)
            h = U * r
            y = y + wu[k] * h
            if dy is not None:
                g = dy * wu[k]
                B = (g * h).sum(axis=A, keepdims=True) / n
                uhat = np.where(rms == 0, 0.0, U / np.where(rms == 0, 1.0, rms)) if eps_outside else h
                du = r * (g - uhat * B)
                dx = dx + (du if (p == 1 or not chain) else p * x ** (p - 1) * du)
                dw[k] = np.sum(dy * h)
    grads = {}
    if dy is not None:
        grads = {"x": dx, "weight": dw[::-1].copy() if reverse else dw}
        if b is not None:
            grads["bias"] = np.reshape(np.sum(dy), b.shape)
    return Result({"y": y}, grads, {})


def _fn(**mods):
    return lambda inputs, config, cot, dtype, state, training: _evaluate(inputs, config, cot, dtype, **mods)


def _grad(c, t, i, s, cot):
    return bool(cot)


VARIANTS = (
    V("pn_eps_outside", ("R-pneps",), "eps outside the square root: x^p / (sqrt(mean(x^2p)) + eps)", OP,
      fn=_fn(eps_outside=True), when=lambda c, t, i, s, cot: float(c.get("eps", 1e-6)) > 0),
    V("pn_pow_in_d", ("R-pnpow16",), "x^2 and x^3 formed in {d} before the statistics (float16's x^3 overflows "
      "beyond |x| = 40.3)", OP, fn=_fn(pow_in_d=True), low_precision=True),
    V("pn_w_reversed", ("R-pnwrev",), "the weight in reverse order (weight[0] on x, weight[2] on x^3)", OP,
      fn=_fn(reverse=True), when=lambda c, t, i, s, cot: float(i["weight"][0]) != float(i["weight"][2]),
      bounds_inputs=lambda i: {**i, "weight": np.asarray(i["weight"])[::-1].copy()}),
    V("pn_no_chain", ("R-pnchain",), "dx without the chain rule through the powers (du_3 + du_2 + du_1)", OP,
      fn=_fn(chain=False), when=_grad),
    truncate_out(OP),
)
