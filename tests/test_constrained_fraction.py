"""Issue 32: an array is not reported plainly "verified" when most of its elements' bounds are at least
its own scale. Every array carries the fraction of its elements constrained (bound below the array's
scale max|ref|); a verified array with fewer than half constrained is reported "verified (weakly: 12%
constrained)" in text, JSON, Markdown and JUnit. Its verdict, the case's status and the exit status do
not change."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from refnorm.check import junit, markdown
from refnorm.check import report as R
from refnorm.check.core import ArrayResult, CaseResult, Report
from refnorm.check.judge import _judge


def _array(size, unc, ratio=0.5, name="y"):
    return ArrayResult(0, "outputs", name, "float32", size, ratio, 1.0, unc, [])


@pytest.mark.parametrize("size,unc,fraction,weak,verdict", [
    (100, 88, 0.12, True, "verified (weakly: 12% constrained)"),
    (100, 50, 0.5, False, "verified"),                    # half constrained: verified plainly
    (100, 51, 0.49, True, "verified (weakly: 49% constrained)"),
    (1000, 999, 0.001, True, "verified (weakly: 0.1% constrained)"),
    (100, 100, 0.0, False, "unconstrained"),              # none constrained: the verdict says so already
    (100, 0, 1.0, False, "verified"),
    (0, 0, 1.0, False, "verified")])
def test_fraction_and_the_weak_qualifier(size, unc, fraction, weak, verdict):
    a = _array(size, unc)
    assert a.constrained_fraction == pytest.approx(fraction) and a.weak == weak and a.shown_verdict == verdict
    j = a.to_json()
    assert j["constrained_fraction"] == pytest.approx(fraction) and j["weakly_verified"] == weak
    assert j["verdict"] in ("verified", "unconstrained")        # still one of the four verdicts


def test_a_failed_array_is_failed_not_weak():
    a = _array(100, 90, ratio=2.0)
    assert a.verdict == "failed" and not a.weak and a.shown_verdict == "failed"


def test_the_judge_counts_the_elements_below_the_scale():
    """A judged array: the bound of 3 of 4 elements at least max|ref| = 2 (one infinite)."""
    ref = np.array([[2.0, 1.0, -1.0, 0.5]])
    a = _judge(0, "outputs", "y", ref.astype(np.float32), ref, np.array([[1e-6, 2.0, np.inf, 3.0]]), "float32")
    assert (a.verdict, a.unconstrained, a.constrained_fraction, a.weak) == ("verified", 3, 0.25, True)


def _report():
    weak, plain_ = _array(100, 88, name="y"), _array(10, 0, name="x")
    cases = [CaseResult("layer_norm/a", "layer_norm", "float32", "passed", arrays=[weak, plain_]),
             CaseResult("layer_norm/b", "layer_norm", "float32", "passed", arrays=[_array(10, 0)])]
    return Report("numpy", "golden", cases)


def test_every_format_says_which_arrays_are_weakly_verified(tmp_path):
    rep = _report()
    assert rep.verdict == "ok" and rep.cases[0].status == "passed"        # nothing else changes
    assert rep.summary()["weakly_verified"] == 1 and rep.array_counts()["verified"] == 3
    assert "arrays: 3 verified (1 weakly), 0 failed" in R.summary_line(rep)
    assert R.weak(rep) == (f"WEAKLY VERIFIED layer_norm float32 output y: in 1 case(s), down to 12% of its elements "
                           f"constrained ({R.WEAK_NOTE})")
    assert "WEAKLY VERIFIED 1 array(s) (1 op/dtype/array)" in R.compact_notes(rep)
    case = json.loads(json.dumps(rep.cases[0].to_json()))
    assert case["weakly_verified"] == ["step0.outputs.y"] and case["verdicts"]["verified"] == 2
    assert [a["constrained_fraction"] for a in case["arrays"]] == pytest.approx([0.12, 1.0])
    md = markdown.markdown(rep, "numpy", None, [], None)
    assert "## Weakly verified (1 arrays)" in md and "| layer_norm | float32 | output y | 1 | 12% |" in md
    rep.platform = {"cpu": "c", "arch": "a", "flags": [], "flags_known": False, "gpu": None, "versions": {}}
    root = ET.fromstring(junit.junit_xml(rep, "numpy"))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["arrays_weakly_verified"] == "1" and props["arrays_verified"] == "3"
    tcs = {t.get("name"): t for t in root.iter("testcase")}
    assert tcs["layer_norm/a"].find("system-out").text == "step 0 output y: verified (weakly: 12% constrained)"
    assert tcs["layer_norm/a"].find("failure") is None and tcs["layer_norm/b"].find("system-out") is None


def test_no_weak_array_no_change_in_the_summary_line():
    rep = Report("numpy", "golden", [CaseResult("a/1", "layer_norm", "float32", "passed", arrays=[_array(10, 0)])])
    assert "arrays: 1 verified, 0 failed" in R.summary_line(rep) and R.weak(rep) == ""
