"""One rounding error per row: whether a summation-order spread explains every per-row array at once.

A variant whose value is set by the kernel's summation order (the one-pass variance, ``Variant.spread``)
is matched within bounds widened by how far its results move between the ends of its rounding interval
(diagnosis._widened), array by array and element by element. On mean-shifted rows that interval holds
almost any error of a statistic. But a one-pass kernel errs by ONE number per normalized row, its
variance var_r + s_r delta_r (|s_r| <= 1): that one value sets the row's y, its rstd and mean outputs
and its dx (the running statistics it updates share a second one: a kernel may compute the variance it
stores apart from the one it normalizes with, as jax's batch_norm does). So the spread explains the
backend only when, on every row, a single s_r reproduces every per-row output within CLOSE x its bound
(and a single s'_r every running statistic):

    exists s_r in [-1, 1]:  |got_e - v_e(s_r)| <= CLOSE E_e  for every element e of row r, every array

with v(s) the variant evaluated at var + s delta (the same s on every row; rows are independent, so
each row takes its own s from the evaluations). v_e(s) is taken on a grid of s (0, +-2^-k, k = 0..K)
and linearly between neighbours. A kernel returning std as rstd, a biased running variance beside a
correct y, a dx recomputed from a rounded y beside a correct y: each needs s_r = 0 on one array and
|s_r| >> 0 on another, and is not a one-pass variance, whatever its magnitude.

Where a forward array fails, only the forward's arrays are constrained: a kernel summing the uncentred
form in its forward often sums it in its backward too (sum(dy x) - mean sum(dy): torch CPU's
channels_last GroupNorm), and that cancellation errs independently of the variance's, so dx carries an
error of its own. Where only gradients fail, the spread explains them only when they are dx alone, and
dx joins the constraint (a constant row: x_hat = 0 hides the variance's error from y, not from dx); a
failing parameter gradient (a sum over rows) with a right forward is not a variance's rounding error.

Rows (``row_ids``): layer_norm / weight_standardization (the normalized trailing slices), batch_norm
(channels), instance_norm (sample, channel), group_norm / group_norm_silu (sample, group); an array is
per-row when it is y (or dx, as above) or a statistic / running statistic with one value per row. Parameter
gradients (sums over rows) and the arrays of other ops are not constrained. Pure NumPy.
"""
from __future__ import annotations

import numpy as np

CLOSE = 2.0       # a row's s must reproduce each of its elements within this many times its bound
K = 10            # the grid: 0, +-1, +-1/2, ..., +-2^-K
PER_ROW = ("mean", "rstd", "var", "std", "running_mean", "running_var", "y", "dx")
STATE = ("running_mean", "running_var")
OPS = ("layer_norm", "batch_norm", "instance_norm", "group_norm", "group_norm_silu", "weight_standardization")


def grid():
    """The s of the evaluations, ascending."""
    pos = [2.0 ** -k for k in range(K, -1, -1)]
    return [-p for p in reversed(pos)] + [0.0] + pos


def row_ids(case, x_shape, name, shape):
    """The normalized row of every element of an array of ``shape`` named ``name`` (an int array of that
    shape), or None when the array is not per-row (module docstring)."""
    op, nd = case.op, len(x_shape)
    if op not in OPS or name not in PER_ROW or not nd:
        return None
    size = int(np.prod(shape, dtype=np.int64))
    if tuple(shape) == tuple(x_shape) and name in ("y", "dx"):
        idx = np.arange(size).reshape(shape)
        if op == "batch_norm":
            return np.broadcast_to(np.arange(x_shape[1]).reshape((1, -1) + (1,) * (nd - 2)), shape)
        if op in ("layer_norm", "weight_standardization"):
            return idx // (size // _rows(case, x_shape))
        if op == "instance_norm":
            return idx // int(np.prod(x_shape[2:], dtype=np.int64))
        G = int(case.config.get("num_groups", 1))
        return idx // (size // (x_shape[0] * G))
    if name in ("y", "dx"):
        return None
    rows = _rows(case, x_shape)
    return np.arange(size).reshape(shape) if rows and size == rows else None


def _rows(case, x_shape):
    op, nd = case.op, len(x_shape)
    if op == "layer_norm":
        ns = case.config.get("normalized_shape")
        k = 1 if np.ndim(ns) == 0 else len(ns)
        return int(np.prod(x_shape[:nd - k], dtype=np.int64))
    if op == "weight_standardization":
        return int(x_shape[0])
    if op == "batch_norm":
        return int(x_shape[1]) if nd > 1 else None
    if op == "instance_norm":
        return int(x_shape[0] * x_shape[1]) if nd > 2 else None
    G = case.config.get("num_groups")
    return int(x_shape[0] * G) if isinstance(G, int) and nd > 1 else None


def interval(got, E, values, rows, n_rows):
    """Per row and grid interval, the range of t in [0, 1] (s = s_k + t (s_k+1 - s_k)) for which the
    variant reproduces every element of one array: ``values`` (len(grid()), *shape) the variant at each
    s of the grid, ``got`` and ``E`` the backend's array and its bound, ``rows`` its row_ids. Returns
    (lo, hi), each (n_rows, len(grid()) - 1); a row with no element of the array is unconstrained."""
    got = np.asarray(got, dtype=np.float64).ravel()
    E = CLOSE * np.broadcast_to(np.asarray(E, dtype=np.float64), values.shape[1:]).ravel()
    V = values.reshape(values.shape[0], -1)
    r = np.asarray(rows).ravel()
    lo = np.full((V.shape[0] - 1, n_rows), -np.inf)
    hi = np.full((V.shape[0] - 1, n_rows), np.inf)
    with np.errstate(all="ignore"):
        a, b = V[:-1], V[1:]                     # v(t) = a + t (b - a), t in [0, 1] between neighbours
        d = b - a
        t1, t2 = (got - E - a) / d, (got + E - a) / d
        tl, th = np.minimum(t1, t2), np.maximum(t1, t2)
        flat = ~(np.abs(d) > 0)                  # no movement: within the bound or not, for every t
        inside = np.abs(got - a) <= E
        tl = np.where(flat, np.where(inside, -np.inf, np.inf), tl)
        th = np.where(flat, np.where(inside, np.inf, -np.inf), th)
        # a non-finite result of the backend is left to the judge; a finite one is not reproduced on an
        # interval where the variant is not finite (a negative variance's NaN)
        skip, no = ~np.isfinite(got), ~np.isfinite(a) | ~np.isfinite(b)
        tl = np.where(skip, -np.inf, np.where(no, np.inf, tl))
        th = np.where(skip, np.inf, np.where(no, -np.inf, th))
    for k in range(V.shape[0] - 1):
        np.maximum.at(lo[k], r, tl[k])
        np.minimum.at(hi[k], r, th[k])
    return lo.T, hi.T


def one_s_per_row(case, x_shape, arrays):
    """Whether every row has one s explaining all its per-row arrays: ``arrays`` [(name, got, E, values)]
    (values as in ``interval``; dx named "dx"). The outputs share one s per row; the running statistics,
    which a kernel may compute apart (jax's batch_norm: its one-pass variance normalizes, another updates
    running_var), share another. Arrays that are not per-row are ignored; True when none is."""
    n = _rows(case, x_shape)
    if not n:
        return True
    groups = {}
    for name, got, E, values in arrays:
        rows = row_ids(case, x_shape, name, np.shape(got))
        if rows is None or values.shape[1:] != np.shape(got):
            continue
        l, h = interval(got, E, values, rows, n)
        key = name in STATE
        if key in groups:
            lo, hi = groups[key]
            l, h = np.maximum(lo, l), np.minimum(hi, h)
        groups[key] = (l, h)
    return all(bool(np.all(np.any(np.maximum(lo, 0.0) <= np.minimum(hi, 1.0), axis=1))) for lo, hi in groups.values())
