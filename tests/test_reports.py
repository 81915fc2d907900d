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


# ------------------------------------------- issue 34 item 13: a compact default, details with --verbose
def _skipped(cid, op, dtype, message):
    from refnorm.check.core import CaseResult
    return CaseResult(cid, op, dtype, "skipped", message)


def test_skips_differing_only_in_a_dtype_or_number_are_one_line_with_their_count():
    from refnorm.check import report as R
    from refnorm.check.core import Report
    cases = [_skipped(f"lrn/{i}_f16", "lrn", "float16", "torch CPU has no float16 avg_pool3d") for i in range(3)]
    cases += [_skipped(f"lrn/{i}_bf16", "lrn", "bfloat16", "torch CPU has no bfloat16 avg_pool3d") for i in range(2)]
    cases += [_skipped(f"rms/{i}", "rms", "float32", f"option weight_offset={v} is not implemented")
              for i, v in enumerate(["1.0", "0.5", "2", "1e-3"] * 3)]              # 12 near-identical reasons
    cases += [_skipped("un/1", "un", "float32", "no derived tolerance")]
    text = R.grouped_skips(Report("b", "g", cases))
    lines = text.splitlines()
    assert lines == [
        "SKIPPED 12 case(s): option weight_offset=1.0 is not implemented [and 3 variant(s) of this reason "
        "differing in a dtype or number]",
        "SKIPPED 5 case(s): torch CPU has no float16 avg_pool3d [and 1 variant(s) of this reason differing in a "
        "dtype or number]",
        "SKIPPED 1 case(s): no derived tolerance"], lines
    assert len(set(lines)) == len(lines)


def test_the_default_output_is_compact_and_verbose_prints_every_detail(mixed, capsys):
    assert main(mixed) == 1
    short = capsys.readouterr().out
    assert main(mixed + ["--verbose"]) == 1
    full = capsys.readouterr().out
    # the failure: one line and its reproduce command by default; its worst elements with --verbose
    repro = f"  reproduce: refnorm check --backend mixed --golden {GOLDEN} --case {LN_FAIL}"
    assert f"FAILED {LN_FAIL} [" in short and repro in short.splitlines()
    assert "at [" not in short and "elements over" not in short and "at [" in full and "elements over" in full
    assert f"XFAIL {LN_XFAIL}" not in short and "XFAIL 1 expected failure(s)" in short and f"XFAIL {LN_XFAIL}" in full
    assert "HEADROOM op" not in short and "HEADROOM op" in full
    # the table leaves out the rows whose every case was skipped; --verbose keeps them
    assert not any(ln.startswith("unified_norm ") for ln in short.splitlines())
    assert any(ln.startswith("unified_norm ") for ln in full.splitlines())
    assert "row(s) whose every case was skipped are left out: --verbose shows them" in short
    for text in (short, full):
        assert "SKIPPED 1 case(s): no derived tolerance" in text
        assert text.splitlines()[-1].startswith("refnorm check: FAILED") and "platform: " in text
    assert len(short.splitlines()) < len(full.splitlines())


def test_headroom_exact_means_inside_the_rounding_interval_and_one_ulp_off_still_fails(monkeypatch):
    """rms_norm bfloat16 through the reference: headroom "exact" (every element inside its rounding
    interval), yet one element one ulp off fails: the headroom is not a bound on |error| (Report.headroom)."""
    from refnorm.check import report as R
    from refnorm.check.core import run_check
    cid = next(i for i in _ids("rms_norm") if "_bf16_" in i)

    class OneUlp(NumpyBackend):
        name = "one-ulp"

        def run(self, call):
            r = super().run(call)
            y = np.array(r.outputs["y"], copy=True)
            k = int(np.argmax(np.abs(y.astype(np.float64)).ravel()))
            y.flat[k] = _next_bf16(y.flat[k])
            return Returned({**r.outputs, "y": y}, r.grads, r.state)

    exact = run_check(NumpyBackend(), GOLDEN, case_ids=[cid])
    assert exact.cases[0].status == "passed"
    assert exact.headroom() == [{"op": "rms_norm", "dtype": "bfloat16", "passed": 1, "worst_ratio": 0.0,
                                 "headroom": "exact"}]
    assert "exact" in R.headroom_table(exact) and R.HEADROOM_NOTE in R.headroom_table(exact)
    off = run_check(OneUlp(), GOLDEN, case_ids=[cid])
    c = off.cases[0]
    assert c.status == "failed" and c.failing_arrays() == ["output.y"], c.message
    assert next(a for a in c.arrays if a.name == "y").ratio > 1


def _next_bf16(v):
    """The bfloat16 value one ulp above ``v`` (away from zero for positive v, toward zero for negative)."""
    import ml_dtypes
    bits = np.array(v, dtype=ml_dtypes.bfloat16).view(np.uint16)
    return (bits + np.uint16(1)).view(ml_dtypes.bfloat16)
