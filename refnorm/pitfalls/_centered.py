"""Statistic, eps and backward variants shared by the centred normalizers (layer_norm, group_norm,
batch_norm, instance_norm): ``common(op)`` returns them as Variants of ``op``. Each function below
is one docs/pitfalls.md mechanism; its docstring cites the rows."""
from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

from .. import _memo
from . import _engine
from ._engine import Mods, in_w, sum_d, sum_w, to_d, working


def _next_pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _mean_in_w(x, dtype):
    """(x in W, the row length n in W, the row means summed in W, pairwise): where the W statistics start."""
    xw = in_w(x, dtype)
    nW = working(dtype)(max(x.shape[1], 1))
    return xw, nW, sum_w(xw, dtype) / nW


def _row_blocks(x):
    """(i0, i1) row ranges of x (m, n) of about _engine._BLOCK elements each: a row's sums (NumPy's pairwise
    sum along the row) are the same numbers whichever block holds the row."""
    B = max(1, _engine._BLOCK // max(x.shape[1], 1))
    return [(i0, min(x.shape[0], i0 + B)) for i0 in range(0, x.shape[0], B)]


def _by_rows(x, f):
    """f(x) for a row-wise f (each result (m, 1), row i's from row i alone: NumPy's sums along a row),
    computed a block of rows at a time (_row_blocks: the same numbers, without temporaries of x's size)
    when x is a float64 (m, n) array; else f(x)."""
    if not (isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype == np.float64 and x.shape[0] > 0):
        return f(x)
    parts = [f(x[i0:i1]) for i0, i1 in _row_blocks(x)]
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(len(parts[0])))


def _one_pass_w(x, dtype):
    """The unguarded one-pass (mean, var) in W (x's row sums and row sums of squares in W, a block of rows at
    a time: _row_blocks); once per x within a refnorm._memo scope (the diagnosis: the three guards and the
    ends of their spreads compute the same sums of the same x)."""
    def make():
        W = working(dtype)
        nW = W(max(x.shape[1], 1))
        s1, s2 = np.empty((x.shape[0], 1), W), np.empty((x.shape[0], 1), W)
        with np.errstate(all="ignore"):
            for i0, i1 in _row_blocks(x):
                xw = in_w(x[i0:i1], dtype)
                s1[i0:i1], s2[i0:i1] = sum_w(xw, dtype), sum_w(xw * xw, dtype)
            mean = s1 / nW
            return mean, s2 / nW - mean * mean
    return _memo.once("one_pass", (x,), dtype, make, keep=8)


def one_pass(x, dtype, guard="clamp"):
    """A01, A02 (clamp), A03 (var < 1e-6 -> 0), A05-A09 (no guard: NaN from a negative variance):
    var = E[x^2] - E[x]^2 with both means summed in W (pairwise) and the subtraction in W."""
    W = working(dtype)
    mean, var = _one_pass_w(x, dtype)
    if guard == "clamp":
        var = np.maximum(var, W(0))
    elif guard == "thresh":
        var = np.where(var < W(1e-6), W(0), var)
    return mean.astype(np.float64), var.astype(np.float64)


def _guarded(var, guard, W):
    if guard == "clamp":
        return np.maximum(var, W(0))
    if guard == "thresh":
        return np.where(var < W(1e-6), W(0), var)
    return var


def one_pass_spread(guard="clamp"):
    """The one-pass variance at the two ends of its own rounding interval: a kernel with this pitfall
    sums x and x^2 in W in ITS order, and the catastrophic cancellation in E[x^2] - E[x]^2 turns the
    order into the result (the variant's NumPy pairwise order is only one of them). The first-order
    bound of the two sums and the subtraction, for a sum of n terms erring by at most g(n) u sum|terms|
    (g: the reduction model the backend declares, refnorm.check.precision.gamma):
        |delta var| <= u_W (g(n) (mean(x^2) + 2 |mean| mean|x|) + 2 |var|)
    Returns gfun -> [Mods at var - delta, Mods at var + delta, and two at var +- delta with a random
    sign per row] (each guarded as the variant is), for the diagnosis to widen the bound of the match by
    how far those move the results. The mixed signs matter for sums over rows (a parameter gradient sums
    rows whose variances err independently, in either direction: all-minus and all-plus do not reach
    its extremes). ``spread(gfun, signs)``: Mods at var + s delta for each float s of ``signs`` instead
    (the same s on every row: the diagnosis's per-row consistency test, refnorm/check/consistent.py)."""
    def spread(gfun, signs=None):
        def at(sign):
            def stats(x, dtype):
                if isinstance(sign, int):          # a seeded random sign per row (deterministic)
                    s = np.random.default_rng([sign, x.shape[0]]).choice([-1.0, 1.0], size=(x.shape[0], 1))
                else:
                    s = sign
                W = working(dtype)
                u = float(np.finfo(W).eps) / 2
                mean, var = one_pass(x, dtype, "none")
                g = gfun(x.shape[1])

                def half_width():               # once per (x, g) within a memo scope (every end, every guard)
                    out = np.empty((x.shape[0], 1))
                    with np.errstate(all="ignore"):
                        for i0, i1 in _row_blocks(x):        # row by row: the same numbers in any block
                            xw = in_w(x[i0:i1], dtype).astype(np.float64)
                            out[i0:i1] = u * (g * ((xw * xw).mean(axis=1, keepdims=True)
                                                   + 2 * np.abs(mean[i0:i1]) * np.abs(xw).mean(axis=1, keepdims=True))
                                              + 2 * np.abs(var[i0:i1]))
                    return out
                delta = _memo.once("one_pass_spread", (x,), (dtype, float(g)), half_width, keep=8)
                with np.errstate(all="ignore"):
                    v = _guarded(var + s * delta, guard, np.float64)
                return mean, v
            return Mods(stats=stats)
        if signs is not None:
            return [at(float(v)) for v in signs]
        return [at(-1.0), at(1.0), at(1), at(2)]
    return spread


def pad_lanes(x, dtype):
    """A10: the next_pow2(n) - n masked lanes of the block loaded as 0 enter sum((x - mean)^2), each
    adding mean^2 (the statistics otherwise exact): var += (P - n) * mean^2 / n."""
    n = x.shape[1]
    mean, var = _by_rows(x, lambda b: (lambda m: (m, ((b - m) ** 2).mean(axis=1, keepdims=True)))(
        b.mean(axis=1, keepdims=True)))
    return mean, var + (_next_pow2(n) - n) * mean * mean / max(n, 1)


def pow2_divisor(x, dtype):
    """A10 (other reading): the block length P = next_pow2(n) used as the divisor of the sums."""
    P = _next_pow2(x.shape[1])
    return _by_rows(x, lambda b: (lambda m: (m, ((b - m) ** 2).sum(axis=1, keepdims=True) / P))(
        b.sum(axis=1, keepdims=True) / P))


def sq_in_d(x, dtype):
    """C01: the squares (x - mean)^2 rounded to d before the (W) sum; the mean in W."""
    xw, nW, mean = _mean_in_w(x, dtype)
    dv = xw - mean
    return mean.astype(np.float64), (sum_w(to_d(dv * dv, dtype), dtype) / nW).astype(np.float64)


def var_in_d(x, dtype):
    """C02: the variance (two-pass in W) stored in d before rstd."""
    xw, nW, mean = _mean_in_w(x, dtype)
    dv = xw - mean
    return mean.astype(np.float64), to_d(sum_w(dv * dv, dtype) / nW, dtype).astype(np.float64)


def stats_in_d(x, dtype):
    """C06, C09: mean and variance accumulated in d (pairwise, every partial, the deviations and their
    squares rounded to d); the deviations x - mean, computed in d, are also the ones normalized."""
    W = working(dtype)
    nW = W(max(x.shape[1], 1))
    mean = to_d(sum_d(in_w(x, dtype), dtype) / nW, dtype)
    dv = to_d(in_w(x, dtype) - mean, dtype)
    var = to_d(sum_d(to_d(dv * dv, dtype), dtype) / nW, dtype)
    return mean.astype(np.float64), var.astype(np.float64), dv.astype(np.float64)


def stats_rounded_d(x, dtype):
    """Mean and variance computed on {d} tensors by reductions that accumulate in W and round their result
    to d (torch's and NumPy's reductions of float16/bfloat16 arrays): mean_d = RN_d(mean(x)), the deviations
    and their squares rounded to d, var_d = RN_d(mean(RN_d(RN_d(x - mean_d)^2))); the normalization reads
    x - mean_d in W (x widened, the saved mean_d)."""
    W = working(dtype)
    xw = in_w(x, dtype)
    nW = W(max(x.shape[1], 1))
    mean = to_d(sum_w(xw, dtype) / nW, dtype)
    dv = to_d(xw - mean, dtype)
    var = to_d(sum_w(to_d(dv * dv, dtype), dtype) / nW, dtype)
    return mean.astype(np.float64), var.astype(np.float64)


def bwd_in_d(mods, k=2.0, to=None):
    """Variant.slack of a statistic computed in d by a module differentiated by autograd: the gradient
    flowing back through the rounded statistic is rounded to d as well (a cast's backward), so dx's
    mean(g) and mean(g x_hat) terms carry a relative error up to k u_d, and the mean's gradient (a sum of
    the deviations' gradients, each rounded) an error up to k u_d |mean(g x_hat)| mean|x_hat|: the variant
    at every sign of the three (``Mods.bwd_rel``). ``to``: the dtype rounded to, when not the case's."""
    def slack(dtype):
        u = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(to or dtype, 0.0)
        if not u:
            return []
        e = k * u
        return [dataclasses.replace(mods, bwd_rel=(e, sb * e, sc * e)) for sb in (1, -1) for sc in (1, -1)]
    return slack


POINT_TITLES = {"mean": "the mean", "rstd": "rstd", "xhat": "x_hat"}


def rounding_points(op, V, points=("mean", "rstd", "xhat")):
    """The rounding-point search (issue 33): each intermediate of ``points`` rounded to bfloat16 or float16,
    to nearest even (mechanism "precision") or toward zero ("rounding"), one at a time, on the cases whose
    dtype is finer than the target (float16 cases: bfloat16; float32 and float64: both). Differentiated by
    autograd, the gradient through the rounded value is the unrounded one's (the statistic terms of dx
    within the slack of ``bwd_in_d`` at the target's unit roundoff)."""
    out = []
    for p in points:
        for to in ("bfloat16", "float16"):
            for mode in ("nearest", "zero"):
                vid = f"rp_{p}_{'bf16' if to == 'bfloat16' else 'f16'}_{'rn' if mode == 'nearest' else 'rz'}"
                if vid == "rp_rstd_bf16_rn":            # rstd_bf16 (R-rstd16) already
                    continue
                how = "to nearest" if mode == "nearest" else "toward zero (truncation)"
                mods = Mods(round_at=(p, to, mode))
                out.append(V(vid, ("R-point",), f"{POINT_TITLES[p]} rounded to {to} {how}", op, mods,
                             dtypes=COARSER[to], slack=bwd_in_d(mods, to=to)))
    return out


COARSER = {"bfloat16": ("float64", "float32", "float16"), "float16": ("float64", "float32")}


def one_pass_in_d(x, dtype):
    """C08: sum and sum of squares accumulated in d, then the one-pass variance in d (and the
    deviations x - mean normalized, computed in d)."""
    W = working(dtype)
    xw = in_w(x, dtype)
    nW = W(max(x.shape[1], 1))
    mean = to_d(sum_d(xw, dtype) / nW, dtype)
    ms = to_d(sum_d(to_d(xw * xw, dtype), dtype) / nW, dtype)
    var = to_d(ms - to_d(mean * mean, dtype), dtype)
    return mean.astype(np.float64), var.astype(np.float64), to_d(xw - mean, dtype).astype(np.float64)


def serial_w(x, dtype):
    """A11: mean and variance accumulated serially (one element after another) in W."""
    W = working(dtype)
    xw = in_w(x, dtype)
    nW = W(max(x.shape[1], 1))
    mean = (np.cumsum(xw, axis=1, dtype=W)[:, -1:] if x.shape[1] else np.zeros((x.shape[0], 1), W)) / nW
    dv = xw - mean
    var = (np.cumsum(dv * dv, axis=1, dtype=W)[:, -1:] if x.shape[1] else np.zeros((x.shape[0], 1), W)) / nW
    return mean.astype(np.float64), var.astype(np.float64)


def welford_lanes(x, dtype, lanes=4):
    """A12 (inferred): per-lane Welford partials (lane j holds x[j::lanes]) merged (Chan et al.) as if
    every lane held ceil(n / lanes) values; exact when lanes divides n (and, here, when n < lanes)."""
    n = x.shape[1]
    if n % lanes == 0 or n < lanes:
        return _by_rows(x, lambda b: (lambda m: (m, ((b - m) ** 2).mean(axis=1, keepdims=True)))(
            b.mean(axis=1, keepdims=True)))
    nominal = float(math.ceil(n / lanes))
    parts = [x[:, j::lanes] for j in range(lanes)]
    means = [p.mean(axis=1, keepdims=True) for p in parts]
    m2s = [((p - mu) ** 2).sum(axis=1, keepdims=True) for p, mu in zip(parts, means)]
    cnt, mean, m2 = nominal, means[0], m2s[0]
    for mu, s2 in zip(means[1:], m2s[1:]):
        tot = cnt + nominal
        delta = mu - mean
        mean = mean + delta * (nominal / tot)
        m2 = m2 + s2 + delta * delta * (cnt * nominal / tot)
        cnt = tot
    return mean, m2 / cnt


def eps_in_d(eps, dtype):
    """B04, B05: eps rounded to the case dtype (float16: 1e-12 -> 0)."""
    return float(to_d(in_w(eps, dtype), dtype))


def eps_min(eps, dtype):
    """B06: eps silently raised to max(eps, 1.001e-5) (CUDNN_BN_MIN_EPSILON)."""
    return max(eps, 1.001e-5)


def eps_square(var, eps, dtype):
    """B07: rstd = 1 / (var + eps)^2, a square where the square root belongs."""
    return 1.0 / (var + eps) ** 2


def rstd_bf16(var, eps, dtype):
    """rstd rounded to bfloat16 before the multiply (research mutant class R-rstd16)."""
    r = in_w(1.0 / np.sqrt(var + eps), dtype)
    return r.astype(ml_dtypes.bfloat16).astype(np.float64)


def dw_in_d(T, dtype):
    """C10: dweight's products rounded to d and reduced (pairwise) in d."""
    return sum_d(to_d(in_w(T, dtype), dtype), dtype).astype(np.float64)


def eps_outside_bounds(config, dtype):
    """Variant.bounds_as of the eps-outside variants: the bounds of the op with rstd = 1 / (sqrt(var) + eps)
    (its sensitivity to the variance grows without limit as var -> 0, where the inside placement's stays
    1 / (2 (var + eps)^(3/2)))."""
    return None, {**config, "eps_placement": "outside"}


def flat_rows(x, axes):
    """Whether some slice of x over ``axes`` is constant (its variance exactly 0)."""
    x = np.asarray(x)
    if x.size == 0:
        return False
    with np.errstate(all="ignore"):
        return bool(np.any(np.max(x, axis=axes) == np.min(x, axis=axes)))


def _flat_grads(c, t, i, s, cot):
    """eps outside, with gradients, on a call where some normalized slice is constant (the autograd NaN)."""
    if not (_has_eps(c) and cot):
        return False
    x = np.asarray(i["x"])
    ns = c.get("normalized_shape")
    if ns is not None:
        k = 1 if np.ndim(ns) == 0 else len(ns)
        return flat_rows(x, tuple(range(x.ndim - k, x.ndim)))
    if "num_groups" in c and x.ndim >= 2:
        return flat_rows(x.reshape(x.shape[0], int(c["num_groups"]), -1), (2,))
    return True


def _has_eps(c, *a):
    return float(c.get("eps", 1e-5)) > 0


def _grads(c, t, i, s, cot):
    return bool(cot)


def _has_w(c, t, i, s, cot):
    return bool(cot) and i.get("weight") is not None


def common(op, V, *, skip=()):
    """The shared variants as Variants of ``op`` (V: the Variant class); ``skip``: ids left out."""
    out = [
        V("one_pass_clamp", ("A01", "A02"), "variance as E[x^2]-E[x]^2 in {W}, clamped at 0", op,
          Mods(stats=one_pass), spread=one_pass_spread("clamp")),
        V("one_pass_thresh", ("A03",), "variance as E[x^2]-E[x]^2 in {W}, then var < 1e-6 set to 0", op,
          Mods(stats=lambda x, d: one_pass(x, d, "thresh")), spread=one_pass_spread("thresh")),
        V("one_pass_noclamp", ("A05", "A06", "A07", "A08", "A09"),
          "variance as E[x^2]-E[x]^2 in {W} with no guard (negative variance: NaN)", op,
          Mods(stats=lambda x, d: one_pass(x, d, "none")), spread=one_pass_spread("none")),
        V("pad_lanes", ("A10",), "padded lanes of the power-of-two block counted in sum((x-mean)^2)", op,
          Mods(stats=pad_lanes)),
        V("pow2_divisor", ("A10",), "the power-of-two block length used as the divisor of the statistics", op,
          Mods(stats=pow2_divisor)),
        V("serial_acc", ("A11",), "statistics accumulated serially in {W}", op, Mods(stats=serial_w)),
        V("welford_lanes", ("A12",), "Welford partials of 4 lanes merged with the nominal count ceil(n/4)", op,
          Mods(stats=welford_lanes)),
        V("eps_in_d", ("B04", "B05"), "eps rounded to {d} before use", op, Mods(eps=eps_in_d), when=_has_eps,
          low_precision=True),
        V("eps_min", ("B06",), "eps raised to max(eps, 1.001e-5)", op, Mods(eps=eps_min)),
        V("eps_square", ("B07",), "rstd = 1/(var + eps)^2: a square in place of the square root", op,
          Mods(rstd=eps_square)),
        V("sq_in_d", ("C01",), "squares (x-mean)^2 rounded to {d} before the {W} sum", op, Mods(stats=sq_in_d),
          slack=bwd_in_d(Mods(stats=sq_in_d)),
          low_precision=True),
        V("var_in_d", ("C02",), "variance stored in {d} before rstd", op, Mods(stats=var_in_d),
          slack=bwd_in_d(Mods(stats=var_in_d)),
          low_precision=True),
        V("stats_in_d", ("C06", "C09"), "mean and variance accumulated in the input dtype {d}", op,
          Mods(stats=stats_in_d), slack=bwd_in_d(Mods(stats=stats_in_d)), low_precision=True),
        V("stats_rounded_d", ("C06",), "mean and variance computed in {d} by {W}-accumulating reductions (each "
          "result, the deviations and their squares rounded to {d}: reductions of {d} tensors)", op,
          Mods(stats=stats_rounded_d), slack=bwd_in_d(Mods(stats=stats_rounded_d)), low_precision=True),
        V("one_pass_in_d", ("C08",), "sum and sum of squares accumulated in {d}, one-pass variance", op,
          Mods(stats=one_pass_in_d), slack=bwd_in_d(Mods(stats=one_pass_in_d)), low_precision=True),
        V("dw_acc_in_d", ("C10",), "dweight's products reduced in {d}", op, Mods(dweight=dw_in_d), when=_has_w,
          low_precision=True),
        V("rstd_bf16", ("R-rstd16",), "rstd rounded to bfloat16 before the multiply", op, Mods(rstd=rstd_bf16)),
        V("no_B_term", ("R-noB",), "dx without the -x_hat*mean(g*x_hat) term", op, Mods(no_B=True), when=_grads),
        V("no_A_term", ("R-noA",), "dx without the -mean(g) term", op, Mods(no_A=True), when=_grads),
        V("dweight_from_dy", ("R-dwdy",), "dweight = sum(dy): the x_hat factor missing", op, Mods(dweight_dy=True),
          when=_has_w),
        V("ddof1", ("H06", "E02"), "normalized with the unbiased variance (n - 1), backward of the biased formula",
          op, Mods(unbiased=True)),
        V("ddof1_exact", ("H06", "E02"), "normalized with the unbiased variance (n - 1), its exact backward", op,
          Mods(unbiased=True, unbiased_bwd=True)),
        V("eps_outside", ("B01",), "eps outside the sqrt: (x - mean)/(sqrt(var) + eps)", op,
          Mods(placement="outside"), when=_has_eps, bounds_as=eps_outside_bounds),
        V("eps_outside_autograd", ("B01",), "eps outside the sqrt, differentiated through sqrt(var) (autograd: "
          "a NaN gradient on rows whose variance is 0)", op, Mods(placement="outside", nan_if_flat=True),
          when=_flat_grads, bounds_as=eps_outside_bounds),
    ] + rounding_points(op, V)
    return [v for v in out if v.id not in skip]
