"""The comparison of one returned array with its reference, in blocks of rows: the figures of
``core.ArrayResult`` (ratio, elements over their bound, unconstrained elements, largest constrained
error, worst elements) and the bias test's group sums (bias.py), accumulated block by block so that no
more than one block of float64 temporaries is ever held (the streaming judge, docs/performance.md).

    acc = ArrayAccumulator(got, scale, case_dtype)     # got: the whole returned array (its dtype)
    for each block (elements start.. of the array in C order):  acc.add(ref_block, E_block, start)
    acc.figures() -> the fields of core.ArrayResult (ratio, over, unconstrained, worst, bias, ...)

An element is unconstrained when its bound is at least ``scale``, max |reference| over the whole array
(core.py, "Verdicts"). ``scale=None``: it is not known yet (the streaming judge computes each block's
reference once): each block is judged against the running scale, the max |reference| of the blocks so
far (the compiled comparison returns each block's own, so that it is not read twice; the NumPy path and
the first block take it first), which can only grow. An element whose bound is below it is constrained
whatever comes later; one whose (positive, finite) bound is at least the running scale is a candidate,
kept with its error, and decided in ``figures()`` against the final scale (the definition's verdict,
exactly). More than MAX_CANDIDATES candidates (a reference that is zero for many rows, say):
``overflowed`` is set, and the caller judges again with the scale known. ``merge`` adds another
accumulator's blocks of the same array (the streaming judge's two partitions).

Per block, ``compare_block`` is the definition (NumPy: the terms of plain.py, the judgement of one array
as its formulas, and bias.bias_terms); ``refnorm.check._judge.compare`` (C, optional, REFNORM_NATIVE=0 turns it off) does
the same in one pass (tests/test_compare.py checks they agree).

Multiplicities for the bias test: how many elements of the whole returned array hold each element's
value (+0 and -0 one value), counted on the bit patterns: exact (C: hash partitions, linear) for up
to EXACT_SLOTS values, else each value's count is that of its bucket among 2^24 (never below the
exact count: a larger allowance, so never a false alarm the exact count would not raise); without
the C module, a 65536-bin count for 16-bit dtypes and ``np.unique`` (exact, n log n) for the others.
"""
from __future__ import annotations

import importlib
import math
import os

import numpy as np

from .. import _memo
from . import plain
from .bias import P_CASE, bias_ratio, bias_terms, group_count
from .precision import interval_excess

WORST_SHOWN = 3
MAX_ARRAYS = 64        # the bias test's false-alarm budget P_CASE is split over this many arrays per case
EXACT_SLOTS = 1 << 24  # exact counts for up to 16M values (4 or 8 bytes of scratch each: at most 128 MiB)
MAX_CANDIDATES = 1 << 16   # elements kept per array whose verdict waits for the final scale (scale=None)
KIND = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}

_UNSET = object()
_module = _UNSET


def compiled(name):
    """The compiled extension ``refnorm.check.<name>`` (``_judge``, ``_reuse``: C, importing nothing of
    refnorm), loaded by its full name. ``from . import <name>`` would do the same, but import-graph tools
    (grimp, import-linter) see no module in a .so and draw it as an import of the package ``refnorm.check``,
    whose __init__ imports the whole checker: a circle that is not there (tests/test_imports.py).
    ImportError when it is not built."""
    return importlib.import_module(f"{__package__}.{name}")


def native():
    """``refnorm.check._judge`` (compiled at install when a C compiler is present), or None."""
    global _module
    if os.environ.get("REFNORM_NATIVE", "").strip() == "0":
        return None
    if _module is _UNSET:
        try:
            _judge = compiled("_judge")
        except ImportError:
            _judge = None
        _module = _judge
    return _module


def multiplicities(got: np.ndarray) -> np.ndarray:
    """Array of got's shape: how many elements of ``got`` hold each element's value (uint16 when every
    count fits, which halves the memory the streaming judge holds, else uint32)."""
    # within a memo scope (the diagnosis: one backend's arrays judged against many variants) once per array
    return _memo.once("counts", (got,), (), lambda: _count(got), keep=16)


def _count(got):
    mod = native()
    bits = _bits(got)
    if mod is not None:
        for dt in (np.uint16, np.uint32):
            out = np.empty(got.shape, dtype=dt)
            if mod.value_counts(bits.reshape(-1), out.reshape(-1), EXACT_SLOTS) is not None:
                return out
    if got.itemsize == 2:
        table = np.bincount(bits.reshape(-1), minlength=65536)
        table[0] = table[0x8000] = table[0] + table[0x8000]       # -0 counts with +0
        return table.astype(np.uint32)[bits]
    g64 = got.astype(np.float64)
    g64[g64 == 0] = 0.0                                         # -0 -> +0
    _, inv, counts = np.unique(g64, return_inverse=True, return_counts=True, equal_nan=False)
    return counts[inv.reshape(g64.shape)].astype(np.uint32)


class PatternCounts:
    """The multiplicities of a 16-bit array kept as the counts of its 65536 bit patterns (-0 counted
    with +0): an element's multiplicity is ``table[its bits]``, looked up block by block (``take``; the
    compiled comparison looks them up itself, given the table), so the streaming judge holds 256 KiB per
    array instead of 4 bytes an element. The same counts as ``multiplicities``."""

    CHUNK = 1 << 22

    def __init__(self, got: np.ndarray):
        bits = _bits(got).reshape(-1)
        mod = native()
        if mod is not None:                               # compiled: ~0.5 ns a value (bincount: ~2)
            table = np.zeros(65536, dtype=np.uint64)
            mod.pattern_counts(bits, table)
        else:
            table = np.zeros(65536, dtype=np.int64)
            for s in range(0, bits.size, self.CHUNK):     # bincount widens its input: in chunks
                table += np.bincount(bits[s:s + self.CHUNK], minlength=65536)
        table[0] = table[0x8000] = table[0] + table[0x8000]
        # uint32 as the compiled comparison reads them; a count of 2^32 or more (one value held by most of
        # an array of > 2^32 elements) saturates instead of wrapping to a small one
        self.table = np.minimum(table, np.uint64(np.iinfo(np.uint32).max)).astype(np.uint32)

    def take(self, values: np.ndarray) -> np.ndarray:
        """The multiplicities of ``values`` (elements of the array, its dtype), flat."""
        return self.table[_bits(values).reshape(-1)]


class BucketCounts:
    """The multiplicities of an array of more than EXACT_SLOTS 32- or 64-bit values as ``multiplicities``
    counts them (each value's count is that of its bucket among 2^24 by a hash: never below the exact
    count), kept as the table of the 2^24 buckets' counts (64 MiB) and looked up block by block
    (``take``), so the streaming judge does not hold 2 or 4 bytes an element. Needs the compiled module."""

    def __init__(self, got: np.ndarray):
        self.table = np.zeros(1 << 24, dtype=np.uint32)
        bits = _bits(got).reshape(-1)
        for s in range(0, bits.size, PatternCounts.CHUNK):
            native().bucket_counts(bits[s:s + PatternCounts.CHUNK], self.table)

    def take(self, values: np.ndarray) -> np.ndarray:
        """The multiplicities of ``values`` (elements of the array, its dtype), flat."""
        bits = _bits(values).reshape(-1)
        out = np.empty(bits.size, dtype=np.uint32)
        native().bucket_counts(bits, self.table, out)
        return out


def _bits(a):
    """The bit patterns of ``a``'s values (unsigned integers of its width), C order."""
    return np.ascontiguousarray(a).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


class SaturatedCounts:
    """The exact multiplicities of an array of 32- or 64-bit values (at most EXACT_SLOTS of them) held in 2
    bytes an element: uint16 counts capped at 65535 (``per``, the array's shape) and the exact counts of
    the few values at the cap (at most size / 65535 of them: ``keys``, their bit patterns sorted, and
    ``counts``), so that the streaming judge never holds 4 bytes an element (a value repeated more than
    65535 times would make every count uint32). ``fix`` puts the exact counts back into a block's. The same
    counts as ``multiplicities``. Needs the compiled module."""

    def __init__(self, got: np.ndarray):
        bits = _bits(got).reshape(-1)
        self.per = np.empty(got.shape, dtype=np.uint16)
        native().value_counts(bits, self.per.reshape(-1), EXACT_SLOTS, True)
        keys, counts = native().saturated_counts(bits, self.per.reshape(-1))
        if 0 in keys:                           # -0 counts with +0: its pattern looked up as well
            keys, counts = keys + [1 << (8 * bits.itemsize - 1)], counts + [counts[keys.index(0)]]
        order = np.argsort(np.array(keys, dtype=bits.dtype))
        self.keys = np.array(keys, dtype=bits.dtype)[order]
        self.counts = np.array(counts, dtype=np.uint32)[order]

    def fix(self, mult: np.ndarray, values: np.ndarray) -> np.ndarray:
        """A block's counts ``mult`` (taken from ``per``) with the exact count where it is capped;
        ``values``: the block's elements (the array's dtype, in the order of ``mult``)."""
        if not self.keys.size:                  # no value of the array at the cap: nothing to put back
            return mult
        at = np.flatnonzero(mult == 0xffff)
        if not at.size:
            return mult
        out = mult.astype(np.uint32)
        out[at] = self.counts[np.searchsorted(self.keys, _bits(values).reshape(-1)[at])]
        return out


TABLES = (PatternCounts, BucketCounts)     # multiplicities looked up block by block


def _acc_len(shape) -> int:
    return group_count(shape)


def _block_index(shape, start, n, axis):
    """(multi-index arrays, flat indices) of a block's n elements (module docstring), or (None, None)
    for the whole array."""
    if axis is None or axis < 0:
        if start == 0 and n == math.prod(shape):
            return None, None
        flat = np.arange(start, start + n)
        return np.unravel_index(flat, shape), flat
    across = math.prod(shape) // shape[axis] if shape[axis] else 1
    bshape = tuple(s if a != axis else (n // across if across else 0) for a, s in enumerate(shape))
    idx = list(np.unravel_index(np.arange(n), bshape))
    idx[axis] = idx[axis] + start
    return tuple(idx), np.ravel_multi_index(tuple(idx), shape)


def compare_block(g, ref, E, mult, kind, scale, shape, start, acc, axis=-1):
    """NumPy definition of one block (``_judge.compare``'s contract, module docstring), in the terms of
    plain.py: ``g``, ``ref``, ``E`` float64 and ``mult`` uint16 or uint32 (flat) blocks of the elements
    start.. (C order) of an array of ``shape``; adds the bias sums to ``acc`` and returns (max_ratio, over,
    unconstrained, dmax, max_bound, [(ratio, flat index)])."""
    name = next(k for k, v in KIND.items() if v == kind)
    lo, hi = plain.interval(g, name)
    ex = interval_excess(lo, hi, g, ref)
    r = plain.ratio(g, ref, E, ex, name)
    unc = plain.unconstrained(E, scale)
    dmax = float(np.max(plain.error(g, ref, ex)[~unc], initial=0.0))
    idx, flat_index = _block_index(shape, start, g.size, axis)
    where = (lambda f: int(start + f)) if flat_index is None else (lambda f: int(flat_index[f]))
    top = sorted(((float(r.reshape(-1)[f]), where(f)) for f in plain.worst(r)), key=lambda t: (-t[0], t[1]))
    n_groups = acc.size // 3
    for j, t in enumerate(bias_terms(g, ref, E, lo, hi, mult, name)):
        _add_sums(acc, j * n_groups, t, shape, idx)
    return (float(np.max(r, initial=0.0)), int((r > 1).sum()), int(unc.sum()), dmax,
            float(np.max(E, initial=0.0)), top)


def _excess(g, ref, kind):
    """(lo, hi, excess): the rounding interval of float64 values ``g`` of the dtype ``kind`` (KIND;
    the conversion is exact) and precision.excess of ``ref`` over it."""
    lo, hi = plain.interval(g, next(k for k, v in KIND.items() if v == kind))
    return lo, hi, interval_excess(lo, hi, g, ref)


@np.errstate(over="ignore", invalid="ignore")
def _add_sums(acc, at, t, shape, idx):
    """Add the group sums of one element term ``t`` (the elements at multi-index ``idx``, or the
    whole array when None) to acc[at:]."""
    acc[at] += t.sum()
    if len(shape) > 1:
        o = 1
        flat = t.reshape(-1)
        tb = flat.reshape(shape) if idx is None else None
        for ax, n in enumerate(shape):
            if n > 1:
                part = (tb.sum(axis=tuple(a for a in range(len(shape)) if a != ax)) if idx is None
                        else np.bincount(idx[ax], weights=flat, minlength=n))
                acc[at + o:at + o + n] += part
                o += n


_ONES = np.ones(0, dtype=np.uint16)


_NATIVE_G = (np.dtype(np.float64), np.dtype(np.float32))   # the returned values' dtypes _judge.compare reads


def _ones(n):
    """n multiplicities of 1 (uint16; a view of one array kept for the blocks)."""
    global _ONES
    if _ONES.size < n:
        _ONES = np.ones(max(n, 1 << 18), dtype=np.uint16)
    return _ONES[:n]


def _once(memo, key, make):
    """make(), once per key of ``memo`` (ArrayAccumulator.add's)."""
    if key not in memo:
        memo[key] = make()
    return memo[key]


STRIDED_RUN = 64    # along an axis, the block's views are read as they lie when its runs hold this many values


def _inner_contiguous(a, axis) -> bool:
    """Whether the axes of ``a`` after ``axis`` are contiguous (what _judge.compare reads run by run)."""
    want = a.itemsize
    for k in range(a.ndim - 1, axis, -1):
        if a.shape[k] > 1 and a.strides[k] != want:
            return False
        want *= a.shape[k]
    return True


def _at(a, i) -> float:
    """Element ``i`` (C order) of ``a``, whatever its layout."""
    return float(a.reshape(-1)[i] if a.ndim == 1 else a[np.unravel_index(i, a.shape)])


def _abs_max_finite(a) -> float:
    """max |a| over the finite values of ``a`` (0 when none): two passes without temporaries when every
    value is finite, else with the mask."""
    if not a.size:
        return 0.0
    hi, lo = float(a.max()), float(a.min())
    if math.isfinite(hi) and math.isfinite(lo):
        return max(hi, -lo, 0.0)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(a), where=np.isfinite(a), initial=0.0))


def _max_nan(a, b):
    """max propagating NaN, as np.max does."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


class ArrayAccumulator:
    """The figures of one returned array, accumulated over blocks of rows (module docstring)."""

    def __init__(self, got: np.ndarray, scale: float | None, case_dtype: str, p_array: float = P_CASE / MAX_ARRAYS,
                 mult: np.ndarray | None = None, unit_counts: bool = False):
        self.got = got
        self.shape = got.shape
        self.kind = KIND[case_dtype]
        self.kind_name = case_dtype
        self.running = scale is None            # the running scale (module docstring)
        self.scale = 0.0 if scale is None else scale
        self.cand = []                          # (bounds, errors) of the candidates, per block
        self.n_cand = 0
        self.overflowed = False
        self.p_array = p_array
        self.flat = got.reshape(-1)             # a view when got is contiguous (else one copy, in its dtype)
        # unit_counts: every multiplicity taken as 1 (the bias figure is then an upper bound: stream.py)
        self.unit = unit_counts
        if unit_counts:
            self.mult = None
        elif isinstance(mult, (TABLES, SaturatedCounts)):     # looked up per block
            self.mult = mult
        else:
            self.mult = (multiplicities(got) if mult is None else mult).reshape(-1)
        self.acc = np.zeros(3 * _acc_len(self.shape))
        self.maxr, self.over, self.unc, self.dmax, self.maxE = 0.0, 0, 0, 0.0, 0.0
        self.top = []
        self.mod = native()

    def add(self, ref, E, start=0, axis=None, memo=None):
        """Judge the elements start.. (C order; as many as ``ref`` has) of the returned array; with
        ``axis``, the sub-array ``ref`` is, whose index along ``axis`` starts at ``start``. ``memo``: a
        dict shared by the accumulators of one block (the streaming judge's, one per contract), in which
        the block's widened values and multiplicities are made once."""
        memo = {} if memo is None else memo
        E = np.broadcast_to(np.asarray(E, dtype=np.float64), np.shape(ref))
        gdt = self._gdt()
        # the block's returned values and per-element multiplicities (flat, or the sub-array along axis)
        per = self._per()
        if axis is None:
            sl = slice(start, start + int(np.size(ref)))
            vals = self.flat[sl]
        else:
            sl = (slice(None),) * axis + (slice(start, start + np.shape(ref)[axis]),)
            vals, per = self.got[sl], None if per is None else per.reshape(self.shape)
        ref = np.ascontiguousarray(ref, dtype=np.float64).reshape(-1)
        mult, mtab = self._mults(vals, per, sl, start, memo)
        if axis is not None and self.mod is not None and math.prod(self.shape[axis + 1:]) >= STRIDED_RUN:
            # the compiled loop reads the block's slice of the returned array and the bounds as they lie (their
            # axes after `axis` contiguous: batch_norm's, laid out by channel), run by run, without a copy
            g = vals if vals.dtype == gdt and _inner_contiguous(vals, axis) else np.ascontiguousarray(vals, dtype=gdt)
            E = E if _inner_contiguous(E, axis) else np.ascontiguousarray(E)
        else:
            g = _once(memo, ("g", id(self.got), start), lambda: np.ascontiguousarray(vals, dtype=gdt).reshape(-1))
            E = np.ascontiguousarray(E).reshape(-1)
        # the running scale: the compiled loop judges a block against the scale of the blocks before it
        # (elements it counts unconstrained become candidates, settled at the end) and returns the block's
        # own max |ref|, except for the first block (scale 0: every element would be a candidate)
        if self.running and (self.mod is None or self.scale == 0):
            self.scale = max(self.scale, _abs_max_finite(ref) if self.mod is None else self.mod.abs_max_finite(ref))
        used = self.scale
        if self.mod is not None:
            maxr, over, unc, dmax, maxE, top, ref_max = self.mod.compare(
                g.view(np.uint16) if g.dtype.itemsize == 2 else g, ref, E, mult, self.kind, used, self.shape, start,
                self.acc, -1 if axis is None else axis, mtab)
            if self.running:
                self.scale = max(self.scale, ref_max)
        else:
            maxr, over, unc, dmax, maxE, top = compare_block(g, ref, E, _ones(ref.size) if mult is None else mult,
                                                             self.kind, used, self.shape, start, self.acc,
                                                             -1 if axis is None else axis)
        if self.running and not maxE < used:             # a bound at least the scale it was judged with (or NaN)
            self._candidates(g, ref, E, used)
        self._absorb(maxr, over, unc, dmax, maxE, top,
                     lambda i: tuple(_at(a, self._local(i, start, g.size, axis)) for a in (g, ref, E)))

    def _per(self):
        """The per-element multiplicities of the whole array, flat (None: a table looks them up, or every
        one is 1)."""
        if isinstance(self.mult, SaturatedCounts):
            return self.mult.per.reshape(-1)
        return self.mult if isinstance(self.mult, np.ndarray) else None

    def _gdt(self):
        """The dtype of the returned values as the compiled loop reads them (float64, float32; 16-bit dtypes
        as their bit patterns, widened there through the table of the 65536 values), else float64."""
        dt = self.flat.dtype
        return dt if self.mod is not None and (dt in _NATIVE_G or dt.itemsize == 2) else np.dtype(np.float64)

    def _mults(self, vals, per, sl, start, memo):
        """(mult, mtab): the block's per-element multiplicities (None: every one 1), or the table of the
        counts of its 16-bit patterns that the compiled loop looks them up in."""
        if self.mod is not None and self.flat.dtype.itemsize == 2 and isinstance(self.mult, PatternCounts):
            return None, self.mult.table
        if isinstance(self.mult, TABLES):
            mult = _once(memo, ("mult", id(self.mult), start), lambda: self.mult.take(vals))
        else:                                   # None: every multiplicity 1 (unit_counts)
            mult = None if per is None else np.ascontiguousarray(per[sl]).reshape(-1)
        if isinstance(self.mult, SaturatedCounts):
            mult = _once(memo, ("fix", id(self.mult), start), lambda: self.mult.fix(mult, vals))
        return mult, None

    def block_args(self, start, count, channels=False):
        """The arguments of _judge.judge_rows for the elements start..start+count-1 (C order) of the
        returned array, or (``channels``) for its channels start..start+count-1 (axis 1), as an (N,
        channels, rest) view: (g, kind, scale, shape, start, acc, mult, mtab, room), room the candidates it
        may keep (-1: the scale is final; stream.py's compiled block pipeline; its figures go to ``absorb``)."""
        per = self._per()
        if channels:
            sl = (slice(None), slice(start, start + count))
            vals, per = self.got[sl], None if per is None else per.reshape(self.shape)
            g = self.flat.reshape(self.shape[0], self.shape[1], -1)[sl]
            g = g if g.dtype == self._gdt() else np.ascontiguousarray(g, dtype=self._gdt())
        else:
            sl = slice(start, start + count)
            vals = self.flat[sl]
            g = np.ascontiguousarray(vals, dtype=self._gdt())
        mult, mtab = self._mults(vals, per, sl, start, {})
        room = -1 if not self.running else (0 if self.overflowed else MAX_CANDIDATES - self.n_cand)
        return (g.view(np.uint16) if g.dtype.itemsize == 2 else g, self.kind, self.scale, self.shape, start,
                self.acc, mult, mtab, room)

    def absorb(self, res):
        """The figures _judge.judge_rows returned for a block of ``block_args``: compare's, and the block's
        candidates (their bounds and errors, their count), as ``add`` takes them."""
        (maxr, over, unc, dmax, maxE, top, ref_max), cand_E, cand_d, n = res
        if self.running:
            self.scale = max(self.scale, ref_max)
            if n and not self.overflowed:
                self.n_cand += n
                if self.n_cand > MAX_CANDIDATES:
                    self.overflowed, self.cand = True, []
                else:
                    self.cand.append((np.frombuffer(cand_E, dtype=np.float64), np.frombuffer(cand_d, dtype=np.float64)))
        self._absorb(maxr, over, unc, dmax, maxE, top, None)

    def _absorb(self, maxr, over, unc, dmax, maxE, top, lookup):
        """A block's figures added; the worst elements so far kept with their values (the compiled loop's
        come with them; ``lookup(i)``: (g, ref, E) of the element at flat index i of the block, for the others)."""
        self.maxr = max(self.maxr, maxr)
        self.over += over
        self.unc += unc
        self.dmax = _max_nan(self.dmax, dmax)
        self.maxE = _max_nan(self.maxE, maxE)
        worst = sorted(self.top + [tuple(t) if len(t) == 5 else (t[0], t[1], None, None, None) for t in top],
                       key=lambda t: (-t[0], t[1]))
        self.top = [w if w[2] is not None else (w[0], w[1], *lookup(w[1])) for w in worst[:WORST_SHOWN]]

    def _candidates(self, g, ref, E, scale):
        """Keep the elements of this block that ``scale`` (the running scale it was judged with) counts
        unconstrained and the final scale may not: bound positive, finite and at least ``scale`` (module
        docstring)."""
        if self.overflowed or not E.size:
            return
        g, E = g.reshape(-1), E.reshape(-1)         # views laid out otherwise: copied (a rare path)
        with np.errstate(invalid="ignore"):
            c = np.flatnonzero(E >= scale)
            c = c[(E[c] > 0) & np.isfinite(E[c])]
        if not c.size:
            return
        self.n_cand += c.size
        if self.n_cand > MAX_CANDIDATES:
            self.overflowed, self.cand = True, []
            return
        gc, rc = g[c].astype(np.float64), ref[c]
        self.cand.append((E[c], plain.error(gc, rc, _excess(gc, rc, self.kind)[2])))

    def merge(self, other: "ArrayAccumulator"):
        """Add the figures of ``other``, the same array's other blocks (stream.py's partitions): maxima and
        counts combined, the bias sums added, the worst elements and the candidates pooled."""
        self.maxr = max(self.maxr, other.maxr)
        self.over += other.over
        self.unc += other.unc
        self.dmax = _max_nan(self.dmax, other.dmax)
        self.maxE = _max_nan(self.maxE, other.maxE)
        self.top = sorted(self.top + other.top, key=lambda t: (-t[0], t[1]))[:WORST_SHOWN]
        self.acc += other.acc
        self.scale = max(self.scale, other.scale)
        self.cand += other.cand
        self.n_cand += other.n_cand
        self.overflowed = self.overflowed or other.overflowed or self.n_cand > MAX_CANDIDATES
        if self.overflowed:
            self.cand = []

    def _settle(self):
        """The candidates under the final scale: those whose bound is below it are constrained after
        all (counted out of ``unc``, their errors into ``dmax``)."""
        for e, d in self.cand:
            keep = e < self.scale
            self.unc -= int(keep.sum())
            if keep.any():
                self.dmax = _max_nan(self.dmax, float(np.max(d[keep])))
        self.cand, self.running = [], False

    def _local(self, i, start, n, axis):
        """The position in the block of the element at flat index ``i`` of the whole array."""
        if axis is None:
            return i - start
        idx = list(np.unravel_index(i, self.shape))
        idx[axis] -= start
        across = math.prod(self.shape) // self.shape[axis]
        bshape = tuple(s if a != axis else n // across for a, s in enumerate(self.shape))
        return int(np.ravel_multi_index(tuple(idx), bshape))

    def figures(self) -> dict:
        """The fields of ``core.ArrayResult`` for the whole array (after the last block)."""
        if self.overflowed:
            raise RuntimeError("ArrayAccumulator: too many candidates for the running scale; judge again with "
                               "the scale known")
        if self.running:
            self._settle()
        name_d = next(k for k, v in KIND.items() if v == self.kind)
        size = self.got.size
        err_u = plain.err_u(self.dmax, self.unc, size, self.scale, name_d)
        worst = [(tuple(int(k) for k in np.unravel_index(i, self.shape)), g, r, e) for _, i, g, r, e in self.top]
        bias, where = self.bias()
        return dict(dtype=name_d, size=size, ratio=self.maxr, err_u=err_u, unconstrained=self.unc, worst=worst,
                    over=self.over, bias=float(bias), bias_where=where, scale=self.scale, max_bound=self.maxE,
                    bias_bound=self.unit)

    def bias(self):
        """(bias_ratio, worst group label): bias.bias_ratio of the accumulated sums."""
        if self.got.size <= 1:
            return 0.0, ""
        n = self.acc.size // 3
        return bias_ratio(self.acc[:n], self.acc[n:2 * n], self.acc[2 * n:], self.shape, self.p_array)[:2]
