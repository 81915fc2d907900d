"""GroupNorm + SiLU fused (the GroupNorm-then-swish block of diffusion UNets and VAEs: Stable Diffusion's
ResnetBlock2D, diffusers' GroupNorm + SiLU kernels), as torch.nn.functional.silu(F.group_norm(...)).

    p = (x - mean_g(x)) * rstd_g * weight_c + bias_c,     rstd_g = (var_g(x) + eps) ** -1/2
    y = silu(p) = p * sigmoid(p) = p / (1 + exp(-p))

Conventions: group_norm's (refnorm/norms/group_norm.py): x is (N, C, *) with at least 2 dimensions, the
channel axis is 1 (a channels_last tensor is the same (N, C, *) array in another memory order: the groups
are C/G consecutive CHANNELS, never consecutive memory), statistics per (sample n, group g) over its C/G
channels and every spatial position, biased variance (ddof=0), eps inside the sqrt. The affine
(``weight``, ``bias``: (C,) per channel, each optional) is applied BEFORE the SiLU, the SiLU last.
Options (torch's names and defaults): ``num_groups`` (required, an integer >= 1 dividing C), ``eps`` = 1e-5.
Outputs ``y`` and group_norm's statistics ``mean`` and ``rstd`` (N, G); only ``y`` is differentiable.

Backward (derivations/group_norm_silu.md), s = sigmoid(p):
    dp = dy * silu'(p),     silu'(p) = s * (1 + p * (1 - s))      (at the pre-activation p, affine included)
then group_norm's backward with dp as its cotangent, g = dp * weight_c, xhat = (x - mean_g) * rstd_g:
    dx = rstd_g * (g - mean_A(g) - xhat * mean_A(g * xhat))
    dweight_c = sum over n and the spatial axes of dp * xhat,   dbias_c = the same sum of dp
NaN/Inf and empty inputs: as group_norm (silu(+inf) = inf, silu(-inf) = NaN: -inf * 0).
The fast path is group_norm's (blocks of (sample, group) rows, threads) followed by the SiLU of the
specification (refnorm/specs/group_norm_silu.py): the same bits.
"""
from __future__ import annotations

from dataclasses import replace

from ..spec import Forward
from ..specs.group_norm_silu import silu, silu_grad
from . import _common as C
from . import group_norm as GN

NAME = "group_norm_silu"


def check(x, weight, bias, num_groups, eps):
    """group_norm's argument checks, the errors naming group_norm_silu: (G, m, eps)."""
    return GN.check(x, weight, bias, num_groups, eps, name=NAME)


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    check(x, w, b, config["num_groups"], config["eps"])
    centre = []
    p, mean, rstd = GN.forward(x, w, b, num_groups=config["num_groups"], eps=config["eps"], _centre=centre)
    return Forward({"y": silu(p), "mean": mean, "rstd": rstd}, {},
                   C.affine_ctx(x, w, b, rstd, p, num_groups=config["num_groups"], centre=centre or None))


def backward(dy, x, weight, rstd, p, *, num_groups: int, with_bias: bool, centre=None):
    """group_norm's backward with the pre-activation p's cotangent dp = dy * silu'(p): (dx, dweight or None,
    dbias or None)."""
    return GN.backward(dy * silu_grad(p), x, weight, rstd, num_groups=num_groups, with_bias=with_bias,
                       centre=centre)


# group_norm's inputs, outputs and options
SPEC = replace(
    GN.SPEC, name=NAME,
    summary="y = silu(group_norm(x) * weight_c + bias_c): GroupNorm, its affine, then SiLU (diffusion UNet/VAE)",
    forward=_forward, backward=C.affine_backward(backward),
)
