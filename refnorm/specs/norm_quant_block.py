"""norm_quant_block, the specification (module docstring of refnorm/norms/norm_quant_block.py for the
conventions), written block by block:

    s      = x + residual                                  (residual_out; s = x without a residual)
    y      = layer_norm(s) or rms_norm(s)                  (refnorm/specs/layer_norm.py, rms_norm.py)
    for each block j of the last axis, the values y[..., j B : min((j + 1) B, H)]:
        amax_j = max |y_j|
    S_enc  = 2688 / max_j amax_j over the whole tensor, or the input global_scale          (nvfp4 only)
    v_j, S_j = the format's rule (norms.norm_quant_block.block_scales: one line per rule)
    q_j    = clip(y_j / S_j, -qmax, qmax)                  (0 where S_j = 0)

Agreement with the fast path: the same bits (the same norms and the same elementwise steps; the fast
path pads the last block with zeros, which changes no maximum).
"""
from __future__ import annotations

import numpy as np

from ..norms.norm_quant_block import block_scales, check, divide_clip, num_blocks, qmax, tensor_encode
from ..spec import Backward, Forward
from .layer_norm import layer_norm
from .rms_norm import rms_norm

AGREEMENT = {}          # every array: the same bits


def norm_quant_block(x, residual, weight, bias, c, H, eps, global_scale=None):
    """x: (*, H). Returns (q: x.shape, scale and amax: (*, nb), tensor_scale: (1,)*x.ndim, s: x.shape)."""
    s = x if residual is None else x + residual                              # x.shape
    if c.get("norm", "rms_norm") == "layer_norm":
        y = layer_norm(s, weight, bias, (H,), eps)[0]
    else:
        y = rms_norm(s, weight, (H,), eps, "inside", 0.0)[0]
    B = c["block_size"]
    cols = [slice(j * B, min((j + 1) * B, H)) for j in range(num_blocks(H, B))]
    amax = np.stack([np.max(np.abs(y[..., sl]), axis=-1, initial=0.0) for sl in cols], axis=-1)   # (*, nb)
    v, S, ts = block_scales(amax, c, tensor_encode(amax, c, global_scale))   # (*, nb) each
    q = np.concatenate([divide_clip(y[..., sl], S[..., j:j + 1], qmax(c["element_dtype"]))
                        for j, sl in enumerate(cols)], axis=-1)             # x.shape
    return q, v, amax, np.full((1,) * x.ndim, float(ts)), s


# ---------------------------------------------------------------- the evaluate() contract
def forward(inputs, config, state, training):
    x, r, w, b = (np.ascontiguousarray(inputs["x"]), inputs.get("residual"), inputs.get("weight"),
                  inputs.get("bias"))
    gs = inputs.get("global_scale")
    c, H, eps = check(x, r, w, b, config, gs)
    q, v, amax, ts, s = norm_quant_block(x, r, w, b, c, H, eps, gs)
    out = {"q": q, "scale": v, "amax": amax, "tensor_scale": ts}
    if r is not None:
        out["residual_out"] = s
    return Forward(out, {}, None)


def backward(ctx, cot):
    return Backward({})          # never called: the registry runs no backward for a forward-only op
