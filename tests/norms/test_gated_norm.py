"""gated_norm (gated RMSNorm / LayerNorm, Mamba2's RMSNormGated): the gradients against finite differences,
the conventions against an independent torch transcription of mamba_ssm's reference (rms_norm_ref), bad input
named, torch-cpu's composite with 0 false alarms, and each pitfall variant failing golden cases and named."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import refnorm
from refnorm.check.core import run_check
from refnorm.errors import ConfigError, ShapeError

from helpers import VariantBackend, central_differences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "golden")
CONFIGS = list(itertools.product(("rms_norm", "layer_norm"), (False, True), (None, 3), (True, False)))


def _inputs(rng, shape=(2, 3, 6), bias=True):
    H = shape[-1]
    return {"x": rng.standard_normal(shape) + 0.5, "z": 2 * rng.standard_normal(shape),
            "weight": 1 + 0.5 * rng.standard_normal(H), **({"bias": rng.standard_normal(H)} if bias else {})}


@pytest.mark.parametrize("norm,nbg,gs,bias", CONFIGS)
def test_gradients_match_finite_differences(norm, nbg, gs, bias):
    rng = np.random.default_rng(36)
    inp = _inputs(rng, bias=bias)
    cfg = {"norm": norm, "norm_before_gate": nbg, "group_size": gs, "eps": 1e-3}
    dy = rng.standard_normal(inp["x"].shape)
    r = refnorm.evaluate("gated_norm", inp, config=cfg, grad_outputs={"y": dy})
    assert set(r.grads) == set(inp)
    loss = lambda d: float((refnorm.evaluate("gated_norm", d, config=cfg).outputs["y"] * dy).sum())  # noqa: E731
    for k in inp:
        fd = central_differences(loss, inp, k)
        assert np.abs(fd - r.grads[k]).max() <= 1e-7 * np.abs(fd).max(), (k, norm, nbg, gs, bias)


def test_conventions_match_an_independent_transcription_of_mambas_reference():
    """mamba_ssm's rms_norm_ref (layernorm_gated.py), its semantics written in torch float64: the gate before
    the norm unless norm_before_gate, the groups of group_size, the bias inside the gated product."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(7)
    for norm, nbg, gs, bias in CONFIGS:
        inp = _inputs(rng, (4, 12), bias)
        t = {k: torch.tensor(v) for k, v in inp.items()}
        x = t["x"] if nbg else t["x"] * F.silu(t["z"])
        xg = x.reshape(4, 12 // (gs or 12), gs or 12)
        if norm == "layer_norm":
            xg = xg - xg.mean(-1, keepdim=True)
        out = (xg / torch.sqrt(xg.square().mean(-1, keepdim=True) + 1e-5)).reshape(4, 12) * t["weight"]
        out = out + t["bias"] if bias else out
        out = out * F.silu(t["z"]) if nbg else out
        got = refnorm.evaluate("gated_norm", inp, config={"norm": norm, "norm_before_gate": nbg, "group_size": gs})
        np.testing.assert_allclose(got.outputs["y"], out.numpy(), rtol=1e-12, atol=1e-13)


def test_defaults_are_mamba2s_layer():
    assert dict(refnorm.get("gated_norm").options) == {"norm": "rms_norm", "norm_before_gate": False,
                                                       "group_size": None, "eps": 1e-5}


def test_the_gate_saturates_without_overflow_or_cancellation():
    from refnorm.specs.gated_norm import silu
    z = np.array([-800.0, -60.0, 0.0, 60.0, 800.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):      # exp(-800) underflows to 0: fine
        s, ds = silu(z)
    assert s[0] == 0.0 and s[-1] == 800.0 and s[2] == 0.0 and ds[2] == 0.5
    assert s[1] == pytest.approx(-60.0 * np.exp(-60.0), rel=1e-14) and ds[-2] == pytest.approx(1.0, abs=1e-20)
    assert ds[1] == pytest.approx(np.exp(-60.0) * (1 - 60.0), rel=1e-12)


@pytest.mark.parametrize("inputs,config,err,match", [
    ({"z": np.ones((2, 5))}, {}, ShapeError, r"input 'z' has shape \(2, 5\); expected x's shape \(2, 6\)"),
    ({"weight": np.ones(5)}, {}, ShapeError, r"input 'weight' has shape \(5,\); expected \(hidden,\) = \(6,\)"),
    ({"bias": np.ones((1, 6))}, {}, ShapeError, r"input 'bias' has shape \(1, 6\)"),
    ({}, {"group_size": 4}, ConfigError, r"group_size=4 does not divide the hidden dimension 6"),
    ({}, {"group_size": 0}, ConfigError, r"group_size=0; expected None"),
    ({}, {"group_size": True}, ConfigError, r"group_size=True; expected None"),
    ({}, {"norm": "group_norm"}, ConfigError, r"norm='group_norm'; expected one of 'rms_norm', 'layer_norm'"),
    ({}, {"norm_before_gate": 1}, ConfigError, r"norm_before_gate=1; expected True"),
    ({}, {"eps": -1.0}, ConfigError, r"eps=-1.0; expected a finite number >= 0"),
])
def test_bad_input_is_named(inputs, config, err, match):
    base = {"x": np.ones((2, 6)), "z": np.ones((2, 6)), "weight": np.ones(6)}
    with pytest.raises(err, match=match):
        refnorm.evaluate("gated_norm", {**base, **inputs}, config=config)


def test_torch_cpu_composite_passes_every_golden_case():
    pytest.importorskip("torch")
    from refnorm.check.backends.torch_backend import TorchBackend
    rep = run_check(TorchBackend("cpu"), GOLDEN, ops=["gated_norm"])
    s = rep.summary()
    assert s["failed"] == 0 and s["errors"] == 0 and s["skipped"] == 0, [(c.id, c.message) for c in rep.cases]
    assert s["passed"] >= 20 and {c.dtype for c in rep.cases if c.status == "passed"} == \
        {"float64", "float32", "float16", "bfloat16"}


@pytest.mark.parametrize("vid,pid,arrays,least", [
    ("gate_wrong_side", "R-gateside", "output y", 20),
    ("no_dsilu", "R-dsilu", "grad z", 20),
    ("bwd_group_size", "R-bwdgroup", "grad x", 12),
    ("dweight_no_gate", "R-dwgate", "grad weight", 6),
])
def test_each_pitfall_fails_golden_cases_and_is_named(vid, pid, arrays, least):
    rep = run_check(VariantBackend("gated_norm", vid), GOLDEN, ops=["gated_norm"])
    failed = [c for c in rep.cases if c.status == "failed"]
    assert len(failed) >= least, [(c.id, c.status) for c in rep.cases]
    assert any(arrays in c.message for c in failed), [c.message for c in failed]
    for c in failed:
        assert c.diagnosis["matched"] == vid and c.diagnosis["pitfalls"] == [pid], (c.id, c.diagnosis["message"])
    assert all(c.status in ("passed", "partial") for c in rep.cases if c not in failed)
