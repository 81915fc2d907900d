"""The bias test: systematic error hiding below one rounding step (docs/tolerances.md, section 7).

Per-element bounds pass a bug whose error stays under half an ulp per element but pushes every element
the same way (an inverse RMS rounded to bfloat16 before the multiply; Gemma's 1 + weight added in
bfloat16). Correct rounding is unbiased; those bugs are not. For a group G of elements (a whole array,
or one row or channel: one index along one axis) the signed error

    S_G = sum_{i in G} (got_i - ref_i) * sign(ref_i)

splits into the final rounding errors r_i = got_i - v_i (v_i the backend's value before its rounding)
and the internal errors v_i - ref_i, bounded by E_i (the per-element bound). Hence

    |S_G| <= sum_G E_i + |sum_G r_i sign(ref_i)|.

The model: rounding errors are mean zero (round to nearest of a value that is not planted on the
grid), each within the width w_i of the rounding interval of got_i, and independent between elements
that round to DIFFERENT values. Elements that round to the same value may sit at the same place in
their rounding cell (a layer_norm row of two values gives y = +-w + b almost exactly, row after row),
so they are merged into one term of width (count * w). Hoeffding's inequality then bounds the second
sum, with probability 1 - p, by

    t_G = sqrt(ln(2 / p) / 2 * sum_{distinct returned values} (count * w)^2).

The test fails when |S_G| > sum_G E_i + t_G for some group. p is the false-alarm probability of one
group: the case's budget P_CASE = 1e-9 (one false alarm in a billion cases) divided among every group
of every array tested (Bonferroni). Reported: bias_ratio = max_G |S_G| / (sum_G E_i + t_G).

How many elements it needs: with relative ulp q of the dtype (2^-7 bfloat16, 2^-10 float16 for values
in [1, 2)) and a bug that scales a group by (1 + delta), S_G ~ delta * sum|ref| and t_G ~ 3.3 q |ref| sqrt(n)
(ln(2/p) ~ 22 for p ~ 1e-10), so detection needs n >~ 11 (q / delta)^2 elements in the group: for
delta = 2^-9 (rstd in bfloat16: half an ulp of bfloat16 at worst, a quarter on average) about 700-2800
per row in bfloat16; for a float16 epilogue bias of 2^-12, similar counts. golden cases with rows of
>= 1000 (``rows``/``big`` shapes) and many rows per channel give it that.
"""
from __future__ import annotations

import math

import numpy as np

from .precision import rounding_interval

P_CASE = 1e-9


def group_count(shape) -> int:
    """The groups tested for an array of ``shape``: the whole array, and one index along each axis of
    length > 1 (rows, columns, channels...) when the array has more than one axis."""
    return 1 + (sum(n for n in shape if n > 1) if len(shape) > 1 else 0)


def value_counts(got: np.ndarray, as_f64: np.ndarray | None = None) -> np.ndarray:
    """For each element, how many elements of ``got`` hold the same value (+0 and -0 are one value).
    16-bit dtypes (float16, bfloat16): a 65536-bin count of the bit patterns, linear time; wider ones:
    ``np.unique`` on the float64 values (``as_f64``)."""
    if got.itemsize == 2:
        bits = np.ascontiguousarray(got).view(np.uint16).astype(np.int64)
        bits = np.where(bits == 0x8000, 0, bits)                       # -0 counts with +0
        return np.bincount(bits.ravel(), minlength=65536)[bits]
    _, inv, counts = np.unique(as_f64, return_inverse=True, return_counts=True)
    return counts[inv.reshape(as_f64.shape)]


def bias_test(got: np.ndarray, ref: np.ndarray, E: np.ndarray, p_array: float):
    """(bias_ratio, worst group label, S, allowance) of one array; ``p_array`` is this array's share
    of the false-alarm budget, split evenly among its groups.

    Duplicates: an element whose returned value occurs c times in the whole array enters the Hoeffding
    sum as w^2 * c; within a group that holds k <= c of them, the merged term (k w)^2 = k * k w^2 <=
    k * c w^2, so the per-element form bounds the merged one from above (conservative, vectorized)."""
    ref = np.asarray(ref, dtype=np.float64)
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    lo, hi = rounding_interval(got)
    g64 = got.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = g64 - ref
        width = hi - lo
    ok = np.isfinite(err) & np.isfinite(E) & np.isfinite(width) & np.isfinite(ref)
    if not ok.any():
        return 0.0, "", 0.0, 0.0
    # elements left out of the test count as zeros, as before (they carry no weight: q_el is 0 there)
    mult = (value_counts(np.where(ok, got, np.zeros((), dtype=got.dtype))) if got.itemsize == 2
            else value_counts(got, np.where(ok, g64, 0.0)))
    s_el = np.where(ok, err * np.sign(ref), 0.0)
    e_el = np.where(ok, E, 0.0)
    q_el = np.where(ok, width * width * mult, 0.0)
    c = math.log(2.0 * group_count(ref.shape) / p_array) / 2.0
    best = (0.0, "", 0.0, 0.0)

    def consider(S, sumE, Q, labels):
        nonlocal best
        allow = sumE + np.sqrt(c * Q)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(allow > 0, np.abs(S) / allow, np.where(S != 0, np.inf, 0.0))
        k = int(np.argmax(r))
        if r.flat[k] > best[0]:
            best = (float(r.flat[k]), labels(k), float(S.flat[k]), float(allow.flat[k]))

    consider(np.array([s_el.sum()]), np.array([e_el.sum()]), np.array([q_el.sum()]), lambda k: "all")
    if ref.ndim > 1:
        for ax, n in enumerate(ref.shape):
            if n > 1:
                other = tuple(a for a in range(ref.ndim) if a != ax)
                consider(s_el.sum(axis=other), e_el.sum(axis=other), q_el.sum(axis=other),
                         lambda k, ax=ax: f"axis {ax} = {k}")
    return best
