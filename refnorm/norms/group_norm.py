"""GroupNorm (Wu & He 2018, arXiv:1803.08494), as torch.nn.functional.group_norm / torch.native_group_norm.

    y = (x - mean_g(x)) * rstd_g * weight_c + bias_c,     rstd_g = (var_g(x) + eps) ** -1/2

Input x is (N, C, *) with at least 2 dimensions ((N, C) is allowed, as in torch). The C channels
are split into ``num_groups`` = G consecutive groups of C/G channels; statistics are per (sample n,
group g) over that group's C/G channels and every spatial position, m = C/G * prod(*) values, i.e.
over the last axis of the (N, G, m) view. Biased variance (ddof=0); eps inside the sqrt.
Options (torch's names and defaults): ``num_groups`` (required, an integer >= 1 dividing C) and
``eps`` = 1e-5 (>= 0; torch also accepts a negative eps, refnorm refuses it as every normalizer does).
``weight`` and ``bias`` have shape (C,) (per channel, not per group: torch and ONNX-21, not ONNX-18)
and are each optional.
Outputs ``y``, and ``mean`` and ``rstd`` of shape (N, G) (torch.native_group_norm's second and third
outputs).

Backward (derivations/group_norm.md), with xhat = (x - mean_g) * rstd_g and g = dy * weight_c, the
sums and means taken over each (n, group) slice A of the (N, G, m) view:
    dx = rstd_g * (g - mean_A(g) - xhat * mean_A(g * xhat))
    dweight_c = sum over n and the spatial axes of dy * xhat,   dbias_c = sum over n and spatial of dy
NaN/Inf in one (n, group) slice reach only that slice's y, mean, rstd and dx (and, through the sums
over n, dweight/dbias of that group's channels).
Empty input: a group with no elements (C == 0 or a zero-sized spatial axis) gives mean 0 and rstd
NaN, as torch; N == 0 gives (0, G) statistics. A group of one element gives xhat = 0 (y = bias) for
eps > 0 and NaN for eps = 0; torch.native_group_norm computes the same, while F.group_norm's Python
wrapper refuses the input when N * C/G * prod(*) == 1 (a check copied from batch norm), which refnorm
does not replicate.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import REQUIRED, Backward, Forward, NormSpec
from . import _common as C

NAME = "group_norm"


def _groups(x: np.ndarray, num_groups) -> tuple[int, int]:
    """(G, m): the validated number of groups and the number of values in one (n, group) slice."""
    C.check_ndim(NAME, x, 2, "(N, C, *)")
    g = C.check_int(NAME, "num_groups", num_groups, minimum=1)
    nc = x.shape[1]
    if nc % g:
        raise ConfigError(f"{NAME}: num_groups={g} does not divide the number of channels C={nc} "
                          f"(input shape {x.shape}); expected a divisor of {nc}")
    return g, (nc // g) * int(np.prod(x.shape[2:], dtype=np.int64))


def _bcast(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A per-channel (C,) array shaped to broadcast against x (N, C, *)."""
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def forward(x, weight=None, bias=None, *, num_groups, eps=1e-5):
    """Returns (y, mean, rstd), mean and rstd of shape (N, G). See the module docstring."""
    g, m = _groups(x, num_groups)
    eps = C.check_eps(NAME, eps)
    C.check_param(NAME, "weight", weight, (x.shape[1],))
    C.check_param(NAME, "bias", bias, (x.shape[1],))
    v = x.reshape(x.shape[0], g, m)
    mean, var, d = C.centered_moments(v, (2,))
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (d * rstd).reshape(x.shape)
    y = xhat if weight is None else xhat * _bcast(weight, x)
    if bias is not None:
        y = y + _bcast(bias, x)
    return y, mean.reshape(x.shape[0], g), rstd.reshape(x.shape[0], g)


def backward(dy, x, weight, rstd, *, num_groups: int, with_bias: bool):
    """Returns (dx, dweight or None, dbias or None) for the forward above (rstd of shape (N, G))."""
    g, m = _groups(x, num_groups)
    view = (x.shape[0], g, m)
    r = rstd.reshape(x.shape[0], g, 1)
    xhat = C.centered(x.reshape(view), (2,))[1] * r
    gy = dy if weight is None else dy * _bcast(weight, x)
    dx = C.centered_backward(gy.reshape(view), xhat, r, (2,)).reshape(x.shape)
    other = (0,) + tuple(range(2, x.ndim))  # everything but the channel axis
    dweight = None if weight is None else C.reduce_to(dy * xhat.reshape(x.shape), other)
    dbias = C.reduce_to(dy, other) if with_bias else None
    return dx, dweight, dbias


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    y, mean, rstd = forward(x, w, b, **config)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {},
                   (x, w, b is not None, rstd, config["num_groups"]))


def _backward(ctx, cot):
    x, w, has_bias, rstd, num_groups = ctx
    dx, dw, db = backward(cot["y"], x, w, rstd, num_groups=num_groups, with_bias=has_bias)
    grads = {"x": dx}
    if w is not None:
        grads["weight"] = dw
    if has_bias:
        grads["bias"] = db
    return Backward(grads)


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(var + eps) * weight_c + bias_c per (sample, group of C/G channels)",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"num_groups": REQUIRED, "eps": 1e-5},
    forward=_forward, backward=_backward,
)
