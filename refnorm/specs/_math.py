"""The math every specification shares, written as the equations read (whole arrays, float64, NumPy).

    mean_A(x)      the mean over the axes A, keepdims, two-pass: m0 = mean(x), mean = m0 + mean(x - m0)
    deviations     d = (x - m0) - mean(x - m0): x - mean_A(x) without the rounding error of the mean
    var_A(x)       sum_A(d^2) / (n - ddof)
    sigmoids(z)    (sigmoid(z), 1 - sigmoid(z)), each from e = exp(-|z|) without overflow or cancellation

Why two passes: a float64 mean is off by up to half an ulp of |mean|, and x - mean would carry that
error (|mean|/std times the unit roundoff, relative) into every normalized value; re-centring the
deviations removes it, and a constant slice gives d == 0 exactly. An empty reduction gives mean 0.
"""
from __future__ import annotations

import math

import numpy as np


def count(x, axes):
    """n = the number of elements one reduction over ``axes`` sees."""
    return math.prod(x.shape[a] for a in axes)


def centered(x, axes):
    """(mean, d): mean_A(x) (keepdims) and the deviations d = x - mean_A(x), two-pass."""
    if count(x, axes) == 0:
        return np.zeros([1 if i in axes else s for i, s in enumerate(x.shape)]), np.zeros_like(x)
    m0 = x.mean(axis=axes, keepdims=True)            # first pass
    d0 = x - m0
    c = d0.mean(axis=axes, keepdims=True)            # the first pass's error
    return m0 + c, d0 - c


def moments(x, axes, ddof=0):
    """(mean, var, d): mean_A(x), var_A(x) = sum_A(d^2) / (n - ddof) (NaN when n - ddof <= 0), d."""
    n = count(x, axes)
    mean, d = centered(x, axes)
    if n - ddof <= 0:
        return mean, np.full(mean.shape, np.nan), d
    return mean, (d * d).sum(axis=axes, keepdims=True) / (n - ddof), d


def centered_backward(g, xhat, rstd, axes):
    """dL/dx of xhat = (x - mean_A(x)) * rstd, rstd = (var_A(x) + eps)^(-1/2) (biased variance):

        dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat)),     g = dL/dxhat
    """
    if count(g, axes) == 0:
        return np.zeros_like(g)
    return rstd * (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True))


def sum_to(g, shape):
    """Sum ``g`` over the axes a parameter of ``shape`` is broadcast along (the parameter's gradient)."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=axes).reshape(shape) if axes else g.reshape(shape)


def pow2_scale(a, axes):
    """s = 2^k just above max_A |a| (keepdims; 1 for an all-zero or non-finite slice): dividing by s is
    exact, so s * sqrt(sum_A (a / s)^2) is sqrt(sum_A a^2) without overflow or underflow."""
    m = np.max(np.abs(a), axis=axes, keepdims=True, initial=0.0)
    return np.where((m > 0) & np.isfinite(m), np.ldexp(1.0, np.frexp(m)[1]), 1.0)


def per_channel(p, x):
    """A per-channel (C,) array (or a per-(n, c) (N, C) one) shaped to broadcast against x (N, C, *)."""
    return p.reshape((1, -1) + (1,) * (x.ndim - 2) if p.ndim == 1 else p.shape + (1,) * (x.ndim - 2))


def sigmoids(z):
    """(sigmoid(z), 1 - sigmoid(z)), each without overflow or cancellation: e = exp(-|z|) <= 1 (the larger of
    the two is 1 / (1 + e), the smaller e / (1 + e)), so both keep full relative accuracy in the tails."""
    e = np.exp(-np.abs(z))
    big, small = 1.0 / (1.0 + e), e / (1.0 + e)
    return np.where(z >= 0, big, small), np.where(z >= 0, small, big)


def offline_state(initial, state):
    """An offline normalizer's state for one call: the call's ``state`` over ``initial`` (what it leaves out
    starts there), the step counter ``iters`` as an int64 array of shape (1,)."""
    st = {**initial, **state}
    st["iters"] = np.asarray(st["iters"], dtype=np.int64).reshape(1)
    return st


def rows(x):
    """(N, C, *) -> (P, C): the channel last, every other position a row (the offline normalizers' view)."""
    return np.moveaxis(x, 1, -1).reshape(math.prod(x.shape[:1] + x.shape[2:]), x.shape[1])


def unrows(a, shape):
    """(P, C) -> (N, C, *) of ``shape``: the inverse of ``rows``."""
    return np.moveaxis(a.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)
