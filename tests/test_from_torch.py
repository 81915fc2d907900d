"""Issue 19: a torch kernel as a backend in one line (from_torch), and the frictions a new user met:
complete configs handed to backends, --backend-option, boolean masks, the jax adapter's jit cache."""
from __future__ import annotations

import os
import pathlib
import re
import sys
import textwrap

import numpy as np
import pytest

import refnorm
from refnorm.check import Contract, run_check
from refnorm.check.backends import complete_config, from_torch, get_backend
from refnorm.check.backends.plugin import BackendLoadError, parse_options
from refnorm.cli import main
from refnorm.errors import ConfigError, InputTypeError
from refnorm.spec import DEFAULT
from refnorm.testing import assert_backend_passes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")


def _ids(op, dtype=None, match=None):
    from refnorm.golden import store
    return [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == op
            and (dtype is None or e["case"]["dtype"] == dtype) and (match is None or match in e["id"])]


# ---------------------------------------------------------------- complete configs
class Recorder:
    """Records the config of every call it is asked about; implements nothing (skips every case)."""
    name = "recorder"

    def __init__(self):
        self.configs = []

    def available(self):
        return None

    def supports(self, call):
        self.configs.append((call.op, dict(call.config)))
        return "recording only"

    def contract(self, call):
        return Contract()

    def run(self, call):
        raise NotImplementedError


def test_backends_get_every_option_with_defaults_filled_in():
    rec = Recorder()
    ids = _ids("batch_norm")[:5] + _ids("rms_norm")[:3] + _ids("lp_normalize")[:2]
    run_check(rec, GOLDEN, case_ids=ids)
    assert len(rec.configs) >= len(ids)
    for op, cfg in rec.configs:
        assert set(cfg) == set(refnorm.get(op).options), (op, cfg)
        assert not any(v is DEFAULT for v in cfg.values()), (op, cfg)       # resolved, never the marker
    bn = [cfg for op, cfg in rec.configs if op == "batch_norm"]
    assert all(cfg["momentum"] == {"torch": 0.1, "onnx": 0.9}[cfg["convention"]] or cfg["momentum"] is None
               or isinstance(cfg["momentum"], float) for cfg in bn)
    assert any(cfg["eps_placement"] == "inside" for op, cfg in rec.configs if op == "rms_norm")


def test_complete_config_is_public_and_refuses_bad_names():
    assert complete_config("batch_norm", {})["momentum"] == 0.1
    assert complete_config("batch_norm", {"convention": "onnx"})["momentum"] == 0.9
    assert complete_config("batch_norm", {"momentum": None})["momentum"] is None
    assert complete_config("rms_norm", {"normalized_shape": [4]}) == {
        "normalized_shape": [4], "eps": None, "eps_placement": "inside", "weight_offset": 0.0}
    with pytest.raises(ConfigError, match="unknown option.*'epsilon'.*expected: normalized_shape, eps"):
        complete_config("layer_norm", {"normalized_shape": [4], "epsilon": 1e-5})
    with pytest.raises(KeyError, match="missing required option.*'normalized_shape'"):
        complete_config("layer_norm", {})


# ---------------------------------------------------------------- boolean masks
def test_unified_norm_takes_a_boolean_pad_mask():
    rng = np.random.default_rng(19)
    x, dy = rng.standard_normal((2, 9, 4)), rng.standard_normal((2, 9, 4))
    mask = rng.random((2, 9)) < 0.3
    assert mask.any() and not mask.all()
    for engine in ("fast", "spec"):
        b = refnorm.evaluate("unified_norm", {"x": x, "pad_mask": mask}, grad_outputs={"y": dy}, engine=engine)
        f = refnorm.evaluate("unified_norm", {"x": x, "pad_mask": mask.astype(np.float64)}, grad_outputs={"y": dy},
                             engine=engine)
        for part in ("outputs", "grads", "state"):
            for k, v in getattr(f, part).items():
                assert np.array_equal(getattr(b, part)[k], v), (engine, part, k)
    # the mask matters (padding leaves the statistic), so the boolean one was not ignored
    none = refnorm.evaluate("unified_norm", {"x": x})
    assert not np.array_equal(none.outputs["var"], b.outputs["var"])
    assert refnorm.get("unified_norm").masks == ("pad_mask",)
    # integers are still refused, and a boolean x is no mask
    with pytest.raises(InputTypeError, match="'pad_mask' has dtype int8; expected a floating dtype"):
        refnorm.evaluate("unified_norm", {"x": x, "pad_mask": mask.astype(np.int8)})
    with pytest.raises(InputTypeError, match="'x' has dtype bool"):
        refnorm.evaluate("unified_norm", {"x": x > 0})


# ---------------------------------------------------------------- --backend-option
FACTORY = textwrap.dedent('''
    from examples.tiny_backend import TinyBackend

    class Scaled(TinyBackend):
        """tiny, with its outputs times ``scale`` (1.0: correct)."""
        def __init__(self, scale, label="scaled"):
            self.scale, self.name = scale, f"{label}-{scale}"
        def run(self, call):
            r = super().run(call)
            return type(r)({k: (v.astype("float64") * self.scale).astype(v.dtype) for k, v in r.outputs.items()}, r.grads)

    def make(scale=1.0):
        return Scaled(scale)
''')


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "kernels_19.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(ROOT)
    yield "kernels_19"
    sys.modules.pop("kernels_19", None)


def test_backend_options_reach_the_factory(user_module, capsys):
    case = _ids("layer_norm", "float32", "normal_f32_6x100")[0]
    assert main(["check", "--backend", f"{user_module}:Scaled", "--backend-option", "scale=1.0",
                 "--backend-option", "label=mine", "--case", case, "--no-progress"]) == 0
    assert "backend mine-1.0" in capsys.readouterr().out
    # a wrong scale fails, and the reproduce command carries the option
    assert main(["check", "--backend", f"{user_module}:make", "--backend-option", "scale=1.01", "--case", case,
                 "--no-progress", "--no-diagnosis"]) == 1
    out = capsys.readouterr().out
    assert f"reproduce: refnorm check --backend {user_module}:make --backend-option scale=1.01" in out
    # built-ins take them too
    assert get_backend("torch-cpu", {"param_dtype": "case"}).name == "torch-cpu-caseparams"
    assert get_backend("jax", parse_options(["variance=stable"])).name == "jax-stable"


def test_bad_backend_options_are_usage_errors(user_module, capsys):
    case = _ids("layer_norm", "float32")[0]
    for argv, msg in (
            (["--backend", f"{user_module}:Scaled", "--backend-option", "scale"], "expected KEY=VALUE"),
            (["--backend", f"{user_module}:Scaled", "--backend-option", "speed=3"],
             "the class 'Scaled' does not take the options speed=3"),
            (["--backend", f"{user_module}:Scaled", "--backend-option", "scale=1", "--backend-option", "scale=2"],
             "given twice"),
            (["--backend", "numpy", "--backend-option", "x=1"], "does not take the options x=1"),
            (["--backend", "examples.tiny_backend:TinyBackend", "--backend-option", "x=1"],
             "does not take the options x=1")):
        assert main(["check", *argv, "--case", case, "--no-progress"]) == 2, argv
        assert msg in capsys.readouterr().err, (argv, msg)
    assert parse_options(["a=1e-6", "b=[1, 2]", "c=cpu", "d=true", "e=null"]) == {
        "a": 1e-6, "b": [1, 2], "c": "cpu", "d": True, "e": None}
    with pytest.raises(BackendLoadError, match="backend object, not a class or factory"):
        from refnorm.check.backends import plugin
        plugin.build(Recorder(), "'obj'", {"x": 1})


def test_pytest_plugin_takes_backend_options(user_module, tmp_path):
    import subprocess
    case = _ids("layer_norm", "float32", "normal_f32_6x100")[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT, os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--refnorm-backend", f"{user_module}:make",
            f"--refnorm-golden={GOLDEN}", "--refnorm-ops", "layer_norm", "-k", case.split("/")[1], str(tmp_path)]
    ok = subprocess.run(args + ["--refnorm-backend-option", "scale=1.0"], capture_output=True, text=True, env=env,
                        cwd=str(tmp_path))
    assert ok.returncode == 0 and "1 passed" in ok.stdout and "failed" not in ok.stdout, ok.stdout + ok.stderr
    bad = subprocess.run(args + ["--refnorm-backend-option", "scale=1.01"], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path))
    assert bad.returncode == 1 and "1 failed" in bad.stdout and "--backend-option scale=1.01" in bad.stdout, bad.stdout


# ---------------------------------------------------------------- the jax adapter compiles once per signature
def test_jax_compiles_once_per_shape_signature():
    pytest.importorskip("jax")
    from refnorm.check import Call
    b = get_backend("jax")
    rng = np.random.default_rng(0)

    def call(shape, seed):
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        return Call("layer_norm", "float32", complete_config("layer_norm", {"normalized_shape": [shape[-1]]}), True,
                    {"x": x, "weight": np.ones(shape[-1], np.float32)},
                    {"y": rng.standard_normal(shape).astype(np.float32)})
    for seed in range(3):
        b.run(call((6, 10), seed))
    cache = b._jit_cache
    assert len(cache) == 1
    (f, fb), = cache.values()
    assert fb._cache_size() == 1                     # three calls, one trace and compile
    b.run(call((7, 10), 9))                          # a new shape: a new compile, same jitted function
    assert len(cache) == 1 and fb._cache_size() == 2


# ---------------------------------------------------------------- from_torch
def _torch():
    return pytest.importorskip("torch")


def test_from_torch_wraps_f_layer_norm_and_passes():
    F = _torch().nn.functional
    b = from_torch(F.layer_norm, "layer_norm", contract={"float64": "strict", "float32": "strict",
                                                           "float16": "stats_d", "bfloat16": "stats_d"},
                   signature=("x", "normalized_shape", "weight", "bias", "eps"), param_dtype="float32")
    rep = assert_backend_passes(b, ops=["layer_norm"], dtypes=["float32", "bfloat16"], golden=GOLDEN,
                                allow_partial=True)
    assert rep.summary()["passed"] >= 15


def test_from_torch_judges_what_it_wraps():
    """A wrong kernel fails: the variance with ddof=1 (a classic) is caught through from_torch."""
    torch = _torch()

    def bad_layer_norm(x, weight=None, bias=None, *, normalized_shape, eps=1e-5):
        dims = tuple(range(-len(normalized_shape), 0))
        xf = x.float()
        y = (xf - xf.mean(dims, keepdim=True)) / torch.sqrt(xf.var(dims, keepdim=True, unbiased=True) + eps)
        y = y * weight if weight is not None else y
        return (y + bias if bias is not None else y).to(x.dtype)
    with pytest.raises(AssertionError, match="FAILED layer_norm/normal_f32"):
        assert_backend_passes(from_torch(bad_layer_norm, "layer_norm", contract="strict"), ops=["layer_norm"],
                              dtypes=["float32"], golden=GOLDEN)


def test_from_torch_maps_options_keeps_strides_and_skips_what_it_does_not_pass():
    torch = _torch()
    seen = []

    def my_rms(x, w, *, shape, epsilon):
        seen.append((x.is_contiguous(), epsilon))
        return torch.nn.functional.rms_norm(x, shape, w, eps=epsilon)
    b = from_torch(my_rms, "rms_norm", contract="strict", signature=("x", "weight"), dtypes=["float32"],
                   options={"eps": "epsilon", "normalized_shape": "shape"})
    rep = run_check(b, GOLDEN, ops=["rms_norm"], dtypes=["float32"], layout="transposed")
    bad = [(c.id, c.status, c.message) for c in rep.cases if c.status not in ("passed", "partial", "skipped")]
    assert not bad, bad
    assert sum(c.status == "passed" for c in rep.cases) >= 5
    assert any(not contig for contig, _ in seen), "the transposed layout must reach the kernel"
    assert {e for _, e in seen} >= {None, 1e-5}                 # refnorm's eps, under the kernel's keyword
    # an option the kernel does not take, at a non-default value: skipped with the reason, never judged
    outside = [c for c in rep.cases if "outside" in c.id]
    assert outside and all(c.status == "skipped" and "eps_placement='outside' is not passed" in c.message
                           for c in outside), [(c.id, c.status, c.message) for c in outside]
    # normalized_shape (required) not passed: fn is taken to normalize the last axis; the cases with another
    # normalized_shape are skipped, saying which, and the others judged (x * w is no RMSNorm: failed)
    nb = from_torch(lambda x, w: x * w, "rms_norm", contract="strict", signature=("x", "weight"))
    rep = run_check(nb, GOLDEN, ops=["rms_norm"], dtypes=["float32"], diagnose=False)
    skipped = [c for c in rep.cases if c.status == "skipped"]
    shaped = [c for c in skipped if "normalized_shape" in c.message]
    assert shaped and all("not passed" in c.message and "last axis only" in c.message for c in shaped)
    judged = [c for c in rep.cases if c.status != "skipped"]
    assert judged and {c.status for c in judged} == {"failed"}, [(c.id, c.status) for c in judged]


def test_from_torch_takes_an_autograd_function_and_masks_as_bool():
    torch = _torch()

    LN = _kernels().LayerNormFunction                # torch.native_layer_norm and its backward
    b = from_torch(LN, "layer_norm", contract="strict", signature=("x", "weight", "bias", "normalized_shape", "eps"))
    assert b.keywords == {}                          # apply() takes positional arguments only
    rep = run_check(b, GOLDEN, ops=["layer_norm"], dtypes=["float32", "float64"])
    assert rep.verdict in ("ok", "partial") and rep.summary()["passed"] >= 15, rep.summary()

    got = {}

    def un(x, pad_mask=None):
        got["mask"] = pad_mask
        return x * 1.0
    ub = from_torch(un, "unified_norm", contract="strict", signature=("x", "pad_mask"), dtypes=["float32"],
                    outputs=("y",))
    from refnorm.check import Call
    x = np.ones((2, 3, 4), np.float32)
    ub.run(Call("unified_norm", "float32", complete_config("unified_norm", {}), True,
                {"x": x, "pad_mask": np.array([[0, 1, 0], [1, 0, 0]], np.float32)}))
    assert got["mask"].dtype == torch.bool and got["mask"].tolist() == [[False, True, False], [True, False, False]]


def _composite_add_norm(torch, F, lose_residual_grad=False):
    def add_norm(x, residual, weight, bias, *, normalized_shape, eps, norm, prenorm, residual_in_fp32):
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        s = x.to(acc) + (residual.to(acc) if residual is not None else 0)
        w = None if weight is None else weight.to(acc)
        if norm == "layer_norm":
            y = F.layer_norm(s, normalized_shape, w, None if bias is None else bias.to(acc), eps)
        else:
            y = F.rms_norm(s, normalized_shape, w, eps)
            y = y if bias is None else y + bias.to(acc)
        res = s.to(acc if residual_in_fp32 and x.dtype != torch.float64 else x.dtype)
        return y.to(x.dtype), (res.detach().requires_grad_() if lose_residual_grad else res)
    return add_norm


def test_from_torch_backpropagates_through_every_returned_differentiable_output():
    """add_norm returns y and the new residual; with prenorm=True the residual's cotangent flows back:
    a composite add + norm wrapped by from_torch passes every golden add_norm case it takes, and the same
    kernel whose residual_out is cut from the graph fails (dx and dresidual miss dresidual_out)."""
    torch = _torch()
    import torch.nn.functional as F
    sig = ("x", "residual", "weight", "bias")
    good = from_torch(_composite_add_norm(torch, F), "add_norm", contract="strict", signature=sig)
    rep = run_check(good, GOLDEN, ops=["add_norm"])
    judged = [c for c in rep.cases if c.status != "skipped"]
    assert len(judged) >= 8 and all(c.status in ("passed", "partial") for c in judged), \
        [(c.id, c.message[:120]) for c in judged if c.status not in ("passed", "partial")]
    cut = from_torch(_composite_add_norm(torch, F, lose_residual_grad=True), "add_norm", contract="strict",
                     signature=sig)
    failed = [c for c in run_check(cut, GOLDEN, ops=["add_norm"], diagnose=False).cases if c.status == "failed"]
    assert failed and all(any(a.part == "grads" and a.verdict == "failed" for a in c.arrays) for c in failed)


def test_from_torch_refuses_bad_arguments_by_name():
    F = _torch().nn.functional
    with pytest.raises(ValueError, match="contract 'loose'; expected one of strict, stats_d, epi_d"):
        from_torch(F.layer_norm, "layer_norm", contract="loose")
    with pytest.raises(ValueError, match="'epsilon' is not an input, option or state of layer_norm"):
        from_torch(F.layer_norm, "layer_norm", contract="strict", signature=("x", "epsilon"))
    with pytest.raises(ValueError, match="outputs"):
        from_torch(F.layer_norm, "layer_norm", contract="strict", outputs=("mean",))
    with pytest.raises(refnorm.errors.UnknownNameError):
        from_torch(F.layer_norm, "layer_nrom", contract="strict")
    with pytest.raises(TypeError, match="not callable"):
        from_torch(3, "layer_norm", contract="strict")


def _readme_block(tag):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"<!-- {tag} -->\s*```python\n(.+?)\n```", text, flags=re.S)
    assert m, f"README.md must hold a ```python block after <!-- {tag} -->"
    return m.group(1)


def test_readme_three_line_torch_kernel_check_runs(monkeypatch):
    """The README's script: a user's torch kernel, wrapped and judged in three lines (after the imports)."""
    torch = _torch()
    code = _readme_block("torch-kernel-example")
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "import", "from"))]
    assert len(lines) <= 3, lines
    monkeypatch.chdir(ROOT)
    mod = type(sys)("my_kernels")

    def my_rms_norm(x, weight=None, *, normalized_shape, eps=None):
        dims = tuple(range(-len(normalized_shape), 0))
        xf = x.float() if x.dtype != torch.float64 else x
        eps = torch.finfo(xf.dtype).eps if eps is None else eps      # torch's eps=None: the compute dtype's
        y = xf * torch.rsqrt(xf.pow(2).mean(dims, keepdim=True) + eps)
        return (y * weight if weight is not None else y).to(x.dtype)
    mod.my_rms_norm = my_rms_norm
    monkeypatch.setitem(sys.modules, "my_kernels", mod)
    ns = {}
    exec(compile(code, "README.md:torch-kernel-example", "exec"), ns)
    # and it judged something: the same script with a wrong kernel fails
    mod.my_rms_norm = lambda x, weight=None, *, normalized_shape, eps=None: my_rms_norm(x, weight, normalized_shape=normalized_shape, eps=1e-3)
    with pytest.raises(AssertionError, match="FAILED rms_norm/"):
        exec(compile(code, "README.md:torch-kernel-example", "exec"), {})


def test_assert_backend_passes_refuses_a_check_that_judged_nothing():
    with pytest.raises(AssertionError, match="recording only"):
        assert_backend_passes(Recorder(), ops=["layer_norm"], golden=GOLDEN)


def test_gpu_run_script_without_a_gpu_writes_nothing(tmp_path):
    """benchmarks/gpu_run.sh is the one command of a GPU pass; without a GPU it exits 3 and writes nothing:
    the GPU figures and torch-cuda known-failure lists of the run that made them stay as they are."""
    import subprocess
    torch = _torch()
    made = [os.path.join(ROOT, "docs", "gpu.md"), os.path.join(ROOT, "docs", "gpu_probe.md"),
            os.path.join(ROOT, "known_failures", "torch-cuda.txt"),
            os.path.join(ROOT, "known_failures", "torch-cuda-caseparams.txt")]
    def contents():
        return {p: pathlib.Path(p).read_text() if os.path.exists(p) else None for p in made}
    before = contents()
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: run benchmarks/gpu_run.sh itself")
    env = {**os.environ, "PYTHON": sys.executable}
    r = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "gpu_run.sh"), str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 3 and "no CUDA device" in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert not (tmp_path / "out").exists()
    assert before == contents()


def test_gpu_known_failure_lists_are_parseable_and_explain_only_what_their_rules_fit(tmp_path, monkeypatch):
    """benchmarks/gpu_known_failures.py writes lists the checker reads; a reviewed rule explains only the
    cases it names, anything else keeps the measured message marked "not reviewed"."""
    import importlib.util
    import json
    from refnorm.check.core import read_expected_failures
    spec = importlib.util.spec_from_file_location("gkf", os.path.join(ROOT, "benchmarks", "gpu_known_failures.py"))
    gkf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gkf)

    def case(cid, status, arrays=(), diag=None, message="step 0 grad x: 2.5 x bound"):
        return {"id": cid, "status": status, "message": message, "diagnosis": {"matched": diag} if diag else None,
                "arrays": [{"part": p, "name": n, "verdict": "failed"} for p, n in arrays]}
    report = {"cases": [
        case("batch_norm/normal_bf16_6x4x25", "failed", [("grads", "x")]),
        case("weight_norm/normal_f64_3x7", "failed", [("outputs", "w"), ("grads", "v")],
             message="step 0 output w: 1.6e+07 x bound"),
        case("instance_norm/normal_noweight_f32_3x2x7", "error",
             message="step 0: backend raised RuntimeError: torch's backward of instance_norm (gradients of bias, x) "
                     "raised RuntimeError: tensor does not have a device"),
        case("layer_norm/normal_f16_4x128", "failed", [("grads", "x"), ("outputs", "y")], message="y: 3 x bound #1"),
        case("rms_norm/normal_f32_4x128", "passed"),
    ]}
    rows = gkf.lines_for(report)
    assert len(rows) == 4
    assert "beyond stats_d" in rows[0] and "up to 2.5 x bound" in rows[0]
    assert "only float32-accurate on float64" in rows[1]
    assert "bias and no weight raises" in rows[2]
    assert "not reviewed" in rows[3] and "#" not in rows[3]      # no rule fits layer_norm: the message stays
    (tmp_path / "known_failures").mkdir()
    for name in ("torch-cuda", "torch-cuda-caseparams"):
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
    monkeypatch.chdir(tmp_path)
    gkf.main(str(tmp_path), "torch test")
    parsed = read_expected_failures(str(tmp_path / "known_failures" / "torch-cuda.txt"))
    assert sorted(parsed) == sorted(c["id"] for c in report["cases"] if c["status"] != "passed")


# ---------------------------------------------------------------- third-party kernels as they are (issue 34)
def _kernels():
    _torch()
    import examples.torch_kernels as K
    return K


def test_from_torch_judges_a_quantizing_kernel_without_differentiable_outputs():
    """norm_quant has no differentiable output: from_torch takes no gradient (it raised IndexError on every
    case), and a torch composite of RMSNorm + per-token float8 quantization passes the golden cases it
    takes; the same kernel with a planted bug (the scale's floor forgotten on an all-zero row) fails."""
    K = _kernels()
    torch = _torch()
    rep = run_check(from_torch(K.rms_norm_fp8_quant, "norm_quant", contract="strict"), GOLDEN, ops=["norm_quant"])
    judged = [c for c in rep.cases if c.status != "skipped"]
    assert len(judged) >= 5 and all(c.status == "passed" for c in judged), [(c.id, c.message) for c in judged]
    skipped = {c.id: c.message for c in rep.cases if c.status == "skipped"}
    assert "static_scale" in skipped["norm_quant/normal_rms_e4m3_static_bf16_8x256"]

    def no_floor(x, weight=None, *, eps=1e-5):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
        amax = y.abs().amax(-1, keepdim=True)
        scale = amax / 448.0                                        # no floor: 0 / 0 on an all-zero row
        return (y / scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale, amax
    bad = run_check(from_torch(no_floor, "norm_quant", contract="strict"), GOLDEN, case_ids=[
        "norm_quant/zero_rms_e4m3_dyn_f32_2x64"], diagnose=False).cases[0]
    assert bad.status == "failed" and "scale" in bad.message, bad.message


ROWSCALE_CASE = "add_norm/mean1e4_rs_xnormal_f32_130x3"


def test_a_gradient_the_kernel_does_not_compute_is_unchecked_with_its_reason_never_zero_filled():
    """A fused add+norm whose backward returns None for rowscale's gradient. Undeclared: the case is an
    error naming rowscale and how to declare it (autograd's None was zero-filled and judged: a false
    failure at 615x the bound). Declared per array (not_computed=): the case is partial, rowscale's
    gradient listed unchecked with the kernel's reason in the text and JSON reports, every other array
    judged; cases without rowscale pass; never reported as passed."""
    K = _kernels()
    from refnorm.check import report as R
    undeclared = run_check(from_torch(K.fused_add_layer_norm, "add_norm", contract="strict"), GOLDEN,
                           case_ids=[ROWSCALE_CASE]).cases[0]
    assert undeclared.status == "error" and "'rowscale'" in undeclared.message \
        and "not_computed={'grad.rowscale'" in undeclared.message, undeclared.message
    why = "the fused kernel does not compute it"
    b = from_torch(K.fused_add_layer_norm, "add_norm", contract="strict", not_computed={"grad.rowscale": why})
    rep = run_check(b, GOLDEN, ops=["add_norm"], dtypes=["float32"])
    c = next(c for c in rep.cases if c.id == ROWSCALE_CASE)
    assert c.status == "partial" and c.unchecked == ["step0.grads.rowscale"], (c.status, c.message)
    assert c.unchecked_why["step0.grads.rowscale"] == f"not computed by the backend: {why}"
    assert {a.name for a in c.arrays if a.part == "grads"} == {"x", "residual", "weight", "bias"}
    assert all(a.verdict == "verified" for a in c.arrays)
    assert why in R.partials(rep) and c.to_json()["unchecked_why"] == {"step0.grads.rowscale": f"not computed "
                                                                      f"by the backend: {why}"}
    plain = [x for x in rep.cases if x.status != "skipped" and x.id != ROWSCALE_CASE]
    assert plain and all(x.status == "passed" and not x.unchecked for x in plain), [(x.id, x.status) for x in plain]
    assert rep.verdict == "partial"
    with pytest.raises(AssertionError, match="not computed by the backend: the fused kernel"):
        assert_backend_passes(b, case_ids=[ROWSCALE_CASE], golden=GOLDEN)
    with pytest.raises(ValueError, match="not_computed key 'grad.scale'"):
        from_torch(K.fused_add_layer_norm, "add_norm", contract="strict", not_computed={"grad.scale": why})
    with pytest.raises(ValueError, match="expected a non-empty reason"):
        from_torch(K.fused_add_layer_norm, "add_norm", contract="strict", not_computed={"grad.rowscale": ""})


from helpers import Wrapping  # noqa: E402


class _Dropping(Wrapping):
    """A plug-in (refnorm's numpy backend) that drops some arrays and declares them not computed."""

    def __init__(self, drop, declare):
        from refnorm.check.backends.numpy_backend import NumpyBackend
        self.inner, self.drop, self.declare = NumpyBackend(), drop, declare
        self.name = "dropping"

    def run(self, call):
        from refnorm.check import Returned
        r = self.inner.run(call)
        keep = {part: {k: v for k, v in d.items() if f"{part[:-1] if part != 'outputs' else 'output'}.{k}"
                       not in self.drop} for part, d in (("grads", r.grads), ("outputs", r.outputs))}
        return Returned(keep["outputs"], keep["grads"], r.state, self.declare)


def test_a_plugin_declares_arrays_not_computed_in_returned():
    """Returned.not_computed: a gradient or a differentiable output a plug-in does not compute is unchecked
    with its reason (not an error, not passed); a declared name the op lacks, or an array both returned
    and declared, is an error naming it; without the declaration a missing gradient stays an error."""
    case = ROWSCALE_CASE
    decl = {"grad.rowscale": "no rowscale gradient", "output.residual_out": "prenorm only"}
    c = run_check(_Dropping(set(decl), decl), GOLDEN, case_ids=[case]).cases[0]
    assert c.status == "partial" and sorted(c.unchecked) == ["step0.grads.rowscale", "step0.outputs.residual_out"]
    assert c.unchecked_why["step0.outputs.residual_out"] == "not computed by the backend: prenorm only"
    c = run_check(_Dropping({"grad.rowscale"}, {}), GOLDEN, case_ids=[case]).cases[0]
    assert c.status == "error" and "no grad 'rowscale'" in c.message, c.message
    c = run_check(_Dropping(set(), {"grad.rowscale": "why"}), GOLDEN, case_ids=[case]).cases[0]
    assert c.status == "error" and "returned grad 'rowscale' and declared it not computed" in c.message
    c = run_check(_Dropping(set(), {"grad.rowscal": "why"}), GOLDEN, case_ids=[case]).cases[0]
    assert c.status == "error" and "'grad.rowscal'" in c.message, c.message


def test_the_default_signature_follows_fns_own_parameter_names():
    """def add_ln(x, residual, weight, bias, *, eps) needs no signature=: the op's inputs fn names, in fn's
    order (it got all ten add_norm inputs positionally); a case with an input fn does not take (rowscale,
    mask) is skipped, naming it. autograd.Function.apply and a signature without the op's required
    input (F.layer_norm's ``input``) keep refnorm's order."""
    K = _kernels()
    F = _torch().nn.functional

    def add_ln(x, residual, weight, bias, *, eps):
        return K.fused_add_layer_norm(x, residual, weight, bias, eps=eps)
    b = from_torch(add_ln, "add_norm", contract="strict")
    assert b.signature == ("x", "residual", "weight", "bias") and b.keywords == {"eps": "eps"}
    rep = run_check(b, GOLDEN, ops=["add_norm"], dtypes=["float32"])
    assert sum(c.status == "passed" for c in rep.cases) >= 2, [(c.id, c.status, c.message) for c in rep.cases]
    rs = next(c for c in rep.cases if c.id == ROWSCALE_CASE)
    assert rs.status == "skipped" and "['rowscale'] are not passed" in rs.message, rs.message
    assert from_torch(K.LayerNormFunction, "layer_norm", contract="strict").signature == ("x", "weight", "bias")
    assert from_torch(F.layer_norm, "layer_norm", contract="strict").signature == ("x", "weight", "bias")
    assert from_torch(lambda x, w: x, "rms_norm", contract="strict").signature == ("x", "weight")
    assert from_torch(lambda weight, x: x, "rms_norm", contract="strict").signature == ("weight", "x")


def test_the_reproduction_of_a_backend_built_in_a_script_runs():
    """A backend made by from_torch in a script has no name a command line can load: the failure names the
    refnorm.testing call that judges that case again (and that call does fail it); a backend get_backend
    loaded keeps its refnorm check command."""
    from refnorm.check.backends import loaded_as
    from refnorm.check.report import reproduce
    F = _torch().nn.functional
    cid = "layer_norm/normal_f32_6x100"

    def off(x, weight=None, bias=None, *, normalized_shape, eps=1e-5):
        return F.layer_norm(x, normalized_shape, weight, bias, eps) * 1.001
    backend = from_torch(off, "layer_norm", contract="strict")
    with pytest.raises(AssertionError) as err:
        assert_backend_passes(backend, case_ids=[cid])
    line = next(ln for ln in str(err.value).splitlines() if "reproduce:" in ln).split("reproduce: ", 1)[1]
    assert line == f"refnorm.testing.assert_backend_passes(backend, case_ids=[{cid!r}])"
    assert "refnorm check --backend" not in str(err.value)
    with pytest.raises(AssertionError, match=f"FAILED {cid}"):
        exec(line, {"refnorm": refnorm, "backend": backend})
    assert reproduce("c", None, recipe="rms_norm shape=4x8") == \
        "refnorm.testing.assert_generated_case_passes(backend, 'rms_norm shape=4x8')"
    assert loaded_as(backend) is None
    assert loaded_as(get_backend("numpy")) == "numpy"
    assert loaded_as(get_backend("torch-cpu", {"param_dtype": "case"})) == "torch-cpu --backend-option param_dtype=case"
