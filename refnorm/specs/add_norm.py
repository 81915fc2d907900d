"""Residual add + norm, the specification (module docstring of refnorm/norms/add_norm.py for the conventions).

    c = mask * rowscale / (1 - p)          s = residual_out = x * c + residual
    y = norm_A(s) * (weight + weight_offset) + bias          norm: layer_norm or rms_norm (eps inside)
Backward, ds = d norm / d s (the plain op's backward at s) + dresidual_out (prenorm):
    dresidual = ds    dx = ds * c    drowscale = sum_A(ds * x * mask) / (1 - p)    dmask = 0 (not differentiable)
    dweight = sum over the leading axes of dy * xhat,    dbias = sum over the leading axes of dy
A = the trailing len(normalized_shape) axes. The norm is the plain specifications' own math
(refnorm/specs/layer_norm.py, rms_norm.py), evaluated at the exact sum s.
"""
from __future__ import annotations

import numpy as np

from ..norms.add_norm import check
from ..spec import Backward, Forward
from .layer_norm import layer_norm, layer_norm_backward
from .rms_norm import rms_norm, rms_norm_backward

AGREEMENT = {}          # the fast path is this module: the same bits


def branch_scale(x, mask, rowscale, p, k):
    """c = mask * rowscale / (1 - p), broadcast to x.shape (None when every factor is 1)."""
    c = None if mask is None else mask
    if rowscale is not None:
        r = rowscale.reshape(rowscale.shape + (1,) * k)              # (*, 1..) one factor per row
        c = r if c is None else c * r
    if p:
        c = (np.ones(x.shape) if c is None else c) / (1.0 - p)
    return None if c is None else np.broadcast_to(c, x.shape)


def add_norm(x, residual, c, weight, bias, normalized_shape, eps, norm, weight_offset):
    """Returns y, s (= residual_out) and the norm's saved values (xhat, rstd, rms)."""
    s = x if c is None else x * c                                    # x.shape, the scaled branch
    s = s if residual is None else s + residual                      # x.shape, the new residual stream
    if norm == "layer_norm":
        w = weight if weight is None or not weight_offset else weight + weight_offset
        y, _, rstd, xhat = layer_norm(s, w, bias, normalized_shape, eps)
        return y, s, (xhat, rstd, None)
    y, rstd, rms, xhat = rms_norm(s, weight, normalized_shape, eps, "inside", weight_offset)
    return (y if bias is None else y + bias), s, (xhat, rstd, rms)


def add_norm_backward(dy, dres_out, x, s, c, mask, p, saved, weight, bias, weight_offset, norm, k, has_rowscale):
    """dy, dres_out (None: prenorm=False): x.shape. Returns dx, dresidual, dweight, dbias, drowscale."""
    xhat, rstd, rms = saved
    lead = tuple(range(dy.ndim - k))
    if norm == "layer_norm":
        w = weight if weight is None or not weight_offset else weight + weight_offset
        ds, dweight, dbias = layer_norm_backward(dy, xhat, rstd, w, bias is not None, k)
    else:
        ds, dweight = rms_norm_backward(dy, s, xhat, rstd, rms, weight, weight_offset, "inside", k)
        dbias = dy.sum(axis=lead) if bias is not None else None
    if dres_out is not None:
        ds = ds + dres_out                                           # the gradient through the returned residual
    dx = ds.copy() if c is None else ds * c                          # x.shape (its own array)
    drowscale = None
    if has_rowscale:
        A = tuple(range(dy.ndim - k, dy.ndim))
        t = ds * x if mask is None else ds * x * mask
        drowscale = t.sum(axis=A) / (1.0 - p)                        # (*) one per row
    return dx, ds, dweight, dbias, drowscale


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x = np.ascontiguousarray(inputs["x"])
    ns, eps, p, offset = check(inputs, config)
    k = len(ns)
    res, w, b = inputs.get("residual"), inputs.get("weight"), inputs.get("bias")
    mask, rs = inputs.get("mask"), inputs.get("rowscale")
    c = branch_scale(x, mask, rs, p, k)
    y, s, saved = add_norm(x, res, c, w, b, ns, eps, config["norm"], offset)
    ctx = (x, s, c, mask, p, saved, w, b, offset, config["norm"], k, bool(config["prenorm"]), set(inputs))
    return Forward({"y": y, "residual_out": s}, {}, ctx)


def backward(ctx, cot):
    x, s, c, mask, p, saved, w, b, offset, norm, k, prenorm, given = ctx
    dres_out = np.asarray(cot["residual_out"]) if prenorm else None
    dx, dres, dw, db, drs = add_norm_backward(np.ascontiguousarray(cot["y"]), dres_out, x, s, c, mask, p, saved,
                                              w, b, offset, norm, k, "rowscale" in given)
    grads = {"x": dx, "residual": dres if "residual" in given else None, "weight": dw, "bias": db,
             "mask": np.zeros(x.shape) if "mask" in given else None, "rowscale": drs}
    return Backward.of(**grads)
