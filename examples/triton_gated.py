"""Triton gated RMSNorm / LayerNorm (Mamba2's RMSNormGated, the layernorm_gated kernels), forward and backward,
with ``group_size``, checked by refnorm with or without a GPU.

    refnorm check --backend examples.triton_gated:gated_norm_backend --ops gated_norm

One program per row; the row is loaded as a tile of (ngroups, group_size) values, so each group's statistics
are a sum over the tile's second axis: s = silu(z) (sigmoid from exp(-|z|), no overflow), v = x * s (or x with
norm_before_gate), rstd = 1 / sqrt(mean_group((v - mean)^2) + eps) (rms: no mean), y = (vhat * w + b) (* s).
float32 internals (float64 for float64 tensors), one rounding per output; the backward recomputes s and vhat
from x, z and the saved per-group mean and rstd, and writes per-row float32 partials of dweight and dbias that
torch sums. The interpreter and bfloat16: as examples/triton_norms.py (whose _load, _store and _rsqrt these
kernels use), bfloat16 tensors travel as their bit patterns and are rounded to nearest even by hand.

``bug="bwd_group_size"`` plants the bug of Mamba's layernorm_gated backward with ngroups > 1: the backward's
reductions mean(g) and mean(g * vhat) run over the whole row (group size = hidden) while the forward normalized
each group; tests/test_triton_examples.py shows refnorm fails it and names it (R-bwdgroup).
"""
from __future__ import annotations

import numpy as np
import torch

from examples.triton_norms import DEVICE, KINDS, _bits, _load, _rsqrt, _store   # sets TRITON_INTERPRET first

import triton                                            # noqa: E402
import triton.language as tl                             # noqa: E402

from refnorm.check.backends import from_torch            # noqa: E402

BUGS = (None, "bwd_group_size")
SIGNATURE = ("x", "z", "weight", "bias")
OPTIONS = ("norm", "norm_before_gate", "group_size", "eps")


@triton.jit
def _gate(z):
    """(silu(z), silu'(z)): sigmoid from e = exp(-|z|) <= 1, so nothing overflows."""
    e = tl.exp(-tl.abs(z))
    big, small = 1.0 / (1.0 + e), e / (1.0 + e)
    sig = tl.where(z >= 0, big, small)
    rest = tl.where(z >= 0, small, big)                  # 1 - sigmoid(z), without cancellation
    return z * sig, sig * (1.0 + z * rest)


@triton.jit
def _tile(row, H, K, G, BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr):
    """(offsets, columns, mask) of row ``row`` as a (BLOCK_G, BLOCK_K) tile of its groups."""
    g = tl.arange(0, BLOCK_G)
    k = tl.arange(0, BLOCK_K)
    cols = g[:, None] * K + k[None, :]
    m = (g < G)[:, None] & (k < K)[None, :]
    return row * H + cols, cols, m


@triton.jit
def _fwd(X, Z, W, B, Y, MEAN, RSTD, EPS, H, K, G, RMS: tl.constexpr, NBG: tl.constexpr, HAS_B: tl.constexpr,
         KIND: tl.constexpr, PKIND: tl.constexpr, F64: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    offs, cols, m = _tile(row, H, K, G, BLOCK_G, BLOCK_K)
    eps = tl.load(EPS)
    x = _load(X, offs, m, KIND, F64)
    s, _ = _gate(_load(Z, offs, m, KIND, F64))
    v = x if NBG else x * s
    if RMS:
        mean = tl.zeros([BLOCK_G], dtype=eps.dtype)
    else:
        mean = tl.sum(v, axis=1) / K
    d = tl.where(m, v - mean[:, None], 0.0)
    rstd = _rsqrt(tl.sum(d * d, axis=1) / K + eps, F64)
    n = d * rstd[:, None] * _load(W, cols, m, PKIND, F64)
    if HAS_B:
        n += _load(B, cols, m, PKIND, F64)
    if NBG:
        n = n * s
    _store(Y, offs, n, m, KIND)
    gm = tl.arange(0, BLOCK_G) < G
    tl.store(MEAN + row * G + tl.arange(0, BLOCK_G), mean, mask=gm)
    tl.store(RSTD + row * G + tl.arange(0, BLOCK_G), rstd, mask=gm)


@triton.jit
def _bwd(X, Z, W, B, DY, DX, DZ, DWP, DBP, MEAN, RSTD, H, K, G, RMS: tl.constexpr, NBG: tl.constexpr,
         HAS_B: tl.constexpr, KIND: tl.constexpr, PKIND: tl.constexpr, F64: tl.constexpr, BUG_GROUP: tl.constexpr,
         BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    offs, cols, m = _tile(row, H, K, G, BLOCK_G, BLOCK_K)
    gm = tl.arange(0, BLOCK_G) < G
    mean = tl.load(MEAN + row * G + tl.arange(0, BLOCK_G), mask=gm, other=0.0)
    rstd = tl.load(RSTD + row * G + tl.arange(0, BLOCK_G), mask=gm, other=0.0)
    x = _load(X, offs, m, KIND, F64)
    z = _load(Z, offs, m, KIND, F64)
    s, ds = _gate(z)
    w = _load(W, cols, m, PKIND, F64)
    v = x if NBG else x * s
    vhat = tl.where(m, (v - mean[:, None]) * rstd[:, None], 0.0)
    dy = _load(DY, offs, m, KIND, F64)
    dn = dy * s if NBG else dy
    tl.store(DWP + offs, dn * vhat, mask=m)              # per-row partials, summed by torch
    if HAS_B:
        tl.store(DBP + offs, dn, mask=m)
    g = tl.where(m, dn * w, 0.0)
    if BUG_GROUP:                                        # planted: the reductions over the whole row
        c1 = tl.sum(tl.sum(g, axis=1), axis=0) / (G * K) + tl.zeros([BLOCK_G], dtype=rstd.dtype)
        c2 = tl.sum(tl.sum(g * vhat, axis=1), axis=0) / (G * K) + tl.zeros([BLOCK_G], dtype=rstd.dtype)
    else:
        c1 = tl.sum(g, axis=1) / K
        c2 = tl.sum(g * vhat, axis=1) / K
    if RMS:
        dv = rstd[:, None] * (g - vhat * c2[:, None])
    else:
        dv = rstd[:, None] * (g - c1[:, None] - vhat * c2[:, None])
    if NBG:
        n = vhat * w
        if HAS_B:
            n += _load(B, cols, m, PKIND, F64)
        _store(DX, offs, dv, m, KIND)
        _store(DZ, offs, dy * n * ds, m, KIND)
    else:
        _store(DX, offs, dv * s, m, KIND)
        _store(DZ, offs, dv * x * ds, m, KIND)


def _launch_shape(H, K):
    return triton.next_power_of_2(H // K), triton.next_power_of_2(K)


class _Gated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, z, weight, bias, norm, norm_before_gate, group_size, eps, bug):
        H = int(x.shape[-1])
        K = H if group_size is None else int(group_size)
        if H % K:
            raise ValueError(f"group_size={group_size} does not divide the hidden dimension {H}")
        M = x.numel() // H if H else 0
        x2, z2 = x.contiguous().reshape(M, H), z.contiguous().reshape(M, H)
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        mean = torch.empty(M * (H // K), dtype=acc, device=x.device)
        rstd = torch.empty_like(mean)
        y = torch.empty_like(x2)
        bg, bk = _launch_shape(H, K)
        meta = dict(RMS=norm == "rms_norm", NBG=bool(norm_before_gate), HAS_B=bias is not None, KIND=KINDS[x.dtype],
                    PKIND=KINDS[weight.dtype], F64=acc == torch.float64, BLOCK_G=bg, BLOCK_K=bk)
        if M:
            with np.errstate(all="ignore"):              # the interpreter's NumPy casts may overflow, as on a GPU
                _fwd[(M,)](_bits(x2), _bits(z2), _bits(weight), _bits(bias), _bits(y), mean, rstd,
                           torch.tensor([eps], dtype=acc, device=x.device), H, K, H // K, **meta)
        ctx.save_for_backward(x2, z2, weight, bias, mean, rstd)
        ctx.meta, ctx.shape, ctx.K, ctx.bug = meta, x.shape, K, bug
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, z2, weight, bias, mean, rstd = ctx.saved_tensors
        M, H = x2.shape
        K = ctx.K
        acc = mean.dtype
        dx, dz = torch.empty_like(x2), torch.empty_like(z2)
        dwp = torch.zeros((M, H), dtype=acc, device=x2.device)
        dbp = torch.zeros((M, H), dtype=acc, device=x2.device) if bias is not None else None
        if M:
            with np.errstate(all="ignore"):
                _bwd[(M,)](_bits(x2), _bits(z2), _bits(weight), _bits(bias), _bits(dy.contiguous().reshape(M, H)),
                           _bits(dx), _bits(dz), dwp, dbp, mean, rstd, H, K, H // K,
                           BUG_GROUP=ctx.bug == "bwd_group_size", **ctx.meta)
        dw = dwp.sum(0).to(weight.dtype)
        db = None if bias is None else dbp.sum(0).to(bias.dtype)
        return dx.reshape(ctx.shape), dz.reshape(ctx.shape), dw, db, None, None, None, None, None


def gated_norm(x, z, weight, bias=None, *, norm="rms_norm", norm_before_gate=False, group_size=None, eps=1e-5,
               bug=None):
    """Triton gated norm (refnorm's gated_norm): norm(x * silu(z)) (Mamba2's default) or norm(x) * silu(z),
    rms or layer norm over groups of ``group_size`` values of the last axis (None: one group), * weight + bias."""
    if norm not in ("rms_norm", "layer_norm"):
        raise ValueError(f"norm={norm!r}; expected 'rms_norm' or 'layer_norm'")
    if bug not in BUGS:
        raise ValueError(f"bug={bug!r}; expected one of {BUGS}")
    return _Gated.apply(x, z, weight, bias, norm, norm_before_gate, group_size, float(eps), bug)


# the refnorm backend, one line: strict = float32 internals, one rounding per output
gated_norm_backend = from_torch(gated_norm, "gated_norm", contract="strict", device=DEVICE, name="triton-gated_norm",
                                signature=SIGNATURE, options=OPTIONS)


def buggy(bug):
    """The backend with a planted ``bug`` (module docstring)."""
    def kernel(x, z, weight, bias=None, **options):
        return gated_norm(x, z, weight, bias, bug=bug, **options)
    return from_torch(kernel, "gated_norm", contract="strict", device=DEVICE, name=f"triton-gated_norm-{bug}",
                      signature=SIGNATURE, options=OPTIONS)
