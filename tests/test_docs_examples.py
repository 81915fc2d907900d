"""Issue 37, item 1: every code block of the README and of the documentation site is run by a test.

* Every ```python block of README.md and docs/*.md (SITE) carries a marker, ``<!-- NAME -->`` on the line before it; the block is run here
  (RUNNERS: each runner executes it in a namespace with the arrays its text assumes and checks what the
  text says it does) or by the test named in ELSEWHERE. A block without a marker, or a marker with no
  runner, fails; docs/framework_defects.md's blocks are each run by tests/test_framework_defects.py
  (WHOLE_PAGE). A marker on two pages (the README's one-liners, repeated in docs/kernels.md) must hold
  the same code there.
* A ```sh block's `refnorm ...` commands of the README and the pages its manual moved to (PAGES:
  figures.MANUAL) are parsed by the CLI's own parser (an option that does not
  exist fails), its `pytest --refnorm-...` options must be the plugin's, and its `pip install X==V` pins
  must be those .ci/run installs; the plug-in command of docs/kernels.md is run, with the exit status its
  comment states. (The long checks of the other commands run elsewhere: test_check_torch.py, the torch-cpu
  check; test_distributed.py; test_generate.py; test_triton_examples.py.)
* The expected-failures example of docs/verdicts.md parses, and says what the shipped list says.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import sys

import numpy as np
import pytest

import figures as F
import refnorm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
PAGES = F.MANUAL
SITE = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
WHOLE_PAGE = {"docs/framework_defects.md": "tests/test_framework_defects.py"}   # page -> the test running its blocks
_BLOCK = re.compile(r"(?:<!-- ([\w-]+) -->[ \t]*\n)?^```(\w*)[ \t]*\n(.*?)^```", re.S | re.M)
# marker -> the test file that runs the block (it reads it from README.md or from the page)
ELSEWHERE = {"torch-kernel-example": "tests/test_from_torch.py",
             "torch-one-liners": "tests/test_readme_kernels.py",
             "offline-example": "tests/test_offline_readme.py"}


def blocks(lang=None, pages=None):
    """[(page, marker or None, language, code, line)] of every fenced block of ``pages`` (default PAGES)."""
    out = []
    for page in PAGES if pages is None else pages:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for m in _BLOCK.finditer(text):
            if lang is None or m.group(2) == lang:
                out.append((page, m.group(1), m.group(2), m.group(3), text[:m.start(2)].count("\n") + 1))
    return out


def code(marker):
    found = {c for _, mk, _, c, _ in blocks("python", SITE) if mk == marker}
    assert len(found) == 1, f"<!-- {marker} -->: {len(found)} different blocks"
    return found.pop()


def run(marker, **namespace):
    exec(compile(code(marker), f"docs:{marker}", "exec"), namespace)
    return namespace


# ------------------------------------------------------------------------------------ the runners
def _layer_norm_f32(rng, rows=4, n=768):
    """float32 inputs and the reference's outputs and gradients, correctly rounded to float32."""
    x = rng.standard_normal((rows, n)).astype(np.float32)
    w, b = (1 + 0.1 * rng.standard_normal(n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    r = refnorm.evaluate("layer_norm", {"x": x, "weight": w, "bias": b}, config={"normalized_shape": [n]},
                         grad_outputs={"y": dy})
    f = {k: v.astype(np.float32) for k, v in (("y", r.outputs["y"]), ("dx", r.grads["x"]),
                                              ("dw", r.grads["weight"]), ("db", r.grads["bias"]))}
    return dict(x=x, w=w, b=b, dy=dy, **f)


def run_evaluate_quick_example():
    ns = run("evaluate-quick-example")
    x = ns["x"].astype(np.float64)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ns["r"].outputs["y"], want, rtol=1e-12, atol=1e-12)
    assert ns["r"].grads["x"].shape == x.shape and ns["r"].grads["weight"].shape == (768,)
    np.testing.assert_allclose(ns["r"].grads["weight"], want.sum(0), rtol=1e-12, atol=1e-12)


def run_evaluate_example():
    ns = run("evaluate-example")
    listed = re.findall(r"\b[a-z_]+_norm\b|\bnorm_quant\b", code("evaluate-example").split("x = ")[0])
    assert listed and set(listed) <= set(refnorm.names()), listed
    r, x = ns["r"], ns["x"].astype(np.float64)
    mean = x.mean(axis=(0, 2, 3))
    np.testing.assert_allclose(r.outputs["mean"].ravel(), mean, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(r.state["running_mean"], 0.1 * mean, rtol=1e-13, atol=1e-16)
    assert int(r.state["num_batches_tracked"]) == 1
    assert r.outputs["y"].dtype == np.float64 and set(r.grads) == {"x", "weight", "bias"}


def run_spec_engine_example():
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((5, 7)), "weight": rng.standard_normal(7)}
    cfg, cot = {"normalized_shape": [7]}, {"y": rng.standard_normal((5, 7))}
    ns = run("spec-engine-example", refnorm=refnorm, inputs=inputs, cfg=cfg, cot=cot)
    exec("r = " + code("spec-engine-example"), ns)
    fast = refnorm.evaluate("layer_norm", inputs, config=cfg, grad_outputs=cot)
    for k in ("y", "mean", "rstd"):
        assert np.array_equal(ns["r"].outputs[k], fast.outputs[k]), k      # the same bits (test_specs.py)
    assert np.array_equal(ns["r"].grads["x"], fast.grads["x"])


def run_plugin_protocol():
    from examples.tiny_backend import TinyBackend
    from refnorm.check.backends.plugin import missing_members
    from refnorm.testing import assert_backend_passes

    def my_layer_norm(call, scale=1.0):
        ret = TinyBackend().run(call)
        return (ret.outputs["y"] * np.asarray(scale, ret.outputs["y"].dtype), ret.grads["x"],
                ret.grads["weight"], ret.grads["bias"])

    cases = ["layer_norm/normal_f32_6x100", "layer_norm/mean1e3_f32_6x100"]
    ns = run("plugin-protocol", my_layer_norm=my_layer_norm)
    backend = ns["MyBackend"]()
    assert missing_members(backend) == [] and backend.available() is None
    rep = assert_backend_passes(backend, case_ids=cases, golden=GOLDEN)
    assert [c.status for c in rep.cases] == ["passed"] * len(cases)
    # and it judged something: the same plug-in with a wrong kernel fails
    ns = run("plugin-protocol", my_layer_norm=lambda call: my_layer_norm(call, scale=1.01))
    with pytest.raises(AssertionError, match="FAILED layer_norm/"):
        assert_backend_passes(ns["MyBackend"](), case_ids=cases, golden=GOLDEN)


def run_assert_close_example():
    arrays = _layer_norm_f32(np.random.default_rng(2))
    ns = run("assert-close-example", **arrays)
    arrays["dw"] = arrays["dw"] * np.float32(1.001)         # a wrong weight gradient
    with pytest.raises(AssertionError, match="weight"):
        run("assert-close-example", **arrays)
    assert "assert_close_to_reference" in ns


def run_hypothesis_example():
    pytest.importorskip("hypothesis")
    from examples.tiny_backend import TinyBackend
    from refnorm.testing import assert_close_to_reference

    class MyBackend(TinyBackend):              # the tiny backend's rms_norm, without eps outside the root
        def run(self, call):
            if self.supports(call):
                from refnorm.check import Returned
                r = refnorm.evaluate(call.op, call.inputs, config=call.config, grad_outputs=call.cotangents,
                                     training=call.training)
                return Returned({k: v.astype(call.inputs["x"].dtype) for k, v in r.outputs.items()},
                                {k: v.astype(call.inputs[k].dtype) for k, v in r.grads.items()})
            return super().run(call)
    ns = run("hypothesis-example", MyBackend=MyBackend, assert_close_to_reference=assert_close_to_reference)
    ns["test_my_rms_norm"]()


def run_norm_quant_example():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 4096)).astype(np.float32), np.ones(4096, np.float32)
    ns = run("norm-quant-example", refnorm=refnorm, np=np, x=x, w=w)
    r, q8 = ns["r"], ns["q8"]
    assert str(q8.dtype) == "float8_e4m3fn" and q8.shape == x.shape
    amax = r.outputs["amax"]
    np.testing.assert_allclose(r.outputs["scale"], np.maximum(amax / 448, 1 / (448 * 512)), rtol=1e-7)
    assert np.all(np.abs(q8.astype(np.float64) - r.outputs["q"]) <= 0.0625 * np.abs(r.outputs["q"]) + 2 ** -9)


def run_unified_norm_example():
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))) for _ in range(3)]
    ns = run("unified-norm-example", refnorm=refnorm, batches=batches)
    listed = code("unified-norm-example").split("st = res.state")[1].split("#")[1].replace(",", " ").split()
    assert set(listed) <= set(ns["st"]), (listed, set(ns["st"]))
    assert int(np.ravel(ns["st"]["iters"])[0]) == 3


def run_fold_example():
    rng = np.random.default_rng(5)
    C, O = 3, 4
    g, b = rng.uniform(0.5, 2, C), rng.standard_normal(C)
    rm, rv = rng.standard_normal(C), rng.uniform(0.5, 2, C)
    conv_w, conv_b = rng.standard_normal((O, C, 1, 1)), rng.standard_normal(O)
    ns = run("fold-example", g=g, b=b, rm=rm, rv=rv, conv_w=conv_w, conv_b=conv_b)
    x = rng.standard_normal((2, C, 5, 5))
    bn = refnorm.evaluate("batch_norm", {"x": x, "weight": g, "bias": b}, config={"eps": 1e-5},
                          state={"running_mean": rm, "running_var": rv}, training=False).outputs["y"]
    want = np.einsum("oc,nchw->nohw", conv_w[:, :, 0, 0], bn) + conv_b[None, :, None, None]
    got = np.einsum("oc,nchw->nohw", ns["W2"][:, :, 0, 0], x) + ns["b2"][None, :, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def run_fold_examples():
    """docs/folding.md: a batch_norm folded into the next grouped 1x1 conv, then a unified_norm's affine
    into the previous Linear, each equal to the unfolded pair (the block reuses w2, b2: judged in turn)."""
    rng = np.random.default_rng(6)
    C, O, K = 4, 6, 3
    arrays = dict(g=rng.uniform(0.5, 2, C), beta=rng.standard_normal(C), rm=rng.standard_normal(C),
                  rv=rng.uniform(0.5, 2, C), v=rng.uniform(0.5, 2, C),
                  conv_w=rng.standard_normal((O, C // 2, 1, 1)), conv_b=rng.standard_normal(O),
                  linear_w=rng.standard_normal((C, K)), linear_b=rng.standard_normal(C))
    text = code("fold-examples")
    first = text[:text.index("scale, shift =")]
    ns = dict(arrays)
    exec(compile(first, "docs/folding.md:fold-examples", "exec"), ns)

    def conv1x1(w, b, x):                        # groups=2
        return np.concatenate([np.einsum("oc,nchw->nohw", w[i * (O // 2):(i + 1) * (O // 2), :, 0, 0],
                                         x[:, i * (C // 2):(i + 1) * (C // 2)]) for i in range(2)],
                              axis=1) + b[None, :, None, None]
    x = rng.standard_normal((2, C, 3, 3))
    bn = refnorm.evaluate("batch_norm", {"x": x, "weight": arrays["g"], "bias": arrays["beta"]},
                          config={"eps": 1e-5}, state={"running_mean": arrays["rm"], "running_var": arrays["rv"]},
                          training=False).outputs["y"]
    np.testing.assert_allclose(conv1x1(ns["w2"], ns["b2"], x), conv1x1(arrays["conv_w"], arrays["conv_b"], bn),
                               rtol=1e-12, atol=1e-12)
    ns = run("fold-examples", **arrays)
    h = rng.standard_normal((5, K))
    np.testing.assert_allclose(h @ ns["w2"].T + ns["b2"],
                               (h @ arrays["linear_w"].T + arrays["linear_b"]) * ns["scale"] + ns["shift"],
                               rtol=1e-12, atol=1e-12)


def run_versus_example(capsys):
    pytest.importorskip("torch", reason="the reproduction draws its trial with torch")
    text = code("versus-example")
    claimed = re.search(r'#\s*"(\w+)"', text).group(1)
    run("versus-example")
    assert capsys.readouterr().out.split() == [claimed]


def run_group_norm_silu_example():
    """docs/group_norm_silu.md: y is silu(group_norm(x)), and every gradient the text reads is there."""
    ns = run("group-norm-silu-example")
    x, r = ns["x"], ns["r"]
    gn = refnorm.evaluate("group_norm", {"x": x, "weight": np.ones(64), "bias": np.zeros(64)},
                          config={"num_groups": 32}).outputs["y"]
    np.testing.assert_allclose(r.outputs["y"], gn / (1 + np.exp(-gn)), rtol=1e-12, atol=1e-15)
    assert all(r.grads[k].shape == s for k, s in (("x", x.shape), ("weight", (64,)), ("bias", (64,))))


def run_gated_norm_example():
    """docs/ops_gated.md: with norm_before_gate False, y is the RMS norm of x * silu(z) per group of 1024."""
    rng = np.random.default_rng(3)
    x, z, dy = rng.standard_normal((3, 2048)), rng.standard_normal((3, 2048)), rng.standard_normal((3, 2048))
    w = 1 + 0.1 * rng.standard_normal(2048)
    r = run("gated-norm-example", x=x, z=z, w=w, dy=dy)["r"]
    v = (x * z / (1 + np.exp(-z))).reshape(3, 2, 1024)
    want = (v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + 1e-5)).reshape(3, 2048) * w
    np.testing.assert_allclose(r.outputs["y"], want, rtol=1e-12, atol=1e-14)
    assert r.grads["z"].shape == z.shape and r.grads["weight"].shape == w.shape


RUNNERS = {"evaluate-quick-example": run_evaluate_quick_example, "evaluate-example": run_evaluate_example,
           "spec-engine-example": run_spec_engine_example, "plugin-protocol": run_plugin_protocol,
           "assert-close-example": run_assert_close_example, "hypothesis-example": run_hypothesis_example,
           "norm-quant-example": run_norm_quant_example, "unified-norm-example": run_unified_norm_example,
           "fold-example": run_fold_example, "fold-examples": run_fold_examples,
           "versus-example": run_versus_example, "group-norm-silu-example": run_group_norm_silu_example,
           "gated-norm-example": run_gated_norm_example}


# -------------------------------------------------------------------------------------- the tests
def test_every_python_block_is_marked_and_run():
    bad = []
    for page, marker, _, _, line in blocks("python", SITE):
        if page in WHOLE_PAGE:
            continue
        if marker is None:
            bad.append(f"{page}:{line}: a python block without a <!-- NAME --> marker")
        elif marker not in RUNNERS and marker not in ELSEWHERE:
            bad.append(f"{page}:{line}: <!-- {marker} --> is run by no test (RUNNERS, ELSEWHERE)")
    assert bad == [], "\n".join(bad)
    for marker, test in ELSEWHERE.items():
        with open(os.path.join(ROOT, test), encoding="utf-8") as f:
            assert marker in f.read(), f"{test} does not run <!-- {marker} -->"
        code(marker)                            # present, and one text wherever it is repeated
    for page, test in WHOLE_PAGE.items():
        with open(os.path.join(ROOT, test), encoding="utf-8") as f:
            assert os.path.basename(page) in f.read(), f"{test} does not run the blocks of {page}"


@pytest.mark.parametrize("marker", sorted(RUNNERS))
def test_python_block_runs(marker, monkeypatch, capsys):
    assert any(mk == marker for _, mk, _, _, _ in blocks("python", SITE)), f"no block <!-- {marker} --> any more"
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))     # a block may prepend to it (docs/versus_assert_close.md)
    runner = RUNNERS[marker]
    runner(capsys) if runner.__code__.co_argcount else runner()


def _commands(prog):
    """[(page, line, argv)] of the shell lines of PAGES that run ``prog`` (after VAR=value words)."""
    out = []
    for page, _, lang, text, line in blocks("sh"):
        for k, ln in enumerate(text.replace("\\\n", " ").splitlines()):
            words = shlex.split(ln, comments=True)
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words.pop(0)
            if words[:1] == [prog]:
                out.append((page, line + 1 + k, words[1:]))
    return out


def test_every_refnorm_command_of_the_docs_parses():
    from refnorm.cli import build_parser
    found = _commands("refnorm")
    assert len(found) >= 12, found
    for page, line, argv in found:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{page}:{line}: refnorm {' '.join(argv)}: the CLI refuses it")
        assert callable(args.func)


def test_every_pytest_plugin_option_of_the_docs_exists():
    with open(os.path.join(ROOT, "refnorm", "pytest_plugin.py"), encoding="utf-8") as f:
        plugin = set(re.findall(r"addoption\(\"(--refnorm-[\w-]+)\"", f.read()))
    used = {(page, o) for page, _, argv in _commands("pytest") for a in argv for o in re.findall(r"--refnorm-[\w-]+", a)}
    assert used and {o for _, o in used} <= plugin, sorted(used)


def test_pinned_installs_of_the_docs_are_the_ci_pins():
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = dict(re.findall(r"\b([\w-]+)==([\w.]+)", f.read()))
    pins = [(page, w) for page, _, argv in _commands("pip") for w in argv if "==" in w]
    assert pins
    for page, w in pins:
        name, version = w.split("==")
        assert ci.get(name) == version, f"{page}: {w}, but .ci/run installs {name}=={ci.get(name)}"


@pytest.mark.thorough          # the whole golden set (~3-6 s); tests/test_figures.py judges the same backend
def test_the_plugin_command_runs_with_the_exit_status_its_comment_states(monkeypatch, capsys):
    from refnorm import cli
    (page, _, argv), = [c for c in _commands("refnorm") if "examples.tiny_backend:TinyBackend" in c[2]]
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        status = int(re.search(r"examples\.tiny_backend:TinyBackend.*#.*exit (\d)", f.read()).group(1))
    monkeypatch.chdir(ROOT)
    assert cli.main(argv + ["--no-progress"]) == status
    assert "PARTIAL" in capsys.readouterr().out


def test_the_expected_failures_example_parses_and_says_what_the_shipped_list_says(tmp_path):
    from refnorm.check.core import read_expected_failures
    text, = [c for _, mk, _, c, _ in blocks("text") if mk == "known-failures-example"]
    (tmp_path / "example.txt").write_text(text)
    example = read_expected_failures(str(tmp_path / "example.txt"), [])
    shipped = read_expected_failures(os.path.join(ROOT, "known_failures", "torch-cpu.txt"), [])
    assert len(example) == 2
    for cid, entry in example.items():
        assert cid in shipped, cid
        want = shipped[cid]
        assert (entry.fails, entry.error, entry.diagnosis) == (want.fails, want.error, want.diagnosis), cid
