"""The project's promises that are not about one normalizer: import hygiene, README == CI, the CLI."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import refnorm
from refnorm import cli

from helpers import assert_loads_none_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_import_refnorm_never_imports_a_framework():
    assert_loads_none_of("import refnorm\nfor n in refnorm.names(): refnorm.get(n)",
                         ("torch", "jax", "tensorflow", "onnxruntime"))


def test_user_facing_modules_import_no_optional_dependency():
    """refnorm.testing, the report writers and the CLI load without matplotlib, hypothesis or pytest;
    refnorm.strategies (hypothesis) and refnorm.pytest_plugin (pytest) are imported only on request."""
    assert_loads_none_of("import refnorm, refnorm.check, refnorm.testing, refnorm.cli\n"
                         "import refnorm.check.junit, refnorm.check.markdown, refnorm.check.plots, "
                         "refnorm.check.backends.plugin",
                         ("torch", "jax", "matplotlib", "hypothesis", "pytest", "refnorm.strategies",
                          "refnorm.pytest_plugin"))


def test_ci_runs_the_readme_test_command():
    readme = Path(os.path.join(ROOT, "README.md")).read_text()
    m = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", readme)
    assert m, "README.md must hold the test command in a ```sh block after <!-- test-command -->"
    ci_lines = [ln.strip() for ln in Path(os.path.join(ROOT, ".ci", "run")).read_text().splitlines() if not ln.lstrip().startswith("#")]
    assert m.group(1).strip() in ci_lines, f".ci/run must run the README's test command {m.group(1)!r}"


def test_the_readme_gives_the_quick_profile_as_the_same_command_without_the_thorough_variable():
    readme = Path(os.path.join(ROOT, "README.md")).read_text()
    section = readme[readme.index("## Running the tests"):readme.index("<!-- test-command -->")]
    thorough = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", readme).group(1).strip()
    quick = re.findall(r"```sh\n(.+?)\n```", section)
    assert quick == [thorough.replace("REFNORM_TESTS=thorough ", "")] and "REFNORM_TESTS=thorough" in thorough


def test_every_registered_normalizer_has_a_documented_spec():
    for name in refnorm.names():
        spec = refnorm.get(name)
        mod = sys.modules[f"refnorm.norms.{name}"]
        assert spec.name == name and spec.summary and spec.outputs
        assert ("v" if name == "weight_norm" else "x") in spec.required
        assert mod.__doc__ and len(mod.__doc__) > 200, f"{name}: module docstring must state the equation and conventions"


# ----------------------------------------------------------------------------- evaluate contract
def test_evaluate_rejects_unknown_names_with_the_list():
    with pytest.raises(refnorm.UnknownNameError, match="unknown normalizer 'layernorm'.*layer_norm"):
        refnorm.evaluate("layernorm", {"x": np.ones((2, 2))})
    with pytest.raises(refnorm.UnknownNameError, match="unknown input 'gamma'"):
        refnorm.evaluate("layer_norm", {"x": np.ones((2, 2)), "gamma": np.ones(2)}, config={"normalized_shape": 2})
    with pytest.raises(refnorm.RefnormError, match="missing required input"):
        refnorm.evaluate("layer_norm", {"weight": np.ones(2)}, config={"normalized_shape": 2})


def test_evaluate_rejects_bad_cotangents_and_state():
    x = np.ones((2, 3)) + np.arange(3)
    cfg = {"normalized_shape": [3]}
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape \(3,\)"):
        refnorm.evaluate("layer_norm", {"x": x}, config=cfg, grad_outputs={"y": np.ones(3)})
    with pytest.raises(refnorm.UnknownNameError, match="'mean' are statistics"):
        refnorm.evaluate("layer_norm", {"x": x}, config=cfg, grad_outputs={"mean": np.ones((2, 1))})
    with pytest.raises(refnorm.RefnormError, match="stateless"):
        refnorm.evaluate("layer_norm", {"x": x}, config=cfg, state={"running_mean": np.ones(3)})
    with pytest.raises(refnorm.RefnormError, match="training must be True or False"):
        refnorm.evaluate("layer_norm", {"x": x}, config=cfg, training="yes")
    with pytest.raises(refnorm.RefnormError, match="must be finite"):
        refnorm.evaluate("layer_norm", {"x": x}, config={"normalized_shape": [3], "eps": float("nan")})
    with pytest.raises(refnorm.InputTypeError, match="complex128"):
        refnorm.evaluate("layer_norm", {"x": x.astype(complex)}, config=cfg)
    with pytest.raises(refnorm.InputTypeError, match="bool"):
        refnorm.evaluate("layer_norm", {"x": x > 1}, config=cfg)


def test_evaluate_accepts_low_precision_dtypes_and_returns_float64():
    x = np.random.default_rng(0).standard_normal((3, 5))
    dtypes = [np.float16, np.float32, np.float64]
    try:
        import ml_dtypes
        dtypes.append(ml_dtypes.bfloat16)
    except ImportError:
        pass
    for dt in dtypes:
        xd = x.astype(dt)
        r = refnorm.evaluate("layer_norm", {"x": xd}, config={"normalized_shape": [5]})
        assert r.outputs["y"].dtype == np.float64
        want = refnorm.evaluate("layer_norm", {"x": xd.astype(np.float64)}, config={"normalized_shape": [5]})
        np.testing.assert_array_equal(r.outputs["y"], want.outputs["y"])


def test_result_mappings_are_read_only():
    r = refnorm.evaluate("layer_norm", {"x": np.eye(3)}, config={"normalized_shape": [3]})
    with pytest.raises(TypeError):
        r.outputs["y"] = None


# ----------------------------------------------------------------------------------------- CLI
def test_cli_list_and_eval(capsys, tmp_path):
    assert cli.main(["list"]) == 0
    assert "batch_norm" in capsys.readouterr().out
    out = tmp_path / "r.npz"
    assert cli.main(["eval", "layer_norm", "--random", "x=3,4", "--config", '{"normalized_shape": [4]}',
                     "--grad", "y=random", "--out", str(out)]) == 0
    with np.load(out, allow_pickle=False) as z:
        assert set(z.files) == {"input.x", "cotangent.y", "output.y", "output.mean", "output.rstd", "grad.x"}
        x = np.random.default_rng(0).standard_normal((3, 4))
        np.testing.assert_array_equal(z["input.x"], x)
        want = refnorm.evaluate("layer_norm", {"x": x}, config={"normalized_shape": [4]})
        np.testing.assert_array_equal(z["output.y"], want.outputs["y"])


def test_cli_eval_from_files_with_state(tmp_path, capsys):
    x = np.random.default_rng(1).standard_normal((4, 3))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "rm.npy", np.zeros(3))
    np.save(tmp_path / "rv.npy", np.ones(3))
    assert cli.main(["eval", "batch_norm", "--input", f"x={tmp_path / 'x.npy'}",
                     "--state", f"running_mean={tmp_path / 'rm.npy'}",
                     "--state", f"running_var={tmp_path / 'rv.npy'}", "--out", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz") as z:
        np.testing.assert_allclose(z["state.running_mean"], 0.1 * x.mean(0), rtol=1e-15)


@pytest.mark.parametrize("argv,message", [
    (["eval", "layer_norm", "--random", "x=3,4"], "missing required option"),
    (["eval", "layer_norm", "--random", "x=3,a"], "comma-separated integers"),
    (["eval", "layer_norm", "--random", "x=3,4", "--config", "{eps"], "not valid JSON"),
    (["eval", "layer_norm", "--random", "x=3,4", "--config", "[1]"], "must be a JSON object"),
    (["eval", "layer_norm", "--input", "x=/nonexistent.npy"], "does not exist"),
    (["eval", "nonorm", "--random", "x=3"], "unknown normalizer"),
    (["eval", "layer_norm", "--random", "x=3,4", "--config", '{"normalized_shape": [4]}', "--grad", "z=random"],
     "no output 'z'"),
])
def test_cli_bad_input_exits_2_with_a_message(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_refuses_pickled_arrays_and_leaves_no_partial_output(tmp_path, capsys):
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    out = tmp_path / "o.npz"
    assert cli.main(["eval", "layer_norm", "--input", f"x={tmp_path / 'obj.npy'}", "--out", str(out),
                     "--config", '{"normalized_shape": [1]}']) == 2
    assert "without pickles" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".refnorm-*"))


def test_console_script_runs():
    exe = shutil.which("refnorm")
    assert exe, "the `refnorm` console script is not on PATH: install with pip install -e ."
    r = subprocess.run([exe, "eval", "layer_norm", "--random", "x=2,3"], capture_output=True, text=True)
    assert r.returncode == 2 and "refnorm: error: layer_norm: missing required option(s) 'normalized_shape'" in r.stderr
    r = subprocess.run([exe, "eval", "layer_norm", "--random", "x=2,3", "--config", '{"normalized_shape": 3}'],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "output.y shape=(2, 3)" in r.stdout
