"""Contracts as rounding points (refnorm/check/contracts.py, bounds/points.py; docs/tolerances.md,
"Contracts as rounding points"): the model, its one-line syntax and errors, and the proof that the
bounds are those of exactly the declared arithmetic: kernels emulated with exactly the declared
roundings (tests/contract_kernels.py) pass at many seeds, shapes and regimes, and the same kernel with
one undeclared rounding more fails on some case."""
from __future__ import annotations

import numpy as np
import pytest

import contract_kernels as CK
from helpers import thorough
from refnorm.check import contracts as K
from refnorm.check.backends.base import Contract, parse_contract
from refnorm.errors import ConfigError
from refnorm.testing import assert_close_to_reference

SEEDS = range(40) if thorough() else range(4)
REGIMES = ("normal", "shifted", "small", "outliers")


# ------------------------------------------------------------------------------ the model
@pytest.mark.parametrize("name", ["strict", "stats_d", "epi_d"])
def test_presets_are_lists_of_points(name):
    rounds, accs, _ = K.PRESETS[name]
    c = Contract(rounds=rounds, acc=accs)
    assert c.kind == name and not c.custom and c == Contract(name)
    assert c.describe() == f"{name}/block"
    assert parse_contract(f"{name}/serial") == Contract(name, "serial")


def test_a_contract_beyond_a_preset_extends_the_largest_it_contains():
    c = Contract("stats_d", rounds={"xhat": "input"})
    assert c.kind == "stats_d" and c.custom and K.extras(c) == ({"xhat": "input"}, {}, {})
    llama = Contract(rounds={"xhat": "input", "dy_xhat": "input"})
    assert llama.kind == "strict" and llama.custom and llama.relaxed


@pytest.mark.parametrize("c", [
    Contract(rounds={"xhat": "input", "dy_xhat": "input"}),
    Contract(rounds={"residual_out": "input"}, recompute={"xhat": "residual_out"}),
    Contract(rounds={"xhat": "input", "xhat_w": "input"}),
    Contract(acc={"dweight": ("float16", "block", 128), "mean": (None, "tree", None)}, reduction="serial"),
    Contract("stats_d", "tree"),
])
def test_the_one_line_syntax_reads_back_what_describe_writes(c):
    line = c.describe()
    assert "\n" not in line and parse_contract(line) == c


@pytest.mark.parametrize("text, says", [
    ("rounds xhat=float8", "dtype 'float8'; expected one of input, float16, bfloat16, float32"),
    ("rounds x_hat=input", "unknown point 'x_hat'; the points: mean, rstd, xhat"),
    ("acc dweight=float16/zigzag", "order 'zigzag'"),
    ("acc dweight=float16/block/0", "block 0"),
    ("acc dw=float16", "unknown reduction 'dw'"),
    ("recompute xhat=residual_out", "residual_out is not declared rounded"),
    ("tight", "expected a preset (strict, stats_d, epi_d)"),
    ("frobnicate xhat=input", "expected one starting with preset, rounds"),
])
def test_a_bad_contract_is_an_error_naming_the_bad_part(text, says):
    with pytest.raises(ConfigError, match=None) as e:
        parse_contract(text)
    assert says in str(e.value)


def test_a_point_the_op_has_no_bound_for_is_an_error_naming_the_ops_points():
    with pytest.raises(ConfigError, match="rms_norm: contract rounds point 'mean' is not one of rms_norm's: rstd"):
        K.validate("rms_norm", Contract(rounds={"mean": "input"}))
    with pytest.raises(ConfigError, match="group_norm: a contract beyond the presets .* layer_norm, rms_norm"):
        K.validate("group_norm", Contract(rounds={"xhat": "input"}))
    K.validate("group_norm", Contract("epi_d"))          # presets: every op


def test_a_contracts_block_size_sets_its_gamma():
    from refnorm.check.precision import gamma
    assert gamma(4096, "block", 64) == gamma(4096, "block") == 2 * 64 + 2
    assert gamma(4096, "block", 128) == 128 + 32 + 2
    assert gamma(4096, "serial", 128) == gamma(4096, "serial")


# ------------------------------------------------------------------------------ the proof
def _judge(op, dtype, rounds, accs, contract, seed, regime):
    """Whether the emulated kernel rounding at ``rounds``/``accs`` passes under ``contract`` on one drawn
    case; (passed, the case's worst ratio)."""
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 33)), int(rng.integers(2, 260))
    x, w, b, dy = CK.draw(rng, m, n, dtype, regime)
    bb = b if op == "layer_norm" else None
    outs, grads = CK.run(op, x, w, bb, dy, rounds, accs)
    inputs = {"x": x, "weight": w, **({"bias": b} if bb is not None else {})}
    try:
        arrays = assert_close_to_reference(op, inputs, outs, config={"normalized_shape": [n], "eps": 1e-5},
                                           cotangents={"y": dy}, grads=grads, contract=contract,
                                           allow_partial=True)
    except AssertionError:
        return False, np.inf
    return True, max(a.ratio for a in arrays)


LN_POINTS = ("mean", "rstd", "xhat", "xhat_w", "g", "dy_xhat", "dx_terms")
RMS_POINTS = ("rstd", "xhat", "g", "dy_xhat", "dx_terms")      # rms_norm's xhat_w (no bias) is y itself
COMBOS = [{"xhat": "input", "dy_xhat": "input"},                # Llama casting
          {"xhat": "input", "g": "input", "dy_xhat": "input"},  # Liger's Llama mode (dy * w in the input dtype)
          {"xhat": "input", "xhat_w": "input"}]                 # a quantizer's input


def _cases(op):
    pts = LN_POINTS if op == "layer_norm" else RMS_POINTS
    return [({p: "input"}, {}) for p in pts] + [(c, {}) for c in COMBOS] + \
        [({}, {"dweight": "input"})] + ([({}, {"dbias": "input"})] if op == "layer_norm" else []) + \
        [({"rstd": "float16"}, {})]                            # a named dtype on a float32 case too


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_kernel_rounding_exactly_as_declared_passes(op, dtype):
    worst = 0.0
    for rounds, accs in _cases(op):
        declared = Contract(rounds=rounds, acc={k: (v, "serial", None) for k, v in accs.items()})
        for seed in SEEDS:
            for regime in REGIMES:
                ok, ratio = _judge(op, dtype, rounds, accs, declared, seed, regime)
                assert ok, f"{op} {dtype} {declared.describe()}: a false alarm at seed {seed}, {regime}"
                worst = max(worst, ratio)
    assert worst > 0.2, f"{op} {dtype}: the emulated roundings never came near their bounds ({worst:.3g})"


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_one_undeclared_rounding_more_fails(op, dtype):
    for rounds, accs in _cases(op):
        if rounds.get("rstd") == "float16" and dtype == "float16":
            continue
        contract = Contract("strict")                      # the kernel rounds one point more than it declares
        caught = any(not _judge(op, dtype, rounds, accs, contract, seed, regime)[0]
                     for seed in range(4) for regime in REGIMES)
        assert caught, f"{op} {dtype}: rounding {rounds or accs} beyond {contract.describe()} never caught"


LLAMA = {"xhat": "input", "dy_xhat": "input"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("bug", [({"rstd": "input"}, {}), ({}, {"dweight": "input"})],
                         ids=["rstd in the input dtype", "dweight partials in the input dtype"])
def test_the_llama_rmsnorms_bugs_fail_under_its_precise_contract(dtype, bug):
    """The issue's Llama-casting RMSNorm: x_hat rounded before * w, dy * x_hat rounded in the backward.
    epi_d admitted rstd held in float16 and dweight accumulated in float16; the precise contract does not."""
    rounds, accs = {**LLAMA, **bug[0]}, bug[1]
    assert all(_judge("rms_norm", dtype, LLAMA, {}, Contract(rounds=LLAMA), s, r)[0] for s in range(4) for r in REGIMES)
    caught = any(not _judge("rms_norm", dtype, rounds, accs, Contract(rounds=LLAMA), s, r)[0]
                 for s in range(4) for r in REGIMES)
    assert caught, f"rms_norm {dtype}: {bug} beyond the Llama contract never caught"


def _add_norm(dtype, seed, regime, forward_rounded, contract):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 30)), int(rng.integers(2, 260))
    x, w, b, dy = CK.draw(rng, m, n, dtype, regime)
    res = (3 * rng.standard_normal((m, n))).astype(x.dtype)
    dro = rng.standard_normal((m, n)).astype(x.dtype)
    outs, grads = CK.run_add_norm(x, res, w, b, dy, dro, forward_rounded=forward_rounded)
    try:
        assert_close_to_reference("add_norm", {"x": x, "residual": res, "weight": w, "bias": b}, outs,
                                  config={"normalized_shape": [n]}, cotangents={"y": dy, "residual_out": dro},
                                  grads=grads, contract=contract, allow_partial=True)
    except AssertionError:
        return False
    return True


PRENORM = "rounds residual_out=input; recompute xhat=residual_out"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_prenorm_add_norm_recomputing_from_the_stored_residual(dtype):
    """flash-attention's prenorm add+LayerNorm: residual_out stored in the input dtype, the forward
    normalizing the float32 sum, the backward recomputing x_hat from the stored one. Declared precisely it
    passes; strict fails it (it does round); the classic bug, the forward normalizing the rounded sum,
    fails under the precise contract (epi_d admitted it) and passes only when that rounding is declared."""
    runs = [(s, r) for s in SEEDS for r in REGIMES]
    assert all(_add_norm(dtype, s, r, False, PRENORM) for s, r in runs)
    assert not all(_add_norm(dtype, s, r, False, "strict") for s, r in runs)
    assert not all(_add_norm(dtype, s, r, True, PRENORM) for s, r in runs)
    assert all(_add_norm(dtype, s, r, True, "rounds residual_out=input") for s, r in runs)


PLAIN = "acc mean=float32/serial, var=float32/serial"     # two-pass plain sums (the Triton tutorial's kernel)


def _shifted_layer_norm(seed, m, n, dtype, accs, contract, serial=True):
    """Passed, on rows with |mean| / std ~ 1e3 (float16 inputs: the sum of the row is exact in float32)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, n)) + 1e3 * rng.choice([-1, 1], (m, 1))).astype(CK.NP[dtype])
    w = (1 + 0.5 * rng.standard_normal(n)).astype(x.dtype)
    b = (0.1 * rng.standard_normal(n)).astype(x.dtype)
    dy = rng.standard_normal((m, n)).astype(x.dtype)
    outs, grads = CK.run("layer_norm", x, w, b, dy, {}, accs, serial=serial)
    try:
        assert_close_to_reference("layer_norm", {"x": x, "weight": w, "bias": b}, outs,
                                  config={"normalized_shape": [n]}, cotangents={"y": dy}, grads=grads,
                                  contract=contract, allow_partial=True)
    except AssertionError:
        return False
    return True


def test_plain_statistics_catch_float16_dweight_partials_on_mean_shifted_rows():
    """A layer_norm kernel accumulating dweight in float16, rows with |mean|/std ~ 1e3: the strict preset
    admits it (it bounds a Welford or merge kernel's mean, whose error may reach g(n) u sum|x|, and a sum of
    dy (x - mu) r split at magnitude r |x|); a kernel declaring its statistics plain two-pass sums (PLAIN) is
    bounded by their exact arithmetic (the float32 sum of float16 values on one grid is exact) and the bug
    fails, while the correct kernel passes."""
    seeds = range(50) if thorough() else range(5)
    assert all(_shifted_layer_norm(s, 64, 1024, "float16", {}, PLAIN) for s in seeds)
    caught = sum(not _shifted_layer_norm(s, 64, 1024, "float16", {"dweight": "float16"}, PLAIN) for s in seeds)
    assert caught >= 0.9 * len(seeds), f"caught {caught} of {len(seeds)}"
    assert all(_shifted_layer_norm(s, 64, 1024, "float16", {"dweight": "float16"}, "strict") for s in seeds[:2])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_plain_statistics_pass_plain_kernels_at_every_regime(dtype):
    """No false alarm of the exact-sum refinement: rows whose sum is exact and rows whose sum is not
    (n up to 9000 float16 values near 1e3 exceed 2^24 of their grid), serial and pairwise sums."""
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        for n in (3, 777, 4096, 9000):
            m = int(rng.integers(1, 9))
            for serial, contract in ((True, PLAIN), (False, "acc mean=float32/block, var=float32/block")):
                assert _shifted_layer_norm(seed, m, n, dtype, {}, contract, serial), (dtype, seed, n, serial)
        for regime in REGIMES:
            assert _judge("layer_norm", dtype, {}, {}, parse_contract(PLAIN), seed, regime)[0], (dtype, seed, regime)


QUANT_IN = {"xhat": "input", "xhat_w": "input"}                # x_hat, then x_hat * w, rounded before the quantizer


def _norm_quant(dtype, qd, rounds, contract, seed, regime):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 20)), int(rng.integers(8, 260))
    x, w, _, _ = CK.draw(rng, m, n, dtype, regime)
    outs = CK.run_norm_quant(x, w, qd, rounds)
    try:
        assert_close_to_reference("norm_quant", {"x": x, "weight": w}, outs,
                                  config={"normalized_shape": [n], "quant_dtype": qd}, contract=contract,
                                  allow_partial=True)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("qd", ["float8_e4m3fn", "int8"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_an_rms_norm_quantizer_rounding_its_input_twice_passes_its_contract(dtype, qd):
    """The issue's RMSNorm + dynamic per-token quantization: x_hat and x_hat * w rounded to the input dtype
    before the amax and the quantizer. Declared, it passes; strict fails it."""
    runs = [(s, r) for s in SEEDS for r in REGIMES]
    assert all(_norm_quant(dtype, qd, QUANT_IN, "rounds xhat=input, xhat_w=input", s, r) for s, r in runs)
    assert not all(_norm_quant(dtype, qd, QUANT_IN, "strict", s, r) for s, r in runs)
