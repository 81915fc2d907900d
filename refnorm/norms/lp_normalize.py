"""Lp normalization, as torch.nn.functional.normalize (and ONNX LpNormalization with zero_rule="onnx").

    norm = ||x||_p = (sum_A |x|^p)^(1/p)           (absolute values for every p, p = 1 included)
    y = x / max(norm, eps)                         zero_rule="torch" (default)
    y = 0 if norm == 0 else x / norm               zero_rule="onnx"  (LpNormalization-22; no eps)

A = ``dim``: an int or a non-empty list of ints (torch's ``dim`` takes both), default 1 as torch
(ONNX's axis defaults to -1: an ONNX adapter passes dim=-1). torch reads dim=() as "every axis";
refnorm refuses an empty list (list the axes instead) rather than give "no axes" that meaning.
Options p=2.0, eps=1e-12 (torch's defaults).
* p must be a finite number > 0. torch accepts any p, but p = 0 gives the count of non-zeros (no
  norm: piecewise constant, zero gradient, not scale-equivariant) and p < 0 gives a "norm" that is 0
  as soon as one entry is 0; neither normalizes, so refnorm refuses them (ConfigError). p = inf is
  not a JSON-able option value.
* zero_rule="onnx" accepts every p > 0: the option selects the zero/eps rule only. ONNX itself allows
  p in {1, 2} only; emitting an ONNX node with another p is the adapter's error to raise. ONNX has no
  eps, so with zero_rule="onnx" eps must stay at its default (anything else is a ConfigError rather
  than silently ignored). p = 1 uses |x| (the ONNX reference evaluator forgets the abs: a known bug,
  docs/conventions.md §3; the spec and onnxruntime use |x|, as here).
* eps >= 0 (torch accepts negative eps, where clamp_min does nothing; refnorm refuses it).

Outputs ``y`` and ``norm`` = ||x||_p, keepdims shape (1 on the ``dim`` axes): the unclamped norm
(torch's ``input.norm(p, dim, keepdim=True)``, before ``clamp_min(eps)``). It is computed as
s * (sum (|x|/s)^p)^(1/p), s = max|x| of the slice, so it does not overflow or underflow where the
true norm is a finite float64. torch does not scale: F.normalize([1e200, 1e200]) gives [0, 0]
(norm overflows to inf) and F.normalize([3e-170, 4e-170], eps=0) gives [inf, inf]; refnorm gives the
true [0.7071, 0.7071] and [0.6, 0.8] (tested against mpmath).

Backward (derivations/lp_normalize.md), u = x / norm:
    norm >= eps (torch) / norm > 0 (onnx):  dx = (dy - sign(u) |u|^(p-1) * sum_A(dy * u)) / norm
    norm <  eps (torch):                    dx = dy / eps
    norm == 0   (onnx):                     dx = 0
* At norm == eps exactly: torch's clamp_min passes the gradient to its input where input >= min, so
  the norm branch is taken (checked: x = [3, 4], eps = 5 gives the projection, not dy / 5).
* x_j = 0 inside a non-zero slice with p <= 1: d||x||_p/dx_j = sign(x_j)|x_j|^(p-1) ||x||^(1-p)
  has no finite value (p < 1) or is a subgradient (p = 1); torch takes sign(0) = 0, i.e. the norm
  path contributes 0 and dx_j = dy_j / norm. refnorm does the same for every p.
* An all-zero slice: torch gives y = 0 and dx = dy / eps (the clamp is active); with eps = 0 it is
  0/0 = NaN in y and dx, as torch. ONNX: y = 0 and dx = 0, the derivative of the selected constant
  branch (y is discontinuous there, so no gradient is the true one; ONNX defines none). Autograd of
  where(norm == 0, 0, x / where(norm == 0, 1, norm)) gives the same 0; the naive
  where(norm == 0, 0, x / norm) gives NaN (0 * 1/0 in the unselected branch), an autograd artefact.
NaN in a slice makes its norm NaN (y, dx NaN in that slice only); +-Inf makes the norm Inf, so the
slice's finite entries give 0 and the infinite ones NaN (inf/inf), as torch.
Empty: an empty slice has norm 0 (as torch); empty x gives empty y and dx.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import NormSpec
from . import _common as C

NAME = "lp_normalize"
DEFAULT_EPS = 1e-12


def _axes(dim, ndim: int) -> tuple[int, ...]:
    axes = C.normalize_axes(NAME, dim, ndim)
    if not axes:
        raise ConfigError(f"{NAME}: dim={dim!r}; expected an int or a non-empty list of ints "
                          "(to normalize over every axis, list them all)")
    return axes


def check(x, p, dim, eps, zero_rule):
    """The argument checks (shared with the specification, refnorm/specs/lp_normalize.py):
    (p, axes, eps)."""
    p = C.check_real(NAME, "p", p, positive=True)
    eps = C.check_eps(NAME, eps)
    C.check_choice(NAME, "zero_rule", zero_rule, ("torch", "onnx"))
    if zero_rule == "onnx" and eps != DEFAULT_EPS:
        raise ConfigError(f"{NAME}: eps={eps!r} with zero_rule='onnx'; ONNX LpNormalization has no eps, "
                          f"expected eps left at its default {DEFAULT_EPS!r}")
    return p, _axes(dim, x.ndim), eps


def lp_norm(x: np.ndarray, p: float, axes: tuple[int, ...]) -> np.ndarray:
    """||x||_p over ``axes`` (keepdims), scaled by s = max|x| (s = 1 for zero/empty/non-finite slices)."""
    a = np.abs(x)
    s = np.max(a, axis=axes, keepdims=True, initial=0.0)
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    q = a / s
    if p == 1.0:
        return s * q.sum(axis=axes, keepdims=True)
    if p == 2.0:
        return s * np.sqrt((q * q).sum(axis=axes, keepdims=True))
    return s * (q ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)


def _use_norm(norm, eps, zero_rule):
    """Where the slice is divided by its norm (the differentiable branch)."""
    return norm >= eps if zero_rule == "torch" else norm != 0


def forward(x, *, p=2.0, dim=1, eps=DEFAULT_EPS, zero_rule="torch"):
    """Returns (y, norm). See the module docstring."""
    p, axes, eps = check(x, p, dim, eps, zero_rule)
    norm = lp_norm(x, p, axes)
    if zero_rule == "torch":
        y = x / np.maximum(norm, eps)   # np.maximum propagates a NaN norm, as torch's clamp_min
    else:
        y = np.where(norm == 0, 0.0, x / np.where(norm == 0, 1.0, norm))
    return y, norm


def backward(dy, x, norm, *, p=2.0, dim=1, eps=DEFAULT_EPS, zero_rule="torch"):
    """Returns dx for the forward above."""
    axes = _axes(dim, x.ndim)
    p = float(p)
    # a NaN norm compares False: route it to the projection too, so NaN reaches dx
    big = _use_norm(norm, eps, zero_rule) | np.isnan(norm)
    safe = np.where(big, norm, 1.0)
    u = x / safe
    if p == 2.0:
        w = u
    elif p == 1.0:
        w = np.sign(u)
    else:   # sign(u) |u|^(p-1), with 0 where u == 0 (torch's rule; |0|^(p-1) = inf for p < 1)
        w = np.where(u == 0, 0.0, np.sign(u) * np.abs(u) ** (p - 1.0))
    proj = (dy - w * (dy * u).sum(axis=axes, keepdims=True)) / safe
    # the constant-divisor branch; with eps = 0 (torch rule) it is never selected (norm >= 0)
    small = dy / eps if zero_rule == "torch" and eps > 0 else np.zeros_like(dy)
    return np.where(big, proj, small)


SPEC = NormSpec(
    name=NAME,
    summary="y = x / max(||x||_p, eps) along dim (zero_rule='onnx': y = 0 where ||x||_p == 0, else x / ||x||_p)",
    inputs=("x",), required=("x",),
    outputs=("y", "norm"),
    options={"p": 2.0, "dim": 1, "eps": DEFAULT_EPS, "zero_rule": "torch"},
    forward=C.x_forward(forward, "norm"), backward=C.x_backward(backward),
)
