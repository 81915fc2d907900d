"""Proof machinery shared by the derivations: symbolic identities for concrete and general m, numeric checks.

Every claim is an identity ``lhs - rhs == 0`` built from Sums over ``i = 1..m``:

* concrete m (2..5): ``doit()`` expands every Sum into explicit terms and ``expand`` must give 0;
* general m (a SymPy integer symbol): derivatives of Sums with respect to ``x[j]`` come out as Sums of
  Kronecker deltas; ``linear_sums`` resolves them (the term i = j, for 1 <= j <= m), pulls every factor
  that does not depend on the summation index out of each Sum, splits Sums of sums, and renames each
  summation index to a canonical dummy (one per nesting depth), so equal sums become structurally equal
  and ``expand`` can cancel them.

Square roots of statistics are handled by the caller: the statistic's exact expression is replaced by
one positive symbol ``s`` (``xreplace``) AFTER differentiating, so both sides are polynomials in
``s**(-1/2)`` and the identity, holding for every s, holds for s = var + eps in particular.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

SIZES = (2, 3, 4, 5)

_DUMMIES: list[sp.Dummy] = []


def _canon(depth: int) -> sp.Dummy:
    """The canonical summation index of a Sum whose body nests ``depth - 1`` further Sums."""
    while len(_DUMMIES) < depth:
        _DUMMIES.append(sp.Dummy(f"k{len(_DUMMIES) + 1}", integer=True, positive=True))
    return _DUMMIES[depth - 1]


def _depth(e) -> int:
    if isinstance(e, sp.Sum):
        return len(e.limits) + _depth(e.function)
    return max((_depth(a) for a in e.args), default=0)


class ProofError(AssertionError):
    """A claimed identity of a derivation is false, or a closed form disagrees with refnorm."""


def _delta_partner(f, idx):
    """For a factor KroneckerDelta(idx, a) (or a positive power of one), the other index a; else None."""
    if isinstance(f, sp.Pow) and f.exp.is_Integer and f.exp > 0:
        f = f.base
    if isinstance(f, sp.KroneckerDelta) and idx in f.args:
        a, b = f.args
        return b if a == idx else a
    return None


def linear_sums(e: sp.Basic, ranges: dict | None = None) -> sp.Basic:
    """Sums written as linear combinations of Sums of index-dependent products (see the module doc).

    ``ranges`` maps each free index to its range (lo, hi). A Kronecker delta delta(i, a) inside a Sum
    over i = lo..hi picks the term i = a, which requires a to run over the same range: a free index
    with that range in ``ranges``, or an enclosing summation index with the same limits.
    (SymPy merges a Sum of a Sum into one Sum with several limits, innermost first.)
    """
    ranges = dict(ranges or {})
    if isinstance(e, sp.Sum):
        lims = e.limits
        body = linear_sums(e.function, {**ranges, **{v: (lo, hi) for v, lo, hi in lims}})
        for n, (idx, lo, hi) in enumerate(lims):
            outer = {**ranges, **{v: (lo_, hi_) for v, lo_, hi_ in lims[n + 1:]}}
            body = _linear_sum(body, idx, lo, hi, outer)
        return body
    if e.args:
        return e.func(*[linear_sums(a, ranges) for a in e.args])
    return e


def _linear_sum(body, idx, lo, hi, ranges: dict) -> sp.Basic:
    """sum over idx = lo..hi of ``body`` (whose own Sums are already linear), made linear."""
    out = sp.S.Zero
    for term in sp.Add.make_args(sp.expand(body)):
        dep, const = [], []
        for f in sp.Mul.make_args(term):
            (dep if idx in f.free_symbols else const).append(f)
        c = sp.Mul(*const)
        partners = [(n, _delta_partner(f, idx)) for n, f in enumerate(dep)]
        partners = [(n, a) for n, a in partners if a is not None and idx not in a.free_symbols]
        if partners:
            n, a = partners[0]
            if ranges.get(a) != (lo, hi):
                raise ProofError(f"Kronecker delta({idx}, {a}) in a sum over {lo}..{hi}: the range of "
                                 f"{a} is {ranges.get(a)}")
            rest = sp.Mul(*(f for q, f in enumerate(dep) if q != n))
            out += c * linear_sums(rest.xreplace({idx: a}), ranges)
        elif dep:
            body_ = sp.Mul(*dep)
            d = _canon(1 + _depth(body_))
            out += c * sp.Sum(body_.xreplace({idx: d}), (d, lo, hi))
        else:
            out += c * (hi - lo + 1)
    return out


def reduce_expr(expr, *, general: bool, ranges: dict | None = None) -> sp.Basic:
    """Concrete m: expand every Sum (doit). General m: ``linear_sums`` (no doit: SymPy's symbolic
    summation is neither needed nor robust here)."""
    e = linear_sums(expr, ranges) if general else expr.doit()
    return sp.expand(e)


def _back_substitute(e, sym, value, general: bool, ranges: dict | None):
    """e is a sum of terms c * sym**p; clear the fractional powers, then put ``value`` back for ``sym``.

    Used when an identity holds only because sym = value (e.g. s = mean(x^2) + eps): zero after this
    substitution means zero as a function of x."""
    e = sp.Add(*(sp.powsimp(t) for t in sp.Add.make_args(e)))
    powers = {t.as_coeff_exponent(sym)[1] for t in sp.Add.make_args(e)}
    p0 = next(iter(powers))
    shifts = {sp.simplify(p_ - p0) for p_ in powers}
    if any(not d.is_integer for d in shifts):
        raise ProofError(f"powers {sorted(map(str, powers))} of {sym} differ by non-integers")
    e = sp.expand(e * sym ** (-(p0 + min(shifts))))
    return reduce_expr(e.xreplace({sym: value}), general=general, ranges=ranges)


def is_zero(expr, *, general: bool, simplify: bool = False, back: dict | None = None,
            ranges: dict | None = None, rewrite=None) -> bool:
    """``rewrite``: an identity-preserving rewrite applied to the reduced expression (e.g. x sign(x) = |x|)."""
    e = reduce_expr(expr, general=general, ranges=ranges)
    if rewrite is not None and e != 0:
        e = reduce_expr(rewrite(e), general=general, ranges=ranges)
    if e == 0:
        return True
    for sym, value in (back or {}).items():
        e = _back_substitute(e, sym, value, general, ranges)
    if e == 0:
        return True
    if simplify:
        return sp.simplify(sp.powsimp(e, force=True)) == 0
    return False


class Prover:
    """Collects claims (name, size) and failures; ``done()`` raises ProofError listing every failure."""

    def __init__(self, name: str):
        self.name = name
        self.checked: list[str] = []
        self.failures: list[str] = []

    def claim(self, key: str, m, diff, *, general: bool = False, simplify: bool = False,
              expect_zero: bool = True, back: dict | None = None, ranges: dict | None = None,
              rewrite=None) -> None:
        """``diff`` (a SymPy expression) must reduce to 0 (or, for an erratum, must not)."""
        label = f"{self.name}: {key} (m = {m})"
        try:
            ok = is_zero(diff, general=general, simplify=simplify, back=back, ranges=ranges,
                         rewrite=rewrite) == expect_zero
        except ProofError as e:
            ok, label = False, f"{label}: {e}"
        (self.checked if ok else self.failures).append(label)

    def identity(self, key: str, build, *, m, j=None, sizes=SIZES, general: bool = True,
                 base: dict | None = None, simplify: bool = False, expect_zero: bool = True,
                 back: dict | None = None, ranges: dict | None = None, rewrite=None) -> None:
        """``build(J)`` must be 0 for m = each of ``sizes`` and J = 1..m, and for general m and j.

        ``j`` is the free index symbol (None when the claim has none); ``base`` maps statistics'
        expressions to positive symbols (applied before ``m`` is made concrete); ``back`` maps such a
        symbol back to its expression, for identities that need it (see ``_back_substitute``);
        ``ranges`` gives the free indices' ranges for general m (default: j runs over 1..m).
        """
        for M in sizes:
            for J in (range(1, M + 1) if j is not None else [None]):
                e = build(J)
                if base:
                    e = e.xreplace(base)
                at = M if J is None else f"{M}, j = {J}"
                bk = {a: v.xreplace({m: M}) for a, v in back.items()} if back else None
                self.claim(key, at, e.xreplace({m: M}), simplify=simplify, expect_zero=expect_zero, back=bk,
                           rewrite=rewrite)
        if general:
            e = build(j)
            if base:
                e = e.xreplace(base)
            rg = ranges if ranges is not None else ({j: (1, m)} if j is not None else {})
            self.claim(key, "general", e, general=True, simplify=simplify, expect_zero=expect_zero, back=back,
                       ranges=rg, rewrite=rewrite)

    def done(self) -> list[str]:
        if self.failures:
            raise ProofError(f"{len(self.failures)} claim(s) failed:\n  " + "\n  ".join(self.failures))
        return self.checked


def by_index(base: sp.IndexedBase, fn):
    """Replacement rule: every ``base[k]`` becomes ``fn(k)`` (used to substitute definitions)."""
    return lambda e: e.replace(lambda a: isinstance(a, sp.Indexed) and a.base == base,
                               lambda a: fn(a.indices[0]))


def subs_all(expr, *rules):
    """Apply replacement rules (callables) and ``{symbol: value}`` dicts in order."""
    for r in rules:
        expr = r(expr) if callable(r) else expr.xreplace(r)
    return expr


# ------------------------------------------------------------------------------------ numeric checks
def lambdify_slices(exprs, arrays: dict, scalars: dict, m):
    """Evaluate concrete expressions on many slices at once.

    ``arrays``: IndexedBase -> ndarray of shape (..., *dims), dims = ``m`` (an int: one index) or a tuple
    (several indices); base[k1, k2, ...] is the element at [..., k1 - 1, k2 - 1, ...]. A value
    (ndarray, dims) gives that base its own index dimensions.
    ``scalars``: Symbol -> float or ndarray broadcastable to the leading shape. Returns a list with one
    ndarray per expression.
    """
    dims = (m,) if isinstance(m, int) else tuple(m)
    syms, vals = [], []
    for base, a in arrays.items():
        a, bdims = a if isinstance(a, tuple) else (a, dims)
        for idx in np.ndindex(*bdims):
            syms.append(base[tuple(q + 1 for q in idx)] if len(idx) > 1 else base[idx[0] + 1])
            vals.append(a[(Ellipsis, *idx)])
    for sym, v in scalars.items():
        syms.append(sym)
        vals.append(v)
    f = sp.lambdify(syms, list(exprs), modules="numpy", dummify=True)
    lead = np.broadcast_shapes(*(np.shape(v) for v in vals))
    return [np.broadcast_to(np.asarray(r, dtype=np.float64), lead) for r in f(*vals)]


def rel_err(got, want) -> float:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ProofError(f"shape {got.shape} != {want.shape}")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    return diff / scale if scale > 0 else diff


class NumericCheck:
    """Compares closed forms with refnorm's outputs; ``done()`` raises ProofError above ``tol``."""

    def __init__(self, name: str, tol: float = 1e-12):
        self.name, self.tol = name, tol
        self.worst = 0.0
        self.failures: list[str] = []

    def compare(self, what: str, got, want) -> None:
        err = rel_err(got, want)
        self.worst = max(self.worst, err)
        if not err <= self.tol:
            self.failures.append(f"{self.name}: {what}: relative error {err:.3e} > {self.tol:.0e}")

    def done(self) -> float:
        if self.failures:
            raise ProofError("\n".join(self.failures))
        return self.worst


def spec_evaluate(name, inputs, **kw):
    """``refnorm.evaluate`` on the specification (``engine="spec"``, refnorm/specs/): the numeric checks
    hold the derivations against the plain definition, not against the fast path."""
    import refnorm
    return refnorm.evaluate(name, inputs, engine="spec", **kw)
