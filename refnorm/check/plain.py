"""The judgement of one returned array, written as its formulas: the definition that the compiled judge
(refnorm/check/_judge.c, through compare.ArrayAccumulator, block by block) computes fast, as
refnorm/specs/ is the definition of the reference (docs/tolerances.md, sections 1, 3 and 8). The bounds
``E`` come from refnorm/check/bounds/; this module takes them as given.

Notation: ``got`` the returned values in the dtype judged ``d`` (float64, float32, float16, bfloat16),
``g`` them widened to float64 (exactly), ``ref`` the float64 reference, ``E`` each element's bound,
``scale`` the array's scale, max |ref| over its finite elements.

    interval     [lo, hi] = the reals that round to got in d      (precision.rounding_interval)
    excess       max(0, lo - ref, ref - hi)                       (NaN and inf rules: ``excess``)
    ratio        excess / E                                       (< 1 passes; ``ratio``)
    unconstrained   E infinite, or 0 < E and E >= scale           (nothing verified at that element)
    constrained fraction   1 - unconstrained / size               (``constrained_fraction``)
    err_u        max |g - ref| over the constrained / (u_d scale)  (``err_u``)
    bias test    max over groups |sum (g - round_d(ref)) sign(ref)| / (sum E + t)   (bias.py)

``judge`` gives these figures for a whole array, the fields ``compare.ArrayAccumulator.figures()`` gives,
and tests/test_plain.py holds the compiled judge to them: the per-element terms and every maximum, count
and worst element bit for bit, the group sums (taken in another order) within their rounding.
"""
from __future__ import annotations

import math

import numpy as np

from .bias import P_CASE, bias_ratio, bias_terms, group_sums, value_counts
from .precision import NP, UNIT_ROUNDOFF, dtype_name, interval_excess, rounding_interval

WORST_SHOWN = 3
FRACTION_WEAK = 0.5     # a verified array with fewer constrained elements than this is "weakly" verified


# --------------------------------------------------------------------------------- the comparison
def interval(g: np.ndarray, dtype: str):
    """[lo, hi] of each float64 value ``g`` of ``dtype`` (each exactly a value of it): the reals that round
    to it (to nearest, ties to even; beyond the largest finite value, to inf)."""
    return rounding_interval(g.astype(NP[dtype]))


def ratio(g, ref, E, ex, dtype) -> np.ndarray:
    """excess / E per element (0 / 0 = 0, x / 0 = inf), with the rules for what no bound covers:
    - an element with no finite bound is not judged (0), unless got is NaN and ref is not (inf);
    - got = +-inf where ref is finite and below the overflow threshold of d is inf (the largest finite
      value plus half its spacing: a correct rounding of ref could not overflow)."""
    finite_E = np.isfinite(E)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.where(ex == 0, 0.0, np.where(E == 0, np.inf, ex / np.where(finite_E, E, 1.0)))
    r = np.where(finite_E, r, 0.0)
    r = np.where(~finite_E & np.isnan(g) & ~np.isnan(ref), np.inf, r)
    lo_inf = interval(np.array([np.inf]), dtype)[0][0] if dtype != "float64" else np.inf
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(g) & np.isfinite(ref) & (np.abs(ref) < lo_inf), np.inf, r)


def unconstrained(E, scale) -> np.ndarray:
    """Elements whose bound says nothing: infinite (or NaN), or positive and at least the array's scale
    (any value of the array's size would pass there)."""
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(E) | ((E > 0) & (E >= scale))


@np.errstate(invalid="ignore", over="ignore")
def error(g, ref, ex) -> np.ndarray:
    """|g - ref|, the error err_u reads: 0 where both are NaN, where they are equal, and for an infinite g
    within its interval (excess ``ex`` 0)."""
    diff = np.abs(g - ref)
    return np.where((np.isnan(g) & np.isnan(ref)) | (g == ref) | (np.isinf(g) & (ex == 0)), 0.0, diff)


def err_u(dmax, unc, size, scale, dtype) -> float:
    """The largest constrained error ``dmax`` in units of u_d * scale: NaN when no element is constrained,
    0 / 0 = 0 and x / 0 = inf for an all-zero reference."""
    if unc >= size and size:
        return math.nan
    if scale > 0:
        return dmax / (UNIT_ROUNDOFF[dtype] * scale)
    return 0.0 if dmax == 0 else math.inf


def constrained_fraction(unc: int, size: int) -> float:
    """The fraction of the elements whose bound is below the array's scale (1 for an empty array)."""
    return 1.0 - unc / size if size else 1.0


def worst(r, k=WORST_SHOWN) -> list:
    """The flat indices of the k largest ratios above 0, largest first, ties to the lowest index."""
    key = -r.reshape(-1)
    k = min(k, key.size)
    if not k:
        return []
    kth = np.partition(key, k - 1)[k - 1]                  # the k-th largest ratio
    better = np.flatnonzero(key < kth)
    pick = np.concatenate([better, np.flatnonzero(key == kth)[:k - better.size]])
    return [int(i) for i in pick[np.lexsort((pick, key[pick]))] if key[i] < 0]


# --------------------------------------------------------------------------------- one array
def judge(got: np.ndarray, ref: np.ndarray, E, scale: float | None = None, mult=None,
          p_array: float = P_CASE / 64) -> dict:
    """The figures of one returned array (``got`` in the dtype judged) against ``ref`` within ``E``: the
    fields of compare.ArrayAccumulator.figures(). ``scale``: max |ref| over the finite elements unless
    given; ``mult``: how many elements of got hold each element's value (counted unless given)."""
    dtype = dtype_name(got.dtype)
    ref = np.asarray(ref, dtype=np.float64)
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    g = got.astype(np.float64)
    if scale is None:
        scale = float(np.max(np.abs(ref), where=np.isfinite(ref), initial=0.0))
    lo, hi = interval(g, dtype)
    ex = interval_excess(lo, hi, g, ref)
    r = ratio(g, ref, E, ex, dtype)
    unc = unconstrained(E, scale)
    dmax = float(np.max(error(g, ref, ex)[~unc], initial=0.0))
    if mult is None:
        mult = value_counts(got, np.where(g == 0, 0.0, g)) if got.size else np.ones(0)
    terms = bias_terms(g, ref, E, lo, hi, np.reshape(mult, ref.shape), dtype)
    bias, where = (bias_ratio(*(group_sums(t, ref.shape) for t in terms), ref.shape, p_array)[:2]
                   if got.size > 1 else (0.0, ""))
    n_unc = int(unc.sum())
    return dict(dtype=dtype, size=got.size, ratio=float(np.max(r, initial=0.0)),
                err_u=err_u(dmax, n_unc, got.size, scale, dtype), unconstrained=n_unc,
                worst=[(tuple(int(k) for k in np.unravel_index(i, ref.shape)), float(g.flat[i]), float(ref.flat[i]),
                        float(E.flat[i])) for i in worst(r)],
                over=int((r > 1).sum()), bias=float(bias), bias_where=where, scale=scale,
                max_bound=float(np.max(E, initial=0.0)), bias_bound=False)
