"""Local response normalization, the specification (module docstring of refnorm/norms/local_response_norm.py).

    scale[n, c] = k + alpha / size * sum_{c' in window(c)} x[n, c']^2,     y = x * scale^(-beta)
    dx_i = dy_i * s_i^-beta - 2 alpha beta / size * x_i * sum_{j: i in window(j)} dy_j x_j s_j^(-beta-1)

x: (N, C, *), channels on axis 1; window(c) = [c - lo, c + hi] clipped to [0, C - 1] (zero padding),
always divided by ``size``: torch lo = size//2, hi = (size-1)//2; ONNX the reverse. The backward's
window is the transposed one (the reaches swapped). scale is an output (a statistic).
Agreement with the fast path: the same bits. Both add the window's channels in order (c - lo first)
into zeros, in place: the same NumPy additions, so even the sign of a NaN from NaN + NaN matches
(a zero-padded sum of slices gives the same numbers but can flip that sign).
"""
from __future__ import annotations

import numpy as np

from ..norms.local_response_norm import check
from ..spec import Backward, Forward

AGREEMENT = {}          # every array: the same bits


def window_sum(a, lo, hi):
    """out[:, c] = sum_{o = -lo..hi} a[:, c + o] over the channels 0 <= c + o < C (axis 1)."""
    C = a.shape[1]
    out = np.zeros_like(a)                                           # x.shape
    for o in range(-min(lo, C), min(hi, C) + 1):                     # the channel offset, in order
        c = slice(max(0, -o), C - max(0, o))                         # the c with 0 <= c + o < C
        out[:, c] += a[:, c.start + o: c.stop + o]                   # out[:, c] += a[:, c + o]
    return out


def local_response_norm(x, size, alpha, beta, k, lo, hi):
    """x: (N, C, *). Returns y and scale: x.shape."""
    scale = k + (alpha / size) * window_sum(x * x, lo, hi)          # x.shape
    y = x * scale ** -beta                                           # x.shape
    return y, scale


def local_response_norm_backward(dy, x, scale, size, alpha, beta, lo, hi):
    """dy: x.shape. Returns dx: x.shape."""
    p = scale ** -beta                                               # x.shape
    back = window_sum(dy * x * p / scale, hi, lo)                    # transposed window, x.shape
    return dy * p - (2.0 * alpha * beta / size) * x * back


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x = inputs["x"]
    size, alpha, beta, k = check(x, config["size"], config["alpha"], config["beta"], config["k"],
                                 config["window"])
    lo, hi = (size // 2, (size - 1) // 2) if config["window"] == "torch" else ((size - 1) // 2, size // 2)
    y, scale = local_response_norm(x, size, alpha, beta, k, lo, hi)
    return Forward({"y": y, "scale": scale}, {}, (x, scale, size, alpha, beta, lo, hi))


def backward(ctx, cot):
    return Backward({"x": local_response_norm_backward(cot["y"], *ctx)})
