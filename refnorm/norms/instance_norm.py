"""InstanceNorm (Ulyanov, Vedaldi & Lempitsky 2016, arXiv:1607.08022), as torch.nn.functional.instance_norm.

    y = (x - mean_nc) * rstd_nc * weight_c + bias_c,     rstd_nc = (var_nc + eps) ** -1/2

Input x is (N, C, *). Statistics are per (sample n, channel c) over the spatial axes A = 2.., S =
prod(*) values; biased variance (ddof=0); eps inside the sqrt. ``weight`` and ``bias`` have shape
(C,) and are each optional. Options (torch's names and defaults): ``eps`` = 1e-5, ``momentum`` = 0.1.
Outputs ``y``, and ``mean`` and ``rstd`` of shape (N, C): the statistics used to normalize (in eval
mode with running statistics, those broadcast over n).

Modes (torch's ``use_input_stats = training or not track_running_stats``):
* training, or no running statistics given: normalize with the instance statistics. S == 1 (which
  includes an (N, C) input, no spatial axes) is an error, as torch's "Expected more than 1 spatial
  element when training".
* training with running statistics (state ``running_mean``, ``running_var`` of shape (C,)): they are
  updated the way torch does it (it reshapes x to (1, N*C, *), runs batch_norm with the running
  statistics repeated N times, then averages the N updated copies):
      running_mean = mean_n((1 - m) * running_mean + m * mean_nc)
      running_var  = mean_n((1 - m) * running_var  + m * var_nc * S / (S - 1))   (UNBIASED var)
  S == 0 leaves them unchanged (batch_norm's empty-batch rule); N == 0 makes them NaN (torch's mean
  over zero instances).
* eval with running statistics: normalize every instance with the per-channel running statistics;
  the map is affine in x and any input with >= 2 dimensions is accepted (torch too, (N, C) included).

``momentum`` is any finite number; ``momentum=None`` means 0 (running statistics never change),
because that is what torch.nn.InstanceNorm*d(momentum=None) passes to F.instance_norm
(``self.momentum if self.momentum is not None else 0.0``). It is NOT BatchNorm's cumulative average:
torch's InstanceNorm never reads or increments ``num_batches_tracked`` (verified on torch 2.13), so
refnorm accepts it in the state and returns it unchanged.

Backward (derivations/group_norm.md, the case G = C), g = dy * weight, xhat = (x - mean) * rstd:
* instance statistics: dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))
* running statistics:  dx = g * rstd                      (the statistics are constants)
* dweight = sum over n and A of dy * xhat, dbias = sum over n and A of dy.
The running-statistics update is not differentiated (torch: they are buffers).
NaN/Inf in one (n, c) slice reach only that slice's y, mean, rstd and dx, channel c's dweight and
dbias, and channel c's running statistics. An empty slice (S == 0) gives mean 0 and rstd NaN, as torch.
With instance statistics x is processed in blocks of (sample, channel) rows, in threads
(_common.Grouped: the same operations per slice as centered_moments / centered_backward, so the
same bits).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..spec import NormSpec
from . import _common as C
from . import _pool

NAME = "instance_norm"
STATE = ("running_mean", "running_var", "num_batches_tracked")


def _bcast(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A (C,) or an (N, C) array shaped to broadcast against x (N, C, *)."""
    lead = (1, -1) if p.ndim == 1 else p.shape
    return p.reshape(lead + (1,) * (x.ndim - 2))


def update_running_stats(running_mean, running_var, mean, var, s: int, *, momentum: float):
    """The new (running_mean, running_var) after one training call; mean, var: (N, C), biased over s."""
    nb, nc = mean.shape
    if nb == 0:
        return np.full(nc, np.nan), np.full(nc, np.nan)
    if s == 0:
        return running_mean.copy(), running_var.copy()
    rm = (1 - momentum) * running_mean + momentum * mean
    rv = (1 - momentum) * running_var + momentum * (var * (s / (s - 1)))
    return rm.mean(axis=0), rv.mean(axis=0)


def check(x, weight, bias, running_mean, running_var, num_batches_tracked, momentum, eps, training,
          state=None):
    """The argument checks (shared with the specification, refnorm/specs/instance_norm.py): (momentum, eps),
    momentum None -> 0. ``state``: evaluate()'s state dict, checked first (both running statistics or neither).
    """
    if state is not None:
        C.check_state_pair(NAME, state)
    momentum = C.check_real(NAME, "momentum", momentum, allow_none=True)
    momentum = 0.0 if momentum is None else momentum
    eps = C.check_eps(NAME, eps)
    C.check_channels(NAME, x, weight, bias, running_mean, running_var, num_batches_tracked)
    if (training or running_mean is None) and C.count(x, tuple(range(2, x.ndim))) == 1:
        raise ShapeError(f"{NAME}: expected more than 1 spatial element per instance when normalizing "
                         f"with instance statistics (training, or no running statistics), got input of "
                         f"shape {x.shape}")
    return momentum, eps


def forward(x, weight=None, bias=None, running_mean=None, running_var=None, num_batches_tracked=0, *,
            training=True, momentum=0.1, eps=1e-5, _centre=None):
    """Returns (y, mean, rstd, new_state, used_instance_stats). See the module docstring.

    ``_centre``: a list that receives the per-instance (m0, c) of the instance statistics, for
    ``backward`` to recompute the deviations bit for bit.
    """
    momentum, eps = check(x, weight, bias, running_mean, running_var, num_batches_tracked, momentum, eps,
                          training)
    nb, nc = x.shape[:2]
    tracking = running_mean is not None
    axes = tuple(range(2, x.ndim))
    s = C.count(x, axes)
    use_input = training or not tracking
    centre = None
    if use_input:
        if x.size:
            y, m0, c, var = _instance_forward(x, weight, bias, eps)
            mean, var, centre = (m0 + c).reshape(nb, nc), var.reshape(nb, nc), (m0, c)
        else:
            mean, var, d = C.centered_moments(x, axes)
            mean, var = mean.reshape(nb, nc), var.reshape(nb, nc)
    else:
        mean = np.broadcast_to(running_mean, (nb, nc)).copy()
        var = np.broadcast_to(running_var, (nb, nc))
        d = x - _bcast(running_mean, x)
    state = {}
    if tracking:
        rm, rv = running_mean.copy(), running_var.copy()
        if training:
            rm, rv = update_running_stats(running_mean, running_var, mean, var, s, momentum=momentum)
        state = {"running_mean": rm, "running_var": rv,
                 "num_batches_tracked": np.asarray(num_batches_tracked, dtype=np.int64).copy()}
    rstd = 1.0 / np.sqrt(var + eps)
    if centre is None:
        y = C.channel_affine(d, rstd, weight, bias, lambda p: _bcast(p, x))
    if _centre is not None and centre is not None:
        _centre[:] = centre
    return y, mean, rstd, state, use_input


def _layout(x: np.ndarray) -> C.Grouped:
    """x (N, C, *) as N * C rows of S values, one row per instance."""
    nb, nc = x.shape[:2]
    # one channel: the weight/bias gradients are whole-array sums, which NumPy takes in one run
    return C.Grouped((nb * nc, 1, x.size // (nb * nc)), row_axis=0, one_block=nc == 1)


def _per_row(p, nb):
    """A (C,) parameter as (N * C, 1, 1): one value per instance row."""
    return None if p is None else np.broadcast_to(p, (nb, p.size)).reshape(-1, 1, 1)


def _instance_forward(x, weight, bias, eps):
    """y and the per-instance (m0, c, var), each (N*C, 1, 1), for a non-empty x (blocked)."""
    y = _pool.empty(x.shape)
    nb = x.shape[0]
    m0, c, var, _ = _layout(x).forward(x, y, _per_row(weight, nb), _per_row(bias, nb), eps)
    return y, m0, c, var


def backward(dy, x, weight, mean, rstd, *, used_instance_stats: bool, with_bias: bool, centre=None):
    """Returns (dx, dweight or None, dbias or None); mean and rstd of shape (N, C).

    ``centre``: the forward's (m0, c) (``forward(..., _centre=list)``); recomputed when None.
    """
    axes = tuple(range(2, x.ndim))
    other = (0,) + axes
    if used_instance_stats and x.size:
        nb, nc = x.shape[:2]
        lay = _layout(x)
        m0, c = lay.centre(x) if centre is None else centre
        dx = _pool.empty(x.shape)
        sxy, sy = lay.backward(x, dy, dx, _per_row(weight, nb), m0, c, rstd.reshape(-1, 1, 1),
                               want_dw=weight is not None, want_db=with_bias)
        # per-instance sums over the spatial axes, then over n: the order of sum(axis=(0, 2, ...))
        fold = (lambda p: p.reshape(1)) if lay.one_block else (lambda p: p.reshape(nb, nc).sum(axis=0))
        dweight = None if weight is None else fold(sxy)
        dbias = fold(sy) if with_bias else None
        return dx, dweight, dbias
    return C.channel_backward(dy, x, weight, mean, rstd, with_bias, used_instance_stats, axes, other, lambda p: _bcast(p, x))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean_nc) / sqrt(var_nc + eps) * weight_c + bias_c over the spatial axes per (n, c)",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"momentum": 0.1, "eps": 1e-5},
    forward=C.running_forward(NAME, forward, "used_instance_stats"), backward=C.affine_backward(backward),
    state=STATE, integer_state=("num_batches_tracked",),
)
