"""Hypothesis strategies for normalizer inputs: property-test your own kernel against the reference.

    from hypothesis import given
    from refnorm.check import Call
    from refnorm.strategies import inputs
    from refnorm.testing import assert_close_to_reference

    @given(inputs("layer_norm", dtype="float32"))
    def test_my_layer_norm(d):
        ret = my_backend.run(Call(**d))                      # or call your kernel with d["inputs"] ...
        assert_close_to_reference(d["op"], d["inputs"], ret.outputs, config=d["config"],
                                  cotangents=d["cotangents"], grads=ret.grads, training=d["training"])

``inputs(op, dtype=None, regime=None, *, max_side=6, backward=True)`` draws one call of ``op`` as a dict
with the fields of ``refnorm.check.Call`` (``Call(**d)`` is the call a backend gets):
``op``, ``dtype``, ``config``, ``training``, ``inputs``, ``cotangents``, ``state``, every array a NumPy
array exactly representable in ``dtype`` (bfloat16 as ml_dtypes.bfloat16). The same dict feeds
``refnorm.evaluate(d["op"], d["inputs"], config=d["config"], grad_outputs=d["cotangents"] or None,
state=d["state"], training=d["training"])``.

Hypothesis draws the dtype (``dtype``: a name, a list of names, or None for all four), the regime
(``regime``: a name of ``refnorm.golden.cases.REGIMES`` -- "normal", "mean1e3", "const", "sq_overflow",
"heavy_tail", ... -- a list, or None for all), every dimension (1 to ``max_side``), the layout options
(normalized dims, dim, groups, window size), eps, which affine parameters are present, training or
eval and the op's convention options; the values come from the golden set's own generators
(``refnorm.golden.build``) seeded by a drawn integer, so a failing example is reproducible and shrinks
to small shapes. ``backward=False`` leaves ``cotangents`` empty (forward only).

This module imports hypothesis (a test dependency: ``pip install 'refnorm[test]'``); ``import refnorm``
does not import it.
"""
from __future__ import annotations

import math

from hypothesis import reject
from hypothesis import strategies as st

from . import registry
from .check.precision import DTYPES
from .errors import UnknownNameError
from .golden import build
from .golden import cases as C

AFFINE = ("wb", "w", "b", "")


def _sides(draw, n, max_side, lo=1):
    return tuple(draw(st.integers(lo, max(lo, max_side))) for _ in range(n))


def _pick(draw, *values):
    return draw(st.sampled_from(values))


def _layer_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    affine = _pick(draw, *AFFINE)
    offset = 1.0 if "w" in affine and draw(st.booleans()) else 0.0      # zero-centred gamma
    return C.layer_norm(regime, dtype, shape, k=draw(st.integers(1, min(2, len(shape)))),
                        eps=_pick(draw, 1e-5, 1e-12, 0.3), affine=affine, weight_offset=offset)


def _add_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    affine = _pick(draw, *AFFINE)
    x_regime, dropout, rowscale = _pick(draw, "", "normal"), draw(st.booleans()), draw(st.booleans())
    kw = dict(norm=_pick(draw, "layer_norm", "rms_norm"), prenorm=draw(st.booleans()),
              residual_in_fp32=draw(st.booleans()), weight_offset=1.0 if "w" in affine and draw(st.booleans()) else 0.0,
              eps=_pick(draw, 1e-5, 1e-12, 0.3))
    # the parallel branch: x1 never with rowscale (flash-attention refuses it)
    parallel = _pick(draw, "", "w1") if rowscale else _pick(draw, "", "x1", "w1", "x1w1")
    return C.add_norm(regime, dtype, shape, x_regime=x_regime, affine=affine, dropout=dropout, rowscale=rowscale,
                      parallel=parallel, **kw)


def _adaptive_layer_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(2, 4)), m)
    return C.adaptive_layer_norm(regime, dtype, shape, eps=_pick(draw, 1e-6, 1e-12, 0.3),
                                 affine=_pick(draw, "ss", "s", ""))


def _gated_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 2)), m) + (0,)
    K = draw(st.integers(1, max(1, m)))
    shape = shape[:-1] + (K * draw(st.integers(1, 4)),)                  # hidden: 1..4 groups of K
    return C.gated_norm(regime, dtype, shape, z_regime=_pick(draw, "normal", "gate_sat"),
                        norm=_pick(draw, "rms_norm", "layer_norm"), norm_before_gate=draw(st.booleans()),
                        group_size=_pick(draw, None, K), bias=draw(st.booleans()), eps=_pick(draw, 1e-5, 1e-12, 0.3))
def _dyt(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    return C.dyt(regime, dtype, shape, alpha=_pick(draw, *C.ALPHA), affine=_pick(draw, "wb", "w", "b", ""))


def _poly_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    return C.poly_norm(regime, dtype, shape, eps=_pick(draw, 1e-6, 1e-12, 0.3), bias=draw(st.booleans()))


def _rms_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    affine = _pick(draw, "w", "")
    opts = {}
    if draw(st.booleans()):
        opts["eps_placement"] = "outside"
    if affine and draw(st.booleans()):
        opts["weight_offset"] = 1.0
    return C.rms_norm(regime, dtype, shape, k=draw(st.integers(1, min(2, len(shape)))),
                      eps=_pick(draw, 1e-5, 1e-6, None, 0.3), affine=affine, **opts)


def _norm_quant(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    static = draw(st.booleans())
    return C.norm_quant(regime, dtype, shape, norm=_pick(draw, "rms_norm", "layer_norm"), qd=_pick(draw, *C.QSHORT),
                        static=static, ub=None if static else _pick(draw, None, 2.0), eps=_pick(draw, 1e-5, 1e-6, 0.3),
                        affine=_pick(draw, "wb", "w", ""))


def _norm_quant_block(draw, regime, dtype, m):
    """Rows of at most m values: fp8 groups of 1..4 (partial last blocks), MXFP8 and NVFP4 (one partial block)."""
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    fmt = _pick(draw, "fp8_group", "mxfp8", "nvfp4")
    rule = _pick(draw, None, "pow2") if fmt == "fp8_group" else _pick(draw, None, "round_up") if fmt == "mxfp8" \
        else None
    return C.norm_quant_block(regime, dtype, shape, format=fmt, scale_rule=rule,
                              block_size=draw(st.integers(1, 4)) if fmt == "fp8_group" else None,
                              norm=_pick(draw, "rms_norm", "layer_norm"), residual=draw(st.booleans()),
                              eps=_pick(draw, 1e-5, 1e-6, 0.3), affine=_pick(draw, "wb", "w", ""))


def _stateful(draw, regime, dtype, m, make, lead):
    """batch_norm / instance_norm: (N, C, *spatial); train with or without running stats, or eval."""
    shape = list(_sides(draw, draw(st.integers(2 if make is C.batch_norm else 3, 4)), m))
    mode = _pick(draw, "train", "train_nostats", "eval")
    per_slice = math.prod(shape[i] for i in lead(len(shape)))
    if mode != "eval" and per_slice < 2:         # a variance needs two values (ShapeError otherwise)
        shape[0 if make is C.batch_norm else -1] += 1
    opts = _pick(draw, {}, {"momentum": 0.5}, *([{"momentum": None}, {"convention": "onnx"}]
                                               if make is C.batch_norm else []))
    return make(regime, dtype, tuple(shape), eps=_pick(draw, 1e-5, 0.3), affine=_pick(draw, *AFFINE),
                steps=("eval" if mode == "eval" else "train",), stats=mode != "train_nostats",
                nbt=draw(st.integers(0, 3)), **opts)


def _batch_norm(draw, regime, dtype, m):
    return _stateful(draw, regime, dtype, m, C.batch_norm, lambda n: (0, *range(2, n)))


def _instance_norm(draw, regime, dtype, m):
    return _stateful(draw, regime, dtype, m, C.instance_norm, lambda n: range(2, n))


def _group_norm(draw, regime, dtype, m):
    n, groups, per_group = _sides(draw, 3, m)
    spatial = _sides(draw, draw(st.integers(0, 2)), m)
    return C.group_norm(regime, dtype, (n, groups * per_group, *spatial), groups=groups,
                        eps=_pick(draw, 1e-5, 0.3), affine=_pick(draw, *AFFINE))


def _group_norm_silu(draw, regime, dtype, m):
    n, groups, per_group = _sides(draw, 3, m)
    spatial = _sides(draw, draw(st.integers(0, 2)), m)
    return C.group_norm_silu(regime, dtype, (n, groups * per_group, *spatial), groups=groups,
                             eps=_pick(draw, 1e-5, 0.3), affine=_pick(draw, *AFFINE), bias_regime=_pick(draw, "", "neg20"))


def _lp_normalize(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    p = _pick(draw, 2.0, 1.0, 3.0)
    opts = {"p": p} if p != 2.0 else {}
    if draw(st.booleans()):
        opts["zero_rule"] = "onnx"
    return C.lp_normalize(regime, dtype, shape, dim=draw(st.integers(0, len(shape) - 1)),
                          eps=_pick(draw, 1e-12, 0.3), **opts)


def _local_response_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(3, 4)), m)
    return C.local_response_norm(regime, dtype, shape, size=draw(st.integers(1, 7)),
                                 alpha=_pick(draw, 1.0, 1e-4), window=_pick(draw, "torch", "onnx"))


def _min_max_scale(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 3)), m)
    return C.min_max_scale(regime, dtype, shape, eps=_pick(draw, 1e-5, 1e-3), affine=_pick(draw, *AFFINE))


def _z_score(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(0, 2)), m) + _sides(draw, 1, m, lo=2)   # ddof 1 needs 2 values
    return C.z_score(regime, dtype, shape, eps=_pick(draw, 1e-5, 1e-3), affine=_pick(draw, *AFFINE),
                     ddof=_pick(draw, 1, 0))


def _mean_variance_norm(draw, regime, dtype, m):
    return C.mean_variance_norm(regime, dtype, _sides(draw, 4, m), eps=_pick(draw, 1e-5, 1e-3))


def _weight_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(1, 4)), m)
    return C.weight_norm(regime, dtype, shape, dim=_pick(draw, 0, len(shape) - 1, None))


def _weight_standardization(draw, regime, dtype, m):
    return C.weight_standardization(regime, dtype, _sides(draw, draw(st.integers(2, 4)), m),
                                    eps=_pick(draw, 1e-5, 1e-10))


def _unified_norm(draw, regime, dtype, m):
    shape = _sides(draw, draw(st.integers(2, 3)), m)
    return C.unified_norm(regime, dtype, shape, window=draw(st.integers(1, 4)), affine=_pick(draw, *AFFINE))


def _offline(op, lo):
    def make(draw, regime, dtype, m):
        shape = _sides(draw, draw(st.integers(2, 3)), m, lo=lo)
        return C.offline(op, regime, dtype, shape, steps=("train",), affine=_pick(draw, *AFFINE))
    return make


MAKERS = {"layer_norm": _layer_norm, "rms_norm": _rms_norm, "batch_norm": _batch_norm,
          "instance_norm": _instance_norm, "group_norm": _group_norm, "lp_normalize": _lp_normalize,
          "local_response_norm": _local_response_norm, "min_max_scale": _min_max_scale, "z_score": _z_score,
          "mean_variance_norm": _mean_variance_norm, "weight_norm": _weight_norm,
          "weight_standardization": _weight_standardization, "unified_norm": _unified_norm,
          "offline_batch_norm": _offline("offline_batch_norm", 2), "power_norm": _offline("power_norm", 1),
          "batch_renorm": _offline("batch_renorm", 2), "norm_quant": _norm_quant, "add_norm": _add_norm,
          "adaptive_layer_norm": _adaptive_layer_norm, "gated_norm": _gated_norm,
          "dyt": _dyt, "poly_norm": _poly_norm, "norm_quant_block": _norm_quant_block,
          "group_norm_silu": _group_norm_silu}


def _names(value, known, what):
    values = list(known) if value is None else [value] if isinstance(value, str) else list(value)
    bad = [v for v in values if v not in known]
    if bad or not values:
        raise UnknownNameError(f"{what} {bad or value!r}: expected one or more of {', '.join(known)}")
    return values


def inputs(op, dtype=None, regime=None, *, max_side=6, backward=True):
    """A strategy for one call of ``op`` (see the module docstring for the dict and the arguments)."""
    registry.get(op)                                   # UnknownNameError names the normalizers
    if op not in MAKERS:
        raise UnknownNameError(f"refnorm.strategies has no strategy for {op!r} yet")
    if not isinstance(max_side, int) or max_side < 2:
        raise ValueError(f"max_side={max_side!r}: expected an int >= 2")
    dtypes, regimes = _names(dtype, DTYPES, "dtype"), _names(regime, C.REGIMES, "regime")
    return _call(op, st.sampled_from(dtypes), st.sampled_from(regimes), max_side, backward)


@st.composite
def _call(draw, op, dtypes, regimes, max_side, backward):
    dt = draw(dtypes)
    case = MAKERS[op](draw, draw(regimes), dt, max_side)
    try:
        drawn = build.draw(case, seed=draw(st.integers(0, 2 ** 32 - 1)))
    except ValueError:                                 # drawn values overflow the dtype (heavy tails)
        reject()

    def cast(arrays):
        return {k: build.as_case_dtype(v, dt) for k, v in arrays.items()}
    return {"op": op, "dtype": dt, "config": dict(case.config), "training": case.steps[0] == "train",
            "inputs": cast(drawn.inputs[0]), "cotangents": cast(drawn.cotangents[0]) if backward else {},
            "state": cast(drawn.init_state)}
