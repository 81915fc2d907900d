"""Issue 32: no false alarm on correct kernels (benchmarks/false_alarms.py, the fast version): the float64
reference rounded once and the emulated float32-internals kernel pass on seeded trials of every dtype and
regime, the issue's mean-shifted bfloat16 rms_norm rows included; the same harness does see a bias."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import false_alarms as FA  # noqa: E402
import versus_assert_close as V  # noqa: E402


def test_correct_kernels_raise_no_false_alarm():
    rows = FA.run(range(40), max_elements=1 << 14)
    assert {r[2] for r in rows} == set(FA.DTYPES) and {r[3] for r in rows} == set(FA.REGIMES)
    alarms = [r for r in rows if r[6] != "passed"]
    assert not alarms, alarms[:3]
    assert max(r[7] for r in rows) < 1 and max(r[8] for r in rows) <= 1


@pytest.mark.parametrize("seed", [100980, 101169])
def test_the_issues_rows_pass_and_a_low_rstd_fails(seed):
    """The issue's 1 x 4096 mean-shifted bfloat16 rms_norm rows: both correct kernels pass; the reference
    scaled by 1 - 2^-9 (a systematically low rstd) before its one rounding fails."""
    t = V.trial(seed)
    assert (t["op"], t["dtype"], t["regime"]) == ("rms_norm", "bfloat16", "mean_shifted")
    for make in (FA.rounded, FA.emulated):
        assert FA.judge(make(t), t)[0] == "passed"
    from refnorm.check.precision import round_to
    low = {k: round_to(v * (1 - 2.0 ** -9), "bfloat16") for k, v in FA.reference(t).items()}
    assert FA.judge(low, t)[0].startswith("failed")


def test_report_counts_alarms_per_kernel_dtype_and_regime():
    rows = [(0, "rms_norm", "bfloat16", "normal", "1x64", k, v, 0.1, 0.2)
            for k, v in (("rounded", "passed"), ("emulated", "failed: x"))]
    text = FA.report(rows, 1.0, ["--trials", "1"])
    assert "**1 false alarms** in 2 judgements" in text and "| emulated | 0/0 | 0/0 | 0/0 | 1/1 | 1/1 |" in text
    assert "- alarm: seed 0 rms_norm bfloat16 normal 1x64 emulated: failed: x" in text
