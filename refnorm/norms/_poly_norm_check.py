"""poly_norm's argument checks, in one place: imported by the registered op (refnorm/norms/poly_norm.py, whose
module docstring states the conventions checked here) and by its specification (refnorm/specs/poly_norm.py),
so the specification never imports the registered op (which reaches the specification for the equations)."""
from __future__ import annotations

from ..errors import ShapeError
from . import _common as C

NAME = "poly_norm"


def check(inputs, config):
    """The argument checks: eps; x has at least 1 dimension; weight (3,); bias () or (1,)."""
    eps = C.check_eps(NAME, config["eps"])
    x, w, b = inputs["x"], inputs["weight"], inputs.get("bias")
    if x.ndim < 1:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected (*, H), at least 1 dimension")
    if w.shape != (3,):
        raise ShapeError(f"{NAME}: input 'weight' has shape {w.shape}; expected (3,): w0, w1, w2 for the terms "
                         "of x^3, x^2 and x")
    if b is not None and b.shape not in ((), (1,)):
        raise ShapeError(f"{NAME}: input 'bias' has shape {b.shape}; expected (1,) or (): one scalar")
    return eps
