"""dyt and poly_norm through the checker (issue 36): the golden cases' hard regimes, the derived bounds, the torch
composites, the planted pitfalls.

* the golden set holds the hard regimes: dyt with alpha * x saturating tanh and a tiny alpha in every 16-bit
  dtype, alpha's gradient over 65536 terms; poly_norm float16 rows whose x^3 overflows float16;
* the torch composites (torch_composites.dyt / .poly_norm) pass every golden case: 0 failures, and the only
  arrays left unconstrained are dyt's gradients on rows where tanh saturates everywhere (dx's true values
  are below 1e-100 there, and a correct float32 tanh may return 1 - 2^-24: its bound is honest);
* the emulated float32 kernel passes every case; each planted mutation fails at least one case and the
  diagnosis names its variant there;
* the bounds: dalpha's carries g(N) for N = x.size (a full reduction), and a result one float32 ulp of t
  off in dx at a saturated element is within the bound while one float16 ulp of t is not.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from planted import report
from planted.pitfalls import SUPPLEMENTARY
import refnorm.pitfalls as P
from refnorm.check import bounds as B
from refnorm.check.backends.base import Contract
from refnorm.check.diagnosis import matched_ids
from refnorm.check.precision import UNIT_ROUNDOFF, gamma
from refnorm.golden import cases as C, commands, store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
OPS = ("dyt", "poly_norm")
MUTATIONS = [(p.mutation, p.ops[0]) for p in SUPPLEMENTARY if p.ops[0] in OPS]


def _loaded(op):
    man = store.read_manifest(GOLDEN)
    return [commands.load_case(GOLDEN, e["id"], manifest=man) for e in man["cases"] if e["case"]["op"] == op]


def test_the_hard_regimes_are_in_the_golden_set():
    rows = [c for c in C.CASES if c.op == "dyt"]
    for dt in C.DTYPES:
        assert any(c.dtype == dt and c.param_regimes.get("alpha") == "alpha_big" for c in rows), dt
    for dt in ("float32", "float16", "bfloat16"):
        assert any(c.dtype == dt and c.param_regimes.get("alpha") == "alpha_tiny" for c in rows), dt
    assert max(np.prod(c.inputs["x"]) for c in rows) >= 65536
    saturated = 0
    for case in _loaded("dyt"):
        st = case.steps[0]
        z = np.abs(np.asarray(st.inputs["alpha"], dtype=np.float64) * np.asarray(st.inputs["x"], dtype=np.float64))
        saturated += bool((z > 9).any() and (z < 9).any())           # saturated and unsaturated in one case
    assert saturated >= 4
    over = [case.id for case in _loaded("poly_norm") if case.dtype == "float16"
            and np.max(np.abs(np.asarray(case.steps[0].inputs["x"], dtype=np.float64))) > 40.3]
    assert len(over) >= 3, over


@pytest.mark.parametrize("param_dtype", ["float32", "case"])
def test_torch_composites_pass_every_golden_case(param_dtype):
    pytest.importorskip("torch")
    from refnorm.check.backends.torch_backend import TorchBackend
    from refnorm.check.core import run_check
    rep = run_check(TorchBackend(param_dtype=param_dtype), GOLDEN, ops=list(OPS))
    assert len(rep.cases) == len([c for c in C.CASES if c.op in OPS])
    bad = [(c.id, c.status, c.message[:200]) for c in rep.cases if c.status not in ("passed", "partial")]
    assert not bad, bad
    partial = [c for c in rep.cases if c.status == "partial"]
    assert all(c.id.startswith("dyt/") and "unconstrained" in c.message and "unchecked" not in c.message
               for c in partial), [(c.id, c.message) for c in partial]
    assert len(partial) <= 4


@pytest.mark.parametrize("op", OPS)
def test_the_emulated_kernel_passes_every_case(op):
    o = report.run(None, op)
    assert o.cases and all(c.status in ("passed", "partial") for c in o.cases), \
        [(c.id, c.status, c.message[:200]) for c in o.cases if c.status not in ("passed", "partial")]


@pytest.mark.parametrize("mutation,op", MUTATIONS, ids=[m for m, _ in MUTATIONS])
def test_each_planted_pitfall_fails_and_is_named(mutation, op):
    assert len(MUTATIONS) == 8
    o = report.run(mutation, op)
    failed = [c for c in o.cases if c.status == "failed"]
    assert failed, f"{mutation} passes every golden case of {op}"
    v = [v for v in P.variants(op) if v.id == mutation][0]
    named = [c for c in failed if c.diagnosis and set(v.pitfall_ids) <= matched_ids(c.diagnosis)]
    assert named, [(c.id, (c.diagnosis or {}).get("message", "")[:200]) for c in failed[:3]]
    assert len(named) >= len(failed) / 2, (len(named), len(failed))
    assert all(c.diagnosis["mechanism"] == v.mechanism for c in named)


def _dyt_bounds(x, alpha, dy, contract="strict", dt="float16"):
    return B.bounds("dyt", inputs={"x": x, "alpha": np.array([alpha])}, config={}, training=True,
                    cotangents={"y": dy}, state={}, ref_state={}, contract=Contract(contract, "block"),
                    case_dtype=dt)


def test_dalpha_bound_is_a_full_reduction():
    rng = np.random.default_rng(0)
    u = UNIT_ROUNDOFF["float32"]
    for shape in ((4, 8), (64, 128)):
        x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
        E = float(_dyt_bounds(x, 0.5, dy)["grads"]["alpha"][0])
        D = 1 / np.cosh(0.5 * x) ** 2
        assert E >= gamma(x.size, "block") * u * float(np.abs(dy * D * x).sum())   # g(N), N = every element


def test_a_float32_tanh_may_lose_tanh_prime_where_it_saturates_a_float16_one_may_not():
    x, dy = np.array([[12.0, -15.0, 0.5]]), np.ones((1, 3))
    E = _dyt_bounds(x, 1.0, dy)["grads"]["x"]
    t32 = 1.0 - 2.0 ** -24                   # the float32 below 1: a tanh within 2 ulps may return it at 12
    assert (1.0 - t32 ** 2) <= E[0, 0]
    t16 = 1.0 - 2.0 ** -11                   # t rounded to float16 first: 1 - t^2 ~ 2^-10
    assert (1.0 - t16 ** 2) > E[0, 0] * 100


def test_poly_norm_bounds_cover_each_array_and_grow_with_the_reduction():
    rng = np.random.default_rng(1)
    E = {}
    for n in (16, 4096):
        x, dy = rng.standard_normal((2, n)), rng.standard_normal((2, n))
        b = B.bounds("poly_norm", inputs={"x": x, "weight": np.array([0.5, 1.0, -0.7]), "bias": np.array([0.1])},
                     config={"eps": 1e-6}, training=True, cotangents={"y": dy}, state={}, ref_state={},
                     contract=Contract("strict", "block"), case_dtype="float32")
        assert set(b["outputs"]) == {"y"} and set(b["grads"]) == {"x", "weight", "bias"}
        assert all(np.all(np.isfinite(v)) and np.all(v > 0) for part in b.values() for v in part.values())
        E[n] = b["grads"]["bias"][0] / np.abs(dy).sum()
    assert E[4096] > E[16]                  # g(N): the bias gradient sums every element


@pytest.mark.parametrize("kind", ["strict", "stats_d", "epi_d"])
@pytest.mark.parametrize("op", OPS)
def test_bounds_in_every_contract_widen_monotonically_and_forward_only_has_y_alone(op, kind):
    rng = np.random.default_rng(2)
    x, dy = rng.standard_normal((3, 8)), rng.standard_normal((3, 8))
    inputs = {"x": x, "alpha": np.array([2.0])} if op == "dyt" else {"x": x, "weight": np.array([1.0, -0.5, 2.0])}

    def bounds(kind, cots):
        return B.bounds(op, inputs=inputs, config={}, training=True, cotangents=cots, state={}, ref_state={},
                        contract=Contract(kind, "block"), case_dtype="bfloat16")
    fwd = bounds(kind, {})
    assert set(fwd["outputs"]) == {"y"} and fwd["grads"] == {}
    both, strict = bounds(kind, {"y": dy}), bounds("strict", {"y": dy})
    for part in ("outputs", "grads"):
        for k, E in both[part].items():
            assert np.all(np.asarray(E) >= np.asarray(strict[part][k])), (part, k)
            assert np.all(np.isfinite(E)), (part, k)
