"""A normalization with a BLOCK-SCALED quantized output, optionally after a fused residual add: per-group
fp8 (DeepSeek/vLLM ``per_token_group_quant_fp8``, TransformerEngine's blockwise fp8), MXFP8 (the OCP
Microscaling spec) and NVFP4 (NVIDIA's two-level fp4). Forward only. docs/block_quant.md.

    s    = x + residual                       (``residual`` given: the fused add; residual_out = s)
    y    = layer_norm(s; weight, bias, eps)  or  rms_norm(s; weight, eps)         (norm=..., float64)
    blocks: the hidden axis (the last; normalized_shape = [H]) cut into nb = ceil(H / B) blocks of B
            consecutive values; a last, partial block holds the H mod B remaining values (its amax is
            that of those values: the same as a block padded with zeros, which cannot raise an amax)
    amax_j = max |y| over block j                                      (the ``amax`` output, per block)

Formats (``format``; B = ``block_size``; Q = ``element_dtype``, qmax its largest value; every scale
is a DECODE scale: y ~ round_Q(q) * scale):

    fp8_group  B any (default 128), Q float8_e4m3fn (default) or float8_e5m2, a float32 scale per block:
               v = max(amax_j / qmax, min_scale)                   (min_scale >= 0, default 0: no floor)
               scale_rule "exact": S = v (rounded once to float32 by the kernel)
               scale_rule "pow2":  S = 2^ceil(log2 v), the power of two at or above v (round-UP of the
                                   exponent, so that amax_j / S <= qmax: no value saturates); S = 0 for v = 0
    mxfp8      B = 32, Q float8_e4m3fn (emax 8, default) or float8_e5m2 (emax 15), an E8M0 scale
               (a power of two 2^k, k in [-127, 127]):
               scale_rule "floor" (the OCP MX spec, default): v = amax_j / 2^emax, S = 2^floor(log2 v):
                                   values up to 2^(emax+1) (1 - eps) can result, those above qmax saturate
               scale_rule "round_up" (NVIDIA's kernels, TransformerEngine's cvt.rp): v = amax_j / qmax,
                                   S = 2^ceil(log2 v): nothing saturates
               k clamped to [-127, 127]; an all-zero block (v = 0) has the lowest scale 2^-127
    nvfp4      B = 16, Q float4_e2m1fn (qmax 6), an E4M3 block scale and a float32 tensor scale
               (TransformerEngine's recipe): g = max |y| over the whole tensor,
               S_enc = min(448 * 6 / g, FLT_MAX) (1 where g = 0), tensor_scale = 1 / S_enc = g / 2688;
               or static: S_enc = the input ``global_scale`` (vLLM's input_global_scale, 2688 / a calibrated
               amax: block scales above 448 saturate there, and with them the block's values),
               v = amax_j / 6 * S_enc, S_b = round_e4m3(v) (to nearest even, saturating at 448),
               S = S_b * tensor_scale (the decode scale of the block)

    q = clip(y / S, -qmax, qmax)              the value the quantizer rounds; q = 0 where S = 0 (a block
                                              whose y are all 0, or an NVFP4 block scale rounded to 0)

Outputs (every one float64; the value before its final rounding, as every refnorm output):
    q            x.shape; ``quantize(q, element_dtype)`` gives the quantized tensor. Judged in Q by the
                 rounding-interval test (docs/tolerances.md "Quantized outputs").
    scale        x.shape[:-1] + (nb,), UNSWIZZLED (row-major, one per block): the PRE-ROUNDING scale v
                 of the rule (fp8_group exact: S itself); ``encode_scale`` gives the stored scales (float32,
                 float8_e8m0fnu, float8_e4m3fn). Judged by its rule's own rounding: float32 to nearest;
                 pow2 and E8M0 by the directed rounding the rule promises (a power of two whose
                 rounding interval, [S, 2S) for floor and (S/2, S] for round-up, comes within the bound
                 of v); E4M3 to nearest.
    amax         x.shape[:-1] + (nb,): amax_j; judged in float32.
    tensor_scale (1,) * x.ndim: nvfp4's g / 2688 (1 where g = 0); 1 for the one-level formats; float32.
                 Optional for a backend (q and scale already see it).
    residual_out x.shape (with ``residual``): s, judged in the case dtype, or float32 with
                 residual_in_fp32=True on a float16/bfloat16 case (add_norm's contract).

NaN/Inf in a row: the blocks they reach (and every block of the tensor for nvfp4's g) are NaN.
This module is the fast path (the blocks as a padded reshape); refnorm/specs/norm_quant_block.py is the
plain specification (a loop over the blocks); both give the same bits.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import REQUIRED, Forward, NormSpec
from ._rounding import float32_odd
from . import _common as C
from . import layer_norm as _ln
from . import rms_norm as _rms

NAME = "norm_quant_block"
NORMS = ("rms_norm", "layer_norm")
FORMATS = ("fp8_group", "mxfp8", "nvfp4")
# element dtypes: NumPy dtype, qmax (the saturation point), emax (the exponent of the largest power of two)
ELEMENTS = {
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), 448.0, 8),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), 57344.0, 15),
    "float4_e2m1fn": (np.dtype(ml_dtypes.float4_e2m1fn), 6.0, 2),
}
FORMAT_ELEMENTS = {"fp8_group": ("float8_e4m3fn", "float8_e5m2"), "mxfp8": ("float8_e4m3fn", "float8_e5m2"),
                   "nvfp4": ("float4_e2m1fn",)}
FORMAT_RULES = {"fp8_group": ("exact", "pow2"), "mxfp8": ("floor", "round_up"), "nvfp4": ("e4m3",)}
FORMAT_BLOCK = {"fp8_group": 128, "mxfp8": 32, "nvfp4": 16}       # the default (mxfp8, nvfp4: the only) size
E8M0_EXP = (-127, 127)
F32_POW2_EXP = (-149, 127)          # float32's powers of two (the subnormal 2^-149 included)
E4M3_MAX = 448.0
NVFP4_GLOBAL = 448.0 * 6.0          # fp8_max * fp4_max = 2688
FLT_MAX = float(np.finfo(np.float32).max)


def resolve(config: dict) -> dict:
    """The config with block_size, element_dtype, scale_rule and min_scale resolved from ``format`` (None:
    the format's default) and checked; the argument checks of the options (ConfigError naming the value)."""
    c = dict(config)
    fmt = C.check_choice(NAME, "format", c.get("format", "fp8_group"), FORMATS)
    B = c.get("block_size")
    if B is None:
        B = FORMAT_BLOCK[fmt]
    B = C.check_int(NAME, "block_size", B, minimum=1)
    if fmt != "fp8_group" and B != FORMAT_BLOCK[fmt]:
        raise ConfigError(f"{NAME}: block_size={B!r} with format={fmt!r}; expected {FORMAT_BLOCK[fmt]} (fixed by "
                          "the format) or None")
    el = c.get("element_dtype") or FORMAT_ELEMENTS[fmt][0]
    C.check_choice(NAME, "element_dtype", el, FORMAT_ELEMENTS[fmt])
    rule = c.get("scale_rule") or FORMAT_RULES[fmt][0]
    C.check_choice(NAME, "scale_rule", rule, FORMAT_RULES[fmt])
    ms = c.get("min_scale")
    if fmt != "fp8_group" and ms not in (None, 0, 0.0):
        raise ConfigError(f"{NAME}: min_scale={ms!r} with format={fmt!r}; expected None (a floor of the float32 "
                          "group scale only)")
    ms = 0.0 if ms is None else C.check_real(NAME, "min_scale", ms)
    if ms < 0:
        raise ConfigError(f"{NAME}: min_scale={ms!r}; expected a number >= 0 (0: no floor), or None")
    c.update(format=fmt, block_size=B, element_dtype=el, scale_rule=rule, min_scale=float(ms))
    return c


def check(x, residual, weight, bias, config, global_scale=None):
    """The argument checks (shared with the specification): (resolved config, H, eps)."""
    c = resolve(config)
    if global_scale is not None:
        if c["format"] != "nvfp4":
            raise ConfigError(f"{NAME}: a 'global_scale' input with format={c['format']!r}; expected "
                              "format='nvfp4' (the static NVFP4 tensor encode scale) or no global_scale")
        if np.shape(global_scale) not in ((), (1,)):
            raise ShapeError(f"{NAME}: 'global_scale' has shape {np.shape(global_scale)}; expected () or (1,) "
                             "(one encode scale per tensor)")
        gs = float(np.asarray(global_scale).reshape(()))
        if not (np.isfinite(gs) and gs > 0):
            raise ConfigError(f"{NAME}: global_scale={gs!r}; expected a finite number > 0")
    C.check_choice(NAME, "norm", c.get("norm", "rms_norm"), NORMS)
    shape = C.normalized_shape(NAME, c["normalized_shape"])
    if len(shape) != 1:
        raise ConfigError(f"{NAME}: normalized_shape={list(shape)}; expected one dimension [H] (the blocks run "
                          "along the hidden axis, the last)")
    eps = C.check_eps(NAME, c.get("eps", 1e-5))
    if x.ndim < 1 or x.shape[-1] != shape[0]:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected a last dimension equal to "
                         f"normalized_shape {list(shape)}")
    if residual is not None and residual.shape != x.shape:
        raise ShapeError(f"{NAME}: input 'residual' has shape {residual.shape}; expected x's shape {x.shape}")
    C.check_param(NAME, "weight", weight, shape)
    C.check_param(NAME, "bias", bias, shape)
    if c.get("norm", "rms_norm") == "rms_norm" and bias is not None:
        raise ConfigError(f"{NAME}: norm='rms_norm' takes no 'bias' input; expected norm='layer_norm' or no bias")
    return c, shape[0], eps


def qmax(element_dtype: str) -> float:
    return ELEMENTS[element_dtype][1]


def num_blocks(H: int, B: int) -> int:
    return -(-H // B)


# ------------------------------------------------------------------------------ the scale rules
def pow2_floor(v, lo, hi):
    """2^clip(floor(log2 v), lo, hi) for v > 0; 2^lo for v = 0 (log2 0 = -inf, clamped); NaN stays NaN."""
    v = np.asarray(v, dtype=np.float64)
    m, e = np.frexp(np.where(v > 0, v, 1.0))                      # v = m 2^e, m in [0.5, 1): floor = e - 1
    k = np.clip(np.where(v > 0, e - 1, lo), lo, hi)
    return np.where(np.isnan(v), np.nan, np.ldexp(1.0, k.astype(np.int64)))


def pow2_ceil(v, lo, hi, zero=None):
    """2^clip(ceil(log2 v), lo, hi) for v > 0 (exact: m = 0.5 is a power of two); for v = 0: ``zero``
    (None: 2^lo, the E8M0 rule; 0.0: the float32 pow2 group scale); NaN stays NaN."""
    v = np.asarray(v, dtype=np.float64)
    m, e = np.frexp(np.where(v > 0, v, 1.0))
    k = np.clip(np.where(m == 0.5, e - 1, e), lo, hi)
    out = np.ldexp(1.0, k.astype(np.int64))
    out = np.where(v > 0, out, np.ldexp(1.0, lo) if zero is None else zero)
    return np.where(np.isnan(v), np.nan, out)


def round_e4m3(v):
    """v rounded to nearest even in float8_e4m3fn, saturating at +-448, as float64 (NaN stays NaN)."""
    with np.errstate(invalid="ignore"):
        return float32_odd(np.clip(np.asarray(v, dtype=np.float64), -E4M3_MAX, E4M3_MAX)).astype(
            ml_dtypes.float8_e4m3fn).astype(np.float64)


def nvfp4_tensor(g):
    """(S_enc, tensor_scale) from the global amax g: S_enc = min(2688 / g, FLT_MAX), 1 where g = 0 (and where
    that minimum is 0: g = inf); tensor_scale = 1 / S_enc (TransformerEngine's compute_global_encode_scaling
    _factor_FP4)."""
    g = np.asarray(g, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        enc = np.minimum(NVFP4_GLOBAL / g, FLT_MAX)
    enc = np.where((g == 0) | (enc == 0), 1.0, enc)
    return enc, 1.0 / enc


def tensor_encode(amax, c, global_scale=None):
    """nvfp4's S_enc: the input ``global_scale`` (a static encode scale) or nvfp4_tensor of the tensor's
    amax (the max of the per-block ``amax``); None for the one-level formats."""
    if c["format"] != "nvfp4":
        return None
    if global_scale is not None:
        return float(np.asarray(global_scale, dtype=np.float64).reshape(()))
    return float(nvfp4_tensor(np.max(amax, initial=0.0))[0])


def block_scales(amax, c, enc=None):
    """(v, S, tensor_scale): the pre-rounding scale v of each block, the decode scale S that q divides by,
    the tensor scale, from the per-block ``amax`` (any shape) and the resolved config ``c``; ``enc``: nvfp4's
    S_enc (``tensor_encode``)."""
    fmt, rule, el = c["format"], c["scale_rule"], c["element_dtype"]
    qm, emax = ELEMENTS[el][1], ELEMENTS[el][2]
    one = np.ones(())
    if fmt == "fp8_group":
        v = np.maximum(amax / qm, c["min_scale"])
        S = v if rule == "exact" else pow2_ceil(v, *F32_POW2_EXP, zero=0.0)
        return v, S, one
    if fmt == "mxfp8":
        if rule == "floor":
            v = amax / 2.0 ** emax
            return v, pow2_floor(v, *E8M0_EXP), one
        v = amax / qm
        return v, pow2_ceil(v, *E8M0_EXP), one
    ts = 1.0 / enc
    v = amax / 6.0 * enc
    return v, round_e4m3(v) * ts, ts


def divide_clip(y, S, qm):
    """clip(y / S, -qm, qm), 0 where S = 0 (a zero scale quantizes its block to 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(S == 0, 0.0 * y, y / np.where(S == 0, 1.0, S))
    return np.clip(q, -qm, qm)


def encode_scale(scale, config):
    """The stored scales from the ``scale`` output (the pre-rounding v): float32 (fp8_group exact),
    float32 powers of two (pow2), float8_e8m0fnu (mxfp8), float8_e4m3fn (nvfp4)."""
    c = resolve(config)
    v = np.asarray(scale, dtype=np.float64)
    if c["format"] == "fp8_group":
        S = v if c["scale_rule"] == "exact" else pow2_ceil(v, *F32_POW2_EXP, zero=0.0)
        return S.astype(np.float32)
    if c["format"] == "mxfp8":
        S = pow2_floor(v, *E8M0_EXP) if c["scale_rule"] == "floor" else pow2_ceil(v, *E8M0_EXP)
        return S.astype(ml_dtypes.float8_e8m0fnu)        # exact: a power of two in E8M0's range (NaN: NaN)
    return round_e4m3(v).astype(ml_dtypes.float8_e4m3fn)


def quantize(q, element_dtype):
    """The quantized tensor: ``q`` (float64) saturated and rounded to nearest even in ``element_dtype``."""
    dt, qm, _ = ELEMENTS[element_dtype]
    with np.errstate(invalid="ignore"):
        return float32_odd(np.clip(np.asarray(q, dtype=np.float64), -qm, qm)).astype(dt)   # one rounding


# ------------------------------------------------------------------------------ the fast path
def blocked(y, B):
    """y (..., H) as (..., nb, B), the last block padded with zeros (which never raise an amax)."""
    H = y.shape[-1]
    nb = num_blocks(H, B)
    pad = nb * B - H
    if pad:
        y = np.concatenate([y, np.zeros(y.shape[:-1] + (pad,))], axis=-1)
    return y.reshape(y.shape[:-1] + (nb, B))


def quantized(y, c, global_scale=None):
    """(q, scale, amax, tensor_scale) from the float64 norm output ``y`` (module docstring)."""
    B, H = c["block_size"], y.shape[-1]
    yb = blocked(y, B)                                                    # (..., nb, B)
    amax = np.max(np.abs(yb), axis=-1, initial=0.0)                       # (..., nb); NaN propagates
    v, S, ts = block_scales(amax, c, tensor_encode(amax, c, global_scale))
    q = divide_clip(yb, S[..., None], qmax(c["element_dtype"]))
    q = q.reshape(y.shape[:-1] + (-1,))[..., :H]
    return q, v, amax, np.full((1,) * y.ndim, float(ts))


def norm_of(s, weight, bias, c, H, eps):
    """y = the norm of s (layer_norm or rms_norm over the last axis)."""
    if c.get("norm", "rms_norm") == "layer_norm":
        return _ln.forward(s, weight, bias, normalized_shape=(H,), eps=eps)[0]
    return _rms.forward(s, weight, normalized_shape=(H,), eps=eps)[0]


def forward(x, residual=None, weight=None, bias=None, global_scale=None, **config):
    """{"q", "scale", "amax", "tensor_scale"} (+ "residual_out" with ``residual``). Module docstring."""
    c, H, eps = check(x, residual, weight, bias, config, global_scale)
    s = x if residual is None else x + residual
    q, scale, amax, ts = quantized(norm_of(s, weight, bias, c, H, eps), c, global_scale)
    out = {"q": q, "scale": scale, "amax": amax, "tensor_scale": ts}
    if residual is not None:
        out["residual_out"] = s
    return out


# ------------------------------------------------------------------------------ the registry
SCALE_JUDGE = {("fp8_group", "pow2"): "pow2:round_up", ("mxfp8", "floor"): "float8_e8m0fnu:floor",
               ("mxfp8", "round_up"): "float8_e8m0fnu:round_up", ("nvfp4", "e4m3"): "float8_e4m3fn"}


def output_dtypes(config, case_dtype):
    """The dtype each output is returned and judged in: q in element_dtype; scale by its rule (float32,
    "pow2:round_up", "float8_e8m0fnu:floor|round_up" or float8_e4m3fn: refnorm/check/precision.py's quantized
    grids); amax and tensor_scale in float32 (float64 for a float64 case); residual_out as add_norm's."""
    c = resolve(config)
    w = "float64" if case_dtype == "float64" else "float32"
    out = {"q": c["element_dtype"], "scale": SCALE_JUDGE.get((c["format"], c["scale_rule"]), w), "amax": w,
           "tensor_scale": w}
    if bool(config.get("residual_in_fp32", False)) and case_dtype in ("float16", "bfloat16"):
        out["residual_out"] = "float32"
    return out


def _forward(inputs, config, state, training):
    out = forward(inputs["x"], inputs.get("residual"), inputs.get("weight"), inputs.get("bias"),
                  inputs.get("global_scale"), **config)
    return Forward(out, {}, None)


def _backward(ctx, cot):
    raise ConfigError(f"{NAME} is forward-only: it has no differentiable output")


SPEC = NormSpec(
    name=NAME,
    summary="q = clip(norm(x [+ residual]) / S) per block of the hidden dim: fp8 groups, MXFP8 (E8M0), NVFP4 "
            "(E4M3 + tensor scale) (forward only)",
    inputs=("x", "residual", "weight", "bias", "global_scale"), required=("x",),
    outputs=("q", "scale", "amax", "tensor_scale", "residual_out"),
    options={"normalized_shape": REQUIRED, "norm": "rms_norm", "eps": 1e-5, "format": "fp8_group",
             "block_size": None, "element_dtype": None, "scale_rule": None, "min_scale": None,
             "residual_in_fp32": False},
    forward=_forward, backward=_backward,
    differentiable=(), returned=("q", "scale", "residual_out"), output_dtypes=output_dtypes,
    produced_by={"residual_out": "residual"},
)
