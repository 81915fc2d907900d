"""The jax adapter (refnorm/check/backends/jax_backend.py): translation sanity against the golden float64
values, what it refuses and why, dtypes and state, the jax facts its contracts and known failures
(known_failures/jax.txt) rest on, and the full check over the golden set.

The float64 comparisons check the TRANSLATION (names, layouts, conventions, the running-statistics
rules), with jax.nn.standardize's two-pass algorithm ("jax-stable"): float64 jax against the float64
reference, to 1e-10 of each array's largest magnitude. jax's precision is the checker's business.
"""
from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed; the jax backend's tests need it (pip install jax)")

import refnorm  # noqa: E402
import refnorm.golden as golden  # noqa: E402
from refnorm.check.backends import get_backend  # noqa: E402
from refnorm.check.backends.base import Backend, Call, Contract, complete_config  # noqa: E402
from refnorm.check.backends.jax_backend import NO_JAX, SUPPORTED, JaxBackend  # noqa: E402
from refnorm.cli import main  # noqa: E402
from helpers import (assert_adapter_loads_no_framework, assert_agreeing_cases, assert_checker_accepts,  # noqa: E402
                     listed_cases_fail, run_case)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
KNOWN = os.path.join(ROOT, "known_failures", "jax.txt")
FAST = JaxBackend()
STABLE = JaxBackend(variance="stable")


def _known(flags=None):
    """The ids of the known defects that apply on this CPU (or on one with ``flags``): platform-scoped
    entries (platform=avx512_fp16 / !avx512_fp16) of other CPUs left out."""
    from refnorm.check.core import read_expected_failures
    return list(read_expected_failures(KNOWN, flags))


# ------------------------------------------------------------------------- import and availability
def test_importing_the_adapter_does_not_import_jax():
    assert_adapter_loads_no_framework("import refnorm.check.backends.jax_backend as jb\n"
                                      "from refnorm.check.backends import get_backend\nb = get_backend('jax')",
                                      "z_score", ("layer_norm", "bfloat16"), ("jax",))


_CACHE_RUN = """
import hashlib, json, sys
import jax
import refnorm.golden as golden
from refnorm.check.backends import get_backend
from refnorm.check.backends.base import Call
hits = []
jax.monitoring.register_event_listener(lambda e, **kw: hits.append(e) if e.endswith("cache_hits") else None)
b = get_backend("jax", json.loads(sys.argv[1]))
h = hashlib.sha256()
for cid in ("layer_norm/normal_f32_6x100", "batch_norm/normal_f16_8x2x4x4"):
    case = golden.load_case("golden", cid)
    st = case.steps[0]
    r = b.run(Call(case.op, case.dtype, dict(case.config), st.training, dict(st.inputs), dict(st.cotangents),
                   dict(case.init_state)))
    for part in (r.outputs, r.grads, r.state):
        for k in sorted(part):
            h.update(k.encode() + part[k].tobytes())
print(json.dumps({"digest": h.hexdigest(), "hits": len(hits), "dir": jax.config.jax_compilation_cache_dir}))
"""


def _cache_run(options, env=None):
    r = subprocess.run([sys.executable, "-c", _CACHE_RUN, json.dumps(options)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_compilation_cache_reuses_the_same_programs(tmp_path):
    """A second process loads the programs the first compiled (jax's persistent compilation cache) and
    returns the same bits as without the cache; "off" and $REFNORM_JAX_CACHE=off keep jax's setting."""
    d = tmp_path / "cache"
    off = _cache_run({"compilation_cache": "off"})
    assert off["dir"] is None and off["hits"] == 0
    cold = _cache_run({"compilation_cache": str(d)})
    assert cold["dir"] == str(d) and cold["hits"] == 0 and len(list(d.iterdir())) >= 2
    warm = _cache_run({}, env={"REFNORM_JAX_CACHE": str(d)})        # the default: $REFNORM_JAX_CACHE
    assert warm["dir"] == str(d) and warm["hits"] >= 2
    assert off["digest"] == cold["digest"] == warm["digest"]
    assert _cache_run({}, env={"REFNORM_JAX_CACHE": "off"})["dir"] is None
    mine = tmp_path / "mine"                      # a directory the process set itself is left alone
    assert _cache_run({}, env={"JAX_COMPILATION_CACHE_DIR": str(mine), "REFNORM_JAX_CACHE": str(d)})["dir"] == str(mine)


def test_compilation_cache_bad_settings(tmp_path, monkeypatch):
    f = tmp_path / "a_file"
    f.write_text("")
    with pytest.raises(ValueError, match="compilation_cache '.*a_file' exists and is not a directory"):
        JaxBackend(compilation_cache=str(f))
    monkeypatch.setenv("REFNORM_JAX_CACHE", str(f))
    with pytest.raises(ValueError, match="REFNORM_JAX_CACHE '.*a_file' exists and is not a directory"):
        JaxBackend(compilation_cache="default")
    with pytest.raises(TypeError, match="compilation_cache 3"):
        JaxBackend(compilation_cache=3)
    with pytest.raises(ValueError, match="compilation_cache '  '"):
        JaxBackend(compilation_cache="  ")
    assert main(["check", "--backend", "jax", "--backend-option", f"compilation_cache={f}", "--ops", "rms_norm"]) == 2
    monkeypatch.setenv("REFNORM_JAX_CACHE", "")
    assert JaxBackend(compilation_cache="default").compilation_cache == ""
    assert JaxBackend().compilation_cache is None


def test_names_availability_and_protocol():
    assert FAST.name == "jax" and FAST.available() is None and FAST.forward_only is False
    assert get_backend("jax-stable").name == "jax-stable" and get_backend("jax").variance == "fast"
    assert isinstance(FAST, Backend)
    gpu = get_backend("jax-gpu")
    assert gpu.name == "jax-gpu"
    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    if not has_gpu:
        assert "no gpu device" in gpu.available()
        with pytest.raises(RuntimeError, match="not available"):
            gpu.run(Call("layer_norm", "float32", {"normalized_shape": [3]}, True, {"x": np.ones((2, 3), np.float32)}))
    with pytest.raises(ValueError):
        JaxBackend(platform="tpu")
    with pytest.raises(ValueError):
        JaxBackend(variance="welford")


def test_contract_table():
    for op in SUPPORTED:
        for dt in ("float64", "float32"):
            assert FAST.contract_for(op, dt) == Contract("strict", "serial")
        for dt in ("float16", "bfloat16"):
            assert FAST.contract_for(op, dt) == Contract("epi_d", "serial")


# ------------------------------------------------------------------ golden: the translation is right
@pytest.mark.parametrize("op", SUPPORTED)
def test_float64_golden_cases_agree(op):
    """Every float64 golden case (state chained step to step) within 1e-10, two-pass variance; the
    'zero' regime is left out (autodiff of sqrt at 0 gives NaN gradients there: known_failures/jax.txt)."""
    cases = [c for c in golden.iter_cases(GOLDEN, ops=[op], dtypes=["float64"]) if c.regime != "zero"]
    assert_agreeing_cases(STABLE, cases, 1e-10, least=4)


@pytest.mark.parametrize("op", SUPPORTED)
def test_float32_normal_cases_roughly_agree(op):
    # "normal" cases may have a shifted step (one-pass: known failures), hence the two-pass STABLE
    cases = [c for c in golden.iter_cases(GOLDEN, ops=[op], dtypes=["float32"]) if c.regime == "normal"]
    assert_agreeing_cases(STABLE, cases, 1e-3, least=3)


def test_the_adapter_calls_jax_nn_standardize():
    """y of layer_norm is jax.nn.standardize's, bit for bit, times weight plus bias (both algorithms);
    the running-statistics path normalizes with the very same y."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 16)) * 3 + 100).astype(np.float32)
    w, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    for be, alg in ((FAST, "fast"), (STABLE, "stable")):
        ret = be.run(Call("layer_norm", "float32", {"normalized_shape": [16]}, True, {"x": x, "weight": w, "bias": b}))
        want = jax.jit(lambda x, w, b: jax.nn.standardize(x, axis=(1,), epsilon=1e-5, algorithm=alg) * w + b)(x, w, b)
        assert np.array_equal(ret.outputs["y"], np.asarray(want)), alg
    x3 = (rng.standard_normal((6, 3, 5)) + 50).astype(np.float32)
    st = {"running_mean": np.zeros(3, np.float32), "running_var": np.ones(3, np.float32),
          "num_batches_tracked": np.asarray(0, np.int64)}
    with_state = FAST.run(Call("batch_norm", "float32", {}, True, {"x": x3}, {}, st))
    without = FAST.run(Call("batch_norm", "float32", {}, True, {"x": x3}))
    assert np.array_equal(with_state.outputs["y"], without.outputs["y"])
    want = jax.jit(lambda x: jax.nn.standardize(x, axis=(0, 2), epsilon=1e-5))(x3)
    assert np.array_equal(without.outputs["y"], np.asarray(want))
    assert int(with_state.state["num_batches_tracked"]) == 1 and without.state == {}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_stays_in_the_case_dtype(dtype):
    d = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    case = next(c for c in golden.iter_cases(GOLDEN, ops=["batch_norm"], dtypes=[dtype])
                if len(c.steps) == 1 and {"weight", "bias"} <= set(c.steps[0].inputs) and c.init_state)
    (st, ret), = run_case(FAST, case)
    assert ret.outputs["y"].dtype == d and ret.grads["x"].dtype == d and ret.grads["weight"].dtype == d
    assert ret.state["running_mean"].dtype == d and ret.state["num_batches_tracked"].dtype == np.int64
    for part in (ret.outputs, ret.grads, ret.state):
        assert all(isinstance(v, np.ndarray) for v in part.values())
    st2 = FAST.run(Call(case.op, dtype, dict(case.config), False, dict(st.inputs), {}, dict(ret.state)))
    assert set(st2.outputs) == {"y"} and st2.grads == {}


def test_inputs_are_never_rounded():
    with pytest.raises(ValueError, match="not exactly representable"):
        FAST.run(Call("layer_norm", "bfloat16", {"normalized_shape": [2]}, True,
                      {"x": np.array([[0.1, 0.2]], np.float32)}))
    vals = np.array([1.0, -3.140625, 1e-40, 3.3895e38], np.float32).astype(ml_dtypes.bfloat16)
    ret = FAST.run(Call("rms_norm", "bfloat16", {"normalized_shape": [4], "eps": 0.0}, True, {"x": vals[None]}))
    assert ret.outputs["y"].dtype == vals.dtype


def test_enabling_x64_leaves_float32_results_alone():
    """The adapter turns on jax_enable_x64 (float64 cases need it); float32 results are the same bits as
    in a process without it."""
    code = ("import numpy as np, jax\n"
            "x = (np.random.default_rng(0).standard_normal((4, 33)) * 7 + 3).astype(np.float32)\n"
            "f = jax.jit(lambda x: jax.nn.standardize(x, axis=-1, epsilon=1e-5) * 1.5 + 0.25)\n"
            "print(np.asarray(f(x)).tobytes().hex())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    x = (np.random.default_rng(0).standard_normal((4, 33)) * 7 + 3).astype(np.float32)
    ret = FAST.run(Call("layer_norm", "float32", {"normalized_shape": [33]}, True,
                        {"x": x, "weight": np.full(33, 1.5, np.float32), "bias": np.full(33, 0.25, np.float32)}))
    assert jax.config.jax_enable_x64
    assert ret.outputs["y"].tobytes().hex() == r.stdout.strip()


# ------------------------------------------------------------- compiled once per program, not per call
class _Compiles:
    """Counts XLA compilations (jax.monitoring's backend-compile events, from any thread) in a with block."""
    EVENT = "/jax/core/compile/backend_compile_duration"

    def __enter__(self):
        self.n = 0
        jax.monitoring.register_event_duration_secs_listener(self._seen)
        return self

    def _seen(self, event, secs, **kw):
        self.n += event == self.EVENT

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._seen)


def _ln(eps, seed, dtype="float32", shape=(5, 12)):
    d = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(d)
    return Call("layer_norm", dtype, complete_config("layer_norm", {"normalized_shape": [shape[-1]],
                                                                               "eps": eps}),
                True, {"x": x, "weight": rng.standard_normal(shape[-1]).astype(d)},
                {"y": rng.standard_normal(shape).astype(d)})


def test_one_compilation_per_program_over_values_and_eps():
    """Two calls of one signature with different values compile once; so do two calls differing only in
    eps (eps is an argument of the program); a new shape compiles again. eps = 0 is a constant of its own
    program (XLA drops x + 0)."""
    b = JaxBackend()
    with _Compiles() as c:
        b.run(_ln(1e-5, 0))
    assert c.n == 1, c.n                                  # forward and vjp: one program
    with _Compiles() as c:
        b.run(_ln(1e-5, 1))
        b.run(_ln(1e-3, 2))
        b.run(_ln(0.25, 3))
    assert c.n == 0, c.n
    with _Compiles() as c:
        b.run(_ln(1e-5, 4, shape=(5, 13)))
        b.run(_ln(0.0, 5))
    assert c.n == 2, c.n


def test_batch_norm_steps_share_a_program_unless_momentum_is_none():
    """The running update's factors key the program: momentum=0.1 over num_batches_tracked 0, 1, 2 is one
    program; momentum=None (the cumulative average 1/n) one per n."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    for momentum, want in ((0.1, 1), (None, 3)):
        b = JaxBackend()
        with _Compiles() as c:
            for n in range(3):
                st = {"running_mean": np.zeros(3, np.float32), "running_var": np.ones(3, np.float32),
                      "num_batches_tracked": np.asarray(n, np.int64)}
                ret = b.run(Call("batch_norm", "float32", complete_config("batch_norm", {"momentum": momentum}),
                                 True, {"x": x}, {"y": x}, st))
                assert int(ret.state["num_batches_tracked"]) == n + 1
                p = 0.1 if momentum is not None else 1 / (n + 1)
                want_mean = (p * x.astype(np.float64).mean((0, 2))).astype(np.float32)
                assert np.allclose(ret.state["running_mean"], want_mean, rtol=1e-5, atol=1e-7), (momentum, n)
        assert c.n == want, (momentum, c.n)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_traced_eps_gives_the_bits_of_a_constant_eps(dtype):
    """eps passed as an argument computes what a user's ``jax.jit`` with eps written in (a constant)
    computes, bit for bit: outputs and gradients, for eps values that round in every dtype."""
    for eps in (1e-5, 1e-6, 0.1, 3e-3, 1e-12):
        call = _ln(eps, 11, dtype)
        x, w, g = call.inputs["x"], call.inputs["weight"], call.cotangents["y"]

        def user(x, w, g):
            y, pull = jax.vjp(lambda x, w: jax.nn.standardize(x, axis=(1,), epsilon=eps) * w, x, w)
            return (y,) + pull(g)
        want = [np.asarray(a) for a in jax.jit(user)(x, w, g)]
        got = FAST.run(call)
        for a, b in zip((got.outputs["y"], got.grads["x"], got.grads["weight"]), want):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), (dtype, eps)


def test_prepare_compiles_ahead_what_run_then_uses():
    """``prepare`` (the checker's hint) compiles a case's programs in its threads; the run that follows
    compiles nothing and returns the bits of an adapter that had no hint. A wrong hint changes nothing."""
    calls = [_ln(1e-4, 21, shape=(3, 17)), _ln(2e-4, 22, shape=(3, 17))]
    b = JaxBackend()
    with _Compiles() as c:
        b.prepare(calls)
        for fut in b._ahead.values():
            fut.result()
    assert c.n == 1 and len(b._ahead) == 1, (c.n, len(b._ahead))
    with _Compiles() as c:
        got = [b.run(call) for call in calls]
    assert c.n == 0, c.n
    fresh = JaxBackend()
    for call, r in zip(calls, got):
        want = fresh.run(call)
        assert r.outputs["y"].tobytes() == want.outputs["y"].tobytes()
        assert all(r.grads[k].tobytes() == want.grads[k].tobytes() for k in want.grads)
    b.prepare([_ln(1e-4, 23, shape=(2, 9))])         # hinted, then run with other values: still right
    r = b.run(_ln(1e-4, 24, shape=(2, 9)))
    assert r.outputs["y"].tobytes() == fresh.run(_ln(1e-4, 24, shape=(2, 9))).outputs["y"].tobytes()
    b.prepare([Call("z_score", "float32", {}, True, {"x": np.ones((2, 3), np.float32)})])   # unsupported: ignored
    c = pickle.loads(pickle.dumps(b))                # --isolate pickles it: without programs and threads
    assert c.variance == b.variance and "_ahead" not in c.__dict__
    assert c.run(calls[0]).outputs["y"].tobytes() == got[0].outputs["y"].tobytes()


# ----------------------------------------------------------------------- what is refused, and why
@pytest.mark.parametrize("op,config,why", [
    *[(op, {}, "jax has no") for op in NO_JAX],
    ("lp_normalize", {"zero_rule": "onnx"}, "ONNX's rule"),
    ("weight_norm", {"dim": -1}, "dim=-1"),
    ("layer_norm", {"normalized_shape": [4], "bogus": 1}, "unknown option"),
])
def test_unsupported_calls_give_a_reason_and_are_never_run(op, config, why):
    reason = FAST.supports_config(op, "float32", config, True)
    assert isinstance(reason, str) and why in reason, reason
    with pytest.raises(ValueError, match="does not support"):
        FAST.run(Call(op, "float32", config, True, {"x": np.ones((2, 4, 3), np.float32)}))
    assert "dtype" in FAST.supports_config("layer_norm", "float8", {"normalized_shape": [4]}, True)


def test_conventions_momentum_none_onnx_and_the_lrn_windows():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 4))
    st = {"running_mean": rng.standard_normal(3), "running_var": 1 + rng.random(3),
          "num_batches_tracked": np.asarray(3, np.int64)}
    for cfg in ({"momentum": None}, {"convention": "onnx", "momentum": 0.8}):
        ret = STABLE.run(Call("batch_norm", "float64", cfg, True, {"x": x}, {}, st))
        ref = refnorm.evaluate("batch_norm", {"x": x}, config=cfg, state=st, training=True)
        for k in ("running_mean", "running_var"):
            assert np.allclose(ret.state[k], ref.state[k], rtol=1e-13, atol=0), (cfg, k)
        assert int(ret.state["num_batches_tracked"]) == 4
    ret = STABLE.run(Call("instance_norm", "float64", {"momentum": 0.3}, True, {"x": x}, {}, st))
    ref = refnorm.evaluate("instance_norm", {"x": x}, config={"momentum": 0.3}, state=st, training=True)
    assert np.allclose(ret.state["running_var"], ref.state["running_var"], rtol=1e-13)
    assert int(ret.state["num_batches_tracked"]) == 3            # torch's InstanceNorm never counts
    x = rng.standard_normal((2, 8, 3))
    for window in ("torch", "onnx"):
        cfg = {"size": 4, "alpha": 1.0, "window": window}
        ret = FAST.run(Call("local_response_norm", "float64", cfg, True, {"x": x}))
        ref = refnorm.evaluate("local_response_norm", {"x": x}, config=cfg)
        assert np.allclose(ret.outputs["y"], ref.outputs["y"], rtol=1e-13), window


# ------------------------------------------------------- contracts and the jax facts behind them
def test_fact_xla_cpu_sums_over_two_axes_exceed_the_block_model():
    """The 'serial' reduction: 150 equal float32 values summed over a (6, 25) view err by ~37 u, beyond the
    block model's 2 sqrt(150) + 2 = 26.5 u (a single axis of 150 errs by < 1 u)."""
    x = np.full((6, 25), 400.69724, np.float32)
    got = float(jax.jit(lambda a: a.sum())(x))
    err = abs(got - 150 * float(np.float32(400.69724))) / (150 * 400.69724) / 2.0 ** -24
    assert err > 2 * math.sqrt(150) + 2, err


def test_fact_fast_variance_cancels():
    """jax.nn.standardize's default algorithm ('fast', mean(x^2) - mean(x)^2) loses c^2 u for |mean|/std = c;
    'stable' does not. The cause of the 'one-pass' entries of known_failures/jax.txt."""
    x = (np.random.default_rng(5).standard_normal((4, 100)) + 3000.0).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    err = {alg: float(np.max(np.abs(np.asarray(jax.nn.standardize(x, axis=-1, algorithm=alg)) - ref)))
           for alg in ("fast", "stable")}
    assert err["fast"] > 0.1 and err["stable"] < 1e-3, err


def test_fact_autodiff_of_sqrt_at_zero_is_nan():
    """jnp.std, jnp.linalg.vector_norm and jnp.sqrt(mean(x^2)) have NaN gradients where their argument is
    0 (d sqrt = inf times 0), although the normalizers around them are differentiable there
    (refnorm: dx = (g - mean g)/eps, dy/eps). The cause of the 'sqrt at 0' entries."""
    import jax.numpy as jnp
    c = jnp.full((4,), 0.5, jnp.float32)
    g = jax.grad(lambda x: ((x - x.mean()) / (jnp.std(x) + 1e-3))[0])(c)
    assert np.isnan(np.asarray(g)).all()
    z = jnp.zeros((3,), jnp.float32)
    g = jax.grad(lambda x: (x / jnp.maximum(jnp.linalg.vector_norm(x), 1e-12))[0])(z)
    assert np.isnan(np.asarray(g)).all()


def test_fact_float16_backward_of_rsqrt_overflows_and_eps_underflows():
    """The float16 entries: on a row constant in float16, the backward's (var + eps)^-3/2 overflows float16
    (NaN dx) where float32 is finite; eps=1e-12 is 0 in float16 (weakly typed), so y = 0 * inf = NaN."""
    row = np.full((1, 4), 1000.5, np.float16)
    g = np.array([[1.0, -2.0, 0.5, 0.25]])
    for dt, nan in ((np.float16, True), (np.float32, False)):
        _, pull = jax.vjp(lambda x: jax.nn.standardize(x, axis=-1, epsilon=1e-5, algorithm="stable"), row.astype(dt))
        assert bool(np.isnan(np.asarray(pull(g.astype(dt))[0])).any()) is nan, dt
    y = jax.nn.standardize(row, axis=-1, epsilon=1e-12, algorithm="stable")
    assert np.isnan(np.asarray(y)).all() and float(np.float16(1e-12)) == 0.0


def test_the_checker_accepts_jax_under_its_contracts():
    assert_checker_accepts(FAST, ["layer_norm/normal_f32_6x100", "layer_norm/normal_bf16_6x100",
                                  "rms_norm/normal_eps1e-05_bf16_6x100", "batch_norm/normal_train3_eval_f32_6x3x5",
                                  "group_norm/normal_g4_bf16_2x8x5x7", "weight_norm/normal_dimNone_bf16_4x3x3x3",
                                  "local_response_norm/normal_bf16_2x10x30"], "jax has no z_score")


# ------------------------------------------------------------------------------------ the full check
def test_jax_passes_every_case_but_its_known_defects(tmp_path, capsys):
    from helpers import thorough
    ops = None if thorough() else ["layer_norm", "rms_norm", "batch_norm"]      # the quick profile: three ops
    out = tmp_path / "jax.json"
    rc = main(["check", "--backend", "jax", "--golden", GOLDEN, "--expect-failures", KNOWN,
               "--json", str(out), "--no-progress"] + (["--ops", *ops] if ops else []))
    text = capsys.readouterr().out
    assert rc == 4, text[-3000:]                       # partial: ill-posed arrays verify nothing
    s = json.loads(out.read_text())["summary"]
    listed = [i for i in _known() if ops is None or i.split("/")[0] in ops]
    assert s["failed"] == 0 and s["errors"] == 0 and s["expected_failures"] == len(listed)
    assert s["passed"] >= (280 if ops is None else 60) and s["arrays"]["unchecked"] == 0, s


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_the_one_pass_entries_pass_with_the_two_pass_variance(capsys):
    """Every entry of this CPU blamed on the fast variance ("passes with 'stable'") passes under jax-stable
    (the only difference)."""
    from refnorm.check.core import read_expected_failures
    ids = [i for i, e in read_expected_failures(KNOWN).items() if "passes with 'stable'" in e.reason]
    assert len(ids) >= 20
    args = ["check", "--backend", "jax-stable", "--golden", GOLDEN, "--no-progress"]
    for i in ids:
        args += ["--case", i]
    assert main(args + ["--accept-partial"]) == 0, capsys.readouterr().out[-3000:]   # nothing fails


@pytest.mark.thorough          # slow: the thorough profile only (tests/conftest.py)
def test_jax_defects_fail_without_the_list(tmp_path, capsys):
    known = _known()
    s = listed_cases_fail("jax", known, GOLDEN, tmp_path / "known.json")
    capsys.readouterr()
    assert s["failed"] + s["errors"] == len(known) == s["cases"], s


def test_the_platform_scope_of_the_list_is_what_decides_xla_float16():
    """known_failures/jax.txt scopes its float16 entries by the CPU flag avx512_fp16: with it XLA computes
    a float16 program natively (a * a overflows: inf). Without it a scalar program is computed with float32
    intermediates (300) on AVX2 CPUs, but natively on an AMD EPYC with AVX512-BF16 and no AVX512-FP16 (inf,
    session 17), whose golden-case failures are nevertheless the list's !avx512_fp16 entries (the full
    check with the list, test_jax_passes_every_case_but_its_known_defects above, decides that): so the probe is
    asserted only where the flag is present. The list differs between the two kinds of CPU only in float16
    cases."""
    import jax
    import jax.numpy as jnp
    from refnorm.check import platform
    from refnorm.check.core import read_expected_failures
    got = float(jax.jit(lambda a: (a * a) / a)(jnp.float16(300)))
    if "avx512_fp16" in platform.cpu()["flags"]:
        assert got == math.inf, (got, platform.cpu())
    else:
        assert got in (300.0, math.inf), (got, platform.cpu())
    with_, without = read_expected_failures(KNOWN, ["avx512_fp16"]), read_expected_failures(KNOWN, [])
    differ = {i for i in set(with_) | set(without) if with_.get(i) != without.get(i)}
    assert differ and all("_f16_" in i for i in differ), sorted(differ)
    assert set(with_) - set(without) == set(), "every case listed on AVX512-FP16 CPUs is listed elsewhere too"
