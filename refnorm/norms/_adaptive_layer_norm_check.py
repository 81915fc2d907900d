"""adaptive_layer_norm's argument checks, in one place: imported by the registered op
(refnorm/norms/adaptive_layer_norm.py, whose module docstring states the conventions checked here) and by
its specification (refnorm/specs/adaptive_layer_norm.py), so the specification never imports the registered
op (which reaches the specification for the equations)."""
from __future__ import annotations

from ..errors import ShapeError
from . import _common as C

NAME = "adaptive_layer_norm"


def check(inputs, config):
    """The argument checks: eps. x must be (B, *, H) with at least 2 dimensions; scale/shift (B, H)."""
    x = inputs["x"]
    eps = C.check_eps(NAME, config["eps"])
    if x.ndim < 2:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected (batch, *tokens, hidden), "
                         "at least 2 dimensions")
    want = (x.shape[0], x.shape[-1])
    for key in ("scale", "shift"):
        a = inputs.get(key)
        if a is not None and a.shape != want:
            raise ShapeError(f"{NAME}: input {key!r} has shape {a.shape}; expected (batch, hidden) = {want}, "
                             "one vector per sample")
    return eps
