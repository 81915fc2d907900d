"""The bias test: systematic error hiding below one rounding step (docs/tolerances.md, section 8).

Per-element bounds pass a bug whose error stays under half an ulp per element but pushes every element
the same way (an inverse RMS rounded to bfloat16 before the multiply; Gemma's 1 + weight added in
bfloat16; truncation instead of rounding to nearest). For a group G of elements (a whole array, or one
row or channel: one index along one axis) the test measures the signed error against the CORRECTLY
ROUNDED reference R_i = round_d(ref_i) (``correctly_rounded``), not against ref_i:

    S_G = sum_{i in G} (got_i - R_i) * sign(ref_i)          (0 for a correctly rounded result)

Why not got - ref: the rounding errors R_i - ref_i of the best answer there is are not mean zero where
the reference values sit at fixed places in their rounding cells (a mean-shifted bfloat16 rms_norm row:
x_hat takes 3 values within an ulp or two of 1, so dweight = dy * x_hat = dy (1 + delta) lies a fixed
fraction of an ulp above the grid value dy, and every element rounds down: the correctly rounded result
failed at 1.25x the old allowance). Those errors are known exactly, and subtracting them removes them.

The model of a correct kernel: got_i = round_d(v_i), v_i = ref_i + e_i with |e_i| <= E_i (the bound).
Write D_i = got_i - R_i. For e_i fixed, D_i takes one of two neighbouring values k w_i and (k + 1) w_i
(w_i the spacing: D_i = 0 unless a rounding boundary lies between ref_i and v_i), and, where ref_i's place
in its cell is uniform, its mean is exactly e_i (the rounding error r(x) = round(x) - x has mean 0 over a
cell, at x = ref_i and at x = ref_i + e_i alike: D_i = e_i + r(v_i) - r(ref_i)). Hence D_i - e_i is mean
zero within a range of width w_i, and with |sum e_i| <= sum E_i, Hoeffding's inequality gives, with
probability 1 - p,

    |S_G| <= sum_G E_i + t_G,   t_G = sqrt(ln(2 / p) / 2 * sum_{distinct returned values} (count * w)^2),

the places independent between elements that round to DIFFERENT values, merged into one term of width
(count * w) where elements round to the same value (a layer_norm row of two values gives y = +-w + b
almost exactly, row after row). w_i is measured as the width of got_i's rounding interval (hi - lo).
The test fails when |S_G| > sum_G E_i + t_G for some group. p is the false-alarm probability of one
group: the case's budget P_CASE = 1e-9 (one false alarm in a billion cases) divided among every group
of every array tested (Bonferroni). Reported: bias_ratio = max_G |S_G| / (sum_G E_i + t_G).

The allowance is the old one, the statistic differs only by the known sum (R_i - ref_i) sign(ref_i):
for uniformly placed values a bug's expected signal is the same (-delta sum |ref| for a scale error
(1 - delta); -sum w / 2 for truncation), its noise smaller (only the elements whose rounding the
internal error flips move), and a correctly rounded result gives S = 0 whatever its values: never failed.
Where places are not uniform (repeated, structured values), only the elements within E_i of a rounding
boundary can move at all, which a correct float32-internals kernel keeps far below t_G (measured:
benchmarks/false_alarms.py, docs/tolerances.md section 8).

How many elements it needs: with relative ulp q of the dtype (2^-7 bfloat16, 2^-10 float16 for values
in [1, 2)) and a bug that scales a group by (1 + delta), S_G ~ delta * sum|ref| and t_G ~ 3.3 q |ref| sqrt(n)
(ln(2/p) ~ 22 for p ~ 1e-10), so detection needs n >~ 11 (q / delta)^2 elements in the group: for
delta = 2^-9 (rstd in bfloat16: half an ulp of bfloat16 at worst, a quarter on average) about 700-2800
per row in bfloat16; for a float16 epilogue bias of 2^-12, similar counts. Truncation (S ~ -n w / 2)
needs n >~ 44. golden cases with rows of >= 1000 (``rows``/``big`` shapes) and many rows per channel
give it that.
"""
from __future__ import annotations

import math

import numpy as np

from .precision import dtype_name, round_to, rounding_interval

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


def correctly_rounded(ref: np.ndarray, dtype: str) -> np.ndarray:
    """R = ``ref`` correctly rounded to ``dtype`` (to nearest, ties to even; +-inf beyond its largest
    finite value: precision.round_to), in float64; float64: ``ref`` itself."""
    ref = np.asarray(ref, dtype=np.float64)
    return ref if dtype == "float64" else round_to(ref, dtype).astype(np.float64)


def bias_terms(g64, ref, E, lo, hi, mult, dtype):
    """Each element's three terms (s, e, q) of the test (module docstring): s = (got - R) sign(ref), e = E,
    q = (hi - lo)^2 * mult, with [lo, hi] got's rounding interval and ``mult`` its multiplicity; all three 0
    for an element left out (got - R, E, the width or ref not finite: R infinite included)."""
    with np.errstate(invalid="ignore", over="ignore"):
        D = g64 - correctly_rounded(ref, dtype)
        width = hi - lo
    ok = np.isfinite(D) & np.isfinite(E) & np.isfinite(width) & np.isfinite(ref)
    return np.where(ok, D * np.sign(ref), 0.0), np.where(ok, E, 0.0), np.where(ok, width * width * mult, 0.0)


@np.errstate(over="ignore", invalid="ignore")        # a sum of huge bounds may be inf
def group_sums(t: np.ndarray, shape) -> np.ndarray:
    """The sums of the element term ``t`` over each group of an array of ``shape``: the whole array first,
    then one index along each axis of length > 1 in turn (axis 0's indices, axis 1's, ...; none for 1-D)."""
    t = np.reshape(t, shape)
    sums = [np.array([t.sum()])]
    if len(shape) > 1:
        for ax, n in enumerate(shape):
            if n > 1:
                sums.append(t.sum(axis=tuple(a for a in range(len(shape)) if a != ax)))
    return np.concatenate(sums)


def bias_ratio(S, sumE, Q, shape, p_array: float):
    """(bias_ratio, worst group label, S, allowance) from the groups' sums (``group_sums`` order): the
    largest |S_G| / (sum_G E + sqrt(ln(2 groups / p_array) / 2 * Q_G)), the first group on a tie."""
    c = math.log(2.0 * group_count(shape) / p_array) / 2.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        allow = sumE + np.sqrt(c * Q)
        r = np.where(allow > 0, np.abs(S) / allow, np.where(S != 0, np.inf, 0.0))
    labels = ["all"] + ([f"axis {ax} = {k}" for ax, n in enumerate(shape) if n > 1 for k in range(n)]
                        if len(shape) > 1 else [])
    k = int(np.argmax(r))
    if not r[k] > 0:
        return 0.0, "", 0.0, 0.0
    return float(r[k]), labels[k], float(S[k]), float(allow[k])


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
        ok = np.isfinite(g64 - ref) & np.isfinite(E) & np.isfinite(hi - lo) & np.isfinite(ref)
    if not ok.any():
        return 0.0, "", 0.0, 0.0
    # elements left out of the test count as zeros (they carry no weight: their q is 0)
    mult = (value_counts(np.where(ok, got, np.zeros((), dtype=got.dtype))) if got.itemsize == 2
            else value_counts(got, np.where(ok, g64, 0.0)))
    s, e, q = bias_terms(g64, ref, E, lo, hi, mult, dtype_name(got.dtype))
    return bias_ratio(*(group_sums(t, ref.shape) for t in (s, e, q)), ref.shape, p_array)
