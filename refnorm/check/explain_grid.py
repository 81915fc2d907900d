"""Values a kernel never processes: explanations of a failing step by the specification's arithmetic
(issue 33), under explain.py's rule (an explanation reproduces every failing array it names within the
check's own bound; the reference itself does not, the arrays fail).

A launch grid rounded down (floor(count / B) programs of B where cdiv belongs) or vector loads without
their tail leave a region of x never loaded, never written:

* **the last slices** (the op's normalized slices, explain._slices: rows, (sample, group) rows, channels)
  from r0 = floor(R / B) B on, B a block of slices (2 ... 256) or a grid of P programs (a GPU's SM count),
  and the last slice alone (a loop bounded by R - 1);
* **each row's last group** of group_size columns (the group count rounded down);
* **the last samples** (x's axis 0, where the op's slices are not its rows) from floor(N / B) B on;
* **the last elements** of the flattened tensor from floor(size / B) B on (an elementwise kernel's blocks
  of 64 ... 4096);
* **the last columns of every slice** from floor(n / V) V on (V-wide vector loads, V = 2 ... 16, or a loop over
  whole tiles of 32 ... 256 columns: the
  values missing from the slice's statistics too), and a channel norm's each (sample, channel)'s last spatial
  positions so (where its slices span more than one channel: a group's).

The region's values are never loaded (x and dy read as 0 there: the statistics and the parameter
gradients without them, the specification re-evaluated so), its outputs and dx never written (0), a slice
statistic of a slice wholly inside it 0, its running statistics never updated (batch_norm's slices are its
channels); where no output fails, the backward's grid alone (the forward's
outputs as they are); or the region's values computed and only the failing x-shaped arrays' stores there
never made (dx of a kernel of its own, after the sums over the whole batch). Mechanism "block" (rule 9 of
docs/verdicts.md's "Which mechanism a bug is": rows a
kernel's grid never processes, a tail block skipped). Each region is screened first: every failing element
of an x-shaped array inside it (the last columns' excepted: their slices' statistics move the rest).

``ex`` is refnorm/check/explain.py, passed in by its caller (no import circle). Pure NumPy; x of at most
explain.CONFIG_SIZE elements; one evaluation of the specification per region screened in.
"""
from __future__ import annotations

import numpy as np

SLICE_BLOCKS = (2, 4, 8, 16, 32, 64, 128, 256)
SM_COUNTS = (80, 84, 108, 114, 132, 144, 170)      # grids of one program per SM (floor(R / P) slices each)
ELEMENT_BLOCKS = (64, 128, 256, 512, 1024, 2048, 4096)
VECTOR_WIDTHS = (2, 4, 8, 16)
TILE_WIDTHS = (32, 64, 128, 256)       # a column loop over whole tiles (its bound n // T)


def _either(values):
    v = [str(b) for b in values]
    return v[0] if len(v) == 1 else ", ".join(v[:-1]) + " or " + v[-1]


def _span(what, a, n):
    return f"{what} {a}" if a == n - 1 else f"{what}s {a}-{n - 1}"


def regions(ex, case, x):
    """(mask of x's shape (True: never processed), slices wholly inside it (R,) or None, kind, what) for
    every candidate region (module docstring)."""
    shape, size = np.shape(x), int(np.size(x))
    idx = np.arange(size).reshape(shape)
    try:
        rows = ex._slices(case, x, idx).astype(np.int64)      # (R, n): each slice's flat indices
    except (ValueError, TypeError, KeyError):
        rows = None
    out = []
    if rows is not None:
        R, n = rows.shape
        starts = {}                 # r0 -> (blocks of slices, grids of P programs) that leave r0 ... R - 1
        for B in sorted(set(SLICE_BLOCKS + SM_COUNTS)):
            r0 = R // B * B
            if 0 < r0 < R:
                starts.setdefault(r0, ([], []))[B not in SLICE_BLOCKS].append(B)
        if R > 1:                   # a loop over the slices bounded by R - 1 (off by one)
            starts.setdefault(R - 1, ([], []))
        for r0, (blocks, grids) in starts.items():
            m = np.zeros(size, bool)
            m[rows[r0:].ravel()] = True
            by = " or ".join(([f"programs of B slices rounded down, floor({R} / B) where ceil belongs (B = "
                               f"{_either(blocks)})"] if blocks else [])
                             + ([f"P programs (an SM count) each taking floor({R} / P) slices (P = {_either(grids)})"]
                                if grids else [])
                             + ([f"a loop over the slices bounded by {R} - 1 (range(pid, R - 1, programs): off by "
                                 "one)"] if r0 == R - 1 else []))
            out.append((m.reshape(shape), np.arange(R) >= r0, "slices", f"{_span('slice', r0, R)} (of {R}) never "
                        f"processed: a grid of {by}"))
        for V in VECTOR_WIDTHS:
            c0 = n // V * V
            if 0 < c0 < n:
                m = np.zeros(size, bool)
                m[rows[:, c0:].ravel()] = True
                out.append((m.reshape(shape), None, "columns", f"each slice's {_span('value', c0, n)} (of {n}) never "
                            f"loaded nor written: {V}-wide vector loads without the tail's {n - c0}"))
    S = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 0
    if S > 1 and (rows is None or rows.shape[1] != S):
        # each (sample, channel)'s spatial positions (a channel norm whose slices span more than one channel)
        pos = idx % S
        for V in VECTOR_WIDTHS:
            if 0 < S // V * V < S:
                out.append((pos >= S // V * V, None, "columns", f"each (sample, channel)'s "
                            f"{_span('position', S // V * V, S)} (of {S}) never loaded nor written: {V}-wide vector "
                            f"loads without the tail's {S - S // V * V}"))
    gs, H = case.config.get("group_size"), (shape[-1] if shape else 0)
    if isinstance(gs, int) and not isinstance(gs, bool) and 0 < gs < H and H % gs == 0:
        # each row's last group of the hidden axis (a group count rounded down: (H - 1) // group_size)
        out.append((np.broadcast_to(np.arange(H) >= H - gs, shape), None, "columns", f"each row's last group "
                    f"(columns {H - gs}-{H - 1} of {H}) never processed: {H // gs - 1} groups of {gs} where "
                    f"{H // gs} belong (the group count computed as (H - 1) // group_size)"))
    if rows is not None:                    # each slice's last columns never entered by a loop over whole tiles (after
        R, n = rows.shape                   # the last group: the same columns, said as the group where one is)
        have = {o[0].tobytes() for o in out}
        for T in TILE_WIDTHS:
            c0 = n // T * T
            m = np.zeros(size, bool)
            m[rows[:, c0:].ravel()] = True
            if 0 < c0 < n and m.reshape(shape).tobytes() not in have:
                out.append((m.reshape(shape), None, "columns", f"each slice's {_span('value', c0, n)} (of {n}) never "
                            f"loaded nor written: a loop over whole tiles of {T} columns (its bound n // {T}), the "
                            f"tail's {n - c0} never entered"))
    N = shape[0] if len(shape) > 1 else 0
    for B in SLICE_BLOCKS:                  # the last samples (x's axis 0) of a grid over the samples
        s0 = N // B * B
        if 0 < s0 < N and (rows is None or rows.shape[0] != N):        # (the slices' own grid where they are)
            out.append((idx >= s0 * (size // N), None, "samples", f"{_span('sample', s0, N)} (of {N}) never "
                        f"processed: a grid of programs of {B} samples rounded down, floor({N} / {B}) where ceil "
                        "belongs"))
    for B in ELEMENT_BLOCKS:
        k0 = size // B * B
        if 0 < k0 < size:
            out.append((idx >= k0, None, "elements", f"{_span('element', k0, size)} (of {size}, flattened) never "
                        f"processed: an elementwise grid of blocks of {B} rounded down, floor({size} / {B})"))
    return out


def unprocessed(ex, case, record, ref, reference):
    """The first region (``regions``) whose never-processed values reproduce every failing array:
    explanations (mechanism "block"), or []."""
    x = record.inputs.get("x")
    if reference is None or x is None or np.ndim(x) < 1 or np.size(x) > ex.CONFIG_SIZE or not record.failing:
        return []
    shape = np.shape(x)
    fwd = any(p == "outputs" for p, _ in record.failing)
    bad = {}
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None or np.shape(got) != np.shape(want):
            return []
        if np.shape(got) == shape or np.ndim(got) and part != "grads":     # x-shaped, or a per-slice array
            bad[part, name] = ex.failing_mask(got, want, E)
    if not bad:
        return unwritten_columns(ex, record, ref)
    for mask, whole, kind, what in regions(ex, case, x):
        # (screened: every failing element of an x-shaped array inside the region, of a per-slice array (a
        # statistic, a running buffer) inside its slices)
        if kind != "columns" and any(np.any(b & ~mask) if np.shape(b) == shape else
                                     whole is None or np.size(b) != np.size(whole) or np.any(b.reshape(-1) & ~whole)
                                     for b in bad.values()):
            continue
        ins = {k: (np.where(mask, 0.0, np.asarray(v, dtype=np.float64)) if np.shape(v) == shape and fwd
                   and "mask" not in k else v) for k, v in record.inputs.items()}
        cot = {k: np.where(mask, 0.0, np.asarray(v, dtype=np.float64)) if np.shape(v) == shape else v
               for k, v in record.cotangents.items()}
        try:
            with np.errstate(all="ignore"):
                res = reference(case.op, case.config, record.training, ins, cot, record.state)
        except Exception:                                   # noqa: BLE001 - the spec refusing the call
            continue
        if all(_fits(ex, record, res, part, name, mask, whole, fwd) for part, name in record.failing):
            return [{"part": p, "name": n, "step": record.step, "mechanism": "block", "text": what}
                    for p, n in record.failing]
        if all(np.shape(record.got[p][n]) == shape for p, n in record.failing) and all(
                ex.fit_ratio(record.got[p][n], np.where(mask, 0.0, np.asarray(getattr(ref, p)[n], dtype=np.float64)),
                             record.E[p][n]) <= 1 for p, n in record.failing):
            # the region's values computed (the reductions over it right), only the failing arrays' stores
            # there never made: a kernel of its own writing them (dx after the sums) on that grid
            return [{"part": p, "name": n, "step": record.step, "mechanism": "block",
                     "text": f"{what} (its {ex._label(p, n)} never written, 0; the rest right)"}
                    for p, n in record.failing]
    return []


def _fits(ex, record, res, part, name, mask, whole, fwd):
    """Whether a failing array is the re-evaluation's with the region never written (module docstring)."""
    got, E = record.got[part].get(name), record.E[part].get(name)
    v = getattr(res, part).get(name)
    if v is None or np.size(v) != np.size(got):
        return False
    v = np.array(v, dtype=np.float64).reshape(np.shape(got))
    if part == "state":                 # a running statistic of a slice never processed: never updated
        old = record.state.get(name)
        if whole is not None and old is not None and np.size(old) == np.size(got) == np.size(whole):
            v.reshape(-1)[whole] = np.asarray(old, dtype=np.float64).reshape(-1)[whole]
    elif fwd or part == "grads":
        if np.shape(got) == np.shape(mask):
            v[mask] = 0.0
        elif whole is not None and np.size(got) == np.size(whole):
            v.reshape(-1)[whole] = 0.0
    return ex.fit_ratio(got, v, E) <= 1


COLUMN_BLOCKS = (16, 32, 64, 128, 256, 512, 1024)


def another_zero(ref, part, name, shape):
    """Whether another expected array of ``part`` with ``shape`` is exactly zero (constant rows: dweight =
    sum(dy x_hat) = 0): an array of zeros may be that one's, written in its place."""
    return any(n != name and v is not None and np.shape(v) == shape and not np.any(np.asarray(v, dtype=np.float64))
               for n, v in getattr(ref, part).items())


def unwritten_columns(ex, record, ref):
    """Parameter gradients alone failing, each exactly 0 from entry c0 = floor(N / B) B of its N on (a column-
    parallel reduction launched on floor(N / B) blocks of B where ceil belongs: the last entries never
    written) and right before it: explanations (mechanism "block"), or []."""
    found = set()
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if part != "grads" or name == "x" or got is None or want is None or E is None \
                or np.shape(got) != np.shape(want) or np.size(got) < 2:
            return []
        g, N = np.asarray(got, dtype=np.float64).reshape(-1), int(np.size(got))
        bad = ex.failing_mask(got, want, E).reshape(-1)
        # (every entry 0, floor(N / B) = 0: no more a grid's than a second stage's skipping every partial, rule
        # 11's; explain.never_written's, no mechanism)
        c0 = next((N // B * B for B in COLUMN_BLOCKS if 0 < N // B * B < N and not np.any(bad[:N // B * B])
                   and np.all(g[N // B * B:] == 0)), None)
        if c0 is None:
            return []
        found.add((c0, N))
    if len(found) != 1:
        return []
    c0, N = found.pop()
    blocks = [B for B in COLUMN_BLOCKS if N // B * B == c0]
    span = f"entry {c0}" if c0 == N - 1 else f"entries {c0}-{N - 1}"
    what = (f"{span} (of {N}) never written (0): a column grid of floor({N} / B) blocks of B where ceil belongs "
            f"(B = {_either(blocks)})")
    return [{"part": p, "name": n, "step": record.step, "mechanism": "block", "text": what}
            for p, n in record.failing]
