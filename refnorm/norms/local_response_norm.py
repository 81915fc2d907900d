"""Local response normalization (Krizhevsky et al. 2012), as torch.nn.functional.local_response_norm.

    y[n, c, ...] = x[n, c, ...] * scale[n, c, ...] ** -beta
    scale[n, c, ...] = k + alpha / size * sum_{c' in window(c)} x[n, c', ...]^2

Input x is (N, C, *) with at least 3 dimensions (torch's requirement; an ONNX (N, C) input can be
passed as (N, C, 1)). The window runs across channels, clipped to [0, C - 1] (zero padding), and the
sum is always divided by ``size`` (also at the borders, where fewer channels exist), as both torch
(avg_pool over zero-padded channels, count_include_pad) and ONNX LRN do.
``window``:
* "torch" (default): window(c) = [c - size//2, c + (size-1)//2] (torch pads (size//2, (size-1)//2)).
* "onnx": window(c) = [c - floor((size-1)/2), c + ceil((size-1)/2)] (the LRN-13 spec formula).
They agree for odd size; for even size torch's window is one channel lower (size 2: torch [c-1, c],
ONNX [c, c+1]). The ONNX reference evaluator loops over N instead of C (docs/conventions.md §3); refnorm
follows the spec text, as onnxruntime does for odd size (it refuses even size).

Options as torch: ``size`` (REQUIRED, int >= 1), alpha=1e-4, beta=0.75, k=1.0 (ONNX's ``bias``).
refnorm requires k > 0 and alpha >= 0, so scale >= k > 0 and y is finite for finite x; torch accepts
any value, and a non-positive scale gives NaN/Inf (a negative number to a fractional power), which is
not a normalization. beta is any finite number.

Outputs ``y`` and ``scale`` (shape of x; a statistic, not differentiable): the base of the power, the
quantity Caffe and cuDNN call the scale and a kernel saves for its backward.

Backward (hand-derived; s = scale, window^T the transposed window):
    dx_i = dy_i * s_i^-beta - 2 * alpha * beta / size * x_i * sum_{j: i in window(j)} dy_j x_j s_j^(-beta-1)
i is in window(j) = [j - lo, j + hi] iff j is in [i - hi, i + lo]: the transposed window swaps the
two reaches, which matters only for even size (torch lo = size//2, hi = (size-1)//2; ONNX reversed).
NaN/Inf at (n, c, ...) reaches y only at the channels whose window contains c (same n and position),
and dx at most two windows away; nothing crosses n or the spatial position. Empty x gives empty y
(torch returns the input unchanged), and an empty channel axis is allowed.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import REQUIRED, NormSpec
from . import _common as C

NAME = "local_response_norm"


def reach(size: int, window: str) -> tuple[int, int]:
    """(lo, hi): window(c) = [c - lo, c + hi] for the named convention."""
    if window == "torch":
        return size // 2, (size - 1) // 2
    return (size - 1) // 2, size // 2


def window_sum(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """out[:, c] = sum_{c' = c - lo .. c + hi, 0 <= c' < C} a[:, c'] (channels are axis 1).

    Zero padding by slicing (no multiplication by zero, so NaN/Inf stay in their windows); offsets
    beyond the channel count contribute nothing and are skipped.
    """
    nc = a.shape[1]
    out = np.zeros_like(a)
    for o in range(-min(lo, nc), min(hi, nc) + 1):
        # out[:, c] += a[:, c + o] for every c with 0 <= c + o < C
        if o >= 0:
            out[:, :nc - o] += a[:, o:]
        else:
            out[:, -o:] += a[:, :nc + o]
    return out


def check(x, size, alpha, beta, k, window):
    """The argument checks (shared with the specification, refnorm/specs/local_response_norm.py):
    (size, alpha, beta, k)."""
    size = C.check_int(NAME, "size", size, minimum=1)
    alpha = C.check_real(NAME, "alpha", alpha)
    if alpha < 0:
        raise ConfigError(f"{NAME}: alpha={alpha!r}; expected a number >= 0")
    beta = C.check_real(NAME, "beta", beta)
    k = C.check_real(NAME, "k", k, positive=True)
    C.check_choice(NAME, "window", window, ("torch", "onnx"))
    C.check_ndim(NAME, x, 3, "(N, C, *)")
    return size, alpha, beta, k


def forward(x, *, size, alpha=1e-4, beta=0.75, k=1.0, window="torch"):
    """Returns (y, scale). See the module docstring."""
    size, alpha, beta, k = check(x, size, alpha, beta, k, window)
    lo, hi = reach(size, window)
    scale = k + (alpha / size) * window_sum(x * x, lo, hi)
    return x * scale ** -beta, scale


def backward(dy, x, scale, *, size, alpha=1e-4, beta=0.75, k=1.0, window="torch"):
    """Returns dx for the forward above."""
    lo, hi = reach(int(size), window)
    p = scale ** -beta
    back = window_sum(dy * x * p / scale, hi, lo)   # transposed window: the reaches swapped
    return dy * p - (2.0 * alpha * beta / size) * x * back


SPEC = NormSpec(
    name=NAME,
    summary="y = x / (k + alpha/size * sum of x^2 over a window of size channels) ** beta",
    inputs=("x",), required=("x",),
    outputs=("y", "scale"),
    options={"size": REQUIRED, "alpha": 1e-4, "beta": 0.75, "k": 1.0, "window": "torch"},
    forward=C.x_forward(forward, "scale"), backward=C.x_backward(backward),
)
