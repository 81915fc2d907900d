"""Lp normalization's backward (torch.nn.functional.normalize), proven with SymPy for symbolic p.

One slice of m values along ``dim``: y = x / max(||x||_p, eps). Two regimes: the norm above eps
(the projection below) and below eps (a constant divisor).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, lambdify_slices
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, dx, dy, eps, i, j, k, m, y

NAME = "lp_normalize"
N = ROW.copy()
x = N.indexed("xr", "x_{{{i}}}", "x[{i}]")
p = N.symbol("p", "p", positive=True)
nrm = N.symbol("nrm", r"\lVert x \rVert_p", "‖x‖_p", positive=True)
dndx = N.symbol("dn_dx", r"\frac{\partial \lVert x \rVert_p}{\partial x_{j}}", "∂‖x‖_p/∂x[j]")
dnrm = N.grad(nrm, "dnrm")
u = sp.Symbol("u", positive=True)      # stands for sum |x_i|^p in the proofs
xr = sp.IndexedBase("xr", real=True)   # the same base with real entries, for |x| and sign(x)

F_N = sp.Sum(sp.Abs(x[i]) ** p, (i, 1, m)) ** (1 / p)
F_Y = x[j] / sp.Max(nrm, eps)
B_DN = -sp.Sum(dy[i] * x[i], (i, 1, m)) / nrm ** 2
B_DNX = sp.sign(x[j]) * sp.Abs(x[j]) ** (p - 1) / nrm ** (p - 1)
B_DX = sp.Add(dy[j] / nrm, dnrm * B_DNX, evaluate=False)
C_DX = (dy[j] - sp.sign(x[j]) * sp.Abs(x[j]) ** (p - 1) * sp.Sum(dy[i] * x[i], (i, 1, m)) / nrm ** p) / nrm
C_DX2 = (dy[j] - x[j] * sp.Sum(dy[i] * x[i], (i, 1, m)) / nrm ** 2) / nrm
C_ORTH = sp.Sum(x[j] * dx[j], (j, 1, m))
E_DX = dy[j] / eps


def document() -> Document:
    fwd = Section("Forward (one slice along `dim`)", (
        Step("The p-norm (any p > 0; absolute values, also for p = 1).", sp.Eq(nrm, F_N)),
        Step("Divide by the norm, or by ε when the norm is smaller (torch's `clamp_min(eps)`).", sp.Eq(y[j], F_Y)),
    ))
    big = Section("Backward where ‖x‖_p > ε", (
        Step("The norm divides every x_i.", sp.Eq(dnrm, B_DN), "dn"),
        Step("Its derivative: ∂‖x‖_p/∂x_j, for x_j ≠ 0 (and at 0 when p > 1).",
             sp.Eq(dndx, B_DNX), "dnx"),
        Step("x_j reaches ℓ directly and through the norm.", sp.Eq(dx[j], B_DX), "dx"),
        Step("Closed form ([refnorm/norms/lp_normalize.py](../refnorm/norms/lp_normalize.py)).",
             sp.Eq(dx[j], C_DX), "compact"),
        Step("For p = 2 it is the projection removing the component along x.", sp.Eq(dx[j], C_DX2), "p2"),
        Step("For every p the gradient is orthogonal to x: y does not change when x is scaled.",
             sp.Eq(C_ORTH, 0), "orth"),
    ))
    small = Section("Backward where ‖x‖_p < ε", (
        Step("The divisor is the constant ε.", sp.Eq(dx[j], E_DX), "small"),
        "At ‖x‖_p = ε exactly the two one-sided derivatives differ; an all-zero slice gives y = 0. What "
        "refnorm returns there, and for x_j = 0 with p ≤ 1 (where |x_j|^(p−1) has no finite value), is "
        "documented in the module, following torch.",
    ))
    return Document(
        name=NAME, title="Lp normalization: the backward pass", notation=N,
        intro=("`F.normalize` divides each slice along `dim` by its p-norm, clamped below by ε. One slice of "
               "m values below; p is a symbol throughout.",),
        sections=(fwd, big, small),
        checks=(
            "`prove()`: every step against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i for symbolic p > 0 and "
            "real x_i (|x| and sign(x) exact), for m = 2..5 and general m; p = 2 separately; the ε regime.",
            f"`check_numeric()`: against {spec_ref(NAME)} for p = 1, 2, 3, 0.5 and a "
            "slice whose norm is below ε.",
        ),
        links=navigation("lp_normalize", "weight_standardization", "unified_norm"),
    )


steps, render = family_functions(document)


def _x_sign_x(e):
    """For real z: sign(z) z^n = |z| z^(n-1) and sign(z) |z| = z (the identities of |.| the proofs need),
    then powers of a common base merged (|z|^p / |z| = |z|^(p-1))."""
    def fold(t):
        args = list(t.args)
        for sg in [a for a in args if isinstance(a, sp.sign)]:
            z = sg.args[0]
            pw = next((a for a in args if a == z or (a.is_Pow and a.base == z and a.exp.is_Integer
                                                     and a.exp > 0)), None)
            if pw is not None:
                args.remove(sg)
                args.remove(pw)
                args += [sp.Abs(z), z ** (pw.exp - 1) if pw.is_Pow else sp.S.One]
            elif sp.Abs(z) in args:
                args.remove(sg)
                args.remove(sp.Abs(z))
                args.append(z)
        return sp.Mul(*args)
    return sp.powsimp(e.replace(lambda t: t.is_Mul, fold), deep=True)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    real = {x: xr}
    SP = sp.Sum(sp.Abs(xr[k]) ** p, (k, 1, m))
    NR = SP ** (1 / p)
    L = sp.Sum(dy[i] * xr[i] / NR, (i, 1, m))              # the regime ||x||_p > eps
    base = {SP: u}
    sub = lambda e: e.xreplace(real).xreplace({nrm: NR})  # noqa: E731
    Lg = sp.Sum(dy[i] * xr[i] / nrm, (i, 1, m))
    P.identity("dn", lambda J: sp.diff(Lg, nrm) - B_DN.xreplace(real), m=m, sizes=sizes, general=general)
    P.identity("dnx", lambda J: sp.diff(NR, xr[J]) - sub(B_DNX.xreplace({j: J})), m=m, j=j, sizes=sizes,
               general=general, base=base, rewrite=_x_sign_x)
    P.identity("dx", lambda J: sp.diff(L, xr[J]) - sub(B_DX.xreplace({j: J}).xreplace({dnrm: B_DN})),
               m=m, j=j, sizes=sizes, general=general, base=base, rewrite=_x_sign_x)
    P.identity("compact", lambda J: sp.diff(L, xr[J]) - sub(C_DX.xreplace({j: J})), m=m, j=j, sizes=sizes,
               general=general, base=base, rewrite=_x_sign_x)
    P.identity("p2", lambda J: (C_DX - C_DX2).xreplace({j: J, p: 2}).xreplace(real), m=m, j=j, sizes=sizes,
               general=general, rewrite=_x_sign_x)
    P.identity("orth", lambda J: sp.Sum(xr[k] * sub(C_DX.xreplace({j: k})), (k, 1, m)), m=m, sizes=sizes,
               general=general, base=base, back={u: SP}, rewrite=_x_sign_x)
    Le = sp.Sum(dy[i] * xr[i] / eps, (i, 1, m))
    P.identity("small", lambda J: sp.diff(Le, xr[J]) - E_DX.xreplace({j: J}), m=m, j=j, sizes=sizes,
               general=general)
    return P.done()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261128) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    M, R = 4, 3
    for pv in (1.0, 2.0, 3.0, 0.5):
        xs, dys = rng.standard_normal((R, M)), rng.standard_normal((R, M))
        res = spec_evaluate(NAME, {"x": xs}, config={"p": pv, "dim": 1, "eps": 1e-12}, grad_outputs={"y": dys})
        NR = sp.Sum(sp.Abs(xr[k]) ** p, (k, 1, m)) ** (1 / p)
        conc = lambda e: e.xreplace({x: xr}).xreplace({nrm: NR}).xreplace({m: M, p: pv}).doit()  # noqa: E731
        exprs = [conc(F_Y.xreplace({j: J, eps: 1e-12})) for J in range(1, M + 1)]
        exprs += [conc(C_DX.xreplace({j: J})) for J in range(1, M + 1)]
        vals = lambdify_slices(exprs, {xr: xs, dy: dys}, {}, M)
        chk.compare(f"y p={pv}", res.outputs["y"], np.stack(vals[:M], -1))
        chk.compare(f"dx p={pv}", res.grads["x"], np.stack(vals[M:], -1))
    # a slice with norm below eps: y = x / eps, dx = dy / eps
    xs, dys, ev = rng.standard_normal((1, M)) * 1e-3, rng.standard_normal((1, M)), 0.5
    res = spec_evaluate(NAME, {"x": xs}, config={"p": 2.0, "dim": 1, "eps": ev}, grad_outputs={"y": dys})
    f = sp.lambdify([dy[1], eps], E_DX.xreplace({j: 1}))
    chk.compare("y below eps", res.outputs["y"], xs / ev)
    chk.compare("dx below eps", res.grads["x"], f(dys, ev))
    return chk.done()
