"""Mean-variance normalization, as ONNX MeanVarianceNormalization (opset 9, 13).

    y = (x - mean_A(x)) / (std + eps),      std = sqrt(var_A(x)),  var biased (divides by n)

A = ``axes`` (ONNX's attribute; default [0, 2, 3]: per channel of an NCHW tensor). Negative axes
count from the end; every axis must exist in x, and none may repeat (ConfigError). An empty list is
refused (list the axes to normalize over). There is no torch op.
``eps`` (default 1e-9, >= 0) is ADDED TO THE STANDARD DEVIATION, not to the variance: ONNX has no
attribute for it, its function body adds the constant 1e-9 to sqrt(Var). Keep the default to match
ONNX; eps = 0 is allowed (then a constant slice gives 0/0 = NaN). The ONNX constant is a float32
tensor, 9.999999717180685e-10 exactly: pass that for bit-level comparisons with ONNX float64 data.

Variance: two-pass (mean first, then the mean of squared re-centred deviations, _common.centered).
The ONNX function body computes Var = E[x^2] - E[x]^2 in one pass, which cancels catastrophically
when |mean| >> std: with |mean|/std = c its relative error in var is about c^2 * 1e-16 (float64) or
c^2 * 6e-8 (float32), and it can even go negative (sqrt -> NaN). That is why onnxruntime and the
ONNX reference evaluator can disagree with refnorm for inputs with large means; refnorm is the
exact function the ONNX equation defines, accurate for any |mean|/std (tested against mpmath).
std is computed as s * sqrt(mean((d / s)^2)) with s = 2^k just above max|d| of the slice (an exact
scaling), so it neither overflows nor underflows where its true value is a finite float64.

Outputs ``y``, and ``mean`` and ``std`` = sqrt(var) (without eps: x - mean is divided by std + eps)
with keepdims shape (1 on the A axes), as statistics.

Backward, d = x - mean, n = slice size, D = std + eps, g = dy:
    dvar/dx_j = 2 d_j / n,  dstd/dx_j = d_j / (n std),  dL/dstd = -sum_A(g * d) / D^2
    dx = (g - mean_A(g)) / D - d * sum_A(g * d) / (n std D^2)
       = (g - mean_A(g) - y * mean_A(g * d / std)) / D,      y = d / D
sum_A(dx) = 0. At eps = 0 this is layer_norm's formula with rstd = 1 / std.
Constant slice (std = 0, d = 0 exactly) with eps > 0: y = 0 and dx = (g - mean_A(g)) / eps. This is
the exact derivative, not a convention: near a constant slice y = d / eps - d |d| / (sqrt(n) eps^2)
+ ..., the second term is O(|d|^2), so y is differentiable there with Jacobian (I - 11^T/n) / eps
(the one-sided limits of dx along every direction agree with it). Autograd of the same expression
(torch: the sqrt backward at var = 0 multiplies inf by 0) yields NaN there; that NaN is an artefact
of differentiating sqrt(var) on its own. With eps = 0, a constant slice gives y = 0/0 = NaN and
dx = NaN (y has no limit there: nearby slices give any unit-std pattern).
NaN or Inf in a slice makes its mean and std NaN (or Inf - Inf): y and dx are NaN in that slice only.
Empty: a slice with no elements gives mean 0 and std NaN (as _common / native_layer_norm); empty x
gives empty y and dx.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import Forward, NormSpec
from . import _common as C

NAME = "mean_variance_norm"


def _axes(axes, ndim: int) -> tuple[int, ...]:
    out = C.normalize_axes(NAME, axes, ndim, key="axes")
    if not out:
        raise ConfigError(f"{NAME}: axes={axes!r}; expected a non-empty list of axes of x")
    return out


def scaled_std(d: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """sqrt(mean_A(d^2)) (keepdims), d scaled by an exact power of two; NaN for an empty slice."""
    a = np.max(np.abs(d), axis=axes, keepdims=True, initial=0.0)
    s = np.where((a > 0) & np.isfinite(a), np.ldexp(1.0, np.frexp(a)[1]), 1.0)
    q = d / s
    n = C.count(d, axes)
    if n == 0:
        return np.full(s.shape, np.nan)
    return s * np.sqrt((q * q).sum(axis=axes, keepdims=True) / n)


def check(x, axes, eps):
    """The argument checks (shared with the specification, refnorm/specs/mean_variance_norm.py):
    (the axes A, eps)."""
    eps = C.check_eps(NAME, eps)
    return _axes(axes, x.ndim), eps


def forward(x, *, axes=(0, 2, 3), eps=1e-9):
    """Returns (y, mean, std, d). See the module docstring for the equation and shapes."""
    A, eps = check(x, axes, eps)
    mean, d = C.centered(x, A)
    std = scaled_std(d, A)
    return d / (std + eps), mean, std, d


def backward(dy, y, std, d, *, axes=(0, 2, 3), eps=1e-9):
    """Returns dx for the forward above."""
    A = _axes(axes, d.ndim)
    if d.size == 0:
        return np.zeros_like(d)
    D = std + float(eps)
    pos = std > 0
    # mean_A(g * d / std): 0 for a constant slice (d == 0; the d |d| term has zero derivative there)
    proj = np.where(pos, (dy * (d / np.where(pos, std, 1.0))).mean(axis=A, keepdims=True), 0.0)
    # a NaN std compares False: put its NaN back so it reaches dx
    proj = np.where(np.isnan(std), np.nan, proj)
    return (dy - dy.mean(axis=A, keepdims=True) - y * proj) / D


def _forward(inputs, config, state, training):
    y, mean, std, d = forward(inputs["x"], **config)
    return Forward({"y": y, "mean": mean, "std": std}, {}, ((y, std, d), dict(config)))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / (sqrt(var) + eps) over axes (ONNX MeanVarianceNormalization; eps on the std)",
    inputs=("x",), required=("x",),
    outputs=("y", "mean", "std"),
    options={"axes": [0, 2, 3], "eps": 1e-9},
    forward=_forward, backward=C.x_backward(backward),
)
