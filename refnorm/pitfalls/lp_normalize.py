"""Pitfall variants of lp_normalize (refnorm.norms.lp_normalize with one change).

* C02's mechanism (there: onnxruntime DirectML LayerNormalization, "the variance kept in fp16"): the
  norm, computed in W, stored in the case dtype d before the division, so ||x|| > 65504 overflows in
  float16 and y = x / inf = 0. torch's CPU float16 F.normalize does this
  (known_failures/torch-cpu.txt). The norm output, a statistic, is not compared by this variant.
"""
from __future__ import annotations

import numpy as np

from ..norms import lp_normalize as LP
from ..spec import Result
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "lp_normalize"
DEFAULTS = {"p": 2.0, "dim": 1, "eps": LP.DEFAULT_EPS, "zero_rule": "torch"}


def _norm_in_d(inputs, config, cot, dtype, state, training):
    cfg = {**DEFAULTS, **config}
    x = np.asarray(inputs["x"], dtype=np.float64)
    axes = LP._axes(cfg["dim"], x.ndim)
    with np.errstate(all="ignore"):
        norm = to_d(in_w(LP.lp_norm(x, float(cfg["p"]), axes), dtype), dtype).astype(np.float64)
        used = np.maximum(norm, float(cfg["eps"])) if cfg["zero_rule"] == "torch" else norm
        y = np.where(used == 0, 0.0, x / np.where(used == 0, 1.0, used))
        grads = {}
        if cot.get("y") is not None:
            grads["x"] = LP.backward(np.asarray(cot["y"], dtype=np.float64), x, norm, **cfg)
    return Result({"y": y}, grads, {})


VARIANTS = (
    V("lp_norm_in_d", ("C02",), "the norm stored in {d} before the division", OP, fn=_norm_in_d, low_precision=True),
    truncate_out(OP),
)
