"""The command line's smaller promises: report files get ordinary permissions, ``eval --out`` saves every
array (inputs and cotangents included) and ``--random`` takes a dtype, ``refnorm golden list``, and
filters that name no case or contradict each other are usage errors (exit 2) that say why."""
from __future__ import annotations

import json
import os
import stat

import ml_dtypes
import numpy as np
import pytest

import refnorm
from refnorm.check.precision import round_to
from refnorm.cli import build_parser, main
from refnorm.golden.commands import SelectionError, select

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
LN = "layer_norm/normal_f32_6x100"


def _manifest():
    with open(os.path.join(GOLDEN, "MANIFEST.json")) as f:
        return json.load(f)


# ---------------------------------------------------------------------------- file permissions
@pytest.fixture(params=[0o022, 0o027])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_reports_and_eval_out_get_the_mode_open_would_give(tmp_path, umask, capsys):
    """mkstemp makes 0600 files; every atomically written file must be 0666 & ~umask like open()'s."""
    want = 0o666 & ~umask
    assert main(["check", "--backend", "numpy", "--case", LN, "--golden", GOLDEN, "--no-progress",
                 "--json", str(tmp_path / "r.json"), "--junit-xml", str(tmp_path / "j.xml"),
                 "--report", str(tmp_path / "rep")]) == 0
    written = [tmp_path / "r.json", tmp_path / "j.xml", *sorted((tmp_path / "rep").iterdir())]
    assert (tmp_path / "rep" / "summary.md") in written
    assert main(["eval", "layer_norm", "--random", "x=2,3", "--config", '{"normalized_shape": [3]}',
                 "--out", str(tmp_path / "o.npz")]) == 0
    written.append(tmp_path / "o.npz")
    assert {p.name: oct(_mode(p)) for p in written} == {p.name: oct(want) for p in written}
    assert not list(tmp_path.glob(".refnorm-*"))


# ------------------------------------------------------------------------------ eval --out
def test_eval_out_saves_inputs_state_and_cotangents(tmp_path, capsys):
    np.save(tmp_path / "rm.npy", np.full(3, 0.5))
    np.save(tmp_path / "rv.npy", np.full(3, 2.0))
    out = tmp_path / "o.npz"
    assert main(["eval", "batch_norm", "--random", "x=4,3", "--grad", "y=random", "--seed", "7",
                 "--state", f"running_mean={tmp_path / 'rm.npy'}", "--state", f"running_var={tmp_path / 'rv.npy'}",
                 "--out", str(out)]) == 0
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 3))
    dy = rng.standard_normal((4, 3))            # drawn after the inputs, with the output's shape
    with np.load(out, allow_pickle=False) as z:
        files = set(z.files)
        assert {"input.x", "cotangent.y", "init.state.running_mean", "init.state.running_var",
                "output.y", "grad.x", "state.running_mean"} <= files
        np.testing.assert_array_equal(z["input.x"], x)
        np.testing.assert_array_equal(z["cotangent.y"], dy)
        np.testing.assert_array_equal(z["init.state.running_mean"], np.full(3, 0.5))
        np.testing.assert_array_equal(z["init.state.running_var"], np.full(3, 2.0))
        # the saved arrays reproduce the saved results
        state = {"running_mean": z["init.state.running_mean"], "running_var": z["init.state.running_var"]}
        res = refnorm.evaluate("batch_norm", {"x": z["input.x"]}, grad_outputs={"y": z["cotangent.y"]}, state=state)
        np.testing.assert_array_equal(z["grad.x"], res.grads["x"])
        np.testing.assert_array_equal(z["state.running_var"], res.state["running_var"])


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_random_takes_a_dtype(dtype, tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["eval", "layer_norm", "--random", f"x=3,5:{dtype}", "--config", '{"normalized_shape": [5]}',
                 "--out", str(out)]) == 0
    want = round_to(np.random.default_rng(0).standard_normal((3, 5)), dtype)
    with np.load(out, allow_pickle=False) as z:
        x = z["input.x"]
        # .npz cannot hold bfloat16: it is saved widened to float32, exactly
        assert x.dtype == (np.float32 if dtype == "bfloat16" else np.dtype(dtype))
        np.testing.assert_array_equal(x, want.astype(x.dtype))
        if dtype == "bfloat16":
            np.testing.assert_array_equal(x.astype(ml_dtypes.bfloat16).astype(np.float32), x)
        res = refnorm.evaluate("layer_norm", {"x": want}, config={"normalized_shape": [5]})
        np.testing.assert_array_equal(z["output.y"], res.outputs["y"])


def test_random_without_a_dtype_is_the_float64_draw(tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["eval", "layer_norm", "--random", "x=3,5", "--config", '{"normalized_shape": [5]}',
                 "--out", str(out)]) == 0
    with np.load(out, allow_pickle=False) as z:
        np.testing.assert_array_equal(z["input.x"], np.random.default_rng(0).standard_normal((3, 5)))


@pytest.mark.parametrize("spec", ["x=3,5:float8", "x=3,5:", "x=3,5:int32"])
def test_random_with_a_bad_dtype_exits_2(spec, capsys):
    assert main(["eval", "layer_norm", "--random", spec, "--config", '{"normalized_shape": [5]}']) == 2
    err = capsys.readouterr().err
    assert "--random x: dtype" in err and "float64, float32, float16, bfloat16" in err


def test_eval_help_documents_the_dtype_and_the_saved_keys():
    sub = build_parser()._subparsers._group_actions[0].choices["eval"]
    text = " ".join(sub.format_help().split())
    assert "KEY=SHAPE[:DTYPE]" in text and "x=4,8:float16" in text
    assert "input.K" in text and "cotangent.K" in text


# ---------------------------------------------------------------------------- golden list
def test_golden_list_prints_every_id_in_manifest_order(capsys):
    assert main(["golden", "list", GOLDEN]) == 0
    assert capsys.readouterr().out.splitlines() == [e["id"] for e in _manifest()["cases"]]


def test_golden_list_filters(capsys):
    cases = _manifest()["cases"]
    assert main(["golden", "list", GOLDEN, "--ops", "rms_norm", "layer_norm", "--dtypes", "float16"]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got and got == [e["id"] for e in cases
                           if e["case"]["op"] in ("rms_norm", "layer_norm") and e["case"]["dtype"] == "float16"]
    assert main(["golden", "list", GOLDEN, "--regimes", "zero", "--match", "rms_norm/*"]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got and got == [e["id"] for e in cases if e["case"]["regime"] == "zero" and e["id"].startswith("rms_norm/")]
    assert main(["golden", "list", GOLDEN, "--ops", "layer_norm", "--long"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith(LN + " "))
    assert line.split()[1:4] == ["float32", "normal", "x=6x100"] and "steps=train" in line


@pytest.mark.parametrize("argv,message", [
    (["--ops", "layernorm"], "--ops 'layernorm': unknown normalizer; expected one of: batch_norm"),
    (["--dtypes", "float8"], "--dtypes 'float8': expected one of: float64"),
    (["--regimes", "tiny"], "--regimes tiny: no golden case has regime 'tiny'; the set has: "),
    (["--ops", "layer_norm", "--match", "rms_norm/*"], "no golden case matches --ops layer_norm --match 'rms_norm/*'"),
])
def test_golden_list_bad_filters_exit_2(argv, message, capsys):
    assert main(["golden", "list", GOLDEN, *argv]) == 2
    assert message in capsys.readouterr().err


def test_list_only_options_are_refused_by_verify(capsys):
    assert main(["golden", "verify", GOLDEN, "--ops", "layer_norm"]) == 2
    assert "apply to list only" in capsys.readouterr().err


# ---------------------------------------------------------------- check: --case and filters
def test_check_unknown_case_suggests_the_closest_ids_and_the_list_command(capsys):
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--case", LN[:-1], "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--case {LN[:-1]!r}: no such golden case; did you mean {LN}" in err
    assert f"refnorm golden list {GOLDEN} --ops layer_norm" in err


@pytest.mark.parametrize("argv,flag", [
    (["--ops", "rms_norm"], "--ops rms_norm"),
    (["--dtypes", "float16", "bfloat16"], "--dtypes float16 bfloat16"),
])
def test_check_case_excluded_by_another_filter_exits_2_naming_both(argv, flag, capsys):
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--case", LN, *argv, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert f"--case {LN} (op layer_norm, dtype float32, regime normal) is excluded by {flag}" in captured.err
    assert "of 0 cases" not in captured.out


def _tiny_manifest():
    def entry(cid, op, dtype, regime):
        return {"id": cid, "case": {"op": op, "dtype": dtype, "regime": regime}}
    return {"cases": [entry("layer_norm/normal_f32_2x3", "layer_norm", "float32", "normal"),
                      entry("layer_norm/zero_f32_2x3", "layer_norm", "float32", "zero"),
                      entry("rms_norm/normal_f16_2x3", "rms_norm", "float16", "normal")]}


def test_select_names_the_filters_that_emptied_the_selection():
    m = _tiny_manifest()
    assert [e["id"] for e in select(m, ops=["layer_norm"], regimes=["zero"])] == ["layer_norm/zero_f32_2x3"]
    assert len(select(m)) == 3
    with pytest.raises(SelectionError) as e:
        select(m, ops=["layer_norm"], dtypes=["float16"])
    assert str(e.value).startswith("no golden case matches --ops layer_norm --dtypes float16 "
                                   "(--ops layer_norm alone selects 2; --dtypes float16 alone selects 1)")
    with pytest.raises(SelectionError, match=r"^--refnorm-ops batch_norm: no golden case has op 'batch_norm'"):
        select(m, ops=["batch_norm"], flags={"ops": "--refnorm-ops"})
    with pytest.raises(SelectionError, match=r"layer_norm/normal_f32_2x3 is excluded by --match 'rms_norm/\*'"):
        select(m, case_ids=["layer_norm/normal_f32_2x3"], match="rms_norm/*")
    with pytest.raises(SelectionError, match=r"did you mean layer_norm/zero_f32_2x3, .*refnorm golden list DIR --ops layer_norm"):
        select(m, case_ids=["layer_norm/zero_f32_2x4"], directory="DIR")
