"""dyt's argument checks, in one place: imported by the registered op (refnorm/norms/dyt.py, whose module
docstring states the conventions checked here) and by its specification (refnorm/specs/dyt.py), so the
specification never imports the registered op (which reaches the specification for the equations)."""
from __future__ import annotations

from ..errors import ShapeError

NAME = "dyt"


def check(inputs):
    """The argument checks: x has at least 1 dimension; alpha is one value, shape () or (1,); weight and
    bias (C,) with C = x.shape[-1]."""
    x, alpha = inputs["x"], inputs["alpha"]
    if x.ndim < 1:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected (*, C), at least 1 dimension")
    if alpha.shape not in ((), (1,)):
        raise ShapeError(f"{NAME}: input 'alpha' has shape {alpha.shape}; expected () or (1,): one learnable "
                         "scalar for the whole tensor")
    for key in ("weight", "bias"):
        a = inputs.get(key)
        if a is not None and a.shape != (x.shape[-1],):
            raise ShapeError(f"{NAME}: input {key!r} has shape {a.shape}; expected (C,) = ({x.shape[-1]},), one "
                             "value per channel of x's last dimension")
