"""Residual add + norm, the specification (module docstring of refnorm/norms/add_norm.py for the conventions).

    c = mask * rowscale / (1 - p)          s = residual_out = x * c + residual
    y = norm_A(s) * (weight + weight_offset) + bias          norm: layer_norm or rms_norm (eps inside)
Backward, ds = d norm / d s (the plain op's backward at s) + dresidual_out (prenorm):
    dresidual = ds    dx = ds * c    drowscale = sum_A(ds * x * mask) / (1 - p)    dmask = 0 (not differentiable)
    dweight = sum over the leading axes of dy * xhat,    dbias = sum over the leading axes of dy
The parallel branch: c1 = mask1 / (1 - p), s = x * c + x1 * c1 + residual, y1 = xhat * (weight1 + weight_offset)
+ bias1; y1's cotangent adds the plain op's backward of dy1 (with weight1) to ds, dx1 = ds * c1, dweight1 = sum
over the leading axes of dy1 * xhat, dbias1 = sum of dy1, dmask1 = 0.
A = the trailing len(normalized_shape) axes. The norm is the plain specifications' own math
(refnorm/specs/layer_norm.py, rms_norm.py), evaluated at the exact sum s.
"""
from __future__ import annotations

import numpy as np

from ..norms._add_norm_check import check
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


def add_norm(x, residual, c, weight, bias, normalized_shape, eps, norm, weight_offset, x1=None, c1=None):
    """Returns y, s (= residual_out) and the norm's saved values (xhat, rstd, rms); ``x1``, ``c1``: the
    parallel branch (s = x * c + x1 * c1 + residual, flash-attention's order of the sums)."""
    s = x if c is None else x * c                                    # x.shape, the scaled branch
    if x1 is not None:
        s = s + (x1 if c1 is None else x1 * c1)                      # the parallel branch
    s = s if residual is None else s + residual                      # x.shape, the new residual stream
    if norm == "layer_norm":
        w = weight if weight is None or not weight_offset else weight + weight_offset
        y, _, rstd, xhat = layer_norm(s, w, bias, normalized_shape, eps)
        return y, s, (xhat, rstd, None)
    y, rstd, rms, xhat = rms_norm(s, weight, normalized_shape, eps, "inside", weight_offset)
    return (y if bias is None else y + bias), s, (xhat, rstd, rms)


def second_output(xhat, weight1, bias1, weight_offset):
    """y1 = xhat * (weight1 + weight_offset) + bias1: the parallel branch's output, from the same xhat."""
    y1 = xhat * (weight1 + weight_offset if weight_offset else weight1)
    return y1 if bias1 is None else y1 + bias1


def norm_backward(dy, s, saved, weight, has_bias, weight_offset, norm, k):
    """The plain op's backward at s for the gain weight (+ weight_offset): ds, dweight, dbias."""
    xhat, rstd, rms = saved
    if norm == "layer_norm":
        w = weight if weight is None or not weight_offset else weight + weight_offset
        return layer_norm_backward(dy, xhat, rstd, w, has_bias, k)
    ds, dweight = rms_norm_backward(dy, s, xhat, rstd, rms, weight, weight_offset, "inside", k)
    return ds, dweight, (dy.sum(axis=tuple(range(dy.ndim - k))) if has_bias else None)


def add_norm_backward(dy, dres_out, x, s, c, mask, p, saved, weight, bias, weight_offset, norm, k, has_rowscale,
                      dy1=None, weight1=None, has_bias1=False):
    """dy, dres_out (None: prenorm=False), dy1 (None: no y1): x.shape. Returns dx, dresidual, dweight, dbias,
    drowscale, dweight1, dbias1 (the last two None without y1)."""
    ds, dweight, dbias = norm_backward(dy, s, saved, weight, bias is not None, weight_offset, norm, k)
    dweight1 = dbias1 = None
    if dy1 is not None:                                              # y1's path (the backward is linear in dy)
        ds1, dweight1, dbias1 = norm_backward(dy1, s, saved, weight1, has_bias1, weight_offset, norm, k)
        ds = ds + ds1
    if dres_out is not None:
        ds = ds + dres_out                                           # the gradient through the returned residual
    dx = ds.copy() if c is None else ds * c                          # x.shape (its own array)
    drowscale = None
    if has_rowscale:
        A = tuple(range(dy.ndim - k, dy.ndim))
        t = ds * x if mask is None else ds * x * mask
        drowscale = t.sum(axis=A) / (1.0 - p)                        # (*) one per row
    return dx, ds, dweight, dbias, drowscale, dweight1, dbias1


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x = np.ascontiguousarray(inputs["x"])
    ns, eps, p, offset = check(inputs, config)
    k = len(ns)
    res, w, b = inputs.get("residual"), inputs.get("weight"), inputs.get("bias")
    mask, rs = inputs.get("mask"), inputs.get("rowscale")
    x1, w1, b1 = inputs.get("x1"), inputs.get("weight1"), inputs.get("bias1")
    c = branch_scale(x, mask, rs, p, k)
    c1 = None if x1 is None else branch_scale(x1, inputs.get("mask1"), None, p, k)
    y, s, saved = add_norm(x, res, c, w, b, ns, eps, config["norm"], offset, x1, c1)
    outs = {"y": y, "residual_out": s}
    if w1 is not None:
        outs["y1"] = second_output(saved[0], w1, b1, offset)
    ctx = (x, s, c, mask, p, saved, w, b, offset, config["norm"], k, bool(config["prenorm"]), set(inputs), c1, w1)
    return Forward(outs, {}, ctx)


def backward(ctx, cot):
    x, s, c, mask, p, saved, w, b, offset, norm, k, prenorm, given, c1, w1 = ctx
    dres_out = np.asarray(cot["residual_out"]) if prenorm else None
    dy1 = None if w1 is None else np.ascontiguousarray(cot["y1"])
    dx, dres, dw, db, drs, dw1, db1 = add_norm_backward(np.ascontiguousarray(cot["y"]), dres_out, x, s, c, mask, p,
                                                        saved, w, b, offset, norm, k, "rowscale" in given,
                                                        dy1, w1, "bias1" in given)
    grads = {"x": dx, "residual": dres if "residual" in given else None, "weight": dw, "bias": db,
             "mask": np.zeros(x.shape) if "mask" in given else None, "rowscale": drs, "weight1": dw1, "bias1": db1}
    if "x1" in given:
        grads["x1"] = dres.copy() if c1 is None else dres * c1
    if "mask1" in given:
        grads["mask1"] = np.zeros(x.shape)
    return Backward.of(**grads)
