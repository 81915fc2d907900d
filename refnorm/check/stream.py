"""The streaming judge: one call judged in blocks of rows, with bounded memory.

A normalizer whose call is independent along its leading axes (layer_norm and rms_norm over the axes
before ``normalized_shape``; group_norm, group_norm_silu, instance_norm without running statistics and
weight_standardization over axis 0: "rows"), or channel by channel (batch_norm, its running statistics
included: "channels", CHANNEL_AXES) is judged block by block: each block of rows gets its own float64
reference, bounds and comparison, and only the figures are kept (compare.ArrayAccumulator). What is
held at any time is the backend's own arrays, the multiplicities of the judged arrays (bias test: 2
bytes an element up to EXACT_SLOTS values, compare.SaturatedCounts; for 16-bit dtypes a table of their 65536 bit patterns'
counts, compare.PatternCounts; beyond EXACT_SLOTS, a table of 2^24 bucket counts, compare.BucketCounts;
none at first for large 32/64-bit arrays, "Multiplicities" below) and two blocks' float64 temporaries (BLOCK_ELEMENTS elements of the activation
per block): the blocks are dealt out to two partitions (even and odd blocks, PARTS), each judged whole,
block after block, in a thread of its own (the compiled loops release the GIL: the judge uses two
cores, as torch does; the reference runs single-threaded inside, _common.one_thread), and the two
partitions' figures are merged at the end in a fixed order (ArrayAccumulator.merge), so they do not
depend on the thread count.

Exactly the same judgement as the whole-array path (core._judge), block by block:
- outputs and gradients of the rows (y, mean, rstd, grad x) are judged by element, their figures
  accumulated over the blocks (an element's bound depends on its own row only);
- gradients of the shared parameters (weight, bias) are sums over the rows: the reference and the
  bound are summed over the blocks, and the sum is judged at the end; the bound's reduction term
  g(m) is that of all m rows (``bounds.standardize.param_rows``), not of a block's; a state entry
  shared by the channels (num_batches_tracked) is judged whole;
- the scale of "unconstrained" (max |reference| of an array) is known only after the last block: each
  block is judged against the running scale (of the blocks before it, in its partition), and the few
  elements it cannot decide are kept and decided at the end (compare.ArrayAccumulator with
  scale=None), so the reference is computed once; when they are too many, the call is judged again
  with the scales known.
The figures equal the whole-array path's within rounding (the parameter sums and the bias test's sums
are added in another order); tests/test_stream.py checks verdicts and figures against it.

Multiplicities. The bias test (bias.py) needs, for every returned value, how many elements of the whole
array hold it: an exact count of 16M float32 values costs ~250 ms of CPU (two such arrays: ~45% of a
layer_norm 4096x4096 judgement, docs/performance.md round 6), where the rest of the test costs a few
ns an element. A count c >= 1 only enlarges the allowance (sum E + sqrt(c * sum w^2 * count)), so the
figure computed with every count taken as 1 bounds the exact figure from above. An array of 4M or more
32- or 64-bit values (UNIT_FIRST_ELEMENTS) is judged that way first: when that figure is at most 1, the
test passes with the exact counts too (the same verdict), and the figure is reported as an upper bound
(``ArrayResult.bias_bound``; on 16M-value float32 layer_norm and rms_norm outputs it is within 1e-4
of the exact one); when it exceeds 1, the array's values are counted and the call judged again, and
the exact figure is reported. Smaller arrays and 16-bit dtypes are counted exactly from the start, so
no stored golden case is affected.

Used for a call when its activation has more than BLOCK_ELEMENTS elements and ``plan`` finds a row
structure (every judged array a view of rows); otherwise the whole-array path runs.

The compiled block pipeline (pipeline.py). Stage after stage over a block (the reference, the bounds, then
the comparison), the block's float64 temporaries go out to memory between the stages. For layer_norm,
group_norm and batch_norm (batch statistics), each block is judged by one compiled call instead
(``_judge.judge_rows``), a few rows at a time, with the same kernels, bounds and comparison: the same
reference bits and the same figures (the sums of the bias test within rounding); the call's first unit,
made stage by stage once (``first_unit``: core reads from it the names judged), shows which bounds to run
(partition 0 probes; the other partitions wait for it and use the same Pipeline). PIPELINE = False judges
every block stage by stage.
"""
from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..norms._common import one_thread, run_blocks
from . import bounds as B
from . import pipeline
from .bounds._rows import seen_calls
from .compare import (EXACT_SLOTS, ArrayAccumulator, BucketCounts, PatternCounts, SaturatedCounts, compiled,
                      multiplicities, native)

BLOCK_ELEMENTS = 1 << 18
PIPELINE = True     # the compiled block pipeline for the blocks it takes (pipeline.py); False: stage by stage

ROW_OPS = ("layer_norm", "rms_norm", "group_norm", "instance_norm", "weight_standardization", "group_norm_silu")
ROW_INPUTS = ("x",)       # the inputs of those ops that hold rows; the others (weight, bias) are shared
# what a generated case judged in blocks holds per element of its activation, at the peak: the drawn
# inputs and cotangents, the backend's private copies and results, torch's own buffers, the bias
# test's multiplicities (measured: layer_norm 4096x4096 float32 and bfloat16 through `refnorm check
# --generate`, ~53 bytes; docs/performance.md), with a margin
BYTES_PER_ELEMENT = 80


def bytes_per_element(op) -> int | None:
    """Bytes per activation element of judging a generated case of ``op`` in blocks (None: judged
    whole, generate.BYTES_PER_ELEMENT)."""
    return BYTES_PER_ELEMENT if op in ROW_OPS or op in CHANNEL_AXES else None


CHANNEL_AXES = {    # batch_norm: every channel on its own; the axis of each array that holds the channels
    "batch_norm": {"inputs": {"x": 1, "weight": 0, "bias": 0}, "cotangents": {"y": 1},
                   "state": {"running_mean": 0, "running_var": 0},
                   "outputs": {"y": 1, "mean": 0, "rstd": 0}, "grads": {"x": 1, "weight": 0, "bias": 0}},
}


@dataclass
class Plan:
    kind: str             # "rows": the leading axes, merged into rows; "channels": one axis per array
    units: int            # rows or channels
    per_block: int        # units per block
    lead: int = 0         # rows: how many leading axes
    axes: dict = field(default_factory=dict)   # channels: {part: {name: axis}} (CHANNEL_AXES)

    def axis(self, part, name):
        """The axis of array ``name`` of ``part`` that the blocks cut (None: shared, or summed)."""
        if self.kind == "rows":
            return 0 if part in ("cotangents", "outputs") or name in ROW_INPUTS else None
        return self.axes.get(part, {}).get(name)

    def take(self, part, name, a, lo, hi):
        """Units lo..hi-1 of array ``a`` (``a`` itself when shared)."""
        ax = self.axis(part, name)
        if ax is None:
            return a
        if self.kind == "rows":
            return _rows_view(a, self.lead, self.units)[lo:hi].reshape((hi - lo,) + np.shape(a)[self.lead:])
        return np.asarray(a)[(slice(None),) * ax + (slice(lo, hi),)]

    def viewable(self, part, name, a) -> bool:
        return self.kind != "rows" or self.axis(part, name) is None or _rows_view(a, self.lead, self.units) is not None


def _rows_view(a, lead, rows):
    """``a`` as (rows, rest) without a copy, or None when its strides do not allow it."""
    a = np.asarray(a)
    v = a.view()
    try:
        v.shape = (rows, -1) if a.size else (rows, 0)
    except AttributeError:
        return None
    return v


def plan(op, config, training, inputs, state, block_elements=None) -> Plan | None:
    """How to judge one call in blocks, or None (the whole-array path)."""
    block_elements = block_elements or BLOCK_ELEMENTS
    x = inputs.get("x")
    if x is None or np.size(x) <= block_elements:
        return None
    x = np.asarray(x)
    if op in CHANNEL_AXES and x.ndim >= 2 and x.shape[1] >= 2:
        per = max(1, x.size // x.shape[1])
        return Plan("channels", x.shape[1], max(1, block_elements // per), axes=CHANNEL_AXES[op])
    if op not in ROW_OPS or state:
        return None
    if op in ("layer_norm", "rms_norm"):
        ns = config.get("normalized_shape")
        k = 1 if isinstance(ns, int) else len(ns or ())
        lead = x.ndim - k
    else:
        lead = 1
    if lead < 1:
        return None
    rows = math.prod(x.shape[:lead])
    per_row = max(1, x.size // max(rows, 1))
    if rows < 2:
        return None
    return Plan("rows", rows, max(1, block_elements // per_row), lead=lead)


def pipelined(p: Plan, op, state) -> bool:
    """Whether the compiled block pipeline may judge this call's blocks (its probe decides)."""
    return PIPELINE and pipeline.applies(p, op, state)


def block_stages(p: Plan, op, case_dtype, config, training, given, contracts, reference, derive_bounds, lo, hi,
                 dry=False):
    """Units lo..hi-1's reference and bounds, stage by stage (``given``: {"inputs"|"cotangents"|"state":
    {name: array}} of the call): (float64 inputs, reference, [bounds per contract], the compiled row_bounds
    calls made). ``dry``: the compiled row bounds only seen, not computed (``bounds._rows.seen_calls``):
    the bounds' names and the calls are right, the values they hold are not (for the names judged and the
    pipeline's probe only)."""
    # widened to float64 once for the reference and the bounds, read-only (neither writes); the arrays shared
    # out over the threads (run_blocks: one at a time inside one_thread), their fresh memory faulted in at once
    keys = [(part, k) for part, d in given.items() for k in d]
    one = lambda i: _f64_block(p.take(keys[i][0], keys[i][1], given[keys[i][0]][keys[i][1]], lo, hi))   # noqa: E731
    if (hi - lo) * sum(np.size(v) for d in given.values() for v in d.values()) // p.units >= 1 << 17:
        wide = run_blocks(lambda i, _: one(i), [(i, i + 1) for i in range(len(keys))])
    else:                               # small: not worth a thread
        wide = [one(i) for i in range(len(keys))]
    ins, cots, st = ({k: w for (q, k), w in zip(keys, wide) if q == part} for part in given)
    ref = reference(op, config, training, ins, cots, st)
    with B.standardize.param_rows(p.units / (hi - lo) if p.kind == "rows" else 1.0), seen_calls(dry) as seen:
        Es = [derive_bounds(op, case_dtype, config, training, ins, cots, st, ref, c) for c in contracts]
    return ins, ref, Es, seen


def first_unit(p: Plan, op, case_dtype, config, training, given, contracts, reference, derive_bounds):
    """``block_stages`` of unit 0, as ``judge_blocked`` takes it: dry where the pipeline may judge the blocks
    (the names and the probe's calls are all it is needed for there)."""
    return block_stages(p, op, case_dtype, config, training, given, contracts, reference, derive_bounds, 0, 1,
                        dry=pipelined(p, op, given["state"]))


def judge_blocked(p: Plan, op, case_dtype, config, training, inputs, cotangents, state, got, compare, contracts,
                  reference, derive_bounds, first):
    """Judge one call in blocks (module docstring). ``got``: {"outputs"|"grads"|"state": {name: array}} as
    the backend returned them (already checked for names, shapes and dtypes, and in the case dtype);
    ``compare``: the names to judge; ``contracts``: the declared contract first, then any other whose
    ratio is reported (the strict one under a relaxed contract). Returns {(part, name): [figures of
    core.ArrayResult, one per contract]}, where an array judged whole at the end (a parameter gradient
    summed over the blocks; a shared state entry) has instead ("whole", reference, [bound per
    contract]); or None when some array cannot be cut into blocks (the caller judges whole arrays).
    ``first``: ``first_unit`` of this call (made by the caller, not made again; where it is dry, unit 0 is
    judged by the pipeline, or stage by stage anew where none runs)."""
    given = {"inputs": inputs, "cotangents": cotangents, "state": state}
    if p.axis("inputs", "x") is None or not all(p.viewable(part, k, v) for part, d in given.items()
                                                  for k, v in d.items()):
        return None
    names = [(part, k) for part in ("outputs", "grads", "state") for k in compare[part] if k in got[part]]
    if any(part == "outputs" and p.axis(part, k) is None for part, k in names):
        return None
    whole = {n for n in names if p.axis(*n) is None}          # summed gradients, shared state

    edges = list(range(0, p.units, p.per_block)) + [p.units]
    spans = list(zip(edges[:-1], edges[1:]))
    judged = [n for n in names if n not in whole]

    # the pipeline's probe: made once, by partition 0, from the first unit; the other partitions wait for it and
    # judge all their blocks with the Pipeline it made (or stage by stage if it made none; a failed probe
    # releases them too)
    dry = pipelined(p, op, state)                  # first_unit made unit 0 dry then
    probe = {"done": threading.Event(), "pipe": None}

    def pipeline_for(k):
        if not dry:
            return None
        if k == 0 and not probe["done"].is_set():
            try:
                probe["pipe"] = pipeline.prepare(p, op, config, inputs, cotangents, state, names, contracts, first[0],
                                                 first[3], lambda a: _rows_view(a, p.lead, p.units))
            finally:
                probe["done"].set()
        probe["done"].wait()
        return probe["pipe"]

    def judge_part(k, scale, unit, mults):
        """Partition k: the blocks k, k + PARTS, ... judged in order into accumulators of its own; returns
        (accumulators, summed references of the arrays judged whole, their summed bounds)."""
        accs = {}
        for n in judged:
            a = got[n[0]][n[1]]
            s = None if scale is None else scale[n]
            kw = dict(unit_counts=True) if n in unit else dict(mult=mults[n])
            acc0 = ArrayAccumulator(a, s, case_dtype if n[0] != "state" else _dtype_name(a), **kw)
            accs[n] = [acc0] + [ArrayAccumulator(a, s, acc0.kind_name, **kw) for _ in contracts[1:]]
        ref_whole, E_whole = {}, {n: [0.0 for _ in contracts] for n in whole}

        pipe = pipeline_for(k)
        with reuse_blocks(), one_thread():      # freed block temporaries reused; the reference in this thread
            for lo, hi in spans[k::PARTS]:
                if pipe is not None:            # the compiled block pipeline (pipeline.py)
                    pipe.run(lo, hi, accs, ref_whole, E_whole)
                    continue
                if (lo, hi) == (0, 1) and not dry:          # made by the caller already
                    ins, ref, Es, _ = first
                else:
                    ins, ref, Es, _ = block_stages(p, op, case_dtype, config, training, given, contracts, reference,
                                                   derive_bounds, lo, hi)
                memo = {}                     # the block's widened values and counts, made once for all contracts
                for part, name in names:
                    a = getattr(ref, part)[name]
                    if (part, name) in whole:
                        if part == "grads":
                            ref_whole[(part, name)] = ref_whole.get((part, name), 0.0) + np.asarray(a, dtype=np.float64)
                        else:
                            ref_whole[(part, name)] = np.asarray(a)      # shared state: the same in every block
                        for j, E in enumerate(Es):
                            e = np.asarray(E[part][name], dtype=np.float64)
                            E_whole[(part, name)][j] = E_whole[(part, name)][j] + e if part == "grads" else e
                        continue
                    for j, E in enumerate(Es):
                        if p.kind == "rows":
                            accs[(part, name)][j].add(a, E[part][name], lo * (int(np.size(a)) // (hi - lo)), memo=memo)
                        else:
                            accs[(part, name)][j].add(a, E[part][name], lo, axis=p.axis(part, name), memo=memo)
                del ref, Es, memo
        return accs, ref_whole, E_whole

    with reuse_blocks():              # freed block temporaries reused, not faulted in afresh
        unit = {n for n in judged if _unit_first(got[n[0]][n[1]])}       # multiplicities taken as 1 first
        mults = dict(zip([n for n in judged if n not in unit], _multiplicities([got[n[0]][n[1]] for n in judged
                                                                                 if n not in unit])))
        scale = None                                  # one pass, the running scale (compare.ArrayAccumulator)
        while True:
            # partition 0 here, 1 in the reference's helper thread (run_blocks: the caller's NumPy error state;
            # judge_part sets the bounds' context itself); one after the other with one thread
            parts = run_blocks(lambda k, _: judge_part(k, scale, unit, mults),
                               [(k, k + 1) for k in range(min(PARTS, len(spans)))])
            accs, ref_whole, E_whole = parts[0]
            for other, rw, ew in parts[1:]:          # partition 0's figures, then 1's added: a fixed order
                for n in judged:
                    for acc, o in zip(accs[n], other[n]):
                        acc.merge(o)
                for n in whole:
                    ref_whole[n] = ref_whole[n] + rw[n] if n[0] == "grads" else ref_whole[n]
                    E_whole[n] = [e + f for e, f in zip(E_whole[n], ew[n])] if n[0] == "grads" else E_whole[n]
            # an array whose bias test fails with every multiplicity 1 is judged again with its exact counts
            recount = [n for n in sorted(unit) if any(acc.bias()[0] > 1.0 for acc in accs[n])]
            if recount or (scale is None and any(acc.overflowed for n in judged for acc in accs[n])):
                unit -= set(recount)
                mults.update(zip(recount, _multiplicities([got[n[0]][n[1]] for n in recount])))
                scale = {n: accs[n][0].scale for n in judged}     # the scales known: judge again with them
                continue
            break
        out = {n: [acc.figures() for acc in accs[n]] for n in accs}
        for n in whole:
            out[n] = ("whole", ref_whole[n], E_whole[n])
        return out


def _f64_block(v):
    """A block's array in float64, read-only (integers as they are)."""
    v = np.asarray(v)
    if v.dtype.kind in "iu":
        return v
    out = np.asarray(v, dtype=np.float64)
    if out is v:
        out = v.view()
    out.flags.writeable = False
    return out


PARTS = 2   # the blocks dealt out to two partitions (even, odd), whatever the thread count: the same figures


@contextmanager
def reuse_blocks():
    """Within: this thread's NumPy arrays of 256 KiB and more reuse the blocks freed by earlier ones
    (refnorm/check/_reuse.c) instead of being faulted in afresh by glibc, page by page; the values are
    the same, only their memory is recycled (at most 64 MiB kept, all freed when the last thread leaves).
    Without the compiled module (or with REFNORM_NATIVE=0): nothing changes."""
    mod = _reuse_module()
    if mod is None:
        yield
        return
    previous = mod.enter()
    try:
        yield
    finally:
        mod.leave(previous)


def _reuse_module():
    if native() is None:                # REFNORM_NATIVE=0: no compiled code at all
        return None
    try:
        return compiled("_reuse")
    except ImportError:
        return None


UNIT_FIRST_ELEMENTS = 1 << 22   # arrays of 32/64-bit values from this size on: multiplicities taken as 1 first


def _unit_first(a) -> bool:
    """Whether the bias test of the returned array ``a`` takes every multiplicity as 1 first (module
    docstring, "Multiplicities"): 4M values or more, of a 32- or 64-bit dtype (16-bit values are counted
    by a table of their 65536 patterns, which costs next to nothing)."""
    a = np.asarray(a)
    return a.size >= UNIT_FIRST_ELEMENTS and a.dtype.itemsize >= 4


PARALLEL_COUNT_BYTES = 1 << 26   # two counts at a time when the two arrays hold at most this together


def _multiplicities(arrays):
    """The multiplicities of each array for the accumulators, as tables looked up block by block where
    holding them per element would cost more: the counts of the 65536 bit patterns of a 16-bit array
    (compare.PatternCounts, 256 KiB), the counts of the 2^24 buckets of an array of more than
    EXACT_SLOTS 32- or 64-bit values (compare.BucketCounts, 64 MiB; compare.multiplicities counts those
    by the same buckets); else 2 bytes an element (compare.SaturatedCounts: at most 32 MiB)."""
    def table(a):                # None: counted exactly (_counts)
        a = np.asarray(a)
        if a.itemsize == 2:
            return PatternCounts
        return BucketCounts if a.size > EXACT_SLOTS and native() is not None else None
    kinds = [table(a) for a in arrays]
    counted = iter(_counts([a for a, k in zip(arrays, kinds) if k is None]))
    return [next(counted) if k is None else k(a) for a, k in zip(arrays, kinds)]


def _counts(arrays):
    """The exact multiplicities of each array (at most EXACT_SLOTS 32/64-bit values): 2 bytes an element
    (compare.SaturatedCounts) with the compiled module, else compare.multiplicities; two at a time in
    threads (the compiled count releases the GIL) when the two largest hold at most PARALLEL_COUNT_BYTES
    together: each count holds a scratch copy of its array's bits (float32 4096x4096: 64 MiB each, their
    counts 32 MiB each), so counting two at once keeps the judgement's peak under 256 MiB above the arrays."""
    count = SaturatedCounts if native() is not None else multiplicities
    sizes = sorted((np.asarray(a).nbytes for a in arrays), reverse=True)
    if len(arrays) < 2 or sum(sizes[:2]) > PARALLEL_COUNT_BYTES:
        return [count(a) for a in arrays]
    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(count, arrays))


def _dtype_name(a):
    from .precision import dtype_name
    return dtype_name(np.asarray(a).dtype)
