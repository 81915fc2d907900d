"""Two-pass moments over axes and the centred backward, in float64 (the conventions: _common.py's
docstring)."""
from __future__ import annotations

import contextlib
import math

import numpy as np


def count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    return math.prod(x.shape[a] for a in axes)


def centered(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(mean, d): the mean over ``axes`` (keepdims) and the deviations d = x - mean, two-pass.

    m0 = mean(x); d0 = x - m0; c = mean(d0); mean = m0 + c; d = d0 - c.
    The deviations are re-centred rather than recomputed from the rounded mean: a float64 mean is
    off by up to half an ulp of |mean|, and x - mean would carry that error (|mean|/std times the
    rounding unit, relative) into every normalized value. d0 - c removes it, so d is accurate to a
    few rounding units of |d| however large |mean|/std is, and a constant slice gives d == 0 exactly.
    An empty reduction gives mean 0 (as torch).
    """
    if count(x, axes) == 0:
        return np.zeros([1 if i in axes else s for i, s in enumerate(x.shape)]), np.zeros_like(x)
    m0 = x.mean(axis=axes, keepdims=True)
    d = x - m0
    c = d.mean(axis=axes, keepdims=True)
    return m0 + c, d - c


def mean(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Mean over ``axes`` (keepdims), with one correction pass; 0 for an empty reduction."""
    return centered(x, axes)[0]


def moments(x: np.ndarray, axes: tuple[int, ...], ddof: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two-pass (mean, variance) over ``axes``, keepdims; variance divides by n - ddof.

    Variance is NaN when n - ddof <= 0 (an empty slice, or one element with ddof=1).
    """
    m, v, _ = centered_moments(x, axes, ddof)
    return m, v


def centered_moments(x: np.ndarray, axes: tuple[int, ...], ddof: int = 0):
    """(mean, variance, deviations): ``moments`` plus the accurate deviations of ``centered``.

    Normalizers should form xhat = d * rstd from these deviations, not (x - mean) * rstd.
    """
    n = count(x, axes)
    m, d = centered(x, axes)
    if n - ddof <= 0:
        return m, np.full(m.shape, np.nan), d
    return m, (d * d).sum(axis=axes, keepdims=True) / (n - ddof), d


def centered_backward(g: np.ndarray, xhat: np.ndarray, rstd: np.ndarray,
                      axes: tuple[int, ...], *, out: np.ndarray | None = None,
                      work: np.ndarray | None = None, inner: int = 0) -> np.ndarray:
    """dL/dx for xhat = (x - mean_A(x)) * rstd, rstd = (var_A(x) + eps)^(-1/2), biased variance.

        dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat)),   g = dL/dxhat

    (derivations/batch_norm.md: the mean and variance paths contribute the two subtracted terms).
    ``out`` (may be ``g`` itself) and ``work``, arrays shaped like g, receive dx and the
    temporaries instead of new arrays (the blocked passes); the operations, and so the bits, are
    the same either way. ``inner``: see ``elementwise``.
    """
    n = count(g, axes)
    if n == 0:
        if out is None:
            return np.zeros_like(g)
        out.fill(0.0)
        return out
    if out is None:
        return rstd * (g - g.mean(axis=axes, keepdims=True)
                       - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    mg = block_sum(g, axes)             # = g.mean(...): sum, then / n
    mg /= n
    with elementwise(inner):
        np.multiply(g, xhat, out=work)
    mgx = block_sum(work, axes)
    mgx /= n
    with elementwise(inner):
        np.subtract(g, mg, out=out)
        out -= np.multiply(xhat, mgx, out=work)
        out *= rstd
    return out


def reduce_to(g: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over ``axes`` (the gradient of a broadcast parameter), dropping those axes."""
    return g.sum(axis=axes)


_ELEMENTWISE_BUFSIZE = 256


@contextlib.contextmanager
def elementwise(inner: int):
    """NumPy's ufunc buffer size lowered for the element-wise (never the summing) ops of a block.

    With its default 8192-element buffer NumPy "grows" the inner loop of an op that broadcasts a
    per-row value over rows shorter than the buffer by copying through the buffer, which doubles
    the op's cost (rows of 784 or 3136 values: 0.43 instead of 0.2 ns per element here); with a
    buffer shorter than a row (``inner`` values) it runs the contiguous loop row by row. Element-wise
    results do not depend on the buffering; sums may (blocking of the pairwise sum), so every sum
    runs outside this context, with the caller's buffer size. Rows under 256 values keep the default.
    """
    if inner < _ELEMENTWISE_BUFSIZE:
        yield
        return
    old = np.setbufsize(_ELEMENTWISE_BUFSIZE)
    try:
        yield
    finally:
        np.setbufsize(old)


def block_sum(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Sum over ``axes`` (keepdims) of a 3-D block, in the order NumPy sums the whole array.

    (1, 2) (rows of contiguous values): one pairwise sum per row. (0, 2) (batch_norm's (N, k, S)
    block of channels, C > 1): a pairwise sum over S for each (n, c), then those one after the
    other in order of n. That is how np.add.reduce orders sum(axis=(0, 2, ...)) over a whole
    (N, C, *) array with C > 1; on a slice of channels NumPy may choose another order (pairwise
    over n when the slice has one channel), so the two steps are spelled out.
    """
    if axes == (0, 2):
        return np.add.accumulate(np.add.reduce(a, axis=2, keepdims=True), axis=0)[-1:]
    return np.add.reduce(a, axis=axes, keepdims=True)
