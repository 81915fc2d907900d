"""LayerNorm (Ba, Kiros & Hinton 2016, arXiv:1607.06450), as torch.nn.functional.layer_norm.

    y = (x - mean_A(x)) * rstd * (weight + weight_offset) + bias,     rstd = (var_A(x) + eps) ** -1/2

A = the trailing ``len(normalized_shape)`` axes; biased variance (ddof=0); eps inside the sqrt.
``weight`` and ``bias`` have shape ``normalized_shape`` and are each optional. ``weight_offset``
(default 0.0) is added to the weight: 1.0 is TransformerEngine's zero-centred gamma (``zero_centered_gamma``:
the stored parameter is gamma - 1); a non-zero offset without a weight is a ConfigError.
Outputs ``y``, and ``mean`` and ``rstd`` with keepdims shape ``x.shape[:-k] + (1,) * k`` (torch's
native_layer_norm, ONNX LayerNormalization's Mean and InvStdDev).

Backward (derivations/layer_norm.md), with xhat = (x - mean) * rstd and g = dy * (weight + weight_offset):
    dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))
    dweight = sum over the leading axes of dy * xhat,    dbias = sum over the leading axes of dy
NaN/Inf in a row reach only that row. An empty row gives mean 0 and rstd NaN, as torch.
Computed in blocks of rows, in threads (_common: the same operations per row as centered_moments and
centered_backward, so the same bits; dweight and dbias are summed per block, then over the blocks).
The backward recomputes xhat from x and the forward's first-pass mean and its correction (m0, c).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError, ShapeError
from ..spec import REQUIRED, Forward, NormSpec
from . import _common as C
from . import _pool

NAME = "layer_norm"


def _shape(normalized_shape) -> tuple[int, ...]:
    return C.normalized_shape(NAME, normalized_shape)


def _rows(x: np.ndarray, k: int) -> tuple[int, int]:
    """(rows, n): x as (rows, n), a row being one normalized slice of n values."""
    n = C.count(x, tuple(range(x.ndim - k, x.ndim)))
    return math.prod(x.shape[:x.ndim - k]), n


def _view(a: np.ndarray, rows: int, n: int):
    a = a.reshape(rows, 1, n)
    return lambda s, e: a[s:e]


def _check_offset(weight, weight_offset) -> float:
    """``weight_offset``: a finite number, non-zero only with a weight (there is nothing to offset)."""
    offset = C.check_real(NAME, "weight_offset", weight_offset)
    if weight is None and offset != 0.0:
        raise ConfigError(f"{NAME}: weight_offset={weight_offset!r} needs a 'weight' input; expected "
                          "weight_offset=0.0 when no weight is given")
    return offset


def check(x, weight, bias, normalized_shape, eps, weight_offset=0.0):
    """The argument checks (shared with the specification, refnorm/specs/layer_norm.py): (shape, eps).
    ``weight_offset`` must be a finite number, non-zero only with a weight."""
    _check_offset(weight, weight_offset)
    shape = _shape(normalized_shape)
    eps = C.check_eps(NAME, eps)
    k = len(shape)
    if x.shape[x.ndim - k:] != shape or x.ndim < k:
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected trailing dimensions "
                         f"equal to normalized_shape {list(shape)}")
    C.check_param(NAME, "weight", weight, shape)
    C.check_param(NAME, "bias", bias, shape)
    return shape, eps


def forward(x, weight=None, bias=None, *, normalized_shape, eps=1e-5, weight_offset=0.0, _centre=None):
    """Returns (y, mean, rstd). See the module docstring for the equation and shapes.

    ``_centre``: a list that receives (m0, c), the first-pass mean and its correction per row, which
    ``backward`` uses to recompute the forward's deviations bit for bit.
    """
    shape, eps = check(x, weight, bias, normalized_shape, eps, weight_offset)
    offset = float(weight_offset)
    if offset != 0.0:
        weight = weight + offset                # the effective weight (a new array: the input is not touched)
    k = len(shape)
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    rows, n = _rows(x, k)
    if n == 0 or rows == 0:                 # empty rows: mean 0, rstd NaN (as torch)
        axes = tuple(range(x.ndim - k, x.ndim))
        mean, var, d = C.centered_moments(x, axes)
        rstd = 1.0 / np.sqrt(var + eps)
        y = np.zeros(x.shape)
        if _centre is not None:
            _centre[:] = [mean.reshape(rows, 1, 1), np.zeros((rows, 1, 1))]
        return y, mean, rstd
    xv = _view(C.contiguous(x), rows, n)
    y = _pool.empty(x.shape)
    yv = _view(y, rows, n)
    w = None if weight is None else C.flat(weight)
    b = None if bias is None else C.flat(bias)
    m0, c, rstd = (np.empty((rows, 1, 1)) for _ in range(3))
    bounds = C.blocks(rows, n)
    size = (bounds[0][1] - bounds[0][0]) * n
    fused = C.native()
    if fused is not None:                   # the same operations, compiled (_common.native)
        xf = C.contiguous(x)
        C.run_blocks(lambda s, e: fused.forward(xf, y, w, b, m0, c, None, rstd, s, e, rows, 1, n, 0, 2, eps),
                     bounds)
        if _centre is not None:
            _centre[:] = [m0, c]
        return y, (m0 + c).reshape(stat_shape), rstd.reshape(stat_shape)

    def block(s, e):
        d, t = (C.shaped(buf, (e - s, 1, n)) for buf in C.scratch(2, size))
        m0[s:e], c[s:e], var = C.block_moments(xv(s, e), d, t, inner=n)
        r = rstd[s:e] = 1.0 / np.sqrt(var + eps)
        yb = yv(s, e)
        with C.elementwise(n):
            if w is None:
                np.multiply(d, r, out=yb)
            else:
                d *= r                                  # xhat
                np.multiply(d, w, out=yb)
            if b is not None:
                yb += b

    C.run_blocks(block, bounds)
    if _centre is not None:
        _centre[:] = [m0, c]
    return y, (m0 + c).reshape(stat_shape), rstd.reshape(stat_shape)


def backward(dy, x, weight, mean, rstd, *, normalized_ndim: int, with_bias: bool, centre=None):
    """Returns (dx, dweight or None, dbias or None) for the forward above.

    ``centre``: the (m0, c) the forward put in its ``_centre`` list; without it the deviations are
    recomputed with a fresh first pass (the same values).
    """
    k = normalized_ndim
    rows, n = _rows(x, k)
    pshape = x.shape[x.ndim - k:]
    if n == 0 or rows == 0:
        return (np.zeros(x.shape), None if weight is None else np.zeros(pshape),
                np.zeros(pshape) if with_bias else None)
    xv = _view(C.contiguous(x), rows, n)
    dyv = _view(C.contiguous(dy), rows, n)
    dx = _pool.empty(x.shape)
    dxv = _view(dx, rows, n)
    r_all = rstd.reshape(rows, 1, 1)
    w = None if weight is None else weight.reshape(n)
    bounds = C.blocks(rows, n)
    size = (bounds[0][1] - bounds[0][0]) * n
    if centre is None:
        centre = [np.empty((rows, 1, 1)), np.empty((rows, 1, 1))]

        def first_pass(s, e):
            d, t = (C.shaped(buf, (e - s, 1, n)) for buf in C.scratch(2, size))
            centre[0][s:e], centre[1][s:e], _ = C.block_moments(xv(s, e), d, t, inner=n)

        C.run_blocks(first_pass, bounds)
    m0_all, c_all = centre

    per = bounds[0][1] - bounds[0][0]
    dw_parts = None if w is None else np.empty((len(bounds), 1, n))      # per-block sums over rows
    db_parts = np.empty((len(bounds), 1, n)) if with_bias else None

    def block(s, e):
        d, t = (C.shaped(buf, (e - s, 1, n)) for buf in C.scratch(2, size))
        r = r_all[s:e]
        xhat = C.block_xhat(xv(s, e), m0_all[s:e], c_all[s:e], r, d, inner=n)
        dyb, dxb = dyv(s, e), dxv(s, e)
        with C.elementwise(n):
            if w is not None:
                np.multiply(dyb, xhat, out=t)
            g = dyb if w is None else np.multiply(dyb, w, out=dxb)
        if w is not None:
            np.add.reduce(t, axis=0, out=dw_parts[s // per])
        if with_bias:
            np.add.reduce(dyb, axis=0, out=db_parts[s // per])
        C.centered_backward(g, xhat, r, (1, 2), out=dxb, work=t, inner=n)

    # the same operations, compiled (_common.native); not for rows of one value, whose column sums
    # NumPy takes pairwise (a contiguous run) instead of row after row
    fused = C.native() if n > 1 else None
    if fused is not None:
        xf, dyf, wf, rf = C.contiguous(x), C.contiguous(dy), C.flat(weight), C.flat(r_all)
        m0f, cf = C.flat(m0_all), C.flat(c_all)

        def fused_block(s, e):
            i = s // per
            fused.backward(xf, dyf, dx, wf, m0f, cf, rf, None if dw_parts is None else dw_parts[i],
                           None if db_parts is None else db_parts[i], True, s, e, rows, 1, n, 0, 2)

    # last rows first: the forward just read them, so they may still be in the cache (the blocks'
    # sums go to their own rows of dw_parts / db_parts, so the order of the blocks changes nothing)
    C.run_blocks(block if fused is None else fused_block, bounds[::-1])
    # the blocks' sums, added in block order (np.add.reduce over axis 0 of (blocks, 1, n): one at a time)
    dweight = None if w is None else np.add.reduce(dw_parts, axis=0).reshape(pshape)
    dbias = np.add.reduce(db_parts, axis=0).reshape(pshape) if with_bias else None
    return dx, dweight, dbias


def row_kernel(inputs, config) -> C.RowKernel | None:
    """The compiled row kernels as ``forward`` and ``backward`` run them for this call (_common.RowKernel:
    rows of n values, a weight and bias per element, the column sums of a block of rows), or None where these
    functions would not run them (no compiled module, rows of one value) or the weight is offset."""
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    offset = config.get("weight_offset", SPEC.options["weight_offset"])
    shape, eps = check(x, w, b, config["normalized_shape"], config.get("eps", SPEC.options["eps"]), offset)
    if C.native() is None or float(offset) != 0.0 or math.prod(shape) < 2:
        return None
    return C.RowKernel(1, False, C.flat(w), C.flat(b), eps, 1, lambda sums, units: sums)


def _forward(inputs, config, state, training):
    x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
    centre = []
    y, mean, rstd = forward(x, w, b, **config, _centre=centre)
    if w is not None and float(config["weight_offset"]) != 0.0:
        w = w + float(config["weight_offset"])      # the backward's g = dy * (weight + weight_offset)
    ctx = C.affine_ctx(x, w, b, mean, rstd, normalized_ndim=len(_shape(config["normalized_shape"])), centre=centre)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, ctx)


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(var + eps) * (weight + weight_offset) + bias over the trailing normalized_shape",
    inputs=("x", "weight", "bias"), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"normalized_shape": REQUIRED, "eps": 1e-5, "weight_offset": 0.0},
    forward=_forward, backward=C.affine_backward(backward),
)
