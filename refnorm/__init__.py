"""refnorm: float64 NumPy ground truth for normalization layers, with hand-derived backwards.

    refnorm.names() -> tuple[str, ...]
    refnorm.evaluate(name, inputs, *, config=None, grad_outputs=None, state=None, training=True) -> Result

Importing refnorm never imports torch or jax.
"""
from .errors import ConfigError, InputTypeError, RefnormError, ShapeError, UnknownNameError
from .registry import evaluate, get, names
from .spec import Result

__version__ = "0.1.0"
__all__ = ["names", "evaluate", "get", "Result", "RefnormError", "UnknownNameError",
           "InputTypeError", "ShapeError", "ConfigError", "__version__"]
