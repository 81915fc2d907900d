"""derivations: every proof and numeric check runs, the rendered documents are current, the CLI works.

The symbolic proofs (refnorm/derivations/<family>.py ``prove()``) cover m = 2..5 and general m; the
numeric checks compare the closed forms with refnorm.evaluate at 1e-12 relative (inputs of order 1,
closed forms and refnorm both in float64: observed errors are a few 1e-16).
"""
import importlib.util
import os
import re
import subprocess
import sys

import pytest
import sympy as sp

from refnorm import cli, derivations
from refnorm.derivations import _proof

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "derivations")
REGENERATE = "refnorm derive --all --write"

# the normalizer modules each family's numeric check calls through refnorm.evaluate
NORMALIZERS = {
    "batch_norm": ["batch_norm"], "layer_norm": ["layer_norm"], "rms_norm": ["rms_norm"],
    "group_norm": ["group_norm", "instance_norm"], "weight_norm": ["weight_norm"],
    "weight_standardization": ["weight_standardization"], "lp_normalize": ["lp_normalize"],
    "unified_norm": ["unified_norm"],
    "offline": ["offline_batch_norm", "batch_renorm", "power_norm"],
    "min_max_scale": ["min_max_scale"], "z_score": ["z_score"], "mean_variance_norm": ["mean_variance_norm"],
    "local_response_norm": ["local_response_norm"], "norm_quant": ["norm_quant", "norm_quant_block"],
    "add_norm": ["add_norm", "adaptive_layer_norm"],
    "gated_norm": ["gated_norm"],
    "dyt": ["dyt"], "poly_norm": ["poly_norm"],
    "group_norm_silu": ["group_norm_silu"],
}


def _missing(names):
    return [n for n in names if importlib.util.find_spec(f"refnorm.norms.{n}") is None]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if i % 2 == 0 else pytest.mark.thorough)
                                  for i, n in enumerate(derivations.names())])
def test_every_step_is_proven(name):        # the quick profile proves every other derivation, the thorough all
    mod = derivations.get(name)
    checked = mod.prove()
    keys = [s.key for sec in mod.document().sections for s in sec.steps if getattr(s, "key", "")]
    assert keys, f"{name}: no step claims anything"
    for key in keys:
        concrete = [c for c in checked if c.startswith(f"{name}: {key} (m = ") and "general" not in c]
        assert concrete, f"{name}: step {key!r} is not checked by prove()"
    generals = [c for c in checked if "general" in c]
    assert generals, f"{name}: no claim is proven for general m"


@pytest.mark.parametrize("name", derivations.names())
def test_closed_forms_match_refnorm(name):
    missing = _missing(NORMALIZERS[name])
    if missing:
        pytest.skip(f"refnorm.norms.{missing[0]} is not written yet: the numeric check of {name} runs once it is")
    worst = derivations.get(name).check_numeric()
    assert worst <= 1e-12


@pytest.mark.parametrize("name", derivations.names())
def test_rendered_markdown_is_current(name):
    path = os.path.join(DOCS, f"{name}.md")
    assert os.path.exists(path), f"{path} is missing; regenerate with: {REGENERATE}"
    with open(path, encoding="utf-8") as f:
        assert f.read() == derivations.render(name, "markdown"), \
            f"{path} differs from a fresh rendering; regenerate with: {REGENERATE}"


def test_index_is_current():
    path = os.path.join(DOCS, "README.md")
    with open(path, encoding="utf-8") as f:
        assert f.read() == derivations.readme(), f"{path} is out of date; regenerate with: {REGENERATE}"
    assert derivations.stale(DOCS) == []


@pytest.mark.parametrize("name", derivations.names())
def test_markdown_is_github_math_and_links_resolve(name):
    _check_markdown(name, derivations.render(name, "markdown"))


def _check_markdown(name, text):
    blocks = re.findall(r"\$\$\n(.*?)\n\s*\$\$", text, flags=re.S)
    assert blocks and text.count("$$") == 2 * len(blocks), f"{name}: unbalanced $$ blocks"
    for b in blocks:
        assert b.count("{") == b.count("}"), f"{name}: unbalanced braces in {b!r}"
        assert b.count(r"\left") == b.count(r"\right"), f"{name}: \\left without \\right in {b!r}"
        for bad in (r"\begin", r"\newcommand", r"\def", "\n\n"):
            assert bad not in b, f"{name}: {bad!r} in a math block (GitHub's MathJax)"
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        path = os.path.normpath(os.path.join(DOCS, target))
        module = re.fullmatch(r".*refnorm/norms/(\w+)\.py", path)
        if module and _missing([module.group(1)]):
            continue            # a normalizer module still being written
        assert os.path.exists(path), f"{name}.md links to {target}, which does not exist"
    assert len(text.splitlines()) < 400, f"{name}.md is too long to read in one sitting"


@pytest.mark.parametrize("fmt", derivations.FORMATS)
def test_every_format_renders(fmt):
    for name in derivations.names():
        out = derivations.render(name, fmt)
        doc = derivations.get(name).document()
        assert doc.title in out or fmt == "latex"
        assert len(doc.steps()) >= 3 and all(isinstance(e, sp.Basic) for _, e in doc.steps())
        if fmt == "latex":
            assert out.startswith(r"\documentclass") and out.count(r"\[") == out.count(r"\]")
            assert out.isascii(), f"{name}: non-ASCII characters in the LaTeX rendering (pdflatex)"
            assert "](" not in out, f"{name}: a Markdown link left in the LaTeX rendering"
        if fmt == "text":
            assert "$$" not in out


def test_batch_norm_errata_and_steps_follow_the_seed():
    doc = derivations.get("batch_norm").document()
    keys = [s.key for sec in doc.sections for s in sec.steps if getattr(s, "key", "")]
    # the seed's order: dgamma, dbeta, dxhat, dvar, dmu, dx, then the compact form and eval mode
    assert keys[:7] == ["dgamma", "dbeta", "dxhat", "dvar", "dmu", "dmu0", "dx"]
    assert keys[7:9] == ["compact", "sum0"] and "affine" in keys
    assert {e.where for e in doc.errata} >= {"∂ℓ/∂γ", "∂ℓ/∂β", "∂ℓ/∂x̂", "∂ℓ/∂μ", "∂ℓ/∂x"}
    assert any("seed dx is wrong" in c for c in derivations.get("batch_norm").prove(sizes=(3,), general=False))


# ------------------------------------------------------------------------- the proof machinery
def test_wrong_closed_forms_are_rejected():
    """Negative controls: each proof path (concrete m, general m, back-substitution, double sums)
    must fail on a formula that is slightly wrong."""
    from refnorm.derivations import batch_norm as bn, group_norm as gn, rms_norm as rn
    P = _proof.Prover("control")
    MU, VAR, XH, L = bn._defs()
    wrong = bn.C_DX.xreplace({bn.m: bn.m - 1})
    rules = (_proof.by_index(bn.g, lambda q: bn.gamma * bn.dy[q]), _proof.by_index(bn.xhat, XH),
             {bn.mu: MU, bn.var: VAR})
    P.identity("bn", lambda J: sp.diff(L, bn.x[J]) - _proof.subs_all(wrong.xreplace({bn.j: J}), *rules),
               m=bn.m, j=bn.j, sizes=(2, 3), base={VAR + bn.eps: bn.s})
    NU, XHr, _ = rn._defs()
    sub_g = _proof.by_index(rn.g, lambda q: (rn.gamma[q] + rn.off) * rn.dy[q])
    closed = lambda q: _proof.subs_all(rn.C_DX.xreplace({rn.j: q}), sub_g, _proof.by_index(rn.xhat, XHr),
                                       {rn.nu: NU})
    P.identity("rms orth", lambda J: sp.Sum(rn.x[rn.k] * closed(rn.k), (rn.k, 1, rn.m))
               - 2 * _proof.subs_all(rn.C_ORTH_R, sub_g, {rn.nu: NU}),
               m=rn.m, sizes=(3,), base={NU + rn.eps: rn.s}, back={rn.s: NU + rn.eps})
    MUg, VARg, XHg, Lg = gn._defs()
    wrong_g = gn.C_DX.xreplace({gn.S: gn.S + 1})
    P.claim("gn", "general", (sp.diff(Lg, gn.x[gn.a, gn.p]) - _proof.subs_all(
        wrong_g, lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == gn.g,
                                     lambda t: gn.gamma[t.indices[0]] * gn.dy[t.indices]),
        gn._xhat_rule(XHg), {gn.mu: MUg, gn.var: VARg})).xreplace({VARg + gn.eps: gn.s}),
        general=True, ranges={gn.a: (1, gn.Kc), gn.p: (1, gn.S)})
    assert P.checked == []
    assert len(P.failures) == (2 + 3 + 1) + (1 + 1) + 1, P.failures
    with pytest.raises(_proof.ProofError, match="claim"):
        P.done()


def test_kronecker_delta_needs_matching_ranges():
    i, j, m, n = sp.symbols("i j m n", integer=True, positive=True)
    x = sp.IndexedBase("x")
    e = sp.diff(sp.Sum(x[i] ** 2, (i, 1, m)), x[j])
    assert _proof.linear_sums(e, {j: (1, m)}) == 2 * x[j]
    with pytest.raises(_proof.ProofError, match="range"):
        _proof.linear_sums(e, {j: (1, n)})


# ----------------------------------------------------------------------------------------- CLI
def test_cli_derive_prints_and_rejects_unknown_names(capsys):
    assert cli.main(["derive", "batch_norm"]) == 0
    out = capsys.readouterr().out
    assert "BatchNorm" in out and "∂ℓ/∂x" in out and "$$" not in out
    assert cli.main(["derive", "layer_norm", "--format", "latex"]) == 0
    assert capsys.readouterr().out.startswith(r"\documentclass")
    assert cli.main(["derive", "batchnorm"]) == 2
    err = capsys.readouterr().err
    assert "unknown derivation 'batchnorm'" in err and "batch_norm, layer_norm" in err
    assert cli.main(["derive"]) == 2
    assert "give one NAME or --all" in capsys.readouterr().err


def test_cli_write_and_check(tmp_path, capsys):
    d = str(tmp_path / "out")
    assert cli.main(["derive", "--all", "--check", "--dir", d]) == 1
    assert "out of date" in capsys.readouterr().out
    assert cli.main(["derive", "--all", "--write", "--dir", d]) == 0
    assert sorted(os.listdir(d)) == sorted([f"{n}.md" for n in derivations.names()] + ["README.md"])
    assert cli.main(["derive", "--all", "--check", "--dir", d]) == 0
    with open(os.path.join(d, "batch_norm.md"), "a", encoding="utf-8") as f:
        f.write("edited\n")
    assert cli.main(["derive", "--all", "--check", "--dir", d]) == 1
    assert "batch_norm.md" in capsys.readouterr().out
    assert cli.main(["derive", "batch_norm", "--write"]) == 2


def test_every_normalizer_has_a_derivation():
    """README: every backward has a derivation. Each registered normalizer is a family or derived inside
    one (an alias), and that family's numeric check runs the normalizer through refnorm.evaluate."""
    import refnorm
    for op in refnorm.names():
        family, note = derivations.resolve(op)
        assert family in derivations.names()
        assert op in NORMALIZERS[family], f"{op}: the numeric check of {family} does not run it"
        assert (note is None) == (op == family)
    assert sorted(derivations.ALIASES) == sorted(set(refnorm.names()) - set(derivations.names()))


def test_cli_derive_instance_norm_renders_group_norm(capsys):
    note = "`instance_norm` is `group_norm` with one channel per group"
    assert cli.main(["derive", "instance_norm"]) == 0
    out = capsys.readouterr().out
    assert note.replace("`", "") in out and "GroupNorm and InstanceNorm: the backward pass" in out
    assert out.index(note.replace("`", "")) < out.index("Forward (one sample, one group)")
    # group_norm's document with the note (and a blank line) after the title
    lines = out.splitlines()
    assert lines[3].startswith(note.replace("`", "")) and lines[4] == ""
    assert lines[:3] + lines[5:] == (derivations.render("group_norm", "text") + "\n").splitlines()   # print's \n
    assert cli.main(["derive", "instance_norm", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert note in md and md.count("$$") == derivations.render("group_norm", "markdown").count("$$")
    assert derivations.get("instance_norm") is derivations.get("group_norm")


def test_cli_derive_unknown_name_lists_every_derivation(capsys):
    for bad in ("nope", "instancenorm", "README"):
        assert cli.main(["derive", bad]) == 2
        err = capsys.readouterr().err
        assert f"unknown derivation {bad!r}" in err
        for name in [*derivations.names(), *derivations.ALIASES]:
            assert name in err
        with pytest.raises(KeyError, match="expected one of: batch_norm"):
            derivations.get(bad)


def test_cli_check_from_another_directory(tmp_path, monkeypatch, capsys):
    """--all --check finds the checkout's derivations/ from the package, not from the current directory."""
    monkeypatch.chdir(tmp_path)
    assert derivations.default_directory() == DOCS
    assert cli.main(["derive", "--all", "--check"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out == ""
    assert not os.path.exists(tmp_path / "derivations")


def test_cli_check_without_a_derivations_directory(tmp_path, monkeypatch, capsys):
    """An installed wheel has no derivations/: a clear error naming where it looked, exit 2."""
    missing = str(tmp_path / "site-packages" / "derivations")
    monkeypatch.setattr(derivations, "expected_directory", lambda: missing)
    monkeypatch.chdir(tmp_path)
    assert derivations.default_directory() is None
    for action in ("--check", "--write"):
        assert cli.main(["derive", "--all", action]) == 2
        err = capsys.readouterr().err
        assert f"no derivations/ directory at {missing}" in err and "--dir DIR" in err
    assert not os.path.exists(missing)
    with pytest.raises(FileNotFoundError, match="no derivations/ directory at"):
        derivations.stale()
    d = str(tmp_path / "elsewhere")          # --dir still works
    assert cli.main(["derive", "--all", "--write", "--dir", d]) == 0
    assert cli.main(["derive", "--all", "--check", "--dir", d]) == 0


def test_readme_starts_with_batch_norm_chain_rule_and_errata():
    text = derivations.readme()
    heads = re.findall(r"^## (.*)$", text, flags=re.M)
    assert heads == ["BatchNorm's chain rule", "Errata of the seed's formulas", "Index"]
    bn = derivations.get("batch_norm").document()
    chain = text.split("## Errata")[0]
    md_bn = derivations.render("batch_norm", "markdown")
    for sec in bn.sections[:3]:                # forward, backward, closed form: same numbers as batch_norm.md
        for line in (ln for ln in md_bn.split(f"## {sec.title}\n")[1].split("\n## ")[0].splitlines() if ln):
            assert line in chain, line
    errata = text.split("## Errata of the seed's formulas")[1].split("## Index")[0]
    for name in derivations.names():
        for e in derivations.get(name).document().errata:
            assert e.seed in errata and e.why in errata
    index = text.split("## Index")[1]
    for name in derivations.names():
        assert f"]({name}.md)" in index
    for alias, (family, _) in derivations.ALIASES.items():
        assert f"`{alias}` in [{family}]({family}.md)" in index
    for outside in ("../" + "shared", "/work/" + "shared"):
        assert outside not in text
    _check_markdown("README", text)


def test_min_max_scale_tie_convention_is_what_the_proof_checks(monkeypatch):
    """Negative control: giving every tied position the whole share (no division by n_max, n_min) fails the
    claims of every pattern with a tie (the constant slice included), and only those."""
    from refnorm.derivations import min_max_scale as mm
    monkeypatch.setattr(mm, "T_DX", mm.T_DX.xreplace({mm.nmax: 1, mm.nmin: 1}))
    P = _proof.Prover("control")
    mm._prove_ties(P, (3,))
    tied = [f for f in P.failures if re.search(r"T_max = \[\d, \d\]|T_min = \[\d, \d\]|const \(", f)]
    assert P.failures and tied == P.failures
    assert len([f for f in P.failures if "const (" in f]) == 3
    assert any("ties sum0" in f for f in P.failures) and any("ties (m = 3" in f for f in P.failures)
    assert any("T_max = [1], T_min = [2]" in c for c in P.checked)


def test_local_response_norm_window_transposes_to_the_swapped_reaches():
    from refnorm.derivations import local_response_norm as lrn
    for window, lo, hi in (("torch", 1, 0), ("onnx", 0, 1)):
        assert lrn.reach(2, window) == (lo, hi)
    w = lrn.window_matrix(4, 1, 0)         # torch, size 2: [c - 1, c]
    assert (w.T == lrn.window_matrix(4, 0, 1)).all() and not (w.T == w).all()
    assert (lrn.window_matrix(5, 1, 1).T == lrn.window_matrix(5, 1, 1)).all()   # odd size: symmetric


def test_derivations_never_import_torch():
    code = ("import sys, refnorm.derivations as d\n"
            "for n in d.names(): d.get(n).document()\n"
            "assert 'torch' not in sys.modules and 'jax' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ------------------------------------------------------------------ the shared notation (_symbols)
def test_grad_prints_dl_over_what_it_differentiates():
    """Notation.grad: ∂ℓ/∂v printed from v's own display, per index for an indexed base."""
    from refnorm.derivations import _render
    N = _render.Notation()
    v = N.indexed("v", r"\hat{{v}}_{{{i}}}", "v̂[{i}]")
    sigma = N.symbol("sigma", r"\sigma", "σ")
    dv, dsigma = N.grad(v, "dv"), N.grad(sigma, "dsigma")
    j = sp.Symbol("j", integer=True, positive=True)
    assert isinstance(dv, sp.IndexedBase) and isinstance(dsigma, sp.Symbol)
    assert _render.latex(dv[j], N) == r"\frac{\partial \ell}{\partial \hat{v}_{j}}"
    assert _render.pretty(dv[j], N) == "∂ℓ/∂v̂[j]"
    assert _render.latex(dsigma, N) == r"\frac{\partial \ell}{\partial \sigma}"
    assert _render.pretty(dsigma, N) == "∂ℓ/∂σ"


def test_shared_symbols_are_the_families_symbols():
    """The families take x, dy, ... from _symbols.ROW and γ, β from _symbols.affine: one object each, so a
    formula of one family substitutes into another's (layer_norm reuses batch_norm's closed form)."""
    from refnorm.derivations import _render, _symbols, batch_norm, group_norm, layer_norm, lp_normalize
    assert batch_norm.x is _symbols.x and layer_norm.dy is _symbols.dy and group_norm.xhat is _symbols.xhat
    assert lp_normalize.eps is _symbols.eps and layer_norm.C_DX is batch_norm.C_DX
    N = _symbols.ROW.copy()
    gamma, beta, dgamma, dbeta = _symbols.affine(N, "e")
    assert gamma == layer_norm.gamma and dbeta == layer_norm.dbeta and gamma != group_norm.gamma
    assert [_render.pretty(e[_symbols.j], N) for e in (gamma, beta, dgamma, dbeta)] == \
        ["γ[j]", "β[j]", "∂ℓ/∂γ[j]", "∂ℓ/∂β[j]"]
    assert gamma.label not in _symbols.ROW.text          # affine declares in the copy it is given, not in ROW


def test_spec_ref_names_the_specification_module():
    from refnorm.derivations import _render
    ref = _render.spec_ref("z_score")
    assert ref == "`refnorm.evaluate('z_score', ..., engine='spec')` (the specification, refnorm/specs/z_score.py)"
    assert ref in derivations.render("z_score", "markdown")
