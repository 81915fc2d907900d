"""Errors raised by refnorm. Every message names the offending value and what was expected."""


class RefnormError(ValueError):
    """Base class: a bad name, input, option or state given to refnorm."""


class UnknownNameError(RefnormError, LookupError):
    """A normalizer, input, output, option or state name that refnorm does not know."""


class InputTypeError(RefnormError, TypeError):
    """An input of a non-floating dtype (integers, booleans, complex, objects)."""


class ShapeError(RefnormError):
    """Shapes that do not fit together (a weight of the wrong length, a cotangent of the wrong shape...)."""


class ConfigError(RefnormError):
    """An option value outside its domain (negative eps, num_groups not dividing C...)."""
