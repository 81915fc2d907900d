"""The compiled block pipeline of the streaming judge (stream.py): a block of layer_norm rows judged in one
call of ``_judge.judge_rows``, a few rows at a time, instead of stage after stage over the whole block.

Why: judged stage after stage, a block's float64 temporaries (the widened inputs, the reference's y and dx,
their bounds: six arrays of 2 MiB) go out to memory between the stages, and every stage waits on it
(docs/performance.md, round 10); judged a few rows at a time (_judge.c's SUB_ELEMENTS values), they stay in
the L2 cache from one stage to the next. Nothing else changes: each stage is the very code of the path it
replaces (the reference: _fused's kernels, through its capsule ``api``; the bounds: the row_bounds loop with
the scalars the bounds layer chose; the comparison: compare's loop), so the reference is the same bits and
the figures are the same (the bias sums added in the same order).

Used for a block of a partition after its first, when the call is layer_norm (rows over the trailing axes, the
compiled kernels in use: ``layer_norm.row_kernel``), the arrays judged are y and grad x (and, if returned, the
rows' mean and rstd, and the parameter gradients, summed over the blocks), under any contracts, with x and dy laid out as C-contiguous rows; the first
block of each partition takes the stage-by-stage path, which fixes the running scale of "unconstrained"
(compare.ArrayAccumulator) and shows which bounds the bounds layer computes (``bounds._rows.seen_calls``:
one compiled row_bounds call per contract, its scalars and parameter pattern, which the pipeline then runs
itself). Any
other call, or a build without the compiled modules, takes the stage-by-stage path for every block.
"""
from __future__ import annotations

import numpy as np

from ..norms import _common
from ..norms import layer_norm
from .compare import KIND, native

JUDGED = {("outputs", "y"), ("grads", "x")}
STATS = {("outputs", "mean"), ("outputs", "rstd")}        # judged from the rows' values judge_rows returns
SUMMED = {("grads", "weight"), ("grads", "bias")}


class Pipeline:
    """judge_rows' fixed arguments for the blocks of one call (``prepare``)."""

    def __init__(self, mod, api, x, dy, kind, w, b, eps, seen, n, pshapes):
        self.mod, self.api = mod, api
        self.x, self.dy, self.kind = x, dy, kind
        self.w, self.b, self.eps = w, b, eps
        self.seen = seen                  # per contract: its row_bounds call's scalars and parameter pattern
        self.n = n
        self.pshapes = pshapes            # {"weight"|"bias": the parameter's shape}

    def run(self, lo, hi, accs, ref_whole, E_whole):
        """Rows lo..hi-1 judged: y's and dx's figures (and mean's and rstd's) into their accumulators, one per
        contract; the parameter gradients' reference and bounds added to ref_whole and E_whole as the
        stage-by-stage path adds them."""
        n, m = self.n, hi - lo
        sxy = None if self.w is None else np.empty(n)
        sy = None if self.b is None else np.empty(n)
        stats = any(k in accs for k in STATS)
        runs = []
        for j, s in enumerate(self.seen):
            tw, tb = np.zeros(s["pattern"]), np.zeros(s["pattern"])
            st = np.empty((4, m)) if stats else None
            runs.append((s["scalars"], tw.reshape(-1), tb.reshape(-1), st,
                         accs[("outputs", "y")][j].block_args(lo * n, m * n),
                         accs[("grads", "x")][j].block_args(lo * n, m * n)))
        figures = self.mod.judge_rows(self.api, self.x[lo:hi], self.dy[lo:hi], self.kind, self.w, self.b, self.eps,
                                      sxy, sy, tuple(runs))
        for j, ((_, tw, tb, st, _, _), (ry, rdx)) in enumerate(zip(runs, figures)):
            accs[("outputs", "y")][j].absorb(ry)
            accs[("grads", "x")][j].absorb(rdx)
            for i, name in enumerate(("mean", "rstd")):
                if ("outputs", name) in accs:
                    accs[("outputs", name)][j].add(st[i], st[2 + i], lo)
            for name, E in (("weight", tw), ("bias", tb)):
                if ("grads", name) in E_whole:
                    E_whole[("grads", name)][j] = E_whole[("grads", name)][j] + E.reshape(self.pshapes[name])
        for name, ref in (("weight", sxy), ("bias", sy)):
            key = ("grads", name)
            if key in E_whole:
                ref_whole[key] = ref_whole.get(key, 0.0) + ref.reshape(self.pshapes[name])


def prepare(p, op, config, inputs, cotangents, state, names, contracts, ins, seen, rows_view):
    """The Pipeline for the blocks of this call after each partition's first, or None (module docstring).
    ``ins``: the first block's float64 inputs; ``seen``: the compiled row_bounds calls its bounds made (one
    per contract, in their order); ``rows_view(a)``: array ``a`` as (rows, rest) without a copy, or None."""
    mod = native()
    fused = _common.native()
    if op != "layer_norm" or p.kind != "rows" or state or mod is None or fused is None:
        return None
    api, judge_rows = getattr(fused, "api", None), getattr(mod, "judge_rows", None)
    names = set(names)
    if api is None or judge_rows is None or not JUDGED <= names or not names <= JUDGED | STATS | SUMMED:
        return None
    if len(seen) != len(contracts) or "y" not in cotangents:
        return None
    x, dy = rows_view(inputs["x"]), rows_view(cotangents["y"])
    if x is None or dy is None or x.dtype != dy.dtype or x.dtype.name not in KIND:
        return None
    n = x.shape[1]
    if not (x.flags.c_contiguous and dy.flags.c_contiguous) or not all(
            s["runs"] == 1 and s["wdiv"] == 1 and s["pattern"][0] == 1 and s["with_g"] and s["shape"][1] == n
            for s in seen):
        return None
    kernel = layer_norm.row_kernel(ins, config)
    # the reference's column sums over a block are one run of rows (layer_norm.backward: one block of C.blocks)
    if kernel is None or len(_common.blocks(p.per_block, n)) != 1:
        return None
    w, b, eps = kernel
    if x.dtype.itemsize == 2:
        x, dy = x.view(np.uint16), dy.view(np.uint16)
    pshapes = {k: np.shape(inputs[k]) for k in ("weight", "bias") if inputs.get(k) is not None}
    return Pipeline(mod, api, x, dy, KIND[np.asarray(inputs["x"]).dtype.name], w, b, eps, seen, n, pshapes)
