"""LayerNorm (Ba, Kiros & Hinton 2016, arXiv:1607.06450), as torch.nn.functional.layer_norm.

    y = (x - mean_A(x)) * rstd * weight + bias,     rstd = (var_A(x) + eps) ** -1/2

A = the trailing ``len(normalized_shape)`` axes; biased variance (ddof=0); eps inside the sqrt.
``weight`` and ``bias`` have shape ``normalized_shape`` and are each optional.
Outputs ``y``, and ``mean`` and ``rstd`` with keepdims shape ``x.shape[:-k] + (1,) * k`` (torch's
native_layer_norm, ONNX LayerNormalization's Mean and InvStdDev).

Backward (derivations/layer_norm.md), with xhat = (x - mean) * rstd and g = dy * weight:
    dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))
    dweight = sum over the leading axes of dy * xhat,    dbias = sum over the leading axes of dy
NaN/Inf in a row reach only that row. An empty row gives mean 0 and rstd NaN, as torch.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import REQUIRED, Backward, Forward, NormSpec
from . import _common as C

NAME = "layer_norm"


def _shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
        normalized_shape = (normalized_shape,)
    try:
        shape = tuple(normalized_shape)
    except TypeError:
        shape = None
    if not shape or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in shape):
        raise ConfigError(f"{NAME}: normalized_shape={normalized_shape!r}; expected a non-empty list "
                          "of non-negative ints")
    return tuple(int(s) for s in shape)


def forward(x, weight=None, bias=None, *, normalized_shape, eps=1e-5):
    """Returns (y, mean, rstd). See the module docstring for the equation and shapes."""
    shape = _shape(normalized_shape)
    eps = C.check_eps(NAME, eps)
    k = len(shape)
    if x.shape[x.ndim - k:] != shape or x.ndim < k:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected trailing dimensions "
                         f"equal to normalized_shape {list(shape)}")
    C.check_param(NAME, "weight", weight, shape)
    C.check_param(NAME, "bias", bias, shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    mean, var, d = C.centered_moments(x, axes)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = d * rstd
    y = xhat if weight is None else xhat * weight
    if bias is not None:
        y = y + bias
    return y, mean, rstd


def backward(dy, x, weight, mean, rstd, *, normalized_ndim: int, with_bias: bool):
    """Returns (dx, dweight or None, dbias or None) for the forward above."""
    axes = tuple(range(x.ndim - normalized_ndim, x.ndim))
    lead = tuple(range(x.ndim - normalized_ndim))
    xhat = C.centered(x, axes)[1] * rstd
    g = dy if weight is None else dy * weight
    dx = C.centered_backward(g, xhat, rstd, axes)
    dweight = None if weight is None else C.reduce_to(dy * xhat, lead)
    dbias = C.reduce_to(dy, lead) if with_bias else None
    return dx, dweight, dbias


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    y, mean, rstd = forward(x, w, b, **config)
    ctx = (x, w, b is not None, mean, rstd, len(_shape(config["normalized_shape"])))
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, ctx)


def _backward(ctx, cot):
    x, w, has_bias, mean, rstd, k = ctx
    dx, dw, db = backward(cot["y"], x, w, mean, rstd, normalized_ndim=k, with_bias=has_bias)
    grads = {"x": dx}
    if w is not None:
        grads["weight"] = dw
    if has_bias:
        grads["bias"] = db
    return Backward(grads)


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"normalized_shape": REQUIRED, "eps": 1e-5},
    forward=_forward, backward=_backward,
)
