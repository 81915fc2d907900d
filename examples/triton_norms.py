"""Triton LayerNorm, RMSNorm and residual add + norm, forward and backward, checked by refnorm with or without
a GPU.

The kernels are what a user writes: tiles of BLOCK_M rows x BLOCK_N columns, float32 internals (float64
for float64 tensors), two-pass statistics (the mean, then the centred mean square), the parameter
gradients as per-program partial sums in float32, added by torch at the end. Wrapped in
``torch.autograd.Function``s, then made refnorm backends in one line each (``from_torch``):

    refnorm check --backend examples.triton_norms:layer_norm_backend --ops layer_norm --timeout 900
    refnorm check --backend examples.triton_norms:rms_norm_backend --ops rms_norm --timeout 900
    refnorm check --backend examples.triton_norms:add_norm_backend --ops add_norm

(``--timeout``: interpreted, the golden 65537-row case takes longer than the default 60 s per case.)

Without a CUDA device the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set below when
torch sees no GPU and the variable is unset; it must be set before triton is first imported) on CPU
tensors, so CI checks them on a CPU machine; on a GPU the same code runs compiled.

bfloat16 and the interpreter. triton 3.9.0's interpreter keeps bfloat16 values as 16-bit integers and
converts float32 to bfloat16 by TRUNCATION (for ``.to(tl.bfloat16)`` and for stores into bfloat16
pointers, even with ``fp_downcast_rounding="rtne"``), where a GPU rounds to nearest even. A kernel
that relies on that conversion is off by up to one bfloat16 ulp, always towards zero, and refnorm
rightly fails it (the bias test sees the one-sided error). So these kernels never convert to or from
bfloat16 themselves: bfloat16 tensors are passed as their int16 bit patterns, widened exactly
(``bits << 16``) and rounded to nearest even with integer arithmetic (``_store``), which gives the same
bits in the interpreter and compiled. float16 conversions are correct in both.

``bug=`` plants a defect for the tests (tests/test_triton_examples.py shows refnorm catches each):
"masked_variance": the masked lanes of the last column block enter the variance (layer_norm: x - mean
is not re-masked, so each padded lane adds mean^2; rms_norm: the mean square divides by the padded
width); "dw_input_dtype": the per-program partial weight (and bias) gradients are accumulated in the
input dtype (float16/bfloat16) instead of float32. add_norm: "sum_in_d": x + residual rounded to the
activation dtype before it is normalized; "no_dresidual_out": the backward drops the gradient that flows
through the returned residual.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

if not torch.cuda.is_available():
    # triton reads TRITON_INTERPRET when it decorates a function, its own library functions (tl.sum,
    # tl.cdiv, ...) included, i.e. when triton is first imported: set it before that (or export it)
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("no CUDA device, and triton was imported before TRITON_INTERPRET=1 was set: its "
                           "kernels cannot run; run with TRITON_INTERPRET=1 in the environment")
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton                                            # noqa: E402
import triton.language as tl                             # noqa: E402

from refnorm.check.backends import from_torch            # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BUGS = (None, "masked_variance", "dw_input_dtype")
ADD_BUGS = (None, "sum_in_d", "no_dresidual_out")
ADD_SIGNATURE = ("x", "residual", "weight", "bias")
ADD_OPTIONS = ("normalized_shape", "eps", "norm", "prenorm", "residual_in_fp32")
KINDS = {torch.float64: 0, torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


@triton.jit
def _load(ptr, offs, mask, KIND: tl.constexpr, F64: tl.constexpr):
    """Values at ``ptr + offs`` widened exactly to the accumulation dtype; KIND 2: bfloat16 bit patterns
    (an int16 view), widened by hand (the interpreter's bfloat16 conversions are not to be relied on)."""
    v = tl.load(ptr + offs, mask=mask, other=0)
    if KIND == 2:
        v = (v.to(tl.int32) << 16).to(tl.float32, bitcast=True)
    if F64:
        r = v.to(tl.float64)
    else:
        r = v.to(tl.float32)
    return r


@triton.jit
def _store(ptr, offs, v, mask, KIND: tl.constexpr):
    """Store ``v`` (the accumulation dtype) rounded ONCE to nearest even in the pointer's dtype; KIND 2:
    bfloat16 rounded with integer arithmetic and stored as its bit pattern (NaN kept quiet)."""
    if KIND == 2:
        u = v.to(tl.float32).to(tl.uint32, bitcast=True)
        r = u + 0x7FFF + ((u >> 16) & 1)
        r = tl.where(v != v, u | 0x400000, r)
        tl.store(ptr + offs, (r >> 16).to(tl.uint16).to(tl.int16, bitcast=True), mask=mask)
    elif KIND == 1:
        tl.store(ptr + offs, v.to(tl.float16), mask=mask)
    else:
        tl.store(ptr + offs, v, mask=mask)


@triton.jit
def _tile(rows, rmask, start, N, BLOCK_N: tl.constexpr):
    """The (rows, BLOCK_N) tile of an (M, N) row-major array from column ``start``: (cols, the column mask,
    the tile's mask, the element offsets)."""
    cols = start + tl.arange(0, BLOCK_N)
    cmask = cols < N
    return cols, cmask, rmask[:, None] & cmask[None, :], rows[:, None] * N + cols[None, :]


@triton.jit
def _rsqrt(v, F64: tl.constexpr):
    """1 / sqrt(v) with a correctly rounded square root (tl.sqrt is approximate for float32 on a GPU)."""
    if F64:
        r = 1.0 / tl.sqrt(v)
    else:
        r = 1.0 / tl.sqrt_rn(v)
    return r


@triton.jit
def _fwd(X, W, B, Y, MEAN, RSTD, EPS, M, N, RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
         KIND: tl.constexpr, PKIND: tl.constexpr, F64: tl.constexpr, BLOCK_M: tl.constexpr,
         BLOCK_N: tl.constexpr, BUG_MASKED: tl.constexpr, XKIND: tl.constexpr):
    """Statistics and y per block of rows; X in XKIND (the input's kind, or 0: the float32 sum of add_norm),
    Y stored in KIND."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    eps = tl.load(EPS)
    acc = tl.zeros([BLOCK_M], dtype=eps.dtype)
    mean = tl.zeros([BLOCK_M], dtype=eps.dtype)
    if not RMS:
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            m = rmask[:, None] & (cols < N)[None, :]
            acc += tl.sum(_load(X, rows[:, None] * N + cols[None, :], m, XKIND, F64), axis=1)
        mean = acc / N
    ss = tl.zeros([BLOCK_M], dtype=eps.dtype)
    lanes = 0
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        m = rmask[:, None] & (cols < N)[None, :]
        xc = _load(X, rows[:, None] * N + cols[None, :], m, XKIND, F64) - mean[:, None]
        if not BUG_MASKED:
            xc = tl.where(m, xc, 0.0)             # the padded lanes hold -mean: keep them out
        ss += tl.sum(xc * xc, axis=1)
        lanes += BLOCK_N
    if BUG_MASKED and RMS:
        rstd = _rsqrt(ss / lanes + eps, F64)        # planted: the padded width as the count
    else:
        rstd = _rsqrt(ss / N + eps, F64)
    tl.store(MEAN + rows, mean, mask=rmask)
    tl.store(RSTD + rows, rstd, mask=rmask)
    for start in range(0, N, BLOCK_N):
        cols, cmask, m, offs = _tile(rows, rmask, start, N, BLOCK_N)
        y = (_load(X, offs, m, XKIND, F64) - mean[:, None]) * rstd[:, None]
        if HAS_W:
            y = y * _load(W, cols, cmask, PKIND, F64)[None, :]
        if HAS_B:
            y = y + _load(B, cols, cmask, PKIND, F64)[None, :]
        _store(Y, offs, y, m, KIND)


@triton.jit
def _bwd_tile(X, W, DY, rows, rmask, start, mean, rstd, N, HAS_W: tl.constexpr, KIND: tl.constexpr,
              PKIND: tl.constexpr, F64: tl.constexpr, XKIND: tl.constexpr, BLOCK_N: tl.constexpr):
    """One (rows, BLOCK_N) tile of _bwd from column ``start``: (cols, cmask, mask, offsets, xhat, dy,
    g = dy * w), both of _bwd's passes over a row reading it the same way."""
    cols, cmask, m, offs = _tile(rows, rmask, start, N, BLOCK_N)
    xhat = tl.where(m, (_load(X, offs, m, XKIND, F64) - mean[:, None]) * rstd[:, None], 0.0)
    dy = _load(DY, offs, m, KIND, F64)
    g = dy
    if HAS_W:
        g = g * _load(W, cols, cmask, PKIND, F64)[None, :]
    return cols, cmask, m, offs, xhat, dy, g


@triton.jit
def _bwd(X, W, DY, DX, MEAN, RSTD, DWP, DBP, M, N, RMS: tl.constexpr, HAS_W: tl.constexpr,
         HAS_B: tl.constexpr, KIND: tl.constexpr, PKIND: tl.constexpr, F64: tl.constexpr,
         PART_KIND: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, XKIND: tl.constexpr,
         DXKIND: tl.constexpr):
    """dx per row; program p adds sum(dy * xhat) and sum(dy) of its row blocks into row p of the partial
    buffers DWP / DBP (PART_KIND: their dtype; float32 unless the planted bug). X in XKIND, DY in KIND,
    DX stored in DXKIND (add_norm: 0, the float32 gradient of the sum, finished by torch)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for rb in range(pid, tl.cdiv(M, BLOCK_M), nprog):
        rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
        rmask = rows < M
        mean = tl.load(MEAN + rows, mask=rmask, other=0.0)
        rstd = tl.load(RSTD + rows, mask=rmask, other=0.0)
        c1 = tl.zeros([BLOCK_M], dtype=mean.dtype)       # sum(g * xhat)
        c2 = tl.zeros([BLOCK_M], dtype=mean.dtype)       # sum(g)
        for start in range(0, N, BLOCK_N):
            cols, cmask, m, offs, xhat, dy, g = _bwd_tile(X, W, DY, rows, rmask, start, mean, rstd, N, HAS_W, KIND,
                                                          PKIND, F64, XKIND, BLOCK_N)
            c1 += tl.sum(g * xhat, axis=1)
            c2 += tl.sum(g, axis=1)
        c1 = c1 / N
        c2 = c2 / N
        for start in range(0, N, BLOCK_N):
            cols, cmask, m, offs, xhat, dy, g = _bwd_tile(X, W, DY, rows, rmask, start, mean, rstd, N, HAS_W, KIND,
                                                          PKIND, F64, XKIND, BLOCK_N)
            if RMS:
                dx = (g - xhat * c1[:, None]) * rstd[:, None]
            else:
                dx = (g - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
            _store(DX, offs, dx, m, DXKIND)
            if HAS_W:
                p = pid * N + cols
                part = _load(DWP, p, cmask, PART_KIND, F64) + tl.sum(dy * xhat, axis=0)
                _store(DWP, p, part, cmask, PART_KIND)
            if HAS_B:
                p = pid * N + cols
                part = _load(DBP, p, cmask, PART_KIND, F64) + tl.sum(dy, axis=0)
                _store(DBP, p, part, cmask, PART_KIND)


def _bits(t):
    """What the kernels get for ``t``: bfloat16 as its int16 bit pattern (see the module docstring)."""
    return None if t is None else (t.view(torch.int16) if t.dtype == torch.bfloat16 else t)


def _tiles(M, N):
    block_n = min(triton.next_power_of_2(max(N, 1)), 1024)
    block_m = max(1, min(64, 4096 // block_n))
    return block_m, block_n


def _forward(x2, w, b, y, eps, rms, bug, xkind):
    """Launch _fwd on the (M, N) rows ``x2`` (kind ``xkind``) into ``y``; returns (mean, rstd) in the
    accumulation dtype."""
    M, N = x2.shape
    acc = torch.float64 if x2.dtype == torch.float64 else torch.float32
    mean = torch.empty(M, dtype=acc, device=x2.device)
    rstd = torch.empty(M, dtype=acc, device=x2.device)
    pk = KINDS[(w if w is not None else b if b is not None else y).dtype]
    bm, bn = _tiles(M, N)
    if M and N:
        with np.errstate(all="ignore"):              # the interpreter's NumPy casts may overflow, as on a GPU
            _fwd[(triton.cdiv(M, bm),)](
                _bits(x2), _bits(w), _bits(b), _bits(y), mean, rstd, torch.tensor([eps], dtype=acc, device=x2.device),
                M, N, RMS=rms, HAS_W=w is not None, HAS_B=b is not None, KIND=KINDS[y.dtype], PKIND=pk,
                F64=acc == torch.float64, BLOCK_M=bm, BLOCK_N=bn, BUG_MASKED=bug == "masked_variance",
                XKIND=xkind)
    return mean, rstd


def _backward(x2, w, b, dy2, dx, mean, rstd, rms, bug, xkind):
    """Launch _bwd: dx (its own dtype) of the rows ``x2``; returns (dweight, dbias) flat, in the accumulation
    dtype, summed by torch from the per-program float32 partials (the planted bug: input-dtype partials)."""
    M, N = x2.shape
    pk = KINDS[(w if w is not None else b if b is not None else dy2).dtype]
    bm, bn = _tiles(M, N)
    nprog = max(1, min(triton.cdiv(M, bm), 16))
    acc = mean.dtype
    part_dt = dy2.dtype if bug == "dw_input_dtype" else acc      # planted: partials in the input dtype
    dwp = torch.zeros((nprog, N), dtype=part_dt, device=x2.device) if w is not None else None
    dbp = torch.zeros((nprog, N), dtype=part_dt, device=x2.device) if b is not None else None
    if M and N:
        with np.errstate(all="ignore"):
            _bwd[(nprog,)](_bits(x2), _bits(w), _bits(dy2), _bits(dx), mean, rstd, _bits(dwp), _bits(dbp), M, N,
                           RMS=rms, HAS_W=w is not None, HAS_B=b is not None, KIND=KINDS[dy2.dtype], PKIND=pk,
                           F64=acc == torch.float64, PART_KIND=KINDS[part_dt], BLOCK_M=bm, BLOCK_N=bn,
                           XKIND=xkind, DXKIND=KINDS[dx.dtype])
    return (None if w is None else dwp.to(acc).sum(0)), (None if b is None else dbp.to(acc).sum(0))


def _rows(x, normalized_shape):
    ns = tuple(normalized_shape)
    if tuple(x.shape[x.dim() - len(ns):]) != ns:
        raise ValueError(f"normalized_shape {ns} is not the trailing shape of x {tuple(x.shape)}")
    N = int(np.prod(ns, dtype=np.int64))
    return (x.numel() // N if N else 0), N


def _flat(t, N):
    return None if t is None else t.contiguous().reshape(N)


class _Norm(torch.autograd.Function):
    """y = (x - mean) * rstd * weight + bias over the trailing ``normalized_shape`` (rms: mean = 0, no bias)."""

    @staticmethod
    def forward(ctx, x, weight, bias, normalized_shape, eps, rms, bug):
        if bug not in BUGS:
            raise ValueError(f"bug={bug!r}; expected one of {BUGS}")
        M, N = _rows(x, normalized_shape)
        x2 = x.contiguous().reshape(M, N)
        w, b = _flat(weight, N), _flat(bias, N)
        y = torch.empty_like(x2)
        mean, rstd = _forward(x2, w, b, y, eps, rms, bug, KINDS[x.dtype])
        ctx.save_for_backward(x2, w, b, mean, rstd)
        ctx.meta = (x.shape, rms, bug, None if weight is None else weight.shape, None if bias is None else bias.shape)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, b, mean, rstd = ctx.saved_tensors
        shape, rms, bug, wshape, bshape = ctx.meta
        dx = torch.empty_like(x2)
        dw, db = _backward(x2, w, b, dy.contiguous().reshape(x2.shape), dx, mean, rstd, rms, bug, KINDS[x2.dtype])
        dw = None if w is None else dw.to(w.dtype).reshape(wshape)
        db = None if b is None else db.to(b.dtype).reshape(bshape)
        return dx.reshape(shape), dw, db, None, None, None, None


@triton.jit
def _add(X, R, S, RO, n, KIND: tl.constexpr, RKIND: tl.constexpr, ROKIND: tl.constexpr, F64: tl.constexpr,
         HAS_R: tl.constexpr, BUG_SUM_IN_D: tl.constexpr, BLOCK: tl.constexpr):
    """s = x + residual in the accumulation dtype (both widened exactly, one rounding), stored as S (the
    row kernels' input) and as the new residual RO rounded once to its dtype (ROKIND). Planted
    BUG_SUM_IN_D: the sum rounded to the activation dtype before it is normalized."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = _load(X, offs, m, KIND, F64)
    if HAS_R:
        s = s + _load(R, offs, m, RKIND, F64)
    if BUG_SUM_IN_D:
        _store(RO, offs, s, m, KIND)                 # round to the activation dtype, then read it back
        s = _load(RO, offs, m, KIND, F64)
    _store(S, offs, s, m, 0)
    _store(RO, offs, s, m, ROKIND)


class _AddNorm(torch.autograd.Function):
    """residual_out = x + residual; y = norm(residual_out) * weight + bias (flash-attention's layer_norm_fn
    without dropout and rowscale). The sum is held in float32 (float64 for float64 tensors) and normalized
    as such; residual_out is it rounded once to the residual's dtype (float32 with residual_in_fp32)."""

    @staticmethod
    def forward(ctx, x, residual, weight, bias, normalized_shape, eps, rms, residual_in_fp32, bug):
        if bug not in ADD_BUGS:
            raise ValueError(f"bug={bug!r}; expected one of {ADD_BUGS}")
        M, N = _rows(x, normalized_shape)
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        x2 = x.contiguous().reshape(M, N)
        r2 = None if residual is None else residual.contiguous().reshape(M, N)
        out_dt = acc if residual_in_fp32 else (residual.dtype if residual is not None else x.dtype)
        s = torch.empty((M, N), dtype=acc, device=x.device)
        res_out = torch.empty((M, N), dtype=out_dt, device=x.device)
        n = M * N
        if n:
            block = 1024
            _add[(triton.cdiv(n, block),)](
                _bits(x2), _bits(r2), s, _bits(res_out), n, KIND=KINDS[x.dtype],
                RKIND=KINDS[(r2 if r2 is not None else x2).dtype], ROKIND=KINDS[out_dt], F64=acc == torch.float64,
                HAS_R=r2 is not None, BUG_SUM_IN_D=bug == "sum_in_d", BLOCK=block)
        w, b = _flat(weight, N), _flat(bias, N)
        y = torch.empty_like(x2)
        mean, rstd = _forward(s, w, b, y, eps, rms, None, 0)
        ctx.save_for_backward(s, w, b, mean, rstd)
        ctx.meta = (x.shape, x.dtype, None if residual is None else residual.dtype, rms, bug,
                    None if weight is None else weight.shape, None if bias is None else bias.shape)
        return y.reshape(x.shape), res_out.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy, dres_out):
        s, w, b, mean, rstd = ctx.saved_tensors
        shape, x_dt, r_dt, rms, bug, wshape, bshape = ctx.meta
        ds = torch.empty_like(s)                     # d loss / d s in the accumulation dtype
        dw, db = _backward(s, w, b, dy.contiguous().reshape(s.shape), ds, mean, rstd, rms, None, 0)
        if dres_out is not None and bug != "no_dresidual_out":
            ds = ds + dres_out.reshape(s.shape).to(s.dtype)   # the gradient through the returned residual
        dx = ds.to(x_dt).reshape(shape)
        dr = None if r_dt is None else ds.to(r_dt).reshape(shape)
        dw = None if w is None else dw.to(w.dtype).reshape(wshape)
        db = None if b is None else db.to(b.dtype).reshape(bshape)
        return dx, dr, dw, db, None, None, None, None, None


def layer_norm(x, weight=None, bias=None, *, normalized_shape, eps=1e-5, bug=None):
    """Triton LayerNorm over the trailing ``normalized_shape`` (refnorm's layer_norm, torch's F.layer_norm)."""
    return _Norm.apply(x, weight, bias, normalized_shape, float(eps), False, bug)


def _default_eps(x) -> float:
    """eps=None as torch's F.rms_norm (and refnorm): float32's machine epsilon, float64's for float64 x."""
    return float(np.finfo(np.float64 if x.dtype == torch.float64 else np.float32).eps)


def rms_norm(x, weight=None, *, normalized_shape, eps=None, bug=None):
    """Triton RMSNorm: x / sqrt(mean(x^2) + eps) * weight; eps=None is refnorm's and torch's F.rms_norm's
    default: the machine epsilon of the compute dtype (float32's, float64's for float64 x)."""
    eps = _default_eps(x) if eps is None else float(eps)
    return _Norm.apply(x, weight, None, normalized_shape, eps, True, bug)


def add_norm(x, residual=None, weight=None, bias=None, *, normalized_shape, eps=1e-5, norm="layer_norm",
             prenorm=True, residual_in_fp32=False, bug=None):
    """Triton residual add + LayerNorm/RMSNorm: returns (y, residual_out) (refnorm's add_norm with
    dropout_p=0, no rowscale, weight_offset=0). ``prenorm`` says whether the model uses residual_out; the
    kernel computes the same either way, and when the loss uses residual_out its gradient joins the
    residual's (autograd passes it to backward). eps=None (rms_norm): the compute dtype's machine epsilon."""
    if norm not in ("layer_norm", "rms_norm"):
        raise ValueError(f"norm={norm!r}; expected 'layer_norm' or 'rms_norm'")
    eps = _default_eps(x) if eps is None else float(eps)
    return _AddNorm.apply(x, residual, weight, bias, normalized_shape, eps, norm == "rms_norm",
                          bool(residual_in_fp32), bug)


# refnorm backends, one line each: strict = float32 internals, one rounding per output
layer_norm_backend = from_torch(layer_norm, "layer_norm", contract="strict", device=DEVICE, name="triton-layer_norm")
rms_norm_backend = from_torch(rms_norm, "rms_norm", contract="strict", device=DEVICE, name="triton-rms_norm")
# prenorm: both outputs are returned whatever its value (from_torch lets residual_out's cotangent flow
# only when prenorm=True)
add_norm_backend = from_torch(add_norm, "add_norm", contract="strict", device=DEVICE, name="triton-add_norm",
                              signature=ADD_SIGNATURE,
                              options=ADD_OPTIONS)


def buggy(op, bug):
    """The backend of ``op`` ("layer_norm" | "rms_norm" | "add_norm") with a planted ``bug`` (module docstring)."""
    if op == "add_norm":
        def fused(x, residual=None, weight=None, bias=None, **options):
            return add_norm(x, residual, weight, bias, bug=bug, **options)
        return from_torch(fused, op, contract="strict", device=DEVICE, name=f"triton-{op}-{bug}",
                          signature=ADD_SIGNATURE, options=ADD_OPTIONS)
    fn = layer_norm if op == "layer_norm" else rms_norm

    def kernel(x, weight=None, bias=None, *, normalized_shape, eps=None):
        kw = {"eps": eps} if op == "rms_norm" else {"eps": eps, "bias": bias}
        return fn(x, weight, normalized_shape=normalized_shape, bug=bug, **kw)
    sig = ("x", "weight", "bias") if op == "layer_norm" else ("x", "weight")
    return from_torch(kernel, op, contract="strict", device=DEVICE, name=f"triton-{op}-{bug}", signature=sig,
                      options=("normalized_shape", "eps"))
