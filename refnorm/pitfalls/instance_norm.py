"""Pitfall variants of instance_norm (refnorm.norms.instance_norm with one change each).

Shared centred-statistics variants (_centered.common, see layer_norm; not A11's serial sums: no golden
instance_norm case tells them from the reference within the bound), plus C07 (onnxruntime #10079):
the whole forward in the case dtype. Own running-statistics and mode variants:

* E01 (mlx PR #3817): running_var updated with the biased variance.
* E07 (keras-core PR #339): running_var not updated in training.
* E11 (torch #58843): eval with track_running_stats normalizing with the instance statistics.
* R-mom: momentum applied to the old value. R-axes: dweight, dbias averaged over spatial axes.
"""
from __future__ import annotations

import numpy as np

from . import Variant as V
from ._centered import common, stats_in_d
from ._engine import Mods, in_w, to_d, working
from ._rounding import truncate_out

OP = "instance_norm"


def _train_tracking(c, t, i, s, cot):
    return bool(t) and s.get("running_mean") is not None


def rstd_in_d(var, eps, dtype):
    W = working(dtype)
    return to_d(W(1) / np.sqrt(in_w(var, dtype) + W(eps)), dtype).astype(np.float64)


def y_in_d(xhat, w, b, dtype):
    """C07: x_hat, x_hat * w and + b each rounded to d."""
    y = to_d(in_w(xhat, dtype), dtype)
    if w is not None:
        y = to_d(y * in_w(w, dtype), dtype)
    if b is not None:
        y = to_d(y + in_w(b, dtype), dtype)
    return y.astype(np.float64)


VARIANTS = tuple(common(OP, V, skip=("serial_acc",))) + (
    V("all_in_d", ("C07",), "the whole forward in {d} (every intermediate rounded to {d})", OP,
      Mods(stats=stats_in_d, rstd=rstd_in_d, xhat_in_d=True, y=y_in_d), low_precision=True),
    V("running_var_biased", ("E01",), "running_var updated with the biased variance", OP,
      Mods(running_bessel=False), when=_train_tracking),
    V("rv_not_updated", ("E07",), "running_var not updated in training", OP, Mods(rv_frozen=True),
      when=_train_tracking),
    V("in_eval_instance", ("E11",), "eval with running statistics normalizes with the instance statistics", OP,
      Mods(in_eval_instance=True), when=lambda c, t, i, s, cot: not t and s.get("running_mean") is not None,
      bounds_training=("outputs", "grads")),
    V("momentum_flip", ("R-mom",), "momentum applied to the old value", OP, Mods(momentum_flip=True),
      when=_train_tracking),
    V("param_mean_spatial", ("R-axes",), "dweight, dbias averaged (not summed) over the spatial axes", OP,
      Mods(param_mean_spatial=True), when=lambda c, t, i, s, cot: bool(cot) and np.ndim(i["x"]) > 2
      and (i.get("weight") is not None or i.get("bias") is not None)),
    truncate_out(OP),
)
