"""Min-max scaling ("feature normalization" replacing LayerNorm in a ViT, seed 002).

    y = (x - min_A(x)) / (max_A(x) - min_A(x) + eps) * weight + bias

A = ``dim``: an int or a non-empty list of ints, default -1: each token is scaled over its channels,
the axis LayerNorm normalizes in a ViT (the seed replaces LN by this scaling, "explicit token value
normalization"). There is no torch op; torch's keyword for a reduction's axes is ``dim``.
* ``eps`` (default 0.0, >= 0) is added to the range, outside any root: the seed's formula has no eps,
  and with eps = 0 every non-constant slice maps onto exactly [0, 1] (x = min gives 0, x = max gives 1).
* ``weight``, ``bias``: optional learnable affine (the seed's "dynamic learnable feature
  normalization"), each of shape (x.shape[a] for a in A), broadcast along the other axes; for the
  default dim=-1 that is (C,), as LayerNorm's.
* A constant slice (max == min) with eps = 0 gives y = 0 (then y = bias): the 0/0 has no limit (y is
  scale invariant, so nearby slices reach every value in [0, 1]); 0 is what eps > 0 gives for a
  constant slice at any eps, and what scikit-learn's MinMaxScaler gives for a constant feature.
  The torch composition (x - amin) / (amax - amin) gives NaN there.

Outputs ``y``, and ``min`` and ``max`` (keepdims shape: 1 on the A axes), as statistics.
The range is computed without overflow where the true y is finite: when max - min + eps overflows
(max, min finite), numerator and range are both scaled by 1/4 first (exact for normal floats).

Backward (derivations in this docstring), u = x - min, D = max - min + eps, yhat = u / D,
g = dy * weight, S1 = sum_A(g), S2 = sum_A(g * yhat):
    dL/dmax = -S2 / D,        dL/dmin = (S2 - S1) / D
    dx = (g + [x == min] / n_min * (S2 - S1) - [x == max] / n_max * S2) / D
    dweight = sum over the other axes of dy * yhat,      dbias = sum over the other axes of dy
The gradient reaching the max (min) is split EVENLY among the n_max (n_min) elements that tie for
it: torch's amax/amin backward rule (checked: amax over [1, 3, 3] gives [0, 0.5, 0.5]; torch.max
over a dim instead sends it all to one index). At a tie y is not differentiable; this is the
convention, not a derivative. sum_A(dx) = 0 (shift invariance) and sum_A(dx * x) = eps * S2 / D.
A constant slice: with eps > 0 every element ties for both, so dx = (g - mean_A(g)) / eps; with
eps = 0, dx = 0, the derivative of the constant 0 chosen there (autograd of the safe composition
where(r == 0, 0, (x - amin) / where(r == 0, 1, r)) gives the same; the naive one gives NaN).
NaN in a slice makes its min and max NaN: y and dx are NaN in that slice only. +-Inf makes the
range Inf: with +Inf the finite entries give y = 0 and the +Inf NaN (inf/inf); with -Inf every
x - min is Inf or NaN, so y is all NaN (IEEE arithmetic, as the torch composition). dx is NaN over
any slice whose min or max is not finite (as autograd of the torch composition).
Empty: a reduction over a zero-size axis is a ShapeError (the min of nothing is undefined; torch's
amax raises IndexError); an empty x with non-empty slices gives empty outputs, as torch.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import Forward, NormSpec
from . import _common as C

NAME = "min_max_scale"


def _axes(x: np.ndarray, dim) -> tuple[int, ...]:
    axes = C.normalize_axes(NAME, dim, x.ndim)
    if not axes:
        raise ConfigError(f"{NAME}: dim={dim!r}; expected an int or a non-empty list of ints")
    empty = [a for a in axes if x.shape[a] == 0]
    if empty:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; dim {empty[0]} has size 0, so the "
                         "slices are empty and have no min or max (expected non-zero sizes on dim)")
    return axes


def _param_view(p, x, axes):
    return None if p is None else p.reshape([s if i in axes else 1 for i, s in enumerate(x.shape)])


def check(x, weight, bias, dim, eps):
    """The argument checks (shared with the specification, refnorm/specs/min_max_scale.py): (axes, eps)."""
    eps = C.check_eps(NAME, eps)
    axes = _axes(x, dim)
    pshape = tuple(x.shape[a] for a in axes)
    C.check_param(NAME, "weight", weight, pshape)
    C.check_param(NAME, "bias", bias, pshape)
    return axes, eps


def forward(x, weight=None, bias=None, *, dim=-1, eps=0.0):
    """Returns (y, min, max, ctx) with ctx = (axes, yhat, scale, scaled range). See the docstring."""
    axes, eps = check(x, weight, bias, dim, eps)
    lo = np.min(x, axis=axes, keepdims=True)
    hi = np.max(x, axis=axes, keepdims=True)
    # s = 1/4 where the range overflows although min and max are finite; scaling by a power of two
    # changes no rounding, so y is what an unbounded exponent range would give
    s = np.where(np.isinf((hi - lo) + eps) & np.isfinite(hi) & np.isfinite(lo), 0.25, 1.0)
    ds = (hi * s - lo * s) + eps * s
    safe = np.where(ds == 0, 1.0, ds)           # ds == 0 only for a constant slice with eps == 0
    yhat = np.where(ds == 0, 0.0, (x * s - lo * s) / safe)
    y = yhat if weight is None else yhat * _param_view(weight, x, axes)
    if bias is not None:
        y = y + _param_view(bias, x, axes)
    return y, lo, hi, (axes, yhat, s, ds)


def backward(dy, x, weight, lo, hi, ctx, *, with_bias: bool):
    """Returns (dx, dweight or None, dbias or None) for the forward above."""
    axes, yhat, s, ds = ctx
    other = tuple(i for i in range(x.ndim) if i not in axes)
    g = dy if weight is None else dy * _param_view(weight, x, axes)
    at_min, at_max = x == lo, x == hi
    n_min = at_min.sum(axis=axes, keepdims=True)
    n_max = at_max.sum(axis=axes, keepdims=True)
    s1 = g.sum(axis=axes, keepdims=True)
    s2 = (g * yhat).sum(axis=axes, keepdims=True)
    # n_min, n_max are 0 only in a NaN slice, whose s1/s2/ds are NaN anyway
    num = (g + np.where(at_min, (s2 - s1) / np.maximum(n_min, 1), 0.0)
           - np.where(at_max, s2 / np.maximum(n_max, 1), 0.0))
    dx = np.where(ds == 0, 0.0, num * s / np.where(ds == 0, 1.0, ds))
    dx = np.where(np.isfinite(lo) & np.isfinite(hi), dx, np.nan)   # no gradient in a non-finite slice
    dweight = None if weight is None else (dy * yhat).sum(axis=other).reshape(weight.shape)
    dbias = dy.sum(axis=other).reshape(tuple(x.shape[a] for a in axes)) if with_bias else None
    return dx, dweight, dbias


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    y, lo, hi, ctx = forward(x, w, b, **config)
    return Forward({"y": y, "min": lo, "max": hi}, {}, C.affine_ctx(x, w, b, lo, hi, ctx))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - min) / (max - min + eps) * weight + bias over dim (constant slice: y = bias)",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "min", "max"),
    options={"dim": -1, "eps": 0.0},
    forward=_forward, backward=C.affine_backward(backward),
)
