"""Pitfall variants of add_norm (the specification, refnorm/specs/add_norm.py, with one change each).

* R-resadd: the residual added in the activation dtype d (x * c in W, the sum rounded to d) where the
  contract keeps it in the float32 accumulator (and residual_in_fp32 asks for a float32 residual): y is
  the norm of the rounded sum, residual_out is the rounded sum, the gradients are taken at it. On a
  mean-shifted residual stream (1e3 + N(0,1)) the rounding loses most of the N(0,1) branch.
* R-resround: residual_out rounded to d before it is returned although residual_in_fp32 asks for the
  float32 sum (the sum normalized in float32, the residual handed back after a d rounding).
* R-dropscale: dropout without the 1/(1 - p) scale (x * mask * rowscale).
* R-dresout: the residual's gradient without the gradient that flows back through the returned
  residual (dresidual = d norm/d s only; dresidual_out dropped), and dx with it.
* R-fa-prenorm: flash-attention's prenorm with a residual stored in d: the forward normalizes the exact
  (float32) sum, the backward recomputes x_hat from the stored, d-rounded residual with the forward's
  statistics (issue 18's finding; the declared epi_d contract admits it, strict does not).
* R-parmask: the parallel branch x1 dropped with x's keep-mask (mask) instead of its own (mask1): one
  seed reused for both branches.
* R-pardy1: the backward without y1's path: ds takes d norm/d s of dy only, so dx, dresidual and dx1
  miss the gradient through the second output (dweight1, dbias1 stay right).
"""
from __future__ import annotations

import numpy as np

from ..norms.add_norm import check
from ..spec import Result
from ..specs import add_norm as S
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "add_norm"


def _rd(v, dtype):
    """A float64 value rounded once to the case dtype d (through W: a single rounding)."""
    return to_d(in_w(v, dtype), dtype).astype(np.float64)


def _evaluate(inputs, config, cot, dtype, *, sum_in_d=False, out_in_d=False, unscaled=False, no_dro=False,
              bwd_stored=False, shared_mask=False, no_dy1=False):
    cfg = {**{"norm": "layer_norm", "eps": 1e-5, "dropout_p": 0.0, "prenorm": True, "residual_in_fp32": False,
              "weight_offset": 0.0}, **config}
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items() if v is not None}
    ns, eps, p, off = check(inputs, cfg)
    k = len(ns)
    x, res, w, b = inputs["x"], inputs.get("residual"), inputs.get("weight"), inputs.get("bias")
    mask, rs = inputs.get("mask"), inputs.get("rowscale")
    x1, w1, b1 = inputs.get("x1"), inputs.get("weight1"), inputs.get("bias1")
    c = S.branch_scale(x, mask, rs, 0.0 if unscaled else p, k)
    c1 = None if x1 is None else S.branch_scale(x1, mask if shared_mask else inputs.get("mask1"), None,
                                                0.0 if unscaled else p, k)
    if sum_in_d:                                    # x * c in W, the sum rounded to d
        xc = x if c is None else (in_w(x, dtype) * in_w(c, dtype)).astype(np.float64)
        if x1 is not None:
            xc = xc + (x1 if c1 is None else (in_w(x1, dtype) * in_w(c1, dtype)).astype(np.float64))
        s_in = _rd(xc + (0.0 if res is None else res), dtype)
        y, s, saved = S.add_norm(s_in, None, None, w, b, ns, eps, cfg["norm"], off)
    else:
        y, s, saved = S.add_norm(x, res, c, w, b, ns, eps, cfg["norm"], off, x1, c1)
    outs = {"y": y, "residual_out": _rd(s, dtype) if out_in_d else s}
    if w1 is not None:
        outs["y1"] = S.second_output(saved[0], w1, b1, off)
    grads = {}
    if cot and "y" in cot:
        dy = np.asarray(cot["y"], dtype=np.float64)
        dy1 = np.asarray(cot["y1"], dtype=np.float64) if w1 is not None and "y1" in cot else None
        dro = np.asarray(cot["residual_out"], dtype=np.float64) if (cfg["prenorm"] and not no_dro
                                                                      and "residual_out" in cot) else None
        if bwd_stored:                              # x_hat recomputed from the stored residual
            sd = _rd(s, dtype)
            xhat, rstd, rms = saved
            mean = s - xhat / rstd                  # layer_norm's; x_hat of the stored residual
            sv = (sd * rstd if cfg["norm"] == "rms_norm" else (sd - mean) * rstd, rstd, rms)
            ds, dw, db = S.norm_backward(dy, sd, sv, w, b is not None, off, cfg["norm"], k)
            dw1 = db1 = None
            if dy1 is not None:
                ds1, dw1, db1 = S.norm_backward(dy1, sd, sv, w1, b1 is not None, off, cfg["norm"], k)
                ds = ds + ds1
            ds = ds if dro is None else ds + dro
            dx = ds.copy() if c is None else ds * c
            drs = None
            if rs is not None:
                t = ds * x if mask is None else ds * x * mask
                drs = t.sum(axis=tuple(range(x.ndim - k, x.ndim))) / (1.0 - p)
        else:
            dx, ds, dw, db, drs, dw1, db1 = S.add_norm_backward(dy, dro, x, s, c, mask, 0.0 if unscaled else p,
                                                                saved, w, b, off, cfg["norm"], k, rs is not None,
                                                                None if no_dy1 else dy1, w1, b1 is not None)
            if no_dy1 and dy1 is not None:          # dweight1, dbias1 as the contract's; ds without y1's path
                _, dw1, db1 = S.norm_backward(dy1, s, saved, w1, b1 is not None, off, cfg["norm"], k)
            if sum_in_d:                            # the chain through x * c (the variant's own scale)
                dx = ds.copy() if c is None else ds * c
        grads = {"x": dx, "residual": ds if res is not None else None, "weight": dw, "bias": db,
                 "mask": np.zeros(x.shape) if mask is not None else None, "rowscale": drs,
                 "weight1": dw1, "bias1": db1, "x1": None if x1 is None else (ds.copy() if c1 is None else ds * c1),
                 "mask1": np.zeros(x.shape) if "mask1" in inputs else None}
        grads = {kk: v for kk, v in grads.items() if v is not None}
    return Result(outs, grads, {})


def _fn(**mods):
    return lambda inputs, config, cot, dtype, state, training: _evaluate(inputs, config, cot, dtype, **mods)


def _fp32res(c, t, i, s, cot):
    return bool(c.get("residual_in_fp32", False))


def _dropout(c, t, i, s, cot):
    return float(c.get("dropout_p", 0.0)) > 0 and i.get("mask") is not None


def _prenorm_grad(c, t, i, s, cot):
    return bool(c.get("prenorm", True)) and "residual_out" in cot


def _grad(c, t, i, s, cot):
    return bool(cot)


def _parallel_dropout(c, t, i, s, cot):
    return _dropout(c, t, i, s, cot) and i.get("x1") is not None and i.get("mask1") is not None


def _y1_grad(c, t, i, s, cot):
    return i.get("weight1") is not None and "y1" in cot


VARIANTS = (
    V("residual_add_in_d", ("R-resadd",), "the residual added in {d} (the sum rounded to {d}, then normalized)",
      OP, fn=_fn(sum_in_d=True), when=lambda c, t, i, s, cot: i.get("residual") is not None, low_precision=True),
    V("residual_out_in_d", ("R-resround",), "residual_out rounded to {d} where residual_in_fp32 asks for the "
      "float32 sum", OP, fn=_fn(out_in_d=True), when=_fp32res, low_precision=True),
    V("dropout_unscaled", ("R-dropscale",), "dropout without the 1/(1 - p) scale", OP, fn=_fn(unscaled=True),
      when=_dropout),
    V("no_dresidual_out", ("R-dresout",), "the residual's gradient without the gradient through the returned "
      "residual (dresidual_out dropped)", OP, fn=_fn(no_dro=True), when=_prenorm_grad),
    V("bwd_from_stored_residual", ("R-fa-prenorm",), "the backward recomputes x_hat from the residual stored in "
      "{d} (flash-attention prenorm)", OP, fn=_fn(bwd_stored=True),
      when=lambda c, t, i, s, cot: _grad(c, t, i, s, cot) and not _fp32res(c, t, i, s, cot), low_precision=True),
    V("parallel_shared_mask", ("R-parmask",), "the parallel branch x1 dropped with x's keep-mask (mask1 "
      "ignored)", OP, fn=_fn(shared_mask=True), when=_parallel_dropout,
      bounds_inputs=lambda i: {**i, "mask1": i["mask"]}),
    V("no_dy1", ("R-pardy1",), "the backward without the gradient through y1 (dx, dresidual, dx1 from dy only)",
      OP, fn=_fn(no_dy1=True), when=_y1_grad),
    truncate_out(OP),
)
