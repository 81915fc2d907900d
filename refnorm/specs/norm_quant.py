"""norm_quant, the specification (module docstring of refnorm/norms/norm_quant.py for the conventions).

    y     = layer_norm(x) or rms_norm(x)          (the specifications refnorm/specs/layer_norm.py, rms_norm.py)
    amax  = max_A |y|
    scale = static_scale,  or  max(min(amax / qmax, scale_ub), min_scale)
    q     = clip(y / scale, qmin, qmax)           (the value the quantizer rounds; forward only)

Agreement with the fast path: the same bits (the same norm specifications' bits, then elementwise steps).
"""
from __future__ import annotations

import numpy as np

from ..norms.norm_quant import QUANT_DTYPES, check, divide, qmax
from ..spec import Backward, Forward
from .layer_norm import layer_norm
from .rms_norm import rms_norm

AGREEMENT = {}          # every array: the same bits


def norm_quant(x, weight, bias, static_scale, normalized_shape, norm, eps, quant_dtype, scale_ub, min_scale):
    """x: (*, *N). Returns q: x.shape, scale and amax: (*, 1...)."""
    A = tuple(range(x.ndim - len(normalized_shape), x.ndim))      # the normalized axes
    if norm == "layer_norm":
        y = layer_norm(x, weight, bias, normalized_shape, eps)[0]  # x.shape
    else:
        y = rms_norm(x, weight, normalized_shape, eps, "inside", 0.0)[0]
    amax = np.max(np.abs(y), axis=A, keepdims=True, initial=0.0)    # (*, 1..)
    if static_scale is not None:
        scale = np.full(amax.shape, float(static_scale.reshape(())))
    else:
        scale = amax / qmax(quant_dtype)                             # (*, 1..)
        if scale_ub is not None:
            scale = np.minimum(scale, scale_ub)
        scale = np.maximum(scale, min_scale)
    _, lo, hi = QUANT_DTYPES[quant_dtype]
    q = np.clip(divide(y, scale), lo, hi)                            # x.shape (0 where scale = 0: min_scale=0)
    return q, scale, amax


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, w, b, s = (np.ascontiguousarray(inputs["x"]), inputs.get("weight"), inputs.get("bias"),
                  inputs.get("static_scale"))
    c = config
    ns, eps, floor = check(x, w, b, s, c["normalized_shape"], c["norm"], c["eps"], c["quant_dtype"], c["scale_ub"],
                           c["min_scale"])
    q, scale, amax = norm_quant(x, w, b, s, ns, c["norm"], eps, c["quant_dtype"], c["scale_ub"], floor)
    return Forward({"q": q, "scale": scale, "amax": amax}, {}, None)


def backward(ctx, cot):
    return Backward({})          # never called: the registry runs no backward for a forward-only op
