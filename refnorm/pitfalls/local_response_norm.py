"""Pitfall variants of local_response_norm (refnorm.norms.local_response_norm with one change each).

* H02 (torch #75722): the even-size window of the other convention (torch pads size//2 before,
  ONNX floor((size-1)/2)): the window shifted by one channel.
* H03 (tensorflow-onnx PR #602): alpha versus alpha/size: alpha used as if already divided by size
  (the sum multiplied by alpha, not alpha/size), and the reverse (alpha divided by size twice).
* C05's mechanism (there: MLX RMSNorm; docs/pitfalls.md C05, "x^2 computed in the input dtype") in LRN's
  window sum: x*x rounded to the case dtype d before the sum, so |x| >= 256 overflows in float16 and
  y = x / inf^beta = 0. torch's CPU float16 F.local_response_norm does this
  (known_failures/torch-cpu.txt). The scale output, a statistic, is not compared by this variant.
"""
from __future__ import annotations

import numpy as np

from .. import registry
from ..norms import local_response_norm as L
from ..spec import Result
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "local_response_norm"
DEFAULTS = {"alpha": 1e-4, "beta": 0.75, "k": 1.0, "window": "torch"}


def _with(change):
    """A variant computed by the reference with its config changed: ``change(config) -> config``."""
    def fn(inputs, config, cot, dtype, state, training):
        return registry.evaluate(OP, inputs, config=change({**DEFAULTS, **config}), grad_outputs=cot or None)
    return fn


def _sq_in_d(inputs, config, cot, dtype, state, training):
    cfg = {**DEFAULTS, **config}
    x = np.asarray(inputs["x"], dtype=np.float64)
    size, alpha, beta, k = int(cfg["size"]), float(cfg["alpha"]), float(cfg["beta"]), float(cfg["k"])
    lo, hi = L.reach(size, cfg["window"])
    with np.errstate(all="ignore"):
        sq = to_d(in_w(x, dtype) * in_w(x, dtype), dtype).astype(np.float64)
        scale = k + (alpha / size) * L.window_sum(sq, lo, hi)
        y = x * scale ** -beta
        grads = {}
        if cot.get("y") is not None:
            grads["x"] = L.backward(np.asarray(cot["y"], dtype=np.float64), x, scale, size=size, alpha=alpha,
                                    beta=beta, k=k, window=cfg["window"])
    return Result({"y": y}, grads, {})


def _flip(cfg):
    return {**cfg, "window": "onnx" if cfg["window"] == "torch" else "torch"}


VARIANTS = (
    V("lrn_window_shift", ("H02",), "even-size window of the other convention (shifted by one channel)", OP,
      fn=_with(_flip), when=lambda c, *a: int(c["size"]) % 2 == 0),
    V("lrn_alpha_not_divided", ("H03",), "alpha used where alpha/size belongs", OP,
      fn=_with(lambda c: {**c, "alpha": float(c["alpha"]) * int(c["size"])}),
      when=lambda c, *a: int(c["size"]) > 1 and float(c.get("alpha", 1e-4)) > 0),
    V("lrn_alpha_divided_twice", ("H03",), "alpha divided by size twice (alpha/size used as alpha)", OP,
      fn=_with(lambda c: {**c, "alpha": float(c["alpha"]) / int(c["size"])}),
      when=lambda c, *a: int(c["size"]) > 1 and float(c.get("alpha", 1e-4)) > 0),
    V("lrn_sq_in_d", ("C05",), "x^2 computed in {d} before the window sum", OP, fn=_sq_in_d, low_precision=True),
    truncate_out(OP),
)
