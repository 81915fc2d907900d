"""float64 -> a narrow float format in ONE correct rounding.

ml_dtypes before 0.7 casts float64 to bfloat16, float8 and float4 through float32, which rounds twice (0.7.0
rounds once; this module does not depend on which is installed): -151.99999999999997
becomes the float32 -152, a float8_e4m3fn midpoint, and then, ties to even, -160 instead of -144. Rounding
the float32 step to ODD (truncate toward zero, then set the last bit when inexact) makes the second rounding
correct for any format of at most 22 significand bits (24 >= p + 2): ``float32_odd(a).astype(fmt)``.
"""
from __future__ import annotations

import numpy as np


def float32_odd(a) -> np.ndarray:
    """float64 values rounded to float32 by round-to-odd (exact values, infinities and NaN unchanged)."""
    a = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = a.astype(np.float32)
        back = f.astype(np.float64)
        inexact = np.isfinite(a) & (back != a)
        too_big = inexact & (np.abs(back) > np.abs(a))
        f = np.where(too_big, np.nextafter(f, np.float32(0)), f)     # truncation toward zero
        bits = f.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))
    return np.asarray(bits).view(np.float32)
