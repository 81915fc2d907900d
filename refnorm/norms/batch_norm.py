"""BatchNorm (Ioffe & Szegedy 2015, arXiv:1502.03167), as torch.nn.functional.batch_norm.

    y = (x - mean_c) * rstd_c * weight_c + bias_c,     rstd_c = (var_c + eps) ** -1/2

Input x is (N, C, *). Statistics are per channel c over A = the batch axis and every spatial axis,
n = N * prod(spatial) values; the variance used to normalize is the biased one (ddof=0); eps sits
inside the sqrt. ``weight`` and ``bias`` have shape (C,) and are each optional.

Modes (torch's rules, ``training`` is refnorm.evaluate's flag):
* training, or no running statistics given: normalize with the batch statistics (torch's
  ``track_running_stats=False`` uses batch statistics in eval mode too). n == 1 is an error, as in
  torch ("Expected more than 1 value per channel when training").
* training with running statistics: they are also updated (state ``running_mean``,
  ``running_var``, ``num_batches_tracked``); ``num_batches_tracked`` is incremented on every training
  call, as torch's module does.
* eval with running statistics: normalize with them; the map is affine in x.

Running-statistics update (``convention``):
* "torch" (default): momentum m (default 0.1) weights the NEW value,
      running = (1 - m) * running + m * batch,
  and running_var stores the UNBIASED batch variance var * n / (n - 1). ``momentum=None`` uses
  m = 1 / num_batches_tracked (after the increment): the cumulative average.
* "onnx": momentum m (default 0.9, ONNX's) weights the OLD value,
      running = m * running + (1 - m) * batch,
  and running_var stores the BIASED batch variance (ONNX BatchNormalization-15, training_mode=1).
  ``momentum=None`` is an error. The two conventions map by m_torch = 1 - m_onnx.
An empty batch (n == 0) leaves running_mean and running_var unchanged (num_batches_tracked still
counts the call), and gives mean 0, rstd NaN, as torch.

Outputs: ``y``, and ``mean`` and ``rstd`` of shape (C,): the statistics used to normalize (the batch
statistics, or the running ones in eval mode; torch's save_mean and save_invstd in training).

Backward (derivations/batch_norm.md), g = dy * weight, xhat = (x - mean) * rstd:
* batch statistics: dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))   (through the statistics)
* running statistics: dx = g * rstd                                          (statistics are constants)
* dweight = sum_A(dy * xhat), dbias = sum_A(dy). The running-statistics update is not differentiated.
NaN/Inf in one channel reach only that channel's outputs, gradients and running statistics.
With batch statistics x is processed in blocks of channels, in threads (_common.Grouped: the
same operations per channel as centered_moments / centered_backward, so the same bits).
"""
from __future__ import annotations

import numpy as np

from ..errors import RefnormError, ShapeError
from ..spec import DEFAULT, NormSpec
from . import _common as C
from . import _pool

NAME = "batch_norm"
STATE = ("running_mean", "running_var", "num_batches_tracked")
DEFAULT_MOMENTUM = {"torch": 0.1, "onnx": 0.9}


def _axes(x):
    return (0,) + tuple(range(2, x.ndim))


def _bcast(p, x):
    """A per-channel (C,) array shaped to broadcast against x (N, C, *)."""
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def update_running_stats(running_mean, running_var, num_batches_tracked, mean, var, n, *,
                         momentum, convention):
    """The new (running_mean, running_var, num_batches_tracked) after one training batch.

    ``mean`` and ``var`` are the batch's per-channel mean and BIASED variance over n values.
    """
    nbt = np.asarray(np.asarray(num_batches_tracked, dtype=np.int64) + 1)
    if n == 0:
        return running_mean.copy(), running_var.copy(), nbt
    if convention == "torch":
        m = 1.0 / float(nbt) if momentum is None else momentum
        unbiased = var * (n / (n - 1))
        return (1 - m) * running_mean + m * mean, (1 - m) * running_var + m * unbiased, nbt
    return momentum * running_mean + (1 - momentum) * mean, momentum * running_var + (1 - momentum) * var, nbt


def resolve_options(cfg: dict) -> dict:
    """``cfg`` with momentum=DEFAULT replaced by the convention's default (0.1 torch, 0.9 onnx); an
    unknown convention is left for ``check`` to refuse."""
    if cfg.get("momentum") is DEFAULT and cfg.get("convention") in DEFAULT_MOMENTUM:
        return {**cfg, "momentum": DEFAULT_MOMENTUM[cfg["convention"]]}
    return cfg


def check(x, weight, bias, running_mean, running_var, num_batches_tracked, momentum, eps, convention,
          training, state=None):
    """The argument checks (shared with the specification, refnorm/specs/batch_norm.py): (momentum, eps,
    convention), momentum DEFAULT resolved. ``state``: evaluate()'s state dict, checked first.
    """
    if state is not None:
        C.check_state_pair(NAME, state)
    convention = C.check_choice(NAME, "convention", convention, DEFAULT_MOMENTUM)
    if momentum is DEFAULT:
        momentum = DEFAULT_MOMENTUM[convention]
    elif momentum is None and convention == "onnx":
        raise RefnormError(f"{NAME}: momentum=None (cumulative average) exists only with convention='torch'")
    momentum = C.check_real(NAME, "momentum", momentum, allow_none=True)
    eps = C.check_eps(NAME, eps)
    C.check_channels(NAME, x, weight, bias, running_mean, running_var, num_batches_tracked)
    if (training or running_mean is None) and C.count(x, _axes(x)) == 1:
        raise ShapeError(f"{NAME}: expected more than 1 value per channel when training, got input of "
                         f"shape {x.shape}")
    return momentum, eps, convention


def forward(x, weight=None, bias=None, running_mean=None, running_var=None, num_batches_tracked=0, *,
            training=True, momentum=DEFAULT, eps=1e-5, convention="torch", _centre=None):
    """Returns (y, mean, rstd, new_state, used_batch_stats). See the module docstring.

    ``_centre``: a list that receives the per-channel (m0, c) of the batch statistics, for
    ``backward`` to recompute the deviations bit for bit.
    """
    momentum, eps, convention = check(x, weight, bias, running_mean, running_var, num_batches_tracked,
                                      momentum, eps, convention, training)
    nc = x.shape[1]
    tracking = running_mean is not None
    axes = _axes(x)
    n = C.count(x, axes)
    use_batch = training or not tracking
    state = {}
    centre = None
    if use_batch:
        if x.size:
            y = _pool.empty(x.shape)
            m0, c, var, _ = _layout(x).forward(x, y, _param(weight), _param(bias), eps)
            mean, var, centre = (m0 + c).reshape(nc), var.reshape(nc), (m0, c)
        else:
            mean, var, d = C.centered_moments(x, axes)
            mean, var = mean.reshape(nc), var.reshape(nc)
        if training and tracking:
            rm, rv, nbt = update_running_stats(running_mean, running_var, num_batches_tracked, mean, var, n,
                                               momentum=momentum, convention=convention)
            state = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt}
    else:
        mean, var = running_mean.copy(), running_var
        d = x - _bcast(mean, x)
    if tracking and not state:
        state = {"running_mean": running_mean.copy(), "running_var": running_var.copy(),
                 "num_batches_tracked": np.asarray(num_batches_tracked, dtype=np.int64).copy()}
    rstd = 1.0 / np.sqrt(var + eps)
    if centre is None:
        y = C.channel_affine(d, rstd, weight, bias, lambda p: _bcast(p, x))
    if _centre is not None and centre is not None:
        _centre[:] = centre
    return y, mean, rstd, state, use_batch


def _layout(x) -> C.Grouped:
    """x (N, C, *) as (N, C, prod(*)), one statistic per channel (the row axis is 1), blocks of channels.

    One channel: (1, 1, N * prod(*)), one row, as NumPy sums a whole (N, 1, *) array in one run.
    """
    nb, nc = x.shape[:2]
    if nc == 1:
        return C.Grouped((1, 1, x.size), row_axis=0)
    return C.Grouped((nb, nc, x.size // (nb * nc)), row_axis=1)


def _param(p):
    return None if p is None else p.reshape((1, -1, 1) if p.size > 1 else (1, 1, 1))


def backward(dy, x, weight, mean, rstd, *, used_batch_stats: bool, with_bias: bool, centre=None):
    """Returns (dx, dweight or None, dbias or None). See the module docstring for the formulas.

    ``centre``: the forward's per-channel (m0, c) (``forward(..., _centre=list)``); recomputed when None.
    """
    axes = _axes(x)
    if used_batch_stats and x.size:
        lay = _layout(x)
        m0, c = lay.centre(x) if centre is None else centre
        dx = _pool.empty(x.shape)
        sxy, sy = lay.backward(x, dy, dx, _param(weight), m0, c, rstd.reshape(lay.stat().shape),
                               want_dw=weight is not None, want_db=with_bias)
        # per (n, c) sums over the spatial axes, then over n: the order of sum(axis=(0, 2, ...))
        dweight = None if weight is None else sxy.sum(axis=0).reshape(-1)
        dbias = sy.sum(axis=0).reshape(-1) if with_bias else None
        return dx, dweight, dbias
    return C.channel_backward(dy, x, weight, mean, rstd, with_bias, used_batch_stats, axes, axes, lambda p: _bcast(p, x))


def row_kernel(inputs, config) -> C.RowKernel | None:
    """The compiled row kernels as ``forward`` and ``backward`` run them on the batch statistics of this call
    (_common.RowKernel: a channel's N runs of the spatial values, a weight and bias per channel, the merged
    per-(n, channel) sums), or None where they would not run them so (no compiled module, one channel)."""
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    opts = {k: config.get(k, v) for k, v in SPEC.options.items()}
    _, eps, _ = check(x, w, b, None, None, 0, opts["momentum"], opts["eps"], opts["convention"], True)
    nb, nc = x.shape[:2]
    if C.native() is None or nc == 1 or x.size // nc < 2:
        return None
    return C.RowKernel(nb, True, C.flat(w), C.flat(b), eps, 1, lambda sums, units: C.sum_over_batch(sums, nb, units))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c over (N, *) per channel c",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"momentum": DEFAULT, "eps": 1e-5, "convention": "torch"},
    forward=C.running_forward(NAME, forward, "used_batch_stats"), backward=C.affine_backward(backward),
    state=STATE, integer_state=("num_batches_tracked",), resolve=resolve_options,
)
