"""Index-order misreads, statistics over other axes, the mode's running statistics after the update, and a
statistic from a partial reduction: explanations of a failing step by the specification's arithmetic
(issue 33), beside explain.py's families and under its rule: an explanation reproduces every failing
array it names within the check's own bound (explain.fit_ratio <= 1), explains every failing output of
the step, and keeps the passing arrays it recomputes within theirs; the reference itself never fits (the
arrays fail).

* **a returned array in another index order** (``permuted_outputs``, mechanism "layout"): a failing
  array equal to the reference's with its elements permuted by a transpose of its axes, a transpose of a
  (a, b) factorization of its size or of one of its axis groups ((N, G) statistics written as (G, N)
  memory), or its column-major order, or written at a stride (element j at index j * k, the other
  elements one never-written fill: a row's statistic stored at row * stride_x_row), or without one
  axis's offset (every sample's row stored at index 0, every channel's plane at channel 0, the last written
  staying, the rest the fill), or each row the next row's (the last its own: a store pointer advanced early), or every index of
  one axis its first or last index's (a loop's stores landing in one slot); a returned
  statistic averaged over the leading axis (mechanism "reduction"); these two only where they move every
  failing element out of its bound (rows nearly equal, constant inputs, explain nothing); another returned array
  in its place (a return tuple unpacked in the wrong order, two running buffers' stores exchanged: explained,
  no mechanism named, the running state's alone "running" by diagnosis.by_where); a returned
  statistic read from a buffer packing it with another (mean and rstd written as pairs, split as halves:
  "layout"); every failing array of the step so explained;
* **a parameter read at another index, or rounded** (``param_index``): the effective weight and bias of
  each feature solved from the kernel's y by least squares over the rows (y is affine in them: three
  evaluations of the specification give the coefficients), matched against the parameter under index maps
  (i % k: a block-local index; i // k; reversed; a transposed factorization; a permutation of its axes;
  column-major) -> "layout", or against the parameter (or the gain 1 + scale, weight + weight_offset)
  rounded to the 16-bit case dtype -> "affine" (the cast order); the specification re-evaluated with the
  matched parameters decides;
* **the parameters as x's elements read them in another index order of x** (``expanded_index``,
  "layout"): the gain and offset broadcast to x's shape, permuted by ``index_orders`` of x's shape (a
  per-sample modulation read at row % B where row // T belongs), and for the channel norms each element's
  channel read as another of its indices mod C (the sample's, a position's, its flat index: ``channel_reads``),
  in their eval calls too (x_hat from the running statistics: ``eval_index``);
* **statistics over other axes** (``other_axes``, "semantics": another normalizer's axes): layer_norm,
  rms_norm, adaptive_layer_norm, group_norm (on its (N, G, C / G, positions) view), instance_norm and
  batch_norm in training with mean and rstd taken over another subset of the axes (per channel over the
  tokens, per sample, over the whole batch): y, dx and the parameter gradients by the op's formulas on those
  statistics, the saved statistics the new ones or their average over each of the op's own slices; a
  subset of the op's own axes (each slice's statistics over groups of its values: a multi-axis
  normalized_shape normalized over its last axis only) -> "group", the group a statistic spans; the op's
  own axes and more (each group's statistics pooled over the batch) -> "reduction";
  group_norm's groups of strided channels (channel c in group c % G) -> "layout"; the one-group statistics
  are explain.config_deviation's;
* **dx's sums over a block of rows** (``row_block_backward``, "block"): layer_norm / rms_norm dx with its
  sums of g and g x_hat over each block of 2^k rows (a 2-D tile summed whole), divided by n or the tile's
  size, when only gradients fail;
* **the running statistics after the update** (``updated_running``, "mode"): a training call whose
  outputs are the evaluation-mode values with the running statistics this call just updated (the saved
  statistics the batch's); the running statistics before the update are explain.mode_deviation's;
* **the running buffers' initial values** (``initial_running``, "mode"): an evaluation call without
  running statistics normalized with mean 0 and var 1 where the batch's statistics belong;
* **a partial reduction** (``block_candidates``, "block", searched by explain.row_statistics): a slice's
  mean (or variance, or both) accumulated over the last block of 2^k values only (an accumulator reset
  inside the loop over column blocks), or the mean over the first block with the variance over the whole
  slice, divided by the slice's length or the block's; each tile of 2 or 4 slices reduced whole
  (``pooled_candidates``, "block"); a slice's forward reading its values from another flat start (a
  vector load's start aligned down, a sample's stride of one group, a one-byte row pitch applied to wider
  elements: ``window_candidates``, "layout"), or the backward reading x in another index order with the
  saved statistics right (``reread_candidates``, "layout");
* **an input's tail read as 0** (``tail_zero_maps``, "block"): one activation-sized input (x, a residual,
  x1) with its last N mod B columns read as 0 (a B-wide vector loop's whole-vector mask), one more index map
  of ``permuted_inputs``; and each row the previous row's (the first 0 or its own: a pipelined register), where
  only the parameter gradients fail read by their own pass alone, dx right ("layout");
* **a returned array written for a prefix alone** (``_tail_unwritten``, "block"): the last axis written for
  its first k entries (x's row count: a column mask against the rows; whole tiles of B alone), the rest never
  written; and an axis's blocks of b indices written without their block offset (``_offset_dropped``,
  "layout": a group's channels stored at its sample's first b);
* **a group's statistics read at another row** (``group_rows_read``, "layout"): group_norm's normalize pass
  taking channel c's group as c // G or c mod G, y alone failing;
* **the specification with some inputs substituted** (``substituted_inputs``: one evaluation per substitution,
  judged on every failing array; the mechanism is the substitution's): a quantizer's rows of x read from other
  flat starts (``quant_windows``, "layout"; the parameters read at the row's index, ``params_by_row``, are
  judged the same way); the backward with x read as the returned y, the forward in place, only gradients
  failing (``overwritten_inputs``, "backward"); a gain applied twice, w^2 where w belongs, outputs alone
  failing (``gain_squared``, "affine"); every parameter read through a dtype of fewer significand bits than
  the case's (``params_through``, "precision").

``ex`` below is refnorm/check/explain.py, passed in by its caller (no import circle). Where an explained
value is larger than the reference's, its bound grows by their ratio (at most LARGER),
and an array the reference fits within that grown bound is not explained. Pure NumPy; failing cases only;
x of at most explain.CONFIG_SIZE elements; a few dozen candidates per family (MAPS_MAX index orders),
each screened on the failing elements before it is fitted on the whole array.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from .precision import DTYPES, RANK, round_to
from .spec_search import LARGER, PARAMETERS, grown_bound

PER_CHANNEL = ("batch_norm", "instance_norm", "group_norm", "group_norm_silu")   # parameters per channel (axis 1)
GROUPED = ("group_norm", "group_norm_silu")         # group_norm's statistics (group_norm_silu: a SiLU after the affine)
PAIRS = (("weight", "bias"), ("scale", "shift"), ("gamma", "beta"))   # a per-feature gain and its offset
MAPS_MAX = 64          # candidate index orders tried per array or parameter
SCREEN = 0.05          # a candidate parameter passes the least-squares screen within this share of its spread


# ------------------------------------------------------------------ index orders
def _factor_pairs(n):
    return [(a, n // a) for a in range(2, n) if n % a == 0]


def index_orders(shape):
    """(m, what) candidate index orders of an array of ``shape``: the array read in that order is
    ``a.reshape(-1)[m].reshape(shape)``; identity excluded, duplicates removed, at most MAPS_MAX."""
    shape = tuple(int(s) for s in shape)
    size = int(np.prod(shape, dtype=np.int64))
    idx = np.arange(size)
    out, seen = [], {idx.tobytes()}

    def add(m, what):
        k = m.tobytes()
        if k not in seen and len(out) < MAPS_MAX:
            seen.add(k)
            out.append((m, what))
    nd = len(shape)
    if nd >= 2:
        add(idx.reshape(shape).ravel(order="F"), f"its {shape} elements in column-major (Fortran) order")
        add(np.argsort(idx.reshape(shape).ravel(order="F"), kind="stable"),
            f"its {shape} elements in column-major order read back in row-major order")
    if 2 <= nd <= 4:
        for p in itertools.permutations(range(nd)):
            t = tuple(shape[i] for i in p)
            add(idx.reshape(shape).transpose(p).ravel(), f"its {shape} elements stored in the axis order {p} "
                                                         f"(as a {t} array)")
    for i in range(nd):                    # a factorization of every group of adjacent axes, transposed
        for j in range(i + 1, nd + 1):
            P = int(np.prod(shape[i:j], dtype=np.int64))
            for a, b in _factor_pairs(P):
                lead, tail = int(np.prod(shape[:i], dtype=np.int64)), int(np.prod(shape[j:], dtype=np.int64))
                m = idx.reshape(lead, a, b, tail).transpose(0, 2, 1, 3).ravel()
                grp = f"axes {i}..{j - 1}" if j - i > 1 else f"axis {i}"
                add(m, f"the ({a}, {b}) index order of {grp} written as ({b}, {a}) (transposed)")
    return out


def channel_reads(shape):
    """(m, what) index orders of a channel-first array of ``shape`` (N, C, positions...) in which each element
    reads its per-channel value at another index taken mod C: the sample's, a position axis's, the element's
    flat position within its plane, its flat index in the whole array (channel c = i % C: the channels-last
    rule on channel-first memory); identity and duplicates excluded."""
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2 or shape[1] < 2:
        return []
    idx = np.indices(shape)
    C = shape[1]
    cands = [(idx[a], f"the index of axis {a}" + (" (the sample's)" if a == 0 else "")) for a in range(len(shape))
             if a != 1 and shape[a] > 1]
    if len(shape) > 3:
        cands.append((np.ravel_multi_index(tuple(idx[2:]), shape[2:]), "the element's flat position in its plane"))
    cands.append((np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape), "the element's flat index"))
    out, seen = [], {np.arange(int(np.prod(shape, dtype=np.int64))).tobytes()}
    for k, what in cands:
        m = np.ravel_multi_index((idx[0], k % C) + tuple(idx[2:]), shape).ravel()
        if m.tobytes() not in seen:
            seen.add(m.tobytes())
            out.append((m, f"each element's channel read as {what} mod {C}, where its channel index belongs"))
    return out


def permuted_outputs(ex, case, record, ref):
    """Every failing array of the step equal to the reference's in another index order (``index_orders``):
    explanations, one per array, or []."""
    out = []
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None or np.shape(got) != np.shape(want) or np.size(got) < 2 \
                or np.size(got) > ex.CONFIG_SIZE:
            return []
        want = np.asarray(want, dtype=np.float64).reshape(-1)
        qd = record.E.get("dtypes", {}).get((part, name))
        s = _sample(got, want, E, qd=qd)
        g1 = np.asarray(got).reshape(-1)[s]
        other = next((o for o, v in getattr(ref, part).items() if part in ("outputs", "state") and o != name
                      and v is not None and np.shape(v) == np.shape(got) and qd is None
                      and ex.fit_ratio(got, v, E) <= 1), None)
        if other is not None:           # another returned array in its place (a return tuple unpacked in the
            out.append({"part": part, "name": name, "step": record.step, "mechanism": None,    # wrong order)
                        "text": f"{ex._label(part, name)} is the expected {ex._label(part, other)}, returned in its "
                                f"place"})
            continue
        packed = _packed(ex, ref, part, name, got, E, qd)
        if packed is not None:
            out.append({"part": part, "name": name, "step": record.step, "mechanism": "layout",
                        "text": f"{ex._label(part, name)} is {packed}"})
            continue
        Ef = np.broadcast_to(E, np.shape(got)).reshape(-1)
        for m, what in index_orders(np.shape(got)):
            # (each moved value judged by the bound of the element it is, or of the place it is stored: the larger)
            Em = np.maximum(Ef, Ef[m]).reshape(np.shape(got))
            E1m = Em.reshape(-1)[s]
            if qd is not None:          # a quantized array (a block scale's codes): the judge's own test
                if _fails(g1, want[m[s]], E1m, qd) or _fails(got, want[m].reshape(np.shape(got)), Em, qd):
                    continue
            elif ex.fit_ratio(g1, want[m[s]], E1m) > 1 or ex.fit_ratio(got, want[m].reshape(np.shape(got)), Em) > 1:
                continue
            out.append({"part": part, "name": name, "step": record.step, "mechanism": "layout",
                        "text": f"{ex._label(part, name)} is the expected array with {what}"})
            break
        else:
            what, mech = (_strided_write(ex, got, want, E, qd) or _pitch_write(ex, got, want, E, qd)
                          or _offset_dropped(ex, got, want, E, qd)), "layout"
            if what is None:
                what, mech = _tail_unwritten(ex, got, want, E, qd, np.shape(record.inputs["x"])), "block"
            if what is None:
                what, mech = (_rows_shifted(ex, got, want, E, qd) or _one_index_kept(ex, got, want, E, qd)
                              or _scattered(ex, got, want, E, qd)), "layout"
            if what is None and part == "outputs":
                what, mech = _averaged_over_leading(ex, got, want, E, qd), "reduction"
            if what is None:
                return []
            out.append({"part": part, "name": name, "step": record.step, "mechanism": mech,
                        "text": f"{ex._label(part, name)} is {what}"})
    return out


def _packed(ex, ref, part, name, got, E, qd):
    """A returned statistic read from a buffer packing it with another of its shape (mean and rstd): written as
    (value, other) pairs slice by slice and split as the buffer's two halves, or written as two halves and read
    as pairs; in words, or None."""
    if part != "outputs" or qd is not None:
        return None
    w = np.asarray(ref.outputs[name], dtype=np.float64).reshape(-1)
    for o, v in ref.outputs.items():
        if o == name or v is None or np.shape(v) != np.shape(got) or np.size(v) < 2:
            continue
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        n = w.size
        for first in (True, False):         # this statistic the first of each pair, or the second
            pairs = np.stack([w, v] if first else [v, w], axis=-1).reshape(-1)
            halves = np.concatenate([w, v] if first else [v, w])
            for alt, what in ((pairs[:n] if first else pairs[n:], "written as (" + (f"{name}, {o}" if first else
                               f"{o}, {name}") + ") pairs slice by slice and read as the buffer's "
                               + ("first" if first else "second") + " half"),
                              (halves[0::2] if first else halves[1::2], "written as the two halves (" +
                               (f"{name}, {o}" if first else f"{o}, {name}") + ") of one buffer and read as its "
                               + ("first" if first else "second") + " elements of (first, second) pairs")):
                alt = alt.reshape(np.shape(got))
                if ex.fit_ratio(got, alt, E) <= 1 and ex.fit_ratio(got, w.reshape(np.shape(got)), E) > 1:
                    return f"read from a buffer packing it with {o}: {what}"
    return None


def _strided_write(ex, got, want, E, qd):
    """The failing array written at a stride (a row's statistic stored at row * k, the offset of another
    pointer copied): the element j of the expected (flattened) array at index j * k while j * k is inside the
    array, every other element (at least two) the buffer's fill, 0 or NaN, that the expected array does not
    hold there; the smallest such k >= 2 (k >= the size: element 0 alone written), in words, or None."""
    go = np.asarray(got).reshape(-1)          # (its own dtype for the fits: the judge's test of a 16-bit array)
    g, w = go.astype(np.float64), np.asarray(want, dtype=np.float64).reshape(-1)
    Ef = np.broadcast_to(E, np.shape(got)).reshape(-1)
    size = g.size
    for k in _write_strides(g):
        at = np.arange(0, size, k)
        rest = np.ones(size, dtype=bool)
        rest[at] = False
        fill = g[rest]
        if fill.size < 2:
            continue
        src = np.arange(at.size)
        if qd is not None:
            if _fails(g[at], w[src], Ef[at], qd):
                continue
        elif ex.fit_ratio(go[at], w[src], Ef[at]) > 1:
            continue
        if ex.fit_ratio(go[rest], w[rest], Ef[rest]) <= 1:      # the expected values there too: not a gap
            continue
        if at.size == 1:
            return (f"written at a stride of at least {size}: element 0 of the expected array stored at index 0 and "
                    f"every other index of the row stride j * k outside the array; every other element holds "
                    f"{fill[0]:g}, never written")
        return (f"written at a stride of {k}: element j of the expected array stored at index j * {k} "
                f"(the first {at.size} of its {size} values, each at {k} times its index); every other element "
                f"holds {fill[0]:g}, never written")
    return None


def _pitch_write(ex, got, want, E, qd):
    """The failing array's rows written at a padded row pitch (``row_pitches``): row r's values stored from flat
    offset r * P, those past the end dropped, every other element the buffer's fill (one value, 0 or NaN) that the
    expected array does not hold there; in words, or None."""
    go = np.asarray(got).reshape(-1)
    g, w = go.astype(np.float64), np.asarray(want, dtype=np.float64).reshape(-1)
    Ef = np.broadcast_to(E, np.shape(got)).reshape(-1)
    size = g.size
    for m, what in row_pitches(np.shape(got)):
        src = np.flatnonzero(m < size)                  # the expected values written, and where they land
        at = m[src]
        rest = np.ones(size, dtype=bool)
        rest[at] = False
        fill = g[rest]
        if fill.size < 1 or not (np.all(fill == fill[0]) or np.all(np.isnan(fill))):
            continue
        # (each value judged by its own element's bound: the expected value at src, stored elsewhere)
        if qd is not None:
            if _fails(go[at], w[src], Ef[src], qd):
                continue
        elif ex.fit_ratio(go[at], w[src], Ef[src]) > 1:
            continue
        if ex.fit_ratio(go[rest], w[rest], Ef[rest]) <= 1:      # the expected values there too: not a gap
            continue
        return (f"written as {what.split(' (')[0]} (row r's values stored from flat offset r * P, those past the "
                f"end dropped); every other element holds {fill[0]:g}, never written")
    return None


def _moves_failures(g, w, E, alt):
    """Whether an explanation ``alt`` moves every failing element of ``g`` (beyond its bound E of the expected
    ``w`` by the judge's own test: a 16-bit array by its rounding interval) out of that bound itself: a
    re-indexing of nearly equal rows (constant inputs) explains nothing."""
    from .localize import failing_mask
    with np.errstate(all="ignore"):
        bad = failing_mask(g, w, E, None)
        return bool(bad.any()) and bool(np.all(np.abs(alt - w)[bad] > E[bad]))


def _averaged_over_leading(ex, got, want, E, qd):
    """A returned statistic holding its expected values averaged over the leading axis (each sample's instance
    statistics reduced over the batch, the buffer a running update reduces into), broadcast back; in words, or
    None."""
    g = np.asarray(got)                 # (its own dtype: the judge's test of a 16-bit array)
    if g.ndim < 2 or g.shape[0] < 2 or qd is not None:
        return None
    w = np.asarray(want, dtype=np.float64).reshape(g.shape)
    avg = np.broadcast_to(w.mean(axis=0, keepdims=True), g.shape)
    Eb = np.broadcast_to(E, g.shape)
    if _moves_failures(g, w, Eb, avg) and ex.fit_ratio(g, avg, np.maximum(Eb, Eb.max(axis=0, keepdims=True))) <= 1:      # (the average's bound: the samples')
        return f"its expected values averaged over axis 0 (the {g.shape[0]} samples), the same for every sample"
    return None


def _rows_shifted(ex, got, want, E, qd):
    """The failing array's rows (the slices of its trailing axes, or its single elements: a row's statistic)
    each holding the expected values of the next row, the last its own (a store pointer advanced before the
    store, or a load's pointer advanced), or of the previous row, the first its own or one never-written fill,
    0 or NaN (each row stored one slot late, the last dropped); or either wrapping (the first holding the last's,
    the last the first's: an index i + 1 taken modulo the count), of the rows or of each row's entries along
    its last axis; in words, or None."""
    g = np.asarray(got)                 # (its own dtype: the judge's test of a 16-bit array)
    if g.size < 2:
        return None

    def fits(g2, alt, Ealt):            # (an array the judge tests in its own dtype qd: by that test)
        return ex.fit_ratio(g2, alt, Ealt) <= 1 if qd is None else not _fails(g2, alt, Ealt, qd)
    for k in range(max(g.ndim - 1, 0), g.ndim + 1):     # rows of the last axis, then single elements
        g2 = g.reshape(-1, int(np.prod(g.shape[k:], dtype=np.int64)))
        if g2.shape[0] < 2:
            continue
        w2 = np.asarray(want, dtype=np.float64).reshape(g2.shape)
        E2 = np.broadcast_to(E, g.shape).reshape(g2.shape)
        unit = "row" if g2.shape[1] > 1 else "element"
        nxt = np.concatenate([w2[1:], w2[-1:]])
        Es = np.maximum(E2, np.concatenate([E2[1:], E2[-1:]]))      # a value moved with its own bound
        if _moves_failures(g2, w2, E2, nxt) and fits(g2, nxt, Es):
            return (f"each {unit} the expected next {unit}'s values, the last {unit} its own (a pointer advanced "
                    "before the store)")
        prev = np.concatenate([w2[:1], w2[:-1]])
        Ep = np.maximum(E2, np.concatenate([E2[:1], E2[:-1]]))
        g64 = g2[0].astype(np.float64)
        fill = np.all(g64 == 0) or np.all(np.isnan(g64))
        late = np.concatenate([g2[:1].astype(np.float64), w2[:-1]]) if fill else prev
        if _moves_failures(g2[1:], w2[1:], E2[1:], prev[1:]) and fits(g2, late, Ep):
            return (f"each {unit} the expected previous {unit}'s values (stored one slot late), the first "
                    + (f"{g64.flat[0]:g}, never written" if fill else "its own") + f", the last {unit}'s dropped")
        for s, what in ((1, f"each {unit} the expected previous {unit}'s values, the first the last's (stored "
                            f"one slot on, wrapping: {unit} i written at i + 1 mod {g2.shape[0]})"),
                        (-1, f"each {unit} the expected next {unit}'s values, the last the first's (read one slot "
                             f"on, wrapping: {unit} i read from i + 1 mod {g2.shape[0]})")):
            rolled = np.roll(w2, s, axis=0)
            Er = np.maximum(E2, np.roll(E2, s, axis=0))
            if _moves_failures(g2, w2, E2, rolled) and fits(g2, rolled, Er):
                return what
        if unit == "row":           # (within each row: its entries one slot on along the last axis, wrapping)
            for s, what in ((1, "each row's entry j the expected entry j - 1 of that row, its first the row's last "
                                f"(stored one slot on, wrapping: j written at j + 1 mod {g2.shape[1]})"),
                            (-1, "each row's entry j the expected entry j + 1 of that row, its last the row's first "
                                 f"(read one slot on, wrapping: j read from j + 1 mod {g2.shape[1]})")):
                rolled = np.roll(w2, s, axis=1)
                Er = np.maximum(E2, np.roll(E2, s, axis=1))
                if _moves_failures(g2, w2, E2, rolled) and fits(g2, rolled, Er):
                    return what
    return None


def _one_index_kept(ex, got, want, E, qd):
    """The failing array holding, at every index of one axis, the expected value at that axis's first or last
    index (each store of a loop landing in one slot, the last kept; a slot's value read for every index); in
    words, or None."""
    g = np.asarray(got)                 # (its own dtype: the judge's test of a 16-bit array)
    if qd is not None:
        return None
    w = np.asarray(want, dtype=np.float64).reshape(g.shape)
    Eb = np.broadcast_to(E, g.shape)
    for ax in (a for a in range(g.ndim) if g.shape[a] > 1):
        for k, which in ((-1, "last"), (0, "first")):
            alt = np.broadcast_to(np.take(w, [k], axis=ax), g.shape)
            Ea = np.maximum(Eb, np.broadcast_to(np.take(Eb, [k], axis=ax), g.shape))
            if _moves_failures(g, w, Eb, alt) and ex.fit_ratio(g, alt, Ea) <= 1:
                return (f"at every index of axis {ax} the expected value at its {which} index"
                        + (" (each store to one slot, the last kept)" if k else " (one slot read for every index)"))
    return None


def _scattered(ex, got, want, E, qd):
    """The failing array's values added into it at another flat index (index i stored at i % k, a reduce kernel's
    local index, or at i // k: several values accumulated in one slot, the others left 0); in words, or None."""
    g = np.asarray(got)
    if qd is not None or g.ndim != 1 or g.size < 3:
        return None
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    Eb = np.broadcast_to(E, g.shape)
    i = np.arange(g.size)
    for k in range(2, g.size):
        if g.size % k:
            continue
        for m, what in ((i % k, f"i % {k}"), (i // k, f"i // {k}")):
            alt = np.bincount(m, weights=w, minlength=g.size)
            Ea = np.maximum(Eb, np.bincount(m, weights=Eb, minlength=g.size))     # (a sum's bound: its terms')
            if _moves_failures(g, w, Eb, alt) and ex.fit_ratio(g, alt, Ea) <= 1:
                return (f"the expected values each added into the slot at {what} (a reduce kernel's local index where "
                        "the global one belongs: several values summed in one slot, the others 0)")
    return None


def _offset_dropped(ex, got, want, E, qd):
    """The failing array written without one axis's offset (a per-sample row stored at index 0 for every
    sample, the batch offset left out; every channel's values at its sample's channel 0, the channel offset
    left out): index 0 of that axis holds the expected values of one of its indices (the last written stays:
    any of them), every other index one never-written fill (0 or NaN) that the expected array does not hold;
    in words, or None."""
    g0 = np.asarray(got)                # (its own dtype for the fits: the judge's test of a 16-bit array)
    w0 = np.asarray(want, dtype=np.float64).reshape(g0.shape)
    E0 = np.broadcast_to(E, g0.shape)
    # (an axis in blocks of b indices, b > 1: a group's channels written at its sample's first b, the group's
    # offset left out)
    for ax, b in ((a, b) for a in range(g0.ndim) if g0.shape[a] > 1 for b in range(1, g0.shape[a] // 2 + 1)
                  if g0.shape[a] % b == 0):
        g, w, Eb = (np.moveaxis(a, ax, 0) for a in (g0, w0, E0))
        if b > 1:
            g, w, Eb = (a.reshape((a.shape[0] // b, b) + a.shape[1:]) for a in (g, w, Eb))
        rest = g[1:].reshape(-1).astype(np.float64)
        fill = rest[0]
        if not (np.all(rest == fill) or np.all(np.isnan(rest))) or not (fill == 0 or np.isnan(fill)):
            continue
        if ex.fit_ratio(g[1:], w[1:], Eb[1:], qd) <= 1:           # the expected values there too: not a gap
            continue
        for r in range(g.shape[0] - 1, 0 if b > 1 else -1, -1):  # (a block scale judged on the check's grid, qd;
            # blocks: block 0 its own is a prefix written alone, _tail_unwritten's)
            # (each moved value judged by the bound of the element it is, or of the place it is stored: the larger)
            if ex.fit_ratio(g[0], w[r], np.maximum(Eb[0], Eb[r]), qd) <= 1:
                if b > 1:
                    return (f"written without axis {ax}'s block offset (blocks of {b} indices): indices "
                            f"0-{b - 1} of axis {ax} hold the expected values of indices {r * b}-{r * b + b - 1} "
                            f"(block {r} of {g.shape[0]}; the last written stays), every other index {fill:g}, "
                            "never written")
                return ("written without " + ("its leading index's" if ax == 0 else f"axis {ax}'s") +
                        f" offset: index 0 of axis {ax} holds the expected values of "
                        f"index {r} (of {g.shape[0]}; the last written stays), every other index {fill:g}, never "
                        "written")
    return None


def _tail_unwritten(ex, got, want, E, qd, x_shape):
    """The failing array's last axis written for its first k entries alone, the rest one never-written fill (0
    or NaN) the expected array does not hold, k a bound a store's mask or loop takes where the axis's length L
    belongs: the row count of x (a column mask against the rows), or L - L mod B (whole tiles of B = 16 ... 128
    alone); in words, or None. Rule 9's block: a tail block skipped, the block's length for the slice's."""
    g0 = np.asarray(got)
    if g0.ndim > 1 and g0.size < int(np.prod(x_shape, dtype=np.int64)):     # (a parameter gradient: its flat
        g0 = g0.reshape(-1)                                                 # entries, one per feature)
    L = g0.shape[-1] if g0.ndim else 0
    rows = int(np.prod(x_shape[:-1], dtype=np.int64)) if len(x_shape) > 1 else 0
    ks = {rows: f"x's row count {rows}"} if 0 < rows < L else {}
    ks.update({L - L % B: f"whole tiles of {B} alone (its bound L // {B})" for B in (16, 32, 64, 128) if 0 < L - L % B < L
               and L - L % B not in ks})
    w0 = np.asarray(want, dtype=np.float64).reshape(g0.shape)
    E0 = np.broadcast_to(E, np.shape(got)).reshape(g0.shape)
    for k, what in sorted(ks.items()):
        rest = g0[..., k:].astype(np.float64)
        fill = rest.reshape(-1)[0]
        if not (np.all(rest == fill) or np.all(np.isnan(rest))) or not (fill == 0 or np.isnan(fill)) \
                or ex.fit_ratio(g0[..., k:], w0[..., k:], E0[..., k:], qd) <= 1 \
                or ex.fit_ratio(g0[..., :k], w0[..., :k], E0[..., :k], qd) > 1:
            continue
        return (f"written for the first {k} of its {L} entries of its last axis alone ({what}), every later entry "
                f"{fill:g}, never written")
    return None


def _write_strides(g):
    """The strides k >= 2, ascending, at which the flat array ``g`` can have been written with every other
    element one fill (0 or NaN): the divisors of the gcd of the indices holding anything else (k = the size
    where only element 0 does: a stride of at least the size)."""
    out = set()
    for fill in (g == 0, np.isnan(g)):
        idx = np.flatnonzero(~fill)
        d = int(np.gcd.reduce(idx)) if idx.size else 0
        out |= {g.size} if d == 0 else {k for k in range(2, d + 1) if d % k == 0}
    return sorted(k for k in out if k >= 2)


def _fails(got, want, E, qd):
    """Whether a quantized array fails the judge's quantized test against ``want``."""
    from .localize import failing_mask
    return bool(np.any(failing_mask(got, np.reshape(want, np.shape(got)), np.broadcast_to(E, np.shape(got)), qd)))


def _sample(got, want, E, k=256, qd=None):
    """Up to k flat indices of the elements of got that fail (the first of them): a candidate screened there
    before it is fitted on the whole array."""
    from .localize import failing_mask
    bad = np.flatnonzero(failing_mask(got, np.reshape(want, np.shape(got)), E, qd))
    return bad[:k] if bad.size else np.arange(min(k, np.size(got)))


# ------------------------------------------------------------------ judging a recomputed step
def _judge(ex, record, ref, vals, text, mech):
    """Explanations of the failing arrays ``vals`` ((part, name) -> array, or a list of alternatives: the
    array as computed and as the kernel returns it) reproduces, when they include every failing output
    (and at least one array) and every passing array of ``vals`` in a failing pass (forward, backward,
    state) stays within its bound; else []. The bound grows with the value it bounds: where the explained
    value is larger than the reference's, by their ratio, at most LARGER."""
    phases = {p for p, _ in record.failing}
    fits = {}
    for (part, name), alts in vals.items():
        got, E = record.got[part].get(name), record.E[part].get(name)
        want = getattr(ref, part).get(name)
        if got is None or E is None or name not in record.compare.get(part, ()):
            continue
        fits[part, name] = False
        for v in alts if isinstance(alts, list) else [alts]:
            if v is None or np.size(v) != np.size(got):
                continue
            v = np.reshape(np.asarray(v, dtype=np.float64), np.shape(got))
            Ev, fits_ref = np.broadcast_to(E, np.shape(got)), False
            if want is not None and np.size(want) == np.size(got):
                w = np.reshape(np.asarray(want, dtype=np.float64), np.shape(got))
                Ev = grown_bound(E, v, w)
                # a failing array the reference fits within the grown bound: no evidence for the candidate
                fits_ref = (part, name) in record.failing and ex.fit_ratio(got, w, Ev) <= 1
            if not fits_ref and ex.fit_ratio(got, v, Ev) <= 1:
                fits[part, name] = True
                break
    if any(not ok for pn, ok in fits.items() if pn not in record.failing and pn[0] in phases):
        return []
    outs = [pn for pn in record.failing if pn[0] == "outputs"]
    keep = [pn for pn in record.failing if fits.get(pn)]
    if not keep or not all(fits.get(pn) for pn in outs):
        return []
    return [{"part": p, "name": n, "step": record.step, "mechanism": mech,
             "text": f"{ex._label(p, n)} is {text}"} for p, n in keep]


def _result_vals(res):
    return {(p, n): v for p in ("outputs", "grads", "state") for n, v in getattr(res, p).items()}


def _evaluate(reference, case, record, inputs, cot=None, training=None, state=None):
    try:
        with np.errstate(all="ignore"):
            return reference(case.op, case.config, record.training if training is None else training, inputs,
                             record.cotangents if cot is None else cot, record.state if state is None else state)
    except Exception:                                       # noqa: BLE001 - a call the specification refuses
        return None


# ------------------------------------------------------------------ an input read in another index order
READ_SIZE = 1 << 14    # the largest x whose inputs are read in other index orders (an evaluation per order)
NEAR_READ = 1e3        # an order missing its arrays by less: the nearest judged again within the bound derived
#                        at its own point (one derivation)


def _wider(e, e2):
    """The bound ``e`` widened to ``e2`` where ``e2`` is one of its shape (a bound derived elsewhere)."""
    return e if e2 is None or np.shape(e2) != np.shape(e) else np.maximum(e, e2)


def row_pitches(shape):
    """(m, what): a dense array of ``shape`` read as rows of its trailing axes' length T at a row pitch P > T
    (an aligned allocation assumed: T rounded up to a multiple of 2^k, or T + 1), row r's T values from flat
    offset r * P, the loads past the end masked to 0 (index ``size`` of ``m``: the caller's appended 0)."""
    size, out = int(np.prod(shape, dtype=np.int64)), []
    for k in range(1, len(shape)):
        T = int(np.prod(shape[k:], dtype=np.int64))
        R = size // max(T, 1)
        if T < 2 or R < 2:
            continue
        pitches = sorted({-(-T // 2 ** j) * 2 ** j for j in range(1, 8)} - {T} | {T + 1})
        for P in pitches:
            m = np.arange(R)[:, None] * P + np.arange(T)[None, :]
            out.append((np.where(m < size, m, size).ravel(), f"rows of {T} at a row pitch of {P} (the {T} values "
                        f"of row r from flat offset r * {P}, loads past the end masked to 0)"))
    return out


def permuted_inputs(ex, case, record, ref, reference, bounds=None):
    """One activation-sized input or cotangent (x, dy, a residual, the gate input) read in another index order
    of its shape (``index_orders``: dy's NCHW memory indexed with channels_last strides, a transposed
    buffer), or at a padded row pitch (``row_pitches``), the rest of the call right: the specification
    re-evaluated with it so read, judged by ``_judge`` -> "layout" (rule 12); an input with its tail columns read
    as 0 (``tail_zero_maps``) -> "block" (rule 9); where only gradients fail, the
    backward alone so reading an input (its gradients from that evaluation, the forward's arrays passing); where
    none fits, the nearest (missing by less than NEAR_READ) judged again within the bound ``bounds`` derives at
    its own point (rows read past the end as zeros have rstd 1 / sqrt(eps): their rounding is that size's).
    Explanations, or []."""
    x = record.inputs.get("x")
    if np.size(x) > READ_SIZE or np.ndim(x) < 2:
        return []
    bwd_only = all(p == "grads" for p, _ in record.failing)
    # (only parameter gradients failing: their own pass alone reading the input so, dx right)
    params_only = bwd_only and all(np.size(record.got["grads"].get(n)) != np.size(x) for _, n in record.failing)
    near = None
    for kind, arrays in (("inputs", record.inputs), ("cotangents", record.cotangents)):
        for name, a in arrays.items():
            if np.shape(a) != np.shape(x) or "mask" in name or np.asarray(a).dtype.kind not in "fV":
                continue
            flat = np.asarray(a).reshape(-1)
            idx = np.arange(flat.size).reshape(np.shape(a))
            # (and each index of axis 0 reading the next or the previous one, wrapping: a pointer off by a row)
            n0 = np.shape(a)[0]
            shifts = [(np.roll(idx, -k, axis=0).ravel(), f"each axis-0 index i holding index i {'+' if k > 0 else '-'} 1's values "
                       "(wrapping: a row pointer off by one)")
                      for k in (1, -1)] if n0 > 1 else []
            shifts += [(idx[np.minimum(np.arange(n0) + 1, n0 - 1)].ravel(), "each axis-0 index i holding index i + 1's "
                        "values (the last its own: a row pointer advanced before the load)")] if n0 > 1 else []
            # (and each row, over the leading axes, holding the previous row's values, the first 0 or its own: a
            # software-pipelined register still holding the last iteration's)
            rows = idx.reshape(-1, np.shape(a)[-1])
            if rows.shape[0] > 1:
                prev = np.vstack([np.full_like(rows[:1], flat.size), rows[:-1]])
                shifts += [(prev.ravel(), "each row holding the previous row's values, the first row 0 (a pipelined "
                            "register still holding the last iteration's, initialised to 0)"),
                           (np.vstack([rows[:1], rows[:-1]]).ravel(), "each row holding the previous row's values, "
                            "the first row its own (a pipelined register still holding the last iteration's)")]
            # (and each index of one axis reading index 0 of it: the load's offset of that axis left out)
            shifts += [(np.take(idx, np.zeros(np.shape(a)[k], dtype=int), axis=k).ravel(), f"each axis-{k} index "
                        f"holding index 0's values (the load's offset of that axis left out)")
                       for k in range(np.ndim(a)) if np.shape(a)[k] > 1]
            flat = np.append(flat, np.zeros(1, dtype=flat.dtype))       # (index flat.size - 1: a masked load's 0)
            maps = [(m, what, "layout") for m, what in index_orders(np.shape(a)) + shifts + row_pitches(np.shape(a))]
            if kind == "inputs" and not params_only:   # (a parameter gradient's partials without their tail
                maps += tail_zero_maps(idx, flat.size - 1)  # positions are rule 11's, explain.py's family)
            for m, what, mech in maps:
                moved = {**arrays, name: flat[m].reshape(np.shape(a))}
                res = (_evaluate(reference, case, record, moved) if kind == "inputs"
                       else _evaluate(reference, case, record, record.inputs, moved))
                if res is None:
                    continue
                label = name if kind == "inputs" else f"d{name}"
                vals = _result_vals(res)
                if kind == "inputs" and bwd_only:   # the backward alone reading it (its forward right)
                    vals = {k: v for k, v in vals.items() if k[0] == "grads" and (k in record.failing or not params_only)}
                text = f"the specification's {'parameter gradients' if params_only else 'backward'} with {label} " \
                    f"read as {what}" if bwd_only else f"the specification's with {label} read as {what}"
                found = _judge(ex, record, ref, vals, text, mech)
                if len(found) == len(record.failing):     # every failing array (a sum alone fits many orders)
                    return found
                if bounds is None:
                    continue
                miss = max((ex.fit_ratio(record.got[p][n], vals[p, n], record.E[p][n]) for p, n in record.failing
                            if (p, n) in vals), default=math.inf)
                if miss < (near[0] if near else NEAR_READ):
                    near = (miss, kind, moved, res, vals, text, mech)
    if near:            # the nearest miss judged again within the bound derived at its own point (rows read as
        _, kind, moved, res, vals, text, mech = near    # zeros past the end: their rstd 1 / sqrt(eps), far larger)
        try:
            E2 = bounds(case.config, record.training, moved if kind == "inputs" else record.inputs,
                        moved if kind == "cotangents" else record.cotangents, record.state, res)
        except Exception:                                   # noqa: BLE001 - no bound derived there
            return []
        E = {**record.E, **{p: {n: _wider(e, E2.get(p, {}).get(n)) for n, e in record.E[p].items()}
                            for p in ("outputs", "grads", "state") if p in record.E}}
        found = _judge(ex, dataclasses.replace(record, E=E), ref, vals, text, mech)
        if len(found) == len(record.failing):
            return found
    return []


def substituted_inputs(ex, case, record, ref, reference, substitutions):
    """The specification evaluated with some of the call's inputs substituted, the rest of the call right: each
    of ``substitutions`` (``overwritten_inputs``, ``gain_squared``, ``params_through``, ``quant_windows``) yields
    (inputs, phase, text, mechanism) for the failure ``record`` (phase: the one part of the evaluation judged,
    or None for all), and the first whose evaluation ``_judge`` finds to explain every failing array is the
    explanation. Explanations, or []."""
    for substitution in substitutions:
        for ins, phase, text, mech in substitution(case, record):
            res = _evaluate(reference, case, record, ins)
            vals = {} if res is None else {k: v for k, v in _result_vals(res).items() if phase in (None, k[0])}
            found = vals and _judge(ex, record, ref, vals, text, mech)
            if found and len(found) == len(record.failing):
                return found
    return []


def _failing_only(record, phase):
    return bool(record.failing) and all(p == phase for p, _ in record.failing)


def overwritten_inputs(case, record):
    """Substitutions (``substituted_inputs``): the backward recomputing from an input's buffer after the forward
    wrote one of its outputs over it in place (x's buffer holding y, as stored), only gradients failing: that
    input read as the returned output -> "backward" (rule 15: the wrong saved value; an input re-read after the
    op's own output was written over it, session 35's decision)."""
    x = record.inputs.get("x")
    if np.size(x) > READ_SIZE or not _failing_only(record, "grads"):
        return
    for name, a in record.inputs.items():
        if np.shape(a) != np.shape(x) or "mask" in name or np.asarray(a).dtype.kind not in "fV":
            continue
        for o, v in record.got.get("outputs", {}).items():
            if np.shape(v) == np.shape(a) and np.asarray(v).dtype.kind == "f":
                yield ({**record.inputs, name: np.asarray(v, dtype=np.float64)}, "grads", f"the specification's "
                       f"backward with {name} read from its buffer after the returned {o} was written over it in "
                       "place", "backward")


TAIL_TILES = (16, 32, 64, 128)         # tail_zero_maps: the vector widths whose loop masks an input's tail


def tail_zero_maps(idx, zero):
    """(m, what, "block"): the index array ``idx`` (an input's flat indices, its shape) with its last k columns
    pointed at ``zero`` (a masked load's 0), k = N mod B for a B-wide vector loop whose whole-vector mask reads
    columns < B floor(N / B) only (rule 9: a tail block skipped)."""
    N = np.shape(idx)[-1]
    out = []
    for k in sorted({N % b for b in TAIL_TILES if b < N} - {0}):
        m = np.array(idx, copy=True)
        m[..., N - k:] = zero
        out.append((m.ravel(), f"0 in its last {k} columns (its load masked to the first {N - k}: a vector "
                    "loop's whole-vector bound)", "block"))
    return out


GAINS = ("weight", "weight1", "scale", "gamma")     # the multiplicative parameters (gain_squared)


def gain_squared(case, record):
    """Substitutions (``substituted_inputs``): a gain (``GAINS``) multiplied in twice by the forward (the
    normalize step and an epilogue each applying it: w^2 where w belongs), only outputs failing: the gain
    squared -> "affine" (rule 13: which parameter multiplies, and how)."""
    if not _failing_only(record, "outputs"):
        return
    for name in GAINS:
        w = record.inputs.get(name)
        if w is None or np.asarray(w).dtype.kind != "f" or np.all(np.asarray(w, dtype=np.float64) ** 2 == w):
            continue
        yield ({**record.inputs, name: np.asarray(w, dtype=np.float64) ** 2}, "outputs", f"the specification's "
               f"with {name} applied twice ({name}^2 where {name} belongs: the normalize step and an epilogue each "
               "multiplying by it)", "affine")


def params_through(case, record):
    """Substitutions (``substituted_inputs``): the op's parameters (every floating parameter of
    ``PARAMETERS``, all together) read through a dtype of fewer significand bits than the case's
    (``precision.RANK``: a mixed-precision model's bfloat16 copies; rounded to nearest) -> "precision" (rule
    13: a parameter loaded in a dtype below the case's is rule 8's)."""
    names = [k for k in PARAMETERS if record.inputs.get(k) is not None
             and np.asarray(record.inputs[k]).dtype.kind == "f" and np.size(record.inputs[k]) > 1]
    if not names or case.dtype not in RANK:
        return
    for dt in (d for d in DTYPES if RANK[d] < RANK[case.dtype]):
        ins = {**record.inputs, **{k: np.asarray(round_to(record.inputs[k], dt), dtype=np.float64) for k in names}}
        if not all(np.array_equal(ins[k], record.inputs[k]) for k in names):
            yield ins, None, f"the specification's with {', '.join(names)} read through {dt} (rounded to nearest)", \
                "precision"


def coefficients_shifted(case, record):
    """Substitutions (``substituted_inputs``): a vector of coefficients (a parameter of PARAMETERS that no
    feature of x broadcasts over, ``feature_ids`` None: poly_norm's weight per power) read one slot on or back,
    the load past its end masked to 0 (a packed parameter buffer assumed) -> "affine" (rule 13: which parameter
    multiplies; a per-feature parameter at another index is rule 12's, ``param_index``)."""
    x = record.inputs.get("x")
    for name in PARAMETERS:
        w = record.inputs.get(name)
        if w is None or x is None or np.ndim(w) != 1 or np.size(w) < 2 or np.asarray(w).dtype.kind != "f" \
                or feature_ids(case, np.shape(x), name, np.shape(w)) is not None:
            continue
        w = np.asarray(w, dtype=np.float64)
        for v, what in ((np.append(w[1:], 0.0), "one slot on (entry k + 1 for k"),
                        (np.insert(w[:-1], 0, 0.0), "one slot back (entry k - 1 for k")):
            yield {**record.inputs, name: v}, None, f"the specification's with {name} read {what}, the load past " \
                f"its end masked to 0)", "affine"


# ------------------------------------------------------------------ parameters at another index
def feature_ids(case, x_shape, name, p_shape):
    """For each element of x, the flat index of the element of parameter ``name`` (of ``p_shape``) it
    reads, or None when the op's broadcast rule for it is unknown."""
    nd, pd = len(x_shape), len(p_shape)
    ids = np.arange(int(np.prod(p_shape, dtype=np.int64))).reshape(p_shape)
    if case.op in PER_CHANNEL:
        if pd != 1 or nd < 2 or p_shape[0] != x_shape[1]:
            return None
        ids = ids.reshape((1, -1) + (1,) * (nd - 2))
    elif case.op == "adaptive_layer_norm" and name in ("scale", "shift"):
        if pd != 2 or nd < 2 or (p_shape[0], p_shape[1]) != (x_shape[0], x_shape[-1]):
            return None
        ids = ids.reshape((p_shape[0],) + (1,) * (nd - 2) + (p_shape[1],))
    elif not (0 < pd <= nd and tuple(x_shape[nd - pd:]) == tuple(p_shape)):
        return None
    return np.broadcast_to(ids, x_shape)


def _effective(case, record, reference, wn, bn, ids, P):
    """The per-feature effective values of the parameters wn (and bn) that the kernel's y implies: least
    squares over the rows of y = y0 + A_w w + A_b b (the coefficients from the specification at 0 and 1).
    (w_eff, b_eff or None, well-posed mask) or None when y is not affine in them."""
    x = record.inputs["x"]
    got = np.asarray(record.got["outputs"]["y"], dtype=np.float64)
    zeros = {n: np.zeros(np.shape(record.inputs[n])) for n in (wn, bn) if n}
    ones = {n: np.ones(np.shape(record.inputs[n])) for n in (wn, bn) if n}
    ev = lambda d: _evaluate(reference, case, record, {**record.inputs, **d}, cot={})  # noqa: E731
    r0, rw = ev(zeros), ev({**zeros, wn: ones[wn]})
    rb = ev({**zeros, bn: ones[bn]}) if bn else None
    if r0 is None or rw is None or (bn and rb is None):
        return None
    y0 = np.asarray(r0.outputs["y"], dtype=np.float64)
    Aw = np.asarray(rw.outputs["y"], dtype=np.float64) - y0
    Ab = np.asarray(rb.outputs["y"], dtype=np.float64) - y0 if bn else np.zeros_like(y0)
    if np.shape(y0) != np.shape(x) or np.shape(got) != np.shape(x):
        return None
    w = np.asarray(record.inputs[wn], dtype=np.float64).reshape(-1)
    b = np.asarray(record.inputs[bn], dtype=np.float64).reshape(-1) if bn else np.zeros(P)
    lin = y0 + Aw * w[ids] + Ab * b[ids]                    # affine in the parameters: the reference's y
    scale = np.max(np.abs(lin)) + 1e-300
    full = _evaluate(reference, case, record, record.inputs, cot={})
    if full is None or np.max(np.abs(lin - np.asarray(full.outputs["y"], dtype=np.float64))) > 1e-9 * scale:
        return None
    ok = np.isfinite(got) & np.isfinite(Aw) & np.isfinite(Ab) & np.isfinite(y0)
    r = np.where(ok, got - y0, 0.0)
    Aw, Ab = np.where(ok, Aw, 0.0), np.where(ok, Ab, 0.0)
    f = ids.reshape(-1)
    s = lambda a: np.bincount(f, weights=a.reshape(-1), minlength=P)   # noqa: E731
    saa, sbb, sab, sar, sbr = s(Aw * Aw), s(Ab * Ab), s(Aw * Ab), s(Aw * r), s(Ab * r)
    if not bn:
        good = saa > 1e-12 * (np.max(saa) + 1e-300)
        return np.where(good, sar / np.where(good, saa, 1.0), np.nan), None, good
    det = saa * sbb - sab * sab
    good = det > 1e-9 * (np.max(saa) * np.max(sbb) + 1e-300)
    d = np.where(good, det, 1.0)
    return (np.where(good, (sar * sbb - sbr * sab) / d, np.nan), np.where(good, (sbr * saa - sar * sab) / d, np.nan),
            good)


def _offset(case, name):
    """The constant the op adds to parameter ``name`` to make its gain (adaptive_layer_norm's 1 + scale, the
    weight_offset), 0 for any other."""
    if case.op == "adaptive_layer_norm" and name == "scale":
        return 1.0
    return float(case.config.get("weight_offset", 0.0) or 0.0) if name == "weight" else 0.0


def _gain_text(o, name):
    return f"{o:g} + {name}" if o else name


def _param_candidates(case, name, v, shape):
    """(values, what, mechanism, index map or None) for a parameter: read in another index order ("layout")
    or rounded to the 16-bit case dtype ("affine": the cast order), alone or as its gain (1 + scale,
    weight + offset)."""
    import ml_dtypes
    P = v.size
    out = []
    i = np.arange(P)
    maps = [(m, f"in another index order: {what}") for m, what in index_orders(shape)] if len(shape) > 1 else []
    maps += [(P - 1 - i, "in reversed order")]
    maps += [((i // k) * k + (k - 1 - i % k), f"with each block of {k} elements reversed (vector halves or lanes in "
              "the wrong order)") for k in (2, 4, 8) if P % k == 0 and P > k]
    maps = [(m, what, "layout") for m, what in maps]
    for k in range(1, min(P, MAPS_MAX + 1)):
        maps.append((i % k, f"at the block-local index: element i takes {name}[i % {k}] (blocks of {k})", "layout"))
        if k > 1:       # one value per group of k features: a per-group affine convention (the catalogue's
            maps.append((i // k, f"at index i // {k} (one value per group of {k}: a per-group affine where "
                                 "per-feature belongs)", "affine"))    # gn_per_group_affine), not a permutation
    seen = {i.tobytes()}
    for m, what, mech in maps:
        if m.tobytes() not in seen:
            seen.add(m.tobytes())
            out.append((v[m], f"{name} read {what}", mech, m))
    if P > 1:       # one element late or early, the element off the end masked to 0 (a 1-based column index)
        out += [(np.append(v[1:], 0.0), f"{name} read one element late (element i takes {name}[i + 1], a 1-based "
                 "index; the last masked to 0)", "layout", None),
                (np.append(0.0, v[:-1]), f"{name} read one element early (element i takes {name}[i - 1]; the first "
                 "masked to 0)", "layout", None)]
    dt = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}.get(case.dtype)
    if dt is not None:
        off = _offset(case, name)
        for o, what in ((0.0, name), (off, f"the gain {off:g} + {name}")) if off else ((0.0, name),):
            r = (v + o).astype(dt).astype(np.float64) - o
            if not np.array_equal(r, v):
                out.append((r, f"{what} rounded to {case.dtype} before the product", "affine", None))
    return out


def _pairs_present(record):
    """For each pair of PAIRS (a gain and its offset), the names of those the call passes as floating arrays
    (the gain's first), where any is."""
    for pair in PAIRS:
        have = [n for n in pair if record.inputs.get(n) is not None and np.ndim(record.inputs[n])
                and np.asarray(record.inputs[n]).dtype.kind not in "iub"]
        if have:
            yield have


def param_index(ex, case, record, ref, reference):
    """The parameters (weight and bias, scale and shift) read at another index or rounded
    (``_param_candidates``), screened by the effective values the kernel's y implies (where y is affine in
    them; else, for UNSCREENED ops, each index map tried on the weight, the bias and both), confirmed by the
    specification re-evaluated with them: explanations, or []."""
    x = record.inputs.get("x")
    if x is None or ("outputs", "y") not in record.failing or np.shape(record.got["outputs"].get("y")) != np.shape(x):
        return []
    for have in _pairs_present(record):
        wn2, bn2 = (have[0], have[1] if len(have) > 1 else None)
        shape = np.shape(record.inputs[wn2])
        if bn2 and np.shape(record.inputs[bn2]) != shape:
            bn2 = None
        ids = feature_ids(case, np.shape(x), wn2, shape)
        P = int(np.prod(shape, dtype=np.int64))
        if ids is None or P < 2:
            continue
        eff = _effective(case, record, reference, wn2, bn2, ids, P)
        if eff is not None:
            combos = _screened(case, record, wn2, bn2, shape, eff)
        elif case.op in UNSCREENED:
            combos = _unscreened(case, record, wn2, bn2, shape)
        else:
            continue
        for whats in combos:
            mechs = {c[2] for _, c in whats}
            if len(mechs) != 1:
                continue
            if any(isinstance(c[3], (str, tuple)) for _, c in whats) and len(whats) > 1:
                continue                    # the bias inside the product: the weight read as it is
            inputs = {**record.inputs, **{n: c[0].reshape(shape).astype(np.asarray(record.inputs[n]).dtype
                                                                        if c[2] == "layout" else np.float64)
                                          for n, c in whats}}
            res = _evaluate(reference, case, record, inputs)
            if res is None:
                continue
            text = "the specification's with " + " and ".join(c[1] for _, c in whats)
            vals = _result_vals(res)
            for n, c in whats:             # the gradient of the parameter as read, or summed back to its elements
                dp = vals.get(("grads", n))
                if isinstance(c[3], str) and dp is not None:        # b' = w b: db = w db', dw = dw' + b db'
                    w = np.asarray(record.inputs[wn2], dtype=np.float64).reshape(np.shape(dp))
                    vals["grads", n] = np.asarray(dp, dtype=np.float64) * w
                    if vals.get(("grads", wn2)) is not None:
                        vals["grads", wn2] = np.asarray(vals["grads", wn2], dtype=np.float64) + np.asarray(
                            record.inputs[n], dtype=np.float64).reshape(np.shape(dp)) * dp
                elif isinstance(c[3], tuple) and dp is not None:       # w' = f(w): dw = f'(w) dw'
                    vals["grads", n] = np.asarray(dp, dtype=np.float64) * c[3][1].reshape(np.shape(dp))
                elif c[3] is not None and dp is not None and np.size(dp) == c[3].size:
                    back = np.bincount(c[3], weights=np.asarray(dp, dtype=np.float64).reshape(-1), minlength=c[3].size)
                    vals["grads", n] = [dp, back]
            found = _judge(ex, record, ref, vals, text, mechs.pop())
            if found:
                return found
    return []


UNSCREENED = ("group_norm_silu",)   # y not affine in its parameters (silu(x_hat w + b)): every index map tried
UNSCREENED_MAX = 24                  # the index maps tried per parameter there


def _screened(case, record, wn2, bn2, shape, eff):
    """The candidate readings [(name, candidate)] the least-squares screen keeps, best first (at most 8)."""
    picks = {}
    for n, e in zip((wn2, bn2), eff[:2]):
        if n is None:
            continue
        v = np.asarray(record.inputs[n], dtype=np.float64).reshape(-1)
        spread = np.max(np.abs(v - np.mean(v))) + 1e-30
        tol = SCREEN * spread + 1e-6 * np.max(np.abs(v))
        good = eff[2] & np.isfinite(e)
        if not good.any():
            continue
        err = lambda c: float(np.max(np.abs(e[good] - c[good]))) / tol     # noqa: E731
        cands = _param_candidates(case, n, v, shape)
        if n == wn2:                    # the gain applied twice: (o + w)^2 where o + w belongs (o its offset)
            o = _offset(case, n)
            cands.append(((v + o) ** 2 - o, f"the gain {_gain_text(o, n)} applied twice (its square)", "affine",
                          ("chain", 2 * (v + o))))
        if n == bn2:                    # the bias added before the gain multiplies: y = w (x_hat + b)
            w = np.asarray(record.inputs[wn2], dtype=np.float64).reshape(-1)
            cands.append((v * w, f"{n} inside the {wn2}'s product ({wn2} (u + {n}) where {wn2} u + {n} belongs, u "
                                 "the normalized value)", "affine", "inside"))
        picks[n] = sorted([(err(c[0]), c) for c in [(v, None, None, None)] + cands if err(c[0]) <= 1],
                          key=lambda t: t[0])[:6]
    names = list(picks)
    combos = sorted(itertools.product(*(picks[n] for n in names)), key=lambda cs: sum(t[0] for t in cs))
    return [[(n, t[1]) for n, t in zip(names, combo) if t[1][1] is not None] for combo in combos[:8]]


def _unscreened(case, record, wn2, bn2, shape):
    """The index maps of ``_param_candidates`` (at most UNSCREENED_MAX) applied to the weight, the bias and both:
    [(name, candidate)] lists, unscreened (y not affine in the parameters)."""
    names = [n for n in (wn2, bn2) if n is not None]
    vals = {n: np.asarray(record.inputs[n], dtype=np.float64).reshape(-1) for n in names}
    maps = [c for c in _param_candidates(case, wn2, vals[wn2], shape) if c[3] is not None][:UNSCREENED_MAX]
    out = []
    for m, what, mech in ((c[3], c[1][len(f"{wn2} read "):], c[2]) for c in maps):
        per = {n: (vals[n][m], f"{n} read {what}", mech, m) for n in names}
        out += [[(n, per[n])] for n in names] + ([[(n, per[n]) for n in names]] if len(names) > 1 else [])
    return out


ROW_VALUES = 64        # parameters read at the row index: at most this many distinct values evaluated


def params_by_row(ex, case, record, ref, reference):
    """The parameters (weight and bias, of the trailing axes' shape P) read at the row's index instead of the
    feature's (a loop variable mixed up: row r reads weight[r % P] and bias[r % P] for every feature), forward and
    backward: each row of y and dx the specification's with its parameters constant at that value (one
    evaluation per distinct value), the other arrays as they are; explanations ("layout"), or []."""
    x = record.inputs.get("x")
    if x is None or case.op in PER_CHANNEL or not any(
            p == "outputs" and np.size(record.got[p].get(n)) == np.size(x) for p, n in record.failing):
        return []
    pairs = list(_pairs_present(record))
    # (both parameters at the row's index, or one of them alone: the bias's pointer offset by the row)
    for have in pairs + [(n,) for pair in pairs if len(pair) > 1 for n in pair]:
        shape = np.shape(record.inputs[have[0]])
        P = int(np.prod(shape, dtype=np.int64))
        if P < 2 or any(np.shape(record.inputs[n]) != shape for n in have) \
                or feature_ids(case, np.shape(x), have[0], shape) is None:
            continue
        R = np.size(x) // P
        if R < 2:
            continue
        rows = np.arange(R) % P
        if len(set(rows.tolist())) > ROW_VALUES:
            continue
        vals = {}
        for k in sorted(set(rows.tolist())):
            inputs = {**record.inputs, **{n: np.full(shape, np.asarray(record.inputs[n]).reshape(-1)[k],
                                                     dtype=np.asarray(record.inputs[n]).dtype) for n in have}}
            res = _evaluate(reference, case, record, inputs)
            if res is None:
                break
            # (every output of x's size or of one value per row: y, a quantizer's codes, its scale and amax)
            for part, name in [("outputs", n) for n in res.outputs] + [("grads", "x")]:
                v = getattr(res, part).get(name)
                if v is not None and (np.size(v) == np.size(x) or part == "outputs" and np.size(v) == R):
                    cur = vals.setdefault((part, name), np.zeros((R, np.size(v) // R)))
                    cur[rows == k] = np.reshape(np.asarray(v, dtype=np.float64), (R, -1))[rows == k]
        else:
            full = _result_vals(ref)
            full.update(vals)
            found = _judge(ex, record, ref, full, f"the specification's with {' and '.join(have)} read at the row's "
                           f"index (row r reading element r % {P} for every feature)", "layout")
            if found:
                return found
    return []


# ------------------------------------------------------------------ statistics over other axes
def _own_axes(case, record, x):
    """(a view of x's shape, the axes of it the op's statistics reduce, centred) for the ops ``other_axes``
    covers (group_norm's view: (N, G, C / G, positions)), or None."""
    sh, nd = tuple(np.shape(x)), np.ndim(x)
    if case.op in ("layer_norm", "rms_norm"):
        ns = case.config.get("normalized_shape", 1)
        k = len(ns) if np.ndim(ns) else 1
        return sh, tuple(range(nd - k, nd)), case.op == "layer_norm"
    if case.op == "adaptive_layer_norm":
        return sh, (nd - 1,), True
    if case.op == "instance_norm" and nd >= 3 and (record.training or record.state.get("running_mean") is None):
        return sh, tuple(range(2, nd)), True
    if case.op == "batch_norm" and nd >= 2 and record.training:
        return sh, (0,) + tuple(range(2, nd)), True
    G = case.config.get("num_groups")
    if case.op in GROUPED and nd >= 2 and isinstance(G, int) and not isinstance(G, bool) and G >= 1 \
            and sh[1] % G == 0:
        return (sh[0], G, sh[1] // G, int(np.prod(sh[2:], dtype=np.int64))), (2, 3), True
    return None


def _gain_offset(case, record, x):
    """(gain, offset, gain's parameter name or None, offset's name or None) broadcast to x's shape."""
    gn, on = ("scale", "shift") if case.op == "adaptive_layer_norm" else ("weight", "bias")
    full = lambda n: (np.asarray(record.inputs[n], dtype=np.float64).reshape(-1)[  # noqa: E731
        feature_ids(case, np.shape(x), n, np.shape(record.inputs[n]))])
    g = record.inputs.get(gn)
    gain = np.ones(np.shape(x)) if g is None else full(gn)
    if case.op == "adaptive_layer_norm" and g is not None:
        gain = 1.0 + gain
    elif gn == "weight":
        gain = gain + float(case.config.get("weight_offset", 0.0) or 0.0)
    off = np.zeros(np.shape(x)) if record.inputs.get(on) is None else full(on)
    return gain, off, (gn if g is not None else None), (on if record.inputs.get(on) is not None else None)


def _axes_vals(case, record, x, view, R, centred, gain, off, gn, on, own, act=True):
    """y, mean, rstd, dx and the gain's and offset's gradients (flat, x's element order) with the statistics
    over the axes R of x, gain and offset (x's shape) seen as ``view``; ``own``: (the op's view, its axes):
    the saved statistics are the new ones where they have the saved size, or their average over each of the
    op's own slices, or the first or last of them in each slice."""
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    xv = x.reshape(view)
    gv, ov = np.broadcast_to(gain, x.shape).reshape(view), np.broadcast_to(off, x.shape).reshape(view)
    mean = xv.mean(axis=R, keepdims=True) if centred else np.zeros((1,) * xv.ndim)
    d = xv - mean
    rstd = 1.0 / np.sqrt((d * d).mean(axis=R, keepdims=True) + eps)
    xhat = d * rstd
    p = xhat * gv + ov
    silu = case.op == "group_norm_silu" and act        # (act=False: y before the epilogue)
    if silu:                                # the fused SiLU after the affine: y = p sigmoid(p)
        sg = 1.0 / (1.0 + np.exp(-p))
        vals = {("outputs", "y"): (p * sg).reshape(-1)}
    else:
        vals = {("outputs", "y"): p.reshape(-1)}
    for nm, st in (("mean", mean), ("rstd", rstd)):
        full = np.broadcast_to(st, view).reshape(own[0])
        avg = full.mean(axis=own[1])
        ends = [full[tuple(slice(None) if a not in own[1] else e for a in range(full.ndim))] for e in (0, -1)]
        vals["outputs", nm] = [st, avg] + ends      # (or the first or last slice's: one written last)
    dy = record.cotangents.get("y")
    if dy is not None:
        dy = np.asarray(dy, dtype=np.float64).reshape(view)
        if silu:                            # dL/dp = dy silu'(p), silu'(p) = s (1 + p (1 - s))
            dy = dy * sg * (1.0 + p * (1.0 - sg))
        g = dy * gv
        t = g - g.mean(axis=R, keepdims=True) if centred else g
        vals["grads", "x"] = (rstd * (t - xhat * (g * xhat).mean(axis=R, keepdims=True))).reshape(-1)
        for n, term in ((gn, dy * xhat), (on, dy)):
            if n:
                p = record.inputs[n]
                ids = feature_ids(case, x.shape, n, np.shape(p))
                vals["grads", n] = np.bincount(ids.reshape(-1), weights=term.reshape(-1), minlength=np.size(p))
    return vals


def _setup(ex, case, record, ref):
    """(x as float64, its view, the op's axes, centred, gain, offset, their names) when the op's own formula
    on that view reproduces the reference's y; else None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > ex.CONFIG_SIZE or not 2 <= np.ndim(x) <= 5:
        return None
    own = _own_axes(case, record, x)
    if own is None:
        return None
    view, R0, centred = own
    x = np.asarray(x, dtype=np.float64)
    try:
        gain, off, gn, on = _gain_offset(case, record, x)
    except (TypeError, ValueError, IndexError):              # a parameter whose shape the rule does not cover
        return None
    y = ref.outputs.get("y")
    with np.errstate(all="ignore"):
        mine = _axes_vals(case, record, x, view, R0, centred, gain, off, gn, on, (view, R0))["outputs", "y"]
    if y is None or np.size(y) != np.size(mine) or \
            np.max(np.abs(mine - np.reshape(y, -1))) > 1e-9 * (np.max(np.abs(y)) + 1e-300):
        return None                                          # the formula is not the op's: nothing to vary
    return x, view, R0, centred, gain, off, gn, on


def _normalizers_axes(nd):
    """The axes of x another normalizer's statistics span: layer_norm's (every axis but the batch's),
    instance_norm's (the positions), batch_norm's (every axis but the channels')."""
    if nd < 2:
        return []
    return [frozenset(range(1, nd)), frozenset(range(2, nd)), frozenset({0} | set(range(2, nd)))]


def _x_axes(case, view, R, nd):
    """The axes of x the view's axes ``R`` cover (group_norm's (N, G, C / G, positions) view: the channels
    only where both G and C / G are in R; None where R covers a part of the channels)."""
    if case.op not in GROUPED or len(view) != 4 or nd < 2:
        return frozenset(R)
    if (1 in R) != (2 in R):
        return None
    return frozenset(({0} if 0 in R else set()) | ({1} if 1 in R else set()) | (set(range(2, nd)) if 3 in R else set()))


def other_axes(ex, case, record, ref):
    """The statistics over another subset of x's axes, or (group_norm) over strided groups of channels
    (module docstring): explanations, or []."""
    st = _setup(ex, case, record, ref)
    if st is None:
        return []
    x, view, R0, centred, gain, off, gn, on = st
    cands = []
    for k in range(1, len(view) + 1):
        for R in itertools.combinations(range(len(view)), k):
            if case.op in GROUPED and R == (1, 2, 3):
                continue                    # one group: explain.config_deviation's num_groups = 1
            if R != R0 and np.prod([view[i] for i in R]) >= 2:
                names = "x's axes" if view == x.shape else f"the axes of x seen as {view}"
                where = f"{names} ({', '.join(map(str, R))}) where ({', '.join(map(str, R0))}) belong"
                if set(R) < set(R0):        # a part of each slice: the group the statistics span
                    n = int(np.prod([view[i] for i in R]))
                    cands.append((view, R, f"the formula's with the statistics over groups of {n} of each slice's "
                                           f"values: {where}", "group"))
                elif set(R) > set(R0) and _x_axes(case, view, R, np.ndim(x)) not in _normalizers_axes(np.ndim(x)):
                    # the slice's values and more, no other normalizer's (pooled over the batch, the whole tensor)
                    cands.append((view, R, f"the formula's with the statistics pooled over {where}", "reduction"))
                else:
                    cands.append((view, R, f"the formula's with the statistics taken over {where} (another "
                                           "normalizer's axes)", "semantics"))
    if case.op in GROUPED and 1 < view[1] and 1 < view[2]:
        N, G, cg, S = view
        cands.append(((N, cg, G, S), (1, 3), f"the formula's with strided groups (channel c in group c % {G}) where "
                                             f"groups of {cg} adjacent channels belong", "layout"))
    for v, R, text, mech in cands:
        with np.errstate(all="ignore"):
            vals = _axes_vals(case, record, x, v, R, centred, gain, off, gn, on, (view, R0))
        found = _judge(ex, record, ref, vals, text, mech)
        if found:
            return found
    return []


def _epilogue(case, p):
    """The op's activation after the affine (group_norm_silu's SiLU), else p itself."""
    return p / (1.0 + np.exp(-p)) if case.op == "group_norm_silu" else p


def expanded_index(ex, case, record, ref):
    """The gain and offset as each element of x reads them (the parameters broadcast to x's shape) taken in
    another index order of x (``index_orders``: a per-sample modulation read at row % B where row // T
    belongs), for the ops ``other_axes`` covers: explanations, or []."""
    st = _setup(ex, case, record, ref)
    if st is None or (st[6] is None and st[7] is None):
        return []
    x, view, R0, centred, gain, off, gn, on = st
    y, got = ref.outputs["y"], record.got["outputs"].get("y")
    fail_y = ("outputs", "y") in record.failing and got is not None and np.size(got) == x.size
    if fail_y:                                  # screened on y's failing elements first
        with np.errstate(all="ignore"):
            xh = _axes_vals(case, record, x, view, R0, centred, 1.0, 0.0, None, None, (view, R0),
                            act=False)["outputs", "y"]
        s = _sample(got, y, record.E["outputs"]["y"])
        g1, E1 = np.asarray(got).reshape(-1)[s], np.broadcast_to(record.E["outputs"]["y"], np.shape(got)).reshape(-1)[s]
    orders = index_orders(x.shape) + (channel_reads(x.shape) if case.op in PER_CHANNEL else [])
    names = " and ".join(n for n in (gn, on) if n)
    screen = (lambda gm, om: ex.fit_ratio(g1, _epilogue(case, xh[s] * gm[s] + om[s]), E1) <= LARGER) if fail_y \
        else None
    return _reordered(ex, record, ref, orders, gain, off, x.shape,
                      lambda gm, om: _axes_vals(case, record, x, view, R0, centred, gm, om, gn, on, (view, R0)),
                      f"the formula's with {names} as x's elements read them taken in another index order of x",
                      screen)


def _reordered(ex, record, ref, orders, gain, off, shape, vals_of, text, screen=None):
    """The first explanation ("layout", ``_judge``) of the arrays ``vals_of(gm, om)`` computes with the gain
    and offset as x's elements read them (broadcast to ``shape``) taken in each index order ``(m, what)`` of
    ``orders`` (flat indices into x), skipping an order the parameters are constant along and one ``screen(gm,
    om)`` (flat) rejects: explanations, or []."""
    g, o = np.broadcast_to(gain, shape).reshape(-1), np.broadcast_to(off, shape).reshape(-1)
    for m, what in orders:
        gm, om = g[m], o[m]
        if np.array_equal(gm, g) and np.array_equal(om, o) or screen is not None and not screen(gm, om):
            continue                         # the parameters constant along the permuted axes: no misread
        with np.errstate(all="ignore"):
            vals = vals_of(gm.reshape(shape), om.reshape(shape))
        found = _judge(ex, record, ref, vals, f"{text}: {what}", "layout")
        if found:
            return found
    return []


def eval_index(ex, case, record, ref):
    """``expanded_index`` for the channel norms' eval calls (batch_norm, instance_norm with running statistics):
    x_hat from the running statistics, y = x_hat g + o and dx = dy g rstd with the gain and offset as x's elements
    read them in another index order (``channel_reads``, ``index_orders``): explanations ("layout"), or []."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    rm, rv = record.state.get("running_mean"), record.state.get("running_var")
    if case.op not in ("batch_norm", "instance_norm") or record.training or rm is None or rv is None \
            or x is None or np.ndim(x) < 2 or np.size(x) > ex.CONFIG_SIZE or ref.outputs.get("y") is None:
        return []
    x = np.asarray(x, dtype=np.float64)
    cs = (1, -1) + (1,) * (x.ndim - 2)
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    rstd = 1.0 / np.sqrt(np.asarray(rv, dtype=np.float64).reshape(cs) + eps)
    xhat = (x - np.asarray(rm, dtype=np.float64).reshape(cs)) * rstd
    try:
        gain, off, gn, on = _gain_offset(case, record, x)
    except (TypeError, ValueError, IndexError):
        return []
    y = np.asarray(ref.outputs["y"], dtype=np.float64)
    if gn is None and on is None or np.max(np.abs(xhat * gain + off - y), initial=0.0) > \
            1e-9 * (np.max(np.abs(y), initial=0.0) + 1e-300):
        return []                           # (the formula is not the op's eval: nothing to vary)
    names = " and ".join(n for n in (gn, on) if n)

    def vals_of(gm, om):
        vals = {("outputs", "y"): (xhat * gm + om).reshape(-1)}
        if dy is not None:
            vals["grads", "x"] = (np.asarray(dy, dtype=np.float64) * gm * rstd).reshape(-1)
        return vals
    return _reordered(ex, record, ref, channel_reads(x.shape) + index_orders(x.shape), gain, off, x.shape, vals_of,
                      f"the eval formula's with {names} as x's elements read them taken in another index order of x")


# ------------------------------------------------------------------ the mode: running statistics after the update
def updated_running(ex, case, record, ref, reference):
    """A training call's outputs normalized with the running statistics it just updated (the evaluation
    formula on the updated state): explanations, or []."""
    from .. import registry
    x = record.inputs.get("x")
    new = dict(getattr(ref, "state", {}) or {})
    if x is None or not record.training or np.size(x) > ex.CONFIG_SIZE or not registry.get(case.op).state \
            or new.get("running_mean") is None or new.get("running_var") is None:
        return []
    bm = ref.outputs.get("mean")
    rm = np.asarray(new["running_mean"], dtype=np.float64).reshape(-1)
    if bm is not None and rm.size and np.size(bm) % rm.size == 0:
        bm = np.asarray(bm, dtype=np.float64).reshape(-1, rm.size).mean(axis=0)
        if np.allclose(rm, bm, rtol=1e-6, atol=0):
            return []          # the update replaced them (momentum 1, a first cumulative average): the Bessel
                               # convention's arithmetic, not a mode
    res = _evaluate(reference, case, record, record.inputs, training=False, state=new)
    if res is None:
        return []
    vals = {(p, n): v for (p, n), v in _result_vals(res).items() if p != "state"}
    vals = {pn: v for pn, v in vals.items() if pn in record.failing}     # the saved statistics: the batch's
    return _judge(ex, record, ref, vals, "the evaluation-mode value with the running statistics after this call's "
                                         "update (a training call normalized by the updated running mean and var, "
                                         "not the batch's statistics)", "mode")


def initial_running(ex, case, record, ref, reference):
    """An evaluation call without running statistics (the batch's belong) whose outputs are normalized with
    the buffers' initial values, mean 0 and var 1 (the evaluation formula on a fresh state): explanations,
    or []."""
    from .. import registry
    x = record.inputs.get("x")
    if x is None or record.training or np.ndim(x) < 2 or np.size(x) > ex.CONFIG_SIZE \
            or "running_mean" not in registry.get(case.op).state or record.state.get("running_mean") is not None:
        return []
    C = np.shape(x)[1]
    fresh = {"running_mean": np.zeros(C), "running_var": np.ones(C), "num_batches_tracked": np.asarray(0)}
    res = _evaluate(reference, case, record, record.inputs, state=fresh)
    if res is None:
        return []
    vals = {pn: v for pn, v in _result_vals(res).items() if pn in record.failing}
    return _judge(ex, record, ref, vals, "the evaluation-mode value with the running buffers' initial values "
                                         "(mean 0, var 1) where a call without running statistics uses the batch's",
                  "mode")


# ------------------------------------------------------------------ a partial reduction (explain.row_statistics)
def block_candidates(case, xs, eps, centred, x_shape=()):
    """(mean, rstd, candidates) like explain._stat_candidates, with the partial reductions it lacks: the
    mean, the variance or both accumulated over the last block of B = 2^k values only (from
    (n - 1) // B * B on: the accumulator reset inside the loop over blocks), divided by n or the block's
    length, the variance otherwise over the whole slice around that mean; and the mean over the first block
    with the variance over the whole slice."""
    n = xs.shape[1]
    mean = xs.mean(axis=1, keepdims=True) if centred else np.zeros((xs.shape[0], 1))
    rs = lambda v: 1.0 / np.sqrt(v + eps)                   # noqa: E731
    rstd = rs(((xs - mean) ** 2).mean(axis=1, keepdims=True))
    out = []
    B = 16
    while B < n:
        for lo, hi, where in (((n - 1) // B * B, n, "the last"), (0, B, "the first")):
            part = xs[:, lo:hi]
            m = hi - lo
            for div, dw in ((n, "n"), (m, "the block's length")):
                desc = f"{where} block of {B} (values {lo}..{hi - 1} of {n}) only, divided by {dw} = {div}"
                if centred:
                    pm = part.sum(axis=1, keepdims=True) / div
                    out.append((pm, rs(((xs - pm) ** 2).mean(axis=1, keepdims=True)),
                                f"with the mean accumulated over {desc}", "block"))
                if where == "the last":
                    pv = ((part - mean) ** 2).sum(axis=1, keepdims=True) / div
                    out.append((mean, rs(pv), f"with the variance accumulated over {desc}", "block"))
                    if centred:
                        pm = part.sum(axis=1, keepdims=True) / div
                        out.append((pm, rs(((part - pm) ** 2).sum(axis=1, keepdims=True) / div),
                                    f"with the mean and the variance accumulated over {desc}", "block"))
        B *= 2
    return mean, rstd, out + pooled_candidates(xs, rs, centred) + window_candidates(case, xs, rs, centred, x_shape) \
        + reread_candidates(case, xs, mean, rstd, x_shape)


def pooled_candidates(xs, rs, centred):
    """Each tile of k = 2 or 4 consecutive slices (the last tile its remaining slices) reduced whole: its k n values'
    mean and variance about it (a 2-D tile summed without its axis) for every slice of the tile: (mean, rstd, what,
    "block") candidates for explain.row_statistics."""
    R, n = xs.shape
    out = []
    for k in (2, 4):
        if R < 2 or (k > 2 and R <= 2):
            continue
        t = np.arange(R) // k
        cnt = np.bincount(t).astype(np.float64)[t][:, None] * n
        tot = lambda a: np.bincount(t, weights=a.sum(axis=1))[t][:, None]       # noqa: E731
        m = tot(xs) / cnt if centred else np.zeros((R, 1))
        out.append((m, rs(tot((xs - m) ** 2) / cnt), f"with each tile of {k} slices reduced whole (its {k} n values' "
                    f"{'mean and variance' if centred else 'mean square'} for every slice of the tile; the last tile "
                    "its remaining slices)", "block"))
    return out


def reread_candidates(case, xs, mean, rstd, x_shape):
    """The backward reading x in another index order of its shape (``index_orders``: NCHW memory with
    channels_last strides, a transposed buffer), with the statistics the forward saved (right), the forward
    reading x right: (mean, rstd, what, "layout", None, the slices so read) candidates for
    explain.row_statistics."""
    size = int(np.prod(x_shape, dtype=np.int64)) if x_shape else 0
    if len(x_shape) < 2 or size > READ_SIZE or size != xs.size:
        return []
    if case.op == "batch_norm":         # (its slices are channels: (C, N * S))
        moved = (x_shape[1], x_shape[0]) + tuple(x_shape[2:])
        x = np.moveaxis(xs.reshape(moved), 0, 1)
        slices = lambda a: np.moveaxis(a, 1, 0).reshape(xs.shape)     # noqa: E731
    else:
        x, slices = xs.reshape(x_shape), (lambda a: a.reshape(xs.shape))
    flat = x.reshape(-1)
    orders = index_orders(x_shape)
    N, C, S = x_shape[0], x_shape[1], size // max(x_shape[0] * x_shape[1], 1)
    if len(x_shape) >= 3 and C > 1 and S > 1:          # (first: the two channels_last misreads, whatever the rank)
        idx = np.arange(size)
        orders = [(idx.reshape(N, S, C).transpose(0, 2, 1).ravel(), "NCHW memory indexed with channels_last "
                   "strides (element (n, c, s) from flat position (n S + s) C + c)"),
                  (idx.reshape(N, C, S).transpose(0, 2, 1).ravel(), "channels_last memory indexed as NCHW")] + orders
    return [(mean, rstd, f"with its backward reading x as {what} (the saved statistics right)", "layout", None,
             slices(flat[m].reshape(x_shape))) for m, what in orders]


def window_starts(R, n, per_sample):
    """(offsets, what): other flat offsets at which the kernel starts reading each of the R contiguous slices of
    n values (slice r's correct start r * n): a vectorized load's start aligned down to a multiple of a = 2^k
    (a * floor(r n / a), where n is not one), or the sample's stride taken as d of its K = ``per_sample``
    slices' span (sample s at s * d * n instead of s * K * n: one group's or one channel's span)."""
    r = np.arange(R)
    out = [(a * (r * n // a), f"each slice's start aligned down to a multiple of {a} (a * floor(r n / {a}))")
           for a in (2, 4, 8, 16, 32, 64) if n % a and a < 4 * n]
    # a row pitch in bytes of a one-byte array (a quantizer's codes) applied through an e-byte element pointer
    out += [(r * n // e, f"each slice's start at r * {n} / {e} (a one-byte row pitch of {n} bytes applied to "
             f"{e}-byte elements)") for e in (2, 4, 8) if n % e == 0 and n > e]
    if per_sample > 1 and R % per_sample == 0 and R > per_sample:
        out += [((r // per_sample) * d * n + (r % per_sample) * n, f"each sample's start at s * {d} * {n} "
                 f"(the span of {d} of its {per_sample} slices) instead of s * {per_sample} * {n}")
                for d in range(1, per_sample) if per_sample % d == 0]
    return out


def window_candidates(case, xs, rs, centred, x_shape):
    """Each slice's forward reading its n values from another flat start (``window_starts``; loads past the end
    masked to 0): their statistics and their normalization, the backward reading x at the right place with those
    statistics: (mean, rstd, what, "layout", the values read) candidates for explain.row_statistics. Only ops whose slices are contiguous
    runs of x (not batch_norm's channels)."""
    R, n = xs.shape
    if case.op == "batch_norm" or R < 2 or not x_shape or R * n != int(np.prod(x_shape, dtype=np.int64)):
        return []
    flat = np.append(xs.reshape(-1), np.zeros(n))
    per_sample = R // x_shape[0] if x_shape[0] > 1 and R % x_shape[0] == 0 else 1
    out = []
    for starts, what in window_starts(R, n, per_sample):
        wx = flat[np.minimum(starts[:, None] + np.arange(n)[None, :], R * n)]
        if np.array_equal(wx, xs):
            continue
        m = wx.mean(axis=1, keepdims=True) if centred else np.zeros((R, 1))
        out.append((m, rs(((wx - m) ** 2).mean(axis=1, keepdims=True)),
                    f"with each slice's forward reading its {n} values from {what}, its backward reading x at the "
                    "right place with the statistics so saved", "layout", wx))
    return out


def quant_windows(case, record):
    """Substitutions (``substituted_inputs``): a quantizing op's rows of x read from other flat starts
    (``window_starts``; loads past the end masked to 0) -> "layout" (rule 12)."""
    x = record.inputs.get("x")
    if case.op not in ("norm_quant", "norm_quant_block") or x is None or np.ndim(x) < 2 \
            or not any(p == "outputs" for p, _ in record.failing):
        return
    n = np.shape(x)[-1]
    R = np.size(x) // n
    if R < 2:
        return
    flat = np.append(np.asarray(x).reshape(-1), np.zeros(n, dtype=np.asarray(x).dtype))
    for starts, what in window_starts(R, n, 1):
        wx = flat[np.minimum(starts[:, None] + np.arange(n)[None, :], R * n)].reshape(np.shape(x))
        if not np.array_equal(wx, x):
            yield {**record.inputs, "x": wx}, None, f"the specification's with each row of x read from {what}", \
                "layout"


def row_block_backward(ex, case, record, ref):
    """layer_norm / rms_norm dx whose sums of g and g x_hat run over a block of k rows (k = 2^j: every row of
    the block, as a 2-D tile summed whole) instead of each row, divided by n or by the block's k n values:
    explanations of dx when only gradients fail, or []."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    if case.op not in ("layer_norm", "rms_norm") or x is None or dy is None or np.size(x) > ex.CONFIG_SIZE \
            or ("grads", "x") not in record.failing or any(p != "grads" for p, _ in record.failing):
        return []
    xs = ex._slices(case, x, x)
    R, n = xs.shape
    centred = case.op == "layer_norm"
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    mean = xs.mean(axis=1, keepdims=True) if centred else 0.0
    rstd = 1.0 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + eps)
    xh = (xs - mean) * rstd
    g = ex._slices(case, x, dy) * ex._slices(case, x, ex._weight_full(case, x, record.inputs))
    k = 2
    while k < 2 * R and R > 1:
        starts = np.arange(0, R, k)

        def block(t):
            sums = np.add.reduceat(t.sum(axis=1), starts)
            return np.repeat(sums, k)[:R].reshape(R, 1)
        for div, dw in ((n, f"n = {n}"), (k * n, f"the block's {k} x {n} values")):
            with np.errstate(all="ignore"):
                dx = rstd * (g - (block(g) / div if centred else 0.0) - xh * block(g * xh) / div)
            found = _judge(ex, record, ref, {("grads", "x"): ex._unslices(case, np.shape(x), dx)},
                           f"the formula's with its sums of g and g x_hat taken over each block of {k} rows (the whole "
                           f"2-D tile) instead of each row, divided by {dw}", "block")
            if found:
                return found
        k *= 2
    return []


# ------------------------------------------------------------------ the entry point
def explain(ex, case, record, ref, reference, bounds=None) -> list:
    """The first of this module's families that explains the step's failure (module docstring): a list of
    explanations, or []. ``ex``: refnorm/check/explain.py, which calls this where its own families leave a
    failing array unexplained (its fit_ratio, CONFIG_SIZE, _label and slices, passed in: this module imports
    nothing of it, no import circle); the partial reductions are its row_statistics with
    ``block_candidates``."""
    x = record.inputs.get("x")
    if not record.failing or x is None or np.size(x) > ex.CONFIG_SIZE:
        return []
    with np.errstate(all="ignore"):
        found = permuted_outputs(ex, case, record, ref)
        if not found and reference is not None:
            found = updated_running(ex, case, record, ref, reference) \
                or initial_running(ex, case, record, ref, reference) or param_index(ex, case, record, ref, reference) \
                or params_by_row(ex, case, record, ref, reference) \
                or substituted_inputs(ex, case, record, ref, reference, (quant_windows,))
        for family in (expanded_index, eval_index, other_axes, row_block_backward, group_rows_read):
            found = found or family(ex, case, record, ref)
        found = found or ex.row_statistics(case, record, ref, candidates=block_candidates)
        if not found and reference is not None:
            found = permuted_inputs(ex, case, record, ref, reference, bounds) \
                or substituted_inputs(ex, case, record, ref, reference, (overwritten_inputs,)) \
                or interleaved_groups(ex, case, record, ref, reference) \
                or addressed_through(ex, case, record, ref, reference) \
                or substituted_inputs(ex, case, record, ref, reference, (gain_squared, params_through,
                                                                                coefficients_shifted))
    return found


def addressed_through(ex, case, record, ref, reference):
    """The whole kernel addressing x's buffers through another index order (``index_orders``: element (r, j) of a
    (R, n) array at j * R + r, column-major), reading its inputs and writing its x-shaped arrays through it: the
    specification evaluated on the activation-sized arrays so read, its x-shaped results written back the same
    way (the statistics as computed); judged by ``_judge`` -> "layout" (rule 12) when it explains every failing
    array. Explanations, or []."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > READ_SIZE or np.ndim(x) < 2:
        return []
    shape = np.shape(x)
    for m, what in index_orders(shape):
        if np.unique(m).size != m.size:
            continue
        inv = np.argsort(m)

        def move(a, order):
            return np.reshape(np.reshape(a, -1)[order], shape) if a is not None and np.shape(a) == shape else a
        ins = {k: move(v, m) for k, v in record.inputs.items()}
        cot = {k: move(v, m) for k, v in record.cotangents.items()}
        res = _evaluate(reference, case, record, ins, cot)
        if res is None:
            continue
        vals = {k: move(v, inv) for k, v in _result_vals(res).items()}
        found = _judge(ex, record, ref, vals, f"the specification with x's buffers addressed as {what} (read and "
                                              "written so)", "layout")
        if len(found) == len(record.failing):
            return found
    return []


def _group_axis(case, x_shape):
    """(the grouped axis, the group count G) of a grouped op's x, or None: gated_norm's last axis in groups of
    group_size, group_norm's channels (axis 1) in num_groups."""
    if case.op == "gated_norm":
        gs, H = case.config.get("group_size"), x_shape[-1]
        if isinstance(gs, int) and 0 < gs < H and H % gs == 0:
            return len(x_shape) - 1, H // gs
    if case.op in GROUPED and len(x_shape) > 2:
        G = case.config.get("num_groups")
        if isinstance(G, int) and 1 < G < x_shape[1] and x_shape[1] % G == 0:
            return 1, G
    return None


def group_rows_read(ex, case, record, ref):
    """group_norm / group_norm_silu's normalize pass reading channel c's statistics at another row of the (N G)
    rows than n G + c // K (K = C / G channels per group): the group id c // G (the group count where the channels
    per group belongs) or c mod G, a row past the buffer's end read as its last; the statistics as returned, y
    alone failing: judged by ``_judge`` -> "layout" (rule 12: another row's statistic). Explanations, or []."""
    x = np.asarray(record.inputs["x"], dtype=np.float64)
    if case.op not in GROUPED or [pn for pn in record.failing] != [("outputs", "y")] or np.ndim(x) < 3:
        return []
    mean, rstd = ref.outputs.get("mean"), ref.outputs.get("rstd")
    G = case.config.get("num_groups")
    if mean is None or rstd is None or not isinstance(G, int) or G < 2 or x.shape[1] % G:
        return []
    N, C = x.shape[:2]
    K = C // G
    mean, rstd = np.asarray(mean, dtype=np.float64).reshape(-1), np.asarray(rstd, dtype=np.float64).reshape(-1)
    cs = (1, C) + (1,) * (x.ndim - 2)
    w, b = record.inputs.get("weight"), record.inputs.get("bias")
    W = 1.0 if w is None else np.asarray(w, dtype=np.float64).reshape(cs)
    B = 0.0 if b is None else np.asarray(b, dtype=np.float64).reshape(cs)
    c, n = np.arange(C), np.arange(N)[:, None]
    for gid, what in ((c // G, f"c // {G} (the group count where the {K} channels per group belong)"),
                      (c % G, f"c mod {G}")):
        if np.array_equal(gid, c // K):
            continue
        for r, how in ((np.minimum(n * G + gid, N * G - 1), "a row past the end read as the last"),
                       ((n * G + gid) % (N * G), "a row past the end wrapping to the first")):
            shape = (N, C) + (1,) * (x.ndim - 2)
            p = (x - mean[r].reshape(shape)) * rstd[r].reshape(shape) * W + B
            y = p / (1.0 + np.exp(-p)) if case.op == "group_norm_silu" else p
            found = _judge(ex, record, ref, {("outputs", "y"): y}, f"normalized with channel c's statistics read at "
                           f"row n G + {what} of the {N * G} rows ({how}), the statistics as returned", "layout")
            if found:
                return found
    return []


def interleaved_groups(ex, case, record, ref, reference):
    """A grouped op's groups taken interleaved (index j of the grouped axis in group j mod G: a (K, G) view
    where (G, K) belongs) instead of contiguous: the specification evaluated on the inputs with that axis
    permuted so that the interleaved groups are contiguous (every array on the axis, the per-feature parameters
    with it), its arrays permuted back; judged by ``_judge`` -> "layout" (rule 12: a strided view). Explanations,
    or []."""
    x = np.asarray(record.inputs["x"])
    ga = _group_axis(case, np.shape(x))
    if ga is None:
        return []
    axis, G = ga
    L = x.shape[axis]
    perm = np.arange(L).reshape(L // G, G).T.reshape(-1)        # the interleaved groups, one after the other
    inv = np.argsort(perm)

    def move(a, order):
        a = np.asarray(a)
        if np.ndim(a) == np.ndim(x) and np.shape(a)[axis] == L:
            return np.take(a, order, axis=axis)
        if np.ndim(a) == 1 and np.size(a) == L:     # a per-feature parameter (weight, bias: one per index)
            return a[order]
        return a
    ins = {k: (move(v, perm) if v is not None else v) for k, v in record.inputs.items()}
    cot = {k: (move(v, perm) if v is not None else v) for k, v in record.cotangents.items()}
    res = _evaluate(reference, case, record, ins, cot)
    if res is None:
        return []
    vals = {k: (move(v, inv) if v is not None and k[1] not in ("mean", "rstd") else v)
            for k, v in _result_vals(res).items()}
    return _judge(ex, record, ref, vals, f"the specification with the {G} groups of axis {axis} taken interleaved "
                  f"(index j in group j mod {G}: a ({L // G}, {G}) view where ({G}, {L // G}) belongs)", "layout")
