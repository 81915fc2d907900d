"""The specification searched as a program (issue 33): which named intermediate a kernel rounds, and which
one operation, operand, input or statistic a kernel writes otherwise.

A kernel that holds one intermediate in a lower precision (silu(z) stored in the input dtype before the
gate's product, the gain 1 + scale rounded before the multiply, a block scale kept in float16, the
variance truncated to bfloat16) computes the specification with that one value rounded. The search
needs no list of such points: every intermediate the specification names is one. Each module of
refnorm/specs is re-compiled from its own source with a hook after every assignment to a local name
(``v = ...`` becomes ``v = ...; v = _rp_hook("module:function.v", v)``, and ``from .other import f`` takes
``other``'s instrumented ``f``), so one evaluation can round exactly one named intermediate, wherever
it is computed (the forward, the backward, a shared helper of refnorm/specs/_math.py), and leave every
other value in float64.

``rounding_point(case, record)`` evaluates the instrumented specification once to learn the names the
call assigns (floating values only), then once per name and rounding: to the case dtype for a 16-bit
case, to bfloat16 and float16 for a float32 case, to float32 for a float64 case; to nearest even
(mechanism "precision"; "affine" for a value computed from the affine parameters alone, the gain 1 + scale:
the affine convention's cast order, as the catalogue's one_plus_in_d; dyt's alpha, inside the tanh, is not
one: its rounding is "precision") and toward zero ("rounding"). A name explains the step when the result
reproduces every failing array within its bound and keeps every passing one within its own (the fit
of explain.fit_ratio); names of both roundings fitting alike are no answer. Cases up to
ROUNDING_SIZE elements of x (the search evaluates the specification about two times per name).

A function of the specification evaluated in the lower precision (sigmoid(p) in float16: its
arguments, every value it assigns and its result rounded; each function's arguments are hooked on entry
and its result on return) is a rounding point too.

``mutation(case, record)``: every binary operation of the specification (``a + b``, ``a - b``, ``a * b``,
``a / b``, wherever it is computed) is instrumented too, and each is changed alone, as the issue's
structured deviations: an operand dropped (a term of a sum left out, a factor taken as 1, a divisor left
out), a subtracted term added (its sign flipped), the second operand doubled or halved; an operand that
is a name read from another value of its function of the same shape (the backward's projection of x
where u = x / norm belongs) or a function's argument read from another value; an expression written
the same way at several places changed at all of them; eps moved to an operation on statistics; a
statistic read at the first or the next index of its leading axis; last, an operand read as its square root or its square
(a standard deviation where a variance belongs). Where outputs fail only the forward's operations are
changed. A change that reproduces every array of the step within its bound names the mechanism its
operand and line say (``_mechanism``): eps where the operand holds eps; "running" on a line that updates
a running statistic; "gate" for a value of the gate input z alone, or where z's gradient alone fails;
"backward" in a backward function or where only gradients fail; "dropout" for a forward value of the
keep-mask; "affine" for a value of the parameters alone; a statistic read at another index "layout"; otherwise None: explained, with the operation's source line,
and not named (no mechanism of the list is known to be that change). Cases up to MUTATION_SIZE elements
of x, at most MUTATIONS_MAX evaluations in that order; the first that fits ends the search. Where the
outputs and the gradients fail and no change reproduces them all, the first forward change that reproduces
every failing output (and keeps the passing ones within their bounds) explains the step: the
specification's backward is hand-derived for its own forward, not for the changed one, so a kernel whose
backward differentiates its own (changed) forward fails the gradients either way; the text says so.

The backward's saved values are searched too: x_hat read uncentred (x * rstd, the mean's term dropped) at
one operation or each; rstd taken from the running variance (before or after the call's update: the modes
mixed in a training call, "mode"); every reduction of a function over one more axis (a group norm's over
every group: "group" where that axis is the groups', else "reduction"); the forward's row statistics over
each block of 16 ... 128 values, the last partial (a quantization block's own: "group"); the forward's
batch statistics from the first sample alone (the channel's reduction losing its tail samples: "block"); the mean's first pass accumulated in the
16-bit dtype with its correction pass left out, and any 16-bit accumulation with each term rounded too
("precision"); every mean of a function divided by another count (the backward's means over n - 1:
"bessel"); the backward's g = dy * weight with the weight applied to dx after the projection instead
("backward"); the statistics of _math.moments (mean, variance and x - mean) read at the first or next
index of one of their axes, forward and backward or in the backward's recomputation alone ("layout"), or
the deviations x - mean computed in the 16-bit case dtype (the mean rounded to it: "precision"). On the
reductions over a slice's trailing run of axes (a row's columns, a sample's spatial positions), for every op: a
(maybe scaled) sum of squared deviations with a power-of-two tile's padded lanes counted or merged from blocks'
partial variances; every lane of the tile counted; the forward's statistics, or every reduction of one backward
function, over whole tiles only ("block", "one_pass"); and the backward's values of one activation input alone
read at the next or previous row ("layout"). One backward operation's x_hat from the statistics at another
index (the next channel's, a column's j mod R: "layout"); a factor of a parenthesized sum applied to one term
alone; a count operand read as another (``_count_tag``: n - 1 for n or the reverse "bessel", the tile's width
"block", any other count "reduction"), alone or at every place using it; a forward value of each block of 2 or
4 slices the first slice's ("layout").

Layer 4 (NumPy; reads the specifications' source, never changes them); thread-safe (the target is
thread-local, the instrumented modules are built once under a lock).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import itertools
import math
import operator
import re
import threading
import warnings

import ml_dtypes
import numpy as np

from .activations import ACTIVATIONS
from .precision import estimate_like, round_toward_zero
from .merges import chan_merge, chan_step

ROUNDING_SIZE = 1 << 17          # elements of x up to which the rounding search runs
MUTATION_SIZE = 1 << 14          # and the mutation search
MUTATIONS_MAX = 2000             # evaluations of the mutation search at most (in the order _candidates gives)
_DT = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
_TARGET = threading.local()      # .t: None | ("record", names[, operations]) | ("round", keys, dtype, toward_zero)
#                                    | ("mutate" | "replace", operation ids, ...) | ("multi", {id: f}) | ("remap", key, f)
#                                    | ("remapk", {key: f}) | ("both", {key: f}, {id: f}) | ("reduce", id, f)
#                                    | ("flags", names) | ("flag", key, value)
_LOCK = threading.RLock()
_BUILT: dict = {}
# the inputs that are affine parameters (or their per-sample modulation): a value computed from these alone
QUANT_OPS = ("norm_quant", "norm_quant_block")     # the ops whose max reductions are a quantizer's amax
_OFFSETS = ("bias", "bias1", "shift", "beta")     # the additive parameters (an affine's offset)
PARAMETERS = ("weight", "bias", "weight1", "bias1", "scale", "shift", "alpha", "gamma", "beta")


def _round(v, dt, toward_zero):
    """v (a float or float array) rounded to ``dt``, to nearest even or toward zero; back in float64."""
    a = np.asarray(v, dtype=np.float64)
    out = round_toward_zero(a, dt) if toward_zero else np.asarray(a.astype(dt), dtype=np.float64)
    return float(out) if isinstance(v, float) else out


def _floating(v) -> bool:
    return (isinstance(v, float) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")) and np.size(v) > 0


def _stacked(value) -> bool:
    """A list of floating arrays of one shape (poly_norm's h_p and r_p per power): hooked as their stack."""
    return (isinstance(value, list) and len(value) > 1 and all(_floating(v) for v in value)
            and len({np.shape(v) for v in value}) == 1)


def _rp_hook(key, value):
    t = getattr(_TARGET, "t", None)
    if t is not None and _stacked(value) and (t[0] == "record" or t[0] in ("remapk", "both", "remapred") and key in t[1]
                                              or t[0] == "remap" and key == t[1]):
        return list(_rp_hook(key, np.stack(value)))
    if t is not None and t[0] in ("remapk", "both", "remapred"):   # several names, each its own change (a count
        return t[1][key](value) if key in t[1] else value           # is an int)
    if t is not None and t[0] in ("flags", "flag") and isinstance(value, (str, bool)):
        if t[0] == "flags":                             # the string and boolean values (a flag, a placement)
            t[1].setdefault(key, value)
            return value
        return t[2] if key == t[1] else value
    if t is None or not _floating(value):
        return value
    if t[0] == "record":
        if key in t[1] and key in _ARGS:    # (an argument assigned again, an updated buffer: its last value apart)
            t[1][key + UPDATED] = np.array(value, dtype=np.float64)
        t[1].setdefault(key, np.array(value, dtype=np.float64))
        return value
    if t[0] == "remap":
        return t[2](value) if key == t[1] else value
    return _round(value, t[2], t[3]) if t[0] == "round" and key in t[1] else value


_OPS = {"Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv}
# the changes of one operation (module docstring): name -> (applies to, new value of (a, b), what it says)
CHANGES = {
    "drop_left": (("Add", "Sub", "Mult"), lambda a, b, op: b if op != "Sub" else -b, "{l} left out"),
    "drop_right": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: a, "{r} left out"),
    "flip": (("Add", "Sub"), lambda a, b, op: a - b if op == "Add" else a + b, "the sign of {r} flipped"),
    "double": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: _OPS[op](a, 2 * b), "{r} doubled"),
    "halve": (("Add", "Sub", "Mult", "Div"), lambda a, b, op: _OPS[op](a, 0.5 * b), "{r} halved"),
    "times": (("Div",), lambda a, b, op: a * b, "{r} multiplied where it divides"),
    "complement": (("Sub",), lambda a, b, op: b, "{r} where {l} - {r} belongs"),
}
# an operand read as another function of itself: a standard deviation where the variance belongs, or back
TRANSFORMS = ((lambda v: np.sqrt(np.abs(v)), "its square root"), (lambda v: v * v, "its square"))
_SOURCES: dict = {}              # operation id -> (module, function, line, op, left source, right source)
_ROOTS: dict = {}                # a name's key -> the index of the root its assignment takes (2, or a name: p)
_ARGS: set = set()               # the keys of functions' arguments (hooked on entry; values, not rounding points)
UPDATED = "'"                    # a recorded key's suffix: an argument's value as last assigned (an updated buffer)
_LINES: dict = {}                # module -> its source lines


def _rp_bin(i, a, b, op):
    t = getattr(_TARGET, "t", None)
    if t is not None and t[0] in ("multi", "both"):     # several operations, each its own change: id -> f(a, b, op)
        ch = t[1] if t[0] == "multi" else t[2]
        return ch[i](a, b, op) if i in ch else _OPS[op](a, b)
    if t is None or t[0] not in ("mutate", "replace") or i not in t[1]:     # t[1]: the changed operations' ids
        if t is not None and t[0] == "record" and len(t) > 2:
            t[2].setdefault(i, (np.shape(a), np.shape(b)))
            if len(t) > 4:
                t[4].setdefault(i, (_int(a), _int(b)))
        return _OPS[op](a, b)
    if t[0] == "replace":                   # one operand read from another value (t[3] of the operand)
        a, b = (t[3](a), b) if t[2] == 0 else (a, t[3](b))
        return _OPS[op](a, b)
    return CHANGES[t[2]][1](a, b, op)


def _int(v):
    """v where it is an integer scalar (a count, a size), else None."""
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) else None


_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max}


def _rp_red(i, a, kind, axis, keepdims, initial=None):
    """``a.sum(axis=axis, keepdims=keepdims)`` (or mean, or max with its ``initial``) of the specification,
    reduction ``i``; recorded as (a's shape, the reduced axes, keepdims), or changed by the target ("reduce", i,
    f(a, reducer, axes, keepdims))."""
    t = getattr(_TARGET, "t", None)
    f = _REDUCE[kind] if initial is None else functools.partial(_REDUCE[kind], initial=initial)
    if t is None or not isinstance(a, np.ndarray) or a.dtype.kind != "f":
        return f(a, axis=axis, keepdims=keepdims)
    if t[0] == "record" and len(t) > 3:
        t[3].setdefault(i, (a.shape, _axes(axis, a.ndim), bool(keepdims)))
        calls = _TARGET.scratch.setdefault("calls", {})     # how often each reduction runs in one evaluation
        calls[i] = calls.get(i, 0) + 1
    if t[0] == "reduce" and (t[1] == i or isinstance(t[1], frozenset) and i in t[1]):
        change = t[2][i] if isinstance(t[2], dict) else t[2]       # one change, or each reduction its own
        return change(a, f, _axes(axis, a.ndim), bool(keepdims))
    if t[0] == "remapred" and i in t[2]:            # named values remapped and reductions changed at once
        return t[2][i](a, f, _axes(axis, a.ndim), bool(keepdims))
    return f(a, axis=axis, keepdims=keepdims)


def _axes(axis, ndim):
    """A reduction's axes as a sorted tuple of non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))))


def _index_only(b):
    """The change "the reduction over index 0 of axis ``b`` only" (the other indices' terms left out)."""
    return lambda a, red, axes, keepdims: red(np.take(a, [0], axis=b), axis=axes, keepdims=keepdims)


def _pooled(axes2, k):
    """The change "the reduction over ``axes2`` instead" (``_over``), a sum divided by the ``k`` slices pooled
    (the count its result is divided by elsewhere, a slice's, multiplied by k with them): the pooled mean's."""
    over = _over(axes2)

    def f(a, red, axes, keepdims):
        r = over(a, red, axes, keepdims)
        return r / k if red is _REDUCE["sum"] else r
    return f


def _across(axes2):
    """The change "the reduction over ``axes2`` (the other axes) instead", kept as it is: broadcast where it is
    used (a (1, n) mean of each position over the rows where each row's (m, 1) belongs)."""
    return lambda a, red, axes, keepdims: red(a, axis=axes2, keepdims=True)


def _over(axes2):
    """The change "the reduction over ``axes2`` instead": its result broadcast to the right one's shape."""
    def f(a, red, axes, keepdims):
        r = red(a, axis=axes2, keepdims=True)
        shape = tuple(1 if k in axes else s for k, s in enumerate(a.shape))      # the right reduction's
        if not keepdims:
            shape = tuple(s for k, s in enumerate(shape) if k not in axes)
            r = r.reshape([s for k, s in enumerate(r.shape) if k not in axes])
        return np.array(np.broadcast_to(r, shape))
    return f


# the specifications' per-row statistics by name: a root (True: rms, norm, std) or a mean of squares (False)
_ROW_STATS = {"rms": True, "norm": True, "std": True, "var": False, "ms": False}


def _row_blocks(k, root):
    """The change "each slice's statistic from the sum over its block of ``k`` consecutive slices" (a program
    of k rows reducing its whole (k, N) tile where the row's belongs, divided as the row's own: every row of the
    block takes the block's total; the last block partial): a mean of squares summed, a root statistic (``root``:
    an RMS, a norm, a std) the root of its squares' sum."""
    def f(v):
        a = np.asarray(v, dtype=np.float64)
        blocks = np.arange(a.size) // k
        t = np.bincount(blocks, weights=(a * a if root else a).reshape(-1))[blocks].reshape(a.shape)
        return np.sqrt(t) if root else t
    return f


def _tile_rows(k, per_row=1):
    """The change "each slice's reduction over its whole block of ``k`` consecutive rows" (a program of k rows
    reducing its (k, N) tile without an axis, tl.max(t) where tl.max(t, axis=1) belongs), each row holding
    ``per_row`` slices (gated_norm's groups; 1: a row is a slice): every slice of the block takes the max over
    its k rows' same slice (a sum's or a mean's: their total); the last block partial."""
    def f(a, red, axes, keepdims):
        r = np.asarray(red(a, axis=axes, keepdims=keepdims), dtype=np.float64)
        lead = r.reshape(-1, per_row)
        blocks = np.arange(lead.shape[0]) // k
        if getattr(red, "func", red) is _REDUCE["max"]:       # (max with its initial: a partial)
            t = np.full((int(blocks[-1]) + 1, per_row), -np.inf)
            np.maximum.at(t, blocks, lead)
        else:
            t = np.zeros((int(blocks[-1]) + 1, per_row))
            np.add.at(t, blocks, lead)
        return t[blocks].reshape(r.shape)
    return f


def _cumulate(lead, P, per_row):
    """Rows of ``lead`` (slices, 1) or (rows, per_row) accumulated as ``_cumulated`` says."""
    if per_row:
        return np.cumsum(lead, axis=1)
    out = lead.copy()
    for j in range(P, lead.shape[0]):
        out[j] += out[j - P]
    return out


def _row_cumulated(P, root, per_row=None):
    """``_cumulated`` as a change of a per-slice statistic's value (a remap): a mean of squares summed so, a
    root statistic (``root``: an RMS, a norm, a std) the root of its squares' sums (the specification's row
    scale, by which it divides x before squaring, multiplied back in the root)."""
    def f(v):
        a = np.asarray(v, dtype=np.float64)
        t = _cumulate((a * a if root else a).reshape(-1, per_row or 1), P, per_row).reshape(a.shape)
        return np.sqrt(t) if root else t
    return f


def _cumulated(P, per_row=None):
    """The change "each slice's sum accumulated onto the earlier slices of its program" (an accumulator set to 0
    before the program's loop instead of inside it): slices s, s - P, s - 2P, ... of a persistent grid of ``P``
    programs taking slices p, p + P, ...; or (``per_row``: each row's ``per_row`` slices, gated_norm's groups) the
    slices of the row before it, the accumulator reset per row. A mean: still divided by the slice's own count."""
    def f(a, red, axes, keepdims):
        r = np.asarray(red(a, axis=axes, keepdims=keepdims), dtype=np.float64)
        return _cumulate(r.reshape(-1, per_row or 1), P, per_row).reshape(r.shape)
    return f


def _carried(a, red, axes, keepdims):
    """The change "a loop's reduction accumulated across the loop's iterations" (its accumulator set to 0 before
    the loop, not per iteration): each call's result plus every earlier call's of the same evaluation (a mean:
    the sums accumulated, each divided by its own count)."""
    r = np.asarray(red(a, axis=axes, keepdims=keepdims), dtype=np.float64)
    prev = _TARGET.scratch.get("carried")
    out = r if prev is None or np.shape(prev) != r.shape else r + prev
    _TARGET.scratch["carried"] = out
    return out


def _whole(a, red, axes, keepdims):
    """The change "the reduction over every axis", a sum scaled by n_own / n_all (code dividing it by its own
    count n_own gets the whole array's mean); broadcast to the right reduction's shape."""
    r = red(a, axis=None, keepdims=True)
    if red is _REDUCE["sum"]:
        r = r * (np.prod([a.shape[k] for k in axes]) / max(a.size, 1))
    shape = [1 if k in axes else s for k, s in enumerate(a.shape)]
    r = np.array(np.broadcast_to(r, shape))
    return r if keepdims else r.reshape([s for k, s in enumerate(shape) if k not in axes])


def _without_last(k, kind, first=False):
    """The change "the reduction (``kind``) over the last axis without its last ``k`` values" (``first``: its
    first k, a pipelined loop's prologue tile loaded and never accumulated; a mean: still divided by the whole
    count)."""
    def f(a, red, axes, keepdims):
        kept = a[..., k:] if first else a[..., :a.shape[-1] - k]
        if kind == "max":
            return red(kept, axis=-1, keepdims=keepdims)
        r = np.sum(kept, axis=-1, keepdims=keepdims)
        return r / a.shape[-1] if kind == "mean" else r
    return f


def _tail_repeated(k):
    """The change "the reduction over the last axis with each of its last ``k`` values read as the first of them"
    (a tail loop's load index never advanced)."""
    def f(a, red, axes, keepdims):
        b = np.array(a, dtype=np.float64)
        b[..., b.shape[-1] - k:] = b[..., b.shape[-1] - k:b.shape[-1] - k + 1]
        return red(b, axis=-1, keepdims=keepdims)
    return f


def _divisors(N, most=8):
    """The group sizes k tried for a reduction over N values: its smallest ``most`` divisors 2 <= k <= N / 2."""
    return [k for k in range(2, N // 2 + 1) if N % k == 0][:most]


def _first_group(k):
    """The change "the reduction over the last axis of its first ``k`` values only" (a sum scaled to the whole
    count, so that the code's division by it gives those values' mean)."""
    def f(a, red, axes, keepdims):
        r = red(a[..., :k], axis=-1, keepdims=keepdims)
        return r * (a.shape[-1] / k) if red is _REDUCE["sum"] else r
    return f


def _part(axes2):
    """The change "the reduction over ``axes2`` (a part of its axes) only": each value its part's result."""
    return lambda a, red, axes, keepdims: red(a, axis=axes2, keepdims=True)


def _groups(k):
    """The change "the reduction over each group of ``k`` contiguous values of the last axis": each value its
    group's result."""
    def f(a, red, axes, keepdims):
        g = red(a.reshape(a.shape[:-1] + (a.shape[-1] // k, k)), axis=-1, keepdims=True)
        return np.repeat(g, k, axis=-1).reshape(a.shape)
    return f


def _chunked(k):
    """The change "the reduction over the last axis over each chunk of ``k`` contiguous values, the last chunk
    partial": each value its chunk's result, as reduced (a program's partial used as the slice's)."""
    def f(a, red, axes, keepdims):
        out = np.empty(a.shape)
        for s in range(0, a.shape[-1], k):
            out[..., s:s + k] = red(a[..., s:s + k], axis=-1, keepdims=True)
        return out
    return f


def _blocks(k):
    """The change "the reduction over the last axis over each block of ``k`` contiguous values, the last block
    partial": each value its block's result (a sum scaled to the row's count, so that the code's division by
    it gives the block's mean)."""
    def f(a, red, axes, keepdims):
        N, out = a.shape[-1], np.empty(a.shape)
        for s in range(0, N, k):
            r = red(a[..., s:s + k], axis=-1, keepdims=True)
            out[..., s:s + k] = r * (N / min(k, N - s)) if red is _REDUCE["sum"] else r
        return out
    return f


def _lanes(s):
    """The change "the reduction over the last axis without the columns j whose lane j mod 32 has bit ``s`` set"
    (a 32-lane warp butterfly missing its offset-s step: lane 0 ends with the lanes l & s == 0 alone; a mean:
    still divided by the whole count)."""
    def f(a, red, axes, keepdims):
        keep = (np.arange(a.shape[-1]) % 32 & s) == 0
        if getattr(red, "func", red) is _REDUCE["max"]:     # (np.max, or with its initial)
            return red(np.where(keep, a, -np.inf), axis=-1, keepdims=keepdims)
        r = np.sum(np.where(keep, a, 0.0), axis=-1, keepdims=keepdims)
        return r / a.shape[-1] if red is _REDUCE["mean"] else r
    return f


def _even_positions(k):
    """The change "the reduction without the odd positions of the flattened trailing ``k`` axes" (a 2-wide vector
    load's high half never accumulated; a mean still divided by the whole count)."""
    def f(a, red, axes, keepdims):
        P = int(np.prod(a.shape[a.ndim - k:], dtype=np.int64))
        keep = (np.arange(P) % 2 == 0).reshape(a.shape[a.ndim - k:])
        r = np.sum(np.where(keep, a, 0.0), axis=axes, keepdims=keepdims)
        n = int(np.prod([a.shape[x] for x in _axes(axes, a.ndim)], dtype=np.int64))
        return r / n if red is _REDUCE["mean"] else r
    return f


def _zero(a, red, axes, keepdims):
    """The change "the reduction left out": zeros of its result's shape."""
    return np.zeros_like(red(a, axis=axes, keepdims=keepdims))


def _first_samples(k, scaled=True, step=1):
    """The change "the reduction over indices 0 .. k - 1 of axis 0 alone" (a batch loop stopping early; ``step``
    > 1: indices 0, step, 2 step, ... alone, a loop unrolled by ``step`` whose body handles one sample): with
    ``scaled`` a sum scaled to the whole count, so that the code's division by it gives those samples' mean;
    else the sum of those samples as it is (a mean: still divided by the whole count); broadcast to the right
    reduction's shape."""
    def f(a, red, axes, keepdims):
        part = a[:k:step]
        if red is _REDUCE["max"] or scaled:
            r = red(part, axis=axes, keepdims=True)
            r = r * (a.shape[0] / part.shape[0]) if red is _REDUCE["sum"] else r
        else:
            r = np.sum(part, axis=axes, keepdims=True)
            r = r / np.prod([a.shape[j] for j in axes]) if red is _REDUCE["mean"] else r
        return r if keepdims else r.reshape([s for j, s in enumerate(r.shape) if j not in axes])
    return f


def _rows_repeated(k, lead):
    """The change "the sum over the ``lead`` leading axes (M rows, flattened) taken over rows 0 .. k - 1 alone,
    ceil(M / k) times" (a loop over blocks of k rows without the block's offset)."""
    def f(a, red, axes, keepdims):
        a = np.asarray(a, dtype=np.float64)
        rows = a.reshape((-1,) + a.shape[lead:])
        r = rows[:k].sum(axis=0) * -(-rows.shape[0] // k)
        return r.reshape((1,) * lead + r.shape) if keepdims else r
    return f


def _early_stops(n):
    """The sample counts k < n a batch loop stopping early takes: 1 (the loop's bound 1) and n rounded down to
    a multiple of a block of 2-32 samples (the tail block skipped)."""
    return sorted({1} | {n - n % b for b in (2, 4, 8, 16, 32) if b < n} - {0, n})


TERMS = {False: "partial sum", True: "term and partial sum"}


def _sequential(dt, terms=False):
    """The change "the reduction accumulated left to right in the 16-bit ``dt``, each partial sum rounded"
    (``terms``: each term rounded too, a 16-bit accumulator adding 16-bit operands; a mean: that sum divided
    by n)."""
    def f(a, red, axes, keepdims):
        n = int(np.prod([a.shape[k] for k in axes]))
        rest = [k for k in range(a.ndim) if k not in axes]
        v = np.transpose(a, rest + list(axes)).reshape([a.shape[k] for k in rest] + [n])
        t = np.zeros(v.shape[:-1])
        for j in range(n):
            term = v[..., j].astype(dt).astype(np.float64) if terms else v[..., j]
            t = (t + term).astype(dt).astype(np.float64)
        if red is _REDUCE["mean"]:
            t = t / max(n, 1)
        shape = [1 if k in axes else s for k, s in enumerate(a.shape)] if keepdims else [a.shape[k] for k in rest]
        return t.reshape(shape)
    return f


def _partials(dt, part):
    """The change "the reduction's partial sums (each block of ``part`` values of the last axis, or each index
    of the axes a tuple ``part`` leaves out) rounded to the 16-bit ``dt`` before they are added" (a partial
    written to shared memory or a buffer of the input dtype; a mean: that sum divided by n)."""
    def f(a, red, axes, keepdims):
        if isinstance(part, tuple):
            p = np.sum(a, axis=part, keepdims=True)
            r = np.sum(p.astype(dt).astype(np.float64), axis=axes, keepdims=True)
        else:
            N = a.shape[-1]
            p = np.stack([np.sum(a[..., s:s + part], axis=-1) for s in range(0, N, part)], axis=-1)
            r = np.sum(p.astype(dt).astype(np.float64), axis=-1, keepdims=True)
            r = np.sum(r, axis=tuple(x for x in axes if x != a.ndim - 1), keepdims=True)
        if red is _REDUCE["mean"]:
            r = r / max(int(np.prod([a.shape[k] for k in axes])), 1)
        return r if keepdims else r.reshape([s for k, s in enumerate(r.shape) if k not in axes])
    return f


def _one_pass(d, x, W):
    """The change "the sum of (d / s)^2 taken as n (E[x^2] - E[x]^2) / s^2, both means from sums in ``W`` (the
    working precision), the difference clamped at 0" (``d``: the deviations of ``x`` from its mean; s a per-slice
    scale the summand may divide them by, read from it); no change where the summand is no such square."""
    def f(a, red, axes, keepdims):
        n = int(np.prod([np.shape(a)[k] for k in axes]))
        xw = np.asarray(x, dtype=W)
        s2 = _sq_scale(a, d, axes)
        if s2 is None:
            return red(a, axis=axes, keepdims=keepdims)
        with np.errstate(all="ignore"):
            m = np.sum(xw, axis=axes, keepdims=True, dtype=W) / W(n)
            m2 = np.sum(xw * xw, axis=axes, keepdims=True, dtype=W) / W(n)
            r = np.maximum(m2 - m * m, W(0)).astype(np.float64) * n / s2
        return r if keepdims else r.reshape([s for k, s in enumerate(r.shape) if k not in axes])
    return f


def _about_first(a, red, axes, keepdims):
    """The change "the sum of d^2 = (x - mean)^2 taken about the slice's first value x0 instead of the mean,
    the shift never corrected": sum((x - x0)^2) = sum(d^2) + n d_0^2 (d_0 = x0 - mean, a's first element)."""
    first = a[tuple(slice(0, 1) if k in axes else slice(None) for k in range(a.ndim))]
    r = red(a, axis=axes, keepdims=True) + int(np.prod([a.shape[k] for k in axes])) * first
    return r if keepdims else r.reshape([s for k, s in enumerate(r.shape) if k not in axes])


def _about_first_scaled(d):
    """_about_first where the summand is (d / s)^2 of the recorded deviations ``d`` (z_score's s = max|d|,
    _sq_scale): sum((d / s)^2) + n (d_0 / s)^2; no change where the summand is no such square."""
    def f(a, red, axes, keepdims):
        s2 = _sq_scale(a, d, axes)
        if s2 is None:
            return red(a, axis=axes, keepdims=keepdims)
        return _about_first(np.asarray(d) ** 2 / s2, red, axes, keepdims)
    return f


def _about_zero(d, mu):
    """The change "the sum of squared deviations taken about 0: the raw sum of squares sum(x^2) = sum(d^2) +
    n mean^2" (a one-pass variance E[x^2] whose - E[x]^2 term is left out; the normalization itself still
    centred); ``d``, ``mu``: the recorded deviations and mean (the summand maybe (d / s)^2: _sq_scale); no change
    where the summand is no squared deviation or the mean does not broadcast over the slices."""
    def f(a, red, axes, keepdims):
        s2, m = _sq_scale(a, d, axes), np.asarray(mu, dtype=np.float64)
        r = red(a, axis=axes, keepdims=True)
        if s2 is None or np.ndim(m) != np.ndim(a) or np.shape(m) != np.shape(r):
            return red(a, axis=axes, keepdims=keepdims)
        r = r + int(np.prod([a.shape[k] for k in axes])) * m * m / s2
        return r if keepdims else r.reshape([s for k, s in enumerate(r.shape) if k not in axes])
    return f


def _about_parts(d, part):
    """The change "the sum of d^2 taken as the sum of each part's squared deviations about the part's own mean"
    (partial variances merged without the spread of the partial means: sum((d - mean_part d)^2)); ``d``: the
    deviations the recording saw; ``part``: an int k (blocks of k contiguous values of the last axis, the last
    block partial), -k (k lanes: lane l the columns j = l mod k, a warp's strided Welford partials) or a tuple
    of axes (each part the reduction over those axes alone)."""
    def f(a, red, axes, keepdims):
        s2 = _sq_scale(a, d, axes)
        if s2 is None:
            raise ValueError("not the recorded deviations")
        run = _run(axes, np.ndim(d))
        if not isinstance(part, tuple) and len(run) > 1:    # the trailing run flattened (a slice's positions)
            flat = np.reshape(d, np.shape(d)[:run[0]] + (-1,))
            dev = np.reshape(_deviations(flat, part), np.shape(d))
        else:
            dev = _deviations(d, part)
        return red(dev * dev / s2, axis=axes, keepdims=keepdims)
    return f


def _deviations(d, part):
    """Each value's deviation from its part's own mean (``_about_parts``'s parts)."""
    if isinstance(part, tuple):
        dev = d - d.mean(axis=part, keepdims=True)
    elif part < 0:                  # -k: k lanes, lane l the columns j = l mod k (each lane's own mean)
        k, N = -part, d.shape[-1]
        pad = np.concatenate([d, np.full(d.shape[:-1] + (-N % k,), np.nan)], axis=-1)
        lanes = pad.reshape(d.shape[:-1] + (-1, k))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)         # (a lane without values: N < k)
            dev = (lanes - np.nanmean(lanes, axis=-2, keepdims=True)).reshape(pad.shape)[..., :N]
    else:
        dev = np.concatenate([b - b.mean(axis=-1, keepdims=True) for b in np.array_split(
            d, range(part, d.shape[-1], part), axis=-1)], axis=-1)
    return dev


def _count(n2):
    """The change "a mean's sum divided by ``n2``" (the count it takes)."""
    return lambda a, red, axes, keepdims: np.sum(a, axis=axes, keepdims=keepdims) / n2


def _run(axes, nd):
    """The trailing run of a reduction's axes (those ending at the last axis, contiguous: a slice's spatial
    positions, a row's columns), or () where the last axis is not reduced."""
    run = []
    for j in range(nd - 1, -1, -1):
        if j not in axes:
            break
        run.insert(0, j)
    return tuple(run)


def _tails(T, masked=False):
    """The tail lengths k a loop over tiles of B = 16 ... 1024 of T positions drops (T mod B, its bound T // B);
    ``masked``: and k = 1, the last position (a mask cols < T - 1, off by one), where T > 1."""
    return sorted(({T % b for b in (16, 32, 64, 128, 256, 512, 1024) if b < T} | ({1} if masked and T > 1 else set()))
                  - {0})


def _run_kept(kept):
    """The change "the reduction from the positions j of its trailing run of axes with ``kept(j)`` alone (per
    leading index of the other reduced axes; a mean still divided by the whole count)"."""
    def f(a, red, axes, keepdims):
        run = _run(axes, a.ndim)
        sizes = [a.shape[j] for j in run]
        keep = kept(np.arange(int(np.prod(sizes)))).reshape([1] * (a.ndim - len(run)) + sizes)
        if getattr(red, "func", red) is _REDUCE["max"]:
            return red(np.where(keep, a, -np.inf), axis=axes, keepdims=keepdims)
        r = np.sum(np.where(keep, a, 0.0), axis=axes, keepdims=keepdims)
        return r / max(int(np.prod([a.shape[j] for j in axes])), 1) if red is _REDUCE["mean"] else r
    return f


def _odd_tiles_dropped(t):
    """The change "the reduction without the positions j of its trailing run of axes with (j // ``t``) odd" (a
    loop over tiles of t unrolled by two, a stride of 2 t, its body written for one tile)."""
    return _run_kept(lambda j: (j // t) % 2 == 0)


def tree_kept(N, halving=True):
    """The 0/1 mask of the N positions a tree reduction that drops the unpaired last value of every level of odd
    length k keeps: ``halving``, element i added to element i + floor(k / 2); else neighbours (2 i, 2 i + 1)."""
    slot, k = np.arange(N), N           # each position's partial (-1: dropped)
    while k > 1:
        h = k // 2
        slot = np.where(slot >= 2 * h, -1, (np.where(slot >= h, slot - h, slot) if halving else slot // 2))
        k = h
    return slot == 0


def _tail_dropped(k):
    """The change "the reduction without the last ``k`` positions of its trailing run of axes" (a loop over
    whole tiles of the slice's flattened trailing positions, the partial tail tile never entered; per leading
    index of the other reduced axes: each sample's own tail; a mean still divided by the whole count)."""
    return _run_kept(lambda j: j < j.size - k)


def _sq_scale(a, d, axes):
    """s^2 per slice where the summand ``a`` is (d / s)^2 of the recorded deviations ``d`` (s a per-slice scale:
    z_score's a = max|d|; 1 for d^2 itself), else None: the summand is no squared deviation."""
    if np.shape(a) != np.shape(d):
        return None
    with np.errstate(all="ignore"):
        s2 = np.max(d * d, axis=axes, keepdims=True) / np.max(a, axis=axes, keepdims=True)
        s2 = np.where(np.isfinite(s2) & (s2 > 0), s2, 1.0)
        return s2 if np.allclose(a * s2, d * d, rtol=1e-9, atol=0.0) else None


def _padded_sq(d, mu, P, scaled=True):
    """The change "the sum of squared deviations over a tile of ``P`` lanes per trailing run, the padded lanes
    loaded as 0 and their deviations 0 - mean not masked" (each adds mean^2 / s^2; a mean still divided by the
    whole count); ``d``, ``mu``: the recorded deviations and mean (``scaled`` False: the summand d^2 of another
    mean ``mu``, s = 1)."""
    def f(a, red, axes, keepdims):
        s2 = _sq_scale(a, d, axes) if scaled else 1.0
        if s2 is None:
            raise ValueError("no squared deviation")
        n = int(np.prod([a.shape[j] for j in axes]))
        T = int(np.prod([a.shape[j] for j in _run(axes, a.ndim)])) or n
        extra = (P - T) * (n // T) * np.asarray(mu) ** 2 / s2
        r = np.sum(a, axis=axes, keepdims=True) + extra
        r = r / n if red is _REDUCE["mean"] else r
        return r if keepdims else r.reshape([s for j, s in enumerate(r.shape) if j not in axes])
    return f


_LEVEL = {"Add": 1, "Sub": 1, "Mult": 2, "Div": 2}
_SYM = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/"}


def _operand(source, node, side) -> str:
    """An operand's source, in parentheses where the operation binds it tighter than its own operator."""
    child = getattr(node, side)
    seg = ast.get_source_segment(source, child) or ("a" if side == "left" else "b")
    if isinstance(child, ast.BinOp):
        outer, inner = _LEVEL.get(type(node.op).__name__, 3), _LEVEL.get(type(child.op).__name__, 3)
        if inner < outer or (side == "right" and inner == outer and type(node.op).__name__ in ("Sub", "Div")):
            return f"({seg})"
    return seg


def _docstring(node) -> int:
    """1 where the function's body opens with its docstring (the hooks on its arguments go after it)."""
    b = node.body[0] if node.body else None
    return int(isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str))


def _root_index(node):
    """The root an assigned expression takes at its top level: 2 for np.sqrt(...) or np.hypot(...) (maybe scaled,
    s * np.sqrt(...), or one branch of a conditional), the exponent's divisor's name for ``... ** (1.0 / p)``
    (a p-th root); else None."""
    if isinstance(node, ast.IfExp):
        return _root_index(node.body)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("sqrt", "hypot"):
        return 2
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.BinOp) \
            and isinstance(node.right.op, ast.Div) and isinstance(node.right.left, ast.Constant) \
            and node.right.left.value == 1 and isinstance(node.right.right, ast.Name):
        return node.right.right.id
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _root_index(node.right) if _root_index(node.left) is None else _root_index(node.left)
    return None


class _Instrument(ast.NodeTransformer):
    """After each assignment to local names inside a function, ``name = _rp_hook(key, name)``; a relative
    import of a sibling specification module takes its instrumented namespace."""

    def __init__(self, module, source):
        self.module, self.funcs, self.source = module, [], source

    def visit_BinOp(self, node):
        op = type(node.op).__name__
        seg = tuple(_operand(self.source, node, side) for side in ("left", "right"))
        self.generic_visit(node)
        if not self.funcs or op not in _OPS:
            return node
        i = len(_SOURCES)
        _SOURCES[i] = (self.module, self.funcs[-1], node.lineno, op) + seg
        return ast.Call(ast.Name("_rp_bin", ast.Load()), [ast.Constant(i), node.left, node.right, ast.Constant(op)], [])

    def visit_Call(self, node):
        """``a.sum(axis=..., keepdims=...)``, ``a.mean(...)``, ``np.sum(a, ...)``, ``np.mean(a, ...)`` (no other
        argument) -> ``_rp_red(i, a, kind, axis, keepdims)``."""
        f = node.func
        numpy_call = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "np"
        kw = {k.arg: k.value for k in node.keywords}
        if (not self.funcs or not isinstance(f, ast.Attribute) or f.attr not in _REDUCE or None in kw
                or set(kw) - {"axis", "keepdims", "initial"} or (len(node.args) != 1 if numpy_call else node.args)
                or ("initial" in kw and f.attr != "max")):
            self.generic_visit(node)
            return node
        segs = (ast.get_source_segment(self.source, node.args[0] if numpy_call else f.value) or "a",
                ast.get_source_segment(self.source, kw["axis"]) if "axis" in kw else "None")
        self.generic_visit(node)
        kw = {k.arg: k.value for k in node.keywords}
        arr = node.args[0] if numpy_call else node.func.value
        i = len(_SOURCES)
        _SOURCES[i] = (self.module, self.funcs[-1], node.lineno, f.attr) + segs
        return ast.Call(ast.Name("_rp_red", ast.Load()), [ast.Constant(i), arr, ast.Constant(f.attr),
                        kw.get("axis", ast.Constant(None)), kw.get("keepdims", ast.Constant(False)),
                        kw.get("initial", ast.Constant(None))], [])

    def visit_FunctionDef(self, node):
        self.funcs.append(node.name)
        self.generic_visit(node)
        key = f"{self.module}:{node.name}."
        args = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        _ARGS.update(key + a for a in args)
        node.body[_docstring(node):0] = [ast.parse(f"{a} = _rp_hook({key + a!r}, {a})").body[0] for a in args]
        self.funcs.pop()
        return node

    def _hooks(self, node, targets, root=None):
        if not self.funcs:
            return node
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        key = f"{self.module}:{self.funcs[-1]}."
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and root is not None:
            _ROOTS[key + targets[0].id] = root
        return [node] + [ast.parse(f"{n} = _rp_hook({key + n!r}, {n})").body[0] for n in dict.fromkeys(names)]

    def visit_Return(self, node):
        root = _root_index(node.value)          # (before the operations become hooked calls)
        self.generic_visit(node)
        if self.funcs and node.value is not None:
            key = f"{self.module}:{self.funcs[-1]}.return"
            if root is not None:
                _ROOTS[key] = root
            node.value = ast.Call(ast.Name("_rp_hook", ast.Load()), [ast.Constant(key), node.value], [])
        return node

    def visit_Assign(self, node):
        root = _root_index(node.value)          # (before the operations become hooked calls)
        self.generic_visit(node)
        return self._hooks(node, node.targets, root)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        return self._hooks(node, [node.target])

    def visit_ImportFrom(self, node):
        if node.level != 1 or not node.module:
            return node
        return [ast.parse(f"{a.asname or a.name} = _rp_module({node.module!r}).{a.name}").body[0] for a in node.names]


class _Namespace:
    def __init__(self, d):
        self.__dict__.update(d)


def _rp_module(name):
    """The instrumented namespace of refnorm.specs.<name> (built once)."""
    with _LOCK:
        if name not in _BUILT:
            mod = importlib.import_module(f"refnorm.specs.{name}")
            src = inspect.getsource(mod)
            _LINES[name] = src.splitlines()
            tree = _Instrument(name, src).visit(ast.parse(src))
            ast.fix_missing_locations(tree)
            ns = {"__name__": f"refnorm.specs.{name}", "__package__": "refnorm.specs", "_rp_hook": _rp_hook,
                  "_rp_module": _rp_module, "_rp_bin": _rp_bin, "_rp_red": _rp_red}
            exec(compile(tree, mod.__file__, "exec"), ns)      # noqa: S102 - the project's own specification
            _BUILT[name] = _Namespace(ns)
        return _BUILT[name]


def _evaluate(case, record, target, inputs=None, cotangents=None, state=None):
    from .. import registry
    ns = _rp_module(case.op)
    _TARGET.t = target
    _TARGET.scratch = {}        # what a change keeps within one evaluation (_carried), kept until the next
    cot = record.cotangents if cotangents is None else cotangents
    try:
        with np.errstate(all="ignore"):
            return registry.evaluate(case.op, {k: np.asarray(v) for k, v in (inputs or record.inputs).items()},
                                     config=dict(case.config),
                                     grad_outputs={k: np.asarray(v, np.float64) for k, v in cot.items()} or None,
                                     state={k: np.asarray(v, np.float64) for k, v in (state or record.state).items()},
                                     training=record.training, engine=(ns.forward, ns.backward))
    finally:
        _TARGET.t = None


def _dtypes(case_dtype):
    if case_dtype in ("float16", "bfloat16"):
        return (case_dtype,)
    return ("bfloat16", "float16") if case_dtype == "float32" else ("float32",)


LARGER = 4.0          # the most a bound grows with the explained value (``grown_fit``)


def grown_bound(E, explained, want, larger=LARGER):
    """The bound ``E`` grown elementwise by the explained value's size: where |explained| is larger than the
    reference's |want|, by their ratio, at most ``larger`` (want's shape; a kernel computing the explained
    arithmetic rounds larger values by more than the reference's bound allows for)."""
    with np.errstate(all="ignore"):
        return np.broadcast_to(E, np.shape(want)) * np.clip(
            np.nan_to_num(np.abs(explained) / np.abs(want), nan=1.0, posinf=larger), 1.0, larger)


def grown_fit(fit_ratio, got, explained, want, E, failing, larger=LARGER, margin=1.0) -> float:
    """``fit_ratio`` within the bound grown by the explained value's size (``grown_bound``, at most ``larger``);
    inf where a ``failing`` array is within ``margin`` x that grown bound of the reference itself (the growth,
    not the explanation, would fit it). Integer and quantized arrays (``quantized(dtype)``) are judged as they
    are."""
    g = np.asarray(got)
    if want is None or np.size(want) != np.size(g) or g.dtype.kind in "iub" or g.dtype.itemsize == 1:
        return fit_ratio(got, explained, E)
    v = np.reshape(np.asarray(explained, dtype=np.float64), np.shape(g))
    w = np.reshape(np.asarray(want, dtype=np.float64), np.shape(g))
    Ev = grown_bound(E, v, w, larger)
    if failing and fit_ratio(got, w, Ev) <= margin:
        return math.inf
    return fit_ratio(got, v, Ev)


def fits_step(record, res, fit_ratio, parts=("outputs", "grads", "state"), plain=None, spread=None):
    """Whether ``res`` reproduces every compared array of the step (of ``parts``) within its bound (grown by
    the explained value's size over the reference's ``plain``, where given: ``grown_fit``; and by the
    explained arithmetic's own conditioning, where ``spread`` holds its values at perturbed inputs:
    ``perturbed_bound``)."""
    return step_ratio(record, res, fit_ratio, parts, plain, spread) <= 1


def judged_fit(fit_ratio, record, part, name):
    """``fit_ratio`` for one array of the step, judged in the dtype the check judges it in where that is not its
    own (record.E["dtypes"]: a block scale's power-of-two grid)."""
    qd = record.E.get("dtypes", {}).get((part, name))
    return fit_ratio if qd is None else (lambda g, v, e: fit_ratio(g, v, e, qd))


def step_ratio(record, res, fit_ratio, parts=("outputs", "grads", "state"), plain=None, spread=None,
               stop=1.0) -> float:
    """The largest ratio (``fits_step``) over the compared arrays of the step; inf where one is missing. Once
    an array's ratio exceeds ``stop`` that ratio is returned, the rest not judged (the callers ask only
    whether it is within stop)."""
    worst = 0.0
    for part in parts:
        for name in record.compare[part]:
            got, alt, E = record.got[part].get(name), getattr(res, part).get(name), record.E[part].get(name)
            if got is None or E is None:
                continue
            if alt is None or np.shape(alt) != np.shape(got):
                return math.inf
            want = None if plain is None else getattr(plain, part).get(name)
            others = [o for o in (getattr(r, part).get(name) for r in spread or ())
                      if o is not None and np.shape(o) == np.shape(alt)]
            if others and np.asarray(got).dtype.itemsize > 1:
                E = perturbed_bound(E, alt, others, np.asarray(got).dtype)
            worst = max(worst, grown_fit(judged_fit(fit_ratio, record, part, name), got, alt, want, E,
                                         (part, name) in record.failing))
            if worst > stop:
                return worst
    return worst


PERTURB = 4.0    # an explained array's bound is at least this many times its change under the inputs' perturbation
NEAR = 64.0      # a change missing NEAR times less than the reference is judged again within that bound,
PERTURBED_MAX = 8     # for at most this many changes of one search


def perturbed_bound(E, alt, others, dtype):
    """The bound E, at least PERTURB times (max |alt - other| + u |alt|) elementwise: ``others`` the explained
    arithmetic at inputs perturbed by one unit of the working precision (``perturbed_inputs``), each by its own
    pattern of signs (one pattern alone can cancel at an element by chance: the largest change of two is that
    element's conditioning), u the unit roundoff of the returned ``dtype`` (the explained value's own rounding). A kernel computing that arithmetic
    rounds its values at the working precision; where it cancels (an x_hat of a misread mean, a variance read
    as 0) its errors are the inputs' units amplified as the perturbation's are, far above the reference's
    bound, which was derived where the specification's values lie."""
    u = float(ml_dtypes.finfo(dtype).eps) / 2 if np.dtype(dtype).kind in "fV" else 0.0
    with np.errstate(all="ignore"):
        a = np.asarray(alt, dtype=np.float64)
        d = np.max([np.abs(a - np.asarray(o, dtype=np.float64)) for o in others], axis=0) + u * np.abs(a)
    return np.maximum(np.broadcast_to(E, np.shape(d)), PERTURB * np.where(np.isfinite(d), d, 0.0))


PATTERNS = 2      # the perturbations' sign patterns (perturbed_bound)


def perturbed_inputs(case, record, pattern=0):
    """(inputs, cotangents) with every floating array moved by one unit of the working precision (float64's
    for a float64 case, float32's else), each element up or down (the fixed pattern ``pattern``), in float64;
    None where a default depends on the inputs' dtype (eps=None)."""
    if "eps" in case.config and case.config["eps"] is None:
        return None
    u = 2.0 ** -53 if case.dtype == "float64" else 2.0 ** -24
    rng = np.random.default_rng(pattern)

    def move(d):
        out = {}
        for k, v in d.items():
            a = np.asarray(v)
            floating = a.dtype.kind == "f" or (a.dtype.kind == "V" and a.dtype.itemsize == 2)
            out[k] = a.astype(np.float64) * (1 + u * rng.choice((-1.0, 1.0), a.shape)) if floating and \
                "mask" not in k else v
        return out
    return move(record.inputs), move(record.cotangents)


def rounding_point(case, record, fit_ratio):
    """The named intermediate whose rounding reproduces the step (module docstring): an explanation
    {"mechanism", "text"}, or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > ROUNDING_SIZE or not record.failing or not importlib.util.find_spec(
            f"refnorm.specs.{case.op}"):
        return None
    seen = {}
    try:
        _evaluate(case, record, ("record", seen))
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return None
    # each name alone, and each local name the forward and the backward both assign (a value a kernel
    # holds in one dtype wherever it computes it: the gain 1 + scale, silu(z))
    # and each function evaluated in the lower dtype: its arguments, every value it assigns and its result rounded
    by_name, calls = {}, {}
    for key in seen:
        calls.setdefault(key.rsplit(".", 1)[0], []).append(key)
    calls = [tuple(ks) for ks in calls.values() if any(k in _ARGS for k in ks) and any(k not in _ARGS for k in ks)]
    # a backward function's argument of x's size: a value the forward saved for the backward in a buffer of
    # the lower dtype (the normalized x_hat)
    saved = [(k,) for k, v in seen.items() if k in _ARGS and "backward" in k.split(":", 1)[1].rsplit(".", 1)[0]
             and np.size(v) == np.size(x) and np.asarray(v).dtype.kind == "f"]
    args = [k for k, v in seen.items() if k in _ARGS and _floating(v) and np.size(v) > 1]
    seen = {k: v for k, v in seen.items() if k not in _ARGS}
    for key in seen:
        by_name.setdefault(key.rsplit(".", 1)[1], []).append(key)
    points = [(key,) for key in seen] + [tuple(ks) for ks in by_name.values() if len(ks) > 1] + calls + saved
    found = []
    for keys in points:
        for dt in _dtypes(case.dtype):
            for toward_zero in (False, True):
                try:
                    res = _evaluate(case, record, ("round", frozenset(keys), _DT[dt], toward_zero))
                except Exception:                       # noqa: BLE001 - a rounding the spec cannot go on from
                    continue
                if fits_step(record, res, fit_ratio):
                    found.append((keys, dt, toward_zero))
    if not found and case.dtype in ("float16", "bfloat16"):
        # a parameter loaded through a pointer of the other 16-bit dtype (a bfloat16 weight in a float16 kernel):
        # every function's argument of its name rounded to it, a value held in a lower dtype (rule 8)
        for name in sorted({k.rsplit(".", 1)[1] for k in args if k.rsplit(".", 1)[1] in PARAMETERS}):
            keys = frozenset(k for k in args if k.rsplit(".", 1)[1] == name)     # (the backward's loads too)
            for dt in (d for d in ("bfloat16", "float16") if d != case.dtype):
                try:
                    res = _evaluate(case, record, ("round", keys, _DT[dt], False))
                except Exception:                       # noqa: BLE001 - a rounding the spec cannot go on from
                    continue
                if keys and fits_step(record, res, fit_ratio):
                    return {"mechanism": "precision", "text": f"the specification with `{name}` loaded as {dt} "
                            f"(rounded to nearest, in a {case.dtype} call) reproduces every failing array"}
        # every floating input and cotangent converted to the other 16-bit dtype (a kernel instantiated for that
        # dtype alone, its results stored back in the call's): the specification on the rounded values
        other = "bfloat16" if case.dtype == "float16" else "float16"
        conv = lambda d: {k: (np.asarray(np.asarray(v, dtype=np.float64).astype(_DT[other]), dtype=np.float64)  # noqa: E731
                              if _floating(np.asarray(v)) else v) for k, v in d.items()}
        try:
            res = _evaluate(case, record, None, inputs=conv(record.inputs), cotangents=conv(record.cotangents))
        except Exception:                               # noqa: BLE001 - a value the spec refuses
            res = None
        if res is not None and fits_step(record, res, fit_ratio):
            return {"mechanism": "precision", "text": f"the specification on every input converted to {other} "
                    f"(rounded to nearest: a kernel for {other} alone, in a {case.dtype} call, its results stored "
                    f"back as {case.dtype}) reproduces every failing array"}
    if not found and "_math:centered.m0" in seen and "_math:centered.c" in seen:
        # a one-pass mean rounded where the kernel computes it, the deviations about the rounded value: the first
        # pass's mean m0 rounded with the specification's own correction c (which would undo it) taken as 0
        for dt in _dtypes(case.dtype):
            for tz in (False, True):
                try:
                    res = _evaluate(case, record, ("remapk", {"_math:centered.m0": lambda v, t=_DT[dt], z=tz:
                                                              _round(v, t, z), "_math:centered.c": lambda v: 0.0 * v}))
                except Exception:                       # noqa: BLE001 - a rounding the spec cannot go on from
                    continue
                if fits_step(record, res, fit_ratio):
                    return {"mechanism": "rounding" if tz else "precision", "text": "the specification with each "
                            f"slice's mean (refnorm/specs/_math.py centered) rounded {'toward zero' if tz else 'to nearest'}"
                            f" to {dt} and the deviations taken about that rounded mean reproduces every failing array"}
    if not found:
        return _squared_point(case, record, seen, fit_ratio)
    if len({tz for _, _, tz in found}) > 1:
        return None
    keys, dt, tz = found[0]
    # a value computed from the parameters alone (the gain 1 + scale) does not move with the activations
    # (every input but the affine parameters): rounding it is the affine convention's cast order
    still = _unmoved(case, record, seen, [k for k in record.inputs if k not in PARAMETERS or k == "alpha"], cotangents=True)
    mod = keys[0].split(":", 1)[0]
    more = (f" (also: {', '.join(_point(ks) for ks, _, _ in found[1:4])})" if len(found) > 1 else "")
    # eps itself rounded: its value (rule 6 of docs/verdicts.md's "Which mechanism a bug is", before 8 and 13)
    eps_only = all(k.rsplit(".", 1)[1] == "eps" for k in keys)
    # (the parameters cast to the case's own dtype: the cast order; to a dtype below it, a float64 weight loaded
    # through a float32 pointer: rule 8's precision, before rule 13)
    cast = set(keys) <= still and str(dt) == case.dtype
    return {"mechanism": "eps" if eps_only else "rounding" if tz else "affine" if cast else "precision",
            "text": f"the specification with {_point(keys)} (refnorm/specs/{mod}.py) rounded "
                    f"{'toward zero' if tz else 'to nearest'} to {dt} reproduces every failing array{more}"}


_OTHER = {"inside": "outside", "outside": "inside", "rms_norm": "layer_norm", "layer_norm": "rms_norm"}


def backward_flag(case, record, fit_ratio):
    """A flag the backward alone reads the other way (a boolean negated; eps's placement, the norm's kind: the
    other of its two values), the forward right: the specification with that value changed in one backward
    function reproducing every failing array. eps's placement is rule 6's eps, any other flag the backward's.
    An explanation, or None."""
    if not record.failing or any(p != "grads" for p, _ in record.failing) or record.inputs.get("x") is None \
            or not importlib.util.find_spec(f"refnorm.specs.{case.op}"):
        return None
    flags = {}
    try:
        _evaluate(case, record, ("flags", flags))
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return None
    for key, v in flags.items():
        if "backward" not in key.split(":", 1)[1].rsplit(".", 1)[0] or not (isinstance(v, bool) or v in _OTHER):
            continue
        other = (not v) if isinstance(v, bool) else _OTHER[v]
        try:
            res = _evaluate(case, record, ("flag", key, other))
        except Exception:                               # noqa: BLE001 - a value the spec cannot go on from
            continue
        if fits_step(record, res, fit_ratio) and not _blown_up(record, res):
            mod, name = key.split(":", 1)
            return {"mechanism": "eps" if "placement" in name else "backward",
                    "text": f"the specification's backward with {name} = {other!r} where {v!r} belongs (refnorm/"
                            f"specs/{mod}.py; the forward as it is) reproduces every failing array"}
    return None


def _squared_point(case, record, seen, fit_ratio):
    """A root statistic (rms, std, rstd) whose square the kernel held in the lower dtype (the mean of squares
    or the variance stored in a 16-bit register before its root): the intermediate v of a slice's size taken
    as sqrt(round(v^2)), or 1 / sqrt(round(1 / v^2)) for a reciprocal root. An explanation, or None."""
    n = np.size(record.inputs["x"])
    for key, v in seen.items():
        if not (np.size(v) < n and np.all(np.isfinite(v)) and np.all(v > 0)):
            continue
        for dt in _dtypes(case.dtype):
            for f, what in ((lambda a, d=_DT[dt]: np.sqrt(_round(np.square(a), d, False)), "its square"),
                            (lambda a, d=_DT[dt]: 1 / np.sqrt(_round(1 / np.square(a), d, False)),
                             "its inverse square")):
                try:
                    res = _evaluate(case, record, ("remap", key, f))
                except Exception:                       # noqa: BLE001 - a value the spec cannot go on from
                    continue
                if fits_step(record, res, fit_ratio):
                    mod, name = key.split(":", 1)
                    return {"mechanism": "precision",
                            "text": f"the specification with {what} of its intermediate {name} (refnorm/specs/"
                                    f"{mod}.py; a mean of squares or variance held before the root) rounded to "
                                    f"nearest {dt} reproduces every failing array"}
    return None


def _point(keys) -> str:
    """What a rounding point is, in words: its intermediates, or a function's arguments and result."""
    if len(keys) == 1 and keys[0] in _ARGS:
        func, arg = keys[0].split(":", 1)[1].rsplit(".", 1)
        return f"the argument {arg} of {func} (a value saved for the backward)"
    if any(k in _ARGS for k in keys):
        func = keys[0].split(":", 1)[1].rsplit(".", 1)[0]
        args = ", ".join(k.rsplit(".", 1)[1] for k in keys if k in _ARGS)
        return f"the function {func} evaluated in the lower precision (its arguments {args}, its values and result)"
    return "its intermediate " + " and ".join(k.split(":", 1)[1] for k in keys)


def _unmoved(case, record, base, names, cotangents=False):
    """The keys of ``base`` (a recording of the call) whose values stay the same when the floating inputs
    ``names`` are moved (x -> 0.75 x + 0.125), and the cotangents too where ``cotangents`` (a backward's dy
    w is no value of the parameters alone): the values that do not depend on those inputs."""
    def move(d, keys):
        return {k: (np.asarray(v, dtype=np.float64) * 0.75 + 0.125).astype(np.asarray(v).dtype)
                if k in keys and np.asarray(v).dtype.kind not in "iub" else v       # (bfloat16's kind is V)
                for k, v in d.items()}
    ins = move(record.inputs, names)
    cot = move(record.cotangents, record.cotangents) if cotangents else None
    got = {}
    try:
        _evaluate(case, record, ("record", got), ins, cot)
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return set()
    return {k for k, v in base.items() if k in got and np.shape(got[k]) == np.shape(v)
            and np.array_equal(got[k], v, equal_nan=True)}


def _state_values(case, record, base):
    """The local names whose values move with the call's running statistics (an eval call's mean and var
    read from running_mean / running_var): a change of one of them is the running statistics' (rule 2 of
    docs/verdicts.md's "Which mechanism a bug is")."""
    moved = {k: np.asarray(v, np.float64) * 0.75 + 0.125 if np.size(v) > 1 else v for k, v in record.state.items()}
    if not any(np.size(v) > 1 for v in record.state.values()):
        return set()
    got = {}
    try:
        _evaluate(case, record, ("record", got), state=moved)
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return set()
    return {k.rsplit(".", 1)[1] for k, v in base.items() if k in got and np.shape(got[k]) == np.shape(v)
            and not np.array_equal(got[k], v, equal_nan=True)}


def _gate_values(case, record):
    """The local names whose values follow the gate input z alone (they move with z, not with x): silu(z) and
    its derivative. A change of the backward in one of them is the gate's factor (mechanism "gate")."""
    base = {}
    _evaluate(case, record, ("record", base))
    keys = _unmoved(case, record, base, ["x"]) - _unmoved(case, record, base, ["z"])
    return {k.rsplit(".", 1)[1] for k in keys}


# each specification's row scale s = max |x| (or a power of two above it), by which it divides x before squaring
# and multiplies the root back: (module, name)
SCALES = {("rms_norm", "s"), ("lp_normalize", "s"), ("poly_norm", "s"), ("z_score", "a"), ("mean_variance_norm", "s"),
          ("weight_norm", "s")}


def _scaling(i) -> bool:
    """Whether operation ``i`` divides by or multiplies with its specification's row scale (SCALES)."""
    mod, _, _, _, left, right = _SOURCES[i]
    return (mod, left) in SCALES or (mod, right) in SCALES


def _is_constant(src) -> bool:
    """Whether an operand's source is a number (the 1.0 of a reciprocal 1.0 / s)."""
    try:
        node = ast.parse(src, mode="eval").body
    except (SyntaxError, TypeError):
        return False
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _is_root(src) -> bool:
    """Whether an operand's source is a square root (np.sqrt(...), np.hypot(...)) at its top level."""
    try:
        node = ast.parse(src, mode="eval").body
    except (SyntaxError, TypeError):
        return False
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("sqrt", "hypot")


# the specifications' broadcast helpers: their value is their first argument's, reshaped to the second's rank
# (per_channel(bias, x) is a value of bias alone; x gives only the shape)
_RESHAPES = {"per_channel", "per_sample"}


def _names(src) -> set:
    """The names an expression's value depends on (a broadcast helper's shape argument and its own name not)."""
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError:
        return set()
    out, todo = set(), [tree]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _RESHAPES and n.args:
            todo.append(n.args[0])
            continue
        if isinstance(n, ast.Name):
            out.add(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _mechanism(case, record, i, changed, gate, params, drop=frozenset()):
    """The mechanism a change of operation ``i`` (its operand ``changed``'s source) is: eps where the operand
    holds eps; the running-statistics update where its line writes a running statistic; the gate's factor
    where it is a value of z alone; the backward formula in a backward function; the affine convention for a
    value of the parameters alone; else None (explained, not named: no mechanism of the list is known to be
    that change; "running" too where the line assigns a name of the call's state, num_batches_tracked). An
    operand of the keep-mask's values alone (``drop``: the mask, its probability p, the factor c = mask /
    (1 - p)) is the dropout's, forward or backward (as the gate's factor is the gate's). Where the gate
    input's gradient alone fails, the change is the gate's factor in the backward (dz's own product)."""
    mod, func, line, *_ = _SOURCES[i]
    names, text = _names(changed), _LINES.get(mod, [""] * line)[line - 1]
    if "eps" in names:
        return "eps"
    if "ddof" in names or "correction" in names:    # the count's Bessel correction (its sign, its value)
        return "bessel"
    code = text.split("#")[0]
    if "running" in code or "=" in code and _names(code.split("=")[0].strip().rstrip(",")) & set(record.state):
        return "running"                            # a line updating a running statistic (or another state)
    if names & gate or {n for _, n in record.failing} == {"z"}:      # z's gradient alone: the gate's backward
        return "gate"
    if names and names <= drop:                     # the keep-mask's factor, forward or backward
        return "dropout"
    if "backward" in func or all(p == "grads" for p, _ in record.failing):
        return "backward"
    if names and names <= params:
        return "affine"
    return None


def _other_values(seen, mod, func, src, shape):
    """(name, value) of each other value of ``mod:func`` with ``shape`` (more than one element; an argument of
    that size in another view, reshaped) that the operand ``src`` may have been read from: not ``src`` itself,
    nor a value equal to it (its read would change nothing)."""
    own = seen.get(f"{mod}:{func}.{src}")
    for key, v in seen.items():
        k_mod_func, name = key.rsplit(".", 1)
        if k_mod_func != f"{mod}:{func}" or name == src or np.size(v) <= 1:
            continue
        if np.shape(v) != shape:
            # a function argument of the operand's size in another view (x of (*, H) where the grouped (*, G, K)
            # value belongs: a kernel's flat register)
            if key not in _ARGS or np.size(v) != np.prod(shape, dtype=np.int64) or not _floating(v):
                continue
            v = np.reshape(v, shape)
        if not (own is not None and np.array_equal(own, v, equal_nan=True)):
            yield name, v


def _centred_operand(seen, own, name, v):
    """Whether an operand (``own``: its value) is the input x less a mean the function computed (one of its
    values, broadcast) and the replacing value ``v`` is x itself (``name`` "x")."""
    own = seen.get(own)
    if name != "x" or own is None or np.shape(own) != np.shape(v):
        return False
    with np.errstate(all="ignore"):
        m = np.asarray(v, dtype=np.float64) - np.asarray(own, dtype=np.float64)
        tol = 1e-12 * max(float(np.max(np.abs(v), initial=0.0)), 1e-300)
        for key, s in seen.items():
            if key.rsplit(".", 1)[1] in ("mean", "mu") and 0 < np.size(s) < np.size(m) and np.any(s != 0) \
                    and np.ndim(s) == np.ndim(m) and all(a in (1, b) for a, b in zip(np.shape(s), np.shape(m))) \
                    and np.all(np.abs(m - np.asarray(s, dtype=np.float64)) <= tol):
                return True
    return False


def _candidates(case, record, forward_only):
    """The changes tried, in order, as (target, operation id, changed operand's source, what it says): each
    binary operation changed (CHANGES), alone, and an expression written the same way at several places
    changed at all of them; eps moved to an operation on statistics; each operand that is a name read from
    another value of the same function and shape; each statistic (a value smaller than x) read at the first
    or the next index of its leading axis; each function argument read from another value; last, each
    operand read as its square root or square (TRANSFORMS). ``forward_only``: only the forward's operations
    (the outputs fail). Returns (the changes, the ids of the forward's operations)."""
    seen, every, reds, ints, fwd, fwd_reds = {}, {}, {}, {}, {}, {}
    _evaluate(case, record, ("record", seen, every, reds, ints))
    calls = _TARGET.scratch.get("calls", {})
    updated = {k[:-len(UPDATED)]: seen.pop(k) for k in [k for k in seen if k.endswith(UPDATED)]}
    _evaluate(case, record, ("record", {}, fwd, fwd_reds), cotangents={})      # the forward's operations alone
    # (the specifications' own scaling against overflow, x / s and s * sqrt(...), is no kernel's arithmetic: a
    # change of it reproduces a root's deviation on constant rows by coincidence)
    every = {i: v for i, v in every.items() if not _scaling(i)}
    ops = {i: v for i, v in every.items() if i in fwd} if forward_only else every
    every_red = reds
    if forward_only:
        reds = {i: v for i, v in reds.items() if i in fwd_reds}
    n = np.size(record.inputs["x"])
    out = []
    for i in ops:
        mod, func, line, op, left, right = _SOURCES[i]
        for change, (applies, _, what) in CHANGES.items():
            if op in applies:
                out.append((("mutate", frozenset((i,)), change), i, left if change == "drop_left" else right,
                            what.format(l=f"`{left}`", r=f"`{right}`")))
    # one expression written the same way at several places (forward and backward), changed everywhere
    same = {}
    for i in every:
        same.setdefault((_SOURCES[i][0],) + _SOURCES[i][3:], []).append(i)
    for (mod, op, left, right), ids in same.items():
        if len(ids) > 1 and any(i in ops for i in ids):
            for change, (applies, _, what) in CHANGES.items():
                if op in applies:
                    out.append((("mutate", frozenset(ids), change), ids[0], left if change == "drop_left" else right,
                                what.format(l=f"`{left}`", r=f"`{right}`") + f" (at each of its {len(ids)} places)"))
    dist = _distributed(ops)
    out += [c for c in dist if _SOURCES[c[1]][3] != "Div"]
    late_div = [c for c in dist if _SOURCES[c[1]][3] == "Div"]     # (after the operands read from another value)
    # eps moved: left out where it is added and added to one operand of another operation on statistics (smaller
    # than x: the divisor n + eps, the sum of squares + eps)
    eps = next((float(v) for k, v in seen.items() if k.endswith(".eps") and np.size(v) == 1), 0.0)
    also = []                       # eps added a second time (to a statistic: the running variance's var + eps)
    for i0 in [i for i in ops if _SOURCES[i][3] == "Add" and "eps" in (_SOURCES[i][4], _SOURCES[i][5])][:1]:
        for j in (j for j in ops if j != i0 and ops[j] is not None):
            for side, src in enumerate(_SOURCES[j][4:]):
                if 0 < np.prod(ops[j][side], dtype=np.int64) < n and src != "eps":
                    # (added to a value of the parameters alone, w + eps: the weight's convention, rule 13's affine,
                    # as a weight offset 1 + w is; eps's own placement is on a statistic)
                    tag = ("affine",) if _names(src) and _names(src) <= set(PARAMETERS) else ()
                    also.append((("multi", {j: _plus_eps(side, eps)}) + tag, i0, "eps",
                                 f"eps added to `{src}` too in `{_SOURCES[j][4]} {_SYM[_SOURCES[j][3]]} "
                                 f"{_SOURCES[j][5]}` ({_SOURCES[j][1]}, line {_SOURCES[j][2]}; beside "
                                 f"`{_SOURCES[i0][4]} + {_SOURCES[i0][5]}`)"))
        keep = 0 if _SOURCES[i0][5] == "eps" else 1
        drop = (lambda a, b, op, k=keep: (a, b)[k])
        # eps added to a statistic its function computes from the sum, after it (rstd = 1 / sqrt(var) + eps: the
        # parenthesis of rsqrt(var + eps) closed before eps)
        mod0, func0 = _SOURCES[i0][:2]
        for other, v in seen.items():
            if (other.startswith(f"{mod0}:{func0}.") and other not in _ARGS and 1 < np.size(v) < n and _floating(v)
                    and not other.endswith(".eps")):
                out.append((("both", {other: lambda v, e=eps: v + e}, {i0: drop}), i0, "eps",
                            f"eps moved from `{_SOURCES[i0][4]} + {_SOURCES[i0][5]}` to `{other.rsplit('.', 1)[1]}` "
                            f"+ eps, added after it is computed ({func0}, line {_SOURCES[i0][2]})"))
        for j in (j for j in ops if j != i0 and ops[j] is not None and max(np.prod(sh, dtype=np.int64)
                                                                         for sh in ops[j]) < n):
            for side, src in enumerate(_SOURCES[j][4:]):
                out.append((("multi", {i0: drop, j: _plus_eps(side, eps)}), i0, "eps",
                            f"eps moved from `{_SOURCES[i0][4]} + {_SOURCES[i0][5]}` to `{src}` + eps in "
                            f"`{_SOURCES[j][4]} {_SYM[_SOURCES[j][3]]} {_SOURCES[j][5]}` ({_SOURCES[j][1]}, line "
                            f"{_SOURCES[j][2]})"))
    # an additive parameter (a bias) added at another sum of the forward: left out where it is added, added to the
    # other operation's result (the residual sum's bias slot of an add-bias + residual + norm kernel): affine
    for i0 in (i for i in ops if i in fwd and _SOURCES[i][3] == "Add" and _SOURCES[i][5] in _OFFSETS):
        mod0, func0, _, _, left0, src0 = _SOURCES[i0]
        bv = seen.get(f"{mod0}:{func0}.{src0}")
        if bv is None or np.size(bv) < 2:
            continue
        for j in (j for j in ops if j != i0 and j in fwd and _SOURCES[j][3] == "Add" and ops[j] is not None
                  and max(np.prod(sh, dtype=np.int64) for sh in ops[j]) == n
                  and _SOURCES[j][5] not in _OFFSETS and "eps" not in _SOURCES[j][4:]):
            out.append((("multi", {i0: lambda a, b, op: a,
                                   j: lambda a, b, op, bv=np.asarray(bv, dtype=np.float64): a + b + bv}, "affine"),
                        i0, src0, f"`{src0}` added to `{_SOURCES[j][4]} + {_SOURCES[j][5]}` ({_SOURCES[j][1]}, line "
                        f"{_SOURCES[j][2]}) where `{left0} + {src0}` belongs ({func0}, line {_SOURCES[i0][2]})"))
    # eps passed to a function where no `+ eps` is written (hypot(rms, sqrt(eps))): that argument read as 0 and eps
    # added to one operand smaller than x of an operation (std + eps where it divides)
    added = {_SOURCES[i][:2] for i in every if _SOURCES[i][3] == "Add" and "eps" in _SOURCES[i][4:]}
    for key in (k for k in seen if k in _ARGS and k.endswith(".eps") and np.size(seen[k]) == 1):
        e = float(seen[key])
        if e <= 0 or tuple(key[:-len(".eps")].split(":", 1)) in added:
            continue
        mod = key.split(":", 1)[0]
        out.append((("remapk", {key: lambda v: 0.0 * v}), "eps", None, f"eps left out (`{key.split(':', 1)[1]}` "
                    "read as 0)"))
        for other, v in seen.items():           # eps added to a named statistic (std = sqrt(var) + eps)
            if other != key and other.startswith(mod + ":") and other not in _ARGS and 0 < np.size(v) < n:
                out.append((("remapk", {key: lambda v: 0.0 * v, other: lambda v, e=e: v + e}), "eps", None,
                            f"eps moved from `{key.split(':', 1)[1]}` (read as 0 there) to `{other.split(':', 1)[1]}`"
                            f" + eps"))
        for j in (j for j in ops if ops[j] is not None):
            for side, src in enumerate(_SOURCES[j][4:]):
                if not 0 < np.prod(ops[j][side], dtype=np.int64) < n:
                    continue
                out.append((("both", {key: lambda v: 0.0 * v}, {j: _plus_eps(side, e)}), j, "eps",
                            f"eps moved from `{key.split(':', 1)[1]}` (read as 0 there) to `{src}` + eps in "
                            f"`{_SOURCES[j][4]} {_SYM[_SOURCES[j][3]]} {_SOURCES[j][5]}` ({_SOURCES[j][1]}, line "
                            f"{_SOURCES[j][2]})"))
    # (the lower accumulation dtype: the 16-bit case dtype, or float32 for a float64 case)
    low = _DT.get(case.dtype) if case.dtype in ("float16", "bfloat16") else np.float32 if case.dtype == "float64" \
        else None
    more, late = _count_changes(seen, reds, ops, ints, np.shape(record.inputs["x"]), low, set(fwd_reds), every_red,
                                case.dtype, case.op)
    late += late_div
    if "_math:centered.m0" in seen:     # x never centred (the mean taken as 0): an RMS norm's statistics
        # (before the counts: every mean's count halved, n / 2, takes centered's two-pass mean to 0 exactly:
        # m0 = 2 mean, its correction mean(x - m0) read as -2 mean: the same values, a coincidence of the form)
        out.append((("remapk", {"_math:centered.m0": lambda v: 0.0 * v, "_math:centered.c": lambda v: 0.0 * v}),
                    "uncentred", None, "x never centred (refnorm/specs/_math.py centered's mean taken as 0: an RMS "
                    "norm's statistics)"))
    out += _other_statistic(seen, np.asarray(record.inputs["x"], dtype=np.float64), eps) + more
    late += _mean_of_other(seen) + _chunk_mean_steps(seen)
    out += _activation_swapped(seen, case.op) + _state_as_rstd(seen, record) + _chunk_norms(seen, case)
    late += _tail_lanes(seen, n)
    if forward_only and any(p == "grads" for p, _ in record.failing):
        late += _stored_statistics(seen, case.op)
    k_index = len(out)              # (where a backward's operands read from forward values go: before the index reads)
    if not forward_only:
        # (the state after the call only where a running variance can be read: one more evaluation)
        state = ({"new": _evaluate(case, record, None).state, "old": record.state}
                 if "running_var" in record.state else None)
        out += _statistics_read(seen, state, eps, bool(record.training)) + _uncentred(seen, every)
        out += _statistics_read_at(seen, every) + _saved_read_at(seen)
        out += _inputs_shifted(case, record, seen)
    transforms, fwd_read = [], []
    for i, shapes in ops.items():
        mod, func, line, op, left, right = _SOURCES[i]
        if op == "Div" and case.dtype in ("float16", "bfloat16") and shapes is not None \
                and np.size(np.zeros(shapes[1])) < np.size(np.zeros(shapes[0])):
            # a quotient by a statistic as a product with its reciprocal held in the 16-bit dtype (rounded)
            rcp = (lambda a, b, op, t=_DT[case.dtype]: a * np.asarray(1.0 / np.asarray(b, dtype=np.float64))
                   .astype(t).astype(np.float64))
            transforms.append((("multi", {i: rcp}), "recip", None, f"`{left} / {right}` computed as `{left}` times "
                               f"the reciprocal 1 / `{right}` held in {case.dtype} (rounded to nearest) ({func}, "
                               f"refnorm/specs/{mod}.py line {line})"))
        for side, src in enumerate((left, right)):
            if shapes is None or not np.size(np.zeros(shapes[side])) > 1:
                continue
            transforms += [(("replace", frozenset((i,)), side, fn), i, src, f"`{src}` read as {how}") for fn, how in TRANSFORMS]
            if case.dtype in ("float16", "bfloat16") and np.size(np.zeros(shapes[side])) == n:
                # an activation-sized operand read from a buffer of the 16-bit input dtype (saved x_hat): precision
                low = lambda v, t=_DT[case.dtype]: np.asarray(v).astype(t).astype(np.float64)     # noqa: E731
                transforms.append((("replace", frozenset((i,)), side, low, "precision"), i, src,
                                   f"`{src}` read from a buffer of {case.dtype} (rounded to nearest)"))
            if not src.isidentifier():
                if "backward" not in func and np.size(np.zeros(shapes[side])) < n and record.state \
                        and np.size(np.zeros(shapes[side])) in {np.size(v) for v in record.state.values()} \
                        and all(p == "state" for p, _ in record.failing):
                    # (a running update's whole statistic term, var * n / (n - 1), read from another statistic: a
                    # term of a running buffer's size, only the state failing)
                    out += [(("replace", frozenset((i,)), side, lambda _, v=v: v), i, src, f"`{src}` read from "
                             f"`{name}`") for name, v in _other_values(seen, mod, func, src, shapes[side])]
                continue
            own = f"{mod}:{func}.{src}"
            # (an operand read from a buffer's updated value: a register reused for the new value before this
            # read, the running_mean just written where the old running_var belongs)
            out += [(("replace", frozenset((i,)), side, lambda _, v=v: v), i, src, f"`{src}` read from `"
                     f"{key.rsplit('.', 1)[1]}` as updated") for key, v in updated.items()
                    if key.startswith(f"{mod}:{func}.") and np.shape(v) == tuple(shapes[side]) and np.size(v) > 1
                    and "backward" not in func]
            for name, v in _other_values(seen, mod, func, src, shapes[side]):
                # (x read where x - mean belongs, the statistics still about the mean: the normalized value
                # uncentred, another normalizer's equation, rule 16)
                tag = ("semantics",) if "backward" not in func and _centred_operand(seen, own, name, v) else ()
                (fwd_read if "backward" in func else out).append(
                    (("replace", frozenset((i,)), side, lambda _, v=v: v) + tag, i, src, f"`{src}` read from `{name}`"
                     + (" (x not centred where x - mean belongs)" if tag else "")))
            if "backward" in func:          # a backward's operand read from a value of the op's own forward (p for x_hat)
                for key, v in seen.items():
                    k_mod, k_name = key.split(":", 1)[0], key.rsplit(".", 1)[1]
                    # (of the operand's size: the backward's view of it, (N, G, m) for a group norm's x.shape)
                    if (k_mod == case.op and key not in _ARGS and "backward" not in key and k_name != src
                            and np.size(v) == np.prod(shapes[side], dtype=np.int64) and np.size(v) > 1 and not
                            (own in seen and np.array_equal(np.reshape(seen[own], -1), np.reshape(v, -1),
                                                            equal_nan=True))):
                        fwd_read.append((("replace", frozenset((i,)), side,
                                          lambda _, v=v, sh=shapes[side]: np.reshape(v, sh)), i, src,
                                           f"`{src}` read from the forward's `{key.split(':', 1)[1]}`"))
    for i, (shape, axes, keep) in every_red.items():
        # a backward reduction's operand read from another value of its function (the mean term of dx reduced
        # from the raw dy where g = dy w belongs)
        mod, func, line, kind, src, ax = _SOURCES[i]
        if "backward" not in func or not src.isidentifier() or kind == "max":
            continue
        others = list(_other_values(seen, mod, func, src, shape))
        # (and a value of a calling backward function of the same size: the unweighted dy of add_norm's backward
        # where layer_norm's g = dy w belongs)
        own = seen.get(f"{mod}:{func}.{src}")
        have = [v for _, v in others] + ([own] if own is not None else [])
        for key, v in seen.items():
            k_func = key.split(":", 1)[1].rsplit(".", 1)[0]
            if ("backward" in k_func and key.rsplit(".", 1)[0] != f"{mod}:{func}" and np.size(v) > 1
                    and np.size(v) == np.prod(shape, dtype=np.int64) and _floating(v)
                    and not any(np.array_equal(np.reshape(v, -1), np.reshape(h, -1), equal_nan=True) for h in have)):
                have.append(v)
                others.append((key.split(":", 1)[1], np.reshape(v, shape)))
        for name, v in others:
            transforms.append((("reduce", i, lambda a, red, axes, keepdims, v=v: red(np.asarray(v, dtype=np.float64),
                                                                             axis=axes, keepdims=keepdims)),
                               "redread" if "." not in name else "redcall", src,
                               f"`{src}` read from `{name}` in `{src}.{kind}(axis={ax})`"))
    out += _weight_after(seen, ops, n) + _moments_read(seen) + _centred_about(seen)
    if "_math:moments.mean" in seen:
        out += _welford_updates()
    out += _welford_sums(seen) + _estimated(seen, record)
    out += _chunk_merges(seen)
    if case.dtype in ("float16", "bfloat16") and "_math:moments.mean" in seen:
        out += _moments_low(_DT[case.dtype])
    for key, v in seen.items():
        if 1 < np.size(v) < n and np.ndim(v) and np.shape(v)[0] > 1:
            what = key.split(":", 1)[1]
            out.append((("remap", key, _first), None, key.rsplit(".", 1)[1],
                        f"`{what}` read at the first index of its leading axis for every index"))
            out.append((("remap", key, _next), None, key.rsplit(".", 1)[1],
                        f"`{what}` read at the next index of its leading axis (off by one, wrapping)"))
            for k in (2, 4):        # a program of k slices loading the first slice's value once for all of them
                if np.size(v) % k == 0 and np.size(v) > k:
                    out.append((("remap", key, lambda a, k=k: np.reshape(np.repeat(np.reshape(a, (-1, k))[:, :1], k,
                                                                                   axis=1), np.shape(a))),
                                None, key.rsplit(".", 1)[1], f"`{what}` read at the first index of each block of {k} "
                                f"(a program of {k} slices loading the first one's for all)"))
    for key, v in seen.items():     # a per-row statistic from the sum over a block of k rows (a tile's tl.sum
        func, name = key.split(":", 1)[1].rsplit(".", 1)    # without its axis): its first assignment, forward
        if name in _ROW_STATS and "backward" not in func and np.ndim(v) and 2 < np.size(v) < n:
            out += [(("remap", key, _row_blocks(k, _ROW_STATS[name])), "rowblock", None, f"`{func}.{name}` of each "
                     f"row from the sum over its block of {k} rows (of {np.size(v)}): a program of {k} rows reducing "
                     "its whole tile, every row the block's total") for k in (2, 4, 8) if k < np.size(v)]
            per = np.shape(v)[-1] if np.ndim(v) > 1 and np.shape(v)[-1] > 1 else None
            late += [(("remap", key, _row_cumulated(P, _ROW_STATS[name])), "rowblock", None, f"`{func}.{name}` of "
                      f"each slice accumulated onto the earlier slices of its program ({P} programs taking slices p, "
                      f"p + {P}, ...: the accumulator set to 0 before the program's loop, not per slice)")
                     for P in (1, 2, 4, 8) if P < np.size(v) - 1]
            if per:
                late.append((("remap", key, _row_cumulated(1, _ROW_STATS[name], per)), "rowblock", None,
                             f"`{func}.{name}` of each of a row's {per} slices accumulated onto the row's earlier "
                             "slices' (the accumulator set to 0 per row, not per slice)"))
    for i, (shape, axes, keep) in fwd_reds.items():    # a forward reduction over a tile of k slices (no axis)
        R = int(np.prod([s2 for a2, s2 in enumerate(shape) if a2 not in axes]))
        if axes and 2 < R < n and (_SOURCES[i][3] == "max" or _SOURCES[i][3] in ("sum", "mean") and
                                    _SOURCES[i][1] not in ("moments", "centered")):
            kind = "quant_scale" if _SOURCES[i][3] == "max" and case.op in QUANT_OPS else "block"
            late += [(("reduce", frozenset((i,)), _tile_rows(k)), "tilerows", kind,
                      f"`{_SOURCES[i][4]}.{_SOURCES[i][3]}` of each slice over its block of {k} slices (of {R}): a "
                      f"program of {k} slices reducing its whole tile without an axis, every slice the block's "
                      f"{'max' if _SOURCES[i][3] == 'max' else 'total'}") for k in (2, 4) if k < R]
            kept = [s2 for a2, s2 in enumerate(shape) if a2 not in axes]
            rows = R // kept[-1] if kept else 0
            if len(kept) > 1 and kept[-1] > 1 and rows > 2:         # rows of several slices each (groups)
                late += [(("reduce", frozenset((i,)), _tile_rows(k, kept[-1])), "tilerows", kind,
                          f"`{_SOURCES[i][4]}.{_SOURCES[i][3]}` of each slice over the same slice of its block of {k} "
                          f"rows (of {rows}, {kept[-1]} slices each): a program of {k} rows reducing its whole tile "
                          "without the row axis") for k in (2, 4) if k < rows]
    # the statistics pass's accumulators (every forward sum or mean over a slice) set to 0 once per program or
    # per row instead of per slice: each slice's sums onto its program's earlier slices'
    accs = {}
    for i, (shape, axes, keep) in fwd_reds.items():
        R = int(np.prod([s2 for a2, s2 in enumerate(shape) if a2 not in axes]))
        if axes and 2 < R < n and _SOURCES[i][3] in ("sum", "mean") and "backward" not in _SOURCES[i][1]:
            accs.setdefault((R, tuple(s2 for a2, s2 in enumerate(shape) if a2 not in axes)), []).append(i)
    for (R, kept), ids in accs.items():
        rows = R // kept[-1] if len(kept) > 1 and kept[-1] > 1 else 0
        late += [(("reduce", frozenset(ids), _cumulated(P)), "tilerows", "block",
                  f"every statistic's sum of each slice accumulated onto the earlier slices of its program ({P} "
                  f"programs taking slices p, p + {P}, ...: the accumulator set to 0 before the program's loop, not "
                  "per slice)" if P > 1 else "every statistic's sum of each slice accumulated onto every earlier "
                  "slice's (the accumulator set to 0 once, not per slice)") for P in (1, 2, 4, 8) if P < R - 1]
        if rows:
            late.append((("reduce", frozenset(ids), _cumulated(1, kept[-1])), "tilerows", "block",
                         f"every statistic's sum of each of a row's {kept[-1]} slices accumulated onto the row's "
                         "earlier slices' (the accumulator set to 0 per row, not per slice)"))
    # a backward reduction run once per iteration of a loop (poly_norm's projection per power), its accumulator
    # set to 0 before the loop: each iteration's sum includes the earlier iterations'
    late += [(("reduce", frozenset((i,)), _carried), "tilerows", "backward",
              f"`({_SOURCES[i][4]}).{_SOURCES[i][3]}` (run once per iteration of a loop of `{_SOURCES[i][1]}`) "
              "accumulated across the iterations: its accumulator set to 0 before the loop, not per iteration")
             for i, k in calls.items() if k > 1 and i in reds and i not in fwd_reds and "backward" in _SOURCES[i][1]]
    # the backward's row sums (mean(g), mean(g x_hat), ...) likewise, over each slice's trailing axes
    baccs = {}
    for i, (shape, axes, keep) in reds.items():
        R = int(np.prod([s2 for a2, s2 in enumerate(shape) if a2 not in axes]))
        if i not in fwd_reds and axes and tuple(axes) == tuple(range(len(shape) - len(axes), len(shape))) \
                and 2 < R < n and _SOURCES[i][3] in ("sum", "mean"):
            baccs.setdefault(R, []).append(i)
    for R, ids in baccs.items():
        late += [(("reduce", frozenset(ids), _cumulated(P)), "tilerows", "block",
                  f"the backward's row sums of each slice accumulated onto the earlier slices of its program ({P} "
                  f"programs taking slices p, p + {P}, ...: the accumulators set to 0 before the program's loop, not "
                  "per slice)" if P > 1 else "the backward's row sums of each slice accumulated onto every earlier "
                  "slice's (the accumulators set to 0 once, not per slice)") for P in (1, 2, 4, 8) if P < R - 1]
    for i, shapes in every.items():     # a statistic operand read at another slice's index (in one operation)
        if shapes is None:
            continue
        for side, src in enumerate(_SOURCES[i][4:]):
            sh = shapes[side]
            if not (2 < np.prod(sh, dtype=np.int64) < n and len(sh) and sh[0] > 1) or np.prod(sh) == 0:
                continue
            for k in (2, 4):
                if sh[0] > k:               # (the last block partial)
                    late.append((("replace", frozenset((i,)), side,
                                  lambda a, k=k: np.repeat(np.asarray(a)[::k], k, axis=0)[:np.shape(a)[0]],
                                  "layout"), i, src,
                                 f"`{src}` read at the first index of each block of {k} along its leading axis in "
                                 f"`{_SOURCES[i][4]} {_SYM[_SOURCES[i][3]]} {_SOURCES[i][5]}` ({_SOURCES[i][1]}, "
                                 f"line {_SOURCES[i][2]}; a program of {k} slices using the first one's)"))
    for key, v in seen.items():     # every index of an axis holding its last index's value (the last store wins)
        if 1 < np.size(v) < n:
            late += [(("remap", key, lambda a, ax=ax: _first(a, ax, last=True)), None, key.rsplit(".", 1)[1],
                     f"`{key.split(':', 1)[1]}` at every index of its axis {ax} the last index's (each store to one "
                     "slot, the last one kept)") for ax in range(np.ndim(v)) if np.shape(v)[ax] > 1]
    # a function's argument read from another value of the same shape (the activation of x_hat where the
    # affine output belongs): the backward's where only gradients fail, else no mechanism of the list
    for key in (k for k in seen if k in _ARGS and np.size(seen[k]) > 1):
        mod = key.split(":", 1)[0]
        for other, v in seen.items():           # another argument of its function passed in its slot: layout
            if (other in _ARGS and other != key and other.rsplit(".", 1)[0] == key.rsplit(".", 1)[0]
                    and np.shape(v) == np.shape(seen[key]) and not np.array_equal(v, seen[key], equal_nan=True)):
                out.append((("remap", key, lambda _, v=v: v), "argbuf", None,
                            f"the argument `{key.split(':', 1)[1]}` read from `{other.rsplit('.', 1)[1]}`'s buffer "
                            "(two pointer arguments in each other's slot)"))
        for other, v in seen.items():
            if (other not in _ARGS and other.split(":", 1)[0] == mod and np.shape(v) == np.shape(seen[key])
                    and not np.array_equal(v, seen[key], equal_nan=True)):
                out.append((("remap", key, lambda _, v=v: v), "arg", f"{key.rsplit('.', 1)[1]} {other.rsplit('.', 1)[1]}",
                            f"the argument `{key.split(':', 1)[1]}` read from `{other.split(':', 1)[1]}`"))
        if "backward" in key and case.dtype in ("float16", "bfloat16"):     # (a returned output as stored: rounded)
            out += [(("remap", key, lambda _, v=np.asarray(v, dtype=np.float64): v), "arg",
                     f"{key.rsplit('.', 1)[1]} {o}", f"the argument `{key.split(':', 1)[1]}` read from the returned "
                     f"`{o}` (as stored, in {case.dtype})") for o, v in record.got.get("outputs", {}).items()
                    if np.shape(v) == np.shape(seen[key]) and np.asarray(v).dtype.kind == "f"]
    # (a computed value read as another function of itself before an input so read: where both reproduce the
    # step, as where the input's scale s cancels, the computed one is what a kernel writes)
    transforms.sort(key=lambda c: c[2] in record.inputs)
    # (a backward's operand read from another value of its function or of the forward before the statistics' index
    # reads: fewer, past the cap after)
    return out[:k_index] + fwd_read + out[k_index:] + also + transforms + late, fwd


def _distributed(ops):
    """A factor of a parenthesized sum applied to one of its terms alone: `a * (b + c)` computed as a * b + c or
    b + a * c (a derivative's factor distributed over a sum and dropped from one term: s + p (1 - s) where
    s (1 + p (1 - s)) belongs); as _candidates' tuples ("multi": the sum's operation keeps its operands for the
    product's)."""
    out, sums = [], {}             # (module, function, line, "(b + c)") -> the sums' operations written so
    for j in ops:
        mod, func, line, op, left, right = _SOURCES[j]
        if op in ("Add", "Sub"):
            sums.setdefault((mod, func, line, f"({left} {_SYM[op]} {right})"), []).append(j)
    for i in ops:
        mod, func, line, op, *sides = _SOURCES[i]
        if op == "Div" and ops[i] is not None and len(sums.get((mod, func, line, sides[0]), ())) == 1:
            # `(b + c) / a` computed as b / a + c or b + c / a: the parenthesis left out, one term divided
            j = sums[(mod, func, line, sides[0])][0]
            for term in (0, 1):
                held = []

                def keep(a, b, op_, held=held):
                    held[:] = [a, b]
                    return _OPS[op_](a, b)

                def div(a, b, op_, held=held, term=term, add=_OPS[_SOURCES[j][3]]):
                    t0, t1 = held
                    return add(t0 / b, t1) if term == 0 else add(t0, t1 / b)
                out.append((("multi", {j: keep, i: div}), i, sides[1], f"`{_SOURCES[j][4 + term]}` alone divided by "
                            f"`{sides[1]}` in `{sides[0]} / {sides[1]}` ({func}, line {line}: the parenthesis left "
                            "out, the other term not divided)"))
        if op != "Mult" or ops[i] is None:
            continue
        for side, src in enumerate(sides):
            inner = sums.get((mod, func, line, src), ())
            if len(inner) != 1:
                continue
            j, factor = inner[0], sides[1 - side]
            for term in (0, 1):
                held = []

                def keep(a, b, op_, held=held):
                    held[:] = [a, b]
                    return _OPS[op_](a, b)

                def mult(a, b, op_, held=held, side=side, term=term, add=_OPS[_SOURCES[j][3]]):
                    f = b if side == 0 else a
                    t0, t1 = held
                    return add(f * t0, t1) if term == 0 else add(t0, f * t1)
                out.append((("multi", {j: keep, i: mult}), i, factor, f"`{factor}` applied to "
                            f"`{_SOURCES[j][4 + term]}` alone in `{_SOURCES[i][4]} * {_SOURCES[i][5]}` ({func}, "
                            f"line {line}: the factor distributed over the sum, missing from its other term)"))
    return out


def _other_statistic(seen, x, eps):
    """A slice's root statistic (an assignment taking a root at its top level: _ROOTS) computed as another
    normalizer's: its root left out (the register holding the variance or mean of squares where the std or RMS
    belongs, sum |x|^p where the p-norm belongs); an RMS or a standard deviation of x's slices as the mean
    absolute value (mean |x|, or mean |x - mean|: the L1 variant), with eps added to it outside the root where a
    value of its function is 1 / hypot(it, sqrt(eps)); every later value (the outputs, the backward's saved ones)
    from the changed one. As _candidates' tuples ("otherstat": rule 16's semantics)."""
    out, n = [], np.size(x)
    for key, k in _ROOTS.items():
        v = seen.get(key)
        if v is None or not 0 < np.size(v) < n:
            continue
        mod_func, name = key.rsplit(".", 1)
        kv = 2.0 if k == 2 else seen.get(f"{mod_func}.{k}")
        if kv is None or np.size(kv) != 1 or not np.isfinite(kv) or float(kv) in (0.0, 1.0):
            continue
        what = f"`{mod_func.split(':', 1)[1]}`'s {'result' if name == 'return' else '`' + name + '`'}"
        out.append((("remapk", {key: lambda v, kv=float(kv): np.abs(v) ** kv}), "otherstat", None,
                    f"the root left out of {what} (it holds the {'square' if kv == 2 else f'power {kv:g}'} of "
                    "the value, the variance or sum where its root belongs)"))
        if k != 2 or np.ndim(v) != x.ndim:
            continue
        axes = tuple(a for a in range(x.ndim) if np.shape(v)[a] == 1 and x.shape[a] > 1)
        if not axes or any(np.shape(v)[a] not in (1, x.shape[a]) for a in range(x.ndim)):
            continue
        with np.errstate(all="ignore"):
            mean = x.mean(axis=axes, keepdims=True)
            rms, std = np.sqrt((x * x).mean(axis=axes, keepdims=True)), np.sqrt(((x - mean) ** 2).mean(
                axis=axes, keepdims=True))
            logs = [np.abs(np.log(np.asarray(v, dtype=np.float64) / r)) for r in (rms, std)]
        far = [float(np.max(a[np.isfinite(a)])) if np.any(np.isfinite(a)) else np.inf for a in logs]
        if not min(far) < 0.1:
            continue                # (no RMS or standard deviation of x's slices)
        centred = far[1] < far[0]
        l1 = np.abs(x - mean if centred else x).mean(axis=axes, keepdims=True)
        desc = f"{what} as the mean absolute {'deviation mean |x - mean|' if centred else 'value mean |x|'} (the L1 " \
               "variant)"
        out.append((("remapk", {key: lambda v, l1=l1: np.reshape(l1, np.shape(v))}), "otherstat", None, desc))
        for other, r in seen.items():          # eps outside the root: 1 / (l1 + eps) where 1 / hypot(., sqrt(eps))
            if other.rsplit(".", 1)[0] == mod_func and other != key and np.shape(r) == np.shape(v) and eps > 0 \
                    and np.allclose(r, 1.0 / np.hypot(v, np.sqrt(eps)), rtol=1e-12, atol=0.0):
                out.append((("remapk", {key: lambda v, l1=l1: np.reshape(l1, np.shape(v)),
                                        other: lambda r, l1=l1: np.reshape(1.0 / (l1 + eps), np.shape(r))}),
                            "otherstat", None, desc + f", `{other.rsplit('.', 1)[1]}` = 1 / (it + eps)"))
    return out


def _mean_of_other(seen):
    """The mean of refnorm/specs/_math.centered taken over another value of x's size (its first assignment: add_norm's
    branch x c before the residual is added to it; another input), the deviations and the variance about it from
    x: the mean pass reading another buffer (rule 12's layout); as _candidates' tuples ("read")."""
    m0, xc = seen.get("_math:centered.m0"), seen.get("_math:centered.x")
    if m0 is None or xc is None or np.ndim(m0) != np.ndim(xc):
        return []
    axes = tuple(a for a in range(np.ndim(xc)) if np.shape(m0)[a] == 1 and np.shape(xc)[a] > 1)
    if not axes:
        return []
    out, have = [], [np.asarray(xc)]
    others = [(key, v) for key, v in seen.items() if np.shape(v) == np.shape(xc) and _floating(v)
              and "backward" not in key and not key.startswith("_math:")]
    # (and x less one of them: a fused sum's statistics pass reading all its terms but one)
    others += [(f"{key.split(':', 1)[0]}:x less {key.split(':', 1)[1]}", np.asarray(xc, dtype=np.float64) - v)
               for key, v in others[:6]]
    for key, v in others:
        if any(np.array_equal(v, h, equal_nan=True) for h in have) or not np.any(np.asarray(v)):
            continue
        have.append(np.asarray(v))
        m = np.asarray(v, dtype=np.float64).mean(axis=axes, keepdims=True)
        out.append((("remapk", {"_math:centered.m0": lambda _, m=m: m, "_math:centered.c": lambda c: 0.0 * c}), "read",
                    None, f"the mean taken over `{key.split(':', 1)[1]}` (its first value) where x's belongs, the "
                    "variance about it from x (the mean pass reading another buffer)"))
        if "_math:moments.mean" in seen:        # both statistics from it, x centred and scaled by them
            var = ((np.asarray(v, dtype=np.float64) - m) ** 2).mean(axis=axes, keepdims=True)
            out.append((("remapk", {"_math:moments.return": lambda t, m=m, var=var: (m, var, t[2] + t[0] - m)}),
                        "read", None, f"the mean and the variance taken over `{key.split(':', 1)[1]}` (its first "
                        "value) where x's belong, x centred and scaled by them (the statistics pass reading another "
                        "buffer)"))
    return out


def _state_as_rstd(seen, record):
    """An eval call's rstd taken as the running variance itself (the buffer handed over as the inverse std: no
    eps, no reciprocal square root), every later value from it; as _candidates' tuples ("running": rule 2, an
    eval call's forward reading the running statistics back wrong)."""
    rv = record.state.get("running_var")
    if record.training or rv is None or np.size(rv) < 2:
        return []
    rv = np.unique(np.asarray(rv, dtype=np.float64))
    out = []
    for key, v in seen.items():
        mod_func, name = key.rsplit(".", 1)
        var = seen.get(f"{mod_func}.var")
        if name == "rstd" and key not in _ARGS and var is not None and np.shape(var) == np.shape(v) \
                and np.array_equal(np.unique(np.asarray(var, dtype=np.float64)), rv):
            v64 = np.asarray(var, dtype=np.float64)
            out.append((("remapk", {key: lambda r, v64=v64: np.reshape(v64, np.shape(r))}),
                        "running", None, f"`{key.split(':', 1)[1]}` taken as the running variance itself (the "
                        "running_var buffer read as the inverse std: no eps, no reciprocal square root)"))
    return out


def _chunk_norms(seen, case):
    """lp_normalize's norm reduced by programs of k values each (k = 16 ... 1024, shorter than the slice), each
    chunk's own p-norm computed and the chunks' norms added (an atomic add of the partial norms) where their
    p-th powers are summed before the root: partials merged as the wrong quantity, rule 14's merge; as
    _candidates' tuples ("chunks")."""
    key = "lp_normalize:lp_normalize.norm"
    x, p = (seen.get("lp_normalize:lp_normalize." + k) for k in ("x", "p"))
    A = case.config.get("dim")
    if key not in seen or x is None or p is None or A is None or np.ndim(x) == 0:
        return []
    axes = tuple(int(a) % np.ndim(x) for a in np.atleast_1d(A))
    if len(axes) != 1:
        return []
    a = np.moveaxis(np.abs(np.asarray(x, dtype=np.float64)), axes[0], -1)
    n, p = a.shape[-1], float(p)
    if not np.isfinite(p) or p <= 0:
        return []
    out = []
    for k in (16, 32, 64, 128, 256, 512, 1024):
        if k < n:
            with np.errstate(all="ignore"):
                parts = sum((a[..., j:j + k] ** p).sum(axis=-1, keepdims=True) ** (1.0 / p) for j in range(0, n, k))
            v2 = np.moveaxis(parts, -1, axes[0])
            out.append((("remapk", {key: lambda v, v2=v2: np.reshape(v2, np.shape(v))}), "chunks", None,
                        f"the norm reduced in chunks of {k} values, each chunk's own p-norm and the chunks' norms "
                        "added (the partial norms merged where their p-th powers sum before the root)"))
            # each chunk's sum of (|x| / s_k)^p about its own max s_k, merged with the rescale (s / s_k)^p where
            # (s_k / s)^p belongs, or with none (s the slice's max)
            with np.errstate(all="ignore"):
                s_all = np.max(a, axis=-1, keepdims=True)
                sk = [np.max(a[..., j:j + k], axis=-1, keepdims=True) for j in range(0, n, k)]
                Sk = [((a[..., j:j + k] / np.where(m > 0, m, 1.0)) ** p).sum(axis=-1, keepdims=True)
                      for j, m in zip(range(0, n, k), sk)]
                for how, fac in (("(s / s_k)^p where (s_k / s)^p belongs", lambda m: (s_all / m) ** p),
                                 ("no rescale where (s_k / s)^p belongs", lambda m: 1.0)):
                    tot = sum(S * np.where(m > 0, fac(m), 0.0) for S, m in zip(Sk, sk))
                    v2 = np.moveaxis(s_all * tot ** (1.0 / p), -1, axes[0])
                    out.append((("remapk", {key: lambda v, v2=v2: np.reshape(v2, np.shape(v))}), "chunks", None,
                                f"the norm reduced in chunks of {k} values, each chunk's sum of (|x| / s_k)^p about "
                                f"its own max s_k merged with the rescale {how} (s the slice's max)"))
    return out


def _tail_lanes(seen, n):
    """A function of x returning a statistic of each slice (its one return value keepdims over the last axis:
    lp_norm's norm) called with each slice read in vectors of t values whose last vector is unmasked: its lanes
    past the slice load the next slice's leading values (past the buffer's end, zeros), the statistic over them
    too (the normalization itself over the slice's own values), or whose last vector is a whole one ending at the
    slice's end, overlapping the one before; as _candidates' tuples ("tail": rule 9's block)."""
    out = []
    for key in (k for k in seen if k in _ARGS):
        v, ret = seen[key], seen.get(key.rsplit(".", 1)[0] + ".return")
        if (np.size(v) != n or np.ndim(v) < 2 or not isinstance(ret, np.ndarray) or np.ndim(ret) != np.ndim(v)
                or np.shape(ret)[-1] != 1 or np.shape(ret)[:-1] != np.shape(v)[:-1]):
            continue
        L = np.shape(v)[-1]
        for P in sorted({-(-L // t) * t for t in (4, 8, 16, 32)} - {L}):
            flat = np.concatenate([np.ravel(v), np.zeros(P - L)])
            starts = np.arange(n // L) * L
            ext = flat[starts[:, None] + np.arange(P)[None, :]].reshape(np.shape(v)[:-1] + (P,))
            out.append((("remapk", {key: lambda a, ext=ext: ext}), "tail", None,
                        f"`{key.split(':', 1)[1]}` read in vectors whose last one is unmasked: each slice's {L} values "
                        f"and the next slice's first {P - L} (zeros past the buffer's end) in its statistic"))
        # (or whose last vector is a whole one at L - t, its lanes the previous vectors counted not masked: those
        # values twice in the statistic)
        for t in (t for t in (4, 8, 16, 32) if t < L and L % t):
            lo, hi = L - t, L // t * t
            ext = np.concatenate([np.asarray(v, dtype=np.float64), np.asarray(v, dtype=np.float64)[..., lo:hi]], axis=-1)
            out.append((("remapk", {key: lambda a, ext=ext: ext}), "tail", None,
                        f"`{key.split(':', 1)[1]}` read in vectors of {t} whose last one is a whole vector at {L} - {t} "
                        f"= {lo}: values {lo}..{hi - 1}, already counted, twice in its statistic"))
    return out


def _activation_swapped(seen, op):
    """The op's SiLU (its specification's function ``silu``, returning the value or (value, slope); ``silu_grad``
    its slope) computed as another activation of activations.ACTIVATIONS (quick-GELU, GELU, Mish, ...; a
    kernel's activation selector or template instantiated with another), forward and backward alike; as
    _candidates' tuples ("activation": a gate's function is rule 3's gate, another activation no mechanism)."""
    funcs = {f: k for f in ("silu", "silu_grad") for k in _ARGS if k.startswith(f"{op}:{f}.") and k in seen}
    if "silu" not in funcs:
        return []
    out = []
    for name, f, df in ACTIVATIONS[1:]:
        ch, held = {}, {}
        for fn, arg in funcs.items():
            def enter(v, held=held, fn=fn):
                held[fn] = np.asarray(v, dtype=np.float64)
                return v

            def result(v, held=held, fn=fn, f=f, df=df):
                p = held[fn]
                if fn == "silu_grad":
                    return df(p)
                return (f(p), df(p)) if isinstance(v, tuple) else f(p)
            ch[arg], ch[f"{op}:{fn}.return"] = enter, result
        out.append((("remapk", ch), "activation", None, f"the SiLU computed as {name} (its value and slope)"))
    # the SiLU applied twice (a caller's activation and the kernel's own): silu(silu(p)), its slope chained
    _, f, df = ACTIVATIONS[0]
    ch, held = {}, {}
    for fn, arg in funcs.items():
        def enter(v, held=held, fn=fn):
            held[fn] = np.asarray(v, dtype=np.float64)
            return v

        def result(v, held=held, fn=fn):
            p = held[fn]
            slope = df(f(p)) * df(p)
            if fn == "silu_grad":
                return slope
            return (f(f(p)), slope) if isinstance(v, tuple) else f(f(p))
        ch[arg], ch[f"{op}:{fn}.return"] = enter, result
    out.append((("remapk", ch), "activation", None, "the SiLU applied twice, silu(silu(p)) (its slope "
                "silu'(silu(p)) silu'(p))"))
    return out


def _moments_low(low):
    """The deviations of refnorm/specs/_math.moments computed in the 16-bit ``low`` (the mean rounded to it, the
    difference rounded), the variance from them (its divisor kept); as _candidates' tuples ("lowsum":
    precision)."""
    def dev(t):
        m, var, d = t
        mr = np.asarray(m, dtype=np.float64).astype(low).astype(np.float64)
        d2 = (d + m - mr).astype(low).astype(np.float64)
        axes = tuple(k for k in range(d.ndim) if np.shape(m)[k] == 1 and d.shape[k] > 1)      # the reduced ones
        ss, ss2 = (d * d).sum(axis=axes, keepdims=True), (d2 * d2).sum(axis=axes, keepdims=True)
        return m, var * np.where(ss > 0, ss2 / np.where(ss > 0, ss, 1.0), 1.0), d2
    return [(("remapk", {"_math:moments.return": dev}), "lowsum", None,
             f"the deviations x - mean computed in {low.__name__} (the mean rounded to it, each difference rounded), "
             "the variance and x_hat from them")]


def _welford_updates():
    """The variance of refnorm/specs/_math.moments from a per-value Welford update over each slice (its values
    in C order of the reduced axes: mean_k = mean_{k-1} + (x_k - mean_{k-1}) / k) whose M2 step adds the
    deviation from the updated mean squared, (x_k - mean_k)^2, or from the previous mean squared,
    (x_k - mean_{k-1})^2 (mean_0 = 0), where (x_k - mean_{k-1}) (x_k - mean_k) belongs: the count's weight
    (k - 1) / k of each value's spread term missing or squared; its divisor and the mean kept; as _candidates'
    tuples ("welford": rule 14's merge, a value merged into the running partial with its count weight squared;
    "welford_shift": the deviation about the previous mean, a shift the value has not entered, without the shift's
    correction (k - 1) / k: rule 7's one_pass, docs/verdicts.md)."""
    def welford(new):
        def change(t):
            m, var, d = t
            r = _welford_ratio(m, d, new)
            return t if r is None else (m, var * r, d)
        return change
    return [(("remapk", {"_math:moments.return": welford(new)}), "welford" if new else "welford_shift", None,
             f"the variance from a per-value Welford update adding (x - mean_{'k' if new else 'k-1'})^2 to M2 where "
             "(x - mean_k-1) (x - mean_k) belongs (the mean and the divisor right)") for new in (True, False)]


def _welford_ratio(m, d, new):
    """Each slice's M2 from ``_welford_updates``' wrong per-value update over its values d + m (C order of the
    reduced axes: those where the mean ``m`` has 1 and d more), over its exact sum of d^2 (1 where that is 0),
    in m's shape; None where no axis is reduced."""
    axes = tuple(k for k in range(np.ndim(d)) if np.shape(m)[k] == 1 and np.shape(d)[k] > 1)
    if not axes:
        return None
    keep = tuple(k for k in range(np.ndim(d)) if k not in axes)
    x = np.transpose(d + m, keep + axes).reshape(-1, int(np.prod([np.shape(d)[k] for k in axes])))
    k = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    run = np.cumsum(x, axis=1) / k                      # mean_k, after each value
    prev = np.concatenate([np.zeros((x.shape[0], 1)), run[:, :-1]], axis=1)
    m2 = (((x - run) if new else (x - prev)) ** 2).sum(axis=1)
    ss = (d * d).sum(axis=axes, keepdims=True)
    m2 = m2.reshape(np.shape(ss))
    return np.where(ss > 0, m2 / np.where(ss > 0, ss, 1.0), 1.0)


def _estimated(seen, record):
    """Each slice's returned rstd (or std) off the specification's by a relative error like an approximate
    reciprocal square root's (precision.estimate_like): the specification's forward statistic of that name
    (``seen``: not the backward's) scaled per slice to the returned one, everything after it computed from it
    (``remapk``, tagged "estimate": rule 8's precision)."""
    out = []
    for name in ("rstd", "std"):
        got = record.got.get("outputs", {}).get(name)
        if got is None or np.size(got) < 4:
            continue
        g = np.asarray(got, dtype=np.float64).reshape(-1)
        for key in (k for k in seen if k.rsplit(".", 1)[1] == name and "backward" not in k and ":" in k):
            v = np.asarray(seen[key], dtype=np.float64)
            if v.size != g.size or not np.all(np.isfinite(v)) or np.any(v == 0):
                continue
            with np.errstate(all="ignore"):
                k = g / v.reshape(-1)
            if not np.all(np.isfinite(k)) or not estimate_like(1.0 / k - 1.0):
                continue
            out.append((("remapk", {key: lambda a, k=k: np.asarray(a, dtype=np.float64) * k.reshape(np.shape(a))
                                    if np.size(a) == k.size else a}), "estimate", None,
                        f"each slice's `{name}` ({key.split(':', 1)[1]}) off by up to {np.max(np.abs(k - 1)):.1e} "
                        "relative, on both sides, as returned (an approximate reciprocal square root without a Newton "
                        "step, about 12 significant bits), everything after it computed from it"))
            break
    return out


def _welford_sums(seen):
    """``_welford_updates`` for a specification summing its own squared deviations (z_score's overflow-safe
    ``ss`` = sum (d / a)^2, from its ``d`` and ``mean``): ``ss`` scaled by the wrong update's ratio."""
    out = []
    for key in (k for k in seen if k.endswith(".ss") and "backward" not in k):
        base = key.rsplit(".", 1)[0]
        d, m = seen.get(base + ".d"), seen.get(base + ".mean")
        if d is None or m is None or np.ndim(m) != np.ndim(d):
            continue
        for new in (True, False):
            r = _welford_ratio(np.asarray(m, dtype=np.float64), np.asarray(d, dtype=np.float64), new)
            if r is None or np.size(r) != np.size(seen[key]):
                continue
            out.append((("remapk", {key: lambda v, r=r: v * np.reshape(r, np.shape(v))}),
                        "welford" if new else "welford_shift", None,
                        f"the variance from a per-value Welford update adding (x - mean_{'k' if new else 'k-1'})^2 to "
                        "M2 where (x - mean_k-1) (x - mean_k) belongs (the mean and the divisor right)"))
    return out


MERGE_CHUNKS = (16, 32, 64, 128, 256, 512, 1024)     # the chunk lengths of a merged reduction (and the halves)


def _merge_ratios(xr):
    """For slices ``xr`` (rows, n): (ratio of each row's M2 merged wrong to its exact M2, what) for a slice
    reduced in chunks (two halves, ceil(n / 2) and floor(n / 2); or chunks of k values) whose (count, mean, M2)
    partials are merged with the means count-weighted but the spread term's count weight dropped: every chunk's
    (mean_j - mean)^2 unweighted, or pairwise merges adding delta^2 where delta^2 n_a n_b / (n_a + n_b)
    belongs."""
    R, n = xr.shape
    m = xr.mean(axis=1, keepdims=True)
    ss = ((xr - m) ** 2).sum(axis=1)
    out = []
    for k in dict.fromkeys([-(-n // 2)] + [k for k in MERGE_CHUNKS if k < n]):
        if not 1 < k < n:
            continue
        parts = [xr[:, j:j + k] for j in range(0, n, k)]
        cm = np.stack([c.mean(axis=1) for c in parts], axis=1)
        q = np.stack([((c - c.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) for c in parts], axis=1)
        un = q.sum(axis=1) + ((cm - m) ** 2).sum(axis=1)
        seq = []
        for wname, wf in (("1", lambda na, nb: 1.0), ("n_b", lambda na, nb: nb), ("n_a", lambda na, nb: na)):
            qa = chan_merge(parts, chan_step, wf)[1][:, 0]
            seq.append((qa, f"pairwise merges adding delta^2 {'' if wname == '1' else wname + ' '}where delta^2 n_a "
                            "n_b / (n_a + n_b) belongs"))
        name = "two halves" if k == -(-n // 2) else f"chunks of {k} values"
        for m2, how in [(un, "every chunk's spread (mean_j - mean)^2 without its count n_j")] + seq:
            out.append((np.where(ss > 0, m2 / np.where(ss > 0, ss, 1.0), 1.0),
                        f"the slice reduced in {name} merged with the means count-weighted but {how}"))
    return out


def _slice_rows(values, stat):
    """``values`` (a slice's elements, float64) as rows of one slice each, (slices, n): the axes where the
    statistic ``stat`` has length 1 and ``values`` more moved last and flattened; None where there is none or the
    ranks differ. (The view the chunk-merge families split into chunks.)"""
    if np.ndim(stat) != np.ndim(values):
        return None
    axes = tuple(k for k in range(np.ndim(values)) if np.shape(stat)[k] == 1 and np.shape(values)[k] > 1)
    if not axes:
        return None
    keep = tuple(k for k in range(np.ndim(values)) if k not in axes)
    return np.transpose(np.asarray(values, dtype=np.float64), keep + axes).reshape(
        -1, int(np.prod([np.shape(values)[k] for k in axes])))


def _chunk_merges(seen):
    """A variance (refnorm/specs/_math.moments', or a function's own sum of squares ``ss`` about its mean)
    from chunk partials merged with the spread term's count weight dropped (``_merge_ratios``): the variance
    scaled by the merged M2 over the exact one, the mean and the deviations right; as _candidates' tuples
    ("welford": rule 14's merge)."""
    out = []
    if "_math:moments.mean" in seen and "_math:moments.d" in seen:
        d, m = np.asarray(seen["_math:moments.d"]), np.asarray(seen["_math:moments.mean"])
        xr = _slice_rows(d + m, m) if np.size(d) <= CONFIG_SIZE_MERGE else None
        if xr is not None:
            for r, what in _merge_ratios(xr):
                def change(t, r=r):
                    mm, var, dd = t
                    return mm, var * r.reshape(np.shape(var)), dd
                out.append((("remapk", {"_math:moments.return": change}), "welford", None, f"the variance from {what}"))
    for key, v in seen.items():             # a function's own sum of squares about its centred values (z_score's)
        mod_func, name = key.rsplit(".", 1)
        d = seen.get(f"{mod_func}.d")
        xr = None if name != "ss" or d is None or np.size(d) > CONFIG_SIZE_MERGE else _slice_rows(d, v)
        if xr is None:
            continue
        for r, what in _merge_ratios(xr):
            out.append((("remapk", {key: lambda a, r=r: np.asarray(a) * r.reshape(np.shape(a))}), "welford", None,
                        f"the sum of squares from {what}"))
    return out


CONFIG_SIZE_MERGE = 1 << 16
# exceptions the candidates' own code raises (a defect of the search, not a call the specification refuses)
CODE_ERRORS = (ZeroDivisionError, NameError, AttributeError, KeyError, IndexError)


def _chunk_mean_steps(seen):
    """The mean of refnorm/specs/_math.centered from chunk partials (two halves, or chunks of k values) merged left
    to right by Chan's update with its mean step written wrong (delta n_b / n_a: the count before the merge;
    delta n_a / (n_a + n_b): the counts swapped), the deviations and the variance then taken about that mean; as
    _candidates' tuples ("welford": rule 14's merge)."""
    m0, xc = seen.get("_math:centered.m0"), seen.get("_math:centered.x")
    xr = None if m0 is None or xc is None or np.size(xc) > CONFIG_SIZE_MERGE else _slice_rows(xc, m0)
    if xr is None:
        return []
    n = xr.shape[1]
    out = []
    for k in dict.fromkeys([-(-n // 2)] + [k for k in MERGE_CHUNKS if k < n]):
        if not 1 < k < n:
            continue
        parts = [xr[:, j:j + k] for j in range(0, n, k)]
        name = "two halves" if k == -(-n // 2) else f"chunks of {k} values"
        steps = [("delta n_b / n_a (the count before the merge)", lambda na, nb: nb / na),
                 ("delta n_a / (n_a + n_b) (the counts swapped)", lambda na, nb: na / (na + nb))]
        if k == -(-n // 2) and n % 2:       # (two unequal halves' means averaged, (m_a + m_b) / 2: not weighted)
            steps.append(("delta / 2 (the two means averaged, their counts not weighted)", lambda na, nb: 0.5))
        for how, f in steps:
            m = chan_merge(parts, f)[0].reshape(np.shape(m0))
            out.append((("remapk", {"_math:centered.m0": lambda _, m=m: m, "_math:centered.c": lambda c: 0.0 * c}),
                        "welford", None, f"the mean merged from {name} by Chan's update whose mean step is {how} "
                        "where delta n_b / (n_a + n_b) belongs, the deviations and the variance about it"))
    return out


def _centred_about(seen):
    """The deviations of refnorm/specs/_math.centered taken about another slice's mean (the previous slice's, the
    first its own: a mean pointer advanced before the centring pass's load), the returned mean right; as
    _candidates' tuples ("moments": mechanism layout)."""
    m0 = seen.get("_math:centered.m0")
    if m0 is None or np.size(m0) < 2:
        return []
    out = []
    for a, s in enumerate(np.shape(m0)):
        if s < 2:
            continue
        out.append((("remapk", {"_math:centered.return": lambda t, a=a: (t[0], t[1] + t[0] - _previous(t[0], a))}),
                    "moments", None, f"the deviations x - mean taken about the previous index's mean along axis {a} of the "
                    f"{np.shape(m0)} means (the first its own: the mean pointer advanced before the load), the "
                    "returned mean right"))
        if "_math:moments.mean" in seen:    # (the normalize pass alone: the variance about the slice's own mean)
            out.append((("remapk", {"_math:moments.return": lambda t, a=a: (t[0], t[1], t[2] + t[0]
                                                                               - _previous(t[0], a))}), "moments",
                        None, f"the normalized deviations x - mean taken about the previous index's mean along axis "
                        f"{a} (the first its own: the mean register still holding the last slice's), the variance "
                        "and the returned mean right"))
    return out


def _moments_read(seen):
    """The statistics of refnorm/specs/_math.moments (mean, var and the deviations d = x - mean) read at another
    index of an axis of theirs (the first, or the next: a sample's or a group's offset left out or off by one),
    the deviations recomputed about the mean read there; as _candidates' tuples ("moments": mechanism layout;
    the forward and backward alike, or the backward's recomputation alone where the outputs pass)."""
    mean = seen.get("_math:moments.mean")
    if mean is None or np.size(mean) < 2:
        return []
    out = []
    for a, s in enumerate(np.shape(mean)):
        if s < 2:
            continue
        for f, what in ((lambda v, a=a: _first(v, a), f"the first index of axis {a}"),
                        (lambda v, a=a: _next(v, a), f"the next index of axis {a} (wrapping)")):
            def read(t, f=f):
                m, var, d = t
                return f(m), f(var), d + m - f(m)
            out.append((("remapk", {"_math:moments.return": read}), "moments", None,
                        f"the statistics (mean, variance) read at {what} of their {np.shape(mean)} array, x - mean "
                        "recomputed about them"))
    return out


def _weight_after(seen, ops, n):
    """The backward's product of dy with a parameter (g = dy * weight entering the projection) moved to the
    function's result: that operand left out there and dx multiplied by it (dx = weight * proj(dy)); as
    _candidates' tuples."""
    out = []
    for j, sides in ops.items():
        mod, func, line, op, left, right = _SOURCES[j]
        key = f"{mod}:{func}.dx"
        if (op != "Mult" or "backward" not in func or left != "dy" or sides is None or key not in seen
                or np.size(seen[key]) != n or not (_names(right) & set(PARAMETERS) or "gain" in right)):
            continue
        held = {}

        def keep_right(a, b, op, held=held):
            held["w"] = b
            return a
        out.append((("both", {key: lambda v, held=held: v * held["w"] if "w" in held else v}, {j: keep_right}), j,
                    right, f"`{right}` applied to dx after the projection instead of to dy in `{left} * {right}`"))
    return out


def _plus_eps(side, e):
    """The change of an operation "eps added to its operand ``side``" (0: the left, 1: the right)."""
    return lambda a, b, op: _OPS[op](a + e, b) if side == 0 else _OPS[op](a, b + e)


def _count_changes(seen, reds, ops, ints, xshape, low=None, fwd=frozenset(), every_red=None, case_dtype="float32",
                   op=""):
    """The changes of what a reduction spans (module docstring), as _candidates' tuples: the mean of
    refnorm/specs/_math.centered (the two-pass mean_A) taken as the sum divided by another count n2 (the
    correction pass left out: the mean is sum / n2 by definition), alone and with the variance's count
    n2 too; each reduction over every axis or one more axis, a mean's sum divided by another count; an
    integer operand of an operation on floating values (a count, a step) read as one more or less, or as
    one of x's sizes. Returns (the changes, the later changes: a warp butterfly's missing steps, 16-bit
    partial sums, tried after every other change of _candidates)."""
    out, late = [], []              # (late: tried after every other change, the rarer arithmetic)
    m0, xc = seen.get("_math:centered.m0"), seen.get("_math:centered.x")
    if m0 is not None and xc is not None and np.ndim(m0) == np.ndim(xc) and np.size(m0):
        n = np.size(xc) // np.size(m0)
        axes = [a for a in range(np.ndim(xc)) if np.shape(m0)[a] == 1 and np.shape(xc)[a] != 1]
        vs = [j for j, (sh, ax, kp) in reds.items() if _SOURCES[j][:2] == ("_math", "moments") and sh == np.shape(xc)
              and ax == tuple(axes)]
        d, mu = seen.get("_math:moments.d"), seen.get("_math:moments.mean")
        sizes = [np.shape(xc)[a] for a in axes]
        padded = _padded(n, sizes)
        # (and n without one of x's own axes: a count taken from the last axis alone where the positions belong)
        missing = {n // s for s in xshape[1:] if 1 < s < n and n % s == 0}
        for n2 in sorted(set(_counts(n, sizes)) | missing | (_x_counts(xshape) - {n})):
            mean = {"_math:centered.m0": lambda v, n2=n2: v * (n / n2), "_math:centered.c": lambda v: 0 * v}
            what = f"the mean (refnorm/specs/_math.py centered) taken as the sum divided by {n2} where n = {n} belongs"
            out.append((("remapk", mean), "count", _count_change(n, n2, padded), what))
            both = {**mean, "_math:moments.n": lambda v, n2=n2: n2}
            out.append((("remapk", both), "count", _count_change(n, n2, padded), what + ", and the variance's divisor "
                        f"n - ddof with n = {n2}" + (" (the positions padded to whole tiles, their masked lanes "
                                                     "counted)" if n2 in padded else "")))
            if n2 not in padded:        # (and the op's own count n, a running variance's unbiased factor: one count
                every = {**both, f"{op}:{op}.n": lambda v, n2=n2: n2 if v == n else v}     # the host passes)
                out.append((("remapk", every), "count", (n, n2), what + f", the variance's divisor and the op's own "
                            f"count n (its running variance's unbiased factor) {n2} too"))
            if n2 == _tile(n) > n + 1 and len(vs) == 1 and d is not None and mu is not None:
                # every lane of a power-of-two tile counted: the mean and the variance over n2, the padded lanes'
                # deviations 0 - mean entering the sum of squares (rule 9)
                out.append((("remapred", both, {vs[0]: _padded_sq(d, np.asarray(mu) * (n / n2), n2, scaled=False)}),
                            "count", (n, n2), what + f", the variance's divisor n - ddof with n = {n2}, and the "
                            f"{n2 - n} padded lanes' deviations 0 - mean in its sum of squares (a {n2}-wide tile's "
                            "every lane counted)"))
        if low is not None and case_dtype in ("float16", "bfloat16"):
            # 1 / n held in the 16-bit input dtype (rounded to nearest) and multiplied into the sums of the mean and
            # of the variance: each divided by 1 / fl(1 / n) (rule 8's precision)
            inv = float(np.asarray(1.0 / n).astype(low))
            if inv > 0 and inv != 1.0 / n:
                n2 = 1.0 / inv
                both = {"_math:centered.m0": lambda v, n2=n2: v * (n / n2), "_math:centered.c": lambda v: 0 * v,
                        "_math:moments.n": lambda v, n2=n2: n2}
                out.append((("remapk", both), "lowsum", None, f"1 / n held in {case_dtype} ({inv:.6g} for 1 / {n}) "
                            "and multiplied into the sums of the mean and of the variance"))
        for P in sorted(padded | ({_tile(n)} - {n})):
            # the padded lanes of a P-wide tile loaded as 1 (a masked load's other=1.0) in the mean's sum, still
            # divided by n (the deviations masked to the n values): rule 9's padded lanes
            mean = {"_math:centered.m0": lambda v, k=P - n: v + k / n, "_math:centered.c": lambda v: 0 * v}
            out.append((("remapk", mean), "tail", None, f"the mean (refnorm/specs/_math.py centered) with the {P - n} "
                        f"padded lanes of a {P}-wide tile loaded as 1 (a masked load's other=1.0) in its sum, divided "
                        f"by n = {n}"))
    tried = set()                    # (reductions, k) of the groups changes already listed (no evaluation twice)

    def groups(ids, ks, what):
        new = [k for k in ks if (ids, k) not in tried]
        tried.update((ids, k) for k in new)
        return [(("reduce", ids, _groups(k)), "part", None, what(k)) for k in new]
    by_func = {}
    for i, (shape, axes, keep) in reds.items():
        if axes and _SOURCES[i][3] != "max":
            by_func.setdefault(_SOURCES[i][:2], []).append(i)
    for ids in (ids for ids in by_func.values() if len(ids) > 1):      # every reduction of one function changed
        if low is not None:
            out += [(("reduce", frozenset(ids), _sequential(low, t)), "lowsum", None,
                     f"accumulated left to right in {low.__name__} (each {TERMS[t]} rounded to nearest), and its "
                     f"function's {len(ids) - 1} other reductions too") for t in (False, True)]
        shape, axes, keep = reds[ids[0]]
        if all(reds[j] == reds[ids[0]] and _SOURCES[j][3] == "mean" for j in ids):
            # every mean of the function divided by another count (the backward's means over n - 1)
            n = int(np.prod([shape[a] for a in axes]))
            out += [(("reduce", frozenset(ids), _count(n2)), "count", (n, n2), f"every mean of `{_SOURCES[ids[0]][1]}` "
                     f"({len(ids)}) its sum divided by {n2} where n = {n} belongs")
                    for n2 in sorted(set(_counts(n, [shape[a] for a in axes])) | (_x_counts(xshape) - {n}))]
        if keep and all(reds[j] == reds[ids[0]] for j in ids) and len(shape) - len(axes) > 1:
            # every reduction of the function over one more axis (a group norm's backward over every group; over
            # the batch axis 0: the slices pooled over the batch, an instance norm's backward over the samples)
            out += [(("reduce", frozenset(ids), _pooled(tuple(sorted(axes + (b,))), shape[b])), "more",
                     shape[b] if b else None,
                     f"over axis {b} too (of {shape}), and its function's {len(ids) - 1} other reductions too")
                    for b in range(len(shape)) if b not in axes and shape[b] > 1]
        if keep and axes == (len(shape) - 1,) and all(reds[j] == reds[ids[0]] for j in ids):
            N = shape[-1]
            out += groups(frozenset(ids), _divisors(N), lambda k: f"over groups of {k} contiguous values (of {N}), "
                          f"and its function's {len(ids) - 1} other reductions too")
        if _run(axes, len(shape)) and all(reds[j] == reds[ids[0]] for j in ids):
            # every reduction of the function over whole tiles of the slice only (the loop bound T // B: the
            # partial tail tile never entered; its means still divided by the whole count)
            T = int(np.prod([shape[j] for j in _run(axes, len(shape))]))
            # (a backward's sums across the leading axis too, not kept: a parameter gradient's partial sums,
            # rule 11's reduction dropping a part of each; a slice's own reduction's tail is rule 9's block)
            across = not keep and 0 in axes and len(axes) > 1 and "backward" in _SOURCES[ids[0]][1]
            out += [(("reduce", frozenset(ids), _tail_dropped(k)), "ptail" if across else "tail", None, f"without the "
                     f"last {k} of each slice's {T} trailing positions (" + ("a column mask off by one" if k == 1
                     else "a loop over whole tiles only") + f"), and its function's {len(ids) - 1} other reductions "
                     "too" + (" (the parameter gradients' partial sums across the slices)" if across else ""))
                    for k in _tails(T, masked=True)]
            out += [(("reduce", frozenset(ids), _odd_tiles_dropped(t)), "ptail" if across else "tail", None,
                     f"without the positions j of each slice's {T} trailing positions with (j // {t}) odd (a loop over "
                     f"tiles of {t} with a stride of {2 * t}: unrolled by two, its body written for one tile), and its "
                     f"function's {len(ids) - 1} other reductions too"
                     + (" (the parameter gradients' partial sums across the slices)" if across else ""))
                    for t in (16, 32, 64, 128) if t < T]
            # (or over the first s of them only, s a size of x's last axis: the count of positions taken from the
            # last axis where the flattened positions belong)
            out += [(("reduce", frozenset(ids), _tail_dropped(T - s)), "ptail" if across else "tail", None,
                     f"over the first {s} of each slice's {T} trailing positions only (the count taken from x's last "
                     f"axis), and its function's {len(ids) - 1} other reductions too"
                     + (" (the parameter gradients' partial sums across the slices)" if across else ""))
                    for s in sorted({int(xshape[-1])} if len(xshape) > 2 else set()) if 1 < s < T
                    and T - s not in _tails(T, masked=True)]
            # (or over the first M, M the row count: a column mask against the other dimension, cols < M)
            M = int(np.prod(xshape[:-1], dtype=np.int64)) if len(xshape) > 1 else 0
            out += [(("reduce", frozenset(ids), _tail_dropped(T - M)), "ptail" if across else "tail", None,
                     f"over the first {M} of each slice's {T} trailing positions only (a column mask against the row "
                     f"count {M}, cols < M where cols < N belongs), and its function's {len(ids) - 1} other reductions "
                     "too" + (" (the parameter gradients' partial sums across the slices)" if across else ""))
                    for _ in (0,) if 1 < M < T and T - M not in _tails(T, masked=True)
                    and not (len(xshape) > 2 and M == int(xshape[-1]))]
    # a backward's sum across the rows (a parameter gradient) whose per-row partials ran over whole tiles of the
    # last axis only: each row's last k columns never added (rule 11: each partial without its tail positions)
    for i, (shape, axes, keep) in reds.items():
        if not keep and len(axes) > 1 and len(shape) - 1 in axes and _SOURCES[i][3] == "sum" \
                and "backward" in _SOURCES[i][1]:
            C = shape[-1]
            out += [(("reduce", i, _run_kept(lambda j, C=C, k=k: j % C < C - k)), "ptail", None,
                     f"each row's partial sum without its last {k} of {C} columns (a loop over whole tiles of the last "
                     "axis only), then summed over the rows") for k in _tails(C)]
    # one sum divided by its count: averaged where summed belongs (a projection's mean(dy u) where its sum
    # belongs, the layer norm's form copied)
    for i, (shape, axes, keep) in reds.items():
        n = int(np.prod([shape[a] for a in axes])) if axes else 0
        if _SOURCES[i][3] == "sum" and n > 1:
            out.append((("reduce", i, _count(n)), "average", bool(keep), f"divided by its count {n} (a mean where the sum "
                        "belongs)"))
    # every mean over n values, forward and backward, divided by another count n2 (the kernel's one constant for
    # n misread: a group's length read as the row's)
    by_n = {}
    for i, (shape, axes, keep) in (every_red or reds).items():
        if _SOURCES[i][3] == "mean" and axes:
            by_n.setdefault(int(np.prod([shape[a] for a in axes])), []).append(i)
    for n, ids in by_n.items():
        if len({_SOURCES[i][1] for i in ids}) > 1:
            sizes = _x_counts(xshape)
            out += [(("reduce", frozenset(ids), _count(n2)), "count", (n, n2), f"every mean over {n} values "
                     f"({len(ids)}, forward and backward) its sum divided by {n2}")
                    for n2 in sorted(set(_counts(n, ())) | {k for k in sizes if k > 1}) if n2 != n]
    # every reduction over the slice's axes (forward and backward) taken over the whole tensor: a sum scaled to
    # the slice's count (the code divides it by that count), a mean as it is
    sig = {}
    for i, (shape, axes, keep) in reds.items():
        if keep and 0 < len(axes) < len(shape):
            sig.setdefault((shape, axes), []).append(i)
    # the forward's statistics over the first sample alone (a batch loop's bound 1): every forward reduction
    # over the batch axis and others, each from index 0 of axis 0 (a sum scaled to the whole count)
    first = frozenset(i for i in fwd if i in reds and reds[i][2] and 0 in reds[i][1] and reds[i][0][0] > 1
                      and (len(reds[i][1]) > 1 or len(reds[i][0]) > 1))
    if first and len({reds[i][:2] for i in first}) == 1:
        # (or the first k samples: a loop over blocks of samples skipping the tail block, the count kept or not)
        n0, ax = reds[min(first)][0][0], reds[min(first)][1]
        for k in _early_stops(n0):
            said = "the first sample (index 0 of axis 0)" if k == 1 else f"the first {k} samples (of {n0})"
            out.append((("reduce", first, _first_samples(k)), "tail", None, f"every forward reduction over axes "
                        f"{ax} ({len(first)}) from {said} alone"))
            if k > 1:           # (the two-pass mean's correction pass, of the deviations from it, left out)
                ch = {i: _zero if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4] == "d0"
                      else _first_samples(k, False) for i in first}
                out.append((("reduce", first, ch), "tail", None, f"every forward reduction over axes {ax} "
                            f"({len(first)}) from {said} alone, its sums divided by the whole count"))
        for step in (2, 4):     # (or every step-th sample: a loop unrolled by step, its body written for one)
            if n0 > step:
                said = f"samples 0, {step}, {2 * step}, ... alone (of {n0}: a loop over the samples stepping by {step})"
                out += [(("reduce", first, {i: _zero if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4]
                                            == "d0" else _first_samples(n0, sc, step) for i in first} if not sc else
                          _first_samples(n0, True, step)), "tail", None, f"every forward reduction over axes {ax} "
                         f"({len(first)}) from {said}" + ("" if sc else ", its sums divided by the whole count"))
                        for sc in (True, False)]
    # the forward's statistics over each block of k values of the row (a quantization block, the tile a kernel
    # loads), its last block partial: every forward reduction over the last axis, each value its block's
    rows = frozenset(i for i in fwd if i in reds and reds[i][2] and reds[i][1] == (len(reds[i][0]) - 1,))
    if rows and len({reds[i][0][-1] for i in rows}) == 1:
        N = reds[min(rows)][0][-1]
        out += [(("reduce", rows, _blocks(k)), "part", None, f"every forward reduction over the row ({len(rows)}) "
                 f"taken over each block of {k} values (of {N}; each block's own statistics)")
                for k in (8, 16, 32, 64, 128) if k < N]
        c0 = [i for i in rows if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4] == "d0"]
        for s in (s for s in (16, 8, 4, 2, 1) if s < N and int(np.prod(reds[min(rows)][0][:-1])) > 1):
            what = (f"every forward reduction over the row ({len(rows)}) by a 32-lane warp butterfly without its "
                    f"offset-{s} step (the columns j with j mod 32 & {s} never summed, still divided by the whole "
                    "count")
            late.append((("reduce", rows, _lanes(s)), "tail", None, what + ")"))
            if c0:                  # (the two-pass mean's correction pass left out: the mean of one pass)
                late.append((("reduce", rows, {i: _zero if i in c0 else _lanes(s) for i in rows}), "tail", None,
                            what + "; the mean of one pass)"))
    # a channel's statistics over several axes from the even positions of each plane alone (a 2-wide vector load
    # whose high half is never accumulated), still divided by the whole count: every forward reduction over those
    # axes (the two-pass mean's correction pass too)
    multi = {}
    for i in fwd:
        if i in reds and reds[i][2] and len(reds[i][1]) > 1 and reds[i][1][-1] == len(reds[i][0]) - 1:
            multi.setdefault((tuple(reds[i][0]), tuple(reds[i][1])), set()).add(i)
    for (shape, axes), ids in multi.items():
        trail = next(k for k in range(len(axes)) if axes[k:] == tuple(range(axes[k], len(shape))))
        P = int(np.prod([shape[a] for a in axes[trail:]], dtype=np.int64))
        if P > 2 and all(_SOURCES[i][3] in ("sum", "mean") for i in ids):
            ev = _even_positions(len(shape) - axes[trail])
            what = (f"every forward reduction over axes {axes} of {shape} from the even positions of each run of {P} "
                    "alone (a 2-wide vector's high half never accumulated; divided by the whole count")
            late.append((("reduce", frozenset(ids), ev), "tail", None, what + ")"))
            c0 = [i for i in ids if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4] == "d0"]
            if c0:                  # (the two-pass mean's correction pass left out: the mean of one pass)
                late.append((("reduce", frozenset(ids), {i: _zero if i in c0 else ev for i in ids}), "tail", None,
                             what + "; the mean of one pass)"))
    if low is not None:                 # every backward reduction over one set of axes accumulated in the 16-bit
        bsig = {}                       # dtype, across the backward's functions (a backward-reduce kernel's sums)
        for i, (shape, axes, keep) in reds.items():
            if axes and "backward" in _SOURCES[i][1] and _SOURCES[i][3] != "max":
                bsig.setdefault((shape, axes), []).append(i)
        for (shape, axes), ids in bsig.items():
            if len({_SOURCES[i][1] for i in ids}) > 1:
                out += [(("reduce", frozenset(ids), _sequential(low, t)), "lowsum", None, f"every backward reduction "
                         f"over axes {axes} ({len(ids)}, in {len({_SOURCES[i][1] for i in ids})} functions) accumulated "
                         f"left to right in {low.__name__} (each {TERMS[t]} rounded to nearest)") for t in (False, True)]
    tiles = {}                          # the forward's statistics over whole tiles of each slice's trailing run
    for i in fwd:
        if i in reds and _run(reds[i][1], len(reds[i][0])) and _SOURCES[i][3] != "max":
            tiles.setdefault(reds[i][:2], []).append(i)
    for (shape, axes), ids in tiles.items():
        T = int(np.prod([shape[j] for j in _run(axes, len(shape))]))
        c0 = {i for i in ids if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4] == "d0"}
        out += [(("reduce", frozenset(ids), {i: _zero if i in c0 else _tail_dropped(k) for i in ids}), "tail", None,
                 f"every forward reduction over axes {axes} ({len(ids)}) without the last {k} of each slice's {T} "
                 "trailing positions (" + ("a column mask off by one" if k == 1 else "a loop over whole tiles only")
                 + ", still divided by the whole count" + ("; the mean of one pass)" if c0 else ")"))
                 for k in _tails(T, masked=True) if len(ids) > 1]
        # (or over the first M of them, M the row count: the statistics pass's column mask against the other
        # dimension, cols < M where cols < N belongs)
        M = int(np.prod(xshape[:-1], dtype=np.int64)) if len(xshape) > 1 else 0
        out += [(("reduce", frozenset(ids), {i: _zero if i in c0 else _tail_dropped(T - M) for i in ids}), "tail", None,
                 f"every forward reduction over axes {axes} ({len(ids)}) over the first {M} of each slice's {T} "
                 f"trailing positions only (a column mask against the row count {M}, cols < M where cols < N "
                 "belongs), still divided by the whole count" + ("; the mean of one pass" if c0 else ""))
                for _ in (0,) if len(ids) > 1 and 1 < M < T and T - M not in _tails(T, masked=True)
                and not (len(xshape) > 2 and M == int(xshape[-1]))]
        # (or without a group's last channels, the slice a group of whole channels of S positions: the channel
        # loop's bound short by one or more, down to the first channel alone; rule 9's block)
        S = int(np.prod(xshape[2:], dtype=np.int64)) if len(xshape) > 2 else 0
        out += [(("reduce", frozenset(ids), {i: _zero if i in c0 else _tail_dropped(j * S) for i in ids}), "tail", None,
                 f"every forward reduction over axes {axes} ({len(ids)}) without the group's last {j} of its {T // S} "
                 f"channels ({S} positions each: the channel loop's bound short), still divided by the whole count"
                 + ("; the mean of one pass" if c0 else ""))
                for j in (sorted({1, 2, T // S - 1}) if len(ids) > 1 and S > 1 and T % S == 0 else ())
                if 0 < j < T // S and j * S not in _tails(T, masked=True)]
    for (shape, axes), ids in sig.items():
        if len(ids) > 1:
            out.append((("reduce", frozenset(ids), _whole), "reduce", None, f"every reduction over axes {axes} of a "
                        f"{shape} array ({len(ids)}, forward and backward) taken over the whole array"))
            # every one over one more axis (each group's statistics pooled over the batch, forward and backward,
            # across the functions computing them: the mean's, the variance's, the backward's sums)
            out += [(("reduce", frozenset(ids), _pooled(tuple(sorted(axes + (b,))), shape[b])), "more",
                     shape[b] if b else None,
                     f"every reduction over axes {axes} of a {shape} array ({len(ids)}, forward and backward) over "
                     f"axis {b} too") for b in range(len(shape)) if b not in axes and shape[b] > 1
                    and len(shape) - len(axes) > 1]
            if all(_SOURCES[i][3] != "mean" for i in ids):     # (a norm of sums: lp_normalize's)
                every = _over(tuple(range(len(shape))))
                out.append((("reduce", frozenset(ids), every), "reduce", None, f"every reduction over axes {axes} of "
                            f"a {shape} array ({len(ids)}, forward and backward) taken over the whole array, its sums "
                            "as they are (one norm for the whole tensor)"))
            if axes == (len(shape) - 1,):   # every one over groups of k contiguous values (per quantization block)
                N = shape[-1]
                out += groups(frozenset(ids), [k for k in (8, 16, 32, 64, 128) if N % k == 0 and k < N],
                              lambda k: f"every reduction over axes {axes} of a {shape} array ({len(ids)}, forward "
                              f"and backward) over groups of {k} contiguous values")
        if axes == (len(shape) - 1,) and len(shape) > 1:
            # the forward's statistics (or every reduction) from the slice's first k values only (a loop bound
            # c < c0 + 1: a group's first channel), applied to the whole slice
            N = shape[-1]
            sets = [(frozenset(ids), "forward and backward")]
            if 0 < len(set(ids) & fwd) < len(ids):
                sets.append((frozenset(set(ids) & fwd), "the forward's"))
            out += [(("reduce", t, _first_group(k)), "part", None, f"every reduction over axes {axes} of a {shape} "
                     f"array ({len(t)}, {what}) from each slice's first {k} values only")
                    for t, what in sets for k in _divisors(N)]
    # the two-pass mean's first pass accumulated in the 16-bit dtype and its correction pass left out (a mean
    # summed in the input dtype, never re-centred)
    m0 = [i for i in reds if _SOURCES[i][:4] == ("_math", "centered", _SOURCES[i][2], "mean") and _SOURCES[i][4] == "x"]
    c0 = [i for i in reds if _SOURCES[i][:2] == ("_math", "centered") and _SOURCES[i][4] == "d0"]
    if low is not None and len(m0) == 1 and len(c0) == 1:
        out += [(("reduce", frozenset(m0 + c0), {m0[0]: _sequential(low, t), c0[0]: _zero}), "lowsum", None,
                 f"the mean's sum accumulated left to right in {low.__name__} (each {TERMS[t]} rounded to nearest), its "
                 "correction pass left out") for t in (False, True)]
    for i, (shape, axes, keep) in reds.items():     # partial sums rounded to the 16-bit dtype before they are added
        if low is None or not axes or _SOURCES[i][3] == "max" or i in c0:
            continue
        # (pairs and quads too: a packed 16-bit add, each pair's sum rounded, before the wide accumulation)
        parts = [k for k in (2, 4, 32, 64, 128, 256) if k < shape[-1]] if axes[-1] == len(shape) - 1 else []
        parts += [tuple(a for a in axes if a != b) for b in axes if len(axes) > 1 and shape[b] > 1]
        for k in parts:
            what = (f"its partial sums (each block of {k} values" if isinstance(k, int) else
                    f"its partial sums (over axes {k}, one per index of the others") + \
                f") rounded to {low.__name__} before they are added"
            late.append((("reduce", i, _partials(low, k)), "lowsum", None, what))
            if i in m0 and len(c0) == 1:
                late.append((("reduce", frozenset((i, c0[0])), {i: _partials(low, k), c0[0]: _zero}), "lowsum", None,
                            what + ", the mean's correction pass left out"))
                vs = [j for j in reds if _SOURCES[j][:2] == ("_math", "moments") and reds[j] == reds[i]]
                if len(vs) == 1:            # the variance's sum of squares too (each sample's partials, say)
                    late.append((("reduce", frozenset((i, c0[0], vs[0])), {i: _partials(low, k), c0[0]: _zero,
                                                                         vs[0]: _partials(low, k)}), "lowsum", None,
                                what + " in the mean and the variance alike, the mean's correction pass left out"))
    for i, (shape, axes, keep) in reds.items():
        nd = len(shape)
        if low is not None and axes and _SOURCES[i][3] != "max":
            out += [(("reduce", i, _sequential(low, t)), "lowsum", None, f"accumulated left to right in "
                     f"{low.__name__} (each {TERMS[t]} rounded to nearest)") for t in (False, True)]
        fk = f"{_SOURCES[i][0]}:{_SOURCES[i][1]}."
        d, mu = seen.get(fk + "d"), seen.get(fk + "mean")
        if axes and _SOURCES[i][3] == "sum" and "backward" not in fk and d is not None and mu is not None \
                and np.shape(d) == shape and np.ndim(mu) == nd:
            # a sum of the squared deviations d (of the function's own mean), maybe scaled: the textbook one-pass
            # variance E[x^2] - E[x]^2 with both sums in the working precision
            W = np.float64 if case_dtype == "float64" else np.float32
            out.append((("reduce", i, _one_pass(np.asarray(d), np.asarray(d) + np.asarray(mu), W)), "shift", None,
                        f"the variance as E[x^2] - E[x]^2 from one pass of sums in {np.dtype(W).name} (clamped at 0)"))
            if fk != "_math:moments.":
                out.append((("reduce", i, _about_first_scaled(np.asarray(d))), "shift", None, "the variance's sum of "
                            "squares about each slice's first value x0 (a shift without its correction n (mean - "
                            "x0)^2)"))
        if _SOURCES[i][:2] == ("_math", "moments") and axes:
            out.append((("reduce", i, _about_first), "shift", None, "the variance's sum of squares about each slice's "
                        "first value x0 (a shift without its correction n (mean - x0)^2)"))
            d, mu = seen.get("_math:moments.d"), seen.get("_math:moments.mean")
        if axes and _SOURCES[i][3] == "sum" and "backward" not in fk and d is not None and mu is not None:
            # the mean of squares about 0, E[x^2], where the variance belongs (the normalization still centred)
            out.append((("reduce", i, _about_zero(np.asarray(d), np.asarray(mu))), "shift", None, "the variance's "
                        "sum of squares taken about 0: the raw mean of squares E[x^2] (the one-pass expansion's "
                        "- E[x]^2 term left out), x - mean still normalized by it"))
        elif not (axes and _SOURCES[i][3] == "sum" and "backward" not in fk):
            d = None                        # (a function's own sum of its squared deviations, maybe scaled: below)
        run = _run(axes, nd)
        if d is not None and np.shape(d) == shape and axes:
            # partial variances merged without their means' spread; a tile's padded lanes counted
            parts = [tuple(a for a in axes if a != b) for b in axes if len(axes) > 1 and shape[b] > 1]
            T = int(np.prod([shape[j] for j in run])) if run else 0
            if T > 1:                       # blocks of the trailing run: a channel's values (x's trailing sizes), a tile
                trail = [int(np.prod(xshape[j:])) for j in range(1, len(xshape))] if axes == (nd - 1,) else []
                parts += list(dict.fromkeys(k for k in trail + [16, 32, 64, 128, 256, 512, 1024] if 1 < k < T))
                parts += [-32] + [-k for k in (16, 64) if k < T] if len(run) == 1 else []
            if T > 1 and _tile(T) != T and mu is not None and np.ndim(mu) == nd:
                # a power-of-two tile's padded lanes loaded as 0 and their deviations 0 - mean not masked: each
                # adds mean^2 to the sum of squares (rule 9's padded lanes counted)
                out.append((("reduce", i, _padded_sq(np.asarray(d), np.asarray(mu), _tile(T))), "tail", None,
                            f"with the {_tile(T) - T} padded lanes of a {_tile(T)}-wide tile counted (each loaded as 0, "
                            "its deviation -mean not masked: mean^2 each)"))
            out += [(("reduce", i, _about_parts(np.asarray(d), k)), "shift", None, "the variance merged from partial "
                     "variances (each about its part's own mean: " + (
                         f"over axes {k}" if isinstance(k, tuple) else f"each block of {k} values" if k > 0 else
                         f"each of {-k} lanes, lane l the columns j = l mod {-k}")
                     + "), the spread of the partial means left out") for k in parts]
        if keep and len(axes) > 1:          # a part of each slice: one axis fewer (each value its part's result)
            out += [(("reduce", i, _part(tuple(a for a in axes if a != b))), "part", None,
                     f"over axes {tuple(a for a in axes if a != b)} only (each part of the slice its own)")
                    for b in axes if shape[b] > 1]
        if axes == (nd - 1,) and shape[-1] > 1:
            # the row's last columns never loaded (a mask off by one, a partial tail block dropped)
            N = shape[-1]
            tails = {1} | {N % b for b in (16, 32, 64, 128, 256, 512, 1024) if b < N}
            out += [(("reduce", i, _without_last(k, _SOURCES[i][3])), "tail", None, f"without the row's last {k} column"
                     + ("s" if k > 1 else "") + f" (of {N})") for k in sorted(tails - {0}) if k < N]
            out += [(("reduce", i, _without_last(k, _SOURCES[i][3], first=True)), "tail", None, f"without the row's "
                     f"first {k} columns (of {N}: a pipelined loop's prologue tile loaded, never accumulated)")
                    for k in (16, 32, 64, 128) if k < N]
            # the row's first tile of b columns alone (a column loop whose tile offset never advances: the same
            # tile each pass, or one pass), still divided by the whole count
            out += [(("reduce", i, _without_last(N - b, _SOURCES[i][3])), "tail", None, f"over the row's first {b} "
                     f"columns only (of {N}: the tile offset never advanced)") for b in (32, 64, 128, 256, 512, 1024)
                    if b < N and N - b not in tails]
            # (or its first M columns, M the row count: a column mask against the other dimension, cols < M)
            M = int(np.prod(xshape[:-1], dtype=np.int64)) if len(xshape) > 1 and xshape[-1] == N else 0
            out += [(("reduce", i, _without_last(N - M, _SOURCES[i][3])), "tail", None, f"over the row's first {M} "
                     f"columns only (of {N}: a column mask against the row count {M}, cols < M where cols < N "
                     "belongs)") for _ in (0,) if 1 < M < N and N - M not in tails
                    and M not in (32, 64, 128, 256, 512, 1024)]
            # a scalar tail loop after the vector loads (of 4, 8, 16 values) reading the tail's first value at
            # every tail index (its index never advanced)
            widths = {}                     # tail length -> the narrowest vector width leaving it
            for b in (4, 8, 16, 32):        # (a row shorter than the width: all of it the tail)
                if N % b > 1:
                    widths.setdefault(N % b, b)
            late += [(("reduce", i, _tail_repeated(k)), "tail", None, f"with each of the row's last {k} values (of "
                      f"{N}: a scalar tail loop after {b}-wide vector loads) read as the tail's first")
                     for k, b in widths.items()]
            late += [(("reduce", i, _lanes(s)), "tail", None, f"by a 32-lane warp butterfly without its offset-{s} "
                      f"step (the columns j with j mod 32 & {s} never reduced)") for s in (16, 8, 4, 2, 1)
                     if s < N and int(np.prod(shape[:-1])) > 1]     # (one slice: one number, no evidence)
            late += [(("reduce", i, _odd_tiles_dropped(t)), "tail", None, f"without the columns j with (j // {t}) odd "
                      f"(of {N}: a loop over tiles of {t} with a stride of {2 * t}, unrolled by two, its body written "
                      "for one tile)") for t in (16, 32, 64, 128) if t < N]
            for halving, how in ((True, "element i added to element i + floor(k / 2)"),
                                 (False, "neighbours 2 i and 2 i + 1 added")):
                kept = tree_kept(N, halving)
                if not kept.all():
                    late.append((("reduce", i, _run_kept(lambda j, kept=kept: kept)), "tail", None, f"by a tree ({how} at each level "
                                 f"of length k) dropping the unpaired last value of every level of odd length (of {N}: "
                                 f"{int(N - kept.sum())} values never reduced)"))
        if keep and axes == (nd - 1,):      # groups of k contiguous values of the last axis
            N = shape[-1]
            out += groups(frozenset((i,)), _divisors(N), lambda k: f"over groups of {k} contiguous values (of {N})")
            # (chunks of a program's width, the last partial: each program's partial used as the slice's)
            late += [(("reduce", i, _chunked(k)), "part", None, f"over each chunk of {k} values (of {N}, the last "
                      f"partial): each program's partial used as the slice's, the cross-chunk combine missing")
                     for k in (16, 32, 64, 128) if k < N and N % k]
        if len(axes) < nd:
            out.append((("reduce", i, _over(tuple(range(nd)))), "reduce", None, "over every axis"))
            if keep and axes and all(shape[b] > 1 for b in axes):   # across the slices: each position over them all
                other = tuple(b for b in range(nd) if b not in axes)
                late.append((("reduce", i, _across(other)), "reduce", None, f"over axes {other} instead of {axes} "
                             "(each position's over every slice, the axis argument of the other reduction)"))
            out += [(("reduce", i, _over(tuple(sorted(axes + (b,))))), "reduce", None, f"over axis {b} too")
                    for b in range(nd) if b not in axes and nd - len(axes) > 1 and shape[b] > 1]
            # a sum over one more axis divided by its slices too (each part centred alone, the variance over the
            # whole: the pooled mean of the parts' sums of squares): a group's count read as the row's
            out += [(("reduce", frozenset((i,)), _pooled(tuple(sorted(axes + (b,))), shape[b])), "more",
                     shape[b] if b else None, f"over axis {b} too, divided by its {shape[b]} slices too (the parts' "
                     "mean)") for b in range(nd) if b not in axes and nd - len(axes) > 1 and shape[b] > 1
                    and _SOURCES[i][3] == "sum" and "backward" not in _SOURCES[i][1]]
        if _SOURCES[i][3] == "sum" and "backward" in _SOURCES[i][1] and len(axes) > 1:
            # a gradient's sum over several axes taking index 0 of one of them only (a per-column partial's first
            # entry returned for a scalar's gradient, the first sample's terms alone)
            out += [(("reduce", i, _index_only(b)), "reduce", None, f"over index 0 of axis {b} only (of {shape[b]})")
                    for b in axes if shape[b] > 1]

        if _SOURCES[i][3] == "mean":
            n = int(np.prod([shape[a] for a in axes]))
            out += [(("reduce", i, _count(n2)), "reduce", (n, n2), f"its sum divided by {n2} where n = {n} belongs")
                    for n2 in _counts(n, [shape[a] for a in axes])]
    lead_sums = {}                  # the backward's sums over the leading axes (the parameter gradients')
    for i, (shape, axes, keep) in reds.items():
        if _SOURCES[i][3] == "sum" and "backward" in _SOURCES[i][1] and axes and axes == tuple(range(len(axes))):
            lead_sums.setdefault((shape, axes), []).append(i)
    for (shape, axes), ids in lead_sums.items():
        # every parameter gradient's loop over blocks of k rows loading rows 0 .. k - 1 each time (the block's
        # offset left out): the first k rows' sum, ceil(M / k) times
        M = int(np.prod([shape[a] for a in axes]))
        out += [(("reduce", frozenset(ids), _rows_repeated(k, len(axes))), "reduce", None, f"every sum over the "
                 f"{M} rows ({len(ids)}) taken over its first {k} rows alone, {-(-M // k)} times (a loop over blocks "
                 f"of {k} rows loading rows 0-{k - 1} each time: the block's offset left out)")
                for k in (2, 4, 8, 16, 32) if k < M]
    counts = {}                     # a count's value -> the (operation, side) reading it
    for i, pair in ints.items():
        if i not in ops:
            continue
        for side, v in enumerate(pair):
            if v is None or pair[1 - side] is not None:
                continue
            src = _SOURCES[i][4 + side]
            # (ddof: the right operand of the subtraction `n - ddof` on the same line, an integer too)
            ddof = next((p[1] for j, p in ints.items() if _SOURCES[j][:3] == _SOURCES[i][:3] and _SOURCES[j][3] == "Sub"
                         and _SOURCES[j][5] == "ddof" and p[1] is not None), None) if "ddof" in _names(src) else None
            count = ddof is not None or "count(" in src or "n" in _names(src)
            if count:
                counts.setdefault(v, []).append((i, side))
            for k in sorted({v + 1, v - 1, _tile(v), *xshape, int(np.prod(xshape))} - {v}):
                if k >= 0:
                    tag = _count_tag(v, k, ddof, count)
                    out.append((("replace", frozenset((i,)), side, lambda _, k=k: k) + tag, i, src,
                                f"`{src}` = {v} read as {k}"
                                + (" (the tile's width: its padded lanes counted)" if tag == ("block",) else "")))
    for v, places in counts.items():        # one count read wrong in every function using it (a kernel's constant)
        if len({_SOURCES[i][1] for i, _ in places}) > 1:
            for k in sorted({v + 1, v - 1, _tile(v)} - {v}):
                ch = {i: (lambda a, b, op, side=side, k=k: _OPS[op](k, b) if side == 0 else _OPS[op](a, k))
                      for i, side in places}
                out.append((("multi", ch) + _count_tag(v, k, None, True), places[0][0], _SOURCES[places[0][0]][
                    4 + places[0][1]], f"the count n = {v} read as {k} at each of its {len(places)} places ("
                    + ", ".join(dict.fromkeys(_SOURCES[i][1] for i, _ in places)) + ")"))
    return out, late


def _count_tag(v, k, ddof, count):
    """The mechanism of an integer operand ``v`` read as ``k`` (a tagged replacement's): a count (``count``;
    ``ddof`` the subtracted correction where known) read as the other convention's, n - 1 for n or n for n - 1, is
    rule 1's Bessel; the tile's width rule 9's block; another count rule 11's reduction; else () (no name)."""
    if not count:
        return ("block",) if k == _tile(v) > v + 1 else ()
    if k == v - 1 + 2 * int(ddof or 0):
        return ("bessel",)
    return ("block",) if k == _tile(v) > v else ("reduction",)


def _saved_statistics(seen, names=("rstd", "rs")):
    """The backward's saved statistics, as (rstd's key, x_hat's key, rstd, x_hat, the forward's mean or None,
    rstd's view broadcasting over x_hat's, x_hat's view with rstd's axes leading): every backward function's
    rstd and xhat (or vhat, x_hat: its arguments or the values it unpacks from the saved tuple; poly_norm's
    lists rs and hs, one per power, stacked; the mean of rstd's size from its own module first, any module's
    else; None for an RMS norm). A saved ``std`` among ``names`` (z_score's) is yielded as rstd = 1 / std."""
    for key in (k for k in seen if k.rsplit(".", 1)[1] in names and "backward" in k):
        base, mod = key.rsplit(".", 1)[0] + ".", key.split(":", 1)[0]
        rstd = seen[key]            # (an argument, or unpacked from the saved tuple), with x_hat's own name
        if key.endswith(".std"):
            with np.errstate(all="ignore"):
                rstd = 1.0 / np.asarray(rstd, dtype=np.float64)
        hkey = next((base + h for h in ("xhat", "vhat", "x_hat", "hs") if base + h in seen), None)
        xhat = seen.get(hkey)
        if xhat is None or np.size(rstd) < 2 or not np.all(np.isfinite(rstd)) or np.any(rstd == 0):
            continue
        means = [(not k.startswith(mod + ":"), np.reshape(v, np.shape(rstd))) for k, v in seen.items()
                 if k.endswith(".mean") and "backward" not in k and np.size(v) == np.size(rstd)]
        mean = min(means, key=lambda t: t[0])[1] if means else None
        # x_hat seen with rstd's axes leading (rstd kept its reduced axes: x_hat's own shape), or rstd's axes at
        # their place among x_hat's (batch_norm's (C,) on axis 1 of (N, C, ...)), else x_hat's values
        # regrouped with rstd's axes leading (a group norm's (N, G))
        keep = np.ndim(rstd) == np.ndim(xhat)
        view = np.shape(xhat) if keep else np.shape(rstd) + (-1,)
        sh = np.shape(rstd) if keep else np.shape(rstd) + (1,)
        core, xs_ = tuple(d for d in np.shape(rstd) if d != 1), np.shape(xhat)
        at = [i for i in range(len(xs_) - len(core) + 1) if xs_[i:i + len(core)] == core] if not keep else []
        if at:
            view, sh = xs_, (1,) * at[0] + core + (1,) * (len(xs_) - at[0] - len(core))
        try:
            np.reshape(xhat, view)
        except ValueError:
            continue
        yield key, hkey, rstd, xhat, mean, sh, view


def _x_of_saved(rstd, xhat, mean, sh, view):
    """(the mean, 0 for an RMS norm; x in x_hat's ``view``, x_hat / rstd + mean) from one backward's saved
    statistics (``_saved_statistics``)."""
    m = np.zeros(np.shape(rstd)) if mean is None else np.asarray(mean)
    return m, np.reshape(xhat, view) / np.reshape(rstd, sh) + np.reshape(m, sh)


def _xhat_places(ops, xhat, names=("xhat",)):
    """The (operation, side) of every backward operation reading x_hat (an operand written as one of ``names``,
    of x_hat's size)."""
    return [(j, side) for j, sides in ops.items() if sides is not None
            for side, src in enumerate(_SOURCES[j][4:]) if src in names and "backward" in _SOURCES[j][1]
            and np.size(np.zeros(sides[side])) == np.size(xhat)]


def _saved_affine_of(seen, base, xhat):
    """(key, w broadcast) of a backward function's saved ``p`` that is x_hat's affine, p = x_hat w + b per channel
    (axis 1; group_norm_silu's SiLU input), checked on its values; (None, None) where there is none."""
    pk = base + "p"
    p = seen.get(pk)
    if p is None or np.shape(p) != np.shape(xhat) or np.ndim(xhat) < 2:
        return None, None
    C = np.shape(xhat)[1]
    shape = (1, C) + (1,) * (np.ndim(xhat) - 2)
    w = next((np.reshape(v, shape) for k, v in seen.items() if k.endswith(".weight") and "backward" not in k
              and np.shape(v) == (C,)), np.ones(shape))
    b = next((np.reshape(v, shape) for k, v in seen.items() if k.endswith(".bias") and "backward" not in k
              and np.shape(v) == (C,)), np.zeros(shape))
    with np.errstate(all="ignore"):
        ok = np.allclose(np.asarray(xhat) * w + b, p, rtol=1e-12, atol=1e-12 * float(np.max(np.abs(p), initial=1.0)))
    return (pk, w) if ok else (None, None)


def _statistics_read(seen, state=None, eps=0.0, training=False):
    """The backward reading the saved statistics at another index (a sample's, a group's, the next row's) and
    recomputing x_hat from them: a backward function's arguments rstd and xhat remapped together, x_hat' =
    (x_hat / rstd + mean - mean') rstd' (mean: the forward's, of rstd's size; 0 for an RMS norm), for each
    index map of ``_index_maps``; and rstd' = (v + eps)^(-1/2) of a running variance ``v`` of ``state`` (the
    call's, before or after its update: mechanism "mode" in a training call, else "running"); as
    _candidates' tuples."""
    out = []
    for key, hkey, rstd, xhat, mean, sh, view in _saved_statistics(seen):
        base = key[:-len("rstd")]
        m, xs = _x_of_saved(rstd, xhat, mean, sh, view)        # x (an RMS norm's)
        pkey, wb = _saved_affine_of(seen, base, xhat)       # a saved p = x_hat w + b (a fused activation's input)
        # the mean and rstd read at the other index together, or (a centred norm) rstd alone, x - mean the row's own
        for stats, fm, fr in ((("rstd", None, True),) if mean is None else
                              (("mean and rstd", True, True), ("rstd", False, True), ("mean", True, False))):
            for f, what in _index_maps(np.shape(rstd)):     # (x_hat' computed when the change is evaluated; each
                # value bound now: the loop over the backward functions rebinds rstd, xs, m and sh)
                xh2 = (lambda v, f=f, fm=fm, fr=fr, xs=xs, m=m, sh=sh, rstd=rstd: np.reshape(
                    (xs - np.reshape(f(m) if fm else m, sh)) * np.reshape(f(rstd) if fr else rstd, sh), np.shape(v)))
                maps = {key: lambda v, f=f, fr=fr, rstd=rstd: f(rstd) if fr else rstd, hkey: xh2}
                if pkey is not None:                    # p recomputed from the same statistics: p + (x_hat' - x_hat) w
                    maps[pkey] = lambda v, xh2=xh2, xhat=xhat, wb=wb: np.asarray(v) + (xh2(xhat) - xhat) * wb
                out.append((("remapk", maps),
                            "read", None, f"the backward's {stats} read at {what} (x_hat recomputed from "
                            f"{'them' if fr and fm else 'it'})"))
        H = np.shape(xhat)[-1] if np.ndim(xhat) else 0
        w = next((np.asarray(v) for k, v in seen.items() if k.endswith(".weight") and np.shape(v) == (H,)), None)
        if w is not None and H >= 4 and np.all(w != 0) and np.all(np.isfinite(w)):
            # x_hat recomputed from the output, (y - b) / w', with the weight read at another index (a memory-
            # efficient backward: x_hat' = x_hat w / w')
            j = np.arange(H)
            maps = [(j % k, f"index j % {k}") for k in (8, 16, 32, 64, 128) if k < H]
            maps += [(np.zeros_like(j), "index 0"), (j[::-1], "the reversed index"), (np.minimum(j + 1, H - 1),
                                                                                     "the next index")]
            out += [(("remapk", {hkey: lambda v, m=m, w=w: np.asarray(v) * (w / w[m])}), "read", None,
                     f"the backward's x_hat recomputed from the output, y / weight, with the weight read at {what}")
                    for m, what in maps]
        for dt in (ml_dtypes.bfloat16, np.float16):     # rstd saved in a 16-bit buffer, x_hat recomputed from it
            r2 = np.asarray(np.asarray(rstd).astype(dt), np.float64)
            if np.all(np.isfinite(r2)) and not np.array_equal(r2, rstd):
                xh2 = (lambda v, r2=r2, xs=xs, m=m, sh=sh: np.reshape((xs - np.reshape(m, sh)) * np.reshape(r2, sh),
                                                                   np.shape(v)))
                out.append((("remapk", {key: lambda v, r2=r2: np.reshape(r2, np.shape(v)), hkey: xh2}), "lowsum",
                            None, f"the backward's rstd saved in a {np.dtype(dt).name} buffer (rounded to nearest; "
                            "x_hat recomputed from it)"))
        if mean is not None:        # the saved mean and rstd passed in each other's slot (one, or both)
            for m2, r2, what in ((rstd, rstd, "the mean read from rstd's buffer"),
                                 (mean, mean, "rstd read from the mean's buffer"),
                                 (rstd, mean, "the mean and rstd read from each other's buffers")):
                xh2 = (lambda v, m2=m2, r2=r2, xs=xs, sh=sh: np.reshape((xs - np.reshape(m2, sh)) * np.reshape(r2, sh),
                                                                     np.shape(v)))
                out.append((("remapk", {key: lambda v, r2=r2: np.reshape(r2, np.shape(v)), hkey: xh2}),
                            "read", None, f"the backward's {what} (x_hat recomputed from them)"))
        for when, st in (state or {}).items():          # rstd from the running variance (x - mean the batch's)
            v = st.get("running_var")
            if v is None or np.size(v) != np.size(rstd):
                continue
            r2 = np.reshape(1.0 / np.sqrt(np.asarray(v, np.float64) + eps), np.shape(rstd))
            xh2 = (lambda v, r2=r2, xs=xs, m=m, sh=sh: np.reshape((xs - np.reshape(m, sh)) * np.reshape(r2, sh),
                                                               np.shape(v)))
            out.append((("remapk", {key: lambda v, r2=r2: r2, hkey: xh2}),
                        "mode" if training else "running", None, f"the backward's rstd taken from the {when} "
                        "running variance, (running_var + eps)^(-1/2) (x_hat recomputed from it)"))
    return out


def _inputs_shifted(case, record, seen):
    """The backward reading one activation-sized input, or the cotangent dy, at another row (a pointer advanced
    before the load: the next row's, the last its own or masked to 0; or wrapping; the previous row's), its
    forward right: every value of a backward function of x's size that follows that input alone, not the other
    inputs nor the cotangents (silu(z) and its derivative for the gate z; tanh(alpha x) for dyt's x; dy and
    g = dy w for the cotangent), remapped together on the (rows, last axis) view; as _candidates' tuples
    (mechanism "layout")."""
    x = record.inputs.get("x")
    if np.ndim(x) < 2 or np.size(x) < 4:
        return []
    ns = case.config.get("normalized_shape")            # (a row: the normalized trailing axes, else the last)
    k = 1 if ns is None or np.ndim(ns) == 0 else max(len(ns), 1)
    R = int(np.prod(np.shape(x)[:-k])) if k < np.ndim(x) else 1
    if R < 2:
        return []
    acts = [k for k, v in record.inputs.items() if np.shape(v) == np.shape(x) and "mask" not in k
            and np.asarray(v).dtype.kind not in "iub"]
    j = np.arange(R)
    shifts = ((np.minimum(j + 1, R - 1), "the next row's (the last its own: a row pointer advanced before the load)"),
              (j + 1, "the next row's (the last row's load masked out of bounds: 0)"),
              ((j + 1) % R, "the next row's (wrapping)"), ((j - 1) % R, "the previous row's (wrapping)"))
    out = []
    # each activation-sized input, and the cotangents (dy: a backward's own load, x's and the statistics' right)
    subjects = acts + (["dy"] if record.cotangents else [])
    for k in subjects:
        if k == "dy":                               # the values following the cotangents and no input
            alone = _unmoved(case, record, seen, acts) - _unmoved(case, record, seen, [], cotangents=True)
        else:
            others = [a for a in acts if a != k]    # (the cotangents moved too: a value of dy is no load of k)
            alone = _unmoved(case, record, seen, others, cotangents=True) - _unmoved(case, record, seen, [k])
        keys = sorted(key for key in alone if "backward" in key.split(":", 1)[1].rsplit(".", 1)[0]
                      and np.size(seen[key]) == np.size(x) and key.rsplit(".", 1)[1] not in ("dx", "return"))
        if not keys:
            continue
        # every such value together, or each alone (x loaded again by the backward, the forward's saved
        # tanh(alpha x) right; one function's argument, not the same array again in the function it calls)
        groups = [keys] + ([[key] for key in keys] if len(keys) > 1 else [])
        for group in groups:
            names = ", ".join(dict.fromkeys(key.split(":", 1)[1] if len(group) == 1 else key.rsplit(".", 1)[1]
                                            for key in group))
            for idx, what in shifts:
                ch = {key: (lambda v, idx=idx: np.reshape(_rows_at(np.reshape(v, (R, -1)), idx), np.shape(v)))
                      for key in group}
                out.append((("remapk", ch), "read", None, f"the backward's values of {k} alone ({names}) read at "
                            f"{what}"))
    return out


def _rows_at(v, idx):
    """The rows ``idx`` of the (rows, last axis) view ``v``, an index past the last row read as 0 (a masked load)."""
    out = np.zeros_like(v)
    ok = idx < len(v)
    out[ok] = v[idx[ok]]
    return out


def _statistics_read_at(seen, ops):
    """One backward operation reading x_hat recomputed from the saved statistics at another index (a
    parameter-gradient kernel loading a neighbouring channel's rstd, or a column-parallel kernel the statistics
    at its column index j mod R), the other places of x_hat right: x_hat' = (x - mean') rstd' with rstd (and the
    mean) read by each map of ``_index_maps``, or (x_hat's view (R, H), rows' statistics) at j mod R of the
    column j; as _candidates' tuples, tagged "layout"."""
    out = []
    for key, hkey, rstd, xhat, mean, sh, view in _saved_statistics(seen):
        places = _xhat_places(ops, xhat, ("xhat", "vhat", "x_hat"))
        if not places:
            continue
        m, xs = _x_of_saved(rstd, xhat, mean, sh, view)
        maps = [(lambda v, f=f: np.reshape(f(v), sh), what) for f, what in _index_maps(np.shape(rstd))]
        R = np.size(rstd)
        if np.shape(xs)[:1] == (R,) and np.ndim(xs) == 2 and np.shape(xs)[1] > 1:     # rows' statistics at j mod R
            col = np.arange(np.shape(xs)[1]) % R
            maps.append((lambda v, col=col: np.reshape(v, -1)[col][None, :], "the column index j (mod the row count "
                         f"{R}) where the row's belongs"))
        for stats, fm in (("rstd", False),) if mean is None else (("mean and rstd", True), ("rstd", False)):
            for g, what in maps:
                xh2 = (xs - (g(m) if fm else np.reshape(m, sh))) * g(rstd)
                fn = (lambda v, xh2=xh2: np.reshape(xh2, np.shape(v)) if np.size(v) == np.size(xh2) else v)
                for j, side in places:
                    out.append((("replace", frozenset((j,)), side, fn, "layout"), j, _SOURCES[j][4 + side],
                                f"x_hat recomputed from the {stats} read at {what}"))
    return out


def _saved_read_at(seen):
    """``_statistics_read``'s index reads for a backward saving a std (z_score's) where the others save rstd:
    the std (and the mean) read at another index of ``_index_maps`` for all its uses, x_hat recomputed from
    them; as _candidates' tuples, tagged "read" (rule 12's layout)."""
    out = []
    for key, hkey, rstd, xhat, mean, sh, view in _saved_statistics(seen, ("std",)):
        m, xs = _x_of_saved(rstd, xhat, mean, sh, view)
        for stats, fm in (("std", False),) if mean is None else (("mean and std", True), ("std", False)):
            for f, what in _index_maps(np.shape(rstd)):     # (x_hat' computed when the change is evaluated)
                xh2 = (lambda v, f=f, fm=fm, xs=xs, m=m, sh=sh, rstd=rstd: np.reshape(
                    (xs - np.reshape(f(m) if fm else m, sh)) * np.reshape(f(rstd), sh), np.shape(v)))
                out.append((("remapk", {key: f, hkey: xh2}), "read", None,
                            f"the backward's {stats} read at {what} (x_hat recomputed from them)"))
    return out


def _last_at_first(v):
    """A statistic every slice stored at slot 0 (the store's offset left out): slot 0 the last slice's value, the
    other slots their zero-initialised 0."""
    a = np.zeros(np.shape(v))
    if a.size:
        a.reshape(-1)[0] = np.reshape(v, -1)[-1]
    return a


def _stored_statistics(seen, op):
    """The returned statistic (rstd) stored at another index (every slice's store at slot 0, the last one kept
    and the other slots 0; or an index map of ``_index_maps``), y right (the forward's own register), the backward
    reading it from the returned buffer with x_hat recomputed from it; as _candidates' tuples ("read": rule 12's
    layout)."""
    out = []
    for key, hkey, rstd, xhat, mean, sh, view in _saved_statistics(seen):
        fkey = f"{op}:forward.{key.rsplit('.', 1)[1]}"
        if fkey not in seen or np.size(seen[fkey]) != np.size(rstd) or hkey.endswith(".hs"):
            continue
        m, xs = _x_of_saved(rstd, xhat, mean, sh, view)
        maps = [(_last_at_first, "slot 0 (each slice's store without its offset: the last slice's value there, the "
                 "other slots 0)")] + _index_maps(np.shape(rstd))
        for f, what in maps:
            xh2 = (lambda v, f=f, xs=xs, m=m, sh=sh, rstd=rstd: np.reshape(
                (xs - np.reshape(m, sh)) * np.reshape(f(np.reshape(rstd, np.shape(seen[fkey]))), sh), np.shape(v)))
            out.append((("remapk", {fkey: lambda v, f=f: f(np.asarray(v, dtype=np.float64)), hkey: xh2}), "read",
                        None, f"the returned {key.rsplit('.', 1)[1]} stored at {what}, y right, the backward reading "
                        "it from the returned buffer (x_hat recomputed from it)"))
    return out


def _uncentred(seen, ops):
    """A centred norm's backward with x_hat read uncentred, x * rstd (the mean's term of x_hat = (x - mean)
    rstd dropped: a projection on sum(g x) where sum(g (x - mean)) belongs), at one operation of a backward
    function reading x_hat, or at each of them (dx, dweight and dbias); or read unnormalized, x - mean (x for an
    RMS norm), or normalized twice, x_hat * rstd, at one operation; as _candidates' tuples (mechanism
    "backward")."""
    out = []
    for key, hkey, rstd, xhat, mean, sh, view in _saved_statistics(seen):
        func = key.split(":", 1)[1].rsplit(".", 1)[0]
        # x_hat read unnormalized, x_hat / rstd (x - mean: rstd's factor left out, a parameter gradient's
        # sum(dy (x - mean)) where sum(dy x_hat) belongs), at one operation
        inv = np.broadcast_to(np.reshape(rstd, sh), np.reshape(xhat, view).shape).reshape(np.shape(xhat))
        un = (lambda v, r=inv: v / np.reshape(r, np.shape(v)) if np.size(v) == np.size(r) else v)
        out += [(("replace", frozenset((j,)), side, un), j, "xhat", f"`xhat` read unnormalized, x - mean (rstd's "
                 f"factor left out) in `{_SOURCES[j][4]} {_SYM[_SOURCES[j][3]]} {_SOURCES[j][5]}`")
                for j, side in _xhat_places(ops, xhat)]
        # or normalized twice, x_hat * rstd (the rstd of a sum(dy (x - mean)) form applied to sum(dy x_hat))
        tw = (lambda v, r=inv: v * np.reshape(r, np.shape(v)) if np.size(v) == np.size(r) else v)
        out += [(("replace", frozenset((j,)), side, tw), j, "xhat", f"`xhat` normalized twice, x_hat * rstd (rstd's "
                 f"factor applied again) in `{_SOURCES[j][4]} {_SYM[_SOURCES[j][3]]} {_SOURCES[j][5]}`")
                for j, side in _xhat_places(ops, xhat)]
        if mean is None:
            continue
        shift = np.broadcast_to(np.reshape(mean, sh) * np.reshape(rstd, sh),       # mean * rstd, x_hat's shape
                                np.reshape(xhat, view).shape).reshape(np.shape(xhat))
        fn = (lambda v, s=shift: v + np.reshape(s, np.shape(v)) if np.size(v) == np.size(s) else v)
        places = _xhat_places(ops, xhat, ("xhat", "vhat", "x_hat"))
        for j, side in places:
            out.append((("replace", frozenset((j,)), side, fn), j, "xhat",
                        f"`xhat` read uncentred, x * rstd (its mean's term dropped) in `{_SOURCES[j][4]} "
                        f"{_SYM[_SOURCES[j][3]]} {_SOURCES[j][5]}`"))
        if len(places) > 1:
            ch = {j: (lambda a, b, op, side=side, fn=fn: _OPS[op](fn(a), b) if side == 0 else _OPS[op](a, fn(b)))
                  for j, side in places}
            out.append((("multi", ch), places[0][0], "xhat", f"`xhat` read uncentred, x * rstd, at each of its "
                        f"{len(places)} places in the backward ({func}'s saved x_hat)"))
    return out


def _index_maps(shape):
    """(f, what): a statistic array of ``shape`` read at another index: the first or the next index of each
    axis longer than one, the flat index j read at j % k or j // k (k a divisor of the size)."""
    out = []
    for a, s in enumerate(shape):
        if s > 1:
            out.append((lambda v, a=a: _first(v, a), f"the first index of its axis {a}"))
            out.append((lambda v, a=a: _first(v, a, last=True), f"the last index of its axis {a}"))
            out.append((lambda v, a=a: _next(v, a), f"the next index of its axis {a} (wrapping)"))
            out.append((lambda v, a=a: _next(v, a, clamp=True), f"the next index of its axis {a} (the last its own)"))
    size = int(np.prod(shape))
    sizes = [s for s in shape if s > 1]
    if len(sizes) > 1:              # (rows, groups) stored group-major and read row-major, or the reverse
        R, G = size // sizes[-1], sizes[-1]
        out.append((lambda v: np.reshape(np.reshape(v, (R, G)).T, np.shape(v)),
                    f"the transposed index (stored as ({G}, {R}), read as ({R}, {G}))"))
        out.append((lambda v: np.reshape(np.reshape(v, (G, R)).T, np.shape(v)),
                    f"the transposed index (stored as ({R}, {G}), read as ({G}, {R}))"))
    j = np.arange(size)
    if len(sizes) > 1:              # the next flat index, wrapping (a pointer into (rows, groups) advanced by one)
        out.append((lambda v, idx=(j + 1) % size: np.reshape(np.reshape(v, -1)[idx], np.shape(v)),
                    "the next flat index (wrapping)"))
        out.append((lambda v, idx=np.minimum(j + 1, size - 1): np.reshape(np.reshape(v, -1)[idx], np.shape(v)),
                    "the next flat index (the last its own: a pointer advanced before the load)"))
    for k in range(2, size):
        maps = ((j % k, f"the flat index j % {k}"), (j // k, f"the flat index j // {k}")) if size % k == 0 else ()
        if size % k == 0 or k & (k - 1) == 0:    # the first of each block of k (a block's value hoisted)
            maps += ((j // k * k, f"the first index of each block of {k} (j // {k} * {k})"),)
        for idx, what in maps:
            out.append((lambda v, idx=idx: np.reshape(np.reshape(v, -1)[idx], np.shape(v)), what))
    return out


def _group_length(case, record):
    """The length of a group of the hidden dimension (``group_size`` of the configuration, or the row over
    num_groups / groups), or None where the op groups nothing."""
    H = np.shape(record.inputs["x"])[-1] if np.ndim(record.inputs.get("x")) else 0
    gs = case.config.get("group_size")
    G = case.config.get("num_groups") or case.config.get("groups")
    return gs if isinstance(gs, int) and gs else (H // G if isinstance(G, int) and G and H % G == 0 else None)


def _x_counts(xshape):
    """The counts a kernel may take from x's shape where a slice's belongs: each size, each trailing product (a
    sample's, a channel's positions), x's size over each size (numel / shape[0] where numel / shape[1] belongs)."""
    numel = int(np.prod(xshape, dtype=np.int64))
    return ({int(s) for s in xshape} | {int(np.prod(xshape[j:], dtype=np.int64)) for j in range(1, len(xshape))}
            | {numel // int(s) for s in xshape if s > 1}) - {0, 1}


def _counts(n, sizes):
    """The counts a reduction over n values (of axes of ``sizes``) may take instead: one more or less, the
    product of some of the axes' sizes (several axes: the count taken from the wrong axes), the tile's width (the
    next power of two: its padded lanes counted)."""
    parts = {int(np.prod(c)) for k in range(1, len(sizes)) for c in itertools.combinations(sizes, k)}
    return sorted({n + 1, n - 1, _tile(n), *parts, *_padded(n, sizes)} - {n, 0})


def _padded(n, sizes):
    """The counts of a reduction over n values (of axes of ``sizes``) whose trailing run of axes (the last
    one, the last two, ...: a sample's positions) a kernel pads up to a whole number of tiles of 16 ... 128
    (its masked lanes counted)."""
    out = set()
    for j in range(len(sizes) or 1):
        t = int(np.prod(sizes[j:])) if sizes else n
        out |= {(n // t) * (-(-t // b) * b) for b in (16, 32, 64, 128) if t and n % t == 0 and t % b}
    return out - {n}


def _count_change(n, n2, padded):
    """The changed value of a count candidate: (n, n2), with "tile" where n2 is among ``padded`` (_padded: the
    trailing positions padded to whole tiles, rule 9's block)."""
    return (n, n2, "tile") if n2 in padded else (n, n2)


def _tile(n):
    """The power-of-two tile a kernel loads n values in (n itself for a power of two)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def _first(a, axis=0, last=False):
    """``a`` with every index of its ``axis`` (the leading one) reading index 0 (``last``: the last index)."""
    return np.repeat(np.take(np.asarray(a), [-1 if last else 0], axis=axis), np.shape(a)[axis], axis=axis)


def _next(a, axis=0, clamp=False):
    """``a`` with index i of its ``axis`` (the leading one) reading index i + 1 (the last reading index 0, or
    with ``clamp`` its own)."""
    n = np.shape(a)[axis]
    return np.take(np.asarray(a), np.minimum(np.arange(1, n + 1), n - 1) if clamp else (np.arange(n) + 1) % n,
                   axis=axis)


def _previous(a, axis=0):
    """``a`` with index i of its ``axis`` reading index i - 1 (index 0 its own)."""
    return np.take(np.asarray(a), np.maximum(np.arange(np.shape(a)[axis]) - 1, 0), axis=axis)


def _blown_up(record, res):
    """Whether a change leaves some failing array non-finite on every element: a division by zero matches any
    NaN or inf the kernel returns, so it is no explanation of one."""
    for part, name in record.failing:
        v = getattr(res, part).get(name)
        if v is not None and np.size(v) and not np.isfinite(np.asarray(v, dtype=np.float64)).any():
            return True
    return False


def mutation(case, record, fit_ratio):
    """One operation of the specification changed, one operand read from another value, or one statistic
    read at one index (module docstring) reproducing the failing step: an explanation {"mechanism",
    "text"} (mechanism None: explained, by no mechanism of the list), or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > MUTATION_SIZE or not record.failing \
            or not importlib.util.find_spec(f"refnorm.specs.{case.op}"):
        return None
    forward_only = any(p == "outputs" for p, _ in record.failing)
    try:
        cands, fwd = _candidates(case, record, forward_only)
    except CODE_ERRORS as e:        # a defect of the search itself, not of the call: said, never silently skipped
        warnings.warn(f"refnorm's mutation search failed on {case.id} ({type(e).__name__}: {e}); the failure is "
                      "diagnosed without it", RuntimeWarning, stacklevel=2)
        return None
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        return None
    if all(p == "grads" and n != "x" for p, n in record.failing):
        # parameter gradients alone: their reductions' operands read from another value first (a dbias summed
        # from g = dy w, the dx pass's): past the cap otherwise, behind every operation of dx's formula
        first = ("redread", "redcall")
        cands = [c for c in cands if c[1] in first] + [c for c in cands if c[1] not in first]
    from .. import registry
    main = registry.get(case.op).outputs[0]
    failing_outs = {n for p, n in record.failing if p == "outputs"}
    try:
        plain = _evaluate(case, record, None)
    except Exception:                                   # noqa: BLE001 - a call the instrumented spec refuses
        plain = None
    if not forward_only or (failing_outs and len(failing_outs) == len(record.failing)
                            and (main not in failing_outs or record.cotangents)):
        # (the main output too where the gradients pass: the forward kernel alone deviating, the backward its own)
        # a value computed apart from the rest, the rest right: the backward's own recomputation of a forward
        # value (its gradients with the plain forward's outputs), or a returned statistic (only the failing
        # outputs from the changed evaluation: the values the kernel goes on with are right)
        apart = "grads" if not forward_only else "outputs"
        if plain is not None:       # (the statistics' index reads first: a few, and past the cap otherwise)
            cands = [(t, i, ch, what, plain, apart) for t, i, ch, what in cands if i == "moments"] + cands + [
                (t, i, ch, what, plain, apart) for t, i, ch, what in cands
                if t[0] in ("mutate", "replace") and i in fwd or t[0] == "remapk" and i == "eps"]
    ctx = {}
    # a forward change reproducing every failing output where the gradients fail too, by a backward the
    # specification's hand-derived one is not of the changed forward (a kernel differentiating its own forward)
    loose = forward_only and any(p == "grads" for p, _ in record.failing)
    fallback = None
    # (a change taking the failing arrays NEAR times closer than the reference is judged again within its own
    # arithmetic's conditioning: perturbed_bound)
    perts, perturbed, wide = [perturbed_inputs(case, record, k) for k in range(PATTERNS)], 0, []
    perts = None if perts[0] is None else perts
    missed = 0.0 if plain is None else max((fit_ratio(record.got[p][n], getattr(plain, p).get(n), record.E[p][n])
                                            for p, n in record.failing if getattr(plain, p).get(n) is not None
                                            and np.shape(getattr(plain, p)[n]) == np.shape(record.got[p][n])),
                                           default=0.0)
    for target, i, changed, what, *keep in cands[:MUTATIONS_MAX]:
        try:
            res = _evaluate(case, record, target)
        except Exception:                               # noqa: BLE001 - a change the spec cannot go on from
            continue
        res = _kept(res, keep, failing_outs)
        r = step_ratio(record, res, fit_ratio, plain=plain, stop=max(1.0, missed / NEAR))
        if 1 < r and r * NEAR <= missed and perts is not None and perturbed < PERTURBED_MAX:
            # a near miss judged again within the changed arithmetic's own conditioning (perturbed_bound)
            perturbed += 1
            try:
                spread = [_kept(_evaluate(case, record, target, *pert), keep, failing_outs) for pert in perts]
            except Exception:                           # noqa: BLE001 - a change the spec cannot go on from
                spread = None
            if spread is not None and step_ratio(record, res, fit_ratio, plain=plain, spread=spread) <= 1 \
                    and not _blown_up(record, res):
                # (kept while the search goes on: a change fitting within the plain bound is the answer, and
                # near misses of different mechanisms that all fit so widely tell nothing apart)
                wide.append(_explained(case, record, ctx, target, i, changed, what, keep, failing_outs))
        if r <= 1 and not _blown_up(record, res):
            return _explained(case, record, ctx, target, i, changed, what, keep, failing_outs)
        if loose and fallback is None and not keep and fits_step(record, res, fit_ratio, ("outputs", "state"), plain) \
                and not _blown_up(record, res):
            fallback = (target, i, changed, what, keep)
    if wide:
        return wide[0] if len({e["mechanism"] for e in wide}) == 1 else None
    if fallback is None:
        return None
    e = _explained(case, record, ctx, *fallback, failing_outs)
    return {**e, "text": e["text"].replace(
        "reproduces every failing array", "reproduces every failing output (the failing gradients are not the "
        "specification's backward of that forward: a backward differentiating the kernel's own forward)")}


def _kept(res, keep, failing_outs):
    """A changed evaluation as the step compares it: where the change is a value computed apart (``keep``:
    the plain evaluation and what is apart), the plain outputs with its gradients (the backward's own
    recomputation) or the plain evaluation with its failing outputs (a returned statistic computed apart)."""
    if keep and keep[1] == "grads":
        return dataclasses.replace(res, outputs=keep[0].outputs, state=keep[0].state)
    if keep:
        return dataclasses.replace(keep[0], outputs={**keep[0].outputs, **{n: res.outputs[n] for n in failing_outs
                                                                           if n in res.outputs}})
    return res


def _own_product(base, mod, func, left, right, src):
    """Whether a value named ``src`` (of any function of the evaluation ``base``) equals ``left * right`` of
    ``func`` (each operand evaluated on ``func``'s recorded values): a product's operand read from the product's
    own result."""
    names = {n: base[f"{mod}:{func}.{n}"] for n in _names(f"{left} {right}") if f"{mod}:{func}.{n}" in base}
    try:
        with np.errstate(all="ignore"):
            prod = np.asarray(eval(f"({left}) * ({right})", {"np": np, "__builtins__": {}}, names),  # noqa: S307
                              dtype=np.float64)
    except Exception:                                   # noqa: BLE001 - an operand not of recorded values
        return False
    return any(key.rsplit(".", 1)[1] == src and np.shape(v) == prod.shape
               and np.allclose(np.asarray(v, dtype=np.float64), prod, rtol=1e-12, atol=0.0, equal_nan=True)
               for key, v in base.items())


def _explained(case, record, ctx, target, i, changed, what, keep, failing_outs):
    """The explanation {"mechanism", "text"} of a change that fits (``mutation``); ``ctx`` caches the values
    of the parameters, the gate and the keep-mask (computed once, at the first fit)."""
    if not ctx:
        base = {}
        _evaluate(case, record, ("record", base))
        acts = [k for k in record.inputs if k not in PARAMETERS]
        unmoved = _unmoved(case, record, base, acts, cotangents=True)
        # (a bare name is a value of the parameters alone only where no function's value of that name moves with
        # the activations: silu's p, the SiLU input, is no parameter value because some other function's p is)
        still = {k.rsplit(".", 1)[1] for k in unmoved} - {k.rsplit(".", 1)[1] for k in set(base) - unmoved}
        running = _state_values(case, record, base)
        # values of the parameters alone, and of the running statistics alone (an eval call's; none are parameters)
        ctx["base"] = base
        ctx["params"] = (still - running) | set(PARAMETERS)
        ctx["state"] = still & running
        ctx["gate"] = _gate_values(case, record) if "z" in record.inputs else set()
        # the values that move with the gate input z (the gated value v = x silu(z), ...)
        ctx["zmoved"] = ({k.rsplit(".", 1)[1] for k in set(base) - _unmoved(case, record, base, ["z"])}
                         if "z" in record.inputs else set())
        masks = [k for k in record.inputs if "mask" in k]
        # the dropout's values: those that move with a keep-mask and not with the other activations (the
        # factor c = mask / (1 - p), not the sum it scales), the mask itself, its probability p
        others = [k for k in acts if k not in masks]
        ctx["drop"] = ({k.rsplit(".", 1)[1] for k in _unmoved(case, record, base, others)
                        - _unmoved(case, record, base, masks)} | set(masks) | {"p"}) if masks else set()
    gate, params, drop = ctx["gate"], ctx["params"], ctx["drop"]
    read = re.search(r"read from `(\w+)`", what) if target[0] == "replace" else None
    if read and _names(changed) & ctx["zmoved"] and read.group(1) not in ctx["zmoved"] \
            and read.group(1) not in ("z", "s"):
        # an operand that carries the gate's factor read from a value without it (x where v = x silu(z) belongs):
        # the gate's factor left out there, the gate's (rule 3)
        gate = gate | _names(changed)
    if target[0] in ("mutate", "replace", "multi", "both") and isinstance(i, int) and _names(changed) \
            and _names(changed) <= ctx["state"] and "eps" not in _names(changed) and "backward" not in _SOURCES[i][1]:
        mod, func, line, op, left, right = _SOURCES[i]
        return {"mechanism": "running", "text": f"the specification with {what} in `{left} {_SYM[op]} {right}` "
                f"({func}, refnorm/specs/{mod}.py line {line}; a value of the running statistics alone) reproduces "
                "every failing array"}
    if i == "arg":                                  # an argument read from another value
        func = target[1].split(":", 1)[1].rsplit(".", 1)[0]
        mech = "backward" if "backward" in func or all(p == "grads" for p, _ in record.failing) else None
        arg, src = (changed or " ").split(" ", 1)
        if arg.startswith("d") and arg[1:] in record.cotangents and src in record.got.get("outputs", {}):
            mech = "layout"     # the backward's cotangent slot given a returned output's buffer (rule 12)
        return {"mechanism": mech, "text": f"the specification with {what} (refnorm/specs/"
                f"{target[1].split(':', 1)[0]}.py) reproduces every failing array"}
    if i == "activation":                           # a gate's function (rule 3), another activation: no name
        return {"mechanism": "gate" if "z" in record.inputs else None,
                "text": f"the specification with {what} reproduces every failing array"}
    if i in ("uncentred", "otherstat"):             # another normalizer's equation (rule 16)
        return {"mechanism": "semantics", "text": f"the specification with {what} reproduces every failing array"}
    if i == "argbuf":                               # one argument read from another's buffer (rule 12)
        return {"mechanism": "layout", "text": f"the specification with {what} reproduces every failing array"}
    if i == "tilerows":                             # a reduction over a tile of slices: the scale's or the block's
        src = _SOURCES[min(target[1])]
        return {"mechanism": changed, "text": f"the specification with {what} (refnorm/specs/{src[0]}.py line "
                f"{src[2]}) reproduces every failing array"}
    if i in ("recip", "estimate"):                  # a reciprocal held in the 16-bit dtype, estimated (rule 8)
        return {"mechanism": "precision", "text": f"the specification with {what} reproduces every failing array"}
    if i == "eps":                                  # eps moved to a named statistic
        return {"mechanism": "eps", "text": f"the specification with {what} reproduces every failing array"}
    # a sum accumulated in the 16-bit dtype; a slice's reduction losing its last lanes (the block); a reduction
    # over a part of each slice (the group it spans)
    by_kind = {"lowsum": "precision", "tail": "block", "part": "group", "rowblock": "block", "welford": "merge",
               "welford_shift": "one_pass", "chunks": "merge",
               "ptail": "reduction"}
    if i in by_kind and target[0] in ("remapk", "remap"):      # a named value's change (the deviations in the 16-bit dtype)
        return {"mechanism": by_kind[i], "text": f"the specification with {what} reproduces every failing array"}
    if i in by_kind:
        src = _SOURCES[min(target[1]) if isinstance(target[1], frozenset) else target[1]]
        return {"mechanism": by_kind[i], "text": f"the specification with `{src[4]}`'s {src[3]} ({src[1]}, "
                f"refnorm/specs/{src[0]}.py line {src[2]}) {what} reproduces every failing array"}
    if i == "shift":                                # a variance about a shift, uncorrected: an expansion's term lost
        return {"mechanism": "one_pass", "text": f"the specification with {what} reproduces every failing array"}
    if i == "more":                                 # over one more axis: the group's count read as 1 (a group
        src = _SOURCES[min(target[1])]              # norm's), else the statistics pooled over more (reduction)
        gs, H = case.config.get("group_size"), np.shape(record.inputs["x"])[-1] if np.ndim(record.inputs["x"]) else 0
        groups = (case.config.get("num_groups"), case.config.get("groups"),
                  H // gs if isinstance(gs, int) and gs and H % gs == 0 else None)
        mech = "group" if changed is not None and changed in groups else "reduction"
        return {"mechanism": mech, "text": f"the specification with `{src[4]}`'s {src[3]} ({src[1]}, "
                f"refnorm/specs/{src[0]}.py line {src[2]}) {what} reproduces every failing array"}
    if i == "moments":                              # the statistics read at another index: an index misread
        return {"mechanism": "layout", "text": ("the backward, recomputing the forward's values, with " if keep
                                                and keep[1] == "grads" else f"the returned "
                                                f"{', '.join(sorted(failing_outs))} computed apart (the backward "
                                                "right), with " if keep else "the specification with ")
                + f"{what} reproduces every failing array"}
    if i in ("mode", "running"):                    # the backward's rstd from the running variance
        return {"mechanism": i, "text": f"the specification with {what} reproduces every failing array"}
    if i == "read":                                 # the statistics read at another index: an index misread
        return {"mechanism": "layout", "text": f"the specification with {what} reproduces every failing array"}
    if i == "average":                              # a sum averaged: across the slices (rule 11), a term of the
        src = _SOURCES[target[1]]                   # backward's formula (rule 15), else no mechanism named
        # (changed: keepdims, a slice's own sum; else a sum across the slices: a parameter gradient's, rule 11);
        # a forward slice's own sum averaged is another normalizer's equation (the p-norm as a power mean, the
        # L2 norm as an RMS: rule 16)
        mech = "reduction" if not changed else "backward" if "backward" in src[1] else "semantics"
        return {"mechanism": mech, "text": f"the specification with `{src[4]}`'s {src[3]} (over {src[5]}, {src[1]}, "
                f"refnorm/specs/{src[0]}.py line {src[2]}) {what} reproduces every failing array"}
    if i == "redcall":                              # ... from a calling backward function's value: the backward's
        mod, func, line = _SOURCES[target[1]][:3]   # formula (the gate's where its values or dz say so)
        m = _mechanism(case, record, target[1], changed, gate, params, drop)
        return {"mechanism": "gate" if m == "gate" else "backward",
                "text": f"the specification with {what} ({func}, refnorm/specs/{mod}.py line {line}) reproduces "
                        "every failing array"}
    if i == "redread":                              # a reduction's operand read from another value
        mod, func, line = _SOURCES[target[1]][:3]
        return {"mechanism": _mechanism(case, record, target[1], changed, gate, params, drop),
                "text": f"the specification with {what} ({func}, refnorm/specs/{mod}.py line {line}) reproduces "
                        "every failing array"}
    if i in ("count", "reduce"):                   # what a reduction spans: its count, its axes
        mech = "bessel" if changed is not None and changed[1] == changed[0] - 1 else "reduction"
        if changed is not None and (changed[1] == _tile(changed[0]) > changed[0] or changed[2:] == ("tile",)):
            mech = "block"                          # divided by the tile's width, n + 1 too: its padded lanes counted
        if changed is not None and _group_length(case, record) == changed[0] < changed[1] \
                and changed[1] == np.shape(record.inputs["x"])[-1]:
            mech = "group"                          # a group's count read as the row's (rule 10)
        if changed is not None and case.op in ("group_norm", "group_norm_silu") and np.ndim(record.inputs["x"]) > 2:
            xs = np.shape(record.inputs["x"])
            S, cpg = int(np.prod(xs[2:])), xs[1] // int(case.config.get("num_groups", 1) or 1)
            if cpg > 1 and changed[:2] == (cpg * S, S):
                mech = "group"                      # one channel's count where its group's belongs (rule 10)
        if isinstance(target[1], int) and _SOURCES[target[1]][3] == "max" and case.op in QUANT_OPS:
            mech = "quant_scale"                    # a quantizer's amax over other values: its scale (rule 5)
        where = ("the specification with" if i == "count" or isinstance(target[1], frozenset) else
                 f"the specification with `{_SOURCES[target[1]][4]}`'s {_SOURCES[target[1]][3]} (over "
                 f"{_SOURCES[target[1]][5]}, {_SOURCES[target[1]][1]}, refnorm/specs/{_SOURCES[target[1]][0]}.py "
                 f"line {_SOURCES[target[1]][2]})")
        return {"mechanism": mech, "text": f"{where} {what} reproduces every failing array"}
    if i is None:                                   # a statistic read at one index: an index misread
        return {"mechanism": "layout", "text": f"the specification with {what} (refnorm/specs/"
                f"{target[1].split(':', 1)[0]}.py) reproduces every failing array"}
    mod, func, line, op, left, right = _SOURCES[i]
    sym = _SYM[op]
    mech = target[4] if target[0] == "replace" and len(target) > 4 else None     # a tagged replacement's own
    if target[0] == "mutate" and target[2] == "drop_right" and op == "Div" and "count(" in right \
            and "backward" not in func:     # a slice's sum never divided by its count: the L2 norm's equation
        mech = "semantics"
    if target[0] == "replace" and target[3] is TRANSFORMS[1][0] and _is_root(changed) and not keep:
        # a root read as its square: the root left out (1 / (var + eps) for the rstd) is another equation in the
        # forward (rule 16, whatever the root's argument holds: eps inside it is not eps's placement), the
        # backward's formula in the backward alone (rule 15)
        mech = "backward" if "backward" in func or not any(p == "outputs" for p, _ in record.failing) else "semantics"
    if target[0] == "replace" and target[3] is TRANSFORMS[0][0] and _names(changed) - {"eps"} and not keep:
        # (and the reverse: a statistic, eps added or not, read as its square root: one root too many, rsqrt where
        # the reciprocal belongs; rule 16's root, eps's placement unchanged; eps alone read so is eps's value)
        mech = "backward" if "backward" in func or not any(p == "outputs" for p, _ in record.failing) else "semantics"
    if target[0] == "mutate" and target[2] == "times" and op == "Div" and _is_constant(left):
        # (a reciprocal 1 / s computed as s: the statistic inverted whole, whatever s holds (eps inside it is not
        # eps's placement): the backward's formula in the backward alone (rule 15), another equation in the
        # forward (rule 16))
        mech = "backward" if "backward" in func or not any(p == "outputs" for p, _ in record.failing) else "semantics"
    if target[0] in ("multi", "both"):
        return {"mechanism": target[2] if target[0] == "multi" and len(target) > 2 else
                _mechanism(case, record, i, changed, gate, params, drop),
                "text": f"the specification with {what} (refnorm/specs/{mod}.py) reproduces every failing array"}
    if read and op == "Mult" and target[0] == "replace" \
            and set(re.findall(r"[A-Za-z_]\w*", right if target[2] == 0 else left)) & set(PARAMETERS) \
            and _own_product(ctx["base"], mod, func, left, right, read.group(1)):
        mech = "affine"     # a product's operand read from the value it makes: the parameter applied twice (rule 13)
    where = ("the specification with" if not keep else "the backward, recomputing the forward's value, with"
             if keep[1] == "grads" else f"the returned {', '.join(sorted(failing_outs))} computed apart, with")
    return {"mechanism": mech or _mechanism(case, record, i, changed, gate, params, drop),
            "text": f"{where} {what} in `{left} {sym} {right}` ({func}, refnorm/specs/{mod}.py "
                    f"line {line}) reproduces every failing array"}
