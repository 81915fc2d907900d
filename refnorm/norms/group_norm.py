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
x is processed in blocks of (sample, group) rows, in threads (_common.Grouped: the same operations
per slice as centered_moments / centered_backward on the (N, G, m) view, so the same bits).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..spec import REQUIRED, Forward, NormSpec
from . import _common as C
from . import _pool

NAME = "group_norm"


def _groups(x: np.ndarray, num_groups, name: str = NAME) -> tuple[int, int]:
    """(G, m): the validated number of groups and the number of values in one (n, group) slice
    (``name``: the op named in the errors; group_norm_silu shares these checks)."""
    C.check_ndim(name, x, 2, "(N, C, *)")
    g = C.check_int(name, "num_groups", num_groups, minimum=1)
    nc = x.shape[1]
    if nc % g:
        raise ConfigError(f"{name}: num_groups={g} does not divide the number of channels C={nc} "
                          f"(input shape {x.shape}); expected a divisor of {nc}")
    return g, (nc // g) * int(np.prod(x.shape[2:], dtype=np.int64))


def check(x, weight, bias, num_groups, eps, name: str = NAME):
    """The argument checks (shared with the specification, refnorm/specs/group_norm.py, and with
    group_norm_silu, whose errors say ``name``): (G, m, eps)."""
    g, m = _groups(x, num_groups, name)
    eps = C.check_eps(name, eps)
    C.check_param(name, "weight", weight, (x.shape[1],))
    C.check_param(name, "bias", bias, (x.shape[1],))
    return g, m, eps


def _bcast(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A per-channel (C,) array shaped to broadcast against x (N, C, *)."""
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def _layout(x: np.ndarray, g: int) -> C.Grouped:
    """x (N, C, *) as (N * G, C/G, prod(*)): one row per (sample, group)."""
    nb, nc = x.shape[:2]
    # one channel: the weight/bias gradients are whole-array sums, which NumPy takes in one run
    return C.Grouped((nb * g, nc // g, x.size // (nb * nc)), row_axis=0, one_block=nc == 1, param_period=g)


def _per_group(p: np.ndarray | None, nb: int, g: int) -> np.ndarray | None:
    """A (C,) parameter as (N * G, C/G, 1): the channels of each (sample, group) row."""
    return None if p is None else np.broadcast_to(p.reshape(1, g, -1), (nb, g, p.size // g)).reshape(nb * g, -1, 1)


def forward(x, weight=None, bias=None, *, num_groups, eps=1e-5, _centre=None):
    """Returns (y, mean, rstd), mean and rstd of shape (N, G). See the module docstring.

    ``_centre``: a list that receives the per-(n, group) (m0, c), for ``backward``.
    """
    g, m, eps = check(x, weight, bias, num_groups, eps)
    nb = x.shape[0]
    if x.size == 0:
        v = x.reshape(nb, g, m)
        mean, var, d = C.centered_moments(v, (2,))
        rstd = 1.0 / np.sqrt(var + eps)
        return np.zeros(x.shape), mean.reshape(nb, g), rstd.reshape(nb, g)
    y = _pool.empty(x.shape)
    m0, c, var, rstd = _layout(x, g).forward(x, y, _per_group(weight, nb, g), _per_group(bias, nb, g), eps)
    if _centre is not None:
        _centre[:] = [m0, c]
    return y, (m0 + c).reshape(nb, g), rstd.reshape(nb, g)


def backward(dy, x, weight, rstd, *, num_groups: int, with_bias: bool, centre=None):
    """Returns (dx, dweight or None, dbias or None) for the forward above (rstd of shape (N, G)).

    ``centre``: the forward's (m0, c) (``forward(..., _centre=list)``); recomputed when None.
    """
    g, m = _groups(x, num_groups)
    nb, nc = x.shape[:2]
    if x.size == 0:
        return (np.zeros(x.shape), None if weight is None else np.zeros(nc),
                np.zeros(nc) if with_bias else None)
    lay = _layout(x, g)
    m0, c = lay.centre(x) if centre is None else centre
    dx = _pool.empty(x.shape)
    sxy, sy = lay.backward(x, dy, dx, _per_group(weight, nb, g), m0, c, rstd.reshape(-1, 1, 1),
                           want_dw=weight is not None, want_db=with_bias)
    fold = (lambda p: p.reshape(1)) if lay.one_block else (lambda p: C.sum_over_batch(p, nb, nc))
    dweight = None if weight is None else fold(sxy)
    dbias = fold(sy) if with_bias else None
    return dx, dweight, dbias


def row_kernel(inputs, config) -> C.RowKernel | None:
    """The compiled row kernels as ``forward`` and ``backward`` run them for this call (_common.RowKernel:
    rows of (sample, group), C/G segments of the spatial values each, a weight and bias per segment, the
    merged per-segment sums), or None where they would not run them so (no compiled module, one channel, a
    weight with segments that are not nodes of the row's pairwise tree: Grouped.backward)."""
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    g, m, eps = check(x, w, b, config["num_groups"], config.get("eps", SPEC.options["eps"]))
    nc = x.shape[1]
    fused = C.native()
    if fused is None or nc == 1 or m < 2:
        return None
    p, q = nc // g, m // (nc // g)
    if p > 1 and not fused.segments_aligned(p * q, q):
        return None
    return C.RowKernel(p, True, C.flat(w), C.flat(b), eps, g, lambda sums, units: C.sum_over_batch(sums, units, nc))


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    centre = []
    y, mean, rstd = forward(x, w, b, **config, _centre=centre)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {},
                   C.affine_ctx(x, w, b, rstd, num_groups=config["num_groups"], centre=centre or None))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(var + eps) * weight_c + bias_c per (sample, group of C/G channels)",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"num_groups": REQUIRED, "eps": 1e-5},
    forward=_forward, backward=C.affine_backward(backward),
)
