"""Pitfall variants of batch_norm (refnorm.norms.batch_norm with one change each).

Shared centred-statistics variants (_centered.common, see layer_norm). Own:

* E01 (mlx PR #3817): running_var updated with the biased batch variance (torch convention).
* E02 (torch #3122): the asymmetry flipped: normalize with the unbiased variance (tracked value kept).
* E03 (tf #55545): Bessel correction applied to the moving variance where the convention (ONNX)
  keeps it biased.
* E05 (torch PR #18764): momentum convention crossed at the torch/ONNX boundary: ONNX momentum
  applied to the new value. R-mom: torch momentum applied to the old value. (One variant: the
  momentum applied to the other term.)
* E07 (keras-core PR #339): running_var not updated in training.
* E10 (torch #586): eval-mode backward with the batch statistics.
* F01 (torch channels_last BatchNorm2d): NHWC buffer, weight/bias indexed with the NCHW formula.
* R-nbt: num_batches_tracked not incremented. R-axes: dweight, dbias averaged over spatial axes.
"""
from __future__ import annotations

import numpy as np

from . import Variant as V
from ._centered import common
from ._engine import Mods
from ._rounding import truncate_out

OP = "batch_norm"


def _train_tracking(c, t, i, s, cot):
    return bool(t) and s.get("running_mean") is not None


def _conv(name):
    return lambda c, t, i, s, cot: _train_tracking(c, t, i, s, cot) and c.get("convention", "torch") == name


VARIANTS = tuple(common(OP, V, skip=("ddof1",))) + (
    V("running_var_biased", ("E01",), "running_var updated with the biased batch variance", OP,
      Mods(running_bessel=False), when=_conv("torch")),
    V("normalize_unbiased", ("E02",), "normalized with the unbiased variance (the biased/unbiased asymmetry "
      "flipped)", OP, Mods(unbiased=True), when=lambda c, t, i, s, cot: bool(t) or s.get("running_mean") is None),
    V("onnx_bessel", ("E03",), "Bessel correction applied to the moving variance (ONNX keeps it biased)", OP,
      Mods(running_bessel=True), when=_conv("onnx")),
    V("momentum_flip", ("E05", "R-mom"), "momentum applied to the other term (torch/ONNX conventions crossed)", OP,
      Mods(momentum_flip=True), when=_train_tracking),
    V("rv_not_updated", ("E07",), "running_var not updated in training", OP, Mods(rv_frozen=True),
      when=_train_tracking),
    V("eval_bwd_batch", ("E10",), "eval-mode backward computed with the batch statistics", OP,
      Mods(eval_bwd_batch=True), when=lambda c, t, i, s, cot: not t and s.get("running_mean") is not None
      and bool(cot), bounds_training=("grads",)),
    V("nhwc_param_index", ("F01",), "NHWC buffer, per-channel weight/bias indexed with NCHW strides", OP,
      Mods(nhwc_params=True), when=lambda c, t, i, s, cot: np.ndim(i["x"]) > 2
      and (i.get("weight") is not None or i.get("bias") is not None)),
    V("nbt_not_incremented", ("R-nbt",), "num_batches_tracked not incremented by a training call", OP,
      Mods(nbt_frozen=True), when=_train_tracking),
    V("param_mean_spatial", ("R-axes",), "dweight, dbias averaged (not summed) over the spatial axes", OP,
      Mods(param_mean_spatial=True), when=lambda c, t, i, s, cot: bool(cot) and np.ndim(i["x"]) > 2
      and (i.get("weight") is not None or i.get("bias") is not None)),
    truncate_out(OP),
)
