"""--junit-xml (well-formed, one testcase per golden case, every status) and --report DIR (Markdown
summary, PNG plots, and a plain note when matplotlib is missing)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from refnorm.check import Contract, Returned, backends
from refnorm.check.backends.numpy_backend import NumpyBackend
from refnorm.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")


def _ids(op):
    man = json.loads(Path(os.path.join(GOLDEN, "MANIFEST.json")).read_text())
    return [e["id"] for e in man["cases"] if e["case"]["op"] == op]


LN_FAIL, LN_XFAIL = _ids("layer_norm")[:2]
RMS_ERROR = _ids("rms_norm")[0]
UN_SKIP = _ids("unified_norm")[0]
BN_PASS = _ids("batch_norm")[0]
CASES = [LN_FAIL, LN_XFAIL, RMS_ERROR, UN_SKIP, BN_PASS]


class Mixed(NumpyBackend):
    """layer_norm off by a lot at one element, rms_norm raising (with a control character in the
    message), unified_norm unbounded under strict (skipped), batch_norm exact (passes)."""
    name = "mixed"

    def contract(self, call):
        return Contract("strict", "block")

    def run(self, call):
        if call.op == "rms_norm":
            raise RuntimeError("kernel <launch> failed \x01 & gave up")
        r = super().run(call)
        if call.op == "layer_norm":
            y = r.outputs["y"].copy()
            y.flat[5] = y.flat[5] * 2 + 1
            return Returned({**r.outputs, "y": y}, r.grads, r.state)
        return r


@pytest.fixture
def mixed(monkeypatch, tmp_path):
    monkeypatch.setitem(backends.BUILTIN, "mixed", Mixed)
    xf = tmp_path / "xf.txt"
    xf.write_text(f"{LN_XFAIL}  fails=output.y  y is off at one element (a known defect)\n")
    args = ["check", "--backend", "mixed", "--golden", GOLDEN, "--no-progress", "--expect-failures", str(xf)]
    for c in CASES:
        args += ["--case", c]
    return args


def test_junit_xml_one_testcase_per_case_with_every_status(mixed, tmp_path, capsys):
    out = tmp_path / "junit.xml"
    assert main(mixed + ["--junit-xml", str(out)]) == 1
    assert f"wrote {out}" in capsys.readouterr().out
    root = ET.parse(out).getroot()                    # well-formed, or this raises
    suite = root.find("testsuite")
    assert suite.attrib["tests"] == "5" and suite.attrib["failures"] == "1" and suite.attrib["errors"] == "1"
    assert suite.attrib["skipped"] == "2"
    tcs = {tc.attrib["name"]: tc for tc in suite.iter("testcase")}
    assert set(tcs) == set(CASES)
    for cid, tc in tcs.items():
        assert tc.attrib["classname"] == cid.split("/")[0] and float(tc.attrib["time"]) >= 0
    fail = tcs[LN_FAIL].find("failure")
    assert "output y" in fail.attrib["message"] and "x bound" in fail.attrib["message"]
    assert "elements over" in fail.text and "at [" in fail.text and "got " in fail.text and "bound " in fail.text
    assert f"reproduce: refnorm check --backend mixed --golden {GOLDEN} --case {LN_FAIL}" in fail.text
    err = tcs[RMS_ERROR].find("error")
    assert "kernel <launch> failed \ufffd & gave up" in err.attrib["message"]
    assert tcs[UN_SKIP].find("skipped").attrib["message"].startswith("no derived tolerance")
    xf = tcs[LN_XFAIL].find("skipped")
    assert xf.attrib["message"] == "expected failure: y is off at one element (a known defect)"
    assert "x bound" in xf.text
    assert len(list(tcs[BN_PASS])) == 0
    assert not list(tmp_path.glob(".refnorm-*"))     # written through a temporary file and a rename


def test_junit_xml_to_a_missing_directory_is_exit_2(tmp_path, capsys):
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--junit-xml", str(tmp_path / "no" / "j.xml")]) == 2
    assert "--junit-xml" in capsys.readouterr().err


def test_report_dir_markdown_and_plots(mixed, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install 'refnorm[report]')")
    d = tmp_path / "rep"
    assert main(mixed + ["--report", str(d)]) == 1
    out = capsys.readouterr()
    assert "plots skipped" not in out.err and f"wrote {d / 'summary.md'} and 2 plot(s)" in out.out
    md = (d / "summary.md").read_text()
    assert md.startswith("# refnorm check: backend mixed")
    assert ("| op | dtype | cases | passed | partial | failed | skipped | errors | expected failures | "
            "arrays verified | unconstrained | unchecked |") in md
    assert "| batch_norm |" in md and "| layer_norm |" in md
    assert "## Failures (1)" in md and f"FAILED {LN_FAIL}" in md and "at [" in md
    assert "## Errors (1)" in md and "## Expected failures (1)" in md
    assert "## Skipped (1)" in md and "no derived tolerance" in md
    assert "![batch_norm](batch_norm.png)" in md and "![layer_norm](layer_norm.png)" in md
    for op in ("batch_norm", "layer_norm"):
        assert (d / f"{op}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (d / "unified_norm.png").exists()      # nothing judged: no plot
    assert sorted(p.name for p in d.iterdir()) == ["batch_norm.png", "layer_norm.png", "summary.md"]


def test_report_without_matplotlib_says_so_and_still_writes_the_markdown(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # import matplotlib -> ModuleNotFoundError
    d = tmp_path / "rep"
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--ops", "layer_norm", "--no-progress",
                 "--report", str(d)]) == 0
    err = capsys.readouterr().err
    assert "plots skipped: matplotlib is not installed (pip install 'refnorm[report]')" in err
    md = (d / "summary.md").read_text()
    assert "**Note: plots skipped: matplotlib is not installed" in md and "| layer_norm | float32 |" in md
    assert [p.name for p in d.iterdir()] == ["summary.md"]


def test_report_into_a_file_is_exit_2(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    assert main(["check", "--backend", "numpy", "--golden", GOLDEN, "--report", str(f)]) == 2
    assert "expected a directory" in capsys.readouterr().err


def test_plot_ratios_take_judged_arrays_of_passed_and_failed_cases():
    from refnorm.check.core import ArrayResult, CaseResult, Report
    from refnorm.check.plots import ratios_by_op

    def arr(r):
        return ArrayResult(0, "outputs", "y", "float32", 4, r, 0.0, 0, [])
    rep = Report("b", "g", [CaseResult("a/1", "a", "float32", "passed", arrays=[arr(0.1), arr(0.0)]),
                            CaseResult("a/2", "a", "float16", "failed", arrays=[arr(np.inf)]),
                            CaseResult("a/3", "a", "float16", "xfail", arrays=[arr(5.0)]),
                            CaseResult("b/1", "b", "float32", "skipped")])
    assert ratios_by_op(rep) == {"a": {"float32": [0.1, 0.0], "float16": [np.inf]}}
