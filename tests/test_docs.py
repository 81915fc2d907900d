"""The documentation stands alone and stays in step with the code.

* docs/pitfalls.md lists every pitfall id the code uses (refnorm/, tests/planted/, the golden case table,
  known_failures/, the other docs), its catalogue rows are exactly the rows tests/planted/pitfalls.py
  classifies, and its generated "what covers each id" table equals what tests/planted/catalogue.py
  renders from the code today;
* no file of the repository points at documents outside it (the planning notes the project was built
  from are not shipped: everything refnorm cites is in docs/);
* every relative Markdown link of README.md, docs/*.md and derivations/*.md resolves to a file of the
  repository.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest

from planted import catalogue
from planted.pitfalls import ALL_ROWS, SUPPLEMENTARY

ROOT = catalogue.ROOT
_ID = re.compile(r"\b[A-H]\d\d\b")


def _doc():
    return Path(catalogue.DOC).read_text()


def test_pitfalls_doc_coverage_table_is_current():
    assert catalogue.current(_doc()) == catalogue.render(), \
        "the code changed: run `python tests/planted/catalogue.py` to regenerate docs/pitfalls.md section 3"


def test_pitfalls_doc_catalogue_rows_are_the_classified_rows():
    head = _doc().split(catalogue.BEGIN)[0]
    rows = re.findall(r"^\| ([A-H]\d\d) \|", head, re.M)
    assert rows == list(ALL_ROWS)
    supplementary = re.findall(r"^\| (R-\w+) \|", head, re.M)
    assert supplementary == list(dict.fromkeys(p.pitfall_id for p in SUPPLEMENTARY))


def _files_citing_ids():
    pats = ["refnorm/**/*.py", "tests/planted/*.py", "tests/*.py", "known_failures/*.txt", "docs/*.md",
            "derivations/*.md", "README.md"]
    for pat in pats:
        for path in glob.glob(os.path.join(ROOT, pat), recursive=True):
            if os.path.abspath(path) != os.path.abspath(catalogue.DOC):
                yield path


def test_every_pitfall_id_used_in_the_repository_is_in_docs_pitfalls():
    doc = _doc().split(catalogue.BEGIN)[0]
    documented = set(_ID.findall(doc))
    missing = {}
    for path in _files_citing_ids():
        for i in set(_ID.findall(Path(path).read_text(encoding="utf-8"))) - documented:
            missing.setdefault(i, []).append(os.path.relpath(path, ROOT))
    assert not missing, f"pitfall ids used but not described in docs/pitfalls.md: {missing}"
    r_ids = {p.pitfall_id for p in SUPPLEMENTARY}
    assert all(f"| {i} |" in doc for i in r_ids)


# the planning notes (a sibling directory of the checkout and its four files), spelled in pieces so that
# this file does not match itself
FORBIDDEN = ["../" + "shared", "/work/" + "shared", "PITFALLS" + ".md", "UN_SEMANTICS" + ".md",
             "CONVENTIONS" + ".md", "TOLERANCE_RESEARCH" + ".md"]


def _repository_files():
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        files = out.split()
    except (OSError, subprocess.CalledProcessError):     # not a git checkout (an unpacked sdist)
        files = [os.path.relpath(os.path.join(d, f), ROOT) for d, ds, fs in os.walk(ROOT)
                 for f in fs if not any(p.startswith(".") for p in os.path.relpath(d, ROOT).split(os.sep))
                 and "egg-info" not in d and "__pycache__" not in d]
    return [f for f in files if not f.endswith(".npz") and os.path.isfile(os.path.join(ROOT, f))]


def test_no_file_points_at_documents_outside_the_repository():
    found = []
    for f in _repository_files():
        text = Path(os.path.join(ROOT, f)).read_bytes().decode("utf-8", "replace")
        found += [(f, s) for s in FORBIDDEN if s in text]
    assert not found, found


_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _markdown_files():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) \
        + sorted(glob.glob(os.path.join(ROOT, "derivations", "*.md")))


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_markdown_links_resolve(path):
    text = _FENCE.sub("", Path(path).read_text(encoding="utf-8"))
    bad = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):   # http:, mailto:, anchors
            continue
        rel = target.split("#")[0]
        full = os.path.normpath(os.path.join(os.path.dirname(path), rel))
        if not (full + os.sep).startswith(ROOT + os.sep) and full != ROOT or not os.path.exists(full):
            bad.append(target)
    assert not bad, f"{os.path.relpath(path, ROOT)}: links to nothing in the repository: {bad}"
