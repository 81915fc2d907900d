"""Weight normalization's backward (Salimans & Kingma 2016; torch._weight_norm), proven with SymPy.

One slice: the m entries v_1..v_m normalized together (for ``dim=0``, one output row: every axis but
``dim``; for ``dim=None``, the whole tensor), with its scalar gain g.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, i, j, k, m

NAME = "weight_norm"
N = ROW.copy()
v = N.indexed("v", "v_{{{i}}}")
w = N.indexed("w", "w_{{{i}}}")
dw, dv = N.grad(w, "dw"), N.grad(v, "dv")
gn = N.symbol("gain", "g", "g")
nrm = N.symbol("nrm", r"\lVert v \rVert", "‖v‖", positive=True)
dg, dn = N.grad(gn, "dgain"), N.grad(nrm, "dnrm")
u = sp.Symbol("u", positive=True)       # stands for sum v_i^2 in the proofs

F_N = sp.sqrt(sp.Sum(v[i] ** 2, (i, 1, m)))
F_W = gn * v[j] / nrm
B_DG = sp.Sum(dw[i] * v[i], (i, 1, m)) / nrm
B_DN = -gn * sp.Sum(dw[i] * v[i], (i, 1, m)) / nrm ** 2
B_DV = sp.Add(gn * dw[j] / nrm, dn * v[j] / nrm, evaluate=False)
C_DV = gn / nrm * (dw[j] - v[j] * sp.Sum(dw[i] * v[i], (i, 1, m)) / nrm ** 2)
C_ORTH = sp.Sum(v[j] * dv[j], (j, 1, m))


def document() -> Document:
    fwd = Section("Forward (one slice)", (
        Step("The Euclidean norm of the slice (torch: over every axis but `dim`).", sp.Eq(nrm, F_N)),
        Step("Direction times gain: ‖w‖ = |g| whatever v.", sp.Eq(w[j], F_W)),
    ))
    bwd = Section("Backward", (
        Step("g scales every w_i.", sp.Eq(dg, B_DG), "dg"),
        Step("‖v‖ divides every w_i.", sp.Eq(dn, B_DN), "dn"),
        Step("v_j reaches ℓ directly and through the norm (∂‖v‖/∂v_j = v_j / ‖v‖).", sp.Eq(dv[j], B_DV), "dv"),
    ))
    compact = Section("Closed form used in refnorm", (
        "See [refnorm/norms/weight_norm.py](../refnorm/norms/weight_norm.py).",
        Step("The upstream gradient, scaled by g/‖v‖, with its component along v removed.",
             sp.Eq(dv[j], C_DV), "compact"),
        Step("So the gradient is orthogonal to v: scaling v does not change w.", sp.Eq(C_ORTH, 0), "orth"),
        "At v = 0 the norm is 0 and w is 0/0: the forward and the gradient are NaN there, as in torch.",
    ))
    return Document(
        name=NAME, title="Weight normalization: the backward pass", notation=N,
        intro=("Weight normalization (Salimans & Kingma 2016) reparameterizes a weight as w = g v / ‖v‖. "
               "Below: one slice of m entries of v and its gain g; the slices are independent.",),
        sections=(fwd, bwd, compact),
        checks=(
            "`prove()`: every step against the derivative of ℓ = Σ ∂ℓ/∂w_i · w_i, for m = 2..5 and general m.",
            f"`check_numeric()`: against {spec_ref(NAME)} (w, dv, dg; dim 0, 1 and None).",
        ),
        links=navigation("weight_norm", "group_norm", "weight_standardization"),
    )


steps, render = family_functions(document)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    SQ = sp.Sum(v[k] ** 2, (k, 1, m))
    NR = sp.sqrt(SQ)
    L = sp.Sum(dw[i] * gn * v[i] / NR, (i, 1, m))
    base = {SQ: u}
    P.identity("dg", lambda J: sp.diff(L, gn) - B_DG.xreplace({nrm: NR}), m=m, sizes=sizes, general=general,
               base=base)
    Lg = sp.Sum(dw[i] * gn * v[i] / nrm, (i, 1, m))
    P.identity("dn", lambda J: sp.diff(Lg, nrm) - B_DN, m=m, sizes=sizes, general=general)
    P.identity("dv", lambda J: sp.diff(L, v[J]) - subs_all(B_DV.xreplace({j: J}), {dn: B_DN}, {nrm: NR}),
               m=m, j=j, sizes=sizes, general=general, base=base)
    closed = lambda q: C_DV.xreplace({j: q, nrm: NR})  # noqa: E731
    P.identity("compact", lambda J: sp.diff(L, v[J]) - closed(J), m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity("orth", lambda J: sp.Sum(v[k] * closed(k), (k, 1, m)), m=m, sizes=sizes, general=general,
               base=base, back={u: SQ})
    return P.done()


def _g_shape(shape, dim):
    return () if dim is None else tuple(s if a == dim else 1 for a, s in enumerate(shape))


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261126) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    shape = (3, 2, 2)
    for dim in (0, 1, None):
        vs, dws = rng.standard_normal(shape), rng.standard_normal(shape)
        gs = rng.standard_normal(_g_shape(shape, dim))
        res = spec_evaluate(NAME, {"v": vs, "g": gs}, config={"dim": dim}, grad_outputs={"w": dws})
        # slices: move `dim` first and flatten the rest (dim=None: one slice)
        if dim is None:
            lead = lambda t: t.reshape(1, -1)  # noqa: E731
        else:
            lead = lambda t: np.moveaxis(t, dim, 0).reshape(t.shape[dim], -1)  # noqa: E731
        V, DW = lead(vs), lead(dws)
        M = V.shape[1]
        G = gs.reshape(-1)
        NR = sp.sqrt(sp.Sum(v[k] ** 2, (k, 1, m)))
        conc = lambda e: e.xreplace({nrm: NR}).xreplace({m: M}).doit()  # noqa: E731
        exprs = [conc(F_W.xreplace({j: J})) for J in range(1, M + 1)]
        exprs += [conc(C_DV.xreplace({j: J})) for J in range(1, M + 1)] + [conc(B_DG)]
        vals = lambdify_slices(exprs, {v: V, dw: DW}, {gn: G}, M)
        back = (lambda c: np.stack(c, -1).reshape(shape)) if dim is None else \
            (lambda c: np.moveaxis(np.stack(c, -1).reshape((shape[dim],) + tuple(np.delete(shape, dim))), 0, dim))
        chk.compare(f"w dim={dim}", res.outputs["w"], back(vals[:M]))
        chk.compare(f"dv dim={dim}", res.grads["v"], back(vals[M:2 * M]))
        chk.compare(f"dg dim={dim}", res.grads["g"], vals[2 * M].reshape(gs.shape))
    return chk.done()
