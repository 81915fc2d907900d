"""The streaming judge: one call judged in blocks of rows, with bounded memory.

A normalizer whose call is independent along its leading axes (layer_norm and rms_norm over the axes
before ``normalized_shape``; group_norm, instance_norm without running statistics and
weight_standardization over axis 0) is judged block by block: each block of rows gets its own float64
reference, bounds and comparison, and only the figures are kept (compare.ArrayAccumulator). What is
held at any time is the backend's own arrays plus one block's float64 temporaries (BLOCK_ELEMENTS
elements of the activation per block, ~60 float64 arrays of that size at the peak: ~256 MiB).

Exactly the same judgement as the whole-array path (core._judge), block by block:
- outputs and gradients of the rows (y, mean, rstd, grad x) are judged by element, their figures
  accumulated over the blocks (an element's bound depends on its own row only);
- gradients of the shared parameters (weight, bias) are sums over the rows: the reference and the
  bound are summed over the blocks, and the sum is judged at the end; the bound's reduction term
  g(m) is that of all m rows (``bounds.standardize.param_rows``), not of a block's;
- the scale of "unconstrained" (max |reference| of an array) must be known before its first element
  is judged, so the reference is computed twice: a first pass for the scales (the reference costs a
  small part of the judgement), a second for the judgement.
The figures equal the whole-array path's within rounding (the parameter sums are added in another
order); tests/test_stream.py checks verdicts and figures against it.

Used for a call when its activation has more than BLOCK_ELEMENTS elements and ``plan`` finds a row
structure (every judged array a view of rows); otherwise the whole-array path runs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import bounds as B
from .compare import ArrayAccumulator

BLOCK_ELEMENTS = 1 << 19

ROW_OPS = ("layer_norm", "rms_norm", "group_norm", "instance_norm", "weight_standardization")
ROW_INPUTS = ("x",)       # the inputs of those ops that hold rows; the others (weight, bias) are shared


@dataclass
class Plan:
    lead: int             # the leading axes the call is independent along
    rows: int             # their product
    per_block: int        # rows per block


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
    """How to judge one call in blocks of rows, or None (the whole-array path)."""
    block_elements = block_elements or BLOCK_ELEMENTS
    x = inputs.get("x")
    if op not in ROW_OPS or x is None or np.size(x) <= block_elements or state:
        return None
    x = np.asarray(x)
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
    return Plan(lead, rows, max(1, block_elements // per_row))


def judge_blocked(p: Plan, op, case_dtype, config, training, inputs, cotangents, got, compare, contracts,
                  reference, derive_bounds):
    """Judge one call in blocks (module docstring). ``got``: {"outputs"|"grads": {name: array}} as the
    backend returned them (already checked for names, shapes and dtypes, and in the case dtype);
    ``compare``: the names to judge; ``contracts``: the declared contract first, then any other whose
    ratio is reported (the strict one under a relaxed contract). Returns ({(part, name): [figures of
    core.ArrayResult per contract]}) or None when some array has no row view (the caller then judges
    the whole arrays)."""
    sliced_in = {k for k in inputs if k in ROW_INPUTS}
    views = {}
    for k in sliced_in:
        views[("in", k)] = _rows_view(inputs[k], p.lead, p.rows)
    for k, v in cotangents.items():
        views[("cot", k)] = _rows_view(v, p.lead, p.rows)
    if any(v is None for v in views.values()) or "x" not in sliced_in:
        return None
    names = [(part, k) for part in ("outputs", "grads") for k in compare[part] if k in got[part]]
    summed = {("grads", k) for part, k in names if part == "grads" and k not in sliced_in}

    def block(r0, r1):
        ins = {k: (views[("in", k)][r0:r1].reshape((r1 - r0,) + np.shape(v)[p.lead:]) if k in sliced_in else v)
               for k, v in inputs.items()}
        cots = {k: views[("cot", k)][r0:r1].reshape((r1 - r0,) + np.shape(v)[p.lead:]) for k, v in cotangents.items()}
        return ins, cots

    edges = list(range(0, p.rows, p.per_block)) + [p.rows]
    # pass 1: the reference's scales (and its parameter-gradient sums)
    scale = {n: 0.0 for n in names}
    ref_sum = {}
    for r0, r1 in zip(edges[:-1], edges[1:]):
        ins, cots = block(r0, r1)
        ref = reference(op, config, training, ins, cots, {})
        for part, k in names:
            a = np.asarray(getattr(ref, part)[k], dtype=np.float64)
            if (part, k) in summed:
                ref_sum[(part, k)] = ref_sum.get((part, k), 0.0) + a
            else:
                with np.errstate(invalid="ignore"):
                    aa = np.abs(a)
                scale[(part, k)] = max(scale[(part, k)], float(np.max(np.where(np.isfinite(aa), aa, 0.0), initial=0.0)))
    accs = {n: [ArrayAccumulator(got[n[0]][n[1]], scale[n], case_dtype) for _ in contracts]
            for n in names if n not in summed}
    E_sum = {n: [0.0 for _ in contracts] for n in summed}
    # pass 2: reference, bounds and comparison per block
    for r0, r1 in zip(edges[:-1], edges[1:]):
        ins, cots = block(r0, r1)
        ref = reference(op, config, training, ins, cots, {})
        with B.standardize.param_rows(p.rows / (r1 - r0)):
            Es = [derive_bounds(op, case_dtype, config, training, ins, cots, {}, ref, c) for c in contracts]
        for part, k in names:
            if (part, k) in summed:
                for j, E in enumerate(Es):
                    E_sum[(part, k)][j] = E_sum[(part, k)][j] + np.asarray(E[part][k], dtype=np.float64)
                continue
            a = getattr(ref, part)[k]
            per = int(np.size(a)) // (r1 - r0) if r1 > r0 else 0
            for j, E in enumerate(Es):
                accs[(part, k)][j].add(a, E[part][k], r0 * per)
        del ref, Es
    out = {n: [acc.figures() for acc in accs[n]] for n in accs}
    for n in summed:
        out[n] = [("whole", ref_sum[n], E_sum[n][j]) for j in range(len(contracts))]
    return out
