"""RMSNorm (Zhang & Sennrich 2019, arXiv:1910.07467), as torch.nn.functional.rms_norm.

    y = x * rstd * (weight + weight_offset)
    rstd = (mean_A(x^2) + eps) ** -1/2        eps_placement="inside"  (default; torch, ONNX)
    rstd = 1 / (sqrt(mean_A(x^2)) + eps)      eps_placement="outside"

A = the trailing ``len(normalized_shape)`` axes (REQUIRED, int or list of ints, as torch). No mean is
removed. ``weight`` has shape ``normalized_shape`` and is optional; ``weight_offset`` (default 0.0)
is added to it, 1.0 giving Gemma's (1 + weight) scale; a non-zero offset without a weight is a
ConfigError (there is nothing to offset). No ``bias`` input: neither torch nor ONNX
RMSNormalization has one; a model that adds a bias adds it after the norm (gradient = sum of dy).

eps: default None = the machine epsilon of torch's opmath (compute) dtype for the input's dtype, as torch's
F.rms_norm: finfo(float32).eps = 1.1920928955078125e-07 for float32, float16 and bfloat16 (and any
narrower float) input, finfo(float64).eps = 2.220446049250313e-16 for float64 input (``default_eps``).
Evidence: aten/src/ATen/native/layer_norm.cpp, rms_norm_composite: ``eps.value_or(
std::numeric_limits<opmath_t>::epsilon())`` with opmath_t = toOpMathType(input dtype), float for
Half/BFloat16/Float, double for Double; and by experiment on torch 2.13 CPU: F.rms_norm(x, eps=None)
gives the bits of eps=2**-23 for float32, float16 and bfloat16 x and of eps=2**-52 for float64 x, with
and without autograd (tests/test_rms_eps_none.py checks it when torch is installed). The dtype is x's as given to
``refnorm.evaluate`` (or to ``forward`` here), read before refnorm widens it to float64: float32 values
given as float32 get float32's eps, the same values widened to float64 get float64's (as torch's
``x.double()``). The checker and the golden builder resolve None with the case dtype
(``refnorm.registry.resolve_options``), never from a widened copy.
Negative eps is refused (torch accepts it and may take the sqrt of a negative number).

Outputs ``y``, and ``rstd`` = 1 / (the divisor) with keepdims shape ``x.shape[:-k] + (1,) * k``, as
torch's ``_fused_rms_norm`` (for either eps placement ``rstd`` is the reciprocal of what x is divided by).
The root mean square is computed as s * sqrt(mean((x/s)^2)), s = max|x| of the row, and the inside
divisor as hypot(rms, sqrt(eps)), so it neither overflows nor underflows where the true value is a
finite float64 (torch's mean(x^2) overflows at |x| ~ 1e154: rms_norm([1e200, 1e200]) gives 0 there,
refnorm gives the correct 1; tested against mpmath).

Backward (derivations/rms_norm.md), g = dy * (weight + weight_offset), xhat = x * rstd:
    dx = rstd * (g - u * mean_A(g * xhat))     u = xhat (inside),  u = x / rms (outside)
    dweight = sum over the leading axes of dy * xhat
Inside, sum_A(dx * x) = eps / (ms + eps)^(3/2) * sum_A(g * x): zero at eps = 0 (scale invariance).
Outside, an all-zero row with eps > 0 has u = 0 (the limit: x / rms is bounded and multiplied by
x -> 0; y = x / eps + O(|x|^2) there), so dx = g / eps.
NaN/Inf in a row reach only that row. An all-zero row gives y = 0 (rstd = 1/sqrt(eps)), and NaN when
eps = 0 (0/0, as torch). An empty row (normalized_shape containing 0) gives rstd NaN, as torch.
Computed in blocks of rows, in threads (_common; the same operations per row, so the same bits;
dweight is summed per block, then over the blocks).
"""
from __future__ import annotations


import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import REQUIRED, Backward, Forward, NormSpec
from . import _common as C
from . import _pool

NAME = "rms_norm"
FLOAT64_EPS = float(np.finfo(np.float64).eps)
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def default_eps(dtype) -> float:
    """eps=None's value for an input of ``dtype`` (a NumPy dtype, ml_dtypes' bfloat16 or a name such as
    "bfloat16"): torch's rule, the machine epsilon of the opmath dtype: float64's for float64 (or a wider
    float), float32's for float32 and every narrower float (float16, bfloat16, float8)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return FLOAT64_EPS if name in ("float64", "float96", "float128") else FLOAT32_EPS


def resolve_dtype_options(config, dtypes):
    """``config`` (every option) with eps=None replaced by ``default_eps`` of input x's dtype
    (``dtypes``: input name -> the dtype it was given in); the NormSpec's ``dtype_options``."""
    if config.get("eps") is not None or "x" not in dtypes:
        return config
    return {**config, "eps": default_eps(dtypes["x"])}


def _shape(normalized_shape) -> tuple[int, ...]:
    return C.normalized_shape(NAME, normalized_shape)


def _eps(eps, dtype) -> float:
    return default_eps(dtype) if eps is None else C.check_eps(NAME, eps)


def root_mean_square(x: np.ndarray, axes: tuple[int, ...], work: np.ndarray | None = None,
                     inner: int = 0) -> np.ndarray:
    """sqrt(mean_A(x^2)) (keepdims) as s * sqrt(mean((x / s)^2)), s = max|x|: no overflow/underflow.

    s = 1 where the row is all zero, empty or not finite (then Inf/NaN propagate unscaled).
    An empty row gives 0/0 = NaN. ``work``: an optional array shaped like x for the temporaries;
    ``inner``: the row length, for _common.elementwise.
    """
    with C.elementwise(inner):
        q = np.abs(x, out=work)
    s = np.max(q, axis=axes, keepdims=True, initial=0.0)
    s = np.where((s > 0) & np.isfinite(s), s, 1.0)
    with C.elementwise(inner):
        q = np.divide(x, s, out=q)
        q = np.multiply(q, q, out=q)
    return s * np.sqrt(q.sum(axis=axes, keepdims=True) / C.count(x, axes))


def _view(a: np.ndarray, rows: int, n: int):
    a = a.reshape(rows, 1, n)
    return lambda s, e: a[s:e]


def check(x, weight, normalized_shape, eps, eps_placement, weight_offset):
    """The argument checks (shared with the specification, refnorm/specs/rms_norm.py): (shape, eps, offset)."""
    shape = _shape(normalized_shape)
    eps = _eps(eps, x.dtype)
    C.check_choice(NAME, "eps_placement", eps_placement, ("inside", "outside"))
    offset = C.check_real(NAME, "weight_offset", weight_offset)
    k = len(shape)
    if x.ndim < k or x.shape[x.ndim - k:] != shape:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected trailing dimensions "
                         f"equal to normalized_shape {list(shape)}")
    C.check_param(NAME, "weight", weight, shape)
    if weight is None and offset != 0.0:
        raise ConfigError(f"{NAME}: weight_offset={weight_offset!r} needs a 'weight' input; expected "
                          "weight_offset=0.0 when no weight is given")
    return shape, eps, offset


def forward(x, weight=None, *, normalized_shape, eps=None, eps_placement="inside", weight_offset=0.0):
    """Returns (y, rstd, rms). See the module docstring for the equation and shapes."""
    shape, eps, offset = check(x, weight, normalized_shape, eps, eps_placement, weight_offset)
    k = len(shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    n = C.count(x, axes)
    rows = x.size // n if n else 0
    stat_shape = x.shape[:x.ndim - k] + (1,) * k

    def divisor_inverse(rms):
        if eps_placement == "inside":
            return 1.0 / np.hypot(rms, np.sqrt(eps))   # = (rms^2 + eps)^-1/2 without squaring rms
        return 1.0 / (rms + eps)

    if x.size == 0:
        rms = root_mean_square(x, axes)
        rstd = divisor_inverse(rms)
        return np.zeros(x.shape), rstd, rms
    xv = _view(C.contiguous(x), rows, n)
    y = _pool.empty(x.shape)
    yv = _view(y, rows, n)
    w = None if weight is None else (weight + offset).reshape(n)
    rms, rstd = np.empty((rows, 1, 1)), np.empty((rows, 1, 1))
    bounds = C.blocks(rows, n)
    size = (bounds[0][1] - bounds[0][0]) * n

    def block(s, e):
        t, = (C.shaped(buf, (e - s, 1, n)) for buf in C.scratch(1, size))
        xb = xv(s, e)
        rb = rms[s:e] = root_mean_square(xb, (1, 2), work=t, inner=n)
        r = rstd[s:e] = divisor_inverse(rb)
        yb = yv(s, e)
        with C.elementwise(n):
            np.multiply(xb, r, out=yb)
            if w is not None:
                yb *= w

    C.run_blocks(block, bounds)
    return y, rstd.reshape(stat_shape), rms.reshape(stat_shape)


def backward(dy, x, weight, rstd, rms, *, normalized_ndim: int, eps_placement="inside",
             weight_offset=0.0):
    """Returns (dx, dweight or None) for the forward above."""
    k = normalized_ndim
    axes = tuple(range(x.ndim - k, x.ndim))
    n = C.count(x, axes)
    pshape = x.shape[x.ndim - k:]
    if x.size == 0:
        return np.zeros(x.shape), None if weight is None else np.zeros(pshape)
    rows = x.size // n
    xv = _view(C.contiguous(x), rows, n)
    dyv = _view(C.contiguous(dy), rows, n)
    dx = _pool.empty(x.shape)
    dxv = _view(dx, rows, n)
    r_all, rms_all = rstd.reshape(rows, 1, 1), rms.reshape(rows, 1, 1)
    w = None if weight is None else (weight + weight_offset).reshape(n)
    bounds = C.blocks(rows, n)
    size = (bounds[0][1] - bounds[0][0]) * n

    per = bounds[0][1] - bounds[0][0]
    dw_parts = None if w is None else np.empty((len(bounds), 1, n))      # per-block sums over rows

    def block(s, e):
        xhat, t = (C.shaped(buf, (e - s, 1, n)) for buf in C.scratch(2, size))
        xb, dyb, dxb, r = xv(s, e), dyv(s, e), dxv(s, e), r_all[s:e]
        with C.elementwise(n):
            np.multiply(xb, r, out=xhat)
            if w is not None:
                np.multiply(dyb, xhat, out=t)
            g = dyb if w is None else np.multiply(dyb, w, out=dxb)
        if w is not None:
            np.add.reduce(t, axis=0, out=dw_parts[s // per])
        with C.elementwise(n):
            np.multiply(g, xhat, out=t)
        mgx = np.add.reduce(t, axis=(1, 2), keepdims=True)
        mgx /= n
        with C.elementwise(n):
            if eps_placement == "inside":
                u = xhat                                   # u = x * rstd
            else:                                          # u = x / rms, 0 on an all-zero row
                rm = rms_all[s:e]
                u = np.divide(xb, np.where(rm == 0, 1.0, rm), out=t)
                u[(rm == 0).reshape(-1)] = 0.0
            np.multiply(u, mgx, out=t)
            if w is None:
                np.subtract(dyb, t, out=dxb)
            else:
                dxb -= t
            dxb *= r                                       # dx = rstd * (g - u * mean(g * xhat))

    C.run_blocks(block, bounds)
    # the blocks' sums, added in block order
    dweight = None if w is None else np.add.reduce(dw_parts, axis=0).reshape(pshape)
    return dx, dweight


def _forward(inputs, config, state, training):
    x, w = inputs["x"], inputs.get("weight")
    y, rstd, rms = forward(x, w, **config)
    ctx = (x, w, rstd, rms, len(_shape(config["normalized_shape"])), config["eps_placement"],
           float(config["weight_offset"]))
    return Forward({"y": y, "rstd": rstd}, {}, ctx)


def _backward(ctx, cot):
    x, w, rstd, rms, k, placement, offset = ctx
    dx, dw = backward(cot["y"], x, w, rstd, rms, normalized_ndim=k, eps_placement=placement,
                      weight_offset=offset)
    grads = {"x": dx}
    if w is not None:
        grads["weight"] = dw
    return Backward(grads)


SPEC = NormSpec(
    name=NAME,
    summary="y = x / sqrt(mean(x^2) + eps) * (weight + weight_offset) over the trailing normalized_shape",
    inputs=("x", "weight"), required=("x",),
    outputs=("y", "rstd"),
    options={"normalized_shape": REQUIRED, "eps": None, "eps_placement": "inside", "weight_offset": 0.0},
    forward=_forward, backward=_backward, dtype_options=resolve_dtype_options,
)
