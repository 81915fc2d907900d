"""The figures of README.md and docs/*.md, checked (issue 34, item 14).

A figure in the text carries a marker naming how it is computed, invisible in the rendered Markdown:

    golden/: <!-- figure: golden.cases -->745 cases

``markers()`` finds every one; ``compute(name, runs)`` computes a figure: from the golden manifest, the
suites, the distributed cases and the known-failure lists (cheap: tests/test_figures.py checks them), or
from the report of a check that a test already runs (``runs``: {"torch_cpu": its JSON summary, "tiny":
...}): tests/test_check_torch.py checks the torch_cpu.* figures with the report of its full torch-cpu
check, tests/test_figures.py the tiny.* ones (a 3-second check). A figure that changes (helper b adds
golden cases) is then recomputed, never hard-coded: the test names the file, line, marker and both
values, and the text is fixed by hand.

Names (``FIGURES``):
  golden.cases, golden.cases.<op>, golden.arrays (the arrays a check judges: every step's outputs,
  gradients and state), golden.ops (ops with a golden case);
  suite.<name> (generated cases of a suite), distributed.cases;
  known.<list> (entries of known_failures/<list>.txt applying on every CPU plus those scoped to one kind:
  all entries), known.<list>.<flag>/known.<list>.!<flag> (the entries applying on a CPU with/without it);
  torch_cpu.<key>, tiny.<key> (a key of the report's summary: passed, partial, expected_failures, skipped,
  cases, judged).
Timings and measurements of another machine (a GPU run, a past issue's study) carry no marker: the text
says where they come from.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
MARK = re.compile(r"<!-- figure: ([\w.!:/-]+) -->([0-9][0-9,]*)")
RUNS = ("torch_cpu", "tiny", "numpy")
# The README and the pages of docs/ its manual moved to (issue 37): every count of the current state in
# them is marked (tests/test_figures.py) and every code block run (tests/test_docs_examples.py).
MANUAL = ["README.md", "docs/index.md", "docs/check.md", "docs/verdicts.md", "docs/contracts.md",
          "docs/kernels.md", "docs/cases.md", "docs/distributed.md", "docs/reports.md", "docs/testing.md",
          "docs/reference.md", "docs/ops.md", "docs/derive.md", "docs/gpu_runs.md", "docs/layout.md"]
# Figures where a marker cannot go (inside a code block, or a file a script generates): (file, regex whose
# group 1 is the figure, figure name); each regex must match at least once.
PATTERNS = [
    ("docs/cases.md", r"--suite boundaries\s+# (\d+) cases", "suite.boundaries"),
    ("docs/distributed.md", r"--world-size 4\s+# (\d+) distributed cases", "distributed.cases"),
] + [("docs/pitfall_detection.md", rf"Golden set: `golden/` \(.*\b{op} (\d+)\b", f"golden.cases.{op}")
     for op in ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "norm_quant", "add_norm")]


def documents() -> list:
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def markers() -> list:
    """[(relative path, line number, name, value as written)] of every marked figure."""
    out = []
    for path in documents():
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in MARK.finditer(line):
                    out.append((os.path.relpath(path, ROOT), n, m.group(1), int(m.group(2).replace(",", ""))))
    return out


@functools.lru_cache(maxsize=None)
def _manifest():
    with open(os.path.join(GOLDEN, "MANIFEST.json"), encoding="utf-8") as f:
        return json.load(f)


def _judged_arrays(entry) -> int:
    return sum(1 for k in entry["arrays"] if k.startswith("step") and k.split(".")[1] in ("output", "grad", "state"))


def compute(name: str, runs: dict | None = None):
    """The value of figure ``name`` (module docstring); KeyError for an unknown name, LookupError for a
    run's figure when ``runs`` lacks that run."""
    cases = _manifest()["cases"]
    head, _, rest = name.partition(".")
    if head in RUNS:
        if not runs or head not in runs:
            raise LookupError(name)
        return runs[head][rest]
    if name == "golden.cases":
        return len(cases)
    if name == "golden.arrays":
        return sum(_judged_arrays(e) for e in cases)
    if name == "golden.ops":
        return len({e["case"]["op"] for e in cases})
    if name.startswith("golden.cases."):
        op = name[len("golden.cases."):]
        n = sum(e["case"]["op"] == op for e in cases)
        if not n:
            raise KeyError(name)
        return n
    if head == "suite":
        from refnorm.golden import generate
        return len(generate.suite(rest))
    if name == "distributed.cases":
        from refnorm.golden import distributed
        return len(distributed.cases(()))
    if head == "known":
        from refnorm.check.core import read_expected_failures
        lst, _, scope = rest.partition(".")
        path = os.path.join(ROOT, "known_failures", f"{lst}.txt")
        if not os.path.exists(path):
            raise KeyError(name)
        if scope:
            flag = scope.lstrip("!")
            return len(read_expected_failures(path, [] if scope.startswith("!") else [flag]))
        from refnorm.check.platform import NUMERIC_FLAGS
        return len(read_expected_failures(path, list(NUMERIC_FLAGS)) | read_expected_failures(path, []))
    raise KeyError(name)


def pattern_figures() -> list:
    """[(relative path, line number, name, value as written)] of the PATTERNS' figures; a pattern that
    matches nothing is an AssertionError (the text changed: update the pattern)."""
    out = []
    for rel, regex, name in PATTERNS:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            lines = f.read().splitlines()
        found = [(n, int(m.group(1))) for n, line in enumerate(lines, 1) for m in re.finditer(regex, line)]
        assert found, f"{rel}: the pattern {regex!r} of figure {name} matches nothing"
        out += [(rel, n, name, v) for n, v in found]
    return out


def mismatches(runs: dict | None = None, only: str | None = None) -> list:
    """The figures (markers and PATTERNS) whose text differs from their value: "file:line: <!-- figure:
    name -->written, but it is value". ``only``: figures of that run only (its name's prefix), else
    every figure not of a run."""
    out = []
    for path, n, name, written in markers() + pattern_figures():
        is_run = name.partition(".")[0] in RUNS
        if (only is None and is_run) or (only is not None and name.partition(".")[0] != only):
            continue
        value = compute(name, runs)
        if value != written:
            out.append(f"{path}:{n}: <!-- figure: {name} -->{written}, but it is {value}")
    return out
