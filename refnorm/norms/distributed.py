"""The merge of per-rank pieces into the global statistics and gradients (data, sequence and tensor
parallelism), pure float64 NumPy: what a distributed normalizer must compute, shard by shard.

The global ops are refnorm's own (batch_norm, layer_norm, rms_norm); what is new here is how the
pieces combine. Each rank r holds a shard x_r of the values a statistic runs over (a slice of the
batch for SyncBatchNorm, of the tokens for sequence parallelism, of the hidden dimension for tensor
parallelism) and computes its own count n_r, mean m_r and centred sum of squares M2_r = sum (x - m_r)^2.
Two such triples merge by the pairwise update of Chan, Golub and LeVeque (1979; "Updating formulae and
a pairwise algorithm for computing sample variances", eq. 2.1):

    n = n_a + n_b,    delta = m_b - m_a,    m = m_a + delta * n_b / n,
    M2 = M2_a + M2_b + delta^2 * n_a * n_b / n                                    (count-weighted)

An empty shard (n_r = 0) is the identity of the merge (its mean is taken as 0 and never used). The
merged (n, m, M2 / n) equal the global count, mean and biased variance for any split, equal, unequal or
with empty shards (derivations/distributed.md, proven with SymPy by refnorm/derivations/distributed.py).

Backward (SyncBatchNorm; torch's batch_norm_backward_reduce): each rank sums sum_dy_r = sum dy and
sum_dy_xmu_r = sum dy * (x - mean) over its shard, with the GLOBAL mean; the global means are the
count-weighted merge of the per-rank means, mean_dy = sum_r n_r * (sum_dy_r / n_r) / n = sum_r sum_dy_r / n
(likewise mean_dy_xmu), so an all-reduce of the sums and a division by the global count n. Then, on
every rank, with g = dy * weight and xhat = (x - mean) * rstd (refnorm/norms/batch_norm.py):

    dx_r = rstd * weight * (dy_r - mean_dy - xhat_r * rstd * mean_dy_xmu),
    dweight = rstd * sum_r sum_dy_xmu_r,    dbias = sum_r sum_dy_r

Sequence parallelism (layer_norm / rms_norm, tokens sharded): every row is whole on one rank, so the
forward and dx are local; only the parameter gradients are partial sums over rows, merged by a sum
(an all-reduce). Tensor parallelism (rms_norm, the hidden dimension sharded): the mean square is the
count-weighted merge of the per-rank mean squares, sum_r sum(x_r^2) / m (an all-reduce of the sums
of squares), and the backward's sum(g * x) over the hidden dimension is merged the same way.
Conventions are those of the global ops: biased variance, eps inside the sqrt, torch's running
statistics (refnorm.norms.batch_norm.update_running_stats: the unbiased correction n / (n - 1) with
the GLOBAL count n).
"""
from __future__ import annotations

import numpy as np

from .batch_norm import DEFAULT_MOMENTUM, update_running_stats


# ----------------------------------------------------------------------------------- the merge
def shard_moments(x: np.ndarray, axes: tuple) -> tuple:
    """(n_r, mean_r, M2_r) of one shard over ``axes`` (two-pass; an empty shard gives n 0, mean 0, M2 0)."""
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    if n == 0:
        shape = [s for a, s in enumerate(x.shape) if a not in axes]
        return 0, np.zeros(shape), np.zeros(shape)
    mean = x.mean(axis=axes)
    d = x - np.expand_dims(mean, axes)
    return n, mean, (d * d).sum(axis=axes)


def merge(a: tuple, b: tuple) -> tuple:
    """Chan, Golub and LeVeque's pairwise update of two (n, mean, M2) triples (module docstring)."""
    na, ma, qa = a
    nb, mb, qb = b
    if na == 0:
        return b
    if nb == 0:
        return a
    n = na + nb
    delta = mb - ma
    return n, ma + delta * (nb / n), qa + qb + delta * delta * (na * nb / n)


def merge_all(parts) -> tuple:
    """The merge of every rank's triple, pairwise as a tree (the order of a recursive-halving all-reduce)."""
    parts = list(parts)
    if not parts:
        raise ValueError("merge_all: no shards")
    while len(parts) > 1:
        parts = [merge(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def merge_means(counts, means):
    """The count-weighted mean sum_r n_r * mean_r / sum_r n_r (empty shards, n_r = 0, contribute nothing)."""
    total = sum(counts)
    return sum(n * np.asarray(m, dtype=np.float64) for n, m in zip(counts, means) if n) / total


# ---------------------------------------------------------------------- SyncBatchNorm (batch)
def _bc(p, x):
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def sync_batch_norm_forward(x_shards, weight=None, bias=None, running_mean=None, running_var=None,
                            num_batches_tracked=0, *, training=True, momentum=None, eps=1e-5,
                            convention="torch"):
    """Per-rank (N_r, C, *) shards of the batch -> (y shards, mean, rstd, new state, used batch stats).

    Batch statistics (training, or no running statistics): the merged (n, mean, M2 / n) of the shards;
    eval with running statistics: those. Running statistics are updated once with the merged mean,
    variance and count (update_running_stats). ``momentum`` None: the convention's default."""
    momentum = DEFAULT_MOMENTUM[convention] if momentum is None else momentum
    tracking = running_mean is not None
    state = {}
    if training or not tracking:
        n, mean, m2 = merge_all(shard_moments(x, _bn_axes(x)) for x in x_shards)
        var = m2 / n if n else np.full(mean.shape, np.nan)
        if training and tracking:
            rm, rv, nbt = update_running_stats(running_mean, running_var, num_batches_tracked, mean, var, n,
                                               momentum=momentum, convention=convention)
            state = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt}
        used = True
    else:
        mean, var, used = running_mean.copy(), running_var, False
    if tracking and not state:
        state = {"running_mean": running_mean.copy(), "running_var": running_var.copy(),
                 "num_batches_tracked": np.asarray(num_batches_tracked, dtype=np.int64).copy()}
    rstd = 1.0 / np.sqrt(var + eps)
    ys = []
    for x in x_shards:
        y = (x - _bc(mean, x)) * _bc(rstd, x)
        y = y if weight is None else y * _bc(weight, x)
        ys.append(y if bias is None else y + _bc(bias, x))
    return ys, mean, rstd, state, used


def sync_batch_norm_backward(dy_shards, x_shards, weight, mean, rstd, *, used_batch_stats=True):
    """(dx shards, dweight, dbias): per-rank sums (n_r, sum_dy_r, sum_dy_xmu_r) merged count-weighted
    (module docstring); with running statistics (eval) dx = dy * weight * rstd, rank by rank."""
    w = np.ones_like(rstd) if weight is None else weight
    counts = [int(np.prod([x.shape[a] for a in _bn_axes(x)])) for x in x_shards]
    sum_dy = [dy.sum(axis=_bn_axes(dy)) for dy in dy_shards]
    sum_dy_xmu = [(dy * (x - _bc(mean, x))).sum(axis=_bn_axes(x)) for dy, x in zip(dy_shards, x_shards)]
    dweight, dbias = rstd * sum(sum_dy_xmu), sum(sum_dy)
    if not used_batch_stats:
        return [dy * _bc(w * rstd, dy) for dy in dy_shards], dweight, dbias
    n = sum(counts)
    mean_dy = merge_means(counts, [s / c if c else 0.0 for s, c in zip(sum_dy, counts)]) if n else 0.0 * rstd
    mean_dy_xmu = merge_means(counts, [s / c if c else 0.0 for s, c in zip(sum_dy_xmu, counts)]) if n else 0.0 * rstd
    dxs = []
    for dy, x in zip(dy_shards, x_shards):
        xhat = (x - _bc(mean, x)) * _bc(rstd, x)
        dxs.append(_bc(w * rstd, x) * (dy - _bc(mean_dy, x) - xhat * _bc(rstd * mean_dy_xmu, x)))
    return dxs, dweight, dbias


# --------------------------------------------------- sequence parallelism (tokens sharded)
def merge_sums(partials):
    """The sum of per-rank partial sums (a parameter gradient over rows): what an all-reduce returns."""
    partials = [np.asarray(p, dtype=np.float64) for p in partials]
    return sum(partials[1:], partials[0].copy())


# ------------------------------------------------ tensor parallelism (hidden dim sharded)
def tensor_parallel_rms_norm(x_shards, weight_shards=None, dy_shards=None, *, eps=1e-5):
    """RMSNorm over the last axis, sharded along it: ms = sum_r sum(x_r^2) / m (the count-weighted merge
    of the per-rank mean squares), rstd = (ms + eps)^(-1/2), y_r = x_r * rstd * weight_r. With
    ``dy_shards``: the backward, g_r = dy_r * weight_r, s = sum_r sum(g_r * x_r) (merged the same way),
    dx_r = rstd * (g_r - x_r * rstd^2 * s / m), dweight_r = sum over rows of dy_r * x_r * rstd.
    Returns (y shards, rstd (keepdims), dx shards or None, dweight shards or None)."""
    counts = [x.shape[-1] for x in x_shards]
    m = sum(counts)
    ms = merge_means(counts, [(x * x).mean(axis=-1, keepdims=True) if c else 0.0 for x, c in zip(x_shards, counts)])
    rstd = 1.0 / np.sqrt(ms + eps)
    ws = weight_shards if weight_shards is not None else [None] * len(x_shards)
    ys = [x * rstd if w is None else x * rstd * w for x, w in zip(x_shards, ws)]
    if dy_shards is None:
        return ys, rstd, None, None
    gs = [dy if w is None else dy * w for dy, w in zip(dy_shards, ws)]
    s = merge_means(counts, [(g * x).mean(axis=-1, keepdims=True) if c else 0.0
                             for g, x, c in zip(gs, x_shards, counts)]) * m
    dxs = [rstd * (g - x * rstd * rstd * s / m) for g, x in zip(gs, x_shards)]
    dws = None if weight_shards is None else [
        (dy * x * rstd).sum(axis=tuple(range(x.ndim - 1))) for dy, x in zip(dy_shards, x_shards)]
    return ys, rstd, dxs, dws
