"""Documents of the derivations and their three renderings (Markdown for GitHub, LaTeX, terminal text).

A derivation module builds one ``Document``: sections of ``Step``s, each one line of explanation and
one SymPy equation. Every formula shown is printed from the very SymPy object that ``prove()`` checks,
so what a reader sees is what was proven. The printers only rename symbols (``Notation``) and list
positive terms before negative ones; they never change an expression.

Markdown output targets GitHub: one ``$$ ... $$`` block per formula (plain MathJax: \\frac, \\sum,
\\sqrt, \\hat, \\operatorname; no environments, no macros).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.stringpict import prettyForm

FORMATS = ("text", "markdown", "latex")


# --------------------------------------------------------------------------------------- notation
class Notation:
    """Display names: sympy symbol -> (LaTeX, text); indexed base -> templates with ``{i}``."""

    def __init__(self):
        self.latex: dict[sp.Basic, str] = {}
        self.text: dict[sp.Basic, str] = {}

    def copy(self) -> "Notation":
        n = Notation()
        n.latex, n.text = dict(self.latex), dict(self.text)
        return n

    def symbol(self, name: str, latex: str, text: str | None = None, **assumptions) -> sp.Symbol:
        s = sp.Symbol(name, **assumptions)
        self.latex[s], self.text[s] = latex, text or name
        return s

    def indexed(self, name: str, latex: str, text: str | None = None) -> sp.IndexedBase:
        """``latex``/``text`` are templates: ``r"\\hat{x}_{{{i}}}"`` -> \\hat{x}_{j} for index j."""
        b = sp.IndexedBase(name)
        self.latex[b.label], self.text[b.label] = latex, text or (name + "[{i}]")
        return b

    def grad(self, of, name: str):
        """∂ℓ/∂``of``, named ``name``: a symbol for a symbol, an indexed base for an indexed base (then
        ∂ℓ/∂of_i, per index), printed as ``of`` is in this notation with ∂ℓ/∂ before it."""
        key = of.label if isinstance(of, sp.IndexedBase) else of
        if isinstance(of, sp.IndexedBase):
            return self.indexed(name, r"\frac{{\partial \ell}}{{\partial " + self.latex[key] + "}}",
                                "∂ℓ/∂" + self.text[key])
        return self.symbol(name, r"\frac{\partial \ell}{\partial " + self.latex[key] + "}", "∂ℓ/∂" + self.text[key])


def _positive_first(terms):
    """Positive terms first; a bare ε last among them (σ² + ε, as the papers write it)."""
    return sorted(terms, key=lambda t: (t.could_extract_minus_sign(), t.is_Symbol and t.name == "eps"))


class _Latex(LatexPrinter):
    def __init__(self, notation: Notation):
        super().__init__({"order": "none", "long_frac_ratio": 1})
        self._n = notation

    def _as_ordered_terms(self, expr, order=None):
        return _positive_first(super()._as_ordered_terms(expr, order=order))

    def _print_Symbol(self, expr, style="plain"):
        return self._n.latex.get(expr) or super()._print_Symbol(expr, style)

    def _print_Sum(self, expr):
        """Nested single sums instead of one \\sum with \\substack limits (plainer MathJax)."""
        if len(expr.limits) == 1:
            return super()._print_Sum(expr)
        tex = "".join(r"\sum_{%s=%s}^{%s} " % tuple(self._print(t) for t in lim) for lim in reversed(expr.limits))
        body = self._print(expr.function)
        return tex + (r"\left(%s\right)" % body if isinstance(expr.function, sp.Add) else body)

    def _print_Indexed(self, expr):
        tpl = self._n.latex.get(expr.base.label)
        if tpl is None:
            return super()._print_Indexed(expr)
        return tpl.format(i=",".join(self._print(i) for i in expr.indices))


class _Pretty(PrettyPrinter):
    def __init__(self, notation: Notation):
        super().__init__({"order": "none", "use_unicode": True, "wrap_line": False})
        self._n = notation

    def _as_ordered_terms(self, expr, order=None):
        return _positive_first(super()._as_ordered_terms(expr, order=order))

    def _print_Symbol(self, e, bold_name=False):
        t = self._n.text.get(e)
        return prettyForm(t) if t is not None else super()._print_Symbol(e, bold_name)

    def _print_Indexed(self, e):
        tpl = self._n.text.get(e.base.label)
        if tpl is None:
            return super()._print_Indexed(e)
        return prettyForm(tpl.format(i=",".join(sp.sstr(i) for i in e.indices)))


def latex(expr, notation: Notation) -> str:
    return expr if isinstance(expr, str) else _Latex(notation).doprint(expr)


def pretty(expr, notation: Notation) -> str:
    return expr if isinstance(expr, str) else _Pretty(notation).doprint(expr)


# --------------------------------------------------------------------------------------- document
@dataclass(frozen=True)
class Step:
    """One line of explanation and the equation it introduces (a SymPy ``Eq`` or expression).

    Terms of a sum print positive ones first, otherwise in the order of the expression's args: build
    an Add with ``evaluate=False`` to choose the order (it is still the same expression for proofs)."""
    text: str
    eq: sp.Basic
    key: str = ""          # names the claim in prove()'s report ("" for a definition)


@dataclass(frozen=True)
class Erratum:
    """A formula of a seed document that is wrong, what is right, and why."""
    where: str             # which step of the seed
    seed: str              # the seed's formula, quoted (LaTeX)
    fix: sp.Basic | str    # the correct formula (SymPy, proven in prove(); or LaTeX for a notation slip)
    why: str


@dataclass(frozen=True)
class Section:
    title: str
    steps: tuple = ()      # of Step, or str (a paragraph)


@dataclass(frozen=True)
class Document:
    name: str
    title: str
    notation: Notation
    intro: tuple[str, ...]
    sections: tuple[Section, ...]
    errata_source: str = ""
    errata: tuple[Erratum, ...] = ()
    checks: tuple[str, ...] = ()          # what prove() and check_numeric() verify, one line each
    links: tuple[tuple[str, str], ...] = field(default=())   # (label, relative path from derivations/)

    def steps(self) -> list[tuple[str, sp.Basic]]:
        return [(s.text, s.eq) for sec in self.sections for s in sec.steps if isinstance(s, Step)]


def render(doc: Document, fmt: str = "text") -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return {"text": _text, "markdown": _markdown, "latex": _latex_doc}[fmt](doc)


def navigation(code: str, previous: str | None = None, following: str | None = None) -> tuple:
    """A family document's ``links``: the index, the previous document, the fast path's code
    (refnorm/norms/<code>.py) and the next document, as (label, path from derivations/)."""
    out = [("index", "README.md")]
    if previous:
        out.append((f"previous: {previous}", f"{previous}.md"))
    out.append((f"code: refnorm/norms/{code}.py", f"../refnorm/norms/{code}.py"))
    if following:
        out.append((f"next: {following}", f"{following}.md"))
    return tuple(out)


def spec_ref(name: str) -> str:
    """How a document's ``checks`` name what ``check_numeric()`` compares against: the specification of
    normalizer ``name`` (refnorm/specs/<name>.py), run by ``refnorm.evaluate(..., engine='spec')``."""
    return f"`refnorm.evaluate('{name}', ..., engine='spec')` (the specification, refnorm/specs/{name}.py)"


def family_functions(document):
    """``steps()`` and ``render(fmt)`` of a family module (refnorm/derivations/__init__.py), both read from
    its ``document()``: ``steps, render = family_functions(document)``."""
    def steps() -> list[tuple[str, sp.Basic]]:
        return document().steps()

    def render_document(fmt: str = "text") -> str:
        return render(document(), fmt)
    return steps, render_document


def markdown_sections(doc: Document, titles=None, level: int = 2) -> list[str]:
    """Markdown lines of the sections of ``doc`` whose title is in ``titles`` (all when None), each under a
    heading of ``level``; the steps keep the numbers they have in the whole document."""
    n = doc.notation
    out: list[str] = []
    k = 0
    for sec in doc.sections:
        shown = titles is None or sec.title in titles
        if shown:
            out += [f"{'#' * level} {sec.title}", ""]
        for s in sec.steps:
            if isinstance(s, str):
                out += [s, ""] if shown else []
                continue
            k += 1
            if shown:
                out += [f"**{k}.** {s.text}", "", "$$", latex(s.eq, n), "$$", ""]
    return out


def markdown_errata(doc: Document) -> list[str]:
    """Markdown lines of the errata of ``doc``: a bullet each, the seed's formula and the proven one."""
    out: list[str] = []
    for e in doc.errata:
        out += [f"- **{e.where}.** The seed writes", "", "  $$", "  " + e.seed, "  $$", "",
                "  but correct is", "", "  $$", "  " + latex(e.fix, doc.notation), "  $$", "", f"  {e.why}", ""]
    return out


def _markdown(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    links = " · ".join(f"[{label}]({path})" for label, path in doc.links)
    out += [links, "", *doc.intro, ""]
    out += markdown_sections(doc)
    if doc.errata:
        out += [f"## Errata: {doc.errata_source}", ""]
        out += markdown_errata(doc)
    if doc.checks:
        out += ["## What is checked", ""]
        out += [f"- {c}" for c in doc.checks]
        out += [""]
    out += [f"<sub>Generated by `refnorm derive {doc.name} --format markdown` from "
            f"[refnorm/derivations/{doc.name}.py](../refnorm/derivations/{doc.name}.py); do not edit.</sub>", ""]
    return "\n".join(out)


def _strip_md(s: str) -> str:
    """Inline Markdown -> plain text for the terminal (links keep their text; $, ** and ` are dropped)."""
    return _LINK.sub(r"\1", s).replace("**", "").replace("`", "").replace("$", "")


def _text(doc: Document) -> str:
    n = doc.notation
    out = [doc.title, "=" * len(doc.title), ""]
    out += [_strip_md(line) for line in doc.intro] + [""]
    k = 0
    for sec in doc.sections:
        out += [sec.title, "-" * len(sec.title), ""]
        for s in sec.steps:
            if isinstance(s, str):
                out += [_strip_md(s), ""]
                continue
            k += 1
            out += [f"{k}. {_strip_md(s.text)}", ""]
            out += ["    " + line.rstrip() for line in pretty(s.eq, n).splitlines()] + [""]
    if doc.errata:
        title = f"Errata: {_strip_md(doc.errata_source)}"
        out += [title, "-" * len(title), ""]
        for e in doc.errata:
            out += [f"* {e.where}. The seed writes (LaTeX):", "", "    " + e.seed, "", "  but correct is", ""]
            out += ["    " + line.rstrip() for line in pretty(e.fix, n).splitlines()]
            out += ["", "  " + _strip_md(e.why), ""]
    if doc.checks:
        out += ["What is checked", "---------------", ""] + [f"* {_strip_md(c)}" for c in doc.checks] + [""]
    return "\n".join(out)


_TEX_CHARS = {
    "∂": r"\partial", "ℓ": r"\ell", "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "ε": r"\varepsilon",
    "μ": r"\mu", "ν": r"\nu", "ρ": r"\rho", "σ": r"\sigma", "ψ": r"\psi", "Σ": r"\Sigma", "²": "^2",
    "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "−": "-", "·": r"\cdot", "√": r"\surd", "‖": r"\|",
    "→": r"\to", "…": r"\ldots", "⋆": r"\star", "Ŵ": r"\hat{W}", "§": r"\S",
    "Γ": r"\Gamma", "Λ": r"\Lambda", "Θ": r"\Theta", "ζ": r"\zeta",
    "δ": r"\delta", "∞": r"\infty", "ŷ": r"\hat{y}", "ᵀ": r"^{\top}", "⌊": r"\lfloor", "⌋": r"\rfloor",
    "₁": "_1", "₂": "_2", "Δ": r"\Delta", "η": r"\eta",
}
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def _tex_unicode(p: str) -> str:
    """Unicode math in running text -> \\ensuremath{...}, so the LaTeX output is plain ASCII."""
    p = re.sub("(.)\u0302", lambda mo: r"\ensuremath{\hat{" + mo.group(1) + "}}", p)
    p = re.sub("(.)\u0303", lambda mo: r"\ensuremath{\tilde{" + mo.group(1) + "}}", p)
    p = p.replace("–", "--")
    return "".join(r"\ensuremath{" + _TEX_CHARS[c] + "}" if c in _TEX_CHARS else c for c in p)


def _tex_escape_text(s: str) -> str:
    """Markdown-ish inline text -> LaTeX text: keep $...$, turn `code` into \\texttt, **b** into bold."""
    parts = _LINK.sub(r"\1", s).split("$")
    for i in range(0, len(parts), 2):       # outside math
        p = parts[i]
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("#", r"\#"), ("_", r"\_")):
            p = p.replace(a, b)
        chunks = p.split("`")
        p = "".join(c if j % 2 == 0 else r"\texttt{" + c + "}" for j, c in enumerate(chunks))
        chunks = p.split("**")
        p = "".join(c if j % 2 == 0 else r"\textbf{" + c + "}" for j, c in enumerate(chunks))
        parts[i] = _tex_unicode(p)
    return "$".join(parts)


def _latex_doc(doc: Document) -> str:
    n = doc.notation
    out = [r"\documentclass{article}", r"\usepackage{amsmath,amssymb}", r"\begin{document}",
           r"\section*{" + _tex_escape_text(doc.title) + "}", ""]
    out += [_tex_escape_text(line) for line in doc.intro] + [""]
    k = 0
    for sec in doc.sections:       # one numbering across sections, as in the Markdown
        out += [r"\subsection*{" + _tex_escape_text(sec.title) + "}", r"\begin{enumerate}",
                r"\setcounter{enumi}{%d}" % k]
        for s in sec.steps:
            if isinstance(s, str):
                out += [r"\item[] " + _tex_escape_text(s)]
                continue
            k += 1
            out += [r"\item " + _tex_escape_text(s.text), r"\[", latex(s.eq, n), r"\]"]
        out += [r"\end{enumerate}", ""]
    if doc.errata:
        out += [r"\subsection*{Errata: " + _tex_escape_text(doc.errata_source) + "}", r"\begin{itemize}"]
        for e in doc.errata:
            out += [r"\item \textbf{" + _tex_escape_text(e.where) + r".} The seed writes \[" + e.seed + r"\]",
                    r"but correct is \[" + latex(e.fix, n) + r"\]", _tex_escape_text(e.why)]
        out += [r"\end{itemize}", ""]
    if doc.checks:
        out += [r"\subsection*{What is checked}", r"\begin{itemize}"]
        out += [r"\item " + _tex_escape_text(c) for c in doc.checks]
        out += [r"\end{itemize}", ""]
    out += [r"\end{document}", ""]
    return "\n".join(out)
