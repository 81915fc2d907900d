"""add_norm's argument checks, in one place: imported by the registered op (refnorm/norms/add_norm.py, whose
module docstring states the conventions checked here) and by its specification (refnorm/specs/add_norm.py),
so the specification never imports the registered op (which reaches the specification for the equations)."""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import ConfigError, ShapeError
from . import _common as C

NAME = "add_norm"
NORMS = ("layer_norm", "rms_norm")


def _shape(normalized_shape) -> tuple[int, ...]:
    return C.normalized_shape(NAME, normalized_shape)


def check(inputs, config):
    """The argument checks: (normalized_shape, eps, p, weight_offset). Every bad value is named."""
    x = inputs["x"]
    shape = _shape(config["normalized_shape"])
    eps = C.check_eps(NAME, config["eps"])
    C.check_choice(NAME, "norm", config["norm"], NORMS)
    p = config["dropout_p"]
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= float(p) < 1.0:
        raise ConfigError(f"{NAME}: dropout_p={p!r}; expected a number in [0, 1)")
    p = float(p)
    for key in ("prenorm", "residual_in_fp32"):
        if not isinstance(config[key], (bool, np.bool_)):
            raise ConfigError(f"{NAME}: {key}={config[key]!r}; expected True or False")
    offset = C.check_real(NAME, "weight_offset", config["weight_offset"])
    k = len(shape)
    if x.ndim < k or x.shape[x.ndim - k:] != shape:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected trailing dimensions "
                         f"equal to normalized_shape {list(shape)}")
    for key in ("residual", "mask", "x1", "mask1"):
        a = inputs.get(key)
        if a is not None and a.shape != x.shape:
            raise ShapeError(f"{NAME}: input {key!r} has shape {a.shape}; expected the shape of 'x', {x.shape}")
    rs = inputs.get("rowscale")
    if rs is not None and rs.shape != x.shape[:x.ndim - k]:
        raise ShapeError(f"{NAME}: input 'rowscale' has shape {rs.shape}; expected one value per row, "
                         f"x.shape[:-{k}] = {x.shape[:x.ndim - k]}")
    _check_keep(inputs, "mask", p)
    C.check_param(NAME, "weight", inputs.get("weight"), shape)
    C.check_param(NAME, "bias", inputs.get("bias"), shape)
    _check_parallel(inputs, p, shape)
    if inputs.get("weight") is None and offset != 0.0:
        raise ConfigError(f"{NAME}: weight_offset={config['weight_offset']!r} needs a 'weight' input; expected "
                          "weight_offset=0.0 when no weight is given")
    return shape, eps, p, offset


def _check_keep(inputs, key, p, branch=""):
    """A keep-mask holds 0s and 1s; dropout_p > 0 needs one (given, never drawn)."""
    mask = inputs.get(key)
    if mask is not None:
        bad = ~((mask == 0) | (mask == 1))
        if bad.any():
            v = float(mask[bad].flat[0])
            raise ConfigError(f"{NAME}: input {key!r} holds {v!r}; expected a keep-mask of 0s and 1s")
    elif p > 0:
        raise ConfigError(f"{NAME}: dropout_p={p!r}{branch} needs a {key!r} input (the keep-mask is given, never "
                          f"drawn); expected a {key} or dropout_p=0.0")


def _check_parallel(inputs, p, shape):
    """The parallel branch's rules (add_norm.py's module docstring): flash-attention's asserts as ConfigErrors."""
    x1, mask1 = inputs.get("x1"), inputs.get("mask1")
    if x1 is None and mask1 is not None:
        raise ConfigError(f"{NAME}: input 'mask1' is given without 'x1'; expected mask1 (x1's keep-mask) only "
                          "with x1")
    if x1 is not None:
        if inputs.get("rowscale") is not None:
            raise ConfigError(f"{NAME}: input 'rowscale' is given with 'x1'; expected no rowscale with the parallel "
                              "branch (flash-attention: rowscale is not supported with parallel LayerNorm)")
        _check_keep(inputs, "mask1", p, " with 'x1'")
    C.check_param(NAME, "weight1", inputs.get("weight1"), shape)
    C.check_param(NAME, "bias1", inputs.get("bias1"), shape)
    if inputs.get("bias1") is not None and inputs.get("weight1") is None:
        raise ConfigError(f"{NAME}: input 'bias1' is given without 'weight1'; expected weight1 with bias1 (the "
                          "output y1 exists only when weight1 is given)")
