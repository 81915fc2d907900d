"""Pitfall variants of rms_norm (refnorm.norms.rms_norm with one change each).

* A10 (triton #9838, other reading): the power-of-two block length as the divisor of mean(x^2).
* B01 (TransformerEngine PR #364): eps outside the sqrt, x / (sqrt(mean x^2) + eps).
* C01, C05 (onnx PR #8439, mlx PR #862): x^2 rounded to the case dtype d before the W sum.
* C03 (onnxruntime PR #29045): the sum of x^2 accumulated in d (squares and partials rounded to d).
* C04 (torch #189581): mean of squares accumulated in d, and rsqrt rounded to d.
* C10 (Liger PR #950): dweight's products reduced in d.
* D01 (Liger #74): Llama x_hat * w where Gemma's x_hat * (1 + w) is asked (weight_offset ignored).
* D02 (Liger #89): Llama cast order: x_hat rounded to d, times (w + offset) rounded to d, rounded.
* D04 (TransformerEngine PR #67): forward with (1 + w), dx with w.
* F13 (torch #183861): dweight: each 64-row tile sums only its first 32 rows.
* H04 (keras #21234): the centred var(x) in place of mean(x^2).
* H10 (transformers #14772, the other direction): rms_norm computed as layer_norm (mean removed).
* R-1pw: (1 + w) rounded to d before the multiply. R-rstd16: rstd rounded to bfloat16.
* R-eps64: eps=None read as float64's machine epsilon (2^-52) where torch's rule (refnorm's) gives the
  compute dtype's, float32's 2^-23 for float32/float16/bfloat16 input (refnorm's own convention before).
"""
from __future__ import annotations

import numpy as np

from ..norms.rms_norm import default_eps
from . import Variant as V
from ._centered import _next_pow2, bwd_in_d, dw_in_d, eps_outside_bounds, rounding_points, rstd_bf16
from ._engine import Mods, in_w, sum_d, sum_w, to_d, working
from ._rounding import truncate_out


def pow2_ms(x, dtype):
    return (x * x).sum(axis=1, keepdims=True) / _next_pow2(x.shape[1])


def sq_in_d(x, dtype):
    W = working(dtype)
    xw = in_w(x, dtype)
    return (sum_w(to_d(xw * xw, dtype), dtype) / W(max(x.shape[1], 1))).astype(np.float64)


def sumsq_in_d(x, dtype):
    W = working(dtype)
    xw = in_w(x, dtype)
    return to_d(sum_d(to_d(xw * xw, dtype), dtype) / W(max(x.shape[1], 1)), dtype).astype(np.float64)


def rstd_in_d(var, eps, dtype):
    W = working(dtype)
    return to_d(W(1) / np.sqrt(in_w(var, dtype) + W(eps)), dtype).astype(np.float64)


def llama_y(xhat, w, b, dtype):
    if w is None:
        return xhat
    return to_d(to_d(in_w(xhat, dtype), dtype) * to_d(in_w(w, dtype), dtype), dtype).astype(np.float64)


def eps_f64(eps, dtype):
    """float64's eps where the engine resolved eps=None to the compute dtype's (``when``: eps=None calls)."""
    return 2.0 ** -52 if eps == default_eps(dtype) else eps


def as_layer_norm(config, dtype):
    """Variant.bounds_as of rms_as_ln: layer_norm's bounds (the mean removed: x - mean cancels on
    mean-shifted rows, which rms_norm's bounds, of x / rms, do not allow for)."""
    eps = config.get("eps")
    cfg = {"normalized_shape": config["normalized_shape"], "eps": default_eps(dtype) if eps is None else float(eps),
           "weight_offset": float(config.get("weight_offset", 0.0) or 0.0)}
    if config.get("eps_placement", "inside") == "outside":
        cfg["eps_placement"] = "outside"
    return "layer_norm", cfg


def _eps_none(c, *a):
    return c.get("eps") is None and c.get("eps_placement", "inside") == "inside"


def _offset(c, t, i, s, cot):
    return float(c.get("weight_offset", 0.0)) != 0.0 and i.get("weight") is not None


def _inside(c, *a):
    return c.get("eps_placement", "inside") == "inside" and (c.get("eps") is None or float(c["eps"]) > 0)


def _rows(c, t, i, s, cot):
    ns = c["normalized_shape"]
    k = 1 if np.ndim(ns) == 0 else len(ns)
    x = np.shape(i["x"])
    return int(np.prod(x[:len(x) - k], dtype=np.int64))


OP = "rms_norm"
VARIANTS = (
    V("pow2_divisor", ("A10",), "the power-of-two block length used as the divisor of mean(x^2)", OP,
      Mods(ms=pow2_ms)),
    V("eps_outside", ("B01",), "eps outside the sqrt: x/(sqrt(mean x^2) + eps)", OP, Mods(placement="outside"),
      when=_inside, bounds_as=eps_outside_bounds),
    V("sq_in_d", ("C01", "C05"), "x^2 computed in {d} before the {W} sum", OP, Mods(ms=sq_in_d), low_precision=True,
      slack=bwd_in_d(Mods(ms=sq_in_d))),
    V("sumsq_in_d", ("C03",), "sum of x^2 accumulated in {d}", OP, Mods(ms=sumsq_in_d), low_precision=True,
      slack=bwd_in_d(Mods(ms=sumsq_in_d))),
    V("ms_rstd_in_d", ("C04",), "mean of squares accumulated and rsqrt taken in {d}", OP,
      Mods(ms=sumsq_in_d, rstd=rstd_in_d), low_precision=True, slack=bwd_in_d(Mods(ms=sumsq_in_d, rstd=rstd_in_d))),
    V("dw_acc_in_d", ("C10",), "dweight's products reduced in {d}", OP, Mods(dweight=dw_in_d),
      when=lambda c, t, i, s, cot: bool(cot) and i.get("weight") is not None, low_precision=True),
    V("no_offset", ("D01",), "(1 + w) missing: x_hat * w where x_hat * (1 + w) is asked", OP,
      Mods(offset="ignored"), when=_offset),
    V("llama_cast", ("D02",), "Llama cast order: x_hat rounded to {d}, times (w + offset) in {d}", OP,
      Mods(y=llama_y), when=lambda c, t, i, s, cot: i.get("weight") is not None, low_precision=True),
    V("dx_no_offset", ("D04",), "forward uses (1 + w), dx uses w", OP, Mods(offset="dx_plain"),
      when=lambda *a: _offset(*a) and bool(a[4])),
    V("dgamma_warp32", ("F13",), "dweight: each 64-row tile sums only its first 32 rows", OP,
      Mods(rows_mask=lambda m, n: (np.arange(m) % 64) < 32),
      when=lambda c, t, i, s, cot: bool(cot) and i.get("weight") is not None and _rows(c, t, i, s, cot) > 32),
    V("rms_centered_var", ("H04",), "the centred var(x) in place of mean(x^2)", OP, Mods(rms_centered=True)),
    V("rms_as_ln", ("H10",), "rms_norm computed as layer_norm (the mean removed)", OP, Mods(centered=True),
      bounds_as=as_layer_norm),
    V("one_plus_in_d", ("R-1pw",), "(1 + w) rounded to {d} before the multiply", OP, Mods(offset="rounded"),
      when=_offset, low_precision=True),
    V("rstd_bf16", ("R-rstd16",), "rstd rounded to bfloat16 before the multiply", OP, Mods(rstd=rstd_bf16)),
    V("eps_none_f64", ("R-eps64",), "eps=None taken as float64's machine epsilon 2^-52, not the {W} compute "
      "dtype's (torch's rule)", OP, Mods(eps=eps_f64), when=_eps_none),
    *rounding_points(OP, V, ("rstd", "xhat")),
    truncate_out(OP),
)
