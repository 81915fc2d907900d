"""The rounding-point search of the diagnosis (refnorm/check/rounding_points.py): the instrumented
specification computes the same bits as the plain one, and a kernel holding one named intermediate in a
lower precision is named by it (kernels of tests/planted/blind4.py, written without the search)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from refnorm import registry  # noqa: E402
from refnorm.check import rounding_points as rp  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.golden import load_case, store  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")


def _first(op, words=""):
    return next(e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == op and words in e["id"])


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "gated_norm", "add_norm", "group_norm", "batch_norm",
                                "adaptive_layer_norm", "dyt", "poly_norm", "norm_quant", "norm_quant_block"])
def test_the_instrumented_spec_computes_the_same_bits(op):
    case = load_case(GOLDEN, _first(op))
    step = case.steps[0]
    inputs = {k: np.asarray(v) for k, v in step.inputs.items()}
    cot = {k: np.asarray(v, np.float64) for k, v in (step.cotangents or {}).items()}
    ns = rp._rp_module(op)
    seen = {}
    kw = dict(config=dict(case.config), grad_outputs=cot or None, training=step.training,
              state={k: np.asarray(v, np.float64) for k, v in (case.init_state or {}).items()} or None)
    plain = registry.evaluate(op, inputs, engine="spec", **kw)
    rp._TARGET.t = ("record", seen)
    try:
        traced = registry.evaluate(op, inputs, engine=(ns.forward, ns.backward), **kw)
    finally:
        rp._TARGET.t = None
    assert seen, "no intermediate recorded"
    for part in ("outputs", "grads"):
        for k, v in getattr(plain, part).items():
            w = getattr(traced, part)[k]
            assert np.array_equal(np.asarray(v), np.asarray(w), equal_nan=True), (part, k)


@pytest.mark.parametrize("bug, case_id, mechanism, words", [
    ("gated_silu_in_input_dtype", "gated_norm/normal_gs64_f16_4x128", "precision", "gated_norm.s"),
    # a value of the parameters alone (the gain 1 + scale) rounded: the affine convention's cast order
    ("aln_gain_in_input_dtype", "adaptive_layer_norm/normal_bf16_2x8x32", "affine", ".gain"),
])
def test_a_rounded_intermediate_is_named(bug, case_id, mechanism, words):
    from planted.blind4 import Blind4Kernel
    r = check_case(Blind4Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == mechanism and words in d["message"] and "rounded to nearest" in d["message"], d["message"]


def test_the_correct_kernel_is_not_explained():
    from planted.blind4 import Blind4Kernel
    assert check_case(Blind4Kernel(None), load_case(GOLDEN, "gated_norm/normal_gs64_f16_4x128")).status == "passed"
