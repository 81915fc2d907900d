"""gated_norm's argument checks, in one place: imported by the registered op (refnorm/norms/gated_norm.py,
whose module docstring states the conventions checked here) and by its specification
(refnorm/specs/gated_norm.py), so the specification never imports the registered op."""
from __future__ import annotations

import numbers

from ..errors import ConfigError, ShapeError
from . import _common as C

NAME = "gated_norm"
NORMS = ("rms_norm", "layer_norm")


def group_size(H, value) -> int:
    """``group_size`` (None: the whole hidden dimension H, one group) as an int dividing H."""
    if value is None:
        return H
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(f"{NAME}: group_size={value!r}; expected None (one group over the hidden dimension) "
                          "or an integer >= 1 dividing it")
    if H % int(value):
        raise ConfigError(f"{NAME}: group_size={value!r} does not divide the hidden dimension {H}; expected a "
                          "divisor of it (ngroups = hidden / group_size)")
    return int(value)


def check(inputs, config):
    """The argument checks. Returns (norm, norm_before_gate, group_size, eps). x: (*, H) with at least 1
    dimension and H >= 1; z: x.shape; weight, bias: (H,)."""
    x, z = inputs["x"], inputs["z"]
    norm = C.check_choice(NAME, "norm", config["norm"], NORMS)
    nbg = config["norm_before_gate"]
    if not isinstance(nbg, bool):
        raise ConfigError(f"{NAME}: norm_before_gate={nbg!r}; expected True (norm(x) * silu(z)) or False "
                          "(norm(x * silu(z)))")
    eps = C.check_eps(NAME, config["eps"])
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected (*, hidden) with hidden >= 1")
    if z.shape != x.shape:
        raise ShapeError(f"{NAME}: input 'z' has shape {z.shape}; expected x's shape {x.shape} (one gate value "
                         "per element)")
    H = x.shape[-1]
    for key in ("weight", "bias"):
        a = inputs.get(key)
        if a is not None and a.shape != (H,):
            raise ShapeError(f"{NAME}: input {key!r} has shape {a.shape}; expected (hidden,) = ({H},)")
    return norm, nbg, group_size(H, config["group_size"]), eps
