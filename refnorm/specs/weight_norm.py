"""Weight normalization, the specification (module docstring of refnorm/norms/weight_norm.py).

    w = g * v / ||v||,   ||v|| = sqrt(sum_A v^2),   A = every axis but ``dim`` (dim=None: all axes)
    dg = sum_A(dw * u),   dv = (g / ||v||) * (dw - u * dg),   u = v / ||v||

||v|| is computed as s * sqrt(sum_A (v / s)^2), s an exact power of two (_math.pow2_scale). g is
reshaped to torch's weight_g shape (1 on A); dg comes back in the shape g was given in; the output
``norm`` has the weight_g shape. An all-zero slice: 0/0 = NaN in w, dv and dg, as torch.
Agreement with the fast path: the same bits.
"""
from __future__ import annotations

import numpy as np

from ..norms.weight_norm import check
from ..spec import Backward, Forward
from ._math import pow2_scale

AGREEMENT = {}          # every array: the same bits


def weight_norm(v, g, A):
    """v: any shape; g: 1 on A. Returns w: v.shape, norm and u = v / norm."""
    s = pow2_scale(v, A)                                             # (1 on A)
    norm = s * np.sqrt(((v / s) ** 2).sum(axis=A, keepdims=True))   # (1 on A)
    u = v / norm                                                     # v.shape
    return g * u, norm, u


def weight_norm_backward(dw, g, norm, u, A):
    """dw: v.shape. Returns dv: v.shape, dg: (1 on A)."""
    dg = (dw * u).sum(axis=A, keepdims=True)                         # (1 on A)
    dv = g / norm * (dw - u * dg)                                    # v.shape
    return dv, dg


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    v, g = inputs["v"], inputs["g"]
    dim, gk = check(v, g, config["dim"])                             # gk: g in weight_g shape
    A = tuple(a for a in range(v.ndim) if a != dim)
    w, norm, u = weight_norm(v, gk, A)
    keep = () if dim is None else norm.shape
    return Forward({"w": w, "norm": norm.reshape(keep)}, {}, (gk, norm, u, A, g.shape))


def backward(ctx, cot):
    gk, norm, u, A, g_shape = ctx
    dv, dg = weight_norm_backward(cot["w"], gk, norm, u, A)
    return Backward({"v": dv, "g": dg.reshape(g_shape)})
