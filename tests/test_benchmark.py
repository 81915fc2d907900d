"""benchmarks/bench.py times refnorm against torch (on demand, never in the test suite); this only checks
that every one of its cases compares like with like: refnorm's and torch's y and gradients agree, so a
ratio in docs/performance.md is a ratio between two computations of the same thing."""
from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch", reason="benchmarks/bench.py compares with torch (pip install torch==2.13.0)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location("refnorm_bench", os.path.join(ROOT, "benchmarks", "bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()


@pytest.mark.parametrize("case", sorted(BENCH.CASES))
def test_benchmark_case_computes_what_torch_computes(case):
    x, dy, w, b = BENCH.make_inputs(case)
    ours, theirs = BENCH.refnorm_call(case, x, dy, w, b)(), BENCH.torch_call(case, x, dy, w, b)()
    assert sorted(ours[1]) == sorted(theirs[1]) == (["weight", "x"] if b is None else ["bias", "weight", "x"])
    assert BENCH.agreement(ours, theirs) < 1e-12
