"""The compiled block pipeline of the streaming judge (stream.py): a block of rows of layer_norm or group_norm
judged in one call of ``_judge.judge_rows``, a few rows at a time, instead of stage after stage over the whole
block.

Why: judged stage after stage, a block's float64 temporaries (the widened inputs, the reference's y and dx,
their bounds: six arrays of 2 MiB) go out to memory between the stages, and every stage waits on it
(docs/performance.md, round 10); judged a few rows at a time (_judge.c's SUB_ELEMENTS values), they stay in
the L2 cache from one stage to the next. Nothing else changes: each stage is the very code of the path it
replaces (the reference: _fused's kernels, through its capsule ``api``, as the normalizer runs them,
``row_kernel``; the bounds: the row_bounds loop with the scalars and parameter pattern the bounds layer
chose; the comparison: compare's loop), so the reference is the same bits, and the figures are the same
(the sums of the bias test within rounding: compare's pieces also end where judge_rows' pieces do).

Used when the normalizer has a ``row_kernel`` (layer_norm, group_norm over rows; batch_norm with batch
statistics over blocks of channels, each channel gathered from its N runs: the compiled kernels in use), the
arrays judged are y and grad x (and, if returned, the rows' mean and rstd, and the parameter gradients),
under any contracts, with x and dy laid out C-contiguous. The call's first unit (row, sample or channel),
made stage by stage once (stream.first_unit, which core also reads the names judged from), shows which
bounds the bounds layer computes (``bounds._rows.seen_calls``: one compiled row_bounds call per contract,
its scalars and parameter pattern, which the pipeline then runs itself) and that the reference accepts the
call; partition 0 makes the Pipeline from it (``prepare``) and the other partitions wait for it and share it.
Partition 0's first block then goes through the pipeline (a block of one unit: the figures of its stages
are kept), and so does every other block. The running scale of "unconstrained" (compare.ArrayAccumulator) starts, as ``add`` starts it
from a first block's reference, from the reference of the first piece. Any other call, or a build without
the compiled modules, takes the stage-by-stage path for every block.

One difference, within rounding: a batch_norm block of a single channel is judged stage by stage against
the reference of a one-channel array, whose sums NumPy takes in one run over the N runs; the pipeline sums
each channel as the whole call does (the running sum of the runs' sums), the bits of the whole-array
reference.
"""
from __future__ import annotations

import importlib

import numpy as np

from ..norms import _common
from .compare import KIND, native

OPS = ("layer_norm", "group_norm")     # the normalizers with a row_kernel over rows (batch_norm's: channels)
JUDGED = {("outputs", "y"), ("grads", "x")}
STATS = {("outputs", "mean"), ("outputs", "rstd")}        # judged from the rows' values judge_rows returns
SUMMED = {("grads", "weight"), ("grads", "bias")}


class Pipeline:
    """judge_rows' fixed arguments for the blocks of one call (``prepare``)."""

    def __init__(self, mod, api, x, dy, kind, kernel, seen, pshapes, channels=False):
        self.mod, self.api = mod, api
        # x, dy: (units, rest) views of the inputs, or (channels) (N, C, S) views of them
        self.x, self.dy, self.kind, self.channels = x, dy, kind, channels
        self.k = kernel                                     # _common.RowKernel
        self.seen = seen                  # per contract: its row_bounds call's scalars and parameter pattern
        self.pshapes = pshapes            # {"weight"|"bias": the parameter's shape}
        s = seen[0]
        self.bw, self.bb = (None if a is None else a.reshape(-1) for a in (s["w"], s["b"]))
        self.wrows, self.wcols = s["pattern"]

    def run(self, lo, hi, accs, ref_whole, E_whole):
        """Units lo..hi-1 judged: y's and dx's figures (and mean's and rstd's) into their accumulators, one per
        contract; the parameter gradients' reference and bounds added to ref_whole and E_whole as the
        stage-by-stage path adds them."""
        if self.channels:
            return self._channels(lo, hi, accs)
        k, units = self.k, hi - lo
        rows = units * k.rows_per_unit
        x, dy = (a[lo:hi].reshape(rows, -1) for a in (self.x, self.dy))
        n = x.shape[1]
        tile = (lambda a: a) if not k.merged else (lambda a: np.tile(a, units))     # a value per segment of each row
        kw, kb = (None if a is None else tile(a) for a in (k.w, k.b))
        slen = rows * k.P if k.merged else n
        sxy = None if k.w is None else np.empty(slen)
        sy = None if k.b is None else np.empty(slen)
        runs = self._runs(accs, self.wrows * self.wcols, rows, lo * (x.size // units), x.size)
        figures = self.mod.judge_rows(self.api, x, dy, self.kind, k.P, k.merged, kw, kb, k.eps, sxy, sy, self.bw,
                                      self.bb, self.wrows, self.wcols, tuple(runs))
        for j, ((_, tw, tb, st, _, _), figs) in enumerate(zip(runs, figures)):
            _absorb(accs, j, figs, st, lo * k.rows_per_unit)
            for name, E in (("weight", tw), ("bias", tb)):
                if ("grads", name) in E_whole:
                    E_whole[("grads", name)][j] = E_whole[("grads", name)][j] + E.reshape(self.pshapes[name])
        for name, ref in (("weight", sxy), ("bias", sy)):
            key = ("grads", name)
            if key in E_whole:
                ref_whole[key] = ref_whole.get(key, 0.0) + k.fold(ref, units).reshape(self.pshapes[name])

    def _channels(self, lo, hi, accs):
        """Channels lo..hi-1 judged (batch_norm's blocks): every array by channel, as the stage-by-stage path
        judges them along their channel axis."""
        k, units = self.k, hi - lo
        x, dy = self.x[:, lo:hi], self.dy[:, lo:hi]
        kw, kb = (None if a is None else a[lo:hi] for a in (k.w, k.b))
        sxy = None if k.w is None else np.empty(k.P * units)
        sy = None if k.b is None else np.empty(k.P * units)
        runs = self._runs(accs, units, units, lo, units, channels=True)
        figures = self.mod.judge_rows(self.api, x, dy, self.kind, k.P, 2, kw, kb, k.eps, sxy, sy, kw, kb, units, 1,
                                      tuple(runs))
        dw, db = (None if a is None else k.fold(a, units) for a in (sxy, sy))
        for j, ((_, tw, tb, st, _, _), figs) in enumerate(zip(runs, figures)):
            _absorb(accs, j, figs, st, lo, axis=0)
            for name, ref, E in (("weight", dw, tw), ("bias", db, tb)):
                if ("grads", name) in accs:
                    accs[("grads", name)][j].add(ref, E, lo, axis=0)


    def _runs(self, accs, terms, rows, *block, **channels):
        """judge_rows' contracts: per contract its bounds' scalars, its parameter terms (``terms`` zeros each for
        the weight and the bias), room for the rows' mean and rstd and their bounds if judged, and y's and dx's
        ``block_args`` of ``block``."""
        stats = any(key in accs for key in STATS)
        return [(s["scalars"], np.zeros(terms), np.zeros(terms), np.empty((4, rows)) if stats else None,
                 *(accs[name][j].block_args(*block, **channels) for name in (("outputs", "y"), ("grads", "x"))))
                for j, s in enumerate(self.seen)]


def _absorb(accs, j, figures, stats, start, **axis):
    """Contract j's figures of y and dx from judge_rows into their accumulators, and the rows' mean and rstd
    (``stats``: their values and bounds, the first at ``start``) judged where they are returned."""
    for name, res in zip((("outputs", "y"), ("grads", "x")), figures):
        accs[name][j].absorb(res)
    for i, name in enumerate(("mean", "rstd")):
        if ("outputs", name) in accs:
            accs[("outputs", name)][j].add(stats[i], stats[2 + i], start, **axis)


def applies(p, op, state) -> bool:
    """Whether the pipeline may judge the blocks of plan ``p`` of this call (``prepare`` decides): the other
    calls are not probed at all."""
    return not state and ((op in OPS and p.kind == "rows") or (op == "batch_norm" and p.kind == "channels"))


def prepare(p, op, config, inputs, cotangents, state, names, contracts, ins, seen, rows_view):
    """The Pipeline for the blocks of this call, or None (module docstring). ``ins``: the float64 inputs of
    the unit judged stage by stage first; ``seen``: the compiled row_bounds calls its bounds made (one per
    contract, in their order); ``rows_view(a)``: array ``a`` as (units, rest) without a copy, or None."""
    mod = native()
    fused = _common.native()
    if op == "batch_norm" and p.kind == "channels":
        return _prepare_channels(p, config, inputs, cotangents, state, names, contracts, ins, seen, mod, fused)
    if op not in OPS or p.kind != "rows" or state or mod is None or fused is None:
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
    kernel = importlib.import_module(f"..norms.{op}", __package__).row_kernel(ins, config)
    if kernel is None or not (x.flags.c_contiguous and dy.flags.c_contiguous):
        return None
    n = x.shape[1] // kernel.rows_per_unit
    if not all(s["runs"] == 1 and s["wdiv"] == 1 and s["with_g"] and s["shape"][1] == n
               and s["pattern"] == seen[0]["pattern"] for s in seen):
        return None
    # layer_norm's column sums over a block are one run of rows (layer_norm.backward: one block of C.blocks)
    if not kernel.merged and len(_common.blocks(p.per_block, n)) != 1:
        return None
    if x.dtype.itemsize == 2:
        x, dy = x.view(np.uint16), dy.view(np.uint16)
    pshapes = {k: np.shape(inputs[k]) for k in ("weight", "bias") if inputs.get(k) is not None}
    return Pipeline(mod, api, x, dy, KIND[np.asarray(inputs["x"]).dtype.name], kernel, seen, pshapes)


def _prepare_channels(p, config, inputs, cotangents, state, names, contracts, ins, seen, mod, fused):
    """prepare for batch_norm's blocks of channels (batch statistics, no running statistics)."""
    if state or mod is None or fused is None or getattr(fused, "api", None) is None:
        return None
    names = set(names)
    if getattr(mod, "judge_rows", None) is None or not JUDGED <= names or not names <= JUDGED | STATS | SUMMED:
        return None
    if len(seen) != len(contracts) or "y" not in cotangents:
        return None
    x, dy = np.asarray(inputs["x"]), np.asarray(cotangents["y"])
    if x.ndim < 2 or x.dtype != dy.dtype or x.dtype.name not in KIND or x.shape != dy.shape:
        return None
    # the kernel of the whole call (its N, its per-channel parameters), cut by channel here
    kernel = importlib.import_module("..norms.batch_norm", __package__).row_kernel(inputs, config)
    if kernel is None or not (x.flags.c_contiguous and dy.flags.c_contiguous):
        return None
    N, C = x.shape[:2]
    n = x.size // C
    # the bounds' rows gathered from the N runs of each channel (x of two axes: runs of one value, which the
    # bounds layer transposes instead; the same values in the same order)
    runs = (N, 1) if x.ndim == 2 else (N,)
    if not all(s["runs"] in runs and s["wdiv"] == 1 and s["with_g"] and s["shape"][1] == n
               and s["pattern"] == (s["shape"][0], 1) for s in seen):
        return None
    x3, dy3 = x.reshape(N, C, -1), dy.reshape(N, C, -1)
    if x.dtype.itemsize == 2:
        x3, dy3 = x3.view(np.uint16), dy3.view(np.uint16)
    return Pipeline(mod, fused.api, x3, dy3, KIND[x.dtype.name], kernel, seen, {}, channels=True)
