"""Gated RMSNorm / LayerNorm (Mamba2's ``RMSNormGated``; the ``layernorm_gated`` Triton kernels of mamba_ssm
and of gated-delta-net layers), with a SiLU gate ``z``:

    norm_before_gate=False (Mamba2's default):  y = N(x * silu(z))
    norm_before_gate=True:                      y = N(x) * silu(z)
    N(v) = vhat * weight + bias,   vhat = (v - mean_g(v)) * rstd       (norm="layer_norm")
                                   vhat = v * rstd                     (norm="rms_norm", the default)
    rstd = (var_g(v) + eps)^(-1/2)  (layer_norm, biased variance)  or  (mean_g(v^2) + eps)^(-1/2)  (rms_norm)
    silu(z) = z * sigmoid(z)

The statistics are taken per group: the hidden dimension H (the last axis) is split into H / group_size
contiguous groups of ``group_size`` values (Mamba2: group_size = d_ssm / ngroups), each normalized on its
own; ``group_size`` None (the default) is one group of H. eps inside the square root (default 1e-5, as
Mamba2's RMSNormGated). The affine is per element of H (weight, bias: (H,)), applied after the group
normalization; with norm_before_gate the gate multiplies the affine output, as mamba's rms_norm_ref:
(vhat * w + b) * silu(z). x, z: (*, H), the same shape; weight required, bias optional. Output: y.

Backward (derivations/gated_norm.md), s = silu(z), s' = silu'(z) = sigmoid(z) * (1 + z * (1 - sigmoid(z))):
    dn = dy * s (norm_before_gate) or dy;  g = dn * weight
    dv = rstd * (g - mean_g(g) - vhat * mean_g(g * vhat))     (rms_norm: without the mean_g(g) term)
    dweight = sum over the leading axes of dn * vhat,   dbias = sum of dn
    norm_before_gate: dx = dv,      dz = dy * N(x) * s'
    otherwise:        dx = dv * s,  dz = dv * x * s'
The arguments are checked in _gated_norm_check.py; the equations are the specification's
(refnorm/specs/gated_norm.py, whole-array NumPy: no separate fast path).
"""
from __future__ import annotations

from ..spec import NormSpec
from ..specs import gated_norm as S
from ._gated_norm_check import NAME, check  # noqa: F401 (check: the argument checks, re-exported)


SPEC = NormSpec(
    name=NAME,
    summary="y = norm(x * silu(z)) or norm(x) * silu(z), rms or layer norm per group of the hidden dim, "
            "then * weight + bias",
    inputs=("x", "z", "weight", "bias"), required=("x", "z", "weight"),
    outputs=("y",),
    options={"norm": "rms_norm", "norm_before_gate": False, "group_size": None, "eps": 1e-5},
    forward=S.forward, backward=S.backward,
)
