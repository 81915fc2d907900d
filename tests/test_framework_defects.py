"""docs/framework_defects.md: every reproduction on the page runs and still shows its defect.

Each ```python block of the page is a plain reproduction in the framework alone that asserts the defect;
a block whose framework is not installed is skipped, saying which. When a framework release fixes a
defect, its block's assertion fails here: remove the entry from the page and from known_failures/."""
from __future__ import annotations

import ast
import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "framework_defects.md")


def _blocks():
    text = Path(PAGE).read_text(encoding="utf-8")
    out, heading = [], None
    for m in re.finditer(r"^(#{2,3} [^\n]+)$|^```python\n(.*?)^```", text, re.M | re.S):
        if m.group(1):
            heading = m.group(1).lstrip("# ").strip()
        else:
            out.append(pytest.param(m.group(2), id=re.sub(r"\W+", "_", heading or "block")[:60]))
    return out


def _needs(code):
    mods = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module.split(".")[0])
    return sorted(mods & {"torch", "jax", "onnx", "onnxruntime"})


@pytest.mark.parametrize("code", _blocks())
def test_the_reproduction_still_shows_the_defect(code):
    missing = [m for m in _needs(code) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    exec(compile(code, PAGE, "exec"), {"__name__": "framework_defects"})


def test_the_page_has_a_reproduction_per_framework():
    needs = {m for p in _blocks() for m in _needs(p.values[0])}
    assert {"torch", "jax", "onnxruntime"} <= needs, needs
