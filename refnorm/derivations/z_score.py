"""Z-score scaling's backward (refnorm/norms/z_score.py), proven with SymPy for symbolic ddof.

One slice: the n values x_1..x_n of the ``dim`` axes. The forward of the module docstring,

    mu = (1/n) sum x_i,   v = sum (x_i - mu)^2 / (n - ddof),   xhat_j = (x_j - mu) / sqrt(v + eps),
    y_j = gamma_j xhat_j + beta_j,

is LayerNorm's except for the variance's divisor n - ddof (delta below). The chain rule is therefore
layer_norm.py's with dv/dx_j = 2 (x_j - mu) / (n - delta) instead of 2 (x_j - mu) / m, and the closed
form is

    dx_j = (g_j - (1/n) sum g_i - xhat_j sum g_i xhat_i / (n - delta)) / sqrt(v + eps),  g_j = gamma_j dl/dy_j,

the equation of ``z_score.backward``. ``prove()`` checks every step for n = 2..5 and general n with
delta a symbol; ``check_numeric()`` runs ddof = 0, 1, 2, eps = 0 and eps > 0, and the constant-slice rule.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, affine, dmu, dx, dxhat, dy, eps, g, i, j, k, l, mu, s, x, xhat, y

NAME = "z_score"
N = ROW.copy()
n = N.symbol("n", "n", integer=True, positive=True)
ddof = N.symbol("ddof", r"\delta", "δ", integer=True, nonnegative=True)
v = N.symbol("v", "v", "v")
dv = N.grad(v, "dv")
gamma, beta, dgamma, dbeta = affine(N, "e")

F_MU = sp.Sum(x[i], (i, 1, n)) / n
F_V = sp.Sum((x[i] - mu) ** 2, (i, 1, n)) / (n - ddof)
F_XHAT = (x[j] - mu) / sp.sqrt(v + eps)
F_Y = sp.Add(gamma[j] * xhat[j], beta[j], evaluate=False)
B_DGAMMA = dy[j] * xhat[j]
B_DBETA = dy[j]
B_G = gamma[j] * dy[j]
B_DV = -sp.Sum(g[i] * (x[i] - mu), (i, 1, n)) / (2 * (v + eps) ** sp.Rational(3, 2))
B_DMU = -sp.Sum(g[i], (i, 1, n)) / sp.sqrt(v + eps)
B_DX = sp.Add(g[j] / sp.sqrt(v + eps), dv * 2 * (x[j] - mu) / (n - ddof), dmu / n, evaluate=False)
C_DX = (g[j] - sp.Sum(g[i], (i, 1, n)) / n
        - xhat[j] * sp.Sum(g[i] * xhat[i], (i, 1, n)) / (n - ddof)) / sp.sqrt(v + eps)
C_SUM = sp.Sum(dx[j], (j, 1, n))
C_ORTH_L = sp.Sum(x[j] * dx[j], (j, 1, n))
C_ORTH_R = eps * sp.Sum(g[i] * (x[i] - mu), (i, 1, n)) / (v + eps) ** sp.Rational(3, 2)
K_DX = (g[j] - sp.Sum(g[i], (i, 1, n)) / n) / sp.sqrt(eps)


def document() -> Document:
    fwd = Section("Forward (one slice)", (
        Step("Mean of the slice's n values (the `dim` axes; default the last).", sp.Eq(mu, F_MU)),
        Step("Variance with divisor n − δ, δ = `ddof` (default 1: the seed's N − 1, torch.std's correction).",
             sp.Eq(v, F_V)),
        Step("Standardize; ε (default 0) inside the square root.", sp.Eq(xhat[j], F_XHAT)),
        Step("Optional element-wise affine over the slice's shape (γ = 1, β = 0 without it).",
             sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward", (
        "The graph is [LayerNorm's](layer_norm.md); only the variance's divisor differs, so ∂v/∂x_j = "
        "2(x_j − μ)/(n − δ) while ∂μ/∂x_j = 1/n.",
        Step("Per slice; refnorm sums this over the other axes.", sp.Eq(dgamma[j], B_DGAMMA), "dgamma"),
        Step("Likewise.", sp.Eq(dbeta[j], B_DBETA), "dbeta"),
        Step("x̂_j reaches ℓ through y_j only: call it g_j.", sp.Eq(dxhat[j], B_G), "dxhat"),
        Step("v reaches ℓ through every x̂_i, via (v + ε)^(−1/2).", sp.Eq(dv, B_DV), "dv"),
        Step("μ reaches ℓ through every x̂_i; its path through v vanishes (Σ (x_i − μ) = 0).",
             sp.Eq(dmu, B_DMU), "dmu"),
        Step("The three paths from x_j.", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "[`z_score.backward`](../refnorm/norms/z_score.py) computes, with g_j = γ_j ∂ℓ/∂y_j:",
        Step("Two mean-removals; the second divides by n − δ, not n (at δ = 0 this is "
             "[LayerNorm's](layer_norm.md) formula).", sp.Eq(dx[j], C_DX), "compact"),
        Step("The gradient sums to zero over the slice (a shift of x changes nothing).", sp.Eq(C_SUM, 0), "sum0"),
        Step("Its component along x: zero at ε = 0 (y does not change when x is scaled, "
             "because Σ x̂_i² = n − δ there).", sp.Eq(C_ORTH_L, C_ORTH_R), "orth"),
    ))
    const = Section("A constant slice", (
        "There x_j = μ for every j, so v = 0 and x̂ = 0.",
        Step("With ε > 0 the closed form is differentiable there and gives (step 11 with x̂ = 0):",
             sp.Eq(dx[j], K_DX), "const"),
        "With ε = 0 the forward is 0/0; refnorm's convention is y = 0 (then y = β) and ∂ℓ/∂x = 0, the "
        "derivative of the constant it chose (autograd of the safe composition "
        "`where(std == 0, 0, d / where(std == 0, 1, std))` gives the same). It is a convention, not a "
        "derivative: y is scale invariant, and slices near a constant one reach every unit-variance pattern. "
        "For n − δ ≤ 0 the variance is undefined and refnorm returns NaN for y and ∂ℓ/∂x.",
    ))
    return Document(
        name=NAME, title="Z-score scaling: the backward pass", notation=N,
        intro=("Z-score scaling (seed 002's \"feature normalization\" in place of LayerNorm) standardizes each "
               "slice over the `dim` axes with the variance divided by n − δ. Below: one slice of n values; "
               "the slices are independent except for γ and β, which they share.",),
        sections=(fwd, bwd, compact, const),
        checks=(
            "`prove()`: every backward step, the closed form, the zero sum and the component along x against "
            "the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i, with a different γ_i, β_i at every position and the divisor "
            "n − δ a free symbol, for n = 2..5 and for general n; the constant-slice gradient at ε > 0.",
            f"`check_numeric()`: the closed forms against {spec_ref(NAME)} (y, dx, dweight, "
            "dbias) for ddof = 0, 1, 2, ε = 0 and ε > 0, one and two `dim` axes; a constant slice with ε > 0 "
            "(the formula) and with ε = 0 (the convention y = β, ∂ℓ/∂x = 0).",
        ),
        links=navigation("z_score", "min_max_scale", "mean_variance_norm"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def _defs(div=n - ddof):
    """(MU, V, XH, L): the forward as functions of x (eqs. 1-4) and ℓ = Σ ∂ℓ/∂y_i y_i; ``div`` the
    variance's divisor."""
    MU = sp.Sum(x[k], (k, 1, n)) / n
    V = sp.Sum((x[l] - MU) ** 2, (l, 1, n)) / div
    XH = lambda q: (x[q] - MU) / sp.sqrt(V + eps)  # noqa: E731
    L = sp.Sum(dy[i] * (gamma[i] * XH(i) + beta[i]), (i, 1, n))
    return MU, V, XH, L


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Every keyed step of document() as an identity (n = ``sizes`` and general n).

    The divisor n − δ is replaced by a positive symbol R that nothing ties to n: the identities hold
    for every R > 0, hence for R = n − δ with any δ < n (and SymPy need not expand 1/(n − δ))."""
    P = Prover(NAME)
    R = sp.Symbol("R", positive=True)
    div = lambda e: e.xreplace({n - ddof: R})  # noqa: E731
    B_DX_, C_DX_ = div(B_DX), div(C_DX)
    MU, V, XH, L = _defs(R)
    base = {V + eps: s}
    stats = {mu: MU, v: V}
    sub_g = by_index(g, lambda q: gamma[q] * dy[q])
    sub_xh = by_index(xhat, XH)
    P.identity("dgamma", lambda J: sp.diff(L, gamma[J]) - subs_all(B_DGAMMA.xreplace({j: J}), sub_xh),
               m=n, j=j, sizes=sizes, general=general, base=base)
    P.identity("dbeta", lambda J: sp.diff(L, beta[J]) - B_DBETA.xreplace({j: J}), m=n, j=j, sizes=sizes,
               general=general)
    X = sp.IndexedBase("X")     # x-hat as an independent node of the graph
    P.identity("dxhat", lambda J: sp.diff(sp.Sum(dy[i] * (gamma[i] * X[i] + beta[i]), (i, 1, n)), X[J])
               - B_G.xreplace({j: J}), m=n, j=j, sizes=sizes, general=general)
    # graph view: ℓ(x, μ, v) with μ and v independent nodes
    Lg = sp.Sum(dy[i] * gamma[i] * (x[i] - mu) / sp.sqrt(v + eps), (i, 1, n))
    P.identity("dv", lambda J: sp.diff(Lg, v) - subs_all(B_DV, sub_g), m=n, sizes=sizes, general=general)
    VMU = sp.Sum((x[l] - mu) ** 2, (l, 1, n)) / R                   # v as a function of (x, μ)
    P.identity("dmu", lambda J: subs_all(sp.diff(Lg.xreplace({v: VMU}), mu) - B_DMU, sub_g, stats),
               m=n, sizes=sizes, general=general, base=base)
    true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
    P.identity("dx", lambda J: true_dx(J) - subs_all(B_DX_.xreplace({j: J}), {dmu: B_DMU, dv: B_DV}, sub_g, stats),
               m=n, j=j, sizes=sizes, general=general, base=base)
    closed = lambda q: subs_all(C_DX_.xreplace({j: q}), sub_g, sub_xh, stats)  # noqa: E731
    P.identity("compact", lambda J: true_dx(J) - closed(J), m=n, j=j, sizes=sizes, general=general, base=base)
    P.identity("sum0", lambda J: sp.Sum(closed(k), (k, 1, n)), m=n, sizes=sizes, general=general, base=base)
    P.identity("orth", lambda J: sp.Sum(x[k] * closed(k), (k, 1, n)) - subs_all(C_ORTH_R, sub_g, stats),
               m=n, sizes=sizes, general=general, base=base, back={s: V + eps})
    # a constant slice (ε > 0): the true derivative at x_1 = ... = x_n = c, concrete n only
    c = sp.Symbol("c")
    for M in sizes:
        for J in range(1, M + 1):
            at_c = true_dx(J).xreplace({n: M}).doit().xreplace({x[q]: c for q in range(1, M + 1)})
            P.claim("const", f"{M}, j = {J}", at_c - subs_all(K_DX.xreplace({j: J}), sub_g).xreplace({n: M}))
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def closed_forms(M: int, dd: int):
    """Concrete expressions (x-hat, dx) of positions 1..M for n = M, ddof = dd."""
    MU, V, XH, _ = _defs()
    stats = {mu: MU, v: V}
    sub_g = by_index(g, lambda q: gamma[q] * dy[q])
    conc = lambda e: e.xreplace({n: M, ddof: dd}).doit()  # noqa: E731
    xhs = [conc(XH(J)) for J in range(1, M + 1)]
    dxs = [conc(subs_all(C_DX.xreplace({j: J}), sub_g, by_index(xhat, XH), stats)) for J in range(1, M + 1)]
    return xhs, dxs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261130) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    for shape, dim in (((4, 5), -1), ((2, 3, 2), [1, 2])):
        pshape = shape[1:]
        M = int(np.prod(pshape))
        for dd in (0, 1, 2):
            xhs, dxs = closed_forms(M, dd)
            for ev in (0.0, 1e-2):
                xs = rng.standard_normal(shape) * 2 - 0.5
                w, b, dyv = rng.standard_normal(pshape), rng.standard_normal(pshape), rng.standard_normal(shape)
                res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": b},
                                       config={"dim": dim, "ddof": dd, "eps": ev}, grad_outputs={"y": dyv})
                rows, drows = xs.reshape(-1, M), dyv.reshape(-1, M)
                vals = lambdify_slices(xhs + dxs, {x: rows, dy: drows, gamma: np.broadcast_to(w.reshape(M), rows.shape)},
                                       {eps: ev}, M)
                xhv, dxv = (np.stack(vals[a * M:(a + 1) * M], -1) for a in range(2))
                tag = f"{shape} ddof={dd} eps={ev}"
                chk.compare(f"y {tag}", res.outputs["y"], (xhv * w.reshape(M) + b.reshape(M)).reshape(shape))
                chk.compare(f"dx {tag}", res.grads["x"], dxv.reshape(shape))
                chk.compare(f"dweight {tag}", res.grads["weight"], (drows * xhv).sum(0).reshape(pshape))
                chk.compare(f"dbias {tag}", res.grads["bias"], drows.sum(0).reshape(pshape))
    # a constant slice (row 0) beside an ordinary one: eps > 0 gives step 14, eps = 0 the convention
    M = 4
    xs = np.stack([np.full(M, 1.75), rng.standard_normal(M)])
    w, b, dyv = rng.standard_normal(M), rng.standard_normal(M), rng.standard_normal((2, M))
    kdx = [K_DX.xreplace({j: J, n: M}).doit() for J in range(1, M + 1)]
    for ev in (1e-2, 0.0):
        res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": b}, config={"eps": ev}, grad_outputs={"y": dyv})
        if ev > 0:
            want = np.stack(lambdify_slices(kdx, {g: dyv[:1] * w}, {eps: ev}, M), -1)[0]
        else:
            want = np.zeros(M)
        chk.compare(f"constant slice y, eps={ev}", res.outputs["y"][0], b)
        chk.compare(f"constant slice dx, eps={ev}", res.grads["x"][0], want)
    return chk.done()
