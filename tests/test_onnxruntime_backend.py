"""The onnxruntime adapter (refnorm/check/backends/onnxruntime_backend.py): translation sanity against the
golden values, what it refuses and why, the forward-only protocol, the onnxruntime/ONNX facts behind its
known failures (known_failures/onnxruntime.txt), and the full check over the golden set.

The translation checks compare outputs only (onnxruntime computes no gradients): float32 "normal" cases
to 1e-4 of each array's largest magnitude, float64 to 1e-12. onnxruntime's precision is the checker's
business (the full check below).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx is not installed; the onnxruntime backend's tests need it "
                                   "(pip install onnx onnxruntime)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed; the onnxruntime backend's tests "
                                                "need it (pip install onnx onnxruntime)")

import refnorm  # noqa: E402
import refnorm.golden as golden  # noqa: E402
from refnorm.check.backends import get_backend  # noqa: E402
from refnorm.check.backends.base import Backend, Call, Returned  # noqa: E402
from refnorm.check.backends.onnxruntime_backend import NO_ONNX, SUPPORTED, OnnxruntimeBackend  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.cli import main  # noqa: E402
from helpers import assert_adapter_loads_no_framework, assert_agreeing_cases, listed_cases_fail  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
KNOWN = os.path.join(ROOT, "known_failures", "onnxruntime.txt")
ORT = OnnxruntimeBackend()


def _run(case, backend=ORT):
    """Every step through the backend, chaining its state; the skip reason instead when unsupported."""
    state, out = dict(case.init_state), []
    for st in case.steps:
        call = Call(case.op, case.dtype, dict(case.config), st.training, dict(st.inputs), dict(st.cotangents),
                    dict(state))
        reason = backend.supports(call)
        if reason:
            return reason
        try:
            ret = backend.run(call)
        except NotImplementedError as e:
            return str(e)
        out.append((st, ret))
        state = dict(ret.state)
    return out


def _close(case, results, rtol):
    spec = refnorm.get(case.op)
    for i, (st, ret) in enumerate(results):
        assert ret.grads == {}, "forward only"
        for part in ("outputs", "state"):
            got = getattr(ret, part)
            for k, w in getattr(st, part).items():
                if k not in got:
                    assert part == "outputs" and k not in spec.differentiable, (case.id, k)
                    continue
                g, w = np.asarray(got[k]).astype(np.float64), np.asarray(w).astype(np.float64)
                assert g.shape == w.shape, (case.id, i, k, g.shape, w.shape)
                scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)) or 1.0
                err = float(np.max(np.abs(g - w), initial=0.0))
                assert err <= rtol * scale, f"{case.id} step {i} {part} {k}: {err:.3g} of scale {scale:.3g}"


def _known():
    return [ln.split()[0] for ln in Path(KNOWN).read_text().splitlines() if ln.strip() and not ln.startswith("#")]


# ------------------------------------------------------------------------- import and availability
def test_importing_the_adapter_imports_neither_onnx_nor_onnxruntime():
    assert_adapter_loads_no_framework("import refnorm.check.backends.onnxruntime_backend as ob\n"
                                      "from refnorm.check.backends import get_backend\nb = get_backend('onnxruntime')",
                                      "weight_norm", ("group_norm", "float16"), ("onnx", "onnxruntime"))


def test_names_availability_and_protocol():
    assert ORT.name == "onnxruntime" and ORT.available() is None and ORT.forward_only is True
    assert isinstance(ORT, Backend) and get_backend("onnxruntime").name == "onnxruntime"
    cuda = get_backend("onnxruntime-cuda")
    assert cuda.name == "onnxruntime-cuda"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert "CUDAExecutionProvider is not available" in cuda.available()
        with pytest.raises(RuntimeError, match="not available"):
            cuda.run(Call("layer_norm", "float32", {"normalized_shape": [3]}, True, {"x": np.ones((2, 3), np.float32)}))
    with pytest.raises(ValueError):
        OnnxruntimeBackend(provider="tpu")


def test_contracts():
    for op in SUPPORTED:
        for dt in ("float64", "float32"):
            c = ORT.contract_for(op, dt)
            assert c.kind == "strict" and c.reduction == ("serial" if op == "group_norm" else "block")
    assert ORT.contract_for("group_norm", "float16").kind == "epi_d"
    assert ORT.contract_for("layer_norm", "float16").kind == "strict"


# ------------------------------------------------------------------ golden: the translation is right
@pytest.mark.parametrize("op", SUPPORTED)
def test_float32_normal_cases_agree(op):
    cases = [c for c in golden.iter_cases(GOLDEN, ops=[op], dtypes=["float32"]) if c.regime == "normal"]
    assert_agreeing_cases(ORT, cases, 1e-4, least=1, run=lambda backend, case: _run(case, backend), agree=_close)


def test_float64_lp_normalize_agrees():
    ran = 0
    for case in golden.iter_cases(GOLDEN, ops=["lp_normalize"], dtypes=["float64"]):
        res = _run(case)
        if not isinstance(res, str):
            _close(case, res, 1e-12)
            ran += 1
    assert ran >= 3


def test_bfloat16_crosses_the_io_binding_exactly():
    """onnxruntime's Python binding has no bfloat16 NumPy type; the adapter's I/O binding carries it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8)).astype(ml_dtypes.bfloat16)
    ret = ORT.run(Call("layer_norm", "bfloat16", {"normalized_shape": [8]}, True, {"x": x}))
    assert ret.outputs["y"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert ret.outputs["mean"].dtype == np.float32 and ret.outputs["mean"].shape == (3, 1)
    ref = refnorm.evaluate("layer_norm", {"x": x.astype(np.float64)}, config={"normalized_shape": [8]})
    assert np.max(np.abs(ret.outputs["y"].astype(np.float64) - ref.outputs["y"])) < 2 ** -7


def test_group_norm_scale_is_per_channel_opset21():
    """GroupNormalization-21 (per-channel scale/bias), not -18 (per group): weights differ inside a group."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 5)).astype(np.float32)
    w, b = np.arange(1, 7, dtype=np.float32), np.arange(6, dtype=np.float32) / 4
    ret = ORT.run(Call("group_norm", "float32", {"num_groups": 2}, True, {"x": x, "weight": w, "bias": b}))
    ref = refnorm.evaluate("group_norm", {"x": x.astype(np.float64), "weight": w, "bias": b},
                           config={"num_groups": 2})
    assert np.max(np.abs(ret.outputs["y"] - ref.outputs["y"])) < 1e-5


def test_absent_parameters_are_ones_and_zeros_and_eval_state_is_unchanged():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    st = {"running_mean": rng.standard_normal(3).astype(np.float32),
          "running_var": (1 + rng.random(3)).astype(np.float32), "num_batches_tracked": np.asarray(7, np.int64)}
    for op in ("batch_norm", "instance_norm"):
        ret = ORT.run(Call(op, "float32", {}, False, {"x": x}, {}, st))
        ref = refnorm.evaluate(op, {"x": x.astype(np.float64)}, state={k: np.asarray(v) for k, v in st.items()},
                               training=False)
        assert np.max(np.abs(ret.outputs["y"] - ref.outputs["y"])) < 1e-5
        assert np.array_equal(ret.state["running_mean"], st["running_mean"])
        assert int(ret.state["num_batches_tracked"]) == 7


def test_batch_norm_onnx_convention_training_counts_calls():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    st = {"running_mean": np.zeros(2, np.float32), "running_var": np.ones(2, np.float32),
          "num_batches_tracked": np.asarray(2, np.int64)}
    cfg = {"convention": "onnx", "momentum": 0.75}
    ret = ORT.run(Call("batch_norm", "float32", cfg, True, {"x": x}, {}, st))
    ref = refnorm.evaluate("batch_norm", {"x": x.astype(np.float64)}, config=cfg,
                           state={k: np.asarray(v) for k, v in st.items()}, training=True)
    for k in ("running_mean", "running_var"):
        assert np.max(np.abs(ret.state[k] - ref.state[k])) < 1e-6, k
    assert int(ret.state["num_batches_tracked"]) == 3


# ----------------------------------------------------------------------- what is refused, and why
UNSUPPORTED = [
    *[(op, "float32", {}, True, False, "ONNX has no") for op in NO_ONNX],
    ("batch_norm", "float32", {}, True, True, "BIASED batch variance"),
    ("instance_norm", "float32", {}, True, True, "no running statistics"),
    ("rms_norm", "float32", {"normalized_shape": [4], "eps_placement": "outside"}, True, False, "inside"),
    ("rms_norm", "float32", {"normalized_shape": [4], "weight_offset": 1.0}, True, False, "weight_offset"),
    ("local_response_norm", "float32", {"size": 4}, True, False, "even"),
    ("local_response_norm", "float32", {"size": 3, "beta": -0.5}, True, False, "beta <= 0"),
    ("lp_normalize", "float32", {"dim": [1, 2]}, True, False, "one axis"),
    ("lp_normalize", "float32", {"p": 3.0}, True, False, "p = 1 or 2"),
    ("mean_variance_norm", "float32", {"eps": 1e-5}, True, False, "no eps attribute"),
    ("layer_norm", "float64", {"normalized_shape": [4], "eps": 1e-5}, True, False, "32-bit float"),
    ("layer_norm", "float8", {"normalized_shape": [4]}, True, False, "dtype"),
]


@pytest.mark.parametrize("op,dtype,config,training,state,why", UNSUPPORTED,
                         ids=[f"{u[0]}-{u[5][:16]}" for u in UNSUPPORTED])
def test_unsupported_calls_give_a_reason(op, dtype, config, training, state, why):
    reason = ORT.supports_config(op, dtype, config, training, state)
    assert isinstance(reason, str) and why in reason, reason


def test_float64_runs_when_the_attributes_are_float32_numbers():
    assert ORT.supports_config("layer_norm", "float64", {"normalized_shape": [4], "eps": 0.5}, True) is None
    assert ORT.supports_config("mean_variance_norm", "float64", {}, True) is None


def test_lp_normalize_torch_rule_runs_only_where_it_is_onnx_rule():
    small = np.array([[3e-13, 4e-13], [3.0, 4.0]], np.float32)
    call = Call("lp_normalize", "float32", {"dim": -1, "eps": 1e-12}, True, {"x": small})
    assert "below eps" in ORT.supports(call)
    ok = np.array([[0.0, 0.0], [3.0, 4.0]], np.float32)           # an all-zero slice: both rules give 0
    ret = ORT.run(Call("lp_normalize", "float32", {"dim": -1, "eps": 1e-12}, True, {"x": ok}))
    assert np.array_equal(ret.outputs["y"], np.array([[0, 0], [0.6, 0.8]], np.float32))


def test_missing_kernels_are_skips_not_errors():
    x = np.ones((2, 3, 4, 4), ml_dtypes.bfloat16)
    with pytest.raises(NotImplementedError, match="no kernel for LRN-13"):
        ORT.run(Call("local_response_norm", "bfloat16", {"size": 3}, True, {"x": x}))


# ------------------------------------------------------------------------ forward-only protocol
def test_the_checker_lists_grads_of_a_forward_only_backend_as_unchecked():
    case = golden.load_case(GOLDEN, "layer_norm/normal_f32_6x100")
    r = check_case(ORT, case)
    assert r.status == "partial" and "unchecked: step0.grads.x (not returned (the backend is forward-only))" \
        in r.message, r.message
    assert {"step0.grads.x", "step0.grads.weight", "step0.grads.bias"} <= set(r.unchecked)
    assert all(a.part != "grads" for a in r.arrays)

    class NoGrads:                       # the same outputs, but a backend that does not declare forward_only
        name = "no-grads"

        def available(self):
            return None

        def supports(self, call):
            return None

        def contract(self, call):
            return ORT.contract(call)

        def run(self, call):
            return Returned(ORT.run(call).outputs)
    r = check_case(NoGrads(), case)
    assert r.status == "error" and "returned no grad" in r.message


# ------------------------------------------------------------ the facts behind the known failures
def test_fact_group_normalization_function_body_is_one_pass():
    import onnx
    from onnx import helper, printer
    schema = onnx.defs.get_schema("GroupNormalization", 21)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-5)
    tps = [helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, s).SerializeToString() for s in ([2, 4, 3], [4], [4])]
    fn = onnx.FunctionProto()
    fn.ParseFromString(schema.get_context_dependent_function(node.SerializeToString(), tps))
    text = printer.to_text(fn)
    assert "MeanOfSquare = ReduceMean" in text and "Var = Sub (MeanOfSquare, SquareOfMean)" in text
    # the consequence: a constant group gets a negative variance and NaN where refnorm gives the bias
    case = golden.load_case(GOLDEN, "group_norm/const_g4_f32_2x8x5x7")
    (st, ret), = _run(case)
    y = ret.outputs["y"]
    assert np.isnan(y).any() and np.isfinite(st.outputs["y"]).all()


def test_fact_reduce_mean_exceeds_the_block_model():
    """group_norm's "serial" reduction: onnxruntime's ReduceSum (the function body's ReduceMean) errs by
    more than the block model's 2 sqrt(n) + 2 units on a constant float32 row of n = 65536."""
    import onnx
    from onnx import helper
    g = helper.make_graph([helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=0)], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("a", onnx.TensorProto.INT64, None)],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    n, worst = 65536, 0.0
    for c in (0.1, 1 / 3, 0.7, 400.69724):
        x = np.full((n,), c, np.float32)
        got = float(s.run(None, {"x": x, "a": np.array([0], np.int64)})[0])
        worst = max(worst, abs(got - n * float(x[0])) / (n * float(x[0])) / 2.0 ** -24)
    assert worst > 2 * n ** 0.5 + 2, worst


def test_fact_mean_variance_normalization_kernel_omits_the_epsilon():
    import onnx
    from onnx import printer
    body = printer.to_text(onnx.defs.get_schema("MeanVarianceNormalization", 13).function_body)
    assert "Processed_STD = Add (STD, Epsilon)" in body and "1e-09" in body      # the spec adds 1e-9
    const = np.full((1, 1, 2, 2), 0.5, np.float32)
    y = ORT.run(Call("mean_variance_norm", "float32", {"axes": [2, 3]}, True, {"x": const})).outputs["y"]
    assert np.isnan(y).all()                                                   # 0 / 0: no epsilon
    x = np.array([0, 3e-9, 0, 0], np.float32).reshape(1, 1, 1, 4)              # std ~ 1.3e-9, comparable to 1e-9
    y = ORT.run(Call("mean_variance_norm", "float32", {"axes": [2, 3]}, True, {"x": x})).outputs["y"]
    d = x.astype(np.float64) - x.mean()
    assert np.allclose(y, d / d.std(), rtol=1e-6)                             # divided by std alone
    assert not np.allclose(y, d / (d.std() + 1e-9), rtol=1e-2)                # not by std + 1e-9 (the spec)


def test_fact_mean_variance_normalization_function_body_rejects_float16():
    x = np.ones((1, 2, 3, 3), np.float16)
    with pytest.raises(RuntimeError, match="bound to different types"):
        ORT.run(Call("mean_variance_norm", "float16", {}, True, {"x": x}))


def test_fact_lrn_keeps_a_sliding_window_sum():
    """A float32 emulation of onnxruntime's LRN loop (lrn.cc: add the head channel's square, subtract the
    tail's) reproduces its output to 2 ulp (its pow differs from NumPy's) on the failing golden case and has
    its error at the worst element, where float32 windows summed afresh err 10 times less."""
    case = golden.load_case(GOLDEN, "local_response_norm/heavy_tail_f32_2x10x30")
    (st, ret), = _run(case)
    x, y = st.inputs["x"], ret.outputs["y"]
    f = np.float32
    size, pre = 5, 2
    sq = np.zeros((x.shape[0], x.shape[1] + size - 1, x.shape[2]), f)
    sq[:, pre:pre + x.shape[1]] = x * x
    aos = f(1.0) / f(size)
    s = np.full((x.shape[0], x.shape[2]), f(1.0), f)
    for c in range(size):
        s = (s + aos * sq[:, c]).astype(f)
    scale = [s]
    for c in range(1, x.shape[1]):
        s = (s + aos * sq[:, c + size - 1]).astype(f)
        s = (s - aos * sq[:, c - 1]).astype(f)
        scale.append(s)
    emu = (np.power(np.stack(scale, axis=1), f(-0.75)) * x).astype(f)
    assert np.all(np.abs(emu.astype(np.float64) - y) <= 2 * np.spacing(np.abs(y)))
    ref = st.outputs["y"]
    i = np.unravel_index(np.argmax(np.abs(y - ref)), y.shape)
    fresh = f(1.0) + aos * sq[:, i[1]:i[1] + size].sum(axis=1, dtype=f)
    fresh_y = np.power(fresh, f(-0.75)) * x[:, i[1]]
    assert abs(float(emu[i]) - ref[i]) > 0.9 * abs(float(y[i]) - ref[i])
    assert abs(float(fresh_y[i[0], i[2]]) - ref[i]) < 0.2 * abs(float(y[i]) - ref[i])


# ------------------------------------------------------------------------------------ the full check
def test_onnxruntime_passes_every_case_but_its_known_defects(tmp_path, capsys):
    out = tmp_path / "ort.json"
    rc = main(["check", "--backend", "onnxruntime", "--golden", GOLDEN, "--expect-failures", KNOWN,
               "--json", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 4, text[-3000:]                       # forward only: no case can pass, every one is partial
    data = json.loads(out.read_text())
    s = data["summary"]
    assert s["failed"] == 0 and s["errors"] == 0 and s["expected_failures"] == len(_known())
    assert s["passed"] == 0 and s["partial"] >= 150, s
    assert "refnorm check: PARTIAL: backend onnxruntime: 0 passed" in text
    for c in data["cases"]:
        if c["status"] == "partial" and c["unchecked"]:
            assert all(".grads." in k for k in c["unchecked"]), c["unchecked"]


def test_onnxruntime_defects_fail_without_the_list(tmp_path, capsys):
    known = _known()
    s = listed_cases_fail("onnxruntime", known, GOLDEN, tmp_path / "known.json")
    capsys.readouterr()
    assert s["failed"] + s["errors"] == len(known) == s["cases"], s
