"""A normalization with a quantized output (vLLM's rms_norm_*_quant, TransformerEngine's LayerNorm/RMSNorm
with an fp8 output): layer_norm or rms_norm, then a per-tensor static or per-token dynamic scale and a
saturating round to float8 e4m3fn, float8 e5m2 or int8. Forward only.

    y    = layer_norm(x; weight, bias, eps)  or  rms_norm(x; weight, eps)     (norm=..., float64)
    amax = max_A |y|                                                          (per token, keepdims)
    scale = static_scale                                         static (the input ``static_scale``)
    scale = max(min(amax / qmax, scale_ub), min_scale)           dynamic (no ``static_scale`` input)
    q    = clip(y / scale, qmin, qmax)                           the value the quantizer rounds
    quantized output = round_Q(q): round to nearest, ties to even, in Q = quant_dtype

A = the trailing len(normalized_shape) axes. Q and its range: float8_e4m3fn +-448 (no infinities; an
unsaturated overflow is NaN), float8_e5m2 +-57344, int8 [-128, 127]; qmax = 448, 57344, 127.
``scale_ub`` (dynamic only, > 0, None = no bound) caps the scale (vLLM's ``scale_ub`` caps amax
instead: pass vLLM's value / qmax); ``min_scale`` (dynamic only, >= 0) floors the scale of an all-zero or tiny
row: None = 1 / (qmax * 512), vLLM's float8 floor; a kernel with another floor passes its own (vLLM's fused
int8 kernels: FLT_EPSILON = 2^-23; docs/conventions.md). ``min_scale=0``: no floor (vLLM's unfused
``dynamic_scaled_int8_quant``): an all-zero row has scale 0, and its q is 0 (0 / 0 taken as 0, what that
kernel's saturating int8 conversion makes of 0 * (127 / 0) = NaN). ``static_scale`` is per tensor: shape
() or (1,), finite and > 0. eps defaults to 1e-5 for both norms (pass rms_norm's eps explicitly). rms_norm
takes no bias.

Outputs (every one float64; shapes: q like x, scale and amax (*, 1...) keepdims):
    q      the pre-rounding value clip(y / scale): like every refnorm output, the exact value before
           the final rounding to the output dtype, which here is Q. ``quantize(q, quant_dtype)`` gives
           the quantized tensor (an array of dtype Q: ml_dtypes' float8 types, numpy int8). The checker
           judges a backend's Q-typed q by the rounding-interval test of Q (docs/tolerances.md, section
           "Quantized outputs"): a value one step off is accepted only where q lies within its derived
           bound of a rounding boundary or of the saturation point.
    scale  the scale used (the static scale broadcast per token, or the dynamic one); judged in float32.
    amax   max_A |y| before any bound (TransformerEngine's amax, per token); judged in float32.
NaN/Inf in a row reach only that row (amax, scale and q of the row are NaN).
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

NAME = "norm_quant"
NORMS = ("rms_norm", "layer_norm")
# the quantized dtypes: NumPy dtype, lowest and highest value (saturation points), qmax (the scale's divisor)
QUANT_DTYPES = {
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), -448.0, 448.0),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), -57344.0, 57344.0),
    "int8": (np.dtype(np.int8), -128.0, 127.0),
}


def qmax(quant_dtype: str) -> float:
    """The largest value of ``quant_dtype``: the divisor of the dynamic scale, amax / qmax."""
    return QUANT_DTYPES[quant_dtype][2]


def default_min_scale(quant_dtype: str) -> float:
    """min_scale=None: 1 / (qmax * 512) (vLLM's float8 floor)."""
    return 1.0 / (qmax(quant_dtype) * 512.0)


def quantize(q: np.ndarray, quant_dtype: str) -> np.ndarray:
    """The quantized tensor: ``q`` (float64) saturated to the range of ``quant_dtype`` and rounded to
    nearest, ties to even, as an array of that dtype (NaN stays NaN for float8; int8 has no NaN: refused)."""
    dt, lo, hi = QUANT_DTYPES[quant_dtype]
    v = np.clip(np.asarray(q, dtype=np.float64), lo, hi)
    if dt.kind == "i":
        if np.isnan(v).any():
            raise ConfigError(f"{NAME}: quantize: NaN has no int8 value; expected finite values")
        return np.rint(v).astype(dt)                 # rint: ties to even
    return float32_odd(v).astype(dt)                 # one correct rounding, ties to even (_rounding.py)


def check(x, weight, bias, static_scale, normalized_shape, norm, eps, quant_dtype, scale_ub, min_scale):
    """The argument checks (shared with the specification): (shape, eps, min_scale)."""
    C.check_choice(NAME, "norm", norm, NORMS)
    C.check_choice(NAME, "quant_dtype", quant_dtype, tuple(QUANT_DTYPES))
    shape = C.normalized_shape(NAME, normalized_shape)
    eps = C.check_eps(NAME, eps)
    k = len(shape)
    if x.ndim < k or x.shape[x.ndim - k:] != shape:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected trailing dimensions "
                         f"equal to normalized_shape {list(shape)}")
    C.check_param(NAME, "weight", weight, shape)
    C.check_param(NAME, "bias", bias, shape)
    if norm == "rms_norm" and bias is not None:
        raise ConfigError(f"{NAME}: norm='rms_norm' takes no 'bias' input; expected norm='layer_norm' "
                          "or no bias")
    ub = C.check_real(NAME, "scale_ub", scale_ub, positive=True, allow_none=True)
    floor = C.check_real(NAME, "min_scale", min_scale, allow_none=True)
    if floor is not None and floor < 0:
        raise ConfigError(f"{NAME}: min_scale={min_scale!r}; expected a number >= 0 (0: no floor), or None")
    if static_scale is not None:
        if static_scale.shape not in ((), (1,)):
            raise ShapeError(f"{NAME}: 'static_scale' has shape {static_scale.shape}; expected () or (1,) "
                             "(one scale per tensor)")
        s = float(static_scale.reshape(()))
        if not (np.isfinite(s) and s > 0):
            raise ConfigError(f"{NAME}: static_scale={s!r}; expected a finite number > 0")
        if ub is not None or floor is not None:
            raise ConfigError(f"{NAME}: scale_ub={scale_ub!r}, min_scale={min_scale!r} with a static_scale "
                              "input; expected None (they bound the dynamic scale only)")
    return shape, eps, default_min_scale(quant_dtype) if floor is None else floor


def dynamic_scale(amax, quant_dtype, scale_ub, min_scale):
    """max(min(amax / qmax, scale_ub), min_scale); NaN stays NaN (np.minimum/maximum propagate it)."""
    s = amax / qmax(quant_dtype)
    if scale_ub is not None:
        s = np.minimum(s, scale_ub)
    return np.maximum(s, min_scale)


def quantized(y, axes, static_scale, quant_dtype, scale_ub, min_scale):
    """(q, scale, amax) from the float64 norm output ``y`` (module docstring)."""
    _, lo, hi = QUANT_DTYPES[quant_dtype]
    stat_shape = tuple(1 if i in axes else s for i, s in enumerate(y.shape))
    amax = np.max(np.abs(y), axis=axes, keepdims=True, initial=0.0)        # NaN propagates
    if static_scale is not None:
        scale = np.full(stat_shape, float(static_scale.reshape(())))
    else:
        scale = dynamic_scale(amax, quant_dtype, scale_ub, min_scale)
    return np.clip(divide(y, scale), lo, hi), scale, amax


def divide(y, scale):
    """y / scale, with 0 where the scale is 0 (min_scale=0 on an all-zero row: every y there is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale == 0, 0.0 * y, y / np.where(scale == 0, 1.0, scale))


def forward(x, weight=None, bias=None, static_scale=None, *, normalized_shape, norm="rms_norm", eps=1e-5,
            quant_dtype="float8_e4m3fn", scale_ub=None, min_scale=None):
    """Returns (q, scale, amax). See the module docstring."""
    shape, eps, floor = check(x, weight, bias, static_scale, normalized_shape, norm, eps, quant_dtype,
                              scale_ub, min_scale)
    if norm == "layer_norm":
        y = _ln.forward(x, weight, bias, normalized_shape=shape, eps=eps)[0]
    else:
        y = _rms.forward(x, weight, normalized_shape=shape, eps=eps)[0]
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return quantized(y, axes, static_scale, quant_dtype, scale_ub, floor)


def output_dtypes(config, case_dtype):
    """The dtype each output is returned and judged in: q in quant_dtype, scale and amax in float32
    (float64 for a float64 case): a kernel's scale is a float32 number whatever its activations."""
    w = "float64" if case_dtype == "float64" else "float32"
    return {"q": config.get("quant_dtype", "float8_e4m3fn"), "scale": w, "amax": w}


def _forward(inputs, config, state, training):
    q, scale, amax = forward(inputs["x"], inputs.get("weight"), inputs.get("bias"), inputs.get("static_scale"),
                             **config)
    return Forward({"q": q, "scale": scale, "amax": amax}, {}, None)


def _backward(ctx, cot):
    raise ConfigError(f"{NAME} is forward-only: it has no differentiable output")


SPEC = NormSpec(
    name=NAME,
    summary="q = clip(norm(x) / scale) rounded to float8/int8; scale static or amax/qmax per token (forward only)",
    inputs=("x", "weight", "bias", "static_scale"), required=("x",),
    outputs=("q", "scale", "amax"),
    options={"normalized_shape": REQUIRED, "norm": "rms_norm", "eps": 1e-5, "quant_dtype": "float8_e4m3fn",
             "scale_ub": None, "min_scale": None},
    forward=_forward, backward=_backward,
    differentiable=(), returned=("q", "scale"), output_dtypes=output_dtypes,
)
