"""DyT, dynamic tanh ("Transformers without Normalization", Zhu, Chen, He, LeCun, Liu, CVPR 2025,
arXiv:2503.10622): an element-wise replacement of LayerNorm/RMSNorm.

    y = weight * tanh(alpha * x) + bias

x: (*, C). ``alpha`` is ONE learnable scalar for the whole tensor (the paper's
``nn.Parameter(torch.ones(1) * alpha_init_value)``, shape (1,); shape () is accepted too, and its gradient
has the shape it was given in). ``weight`` and ``bias``: (C,), one value per channel of x's last
dimension (the paper's channels_last layout, what a transformer's (batch, tokens, C) activations use; a
channels-first (N, C, H, W) tensor is checked after a permute to channels last), each optional (absent:
1 and 0). No options: no eps, no statistics, nothing reduced in the forward.

Backward (derivations/dyt.md), g = dy * weight, D = tanh'(alpha x) = 1 - tanh(alpha x)^2:
    dx = alpha * g * D
    dalpha = sum over EVERY element of x of g * D * x     (a full reduction: N = x.size terms)
    dweight = sum over the leading axes of dy * tanh(alpha x),   dbias = sum over the leading axes of dy
The float64 reference computes D as 1 / cosh(alpha x)^2 (exact where tanh saturates, module docstring of
refnorm/specs/dyt.py). Outputs ``y`` only. The equations are the specification's (refnorm/specs/dyt.py,
whole-array NumPy: no separate fast path; the op is element-wise, nothing to block).
"""
from __future__ import annotations

from ..spec import NormSpec
from ..specs import dyt as S
from ._dyt_check import NAME, check  # noqa: F401 (check: the argument checks, re-exported)


SPEC = NormSpec(
    name=NAME,
    summary="y = weight * tanh(alpha * x) + bias, alpha one learnable scalar, weight and bias per channel (C,)",
    inputs=("x", "alpha", "weight", "bias"), required=("x", "alpha"),
    outputs=("y",),
    options={},
    forward=S.forward, backward=S.backward,
)
