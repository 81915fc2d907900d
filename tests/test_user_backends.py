"""A user's own kernel: --backend package.module:attr and the refnorm.backends entry-point group, with
the README's example (examples/tiny_backend.py) run through the real console script."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap

import pytest

from refnorm.check import get_backend
from refnorm.check.backends.plugin import BackendLoadError
from refnorm.cli import main
from refnorm.errors import UnknownNameError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
TINY = "examples.tiny_backend:TinyBackend"


def _refnorm(*args, cwd=ROOT, env=None):
    exe = shutil.which("refnorm")
    assert exe, "the `refnorm` console script is not on PATH: install with pip install -e ."
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_the_readme_example_passes_its_ops_and_skips_the_rest(tmp_path):
    out = tmp_path / "r.json"
    r = _refnorm("check", "--backend", TINY, "--no-progress", "--json", str(out))
    # exit 4: nothing failed, but a few cases are partial (ill-posed arrays: constant rows at eps 1e-12,
    # one feature), never reported as passed
    assert r.returncode == 4, r.stdout[-3000:] + r.stderr
    cases = json.loads(out.read_text())["cases"]
    mine = [c for c in cases if c["op"] in ("layer_norm", "rms_norm")]
    assert {c["status"] for c in cases} == {"passed", "partial", "skipped"}
    assert len([c for c in mine if c["status"] == "passed"]) > 80
    for c in cases:
        if c["status"] == "partial":
            assert c["verdicts"]["failed"] == 0 and c["unconstrained"] and "unconstrained" in c["message"], c
    for c in cases:
        if c["status"] == "skipped":
            assert c["message"].startswith("tiny backend: ") and "not implemented" in c["message"], c
    assert {c["op"] for c in cases if c["status"] == "passed"} == {"layer_norm", "rms_norm"}
    assert "refnorm check: PARTIAL: backend tiny" in r.stdout
    r = _refnorm("check", "--backend", TINY, "--no-progress", "--ops", "layer_norm", "--accept-partial")
    assert r.returncode == 0 and "refnorm check: OK (partial accepted): backend tiny" in r.stdout, r.stdout[-2000:]


@pytest.mark.parametrize("form", ["TinyBackend", "make", "INSTANCE"])
def test_attr_may_be_a_class_a_factory_or_an_object(form, tmp_path, monkeypatch):
    (tmp_path / "kernels_ok.py").write_text(textwrap.dedent("""
        from examples.tiny_backend import TinyBackend
        def make():
            return TinyBackend()
        INSTANCE = TinyBackend()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(ROOT)
    b = get_backend(f"kernels_ok:{form}")
    assert b.name == "tiny" and b.available() is None
    assert main(["check", "--backend", f"kernels_ok:{form}", "--ops", "layer_norm", "--dtypes", "float32",
                 "--golden", GOLDEN, "--no-progress", "--accept-partial"]) == 0


BAD = """
class NoRun:
    name = "norun"
    def available(self): return None
    def supports(self, call): return None
    def contract(self, call): return None
class Nameless:
    def available(self): return None
    def supports(self, call): return None
    def contract(self, call): return None
    def run(self, call): return None
class NeedsArgs:
    def __init__(self, device): pass
def factory_of_nothing():
    return 42
NUMBER = 3
"""


@pytest.mark.parametrize("spec,match", [
    ("kernels_bad:NoRun", r"NoRun object is not a refnorm backend: it lacks run\(call\)"),
    ("kernels_bad:Nameless", r"it lacks name: str \(the protocol"),
    ("kernels_bad:NeedsArgs", r"calling the class 'NeedsArgs' with no arguments raised TypeError"),
    ("kernels_bad:factory_of_nothing", r"int object is not a refnorm backend: it lacks name: str, available\(\), "
                                       r"supports\(call\), contract\(call\), run\(call\)"),
    ("kernels_bad:NUMBER", r"int object is not a refnorm backend"),
    ("kernels_bad:Missing", r"'kernels_bad' has no attribute 'Missing'"),
    ("kernels_nowhere:X", r"cannot import module 'kernels_nowhere': ModuleNotFoundError"),
    ("kernels_bad:", r"expected package.module:attr"),
])
def test_a_bad_user_backend_is_a_clear_error_exit_2(spec, match, tmp_path, monkeypatch, capsys):
    (tmp_path / "kernels_bad.py").write_text(BAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendLoadError, match=match):
        get_backend(spec)
    assert main(["check", "--backend", spec, "--golden", GOLDEN, "--no-progress"]) == 2
    assert "refnorm: error: " in capsys.readouterr().err


def test_an_import_error_inside_the_module_is_reported(tmp_path, monkeypatch):
    (tmp_path / "kernels_broken.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendLoadError, match="cannot import module 'kernels_broken'.*no_such_dependency_xyz"):
        get_backend("kernels_broken:K")


def test_unknown_names_list_builtins_and_the_import_path_form():
    with pytest.raises(UnknownNameError, match=r"unknown backend 'nope'; expected one of: numpy, .*package.module:attr"):
        get_backend("nope")


def _dist(where, name, entries):
    """A fake installed distribution under ``where`` registering ``entries`` in refnorm.backends."""
    dist = where / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[refnorm.backends]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))


def test_entry_point_group_refnorm_backends(tmp_path):
    """Asserts only on this test's own entry points, so any other installed refnorm plug-in (here: a
    second fake distribution, standing for one) cannot make it fail."""
    tiny, broken = "refnorm-selftest-tiny", "refnorm-selftest-broken"
    _dist(tmp_path / "mine", "tinyplug", {tiny: TINY, broken: "examples.tiny_backend:DoesNotExist"})
    _dist(tmp_path / "other", "otherplug", {"aaa-other": TINY, "zzz-other": "other.module:Other"})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "mine"), str(tmp_path / "other"), ROOT,
                                                       os.environ.get("PYTHONPATH", "")]))
    r = _refnorm("check", "--backend", tiny, "--ops", "rms_norm", "--golden", GOLDEN, "--no-progress",
                 "--accept-partial", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "refnorm check: OK" in r.stdout and "backend tiny" in r.stdout, \
        r.stdout[-2000:] + r.stderr
    r = _refnorm("check", "--backend", broken, "--golden", GOLDEN, cwd=tmp_path, env=env)
    assert r.returncode == 2
    assert (f"backend {broken!r} (entry point 'examples.tiny_backend:DoesNotExist' in group 'refnorm.backends')"
            in r.stderr), r.stderr
    r = _refnorm("check", "--backend", "nope", "--golden", GOLDEN, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr
    listed = r.stderr.split("expected one of: ", 1)[1].split(", or package.module:attr", 1)[0].split(", ")
    assert {tiny, broken, "numpy"} <= set(listed), r.stderr



def test_adapter_preamble_refuses_ops_it_does_not_implement():
    """A normalizer registered after an adapter was written is refused by it (never run), with the
    adapter's name and the op in the reason; listed reasons, dtypes and bad options come first."""
    from refnorm.check.backends import _translate as T
    kw = dict(supported=("layer_norm",), unsupported={"rms_norm": "no rms here"}, dtypes=("float32",),
              backend="toy")
    cfg = {"normalized_shape": [3]}
    assert T.preamble("layer_norm", "float32", cfg, **kw) == (None, {"normalized_shape": [3], "eps": 1e-5,
                                                                      "weight_offset": 0.0})
    assert T.preamble("group_norm", "float32", {}, **kw)[0] == "the toy backend has no implementation of group_norm"
    assert T.preamble("rms_norm", "float32", {}, **kw)[0] == "no rms here"
    assert T.preamble("nope", "float32", {}, **kw)[0] == "unknown op 'nope'"
    assert "handles float32" in T.preamble("layer_norm", "float16", cfg, **kw)[0]
    assert "missing required option" in T.preamble("layer_norm", "float32", {}, **kw)[0]


# ------------------------------------------------- plug-ins that declare their options (issue 34, item 6)
class Strict:
    """A plug-in written as the README's pattern invites: it refuses any option key it does not know."""
    KNOWN = ("normalized_shape", "eps", "weight_offset")

    def __init__(self, declare):
        from examples.tiny_backend import TinyBackend
        self.tiny, self.name = TinyBackend(), "strict"
        if declare:
            self.options = {"normalized_shape": None, "eps": None, "weight_offset": (0.0,)}

    def available(self):
        return None

    def supports(self, call):
        unknown = [k for k in call.config if k not in self.KNOWN]
        if call.op != "layer_norm" or unknown:
            return f"strict: {call.op} with options {unknown} is not implemented"
        return None

    def contract(self, call):
        return self.tiny.contract(call)

    def run(self, call):
        return self.tiny.run(call)


@pytest.fixture
def knob(monkeypatch):
    """layer_norm with an option added "later", with a default (0.0): the reference ignores it at its
    default and refuses another value (the checker must never get that far for a plug-in that does not
    declare it)."""
    import dataclasses

    from refnorm import registry
    spec = registry.get("layer_norm")

    def forward(inputs, config, state, training):
        config = dict(config)
        assert config.pop("knob") == 0.0, "the reference was run with knob set"
        return spec.forward(inputs, config, state, training)
    new = dataclasses.replace(spec, options={**spec.options, "knob": 0.0}, forward=forward)
    monkeypatch.setattr(__import__("refnorm.norms.layer_norm", fromlist=["SPEC"]), "SPEC", new)
    return new


def _cases(report):
    return {c.id: (c.status, c.message) for c in report.cases}


def test_a_plug_in_declaring_its_options_survives_an_option_added_later(knob, monkeypatch):
    from refnorm.check import run_check
    monkeypatch.syspath_prepend(ROOT)
    ids = ["layer_norm/normal_f32_6x100", "layer_norm/normal_zc_f16_4x128"]
    old = run_check(Strict(declare=False), GOLDEN, case_ids=ids)          # the failure mode: all skipped
    assert [c.status for c in old.cases] == ["skipped", "skipped"] and "knob" in old.cases[0].message
    assert old.verdict == "failed"
    rep = run_check(Strict(declare=True), GOLDEN, case_ids=ids)
    got = _cases(rep)
    assert got[ids[0]][0] == "passed", got
    # weight_offset is declared for 0.0 only: the zero-centred case is skipped, saying why
    assert got[ids[1]] == ("skipped", "layer_norm: the case sets weight_offset=1.0; the backend implements "
                                      "weight_offset only for 0.0"), got


def test_a_case_setting_an_undeclared_option_is_skipped_with_the_reason(knob, monkeypatch):
    from refnorm.check.core import check_case
    from refnorm.golden.commands import load_case
    monkeypatch.syspath_prepend(ROOT)
    case = load_case(GOLDEN, "layer_norm/normal_f32_6x100")
    import dataclasses
    seen = []

    class Recording(Strict):
        def run(self, call):
            seen.append(dict(call.config))
            return super().run(call)
    res = check_case(Recording(declare=True), case)
    assert res.status == "passed" and seen == [{"normalized_shape": [100], "eps": 1e-5, "weight_offset": 0.0}]
    res = check_case(Recording(declare=True), dataclasses.replace(case, config={**case.config, "knob": 0.5}))
    assert res.status == "skipped" and len(seen) == 1
    assert res.message == ("layer_norm: the case sets knob=0.5 (default 0.0), an option the backend does not "
                           "declare (its options: normalized_shape, eps, weight_offset)")
    # the default, given explicitly, is the default
    res = check_case(Recording(declare=True), dataclasses.replace(case, config={**case.config, "knob": 0.0}))
    assert res.status == "passed" and "knob" not in seen[-1]
    # the wrappers that stand between the checker and a backend (--isolate, the distributed runner) pass
    # its declaration on
    from refnorm.check.isolate import Isolated
    assert Isolated(Strict(declare=True)).options == Strict(declare=True).options


def test_a_required_option_must_be_declared(monkeypatch):
    from refnorm.check.backends.base import declared_config
    cfg, why = declared_config("layer_norm", {"normalized_shape": [4]}, {"eps": None})
    assert cfg is None and why == ("layer_norm: the backend does not declare the required option "
                                   "'normalized_shape' (its options: eps)")
    # an option with a module-picked default: batch_norm's momentum is 0.9 under convention onnx
    assert declared_config("batch_norm", {"convention": "onnx"}, {"eps": None, "convention": None}) == \
        ({"eps": 1e-5, "convention": "onnx"}, None)
    assert declared_config("batch_norm", {"convention": "onnx", "momentum": 0.5},
                           {"eps": None, "convention": None})[1].startswith("batch_norm: the case sets momentum=0.5")
    assert declared_config("layer_norm", {"normalized_shape": (4,)}, None)[0] == \
        {"normalized_shape": (4,), "eps": 1e-5, "weight_offset": 0.0}


def test_a_backend_whose_every_case_is_skipped_does_not_look_like_success(monkeypatch, capsys):
    monkeypatch.syspath_prepend(ROOT)

    class Nothing(Strict):
        def supports(self, call):
            return "nothing: not implemented"
    monkeypatch.setitem(globals(), "NOTHING", Nothing(declare=True))
    rc = main(["check", "--backend", f"{__name__}:NOTHING", "--golden", GOLDEN, "--ops", "layer_norm",
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 1, out[-2000:]
    assert "refnorm check: FAILED" in out and "(no case was judged: nothing is verified)" in out
