"""Memory layouts a case's arrays can be handed to a backend in: the same values, other strides.

    contiguous      C order (the default)
    channels_last   NHWC / NDHWC memory for an (N, C, *spatial) array: the channel axis varies fastest
                    (torch.channels_last / channels_last_3d); arrays of fewer than 3 dims stay C order
    transposed      the axes in reverse memory order (Fortran order): a (rows, features) array is
                    column-major
    strided         every other element along the last axis of a buffer twice as wide (a
                    non-contiguous view, e.g. a slice of a fused QKV projection)
    offset          a view starting one element into its buffer (a tensor that is a slice of another)

``apply(layout, a)`` returns a view with those strides and ``a``'s values (NumPy keeps the strides, and
``torch.from_numpy`` keeps them too, so a torch backend runs its channels_last or strided kernels).
The activations and cotangents are laid out; 1-D parameters and scalars are left as they are.
"""
from __future__ import annotations

import numpy as np

from ..errors import RefnormError

LAYOUTS = {
    "contiguous": "C order",
    "channels_last": "NHWC / NDHWC memory for (N, C, *spatial) arrays (3 or more dims)",
    "transposed": "axes in reverse memory order (column-major)",
    "strided": "every other element along the last axis (a non-contiguous view)",
    "offset": "a view one element into its buffer",
}


def check(layout: str, shape, what: str = "") -> None:
    """A LayoutError when ``layout`` is unknown or cannot apply to an activation of ``shape``."""
    if layout not in LAYOUTS:
        raise RefnormError(f"{what}: layout {layout!r}; expected one of: {', '.join(LAYOUTS)}")
    if layout == "channels_last" and len(shape) < 3:
        raise RefnormError(f"{what}: layout channels_last needs an (N, C, *spatial) activation of 3 or more "
                           f"dims, got shape {tuple(shape)}")


def apply(layout: str, a: np.ndarray) -> np.ndarray:
    """``a``'s values with ``layout``'s strides (module docstring); ``a`` itself is not changed."""
    a = np.asarray(a)
    if layout == "contiguous" or a.ndim < 2:
        return np.array(a, copy=True)
    if layout == "channels_last":
        if a.ndim < 3:
            return np.array(a, copy=True)
        perm = (0,) + tuple(range(2, a.ndim)) + (1,)                  # N, *spatial, C in memory
        return np.ascontiguousarray(a.transpose(perm)).transpose(np.argsort(perm))
    if layout == "transposed":
        return np.asfortranarray(a)
    if layout == "strided":
        buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype)
        view = buf[..., ::2]
        view[...] = a
        return view
    if layout == "offset":
        buf = np.zeros(a.size + 1, dtype=a.dtype)
        view = buf[1:].reshape(a.shape)
        view[...] = a
        return view
    raise RefnormError(f"layout {layout!r}; expected one of: {', '.join(LAYOUTS)}")


def describe(a: np.ndarray) -> str:
    """'shape (2, 3), strides (24, 8), C-contiguous' for reports."""
    flags = "C-contiguous" if a.flags.c_contiguous else ("F-contiguous" if a.flags.f_contiguous else "non-contiguous")
    return f"shape {a.shape}, strides {a.strides}, {flags}"
