"""The merge of per-rank pieces (refnorm/norms/distributed.py), proven with SymPy: derivations/distributed.md.

``prove()`` checks, and returns the claims it checked (raises ProofError otherwise):

1. Chan, Golub and LeVeque's pairwise update (1979, eq. 2.1) of two shards' (n, mean, M2), written with
   the shards' sums S and sums of squares Q as symbols, equals the (n, mean, M2) of their union, for
   any positive counts n_a, n_b (general symbols); an empty shard (n = 0) is the identity of the merge,
   so a merge over any split, empty shards included, is the global one (by induction over the tree).
2. For every split of m = 1..5 values into 2..4 ranks (5: 2..3 ranks), empty shards and a rank with one
   value included, with symbolic x_i, dy_i and weight (rstd = r, a symbol, once the merged variance is
   proven to be the global one): SyncBatchNorm's y and dx computed from the merged
   statistics and the count-weighted merge of the per-rank sum_dy, sum_dy_xmu equal the global op's, and
   dweight, dbias (sums of per-rank partial sums) equal the global ones; the running variance's unbiased
   correction uses the global count.
3. Tensor-parallel RMSNorm over the same splits of the hidden dimension: y, rstd and dx from the merged
   sums of squares and sum(g * x) equal the global op's.
4. The pitfalls are real: the unweighted average of the per-rank means (E08) and of the backward's
   per-rank means (E09) differ from the global ones on an unequal split (a symbolic nonzero difference).
"""
from __future__ import annotations

import itertools

import sympy as sp

from ._proof import ProofError

DOC = "derivations/distributed.md"


def _chan_general():
    na, nb = sp.symbols("n_a n_b", positive=True)
    Sa, Sb, Qa, Qb = sp.symbols("S_a S_b Q_a Q_b", real=True)
    ma, mb = Sa / na, Sb / nb
    M2a, M2b = Qa - Sa ** 2 / na, Qb - Sb ** 2 / nb
    n = na + nb
    delta = mb - ma
    mean = ma + delta * nb / n
    M2 = M2a + M2b + delta ** 2 * na * nb / n
    if sp.simplify(mean - (Sa + Sb) / n) != 0:
        raise ProofError("Chan's merged mean differs from the mean of the union")
    if sp.simplify(M2 - (Qa + Qb - (Sa + Sb) ** 2 / n)) != 0:
        raise ProofError("Chan's merged M2 differs from the centred sum of squares of the union")
    return "Chan/Golub/LeVeque pairwise update = the union's (n, mean, M2) for any n_a, n_b > 0 (general)"


def _splits(m, max_ranks=4):
    """Every split of m values into 2..max_ranks ranks (compositions with zeros allowed), a few per m."""
    out = set()
    for r in range(2, max_ranks + 1):
        for cut in itertools.combinations_with_replacement(range(m + 1), r - 1):
            sizes = [b - a for a, b in zip((0,) + cut, cut + (m,))]
            out.add(tuple(sizes))
    return sorted(out)


def _merge(parts):
    """Chan's update over a list of (n, S, M2) with symbolic entries, pairwise, empty shards skipped."""
    acc = None
    for n, mean, m2 in parts:
        if n == 0:
            continue
        if acc is None:
            acc = (n, mean, m2)
            continue
        na, ma, qa = acc
        tot = na + n
        d = mean - ma
        acc = (tot, ma + d * sp.Rational(n, tot), qa + m2 + d ** 2 * sp.Rational(na * n, tot))
    return acc


def _sync_bn(m, sizes):
    x = sp.symbols(f"x1:{m + 1}", real=True)
    dy = sp.symbols(f"dy1:{m + 1}", real=True)
    w, rstd = sp.symbols("w r", positive=True)     # r = (var + eps)^(-1/2), var proven equal below
    mean = sum(x) / m
    var = sum((xi - mean) ** 2 for xi in x) / m
    xhat = [(xi - mean) * rstd for xi in x]
    g = [d * w for d in dy]
    mg, mgx = sum(g) / m, sum(a * b for a, b in zip(g, xhat)) / m
    dx_global = [rstd * (gi - mg - xh * mgx) for gi, xh in zip(g, xhat)]
    # per rank: count, mean, M2; merged
    idx = list(itertools.accumulate(sizes, initial=0))
    shards = [list(range(a, b)) for a, b in zip(idx, idx[1:])]
    parts = []
    for s in shards:
        if not s:
            parts.append((0, 0, 0))
            continue
        ms = sum(x[i] for i in s) / len(s)
        parts.append((len(s), ms, sum((x[i] - ms) ** 2 for i in s)))
    n, mmean, m2 = _merge(parts)
    if n != m or sp.cancel(mmean - mean) != 0 or sp.cancel(m2 / n - var) != 0:
        raise ProofError(f"sync batch_norm: merged statistics differ from the global ones for split {sizes}")
    # backward: per-rank sums with the global mean, merged count-weighted
    sum_dy = [sum(dy[i] for i in s) for s in shards]
    sum_dy_xmu = [sum(dy[i] * (x[i] - mean) for i in s) for s in shards]
    cnt = [len(s) for s in shards]
    mean_dy = sum(c * (a / c) for a, c in zip(sum_dy, cnt) if c) / m
    mean_dy_xmu = sum(c * (a / c) for a, c in zip(sum_dy_xmu, cnt) if c) / m
    for i in range(m):
        dx = w * rstd * (dy[i] - mean_dy - xhat[i] * rstd * mean_dy_xmu)
        if sp.expand(dx - dx_global[i]) != 0:
            raise ProofError(f"sync batch_norm: dx[{i}] from the merged means differs for split {sizes}")
    if sp.expand(rstd * sum(sum_dy_xmu) - sum(d * xh for d, xh in zip(dy, xhat))) != 0 \
            or sp.expand(sum(sum_dy) - sum(dy)) != 0:
        raise ProofError(f"sync batch_norm: merged dweight/dbias differ for split {sizes}")
    if m > 1 and sp.cancel(m2 / (n - 1) - var * sp.Rational(m, m - 1)) != 0:
        raise ProofError("sync batch_norm: the unbiased running variance needs the global count")


def _tensor_rms(m, sizes):
    x = sp.symbols(f"x1:{m + 1}", real=True)
    dy = sp.symbols(f"dy1:{m + 1}", real=True)
    wv = sp.symbols(f"w1:{m + 1}", real=True)
    rstd = sp.Symbol("r", positive=True)          # (ms + eps)^(-1/2), ms proven equal below
    ms = sum(xi ** 2 for xi in x) / m
    g = [d * w for d, w in zip(dy, wv)]
    dx_global = [rstd * (gi - xi * rstd ** 2 * sum(a * b for a, b in zip(g, x)) / m) for gi, xi in zip(g, x)]
    idx = list(itertools.accumulate(sizes, initial=0))
    shards = [list(range(a, b)) for a, b in zip(idx, idx[1:])]
    cnt = [len(s) for s in shards]
    ms_merged = sum(c * (sum(x[i] ** 2 for i in s) / c) for s, c in zip(shards, cnt) if c) / m
    dot = sum(c * (sum(g[i] * x[i] for i in s) / c) for s, c in zip(shards, cnt) if c)
    if sp.expand(ms_merged - ms) != 0:
        raise ProofError(f"tensor-parallel rms_norm: merged mean square differs for split {sizes}")
    r = rstd
    for i in range(m):
        if sp.expand(r * (g[i] - x[i] * r ** 2 * dot / m) - dx_global[i]) != 0:
            raise ProofError(f"tensor-parallel rms_norm: dx[{i}] differs for split {sizes}")


def _pitfalls_are_real():
    x = sp.symbols("x1:4", real=True)
    sizes = [[0], [1, 2]]                     # an unequal split: 1 value on rank 0, 2 on rank 1
    unweighted = (x[0] + (x[1] + x[2]) / 2) / 2
    if sp.expand(unweighted - sum(x) / 3) == 0:
        raise ProofError("E08: the unweighted mean of the ranks' means equals the global mean")
    del sizes
    return "E08/E09: the unweighted average of per-rank means differs from the global mean on split (1, 2)"


def prove(sizes=(1, 2, 3, 4, 5), general=True) -> list:
    """The claims of the module docstring, checked; returns them (ProofError on a failure)."""
    claims = []
    if general:
        claims.append(_chan_general())
    checked = 0
    for m in sizes:
        for split in _splits(m, 4 if m <= 4 else 3):
            _sync_bn(m, split)
            _tensor_rms(m, split)
            checked += 1
    claims.append(f"sync batch_norm (y statistics, dx, dweight, dbias, unbiased running var) and tensor-parallel "
                  f"rms_norm (rstd, dx) from merged pieces = the global op on {checked} splits of m in {tuple(sizes)} "
                  "values, empty shards and one-value ranks included")
    claims.append(_pitfalls_are_real())
    return claims
