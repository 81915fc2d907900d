"""The diagnosis's arithmetic search (refnorm/check/explain.py, issue 33): bugs no catalogue variant
models, explained by a structured deviation of the specification's own formula."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import refnorm.norms.norm_quant as NQ  # noqa: E402
from refnorm.check import Returned  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.golden import load_case  # noqa: E402
from tests.planted.emulated import EmulatedBackend  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")


class DxTerm(EmulatedBackend):
    """The emulated kernel with one of dx's terms scaled: coef 2 counts it twice, 0 drops it."""

    def __init__(self, term, coef):
        super().__init__()
        self.term, self.coef = term, coef

    def run(self, call):
        r = super().run(call)
        if "x" not in r.grads:
            return r
        x = call.inputs["x"].astype(np.float64)
        dy = call.cotangents["y"].astype(np.float64)
        w = call.inputs.get("weight")
        g = dy * (1.0 if w is None else w.astype(np.float64))
        centred = call.op == "layer_norm"
        mean = x.mean(axis=-1, keepdims=True) if centred else 0.0
        rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + call.config["eps"])
        xhat = (x - mean) * rstd
        t = {"mean": -g.mean(axis=-1, keepdims=True), "proj": -xhat * (g * xhat).mean(axis=-1, keepdims=True)}
        dx = r.grads["x"].astype(np.float64) + (self.coef - 1) * rstd * t[self.term]
        return Returned(r.outputs, {**r.grads, "x": dx.astype(r.grads["x"].dtype)}, r.state)


@pytest.mark.parametrize("op_case, term, coef, words", [
    ("layer_norm/normal_f32_260x3", "mean", 2, "the mean(g) term counted twice: fitted coefficients 1.00, -2.00, -1.00"),
    ("layer_norm/normal_f64_9x7", "proj", 2, "the x_hat * mean(g x_hat) term counted twice"),
    ("rms_norm/normal_eps1e-05_f64_9x7", "proj", -1, "the x_hat * mean(g x_hat) term with its sign flipped"),
])
def test_dx_terms_explained(op_case, term, coef, words):
    r = check_case(DxTerm(term, coef), load_case(GOLDEN, op_case))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == "backward" and words in d["message"], d["message"]
    assert "backward" not in d["ruled_out"]


class Qmax240(EmulatedBackend):
    """norm_quant with float8 e4m3's maximum taken as 240 (e4m3fnuz's) instead of 448."""

    def run(self, call):
        orig = NQ.qmax
        NQ.qmax = lambda qd: 240.0 if qd == "float8_e4m3fn" else orig(qd)
        try:
            return super().run(call)
        finally:
            NQ.qmax = orig


def test_fp8_max_240_explained():
    r = check_case(Qmax240(), load_case(GOLDEN, "norm_quant/normal_rms_e4m3_dyn_f32_8x256"))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == "quant_scale", d["message"]
    assert "448/240" in d["message"] or "240/448" in d["message"]


def test_correct_kernel_explains_nothing():
    """The arithmetic search runs on failures only, and a correct kernel's dx fits the specification's
    own coefficients (1, -1, -1): nothing to explain."""
    from refnorm.check import explain
    case = load_case(GOLDEN, "layer_norm/normal_f32_260x3")
    st = case.steps[0]
    from refnorm.check.backends.base import Call
    from refnorm.registry import resolve_options
    got = EmulatedBackend().run(Call(case.op, case.dtype, resolve_options(case.op, case.config, case.dtype), st.training,
                                     st.inputs, st.cotangents)).grads["x"]
    assert explain.dx_terms(case, st.training, st.inputs, st.cotangents, got, np.full(got.shape, 1e-3)) is None


class DxWeight(EmulatedBackend):
    """The emulated kernel with dx's weight misplaced: left out of g ("none"), applied twice ("twice"), or
    applied again to the x_hat mean(g x_hat) term ("proj")."""

    def __init__(self, how):
        super().__init__()
        self.how = how

    def run(self, call):
        r = super().run(call)
        if "x" not in r.grads or call.inputs.get("weight") is None:
            return r
        x, dy = call.inputs["x"].astype(np.float64), call.cotangents["y"].astype(np.float64)
        w = call.inputs["weight"].astype(np.float64) + float(call.config.get("weight_offset", 0.0) or 0.0)
        centred = call.op == "layer_norm"
        mean = x.mean(axis=-1, keepdims=True) if centred else 0.0
        rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + (call.config.get("eps") or 1e-5))
        xh = (x - mean) * rstd
        g = {"none": dy, "twice": dy * w * w, "proj": dy * w}[self.how]
        t3 = xh * (g * xh).mean(axis=-1, keepdims=True) * (w if self.how == "proj" else 1.0)
        dx = rstd * (g - (g.mean(axis=-1, keepdims=True) if centred else 0.0) - t3)
        return Returned(r.outputs, {**r.grads, "x": dx.astype(r.grads["x"].dtype)}, r.state)


@pytest.mark.parametrize("how, words", [("none", "g = dy: the weight left out of dx"),
                                        ("twice", "g = dy w^2: the weight applied twice"),
                                        ("proj", "the x_hat mean(g x_hat) term times the weight again")])
@pytest.mark.parametrize("op_case", ["layer_norm/normal_f32_260x3", "rms_norm/normal_eps1e-05_f64_9x7"])
def test_dx_weight_misplaced_explained(op_case, how, words):
    r = check_case(DxWeight(how), load_case(GOLDEN, op_case))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == "backward" and words in d["message"], d["message"]


def test_dx_term_counted_twice_is_not_called_a_misplaced_weight():
    r = check_case(DxTerm("mean", 2), load_case(GOLDEN, "layer_norm/normal_f32_260x3"))
    assert "the weight" not in r.diagnosis["message"] and "counted twice" in r.diagnosis["message"]


def test_fit_ratio_of_integer_state_is_exact():
    """num_batches_tracked (int64) among the compared arrays: equal is a fit, unequal none, never a
    TypeError from the float rounding interval (which once ended the diagnosis of eval-mode batch_norm)."""
    from refnorm.check.explain import fit_ratio
    one = np.asarray(3, dtype=np.int64)
    assert fit_ratio(one, np.asarray(3, dtype=np.int64), np.zeros(())) == 0.0
    assert fit_ratio(one, np.asarray(4, dtype=np.int64), np.zeros(())) == float("inf")


def test_eval_batch_norm_failure_is_diagnosed_and_localized():
    """An eval-mode batch_norm kernel dropping eps (num_batches_tracked among the compared state): the
    arithmetic search's configuration candidates reach the integer state, and the diagnosis runs to its end
    (no error) and localizes every failing array."""
    import dataclasses
    from helpers import Wrapping
    from refnorm.check.backends import get_backend

    class EvalOff(Wrapping):
        name = "eval_off"
        inner = get_backend("numpy")

        def run(self, call):
            if call.training:
                return self.inner.run(call)
            return self.inner.run(dataclasses.replace(call, config={**call.config, "eps": 0.0}))

    c = check_case(EvalOff(), load_case(GOLDEN, "batch_norm/mean1e4_eval_f32_2x3x4"))
    assert c.status == "failed"
    assert "error" not in c.diagnosis, c.diagnosis.get("error")
    failed = {(a.part, a.name) for a in c.arrays if not a.passed}
    assert failed and failed <= {(w["part"], w["name"]) for w in c.diagnosis["where"]}
