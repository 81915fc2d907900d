"""Triton kernels that round on purpose, each declared by its precise contract (refnorm/check/contracts.py;
docs/tolerances.md, "Contracts as rounding points"), checked by refnorm with or without a GPU:

- ``llama_rms_norm``: RMSNorm in the "Llama" casting mode of Liger-Kernel / Unsloth: x_hat = x * rstd is
  rounded to the input dtype before it is multiplied by the weight, and in the backward dweight's terms
  dy * x_hat are formed from that rounded x_hat and rounded to the input dtype (the partial sums over the
  rows in float32). Contract: ``rounds xhat=input, dy_xhat=input``.
- ``prenorm_add_norm``: a fused residual add + LayerNorm/RMSNorm (flash-attention's layer_norm_fn, prenorm):
  s = x + residual in float32, normalized as such, stored as residual_out in the input dtype, and the
  backward recomputes x_hat from that stored residual_out (with the forward's mean and rstd). Contract:
  ``rounds residual_out=input; recompute xhat=residual_out``.

    refnorm check --backend examples.triton_contracts:llama_rms_norm_backend --ops rms_norm
    refnorm check --backend examples.triton_contracts:prenorm_add_norm_backend --ops add_norm

``bug=`` plants a defect that the precise contract catches (tests/test_triton_contracts.py), and that
``epi_d``, the only preset admitting the correct kernels, let through: llama_rms_norm "rstd_f16" (rstd held
in float16), "dw_f16" (the dweight partials accumulated in float16); prenorm_add_norm "sum_in_d" (the
residual sum rounded to the input dtype before the forward normalizes it).

The tiles, loads, stores and the bfloat16 handling are examples/triton_norms.py's (its docstring: the
interpreter's bfloat16 conversions truncate, so bfloat16 is rounded here with integer arithmetic).
"""
from __future__ import annotations

import numpy as np
import torch

from examples import triton_norms as TN                  # sets TRITON_INTERPRET=1 without a GPU first
from examples.triton_norms import KINDS, _bits, _flat, _load, _rows, _rsqrt, _store, _tile, _tiles
import triton                                            # noqa: E402
import triton.language as tl                             # noqa: E402

from refnorm.check.backends import from_torch            # noqa: E402

DEVICE = TN.DEVICE
LLAMA = "rounds xhat=input, dy_xhat=input"
PRENORM = "rounds residual_out=input; recompute xhat=residual_out"
LLAMA_BUGS = (None, "rstd_f16", "dw_f16")
PRENORM_BUGS = (None, "sum_in_d")


def _no_float64(call):
    return "these kernels compute in float32: no float64" if call.dtype == "float64" else None


def _prenorm_supports(call):
    """No float64; and no eps below 1e-6 on 16-bit cases: x_hat recomputed from the stored (rounded) residual
    of a near-constant row errs by rstd * u_d |s|, which at eps 1e-12 (rstd 1e6) overflows float16 to inf:
    the declared arithmetic itself gives no usable gradient there (flash-attention's kernel alike)."""
    if call.dtype in ("float16", "bfloat16") and float(call.config.get("eps", 1e-5)) < 1e-6:
        return (f"eps={call.config.get('eps')}: x_hat recomputed from the {call.dtype} residual_out overflows on "
                "near-constant rows (rstd up to 1e6); this kernel takes eps >= 1e-6 in 16-bit dtypes")
    return _no_float64(call)


@triton.jit
def _round(v, KIND: tl.constexpr):
    """float32 ``v`` rounded once, to nearest even, to the precision of KIND (1 float16, 2 bfloat16 by
    integer arithmetic, 0 unchanged), kept in float32."""
    if KIND == 2:
        u = v.to(tl.uint32, bitcast=True)
        r = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        r = tl.where(v != v, u, r)
        out = r.to(tl.float32, bitcast=True)
    elif KIND == 1:
        out = v.to(tl.float16).to(tl.float32)
    else:
        out = v
    return out


@triton.jit
def _llama_fwd(X, W, Y, RSTD, eps, M, N, HAS_W: tl.constexpr, KIND: tl.constexpr, PKIND: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BUG_RSTD: tl.constexpr):
    """rstd in float32 (planted BUG_RSTD: held in float16); y = round_d(x * rstd) * w, stored in d."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    ss = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        m = rmask[:, None] & (cols < N)[None, :]
        x = _load(X, rows[:, None] * N + cols[None, :], m, KIND, False)
        ss += tl.sum(x * x, axis=1)
    rstd = _rsqrt(ss / N + eps, False)
    if BUG_RSTD:
        rstd = _round(rstd, 1)
    tl.store(RSTD + rows, rstd, mask=rmask)
    for start in range(0, N, BLOCK_N):
        cols, cmask, m, offs = _tile(rows, rmask, start, N, BLOCK_N)
        y = _round(_load(X, offs, m, KIND, False) * rstd[:, None], KIND)      # x_hat in the input dtype
        if HAS_W:
            y = y * _load(W, cols, cmask, PKIND, False)[None, :]
        _store(Y, offs, y, m, KIND)


@triton.jit
def _llama_bwd(X, W, DY, DX, RSTD, DWP, M, N, HAS_W: tl.constexpr, KIND: tl.constexpr, PKIND: tl.constexpr,
               PART_KIND: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dx = (g - x_hat mean(g x_hat)) rstd in float32 (g = dy w); program p adds sum(round_d(dy * round_d(x_hat)))
    of its row blocks into row p of DWP (PART_KIND: float32, or float16 for the planted bug)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for rb in range(pid, tl.cdiv(M, BLOCK_M), nprog):
        rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
        rmask = rows < M
        rstd = tl.load(RSTD + rows, mask=rmask, other=0.0)
        c1 = tl.zeros([BLOCK_M], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            cols, cmask, m, offs = _tile(rows, rmask, start, N, BLOCK_N)
            g = _load(DY, offs, m, KIND, False)
            if HAS_W:
                g = g * _load(W, cols, cmask, PKIND, False)[None, :]
            c1 += tl.sum(g * _load(X, offs, m, KIND, False) * rstd[:, None], axis=1)
        c1 = c1 / N
        for start in range(0, N, BLOCK_N):
            cols, cmask, m, offs = _tile(rows, rmask, start, N, BLOCK_N)
            x = _load(X, offs, m, KIND, False)
            dy = _load(DY, offs, m, KIND, False)
            g = dy
            if HAS_W:
                g = g * _load(W, cols, cmask, PKIND, False)[None, :]
            xhat = x * rstd[:, None]
            _store(DX, offs, (g - xhat * c1[:, None]) * rstd[:, None], m, KIND)
            if HAS_W:
                t = tl.where(m, _round(dy * _round(xhat, KIND), KIND), 0.0)    # dy * x_hat in the input dtype
                p = pid * N + cols
                _store(DWP, p, _load(DWP, p, cmask, PART_KIND, False) + tl.sum(t, axis=0), cmask, PART_KIND)


class _LlamaRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, normalized_shape, eps, bug):
        if bug not in LLAMA_BUGS:
            raise ValueError(f"bug={bug!r}; expected one of {LLAMA_BUGS}")
        M, N = _rows(x, normalized_shape)
        x2 = x.contiguous().reshape(M, N)
        w = _flat(weight, N)
        y = torch.empty_like(x2)
        rstd = torch.empty(M, dtype=torch.float32, device=x.device)
        bm, bn = _tiles(M, N)
        if M and N:
            with np.errstate(all="ignore"):
                _llama_fwd[(triton.cdiv(M, bm),)](_bits(x2), _bits(w), _bits(y), rstd, float(eps), M, N,
                                                  HAS_W=w is not None, KIND=KINDS[x.dtype],
                                                  PKIND=KINDS[(w if w is not None else x2).dtype], BLOCK_M=bm,
                                                  BLOCK_N=bn, BUG_RSTD=bug == "rstd_f16")
        ctx.save_for_backward(x2, w, rstd)
        ctx.meta = (x.shape, bug, None if weight is None else weight.shape)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, rstd = ctx.saved_tensors
        shape, bug, wshape = ctx.meta
        M, N = x2.shape
        dy2 = dy.contiguous().reshape(M, N)
        dx = torch.empty_like(x2)
        bm, bn = _tiles(M, N)
        part_dt = torch.float16 if bug == "dw_f16" else torch.float32
        nprog = max(1, min(triton.cdiv(M, bm), 16))
        if bug == "dw_f16":             # one program adding row by row into its float16 partial (Liger's dW_row
            bm, nprog = 1, 1            # loop, each program of a GPU taking n_rows / n_SM rows)
        dwp = torch.zeros((nprog, N), dtype=part_dt, device=x2.device) if w is not None else None
        if M and N:
            with np.errstate(all="ignore"):
                _llama_bwd[(nprog,)](_bits(x2), _bits(w), _bits(dy2), _bits(dx), rstd, dwp, M, N,
                                     HAS_W=w is not None, KIND=KINDS[x2.dtype],
                                     PKIND=KINDS[(w if w is not None else x2).dtype], PART_KIND=KINDS[part_dt],
                                     BLOCK_M=bm, BLOCK_N=bn)
        dw = None if w is None else dwp.to(torch.float32).sum(0).to(w.dtype).reshape(wshape)
        return dx.reshape(shape), dw, None, None, None


def llama_rms_norm(x, weight=None, *, normalized_shape, eps=None, bug=None):
    """RMSNorm with Llama casting (module docstring); eps=None: float32's machine epsilon (torch's default)."""
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    return _LlamaRMSNorm.apply(x, weight, normalized_shape, eps, bug)


class _PrenormAddNorm(torch.autograd.Function):
    """flash-attention's prenorm add+norm: the backward recomputes x_hat from the stored residual_out."""

    @staticmethod
    def forward(ctx, x, residual, weight, bias, normalized_shape, eps, rms, bug):
        if bug not in PRENORM_BUGS:
            raise ValueError(f"bug={bug!r}; expected one of {PRENORM_BUGS}")
        M, N = _rows(x, normalized_shape)
        x2 = x.contiguous().reshape(M, N)
        r2 = None if residual is None else residual.contiguous().reshape(M, N)
        s = torch.empty((M, N), dtype=torch.float32, device=x.device)
        res_out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M * N:
            TN._add[(triton.cdiv(M * N, 1024),)](
                _bits(x2), _bits(r2), s, _bits(res_out), M * N, KIND=KINDS[x.dtype],
                RKIND=KINDS[(r2 if r2 is not None else x2).dtype], ROKIND=KINDS[x.dtype], F64=False,
                HAS_R=r2 is not None, BUG_SUM_IN_D=bug == "sum_in_d", BLOCK=1024)
        w, b = _flat(weight, N), _flat(bias, N)
        y = torch.empty_like(x2)
        mean, rstd = TN._forward(s, w, b, y, eps, rms, None, 0)          # normalizes the float32 sum
        ctx.save_for_backward(res_out, w, b, mean, rstd)                  # keeps the rounded residual only
        ctx.meta = (x.shape, x.dtype, None if residual is None else residual.dtype, rms,
                    None if weight is None else weight.shape, None if bias is None else bias.shape)
        return y.reshape(x.shape), res_out.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy, dres_out):
        res_out, w, b, mean, rstd = ctx.saved_tensors
        shape, x_dt, r_dt, rms, wshape, bshape = ctx.meta
        ds = torch.empty(res_out.shape, dtype=torch.float32, device=res_out.device)
        dw, db = TN._backward(res_out, w, b, dy.contiguous().reshape(res_out.shape), ds, mean, rstd, rms, None,
                              KINDS[res_out.dtype])                      # x_hat recomputed from residual_out
        if dres_out is not None:
            ds = ds + dres_out.reshape(ds.shape).to(torch.float32)
        dx = ds.to(x_dt).reshape(shape)
        dr = None if r_dt is None else ds.to(r_dt).reshape(shape)
        dw = None if w is None else dw.to(w.dtype).reshape(wshape)
        db = None if b is None else db.to(b.dtype).reshape(bshape)
        return dx, dr, dw, db, None, None, None, None


def prenorm_add_norm(x, residual=None, weight=None, bias=None, *, normalized_shape, eps=1e-5, norm="layer_norm",
                     prenorm=True, bug=None):
    """Residual add + LayerNorm/RMSNorm returning (y, residual_out), residual_out in x's dtype (module
    docstring); ``prenorm`` as examples/triton_norms.add_norm's."""
    if norm not in ("layer_norm", "rms_norm"):
        raise ValueError(f"norm={norm!r}; expected 'layer_norm' or 'rms_norm'")
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    return _PrenormAddNorm.apply(x, residual, weight, bias, normalized_shape, eps, norm == "rms_norm", bug)


ADD_OPTIONS = ("normalized_shape", "eps", "norm", "prenorm")


def llama_backend(contract=LLAMA, bug=None):
    """The Llama RMSNorm as a refnorm backend under ``contract`` (the precise one by default)."""
    def kernel(x, weight=None, *, normalized_shape, eps=None):
        return llama_rms_norm(x, weight, normalized_shape=normalized_shape, eps=eps, bug=bug)
    return from_torch(kernel, "rms_norm", contract=contract, device=DEVICE, signature=("x", "weight"),
                      options=("normalized_shape", "eps"), supports=_no_float64,
                      name=f"triton-llama-rms_norm{'-' + bug if bug else ''}")


def prenorm_backend(contract=PRENORM, bug=None):
    """The prenorm add+norm as a refnorm backend under ``contract`` (the precise one by default)."""
    def kernel(x, residual=None, weight=None, bias=None, **options):
        return prenorm_add_norm(x, residual, weight, bias, bug=bug, **options)
    return from_torch(kernel, "add_norm", contract=contract, device=DEVICE, signature=TN.ADD_SIGNATURE,
                      options=ADD_OPTIONS, supports=_prenorm_supports,
                      name=f"triton-prenorm-add_norm{'-' + bug if bug else ''}")


llama_rms_norm_backend = llama_backend()
prenorm_add_norm_backend = prenorm_backend()
