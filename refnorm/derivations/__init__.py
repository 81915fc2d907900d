"""Symbolic derivations of refnorm's backward passes (SymPy), proven and rendered.

One module per normalizer family; each exposes

    document() -> _render.Document          the steps, errata and links
    steps()    -> [(explanation, sympy Eq)] the steps in order
    prove(sizes=(2, 3, 4, 5), general=True) -> [claims checked]   (raises ProofError)
    check_numeric(rng=None) -> worst relative error vs the specification, refnorm.evaluate(..., engine="spec")  (raises ProofError)
    render(fmt) -> str                       fmt: "text" | "markdown" | "latex"

A family module declares its notation as a copy of ``_symbols.ROW`` (the symbols every family shares:
x, x̂, y, the gradients, μ, σ², ε, the indices) or of the family it builds on, and adds its own;
``_render`` holds the document's pieces, ``_proof`` the proof and numeric-check machinery.

``refnorm derive NAME`` prints one; ``refnorm derive --all --write`` regenerates derivations/*.md.
A normalizer derived inside another family's document is an alias (``ALIASES``: instance_norm is
group_norm with one channel per group); ``resolve`` maps every name ``refnorm derive`` accepts to its
family. ``default_directory()`` is the checkout's derivations/ (None in an installed wheel, which has
none), wherever the command runs from. Nothing here imports torch.
"""
from __future__ import annotations

import dataclasses
import importlib
import os

from ._proof import ProofError
from ._render import FORMATS, markdown_errata, markdown_sections, render as _render_doc

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
    "min_max_scale",
    "z_score",
    "mean_variance_norm",
    "local_response_norm",
    "norm_quant",
    "add_norm",
    "gated_norm",
    "dyt",
    "poly_norm",
    "group_norm_silu",
)

# normalizer -> (the family whose document derives it, the line printed above that document)
ALIASES: dict[str, tuple[str, str]] = {
    "instance_norm": ("group_norm", "`instance_norm` is `group_norm` with one channel per group (G = C, so "
                      "K = 1 below): its derivation is this one, whose last section is that case."),
    "offline_batch_norm": ("offline", "`offline_batch_norm` is derived in the offline framework's document "
                           "below (its forward and backward are the framework's)."),
    "batch_renorm": ("offline", "`batch_renorm` (Batch Renormalization) is derived in the offline framework's "
                     "document below, in its section on Batch Renormalization."),
    "power_norm": ("offline", "`power_norm` (PowerNorm) is derived in the offline framework's document below, "
                   "in its section on PowerNorm."),
    "adaptive_layer_norm": ("add_norm", "`adaptive_layer_norm` (adaLN) is derived in the fused-kernels document "
                            "below, in its section on adaptive LayerNorm."),
    "norm_quant_block": ("norm_quant", "`norm_quant_block` (block-scaled quantized outputs) is derived in the "
                         "quantized-output document below, in its section on block scales."),
}

__all__ = ["ALIASES", "FAMILIES", "FORMATS", "ProofError", "default_directory", "document", "expected_directory",
           "expected_files", "get", "names", "readme", "render", "resolve", "stale", "write", "write_all"]


def names() -> tuple[str, ...]:
    """The families, one rendered document each (derivations/<name>.md)."""
    return FAMILIES


def resolve(name: str) -> tuple[str, str | None]:
    """(family, note): the family whose document derives ``name`` and, for an alias, the line saying so.

    KeyError for a name without a derivation, listing the names that have one."""
    if name in FAMILIES:
        return name, None
    if name in ALIASES:
        return ALIASES[name]
    known = ", ".join(FAMILIES)
    aliases = ", ".join(f"{a} (in {f})" for a, (f, _) in ALIASES.items())
    raise KeyError(f"unknown derivation {name!r}; expected one of: {known}; or a normalizer derived in one of "
                   f"them: {aliases}")


def get(name: str):
    """The derivation module of family ``name`` (an alias gives its family's module; KeyError otherwise)."""
    family, _ = resolve(name)
    return importlib.import_module(f"{__name__}.{family}")


def document(name: str):
    """The ``_render.Document`` of ``name``; for an alias, its family's with the alias's line first."""
    family, note = resolve(name)
    doc = get(family).document()
    return doc if note is None else dataclasses.replace(doc, intro=(note, "", *doc.intro))


def render(name: str, fmt: str = "text") -> str:
    return _render_doc(document(name), fmt)


def readme() -> str:
    """derivations/README.md: BatchNorm's chain rule and the errata of the seed's formulas (printed from the
    same SymPy objects as batch_norm.md and the families' errata sections), then the index."""
    bn = get("batch_norm").document()
    lines = ["# Derivations", "",
             "Read the definition first: every normalizer's specification, [refnorm/specs/](../refnorm/specs/) "
             "(`<name>.py`: plain whole-array NumPy, one step a line with its shape; `refnorm.evaluate(..., "
             "engine=\"spec\")` runs it). The derivations below are proven against those specifications, and the "
             "fast path (refnorm/norms/) is tested against them.", "",
             "BatchNorm's backward by the chain rule, the errata of the seed's formulas, then the index of every "
             "derivation.", "",
             "## BatchNorm's chain rule", "",
             f"From [{bn.title}](batch_norm.md), whose step numbers these are; there also eval mode and what "
             "is checked. One channel of m values x_1..x_m.", ""]
    lines += markdown_sections(bn, [s.title for s in bn.sections[:3]], level=3)
    lines += ["## Errata of the seed's formulas", "",
              "What the seeds got wrong, against what is proven (each family's document repeats its own).", ""]
    for n in FAMILIES:
        doc = get(n).document()
        if doc.errata:
            lines += [f"### {doc.title.split(':')[0]}: {doc.errata_source} ([{n}.md]({n}.md))", ""]
            lines += markdown_errata(doc)
    lines += ["## Index", "",
              "Each document derives one normalizer family's backward pass by the chain rule, one line of "
              "explanation per step, ending in the closed form that `refnorm/norms/` computes. Every formula is "
              "printed from the SymPy expression that `prove()` checks (for m = 2..5 and, with indexed sums, "
              "for general m), and `check_numeric()` compares the closed forms with `refnorm.evaluate(..., engine='spec')`, the specification (refnorm/specs/); "
              "`tests/test_derivations.py` runs both, so a derivation cannot go stale.", "",
              "| family | document | script |", "|---|---|---|"]
    for n in FAMILIES:
        doc = get(n).document()
        lines.append(f"| {n} | [{doc.title}]({n}.md) | [refnorm/derivations/{n}.py](../refnorm/derivations/{n}.py) |")
    derived_in = "; ".join(f"`{a}` in [{f}]({f}.md)" for a, (f, _) in ALIASES.items())
    lines += ["", f"Derived inside another family's document: {derived_in}.", "",
              "Print one in the terminal with `refnorm derive NAME` (`--format markdown|latex` for the other "
              "renderings; NAME may also be one of the normalizers just listed); regenerate these files with "
              "`refnorm derive --all --write` (it finds this directory from the refnorm package of a checkout, "
              "wherever it runs; `--dir DIR` to write elsewhere).", ""]
    return "\n".join(lines)


def expected_directory() -> str:
    """Where the rendered derivations live when refnorm runs from a source checkout: derivations/ beside
    the refnorm package (found from this file, not from the current directory)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "derivations")


def default_directory() -> str | None:
    """``expected_directory()`` when refnorm runs from a source checkout (a pyproject.toml beside the package
    and the directory present); None otherwise: an installed wheel has no derivations/."""
    path = expected_directory()
    root = os.path.dirname(path)
    return path if os.path.isfile(os.path.join(root, "pyproject.toml")) and os.path.isdir(path) else None


def _directory(directory: str | None) -> str:
    if directory is not None:
        return directory
    found = default_directory()
    if found is None:
        raise FileNotFoundError(f"no derivations/ directory at {expected_directory()}: refnorm is not run from a "
                                "source checkout (an installed wheel carries no rendered derivations); name a "
                                "directory")
    return found


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


def write_all(directory: str | None = None) -> list[str]:
    """Regenerate every derivations/<name>.md and README.md (default: ``default_directory()``); returns the
    paths written."""
    return write(expected_files(), _directory(directory))


def stale(directory: str | None = None) -> list[str]:
    """The files of ``directory`` (default: ``default_directory()``) that are missing or differ from a fresh
    rendering."""
    directory = _directory(directory)
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
