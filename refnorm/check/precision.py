"""Floating-point facts the checker needs: unit roundoffs, gamma(n), and the rounding-interval test.

The pass test (docs/tolerances.md, section 1). A backend returns ``got`` in its output dtype d; the
reference ``ref`` is float64 computed from the very same (d-representable) inputs; ``E`` >= 0 is the
derived bound on the error a correct implementation may commit before its final rounding. Then

    [lo, hi] = the reals that round to ``got`` in d (round to nearest, ties to even)
    excess   = max(0, lo - ref, ref - hi)                  pass  <=>  excess <= E

which equals ``|got - ref| <= ulp_d(got)/2 + E`` away from binade edges, and handles binade edges,
the largest finite value and overflow to +-inf exactly. NaN passes only where the reference is NaN.
The reported figure is ``excess / E`` (< 1 passes; 0/0 = 0, x/0 = inf).

float64 outputs: the half-ulp interval is not representable in float64, so for d = float64 the
interval is [got, got] and the half ulp is part of E (every bound carries u64 * |ref| terms).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..norms._rounding import float32_odd

DTYPES = ("float64", "float32", "float16", "bfloat16")
NP = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
      "bfloat16": np.dtype(ml_dtypes.bfloat16)}
# unit roundoff u = 2^-p (p = significand bits including the implicit one)
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# half the smallest subnormal: the absolute rounding error floor
ETA = {"float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25, "bfloat16": 2.0 ** -134}
RANK = {"bfloat16": 0, "float16": 1, "float32": 2, "float64": 3}   # by significand precision


ESTIMATE_REL = 2.0 ** -11      # an approximate reciprocal square root's relative error (x86 rsqrtps: 1.5 2^-12)
ESTIMATE_EXACT = 0.25          # at most this share of slices exact (an estimate errs at almost every slice)


def estimate_like(rel) -> bool:
    """Per-slice relative errors ``rel`` of a statistic like an approximate reciprocal square root's: at most
    ESTIMATE_REL, on both sides (10-90% above: eps added to rstd errs to one side only, by a size varying with
    the slice's rstd), nonzero at almost every slice (another slice's statistic read for some slices leaves the
    rest exact)."""
    a = np.abs(rel)
    return bool(2.0 ** -20 < np.max(a) <= ESTIMATE_REL and 0.1 <= float(np.mean(rel > 0)) <= 0.9
                and float(np.mean(a < 2.0 ** -20)) <= ESTIMATE_EXACT)


def dtype_name(dt) -> str | None:
    """refnorm's name of a NumPy dtype (None when it is not one of the four floating dtypes)."""
    dt = np.dtype(dt)
    for name, d in NP.items():
        if dt == d:
            return name
    return None


def acc_dtype(case_dtype: str, acc: str | None = None) -> str:
    """The accumulation dtype of a contract: float32 internals for float32/16/bf16, float64 for float64."""
    if acc is not None:
        return acc
    return "float64" if case_dtype == "float64" else "float32"


def gamma(n, reduction: str = "block", block: int | None = None):
    """Reduction-error multiplier: a sum of n terms errs by at most gamma(n) * u * sum|terms|
    (first order). tree: ceil(log2 n) + 2; block: 2 sqrt(n) + 2 (chunks of b = sqrt(n)); serial: n + 2.
    ``block`` b (the "block" order only, where the kernel's chunk is known): b + ceil(n / b) + 2 (serial
    chunks of b, their sums added serially)."""
    n = max(int(n), 1)
    if block is not None and reduction == "block":
        b = max(1, min(int(block), n))
        return b + math.ceil(n / b) + 2.0
    if reduction == "tree":
        return math.ceil(math.log2(n)) + 2 if n > 1 else 2
    if reduction == "block":
        return 2.0 * math.sqrt(n) + 2.0
    if reduction == "serial":
        return n + 2.0
    raise ValueError(f"reduction {reduction!r}: expected tree, block or serial")


def rounding_interval(got: np.ndarray):
    """(lo, hi) float64 arrays: the reals that round to ``got`` in got's dtype (see module docstring)."""
    name = dtype_name(got.dtype)
    if name is None:
        raise TypeError(f"rounding_interval: dtype {got.dtype} is not one of {', '.join(DTYPES)}")
    g64 = got.astype(np.float64)
    if name == "float64":
        return g64.copy(), g64.copy()
    dt = NP[name]
    inf = np.array(np.inf, dtype=dt)
    with np.errstate(over="ignore", invalid="ignore"):
        up = np.nextafter(got, inf).astype(np.float64)
        down = np.nextafter(got, -inf).astype(np.float64)
    fmax = float(ml_dtypes.finfo(dt).max)
    half_top = (fmax - float(np.nextafter(np.array(fmax, dtype=dt), np.array(0, dtype=dt)))) / 2
    with np.errstate(invalid="ignore", over="ignore"):
        lo = g64 - (g64 - down) / 2
        hi = g64 + (up - g64) / 2
        lo = np.where(g64 == -fmax, -fmax - half_top, lo)       # values beyond round to -inf
        hi = np.where(g64 == fmax, fmax + half_top, hi)
        lo = np.where(g64 == np.inf, fmax + half_top, lo)
        hi = np.where(g64 == np.inf, np.inf, hi)
        lo = np.where(g64 == -np.inf, -np.inf, lo)
        hi = np.where(g64 == -np.inf, -fmax - half_top, hi)
    return lo, hi


def unit(dt) -> float:
    """One unit of a floating dtype's last place at 1 (its machine epsilon, NumPy's or ml_dtypes'); 0 for an
    integer or quantized-code dtype."""
    dt = np.dtype(dt)
    return float(ml_dtypes.finfo(dt).eps) if dt.kind in "fV" else 0.0


def excess(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Distance (float64, >= 0) from ``ref`` to the rounding interval of ``got``; NaN rules:
    both NaN -> 0, exactly one NaN -> inf. ``ref`` = +-inf needs ``got`` = the same infinity."""
    lo, hi = rounding_interval(got)
    return interval_excess(lo, hi, got.astype(np.float64), ref)


def interval_excess(lo, hi, g64, ref) -> np.ndarray:
    """``excess`` given got's rounding interval [lo, hi] (NaN for a NaN) and its values ``g64`` in float64."""
    ref = np.asarray(ref, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):     # a huge |g - ref| is inf: a failure
        ex = np.maximum(0.0, np.maximum(lo - ref, ref - hi))
    gnan, rnan = np.isnan(lo), np.isnan(ref)
    ex = np.where(gnan | rnan, np.where(gnan & rnan, 0.0, np.inf), ex)
    rinf = np.isinf(ref) & ~rnan
    ex = np.where(rinf, np.where(g64 == ref, 0.0, np.inf), ex)
    return np.where(np.isnan(ex), np.inf, ex)


def ratio(ex: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """excess / bound with 0/0 = 0 and x/0 = inf for x > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = ex / bound
    return np.where(ex == 0, 0.0, np.where(bound == 0, np.inf, r))


def round_toward_zero(v, dt) -> np.ndarray:
    """float64 ``v`` rounded toward zero to the NumPy / ml_dtypes dtype ``dt`` (a kernel's truncating
    store), back in float64."""
    v = np.asarray(v, dtype=np.float64)
    r = v.astype(dt)
    with np.errstate(all="ignore"):
        over = np.abs(r.astype(np.float64)) > np.abs(v)
    return np.where(over, np.nextafter(r, np.zeros((), dt)), r).astype(np.float64)


def round_to(a, dtype: str) -> np.ndarray:
    """float64 values correctly rounded (to nearest, ties to even) to ``dtype``.

    NumPy casts float64 to float32/float16 correctly, but ml_dtypes casts float64 to bfloat16 through
    float32, which rounds twice: -0.22998046564 becomes the float32 midpoint -0.22998046875 and then,
    ties to even, -0.23046875 instead of -0.2294921875. Here the float32 step rounds to ODD (truncate,
    then set the last bit when inexact), which makes the second rounding correct (24 >= 8 + 2 bits).
    """
    a = np.asarray(a, dtype=np.float64)
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):
            return np.asarray(a.astype(NP[dtype]))
    return np.asarray(float32_odd(a).astype(ml_dtypes.bfloat16))


# ------------------------------------------------------------------------------ quantized outputs
# Quantized dtypes are judged on their grid: a plain name (float8_e4m3fn, float8_e5m2, int8, float4_e2m1fn)
# rounds to nearest even and saturates; "NAME:RULE" is a grid of powers of two rounded by a DIRECTED rule
# (norm_quant_block's scales): "float8_e8m0fnu:floor" ([S, 2S) rounds to S), "float8_e8m0fnu:round_up"
# ((S/2, S] rounds to S), both saturating at 2^-127 and 2^127; "pow2:round_up", a float32 (float64) array of
# powers of two or 0 ((S/2, S] rounds to S; 0 only from 0).
def _nearest_table() -> dict:
    """{name: (NumPy dtype, lowest, highest)} of the round-to-nearest quantized dtypes."""
    from ..norms.norm_quant import QUANT_DTYPES
    from ..norms.norm_quant_block import ELEMENTS
    return {**QUANT_DTYPES, "float4_e2m1fn": (ELEMENTS["float4_e2m1fn"][0], -6.0, 6.0)}


DIRECTED = ("float8_e8m0fnu:floor", "float8_e8m0fnu:round_up", "pow2:round_up")


def quant_name(dt) -> str | None:
    """refnorm's name of a quantized NumPy dtype (float8_e4m3fn, float8_e5m2, int8, float4_e2m1fn,
    float8_e8m0fnu), else None."""
    import ml_dtypes
    dt = np.dtype(dt)
    if dt == np.dtype(ml_dtypes.float8_e8m0fnu):
        return "float8_e8m0fnu"
    return next((name for name, (d, _, _) in _nearest_table().items() if dt == d), None)


def quant_accepts(dt, qdtype: str) -> bool:
    """Whether an array of NumPy dtype ``dt`` can be judged on the grid ``qdtype``."""
    base = qdtype.partition(":")[0]
    if base == "pow2":
        return np.dtype(dt) in (np.dtype(np.float32), np.dtype(np.float64))
    return quant_name(dt) == base


def quantize_to(a, qdtype: str) -> np.ndarray:
    """The float64 values ``a`` rounded onto the grid ``qdtype`` (by its own rule) as an array of its dtype."""
    import ml_dtypes
    from ..norms import norm_quant_block as NB
    a = np.asarray(a, dtype=np.float64)
    if qdtype == "float8_e8m0fnu:floor":
        return NB.pow2_floor(a, *NB.E8M0_EXP).astype(ml_dtypes.float8_e8m0fnu)
    if qdtype == "float8_e8m0fnu:round_up":
        return NB.pow2_ceil(a, *NB.E8M0_EXP).astype(ml_dtypes.float8_e8m0fnu)
    if qdtype == "pow2:round_up":
        return NB.pow2_ceil(a, *NB.F32_POW2_EXP, zero=0.0).astype(np.float32)
    from ..norms.norm_quant import QUANT_DTYPES, quantize
    if qdtype in QUANT_DTYPES:
        return quantize(a, qdtype)                       # int8 refuses NaN there
    return NB.quantize(a, qdtype)


def _directed_interval(got: np.ndarray, qdtype: str):
    """(lo, hi, lo_open, hi_open) of a directed power-of-two grid (module comment above); a value that is
    not on the grid gets the empty interval (lo = inf, hi = -inf): it matches nothing."""
    g = np.asarray(got).astype(np.float64)
    with np.errstate(all="ignore"):
        if qdtype.startswith("pow2"):
            bottom = 2.0 ** (-149 if np.asarray(got).dtype == np.float32 else -1074)
            top = 2.0 ** (127 if np.asarray(got).dtype == np.float32 else 1023)
        else:
            bottom, top = 2.0 ** -127, 2.0 ** 127
        m, _ = np.frexp(np.where(np.isfinite(g), g, 1.0))
        on = np.isfinite(g) & (g > 0) & (m == 0.5)
        if qdtype.endswith(":floor"):
            lo, hi, lo_open, hi_open = g, 2 * g, np.zeros(g.shape, bool), np.ones(g.shape, bool)
        else:
            lo, hi, lo_open, hi_open = g / 2, g, np.ones(g.shape, bool), np.zeros(g.shape, bool)
        lo = np.where(on & (g == bottom), -np.inf if not qdtype.startswith("pow2") else 0.0, lo)
        hi = np.where(on & (g == top), np.inf, hi)
        zero = (g == 0) & qdtype.startswith("pow2")
        lo = np.where(zero, 0.0, np.where(on, lo, np.inf))
        hi = np.where(zero, 0.0, np.where(on, hi, -np.inf))
        lo_open, hi_open = lo_open & on, hi_open & on
        nan = np.isnan(g)
        lo, hi = np.where(nan, np.nan, lo), np.where(nan, np.nan, hi)
    return lo, hi, lo_open, hi_open


def quant_interval(got: np.ndarray, qdtype: str | None = None):
    """(lo, hi) float64: the reals a SATURATING quantizer rounds (to nearest, ties to even) to ``got``,
    an array of a quantized dtype. Between grid neighbours the boundaries are the midpoints; the largest
    value takes everything above it and the lowest everything below (a saturating quantizer never
    overflows). NaN: (NaN, NaN); +-inf (float8_e5m2 only, never produced by saturation): (+-inf, +-inf).
    ``qdtype`` one of DIRECTED: that grid's interval (its open ends are ``_directed_interval``'s)."""
    if qdtype in DIRECTED:
        return _directed_interval(got, qdtype)[:2]
    name = quant_name(got.dtype)
    table = _nearest_table()
    if name not in table:
        raise TypeError(f"quant_interval: dtype {got.dtype} is not a quantized dtype")
    dt, qmin, qmax = table[name]
    if dt.kind == "i":
        grid = np.arange(int(qmin), int(qmax) + 1, dtype=np.float64)
    else:
        allv = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
        grid = np.unique(allv[np.isfinite(allv)])                     # sorted, -0 and 0 merged
    g = got.astype(np.float64)
    fin = np.isfinite(g)
    i = np.clip(np.searchsorted(grid, np.where(fin, g, 0.0)), 0, grid.size - 1)
    lo = np.where(i > 0, (grid[i] + grid[np.maximum(i - 1, 0)]) / 2, -np.inf)
    hi = np.where(i < grid.size - 1, (grid[i] + grid[np.minimum(i + 1, grid.size - 1)]) / 2, np.inf)
    lo = np.where(fin, lo, g)
    hi = np.where(fin, hi, g)
    return lo, hi


def quant_even(got: np.ndarray) -> np.ndarray:
    """Whether each value of ``got`` (a quantized array) is "even" for round-half-to-even: int8 values
    divisible by 2, float8 and float4 values whose last significand bit is 0 (the last bit of the byte)."""
    dt = _nearest_table()[quant_name(got.dtype)][0]
    if dt.kind == "i":
        return np.asarray(got).astype(np.int64) % 2 == 0
    return (np.asarray(got).view(np.uint8) & 1) == 0


def quant_excess(got: np.ndarray, ref: np.ndarray, qdtype: str | None = None) -> np.ndarray:
    """Distance from ``ref`` (the exact pre-rounding value) to the saturating rounding interval of ``got``
    (a quantized array); NaN rules as ``excess``: both NaN -> 0, exactly one NaN -> inf; an infinite
    ``got`` passes only an equal infinite ``ref``.

    Ties: the midpoint between two grid neighbours belongs to the even one (round half to even), so an
    odd ``got`` does not contain the midpoints that bound it. A ``ref`` exactly on such a midpoint is
    outside ``got``'s interval by no finite distance; its excess is the smallest positive amount there
    (np.spacing(ref)): it fails only under a bound of 0 (a pre-quantizer value every kernel computes
    exactly: bounds/norm_quant.py), and passes any positive bound (the kernel's value may lie on either
    side of the tie). A directed grid (``qdtype`` in DIRECTED) treats its open ends alike."""
    ref = np.asarray(ref, dtype=np.float64)
    if qdtype in DIRECTED:
        lo, hi, lo_open, hi_open = _directed_interval(got, qdtype)
        with np.errstate(invalid="ignore"):
            ex = np.maximum(0.0, np.maximum(lo - ref, ref - hi))
            edge = (lo_open & (ref == lo)) | (hi_open & (ref == hi))
            ex = np.where(edge, np.abs(np.spacing(np.where(edge, ref, 1.0))), ex)
    else:
        lo, hi = quant_interval(got)
        with np.errstate(invalid="ignore"):
            ex = np.maximum(0.0, np.maximum(lo - ref, ref - hi))
            odd_tie = ~quant_even(got) & (((ref == lo) & np.isfinite(lo)) | ((ref == hi) & np.isfinite(hi)))
            ex = np.where(odd_tie, np.abs(np.spacing(np.where(odd_tie, ref, 1.0))), ex)
    gnan, rnan = np.isnan(lo), np.isnan(ref)
    ex = np.where(gnan | rnan, np.where(gnan & rnan, 0.0, np.inf), ex)
    ginf = np.isinf(got.astype(np.float64))
    ex = np.where(ginf & ~rnan, np.where(got.astype(np.float64) == ref, 0.0, np.inf), ex)
    return np.where(np.isnan(ex), np.inf, ex)
