"""Issue 15: never a pass without a check. Every array is verified, failed, unconstrained or unchecked;
a case is passed only when all its arrays are verified, and every output format (text, summary line,
JSON, Markdown, JUnit, exit status, pytest plugin) counts partial cases apart. One test per defect the
issue reported (1-6), each failing if the defect comes back."""
from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from refnorm.check import Returned, run_check
from refnorm.check.core import CaseResult, ArrayResult, expected_outcome, read_expected_failures
from refnorm.check.report import summary_line
from refnorm.cli import main
from refnorm.golden.store import GoldenError
from refnorm.testing import assert_close_to_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
sys.path.insert(0, ROOT)
from examples.tiny_backend import TinyBackend  # noqa: E402

LN = ["layer_norm/normal_f32_6x100", "layer_norm/normal_f16_4x128", "layer_norm/normal_bf16_6x100"]
CONST = "layer_norm/const_eps1e-12_f16_9x7"      # dweight: reference 0, bound ~1e6 (ill-posed)
MOD = __name__


class FwdOnly(TinyBackend):
    name = "fwd-only"
    forward_only = True

    def run(self, call):
        r = super().run(call)
        return Returned(r.outputs)


class Renamed(TinyBackend):
    name = "renamed"

    def run(self, call):
        r = super().run(call)
        out = dict(r.outputs)
        if "mean" in out:
            out["Mean"] = out.pop("mean")
        return Returned(out, r.grads)


class Upcast(TinyBackend):
    """Correct values, rounded to the case dtype, handed back as float64."""
    name = "upcast"

    def run(self, call):
        r = super().run(call)
        return Returned({k: v.astype(np.float64) for k, v in r.outputs.items()},
                        {k: v.astype(np.float64) for k, v in r.grads.items()})


class Unrounded(TinyBackend):
    """The float32 internals handed back as float64 without the final rounding to the case dtype."""
    name = "unrounded"

    def run(self, call):
        acc = np.float32
        saved = {k: v for k, v in call.inputs.items()}
        r = super().run(type(call)(call.op, "float32" if call.dtype != "float64" else "float64", call.config,
                                   call.training, {k: v.astype(acc) for k, v in saved.items()},
                                   {k: v.astype(acc) for k, v in call.cotangents.items()}, call.state))
        return Returned({k: v.astype(np.float64) for k, v in r.outputs.items()},
                        {k: v.astype(np.float64) for k, v in r.grads.items()})


def _grad_changed(r, name, change):
    """``r`` with its gradient ``name`` replaced by ``change(gradient)``, where it has one."""
    g = dict(r.grads)
    if name in g:
        g[name] = change(g[name])
    return Returned(r.outputs, g)


class NoisyDweight(TinyBackend):
    """dweight replaced by 1e4 * N(0, 1): wrong by any standard, yet within an ill-posed bound."""
    name = "noisy-dweight"

    def run(self, call):
        return _grad_changed(super().run(call), "weight",
                             lambda w: (1e4 * np.random.default_rng(0).standard_normal(w.shape)).astype(w.dtype))


class BadBias(TinyBackend):
    """dbias doubled: a failure of grad bias only."""
    name = "bad-bias"

    def run(self, call):
        return _grad_changed(super().run(call), "bias", lambda b: b * 2)


class BadBoth(BadBias):
    name = "bad-both"

    def run(self, call):
        r = super().run(call)
        return Returned({k: (v * 1.5 if k == "y" else v) for k, v in r.outputs.items()}, r.grads)


# ---------------------------------------------------------------- 1. forward-only is never "passed"
def test_forward_only_cases_are_partial_in_every_format(tmp_path, capsys):
    js, xml, md = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "rep"
    rc = main(["check", "--backend", f"{MOD}:FwdOnly", "--golden", GOLDEN, "--ops", "layer_norm", "--no-progress",
               "--json", str(js), "--junit-xml", str(xml), "--report", str(md)])
    out = capsys.readouterr().out
    assert rc == 4                                     # partial, not OK
    last = [ln for ln in out.splitlines() if ln.startswith("refnorm check:")][-1]
    assert "PARTIAL" in last and "0 passed" in last and "OK" not in last, last
    assert "unchecked" in last
    # the default text groups the partial cases with why their arrays are unverified; --verbose lists each
    assert "PARTIAL layer_norm/" not in out and "unchecked grads.x: not returned (the backend is forward-only) in " in out
    assert main(["check", "--backend", f"{MOD}:FwdOnly", "--golden", GOLDEN, "--ops", "layer_norm", "--no-progress",
                 "--verbose"]) == 4
    out = capsys.readouterr().out
    assert "PARTIAL layer_norm/" in out and "grads.x (not returned (the backend is forward-only))" in out
    s = json.loads(js.read_text())["summary"]
    assert s["passed"] == 0 and s["partial"] == s["judged"] > 40 and s["verdict"] == "partial" and not s["ok"]
    assert s["arrays"]["unchecked"] >= 3 * s["partial"] - 20
    suite = ET.parse(xml).getroot().find("testsuite")
    kinds = [f.attrib["type"] for f in suite.iter("failure")]
    assert kinds and set(kinds) == {"refnorm.partial"} and int(suite.attrib["failures"]) == len(kinds)
    text = (md / "summary.md").read_text()
    assert "## Partial (not every array verified)" in text and "| partial |" in text.replace(" partial ", " partial ")
    # accepted on request only, and still reported as partial, never as passed
    rc = main(["check", "--backend", f"{MOD}:FwdOnly", "--golden", GOLDEN, "--ops", "layer_norm", "--no-progress",
               "--accept-partial", "--junit-xml", str(xml)])
    out = capsys.readouterr().out
    assert rc == 0 and "OK (partial accepted)" in out and " 0 passed" in out
    suite = ET.parse(xml).getroot().find("testsuite")
    assert not list(suite.iter("failure"))
    assert all(s.attrib["message"].startswith("partial (accepted)") for s in suite.iter("skipped"))


# ------------------------------------------------------------------- 2. unknown names are errors
def test_unknown_output_names_are_errors_naming_the_expected_ones():
    rep = run_check(Renamed(), GOLDEN, case_ids=LN[:1])
    c = rep.cases[0]
    assert c.status == "error" and not rep.ok
    assert "'Mean'" in c.message and "'mean'" in c.message and "'rstd'" in c.message, c.message


def test_unknown_names_in_refnorm_testing():
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    y = ((x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)).astype(np.float32)
    with pytest.raises(AssertionError, match=r"'inv_std'.*'rstd'"):
        assert_close_to_reference("layer_norm", {"x": x}, {"y": y, "inv_std": y[:, :1]},
                                  config={"normalized_shape": [8]})


# ----------------------------------------------------------- 3. other dtypes: one documented rule
def test_more_precise_outputs_are_judged_as_the_case_dtype_and_say_so(capsys):
    f16 = [c for c in LN if "_f16_" in c]
    for backend in (Upcast(), Unrounded()):
        rep = run_check(backend, GOLDEN, case_ids=f16)
        c = rep.cases[0]
        assert c.status == "passed", (backend.name, c.message)
        ys = [a for a in c.arrays if a.name == "y"]
        assert ys[0].dtype == "float16" and ys[0].returned_dtype == "float64"
        assert c.to_json()["arrays"][0]["returned_dtype"] == "float64"
    assert main(["check", "--backend", f"{MOD}:Upcast", "--golden", GOLDEN, "--case", f16[0], "--no-progress"]) == 0
    assert "returned as float64, judged as float16 after rounding to nearest" in capsys.readouterr().out


def test_less_precise_outputs_are_refused():
    class Down(TinyBackend):
        def run(self, call):
            r = super().run(call)
            return Returned({k: v.astype(np.float16) for k, v in r.outputs.items()}, r.grads)
    c = run_check(Down(), GOLDEN, case_ids=LN[:1]).cases[0]
    assert c.status == "error" and "less precise than the case dtype float32" in c.message


# ---------------------------------------------- 4. an ill-posed array is unconstrained, not verified
def test_an_array_whose_bound_exceeds_its_scale_is_unconstrained():
    for backend in (TinyBackend(), NoisyDweight()):
        c = run_check(backend, GOLDEN, case_ids=[CONST]).cases[0]
        dw = [a for a in c.arrays if a.name == "weight"][0]
        assert dw.verdict == "unconstrained" and dw.unconstrained == dw.size, dw
        assert dw.max_bound > 1e5 and dw.scale == 0.0
        assert c.status == "partial" and "grad weight" in c.message and "scale 0" in c.message, c.message
        assert c.to_json()["verdicts"]["unconstrained"] >= 1
    # a zero bound constrains (exactly zero wanted), a finite bound below the scale constrains
    from refnorm.check.core import _judge
    a = _judge(0, "outputs", "y", np.zeros(3, np.float32), np.zeros(3), np.zeros(3), "float32")
    assert a.verdict == "verified"
    a = _judge(0, "outputs", "y", np.ones(3, np.float32), np.ones(3), np.full(3, 0.5), "float32")
    assert a.verdict == "verified"
    a = _judge(0, "outputs", "y", np.ones(3, np.float32), np.ones(3), np.array([0.5, 2.0, np.inf]), "float32")
    assert a.verdict == "verified" and a.unconstrained == 2
    a = _judge(0, "outputs", "y", np.ones(3, np.float32), np.ones(3), np.array([1.0, 2.0, np.inf]), "float32")
    assert a.verdict == "unconstrained"
    # failing stays failing, whatever the bound
    a = _judge(0, "outputs", "y", np.full(3, 9.0, np.float32), np.ones(3), np.full(3, 2.0), "float32")
    assert a.verdict == "failed"


def test_refnorm_testing_refuses_an_unconstrained_array_unless_allowed():
    from refnorm.golden.commands import load_case
    case = load_case(GOLDEN, CONST)
    st = case.steps[0]
    from refnorm.check import Call
    ret = TinyBackend().run(Call(case.op, case.dtype, dict(case.config), st.training, dict(st.inputs),
                                 dict(st.cotangents)))
    kw = dict(config=case.config, cotangents=st.cotangents, grads=dict(ret.grads))
    with pytest.raises(AssertionError, match="not verified.*unconstrained.*grad weight"):
        assert_close_to_reference("layer_norm", st.inputs, ret.outputs, **kw)
    arrays = assert_close_to_reference("layer_norm", st.inputs, ret.outputs, allow_partial=True, **kw)
    assert {a.name: a.verdict for a in arrays}["weight"] == "unconstrained"


# ------------------------------------------- 5. an expected failure must fail the way it is recorded
def _failed(arrays, diag=None, status="failed", message="m"):
    c = CaseResult("a/b", "a", "float32", status, message)
    for part, name in arrays:
        c.arrays.append(ArrayResult(0, part, name, "float32", 3, 5.0, 1.0, 0, [], 3))
    c.diagnosis = {"matched": diag} if diag else None
    return c


def test_expected_failure_entries_record_what_fails(tmp_path):
    f = tmp_path / "k.txt"
    f.write_text("# comment\n"
                 "a/b  fails=grad.bias  diagnosis=ln_bias  dbias doubled  # why\n"
                 "a/c  error='does not have a device'  raises in the backward\n"
                 "a/d  fails=output.y  eps=1e-12 rounds to 0 in float16\n")
    e = read_expected_failures(f)
    assert e["a/b"].fails == {"grad.bias"} and e["a/b"].diagnosis == "ln_bias" and e["a/b"].reason == "dbias doubled"
    assert e["a/c"].error == "does not have a device" and e["a/c"].fails is None
    assert e["a/d"].reason == "eps=1e-12 rounds to 0 in float16" and e["a/d"].diagnosis is None
    same = _failed([("grads", "bias")], "ln_bias")
    expected_outcome(same, e["a/b"])
    assert same.status == "xfail"
    more = _failed([("grads", "bias"), ("outputs", "y")], "ln_bias")
    expected_outcome(more, e["a/b"])
    assert more.status == "failed" and "other arrays fail: fails=grad.bias,output.y" in more.message
    other = _failed([("grads", "bias")], "one_pass")
    expected_outcome(other, e["a/b"])
    assert other.status == "failed" and "the diagnosis names one_pass" in other.message
    passed = CaseResult("a/b", "a", "float32", "passed")
    expected_outcome(passed, e["a/b"])
    assert passed.status == "failed" and "remove it from the list" in passed.message
    partial = CaseResult("a/b", "a", "float32", "partial")
    expected_outcome(partial, e["a/b"])
    assert partial.status == "failed"
    err = _failed([], status="error", message="step 0: backend raised RuntimeError: tensor does not have a device")
    expected_outcome(err, e["a/c"])
    assert err.status == "xfail"
    err2 = _failed([], status="error", message="step 0: backend raised RuntimeError: out of memory")
    expected_outcome(err2, e["a/c"])
    assert err2.status == "error" and "its error differs" in err2.message


@pytest.mark.parametrize("line, what", [
    ("a/b  just a reason", "must record what fails"),
    ("a/b  fails=grad.bias", "has no reason"),
    ("a/b  fails=bias  why", "output.NAME, grad.NAME or state.NAME"),
    ("a/b  fails=grad.x error=x  why", "exactly one of"),
    ("a/b  fails=grad.x diagnosys=x  why", "unknown field 'diagnosys' \\(did you mean 'diagnosis'"),
])
def test_malformed_expected_failure_lines_are_errors(tmp_path, line, what):
    f = tmp_path / "k.txt"
    f.write_text(line + "\n")
    with pytest.raises(GoldenError, match=what):
        read_expected_failures(f)


def test_a_new_failure_of_a_listed_case_is_not_hidden(tmp_path, capsys):
    case = LN[0]
    f = tmp_path / "k.txt"
    f.write_text(f"{case}  fails=grad.bias  dbias is doubled\n")
    def run(backend):
        return main(["check", "--backend", f"{MOD}:{backend}", "--golden", GOLDEN, "--case", case, "--no-progress",
                     "--no-diagnosis", "--expect-failures", str(f)])
    assert run("BadBias") == 0
    assert "1 expected failures" in capsys.readouterr().out
    assert run("BadBoth") == 1                      # the old entry does not hide the new failure of y
    out = capsys.readouterr().out
    assert "other arrays fail: fails=grad.bias,output.y" in out and "0 expected failures" not in out


# ------------------------------------------------------------- 6. the summary and the numbers
def test_the_summary_counts_judged_cases_and_the_worst_error_is_finite(capsys):
    rc = main(["check", "--backend", f"{MOD}:BadBoth", "--golden", GOLDEN, "--ops", "layer_norm", "--no-progress",
               "--dtypes", "float32"])
    out = capsys.readouterr().out
    assert rc == 1 and "nothing is verified" not in out
    rc = main(["check", "--backend", "examples.tiny_backend:TinyBackend", "--golden", GOLDEN, "--ops",
               "layer_norm", "--no-progress"])
    out = capsys.readouterr().out
    rows = [r for r in (ln.split() for ln in out.splitlines() if ln.startswith("layer_norm ")) if len(r) == 12]
    assert len(rows) == 4 and all(r[-1] not in ("inf", "nan", "-") for r in rows), rows
    # the trigger: a reference of 0 with a positive bound is unconstrained, out of the column
    from refnorm.check.core import _judge
    a = _judge(0, "grads", "weight", np.full(3, 1e-3, np.float32), np.zeros(3), np.full(3, 1e5), "float32")
    assert a.verdict == "unconstrained" and np.isnan(a.err_u)


def test_no_case_judged_says_so():
    from refnorm.check.core import Report
    rep = Report("b", "g", [CaseResult("a/b", "a", "float32", "skipped", "why")])
    assert "nothing is verified" in summary_line(rep) and rep.verdict == "failed"


def test_worst_elements_print_every_digit_that_differs():
    rep = run_check(BadBoth(), GOLDEN, case_ids=["layer_norm/normal_f64_9x7"])
    from refnorm.check.report import array_lines
    lines = "\n".join(array_lines(rep.cases[0].arrays))
    a = [a for a in rep.cases[0].arrays if a.name == "y"][0]
    _, got, exp, _ = a.worst[0]
    assert f"got {got!r}, expected {exp!r}, |error| " in lines
    assert float(lines.split("got ")[1].split(",")[0]) == got      # round-trips: no digit lost
