"""Pitfall variants of weight_norm (refnorm.norms.weight_norm with one change each).

* H07 (torch #81195): the norm taken along the wrong axis: ||v|| over the kept axis ``dim`` (one norm
  per index of the other axes) where it belongs over every axis but ``dim``; g applied along ``dim``.
* C02's mechanism (as lp_normalize's lp_norm_in_d): the norm stored in the case dtype d before the
  division (float16: ||v|| > 65504 overflows, w = 0).
* a hand-written dv without the projection term -u * sum(dw * u) (dv = g / ||v|| * dw).
H08 (a keepdim broadcast to the wrong shape) and H09 (a zero-size reduction) change shapes or need
empty slices: a wrong shape is a checker error, not a value to diagnose.
"""
from __future__ import annotations

import numpy as np

from ..norms import weight_norm as WN
from ..spec import Result
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "weight_norm"


def _parts(inputs, config):
    v = np.asarray(inputs["v"], dtype=np.float64)
    g = np.asarray(inputs["g"], dtype=np.float64)
    dim = WN._dim(config.get("dim", 0), v.ndim)
    return v, g, dim, WN._axes(v.ndim, dim), WN._g_view(g, v, dim)


def _result(v, g, gv, n, axes, cot, keep, projection=True, rel=0.0):
    """w = gv * v / n and its exact backward (n: the norm used, over ``keep`` axes' complement); ``rel``: the
    projection term times (1 + rel)."""
    with np.errstate(all="ignore"):
        u = v / n
        w = gv * u
        grads = {}
        dw = cot.get("y", cot.get("w"))
        if dw is not None:
            dw = np.asarray(dw, dtype=np.float64)
            du = dw * gv
            dv = (du - (1.0 + rel) * u * (du * u).sum(axis=keep, keepdims=True)) / n if projection else du / n
            grads = {"v": dv, "g": (dw * u).sum(axis=axes, keepdims=True).reshape(g.shape)}
    return w, grads


def _other_axis(inputs, config, cot, dtype, state, training):
    v, g, dim, axes, gv = _parts(inputs, config)
    n = WN.l2_norm(v, (dim,))
    w, grads = _result(v, g, gv, n, axes, cot or {}, (dim,))
    return Result({"w": w}, grads, {})


def _norm_in_d(inputs, config, cot, dtype, state, training, mods=0.0):
    """``mods``: the projection term's relative change (the ends of its rounding, ``_norm_in_d_slack``)."""
    v, g, dim, axes, gv = _parts(inputs, config)
    with np.errstate(all="ignore"):
        n = to_d(in_w(WN.l2_norm(v, axes), dtype), dtype).astype(np.float64)
    w, grads = _result(v, g, gv, n, axes, cot or {}, axes, rel=float(mods))
    return Result({"w": w}, grads, {})


def _norm_in_d_slack(dtype):
    """Variant.slack of wn_norm_in_d: differentiated by autograd, the gradient through the rounded norm is
    rounded to d and the norm's derivative v / ||v|| taken at the unrounded norm: the projection term within
    a relative 2 u_d."""
    u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(dtype, 0.0)
    return [2 * u, -2 * u] if u else []


def _no_projection(inputs, config, cot, dtype, state, training):
    v, g, dim, axes, gv = _parts(inputs, config)
    w, grads = _result(v, g, gv, WN.l2_norm(v, axes), axes, cot or {}, axes, projection=False)
    return Result({"w": w}, grads, {})


def _has_dim(c, t, i, s, cot):
    return c.get("dim", 0) is not None and np.ndim(i["v"]) > 1


VARIANTS = (
    V("wn_other_axis", ("H07",), "the norm taken along dim instead of over the other axes", OP, fn=_other_axis,
      when=_has_dim),
    V("wn_norm_in_d", ("C02",), "the norm stored in {d} before the division", OP, fn=_norm_in_d, low_precision=True,
      slack=_norm_in_d_slack),
    V("wn_dv_no_projection", ("R-noB",), "dv = g/||v|| * dw: the projection -u*sum(dw*u) missing", OP,
      fn=_no_projection, when=lambda c, t, i, s, cot: bool(cot)),
    truncate_out(OP),
)
