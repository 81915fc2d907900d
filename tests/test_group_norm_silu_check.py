"""group_norm_silu in the checker (issue 36): its derived bounds hold a correct fused float32 kernel (the
emulated one, tests/planted/emulated.py) and torch's composite F.silu(F.group_norm(x)) with 0 false alarms,
are not vacuous where the SiLU is flat (a kernel flushing silu(-20) to zero fails), and every planted SiLU
pitfall fails at least one golden case and is named by the diagnosis."""
from __future__ import annotations

import os

import numpy as np
import pytest

from planted import report
from refnorm.check import run_check
from refnorm.check.backends.base import Call, Returned
from refnorm.check.core import read_expected_failures
from refnorm.cli import main

from helpers import Wrapping

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
OP = "group_norm_silu"
OWN = ("silu_before_affine", "silu_grad_at_xhat", "silu_grad_at_output", "gns_strided_groups", "one_pass_clamp")


@pytest.mark.parametrize("mutation", OWN)
def test_each_planted_pitfall_fails_and_is_named(mutation):
    o = report.run(mutation, OP)
    assert o.caught, f"{mutation} passes every golden case of {OP}"
    named = [c for c in o.caught if c.diagnosis and c.diagnosis.get("matched") == mutation]
    wrong = [c.id for c in o.caught if c.diagnosis and c.diagnosis.get("matched") not in (None, mutation)]
    assert not wrong, f"{mutation} misnamed on {wrong}"
    assert len(named) >= 0.6 * len(o.caught), (mutation, len(named), len(o.caught))


def test_the_strided_groups_kernel_fails_in_channels_last_memory():
    """The wrong channel order of a channels_last kernel's groups, judged with the activations handed in
    channels_last memory (refnorm check --layout channels_last)."""
    from planted.emulated import EmulatedBackend
    rep = run_check(EmulatedBackend("gns_strided_groups"), GOLDEN, ops=[OP], layout="channels_last")
    failed = [c for c in rep.cases if c.status == "failed"]
    assert failed and all(c.diagnosis and c.diagnosis.get("matched") in ("gns_strided_groups", None) for c in failed)
    assert any(c.diagnosis and c.diagnosis.get("matched") == "gns_strided_groups" for c in failed)
    good = run_check(EmulatedBackend(None), GOLDEN, ops=[OP], layout="channels_last")
    assert all(c.status in ("passed", "partial", "skipped") for c in good.cases), \
        [(c.id, c.status) for c in good.cases if c.status not in ("passed", "partial", "skipped")]


class _Flush(Wrapping):
    """The correct emulated kernel, but y flushed to zero where the pre-activation p < ``below`` (a kernel
    that treats the SiLU's tail as zero)."""
    name = "flush-tail"

    def __init__(self, below):
        from planted.emulated import EmulatedBackend
        self.inner = EmulatedBackend(None)
        self.below = below

    def run(self, call: Call) -> Returned:
        import refnorm
        r = self.inner.run(call)
        x = {k: np.asarray(v, dtype=np.float64) for k, v in call.inputs.items()}
        gn = refnorm.evaluate("group_norm", x, config={k: call.config[k] for k in ("num_groups", "eps")})
        tail = gn.outputs["y"] < self.below
        y = np.where(tail, np.zeros_like(r.outputs["y"]), r.outputs["y"])
        return Returned({**r.outputs, "y": y}, r.grads)


def test_a_kernel_flushing_the_tail_fails_where_the_sigmoid_does_not_overflow():
    """silu(-20) = -4e-8 is a float32 number to be computed to its relative precision: returning 0 there
    fails (the bound is |silu'(p)| E_p plus the SiLU's own relative error, not an absolute floor), while at
    p ~ -90 (exp(-p) overflows float32) the same zero is what a correct kernel returns, and passes."""
    ids = [f"{OP}/normal_g4_neg20_f32_2x8x5x7", f"{OP}/normal_g2_neg90_f32_2x4x6x5"]
    for below, want in ((-15.0, ["failed", "failed"]), (-88.8, ["passed", "passed"])):   # exp(88.8) > FLT_MAX
        rep = run_check(_Flush(below), GOLDEN, case_ids=ids)
        got = {c.id: c.status for c in rep.cases}
        assert [got[i] for i in ids] == want, (below, [(c.id, c.status, c.message[:120]) for c in rep.cases])


def test_torch_cpu_composite_passes_every_case_but_its_known_defects(capsys):
    known = os.path.join(ROOT, "known_failures", "torch-cpu.txt")
    rc = main(["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--ops", OP, "--expect-failures", known,
               "--no-progress"])
    text = capsys.readouterr().out
    assert rc in (0, 4), text[-3000:]
    assert " 0 failed, 0 errors" in text and "1 expected failures" in text, text[-1500:]
    entries = [i for i in read_expected_failures(known) if i.startswith(OP + "/")]
    assert entries == [f"{OP}/normal_noweight_g3_f32_3x6x7"]


def test_torch_contract_and_the_cuda_refusal():
    from refnorm.check.backends.torch_backend import TorchBackend
    cpu = TorchBackend("cpu")
    assert cpu.contract_for(OP, "bfloat16", {"x": 0, "weight": 0}).kind == "epi_d"
    assert cpu.contract_for(OP, "float32", {"x": 0, "weight": 0}).kind == "strict"
    call = Call(OP, "float16", {"num_groups": 2, "eps": 1e-5}, True,
                {"x": np.zeros((2, 4, 3), np.float16), "weight": np.ones(4, np.float16)})
    reason = TorchBackend("cuda").supports(call)
    assert reason is None or "torch-cuda-caseparams" in reason or "CUDA" in reason
    from refnorm.check.backends.jax_backend import NO_JAX
    from refnorm.check.backends.onnxruntime_backend import NO_ONNX
    assert "GroupNorm + SiLU" in NO_JAX[OP] and "GroupNorm + SiLU" in NO_ONNX[OP]


def test_the_variants_unchanged_are_the_reference():
    """The pitfall module's two ways of computing (its own equations, group_norm's engine on the pre-activation)
    give the reference when nothing is changed, so a match is the change's and nothing else's."""
    import refnorm
    from refnorm.pitfalls import group_norm_silu as V
    from refnorm.pitfalls._engine import Mods
    rng = np.random.default_rng(36)
    ins = {"x": rng.standard_normal((2, 6, 3, 2)) + 3, "weight": rng.standard_normal(6), "bias": rng.standard_normal(6)}
    cfg, cot = {"num_groups": 3, "eps": 1e-5}, {"y": rng.standard_normal((2, 6, 3, 2))}
    ref = refnorm.evaluate(OP, ins, config=cfg, grad_outputs=cot)
    for res in (V._evaluate(ins, cfg, cot, "float64"),
                V._on_pre_activation(Mods())(ins, cfg, cot, "float64", {}, True)):
        for part in ("outputs", "grads"):
            for k, want in getattr(ref, part).items():
                np.testing.assert_allclose(getattr(res, part)[k], want, rtol=1e-12, atol=1e-14, err_msg=k)
    order = V.strided_order(6, 3)
    assert order.tolist() == [0, 3, 1, 4, 2, 5]          # group g: the channels c % 3 == g


def test_random_calls_of_a_correct_kernel_and_of_torch_are_within_their_bounds():
    """Hypothesis calls (every dtype and regime, the far-negative bias too): the emulated fused float32 kernel
    (strict) and torch's composite (its declared contract) pass (torch's own bias-without-weight raise and
    F.group_norm's one-value check aside). 800+ such calls passed when this test was written."""
    from hypothesis import HealthCheck, given, settings

    from planted.emulated import EmulatedBackend
    from refnorm.check.backends.base import complete_config
    from refnorm.check.backends.torch_backend import Refused, TorchBackend
    from refnorm.strategies import inputs
    from refnorm.testing import assert_close_to_reference
    backends = [EmulatedBackend(None)]
    if TorchBackend("cpu").available() is None:
        backends.append(TorchBackend("cpu"))

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(inputs(OP, max_side=6))
    def check(d):
        call = Call(OP, d["dtype"], complete_config(OP, d["config"]), True, d["inputs"], d["cotangents"], {})
        for be in backends:
            try:
                ret = be.run(call)
            except (Refused, RuntimeError) as e:
                assert "does not have a device" in str(e) or "more than 1 value" in str(e), e
                continue
            assert_close_to_reference(OP, d["inputs"], ret.outputs, config=call.config, grads=ret.grads,
                                      cotangents=d["cotangents"], dtype=d["dtype"], contract=be.contract(call),
                                      allow_partial=True)
    check()


@pytest.mark.parametrize("dtype,layout", [("float32", "contiguous"), ("bfloat16", "channels_last"),
                                          ("float16", "contiguous"), ("float64", "channels_last")])
def test_the_torch_composite_is_what_a_user_writes_bit_for_bit(dtype, layout):
    """The adapter's composite (native_group_norm for its statistics, then F.silu) returns the very bits of
    F.silu(F.group_norm(x, G, w, b, eps)), y and every gradient, in C order and in channels_last memory."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from refnorm.check.backends.torch_backend import TorchBackend
    from refnorm.check.precision import round_to
    from refnorm.golden.layouts import apply
    rng = np.random.default_rng(7)
    x = round_to(3 + rng.standard_normal((2, 8, 5, 3)), dtype)
    w, b = round_to(1 + rng.standard_normal(8) / 2, dtype), round_to(rng.standard_normal(8), dtype)
    dy = round_to(rng.standard_normal(x.shape), dtype)
    call = Call(OP, dtype, {"num_groups": 4, "eps": 1e-5}, True, {"x": apply(layout, x), "weight": w, "bias": b},
                {"y": apply(layout, dy)})
    ret = TorchBackend("cpu", param_dtype="case").run(call)
    tdt = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    tt = lambda a: torch.tensor(np.asarray(a, dtype=np.float64), dtype=tdt[dtype])          # noqa: E731
    xt, wt, bt = (tt(a).requires_grad_(True) for a in (x, w, b))
    cl = (lambda t: t.contiguous(memory_format=torch.channels_last)) if layout == "channels_last" else (lambda t: t)
    y = F.silu(F.group_norm(cl(xt), 4, wt, bt, 1e-5))
    gx, gw, gb = torch.autograd.grad(y, (xt, wt, bt), cl(tt(dy)))      # the cotangent in the output's memory order
    as64 = lambda v: np.asarray(v, dtype=np.float64)                                          # noqa: E731
    for got, want in ((ret.outputs["y"], y), (ret.grads["x"], gx), (ret.grads["weight"], gw), (ret.grads["bias"], gb)):
        np.testing.assert_array_equal(as64(got), want.detach().double().numpy())
