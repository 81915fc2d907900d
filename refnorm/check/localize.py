"""Where a failure is, named or not: which indices of a failing array carry the error, and its shape.

For one failing array (the backend's ``got``, the float64 reference ``ref``, the bound ``E``), an
element *fails* when it is beyond its bound (as the judge tests it: ref farther than E from the rounding interval
of got's dtype, or not finite where the reference is).

* **where**: per axis of the array, the indices holding a failing element, as ranges named by what the
  axis is in the case ("rows 4092-4095", "channels 320-383", "columns from 2048 on"); an axis whose
  every index holds one is "all". Axes are named from the case's input x and its reduction axes
  (``axis_names``): rows / columns for a row-wise norm (reducing trailing axes), samples / channels /
  positions for a channel norm (reducing every axis but 1).
* **shape** of the error err = got - ref on the failing rows, by least squares per row:
  "constant per row" (err ~ c_r), "proportional to the expected value" (err ~ a_r * ref, a wrong scale:
  rstd, a constant factor), "affine in the expected value" (both), or none of these. One factor for the
  whole array (err ~ a * ref everywhere) is reported as such ("a factor 1 + a throughout").
* **non-finite**: where got is NaN/inf and the reference is finite, the indices; ``first_nonfinite``
  orders a step's arrays as the computation produces them (statistics, then the other outputs, then
  gradients, then state) and names the first.

Pure NumPy on the recorded arrays; never changes a verdict.
"""
from __future__ import annotations

import numpy as np

from .precision import DIRECTED, dtype_name, excess, quant_excess, quant_name

FIT = 0.1          # a per-row model "fits" when its residual's RMS is at most FIT x the error's RMS
MIN_COLUMNS = 4    # missing_rows: a sum of at least this many values (fewer: a coincidence is likely)
_SCREEN = 0.8     # missing_rows: the screen keeps candidates with |err . s| >= 0.8 (1 - FIT) |err|^2 (see there)
STATISTICS = ("mean", "var", "rstd", "ms", "rms", "std", "scale", "amax", "mu", "sigma")


def axis_names(shape, x_shape, axes) -> list[str]:
    """A name per axis of an array of ``shape`` in a case whose input x has ``x_shape`` and reduces over
    ``axes``: an axis is matched to x's axis in the same position (same ndim) or, for a 1-D array, to
    x's axis of the same length (a per-channel or per-column parameter)."""
    nd = len(x_shape)
    red = {int(a) % nd for a in axes} if nd else set()
    trailing = bool(red) and red == set(range(nd - len(red), nd))

    def name(i):
        if trailing:
            return "column" if i in red else "row"
        return {0: "sample", 1: "channel"}.get(i, "position")
    if len(shape) == nd:
        return [name(i) if shape[i] in (x_shape[i], 1) else "index" for i in range(nd)]
    if len(shape) == 1:
        for i in ([1] if not trailing and nd > 1 else []) + list(range(nd - 1, -1, -1)):
            if shape[0] == x_shape[i]:
                return [name(i)]
    return ["index"] * len(shape)


def ranges(idx, n) -> str:
    """Sorted indices as readable ranges: "all", "from k on", "3", "320-383", "1, 5-7, 9" (at most four
    ranges, then how many more indices)."""
    idx = np.unique(np.asarray(idx, dtype=np.int64))
    if idx.size == n:
        return "all"
    if idx.size and idx[0] > 0 and idx[-1] == n - 1 and idx.size == n - idx[0] and idx.size > 1:
        return f"from {idx[0]} on"
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    parts = [(g[0], g[-1]) for g in np.split(idx, breaks) if g.size]
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in parts[:4]]
    more = int(sum(b - a + 1 for a, b in parts[4:]))
    return ", ".join(text) + (f" and {more} more" if more else "")


def failing_mask(got, ref, E, qdtype=None):
    """Elements beyond their bound, or not finite where the reference is finite. ``qdtype``: the grid a
    quantized array is judged on (the bounds' "dtypes" entry: float8_e4m3fn, int8, "pow2:round_up", ...):
    then an element fails as the judge fails it, when the reals that round to it miss ref by more than E
    (precision.quant_excess), not by |got - ref| (a code is half a step from its exact value)."""
    if qdtype is not None and (qdtype in DIRECTED or quant_name(np.asarray(got).dtype)):
        ref = np.asarray(ref, dtype=np.float64)
        E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
        with np.errstate(all="ignore"):
            ex = quant_excess(np.asarray(got), ref, qdtype if qdtype in DIRECTED else None)
            g = np.asarray(got).astype(np.float64)
            return np.where(np.isfinite(E), ex > E, np.isnan(g) & ~np.isnan(ref))
    raw = np.asarray(got)
    got = raw.astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    E = np.broadcast_to(np.asarray(E, dtype=np.float64), ref.shape)
    with np.errstate(all="ignore"):
        # as the judge: the distance from ref to the rounding interval of got's own dtype (a 16-bit value is
        # any real that rounds to it), not |got - ref|
        judged = raw.shape == ref.shape and raw.dtype.kind in "fV" and dtype_name(raw.dtype) is not None
        bad = (excess(raw, ref) if judged else np.abs(got - ref)) > E
    bad |= np.isfinite(ref) & ~np.isfinite(got)
    bad |= np.isnan(got) & ~np.isnan(ref)
    return bad


def error_shape(got, ref, bad, row_axes) -> str:
    """The shape of err = got - ref over the failing rows (module docstring); "" when none is clear."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    with np.errstate(all="ignore"):
        err = got - ref
    ok = np.isfinite(err) & np.isfinite(ref)
    if not ok[bad].any():
        return ""
    e, r = np.where(ok, err, 0.0), np.where(ok, ref, 0.0)
    # one factor for the whole array
    den = float(np.sum(r * r))
    if den > 0:
        a = float(np.sum(e * r)) / den
        if np.sqrt(np.sum((e - a * r) ** 2)) <= FIT * np.sqrt(np.sum(e * e)):
            return f"proportional to the expected value throughout: a factor {1 + a:.6g}"
    rows = [i for i in range(got.ndim) if i in row_axes]
    cols = [i for i in range(got.ndim) if i not in row_axes]
    if not rows or not cols:
        return ""
    perm = rows + cols
    nr = int(np.prod([got.shape[i] for i in rows]))
    E2, R2, K2, B2 = (np.transpose(a, perm).reshape(nr, -1) for a in (e, r, ok, bad))
    fails = np.flatnonzero(B2.any(axis=1))
    if fails.size == 0:
        return ""
    votes = {"const": 0, "prop": 0, "affine": 0}
    for i in fails[:256]:
        k = K2[i]
        if k.sum() < 3:
            continue
        ei, ri = E2[i][k], R2[i][k]
        tot = np.sqrt(np.sum(ei * ei))
        if tot == 0:
            continue
        c = ei.mean()
        const = np.sqrt(np.sum((ei - c) ** 2)) <= FIT * tot
        rr = float(np.sum(ri * ri))
        prop = rr > 0 and np.sqrt(np.sum((ei - (np.sum(ei * ri) / rr) * ri) ** 2)) <= FIT * tot
        A = np.stack([ri, np.ones_like(ri)], axis=1)
        coef, *_ = np.linalg.lstsq(A, ei, rcond=None)
        affine = np.sqrt(np.sum((ei - A @ coef) ** 2)) <= FIT * tot
        key = "const" if const else "prop" if prop else "affine" if affine else None
        if key:
            votes[key] += 1
    n = min(fails.size, 256)
    best = max(votes, key=votes.get)
    if votes[best] * 2 <= n:
        return ""
    return {"const": "constant along each failing row",
            "prop": "proportional to the expected value along each failing row (a wrong scale per row)",
            "affine": "affine in the expected value along each failing row (a wrong scale and shift)"}[best]


def plural(noun: str) -> str:
    """An axis name's plural ("rows", "indices")."""
    return "indices" if noun == "index" else noun + "s"


def localize(part, name, got, ref, E, x_shape, axes, qdtype=None) -> dict:
    """The localization of one failing array (module docstring) as a JSON-able dict with a one-line
    ``text``; ``qdtype`` as ``failing_mask``'s."""
    got = np.asarray(got)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return {"part": part, "name": name, "text": f"{name}: shape {got.shape}, expected {ref.shape}"}
    bad = failing_mask(got, ref, E, qdtype)
    names = axis_names(ref.shape, x_shape, axes)
    where = []
    for i, n in enumerate(ref.shape):
        if n <= 1:
            continue
        other = tuple(j for j in range(ref.ndim) if j != i)
        idx = np.flatnonzero(bad.any(axis=other) if other else bad)
        where.append((names[i], ranges(idx, n), i))
    gotf = np.asarray(got, dtype=np.float64)
    nonfinite = np.isfinite(ref) & ~np.isfinite(gotf)
    row_axes = {i for i, nm in enumerate(names) if nm in ("row", "sample", "channel")}
    shape = error_shape(got, ref, bad, row_axes)
    label = "dx" if (part, name) == ("grads", "x") else (f"d{name}" if part == "grads" else name)
    text = f"{label}: {int(bad.sum())} of {bad.size} elements beyond their bound"
    spots = [f"{plural(nm)} {r}" for nm, r, _ in where if r != "all"]
    text += " (" + "; ".join(spots) + ")" if spots else " (throughout)" if bad.all() else ""
    if nonfinite.any():
        text += f"; {int(nonfinite.sum())} not finite where the expected value is"
    if shape:
        text += f"; the error is {shape}"
    return {"part": part, "name": name, "failing": int(bad.sum()), "size": int(bad.size),
            "where": {f"{nm} (axis {i})": r for nm, r, i in where}, "nonfinite": int(nonfinite.sum()),
            "shape": shape, "text": text}


def missing_rows(err, contrib, ref=None):
    """For a sum over rows (a parameter gradient: ``err`` (columns,) = got - ref, ``contrib`` (rows,
    columns) the reference's per-row terms), the set of rows whose terms are missing (err ~ -sum) or
    counted twice (err ~ +sum), among structured candidates: the last k rows, the first k rows, and
    rows a..b-1 of every period P (P a power of two, the tile of a kernel's row loop); the first k rows
    counted twice and the last k missing (a second program starting at row 0); or the last row's
    counted k more times (a tail block of 16-128 rows clamped to it); "" when none
    fits within FIT. With ``ref`` (the expected sum), returns (text, the sum it describes) instead."""
    miss = ("", None) if ref is not None else ""
    err = np.asarray(err, dtype=np.float64).ravel()
    c = np.asarray(contrib, dtype=np.float64).reshape(len(contrib), -1)
    if not np.all(np.isfinite(err)) or not np.all(np.isfinite(c)) or c.shape[1] != err.size:
        return miss
    tot = np.sqrt(np.sum(err * err))
    R = c.shape[0]
    if tot == 0 or R < 2:
        return miss
    # a sum of fewer than MIN_COLUMNS values: among ~2R first/last-k candidate sums some lands near it by
    # chance, so only k a power of two (a kernel's block), half the rows or all but one is tried there, beside
    # the tiles
    few = err.size < MIN_COLUMNS
    # (R - 2^i: only the last or first 2^i rows' terms left, a buffer of 2^i slots stored into, not added to)
    ks = sorted({1 << i for i in range((R - 1).bit_length()) if (1 << i) < R} | {R // 2, (R + 1) // 2, R - 1}
                | {R - (1 << i) for i in range((R - 1).bit_length())} - {0, R}) if few else range(1, R)
    # Cheap screen of the candidates, exact for the ones kept. For a candidate sum s, with e = err . s,
    #   |err - sign s|^2 = tot^2 - 2 sign e + |s|^2 >= tot^2 - 2 |e| + e^2 / tot^2 = (tot - |e| / tot)^2
    # (Cauchy-Schwarz: |s| >= |e| / tot), so a candidate within FIT x tot needs |e| >= (1 - FIT) tot^2.
    # e of every candidate comes from v = contrib @ err (each candidate's e is a sum of v over its rows);
    # only candidates with |e| >= SCREEN x tot^2 (SCREEN well below 1 - FIT: rounding moves e by about
    # 1e-12 tot^2, far less than the gap) are summed and measured as before, in the same order, so the
    # answer is the one the full search gives; the (rows+1) x columns prefix sums are built only when a
    # first/last-k candidate passes.
    v = c @ err
    need = (1.0 - FIT) * tot * tot * _SCREEN
    tail = np.cumsum(v[::-1])           # tail[k - 1]: e of the last k rows
    head = np.cumsum(v)                 # head[k - 1]: e of the first k rows
    pre = None

    def prefix():
        nonlocal pre
        if pre is None:
            pre = np.concatenate([np.zeros((1, c.shape[1])), np.cumsum(c, axis=0)])
        return pre
    # (text, the candidate's sum, the signs it is tried with: its rows missing or counted twice, or as it is)
    either, as_is = ((-1.0, "missing"), (1.0, "counted twice")), ((1.0, ""),)
    cands = [(f"the terms of the last {k} rows ({R - k}-{R - 1})", lambda k=k: prefix()[R] - prefix()[R - k], either)
             for k in ks if abs(tail[k - 1]) >= need]
    cands += [(f"the terms of the first {k} rows (0-{k - 1})", lambda k=k: prefix()[k], either)
              for k in ks if abs(head[k - 1]) >= need]
    # a later program's row offset left out: it runs over the first k rows again where the last k belong
    cands += [(f"the terms of the first {k} rows (0-{k - 1}) counted twice and the last {k} ({R - k}-{R - 1}) missing "
               "(a second program's row offset left out: it starts at row 0)",
               lambda k=k: prefix()[k] - prefix()[R] + prefix()[R - k], as_is)
              for k in ks if 2 * k <= R and abs(head[k - 1] - tail[k - 1]) >= need]
    P = 2
    while P < R:
        rows = np.arange(R) % P
        for a, b in ((P // 2, P), (0, P // 2), (P - 1, P)):
            sel = (rows >= a) & (rows < b)
            if abs(v[sel].sum()) >= need:
                cands.append((f"the terms of rows {a}-{b - 1} of every {P}", lambda sel=sel: c[sel].sum(axis=0),
                              either))
        # each block's first row in its predecessor's loop too (an inclusive end, range(start, start + P + 1))
        sel = (rows == 0) & (np.arange(R) >= P)
        if sel.any() and abs(v[sel].sum()) >= need:
            cands.append((f"the terms of row 0 of every {P} after the first (each block's loop running into the next "
                          "one's first row)", lambda sel=sel: c[sel].sum(axis=0), either))
        P *= 2
    # a tail block of T rows whose row index is clamped to the last row (not masked): the last row's terms
    # counted (-R) mod T more times
    cands += [(f"the terms of the last row {R - 1} counted {k} more times (a tail block's rows clamped to it, not "
               "masked)", lambda k=k: k * c[R - 1], as_is) for k in sorted({-R % T for T in (16, 32, 64, 128)} - {0})
              if abs(k * v[R - 1]) >= need]
    best = None
    for text, make, signs in cands:
        s = make()
        for sign, what in signs:
            r = np.sqrt(np.sum((err - sign * s) ** 2))
            if r <= FIT * tot and (best is None or r < best[0]):
                best = (r, f"{text} {what}" if what else text, sign * s)
    if best is None:
        return miss
    return best[1] if ref is None else (best[1], np.asarray(ref, dtype=np.float64).ravel() + best[2])


def computation_order(part, name):
    """The order a kernel produces its arrays in: statistics, other outputs, gradients, state."""
    if part == "outputs":
        return (0 if name in STATISTICS else 1, name)
    return ({"grads": 2, "state": 3}.get(part, 4), name)


def first_nonfinite(locs) -> str:
    """The first array (by step, then in computation order) holding a non-finite value where a number was
    due, or ""."""
    hit = sorted((d for d in locs if d.get("nonfinite")),
                 key=lambda d: (d.get("step", 0), computation_order(d["part"], d["name"])))
    if not hit:
        return ""
    d = hit[0]
    rows = [f"{plural(k.split(' ')[0])} {v}" for k, v in d.get("where", {}).items() if v != "all"]
    return (f"the first non-finite values appear in {d['text'].split(':')[0]}"
            + (f" ({'; '.join(rows)})" if rows else "") + ("; the later arrays inherit them" if len(hit) > 1 else ""))
