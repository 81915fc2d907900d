"""`refnorm check --backend torch-cpu` on the whole golden set: torch CPU 2.13 is a correct backend
except for its documented defects (known_failures/torch-cpu.txt), so the check must pass with them
as expected failures, and must fail without that list (the defects are real, not hidden)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

from refnorm.cli import main  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
KNOWN = os.path.join(ROOT, "known_failures", "torch-cpu.txt")


def test_torch_cpu_passes_every_supported_case_but_its_known_defects(tmp_path, capsys):
    out = tmp_path / "torch.json"
    rc = main(["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--expect-failures", KNOWN,
               "--json", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 4, text[-3000:]                       # partial: some ill-posed arrays verify nothing
    data = json.loads(out.read_text())
    s = data["summary"]
    assert s["failed"] == 0 and s["errors"] == 0 and s["verdict"] == "partial"
    assert s["passed"] >= 320 and s["passed"] + s["partial"] >= 350, s   # every op torch has, all four dtypes
    assert s["expected_failures"] == 9, s
    # torch returns every gradient: what keeps a case from passing is an unconstrained array, never an
    # unchecked one, and the partial cases are the ill-conditioned regimes
    assert s["arrays"]["unchecked"] == 0 and s["arrays"]["unconstrained"] > 0
    partial = [c for c in data["cases"] if c["status"] == "partial"]
    assert all(c["unconstrained"] and c["verdicts"]["failed"] == 0 and not c["unchecked"] for c in partial)
    assert main(["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--expect-failures", KNOWN,
                 "--no-progress", "--ops", "layer_norm", "--accept-partial"]) == 0
    _the_default_output_is_compact(text)
    import figures                          # issue 34 item 14: README/docs torch-cpu figures, from this run
    assert figures.mismatches({"torch_cpu": s}, only="torch_cpu") == []


def _the_default_output_is_compact(text):
    """Issue 34 item 13: the main command's default text (288 lines before) is the table of the op/dtype
    rows with a judged case, the skips grouped by reason, one line per kind of note: no line twice, no
    two skip lines differing only in a dtype or a number, and bounded."""
    from refnorm.check.report import reason_key
    lines = text.splitlines()
    skips = [ln for ln in lines if ln.startswith("SKIPPED ")]
    assert skips and len(set(lines)) == len(lines), [ln for ln in lines if lines.count(ln) > 1]
    keys = [reason_key(ln.split(": ", 1)[1].split(" [and ")[0]) for ln in skips]
    assert len(set(keys)) == len(keys), skips
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("-----"))
    rows = next(i for i, ln in enumerate(lines) if ln.startswith("arrays ok/unc/unch:")) - rule - 1
    assert 0 < rows and len(lines) - rows <= 40, lines[rule + rows:]     # besides the table: 40 lines at most
    end = next(i for i, ln in enumerate(lines) if ln.startswith("refnorm check: PARTIAL"))
    assert lines[end - 1].startswith("platform: ")


def test_torch_cpu_defects_fail_without_the_list(capsys):
    from refnorm.check.core import read_expected_failures
    ids = list(read_expected_failures(KNOWN))              # the entries of the contiguous run (no layout= scope)
    assert ids
    args = ["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--no-progress"]
    for i in ids:
        args += ["--case", i]
    assert main(args) == 1
    text = capsys.readouterr().out
    assert text.count("FAILED ") + text.count("ERROR ") == len(ids)


def test_a_stale_expected_failure_fails(tmp_path, capsys):
    f = tmp_path / "known.txt"
    f.write_text("layer_norm/normal_f32_6x100  fails=output.y  pretend this is broken\n")
    rc = main(["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--case", "layer_norm/normal_f32_6x100",
               "--expect-failures", str(f), "--no-progress"])
    assert rc == 1 and "but it passed: remove it" in capsys.readouterr().out
    f.write_text("layer_norm/not_a_case  fails=output.y  x\n")
    assert main(["check", "--backend", "torch-cpu", "--golden", GOLDEN, "--expect-failures", str(f),
                 "--no-progress"]) == 2


def test_torch_cpu_with_case_dtype_parameters_passes_but_its_known_defects(capsys):
    known = os.path.join(ROOT, "known_failures", "torch-cpu-caseparams.txt")
    rc = main(["check", "--backend", "torch-cpu-caseparams", "--golden", GOLDEN, "--expect-failures", known,
               "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 4, text[-3000:]
    assert "14 expected failures" in text and " 0 failed, 0 errors" in text


@pytest.mark.parametrize("backend", ["torch-cpu", "torch-cpu-caseparams"])
def test_torch_cpu_passes_every_layout_but_its_known_defects(tmp_path, capsys, backend):
    from helpers import thorough
    layout = "all" if thorough() else "channels_last"        # the quick profile: the layout with most defects
    """Issue 35: every golden case in every memory layout (--layout all), each layout with the entries scoped to
    it (known_failures/: layout=), fails only as listed; without the layout entries the torch defects of
    docs/framework_defects.md fail the check, in the layouts the entries name."""
    out = tmp_path / "all.json"
    rc = main(["check", "--backend", backend, "--golden", GOLDEN, "--layout", layout, "--expect-failures", backend,
               "--json", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 4, text[-3000:]
    cases = json.loads(out.read_text())["cases"]
    xfail = {(c["id"], c["layout"]) for c in cases if c["status"] == "xfail"}
    lays = ("channels_last", "strided") if layout == "all" else ("channels_last",)
    assert {lay for _, lay in xfail} >= set(lays), sorted(xfail)[:5]
    assert all(c["status"] not in ("failed", "error") for c in cases)
    from refnorm.check.core import read_expected_failures
    for lay in lays:
        path = os.path.join(ROOT, "known_failures", f"{backend}.txt")
        scoped = [i for i, e in read_expected_failures(path, layout=lay).items() if "layout" in e.describe()]
        assert scoped and all((i, lay) in xfail for i in scoped), (lay, scoped[:3])
