"""Shared pieces of the reference core: option checks, axes, two-pass moments, the centred backward.

Conventions used throughout refnorm:
* Everything is computed in float64. Statistics are two-pass (mean first, then the mean of squared
  deviations), never E[x^2] - E[x]^2. The deviations x - mean are re-centred (``centered``), so
  normalized values keep full float64 accuracy even when |mean| is 1e6 times the std, and a
  constant slice has exactly zero deviation and exactly zero variance.
* An empty reduction (a slice with no elements) gives mean 0 and variance NaN, as torch does.
* NaN or Inf in a slice makes that slice's statistics NaN (or Inf), so it reaches only the outputs
  and gradients of that slice.
"""
from __future__ import annotations

import numbers
from typing import Iterable

import numpy as np

from ..errors import ConfigError, ShapeError


def check_eps(name: str, eps, *, what: str = "eps") -> float:
    """``eps`` must be a finite number >= 0."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not np.isfinite(eps) or eps < 0:
        raise ConfigError(f"{name}: {what}={eps!r}; expected a finite number >= 0")
    return float(eps)


def check_real(name: str, key: str, value, *, positive: bool = False, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ConfigError(f"{name}: {key}={value!r}; expected a finite number")
    if positive and value <= 0:
        raise ConfigError(f"{name}: {key}={value!r}; expected a number > 0")
    return float(value)


def check_int(name: str, key: str, value, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{name}: {key}={value!r}; expected an integer")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}: {key}={value!r}; expected an integer >= {minimum}")
    return int(value)


def check_choice(name: str, key: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{name}: {key}={value!r}; expected one of {', '.join(map(repr, choices))}")
    return value


def check_ndim(name: str, x: np.ndarray, minimum: int, layout: str) -> None:
    if x.ndim < minimum:
        raise ShapeError(f"{name}: input 'x' has shape {x.shape}; expected at least {minimum} "
                         f"dimensions {layout}")


def check_param(name: str, key: str, p: np.ndarray | None, shape: tuple[int, ...]) -> None:
    """An affine parameter (weight, bias, running stat) must have exactly ``shape``."""
    if p is not None and p.shape != tuple(shape):
        raise ShapeError(f"{name}: {key!r} has shape {p.shape}; expected {tuple(shape)}")


def normalize_axes(name: str, axes, ndim: int, key: str = "dim") -> tuple[int, ...]:
    """Axes as a sorted tuple of non-negative ints; out-of-range or repeated axes are errors."""
    if isinstance(axes, numbers.Integral) and not isinstance(axes, bool):
        axes = (axes,)
    try:
        axes = tuple(axes)
    except TypeError:
        raise ConfigError(f"{name}: {key}={axes!r}; expected an int or a list of ints") from None
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not -ndim <= a < ndim:
            raise ConfigError(f"{name}: {key}={list(axes)!r}; axis {a!r} is out of range for an "
                              f"input with {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ConfigError(f"{name}: {key}={list(axes)!r} repeats an axis")
    return tuple(sorted(out))


def count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def centered(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(mean, d): the mean over ``axes`` (keepdims) and the deviations d = x - mean, two-pass.

    m0 = mean(x); d0 = x - m0; c = mean(d0); mean = m0 + c; d = d0 - c.
    The deviations are re-centred rather than recomputed from the rounded mean: a float64 mean is
    off by up to half an ulp of |mean|, and x - mean would carry that error (|mean|/std times the
    rounding unit, relative) into every normalized value. d0 - c removes it, so d is accurate to a
    few rounding units of |d| however large |mean|/std is, and a constant slice gives d == 0 exactly.
    An empty reduction gives mean 0 (as torch).
    """
    if count(x, axes) == 0:
        return np.zeros([1 if i in axes else s for i, s in enumerate(x.shape)]), np.zeros_like(x)
    m0 = x.mean(axis=axes, keepdims=True)
    d = x - m0
    c = d.mean(axis=axes, keepdims=True)
    return m0 + c, d - c


def mean(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Mean over ``axes`` (keepdims), with one correction pass; 0 for an empty reduction."""
    return centered(x, axes)[0]


def moments(x: np.ndarray, axes: tuple[int, ...], ddof: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two-pass (mean, variance) over ``axes``, keepdims; variance divides by n - ddof.

    Variance is NaN when n - ddof <= 0 (an empty slice, or one element with ddof=1).
    """
    m, v, _ = centered_moments(x, axes, ddof)
    return m, v


def centered_moments(x: np.ndarray, axes: tuple[int, ...], ddof: int = 0):
    """(mean, variance, deviations): ``moments`` plus the accurate deviations of ``centered``.

    Normalizers should form xhat = d * rstd from these deviations, not (x - mean) * rstd.
    """
    n = count(x, axes)
    m, d = centered(x, axes)
    if n - ddof <= 0:
        return m, np.full(m.shape, np.nan), d
    return m, (d * d).sum(axis=axes, keepdims=True) / (n - ddof), d


def centered_backward(g: np.ndarray, xhat: np.ndarray, rstd: np.ndarray,
                      axes: tuple[int, ...]) -> np.ndarray:
    """dL/dx for xhat = (x - mean_A(x)) * rstd, rstd = (var_A(x) + eps)^(-1/2), biased variance.

        dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat)),   g = dL/dxhat

    (derivations/batch_norm.md: the mean and variance paths contribute the two subtracted terms).
    """
    if count(g, axes) == 0:
        return np.zeros_like(g)
    return rstd * (g - g.mean(axis=axes, keepdims=True)
                   - xhat * (g * xhat).mean(axis=axes, keepdims=True))


def reduce_to(g: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over ``axes`` (the gradient of a broadcast parameter), dropping those axes."""
    return g.sum(axis=axes)
