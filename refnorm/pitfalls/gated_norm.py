"""Pitfall variants of gated_norm (the specification, refnorm/specs/gated_norm.py, with one change each).

* R-gateside: the gate applied on the wrong side of the norm: norm(x) * silu(z) where the layer asks for
  norm(x * silu(z)), or the reverse (norm_before_gate read inverted, e.g. a port of Mamba2 that keeps
  layernorm_fn's default True where Mamba2 passes False); the backward of the computed function.
* R-dsilu: dz without silu'(z): the gate's derivative left out of dz (dz = dy * n, or dv * x).
* R-bwdgroup: the backward with the wrong group size when ngroups > 1 (the bug of Mamba's layernorm_gated
  backward): the forward normalizes each group, the backward's reductions mean(g) and mean(g * vhat) run over
  the whole hidden dimension, with the saved per-group rstd and vhat.
* R-dwgate: with norm_before_gate, dweight and dbias from dy instead of dy * silu(z) (the gate left out of
  the parameter gradients; dx and dz right).
"""
from __future__ import annotations

import numpy as np

from ..norms._gated_norm_check import check
from ..spec import Result
from ..specs import gated_norm as S
from ._rounding import truncate_out
from . import Variant as V

OP = "gated_norm"
DEFAULTS = {"norm": "rms_norm", "norm_before_gate": False, "group_size": None, "eps": 1e-5}


def _evaluate(inputs, config, cot, dtype, *, flip=False, no_dsilu=False, whole_bwd=False, dw_no_gate=False):
    cfg = {**DEFAULTS, **config}
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items() if v is not None}
    norm, nbg, K, eps = check(inputs, cfg)
    nbg = (not nbg) if flip else nbg
    x, z, w, b = inputs["x"], inputs["z"], inputs["weight"], inputs.get("bias")
    y, saved = S.gated_norm(x, z, w, b, norm, nbg, K, eps)
    grads = {}
    if cot and "y" in cot:
        dy = np.asarray(cot["y"], dtype=np.float64)
        if no_dsilu:
            saved = saved[:2] + (np.ones_like(saved[2]),) + saved[3:]
        if whole_bwd:
            grads = _whole_row_backward(dy, saved)
        else:
            dx, dz, dw, db = S.gated_norm_backward(dy, saved)
            if dw_no_gate:
                vhat, lead = saved[3], tuple(range(dy.ndim - 1))
                dw, db = (dy * vhat).sum(axis=lead), (None if db is None else dy.sum(axis=lead))
            grads = {"x": dx, "z": dz, "weight": dw, "bias": db}
        grads = {k: v for k, v in grads.items() if v is not None}
    return Result({"y": y}, grads, {})


def _whole_row_backward(dy, saved):
    """The backward with the means over the whole hidden dimension (group size H) and the per-group rstd, vhat."""
    x, s, ds_dz, vhat, rstd, n, weight, has_bias, norm, nbg, K = saved
    lead = tuple(range(dy.ndim - 1))
    dn = dy * s if nbg else dy
    g = dn * weight
    r = np.repeat(rstd.reshape(rstd.shape[:-2] + (-1,)), K, axis=-1)          # (*, H): each value's group rstd
    mg = g.mean(axis=-1, keepdims=True) if norm == "layer_norm" else 0.0
    dv = r * (g - mg - vhat * (g * vhat).mean(axis=-1, keepdims=True))
    dx, dz = (dv, dy * n * ds_dz) if nbg else (dv * s, dv * x * ds_dz)
    return {"x": dx, "z": dz, "weight": (dn * vhat).sum(axis=lead), "bias": dn.sum(axis=lead) if has_bias else None}


def _fn(**mods):
    return lambda inputs, config, cot, dtype, state, training: _evaluate(inputs, config, cot, dtype, **mods)


def _grad(c, t, i, s, cot):
    return bool(cot)


def _groups(c, t, i, s, cot):
    gs = c.get("group_size")
    return bool(cot) and gs is not None and np.shape(i["x"])[-1] // int(gs) > 1


def _nbg_grad(c, t, i, s, cot):
    return bool(cot) and bool(c.get("norm_before_gate", False))


VARIANTS = (
    V("gate_wrong_side", ("R-gateside",), "the gate applied on the wrong side of the norm (norm_before_gate "
      "inverted)", OP, fn=_fn(flip=True)),
    V("no_dsilu", ("R-dsilu",), "dz without silu'(z) (the gate's derivative left out)", OP, fn=_fn(no_dsilu=True),
      when=_grad),
    V("bwd_group_size", ("R-bwdgroup",), "the backward's reductions over the whole hidden dimension where the "
      "forward normalizes groups (the wrong group size, ngroups > 1)", OP, fn=_fn(whole_bwd=True), when=_groups),
    V("dweight_no_gate", ("R-dwgate",), "dweight and dbias from dy, not dy * silu(z) (norm_before_gate)", OP,
      fn=_fn(dw_no_gate=True), when=_nbg_grad),
    truncate_out(OP),
)
