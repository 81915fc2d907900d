"""PolyNorm's backward (PolyCom, Zhuo et al. 2025; vLLM's poly_norm), proven with SymPy.

One row of m values. Each power x^p (p = 3, 2, 1) is RMS-normalized on its own, so the backward is
RMSNorm's closed form once per power (with the power as its input), joined by the chain rule through
the powers; the three weights and the bias are scalars shared by every element.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import NumericCheck, Prover, by_index, lambdify_slices, spec_evaluate, subs_all
from ._render import Document, Section, Step, family_functions, spec_ref
from ._symbols import ROW, dx, dy, eps, i, j, k, m, x, y

NAME = "poly_norm"
N = ROW.copy()
P3 = (3, 2, 1)
w = {p: N.symbol(f"w{3 - p}", f"w_{3 - p}", f"w{3 - p}") for p in P3}         # w0 on x^3, w1 on x^2, w2 on x
b = N.symbol("b", "b", "b")
nu = {p: N.symbol(f"nu{p}", rf"\nu_{p}", f"ν{p}") for p in P3}
h = {p: N.indexed(f"h{p}", rf"h_{{{{{p},{{i}}}}}}", f"h{p}[{{i}}]") for p in P3}
U = {p: N.indexed(f"u{p}", rf"u_{{{{{p},{{i}}}}}}", f"u{p}[{{i}}]") for p in P3}
du = {p: N.grad(U[p], f"du{p}") for p in P3}
dw = {p: N.grad(w[p], f"dw{3 - p}") for p in P3}
db = N.grad(b, "db")
s = {p: sp.Symbol(f"s{p}", positive=True) for p in P3}          # stand for nu_p + eps in the proofs

F_U = {p: x[j] ** p for p in P3}
F_NU = {p: sp.Sum(U[p][i] ** 2, (i, 1, m)) / m for p in P3}
F_H = {p: U[p][j] / sp.sqrt(nu[p] + eps) for p in P3}
F_Y = sp.Add(w[3] * h[3][j], w[2] * h[2][j], w[1] * h[1][j], b, evaluate=False)
B_DW = {p: sp.Sum(dy[i] * h[p][i], (i, 1, m)) for p in P3}
B_DB = sp.Sum(dy[i], (i, 1, m))
B_DU = {p: w[p] * (dy[j] - h[p][j] * sp.Sum(dy[i] * h[p][i], (i, 1, m)) / m) / sp.sqrt(nu[p] + eps) for p in P3}
B_DX = sp.Add(3 * x[j] ** 2 * du[3][j], 2 * x[j] * du[2][j], du[1][j], evaluate=False)


def document() -> Document:
    fwd = Section("Forward (one row)", (
        Step("The three powers of the row, each normalized on its own below (p = 3, 2, 1).", sp.Eq(U[3][j], F_U[3])),
        *(Step(f"Mean square of the power {p}: no mean is removed.", sp.Eq(nu[p], F_NU[p])) for p in P3),
        *(Step(f"RMS-normalized power {p}; eps inside the square root, as vLLM and Liger.", sp.Eq(h[p][j], F_H[p]))
          for p in P3),
        Step("The weight in vLLM's order: w0 on the cube, w2 on x itself; one bias for all.", sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward", (
        *(Step(f"w{3 - p} is shared by every element: the sum runs over the row here and refnorm adds the rows' "
               "sums.", sp.Eq(dw[p], B_DW[p]), f"dw{3 - p}") for p in P3),
        Step("The bias likewise.", sp.Eq(db, B_DB), "db"),
        *(Step(f"RMSNorm's closed form ([rms_norm](rms_norm.md), step 8) with the power u_{p} as its input and the "
               f"scalar gain w{3 - p}.", sp.Eq(du[p][j], B_DU[p]), f"du{p}") for p in P3),
        Step("The chain rule through the powers: du_p/dx = p x^(p-1).", sp.Eq(dx[j], B_DX), "dx"),
    ))
    return Document(
        name=NAME, title="PolyNorm: the backward pass", notation=N,
        intro=("PolyNorm (PolyCom, Zhuo et al. 2025) sums the RMS-normalized first three powers of x with three "
               "learnable weights and a bias; vLLM ships it as a fused kernel (`poly_norm`). One row of m values "
               "below; the rows share the weights and the bias.",),
        sections=(fwd, bwd),
        checks=(
            "`prove()`: ∂ℓ/∂w_k, ∂ℓ/∂b, each ∂ℓ/∂u_p (the powers taken as independent inputs) and ∂ℓ/∂x_j (the "
            "powers as functions of x, all three statistics differentiated) against the derivative of "
            "ℓ = Σ ∂ℓ/∂y_i · y_i, for m = 2, 3 and general m.",
            f"`check_numeric()`: against {spec_ref(NAME)}: y, dx, dweight and dbias (summed over the rows).",
        ),
        links=(("index", "README.md"), ("previous: dyt", "dyt.md"), ("RMSNorm", "rms_norm.md"),
               ("code: refnorm/specs/poly_norm.py", "../refnorm/specs/poly_norm.py")),
    )


steps, render = family_functions(document)


def _H_of(p, src):
    """h_p as a function of the row ``src`` (an IndexedBase holding u_p, or x with u_p = x^p)."""
    power = (lambda q: src[q] ** p) if src is x else (lambda q: src[q])
    NU = sp.Sum(power(k) ** 2, (k, 1, m)) / m
    return (lambda q: power(q) / sp.sqrt(NU + eps)), NU


def prove(sizes=(2, 3), general: bool = True) -> list[str]:
    P = Prover(NAME)
    # the powers as independent rows: the loss as a function of u_3, u_2, u_1
    Hu = {p: _H_of(p, U[p]) for p in P3}
    Lu = sp.Sum(dy[i] * (sum(w[p] * Hu[p][0](i) for p in P3) + b), (i, 1, m))
    base_u = {Hu[p][1] + eps: s[p] for p in P3}
    sub_hu = [by_index(h[p], Hu[p][0]) for p in P3]
    for p in P3:
        P.identity(f"dw{3 - p}", lambda J, p=p: sp.diff(Lu, w[p]) - subs_all(B_DW[p], *sub_hu), m=m, sizes=sizes,
                   general=general, base=base_u)
        P.identity(f"du{p}", lambda J, p=p: sp.diff(Lu, U[p][J]) - subs_all(B_DU[p].xreplace({j: J}), *sub_hu,
                                                                            {nu[p]: Hu[p][1]}),
                   m=m, j=j, sizes=sizes, general=general, base=base_u)
    P.identity("db", lambda J: sp.diff(Lu, b) - B_DB, m=m, sizes=sizes, general=general)
    # the powers as functions of x: every statistic depends on x_j
    Hx = {p: _H_of(p, x) for p in P3}
    Lx = sp.Sum(dy[i] * (sum(w[p] * Hx[p][0](i) for p in P3) + b), (i, 1, m))
    base_x = {Hx[p][1] + eps: s[p] for p in P3}
    sub_hx = [by_index(h[p], Hx[p][0]) for p in P3]
    sub_du = [by_index(du[p], lambda q, p=p: B_DU[p].xreplace({j: q})) for p in P3]
    P.identity("dx", lambda J: sp.diff(Lx, x[J]) - subs_all(B_DX.xreplace({j: J}), *sub_du, *sub_hx,
                                                            {nu[p]: Hx[p][1] for p in P3}),
               m=m, j=j, sizes=sizes, general=general, base=base_x)
    return P.done()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261128) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    R, M = 4, 5
    xs = rng.standard_normal((R, M)) * 1.5 + 0.3
    wv, bv, dyv, ev = rng.standard_normal(3), rng.standard_normal(1), rng.standard_normal((R, M)), 1e-2
    res = spec_evaluate(NAME, {"x": xs, "weight": wv, "bias": bv}, config={"eps": ev}, grad_outputs={"y": dyv})
    Hx = {p: _H_of(p, x) for p in P3}
    subs = [by_index(du[p], lambda q, p=p: B_DU[p].xreplace({j: q})) for p in P3] + \
        [by_index(h[p], Hx[p][0]) for p in P3] + [{nu[p]: Hx[p][1] for p in P3}]
    at = lambda e, J: subs_all(e.xreplace({j: J}), *subs).xreplace({m: M}).doit()  # noqa: E731
    exprs = [at(F_Y, J) for J in range(1, M + 1)] + [at(B_DX, J) for J in range(1, M + 1)] + \
        [at(B_DW[p], 1) for p in P3]
    scal = {w[p]: float(wv[3 - p]) for p in P3}
    vals = lambdify_slices(exprs, {x: xs, dy: dyv}, {eps: ev, b: float(bv[0]), **scal}, M)
    chk.compare("y", res.outputs["y"], np.stack(vals[:M], -1))
    chk.compare("dx", res.grads["x"], np.stack(vals[M:2 * M], -1))
    chk.compare("dweight", res.grads["weight"], np.array([vals[2 * M + q].sum() for q in range(3)]))
    chk.compare("dbias", res.grads["bias"], np.array([dyv.sum()]))
    return chk.done()
