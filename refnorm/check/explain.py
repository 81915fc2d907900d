"""Explaining a failure by the arithmetic of the specification, not by a list of known bugs (issue 33).

For a failing array the diagnosis searches structured deviations of the op's own formula and keeps
those that reproduce the backend's result within the check's own bound (``fits``: the excess of got
over the explained value, divided by the bound, is at most 1 on every element; where the bound is 0, an
exactly known value, four units of the stored dtype of the explained value):

* **a recognizable factor** on the whole array: got ~ f * ref with f one of the constants the case
  defines (n / (n - 1) and its square root: the Bessel convention; 1 / (1 - p): dropout's scale; the
  ratios of the quantized dtypes' maxima, 448 / 240: float8 e4m3fn vs e4m3fnuz; 2 and 1/2);
* **a configuration value off** (eps missing, added twice, squared, a default eps, added to the slice's
  sum instead of its mean (eps / n) or n eps; group_norm's group count (group: the count misread, or the
  count and size swapped, the statistics of the other shape written in the kernel's own order into the
  returned buffers), gated_norm's group_size; the weight offset; momentum's weights swapped or a
  cumulative average; a flag flipped: norm_before_gate, residual_in_fp32, prenorm; layer_norm's
  statistics for rms_norm's; the quantizers' scale_ub or min_scale ignored, another quantized dtype's
  range, another scale rule; an activation-sized input read column-major):
  the specification re-evaluated with it reproduces every failing array of the step and keeps every
  passing one within its bound;
* **a slice's statistics changed** (the row norms: layer_norm, rms_norm and the channel norms in
  training): y, dx, dweight and the statistics reproduced by their formulas with the mean and/or rstd
  rounded to bfloat16 or float16 (to nearest or toward zero: rstd saved in the input dtype), the Bessel
  divisor, eps outside the root, a tail block dropped (the first m values only), a power-of-two block's
  masked lanes entering the variance, its length as the divisor or the next slice's values loaded into them, a
  vector loop's remainder as one overlapping full vector (lanes counted twice), rms_norm's statistics for
  layer_norm's, or the backward's x_hat recomputed from the returned y; a slice reduced in chunks of
  2^k values whose partials are merged with equal weights (the last chunk partial: block); batch_norm's
  statistics of its first samples only (reduction) or merged from per-sample partials with the
  between-samples term unweighted or left out (merge);
* **the folded affine** (y = x a + b, a = rstd w, b = bias - mean a) with one factor missing or the bias
  multiplied by rstd or w too (affine);
* **the weight applied before the statistics** (layer_norm, rms_norm: y = norm(x * w), affine); the whole
  affine so, none after (adaptive_layer_norm's modulation, layer_norm's weight and bias: semantics);
* **dyt otherwise**: alpha outside the tanh (semantics), the bias read at the row's index (layout);
* **add_norm's dropout elsewhere** (dropout): dx without the keep-mask, the mask and 1/(1 - p) on x +
  residual, the kept values scaled by 1 / mean(mask), a branch's 1/(1 - p) missing;
* **a layout misread** (the channel norms): x, dy and the results indexed with the other layout's
  strides (NCHW memory as channels_last or the reverse) reproduce every failing array;
* **a parameter gradient from the wrong product** (dweight = sum(dy * t) with t the returned y, y less
  the bias, x, or x less its mean, where x_hat belongs; every parameter gradient from a returned gradient
  where the cotangent belongs: dx written over dy's buffer) and **batch_norm's running_var with another
  count's Bessel factor** (the batch alone, the positions alone, none);
* **partial sums rounded** (layer_norm / rms_norm dweight, dbias: blocks of B rows rounded to the 16-bit
  dtype before the final sum) and **dyt's tanh rounded** to the 16-bit dtype before the affine;
* **a gradient reduced once more** (over one more axis, or a group norm's per-channel parameter over its
  group) and, in the group norms' statistics search, a tail of each channel's positions dropped;
* **a fused activation at another point** (group_norm_silu): the SiLU before the affine or before the
  norm, the bias after it, the SiLU left out, or a backward that ignores it;
* **the other mode** (batch_norm, instance_norm): an array that the specification computes in the other
  mode reproduces (an eval call's dx by the training formula);
* **a statistic returned as a power of itself** (std or 1/(var + eps) where rstd belongs) and **y or dx
  scaled on every slice by a power of its rstd** (x / rsqrt(ms) where x * rsqrt(ms) belongs);
* **rows missing from a sum** (layer_norm / rms_norm dweight, dbias): the terms of the last / first k
  rows or of part of every tile of 2^k rows left out or counted twice (localize.missing_rows); for the
  ops whose slices along x's first axis are independent (SLICE_OPS: group_norm's samples, dyt's rows, ...)
  the same search over those slices' terms, each the specification evaluated on its slice alone, and
  those terms summed in another index order (an instance norm's (N, C) partials reduced as (C, N): layout);
* **dx's terms** for the centred and uncentred norms (layer_norm, rms_norm, group_norm, batch_norm and
  instance_norm in training): with g = dy * w and x_hat the normalized input of one slice of n values,
      dx = rstd (a g + b mean(g) + c x_hat mean(g x_hat))
  is fitted by least squares over the failing slices; the spec's (a, b, c) is (1, -1, -1) (rms_norm:
  (1, 0, -1)); coefficients rounded to multiples of 1/2 that differ from it and fit within the bound
  explain dx ("the mean(g) term counted twice: coefficients 1, -2, -1"); with a weight, the specification's
  coefficients with g = dy (the weight left out of dx), g = dy w^2 (applied twice) or the projection term
  times the weight again explain it too;
* **quantized outputs at the kernel's own scale** (norm_quant, norm_quant_block; explain_quant.py): y
  quantized again with the returned scale(s); codes that follow from a failing scale are explained by the
  scale's deviation (another maximum, amax scope or tensor, scale_ub / min_scale placement, rounding),
  else by the codes' own (multiplied, double rounding, toward zero, saturation).

Where these leave a failing array unexplained, the specification itself is searched as a program
(spec_search.py): **one named intermediate rounded** (to the 16-bit case dtype, bfloat16/float16 for a
float32 case, float32 for a float64 one; to nearest or toward zero), and, where only gradients fail,
**one binary operation changed** (an operand left out, a sign flipped, an operand doubled or halved).

* **index orders, other axes, the updated running statistics, a partial reduction** (explain_index.py,
  tried where the families above leave a failing array unexplained): a returned array or a parameter in
  another index order (a transposed factorization, column-major, a block-local index i % k) or a parameter
  rounded to the input dtype; the statistics over other axes of x (group_norm: strided groups); a training
  call normalized by the running statistics it just updated; a mean or variance accumulated over the last
  block of columns only, dx's row sums over a block of rows.
* **backward term decompositions** (refnorm/check/explain_terms.py), every op with a backward: each
  gradient as the named pieces of its chain rule, explained (when no output fails) by a factor left out,
  a neighbouring tensor substituted, a term dropped, doubled or sign-flipped (coefficients fitted), or
  the backward's row sums over a block of k rows; tried for the gradients the families above leave.

Each explanation carries a mechanism (refnorm/pitfalls/mechanisms.py) so that the diagnosis can name
it. Pure NumPy; never changes a verdict.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import types

import numpy as np

from ..pitfalls._centered import _next_pow2
from .activations import ACTIVATIONS
from . import explain_terms
from .explain_quant import quant_deviation
from .spec_search import (PATTERNS, backward_flag, fits_step, grown_fit, judged_fit, mutation, perturbed_bound,
                          perturbed_inputs, rounding_point)
from .localize import failing_mask
from .merges import chan_merge, chan_spread, chan_step
from .precision import (NP, estimate_like as _estimate_like, excess, quant_excess, quant_name, ratio, round_to,
                        round_toward_zero, unit)

CHANNEL_OPS = ("batch_norm", "instance_norm", "group_norm")
REDERIVE = 16.0   # a deviation missing an array by at most this many times its bound: judged again within the
#                  bound derived at the deviation's own point (_rederived_fits), for at most REDERIVE_MAX of them
REDERIVE_MAX = 4
CONFIG_SIZE = 1 << 20     # the searches that re-evaluate the reference or build x-sized arrays: up to this many elements
TERMS = ("g", "mean(g)", "x_hat * mean(g x_hat)")


def fit_ratio(got, explained, E, qdtype=None) -> float:
    """The check's ratio of got against an explained value (max excess / bound; inf when not finite); an
    integer array (num_batches_tracked) is exact: 0 where equal, inf otherwise; int8 codes are quantized
    (judged by their rounding interval, as every quantized array; ``qdtype``: the dtype the check judges the
    array in, where it is not the array's own: a block scale's power-of-two grid, judge.derive_bounds)."""
    got = np.asarray(got)
    if got.dtype.kind in "iub" and not quant_name(got.dtype):
        return 0.0 if np.array_equal(got, np.asarray(explained)) else math.inf
    with np.errstate(all="ignore"):
        try:
            q = qdtype if qdtype is not None and qdtype not in NP else None    # (float32: add_norm's residual_out)
            ex = quant_excess(got, np.asarray(explained, dtype=np.float64), q) \
                if quant_name(got.dtype) or q is not None else None
        except TypeError:          # a scale dtype (float8_e8m0fnu) the quantized excess does not model: its values
            ex = None
        Eb = np.broadcast_to(E, np.shape(got))
        if ex is None:
            ex = excess(got.astype(np.float64) if quant_name(got.dtype) else got, np.asarray(explained, dtype=np.float64))
            if not quant_name(got.dtype) and np.any(Eb == 0):
                # a bound of 0 (an exactly known expected value, a masked element's 0) leaves an explanation a few
                # units of the stored dtype: its value is computed in another order than the kernel's
                ex64 = np.broadcast_to(np.asarray(explained, dtype=np.float64), np.shape(got))
                Eb = np.where(Eb == 0, 4 * unit(got.dtype) * np.abs(ex64), Eb)
        r = ratio(ex, Eb)
    r = np.asarray(r, dtype=np.float64)
    return float(np.max(np.where(np.isnan(r), np.inf, r))) if r.size else math.inf


def constants(case, x_shape) -> dict:
    """The recognizable factors of a case: value -> (what it is, mechanism)."""
    out = {2.0: ("2 (a value counted twice)", "constant"), 0.5: ("1/2 (half of the value)", "constant"),
           448 / 240: ("448/240: float8 e4m3fn's maximum 448 where e4m3fnuz's 240 was used", "quant_scale"),
           240 / 448: ("240/448: float8 e4m3fnuz's maximum 240 where e4m3fn's 448 belongs", "quant_scale"),
           127 / 448: ("127/448: int8's maximum where float8 e4m3fn's belongs", "quant_scale"),
           448 / 127: ("448/127: float8 e4m3fn's maximum where int8's belongs", "quant_scale")}
    n = _slice_length(case, x_shape)
    if n and n > 1:
        for f, what in ((n / (n - 1), "n/(n-1)"), ((n - 1) / n, "(n-1)/n"), (math.sqrt(n / (n - 1)), "sqrt(n/(n-1))"),
                        (math.sqrt((n - 1) / n), "sqrt((n-1)/n)")):
            out[f] = (f"{what} with n = {n}: the Bessel (n - 1) convention", "bessel")
        # (lp_normalize's norm off by n^(1/p) is a power mean: another normalizer's equation, the search's)
        for f, what in ((math.sqrt(n), "sqrt(n)"), (1 / math.sqrt(n), "1/sqrt(n)")) if case.op != "lp_normalize" else ():
            # (a norm divided by n where sqrt(n) belongs, or the reverse: a root mean square off by sqrt(n))
            out.setdefault(f, (f"{what} with n = {n}: a norm divided by n where sqrt(n) belongs or the reverse",
                               "constant"))
    p = case.config.get("dropout_p")
    if isinstance(p, (int, float)) and 0 < p < 1:
        out[1 / (1 - p)] = (f"1/(1-p) with p = {p}: dropout's scale applied where it does not belong", "dropout")
        out[1 - p] = (f"(1-p) with p = {p}: dropout's 1/(1-p) scale missing", "dropout")
    return out


def _slice_length(case, x_shape):
    nd = len(x_shape)
    if not nd:
        return None
    ns = case.config.get("normalized_shape")
    if ns is not None:
        return int(np.prod(x_shape[nd - (1 if np.ndim(ns) == 0 else len(ns)):]))
    if case.op == "batch_norm":
        return int(np.prod(x_shape)) // x_shape[1]
    if case.op == "instance_norm":
        return int(np.prod(x_shape[2:]))
    if case.op == "group_norm":
        return int(np.prod(x_shape[1:])) // int(case.config.get("num_groups", case.config.get("groups", 1)))
    return int(x_shape[-1])


def ls_factors(got, ref, axes):
    """The least-squares factors f of got ~ f ref over ``axes`` (keepdims; NaN where ref is 0 there)."""
    g, r = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    with np.errstate(all="ignore"):
        return (g * r).sum(axis=axes, keepdims=True) / (r * r).sum(axis=axes, keepdims=True)


def ls_factor(got, ref) -> float | None:
    """The least-squares factor f of got ~ f ref over their finite elements; None where there is none (no
    finite element, or ref 0 at all of them)."""
    ref, g = np.asarray(ref, dtype=np.float64), np.asarray(got, dtype=np.float64)
    ok = np.isfinite(ref) & np.isfinite(g)
    den = float(np.sum(ref[ok] ** 2))
    return float(np.sum(g[ok] * ref[ok])) / den if den > 0 else None


def _constant_mean(case, record, part, name):
    """Whether a returned mean is of a row norm whose every slice of x is constant: a mean off by a factor k / n
    there is as well k of the n values summed (a reduction losing lanes) as a whole array off by a factor, and
    the factor names neither."""
    x = record.inputs.get("x")
    if (part, name) != ("outputs", "mean") or case.op not in ROW_OPS or x is None or np.size(x) > CONFIG_SIZE:
        return False
    xs = _slices(case, x, x)
    return bool(xs.size and np.all(xs == xs[:, :1]))


def factor(case, part, name, got, ref, E, x_shape, qdtype=None):
    """A recognizable factor explaining the whole array (module docstring), or None. ``qdtype``: the grid the
    check judges the array on where it is not its own (a block scale's powers of two): there the factor that
    alone reproduces it on that grid."""
    f = ls_factor(got, ref)
    if f is None:
        return None
    cands = {}
    if part == "grads" and name != "x" and x_shape and 0 < np.size(got) < int(np.prod(x_shape)):
        R = int(np.prod(x_shape)) // np.size(got)          # the terms each element of the gradient sums
        for Rk, what in ((R, f"the {R} terms each element sums"), (x_shape[0], f"the {x_shape[0]} rows / samples")):
            if Rk > 1:      # a count's average (rule 11 of "Which mechanism a bug is") before a bare 1/2 (rule 14)
                cands.setdefault(1.0 / Rk, (f"1/{Rk}: averaged over {what} instead of summed", "reduction"))
    if part == "outputs" and name == "scale" and case.op in ("norm_quant", "norm_quant_block"):
        # a quantizer's returned scale off by a power of two (its exponent biased wrong: E8M0 bytes written with
        # a bias of 125 where 127 belongs): the scale's, rule 5 before rule 14's constant
        for k in (-3, -2, -1, 1, 2, 3):
            cands.setdefault(2.0 ** k, (f"2^{k} (the scale's exponent off by {k}: its bias {127 + k} where 127 "
                                        "belongs)", "quant_scale"))
    for value, said in constants(case, x_shape).items():
        cands.setdefault(value, said)
    if part == "grads":         # a gradient negated (a subtraction's operands swapped in its chain factor): rule 14
        cands.setdefault(-1.0, ("-1 (its sign flipped)", "constant"))
    if qdtype is not None:          # (a least-squares factor against the exact values says little on a coarse grid)
        fits = [(v, said) for v, said in cands.items() if fit_ratio(got, ref * v, E, qdtype) <= 1]
        if len(fits) != 1:
            return None
        what, mech = fits[0][1]
        return {"mechanism": mech, "text": f"{_label(part, name)} is the expected value times {what} (on its "
                                           f"{qdtype} grid)"}
    # (the factor's own error: 1e-3, or one unit of got's dtype where that is coarser: a bfloat16 scalar)
    tol = max(1e-3, unit(np.asarray(got).dtype)) if np.asarray(got).dtype.kind in "fV" else 1e-3
    for value, (what, mech) in cands.items():
        if abs(f / value - 1) < tol and fit_ratio(got, ref * value, np.asarray(E) * max(1.0, value)) <= 1:
            if value == 2.0 and part == "grads" and name != "x":    # a sum over rows: every term counted twice,
                # the whole array twice its value: rule 14's constant (some partials repeated: rule 11's reduction)
                return {"mechanism": "constant", "text": f"{_label(part, name)} is twice the sum: every row's "
                                                         "term counted twice"}
            return {"mechanism": mech, "text": f"{_label(part, name)} is the expected value times {what}"}
    return None


POWERS = {-1.0: "its reciprocal", 2.0: "its square", -2.0: "its reciprocal squared", 0.5: "its square root",
          -0.5: "its reciprocal square root"}
ROW_OPS = ("layer_norm", "rms_norm") + CHANNEL_OPS


def power(part, name, got, ref, E):
    """A statistic (rstd, std, var, rms, ms) returned as a power of itself (std for rstd: its reciprocal;
    1/(var + eps) for rstd: its square): explained, no mechanism named (a quantizer's scale: quant_scale), or
    None."""
    if part != "outputs" or name not in ("rstd", "std", "var", "rms", "ms", "sigma", "scale", "tensor_scale"):
        return None
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(ref)) or np.any(ref <= 0):
        return None
    for p, what in POWERS.items():
        # the bound propagated to ref^p: |p| ref^(p-1) E (never tighter than E)
        if fit_ratio(got, ref ** p, np.maximum(E, abs(p) * ref ** (p - 1) * E)) <= 1:
            # (a quantizer's scale: rule 5; a returned statistic at another stage of its finalization, y right,
            # is no mechanism of the list: docs/verdicts.md)
            return {"mechanism": "quant_scale" if name in ("scale", "tensor_scale") else None,
                    "text": f"{name} is {what} ({name}^{p:g})"}
    return None


def _row_rstd(case, x, ref):
    """Each normalized slice's rstd (slices, 1): the reference's output, else from x by the spec's formula
    (var + eps under the root; rms_norm: mean(x^2))."""
    xs = _slices(case, x, x)
    r = ref.outputs.get("rstd")
    if r is not None and np.size(r) == xs.shape[0]:
        return np.asarray(r, dtype=np.float64).reshape(-1, 1)
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    mean = 0.0 if case.op == "rms_norm" else xs.mean(axis=1, keepdims=True)
    return 1.0 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + eps)


def row_power(case, record, ref, part, name, got, want, E):
    """y or dx scaled per normalized slice by a power of its rstd (y = x_hat w + b computed with rstd^(1+k):
    "x / rsqrt(ms)" where "x * rsqrt(ms)" belongs is k = -2), or None."""
    x = record.inputs.get("x")
    if case.op not in ROW_OPS or x is None or (part, name) not in (("outputs", "y"), ("grads", "x")) \
            or np.size(x) > CONFIG_SIZE \
            or np.shape(got) != np.shape(x) or (case.op in CHANNEL_OPS and not record.training and part == "grads"):
        return None
    rstd = _row_rstd(case, x, ref)
    if not np.all(np.isfinite(rstd)) or np.any(rstd <= 0):
        return None
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    if np.all(rstd * rstd * eps >= 0.5):    # every slice's variance below eps: rstd^k and eps's placement coincide
        return None
    b = 0.0
    if part == "outputs" and record.inputs.get("bias") is not None:
        b = _slices(case, x, _bias_full(case, x, record.inputs))
    w = _slices(case, x, want)
    for k in (-2.0, -1.0, 1.0, 2.0):
        f = rstd ** k
        explained = _unslices(case, np.shape(x), b + (w - b) * f)
        # the bound scales with the value it bounds: a result f times larger errs f times more
        Ek = np.asarray(E, dtype=np.float64) * _unslices(case, np.shape(x), np.broadcast_to(np.maximum(f, 1.0), w.shape))
        if fit_ratio(got, explained, Ek) <= 1:
            return {"mechanism": "semantics",
                    "text": f"{_label(part, name)} is the expected value times rstd^{k:g} on every slice (rstd applied "
                            f"as rstd^{1 + k:g} where rstd belongs)"}
    return None


def _param_sum(case, x, a):
    """a (x's shape) summed as a parameter gradient is: over the leading axes (row norms) or over every
    axis but the channel axis 1 (channel norms)."""
    if case.op in CHANNEL_OPS:
        return a.sum(axis=tuple(i for i in range(a.ndim) if i != 1))
    ns = case.config.get("normalized_shape", 1)
    k = np.ndim(x) - (len(ns) if np.ndim(ns) else 1)
    return a.sum(axis=tuple(range(k)))


def _with_next_lanes(rows, P):
    """(lanes, inside): each row of ``rows`` (R, n), contiguous in memory one after another, read as P > n lanes:
    its own n values and the next row's first P - n (zeros past the buffer's end, where ``inside`` is False)."""
    R, n = rows.shape
    idx = np.arange(R)[:, None] * n + np.arange(P)[None, :]
    inside = idx < R * n
    return np.where(inside, rows.reshape(-1)[np.minimum(idx, R * n - 1)], 0.0), inside


def _prefixes(n):
    """Row lengths m < n a reduction that drops a tail block keeps: multiples of common block sizes and
    the powers of two below n."""
    out = {1 << k for k in range(1, int(n).bit_length()) if (1 << k) < n}
    for B in (8, 16, 32, 64, 128, 256, 512, 1024):
        if B < n:
            out.add(n // B * B)
    return sorted(m for m in out if 0 < m < n)


def _warp_equal_merge(xs, lanes=32):
    """(mean, M2) of each slice (rows of xs) from ``lanes`` strided lanes' Welford partials merged by a tree
    (offsets lanes/2 ... 1) whose new mean is (mean_a + mean_b) / 2 whatever the counts (M2's term
    delta^2 n_a n_b / n right; an empty lane skipped)."""
    parts = []
    for l in range(lanes):
        c = xs[:, l::lanes]
        if c.shape[1]:
            m = c.mean(axis=1, keepdims=True)
            parts.append([c.shape[1], m, ((c - m) ** 2).sum(axis=1, keepdims=True)])
        else:
            parts.append([0, None, None])
    off = lanes // 2
    while off:
        for l in range(off):
            (na, ma, qa), (nb, mb, qb) = parts[l], parts[l + off]
            if nb and na:
                d = mb - ma
                parts[l] = [na + nb, (ma + mb) / 2, qa + qb + d * d * (na * nb / (na + nb))]
            elif nb:
                parts[l] = [nb, mb, qb]
        off //= 2
    return parts[0][1], parts[0][2]


def _stat_candidates(case, xs, eps, centred, x_shape=()):
    """(mean', rstd', what, mechanism) for the structured deviations of a slice's statistics: rounded to
    bfloat16 / float16 (nearest or toward zero); the Bessel divisor; eps outside the root; a tail block
    dropped (the statistics over the first m values, divided by m or n); the power-of-two block's masked
    lanes entering the variance as zeros or loaded as 1.0, or its length used as the divisor, or loading the
    next slice's leading values (a block-local mask); a vector loop's remainder read as one more full vector
    overlapping the last (its shared lanes counted twice); the other norm's mean."""
    import ml_dtypes
    n = xs.shape[1]
    mean = xs.mean(axis=1, keepdims=True) if centred else np.zeros((xs.shape[0], 1))
    ss = ((xs - mean) ** 2).sum(axis=1, keepdims=True)
    var = ss / n
    rstd = 1.0 / np.sqrt(var + eps)
    out = []
    for dname, dt in (("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)):
        for mode, rnd in (("to nearest", lambda v, dt=dt: v.astype(dt).astype(np.float64)),
                          ("toward zero", lambda v, dt=dt: round_toward_zero(v, dt))):
            for which in (("rstd",), ("mean",), ("mean", "rstd")) if centred else (("rstd",),):
                out.append((rnd(mean) if "mean" in which else mean, rnd(rstd) if "rstd" in which else rstd,
                            f"with the slice's {' and '.join(which)} rounded to {dname} ({mode})", "precision"))
    if n > 1:
        out.append((mean, 1.0 / np.sqrt(ss / (n - 1) + eps), "with the unbiased variance (divisor n - 1)", "bessel"))
    if eps > 0:
        out.append((mean, 1.0 / (np.sqrt(var) + eps), "with eps outside the square root", "eps"))
        # the variance taken overflow-safely about the slice's scale a = max |d|, eps added inside the root of the
        # rescaled mean: a sqrt(mean((d / a)^2) + eps), an effective eps a^2
        a2 = np.max(np.abs(xs - mean), axis=1, keepdims=True) ** 2
        out.append((mean, 1.0 / np.sqrt(var + eps * a2), "with eps added inside the root of the max-rescaled mean "
                    "square, a sqrt(mean((d / a)^2) + eps) with a = max |d| (an effective eps a^2)", "eps"))
    S = _channel_positions(case, xs, x_shape)
    # batch_norm's per-sample count
    B = int(np.prod(x_shape[2:])) if case.op == "batch_norm" and len(x_shape) > 1 else 0
    for k in (16, 32, 64, 128, 256, 512, 1024):
        if centred and k < n and n % k:
            # the slice reduced in chunks of k values whose (mean, variance) partials are merged with equal weights,
            # as if every chunk were full (the last one is not)
            parts = [xs[:, j:j + k] for j in range(0, n, k)]
            cm, cv = np.stack([c.mean(axis=1) for c in parts], axis=1), np.stack([c.var(axis=1) for c in parts], axis=1)
            m2 = cm.mean(axis=1, keepdims=True)
            v2 = (cv + (cm - m2) ** 2).mean(axis=1, keepdims=True)
            out.append((m2, 1.0 / np.sqrt(v2 + eps), f"with the statistics merged from chunks of {k} values with equal "
                        f"weights (the last chunk, of {n % k}, weighted as a full one)", "merge"))
            # (the chunks' own M2 right, their means' spread weighted k each: the tile merge as if every tile full)
            m2c = np.stack([((c - c.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) for c in parts], axis=1)
            v3 = (m2c.sum(axis=1, keepdims=True) + k * ((cm - m2) ** 2).sum(axis=1, keepdims=True)) / n
            out.append((m2, 1.0 / np.sqrt(v3 + eps), f"with the (mean, M2) partials of chunks of {k} values merged as "
                        f"if every chunk held {k} (the last holds {n % k}): the means averaged with equal weights, "
                        f"their spread weighted {k} each", "merge"))
            # (the mean alone so merged, the variance then a second pass over the whole slice about it)
            v4 = ((xs - m2) ** 2).mean(axis=1, keepdims=True)
            out.append((m2, 1.0 / np.sqrt(v4 + eps), f"with the mean merged from chunks of {k} values with equal "
                        f"weights (the last chunk, of {n % k}, weighted as a full one), the variance about it over the "
                        "whole slice", "merge"))
    for k in (16, 32, 64, 128, 256, 512, 1024):
        if centred and k < n:
            # a running Welford state combined with each block of k values by a merge whose spread term
            # delta^2 n_a n_b / n carries another weight (n_b, n_a, none): the mean right, M2 not
            blocks = [xs[:, j:j + k] for j in range(0, n, k)]
            for wname, wf in (("n_b", lambda na, nb: nb), ("n_a", lambda na, nb: na), ("1", lambda na, nb: 1)):
                ma, qa = chan_merge(blocks, chan_step, wf)
                out.append((ma, 1.0 / np.sqrt(qa / n + eps), f"with a running Welford state combined with each block of "
                            f"{k} values by a merge whose spread term delta^2 n_a n_b / n is weighted {wname}", "merge"))
            # the merged mean moved by delta n_a / n where delta n_b / n belongs (the counts swapped in the mean's
            # update; M2's symmetric merge right): the mean wrong, the variance the slice's own
            if n % k:               # each tile's mean its sum / k (the short last tile's too), merged by the counts
                ma, qa = chan_merge(blocks, width=k)
                out.append((ma, 1.0 / np.sqrt(qa / n + eps), f"with tiles of {k} values merged by Chan's update with "
                            f"their counts, each tile's mean taken as its sum / {k} (the last tile, of {n % k}, "
                            "too)", "block"))
            ma, _ = chan_merge(blocks, lambda na, nb: na / (na + nb), chan_spread)
            if not np.allclose(ma, mean, rtol=0, atol=0):
                out.append((ma, rstd, f"with a running Welford state combined with each block of {k} values by a merge "
                            "whose mean moves by delta n_a / n where delta n_b / n belongs (the counts swapped in the "
                            "mean's update; M2 right)", "merge"))
    sub, who = (B, "sample") if B else (S, "channel") if S else (0, "")
    if centred and sub > 1 and n % sub == 0 and n // sub > 1:
        # per-sample (per-channel) partials merged one by one by Chan's update whose mean step divides by another
        # count (delta n_b / n_a, the count before the merge; delta n_a / n, the counts swapped): the mean drifts and
        # M2's spread term is taken about it
        chunks = [xs[:, j:j + sub] for j in range(0, n, sub)]
        out += [(m3, 1.0 / np.sqrt(q3 / n + eps), f"with the statistics merged {who} by {who} from per-{who} partials "
                 f"by Chan's update whose mean step is delta {how} where delta n_b / (n_a + n_b) belongs", "merge")
                for m3, q3, how in _chan_steps(chunks)]
        # the statistics merged from per-sample (batch_norm) or per-channel (group norms) partials (mean_i, M2_i):
        # the between-parts term without its count, or left out (merge); the partials stored in the 16-bit
        # dtype and merged right (precision)
        parts = xs.reshape(xs.shape[0], n // sub, sub)
        mi = parts.mean(axis=2)
        m2i = ((parts - mi[..., None]) ** 2).sum(axis=2)
        m2 = m2i.sum(axis=1, keepdims=True)
        between = ((mi - mean) ** 2).sum(axis=1, keepdims=True)
        # (left out: partial variances about their own means, the shift to the slice's mean never corrected: rule 7
        # of docs/verdicts.md's "Which mechanism a bug is", one_pass)
        for v, what, mech in ((m2 + between, f"its between-{who}s term sum (mean_i - mean)^2 not weighted by the "
                               f"{who}'s count {sub}", "merge"), (m2, f"its between-{who}s term left out", "one_pass")):
            out.append((mean, 1.0 / np.sqrt(v / n + eps), f"with the variance merged from per-{who} partials, {what}",
                        mech))
        for dname, dt in (("bfloat16", ml_dtypes.bfloat16), ("float16", np.float16)):
            if case.dtype == dname:
                mr, vr = mi.astype(dt).astype(np.float64), m2i.astype(dt).astype(np.float64)
                m3 = mr.mean(axis=1, keepdims=True)
                v3 = (vr.sum(axis=1, keepdims=True) + sub * ((mr - m3) ** 2).sum(axis=1, keepdims=True)) / n
                out.append((m3, 1.0 / np.sqrt(v3 + eps), f"with the statistics merged from per-{who} partials (mean_i, "
                            f"M2_i) stored in {dname}", "precision"))
    # (and m another size of x: a mask against the row count where the row length belongs)
    whole = {k * S for k in range(1, min(n // S, 17))} if S else set()      # a group's first channels, whole
    for m in sorted(set(_prefixes(n)) | {int(k) for k in x_shape if 1 < k < n} | whole):
        # a group norm's first channels (m a multiple of a channel's positions: a channel loop's bound short, even
        # to its first channel alone), or batch_norm's first samples (m a multiple of a sample's positions): the
        # slice's own reduction losing its tail channels or samples (rule 9 of docs/verdicts.md's "Which mechanism
        # a bug is", block, before rule 10's group: that is each channel's own statistics, or another group size)
        part = "channels" if S and m % S == 0 else "samples" if B and m % B == 0 else "block"
        pm = xs[:, :m].mean(axis=1, keepdims=True) if centred else np.zeros_like(mean)
        pss = ((xs[:, :m] - pm) ** 2).sum(axis=1, keepdims=True)
        for div, dw in ((m, "m"), (n, "n")):
            mm = xs[:, :m].sum(axis=1, keepdims=True) / div if centred else pm
            out.append((mm, 1.0 / np.sqrt(pss / div + eps) if div == m else
                        1.0 / np.sqrt(((xs[:, :m] - mm) ** 2).sum(axis=1, keepdims=True) / div + eps),
                        f"with the statistics over the first {m} of {n} values only ("
                        + (f"the group's first {m // S} channel(s)" if part == "channels" else
                           f"the batch's first {m // B} sample(s)" if part == "samples" else "a tail block dropped")
                        + f"; divided by {dw} = {div})", "block"))
    if B and centred and n // B > 1:         # batch_norm: a second stage over the per-sample partials starting at 1
        rest = xs[:, B:]                     # (sample 0's sums never added; the totals divided by n): rule 11
        sm = rest.sum(axis=1, keepdims=True) / n
        out.append((sm, 1.0 / np.sqrt(((rest - sm) ** 2).sum(axis=1, keepdims=True) / n + eps),
                    f"with sample 0's partial sums never added (a second stage over the per-sample partials starting "
                    f"at 1; divided by n = {n})", "reduction"))
    if S:                                    # group norms: a tail of each channel's positions dropped
        sub = xs.reshape(xs.shape[0], -1, S)
        for m in _prefixes(S):
            part = sub[:, :, :m].reshape(xs.shape[0], -1)
            for div, dw in ((part.shape[1], "the values kept"), (n, "n")):
                pm = part.sum(axis=1, keepdims=True) / div
                out.append((pm, 1.0 / np.sqrt(((part - pm) ** 2).sum(axis=1, keepdims=True) / div + eps),
                            f"with the statistics over the first {m} of each channel's {S} positions only (a "
                            f"tail block dropped; divided by {dw})", "block"))
    # a power-of-two block's masked lanes, or a tile of 16 ... 128 lanes' (the count rounded up to a multiple)
    for P in sorted({_next_pow2(n)} | {-(-n // t) * t for t in (8, 16, 32, 64, 128) if n > t}):
        if P <= n:
            continue
        for div in (n, P):
            out.append((mean, 1.0 / np.sqrt((ss + (P - n) * mean * mean) / div + eps),
                        f"with the {P - n} masked lanes of a {P}-wide block entering the variance as zeros (divided "
                        f"by {div})", "block"))
            # the masked lanes loaded as 1.0 (the load's ``other`` copied from a weight's load)
            om = (xs.sum(axis=1, keepdims=True) + (P - n)) / div if centred else mean
            out.append((om, 1.0 / np.sqrt((((xs - om) ** 2).sum(axis=1, keepdims=True) + (P - n) * (1 - om) ** 2)
                                          / div + eps),
                        f"with the {P - n} masked lanes of a {P}-wide block loaded as 1.0 (divided by {div})", "block"))
        if case.op != "batch_norm" and xs.shape[0] > 1:
            # the tail block's mask taken block-local (offs < n for start + offs < n), or only the buffer's end: its
            # P - n lanes past the slice load the next slice's leading values (the last slice: zeros, in the
            # variance as (0 - mean)^2, or masked there too), in the sums divided by n (the slices contiguous in
            # memory: every op's but batch_norm's channels)
            lanes, inside = _with_next_lanes(xs, P)
            lm = lanes.sum(axis=1, keepdims=True) / n if centred else mean
            for dv, end in (((lanes - lm) ** 2, ""), (np.where(inside, (lanes - lm) ** 2, 0.0),
                                                       "; past the buffer's end masked")):
                out.append((lm, 1.0 / np.sqrt(dv.sum(axis=1, keepdims=True) / n + eps),
                            f"with the {P - n} lanes past each slice up to {P} loaded (its tail block's mask block-"
                            f"local): the next slice's leading values in the statistics (divided by n{end})", "block"))
        pmean = xs.sum(axis=1, keepdims=True) / P if centred else mean
        out.append((pmean, 1.0 / np.sqrt(((xs - pmean) ** 2).sum(axis=1, keepdims=True) / P + eps),
                    f"with the block length {P} as the divisor of the statistics", "block"))
        if centred:                          # the padded zeros counted in the mean and the variance alike
            out.append((pmean, 1.0 / np.sqrt((((xs - pmean) ** 2).sum(axis=1, keepdims=True) + (P - n) * pmean ** 2)
                                             / P + eps),
                        f"with the {P - n} padded zeros of a {P}-lane tile counted in the mean and the variance",
                        "block"))
    if case.op == "batch_norm" and len(x_shape) > 2 and xs.shape[0] == x_shape[1] and n % x_shape[0] == 0:
        # each (sample, channel) plane of the NCHW buffer read in tiles of t positions whose mask tests the buffer's
        # end only: the last tile's lanes load the next plane's leading values (the last plane: zeros) into the
        # channel's sums, divided by n (two passes, or the sums of x and x^2)
        N, C, L = x_shape[0], x_shape[1], n // x_shape[0]
        planes = np.moveaxis(xs.reshape(C, N, L), 1, 0).reshape(N * C, L)      # in the buffer's order
        for t in (8, 16, 32, 64, 128):
            if L > t and L % t:
                P = -(-L // t) * t
                lanes, inside = (np.moveaxis(a.reshape(N, C, P), 0, 1).reshape(C, N * P)
                                 for a in _with_next_lanes(planes, P))
                lm = lanes.sum(axis=1, keepdims=True) / n
                what = (f"with each (sample, channel) plane of {L} positions read in tiles of {t} whose mask tests "
                        f"only the buffer's end: the last tile's {P - L} lanes load the next plane's leading values "
                        "into the channel's sums (divided by n")
                for dv, end in (((lanes - lm) ** 2, ")"), (np.where(inside, (lanes - lm) ** 2, 0.0),
                                                           "; past the buffer's end masked)")):
                    out.append((lm, 1.0 / np.sqrt(dv.sum(axis=1, keepdims=True) / n + eps), what + end, "block"))
                out.append((lm, 1.0 / np.sqrt(np.maximum((lanes ** 2).sum(axis=1, keepdims=True) / n - lm ** 2, 0.0)
                                              + eps), what + "; the variance from the sums of x and x^2)", "block"))
    L = S or n                              # a channel's positions (group norms), else the whole slice
    for v in (2, 4, 8):
        if L > v and L % v:
            # vectors of v values with the remainder read as one more full vector at L - v (the overlap trick)
            # whose lanes the previous vector already counted are not masked: they enter the sums twice
            dup = xs.reshape(xs.shape[0], -1, L)[:, :, L - v:(L // v) * v].reshape(xs.shape[0], -1)
            vm = (xs.sum(axis=1, keepdims=True) + dup.sum(axis=1, keepdims=True)) / n if centred else mean
            vv = (((xs - vm) ** 2).sum(axis=1, keepdims=True) + ((dup - vm) ** 2).sum(axis=1, keepdims=True)) / n
            out.append((vm, 1.0 / np.sqrt(vv + eps), f"with {v}-wide vector loads whose remainder is one more full "
                        f"vector at {L - v} of each {'channel' if S else 'slice'}'s {L} values, unmasked: positions "
                        f"{L - v}..{(L // v) * v - 1} counted twice (divided by n)", "block"))
    if centred and 1 < n and n % 32:
        # the slice's values strided over a warp's 32 lanes (lane l: j = l mod 32), each lane's (count, mean, M2)
        # merged by a tree (offsets 16 ... 1) whose means are averaged with equal weights (the counts unequal)
        m2w = _warp_equal_merge(xs)
        out.append((m2w[0], 1.0 / np.sqrt(m2w[1] / n + eps), "with the statistics of 32 strided lanes (j mod 32) "
                    "merged by a warp's tree whose means are averaged with equal weights (the lanes' counts "
                    "unequal)", "merge"))
    for T in (64, 128, 256, 512, 1024):
        if 32 < n and T < 2 * n:
            # a block of T threads (thread t: j = t mod T) whose warps' partial sums are combined from warp 0's
            # slot alone: the columns j mod T >= 32 never enter the statistics (divided by n)
            keep = (np.arange(n) % T < 32)[None, :]
            wm = np.where(keep, xs, 0.0).sum(axis=1, keepdims=True) / n if centred else mean
            out.append((wm, 1.0 / np.sqrt(np.where(keep, (xs - wm) ** 2, 0.0).sum(axis=1, keepdims=True) / n + eps),
                        f"with the statistics over the columns j mod {T} < 32 only (a block of {T} threads whose "
                        f"warps' partials are read from warp 0's slot alone; divided by n)", "block"))
    if centred and case.op in ("layer_norm",):
        out.append((np.zeros_like(mean), 1.0 / np.sqrt((xs * xs).mean(axis=1, keepdims=True) + eps),
                    "with rms_norm's statistics (no mean subtracted)", "semantics"))
    return mean, rstd, out


def _chan_steps(chunks):
    """(mean, M2, how) of slices merged chunk by chunk by Chan's update whose mean step divides by the count
    before the merge (delta n_b / n_a) or swaps the counts (delta n_a / n), M2's spread term exact about the
    drifting mean."""
    return [(*chan_merge(chunks, f, chan_spread), how)
            for how, f in (("n_b / n_a", lambda na, nb: nb / na), ("n_a / (n_a + n_b)", lambda na, nb: na / (na + nb)))]


def _channel_positions(case, xs, x_shape):
    """The positions per channel of a group norm's slice (its cg channels times S positions), or None."""
    G = case.config.get("num_groups")
    if case.op not in ("group_norm", "group_norm_silu") or not isinstance(G, int) or len(x_shape) < 3:
        return None
    cg = x_shape[1] // G
    S = xs.shape[1] // cg if cg else 0
    return S if S > 1 else None


def row_statistics(case, record, ref, candidates=None):
    """The failing y, dx, dweight and statistics of a row norm that its formulas reproduce with the slice's
    statistics changed (``candidates``, default ``_stat_candidates``), or the backward's x_hat recomputed
    from the returned y: explanations (one per array) of every failing array, else of every failing output
    (the gradients computed from them follow), all of one deviation; or []."""
    x = record.inputs.get("x")
    if case.op not in ROW_OPS or x is None or (case.op in CHANNEL_OPS and not record.training) \
            or np.size(x) > CONFIG_SIZE or not record.failing:
        return []
    targets = {("outputs", "y"), ("grads", "x"), ("grads", "weight"), ("outputs", "mean"), ("outputs", "rstd")}
    outs = [pn for pn in record.failing if pn[0] == "outputs"]
    if any(pn not in targets for pn in outs):
        return []
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    xs = _slices(case, x, x)
    if xs.shape[0] < 2:       # one slice: too little to tell a few dozen candidates apart
        return []
    centred = case.op != "rms_norm"
    mean, rstd, stats = (candidates or _stat_candidates)(case, xs, eps, centred, np.shape(x))
    w = _slices(case, x, _weight_full(case, x, record.inputs))
    b = _slices(case, x, _bias_full(case, x, record.inputs)) if record.inputs.get("bias") is not None else 0.0
    # (a candidate's optional fifth value: the values its forward normalized, read from elsewhere, the backward
    # reading x at the right place with the statistics it saved; its sixth: the values its backward reads as x,
    # the forward reading x right)
    cands = []
    for m2, r2, what, mech, *more in stats:
        fwd, bwd = (list(more) + [None, None])[:2]
        cands.append((((xs if bwd is None else bwd) - m2) * r2, m2, r2, what, mech,
                      None if fwd is None and bwd is None else ((xs if fwd is None else fwd) - m2) * r2))
    y = record.got["outputs"].get("y")
    if y is not None and np.shape(y) == np.shape(x) and ("outputs", "y") not in outs:
        with np.errstate(all="ignore"):       # the backward's x_hat recomputed from the returned (rounded) y
            xh = (_slices(case, x, y) - b) / w
        if np.all(np.isfinite(xh)):
            cands.append((xh, mean, rstd, "with x_hat recomputed from the returned y, (y - bias) / weight",
                          "precision", None))
    est = None if candidates else _estimated_rstd(case, record, x, xs, mean, rstd, w, b)
    if est is not None:
        cands.append(((xs - mean) * est[0], mean, est[0], est[1], "precision", None))
    dy = record.cotangents.get("y")
    if dy is not None:
        dys = _slices(case, x, np.asarray(dy, dtype=np.float64))
        g = dys * w
        gm = g.mean(axis=1, keepdims=True) if centred else 0.0
    for xhat, m2, r2, text, mech, yhat in cands:
        vals = {("outputs", "y"): lambda: (xhat if yhat is None else yhat) * w + b, ("outputs", "mean"): lambda: m2,
                ("outputs", "rstd"): lambda: r2}
        if dy is not None:
            vals[("grads", "x")] = lambda: r2 * (g - gm - xhat * (g * xhat).mean(axis=1, keepdims=True))
            vals[("grads", "weight")] = lambda: dys * xhat
        fits = {}
        # the failing arrays, and the passing ones of the same pass (forward, backward): a kernel's changed
        # statistic reaches every array of the pass that reads it
        phases = {p for p, _ in record.failing}
        check = list(record.failing) + [pn for pn in vals if pn not in record.failing and pn[0] in phases
                                         and pn[1] in record.compare[pn[0]] and record.got[pn[0]].get(pn[1]) is not None]
        for part, name in check:
            got = record.got[part].get(name)
            if (part, name) not in vals or got is None:
                fits[part, name] = False
                continue
            v = vals[part, name]()
            if name in ("mean", "rstd"):
                v = v.reshape(np.shape(got)) if np.size(v) == np.size(got) else None
            else:
                v = _unslices(case, np.shape(x), np.broadcast_to(v, xs.shape))
                v = _param_sum(case, x, v).reshape(np.shape(got)) if name == "weight" else v
            fits[part, name] = v is not None and np.shape(v) == np.shape(got) and \
                fit_ratio(got, v, record.E[part][name]) <= 1
            if not fits[part, name] and (part == "outputs" or (part, name) not in record.failing):
                break
        passing = [pn for pn in check if pn not in record.failing]
        if not all(fits.get(pn) for pn in passing):
            continue
        keep = [pn for pn in record.failing if fits.get(pn)]
        if len(keep) == len(record.failing) or (outs and all(fits.get(pn) for pn in outs)):
            return [{"part": p, "name": n, "step": record.step, "mechanism": mech,
                     "text": f"{_label(p, n)} is the formula's {text}"} for p, n in keep]
    return []




def _estimated_rstd(case, record, x, xs, mean, rstd, w, b):
    """Each slice's rstd as the kernel used it (its returned rstd, else the least-squares factor of its y over
    the reference's x_hat w) where it differs from the exact one by at most ESTIMATE_REL relative, on both sides
    (an approximate reciprocal square root without a Newton step): (rstd', what), or None."""
    got_r, y = record.got["outputs"].get("rstd"), record.got["outputs"].get("y")
    if got_r is not None and np.size(got_r) == xs.shape[0]:
        r2 = np.asarray(got_r, dtype=np.float64).reshape(-1, 1)
    elif y is not None and np.shape(y) == np.shape(x):
        r2 = rstd * ls_factors(_slices(case, x, y) - b, (xs - mean) * w, 1)
    else:
        return None
    with np.errstate(all="ignore"):
        rel = r2 / rstd - 1.0
    if not np.all(np.isfinite(rel)) or not _estimate_like(rel) or xs.shape[0] < 4:
        return None
    return r2, (f"with each slice's rstd off by up to {np.max(np.abs(rel)):.1e} relative, on both sides (an approximate "
                "reciprocal square root without a Newton step, about 12 significant bits)")


def _bias_full(case, x, inputs):
    b = np.asarray(inputs["bias"], dtype=np.float64)
    if case.op in CHANNEL_OPS and np.ndim(b) == 1:
        b = b.reshape((1, -1) + (1,) * (np.ndim(x) - 2))
    return np.broadcast_to(b, np.shape(x))


def another_gradient(record, ref, part, name, got, E):
    """A gradient that is another array of the step: a cotangent (dresidual = dy, as if the residual skipped
    to y), the sum of the cotangents, another input's expected gradient, or its own expected value plus or minus
    a cotangent (that cotangent's term counted twice or left out): the backward's (docs/verdicts.md, rule 15), or
    None."""
    if part != "grads":
        return None
    cands = [(f"the cotangent d{k}", v) for k, v in record.cotangents.items()]
    if len(record.cotangents) > 1:
        cands.append((" + ".join(f"d{k}" for k in record.cotangents) + " (the cotangents' sum)",
                      sum(np.asarray(v, dtype=np.float64) for v in record.cotangents.values())))
    # (another gradient failing too: the two may be in each other's place, explained unnamed elsewhere)
    # (judged within that gradient's own bound where it is wider: its value carries its own rounding)
    others = {f"the expected {_label('grads', k)}": k for k, v in ref.grads.items()
              if k != name and ("grads", k) not in record.failing}
    cands += [(what, ref.grads[k]) for what, k in others.items()]
    # a cotangent's term counted twice or left out (residual_out's cotangent added again to dresidual)
    want = ref.grads.get(name)
    if want is not None:
        cands += [(f"its expected value {how} the cotangent d{k} ({what})", np.asarray(want, np.float64) + sign *
                   np.asarray(v, np.float64)) for k, v in record.cotangents.items() if np.shape(v) == np.shape(want)
                  for sign, how, what in ((1, "plus", "its term counted twice"), (-1, "minus", "its term left out"))]
    for what, v in cands:
        Ek = record.E["grads"].get(others.get(what))
        Ew = E if Ek is None or np.shape(Ek) != np.shape(E) else np.maximum(E, Ek)
        if v is not None and np.shape(v) == np.shape(got) and fit_ratio(got, np.asarray(v, dtype=np.float64), Ew) <= 1:
            return {"mechanism": "backward", "text": f"{_label(part, name)} is {what}"}
    return None


def cotangents_dropped(case, record, reference, name, got, E, cache):
    """A gradient computed from some of the step's cotangents alone (a parallel branch's dx1 from dy1 alone,
    the other branches' terms of the shared sum left out): the specification's with every other cotangent 0
    (``cache``: one evaluation per subset for the step). The backward's (rule 15), or None."""
    import itertools
    keys = sorted(record.cotangents)
    if reference is None or len(keys) < 2 or np.size(record.inputs.get("x", 0.0)) > CONFIG_SIZE:
        return None
    for k in range(1, len(keys)):
        for kept in itertools.combinations(keys, k):
            if kept not in cache:
                cot = {c: (v if c in kept else np.zeros(np.shape(v))) for c, v in record.cotangents.items()}
                try:
                    with np.errstate(all="ignore"):
                        cache[kept] = reference(case.op, case.config, record.training, record.inputs, cot,
                                                record.state).grads
                except Exception:                           # noqa: BLE001 - the spec refusing the call
                    cache[kept] = {}
            v = cache[kept].get(name)
            if v is not None and np.shape(v) == np.shape(got) and fit_ratio(got, v, E) <= 1:
                return {"mechanism": "backward", "text": f"{_label('grads', name)} is the specification's from "
                        + ", ".join(f"d{c}" for c in kept) + " alone (the other cotangents' terms left out)"}
    return None


def overwritten_cotangent(case, record, reference, ref, name, got, E, cache):
    """A parameter gradient computed from a returned gradient of the cotangent's shape where the cotangent
    belongs (dx written in place over dy's buffer before the parameter-gradient pass reads "dy": dweight =
    sum(dx * x_hat), dbias = sum(dx)): the specification's gradients with that cotangent replaced by the
    returned gradient (as stored, else its exact value: the kernel's unrounded register), the gradient itself
    passing (``cache``: one evaluation per replacement for the step).
    The backward's (rule 15), or None."""
    if reference is None or name == "x" or np.size(record.inputs.get("x", 0.0)) > CONFIG_SIZE:
        return None
    for k, dv in record.cotangents.items():
        for (gk, src), gv in [((gk, "got"), gv) for gk, gv in record.got["grads"].items()] + \
                [((gk, "ref"), gv) for gk, gv in ref.grads.items()]:
            if gk == name or ("grads", gk) in record.failing or gv is None or np.shape(gv) != np.shape(dv) \
                    or np.ndim(gv) == 0:
                continue
            if (k, gk, src) not in cache:     # the stored gradient, then its value before the store's rounding
                cot = {**record.cotangents, k: np.asarray(gv, dtype=np.float64)}
                try:
                    with np.errstate(all="ignore"):
                        cache[(k, gk, src)] = reference(case.op, case.config, record.training, record.inputs, cot,
                                                        record.state).grads
                except Exception:                           # noqa: BLE001 - the spec refusing the call
                    cache[(k, gk, src)] = {}
            v = cache[(k, gk, src)].get(name)
            if v is not None and np.shape(v) == np.shape(got) and fit_ratio(got, v, E) <= 1:
                return {"mechanism": "backward", "text": f"{_label('grads', name)} is the specification's with the "
                        f"returned {_label('grads', gk)} where the cotangent d{k} belongs (d{gk} written over "
                        f"d{k}'s buffer before the parameter gradients read it)"}
    return None


def overwritten_input(case, record, ref, name, got, E):
    """The weight's gradient of a row or channel norm recomputing x_hat from x's buffer after dx was written
    over it (dx in place, x no longer needed by the row kernel): dweight = sum(dy (dx - mean) rstd) with the
    returned (stored) dx where x belongs and the saved statistics, dx itself passing. The backward's (rule 15),
    or None."""
    x, dx, dy = record.inputs.get("x"), record.got["grads"].get("x"), record.cotangents.get("y")
    if name != "weight" or case.op not in ROW_OPS or x is None or dx is None or dy is None \
            or ("grads", "x") in record.failing or np.shape(dx) != np.shape(x) or np.size(x) > CONFIG_SIZE \
            or (case.op in CHANNEL_OPS and not record.training):
        return None
    with np.errstate(all="ignore"):
        xs, ds = _slices(case, x, x), _slices(case, x, np.asarray(dx, dtype=np.float64))
        mean = 0.0 if case.op == "rms_norm" else xs.mean(axis=1, keepdims=True)
        xh = (ds - mean) * _row_rstd(case, x, ref)
        v = _param_sum(case, x, _unslices(case, np.shape(x), _slices(case, x, dy) * xh))
    if np.size(v) != np.size(got) or fit_ratio(got, np.reshape(v, np.shape(got)), E) > 1:
        return None
    return {"mechanism": "backward", "text": "dweight is the specification's with x_hat recomputed from x's buffer "
            "after the returned dx was written over it, (dx - mean) rstd where (x - mean) rstd belongs (dx in place "
            "over x before the parameter gradients read it)"}


def _label(part, name):
    return "dx" if (part, name) == ("grads", "x") else (f"d{name}" if part == "grads" else name)


def _slices(case, x, a):
    """``a`` (x's shape) as (slices, n): the op's normalized slices as rows."""
    a = np.asarray(a, dtype=np.float64)
    if case.op == "batch_norm":
        return np.moveaxis(a, 1, 0).reshape(a.shape[1], -1)
    if case.op == "instance_norm":
        return a.reshape(a.shape[0] * a.shape[1], -1)
    if case.op == "group_norm":
        G = int(case.config.get("num_groups", case.config.get("groups", 1)))
        return a.reshape(a.shape[0] * G, -1)
    return a.reshape(-1, _slice_length(case, np.shape(x)))


def _unslices(case, shape, r):
    if case.op == "batch_norm":
        moved = (shape[1], shape[0]) + tuple(shape[2:])
        return np.moveaxis(r.reshape(moved), 0, 1)
    return r.reshape(shape)


def _weight_full(case, x, inputs):
    w = inputs.get("weight")
    w = np.ones(()) if w is None else np.asarray(w, dtype=np.float64)
    w = w + float(case.config.get("weight_offset", 0.0) or 0.0)
    if case.op in CHANNEL_OPS and np.ndim(w) == 1:
        w = w.reshape((1, -1) + (1,) * (np.ndim(x) - 2))
    return np.broadcast_to(w, np.shape(x))


def dx_terms(case, training, inputs, cotangents, got, E):
    """The coefficients of dx's terms that explain the backend's dx (module docstring), or None."""
    op = case.op
    if op not in ("layer_norm", "rms_norm") + CHANNEL_OPS or (op in CHANNEL_OPS and not training):
        return None
    if op == "batch_norm" and not training:
        return None
    x, dy = inputs.get("x"), cotangents.get("y")
    if x is None or dy is None or np.shape(got) != np.shape(x):
        return None
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    xs = _slices(case, x, x)
    centred = op != "rms_norm"
    mean = xs.mean(axis=1, keepdims=True) if centred else 0.0
    var = ((xs - mean) ** 2).mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (xs - mean) * rstd
    spec = np.array([1.0, -1.0 if centred else 0.0, -1.0])
    gd = _slices(case, x, got)
    ok = np.all(np.isfinite(gd), axis=1) & np.all(np.isfinite(rstd), axis=1)
    if ok.sum() == 0:
        return None
    dy64 = np.asarray(dy, dtype=np.float64)
    w = _weight_full(case, x, inputs)
    g = _slices(case, x, dy64 * w)
    small = np.size(x) <= CONFIG_SIZE           # the searches added in issue 33's second pass: small cases only
    found = (_dx_divisor(case, x, got, E, gd, ok, rstd, xhat, g, centred) if small else None) or \
        _dx_fit(case, x, got, E, gd, ok, rstd, xhat, g, spec, centred, "") or \
        (_dx_rstd_power(case, x, got, E, rstd, xhat, g, centred) if small else None)
    if found is not None or inputs.get("weight") is None:
        return found
    # the weight where it does not belong: left out of g, applied twice, or applied again to one term
    wr = _slices(case, x, w)
    for gg, extra, what in ((_slices(case, x, dy64), None, "g = dy: the weight left out of dx"),
                            (_slices(case, x, dy64 * w * w), None, "g = dy w^2: the weight applied twice"),
                            (g, wr, "the x_hat mean(g x_hat) term times the weight again")):
        found = _dx_fit(case, x, got, E, gd, ok, rstd, xhat, gg, spec, centred, what, extra, exact=True)
        if found is not None:
            return found
    return None


def _dx_rstd_power(case, x, got, E, rstd, xhat, g, centred):
    """dx with one of its terms' rstd factor missing (rstd^0) or applied twice (rstd^2), the others as the
    specification has them; the explanation, or None."""
    terms = {"g": g, "mean(g)": -np.broadcast_to(g.mean(axis=1, keepdims=True), g.shape) if centred else None,
             "x_hat * mean(g x_hat)": -xhat * (g * xhat).mean(axis=1, keepdims=True)}
    terms = {k: v for k, v in terms.items() if v is not None}
    for name in terms:
        for k, what in ((0, "without its rstd factor"), (2, "with rstd applied twice")):
            dx = sum((rstd ** k if t == name else rstd) * v for t, v in terms.items())
            if fit_ratio(got, _unslices(case, np.shape(x), dx), E) <= 1:
                return {"mechanism": "backward", "text": f"dx matches the formula with the {name} term {what}"}
    return None


def _dx_divisor(case, x, got, E, gd, ok, rstd, xhat, g, centred):
    """dx's means (mean(g), mean(g x_hat)) divided by a wrong count m where the slice's n belongs: both mean
    terms scaled by k = n / m. Named by what m is: one channel's count where the group's belongs (group),
    the power-of-two block length (block), n - 1 (bessel); else the backward formula. Or None."""
    n = xs_n = g.shape[1]
    gm, third = g.mean(axis=1, keepdims=True), xhat * (g * xhat).mean(axis=1, keepdims=True)
    mean_terms = (np.broadcast_to(gm, g.shape) if centred else 0.0) + third
    A = np.stack([(rstd * g)[ok].ravel(), (rstd * mean_terms)[ok].ravel()], axis=1)
    coef, *_ = np.linalg.lstsq(A, gd[ok].ravel(), rcond=None)
    k = -coef[1]
    if abs(coef[0] - 1) > 0.02 or not k > 0 or abs(k - 1) < 0.02:
        return None
    cands = []
    if case.op in ("group_norm", "group_norm_silu"):
        G = int(case.config.get("num_groups", 1))
        C = np.shape(x)[1]
        if G < C:
            cands.append((xs_n * G // C, "group", "one channel's count where the group's belongs"))
    P = _next_pow2(n)
    if P != n:
        cands.append((P, "block", f"the block length {P}"))
    if n > 1:
        cands.append((n - 1, "bessel", "n - 1"))
    for m, mech, what in cands:
        if abs(n / m - k) <= 0.02 * k:
            explained = _unslices(case, np.shape(x), rstd * (g - (n / m) * mean_terms))
            if fit_ratio(got, explained, E) <= 1:
                return {"mechanism": mech, "text": f"dx's means divided by {m} ({what}) where n = {n} belongs: both "
                                                   f"mean terms times {n / m:.4g} (fitted {k:.4g})"}
    return None


def _dx_fit(case, x, got, E, gd, ok, rstd, xhat, g, spec, centred, what_g, w3=None, exact=False):
    """dx fitted as rstd (a g + b mean(g) + c w3 x_hat mean(g x_hat)) (w3: 1, or the weight again); the
    explanation when its rounded coefficients differ from the specification's (or, ``exact``, equal them
    with this g) and fit within the bound."""
    third = xhat * (g * xhat).mean(axis=1, keepdims=True)
    terms = [g, np.broadcast_to(g.mean(axis=1, keepdims=True), g.shape), third if w3 is None else w3 * third]
    A = np.stack([(rstd * t)[ok].ravel() for t in terms], axis=1)
    if not centred:
        A = A[:, [0, 2]]
    coef, *_ = np.linalg.lstsq(A, gd[ok].ravel(), rcond=None)
    if not centred:
        coef = np.array([coef[0], 0.0, coef[1]])
    near = np.round(coef * 2) / 2
    if np.any(np.abs(coef - near) > 0.05) or (np.all(near == spec) != exact):
        return None
    explained = _unslices(case, np.shape(x), rstd * sum(c * t for c, t in zip(near, terms)))
    if fit_ratio(got, explained, E) > 1:
        return None
    coefs = ", ".join(f"{c:.2f}" for c in coef)
    if exact:
        return {"mechanism": "backward", "text": f"dx matches the formula with {what_g} (fitted coefficients "
                                                 f"{coefs}, the specification's)"}
    what, n = [], g.shape[1]
    for name, c, s in zip(TERMS, near, spec):
        if c == s:
            continue
        if n >= 3 and c * (n - 1) == s * n and np.count_nonzero(near != spec) == 1:
            return {"mechanism": "bessel", "text": f"dx matches the formula with the {name} term's mean taken over "
                                                   f"n - 1 = {n - 1} where n = {n} belongs: fitted coefficients "
                                                   f"{coefs} (the specification's {', '.join(f'{s:g}' for s in spec)})"}
        what.append(f"the {name} term " + ("missing" if c == 0 else "counted twice" if c == 2 * s
                                             else "with its sign flipped" if c == -s else f"times {c:g}"))
    return {"mechanism": "backward",
            "text": f"dx matches the formula rstd (a g + b mean(g) + c x_hat mean(g x_hat)) with "
                    f"{'; '.join(what)}: fitted coefficients {coefs} (the specification's "
                    f"{', '.join(f'{s:g}' for s in spec)})"}




def _options_exchanged(cfg, full):
    """(config, what, mechanism) of two floating options passed in each other's positional slot (eps and
    momentum: a functional call's arguments in the wrong order; momentum None taken as its default 0.1): eps's
    value where eps is one ("eps", rule 6), else the running statistics' ("running")."""
    vals = {k: v for k, v in full.items() if isinstance(v, float) and not isinstance(v, bool) and k != "p"}
    if "momentum" in full and full["momentum"] is None:
        vals["momentum"] = 0.1
    if isinstance(full.get("ddof"), int) and not isinstance(full.get("ddof"), bool):
        vals["ddof"] = full["ddof"]         # (an int slot: a float passed there is truncated)
    cast = lambda k, v: int(v) if k == "ddof" else float(v)        # noqa: E731
    keys, out = sorted(vals), []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if "eps" in (a, b) or "momentum" in (a, b):
                va, vb = cast(a, vals[b]), cast(b, vals[a])
                if va == vals[a] and vb == vals[b]:
                    continue
                out.append(({**cfg, a: va, b: vb}, f"the options {a} and {b} exchanged ({a} = {va:g}, {b} = {vb:g}: "
                                                   "each passed in the other's positional slot)",
                            "bessel" if "ddof" in (a, b) else "eps" if "eps" in (a, b) else "running"))
    for k in (k for k in keys if k != "eps" and "eps" in vals and vals[k] != vals["eps"]):
        # eps's slot given another option's value, that option still right (the scalar arguments shifted by one)
        out.append(({**cfg, "eps": vals[k]}, f"eps's slot given {k}'s value ({vals[k]:g} where eps = {vals['eps']:g} "
                                             "belongs; the scalar arguments shifted)", "eps"))
    return out


def _config_candidates(case, x_shape=()):
    """(changed config, what, mechanism) for the structured configuration deviations of the case (x of
    ``x_shape``)."""
    cfg = dict(case.config)
    out = []
    eps = cfg.get("eps")
    if isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps > 0:
        for e, what in ((0.0, "eps missing (0 where eps belongs)"), (2 * eps, "eps added twice (2 eps)"),
                        (eps * eps, "eps squared"), (math.sqrt(eps), "the square root of eps used as eps")):
            out.append(({**cfg, "eps": e}, what, "eps"))
    full = _full_config(case)                                     # the defaults too (z_score's ddof=1)
    for key in ("ddof", "correction"):      # the variance's divisor n - ddof: the other Bessel convention
        v = full.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            out.append(({**cfg, key: 1 - v}, f"{key}={1 - v} where {v} belongs", "bessel"))
    for key in ("unbiased",):
        v = full.get(key)
        if isinstance(v, bool):
            out.append(({**cfg, key: not v}, f"{key}={not v} where {v} belongs", "bessel"))
    G = cfg.get("num_groups")
    if case.op in ("group_norm", "group_norm_silu") and isinstance(G, int):
        C = x_shape[1] if len(x_shape) > 1 else 0
        for g2 in dict.fromkeys((1, 2 * G, G // 2) + ((C // G,) if C and C % G == 0 else ())):
            if g2 >= 1 and g2 != G and C % g2 == 0:       # the group count misread: rule 10 (group)
                out.append(({**cfg, "num_groups": g2}, f"the statistics taken over {g2} groups where "
                                                       f"{G} belong (the group count misread"
                            + (", the count and the size swapped)" if g2 * G == C else ")"), "group"))
    n = _slice_length(case, x_shape) if x_shape else None
    if isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps > 0 and n and n > 1:
        # eps added to the sum (of squares) instead of its mean, or to the mean where the sum belongs: eps / n, n eps
        out += [({**cfg, "eps": eps / n}, f"eps added to the sum over the slice's {n} values instead of their mean "
                                          f"(eps / n)", "eps"),
                ({**cfg, "eps": eps * n}, f"eps times the slice's count n = {n}", "eps")]
        dd = _full_config(case).get("ddof")
        if isinstance(dd, int) and not isinstance(dd, bool) and 0 < dd < n:
            # eps added to the biased variance, then the whole given the unbiased factor n / (n - ddof)
            out.append(({**cfg, "eps": eps * n / (n - dd)}, f"eps added before the unbiased factor n / (n - ddof) "
                                                           f"(eps n / (n - {dd}))", "eps"))
    # a default eps in place of the configured one (torch's, llama's, Keras'; float32's machine epsilon: torch's
    # rms_norm with eps=None; 1e-4, a half-precision eps argument's floor; 1e-8)
    for d in (1e-5, 1e-6, 1e-12, 1e-3, float(np.finfo(np.float32).eps), 1e-4, 1e-8):
        if isinstance(eps, (int, float)) and not isinstance(eps, bool) and eps != d:
            out.append(({**cfg, "eps": d}, f"eps {d:g} (a default) where {eps:g} belongs", "eps"))
    m = full.get("momentum", "absent")          # (a config the op refuses: its own, no momentum search)
    if m is None:
        out.append(({**cfg, "momentum": 0.1}, "momentum 0.1 (the default) where None (a cumulative average) "
                                              "belongs", "running"))
    elif isinstance(m, (int, float)) and not isinstance(m, bool) and 0 < m < 1:
        out += [({**cfg, "momentum": 1 - m}, f"momentum {1 - m:g} where {m:g} belongs (the update's weights "
                                            "swapped)", "running"),
                ({**cfg, "momentum": None}, f"a cumulative average (momentum None) where momentum {m:g} belongs",
                 "running")]
        # the update applied twice with the same batch statistics (a forward recomputed, as activation
        # checkpointing does, each pass updating): the old value's weight squared, (1 - m)^2 (onnx's m: m^2)
        twice = m * m if cfg.get("convention") == "onnx" else 1 - (1 - m) ** 2
        out.append(({**cfg, "momentum": twice}, f"the running statistics updated twice with the same batch's "
                                                f"(momentum {twice:g} where {m:g} belongs: the old value weighted "
                                                f"{'m^2' if cfg.get('convention') == 'onnx' else '(1 - m)^2'})",
                    "running"))
    if isinstance(m, (int, float)) and not isinstance(m, bool) and 0 < m < 1 and m != 0.1:
        out.append(({**cfg, "momentum": 0.1}, f"momentum 0.1 (the default) where {m:g} belongs", "running"))
    dp = cfg.get("dropout_p")
    if isinstance(dp, (int, float)) and not isinstance(dp, bool) and 0 < dp < 1:
        # the keep probability read as the drop probability (1/p where 1/(1 - p) belongs)
        out.append(({**cfg, "dropout_p": 1.0 - dp}, f"dropout_p {1 - dp:g} where {dp:g} belongs (the keep and drop "
                                                    "probabilities exchanged)", "dropout"))
    pw = cfg.get("p")
    if case.op == "lp_normalize" and isinstance(pw, (int, float)) and not isinstance(pw, bool):
        for p2 in (1.0, 2.0, math.inf):         # another norm's power: another normalizer's equation
            if p2 != pw:
                out.append(({**cfg, "p": p2}, f"the {p2:g}-norm where the {pw:g}-norm belongs", "semantics"))
    gs = cfg.get("group_size")
    if isinstance(gs, int) and not isinstance(gs, bool):
        for g2 in (1, 2 * gs, gs // 2, None):
            if g2 != gs and (g2 is None or g2 >= 1):
                out.append(({**cfg, "group_size": g2}, f"group_size {g2} where {gs} belongs", "group"))
    for key, mech in (("norm_before_gate", "gate"), ("residual_in_fp32", "precision"), ("prenorm", "semantics")):
        v = cfg.get(key)
        if isinstance(v, bool):
            out.append(({**cfg, key: not v}, f"{key}={not v} where {v} belongs", mech))
    if case.op in ("norm_quant", "norm_quant_block"):
        for key in ("scale_ub", "min_scale"):
            v = cfg.get(key)
            if v is not None and not isinstance(v, bool) and v != 0:
                out.append(({**cfg, key: None if key == "scale_ub" else 0.0},
                            f"{key} ignored (where {v:g} belongs)", "quant_scale"))
        qd = cfg.get("quant_dtype")
        for other in ("float8_e4m3fn", "float8_e5m2", "int8"):
            if qd is not None and other != qd:
                out.append(({**cfg, "quant_dtype": other}, f"{other}'s range where {qd}'s belongs", "quant_scale"))
        if case.op == "norm_quant_block":
            from ..norms.norm_quant_block import FORMAT_RULES, resolve
            try:
                rc = resolve(cfg)
            except Exception:                               # noqa: BLE001 - a config the op refuses
                rc = None
            for rule in FORMAT_RULES.get(rc["format"], ()) if rc else ():
                if rule != rc["scale_rule"]:
                    out.append(({**cfg, "scale_rule": rule}, f"the scale rule {rule!r} where {rc['scale_rule']!r} "
                                                             "belongs", "scale_rounding"))
    nm = cfg.get("norm")
    if nm in ("layer_norm", "rms_norm"):
        other = "rms_norm" if nm == "layer_norm" else "layer_norm"
        out.append(({**cfg, "norm": other}, f"{other}'s statistics where {nm}'s belong", "semantics"))
    off = cfg.get("weight_offset")
    if isinstance(off, (int, float)) and not isinstance(off, bool):
        out.append(({**cfg, "weight_offset": 1.0 if off == 0 else 0.0},
                    f"weight_offset {1.0 if off == 0 else 0.0:g} where {off:g} belongs", "affine"))
    return out + _options_exchanged(cfg, full)      # (two options changed: after every single one)


# optional inputs a kernel may ignore, and the mechanism that says so (the bias left out; a scale input's
# path is judged within the bounds of the input's path, which hold a computed scale to 0: not searched here)
IGNORED = {"bias": "affine", "bias1": "affine"}
AFFINE_INPUTS = ("weight", "bias", "weight1", "bias1", "scale", "shift", "alpha")


def _rederived_fits(bounds, cfg, record, inputs, misread, res, near, unfit):
    """{(part, name): fits} of the arrays ``unfit`` that a deviation (config ``cfg``, ``inputs``, the misread
    cotangents or state) reproduces within the bound derived at the deviation's own point (``bounds``: the
    check's derivation, under its contract): a kernel computing that arithmetic rounds where its values lie
    (a SiLU's slope, a centred value's size), not where the specification's lie. Each bound is at least the
    check's; a failing array the reference itself meets within it is no evidence (not fitted)."""
    try:
        with np.errstate(all="ignore"):
            E2 = bounds(cfg, record.training, inputs, misread.get("cotangents", record.cotangents),
                        misread.get("state", record.state), res)
    except Exception:                                       # noqa: BLE001 - no bound derived there: as it was
        return {}
    out = {}
    for part, name in unfit:
        got, alt, want, E = near[part, name]
        e2 = E2.get(part, {}).get(name)
        if e2 is None or np.shape(e2) != np.shape(E):
            continue
        Em = np.maximum(E, e2)
        out[part, name] = fit_ratio(got, alt, Em) <= 1 and not (
            (part, name) in record.failing and want is not None and fit_ratio(got, want, Em) <= 1)
    return out


def stored_through(case, part, name, got, want, E, x_shape):
    """A float16 output of x's shape converted through bfloat16 (float32 -> bfloat16 -> float16: two roundings, a
    store helper's conversion), the values right before it: the expected values rounded so fit within the bound:
    "precision" (rule 8); the explanation, or None. (A bfloat16 array through float16 moves by float16's rounding
    alone, far inside bfloat16's bound: no evidence; a statistic so fitting is as well a statistic computed in
    bfloat16, which the later searches tell apart.)"""
    other = {"float16": "bfloat16"}.get(case.dtype)
    if other is None or part != "outputs" or np.shape(got) != tuple(x_shape) \
            or np.asarray(got).dtype.kind not in "fV" or np.size(got) < 2:
        return None
    with np.errstate(all="ignore"):
        alt = np.asarray(round_to(np.asarray(want, dtype=np.float64), other), dtype=np.float64)
    if fit_ratio(got, alt, E) <= 1:
        return {"mechanism": "precision", "text": f"{_label(part, name)} is the expected value rounded to {other} "
                f"before its store in {case.dtype} (a conversion through the other 16-bit type: two roundings)"}
    return None


def _row_xhat(case, record, ref):
    """layer_norm's and rms_norm's x_hat = (x - mean) rstd from the reference's returned statistics (x's shape,
    float64; ``_elementwise_affine``'s statistics), or None."""
    x = record.inputs.get("x")
    if case.op not in ("layer_norm", "rms_norm") or x is None or not np.ndim(x) \
            or (_slice_length(case, np.shape(x)) or 0) < 2:
        return None
    parts = _elementwise_affine(case, record, ref)
    return None if parts is None else (np.asarray(record.inputs["x"], dtype=np.float64) - parts[0]) * parts[1]


def config_deviation(case, record, reference, ref, bounds=None):
    """A configuration value off (``_config_candidates``), or an input deviation (the weight left out, taken
    as 1; an optional input ignored; two inputs swapped; one read from another's buffer; a 0/1 keep-mask
    read as its complement; 1 + scale conventions; a running buffer read from another's, or at its first
    channel for every channel: running), that explains every failing array of the step and keeps every passing one within its bound; else, when
    only gradients fail, one that reproduces every failing gradient (the backward, or that gradient's
    reduction, computed with it: dalpha summed without the weight). ``reference(op, config, training, inputs, cotangents, state)`` re-evaluates the specification. ``ref``: the
    reference's result for the record (an explained value's bound grows over it: grown_fit).
    The explanation, or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > CONFIG_SIZE or not record.failing:
        return None
    # (config, inputs, what, mechanism, the mechanism when only the backward fits, the swapped pair, the
    # ignored input's name, or None)
    cands = [(cfg, record.inputs, what, mech, mech, None) for cfg, what, mech in _config_candidates(case, np.shape(x))]
    w = record.inputs.get("weight")
    if w is not None and np.ndim(w) and not case.config.get("weight_offset"):
        cands.append((case.config, {**record.inputs, "weight": np.ones(np.shape(w), dtype=np.asarray(w).dtype)},
                      "the weight left out (taken as 1)", "affine", "backward", None))
    for k, mech in IGNORED.items():          # an optional input ignored: the path without it taken
        if record.inputs.get(k) is not None:
            cands.append((case.config, {n: v for n, v in record.inputs.items() if n != k},
                          f"the input {k} ignored (the computation without it)", mech, mech, k))
    if record.inputs.get("weight") is not None and record.inputs.get("bias") is not None:
        # the affine flag not set: weight and bias both ignored (an inference kernel's y = x_hat)
        cands.append((case.config, {n: v for n, v in record.inputs.items() if n not in ("weight", "bias")},
                      "the affine left out (weight and bias both ignored: y = x_hat)", "affine", "affine", None))
    floats = [k for k, v in record.inputs.items() if k != "x" and np.ndim(v) and np.asarray(v).dtype.kind not in "iub"]
    # (one input read from another's buffer before two exchanged: where both fit, the one change; a gain read
    # through the offset's pointer in a backward that reads no offset is no exchange)
    for a in ["x"] + floats:                # one input read from another's buffer (the gate's pointer passed as x's)
        for b in ["x"] + floats:
            va, vb = np.asarray(record.inputs[a]), np.asarray(record.inputs[b])
            if a != b and np.ndim(va) and va.size == 1 < vb.size:
                # a scalar input (dyt's alpha) read from the first value of another's buffer: layout (one value:
                # a per-channel vector read from x's leading values fits wherever the activation saturates)
                cands.append((case.config, {**record.inputs, a: vb.reshape(-1)[:1].reshape(va.shape).astype(
                    va.dtype)}, f"the input {a} read from {b}'s buffer (its first value)", "layout", "layout", None))
            if a != b and a != "x" and va.size > 1 and vb.size == 1:
                # a vector input read through a scalar input's pointer with stride 0: every element its value
                cands.append((case.config, {**record.inputs, a: np.full(va.shape, vb.reshape(-1)[0], dtype=va.dtype)},
                              f"the input {a} read from {b}'s buffer with stride 0 (every element {b}'s value)",
                              "layout", "layout", None))
            if a != b and a != "x" and 1 < va.size < vb.size:
                # a parameter read from the leading values of a larger input's buffer (the bias through x's pointer)
                cands.append((case.config, {**record.inputs, a: vb.reshape(-1)[:va.size].reshape(va.shape).astype(
                    va.dtype)}, f"the input {a} read from {b}'s buffer (its first {va.size} values)", "layout",
                    "layout", None))
            if a != b and np.shape(record.inputs[a]) == np.shape(record.inputs[b]):
                # another parameter of the same role (weight for weight1: which weight multiplies, rule 13) is
                # affine; any other input's buffer (the weight from the bias's pointer) a layout misread (rule 12)
                mech = "affine" if {a, b} <= set(AFFINE_INPUTS) and a.rstrip("0123456789") == b.rstrip("0123456789") \
                    else "dropout" if "mask" in a and "mask" in b else "layout"
                cands.append((case.config, {**record.inputs, a: record.inputs[b]},
                              f"the input {a} read from {b}'s buffer", mech, mech, None))
    from .. import registry
    required = registry.get(case.op).required
    for a in floats:                        # a required input read from a zero-initialised buffer (an output's, such
        if a in required:                   # as its own gradient's, passed in its place): zeros (rule 12, layout; an
            #                                 optional one's zeros are its absence, the "ignored" candidates')
            cands.append((case.config, {**record.inputs, a: np.zeros_like(np.asarray(record.inputs[a]))},
                          f"the input {a} read as zeros (a zero-initialised buffer, an output's, passed in its place)",
                          "layout", "layout", None))
    # two inputs of one shape swapped (weight and bias, shift and scale; then x with another: the gate z, two
    # pointer arguments in each other's slot, rule 12's layout)
    pairs = [(a, b) for i, a in enumerate(floats) for b in floats[i + 1:]]
    pairs += [("x", b) for b in floats] if record.inputs.get("x") is not None else []
    for a, b in pairs:
        if np.shape(record.inputs[a]) == np.shape(record.inputs[b]):
            # another branch's keep-mask: rule 4; two parameters: which one multiplies, rule 13
            mech = "dropout" if "mask" in a and "mask" in b else "affine" if {a, b} <= set(AFFINE_INPUTS) \
                else "layout"
            cands.append((case.config, {**record.inputs, a: record.inputs[b], b: record.inputs[a]},
                          f"the inputs {a} and {b} swapped", mech, mech, (a, b)))
    for a in ["x"] + floats:                # an activation-sized input read column-major (its strides swapped)
        v = np.asarray(record.inputs[a])
        if a not in AFFINE_INPUTS and np.ndim(v) >= 2 and np.shape(v) == np.shape(x) and min(np.shape(v)) > 1:
            idx = np.arange(v.size).reshape(v.shape)
            for m, what in ((idx.ravel(order="F"), "column-major"),
                            (np.argsort(idx.ravel(order="F"), kind="stable"), "column-major, read back row-major")):
                mech = "dropout" if "mask" in a else "layout"
                cands.append((case.config, {**record.inputs, a: v.reshape(-1)[m].reshape(v.shape)},
                              f"the input {a} read in {what} order", mech, mech, None))
    for a in floats:                        # a parameter vector read at another index: layout (the backward's
        v = np.asarray(record.inputs[a])    # alone where only gradients fail)
        if a not in AFFINE_INPUTS or np.ndim(v) != 1 or np.size(v) < 4:
            continue
        n, j = np.size(v), np.arange(np.size(v))
        maps = [(j % k, f"index j % {k} (a {k}-wide tile's local index)") for k in (8, 16, 32, 64, 128) if k < n]
        maps += [(j // k * k, f"its {k}-wide block's first index (loaded once per block)") for k in (8, 16, 32, 64, 128)
                 if k < n]
        maps += [(np.zeros_like(j), "index 0 for every index (its pointer not advanced)"), (j[::-1], "the reversed index"),
                 (np.minimum(j + 1, n - 1), "the next index (the last its own)")]
        for m, what in maps:
            cands.append((case.config, {**record.inputs, a: v[m]}, f"the input {a} read at {what}", "layout", "layout",
                          None))
    if case.op == "dyt" and record.inputs.get("alpha") is not None:     # alpha's initial value (DyT's 0.5)
        al = np.asarray(record.inputs["alpha"])
        cands.append((case.config, {**record.inputs, "alpha": np.full_like(al, 0.5)}, "alpha read as its initial "
                      "value 0.5 (captured at construction) where the current alpha belongs", "affine", "backward",
                      None))
    if case.dtype in ("float32", "float64"):     # an input loaded through a 16-bit pointer (rounded to nearest)
        import ml_dtypes
        for a in ["x"] + [k for k, v in record.inputs.items() if k != "x" and np.asarray(v).dtype.kind == "f"]:
            for low in (ml_dtypes.bfloat16, np.float16):
                v = np.asarray(record.inputs[a])
                cands.append((case.config, {**record.inputs, a: v.astype(low).astype(v.dtype)},
                              f"the input {a} loaded as {np.dtype(low).name} (rounded to nearest)", "precision",
                              "precision", None))
    st = {k: np.asarray(v) for k, v in record.state.items() if np.ndim(v) and np.asarray(v).dtype.kind == "f"}
    for a in st:                            # a running buffer read from another's, or at its first channel
        for b in st:
            if a != b and np.shape(st[a]) == np.shape(st[b]):
                cands.append((case.config, record.inputs, f"the running buffer {a} read from {b}'s", "running",
                              "running", None, {"state": {**record.state, a: st[b]}}))
    first = {a: np.full_like(v, v.reshape(-1)[0]) for a, v in st.items() if np.size(v) > 1}
    for a in list(first) + ([tuple(first)] if len(first) > 1 else []):
        names = a if isinstance(a, tuple) else (a,)
        cands.append((case.config, record.inputs, f"{' and '.join(names)} read at the first channel for every "
                      "channel (the buffer's pointer not advanced)", "running", "running", None,
                      {"state": {**record.state, **{k: first[k] for k in names}}}))
    for c, v in record.cotangents.items():  # a backward's dy read in another index order: layout
        v = np.asarray(v)
        if np.ndim(v) >= 2 and min(np.shape(v)) > 1:
            r = v.reshape(-1, np.shape(v)[-1])
            cm = v.reshape(-1)[np.arange(v.size).reshape(v.shape).ravel(order="F")].reshape(v.shape)
            for dv, what in ((cm, "in column-major order"),
                             (np.concatenate([r[1:], r[-1:]]), "with each row from the next row (the last its own)"),
                             (np.concatenate([r[:1], r[:-1]]), "with each row from the previous row (the first its "
                                                               "own)")):
                cands.append((case.config, record.inputs, f"the cotangent d{c} read {what}", "layout", "layout", None,
                              {"cotangents": {**record.cotangents, c: dv.reshape(v.shape)}}))
    xh = _row_xhat(case, record, ref)
    if xh is not None:                      # a checkpointed backward normalizing its saved x_hat again
        # (its values on x_hat's scale, not x's: the check's bound, derived at x, is no measure of its rounding
        # there; a miss up to REDERIVE times the ratio of the two scales is judged again at its own point)
        with np.errstate(all="ignore"):
            scale = float(np.sqrt(np.mean(np.square(np.asarray(x, dtype=np.float64))) / max(np.mean(xh * xh), 1e-300)))
        cands.append((case.config, {**record.inputs, "x": xh.astype(np.asarray(x).dtype)}, "x read as the saved "
                      "x_hat (the normalization applied to it again)", "backward", "backward", None,
                      {"scale": scale if np.isfinite(scale) and scale > 1 else 1.0}))
    for a in floats:                        # one element of a short vector input loaded through a scalar's pointer
        for b2 in floats:
            va, vb = np.asarray(record.inputs[a]), np.asarray(record.inputs[b2])
            if a != b2 and vb.size == 1 and 1 < va.size <= 8:
                for k in range(va.size):
                    v2 = va.astype(np.float64).reshape(-1).copy()
                    v2[k] = float(vb.reshape(-1)[0])
                    cands.append((case.config, {**record.inputs, a: v2.reshape(va.shape).astype(va.dtype)},
                                  f"{a}[{k}] loaded through {b2}'s pointer", "layout", "layout", None))
    cots = {c: np.asarray(v) for c, v in record.cotangents.items() if v is not None and np.ndim(v)}
    if case.dtype in ("float32", "float64", "float16"):    # a cotangent read through a 16-bit pointer (to nearest)
        import ml_dtypes
        for c in cots:
            for low in (ml_dtypes.bfloat16, np.float16):
                if np.dtype(low).name != case.dtype:
                    cands.append((case.config, record.inputs, f"the cotangent d{c} loaded as {np.dtype(low).name} "
                                  "(rounded to nearest)", "precision", "precision", None,
                                  {"cotangents": {**record.cotangents, c: cots[c].astype(low).astype(cots[c].dtype)}}))
    for c in cots:                          # a cotangent read from another's buffer (a launch's pointer): layout
        for c2 in cots:
            if c2 != c and np.shape(cots[c2]) == np.shape(cots[c]):
                cands.append((case.config, record.inputs, f"the cotangent d{c} read from d{c2}'s buffer", "layout",
                              "layout", None, {"cotangents": {**record.cotangents, c: cots[c2]}, "whole": True}))
    gs, z = case.config.get("group_size"), record.inputs.get("z")
    if z is not None and isinstance(gs, int) and 0 < gs < np.shape(z)[-1] and np.shape(z)[-1] % gs == 0:
        # the gate z read at the first group's columns for every group (its pointer not advanced by the group)
        zf = np.asarray(z)
        cands.append((case.config, {**record.inputs, "z": np.tile(zf[..., :gs], (1,) * (zf.ndim - 1)
                                                                  + (zf.shape[-1] // gs,))},
                      "the gate z read at the first group's columns for every group", "layout", "layout", None))
    for a in floats:                        # a 0/1 keep-mask read as a drop-mask (its complement)
        v = np.asarray(record.inputs[a])
        if "mask" in a and v.size and np.all((v == 0) | (v == 1)):
            cands.append((case.config, {**record.inputs, a: (1 - v).astype(v.dtype)},
                          f"`{a}` read as its complement (1 - {a})", "dropout", "dropout", None))
    for a in floats:                        # an input read as 1 + it, or as it - 1 ("1 + scale" conventions)
        if a in ("weight", "scale", "gamma"):
            v = np.asarray(record.inputs[a])
            for d, what in ((1.0, f"1 + {a} where {a} belongs"), (-1.0, f"{a} where 1 + {a} belongs")):
                cands.append((case.config, {**record.inputs, a: v.astype(np.float64) + d}, what,
                              "affine", "affine", None))
    if case.op == "adaptive_layer_norm" and "scale" in floats:
        # the gain exp(scale) (a log-scale modulation's convention) where 1 + scale belongs: scale read as
        # exp(scale) - 1, its gradient through that read (times exp(scale))
        e = np.exp(np.asarray(record.inputs["scale"], dtype=np.float64))
        cands.append((case.config, {**record.inputs, "scale": e - 1.0}, "the gain exp(scale) where 1 + scale belongs",
                      "affine", "affine", None, {"chain": {"scale": e}}))
    grads_only = all(p == "grads" for p, _ in record.failing)
    later, fwd_alone, rederived = [], [], 0
    for cfg, inputs, what, mech, bwd_mech, pair, *misread in cands:
        misread = misread[0] if misread else {}
        try:
            with np.errstate(all="ignore"):
                res = reference(case.op, cfg, record.training, inputs, misread.get("cotangents", record.cotangents),
                                misread.get("state", record.state))
        except Exception:                                   # noqa: BLE001 - a deviation the spec refuses
            continue
        fits, near = {}, {}
        renamed = own_order = False
        direct = []                 # the failing arrays compared in their own shape
        for part, name in [(p, n) for p in ("outputs", "grads", "state") for n in record.compare[p]]:
            got, alt, E = record.got[part].get(name), getattr(res, part).get(name), record.E[part].get(name)
            if part == "grads" and alt is not None and name in misread.get("chain", {}):
                alt = np.asarray(alt, dtype=np.float64) * misread["chain"][name]    # through the input's read
            if "state" in misread and part == "state" and not record.training:
                alt = record.state.get(name)        # an eval call's buffers misread, never written: as given
            if isinstance(pair, str) and (part, name) == ("grads", pair):
                # an ignored input's own gradient: the computation without it has none, so it explains no
                # failure of that gradient
                if (part, name) in record.failing:
                    fits[part, name] = False
                continue
            if got is None or E is None:
                continue
            if alt is not None and part == "outputs" and np.shape(alt) != np.shape(got) and np.size(got):
                # a configuration's statistics of another shape, written in the kernel's own order into the
                # buffer it was given (what does not fit is lost; the rest never written: 0); evidence only
                # beside a failing array of its own shape that the change explains (below)
                buf = np.zeros(np.size(got))
                n = min(np.size(got), np.size(alt))
                buf[:n] = np.reshape(np.asarray(alt, dtype=np.float64), -1)[:n]
                alt, own_order = buf.reshape(np.shape(got)), True
            elif (part, name) in record.failing:
                direct.append((part, name))
            want = None if own_order else getattr(ref, part).get(name)     # the reference's: the bound grows
            fit = judged_fit(fit_ratio, record, part, name)
            ratio = grown_fit(fit, got, alt, want, E, (part, name) in record.failing) \
                if alt is not None and np.shape(alt) == np.shape(got) else math.inf
            fits[part, name] = ratio <= 1
            if 1 < ratio <= REDERIVE * misread.get("scale", 1.0):
                near[part, name] = (got, alt, want, E)
            if isinstance(pair, tuple) and part == "grads" and not fits[part, name]:
                # the swapped inputs' gradients returned under their own names, or under the swapped ones
                other = {pair[0]: pair[1], pair[1]: pair[0]}.get(name)
                alt = res.grads.get(other) if other else None
                fits[part, name] = alt is not None and np.shape(alt) == np.shape(got) and fit_ratio(got, alt, E) <= 1
                renamed |= fits[part, name]
        if renamed and not grads_only:
            # the forward swapped too: the two pointers exchanged at the launch, and each gradient is the one
            # of the input the kernel really read (the swapped specification's gradients under its own names)
            what = f"the inputs {pair[0]} and {pair[1]} swapped (each gradient that of the input read)"
        elif renamed:               # the gradients, not the inputs, trade places: both of them wrong
            what = f"the gradients of {pair[0]} and {pair[1]} returned in each other's place"
            if not all(("grads", n) in record.failing for n in pair):
                continue
            mech = bwd_mech = None  # a mix-up of the returned arrays: no mechanism of the list (not an affine rule)
        if own_order and not direct:
            continue                # only the re-shaped statistics fail: no evidence for the configuration
        unfit = [k for k, v in fits.items() if not v]
        if grads_only and "scale" in misread:   # (a backward alone on another scale: its failing arrays judged again)
            unfit = [k for k in unfit if k in record.failing]
        if unfit and bounds is not None and not renamed and not own_order and rederived < REDERIVE_MAX \
                and all(k in near for k in unfit):
            rederived += 1
            fits.update(_rederived_fits(bounds, cfg, record, inputs, misread, res, near, unfit))
        if all(fits.values()):
            if grads_only:          # the forward cannot tell the deviation here: the evidence is the backward's
                return {"mechanism": bwd_mech, "text": f"the backward with {what} reproduces every failing array "
                                                       "(the forward does not depend on it here)"}
            return {"mechanism": mech, "text": f"the specification with {what} reproduces every failing array"
                                               + (" (its statistics, of another shape, written in the kernel's own "
                                                  "order into the returned buffers)" if own_order else "")}
        if misread.get("whole"):
            continue                # (a buffer every gradient reads: all of them or none)
        if grads_only and all(fits.get(pn, False) for pn in record.failing):
            names = ", ".join(_label(p, n) for p, n in record.failing)
            later.append({"mechanism": bwd_mech, "text": f"the backward with {what} reproduces {names}"})
        if not grads_only and not any(p == "grads" for p, _ in record.failing) and fits and not pair \
                and not own_order and all(v for (p, _), v in fits.items() if p != "grads"):
            # the forward kernel alone deviating (its flag read wrong there), the backward's gradients as
            # specified: they pass (tried after every deviation of both)
            fwd_alone.append({"mechanism": mech, "text": f"the forward alone with {what} reproduces every failing "
                                                         "array (its backward as specified: the gradients pass)"})
    if later:
        return {**later[0], "backward_only": True}
    return fwd_alone[0] if fwd_alone else None


def _misread(a, N, C, S, inverse=False):
    """(N, C, *S) values as a kernel misreading their memory sees them: the (N, C, S) buffer indexed as
    (N, S, C) (channels_last strides on a contiguous tensor), or, ``inverse``, the other way round."""
    shape = np.shape(a)
    a = np.asarray(a).reshape(N, C, S)
    if inverse:
        return np.ascontiguousarray(a.transpose(0, 2, 1)).reshape(shape)
    return np.ascontiguousarray(a.reshape(N, S, C).transpose(0, 2, 1)).reshape(shape)


def layout_misread(case, record, reference):
    """A channel norm's x, dy and results read and written with the other layout's strides (NCHW memory
    indexed as NHWC, or NHWC as NCHW): the specification evaluated on the misread x reproduces every
    failing array once its results are written back the same way. The explanation, or None."""
    x = record.inputs.get("x")
    if case.op not in CHANNEL_OPS + ("group_norm_silu",) or x is None or np.ndim(x) < 3 \
            or np.size(x) > CONFIG_SIZE or not record.failing:
        return None
    N, C = np.shape(x)[:2]
    S = int(np.prod(np.shape(x)[2:], dtype=np.int64))
    if S < 2 or C < 2:
        return None
    for inverse, what in ((False, "NCHW memory indexed as channels_last (N, H, W, C)"),
                          (True, "channels_last memory indexed as NCHW")):
        rd = lambda d: {k: (_misread(v, N, C, S, inverse) if np.shape(v) == np.shape(x) else v)  # noqa: E731
                        for k, v in d.items()}
        try:
            with np.errstate(all="ignore"):
                res = reference(case.op, case.config, record.training, rd(record.inputs), rd(record.cotangents),
                                record.state)
        except Exception:                                   # noqa: BLE001 - a misread the spec refuses
            continue
        ok = True
        for part, name in record.failing:
            got, alt, E = record.got[part].get(name), getattr(res, part).get(name), record.E[part].get(name)
            if alt is not None and np.shape(alt) == np.shape(x):
                alt = _misread(alt, N, C, S, not inverse)
            if got is None or E is None or alt is None or np.shape(alt) != np.shape(got) or fit_ratio(got, alt, E) > 1:
                ok = False
                break
        if ok:
            return {"mechanism": "layout", "text": f"the specification on x read with the wrong strides ({what}) "
                                                   "reproduces every failing array"}
    return None


def fused_activation(case, record, reference, ref):
    """group_norm_silu's SiLU at another point of the chain p = x_hat w + b, y = silu(p): y = silu(x_hat) w
    + b (before the affine), silu(x_hat w) + b (the bias after it), p sigmoid(x_hat) (the gate's sigmoid of
    x_hat), p (the SiLU left out), silu(silu(p)) (the SiLU applied twice: the fused kernel's and the caller's),
    group_norm(silu(x)) (the SiLU before the norm: its statistics those of silu(x)); or a backward
    that ignores it (group_norm's gradients of dy). Explanations of the failing arrays they reproduce (every
    failing output, the gradients following; or every failing gradient), or []."""
    x = record.inputs.get("x")
    if case.op != "group_norm_silu" or x is None or np.size(x) > CONFIG_SIZE or not record.failing:
        return []
    bare = {k: v for k, v in record.inputs.items() if k not in ("weight", "bias")}
    try:
        with np.errstate(all="ignore"):
            xhat = np.asarray(reference("group_norm", case.config, record.training, bare, {}, record.state).outputs["y"],
                              dtype=np.float64)
            gn = reference("group_norm", case.config, record.training, record.inputs, record.cotangents, record.state)
    except Exception:                                       # noqa: BLE001 - the spec refusing the call
        return []
    shape = (1, -1) + (1,) * (np.ndim(x) - 2)
    w = record.inputs.get("weight")
    b = record.inputs.get("bias")
    w = 1.0 if w is None else np.asarray(w, dtype=np.float64).reshape(shape)
    b = 0.0 if b is None else np.asarray(b, dtype=np.float64).reshape(shape)
    silu = lambda p: p / (1.0 + np.exp(-p))                 # noqa: E731
    outs = [pn for pn in record.failing if pn[0] == "outputs"]
    E = lambda pn: record.E[pn[0]][pn[1]]                   # noqa: E731
    if outs == [("outputs", "y")]:
        got = record.got["outputs"]["y"]
        want = ref.outputs.get("y")        # the reference's y: the explained value's bound grows over it
        for y, what, mech in ((silu(xhat) * w + b, "the SiLU applied to x_hat before the affine", "affine"),
                              (silu(xhat * w) + b, "the bias added after the SiLU", "affine"),
                              ((xhat * w + b) / (1.0 + np.exp(-xhat)),
                               "the SiLU's sigmoid taken of x_hat, before the affine (p sigmoid(x_hat))", "affine"),
                              (np.asarray(gn.outputs["y"], dtype=np.float64), "the SiLU left out", "semantics"),
                              (silu(silu(np.asarray(gn.outputs["y"], dtype=np.float64))), "the SiLU applied twice",
                               "semantics")):
            if grown_fit(fit_ratio, got, y, want, E(("outputs", "y")), True) <= 1:
                return [{"part": "outputs", "name": "y", "step": record.step, "mechanism": mech,
                         "text": f"y is the specification's with {what}"}]
    if outs:        # the SiLU applied to x before the norm (act -> norm), none after: y and the statistics
        try:
            with np.errstate(all="ignore"):
                pre = reference("group_norm", case.config, record.training,
                                {**record.inputs, "x": silu(np.asarray(x, dtype=np.float64))}, {}, record.state)
        except Exception:                                   # noqa: BLE001 - the spec refusing the call
            pre = None
        if pre is not None and all(pre.outputs.get(n) is not None and grown_fit(
                fit_ratio, record.got[p][n], pre.outputs[n], ref.outputs.get(n), E((p, n)), True) <= 1
                for p, n in outs):
            return [{"part": p, "name": n, "step": record.step, "mechanism": "semantics",
                     "text": f"{_label(p, n)} is group_norm's of silu(x): the SiLU applied before the norm, none "
                             "after (the failing gradients follow from that forward)"} for p, n in outs]
    if not outs and all(gn.grads.get(n) is not None and np.shape(gn.grads[n]) == np.shape(record.got[p][n])
                        and fit_ratio(record.got[p][n], gn.grads[n], E((p, n))) <= 1 for p, n in record.failing):
        return [{"part": p, "name": n, "step": record.step, "mechanism": "backward",
                 "text": f"{_label(p, n)} is group_norm's gradient of dy: the backward ignores the SiLU"}
                for p, n in record.failing]
    return []


# an activation fused after a norm: (name, f, f') (SiLU, GELU exact and tanh-approximated, ReLU, sigmoid, tanh)
EPILOGUES = ACTIVATIONS[:6]


def _unfit_perturbed(case, record, reference, ref, y, df, res, unfit):
    """The arrays of ``unfit`` that the epilogue's gradients ``res`` miss beyond their bound grown by the
    chain's conditioning: the specification with dy f'(y) evaluated at inputs perturbed by one unit of the
    working precision (two patterns), spec_search.perturbed_bound."""
    spreads = []
    for k in range(PATTERNS):
        pert = perturbed_inputs(case, record, k)
        if pert is None:
            return unfit
        ins, cot = pert
        try:
            with np.errstate(all="ignore"):
                p2 = np.asarray(reference(case.op, case.config, record.training, ins, {}, record.state).outputs[y],
                                dtype=np.float64)
                spreads.append(reference(case.op, case.config, record.training, ins,
                                         {**cot, y: np.asarray(cot[y], dtype=np.float64) * df(p2)}, record.state))
        except Exception:                                   # noqa: BLE001 - the spec refusing the call
            return unfit
    out = []
    for q, n in unfit:
        others = [r.grads.get(n) for r in spreads]
        if any(o is None or np.shape(o) != np.shape(res.grads[n]) for o in others):
            out.append((q, n))
            continue
        E = perturbed_bound(record.E[q][n], res.grads[n], others, np.asarray(record.got[q][n]).dtype)
        want = ref.grads.get(n)     # (a failing array the reference meets within the grown bound: no evidence)
        if fit_ratio(record.got[q][n], res.grads[n], E) > 1 or want is not None and np.shape(want) == np.shape(
                res.grads[n]) and fit_ratio(record.got[q][n], want, E) <= 1:
            out.append((q, n))
    return out


def epilogue_activation(case, record, reference, ref, bounds=None):
    """An activation applied to the op's output (a fused norm's activation flag on where the call asked for
    none): y = f(the specification's y) for f of EPILOGUES, and the failing gradients the specification's
    with dy times f'(its y) (the backward through f). Another equation than the op's (rule 16: "semantics");
    explanations of every failing array, or []. A gradient beyond the check's bound is judged again within
    the bound ``bounds`` derives at dy f'(y) (``_rederived_fits``). group_norm_silu's own SiLU is
    fused_activation's. A quantizer's codes under a ReLU are clamped below at 0: the clamp's ("saturation",
    rule 5: an unsigned format's lower bound)."""
    from .. import registry
    x = record.inputs.get("x")
    if x is None or np.size(x) > CONFIG_SIZE or case.op == "group_norm_silu" or not record.failing:
        return []
    y = registry.get(case.op).outputs[0]
    got, want, E = record.got["outputs"].get(y), ref.outputs.get(y), record.E["outputs"].get(y)
    if ("outputs", y) not in record.failing or got is None or want is None or E is None \
            or np.shape(got) != np.shape(want) or any(p == "outputs" and n != y for p, n in record.failing):
        return []
    p = np.asarray(want, dtype=np.float64)
    grads = [pn for pn in record.failing if pn[0] == "grads"]
    for name, f, df in EPILOGUES:
        with np.errstate(all="ignore"):
            if grown_fit(fit_ratio, got, f(p), want, E, True) > 1:
                continue
            if grads:
                dy = record.cotangents.get(y)
                if dy is None:
                    continue
                cot = {**record.cotangents, y: np.asarray(dy, dtype=np.float64) * df(p)}    # dy through f
                try:
                    res = reference(case.op, case.config, record.training, record.inputs, cot, record.state)
                except Exception:                           # noqa: BLE001 - the spec refusing the call
                    return []
                if any(res.grads.get(n) is None or np.shape(res.grads[n]) != np.shape(record.got[q][n]) for q, n in grads):
                    continue
                unfit = [(q, n) for q, n in grads if fit_ratio(record.got[q][n], res.grads[n], record.E[q][n]) > 1]
                if unfit and bounds is not None:    # judged again within the bound derived at dy f'(y)
                    near = {(q, n): (record.got[q][n], res.grads[n], ref.grads.get(n), record.E[q][n]) for q, n in unfit}
                    fits = _rederived_fits(bounds, case.config, record, record.inputs, {"cotangents": cot}, res, near,
                                           unfit)
                    unfit = [pn for pn in unfit if not fits.get(pn)]
                if unfit:
                    # within the conditioning of the chain through f: dy f'(y) moves with y's own rounding (two
                    # perturbed evaluations, spec_search.perturbed_bound)
                    unfit = _unfit_perturbed(case, record, reference, ref, y, df, res, unfit)
                if unfit:
                    continue
        if name == "ReLU" and quant_name(np.asarray(got).dtype):     # quantized codes clamped below at 0: the
            return [{"part": q, "name": n, "step": record.step, "mechanism": "saturation",    # clamp's (rule 5)
                     "text": f"{_label(q, n)} is the specification's clamped below at 0 (every negative code 0: an "
                             "unsigned format's lower bound where the signed format's belongs)"} for q, n in record.failing]
        return [{"part": q, "name": n, "step": record.step, "mechanism": "semantics",
                 "text": f"{_label(q, n)} is the specification's with a {name} applied to {y} (forward and backward: "
                         "an activation the call did not ask for)"} for q, n in record.failing]
    return []


def mode_deviation(case, record, reference):
    """The failing arrays of a call of a stateful op that the specification in the other mode reproduces
    (an eval call's gradient by the training formula, with batch statistics; a training call normalized
    by the running statistics): a list of explanations, one per array it explains."""
    from .. import registry
    x = record.inputs.get("x")
    if x is None or np.size(x) > CONFIG_SIZE or not registry.get(case.op).state or not record.failing:
        return []
    try:
        with np.errstate(all="ignore"):
            res = reference(case.op, case.config, not record.training, record.inputs, record.cotangents,
                            record.state)
    except Exception:                                       # noqa: BLE001 - a mode the spec refuses
        return []
    out = []
    mode = "training" if not record.training else "evaluation"
    mixed = _mixed_modes(case, record, reference)
    if mixed:
        return mixed
    for part, name in record.failing:
        got, alt, E = record.got[part].get(name), getattr(res, part).get(name), record.E[part].get(name)
        if got is None or E is None or alt is None or np.shape(alt) != np.shape(got) or fit_ratio(got, alt, E) > 1:
            continue
        if part == "state":        # the running statistics updated (or not) in the other mode's way: the update rule
            out.append({"part": part, "name": name, "step": record.step, "mechanism": "running",
                        "text": f"{name} is updated as in a {mode} call"})
            continue
        out.append({"part": part, "name": name, "step": record.step, "mechanism": "mode",
                    "text": f"{_label(part, name)} is the {mode}-mode value (the other mode's statistics or formula)"})
    return out


def _mixed_modes(case, record, reference):
    """batch_norm's eval call with one running statistic replaced by the batch's (x - the batch mean over the
    running variance, or the running mean over the batch variance): the modes mixed, "mode" (rule 14), when
    the specification so evaluated reproduces every failing array; explanations, or []."""
    x, st = record.inputs.get("x"), record.state or {}
    if case.op != "batch_norm" or record.training or np.ndim(x) < 2 or st.get("running_mean") is None \
            or st.get("running_var") is None:
        return []
    x64 = np.asarray(x, dtype=np.float64)
    A = (0,) + tuple(range(2, x64.ndim))
    mean, var = x64.mean(axis=A), x64.var(axis=A)
    for key, v, what in (("running_mean", mean, "the batch mean where the running mean belongs (the running "
                                                "variance kept)"),
                         ("running_var", var, "the batch variance where the running variance belongs (the running "
                                              "mean kept)")):
        state = {**st, key: v.reshape(np.shape(st[key]))}
        try:
            with np.errstate(all="ignore"):
                res = reference(case.op, case.config, False, record.inputs, record.cotangents, state)
        except Exception:                                   # noqa: BLE001 - a call the spec refuses
            continue
        if _fits_all(record, {"outputs": res.outputs, "grads": res.grads}):
            return [{"part": p, "name": n, "step": record.step, "mechanism": "mode",
                     "text": f"the evaluation call normalizes with {what}"} for p, n in record.failing]
    return []


def weight_first(case, record, reference):
    """layer_norm / rms_norm / gated_norm / norm_quant with the weight applied to x before the statistics, y = norm(x * w) (+
    bias; w + weight_offset where the config has one; gated_norm's value x * silu(z) is linear in x, so norm(x *
    silu(z) * w) is the specification's at x * w): the specification evaluated on x * w with a unit weight, dx
    its gradient times w, dweight the sum over the rows of that gradient times x, reproduces every failing
    array and keeps the passing ones within their bounds (mechanism "affine": which value the weight
    multiplies). The explanation, or None."""
    x, w = record.inputs.get("x"), record.inputs.get("weight")
    if case.op not in ("layer_norm", "rms_norm", "gated_norm", "norm_quant") or x is None or w is None or not np.ndim(w) \
            or np.size(x) > CONFIG_SIZE or np.shape(x)[np.ndim(x) - np.ndim(w):] != np.shape(w):
        return None
    off = float(case.config.get("weight_offset") or 0.0)
    weff = np.asarray(w, dtype=np.float64) + off
    x64 = np.asarray(x, dtype=np.float64)
    try:
        with np.errstate(all="ignore"):
            res = reference(case.op, case.config, record.training, {**record.inputs, "x": x64 * weff,
                            "weight": np.full(np.shape(w), 1.0 - off)}, record.cotangents, record.state)
    except Exception:                                       # noqa: BLE001 - a call the spec refuses
        return None
    grads = dict(res.grads)
    if grads.get("x") is not None:
        dv = np.asarray(grads["x"], dtype=np.float64)
        grads["x"] = dv * weff
        grads["weight"] = (dv * x64).sum(axis=tuple(range(np.ndim(x) - np.ndim(w))))
    if not _fits_all(record, {"outputs": res.outputs, "grads": grads, "state": res.state}):
        return None
    return {"mechanism": "affine", "text": "the specification with the weight applied to x before the statistics, "
                                           "y = norm(x * weight), reproduces every failing array"}


def bias_first(case, record, reference):
    """layer_norm / gated_norm / norm_quant with the bias added to the normalized value before the statistics
    and the weight alone after, y = norm(v + bias) * w (a fused prologue adding it; gated_norm's v = x silu(z)
    where the gate comes first: the specification's at x + bias / silu(z)): the specification evaluated with
    the bias so moved and none after. Where gradients fail too, the backward of that function (dx its gradient
    at the moved input, dbias that gradient summed over the rows; gated_norm's gate first: not tried). The
    outputs, or every failing array, reproduced and the passing ones within their bounds: "affine" (rule 13:
    the bias alone moved before, as weight_first's weight). The explanation, or None."""
    x, b = record.inputs.get("x"), record.inputs.get("bias")
    if case.op not in ("layer_norm", "gated_norm", "norm_quant") or x is None or b is None or not np.ndim(b) \
            or np.size(x) > CONFIG_SIZE or np.shape(x)[np.ndim(x) - np.ndim(b):] != np.shape(b):
        return None
    x64, b64 = np.asarray(x, dtype=np.float64), np.asarray(b, dtype=np.float64)
    gate_first = case.op == "gated_norm" and not case.config.get("norm_before_gate", True)
    grads_fail = any(p == "grads" for p, _ in record.failing)
    if gate_first and grads_fail:
        return None
    with np.errstate(all="ignore"):
        if gate_first:
            from ..specs._math import sigmoids
            z = np.asarray(record.inputs["z"], dtype=np.float64)
            gate = z * sigmoids(z)[0]
            if np.any(gate == 0):
                return None
            moved = x64 + b64 / gate
        else:
            moved = x64 + b64
        try:
            res = reference(case.op, case.config, record.training,
                            {**{k: v for k, v in record.inputs.items() if k != "bias"}, "x": moved},
                            record.cotangents if grads_fail else {}, record.state)
        except Exception:                                   # noqa: BLE001 - a call the spec refuses
            return None
    vals = {"outputs": res.outputs}
    if grads_fail:
        grads = dict(res.grads)
        if grads.get("x") is not None:
            grads["bias"] = np.asarray(grads["x"], dtype=np.float64).sum(axis=tuple(range(np.ndim(x) - np.ndim(b))))
        vals["grads"] = grads
    if not _fits_all(record, vals):
        return None
    return {"mechanism": "affine", "text": "the specification with the bias added to the normalized value before "
                                           "the statistics and the weight alone after, y = norm(x + bias) * weight, "
                                           f"reproduces every failing {'array' if grads_fail else 'output'}"}


def _fold_stored(dtype, rstd, w, mean, bias):
    """The normalization and affine folded right, a = rstd w and b = bias - mean a, each stored in ``dtype``
    (rounded to nearest), as float64 arrays (a, b)."""
    a = rstd * w
    return round_to(a, dtype).astype(np.float64), round_to(bias - mean * a, dtype).astype(np.float64)


def folded_affine(case, record, ref):
    """y by the normalization and the affine folded into one scale and shift per slice and feature, y = x a + b
    with a = rstd w, b = bias - mean a, one factor of the fold missing (the shift without the weight, or without
    rstd; the scale without the weight) or one too many (the bias times rstd, the weight or both: the factor
    distributed over the whole shift), the statistics and the gradients right: "affine" (rule 13: the
    parameters' convention, a folded scale and shift). Row and channel norms in training; the explanation, or
    None."""
    aln = case.op == "adaptive_layer_norm"     # (its modulation per sample: the gain 1 + scale, the shift)
    x, w = record.inputs.get("x"), record.inputs.get("scale" if aln else "weight")
    gns = case.op == "group_norm_silu"      # (its groups as group_norm's, a SiLU after the affine)
    if case.op not in ROW_OPS + ("group_norm_silu", "adaptive_layer_norm") or x is None or w is None \
            or not record.training and not aln \
            or np.size(x) > CONFIG_SIZE or [pn for pn in record.failing] != [("outputs", "y")] \
            or ref.outputs.get("y") is None or gns and np.ndim(x) < 3:
        return None
    view = dataclasses.replace(case, op="group_norm") if gns else case
    act = (lambda p: p / (1.0 + np.exp(-p))) if gns else (lambda p: p)
    with np.errstate(all="ignore"):
        xs = _slices(view, x, x)
        rstd = _row_rstd(view, x, ref)
        mean = np.zeros_like(rstd) if case.op == "rms_norm" else xs.mean(axis=1, keepdims=True)
        per = lambda v, add: np.broadcast_to(add + np.reshape(v, (np.shape(v)[0],) + (1,) * (np.ndim(x) - 2)  # noqa: E731
                                                              + (np.shape(v)[-1],)), np.shape(x))
        W = _slices(view, x, per(w, 1.0) if aln else _weight_full(view, x, record.inputs))
        bn = "shift" if aln else "bias"
        has_b = record.inputs.get(bn) is not None
        B = _slices(view, x, per(record.inputs[bn], 0.0) if aln else _bias_full(view, x, record.inputs)) if has_b \
            else 0.0
        tries = [(xs * rstd * W + B - mean * rstd, "the shift without the weight (b = bias - mean rstd)"),
                 (xs * rstd * W + B - mean * W, "the shift without rstd (b = bias - mean w)"),
                 (xs * rstd + B - mean * rstd * W, "the scale without the weight (a = rstd)")]
        if has_b:       # the factor distributed over the whole shift, the bias too
            tries += [((xs - mean) * rstd * W + B * f, f"the bias multiplied by {what} too ({b})")
                      for f, what, b in ((rstd, "rstd", "b = (bias - mean w) rstd"),
                                         (W, "the weight", "b = bias w - mean a"),
                                         (rstd * W, "a", "b = (bias - mean) a"))]
        tries = [(y, what, "affine") for y, what in tries]
        if case.dtype in ("float16", "bfloat16"):       # the right fold, a and b stored in the 16-bit dtype
            a, b = _fold_stored(case.dtype, rstd, W, mean, B)
            tries.append((xs * a + b, f"a and b stored in {case.dtype} (rounded) before the product", "precision"))
        for y, what, mech in tries:
            y = _unslices(view, np.shape(x), act(y))
            if np.all(np.isfinite(y)) and _fits_all(record, {"outputs": {**ref.outputs, "y": y}}):
                return {"mechanism": mech, "text": "y is the normalization and the affine folded into one scale "
                        f"and shift, {'y = silu(x a + b)' if gns else 'y = x a + b'} with a = rstd w and b = bias - "
                        f"mean a, but {what}"}
    return None


def branch_twice(case, record, ref):
    """add_norm's normalization pass reading the residual from its buffer after the sum s was stored there in
    place (s = x c + residual): it normalizes x c + s, the branch added twice, with the statistics of s (right):
    y = y_ref + (s - residual) rstd W (y1 likewise with its weight1), only y (y1) failing: "layout" (rule 12: one
    input read from another's buffer); the explanation, or None."""
    res, s = record.inputs.get("residual"), ref.outputs.get("residual_out")
    if case.op != "add_norm" or res is None or s is None or not record.failing \
            or any(pn not in (("outputs", "y"), ("outputs", "y1")) for pn in record.failing) \
            or np.size(s) > CONFIG_SIZE:
        return None
    with np.errstate(all="ignore"):
        ss = _slices(case, s, s)
        eps = float(case.config.get("eps", 1e-5) or 0.0)
        m = ss.mean(axis=1, keepdims=True) if case.config.get("norm", "layer_norm") == "layer_norm" else 0.0
        rstd = 1.0 / np.sqrt(((ss - m) ** 2).mean(axis=1, keepdims=True) + eps)
        off = float(case.config.get("weight_offset", 0.0) or 0.0)
        branch = _slices(case, s, np.asarray(s, dtype=np.float64) - np.asarray(res, dtype=np.float64)) * rstd
        for pn in record.failing:
            w = record.inputs.get("weight1" if pn[1] == "y1" else "weight")
            W = 1.0 if w is None else _slices(case, s, np.broadcast_to(np.asarray(w, dtype=np.float64) + off,
                                                                       np.shape(s)))
            want = ref.outputs.get(pn[1])
            got = record.got["outputs"].get(pn[1])
            if want is None or got is None or fit_ratio(got, np.reshape(_slices(case, s, want) + branch * W,
                                                                         np.shape(got)), record.E["outputs"][pn[1]]) > 1:
                return None
    return {"mechanism": "layout", "text": "y is normalized from x c + s, the branch added twice, with the statistics "
            "of s: the normalization pass reloading the residual from its buffer after s was stored over it in place"}


ROW_GROWTH = 1e3      # second_pass_rows: the most a bound grows (another row's values, each rounded at its size)
MARGIN_ROWS = 4.0     # second_pass_rows: how far outside the grown bound the reference must be (diagnosis.MARGIN)


TILE_WIDTHS = (64, 128, 256, 512, 1024, 2048)     # an elementwise pass's flat tiles


def _elementwise_affine(case, record, ref):
    """(M, R, W, B): x-shaped float64 arrays with the reference's y = (x - M) R W + B, each element's slice
    statistics (mean, 1 / std) and parameters, for the row and channel norms and z_score; or None."""
    x = np.asarray(record.inputs["x"], dtype=np.float64)
    o = ref.outputs
    if case.op in ROW_OPS and o.get("rstd") is not None:
        xs = _slices(case, x, x)
        R = np.asarray(o["rstd"], dtype=np.float64).reshape(-1, 1)
        M = np.zeros_like(R) if case.op == "rms_norm" or o.get("mean") is None else \
            np.asarray(o["mean"], dtype=np.float64).reshape(-1, 1)
        if R.shape[0] != xs.shape[0] or M.shape[0] != xs.shape[0]:
            return None
        full = lambda a: _unslices(case, x.shape, np.broadcast_to(a, xs.shape))     # noqa: E731
        W = np.broadcast_to(_weight_full(case, x, record.inputs), x.shape)
        B = _bias_full(case, x, record.inputs) if record.inputs.get("bias") is not None else np.zeros(x.shape)
        return full(M), full(R), W, B
    if case.op == "z_score" and o.get("std") is not None and o.get("mean") is not None:
        try:
            M, S = (np.broadcast_to(np.asarray(o[k], dtype=np.float64), x.shape) for k in ("mean", "std"))
        except ValueError:
            return None
        A = [i for i in range(x.ndim) if np.shape(o["mean"])[i] == 1 and x.shape[i] > 1]
        P = [s2 if i in A else 1 for i, s2 in enumerate(x.shape)]
        w, b = record.inputs.get("weight"), record.inputs.get("bias")
        W = np.broadcast_to(1.0 if w is None else np.asarray(w, dtype=np.float64).reshape(P), x.shape)
        B = np.broadcast_to(0.0 if b is None else np.asarray(b, dtype=np.float64).reshape(P), x.shape)
        with np.errstate(all="ignore"):
            return M, np.where(S == 0, 0.0, 1.0 / np.where(S == 0, 1.0, S)), W, B
    return None


def tile_first_index(case, record, ref):
    """y of an elementwise pass walking x's buffer in flat tiles of T values that takes the slice (and channel)
    index once per tile from its first element: each element normalized with the statistics and parameters of
    its tile's first element, the statistics and the gradients right: "layout" (rule 12); the explanation, or
    None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > CONFIG_SIZE or list(record.failing) != [("outputs", "y")] \
            or ref.outputs.get("y") is None or np.shape(ref.outputs["y"]) != np.shape(x):
        return None
    parts = _elementwise_affine(case, record, ref)
    if parts is None:
        return None
    xf = np.asarray(x, dtype=np.float64).reshape(-1)
    M, R, W, B = (np.reshape(a, -1) for a in parts)
    for T in TILE_WIDTHS:
        if T >= 2 * xf.size:
            break               # (one tile holding every element: its first element's slice for all)
        j = np.arange(xf.size) // T * T
        for k, what in ((j, "statistics and parameters"), (np.arange(xf.size), "statistics")):
            y = ((xf - M[j]) * R[j] * W[k] + B[k]).reshape(np.shape(x))
            if not np.all(np.isfinite(y)):
                continue
            if grown_fit(fit_ratio, record.got["outputs"]["y"], y, ref.outputs["y"], record.E["outputs"]["y"], True,
                         ROW_GROWTH, MARGIN_ROWS) <= 1:
                return {"mechanism": "layout", "text": f"y is each element normalized with the {what} of its flat "
                        f"tile's first element (an elementwise pass in tiles of {T} values taking the slice index once "
                        "per tile)"}
    return None


def slice_maps(S):
    """(f, what): another slice index read for each of S slices' statistics (f an index array of S values): the
    first slice of each tile of k = 2 or 4 slices (a program of k slices loading one slice's statistic), the
    statistics written in the order (A, B) read in the order (B, A) (a slice a B + b reading position b A + a,
    every factorization A B = S), the next or the previous slice (the last or first its own)."""
    s = np.arange(S)
    out = [(s - s % k, f"the first slice of each tile of {k} slices") for k in (2, 4) if S > 1]
    for A in range(2, S):
        if S % A == 0 and S // A > 1:
            B = S // A
            out.append(((s % B) * A + s // B, f"position b * {A} + a for the slice a * {B} + b (statistics written "
                        f"in ({A}, {B}) order, read in ({B}, {A}) order)"))
    out += [(np.minimum(s + 1, S - 1), "the next slice (the last its own)"),
            (np.maximum(s - 1, 0), "the previous slice (the first its own)")]
    seen, uniq = {s.tobytes()}, []
    for f, what in out:
        if f.tobytes() not in seen:
            seen.add(f.tobytes())
            uniq.append((f, what))
    return uniq


def stats_read_elsewhere(case, record, ref):
    """y of an elementwise pass reading its slice's mean, rstd or both at another slice index (``slice_maps``),
    the saved statistics and the gradients right (only y fails): "layout" (rule 12); the explanation, or None."""
    x = record.inputs.get("x")
    if x is None or np.size(x) > CONFIG_SIZE or list(record.failing) != [("outputs", "y")] \
            or ref.outputs.get("y") is None or np.shape(ref.outputs["y"]) != np.shape(x):
        return None
    parts = _elementwise_affine(case, record, ref)
    if parts is None or case.op not in ROW_OPS:
        return None
    xs = _slices(case, x, np.asarray(x, dtype=np.float64))
    M, R = (_slices(case, x, a)[:, :1] for a in parts[:2])
    W, B = parts[2], parts[3]
    S = xs.shape[0]
    which = (("rstd", False, True),) if case.op == "rms_norm" else \
        (("mean", True, False), ("rstd", False, True), ("mean and rstd", True, True))
    for f, where in slice_maps(S):
        for what, dm, dr in which:
            xh = (xs - (M[f] if dm else M)) * (R[f] if dr else R)
            y = _unslices(case, np.shape(x), xh) * W + B
            if not np.all(np.isfinite(y)):
                continue
            if grown_fit(fit_ratio, record.got["outputs"]["y"], y, ref.outputs["y"], record.E["outputs"]["y"], True,
                         ROW_GROWTH, MARGIN_ROWS) <= 1:
                return {"mechanism": "layout", "text": f"y is each slice normalized with the {what} of {where}, its "
                        "own elsewhere (the elementwise pass reading the statistics at another slice index)"}
    return None


def _silu_call(case, record):
    """group_norm_silu's call in float64 for the families below: (x, weight, bias, G, (y, mean, rstd, x_hat, p))
    with the specification's forward (weight and bias None where the call has none)."""
    from ..specs import group_norm_silu as GS
    x64 = np.asarray(record.inputs["x"], dtype=np.float64)
    w, b = (None if record.inputs.get(k) is None else np.asarray(record.inputs[k], dtype=np.float64)
            for k in ("weight", "bias"))
    G = int(case.config.get("num_groups", 1))
    with np.errstate(all="ignore"):
        fwd = GS.group_norm_silu(x64, w, b, G, float(case.config.get("eps", 1e-5) or 0.0))
    return x64, w, b, G, fwd


def _per_channel(v, shape, G):
    """Per-(sample, group) values ``v`` repeated over each group's channels, broadcastable to x's ``shape``."""
    N, C = shape[:2]
    return np.repeat(np.reshape(v, (N, G)), C // G, axis=1).reshape((N, C) + (1,) * (len(shape) - 2))


def _silu_affine(xhat, w, b):
    """p = x_hat w + b, the per-channel parameters broadcast over x_hat's trailing axes."""
    ps = (1, -1) + (1,) * (np.ndim(xhat) - 2)
    return xhat * (1.0 if w is None else w.reshape(ps)) + (0.0 if b is None else b.reshape(ps))


def _silu_vals(record, p, xhat, rstd, w, b, G, forward=True):
    """{(part, name): value}: y = silu(p) (``forward``) and, where the call has dy, the specification's backward
    given p, x_hat and rstd (silu'(p) at that p)."""
    from ..specs import group_norm_silu as GS
    vals = {("outputs", "y"): GS.silu(p)} if forward else {}
    dy = record.cotangents.get("y")
    if dy is not None:
        dx, dw, db = GS.group_norm_silu_backward(np.asarray(dy, dtype=np.float64), p, xhat, rstd, w, b is not None, G)
        vals.update({("grads", "x"): dx, ("grads", "weight"): dw, ("grads", "bias"): db})
    return vals


def _reproduces(record, vals):
    """Whether ``vals`` ((part, name) -> value) reproduces every failing array within its bound."""
    return all(vals.get(pn) is not None and np.shape(vals[pn]) == np.shape(record.got[pn[0]][pn[1]])
               and fit_ratio(record.got[pn[0]][pn[1]], vals[pn], record.E[pn[0]][pn[1]]) <= 1 for pn in record.failing)


def silu_stats_read_elsewhere(case, record, ref):
    """group_norm_silu's elementwise pass reading a (sample, group)'s mean, rstd or both at another slice index
    (``slice_maps``: the statistics written in (N, G) order read in (G, N) order, ...): its pre-activation p and
    y = silu(p) from them, the saved statistics right, the backward from the saved (right) x_hat with silu'
    evaluated at the saved p (the specification's backward given that p): "layout" (rule 12); the explanation
    of every failing array, or None."""
    x = record.inputs.get("x")
    if case.op != "group_norm_silu" or x is None or np.ndim(x) < 2 or np.size(x) > CONFIG_SIZE \
            or ("outputs", "y") not in record.failing \
            or any(pn not in (("outputs", "y"), ("grads", "x"), ("grads", "weight"), ("grads", "bias"))
                   for pn in record.failing):
        return None
    x64, w, b, G, (_, mean, rstd, xhat, _) = _silu_call(case, record)
    xs = x64.reshape(mean.size, -1)
    M, R = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    for f, where in slice_maps(M.shape[0]):
        for what, dm, dr in (("mean", True, False), ("rstd", False, True), ("mean and rstd", True, True)):
            with np.errstate(all="ignore"):
                p = _silu_affine(((xs - (M[f] if dm else M)) * (R[f] if dr else R)).reshape(np.shape(x)), w, b)
                vals = _silu_vals(record, p, xhat, rstd, w, b, G)
            if _reproduces(record, vals):
                return {"mechanism": "layout", "text": f"p (the SiLU's input) is each group normalized with the "
                        f"{what} of {where}, its own elsewhere (the elementwise pass reading the statistics at "
                        "another slice index; the backward from the saved x_hat with silu' at that p)"}
    return None


def silu_grad_from_output(case, record, ref):
    """group_norm_silu's backward recovering sigmoid(p) as y / p from the stored output y (rounded to the case
    dtype; 1/2 where p = 0) where sigmoid(p) belongs, the rest of its backward as specified: "precision" (rule 8:
    a value saved in a lower dtype); the explanation of every failing gradient (the forward passing), or None."""
    x, dy, y = record.inputs.get("x"), record.cotangents.get("y"), record.got["outputs"].get("y")
    if case.op != "group_norm_silu" or x is None or dy is None or y is None or np.size(x) > CONFIG_SIZE \
            or not record.failing or any(p != "grads" for p, _ in record.failing) or case.dtype == "float64":
        return None
    from ..specs.group_norm import group_norm_backward
    _, w, b, G, (_, _, rstd, xhat, p) = _silu_call(case, record)
    with np.errstate(all="ignore"):
        sg = np.where(p == 0, 0.5, np.asarray(y, dtype=np.float64) / np.where(p == 0, 1.0, p))
        dx, dw, db = group_norm_backward(np.asarray(dy, dtype=np.float64) * sg * (1.0 + p * (1.0 - sg)), xhat, rstd,
                                         w, b is not None, G)
    if _reproduces(record, {("grads", "x"): dx, ("grads", "weight"): dw, ("grads", "bias"): db}):
        return {"mechanism": "precision", "text": f"the backward's sigmoid(p) recovered as y / p from the stored output "
                f"y (rounded to {case.dtype}) where sigmoid(p) belongs"}
    return None


def silu_folded_in_half(case, record, ref):
    """group_norm_silu's forward folding the statistics and the affine into per-(sample, channel) a = w rstd and
    b = bias - mean a stored in the 16-bit case dtype, p = x a + b, its backward taking silu'(p) at that p (the
    group sums and x_hat exact): "precision" (rule 8: a value stored in a lower dtype); the explanation of every
    failing array (y among them), or None."""
    x = record.inputs.get("x")
    if case.op != "group_norm_silu" or x is None or np.size(x) > CONFIG_SIZE or np.ndim(x) < 3 \
            or case.dtype not in ("float16", "bfloat16") or ("outputs", "y") not in record.failing:
        return None
    x64, w, b, G, (_, mean, rstd, xhat, _) = _silu_call(case, record)
    ps = (1, -1) + (1,) * (x64.ndim - 2)
    with np.errstate(all="ignore"):
        a, sh = _fold_stored(case.dtype, _per_channel(rstd, x64.shape, G), 1.0 if w is None else w.reshape(ps),
                             _per_channel(mean, x64.shape, G), 0.0 if b is None else b.reshape(ps))
        vals = _silu_vals(record, x64 * a + sh, xhat, rstd, w, b, G)
    if _reproduces(record, vals):
        return {"mechanism": "precision", "text": "y is the normalization and the affine folded into one scale and "
                f"shift per sample and channel, a = rstd w and b = bias - mean a, stored in {case.dtype} (rounded) "
                "before p = x a + b, the backward's silu'(p) at that p"}
    return None


def silu_saved_stats_rounded(case, record, ref):
    """group_norm_silu's saved mean and rstd written to buffers of the 16-bit case dtype (rounded to nearest),
    the backward recomputing x_hat and p = x_hat w + b from them (silu'(p), dx, dweight, dbias), only gradients
    failing: "precision" (rule 8: a value saved in a lower dtype); the explanation, or None."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    if case.op != "group_norm_silu" or x is None or dy is None or np.size(x) > CONFIG_SIZE or np.ndim(x) < 3 \
            or case.dtype not in ("float16", "bfloat16") or not record.failing \
            or any(p != "grads" for p, _ in record.failing):
        return None
    x64, w, b, G, (_, mean, rstd, _, _) = _silu_call(case, record)
    with np.errstate(all="ignore"):
        mean, rstd = (np.asarray(round_to(v, case.dtype), dtype=np.float64) for v in (mean, rstd))
        xhat = (x64 - _per_channel(mean, x64.shape, G)) * _per_channel(rstd, x64.shape, G)
        vals = _silu_vals(record, _silu_affine(xhat, w, b), xhat, rstd, w, b, G, forward=False)
    if _reproduces(record, vals):
        return {"mechanism": "precision", "text": f"the saved mean and rstd stored in {case.dtype} (rounded), the "
                "backward recomputing x_hat and p = x_hat w + b from them"}
    return None


SPLITS = (2, 4)          # a row split between the programs of a cluster


def split_rows(case, record, ref):
    """layer_norm / rms_norm with each row split between P programs (a cluster of P = 2 or 4; parts of ceil(N / P)
    columns) whose exchange of partial sums is missing: each part normalized by its own statistics, the returned
    statistics the first part's, the backward per part on them. The slice's reduction losing the other programs'
    blocks: "block" (rule 9); group_norm's and instance_norm's slices (a (sample, group) or (sample, channel)
    row) likewise, a group's statistics over part of it "group" (rule 10). The explanation, or None."""
    x, w, b = record.inputs.get("x"), record.inputs.get("weight"), record.inputs.get("bias")
    if case.op not in ("layer_norm", "rms_norm", "group_norm", "instance_norm") or x is None \
            or np.size(x) > CONFIG_SIZE or not record.failing or case.op in CHANNEL_OPS and not record.training \
            or any(pn not in (("outputs", "y"), ("outputs", "mean"), ("outputs", "rstd"), ("grads", "x"),
                              ("grads", "weight"), ("grads", "bias")) for pn in record.failing):
        return None
    xs = _slices(case, x, x)
    R, N = xs.shape
    eps = float(case.config.get("eps", 1e-5) or 0.0)
    centred = case.op != "rms_norm"
    W = _slices(case, x, np.broadcast_to(_weight_full(case, x, record.inputs), np.shape(x)))
    B = _slices(case, x, _bias_full(case, x, record.inputs)) if b is not None else 0.0
    dy = record.cotangents.get("y")
    mech, what, unit = ("group", "each group's values", "values") if case.op == "group_norm" else \
        ("block", "each row", "columns" if case.op in ("layer_norm", "rms_norm") else "values")
    for P in SPLITS:
        h = -(-N // P)
        if N <= P or h * (P - 1) >= N:
            continue
        edges = list(range(0, N, h)) + [N]
        xh, g, dx, m0, r0 = np.empty_like(xs), None, np.empty_like(xs), None, None
        if dy is not None:
            dys = _slices(case, x, np.asarray(dy, dtype=np.float64))
            g = dys * W
        for a, e in zip(edges[:-1], edges[1:]):
            part = xs[:, a:e]
            m = part.mean(axis=1, keepdims=True) if centred else np.zeros((R, 1))
            r = 1.0 / np.sqrt(((part - m) ** 2).mean(axis=1, keepdims=True) + eps)
            m0, r0 = (m, r) if m0 is None else (m0, r0)
            xh[:, a:e] = (part - m) * r
            if g is not None:
                gp, hp = g[:, a:e], xh[:, a:e]
                dx[:, a:e] = r * (gp - (gp.mean(axis=1, keepdims=True) if centred else 0.0)
                                  - hp * (gp * hp).mean(axis=1, keepdims=True))
        fwd = {("outputs", "y"): _unslices(case, np.shape(x), xh * W + B), ("outputs", "mean"): m0,
               ("outputs", "rstd"): r0}
        bwds = [({}, "")]
        if g is not None:       # the backward per part, or its own kernel on the saved (first part's) statistics
            xs0 = (xs - m0) * r0
            dx0 = r0 * (g - (g.mean(axis=1, keepdims=True) if centred else 0.0)
                        - xs0 * (g * xs0).mean(axis=1, keepdims=True))
            bwds = [(_split_grads(case, x, w, dx, dys * xh), "the backward per part"),
                    (_split_grads(case, x, w, dx0, dys * xs0), "the backward (its own kernel) on the saved "
                     "statistics for the whole row")]
        for grads, how in bwds:
            vals = {**fwd, **grads}
            if all(record.got[pt].get(nm) is not None and vals.get((pt, nm)) is not None
                   and np.size(vals[pt, nm]) == np.size(record.got[pt][nm])
                   and fit_ratio(record.got[pt][nm], np.reshape(vals[pt, nm], np.shape(record.got[pt][nm])),
                                 record.E[pt][nm]) <= 1 for pt, nm in record.failing):
                return {"mechanism": mech, "text": f"{what} split between {P} programs of {h} {unit} that never "
                        "exchange their partial sums: each part normalized by its own statistics, the returned ones "
                        f"the first part's{', ' + how if how else ''}"}
    return None


def _split_grads(case, x, w, dx, prod):
    """split_rows' gradients: dx (slices) and dweight from the products dy x_hat (slices)."""
    out = {("grads", "x"): _unslices(case, np.shape(x), dx)}
    if w is not None:
        out[("grads", "weight")] = _param_sum(case, x, _unslices(case, np.shape(x), prod))
    return out


def second_pass_rows(case, record, ref):
    """y of a two-pass row norm (layer_norm, rms_norm) whose normalization pass reads x at another row than its
    statistics' (the row pointer advanced between the passes: row r + 1, the last row its own or wrapping to 0;
    or r - 1), the statistics and the gradients right: "layout" (rule 12); the explanation, or None."""
    x, w = record.inputs.get("x"), record.inputs.get("weight")
    if case.op not in ("layer_norm", "rms_norm") or x is None or np.size(x) > CONFIG_SIZE \
            or [pn for pn in record.failing] != [("outputs", "y")] or ref.outputs.get("y") is None:
        return None
    with np.errstate(all="ignore"):
        xs = _slices(case, x, x)
        R = xs.shape[0]
        if R < 2:
            return None
        rstd = _row_rstd(case, x, ref)
        mean = np.zeros_like(rstd) if case.op == "rms_norm" else xs.mean(axis=1, keepdims=True)
        W = _slices(case, x, _weight_full(case, x, record.inputs)) if w is not None else 1.0
        B = _slices(case, x, _bias_full(case, x, record.inputs)) if record.inputs.get("bias") is not None else 0.0
        r = np.arange(R)
        for src, what in ((np.minimum(r + 1, R - 1), "row r + 1 (the last row its own)"),
                          ((r + 1) % R, "row r + 1 (the last row reading row 0)"),
                          (np.maximum(r - 1, 0), "row r - 1 (the first row its own)")):
            y = _unslices(case, np.shape(x), (xs[src] - mean) * rstd * W + B)
            # (y alone changes: another row's values, each rounded at its own size: the bound grown elementwise by
            # the value's size over the reference's, the reference itself still far outside it)
            if np.all(np.isfinite(y)) and grown_fit(fit_ratio, record.got["outputs"]["y"], y, ref.outputs["y"],
                                                    record.E["outputs"]["y"], True, ROW_GROWTH, MARGIN_ROWS) <= 1:
                return {"mechanism": "layout", "text": f"y is the normalization of x read at {what} with row r's "
                        "statistics (the row pointer moved between the statistics pass and the normalization pass)"}
    return None


def _fits_all(record, vals):
    """Whether {part: {name: value}} reproduces every compared array of the step within its bound (of the parts
    ``vals`` holds)."""
    return fits_step(record, types.SimpleNamespace(**vals), fit_ratio, tuple(vals))


def gate_both_sides(case, record, reference, ref):
    """gated_norm with norm_before_gate False whose epilogue still multiplies by the gate: y = norm(x silu(z))
    silu(z) (a missing else), its backward that equation's (the specification with norm_before_gate True on the
    input x silu(z), its dx chained through that product, dz with both gate terms): "gate" (rule 3); the
    explanation of every failing array, or None."""
    x, z = record.inputs.get("x"), record.inputs.get("z")
    if case.op != "gated_norm" or x is None or z is None or case.config.get("norm_before_gate", True) \
            or np.size(x) > CONFIG_SIZE or not record.failing:
        return None
    from ..specs.gated_norm import silu
    s, ds = silu(np.asarray(z, dtype=np.float64))
    v = np.asarray(x, dtype=np.float64) * s
    try:
        with np.errstate(all="ignore"):
            res = reference(case.op, {**case.config, "norm_before_gate": True}, record.training,
                            {**record.inputs, "x": v}, record.cotangents, record.state)
    except Exception:                                       # noqa: BLE001 - a deviation the spec refuses
        return None
    vals = {("outputs", "y"): res.outputs.get("y"), ("grads", "weight"): res.grads.get("weight"),
            ("grads", "bias"): res.grads.get("bias")}
    dv = res.grads.get("x")
    if dv is not None and res.grads.get("z") is not None:
        vals[("grads", "x")] = dv * s
        vals[("grads", "z")] = res.grads["z"] + dv * np.asarray(x, dtype=np.float64) * ds
    # (its values larger than the reference's: the bound grows with them, grown_fit)
    if all(vals.get(pn) is not None and np.shape(vals[pn]) == np.shape(record.got[pn[0]][pn[1]])
           and grown_fit(fit_ratio, record.got[pn[0]][pn[1]], vals[pn], getattr(ref, pn[0]).get(pn[1]),
                         record.E[pn[0]][pn[1]], True) <= 1 for pn in record.failing):
        return {"mechanism": "gate", "text": "the specification with the gate on both sides of the norm, y = norm(x "
                "silu(z)) silu(z) (norm_before_gate False, its epilogue's gate not skipped), and that equation's "
                "backward, reproduces every failing array"}
    return None


def dropout_deviation(case, record, reference):
    """add_norm's dropout at another point (mechanism "dropout", rule 4 of docs/verdicts.md's "Which mechanism a
    bug is"): the keep-mask and its 1/(1 - p) applied to the sum x + residual instead of to x (dresidual
    then ds c); the backward's dx without the keep-mask (ds rowscale / (1 - p)) or without 1/(1 - p); the kept values scaled by 1 /
    mean(mask) (the mask's realised keep rate) instead of 1 / (1 - p); a branch's 1/(1 - p) missing (x's or
    x1's alone). The explanation reproducing every failing array (the passing ones within their bounds), or
    None."""
    x, mask, res = record.inputs.get("x"), record.inputs.get("mask"), record.inputs.get("residual")
    p = case.config.get("dropout_p")
    rs = record.inputs.get("rowscale")
    if case.op != "add_norm" or x is None or np.size(x) > CONFIG_SIZE or not record.failing:
        return None

    def run(inputs=None, config=None):
        return _rerun(case, record, reference, inputs, config)
    tries = []
    if rs is not None and res is not None:
        # the row scale applied to the whole sum, s = (x c + residual) rowscale: the residual read as residual
        # rowscale, its gradient through that read, drowscale with the residual's term
        try:
            k = np.ndim(x) - np.ndim(rs)
            r64 = np.asarray(rs, dtype=np.float64).reshape(np.shape(rs) + (1,) * k)
            res64 = np.asarray(res, dtype=np.float64)
            r = run({**record.inputs, "residual": res64 * r64})
            g = dict(r.grads)
            if g.get("residual") is not None:
                ds = np.asarray(g["residual"], dtype=np.float64)
                g["residual"] = ds * r64
                if g.get("rowscale") is not None:
                    g["rowscale"] = np.asarray(g["rowscale"], dtype=np.float64) + (ds * res64).sum(
                        axis=tuple(range(np.ndim(x) - k, np.ndim(x))))
            tries.append(({"outputs": r.outputs, "grads": g, "state": r.state},
                          "the row scale applied to the whole sum, (x c + residual) rowscale, instead of to x's "
                          "branch alone"))
        except Exception:                                   # noqa: BLE001 - a call the spec refuses
            pass
    if mask is None or not isinstance(p, (int, float)) or not 0 < p < 1:
        return _first_fit(record, tries, "dropout") if tries else None
    x64, m = np.asarray(x, dtype=np.float64), np.asarray(mask, dtype=np.float64)
    try:
        if res is not None:                 # s = (x + residual) m / (1 - p): the residual read as residual m / (1 - p)
            c0 = m / (1.0 - p)
            r = run({**record.inputs, "residual": np.asarray(res, dtype=np.float64) * c0})
            g = dict(r.grads)
            if g.get("residual") is not None:
                g["residual"] = np.asarray(g["residual"]) * c0
            tries.append(({"outputs": r.outputs, "grads": g, "state": r.state},
                          "the keep-mask and 1/(1 - p) applied to x + residual instead of to x"))
        # dx without the keep-mask: x read as x * mask under an all-ones mask (the same forward; dx = ds rowscale
        # / (1 - p))
        r = run({**record.inputs, "x": x64 * m, "mask": np.ones(np.shape(m), dtype=np.asarray(mask).dtype)})
        tries.append(({"outputs": r.outputs, "grads": {**r.grads, "mask": np.zeros(np.shape(m))}, "state": r.state},
                      "the backward's dx without the keep-mask (ds rowscale / (1 - p))"))
        r = run()                           # the backward's dx without 1/(1 - p) (the forward scaled)
        if r.grads.get("x") is not None:
            tries.append(({"outputs": r.outputs, "grads": {**r.grads, "x": np.asarray(r.grads["x"]) * (1.0 - p)},
                           "state": r.state}, "the backward's dx without the 1/(1 - p) scale (the forward's right)"))
        keep = float(m.mean())
        if 0 < keep < 1 and abs(keep - (1 - p)) > 1e-12:
            r = run(config={**case.config, "dropout_p": 1.0 - keep})
            tries.append(({"outputs": r.outputs, "grads": r.grads, "state": r.state},
                          f"the kept values scaled by 1 / mean(mask) = 1 / {keep:g} instead of 1 / (1 - p)"))
        for k, xk in (("mask", "x"), ("mask1", "x1")):     # a branch's input read as it times (1 - p)
            if record.inputs.get(k) is not None and record.inputs.get(xk) is not None:
                r = run({**record.inputs, xk: np.asarray(record.inputs[xk], dtype=np.float64) * (1.0 - p)})
                g = dict(r.grads)
                if g.get(xk) is not None:
                    g[xk] = np.asarray(g[xk]) * (1.0 - p)
                tries.append(({"outputs": r.outputs, "grads": g, "state": r.state},
                              f"the 1/(1 - p) scale of {xk}'s branch missing"))
    except Exception:                                       # noqa: BLE001 - a call the spec refuses
        pass
    return _first_fit(record, tries, "dropout")


def _rerun(case, record, reference, inputs=None, config=None):
    """The reference evaluated at the record's point, with ``inputs`` / ``config`` in place of its own."""
    with np.errstate(all="ignore"):
        return reference(case.op, config or case.config, record.training, record.inputs if inputs is None else inputs,
                         record.cotangents, record.state)


def _first_fit(record, tries, mechanism):
    """The first of ``tries`` ((values, what) pairs) reproducing every failing array, else the first reproducing
    every failing output (a backward of the kernel's own forward), as an explanation of ``mechanism``; or None."""
    for vals, what in tries:
        if _fits_all(record, vals):
            return {"mechanism": mechanism, "text": f"the specification with {what} reproduces every failing array"}
    if any(p == "outputs" for p, _ in record.failing):
        for vals, what in tries:
            if _fits_all(record, {"outputs": vals["outputs"], "state": vals["state"]}):
                return {"mechanism": mechanism, "text": f"the specification with {what} reproduces every failing "
                        "output (the failing gradients are not the specification's backward of that forward)"}
    return None


def residual_after_norm(case, record, reference):
    """add_norm with the residual added after the norm (post-norm, another normalizer's equation: rule 16): y =
    norm(x c (+ x1 c1)) (weight + offset) + bias + residual, residual_out = s as specified; its backward (the
    norm's at the branch sum, dresidual = dy (+ residual_out's cotangent)). The explanation reproducing every
    failing array (or every failing output: a backward of the kernel's own forward), or None."""
    x, res = record.inputs.get("x"), record.inputs.get("residual")
    if case.op != "add_norm" or x is None or res is None or np.size(x) > CONFIG_SIZE or not record.failing:
        return None
    r64 = np.asarray(res, dtype=np.float64)
    try:
        r = _rerun(case, record, reference, {k: v for k, v in record.inputs.items() if k != "residual"})
    except Exception:                                       # noqa: BLE001 - a call the spec refuses
        return None
    outs = {**r.outputs, "y": np.asarray(r.outputs["y"]) + r64,
            "residual_out": np.asarray(r.outputs["residual_out"]) + r64}
    dres = np.asarray(record.cotangents["y"], dtype=np.float64)
    if case.config.get("prenorm") and record.cotangents.get("residual_out") is not None:
        dres = dres + np.asarray(record.cotangents["residual_out"], dtype=np.float64)
    return _first_fit(record, [({"outputs": outs, "grads": {**r.grads, "residual": dres}, "state": r.state},
                                "the residual added after the norm (post-norm: y = norm(x c) (weight + offset) + "
                                "bias + residual)")], "semantics")


def affine_before_norm(case, record, reference):
    """The whole affine applied to x before the normalization, none after (rule 16: another equation, y a bare
    normalization of the modulated input; the weight alone moved before, the bias after, is weight_first's
    affine): y = norm(x gain + shift) with adaptive_layer_norm's gain 1 + scale and shift per sample,
    layer_norm's weight and bias, the channel norms' per-channel weight and bias (their statistics, saved and
    running, those of the modulated input); the backward of that function (dx = gain dz, the parameters' gradients
    sum(x dz) and sum(dz) over their shared axes, dz the norm's dx at the modulated input). The explanation
    reproducing every failing array (or every failing output), or None."""
    x, ins = record.inputs.get("x"), record.inputs
    names = {"adaptive_layer_norm": ("scale", "shift"), "layer_norm": ("weight", "bias"),
             **{op: ("weight", "bias") for op in CHANNEL_OPS}}
    if case.op not in names or x is None or np.size(x) > CONFIG_SIZE or not record.failing or np.ndim(x) < 2:
        return None
    wn, bn = names[case.op]
    x64 = np.asarray(x, dtype=np.float64)
    if ins.get(bn) is None and (case.op == "layer_norm" or ins.get(wn) is None):
        return None                     # (layer_norm's weight alone before the norm: weight_first's)

    def shaped(v):                  # a parameter broadcast over x: per sample (B, 1.., H), per channel, per feature
        v = np.asarray(v, dtype=np.float64)
        if case.op in CHANNEL_OPS:
            return v.reshape((1, -1) + (1,) * (x64.ndim - 2))
        return v.reshape((v.shape[0],) + (1,) * (x64.ndim - 2) + (v.shape[1],)) if case.op == "adaptive_layer_norm" \
            else v
    gain = 1.0 if ins.get(wn) is None else shaped(ins[wn]) + (1.0 if case.op == "adaptive_layer_norm" else 0.0)
    shift = 0.0 if ins.get(bn) is None else shaped(ins[bn])
    try:
        r = _rerun(case, record, reference, {**{k: v for k, v in ins.items() if k not in (wn, bn)},
                                             "x": x64 * gain + shift})
    except Exception:                                       # noqa: BLE001 - a call the spec refuses
        return None
    grads = dict(r.grads)
    dz = r.grads.get("x")
    if dz is not None:
        dz = np.asarray(dz, dtype=np.float64)
        grads["x"] = dz * gain
        for name, t in ((wn, x64 * dz), (bn, dz)):
            axes = tuple(range(1, x64.ndim - 1)) if case.op == "adaptive_layer_norm" else \
                None if ins.get(name) is None else _param_axes(case, x64, ins[name])
            if ins.get(name) is not None and axes is not None:
                grads[name] = t.sum(axis=axes).reshape(np.shape(ins[name]))
    return _first_fit(record, [({"outputs": r.outputs, "grads": grads, "state": r.state},
                                f"the {'modulation' if case.op == 'adaptive_layer_norm' else 'affine'} applied to x "
                                "before the normalization, none after (y = norm(x gain + shift))")], "semantics")


def _param_axes(case, x, w):
    """The axes of x a per-feature parameter gradient of w's shape sums over: every axis but 1 for the
    channel norms, else the leading ones (w spans x's trailing axes); None when w fits neither."""
    nd, wd = np.ndim(x), np.ndim(w)
    if case.op in CHANNEL_OPS + ("group_norm_silu",):
        return tuple(i for i in range(nd) if i != 1) if wd == 1 and np.shape(w)[0] == np.shape(x)[1] else None
    if 0 < wd <= nd and tuple(np.shape(x)[nd - wd:]) == tuple(np.shape(w)):
        return tuple(range(nd - wd))
    return None


def modulation_grads(case, record, ref, part, name):
    """adaptive_layer_norm's per-sample modulation gradients (dscale = sum over the tokens of dy x_hat, dshift of
    dy) summed otherwise: dshift from dy * rstd (the dscale line with its deviation removed, its rstd kept:
    "backward"), or each sample b's sum over the T token rows b .. b + T - 1 of the flattened rows (its offset
    b where b T belongs: "layout"). The explanation, or None."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    got, E = record.got[part].get(name), record.E[part].get(name)
    mean, rstd = ref.outputs.get("mean"), ref.outputs.get("rstd")
    if case.op != "adaptive_layer_norm" or part != "grads" or name not in ("scale", "shift") or x is None \
            or dy is None or got is None or mean is None or rstd is None or np.ndim(x) < 3 or np.size(x) > CONFIG_SIZE:
        return None
    B, H = np.shape(x)[0], np.shape(x)[-1]
    T = np.size(x) // (B * H)
    x64, dy64 = (np.asarray(a, dtype=np.float64).reshape(B * T, H) for a in (x, dy))
    m, r = (np.asarray(a, dtype=np.float64).reshape(B * T, 1) for a in (mean, rstd))
    c = dy64 * (x64 - m) * r if name == "scale" else dy64
    tries = []
    if name == "shift":
        tries.append(((dy64 * r).reshape(B, T, H).sum(axis=1), "dshift summed from dy * rstd (the dscale line with its "
                      "deviation removed, its rstd kept) where dy belongs", "backward"))
    if B > 1:
        pad = np.concatenate([c, np.zeros((T, H))])
        tries.append((np.stack([pad[b:b + T].sum(axis=0) for b in range(B)]), f"d{name} of each sample b summed over "
                      f"the token rows b .. b + {T - 1} of the flattened rows (the sample's offset b where b * {T} "
                      "belongs)", "layout"))
    for v, what, mech in tries:
        if np.size(v) == np.size(got) and fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
            return {"mechanism": mech, "text": f"{_label(part, name)} matches the formula with {what}"}
    return None


def param_products(case, record, ref, part, name):
    """A parameter gradient summed from the wrong product: dbias as sum(dy * weight); dweight as sum(dy * t) over
    the parameter's axes with t the returned y, y less the bias, x, or x less its slice mean, where the normalized
    x_hat (or the op's own term) belongs; or (layer_norm, rms_norm; mechanism "layout") each row's x_hat
    from the statistics of the first row of its block of k rows. The explanation, or None."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    got, E = record.got[part].get(name), record.E[part].get(name)
    w = record.inputs.get(name)
    if part == "grads" and name == "bias" and x is not None and dy is not None and got is not None and w is not None \
            and record.inputs.get("weight") is not None and np.size(x) <= CONFIG_SIZE:
        axes = _param_axes(case, x, w)      # dbias summed from g = dy * weight (the dx pass's) where dy belongs
        if axes is not None:
            wt = np.asarray(record.inputs["weight"], dtype=np.float64)
            if case.op in CHANNEL_OPS + ("group_norm_silu",) and np.ndim(wt) == 1:
                wt = wt.reshape((1, -1) + (1,) * (np.ndim(x) - 2))
            with np.errstate(all="ignore"):
                v = np.asarray(dy, np.float64) * wt if np.broadcast_shapes(np.shape(wt), np.shape(dy)) == \
                    np.shape(dy) else None
            v = None if v is None else v.sum(axis=axes)
            if v is not None and np.size(v) == np.size(got) and fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
                return {"mechanism": "backward", "text": "dbias matches the formula with g where dy belongs "
                                                         "(sum(dy * weight), the weighted g of the dx pass)"}
    if part != "grads" or name != "weight" or x is None or dy is None or got is None or w is None \
            or np.size(x) > CONFIG_SIZE:
        return None
    axes = _param_axes(case, x, w)
    if axes is None:
        return None
    dy = np.asarray(dy, dtype=np.float64)
    x64 = np.asarray(x, dtype=np.float64)
    terms = []
    y = record.got["outputs"].get("y")
    if y is not None and np.shape(y) == np.shape(x):
        y = np.asarray(y, dtype=np.float64)
        terms.append((y, "the returned output y (weight and bias included)"))
        b = record.inputs.get("bias")
        if b is not None:
            bb = np.asarray(b, dtype=np.float64)
            bb = bb.reshape((1, -1) + (1,) * (np.ndim(x) - 2)) if case.op in CHANNEL_OPS + ("group_norm_silu",) else bb
            terms.append((y - bb, "the returned y less the bias (x_hat times the weight)"))
    terms.append((x64, "x itself (not normalized)"))
    if case.op in ROW_OPS:
        xs = _slices(case, x, x64)
        terms.append((_unslices(case, np.shape(x), xs - xs.mean(axis=1, keepdims=True)),
                      "x - mean (x_hat without its rstd)"))
    for t, what in terms:
        v = (dy * t).sum(axis=axes).reshape(np.shape(got))
        if fit_ratio(got, v, E) <= 1:
            return {"mechanism": "backward", "text": f"dweight is sum(dy * t) with t = {what}"}
    if case.op in ("layer_norm", "rms_norm"):     # x_hat from the statistics of another row: its block's first
        xs = _slices(case, x, x64)                 # (a row offset within a block of k rows not added)
        R = xs.shape[0]
        mean = xs.mean(axis=1, keepdims=True) if case.op == "layer_norm" else np.zeros((R, 1))
        eps = float(case.config.get("eps", 1e-5) or 0.0)
        rstd = 1.0 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + eps)
        for k in (2, 4, 8, 16, 32, 64):
            if k >= R:
                break
            first = np.arange(R) // k * k
            xh = _unslices(case, np.shape(x), (xs - mean[first]) * rstd[first])
            v = (dy * xh).sum(axis=axes).reshape(np.shape(got))
            if fit_ratio(got, v, E) <= 1:
                return {"mechanism": "layout", "text": f"dweight is sum(dy * x_hat) with each row's x_hat from the "
                                                       f"mean and rstd of the first row of its block of {k} rows (the "
                                                       "row's offset within the block not added)"}
    return None


SMALL_PARAM = 16      # a parameter gradient of at most this many elements: each one its own reduction line


def copied_element(case, record, ref, part, name):
    """A small parameter gradient whose elements are separate reductions (2 .. SMALL_PARAM elements, not one
    per feature or channel of x: poly_norm's three weights) whose failing elements each hold another element's expected value, the rest right (a copied reduction
    line whose operand was not updated: dweight[0] reduced from the x^2 term's product): the backward's
    (rule 15), or None. Every failing element must match one other element alone (an exchange of two
    elements counts: each holds the other's)."""
    got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
    if part != "grads" or name == "x" or got is None or want is None or E is None \
            or not 2 <= np.size(want) <= SMALL_PARAM or np.shape(got) != np.shape(want):
        return None
    x, p = record.inputs.get("x"), record.inputs.get(name)
    if x is None or p is None or _param_axes(case, x, p) is not None:
        return None             # (a per-feature parameter's elements share one line: another's value is an index's)
    g, w = np.asarray(got).reshape(-1), np.asarray(want, dtype=np.float64).reshape(-1)   # (got in its own dtype:
    Ef = np.broadcast_to(np.asarray(E, dtype=np.float64), np.shape(want)).reshape(-1)   # its rounding judged)
    bad = [i for i in range(g.size) if fit_ratio(g[i:i + 1], w[i:i + 1], Ef[i:i + 1]) > 1]
    if not bad or len(bad) == g.size:
        return None
    src = {}
    for i in bad:
        js = [j for j in range(g.size) if j != i and fit_ratio(g[i:i + 1], w[j:j + 1],   # (the value's own bound)
                                                               np.maximum(Ef[i:i + 1], Ef[j:j + 1])) <= 1]
        if len(js) != 1:
            return None
        src[i] = js[0]
    lab = _label(part, name)
    return {"mechanism": "backward", "text": "; ".join(f"{lab}[{i}] holds {lab}[{j}]'s value" for i, j in src.items())
            + " (a reduction line copied from another element's, its operand not updated); the other elements right"}


def truncated_returns(case, record, ref):
    """Every failing array of a 16-bit case converted to the case dtype toward zero (its low bits dropped: a
    store helper truncating), or down or up (a directed conversion intrinsic: __float2half_rd / _ru) where
    rounding to nearest even belongs, the passing ones rounded right (the
    catalogue's R-trunc truncates every returned array): "rounding" (rule 8), one explanation per array, or
    []."""
    from ..pitfalls._rounding import directed_shift
    if case.dtype not in ("float16", "bfloat16") or not record.failing:
        return []
    for mode, how in (("zero", "toward zero (truncated)"), ("down", "toward -inf (rounded down)"),
                      ("up", "toward +inf (rounded up)")):
        out = []
        for part, name in record.failing:
            got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
            if got is None or want is None or E is None or np.shape(got) != np.shape(want) \
                    or np.asarray(got).dtype.kind not in "fV" or np.asarray(got).dtype.itemsize != 2:
                return []
            with np.errstate(all="ignore"):
                if fit_ratio(got, directed_shift(np.asarray(want, dtype=np.float64), case.dtype, mode), E) > 1:
                    break
            out.append({"part": part, "name": name, "step": record.step, "mechanism": "rounding",
                        "text": f"{_label(part, name)} is the expected value converted to {case.dtype} {how} where "
                                "rounding to nearest even belongs"})
        else:
            return out
    return []


def zero_tail(case, part, name, got, want, E):
    """A parameter's gradient right at its first k entries (flat order: the channels) and exactly zero from k on,
    where the expected values are not: a loop over the entries bounded by k (the buffer's zeros kept past it),
    rule 9's block (a loop bound losing the last channels), with k named where it is a value of the
    configuration (num_groups where C belongs). The explanation, or None."""
    if part != "grads" or name in ("x", "z", "residual") or np.size(got) < 3:
        return None
    g, w = np.asarray(got, dtype=np.float64).reshape(-1), np.asarray(want, dtype=np.float64).reshape(-1)
    nz = np.flatnonzero(g != 0)
    k = int(nz[-1]) + 1 if nz.size else 0
    if not 0 < k < g.size or not np.all(w[k:] != 0) \
            or fit_ratio(g[:k], w[:k], np.broadcast_to(E, np.shape(want)).reshape(-1)[:k]) > 1:
        return None
    named = [c for c in ("num_groups", "groups", "group_size") if case.config.get(c) == k]
    return {"mechanism": "block", "text": f"{_label(part, name)} is right at its first {k} entries and zero from entry "
                                          f"{k} on: a loop over its entries bounded by {k}"
                                          + (f" (the configuration's {named[0]}, where the entry count belongs)"
                                             if named else "") + ", the buffer's zeros kept past it"}


def never_written(part, name, got, x_shape=(), main=None, ref=None):
    """A failing gradient that is exactly zero everywhere, or None. (A failing array is not zero in the
    reference.) A parameter's gradient, smaller than x, is a sum over the slices: none of their contributions
    reached it (its partial sums all dropped, rule 11's reduction of docs/verdicts.md, or a column grid of no
    program, rule 9's block: no mechanism named); any other gradient's whole formula is missing ("backward"). A returned output other than the op's ``main`` one (amax, a
    statistic) exactly zero: never written, no mechanism (a change of the formula making it 0 is a coincidence)."""
    g = np.asarray(got)
    if part not in ("grads", "outputs") or g.size < 2 or g.dtype.kind not in "fV" \
            or np.any(np.asarray(g, dtype=np.float64) != 0):
        return None
    if part == "outputs":           # a returned statistic (not the op's main output) never written: no mechanism
        return None if name == main else {"mechanism": None, "text": f"{_label(part, name)} is zero everywhere: "
                                                                      "never written (the buffer's zeros returned)"}
    if name != "x" and 0 < g.size < int(np.prod(x_shape)):
        from .explain_grid import another_zero
        if ref is not None and another_zero(ref, part, name, np.shape(g)):
            return None             # (another expected gradient of its shape is 0: written in its place?)
        # (a second stage skipping every partial, rule 11's reduction, and a column grid of no program, rule 9's
        # block, leave the same zeros: no mechanism named)
        return {"mechanism": None, "text": f"{_label(part, name)} is zero everywhere: none of the slices' "
                                           "contributions reaches it (every partial sum of its reduction dropped, or "
                                           "no program of a column grid writing it: the zeros tell these apart no "
                                           "more than any other)"}
    return {"mechanism": "backward", "text": f"{_label(part, name)} is zero everywhere: the backward never writes it"}


def extra_reduction(case, record, ref, part, name):
    """A gradient reduced over one more axis, or over its channel's group, than it should be: got is the
    expected gradient summed (or averaged) over axis k, broadcast back; for the group norms' per-channel
    parameters, summed over the group's channels. The explanation, or None."""
    got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
    if part != "grads" or name == "x" or got is None or want is None or E is None:
        return None
    want = np.asarray(want, dtype=np.float64)
    cands = []
    G = case.config.get("num_groups")
    if case.op in ("group_norm", "group_norm_silu") and isinstance(G, int) and want.ndim == 1 and 1 < want.size // G \
            and want.size % G == 0:
        s = want.reshape(G, -1).sum(axis=1, keepdims=True)
        cands.append((np.broadcast_to(s, (G, want.size // G)).reshape(want.shape),
                      "summed over its group's channels (one value per group, repeated)"))
    for k in range(want.ndim):
        if want.shape[k] > 1:
            s = want.sum(axis=k, keepdims=True)
            cands += [(np.broadcast_to(s, want.shape), f"summed over axis {k} (length {want.shape[k]}) as well, "
                                                       "one value broadcast"),
                      (np.broadcast_to(s / want.shape[k], want.shape), f"averaged over axis {k} as well")]
    if fit_ratio(got, np.zeros_like(want), E) <= 1:     # zero fits too (a sum over a slice of a norm's dx
        return None                                     # is ~0): no evidence of an extra reduction
    for v, what in cands:
        if fit_ratio(got, v, E) <= 1:
            mech = "group" if "group" in what else "reduction"
            return {"mechanism": mech, "text": f"d{name} is the expected gradient {what}"}
    return None


def partials_rounded(case, record, ref, part, name):
    """layer_norm / rms_norm dweight, dbias summed from partial sums over blocks of B rows that were rounded
    to the 16-bit case dtype (to nearest) before the final sum: the explanation, or None."""
    import ml_dtypes
    dt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(case.dtype)
    x = record.inputs.get("x")
    small = x is not None and np.size(x) <= CONFIG_SIZE
    terms = row_terms(case, record, ref, part, name) if dt is not None and small else None
    got, E = record.got[part].get(name), record.E[part].get(name)
    if terms is None or got is None or E is None:
        return None
    R = terms.shape[0]
    B = 1
    while B < R:
        pad = np.zeros(((-R) % B, terms.shape[1]))
        blocks = np.concatenate([terms, pad]).reshape(-1, B, terms.shape[1]).sum(axis=1)
        v = blocks.astype(dt).astype(np.float64).sum(axis=0).reshape(np.shape(got))
        if fit_ratio(got, v, E) <= 1:
            return {"mechanism": "precision", "text": f"d{name} is the sum of partial sums over blocks of {B} rows, "
                                                      f"each rounded to {case.dtype}"}
        B *= 2
    return None


def dyt_rounded_t(case, record):
    """dyt's y = weight round(tanh(alpha x)) + bias: t rounded to the 16-bit case dtype (to nearest or toward
    zero) before the affine; explanations of y, or []."""
    import ml_dtypes
    dt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(case.dtype)
    x, got = record.inputs.get("x"), record.got["outputs"].get("y")
    if case.op != "dyt" or dt is None or x is None or got is None or ("outputs", "y") not in record.failing:
        return []
    a = float(np.reshape(np.asarray(record.inputs["alpha"], dtype=np.float64), ()))
    t = np.tanh(a * np.asarray(x, dtype=np.float64))
    w, b = record.inputs.get("weight"), record.inputs.get("bias")
    w = 1.0 if w is None else np.asarray(w, dtype=np.float64)
    b = 0.0 if b is None else np.asarray(b, dtype=np.float64)
    for mode, tr in (("to nearest", t.astype(dt).astype(np.float64)), ("toward zero", round_toward_zero(t, dt))):
        if fit_ratio(got, w * tr + b, record.E["outputs"]["y"]) <= 1:
            return [{"part": "outputs", "name": "y", "step": record.step, "mechanism": "precision",
                     "text": f"y is the formula's with tanh(alpha x) rounded to {case.dtype} ({mode}) before the affine"}]
    return []


def rms_l1(case, record, ref):
    """rms_norm as the L1 variant: r = 1 / (mean|x| + eps) (or 1 / sqrt(mean|x|^2 + eps)) where the RMS's
    belongs, y = x r w, and the backward of that equation, dx = r g - sign(x) r^2 mean(g x) (g = dy w),
    dweight = sum(dy x r): another normalizer's equation (semantics). Explanations of every failing array (the
    forward may pass where the rows are nearly constant: mean|x| is their RMS), or []."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    if case.op != "rms_norm" or x is None or np.size(x) > CONFIG_SIZE or case.config.get("weight_offset") \
            or not record.failing:
        return []
    ns = case.config.get("normalized_shape")
    k = 1 if np.ndim(ns) == 0 else len(ns)
    x64 = np.asarray(x, dtype=np.float64)
    A = tuple(range(x64.ndim - k, x64.ndim))
    w = record.inputs.get("weight")
    w64 = 1.0 if w is None else np.asarray(w, dtype=np.float64)
    eps = case.config.get("eps")
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    m = np.abs(x64).mean(axis=A, keepdims=True)
    for r, how in ((1.0 / (m + eps), "1 / (mean|x| + eps)"), (1.0 / np.sqrt(m * m + eps), "1 / sqrt(mean|x|^2 + eps)")):
        vals = {("outputs", "y"): x64 * r * w64, ("outputs", "rstd"): r}
        if dy is not None:
            dy64 = np.asarray(dy, dtype=np.float64)
            g = dy64 * w64
            vals["grads", "x"] = r * g - np.sign(x64) * r * r * (g * x64).mean(axis=A, keepdims=True)
            if w is not None:
                vals["grads", "weight"] = (dy64 * x64 * r).sum(axis=tuple(range(x64.ndim - k)))
        # (every failing array reproduced, and every array the variant gives, passing ones too: its forward)
        have = [pn for pn in vals if record.got[pn[0]].get(pn[1]) is not None and record.E[pn[0]].get(pn[1]) is not None]
        if all(pn in vals for pn in record.failing) and all(
                np.size(vals[pn]) == np.size(record.got[pn[0]][pn[1]])
                and fit_ratio(record.got[pn[0]][pn[1]], np.reshape(vals[pn], np.shape(record.got[pn[0]][pn[1]])),
                              record.E[pn[0]][pn[1]]) <= 1 for pn in have):
            return [{"part": p, "name": n, "step": record.step, "mechanism": "semantics", "equation": True,
                     "text": f"{_label(p, n)} is the L1 variant's: rstd = {how} (the mean absolute value where the RMS "
                             "belongs), and its backward"} for p, n in record.failing]
    return []


def lp_deviation(case, record, ref):
    """lp_normalize's y = x / max(norm, eps) otherwise: divided by s = max|x| (the overflow-safe reduction's
    scale: the infinity norm's equation, semantics), eps's clamp as min (x / min(norm, eps)), eps added to the
    norm (x / (norm + eps)) or under its root (x / sqrt(norm^2 + eps)): eps (rule 6). Each judged within the
    check's bound grown with its value (a quotient rounds relative to its size). Explanations of y (the
    gradients following), or []."""
    x, got = record.inputs.get("x"), record.got["outputs"].get("y")
    norm = ref.outputs.get("norm")
    if case.op != "lp_normalize" or x is None or got is None or norm is None or np.size(x) > CONFIG_SIZE \
            or ("outputs", "y") not in record.failing:
        return []
    x64, n = np.asarray(x, dtype=np.float64), np.asarray(norm, dtype=np.float64)
    A = tuple(i for i, (a, b) in enumerate(zip(np.shape(x64), np.shape(n))) if b == 1 and a > 1)
    eps = float(case.config.get("eps", 0.0) or 0.0)
    with np.errstate(all="ignore"):
        s = np.max(np.abs(x64), axis=A, keepdims=True) if A else np.abs(x64)
        tries = [(np.where(s == 0, 0.0, x64 / np.where(s == 0, 1.0, s)), "y divided by max|x| (the overflow-safe "
                  "reduction's scale, the infinity norm) where the p-norm belongs", "semantics"),
                 # (|x| over the norm: the sign lost, the reduction's register divided: no mechanism of the list)
                 (np.abs(x64) / (np.maximum(n, eps) if eps > 0 else np.where(n == 0, 1.0, n)), "|x| where x belongs "
                  "(the sign of x lost: the reduction's |x| register divided by the norm)", None)]
        if eps > 0:
            tries += [(x64 / np.minimum(n, eps), "eps's clamp as min, x / min(norm, eps) (clamp_max written for "
                       "clamp_min)", "eps"),
                      (x64 / (n + eps), "eps added to the norm, x / (norm + eps), where the clamp max(norm, eps) "
                       "belongs", "eps"),
                      (x64 / np.sqrt(n * n + eps), "eps under the root, x / sqrt(norm^2 + eps), where the clamp "
                       "max(norm, eps) belongs", "eps")]
        # (x over another denominator rounds relative to its own size: the bound grows with |y| / |want|, not
        # capped: x / eps is 1e12 times the normalized values; the reference itself outside that bound)
        E, want = record.E["outputs"]["y"], np.asarray(ref.outputs["y"], dtype=np.float64)
        if A:                   # each slice's 1 / norm an approximate reciprocal square root (both sides, 2^-11)
            k = ls_factors(got, want, A)
            rel = np.where(np.isfinite(k), k - 1.0, 0.0)
            if rel.size >= 4 and _estimate_like(rel):
                tries.append((want * (1.0 + rel), f"each slice's 1 / norm off by up to {np.max(np.abs(rel)):.1e} "
                              "relative, on both sides (an approximate reciprocal square root without a Newton step, "
                              "about 12 significant bits)", "precision"))
        import ml_dtypes
        big = float(ml_dtypes.finfo(np.asarray(got).dtype).max) if np.asarray(got).dtype.kind in "fV" else math.inf
        for y, what, mech in tries:
            y = np.where(np.abs(y) > big, np.sign(y) * np.inf, y)        # (stored: beyond the dtype's largest, inf)
            Ev = np.broadcast_to(E, np.shape(y)) * np.clip(np.nan_to_num(np.abs(y) / np.abs(want), nan=1.0), 1.0, None)
            fin = np.isfinite(y)            # (an overflow stored as inf: equal there, judged on the rest)
            g64 = np.asarray(got, dtype=np.float64)
            if not np.array_equal(g64[~fin], y[~fin]) or not fin.any():
                continue
            if fit_ratio(np.asarray(got)[fin], y[fin], Ev[fin]) <= 1 and fit_ratio(got, want, Ev) > 1:
                return [{"part": "outputs", "name": "y", "step": record.step, "mechanism": mech,
                         "text": f"y is the formula's with {what}"}]
    return []


def dyt_deviation(case, record):
    """dyt's y = weight tanh(alpha x) + bias otherwise: alpha outside the tanh, weight alpha tanh(x) + bias
    (another equation: semantics); the weight inside it, tanh(alpha weight x) + bias (affine); the bias read at
    the row's index (bias[r % C] where bias[c] belongs: layout); alpha loaded as a per-column vector, column 0
    reading it and the others the masked load's 0 (layout).
    Explanations of y (the gradients following), or []."""
    x, got = record.inputs.get("x"), record.got["outputs"].get("y")
    if case.op != "dyt" or x is None or got is None or not np.ndim(x) or ("outputs", "y") not in record.failing \
            or np.size(x) > CONFIG_SIZE:
        return []
    x64 = np.asarray(x, dtype=np.float64)
    a = float(np.reshape(np.asarray(record.inputs["alpha"], dtype=np.float64), ()))
    w, b = record.inputs.get("weight"), record.inputs.get("bias")
    w = 1.0 if w is None else np.asarray(w, dtype=np.float64)
    b0 = 0.0 if b is None else np.asarray(b, dtype=np.float64)
    tries = [(w * a * np.tanh(x64) + b0, "alpha outside the tanh (weight alpha tanh(x) + bias)", "semantics")]
    if record.inputs.get("weight") is not None:     # the weight folded into the argument: the affine's place
        tries.append((np.tanh(a * w * x64) + b0, "the weight folded into the tanh's argument (tanh(alpha weight x) "
                      "+ bias)", "affine"))
    if b is not None and np.ndim(b) == 1 and x64.ndim > 1 and x64.size // x64.shape[-1] > 1:
        C = np.shape(b)[0]
        rows = np.arange(x64.size // x64.shape[-1]) % C
        br = np.asarray(b, dtype=np.float64)[rows].reshape(x64.shape[:-1] + (1,))
        tries.append((w * np.tanh(a * x64) + br, "the bias read at the row's index (bias[r % C] where bias[c] "
                      "belongs)", "layout"))
    if x64.ndim and x64.shape[-1] > 1:         # the scalar loaded with the parameters' column offsets, masked
        aj = np.where(np.arange(x64.shape[-1]) == 0, a, 0.0)        # to its one element (other=0)
        tries.append((w * np.tanh(aj * x64) + b0, "the scalar alpha loaded with the per-column parameters' offsets "
                      "(alpha_ptr + cols, masked to its one element: column 0 alpha, every other column 0)", "layout"))
    with np.errstate(all="ignore"):
        for y, what, mech in tries:
            if fit_ratio(got, y, record.E["outputs"]["y"]) <= 1:
                return [{"part": "outputs", "name": "y", "step": record.step, "mechanism": mech,
                         "text": f"y is the formula's with {what}"}]
    return []


def dyt_derivative(case, record):
    """dyt's backward with tanh's derivative D = 1 - t^2 written otherwise (1 - t, 1 + t^2, sech(alpha x)
    unsquared, (1 - t)^2): dx = g D' alpha and dalpha = sum(g D' x) reproducing every failing gradient, y right
    (mechanism backward). Explanations of the failing gradients, or []."""
    x, dy = record.inputs.get("x"), record.cotangents.get("y")
    fail = set(record.failing)
    if case.op != "dyt" or x is None or dy is None or not fail or any(p != "grads" for p, _ in fail) \
            or not fail <= {("grads", "x"), ("grads", "alpha")} or np.size(x) > CONFIG_SIZE:
        return []
    x64 = np.asarray(x, dtype=np.float64)
    a = float(np.reshape(np.asarray(record.inputs["alpha"], dtype=np.float64), ()))
    w = record.inputs.get("weight")
    g = np.asarray(dy, dtype=np.float64) * (1.0 if w is None else np.asarray(w, dtype=np.float64))
    t = np.tanh(a * x64)
    with np.errstate(all="ignore"):
        for D, what in ((1 - t, "1 - t (t = tanh(alpha x))"), (1 + t * t, "1 + t^2 (its sign flipped)"),
                        (1 / np.cosh(a * x64), "sech(alpha x), not squared"),
                        ((1 - t) ** 2, "(1 - t)^2 (the square misplaced)")):
            gd = g * D
            alt = {"x": gd * a, "alpha": np.reshape(np.sum(gd * x64), np.shape(record.inputs["alpha"]))}
            if all(fit_ratio(record.got["grads"][n], alt[n], record.E["grads"][n]) <= 1 for _, n in fail):
                return [{"part": p, "name": n, "step": record.step, "mechanism": "backward",
                         "text": f"the backward with tanh's derivative 1 - t^2 taken as {what} reproduces d{n}"}
                        for p, n in sorted(fail)]
    return []


def running_factor(case, record, ref, part, name):
    """batch_norm's running_var updated with another count's Bessel factor: the batch variance the update
    implies, (new - (1 - m) old) / m, is the biased variance times p / (p - 1) with p the product of some of
    the reduced axes' lengths (the batch alone, the spatial positions alone) or 1 (no correction), or n's own
    written upside down ((n - 1) / n) or applied twice; or
    (mechanism "running") the variance about the old or the updated running_mean; batch_norm's or
    instance_norm's running_mean updated with the batch mean times the unbiased factor (``_running_mean_bessel``).
    The explanation, or None."""
    x = record.inputs.get("x")
    if case.op not in ("batch_norm", "instance_norm") or part != "state" or name not in ("running_var", "running_mean") \
            or x is None or not record.training or (case.op == "instance_norm" and name == "running_var"):
        return None
    from .backends.base import complete_config
    cfg = complete_config(case.op, case.config)                  # the defaults resolved under the case's values
    m, onnx = cfg.get("momentum"), cfg.get("convention") == "onnx"
    if m is None:                            # the cumulative average: 1 / num_batches_tracked after the increment
        nbt = record.state.get("num_batches_tracked")
        m = None if nbt is None else 1.0 / (float(np.asarray(nbt)) + 1)
    if not isinstance(m, (int, float)) or isinstance(m, bool) or not 0 < m <= 1:
        return None
    if onnx:                                 # m weights the old value
        m = 1 - m
    flipped = _running_delta_flipped(record, ref, name, m)
    if flipped is not None or name == "running_mean":   # the batch mean scaled by the unbiased factor n / (n - 1)
        return flipped or _running_mean_bessel(case, record, x, m)      # (the variance's, on both buffers: rule 1)
    old = record.state.get("running_var")
    got, E = record.got[part].get(name), record.E[part].get(name)
    if old is None or got is None:
        return None
    xs = _slices(case, x, np.asarray(x, dtype=np.float64))
    n = xs.shape[1]
    var = xs.var(axis=1)
    dims = [d for i, d in enumerate(np.shape(x)) if i != 1]
    prods = {1}
    for d in dims:
        prods |= {p * d for p in prods}
    # (the factor of another count, none, or n's own written upside down, (n - 1) / n, or applied twice)
    factors = [(1.0 if p == 1 else p / (p - 1), "no Bessel correction (the biased variance)" if p == 1 else
                f"the Bessel factor of {p} values") for p in sorted(prods) if p != n]
    factors += [((n - 1) / n, "the Bessel factor written upside down, (n - 1) / n"),
                ((n / (n - 1)) ** 2, "the Bessel factor n / (n - 1) applied twice")] if n > 1 else []
    for f, what in factors:
        v = (1 - m) * np.asarray(old, dtype=np.float64) + m * var * f
        if fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
            return {"mechanism": "bessel", "text": f"running_var is updated with {what} where n = {n} belongs"}
    # the variance about another centre: the running mean before or after this update, not the batch mean
    for which, rm in (("the old", record.state.get("running_mean")), ("the updated", ref.state.get("running_mean"))):
        if rm is None or np.size(rm) != xs.shape[0]:
            continue
        about = ((xs - np.asarray(rm, dtype=np.float64).reshape(-1, 1)) ** 2).mean(axis=1)
        for f in ((n / (n - 1),) if n > 1 else ()) + (1.0,):
            v = (1 - m) * np.asarray(old, dtype=np.float64) + m * about * f
            if fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
                return {"mechanism": "running", "text": f"running_var is updated with the variance about {which} "
                                                        "running_mean where the batch mean belongs"}
    return None


def _running_delta_flipped(record, ref, name, m):
    """A running statistic updated in the incremental form r += m (new - r) with the difference's operands
    exchanged, r + m (r - new) (new: the batch statistic the reference's update blends in, read off it as
    (expected - (1 - m) r) / m): "running", or None."""
    old, got, E, want = record.state.get(name), record.got["state"].get(name), record.E["state"].get(name), \
        ref.state.get(name)
    if old is None or got is None or E is None or want is None or np.size(want) != np.size(got) \
            or np.size(old) != np.size(got):
        return None
    old = np.asarray(old, dtype=np.float64).reshape(np.shape(got))
    new = (np.asarray(want, dtype=np.float64).reshape(np.shape(got)) - (1 - m) * old) / m
    if fit_ratio(got, old + m * (old - new), E) <= 1:
        return {"mechanism": "running", "text": f"{name} is updated as {name} + m ({name} - the batch statistic): the "
                                                "incremental form r += m (new - r) with the difference's operands "
                                                "exchanged"}
    return None


def _running_mean_bessel(case, record, x, m):
    """running_mean updated with the batch mean times n / (n - 1) or (n - 1) / n (the unbiased factor of the
    variance applied to the mean too): "bessel", or None."""
    old, got, E = record.state.get("running_mean"), record.got["state"].get("running_mean"), \
        record.E["state"].get("running_mean")
    if old is None or got is None or E is None:
        return None
    x64 = np.asarray(x, dtype=np.float64)
    if case.op == "batch_norm":
        xs = _slices(case, x, x64)
        mean, n = xs.mean(axis=1), xs.shape[1]
    else:                                    # instance statistics: the mean over the batch of each instance's
        v = x64.reshape(x64.shape[0], x64.shape[1], -1)
        mean, n = v.mean(axis=2).mean(axis=0), v.shape[2]
    if n < 2:
        return None
    for f, what in ((n / (n - 1), f"n / (n - 1) = {n}/{n - 1}"), ((n - 1) / n, f"(n - 1) / n = {n - 1}/{n}")):
        v = (1 - m) * np.asarray(old, dtype=np.float64) + m * mean * f
        if np.size(v) == np.size(got) and fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
            return {"mechanism": "bessel", "text": f"running_mean is updated with the batch mean times {what} (the "
                                                   "variance's unbiased factor applied to the mean too)"}
    return None


def accumulated(case, record, part, name, got, want, E):
    """A parameter gradient whose elements are running sums of the expected ones: one accumulator, never
    reset, carried through the loop over the parameter's elements (dweight[k] = sum_{j <= k} of the expected,
    in index order or from the last element), or sums over the elements of one index mod K (a buffer of K
    partial sums, broadcast back): mechanism "reduction" (partial sums repeated, rule 11), or None."""
    if part != "grads" or name not in record.inputs or name in ("x", "z", "residual") or np.size(got) < 2 \
            or np.shape(got) != np.shape(want):
        return None
    w = np.asarray(want, dtype=np.float64).reshape(-1)
    for v, order in ((np.cumsum(w), "in index order"), (np.cumsum(w[::-1])[::-1], "from the last element")):
        if grown_fit(fit_ratio, got, v.reshape(np.shape(got)), want, E, True) <= 1:
            return {"mechanism": "reduction", "text": f"d{name} holds running sums of its expected elements "
                    f"({order}): one accumulator carried through the loop over them, never reset"}
    n = w.size
    for K in (K for K in range(1, n) if n % K == 0):
        # a partial buffer of K entries: entry j collects every element j mod K (a group's width where the
        # parameter's belongs), broadcast back to every group
        v = np.tile(w.reshape(-1, K).sum(axis=0), n // K)
        if grown_fit(fit_ratio, got, v.reshape(np.shape(got)), want, E, True) <= 1:
            return {"mechanism": "reduction", "text": f"d{name} is its expected elements summed over every index "
                    f"of the same value mod {K} (a partial buffer of {K} entries, broadcast back)"}
    return None


BN_SAMPLES = 64     # batch_norm's per-sample terms for batches of at most this many samples (missing_rows
#                    searches every first / last k of them: a large batch's search costs more than its judgement)


def row_terms(case, record, ref, part, name):
    """layer_norm / rms_norm dweight and dbias: the per-row terms (rows, n) they sum (dy * x_hat, dy);
    batch_norm's in training: the per-sample terms (samples, C), each sample's positions summed; or None
    for other ops and arrays."""
    if part != "grads" or name not in ("weight", "bias"):
        return None
    x, dy, want = record.inputs.get("x"), record.cotangents.get("y"), getattr(ref, part).get(name)
    if case.op == "batch_norm" and record.training and x is not None and dy is not None and np.ndim(x) >= 2 \
            and np.shape(x)[0] <= BN_SAMPLES and "mean" in ref.outputs and "rstd" in ref.outputs:
        N, C = np.shape(x)[:2]
        dy = np.asarray(dy, dtype=np.float64).reshape(N, C, -1)
        if name == "bias":
            return dy.sum(axis=2)
        xh = (np.asarray(x, dtype=np.float64).reshape(N, C, -1) - np.asarray(ref.outputs["mean"]).reshape(1, C, 1)) \
            * np.asarray(ref.outputs["rstd"]).reshape(1, C, 1)
        return (dy * xh).sum(axis=2)
    if case.op not in ("layer_norm", "rms_norm"):
        return None
    if x is None or dy is None or want is None or "rstd" not in ref.outputs or case.config.get("weight_offset"):
        return None
    m = int(np.prod(np.shape(x)[:np.ndim(x) - np.ndim(want)], dtype=np.int64))
    dy = np.asarray(dy, dtype=np.float64).reshape(m, -1)
    if name == "bias":
        return dy
    xs = np.asarray(x, dtype=np.float64).reshape(m, -1)
    mean = np.asarray(ref.outputs["mean"], dtype=np.float64).reshape(m, -1) if "mean" in ref.outputs else 0.0
    return dy * (xs - mean) * np.asarray(ref.outputs["rstd"], dtype=np.float64).reshape(m, -1)


def unprocessed_rows(case, record, ref):
    """layer_norm / rms_norm: the rows from r0 on never processed (a grid of B-row programs rounded down:
    r0 = floor(R / B) B, or of P programs: r0 = P floor(R / P); or the last row, a loop bound off by one; or
    a grid capped at r0 programs with no loop over the rest):
    every per-row array (y, mean, rstd, dx; dx alone where no output fails: the backward's grid) left at 0 on
    those rows and right on the others, the parameter gradients the sums of the first r0 rows' terms.
    Explanations of every failing array (mechanism "block"), or []."""
    x = record.inputs.get("x")
    if case.op not in ("layer_norm", "rms_norm") or x is None or np.size(x) > CONFIG_SIZE:
        return []
    m = int(np.prod(np.shape(x)[:np.ndim(x) - (len(case.config["normalized_shape"])
                                                if np.ndim(case.config["normalized_shape"]) else 1)], dtype=np.int64))
    r0 = None
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None:
            return []
        if (part, name) in (("grads", "weight"), ("grads", "bias")):
            continue
        if np.size(got) % m or np.size(got) != np.size(want):
            return []
        bad = failing_mask(got, want, E).reshape(m, -1).any(axis=1)
        first = int(np.argmax(bad))
        r0 = first if r0 is None else min(r0, first)
    if r0 is None or r0 == 0:
        return []
    fwd = any(p == "outputs" for p, _ in record.failing)
    blocks = [B for B in (2, 4, 8, 16, 32, 64, 128, 256) if m // B * B == r0]
    # or P programs (a GPU's SM count) each taking floor(m / P) rows where ceil belongs
    grids = [P for P in (80, 84, 108, 114, 132, 144, 170) if m > P and P * (m // P) == r0]
    last = r0 == m - 1                  # or a row loop's bound off by one (range(pid, rows - 1, programs))
    # (else a grid capped at r0 programs of one row each with no loop over the rest: any r0, the zeros decide)
    for part, name in [(p, n) for p in ("outputs", "grads") for n in record.compare[p]]:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None:
            continue
        if (part, name) in (("grads", "weight"), ("grads", "bias")):
            terms = row_terms(case, record, ref, part, name)
            if terms is None or fit_ratio(got, terms[:r0].sum(axis=0).reshape(np.shape(got)), E) > 1:
                return []
            continue
        if np.size(got) % m:
            return []
        v = np.asarray(want, dtype=np.float64).reshape(m, -1).copy()
        if part == "grads" or fwd:          # (the backward's grid alone: the forward's rows processed)
            v[r0:] = 0.0
        if fit_ratio(got, v.reshape(np.shape(got)), E) > 1:
            return []
    text = (f"rows {r0}-{m - 1} never processed (left at 0; the sums without their terms): " + (
        f"a grid of programs of B rows rounded down, floor({m} / B) where ceil belongs (B = "
        f"{' or '.join(map(str, blocks))})" if blocks else
        f"a grid of P programs each taking floor({m} / P) rows where ceil belongs (P = {' or '.join(map(str, grids))})"
        if grids else f"a row loop's bound {m} - 1 where {m} belongs (off by one)" if last else
        f"a grid capped at {r0} programs of one row each, with no loop over the remaining rows"))
    return [{"part": p, "name": n, "step": record.step, "mechanism": "block", "text": text} for p, n in record.failing]


SLICE_OPS = ("group_norm", "instance_norm", "group_norm_silu", "dyt", "poly_norm", "add_norm", "gated_norm",
             "adaptive_layer_norm")
SLICES_MAX = 256      # the per-slice search evaluates the specification once per slice: up to this many


def _full_config(case) -> dict:
    """The case's configuration with the op's defaults filled in (its own where the op refuses it)."""
    from .backends.base import complete_config
    try:
        return complete_config(case.op, case.config)
    except KeyError:
        return dict(case.config)


def _dims(dim, nd):
    """A ``dim`` option (an axis or a tuple of axes, negative from the end) as a set of axes of nd; all of
    them where it is None."""
    if dim is None:
        return set(range(nd))
    return {int(d) % nd for d in (dim if isinstance(dim, (list, tuple)) else (dim,))}


def slice_terms(case, record, reference, name):
    """A parameter gradient's terms per slice x[i] along x's first axis (samples; rows of a 2-D x), for
    the ops whose slices along that axis are computed independently (z_score's where its dim leaves that axis
    out): the specification evaluated on each
    slice alone (inputs and cotangents with that leading length sliced with it). A per-sample parameter
    ((N, ...): adaptive_layer_norm's scale) sums its sample's tokens: its terms per token x[:, t] (the arrays
    of x's leading shape (N, T) sliced along axis 1). batch_norm's eval calls too (the running statistics
    normalize each sample alone). (slices, *shape) or None."""
    x = record.inputs.get("x")
    if x is None or np.ndim(x) < 2 or reference is None or case.op not in SLICE_OPS and not (
            case.op == "z_score" and 0 not in _dims(_full_config(case).get("dim"), np.ndim(x))) and not (
            case.op == "batch_norm" and not record.training):       # (an eval call's samples are independent)
        return None
    N = np.shape(x)[0]
    per_sample = np.shape(record.inputs.get(name, ()))[:1] == (N,)
    if per_sample:              # the tokens of each sample (x of at least 3 axes)
        if np.ndim(x) < 3:
            return None
        N, lead = np.shape(x)[1], np.shape(x)[:2]
        cut = lambda d, i: {k: (np.asarray(v)[:, i:i + 1] if np.ndim(v) >= 2 and np.shape(v)[:2] == lead  # noqa: E731
                                else v) for k, v in d.items()}
    else:
        cut = lambda d, i: {k: (np.asarray(v)[i:i + 1] if np.ndim(v) and np.shape(v)[0] == N else v)  # noqa: E731
                            for k, v in d.items()}
    if not 2 <= N <= SLICES_MAX or np.size(x) > CONFIG_SIZE:
        return None
    out = []
    try:
        with np.errstate(all="ignore"):
            for i in range(N):
                res = reference(case.op, case.config, record.training, cut(record.inputs, i),
                                cut(record.cotangents, i), record.state)
                out.append(np.asarray(res.grads[name], dtype=np.float64))
    except Exception:                                       # noqa: BLE001 - an op that refuses one slice
        return None
    return np.stack(out)


def reduction_rows(case, record, ref, part, name, reference=None):
    """The rows whose terms are missing from (or counted twice in) a parameter gradient
    (localize.missing_rows), when that explains the array within its bound; else None."""
    from .localize import missing_rows
    terms = row_terms(case, record, ref, part, name)
    got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
    unit = "samples" if case.op == "batch_norm" else "rows"
    if terms is None and part == "grads" and name != "x" and got is not None:
        terms = slice_terms(case, record, reference, name)
        x = record.inputs.get("x")
        unit = ("rows" if np.ndim(x) == 2 else "tokens of each sample" if np.shape(record.inputs.get(name, ()))[:1]
                == np.shape(x)[:1] else "samples")
    if terms is None or got is None or E is None:
        return None
    text, explained = missing_rows(np.asarray(got, dtype=np.float64) - want, terms, want)
    # (the bound grown where the explained sum is larger: a row counted again adds its own rounding; not for a
    # sum of a few values, which one candidate or another fits by chance)
    fit = grown_fit if np.size(got) >= 4 else (lambda f, g, v, w, e, _: f(g, v, e))
    if not text or fit(fit_ratio, got, explained.reshape(np.shape(want)), want, E, True) > 1:
        return reordered_partials(terms, got, E, name, unit)
    return {"mechanism": "reduction", "text": f"d{name} is the sum with {text.replace('rows', unit)}"}


def reordered_partials(terms, got, E, name, unit):
    """A parameter gradient reduced from its partials ``terms`` (one per slice and parameter element) read in
    another index order (explain_index.index_orders of the partials' array: the (N, C) partials of an
    instance norm summed as if (C, N), the inverse of a repeat_interleave expansion where a tile's belongs):
    "layout" (rule 12), or None. Needs every parameter element to move (a size-1 parameter's sum is order-free)."""
    from .explain_index import index_orders
    if np.ndim(terms) < 2 or np.size(got) < 2 or np.size(terms) > CONFIG_SIZE:
        return None
    flat = np.asarray(terms, dtype=np.float64).reshape(-1)
    for m, what in index_orders(np.shape(terms)):
        what = what.replace("its ", "the partials' ", 1)
        v = flat[m].reshape(np.shape(terms)).sum(axis=0)
        if np.size(v) == np.size(got) and fit_ratio(got, v.reshape(np.shape(got)), E) <= 1:
            return {"mechanism": "layout", "text": f"d{name} is the sum of its per-{unit.split()[0].rstrip('s')} "
                    f"partials read in another index order: {what}"}
    return None


def finite_failures(record, ref):
    """The failing arrays with a finite or NaN failing element: an array failing only by +-inf (an
    overflow) is reproduced by any deviation that amplifies there, no evidence for one; a NaN is an invalid
    operation (sqrt of a negative variance, 0 x inf), specific to a computation. A quantized array counts
    whatever it fails by (its NaN or inf is the format's overflow code, a value)."""
    out = set()
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None or np.shape(got) != np.shape(want):
            continue
        qd = record.E.get("dtypes", {}).get((part, name))
        bad = failing_mask(got, want, E, qd)
        if np.any(bad & ~np.isinf(np.asarray(got, dtype=np.float64))) or (quant_name(np.asarray(got).dtype)
                                                                       and np.any(bad)):
            out.add((part, name))
    return out


def swapped_returns(record, ref) -> list:
    """Every failing array of the step is, within its bound, the expected value of another array of its part and
    shape, each taken once (a return tuple unpacked in another order: dx and dresidual in each other's place); a
    passing partner only where its own returned value is, within its bound, the failing array's expected one too
    (the pair's values close enough for it to pass in the other's place: dweight and dbias at a mean of 1e4):
    explanations without a mechanism (docs/verdicts.md: two returned arrays swapped are none), or []. Tried first:
    the simplest account, before any change of the arithmetic that reproduces them."""
    failing = list(record.failing)
    if not failing:
        return []

    def ratio(part, name, o):           # name's returned value against o's expected one, in name's bound
        got, E, want = record.got[part].get(name), record.E[part].get(name), getattr(ref, part).get(o)
        if got is None or E is None or want is None or np.shape(want) != np.shape(got):
            return math.inf
        return fit_ratio(got, want, E)

    def holds(part, name, o):
        return ratio(part, name, o) <= 1

    def closer(part, o, name):          # a passing partner nearer the failing array's expected value than its own
        return holds(part, o, name) and ratio(part, o, name) < ratio(part, o, o)

    used, out = set(), []
    for part, name in failing:
        if record.got[part].get(name) is None or record.E[part].get(name) is None:
            return []
        others = [o for p2, o in failing if p2 == part and o != name] + \
            [o for o in record.compare[part] if o != name and (part, o) not in failing]
        other = next((o for o in others if (part, o) not in used and holds(part, name, o)
                      and ((part, o) in failing or closer(part, o, name))), None)
        if other is None:
            return []
        used.add((part, other))
        out.append((part, name, other))
    pairs = {(p, n): o for p, n, o in out}
    return [{"part": p, "name": n, "step": record.step, "mechanism": None,
             "text": f"{_label(p, n)} is the expected {_label(p, o)}, returned in its place"
                     + (" (the two returned in each other's place)" if pairs.get((p, o)) == n
                        or (p, o) not in record.failing else "")}
            for p, n, o in out]


def stored_in_place_of(record, ref) -> list:
    """Exactly two failing arrays of one part and shape, one (``b``) zero everywhere where its expected value is
    not, the other (``a``) b's expected value within its bound: b's result stored through a's pointer (the store
    line copied), b's buffer never written: rule 12's layout (a value written at another index), or []. (The
    two in each other's place are swapped_returns', no mechanism.)"""
    failing = list(record.failing)
    if len(failing) != 2 or failing[0][0] != failing[1][0]:
        return []
    part = failing[0][0]
    got = {n: record.got[part].get(n) for _, n in failing}
    if any(g is None or record.E[part].get(n) is None or getattr(ref, part).get(n) is None for n, g in got.items()):
        return []
    for (_, a), (_, b) in (failing, failing[::-1]):
        gb, want_b = np.asarray(got[b], dtype=np.float64), np.asarray(getattr(ref, part)[b], dtype=np.float64)
        if np.shape(got[a]) != np.shape(gb) or gb.size < 2 or np.any(gb != 0) or not np.any(want_b != 0):
            continue
        if fit_ratio(got[a], want_b, record.E[part][a]) <= 1:
            text = (f"{_label(part, a)} holds the expected {_label(part, b)} and {_label(part, b)} is zero everywhere: "
                    f"{_label(part, b)}'s result stored through {_label(part, a)}'s pointer, its own buffer never "
                    f"written")
            return [{"part": part, "name": n, "step": record.step, "mechanism": "layout", "text": text}
                    for n in (a, b)]
    return []


def explain(case, record, ref, reference=None, bounds=None) -> list:
    """The explanations (``_explain``) of the failing arrays that fail at some finite element; an array
    failing only by non-finite values is localized (its first non-finite values), not explained."""
    keep = finite_failures(record, ref)
    return [e for e in _explain(case, record, ref, reference, bounds) if (e["part"], e["name"]) in keep]


def _explain(case, record, ref, reference=None, bounds=None) -> list:
    """The explanations of the failing arrays of one recorded step: a configuration deviation or a layout
    misread that explains them all; else per array a recognizable factor or power, dx's terms, rows
    missing from a sum, or the other mode; and where those leave a failing array unexplained, a change of
    the slice's statistics (``row_statistics``) when it explains every failing array or output."""
    bwd = None
    swapped = swapped_returns(record, ref) or stored_in_place_of(record, ref)
    if swapped:
        return swapped
    if reference is not None:
        # a quantizer's codes judged at its own returned scale first: a configuration value that moves y by a
        # rounding error (a default eps) reproduces codes rounded the wrong way only where they tie
        e = quant_deviation(case, record, ref, fit_ratio, CONFIG_SIZE) or config_deviation(case, record, reference, ref, bounds)
        if e is not None and e.pop("backward_only", False):
            bwd, e = e, None            # used where the per-array explanations leave a gradient unexplained
        e = (e or layout_misread(case, record, reference) or weight_first(case, record, reference)
             or folded_affine(case, record, ref) or second_pass_rows(case, record, ref)
             or tile_first_index(case, record, ref) or stats_read_elsewhere(case, record, ref)
             or silu_stats_read_elsewhere(case, record, ref) or silu_grad_from_output(case, record, ref)
             or silu_folded_in_half(case, record, ref) or silu_saved_stats_rounded(case, record, ref)
             or split_rows(case, record, ref) or branch_twice(case, record, ref)
             or dropout_deviation(case, record, reference) or residual_after_norm(case, record, reference)
             or gate_both_sides(case, record, reference, ref)
             or affine_before_norm(case, record, reference) or bias_first(case, record, reference))
        if e is not None:
            return [{"part": p, "name": n, "step": record.step, **e} for p, n in record.failing]
    rows = truncated_returns(case, record, ref) or unprocessed_rows(case, record, ref)
    if not rows:
        from . import explain_grid              # slices, elements or columns a grid never processes
        rows = explain_grid.unprocessed(sys.modules[__name__], case, record, ref, reference)
    if rows:
        return rows
    out = []
    x = record.inputs.get("x")
    x_shape = np.shape(x) if x is not None else ()
    from .. import registry
    main = registry.get(case.op).outputs[0]
    for part, name in record.failing:
        got, want, E = record.got[part].get(name), getattr(ref, part).get(name), record.E[part].get(name)
        if got is None or want is None or E is None or np.shape(got) != np.shape(want):
            continue
        with np.errstate(all="ignore"):
            e = never_written(part, name, got, x_shape, main, ref) or zero_tail(case, part, name, got, want, E) \
                or (None if _constant_mean(case, record, part, name) else
                    factor(case, part, name, got, want, E, x_shape, record.E.get("dtypes", {}).get((part, name)))) \
                or power(part, name, got, want, E) or stored_through(case, part, name, got, want, E, x_shape)
            if e is None:
                e = row_power(case, record, ref, part, name, got, want, E)
            if e is None and (part, name) == ("grads", "x"):
                e = dx_terms(case, record.training, record.inputs, record.cotangents, got, E)
            if e is None:
                e = reduction_rows(case, record, ref, part, name, reference)
            if e is None:
                e = accumulated(case, record, part, name, got, want, E) \
                    or param_products(case, record, ref, part, name) or modulation_grads(case, record, ref, part, name) \
                    or copied_element(case, record, ref, part, name) \
                    or running_factor(case, record, ref, part, name) \
                    or extra_reduction(case, record, ref, part, name) or partials_rounded(case, record, ref, part, name)
        if e is not None:
            out.append({"part": part, "name": name, "step": record.step, **e})
    if bwd is not None and len(out) < len(record.failing):
        return [{"part": p, "name": n, "step": record.step, **bwd} for p, n in record.failing]
    if reference is not None:
        done = {(e["part"], e["name"]) for e in out}
        out += [e for e in mode_deviation(case, record, reference) if (e["part"], e["name"]) not in done]
        if len(out) < len(record.failing):
            from . import explain_poly              # poly_norm's powers normalized otherwise
            act = (fused_activation(case, record, reference, ref) or dyt_rounded_t(case, record) or dyt_deviation(case, record)
                   or dyt_derivative(case, record) or lp_deviation(case, record, ref) or rms_l1(case, record, ref)
                   or explain_poly.deviation(sys.modules[__name__], case, record)
                   or epilogue_activation(case, record, reference, ref, bounds))
            if act:
                return act
    if len(out) < len(record.failing):
        out += explain_terms.backward_terms(case, record, ref, {(e["part"], e["name"]) for e in out}, fit_ratio,
                                            CONFIG_SIZE)
    done = {(e["part"], e["name"]) for e in out}
    subsets = {}                        # (the cotangents kept) -> the specification's gradients from them alone
    overwritten = {}                    # (cotangent, gradient in its place) -> the specification's gradients
    for part, name in [pn for pn in record.failing if pn not in done and pn[0] == "grads"]:
        got, E = record.got[part].get(name), record.E[part].get(name)
        e = None if got is None or E is None else (another_gradient(record, ref, part, name, got, E)
                                                   or cotangents_dropped(case, record, reference, name, got, E, subsets)
                                                   or overwritten_cotangent(case, record, reference, ref, name, got,
                                                                            E, overwritten)
                                                   or overwritten_input(case, record, ref, name, got, E))
        if e is not None:
            out.append({"part": part, "name": name, "step": record.step, **e})
    if len(out) < len(record.failing):
        with np.errstate(all="ignore"):
            stats = row_statistics(case, record, ref)
        if stats:
            return stats
    outs = [pn for pn in record.failing if pn[0] == "outputs"]
    done = {(e["part"], e["name"]) for e in out}
    if len(out) < len(record.failing) and not (outs and all(pn in done for pn in outs)):
        from . import explain_index             # index orders, other axes, the updated running statistics
        found = explain_index.explain(sys.modules[__name__], case, record, ref, reference, bounds)
        if found:
            return found
    if len(out) < len(record.failing) and reference is not None:
        # a change no mechanism names does not displace the families' partial explanations (their mechanism
        # may name the failure from its outputs), nor stop the next search from naming one
        unnamed = None
        for search in (rounding_point, backward_flag, mutation):
            e = search(case, record, fit_ratio)
            if e is not None and e["mechanism"] is not None:
                return [{"part": p, "name": n, "step": record.step, **e} for p, n in record.failing]
            unnamed = unnamed or e
        if unnamed is not None and not out:
            return [{"part": p, "name": n, "step": record.step, **unnamed} for p, n in record.failing]
    if not out and record.failing and all(pn == ("grads", "z") for pn in record.failing) and "z" in record.inputs:
        # the gate input's gradient alone wrong, whatever its term: the gate's (docs/verdicts.md, rule 3) by where
        # it fails, not by an arithmetic found
        return [{"part": "grads", "name": "z", "step": record.step, "mechanism": "gate",
                 "text": "only the gate input's gradient dz fails (y, dx and the parameter gradients right): a "
                         "deviation of dz alone, by no change the search tried (rule 3 names any)"}]
    return out
