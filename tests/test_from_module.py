"""from_module: an nn.Module instance checked in one line, its parameters set from each case (issue 34,
item 12), on modules written as their libraries write them (examples/torch_kernels.py): HF-style
LlamaRMSNorm and GemmaRMSNorm, an apex-style fused LayerNorm."""
from __future__ import annotations

import os

import numpy as np
import pytest

from refnorm.check import Call, run_check
from refnorm.check.backends import complete_config, from_module
from refnorm.testing import assert_backend_passes, assert_close_to_reference

torch = pytest.importorskip("torch")
import examples.torch_kernels as K  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")
LOW = {"float32": "strict", "float64": "strict", "float16": "epi_d", "bfloat16": "epi_d"}


def test_llama_rms_norm_module_in_one_line():
    """eps read from the module (variance_epsilon), normalized_shape from its weight; the case's weight
    replaces the module's (which stays as it was); the other eps and shapes are skipped with the reason.
    HF rounds x_hat to the input dtype before the weight: epi_d for float16/bfloat16 (strict fails it)."""
    m = K.LlamaRMSNorm(100, eps=1e-5)
    before = m.weight.detach().clone()
    rep = assert_backend_passes(from_module(m, "rms_norm", contract=LOW, dtypes=["float32", "bfloat16"]),
                                ops=["rms_norm"], golden=GOLDEN)
    assert rep.summary()["passed"] >= 5 and torch.equal(m.weight.detach(), before)
    reasons = {c.id: c.message for c in rep.cases if c.status == "skipped"}
    assert "option eps=1e-12: torch:LlamaRMSNorm fixes eps=1e-05" in reasons["rms_norm/one_std1e-3_eps1e-12_f32_6x100"]
    assert any("normalized_shape=[7]: torch:LlamaRMSNorm fixes normalized_shape=[100]" in r for r in reasons.values())
    strict = run_check(from_module(m, "rms_norm", contract="strict", dtypes=["bfloat16"]), GOLDEN, ops=["rms_norm"],
                       diagnose=False)
    assert any(c.status == "failed" for c in strict.cases)
    # a declared eps wins over the attribute; a module without that eps is judged and fails
    wrong = run_check(from_module(K.LlamaRMSNorm(100, eps=0.3), "rms_norm", contract="strict", dtypes=["float32"],
                                  fixed={"eps": 1e-5}), GOLDEN, ops=["rms_norm"], diagnose=False)
    assert any(c.status == "failed" for c in wrong.cases)


def test_gemma_rms_norm_weight_offset_and_parameter_gradients():
    """GemmaRMSNorm stores the weight as an offset: fixed={"weight_offset": 1.0} says so; the call judged
    directly (outputs and gradients, the weight's from autograd on the case's tensor) passes, and golden
    cases with weight_offset=0 are skipped, naming it."""
    b = from_module(K.GemmaRMSNorm(64, eps=1e-6), "rms_norm", contract="strict", fixed={"weight_offset": 1.0})
    rng = np.random.default_rng(0)
    ins = {"x": rng.standard_normal((5, 64)).astype(np.float32),
           "weight": (0.5 * rng.standard_normal(64)).astype(np.float32)}
    cot = {"y": rng.standard_normal((5, 64)).astype(np.float32)}
    cfg = {"normalized_shape": [64], "eps": 1e-6, "weight_offset": 1.0}
    assert b.supports(Call("rms_norm", "float32", complete_config("rms_norm", cfg), True, ins, cot)) is None
    got = b.run(Call("rms_norm", "float32", complete_config("rms_norm", cfg), True, ins, cot))
    assert set(got.grads) == {"x", "weight"}
    arrays = assert_close_to_reference("rms_norm", ins, dict(got.outputs), config=cfg, cotangents=cot,
                                       grads=dict(got.grads))
    assert {(a.part, a.name) for a in arrays} == {("outputs", "y"), ("grads", "x"), ("grads", "weight")}
    with pytest.raises(AssertionError):                          # judged as a plain weight, it fails
        assert_close_to_reference("rms_norm", ins, dict(got.outputs), config={**cfg, "weight_offset": 0.0})
    gemma = from_module(K.GemmaRMSNorm(100, eps=1e-5), "rms_norm", contract="strict", fixed={"weight_offset": 1.0})
    rep = run_check(gemma, GOLDEN, ops=["rms_norm"], dtypes=["float32"])
    assert {c.status for c in rep.cases} == {"skipped"}
    assert any("weight_offset=0.0: torch:GemmaRMSNorm fixes weight_offset=1.0" in c.message for c in rep.cases)


def test_apex_style_fused_layer_norm_module():
    """A module calling a fused autograd Function with self.weight/self.bias: normalized_shape and eps from
    its attributes, both parameters set from each case; a case without bias (the module always adds its
    own) is skipped; a wrong module fails."""
    m = K.FusedLayerNorm(100)
    b = from_module(m, "layer_norm", contract={"float64": "strict", "float32": "strict"})
    assert b.signature == ("x", "weight", "bias")
    rep = assert_backend_passes(b, ops=["layer_norm"], golden=GOLDEN, allow_partial=True)
    assert rep.summary()["passed"] >= 3
    reasons = [c.message for c in rep.cases if c.status == "skipped"]
    assert any("declares no contract for bfloat16" in r for r in reasons)

    class Shifted(K.FusedLayerNorm):
        def forward(self, x):
            return super().forward(x) + 1e-3
    bad = run_check(from_module(Shifted(100), "layer_norm", contract="strict", dtypes=["float32"]), GOLDEN,
                    ops=["layer_norm"], diagnose=False)
    assert any(c.status == "failed" for c in bad.cases)


def test_from_module_refuses_bad_arguments_by_name():
    m = K.LlamaRMSNorm(8)
    with pytest.raises(TypeError, match="not a torch.nn.Module instance"):
        from_module(K.LlamaRMSNorm, "rms_norm", contract="strict")
    with pytest.raises(ValueError, match="params 'weight' -> 'scale'"):
        from_module(m, "rms_norm", contract="strict", params={"weight": "scale"})
    with pytest.raises(ValueError, match=r"fixed \['epsilon'\]"):
        from_module(m, "rms_norm", contract="strict", fixed={"epsilon": 1e-6})
    with pytest.raises(ValueError, match="carries state"):
        from_module(torch.nn.BatchNorm1d(8), "batch_norm", contract="strict")
