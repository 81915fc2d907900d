"""Pitfall variants of norm_quant (refnorm.norms.norm_quant with one change each; forward only).

* R-qround: the dynamic scale from the output rounded to the case dtype d (amax of round_d(y), and y
  quantized from round_d(y)) instead of the float32 output (an unfused norm, then a quant kernel).
* R-qnan: float8 e4m3fn overflow without saturation: a value beyond the largest finite one rounds to NaN
  (e4m3fn has no infinity) where it must saturate to +-448.
* R-qub: scale_ub ignored: the dynamic scale amax / qmax, never capped.
* R-qrcp16: the reciprocal of the scale rounded to float16 before the multiply (1 / scale overflows
  float16 to inf for scales below 2^-16: tiny rows, whose floor scale is 1 / (448 * 512)).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..norms import norm_quant as NQ
from ..spec import Result
from . import Variant as V
from ._engine import NP


def _parts(inputs, config):
    """(y float64, axes, static scale or None, quant dtype, scale_ub, min_scale) of one call."""
    cfg = {**NQ.SPEC.options, **config}
    x, s = inputs["x"], inputs.get("static_scale")
    shape, eps, floor = NQ.check(x, inputs.get("weight"), inputs.get("bias"), s, cfg["normalized_shape"],
                                 cfg["norm"], cfg["eps"], cfg["quant_dtype"], cfg["scale_ub"], cfg["min_scale"])
    if cfg["norm"] == "layer_norm":
        y = NQ._ln.forward(x, inputs.get("weight"), inputs.get("bias"), normalized_shape=shape, eps=eps)[0]
    else:
        y = NQ._rms.forward(x, inputs.get("weight"), normalized_shape=shape, eps=eps)[0]
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    ub = None if cfg["scale_ub"] is None else float(cfg["scale_ub"])
    return y, axes, s, cfg["quant_dtype"], ub, floor


def _result(q, scale, amax):
    return Result({"q": q, "scale": scale, "amax": amax})


def scale_from_rounded(inputs, config, cot, dtype, state, training):
    y, axes, s, qd, ub, floor = _parts(inputs, config)
    yd = y.astype(np.float32).astype(NP[dtype]).astype(np.float64)          # y rounded to d
    return _result(*NQ.quantized(yd, axes, s, qd, ub, floor))             # amax of the rounded output too


def e4m3_nan(inputs, config, cot, dtype, state, training):
    y, axes, s, qd, ub, floor = _parts(inputs, config)
    q, scale, amax = NQ.quantized(y, axes, s, qd, ub, floor)
    v = NQ.divide(y, scale)                                                 # not saturated
    nan = np.isnan(v.astype(ml_dtypes.float8_e4m3fn).astype(np.float64))   # the cast's overflow
    return _result(np.where(nan, np.nan, q), scale, amax)


def ub_ignored(inputs, config, cot, dtype, state, training):
    y, axes, s, qd, ub, floor = _parts(inputs, config)
    return _result(*NQ.quantized(y, axes, s, qd, None, floor))


def reciprocal_f16(inputs, config, cot, dtype, state, training):
    y, axes, s, qd, ub, floor = _parts(inputs, config)
    _, scale, amax = NQ.quantized(y, axes, s, qd, ub, floor)
    with np.errstate(over="ignore", divide="ignore"):
        r = (1.0 / scale).astype(np.float16).astype(np.float64)             # 1/scale in float16
    dt, lo, hi = NQ.QUANT_DTYPES[qd]
    with np.errstate(invalid="ignore"):
        q = y * r
        if dt.kind == "i":                       # 0 * inf = NaN: an integer conversion gives 0 (cvt.rni.sat)
            q = np.where(np.isnan(q), 0.0, q)
        q = np.clip(q, lo, hi)                   # float8: NaN stays NaN
    return _result(q, scale, amax)


def _dynamic(c, t, i, s, cot):
    return i.get("static_scale") is None


OP = "norm_quant"
VARIANTS = (
    V("scale_from_rounded", ("R-qround",), "the dynamic scale from the output rounded to {d}, not the {W} one", OP,
      fn=scale_from_rounded, when=_dynamic, low_precision=True),
    V("e4m3_overflow_nan", ("R-qnan",), "float8 e4m3fn overflow gives NaN instead of saturating to +-448", OP,
      fn=e4m3_nan, when=lambda c, t, i, s, cot: c.get("quant_dtype", "float8_e4m3fn") == "float8_e4m3fn"
      and (i.get("static_scale") is not None or c.get("scale_ub") is not None)),
    V("scale_ub_ignored", ("R-qub",), "the upper bound scale_ub ignored (the scale amax / qmax uncapped)", OP,
      fn=ub_ignored, when=lambda c, t, i, s, cot: _dynamic(c, t, i, s, cot) and c.get("scale_ub") is not None),
    V("reciprocal_f16", ("R-qrcp16",), "the reciprocal of the scale rounded to float16 before the multiply", OP,
      fn=reciprocal_f16),
)
