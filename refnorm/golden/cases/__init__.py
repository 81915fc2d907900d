"""The golden case table: every golden case is one declarative row (SciPy's BOOST_TESTS style).

A ``Case`` names an op, its input shapes, the case dtype, the input regime, the config, the steps
(``"train"``/``"eval"``, several for stateful ops) and the initial state. ``refnorm.golden.build``
turns a row into arrays; the seed is derived from the case id, so a row never needs a hand-picked
seed and two rows never share one (checked). Adding an op is adding rows: write a row maker (the
op's input shapes, config and reduction axes), list its rows, and register them in ``ROW_MAKERS``.

Case ids say what they test: ``<op>/<regime>[_eps<eps>][_<variant>]_<dtype>_<shape>``, e.g.
``layer_norm/mean1e3_f16_260x3`` (rows of mean 1e3 and std 1, float16, 260 rows of 3) or
``batch_norm/normal_onnx_train3_eval_f16_4x2x3x3``.

Shapes in the shared grid (``GRID``) are given by kind, each op maps a kind to a concrete shape:
``odd`` (a small non-power-of-two reduction), ``mid`` (~600 values, non-power-of-two),
``pow2`` (power-of-two reductions), ``rows`` (many slices, >= 256 where the op has rows: parameter
gradients sum many contributions), ``big`` (one reduction of 65536+ values), ``batch1`` (batch size
1) and ``nd`` (more or fewer dimensions).
"""
from __future__ import annotations

from ._base import (  # noqa: F401  (the package's names, as before the split)
    DTYPES, REGIMES, STATE_REGIMES, PARAM_REGIMES, _ID, Case, name_for, AFFINE_VARIANT, GRID, grid, F16_SUBNORMAL, _affine_inputs)
from .standard import (  # noqa: F401  (the package's names, as before the split)
    layer_norm, LAYER_NORM_SHAPES, _layer_norm_rows, BN_STATE, batch_norm, BATCH_NORM_SHAPES, _batch_norm_rows, group_norm, GROUP_NORM_SHAPES, _group_norm_rows, instance_norm, INSTANCE_NORM_SHAPES, _instance_norm_rows, rms_norm, _rms_norm_rows)
from .fused import (  # noqa: F401  (the package's names, as before the split)
    ADD_NORM_DEFAULTS, KEEP_P, PARALLEL_TAG, add_norm, _add_norm_rows, adaptive_layer_norm, _adaptive_layer_norm_rows)
from .quant import (  # noqa: F401  (the package's names, as before the split)
    QSHORT, FLT_EPSILON, EXACT_TIES, VLLM_FUSED_INT8, VLLM_UNFUSED_INT8, QMAX, norm_quant, _norm_quant_rows)
from .quant_block import (  # noqa: F401
    norm_quant_block, _norm_quant_block_rows)
from .group_norm_silu import group_norm_silu, _group_norm_silu_rows  # noqa: F401
from .others import (  # noqa: F401  (the package's names, as before the split)
    lp_normalize, _lp_normalize_rows, LRN_CONFIG, local_response_norm, LRN_SHAPES, _local_response_norm_rows, min_max_scale, _min_max_scale_rows, z_score, _z_score_rows, mean_variance_norm, MVN_SHAPES, _mean_variance_norm_rows, weight_norm, WEIGHT_NORM_SHAPES, _weight_norm_rows, weight_standardization, WS_SHAPES, _weight_standardization_rows)
from .gated import GATED_DEFAULTS, gated_norm, _gated_norm_rows  # noqa: F401
from .pointwise import (  # noqa: F401
    ALPHA, dyt, _dyt_rows, poly_norm, _poly_norm_rows)
from .stateful import (  # noqa: F401  (the package's names, as before the split)
    unified_norm, UN_SHAPES, _unified_norm_rows, OFFLINE_STATE, CHANNELS_FIRST, OFFLINE_GRID, OFFLINE_SHAPES, offline, _offline_batch_norm_rows, _power_norm_rows, _batch_renorm_rows)


def _rows() -> tuple[Case, ...]:
    rows = []
    for make in ROW_MAKERS.values():
        rows += make()
    ids = [c.id for c in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"duplicate golden case ids: {dup}"
    assert len({c.seed for c in rows}) == len(rows), "two case ids hash to the same seed: rename one"
    for c in rows:
        assert _ID.match(c.id), c.id
        assert c.dtype in DTYPES and c.regime in REGIMES, c.id
        assert all(k in c.inputs and r in REGIMES for k, r in c.input_regimes.items()), c.id
        assert all(k in c.inputs and k in PARAM_REGIMES for k in c.param_regimes), c.id
        assert c.steps and all(s.partition(":")[0] in ("train", "eval") and s.partition(":")[2] in ("", *REGIMES)
                               for s in c.steps), c.id
        assert all(r in STATE_REGIMES or r.startswith("count:") for _, r in c.state.values()), c.id
        assert all(isinstance(s, int) and s >= 0 for shape in c.inputs.values() for s in shape), c.id
    return tuple(rows)


# op -> its rows; the order here is the order of the manifest
ROW_MAKERS = {
    "batch_norm": _batch_norm_rows,
    "layer_norm": _layer_norm_rows,
    "group_norm": _group_norm_rows,
    "instance_norm": _instance_norm_rows,
    "rms_norm": _rms_norm_rows,
    "lp_normalize": _lp_normalize_rows,
    "local_response_norm": _local_response_norm_rows,
    "min_max_scale": _min_max_scale_rows,
    "z_score": _z_score_rows,
    "mean_variance_norm": _mean_variance_norm_rows,
    "weight_norm": _weight_norm_rows,
    "weight_standardization": _weight_standardization_rows,
    "unified_norm": _unified_norm_rows,
    "offline_batch_norm": _offline_batch_norm_rows,
    "power_norm": _power_norm_rows,
    "batch_renorm": _batch_renorm_rows,
    "norm_quant": _norm_quant_rows,
    "add_norm": _add_norm_rows,
    "adaptive_layer_norm": _adaptive_layer_norm_rows,
    "gated_norm": _gated_norm_rows,
    "dyt": _dyt_rows,
    "poly_norm": _poly_norm_rows,
    "norm_quant_block": _norm_quant_block_rows,
    "group_norm_silu": _group_norm_silu_rows,
}

CASES: tuple[Case, ...] = _rows()


def by_id() -> dict[str, Case]:
    return {c.id: c for c in CASES}

