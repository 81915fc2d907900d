"""Chan's pairwise merge of chunk moments with its two weights as parameters: the arithmetic that the
diagnosis's merge families (explain.py's statistics, spec_search.py's variances) vary.

Chan, Golub and LeVeque merge two partials (n_a, mean_a, M2_a) and (n_b, mean_b, M2_b), delta = mean_b - mean_a, as

    mean = mean_a + delta * n_b / (n_a + n_b),    M2 = M2_a + M2_b + delta^2 * n_a n_b / (n_a + n_b)

(refnorm/norms/distributed.merge is the exact reference). A kernel that merges its tiles wrongly changes one of
the two weights: the mean's step (``step(n_a, n_b)``, exact ``chan_step``) or the spread term's (``spread(n_a,
n_b)``, exact ``chan_spread``).
"""
from __future__ import annotations


def chan_step(na, nb):
    """The exact mean step n_b / (n_a + n_b)."""
    return nb / (na + nb)


def chan_spread(na, nb):
    """The exact spread weight n_a n_b / (n_a + n_b)."""
    return na * nb / (na + nb)


def chan_merge(chunks, step=chan_step, spread=chan_spread, width=None):
    """(mean, M2) of rows merged chunk by chunk, left to right: ``chunks`` are (rows, len_j) arrays, each reduced
    two-pass to (len_j, mean_j, M2_j), then merged into the running state with the mean step ``step(n_a, n_b)``
    and the spread weight ``spread(n_a, n_b)``; both results (rows, 1). ``width``: each chunk's mean taken as its
    sum / width (a tile's width where a short last tile's own count belongs), its M2 about that mean."""
    na = 0
    for c in chunks:
        nb = c.shape[1]
        mb = c.mean(axis=1, keepdims=True) if width is None else c.sum(axis=1, keepdims=True) / width
        qb = ((c - mb) ** 2).sum(axis=1, keepdims=True)
        if not na:
            na, ma, qa = nb, mb, qb
            continue
        dl = mb - ma
        ma, qa, na = ma + dl * step(na, nb), qa + qb + dl * dl * spread(na, nb), na + nb
    return ma, qa
