"""Z-score scaling ("feature normalization" replacing LayerNorm in a ViT, seed 002).

    y = (x - mean_A(x)) / std * weight + bias,     std = sqrt(sum_A (x - mean)^2 / (n - ddof) + eps)

n = the number of elements of a slice. A = ``dim``: an int or a non-empty list of ints, default -1:
each token is standardized over its channels, the axis LayerNorm normalizes in a ViT (the seed
replaces LN by this scaling). There is no torch op; the torch composition is
(x - x.mean(dim, keepdim=True)) / sqrt(x.var(dim, keepdim=True, correction=ddof) + eps).
* ``ddof`` (default 1: the seed's sigma divides by N - 1, as torch.std's default correction), an
  integer >= 0. ddof = 0 with eps is layer_norm without affine (over the trailing axes).
* ``eps`` (default 0.0, >= 0: the seed has none) is added to the variance inside the sqrt, as in
  every torch norm. (eps added to the std instead is ONNX MeanVarianceNormalization's rule:
  mean_variance_norm.)
* ``weight``, ``bias``: optional learnable affine (the seed's "dynamic learnable feature
  normalization"), each of shape (x.shape[a] for a in A), broadcast along the other axes; for the
  default dim=-1 that is (C,), as LayerNorm's.
* A constant slice with eps = 0 (std = 0) gives y = 0 (then y = bias): 0/0 has no limit (y is scale
  invariant, nearby slices give any unit-std pattern); 0 is what every eps > 0 gives for a constant
  slice, what min_max_scale does, and what scikit-learn's StandardScaler gives for a constant
  feature. The torch composition gives NaN there.
* n - ddof <= 0 (one element with ddof = 1): the variance is undefined, std = NaN and y = NaN, as
  torch.std for n == ddof (torch gives Inf for n < ddof; refnorm NaN for every n - ddof <= 0).

Outputs ``y``, and ``mean`` and ``std`` (= sqrt(var + eps), what x - mean is divided by) with keepdims
shape (1 on the A axes), as statistics. The deviations d = x - mean come from _common.centered (two
pass, re-centred: accurate when |mean| >> std; exactly 0 for a constant slice). The sum of squares is
taken as a^2 * sum (d/a)^2 with a = max|d| of the slice, and std = hypot(a * sqrt(sum (d/a)^2 /
(n - ddof)), sqrt(eps)), so std neither overflows nor underflows where its true value is a finite
float64 (x = [0, 1e-200] gives [-0.7071, 0.7071] at eps = 0, where a plain sum of d^2 underflows to 0
and would hit the constant-slice rule). The mean needs sum(x) finite (n * max|x| < 1.8e308).

Backward, xhat = d / std, g = dy * weight, m = n - ddof:
    v = sum_A(d^2) / m,  dv/dx_j = 2 d_j / m (the mean path vanishes: sum_A d = 0),
    dL/dstd = -sum_A(g * xhat) / std,  dstd/dx_j = xhat_j / m, and the direct term (g - mean_A(g)) / std:
    dx = (g - mean_A(g) - xhat * sum_A(g * xhat) / (n - ddof)) / std
    dweight = sum over the other axes of dy * xhat,    dbias = sum over the other axes of dy
sum_A(dx) = 0; at eps = 0 also sum_A(dx * x) = 0 (scale invariance), since sum_A(xhat^2) = m.
A constant slice: dx = (g - mean_A(g)) / sqrt(eps) for eps > 0; with eps = 0, dx = 0, the derivative
of the constant 0 chosen there (autograd of the safe composition where(std == 0, 0, d / where(std ==
0, 1, std)) gives the same 0; the naive one gives NaN).
NaN or Inf in a slice makes its mean and std NaN: y and dx are NaN in that slice only.
Empty: a zero-size reduction gives mean NaN and std NaN (as torch.mean and torch.std; _common's
centered gives mean 0, native_layer_norm's convention), and empty y and dx.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import Forward, NormSpec
from . import _common as C

NAME = "z_score"


def _axes(x: np.ndarray, dim) -> tuple[int, ...]:
    axes = C.normalize_axes(NAME, dim, x.ndim)
    if not axes:
        raise ConfigError(f"{NAME}: dim={dim!r}; expected an int or a non-empty list of ints")
    return axes


def _param_view(p, x, axes):
    return None if p is None else p.reshape([s if i in axes else 1 for i, s in enumerate(x.shape)])


def scaled_std(d: np.ndarray, axes: tuple[int, ...], m: int, eps: float) -> np.ndarray:
    """sqrt(sum_A(d^2) / m + eps) (keepdims) without overflow/underflow of d^2; NaN when m <= 0."""
    a = np.max(np.abs(d), axis=axes, keepdims=True, initial=0.0)
    a = np.where((a > 0) & np.isfinite(a), a, 1.0)
    q = d / a
    if m <= 0:
        return np.full(a.shape, np.nan)
    return np.hypot(a * np.sqrt((q * q).sum(axis=axes, keepdims=True) / m), np.sqrt(eps))


def check(x, weight, bias, dim, ddof, eps):
    """The argument checks (shared with the specification, refnorm/specs/z_score.py): (axes, ddof, eps)."""
    eps = C.check_eps(NAME, eps)
    ddof = C.check_int(NAME, "ddof", ddof, minimum=0)
    axes = _axes(x, dim)
    pshape = tuple(x.shape[a] for a in axes)
    C.check_param(NAME, "weight", weight, pshape)
    C.check_param(NAME, "bias", bias, pshape)
    return axes, ddof, eps


def forward(x, weight=None, bias=None, *, dim=-1, ddof=1, eps=0.0):
    """Returns (y, mean, std, xhat, axes). See the module docstring for the equation and shapes."""
    axes, ddof, eps = check(x, weight, bias, dim, ddof, eps)
    n = C.count(x, axes)
    mean, d = C.centered(x, axes)
    if n == 0:
        mean = np.full(mean.shape, np.nan)          # torch.mean of nothing
    std = scaled_std(d, axes, n - ddof, eps)
    xhat = np.where(std == 0, 0.0, d / np.where(std == 0, 1.0, std))   # std == 0: constant, eps == 0
    y = xhat if weight is None else xhat * _param_view(weight, x, axes)
    if bias is not None:
        y = y + _param_view(bias, x, axes)
    return y, mean, std, xhat, axes


def backward(dy, x, weight, std, xhat, axes, *, ddof: int, with_bias: bool):
    """Returns (dx, dweight or None, dbias or None) for the forward above."""
    other = tuple(i for i in range(x.ndim) if i not in axes)
    n = C.count(x, axes)
    g = dy if weight is None else dy * _param_view(weight, x, axes)
    if x.size == 0:
        dx = np.zeros_like(x)
    elif n - ddof <= 0:
        dx = np.full(x.shape, np.nan)                # std is NaN: the variance is undefined
    else:
        inner = (g - g.mean(axis=axes, keepdims=True)
                 - xhat * (g * xhat).sum(axis=axes, keepdims=True) / (n - ddof))
        dx = np.where(std == 0, 0.0, inner / np.where(std == 0, 1.0, std))
    dweight = None if weight is None else (dy * xhat).sum(axis=other).reshape(weight.shape)
    dbias = dy.sum(axis=other).reshape(tuple(x.shape[a] for a in axes)) if with_bias else None
    return dx, dweight, dbias


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    y, mean, std, xhat, axes = forward(x, w, b, **config)
    return Forward({"y": y, "mean": mean, "std": std}, {},
                   C.affine_ctx(x, w, b, std, xhat, axes, ddof=int(config["ddof"])))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(sum (x - mean)^2 / (n - ddof) + eps) * weight + bias over dim",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "std"),
    options={"dim": -1, "ddof": 1, "eps": 0.0},
    forward=_forward, backward=C.affine_backward(backward),
)
