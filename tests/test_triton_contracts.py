"""examples/triton_contracts.py: a Llama-casting RMSNorm and a float16-residual prenorm add+norm, each
declared by its precise contract, pass refnorm's check in Triton's interpreter (TRITON_INTERPRET=1, no
GPU); the strict preset fails them (they do round); the planted bugs (rstd held in float16, dweight
partials in float16, the residual sum rounded before the forward normalizes it) fail the precise contract
on 16-bit cases, where epi_d, the only preset admitting the correct kernels, let them through.

Kept fast for CI: the golden cases of at most 1000 elements. Needs triton (CI: triton==3.9.0)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import GOLDEN, small_case_ids as _small, triton_example

torch, E = triton_example("examples.triton_contracts")

from refnorm.check.core import run_check  # noqa: E402

LOW = ("float16", "bfloat16")


def _run(backend, ids):
    rep = run_check(backend, GOLDEN, case_ids=ids)
    return rep, [c for c in rep.cases if c.status in ("failed", "error")]


def test_the_llama_rmsnorm_passes_its_precise_contract_and_fails_strict():
    ids = _small("rms_norm")
    rep, bad = _run(E.llama_backend(), ids)
    assert not bad, [(c.id, c.message) for c in bad]
    judged = [c for c in rep.cases if c.status in ("passed", "partial")]
    assert {c.dtype for c in judged} == {"float32", "float16", "bfloat16"} and len(judged) >= 30
    assert all(c.contract == "rounds xhat=input, dy_xhat=input; reduction block" for c in judged)
    _, bad = _run(E.llama_backend("strict"), _small("rms_norm", LOW))
    assert len(bad) >= 10, "strict admits x_hat rounded to the input dtype"


def test_the_llama_rmsnorms_rstd_in_float16_fails_its_precise_contract_on_float16_cases():
    ids = _small("rms_norm", ("float16",))
    _, bad = _run(E.llama_backend(bug="rstd_f16"), ids)
    assert bad, f"rstd held in float16 passed every float16 case under {E.LLAMA}"
    _, bad_epi = _run(E.llama_backend("epi_d", bug="rstd_f16"), ids)
    assert len(bad) > len(bad_epi), (len(bad), len(bad_epi))          # epi_d let (some of) it through


def _llama_call(bug, M=512, N=8):
    """One float16 call, rows 3 + N(0, 1) (x_hat of one sign) and the cotangent of loss = y.sum(): dweight's
    partial sum grows with the rows, as the float16 accumulator's rounding does."""
    rng = np.random.default_rng(0)
    x = torch.tensor(3 + rng.standard_normal((M, N)), dtype=torch.float16, requires_grad=True)
    w = torch.tensor(1 + 0.1 * rng.standard_normal(N), dtype=torch.float16, requires_grad=True)
    y = E.llama_rms_norm(x, w, normalized_shape=[N], eps=1e-5, bug=bug)
    y.backward(torch.ones_like(y))
    f = lambda t: t.detach().numpy()                                    # noqa: E731
    return ({"x": f(x), "weight": f(w)}, {"y": f(y)}, {"y": np.ones((M, N), np.float16)},
            {"x": f(x.grad), "weight": f(w.grad)})


@pytest.mark.parametrize("contract, caught", [(E.LLAMA, True), ("epi_d", False)])
def test_the_llama_rmsnorms_float16_dweight_partial_fails_its_precise_contract(contract, caught):
    from refnorm.testing import assert_close_to_reference
    cfg = {"normalized_shape": [8], "eps": 1e-5}
    ins, outs, cots, grads = _llama_call(None)
    assert_close_to_reference("rms_norm", ins, outs, config=cfg, cotangents=cots, grads=grads, contract=E.LLAMA)
    ins, outs, cots, grads = _llama_call("dw_f16")
    if caught:
        with pytest.raises(AssertionError, match="grad weight"):
            assert_close_to_reference("rms_norm", ins, outs, config=cfg, cotangents=cots, grads=grads,
                                      contract=contract)
    else:
        assert_close_to_reference("rms_norm", ins, outs, config=cfg, cotangents=cots, grads=grads, contract=contract)


def test_the_prenorm_add_norm_passes_its_precise_contract_and_fails_strict():
    ids = _small("add_norm")
    rep, bad = _run(E.prenorm_backend(), ids)
    assert not bad, [(c.id, c.message) for c in bad]
    assert sum(c.status in ("passed", "partial") and c.dtype in LOW for c in rep.cases) >= 4
    _, bad = _run(E.prenorm_backend("strict"), ids)
    assert bad, "strict admits the backward recomputing x_hat from the rounded residual"


def test_the_residual_sum_rounded_before_the_norm_fails_the_precise_contract_not_epi_d():
    ids = _small("add_norm", LOW)
    _, bad = _run(E.prenorm_backend(bug="sum_in_d"), ids)
    assert bad, "the residual sum rounded to the input dtype before the forward passed the precise contract"
    _, bad_epi = _run(E.prenorm_backend("epi_d", bug="sum_in_d"), ids)
    assert not bad_epi, "epi_d was expected to admit it (what the precise contract is for)"


def test_the_tutorial_layer_norm_declares_plain_statistics_and_passes_tighter_bounds():
    """examples/triton_norms.py's LayerNorm computes two-pass plain sums (tiles summed as trees, the tiles
    serially: within the block model) and forms x_hat per element before dweight's sum: declared so
    (``acc mean=float32/block, var=float32/block``), it passes every small golden case, and the tighter
    bounds leave no more arrays unconstrained than strict does."""
    from examples import triton_norms as TN
    from refnorm.check.backends import with_contract
    ids = _small("layer_norm")
    plain, bad = _run(with_contract(TN.layer_norm_backend, "acc mean=float32/block, var=float32/block"), ids)
    assert not bad, [(c.id, c.message) for c in bad]
    strict, _ = _run(TN.layer_norm_backend, ids)
    n_unc = lambda rep: sum(c.verdicts()["unconstrained"] for c in rep.cases)     # noqa: E731
    assert n_unc(plain) <= n_unc(strict) and plain.summary()["passed"] >= strict.summary()["passed"]
