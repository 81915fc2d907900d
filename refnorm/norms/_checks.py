"""The argument checks of the reference core, in one place: the fast path of every normalizer
(refnorm/norms/) and its specification (refnorm/specs/, which imports the fast path's ``check``) reach
them through _common. Each bad value is a ConfigError or ShapeError naming the op, the value and what
was expected."""
from __future__ import annotations

import numbers
from typing import Iterable

import numpy as np

from ..errors import ConfigError, RefnormError, ShapeError


def normalized_shape(name: str, value) -> tuple[int, ...]:
    """``normalized_shape`` (an int or a non-empty sequence of non-negative ints) as a tuple; anything else
    is a ConfigError naming ``name`` and the value (layer_norm, rms_norm and the ops built on them)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    try:
        shape = tuple(value)
    except TypeError:
        shape = None
    if not shape or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0 for s in shape):
        raise ConfigError(f"{name}: normalized_shape={value!r}; expected a non-empty list "
                          "of non-negative ints")
    return tuple(int(s) for s in shape)


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


def check_state_pair(name: str, state) -> None:
    """evaluate()'s state of a normalizer with running statistics: both of them, or none."""
    if state and not {"running_mean", "running_var"} <= set(state):
        raise RefnormError(f"{name}: state needs both 'running_mean' and 'running_var', got {sorted(state)}")


def check_channels(name: str, x: np.ndarray, weight, bias, running_mean, running_var, num_batches_tracked) -> None:
    """x of shape (N, C, *) with a (C,) weight, bias and running statistics (each optional; the two
    statistics both or neither) and a scalar num_batches_tracked (batch_norm, instance_norm)."""
    check_ndim(name, x, 2, "(N, C, *)")
    nc = x.shape[1]
    for key, p in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                   ("running_var", running_var)):
        check_param(name, key, p, (nc,))
    if (running_mean is None) != (running_var is None):
        raise RefnormError(f"{name}: state needs both 'running_mean' and 'running_var' (or neither)")
    if np.ndim(num_batches_tracked) != 0:
        raise ShapeError(f"{name}: 'num_batches_tracked' has shape {np.shape(num_batches_tracked)}; expected ()")
