"""Adaptive LayerNorm (adaLN: DiT, Peebles & Xie 2023, arXiv:2212.09748; FiLM-style conditioning).

    y = LN(x) * (1 + scale) + shift,     LN(x) = (x - mean_H(x)) * rstd,  rstd = (var_H(x) + eps) ** -1/2

x: (B, *, H), normalized over its last axis H (biased variance, eps inside the sqrt, default 1e-6 as
DiT's ``nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)``). ``scale`` and ``shift``: (B, H),
one vector per sample, broadcast over every token (the middle axes); each optional. No elementwise
affine of its own: DiT's norm has none (elementwise_affine=False), and a model that has one folds it
into the conditioning (w * (1 + scale) is another scale); layer_norm covers the plain affine.
Outputs ``y`` (x.shape), and ``mean`` and ``rstd`` (B, *, 1).

Backward (derivations/adaptive_layer_norm.md), xhat = LN(x), g = dy * (1 + scale):
    dx = rstd * (g - mean_H(g) - xhat * mean_H(g * xhat))
    dscale = sum over the tokens of dy * xhat  (B, H),     dshift = sum over the tokens of dy  (B, H)
The arguments are checked in _adaptive_layer_norm_check.py (imported here and by the specification);
the equations are the specification's (refnorm/specs/adaptive_layer_norm.py, whole-array NumPy: no
separate fast path).
"""
from __future__ import annotations

from ..spec import NormSpec
from ..specs import adaptive_layer_norm as S
from ._adaptive_layer_norm_check import NAME, check  # noqa: F401 (check: the argument checks, re-exported)


SPEC = NormSpec(
    name=NAME,
    summary="y = layer_norm(x) * (1 + scale) + shift, scale and shift per sample (B, H) broadcast over the tokens",
    inputs=("x", "scale", "shift"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"eps": 1e-6},
    forward=S.forward, backward=S.backward,
)
