"""Issue 37, item 1: the documentation site (mkdocs.yml, docs/, the derivations) builds with warnings as
errors, so a broken link, a missing page or a missing anchor fails the suite; and the build really fails
on each of those (negative controls on a copy of the site). mkdocs and mkdocs-material come with the
`test` extra, which .ci/run installs.
"""
from __future__ import annotations

import os
import shutil
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e \".[test]\"")
pytest.importorskip("material", reason="mkdocs-material is not installed: pip install -e \".[test]\"")


def build(root, site_dir):
    """mkdocs build --strict of the site whose mkdocs.yml is in ``root``; raises on any warning."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config
    cfg = load_config(os.path.join(root, "mkdocs.yml"), strict=True, site_dir=str(site_dir))
    assert cfg.strict is True
    mkdocs_build(cfg)


def _copy(tmp_path):
    """A copy of the site's sources to break: docs/ copied, what its links point into linked."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("mkdocs.yml", "mkdocs_hooks.py"):
        shutil.copy(os.path.join(ROOT, name), repo / name)
    shutil.copytree(os.path.join(ROOT, "docs"), repo / "docs")
    for name in os.listdir(ROOT):
        if name not in ("docs", "mkdocs.yml", "mkdocs_hooks.py", "site") and not name.startswith("."):
            os.symlink(os.path.join(ROOT, name), repo / name)
    return repo


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    t0 = time.perf_counter()
    build(ROOT, tmp_path / "site")
    took = time.perf_counter() - t0
    site = tmp_path / "site"
    for page in ("index.html", "check.html", "verdicts.html", "contracts.html", "cases.html", "distributed.html",
                 "reports.html", "reference.html", "derive.html", "framework_defects.html",
                 "derivations/index.html", "derivations/layer_norm.html"):
        assert (site / page).is_file(), page
    # every page of docs/ is in the site (a page missing from the nav is appended to "More pages")
    for name in os.listdir(os.path.join(ROOT, "docs")):
        if name.endswith(".md"):
            assert (site / (name[:-3] + ".html")).is_file(), name
    # a link to a source file outside docs/ became its path; a link to a derivation, that page
    html = (site / "distributed.html").read_text(encoding="utf-8")
    assert "<code>refnorm/check/distributed.py</code>" in html and 'href="derivations/distributed.html"' in html
    assert took < 60, f"the site took {took:.1f} s to build"


BROKEN = {"no_such_page.md": "a link to a missing page",
          "../refnorm/no_such_module.py": "a link to a missing file outside docs/",
          "check.md#no-such-section": "a link to a missing anchor"}


def test_the_build_fails_on_each_broken_link_and_keeps_a_page_missing_from_the_nav(tmp_path, caplog):
    """One build of a copy (a build takes seconds): each broken link is a warning naming it, so the strict
    build aborts; a page the nav does not list is built and linked from the others (under "More pages")."""
    import logging

    from mkdocs.exceptions import Abort
    repo = _copy(tmp_path)
    with open(repo / "docs" / "verdicts.md", "a", encoding="utf-8") as f:
        f.write("\n" + "\n".join(f"See [{why}]({target})." for target, why in BROKEN.items()) + "\n")
    (repo / "docs" / "new_op.md").write_text("# A new op\n\nSee [the verdicts](verdicts.md).\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="mkdocs"), pytest.raises(Abort, match="3 warnings"):
        build(repo, tmp_path / "site")
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    for target in BROKEN:
        name = target.split("#")[-1] if "#" in target else target
        assert any(name in w and "verdicts.md" in w for w in warned), (target, warned)
    assert (tmp_path / "site" / "new_op.html").is_file()
    assert 'href="new_op.html"' in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def test_the_hook_rewrites_links_out_of_docs_and_leaves_code_alone():
    import importlib.util
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", os.path.join(ROOT, "mkdocs_hooks.py"))
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    docs = os.path.join(ROOT, "docs")
    md = ("[the runner](../refnorm/check/distributed.py), [`refnorm/specs/`](../refnorm/specs/), "
          "[merge](../derivations/distributed.md#merge), [pitfalls](pitfalls.md), [x](https://example.org), "
          "[none](../no_such_file.py), `[code](../refnorm/fold.py)`\n"
          "```\n[fenced](../refnorm/fold.py)\n```\n")
    out = hooks.rewrite_links(md, os.path.join(docs, "distributed.md"), "distributed.md", ROOT, docs)
    assert out == ("the runner (`refnorm/check/distributed.py`), `refnorm/specs/`, "
                   "[merge](derivations/distributed.md#merge), [pitfalls](pitfalls.md), [x](https://example.org), "
                   "[none](../no_such_file.py), `[code](../refnorm/fold.py)`\n"
                   "```\n[fenced](../refnorm/fold.py)\n```\n")
    # from a derivation (shown as derivations/NAME.md): siblings stay, docs/ pages and the README are reached
    der = os.path.join(ROOT, "derivations", "layer_norm.md")
    out = hooks.rewrite_links("[bn](batch_norm.md) [tol](../docs/tolerances.md) [readme](../README.md)", der,
                              "derivations/layer_norm.md", ROOT, docs)
    assert out == "[bn](batch_norm.md) [tol](../tolerances.md) [readme](../readme.md)"
