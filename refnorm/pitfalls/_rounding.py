"""The output rounding mode, shared by every op whose results a kernel converts from its working
precision to the case dtype: ``truncate_out(op)`` is that op's Variant (R-trunc: the float32 -> d
conversion rounds toward zero instead of to nearest even).

The variant is the reference with every float array the kernel returns in the case dtype d (outputs,
gradients, running statistics) moved toward zero by half a unit in the last place of d:

    v' = v - sign(v) * ulp_d(v) / 2,        ulp_d(v): the spacing of d at RZ_d(v), the value v truncates to

so that rounding v' to nearest is rounding v toward zero (RZ_d(v) = RN_d(v - sign(v) ulp_d / 2) within one
binade, ties aside). The check judges a returned value by the distance from the variant's value to
the rounding-to-nearest interval of what was returned (compare.py), so a kernel that truncates its
computed value v + e lies within |e| of v': within the same bound E as a correct kernel around v.
Arrays returned in another dtype (norm_quant's q and scale, add_norm's float32 residual_out) are left
as the reference's; norm_quant has no such conversion of its quantized output and no such variant.
Only for float16/bfloat16 cases (float32 cases are computed in float32: no conversion to round).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import registry
from ..spec import Result
from ._engine import NP

def toward_zero_shift(v, dtype):
    """v (float64) mapped onto the value whose rounding to nearest in ``dtype`` is RZ_dtype(v), continuously:
    the truncation cell [t, t + ulp) of |v| (t = RZ(|v|)) linearly onto t's rounding-to-nearest interval
    [t - ulp_below / 2, t + ulp / 2) (inside a binade: |v| - ulp / 2; at a power of two the cell below is
    finer), with the sign of v. The map has slope <= 1, so a kernel's value v + e, truncated, lies within
    |e| of it. A value of the grid (|v| = t) stays: a kernel that computes it exactly returns it, truncated or
    not (the mean of two float16 values; shifting it would bias the comparison by half an ulp). Zeros, NaN
    and infinities unchanged; |v| beyond the largest finite value: that value."""
    v = np.asarray(v, dtype=np.float64)
    dt = NP[dtype]
    with np.errstate(all="ignore"):
        a = np.abs(v)
        fmax = float(ml_dtypes.finfo(dt).max)
        r = np.minimum(a, fmax).astype(dt)                          # to nearest
        t = np.where(r.astype(np.float64) > a, np.nextafter(r, np.zeros((), dt)), r)      # toward zero
        up = np.nextafter(t, np.array(np.inf, dt)).astype(np.float64)
        down = np.nextafter(t, np.array(-np.inf, dt)).astype(np.float64)
        t = t.astype(np.float64)
        lo, hi = t - (t - down) / 2, t + (up - t) / 2
        m = np.where(a >= fmax, fmax, np.where(a == t, a, lo + (a - t) / (up - t) * (hi - lo)))
        return np.where(np.isfinite(v) & (v != 0), np.sign(v) * m, v)


def away_from_zero_shift(v, dtype):
    """v (float64) mapped onto the value whose rounding to nearest in ``dtype`` is v rounded away from zero,
    continuously (toward_zero_shift's mirror): the cell (t, u] of |v| (t = RZ(|v|), u the next value above)
    linearly onto u's rounding-to-nearest interval, with the sign of v; values of the grid stay."""
    v = np.asarray(v, dtype=np.float64)
    dt = NP[dtype]
    with np.errstate(all="ignore"):
        a = np.abs(v)
        fmax = float(ml_dtypes.finfo(dt).max)
        r = np.minimum(a, fmax).astype(dt)
        t = np.where(r.astype(np.float64) > a, np.nextafter(r, np.zeros((), dt)), r)      # toward zero
        u = np.nextafter(t, np.array(np.inf, dt))                                          # away from zero
        uu = np.nextafter(u, np.array(np.inf, dt)).astype(np.float64)
        t, u = t.astype(np.float64), u.astype(np.float64)
        lo, hi = u - (u - t) / 2, u + (uu - u) / 2
        m = np.where(a >= fmax, fmax, np.where(a == t, a, lo + (a - t) / (u - t) * (hi - lo)))
        return np.where(np.isfinite(v) & (v != 0), np.sign(v) * m, v)


def directed_shift(v, dtype, mode):
    """``mode`` "zero" (toward_zero_shift), "down" (toward -inf: toward zero where v > 0, away where v < 0) or
    "up" (toward +inf)."""
    if mode == "zero":
        return toward_zero_shift(v, dtype)
    v = np.asarray(v, dtype=np.float64)
    tz, az = toward_zero_shift(v, dtype), away_from_zero_shift(v, dtype)
    return np.where((v > 0) == (mode == "down"), tz, az)


def _kept(op, config, dtype):
    """(part, name) of the arrays returned in a dtype other than the case dtype (left unshifted)."""
    out = set()
    spec = registry.get(op)
    if spec.output_dtypes is not None:
        out |= {("outputs", k) for k, t in dict(spec.output_dtypes(config, dtype)).items() if t != dtype}
    if op == "add_norm" and bool(config.get("residual_in_fp32", False)):
        out.add(("outputs", "residual_out"))
    return out


def truncate_out(op):
    """The R-trunc Variant of ``op``."""
    from . import Variant

    def fn(inputs, config, cot, dtype, state, training):
        res = registry.evaluate(op, inputs, config=config, grad_outputs=cot or None, state=state or None,
                                training=training)
        kept = _kept(op, config, dtype)

        def shift(part, arrays):
            return {k: (a if (part, k) in kept or np.asarray(a).dtype.kind != "f" else toward_zero_shift(a, dtype))
                    for k, a in arrays.items()}
        return Result(shift("outputs", res.outputs), shift("grads", res.grads), shift("state", res.state))

    return Variant("truncate_out", ("R-trunc",), "results converted to {d} by rounding toward zero (truncation) "
                   "instead of to nearest even", op, fn=fn, low_precision=True)
