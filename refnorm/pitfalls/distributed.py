"""Distributed pitfall variants: the merge of refnorm/norms/distributed.py with one documented mistake.

Each variant computes, in float64 from the global call's arrays cut by the case's split (``sizes``
along the sharded axis), what a distributed backend with that one mistake returns once its ranks'
parts are gathered (a replicated array as rank 0 holds it). ``bound(parallel, sizes)`` gives the
``Variant``s of one case, ready for refnorm.check.diagnosis (they are not in ``pitfalls.variants``:
a single-process call has no split).

    E08     SyncBatchNorm: per-rank statistics averaged unweighted (every rank's count taken as equal),
            ../PITFALLS E08 (pytorch #22192: ranks with different N*H*W)
    E09     SyncBatchNorm backward: mean_dy / mean_dy_xmu averaged over ranks unweighted (PR #36688)
    DP-RS1  SyncBatchNorm: running_var updated with rank 0's local (unbiased) variance, not the global one
    DP-RS2  SyncBatchNorm: running_var's unbiased correction n / (n - 1) with the local count n_0
    DP-SP1  sequence parallelism: the weight/bias gradients not all-reduced (rank 0's partial sums)
    DP-TP1  tensor parallelism: each rank normalizes by the sum of squares of its own hidden slice
"""
from __future__ import annotations

import functools

import numpy as np

from .. import registry
from ..norms import distributed as M
from ..spec import Result
from . import Variant


def _cut(a, sizes, axis):
    return np.split(np.asarray(a, dtype=np.float64), np.cumsum(sizes)[:-1], axis=axis)


def _bc(p, x):
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def _sync_bn(inputs, config, cot, dtype, state, training, *, sizes, stats="weighted", means="weighted",
             running="global"):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    xs = _cut(x, sizes, 0)
    axes = (0,) + tuple(range(2, x.ndim))
    eps, momentum = config.get("eps", 1e-5), config.get("momentum", 0.1)
    tracking = "running_mean" in state
    counts = [int(np.prod([s.shape[a] for a in axes])) for s in xs]
    new_state = {}
    with np.errstate(all="ignore"):
        if training or not tracking:
            parts = [M.shard_moments(s, axes) for s in xs]
            if stats == "weighted":
                n, mean, m2 = M.merge_all(parts)
                var = m2 / n
            else:                                               # E08: every rank's count taken as equal
                n = sum(counts)
                mr = np.array([p[1] if p[0] else np.full(p[1].shape, np.nan) for p in parts])
                mean = mr.mean(axis=0)
                var = np.mean([p[2] / np.float64(p[0]) for p in parts], axis=0) + ((mr - mean) ** 2).mean(axis=0)
            if training and tracking:
                rm, rv = state["running_mean"], state["running_var"]
                nbt = np.asarray(int(state["num_batches_tracked"]) + 1, dtype=np.int64)
                m = 1.0 / float(nbt) if momentum is None else momentum
                n0, _, q0 = parts[0]
                n0 = np.float64(n0)
                batch_var = (var * (n / (n - 1)) if running == "global" else q0 / (n0 - 1) if running == "local_var"
                             else var * (n0 / (n0 - 1)))                   # local_count
                new_state = {"running_mean": (1 - m) * rm + m * mean, "running_var": (1 - m) * rv + m * batch_var,
                             "num_batches_tracked": nbt}
            used = True
        else:
            mean, var, used = state["running_mean"], state["running_var"], False
        if tracking and not new_state:
            new_state = {k: np.array(state[k]) for k in ("running_mean", "running_var", "num_batches_tracked")}
        rstd = 1.0 / np.sqrt(var + eps)
        y = (x - _bc(mean, x)) * _bc(rstd, x)
        y = y if w is None else y * _bc(w, x)
        y = y if b is None else y + _bc(b, x)
        grads = {}
        if "y" in cot:
            dys = _cut(cot["y"], sizes, 0)
            wv = np.ones_like(rstd) if w is None else w
            sdy = [d.sum(axis=axes) for d in dys]
            sdx = [(d * (s - _bc(mean, s))).sum(axis=axes) for d, s in zip(dys, xs)]
            if used and means == "weighted":
                mdy, mdx = M.merge_means(counts, [a / c if c else 0 for a, c in zip(sdy, counts)]), \
                    M.merge_means(counts, [a / c if c else 0 for a, c in zip(sdx, counts)])
            elif used:                                          # E09: an unweighted mean of the ranks' means
                mdy = np.mean([a / c for a, c in zip(sdy, counts)], axis=0)
                mdx = np.mean([a / c for a, c in zip(sdx, counts)], axis=0)
            dx = []
            for d, s in zip(dys, xs):
                xhat = (s - _bc(mean, s)) * _bc(rstd, s)
                dx.append(d * _bc(wv * rstd, s) if not used else
                          _bc(wv * rstd, s) * (d - _bc(mdy, s) - xhat * _bc(rstd * mdx, s)))
            grads["x"] = np.concatenate(dx, axis=0)
            if w is not None:
                grads["weight"] = rstd * sum(sdx)
            if b is not None:
                grads["bias"] = sum(sdy)
    return Result({"y": y, "mean": np.asarray(mean, dtype=np.float64), "rstd": rstd}, grads, new_state)


def _unreduced_param_grads(op):
    def fn(inputs, config, cot, dtype, state, training, *, sizes):
        full = registry.evaluate(op, inputs, config=dict(config), grad_outputs=cot or None, training=training)
        if not cot:
            return full
        first = {k: (_cut(v, sizes, 0)[0] if k == "x" else v) for k, v in inputs.items()}
        local = registry.evaluate(op, first, config=dict(config), grad_outputs={"y": _cut(cot["y"], sizes, 0)[0]},
                                  training=training)
        grads = dict(full.grads)
        grads.update({k: v for k, v in local.grads.items() if k in ("weight", "bias")})
        return Result(full.outputs, grads, full.state)
    return fn


def _local_rms(inputs, config, cot, dtype, state, training, *, sizes):
    """Each rank an RMSNorm of its own hidden slice; rstd as rank 0 holds it."""
    xs = _cut(inputs["x"], sizes, inputs["x"].ndim - 1)
    ws = _cut(inputs["weight"], sizes, 0) if "weight" in inputs else [None] * len(sizes)
    dys = _cut(cot["y"], sizes, cot["y"].ndim - 1) if cot else [None] * len(sizes)
    ys, dxs, dws, rstd0 = [], [], [], None
    for s, w, d in zip(xs, ws, dys):
        if s.shape[-1] == 0:
            ys.append(s), dxs.append(s), dws.append(np.zeros(0))
            continue
        cfg = {**config, "normalized_shape": [s.shape[-1]]}
        r = registry.evaluate("rms_norm", {"x": s, **({} if w is None else {"weight": w})}, config=cfg,
                              grad_outputs=None if d is None else {"y": d}, training=training)
        rstd0 = r.outputs["rstd"] if rstd0 is None else rstd0
        ys.append(r.outputs["y"])
        if d is not None:
            dxs.append(r.grads["x"])
            dws.append(r.grads.get("weight"))
    grads = {}
    if cot:
        grads["x"] = np.concatenate(dxs, axis=-1)
        if "weight" in inputs:
            grads["weight"] = np.concatenate(dws)
    return Result({"y": np.concatenate(ys, axis=-1), "rstd": rstd0}, grads, {})


def _unequal(sizes):
    return len(set(sizes)) > 1


# (id, pitfall ids, title, parallel, op, fn, when(sizes) -> bool)
SPECS = (
    ("E08", ("E08",), "SyncBatchNorm statistics averaged over ranks unweighted (ranks with different N*H*W)",
     "batch", "batch_norm", functools.partial(_sync_bn, stats="unweighted"), _unequal),
    ("E09", ("E09",), "SyncBatchNorm backward: mean_dy / mean_dy_xmu averaged over ranks unweighted",
     "batch", "batch_norm", functools.partial(_sync_bn, means="unweighted"), _unequal),
    ("DP-RS1", ("DP-RS1",), "SyncBatchNorm running_var updated with rank 0's local variance", "batch", "batch_norm",
     functools.partial(_sync_bn, running="local_var"), None),
    ("DP-RS2", ("DP-RS2",), "SyncBatchNorm running_var's unbiased correction n/(n-1) with the local count", "batch",
     "batch_norm", functools.partial(_sync_bn, running="local_count"), None),
    ("DP-SP1-layer_norm", ("DP-SP1",), "sequence parallelism: weight/bias gradients not all-reduced (rank 0's partial "
     "sums)", "sequence", "layer_norm", _unreduced_param_grads("layer_norm"), None),
    ("DP-SP1-rms_norm", ("DP-SP1",), "sequence parallelism: weight gradient not all-reduced (rank 0's partial sum)",
     "sequence", "rms_norm", _unreduced_param_grads("rms_norm"), None),
    ("DP-TP1", ("DP-TP1",), "tensor parallelism: the sum of squares of the rank's own hidden slice only", "tensor",
     "rms_norm", _local_rms, None),
)
IDS = tuple(sorted({s[1][0] for s in SPECS}))


def reference(parallel, sizes):
    """The correct merge, as a variant's fn (tests: equal to the global op for any split)."""
    if parallel == "batch":
        return functools.partial(_sync_bn, sizes=sizes)
    raise ValueError(parallel)


def bound(parallel: str, sizes) -> tuple:
    """The variants of one distributed case (``parallel``, split ``sizes``), as ``pitfalls.Variant``s."""
    out = []
    for vid, ids, title, par, op, fn, when in SPECS:
        if par != parallel or (when is not None and not when(sizes)):
            continue
        out.append(Variant(vid, ids, title, op, fn=functools.partial(fn, sizes=list(sizes))))
    return tuple(out)


def variant(vid: str, sizes) -> Variant:
    """The variant ``vid`` bound to the split ``sizes``."""
    for s in SPECS:
        if s[0] == vid:
            return Variant(s[0], s[1], s[2], s[4], fn=functools.partial(s[5], sizes=list(sizes)))
    raise KeyError(f"no distributed variant {vid!r}; expected one of: {', '.join(s[0] for s in SPECS)}")
