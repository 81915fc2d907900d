"""Issue 34, item 14: every count in README.md and docs/*.md that describes the current golden set or a
check of it is computed here and compared with the text (tests/figures.py: the markers, the patterns and
how each figure is computed). The torch-cpu figures are checked by tests/test_check_torch.py with the
report of the full check it already runs; the rest here, from the manifest and two cheap checks."""
from __future__ import annotations

import os
import re

import pytest

import figures as F
from refnorm.check.core import run_check

ROOT = F.ROOT


@pytest.fixture(scope="module")
def runs():
    """The numpy (the reference: ~8 s) and tiny-backend (~2 s) checks of the golden set, as figures."""
    from examples.tiny_backend import TinyBackend
    from refnorm.check.backends.numpy_backend import NumpyBackend
    out = {}
    for name, backend in (("numpy", NumpyBackend()), ("tiny", TinyBackend())):
        rep = run_check(backend, F.GOLDEN)
        out[name] = {**rep.summary(), "headroom_rows": len(rep.headroom()),
                     "headroom_all_exact": all(r["headroom"] == "exact" for r in rep.headroom())}
    return out


def test_every_marker_names_a_figure_that_can_be_computed():
    found = F.markers()
    assert len(found) >= 10, found
    for path, n, name, _ in found + F.pattern_figures():
        try:
            F.compute(name, {r: {} for r in F.RUNS})
        except KeyError as e:                   # LookupError's subclass: the name or the run's key is unknown
            if name.partition(".")[0] not in F.RUNS:
                pytest.fail(f"{path}:{n}: unknown figure {name!r} ({e})")


def test_the_figures_of_the_manifest_suites_and_lists_match_the_text():
    assert F.mismatches() == []


def test_the_figures_of_the_numpy_and_tiny_checks_match_the_text(runs):
    assert runs["numpy"]["failed"] == runs["numpy"]["errors"] == 0          # the reference: no alarm
    assert runs["numpy"]["headroom_all_exact"]                             # docs/tolerances.md section 9
    for name in ("numpy", "tiny"):
        assert F.mismatches(runs, only=name) == []
    names = {name for _, _, name, _ in F.markers()}
    assert {"tiny.passed", "tiny.partial", "numpy.passed"} <= names


def test_a_stale_figure_is_reported_with_its_place(tmp_path, monkeypatch):
    doc = tmp_path / "README.md"
    doc.write_text("golden/: <!-- figure: golden.cases -->698 cases\n")
    monkeypatch.setattr(F, "documents", lambda: [str(doc)])
    monkeypatch.setattr(F, "PATTERNS", [])
    monkeypatch.setattr(F, "ROOT", str(tmp_path))
    assert F.mismatches() == [f"README.md:1: <!-- figure: golden.cases -->698, but it is {F.compute('golden.cases')}"]


# the current-state counts of the README and the pages its manual moved to (F.MANUAL): a number of cases,
# passes or partial cases in running text
COUNT = re.compile(r"(?<![\w.>-])(\d[\d,]*) (?:golden )?(?:cases?|passed|pass|partial|expected failures|skipped)\b")
NOT_A_FIGURE = {          # (line text fragment): why the count there needs no marker
    "(34 passed, 3": "the CUDA production suite: a GPU run, with its date and device in the paragraph above",
    "--suite boundaries ": "a code block: PATTERNS checks it",
    "--world-size 4 ": "a code block: PATTERNS checks it",
    "(with 23 cases, at load average": "docs/distributed.md: a timing of an earlier, smaller set of cases",
}


@pytest.mark.parametrize("page", F.MANUAL)
def test_every_count_in_the_manual_is_marked_or_says_where_it_comes_from(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read().splitlines()
    bad = []
    for n, line in enumerate(text, 1):
        for m in COUNT.finditer(line):
            marked = line[:m.start()].endswith("-->")
            if not marked and not any(frag in line for frag in NOT_A_FIGURE):
                bad.append(f"{page}:{n}: {line.strip()}")
    assert bad == [], "\n".join(bad)


def test_no_marker_begins_a_line():
    """A line beginning with an HTML comment starts an HTML block in CommonMark: the rest of the line
    would not render as Markdown."""
    for path in F.documents():
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines, 1):
            assert not line.lstrip().startswith("<!-- figure:"), f"{path}:{n}"
