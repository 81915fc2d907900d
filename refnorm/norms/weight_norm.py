"""Weight normalization (Salimans & Kingma 2016, arXiv:1602.07868), as torch._weight_norm
(torch.nn.utils.weight_norm / torch.nn.utils.parametrizations.weight_norm).

    w = g * v / ||v||,      ||v|| = sqrt(sum_A v^2),   A = every axis but ``dim``

Inputs ``v`` (the direction, torch's weight_v / original1) and ``g`` (the gain, weight_g /
original0), both required. Option ``dim`` (default 0, as torch): the axis that keeps one norm per
index (the output channels); ``dim=None``: one norm over the whole tensor.
* dim=-1 is refused (ConfigError). torch's weight_norm reads dim=-1 as "the whole tensor" (its
  dim=None is stored as -1: torch._weight_norm(v, g, -1) uses v.norm()), while -2, -3, ... are
  ordinary negative axes; NumPy, and every other refnorm option, reads -1 as the last axis. Rather
  than pick one silently: pass dim=None for the whole tensor, dim=v.ndim - 1 for the last axis.
  Other negative dims count from the end (as torch and NumPy).
* ``g``: torch's weight_g shape, 1 on every axis but ``dim`` (e.g. (out, 1, 1, 1) for dim=0) and
  () for dim=None; refnorm also accepts a flat (v.shape[dim],) g (and (1,) * v.ndim for None).
  torch broadcasts a flat g correctly only for dim=0 or the last axis (its fused kernel); refnorm
  reshapes it for any dim. The gradient ``g`` has the shape g was given in.
Outputs ``w``, and ``norm`` = ||v|| (a statistic) with torch's weight_g shape (keepdims; () for
None). Only ``w`` takes a cotangent.

The norm is computed as s * sqrt(sum (v / s)^2) with s = 2^k the power of two just above max|v| of
the slice: the division by s is exact, so this equals the plain sum wherever that does not overflow
or underflow, and stays correct (vs torch's inf or 0) for |v| beyond 1e154 or below 1e-154.

Backward (derivations/weight_norm.md), u = v / ||v||:
    dg = sum_A(dw * u)                             (= sum_A(dw * v) / ||v||)
    dv = (g / ||v||) * (dw - u * sum_A(dw * u))    (orthogonal to v: sum_A(dv * v) = 0)
An all-zero slice of v: ||v|| = 0 and w = 0/0 = NaN, so w, dg and dv are NaN for that slice, as
torch (its gradients are NaN there too). NaN in v or g: that slice only. +-Inf in v: ||v|| = Inf,
the slice's finite entries give w = 0 and the infinite ones NaN (inf/inf), as torch.
Empty: an empty slice (an axis other than dim has size 0) has ||v|| = 0 and an empty w; its true
dg is 0 (w has no entries, the loss does not depend on g) and refnorm gives 0. torch 2.13 gives
dg = NaN there (sum(dw * v) / ||v|| = 0/0). With no slice at all (v.shape[dim] == 0) torch 2.13
dies with SIGFPE (dim = 0 or the last axis) or raises "cannot reshape tensor of 0 elements" (a
middle axis); refnorm returns empty w, norm, dv and dg.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import Backward, Forward, NormSpec
from . import _common as C

NAME = "weight_norm"


def _dim(dim, ndim: int):
    """None, or the non-negative axis kept; -1 is refused (see the module docstring)."""
    if dim is None:
        return None
    if not isinstance(dim, bool) and isinstance(dim, (int, np.integer)) and dim == -1:
        raise ConfigError(f"{NAME}: dim=-1 is ambiguous: torch's weight_norm reads it as the whole "
                          "tensor, NumPy as the last axis; expected dim=None (whole tensor) or "
                          f"dim={ndim - 1} (last axis of v with {ndim} dimensions)")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ConfigError(f"{NAME}: dim={dim!r}; expected an int or None")
    return C.normalize_axes(NAME, dim, ndim)[0]


def _axes(ndim: int, dim) -> tuple[int, ...]:
    return tuple(a for a in range(ndim) if a != dim)


def _keep_shape(shape, dim) -> tuple[int, ...]:
    """torch's weight_g shape: 1 on every axis but dim; () for dim=None."""
    return () if dim is None else tuple(s if a == dim else 1 for a, s in enumerate(shape))


def _g_view(g: np.ndarray, v: np.ndarray, dim) -> np.ndarray:
    """g reshaped to broadcast against v (checks the accepted shapes)."""
    keep = _keep_shape(v.shape, dim)
    flat = (1,) * v.ndim if dim is None else (v.shape[dim],)
    if g.shape not in (keep, flat):
        raise ShapeError(f"{NAME}: 'g' has shape {g.shape}; expected {keep} (torch's weight_g shape for "
                         f"dim={dim!r} and v of shape {v.shape}) or {flat}")
    return g.reshape(keep)


def check(v, g, dim):
    """The argument checks (shared with the specification, refnorm/specs/weight_norm.py):
    (dim: None or the non-negative axis kept, g reshaped to torch's weight_g shape)."""
    dim = _dim(dim, v.ndim)
    return dim, _g_view(g, v, dim)


def l2_norm(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """sqrt(sum_A v^2) (keepdims), scaled by an exact power of two: no overflow or underflow."""
    a = np.max(np.abs(v), axis=axes, keepdims=True, initial=0.0)
    s = np.where((a > 0) & np.isfinite(a), np.ldexp(1.0, np.frexp(a)[1]), 1.0)
    q = v / s
    return s * np.sqrt((q * q).sum(axis=axes, keepdims=True))


def forward(v, g, *, dim=0):
    """Returns (w, norm, u): w, ||v|| in torch's weight_g shape, and u = v / ||v||."""
    dim, gv = check(v, g, dim)
    norm = l2_norm(v, _axes(v.ndim, dim))
    u = v / norm
    return gv * u, norm.reshape(_keep_shape(v.shape, dim)), u


def backward(dw, v, g, norm, u, *, dim=0):
    """Returns (dv, dg) for the forward above; dg has the shape g was given in."""
    dim = _dim(dim, v.ndim)
    axes = _axes(v.ndim, dim)
    gv = _g_view(g, v, dim)
    dgk = (dw * u).sum(axis=axes, keepdims=True)          # keepdims: (1,)*ndim for dim=None
    dv = gv / norm.reshape(dgk.shape) * (dw - u * dgk)
    return dv, dgk.reshape(g.shape)


def _forward(inputs, config, state, training):
    v, g = inputs["v"], inputs["g"]
    w, norm, u = forward(v, g, **config)
    return Forward({"w": w, "norm": norm}, {}, (v, g, norm, u, config["dim"]))


def _backward(ctx, cot):
    v, g, norm, u, dim = ctx
    dv, dg = backward(cot["w"], v, g, norm, u, dim=dim)
    return Backward({"v": dv, "g": dg})


SPEC = NormSpec(
    name=NAME,
    summary="w = g * v / ||v||, the L2 norm over every axis but dim (dim=None: the whole tensor)",
    inputs=("v", "g"), required=("v", "g"),
    outputs=("w", "norm"),
    differentiable=("w",),
    options={"dim": 0},
    forward=_forward, backward=_backward,
)
