"""The rounding-point search of the diagnosis (refnorm/check/spec_search.py): the instrumented
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
from refnorm.check import spec_search as rp  # noqa: E402
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
    # bfloat16 inputs (ml_dtypes' kind "V") moved too: silu(z) depends on z, not the parameters alone
    ("gated_silu_in_input_dtype", "gated_norm/normal_gs32_bf16_4x128", "precision", "gated_norm.s"),
    # a value of the parameters alone (the gain 1 + scale) rounded: the affine convention's cast order
    ("aln_gain_in_input_dtype", "adaptive_layer_norm/normal_bf16_2x8x32", "affine", ".gain"),
])
def test_a_rounded_intermediate_is_named(bug, case_id, mechanism, words, monkeypatch):
    from planted.blind4 import Blind4Kernel
    from refnorm.check import explain_index
    monkeypatch.setattr(explain_index, "explain", lambda *a: None)     # (it names a rounded parameter first)
    r = check_case(Blind4Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == mechanism and words in d["message"] and "rounded to nearest" in d["message"], d["message"]


def test_the_correct_kernel_is_not_explained():
    from planted.blind4 import Blind4Kernel
    assert check_case(Blind4Kernel(None), load_case(GOLDEN, "gated_norm/normal_gs64_f16_4x128")).status == "passed"


@pytest.mark.parametrize("bug, case_id, words", [
    ("gns_silu_grad_sign_flipped", "group_norm_silu/normal_g3_f64_3x6x7", "the sign of `p * rest` flipped"),
    ("dyt_dalpha_missing_x", "dyt/normal_f64_2x5x7", "`x` left out in `gd * x`"),
    ("aln_dx_unmodulated", "adaptive_layer_norm/normal_f32_3x20x12", "left out in `1.0 + per_sample(scale, dy)`"),
])
def test_one_operation_of_the_backward_changed_is_named(bug, case_id, words, monkeypatch):
    from planted.blind4 import Blind4Kernel
    from refnorm.check import explain_terms
    monkeypatch.setattr(explain_terms, "backward_terms", lambda *a, **k: [])   # (its decompositions name them first)
    r = check_case(Blind4Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == "backward" and words in d["message"], d["message"]


def test_a_changed_gate_factor_of_the_backward_is_the_gate(monkeypatch):
    """dx = dv where dv * silu(z) belongs (tests/planted/blind3.py): the operand left out is a value of the gate
    input alone, so the mechanism is the gate's factor in the backward, not the backward formula in general."""
    from planted.blind3 import Blind3Kernel
    from refnorm.check import explain_terms
    monkeypatch.setattr(explain_terms, "backward_terms", lambda *a, **k: [])
    r = check_case(Blind3Kernel("gated_bwd_dx_ungated"), load_case(GOLDEN, "gated_norm/normal_gs4_f64_3x7x12"))
    d = r.diagnosis
    assert d["mechanism"] == "gate" and "`s` left out in `dv * s`" in d["message"], d["message"]


def test_the_mutation_search_needs_a_passing_forward():
    """A failing output: the change would have to explain the forward too; the search is not run."""
    class Rec:
        inputs = {"x": np.zeros((2, 3))}
        failing = (("outputs", "y"), ("grads", "x"))

    class Case:
        op = "layer_norm"
    assert rp.mutation(Case, Rec, None) is None


def test_every_change_keeps_the_unchanged_operations():
    """A change targets one operation id; the others compute as written (the instrumented spec with a change
    of an operation the call never reaches gives the plain spec's bits)."""
    case = load_case(GOLDEN, _first("layer_norm"))
    step = case.steps[0]
    inputs = {k: np.asarray(v) for k, v in step.inputs.items()}
    ns = rp._rp_module("layer_norm")
    plain = registry.evaluate("layer_norm", inputs, config=dict(case.config), engine="spec")
    rp._TARGET.t = ("mutate", -1, "flip")
    try:
        traced = registry.evaluate("layer_norm", inputs, config=dict(case.config), engine=(ns.forward, ns.backward))
    finally:
        rp._TARGET.t = None
    assert np.array_equal(plain.outputs["y"], traced.outputs["y"])
