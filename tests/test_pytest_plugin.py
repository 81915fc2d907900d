"""The pytest plugin (entry point pytest11: refnorm = refnorm.pytest_plugin), run in a separate pytest
process on a tiny test directory of its own, as a user's suite would be."""
from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
TINY = "examples.tiny_backend:TinyBackend"

BAD_BACKEND = """
from examples.tiny_backend import TinyBackend
from refnorm.check import Returned

class OffByOne(TinyBackend):
    name = "off-by-one"

    def run(self, call):
        r = super().run(call)
        y = r.outputs["y"].copy()
        y.flat[2] = y.flat[2] + 1
        return Returned({"y": y}, r.grads)
"""


def _count(op, dtype=None):
    man = json.loads(Path(os.path.join(GOLDEN, "MANIFEST.json")).read_text())
    return sum(e["case"]["op"] == op and (dtype is None or e["case"]["dtype"] == dtype) for e in man["cases"])


def _ids(op, dtype):
    man = json.loads(Path(os.path.join(GOLDEN, "MANIFEST.json")).read_text())
    return [e["id"] for e in man["cases"] if e["case"]["op"] == op and e["case"]["dtype"] == dtype]


@pytest.fixture
def suite(pytester, monkeypatch):
    """A user's own suite (one ordinary test), with the checkout on PYTHONPATH for examples/."""
    assert any(ep.name == "refnorm" for ep in importlib.metadata.entry_points(group="pytest11")), \
        "the pytest11 entry point is not installed: run pip install -e ."
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_mine="def test_my_own_thing():\n    assert 1 + 1 == 2\n")
    return pytester


def test_golden_cases_are_collected_and_pass(suite):
    n = _count("layer_norm", "float32")
    r = suite.runpytest_subprocess("--refnorm-backend", "numpy", f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "layer_norm", "--refnorm-dtypes", "float32", "-v")
    r.assert_outcomes(passed=n + 1)
    r.stdout.fnmatch_lines([f"*collected {n + 1} items", f"refnorm: {n} golden case(s) selected for backend numpy*",
                            "*refnorm::layer_norm/normal_f32_6x100 PASSED*"])


def test_user_backend_by_import_path_skips_with_reasons_and_selects_with_k_and_m(suite):
    n = _count("rms_norm")
    r = suite.runpytest_subprocess("--refnorm-backend", TINY, f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "rms_norm,layer_norm", "-m", "refnorm", "-k", "rms_norm", "-rs",
                                   "--refnorm-accept-partial")
    outcomes = r.parseoutcomes()
    assert outcomes["passed"] + outcomes["skipped"] == n and outcomes["skipped"] >= 1, outcomes
    r.stdout.fnmatch_lines(["*tiny backend: rms_norm with eps outside the square root is not implemented*"])


def test_a_partial_case_fails_unless_accepted(suite):
    case = "layer_norm/const_eps1e-12_f16_9x7"            # dweight: reference 0, bound ~1e6: unconstrained
    args = ["--refnorm-backend", TINY, f"--refnorm-golden={GOLDEN}", "-k", case.split("/")[1]]
    r = suite.runpytest_subprocess(*args)
    assert r.parseoutcomes()["failed"] == 1
    r.stdout.fnmatch_lines([f"*PARTIAL {case} [[]float16, contract strict/block[]]: * arrays verified; unconstrained*"
                            "grad weight*",
                            "*--refnorm-accept-partial lets such a case pass*"])
    r = suite.runpytest_subprocess(*args, "--refnorm-accept-partial")
    assert r.parseoutcomes()["passed"] == 2 and "failed" not in r.parseoutcomes()     # with the user's test


def test_failures_show_the_worst_elements_and_expected_failures_are_strict_xfails(suite):
    suite.makepyfile(bad_backend=BAD_BACKEND)
    ids = _ids("layer_norm", "float16")
    suite.path.joinpath("known.txt").write_text(f"{ids[0]}  fails=output.y  off by one at element 2\n")
    r = suite.runpytest_subprocess("--refnorm-backend", "bad_backend:OffByOne", f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "layer_norm", "--refnorm-dtypes", "float16",
                                   "--refnorm-expect-failures", "known.txt")
    o = r.parseoutcomes()            # ill-posed cases (constant rows, eps 1e-12) bound nothing: partial, failed
    assert o["xfailed"] == 1 and o["failed"] >= len(ids) // 2 and o["passed"] + o["failed"] == len(ids), o
    r.stdout.fnmatch_lines(["*FAILED layer_norm/* [[]float16, contract strict/block[]]: step 0 output y: * x bound*",
                            "*step 0 output y (float16): * x bound, 1 of * elements over*",
                            "*at [[]*]: got *, expected *, bound *",
                            f"*reproduce: refnorm check --backend bad_backend:OffByOne --golden {GOLDEN} --case layer_norm/*"])
    assert r.ret == 1


def test_a_listed_case_that_passes_fails_the_run(suite):
    ids = _ids("layer_norm", "float32")
    suite.path.joinpath("known.txt").write_text(f"{ids[0]}  fails=output.y  not really broken\n")
    r = suite.runpytest_subprocess("--refnorm-backend", "numpy", f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "layer_norm", "--refnorm-dtypes", "float32",
                                   "--refnorm-expect-failures", "known.txt")
    r.assert_outcomes(passed=len(ids), failed=1)          # the user's test + the others; the listed one fails
    r.stdout.fnmatch_lines(["*listed as an expected failure (fails=output.y: not really broken) but it passed*"])


def test_a_listed_case_that_fails_differently_fails_the_run(suite):
    suite.makepyfile(bad_backend=BAD_BACKEND)
    ids = _ids("layer_norm", "float16")
    suite.path.joinpath("known.txt").write_text(f"{ids[0]}  fails=grad.x  dx is wrong\n")
    r = suite.runpytest_subprocess("--refnorm-backend", "bad_backend:OffByOne", f"--refnorm-golden={GOLDEN}",
                                   "-k", ids[0].split("/")[1], "--refnorm-expect-failures", "known.txt")
    assert r.parseoutcomes().get("xfailed", 0) == 0 and r.parseoutcomes()["failed"] == 1
    r.stdout.fnmatch_lines(["*but other arrays fail: fails=output.y*"])


def test_without_the_option_the_plugin_adds_nothing(suite):
    r = suite.runpytest_subprocess()
    r.assert_outcomes(passed=1)


def test_bad_options_are_usage_errors(suite):
    r = suite.runpytest_subprocess("--refnorm-backend", "no-such-backend", f"--refnorm-golden={GOLDEN}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*refnorm: unknown backend 'no-such-backend'*"])
    r = suite.runpytest_subprocess("--refnorm-backend", "numpy", "--refnorm-golden", str(suite.path / "nowhere"))
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r = suite.runpytest_subprocess("--refnorm-backend", "numpy", f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "layer_norm,layernorm")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--refnorm-ops layernorm: not in the golden set*"])


def test_filters_that_together_select_no_case_are_a_usage_error(suite, tmp_path):
    """Each filter names something in the set, but no case has both: a usage error naming the filters
    and what each selects alone, never a run of zero golden cases."""
    from refnorm.golden import cases as C
    from refnorm.golden.commands import build
    rows = C.by_id()
    build(tmp_path / "g", cases=[rows["layer_norm/mean1e3_f32_6x100"], rows["batch_norm/const_eps1e-12_f16_7x3"]])
    r = suite.runpytest_subprocess("--refnorm-backend", "numpy", f"--refnorm-golden={tmp_path / 'g'}",
                                   "--refnorm-ops", "layer_norm", "--refnorm-dtypes", "float16")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*refnorm: no golden case matches --refnorm-ops layer_norm --refnorm-dtypes float16 "
                            "(--refnorm-ops layer_norm alone selects 1; --refnorm-dtypes float16 alone selects 1)*"])


def test_an_unavailable_backend_skips_every_case_with_its_reason(suite):
    suite.makepyfile(gone_backend="from refnorm.check.backends.numpy_backend import NumpyBackend\n"
                                  "class Gone(NumpyBackend):\n"
                                  "    def available(self):\n"
                                  "        return 'no device here'\n")
    r = suite.runpytest_subprocess("--refnorm-backend", "gone_backend:Gone", f"--refnorm-golden={GOLDEN}",
                                   "--refnorm-ops", "z_score", "-rs")
    r.assert_outcomes(passed=1, skipped=_count("z_score"))
    r.stdout.fnmatch_lines(["*backend gone_backend:Gone is unavailable: no device here*"])
