"""The float64 equations of layer_norm, rms_norm, group_norm, batch_norm and instance_norm (the same
as refnorm.norms, written plainly over rows), with one documented change at a time (``Mods``).

With ``Mods()`` every function here computes what ``refnorm.evaluate`` computes (tests/test_pitfalls.py
checks it on every golden case of the five ops, to 1e-10 of each array's scale). A pitfall variant is
this reference with exactly its pitfall's change: a different statistic, eps, affine convention,
running-statistics rule, or a missing backward term. Where a pitfall is about precision, only the
step it names is emulated in that precision: ``W`` (the working precision: float32 for float16,
bfloat16 and float32 cases, float64 for float64 cases) or ``d`` (the case dtype); every other step
stays float64. Sums emulated in a precision are NumPy's pairwise sums along the row (W) or a
pairwise halving tree with every partial rounded (d).

Rows: every op is computed on a (m, n) view whose rows are the normalized slices (layer/rms: the
trailing axes; group: (N*G, C/G*S); batch: per channel over (N, *); instance: per (n, c) over *).
The backward is the reference's formula evaluated at the (variant's) statistics:
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * weight       (centred)
    dx = rstd * (g - u * mean(g * xhat)), u = xhat (eps inside) or x / rms    (rms_norm)
    dx = g * rstd                                                              (running statistics)
which is what a kernel with that pitfall computes (it differentiates its own statistics only where
the reference does).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np

from .. import _memo
from ..norms.rms_norm import default_eps
from ..spec import Result

NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
MOMENTUM = {"torch": 0.1, "onnx": 0.9}


def working(dtype: str):
    """The working (accumulation) precision of a case dtype: float64 for float64, else float32."""
    return np.float64 if dtype == "float64" else np.float32


def wname(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def in_w(v, dtype):
    """A float64 value rounded to the working precision (kept as a W array)."""
    return np.asarray(v, dtype=np.float64).astype(working(dtype))


def to_d(v, dtype):
    """Round a value held in the working precision to the case dtype (one correct rounding: float32
    -> float16 and float32 -> bfloat16 are single roundings), returned in the working precision."""
    W = working(dtype)
    v = np.asarray(v, dtype=W)
    return v if dtype in ("float64", "float32") else v.astype(NP[dtype]).astype(W)


def round_point(v, to, mode, dtype):
    """float64 values v held as the working precision holds them (rounded to W first), then rounded to ``to``
    ("input": the case dtype d) to nearest even ("nearest") or toward zero ("zero"); float64 again."""
    t = NP[dtype if to == "input" else to]
    w = np.asarray(v, dtype=np.float64).astype(working(dtype))
    with np.errstate(all="ignore"):
        r = w.astype(t)
        if mode == "zero":
            over = np.abs(r.astype(np.float64)) > np.abs(w.astype(np.float64))
            r = np.where(over & np.isfinite(r), np.nextafter(r, np.zeros((), t)), r)
    return np.asarray(r, dtype=np.float64)


def sum_w(a, dtype):
    """Row sums (m, 1) of a (m, n) in the working precision (NumPy's pairwise sum along the row)."""
    W = working(dtype)
    return np.ascontiguousarray(a, dtype=W).sum(axis=1, dtype=W, keepdims=True)


def sum_d(a, dtype):
    """Row sums (m, 1) in the case dtype: a pairwise halving tree, every partial rounded to d."""
    a = to_d(a, dtype)
    if a.shape[1] == 0:
        return np.zeros((a.shape[0], 1), a.dtype)
    while a.shape[1] > 1:
        h = a.shape[1] // 2
        s = to_d(a[:, :h] + a[:, h:2 * h], dtype)
        a = np.concatenate([s, a[:, 2 * h:]], axis=1) if a.shape[1] % 2 else s
    return a


def two_pass(x, dtype):
    """The reference statistics: mean, then the biased variance of the deviations (float64); once per x
    within a ``refnorm._memo`` scope (the diagnosis: most variants keep the reference's statistics)."""
    def stats(b):
        n = max(b.shape[1], 1)
        mean = b.sum(axis=1, keepdims=True) / n
        return mean, ((b - mean) ** 2).sum(axis=1, keepdims=True) / n

    def make():                         # row by row: a block of rows at a time gives the same numbers
        if not (isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype == np.float64 and x.shape[0] > 0):
            return stats(x)
        B = max(1, _BLOCK // max(x.shape[1], 1))
        parts = [stats(x[i0:i0 + B]) for i0 in range(0, x.shape[0], B)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if not _memo.active() or not isinstance(x, np.ndarray):
        return make()
    return _memo.once("two_pass", (x,), (), make, keep=8)


def mean_square(x, dtype):
    return (x * x).sum(axis=1, keepdims=True) / max(x.shape[1], 1)


@dataclass(frozen=True)
class Mods:
    """One change to the reference (the defaults are the reference). See each field's comment."""
    stats: Callable | None = None          # (rows, dtype) -> (mean, biased var), each (m, 1)[, deviations used]
    ms: Callable | None = None             # rms_norm: (rows, dtype) -> mean of squares (m, 1)
    rms_centered: bool = False             # rms_norm: the centred variance in place of mean(x^2)
    centered: bool | None = None           # force the mean removed (True) or not (False): H10's swap
    eps: Callable | None = None            # (eps, dtype) -> the eps used
    rstd: Callable | None = None           # (var, eps, dtype) -> rstd (eps inside)
    placement: str | None = None           # force eps_placement ("outside": 1 / (sqrt(var) + eps))
    bwd_rel: tuple = (0.0, 0.0, 0.0)       # (a, b, c): dx's mean(g) term times (1 + a) plus sign(c) |mean(g x_hat)|
    #                                        (|c| mean|x_hat| + |mean(x_hat)|), its mean(g x_hat) term times (1 + b):
    #                                        the ends of the rounding of a statistic's gradient (Variant.slack)
    nan_if_flat: bool = False              # dx NaN on rows whose variance is 0: autograd through sqrt(var) at 0
    #                                        (d sqrt(v)/dv = inf times dv/dx = 0), as eps outside the root gives
    unbiased: bool = False                 # normalize with var * n / (n - 1)
    unbiased_bwd: bool = False             # ... and dx its exact derivative (mean(g * xhat) over n - 1)
    y: Callable | None = None              # (xhat, w, b, dtype) -> y
    xhat_in_d: bool = False                # x_hat rounded to d (used by the forward and the backward)
    round_at: tuple | None = None          # (point, dtype, mode): the intermediate "mean" | "rstd" | "xhat" rounded
    #                                        to dtype ("input": d) to "nearest" (even) or toward "zero", as the
    #                                        forward, the saved statistics and the backward use it (round_point)
    offset: str = "ok"                     # rms_norm (1 + w): ok | ignored | rounded | dx_plain
    drop_weight_without_bias: bool = False  # layer_norm: weight unused when bias is None
    no_B: bool = False                     # centred dx without -xhat * mean(g * xhat)
    no_A: bool = False                     # centred dx without -mean(g)
    dweight_dy: bool = False               # dweight summed from dy alone (the x_hat factor missing)
    dweight: Callable | None = None        # (terms (m, n), dtype) -> row-sums: dweight's reduction
    rows_mask: Callable | None = None      # (m, n) -> (m,) bool: rows entering dweight/dbias
    repeat_rows: int = 0                   # layer_norm: rows >= this repeat row r mod this
    # group_norm
    gn1_as_ln: bool = False
    bwd_first_row: bool = False            # backward means / dweight / dbias over the first W values
    dweight_nhwc: bool = False             # dweight terms read from NHWC memory with NCHW indexing
    dy_nhwc: bool = False                  # dy read from NHWC memory with NCHW indexing
    wave64: bool = False                   # dgamma/dbeta of channel c also sum channel c + 32
    param_mean_spatial: bool = False       # dweight, dbias averaged (not summed) over spatial axes
    # batch_norm / instance_norm
    running_bessel: bool | None = None     # None: the convention's rule; True/False forces it
    momentum_flip: bool = False            # the momentum applied to the other term
    rv_frozen: bool = False                # running_var not updated
    nbt_frozen: bool = False               # num_batches_tracked not incremented
    eval_bwd_batch: bool = False           # batch_norm eval: backward with batch statistics
    in_eval_instance: bool = False         # instance_norm eval: instance statistics
    nhwc_params: bool = False              # batch_norm: weight/bias indexed (i // HW) % C on NHWC memory


def _eps(mods, eps, dtype):
    return float(eps) if mods.eps is None else float(mods.eps(float(eps), dtype))


def _rstd(mods, var, eps, dtype, placement="inside"):
    with np.errstate(all="ignore"):
        if mods.rstd is not None:
            return np.asarray(mods.rstd(var, eps, dtype), dtype=np.float64)
        if placement == "outside":
            return 1.0 / (np.sqrt(var) + eps)
        return 1.0 / np.sqrt(var + eps)


def _xhat(x, mean, r):
    """(x - mean) * r in one new array (the same values, without a second array of x's size)."""
    out = np.subtract(x, mean)
    if np.result_type(out, r) != out.dtype or np.broadcast_shapes(out.shape, np.shape(r)) != out.shape:
        return out * r
    return np.multiply(out, r, out=out)


_BLOCK = 1 << 19      # elements of a block of rows (the diagnosis's sums and temporaries, a block at a time)


def _inplace(op, a, b, out):
    """op(a, b) written into ``out`` (a or b: a temporary the caller made and no longer needs) when it is a
    float64 array of the result's shape (the same values, without a new array of x's size); else op(a, b)."""
    if (isinstance(out, np.ndarray) and out.shape == np.broadcast_shapes(np.shape(a), np.shape(b))
            and out.dtype == np.float64 and np.result_type(a, b) == np.float64):
        return op(a, b, out=out)
    return op(a, b)


def _blocks(a, b):
    """(i0, i1) row ranges of about _BLOCK elements when a and b are float64 (m, n) arrays (None: not so)."""
    if not all(isinstance(t, np.ndarray) and t.dtype == np.float64 and t.ndim == 2 for t in (a, b)) \
            or a.shape != b.shape or a.shape[1] < 1:
        return None
    B = max(1, _BLOCK // a.shape[1])
    return [(i0, min(a.shape[0], i0 + B)) for i0 in range(0, a.shape[0], B)]


def _row_sums_of_product(g, xhat, mask):
    """sel_rows(mask, g * xhat).sum(axis=1, keepdims=True): a block of rows at a time when no mask applies
    (each row's pairwise sum is the same numbers in any block), without an array of x's size."""
    blocks = _blocks(g, xhat) if mask is None else None
    if blocks is None:
        return sel_rows(mask, g * xhat).sum(axis=1, keepdims=True)
    out = np.empty((g.shape[0], 1))
    for i0, i1 in blocks:
        out[i0:i1] = (g[i0:i1] * xhat[i0:i1]).sum(axis=1, keepdims=True)
    return out


def _minus_product(t, u, bm):
    """t - u * bm written into t (the caller's temporary), a block of rows at a time (the same operations
    on each element), when t and u are float64 (m, n) and bm (m, 1); else t - u * bm."""
    blocks = _blocks(t, u) if isinstance(bm, np.ndarray) and bm.shape == (t.shape[0], 1) else None
    if blocks is None:
        return _inplace(np.subtract, t, u * bm, t)
    for i0, i1 in blocks:
        t[i0:i1] -= u[i0:i1] * bm[i0:i1]
    return t


def _shared_xhat(x, mean, r):
    """(x - mean) * r, once per (x, statistics) within a ``refnorm._memo`` scope (the diagnosis)."""
    if not _memo.active():
        return _xhat(x, mean, r)
    return _memo.once("xhat", (x,), (mean.shape, mean.tobytes(), r.shape, r.tobytes()), lambda: _xhat(x, mean, r))


def _shared_pw(dy, xhat, mask, dweight_dy):
    """The dweight terms of the rows (dy, or dy * x_hat), once per (dy, x_hat) within a memo scope."""
    if dweight_dy or mask is not None:
        return sel_rows(mask, dy if dweight_dy else dy * xhat)
    return _memo.once("pw", (dy, xhat), (), lambda: dy * xhat)


def _block_sums(m, n, fill):
    """The column sums over m rows of terms (m, n) that ``fill(i0, i1, out)`` writes a block of rows at a time
    into ``out``: equal, bit for bit, to param_sum's sum of the whole terms (NumPy sums a column of the
    (n, m) view row after row; each block is added to the sum so far in the same order), in one scratch
    array (no array of the terms' size)."""
    B = max(1, _BLOCK // n)
    buf = np.empty((min(B, m) + 1, n))
    acc = None
    for i0 in range(0, m, B):
        i1 = min(m, i0 + B)
        t = buf[1:i1 - i0 + 1]
        fill(i0, i1, t)
        if acc is None:
            acc = np.add.reduce(t, axis=0)
        else:
            buf[0] = acc
            acc = np.add.reduce(buf[:i1 - i0 + 1], axis=0)
    return acc


def _pw_sums(x, mean, r, dy, keep=None):
    """dweight's row sums of dy * ((x - mean) * r) (x, dy (m, n) float64; mean, r (m, 1)), times ``keep``
    ((m, 1) 0/1: mods.rows_mask's rows, as _kept_rows applies it) when given (_block_sums); once per (x,
    dy, statistics, kept rows) within a ``refnorm._memo`` scope."""
    m, n = x.shape

    def fill(i0, i1, t):
        np.subtract(x[i0:i1], mean[i0:i1], out=t)
        np.multiply(t, r[i0:i1], out=t)
        np.multiply(dy[i0:i1], t, out=t)
        if keep is not None:
            np.multiply(t, keep[i0:i1], out=t)
    return _memo.once("pw_sums", (x, dy), (mean.tobytes(), r.tobytes(), None if keep is None else keep.tobytes()),
                      lambda: _block_sums(m, n, fill), keep=16)


def _pb_sums(dy, keep):
    """dbias's row sums of dy * keep (the kept rows, _block_sums)."""
    def fill(i0, i1, t):
        np.multiply(dy[i0:i1], keep[i0:i1], out=t)
    return _block_sums(dy.shape[0], dy.shape[1], fill)


def _fused(x, mean, r, dy, mods, mask, dev):
    """Whether dweight's (and dbias's) row sums can be taken by _pw_sums (no x_hat of x's size)."""
    pt = mods.round_at
    return (dy is not None and dev is None and mask is None and not mods.dweight_dy and not mods.xhat_in_d
            and mods.dweight is None and not (pt is not None and pt[0] == "xhat")
            and x.ndim == 2 and x.shape[0] >= 1 and x.shape[1] >= 2 and np.shape(dy) == x.shape
            and np.shape(mean) == np.shape(r) == (x.shape[0], 1)
            and all(a.dtype == np.float64 for a in (x, np.asarray(dy), mean, r)))


def rows(x, *, mods, dtype, centered, eps, w=None, b=None, dy=None, w_bwd="same", placement="inside",
         mask=None, params_only=False):
    """The forward (and given dy, backward terms) of rows x (m, n); w, b broadcastable to (m, n).
    ``params_only``: the statistics and the parameter-gradient terms only (no y, no dx)."""
    m, n = x.shape
    eps = _eps(mods, eps, dtype)
    placement = mods.placement or placement
    centered = centered if mods.centered is None else mods.centered
    dev = None
    with np.errstate(all="ignore"):
        if centered:
            st = (mods.stats or two_pass)(x, dtype)
            mean, var = st[0], st[1]
            if len(st) > 2:                     # the statistic also fixes the deviations x - mean used
                dev = np.asarray(st[2], dtype=np.float64)
        elif mods.rms_centered:
            mean = np.zeros((m, 1))
            var = two_pass(x, dtype)[1]
        else:
            mean = np.zeros((m, 1))
            var = (mods.ms or mean_square)(x, dtype)
        var = np.asarray(var, dtype=np.float64)
        mean = np.asarray(mean, dtype=np.float64)
        if mods.unbiased and n > 1:
            var = var * (n / (n - 1))
        r = _rstd(mods, var, eps, dtype, placement)
        pt = mods.round_at
        if pt is not None and pt[0] == "mean" and centered:
            mean = round_point(mean, pt[1], pt[2], dtype)
        if pt is not None and pt[0] == "rstd":
            r = round_point(r, pt[1], pt[2], dtype)
        if params_only and dy is not None and mods.dweight_dy:
            # dweight summed from dy alone: x_hat is not needed (its value is in no array returned)
            return {"mean": mean, "rstd": r, "var": var, "pw": sel_rows(mask, dy), "pb": sel_rows(mask, dy)}
        if params_only and _fused(x, mean, r, dy, mods, mask, dev):
            # dweight's (and, with kept rows, dbias's) terms summed a block at a time (the values param_sum
            # gives; see _block_sums)
            keep = None if mods.rows_mask is None else np.asarray(mods.rows_mask(m, n))[:, None].astype(float)
            out = {"mean": mean, "rstd": r, "var": var, "pw_sums": _pw_sums(x, mean, r, dy, keep), "pb": dy}
            if keep is not None:
                out["pb_sums"] = _pb_sums(dy, keep)
            return out
        xhat = _shared_xhat(x, mean, r) if dev is None else dev * r
        if pt is not None and pt[0] == "xhat":
            xhat = round_point(xhat, pt[1], pt[2], dtype)
        if mods.xhat_in_d:
            xhat = to_d(in_w(xhat, dtype), dtype).astype(np.float64)
        if params_only:
            return {"mean": mean, "rstd": r, "var": var, "xhat": xhat,
                    **({} if dy is None else {"pw": _shared_pw(dy, xhat, mask, mods.dweight_dy),
                                              "pb": sel_rows(mask, dy)})}
        if mods.y is not None:
            y = np.asarray(mods.y(xhat, w, b, dtype), dtype=np.float64)
        else:
            y = xhat if w is None else xhat * w
            if b is not None:
                y = y + b if y is xhat else _inplace(np.add, y, b, y)    # (x_hat may be shared: never written)
        res = {"y": y, "mean": mean, "rstd": r, "var": var, "xhat": xhat}
        if dy is None:
            return res
        wb = w if isinstance(w_bwd, str) else w_bwd
        g = dy if wb is None else dy * wb
        cnt = n if mask is None else mask.sum(axis=1, keepdims=True)
        if centered:
            a = sel_rows(mask, g).sum(axis=1, keepdims=True) / cnt
            bm = _row_sums_of_product(g, xhat, mask) / (cnt - 1 if mods.unbiased_bwd and n > 1 else cnt)
            if mods.bwd_rel[2]:
                # the mean's gradient: the sum of per-value rounded terms (c |B| mean|x_hat|), and, where the
                # deviations are taken from a rounded mean (mean(x_hat) != 0), autograd's exact derivative,
                # r (g - mean(g) - (x_hat - mean(x_hat)) B), differs from the formula's by r mean(x_hat) B
                xs = sel_rows(mask, xhat)
                c = mods.bwd_rel[2]
                a = a + np.sign(c) * np.abs(bm) * (abs(c) * np.abs(xs).sum(axis=1, keepdims=True) / cnt
                                                   + np.abs(xs.sum(axis=1, keepdims=True) / cnt))
            a = 0.0 if mods.no_A else a * (1.0 + mods.bwd_rel[0])
            bm = bm * (1.0 + mods.bwd_rel[1])
            if placement == "outside":          # d/dx of (x - mean) / (sqrt(var) + eps): u = (x - mean) / sqrt(var)
                s = np.sqrt(var)
                u = np.where(s == 0, 0.0, xhat / np.where(s == 0, 1.0, r * s))
            else:
                u = xhat
            # r * (g - a [- u * bm]): the same operations, in one array of x's size (_inplace)
            # g - a, into g when g is this function's own product (dy * wb: not read again), else a new array
            t = g - a if g is dy else _inplace(np.subtract, g, a, g)
            if not mods.no_B:
                t = _minus_product(t, u, bm)
            dx = _inplace(np.multiply, r, t, t)
        else:
            bm = _row_sums_of_product(g, xhat, None) / max(n, 1) * (1.0 + mods.bwd_rel[1])
            if placement == "outside":
                rms = np.sqrt(var)
                u = np.where(rms == 0, 0.0, x / np.where(rms == 0, 1.0, rms))
            else:
                u = xhat
            t = u * bm
            t = _inplace(np.subtract, g, t, t)
            dx = _inplace(np.multiply, r, t, t)
        if mods.nan_if_flat:
            dx = np.where(var == 0, np.nan, dx)
        res.update(dx=dx, pw=_shared_pw(dy, xhat, mask, mods.dweight_dy), pb=sel_rows(mask, dy))
    return res


def sel_rows(mask, t):
    """The terms t of the rows (columns) ``mask`` selects (None: all)."""
    return t if mask is None else t * mask


def _kept_rows(mods, T):
    """The terms T (m, n) of the rows that reach dweight/dbias (``mods.rows_mask``; all: T itself)."""
    return T if mods.rows_mask is None else T * mods.rows_mask(*T.shape)[:, None].astype(float)


def param_sum(mods, T, keep, shape, dtype, *, is_weight):
    """Sum the x-shaped terms T over every axis but ``keep`` (float64, or ``mods.dweight``)."""
    other = tuple(i for i in range(T.ndim) if i not in keep)
    Tt = np.transpose(T, tuple(keep) + other)
    Tt = Tt.reshape(int(np.prod([T.shape[i] for i in keep], dtype=np.int64)), -1)
    if mods.dweight is not None and is_weight:
        return np.asarray(mods.dweight(Tt, dtype), dtype=np.float64).reshape(shape)
    return Tt.sum(axis=1).reshape(shape)


def _row_sum(mods, T, shape, lead, ns, dtype, *, is_weight):
    """layer_norm's and rms_norm's parameter gradient: the terms T (rows, n) of the kept rows summed over
    the leading axes; the plain sum once per T within a memo scope."""
    def make():
        return param_sum(mods, _kept_rows(mods, T).reshape(shape), tuple(range(len(lead), len(shape))), ns, dtype,
                         is_weight=is_weight)
    if mods.rows_mask is not None or (is_weight and mods.dweight is not None):
        return make()
    return _memo.once("rowsum", (T,), shape, make)


def perm_rows(x, axes):
    """Rows (m, n) of x reducing over ``axes`` (kept axes first, C order), and the inverse map."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    t = np.ascontiguousarray(np.transpose(x, perm))
    m = int(np.prod([x.shape[i] for i in keep], dtype=np.int64))
    tshape = t.shape

    def back(r):
        return np.transpose(np.asarray(r).reshape(tshape), np.argsort(perm))
    return t.reshape(m, -1), back


def _bcast_rows(p, x, axes):
    return perm_rows(np.broadcast_to(p, x.shape), axes)[0]


def _f(v):
    return None if v is None else np.asarray(v, dtype=np.float64)


def _ns(config):
    ns = config["normalized_shape"]
    return (int(ns),) if np.ndim(ns) == 0 else tuple(int(s) for s in ns)


# ----------------------------------------------------------------------------------- layer_norm
def layer_norm(inputs, config, cotangents, dtype, mods=Mods(), state=None, training=True, params_only=False):
    """``params_only``: dweight and dbias only (the diagnosis of a case whose other arrays fit: rows())."""
    x, w, b = _f(inputs["x"]), _f(inputs.get("weight")), _f(inputs.get("bias"))
    ns = _ns(config)
    wf = None if (mods.drop_weight_without_bias and b is None) else w
    if wf is not None and mods.offset != "ignored":
        wf = wf + float(config.get("weight_offset", 0.0))     # zero-centred gamma: weight + weight_offset
    k = len(ns)
    lead = x.shape[:x.ndim - k]
    m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
    dy = _f((cotangents or {}).get("y"))
    r = rows(x.reshape(m, n), mods=mods, dtype=dtype, centered=True, eps=config.get("eps", 1e-5),
             w=None if wf is None else wf.reshape(1, n), b=None if b is None else b.reshape(1, n),
             dy=None if dy is None else dy.reshape(m, n), params_only=params_only)
    stat = lead + (1,) * k
    outs, grads = {"mean": r["mean"].reshape(stat), "rstd": r["rstd"].reshape(stat)}, {}
    if not params_only:
        y = r["y"]
        if mods.repeat_rows and m > mods.repeat_rows:
            y = y[np.arange(m) % mods.repeat_rows]
        outs["y"] = y.reshape(x.shape)
    if dy is not None:
        if not params_only:
            grads["x"] = r["dx"].reshape(x.shape)
        if w is not None:
            grads["weight"] = (r["pw_sums"].reshape(ns) if "pw_sums" in r
                               else _row_sum(mods, r["pw"], x.shape, lead, ns, dtype, is_weight=True))
        if b is not None:
            grads["bias"] = (r["pb_sums"].reshape(ns) if "pb_sums" in r
                             else _row_sum(mods, r["pb"], x.shape, lead, ns, dtype, is_weight=False))
    return Result(outs, grads, {})


# ------------------------------------------------------------------------------------- rms_norm
def rms_norm(inputs, config, cotangents, dtype, mods=Mods(), state=None, training=True, params_only=False):
    """``params_only``: as layer_norm's."""
    x, w = _f(inputs["x"]), _f(inputs.get("weight"))
    ns = _ns(config)
    eps = config.get("eps", None)
    eps = default_eps(dtype) if eps is None else float(eps)           # eps=None: by the case dtype (torch's rule)
    placement = mods.placement or config.get("eps_placement", "inside")
    off = float(config.get("weight_offset", 0.0))
    k = len(ns)
    lead = x.shape[:x.ndim - k]
    m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
    w_eff = w_bwd = None
    if w is not None:
        w_eff = w.reshape(1, n) + (0.0 if mods.offset == "ignored" else off)
        if mods.offset == "rounded":
            w_eff = to_d(in_w(w_eff, dtype), dtype).astype(np.float64)
        w_bwd = w.reshape(1, n) if mods.offset == "dx_plain" else w_eff
    dy = _f((cotangents or {}).get("y"))
    r = rows(x.reshape(m, n), mods=mods, dtype=dtype, centered=False, eps=eps, placement=placement, w=w_eff,
             dy=None if dy is None else dy.reshape(m, n), w_bwd=w_bwd, params_only=params_only)
    outs, grads = {"rstd": r["rstd"].reshape(lead + (1,) * k)}, {}
    if not params_only:
        outs["y"] = r["y"].reshape(x.shape)
    if dy is not None:
        if not params_only:
            grads["x"] = r["dx"].reshape(x.shape)
        if w is not None:
            grads["weight"] = (r["pw_sums"].reshape(ns) if "pw_sums" in r
                               else _row_sum(mods, r["pw"], x.shape, lead, ns, dtype, is_weight=True))
    return Result(outs, grads, {})


def _nhwc_read(a):
    """a's channels-last (NHWC) memory read back with a's own (NCHW) shape and indexing."""
    return np.moveaxis(a, 1, -1).reshape(-1).reshape(a.shape) if a.ndim > 2 else a


# ----------------------------------------------------------------------------------- group_norm
def group_norm(inputs, config, cotangents, dtype, mods=Mods(), state=None, training=True):
    G = int(config["num_groups"])
    eps = config.get("eps", 1e-5)
    x, w, b = _f(inputs["x"]), _f(inputs.get("weight")), _f(inputs.get("bias"))
    N, C = x.shape[:2]
    S = int(np.prod(x.shape[2:], dtype=np.int64))
    pb = (1, C) + (1,) * (x.ndim - 2)
    wf = None if w is None else np.broadcast_to(w.reshape(pb), x.shape)
    bf = None if b is None else np.broadcast_to(b.reshape(pb), x.shape)
    dy = _f((cotangents or {}).get("y"))
    if mods.dy_nhwc and dy is not None:
        dy = _nhwc_read(dy)
    outs = {}
    if mods.gn1_as_ln and G == 1:
        xr, back = perm_rows(x, (1,))
        r = rows(xr, mods=mods, dtype=dtype, centered=True, eps=eps,
                 w=None if w is None else _bcast_rows(wf, x, (1,)), b=None if b is None else _bcast_rows(bf, x, (1,)),
                 dy=None if dy is None else perm_rows(dy, (1,))[0])
        outs["y"] = back(r["y"])        # its statistics are per (n, position), not group_norm's (N, G): left out
    else:
        view = (N * G, (C // G) * S)
        mask = None
        if mods.bwd_first_row and x.ndim >= 4:
            first = np.zeros(x.shape, dtype=bool)
            first[(slice(None), slice(None)) + (0,) * (x.ndim - 3) + (slice(None),)] = True
            mask = first.reshape(view).astype(float)
        r = rows(x.reshape(view), mods=mods, dtype=dtype, centered=True, eps=eps,
                 w=None if w is None else wf.reshape(view), b=None if b is None else bf.reshape(view),
                 dy=None if dy is None else dy.reshape(view), mask=mask)

        def back(t):
            return np.asarray(t).reshape(x.shape)
        outs = {"y": back(r["y"]), "mean": r["mean"].reshape(N, G), "rstd": r["rstd"].reshape(N, G)}
    grads = {}
    if dy is not None:
        grads["x"] = back(r["dx"])
        for name, p, t in (("weight", w, "pw"), ("bias", b, "pb")):
            if p is None:
                continue
            T = back(r[t])
            if mods.dweight_nhwc and t == "pw":
                T = _nhwc_read(T)
            g = param_sum(mods, T, (1,), (C,), dtype, is_weight=t == "pw")
            if mods.param_mean_spatial:
                g = g / S
            if mods.wave64 and N > 128 and C > 32:
                c = np.arange(C)
                partner = np.where(c % 64 < 32, c + 32, c)
                g = g + np.where((partner < C) & (partner != c), g[np.minimum(partner, C - 1)], 0)
            grads[name] = g
    return Result(outs, grads, {})


# ----------------------------------------------------------------------- batch_norm, instance_norm
def batch_norm(inputs, config, cotangents, dtype, mods=Mods(), state=None, training=True):
    return _bn_in("batch_norm", inputs, config, cotangents, dtype, mods, state, training)


def instance_norm(inputs, config, cotangents, dtype, mods=Mods(), state=None, training=True):
    return _bn_in("instance_norm", inputs, config, cotangents, dtype, mods, state, training)


def _nhwc_params(shape, w, b):
    """F01: the per-channel parameters as an NHWC epilogue indexing them with the NCHW formula sees them."""
    N, C = shape[:2]
    S = int(np.prod(shape[2:], dtype=np.int64))
    size = int(np.prod(shape, dtype=np.int64))
    ch = (np.arange(size) // S) % C                      # NCHW channel formula on NHWC memory

    def as_x(v):                                        # NHWC memory -> NCHW-shaped x
        return np.moveaxis(v.reshape((N,) + tuple(shape[2:]) + (C,)), -1, 1)
    return (None if w is None else as_x(w[ch])), (None if b is None else as_x(b[ch]))


def _bn_in(op, inputs, config, cotangents, dtype, mods, state, training):
    eps = config.get("eps", 1e-5)
    x, w, b = _f(inputs["x"]), _f(inputs.get("weight")), _f(inputs.get("bias"))
    N, C = x.shape[:2]
    pb = (1, C) + (1,) * (x.ndim - 2)
    st = state or {}
    tracking = st.get("running_mean") is not None
    rm, rv = _f(st.get("running_mean")), _f(st.get("running_var"))
    nbt = np.asarray(st.get("num_batches_tracked", 0), dtype=np.int64)
    dy = _f((cotangents or {}).get("y"))
    axes = (0,) + tuple(range(2, x.ndim)) if op == "batch_norm" else tuple(range(2, x.ndim))
    use_batch = training or not tracking or (op == "instance_norm" and mods.in_eval_instance)
    wf = None if w is None else np.broadcast_to(w.reshape(pb), x.shape)
    bf = None if b is None else np.broadcast_to(b.reshape(pb), x.shape)
    if mods.nhwc_params and op == "batch_norm" and x.ndim > 2:
        wf, bf = _nhwc_params(x.shape, w, b)
    stat_shape = (C,) if op == "batch_norm" else (N, C)
    new = {}
    if use_batch:
        xr, back = perm_rows(x, axes)
        n = xr.shape[1]
        r = rows(xr, mods=mods, dtype=dtype, centered=True, eps=eps,
                 w=None if wf is None else _bcast_rows(wf, x, axes), b=None if bf is None else _bcast_rows(bf, x, axes),
                 dy=None if dy is None else perm_rows(dy, axes)[0])
        outs = {"y": back(r["y"]), "mean": r["mean"].reshape(stat_shape), "rstd": r["rstd"].reshape(stat_shape)}
        res = {k: None if dy is None else back(r[k]) for k in ("dx", "pw", "pb")}
        if tracking and training:
            var = r["var"].reshape(stat_shape)
            if mods.unbiased and n > 1:                 # the tracked value is the true batch variance
                var = var / (n / (n - 1))
            new = _running(op, config, mods, rm, rv, nbt, r["mean"].reshape(stat_shape), var, n)
    else:
        e = _eps(mods, eps, dtype)
        rs = _rstd(mods, rv, e, dtype)
        xhat = (x - rm.reshape(pb)) * rs.reshape(pb)
        y = xhat if wf is None else xhat * wf
        if bf is not None:
            y = y + bf
        res = {"dx": None, "pw": None, "pb": None}
        if dy is not None:
            res = {"dx": (dy if wf is None else dy * wf) * rs.reshape(pb), "pw": dy * xhat, "pb": dy}
            if mods.eval_bwd_batch and op == "batch_norm":
                xr, back = perm_rows(x, axes)
                r = rows(xr, mods=mods, dtype=dtype, centered=True, eps=eps,
                         w=None if wf is None else _bcast_rows(wf, x, axes), dy=perm_rows(dy, axes)[0])
                res = {k: back(r[k]) for k in ("dx", "pw", "pb")}
        outs = {"y": y, "mean": np.broadcast_to(rm, stat_shape).copy(),
                "rstd": np.broadcast_to(rs.reshape(C), stat_shape).copy()}
    if tracking and not new:
        new = {"running_mean": rm.copy(), "running_var": rv.copy(), "num_batches_tracked": nbt.copy()}
    grads = {}
    if dy is not None:
        grads["x"] = res["dx"]
        for name, p, t in (("weight", w, "pw"), ("bias", b, "pb")):
            if p is not None:
                g = param_sum(mods, res[t], (1,), (C,), dtype, is_weight=t == "pw")
                if mods.param_mean_spatial:
                    g = g / int(np.prod(x.shape[2:], dtype=np.int64))
                grads[name] = g
    return Result(outs, grads, new)


def _running(op, config, mods, rm, rv, nbt, mean, var, n):
    """The new state after one training call; mean, var: the biased batch statistics."""
    new_nbt = np.asarray(nbt + 1 if (op == "batch_norm" and not mods.nbt_frozen) else nbt.copy())
    if n == 0:
        return {"running_mean": rm.copy(), "running_var": rv.copy(), "num_batches_tracked": new_nbt}
    if op == "batch_norm":
        conv = config.get("convention", "torch")
        mom = config.get("momentum", MOMENTUM[conv])
        if conv == "onnx":
            keep, take = float(mom), 1.0 - float(mom)
            bessel = n > 1 and bool(mods.running_bessel)
        else:
            p = 1.0 / float(nbt + 1) if mom is None else float(mom)
            keep, take = 1.0 - p, p
            bessel = n > 1 and (mods.running_bessel is not False)
    else:
        mom = config.get("momentum", 0.1)
        p = 0.0 if mom is None else float(mom)
        keep, take = 1.0 - p, p
        bessel = n > 1 and (mods.running_bessel is not False)
    if mods.momentum_flip:
        keep, take = take, keep
    v = var * (n / (n - 1)) if bessel else var
    new_rm = keep * rm + take * mean
    new_rv = rv.copy() if mods.rv_frozen else keep * rv + take * v
    if op == "instance_norm":
        new_rm = new_rm.mean(axis=0)
        new_rv = rv.copy() if mods.rv_frozen else new_rv.mean(axis=0)
    return {"running_mean": new_rm, "running_var": new_rv, "num_batches_tracked": new_nbt}


OPS = {"layer_norm": layer_norm, "rms_norm": rms_norm, "group_norm": group_norm, "batch_norm": batch_norm,
       "instance_norm": instance_norm}
