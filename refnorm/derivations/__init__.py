"""Symbolic derivations of refnorm's backward passes (SymPy), proven and rendered.

One module per normalizer family; each exposes

    document() -> _render.Document          the steps, errata and links
    steps()    -> [(explanation, sympy Eq)] the steps in order
    prove(sizes=(2, 3, 4, 5), general=True) -> [claims checked]   (raises ProofError)
    check_numeric(rng=None) -> worst relative error vs refnorm.evaluate  (raises ProofError)
    render(fmt) -> str                       fmt: "text" | "markdown" | "latex"

``refnorm derive NAME`` prints one; ``refnorm derive --all --write`` regenerates derivations/*.md.
Nothing here imports torch.
"""
from __future__ import annotations

import importlib
import os

from ._proof import ProofError
from ._render import FORMATS

FAMILIES: tuple[str, ...] = (
    "batch_norm",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "weight_norm",
    "weight_standardization",
    "lp_normalize",
    "unified_norm",
    "offline",
)

__all__ = ["FAMILIES", "FORMATS", "ProofError", "expected_files", "get", "names", "readme", "render",
           "stale", "write", "write_all"]


def names() -> tuple[str, ...]:
    return FAMILIES


def get(name: str):
    """The derivation module of family ``name`` (KeyError naming the families otherwise)."""
    if name not in FAMILIES:
        raise KeyError(f"unknown derivation {name!r}; expected one of: {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def render(name: str, fmt: str = "text") -> str:
    return get(name).render(fmt)


def readme() -> str:
    """derivations/README.md: the index of the rendered derivations."""
    lines = ["# Derivations", "",
             "Each document derives one normalizer family's backward pass by the chain rule, one line of "
             "explanation per step, ending in the closed form that `refnorm/norms/` computes. Every formula is "
             "printed from the SymPy expression that `prove()` checks (for m = 2..5 and, with indexed sums, "
             "for general m), and `check_numeric()` compares the closed forms with `refnorm.evaluate`; "
             "`tests/test_derivations.py` runs both, so a derivation cannot go stale.", "",
             "| family | document | script |", "|---|---|---|"]
    for n in FAMILIES:
        doc = get(n).document()
        lines.append(f"| {n} | [{doc.title}]({n}.md) | [refnorm/derivations/{n}.py](../refnorm/derivations/{n}.py) |")
    lines += ["", "Print one in the terminal with `refnorm derive NAME` (`--format markdown|latex` for the other "
              "renderings); regenerate these files with `refnorm derive --all --write` from the repository root "
              "(`--dir DIR` to write elsewhere).", ""]
    return "\n".join(lines)


def expected_files() -> dict[str, str]:
    """file name -> content of every rendered document in derivations/ (README.md included)."""
    files = {f"{n}.md": render(n, "markdown") for n in FAMILIES}
    files["README.md"] = readme()
    return files


def write(files: dict[str, str], directory: str = "derivations") -> list[str]:
    """Write ``files`` (name -> text) into ``directory`` (created if missing), each through a rename."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for fname, text in files.items():
        path = os.path.join(directory, fname)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
        written.append(path)
    return written


def write_all(directory: str = "derivations") -> list[str]:
    """Regenerate every derivations/<name>.md and README.md; returns the paths written."""
    return write(expected_files(), directory)


def stale(directory: str = "derivations") -> list[str]:
    """The files of ``directory`` that are missing or differ from a fresh rendering."""
    out = []
    for fname, text in expected_files().items():
        path = os.path.join(directory, fname)
        try:
            with open(path, encoding="utf-8") as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        if not same:
            out.append(path)
    return out
