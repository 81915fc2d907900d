"""Mean-variance normalization's backward (ONNX MeanVarianceNormalization; refnorm/norms/mean_variance_norm.py).

One slice: the n values x_1..x_n of the ``axes`` (default [0, 2, 3]). The forward of the module docstring
puts eps on the standard deviation, not inside the root:

    mu = (1/n) sum x_i,   sigma = sqrt((1/n) sum (x_i - mu)^2),   y_j = (x_j - mu) / (sigma + eps),

so sigma is differentiated on its own (d sigma / d x_j = (x_j - mu) / (n sigma), for sigma > 0) and the
closed form is

    dx_j = (g_j - (1/n) sum g_i - y_j (1/n) sum g_i (x_i - mu) / sigma) / (sigma + eps),   g = dl/dy,

the equation of ``mean_variance_norm.backward``. At a constant slice (sigma = 0) with eps > 0, y is
differentiable with dx_j = (g_j - mean g) / eps: ``prove()`` checks it as the directional derivative
along every direction.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, dmu, dx, eps, i, j, k, l, mu, var, x, y

NAME = "mean_variance_norm"
N = ROW.copy()
n = N.symbol("n", "n", integer=True, positive=True)
sigma = N.symbol("sigma", r"\sigma", "σ", positive=True)
g = N.indexed("g", r"\frac{{\partial \ell}}{{\partial y_{{{i}}}}}", "∂ℓ/∂y[{i}]")
dsig = N.grad(sigma, "dsig")
dsigdx = N.symbol("dsig_dx", r"\frac{\partial \sigma}{\partial x_{j}}", "∂σ/∂x[j]")
h = N.indexed("h", "h_{{{i}}}")
dirder = N.symbol("dirder", r"\frac{d}{dt} \ell(c + t h) \Big|_{t=0}", "d/dt ℓ(c + t h) at t = 0")
s = sp.Symbol("s", positive=True)       # stands for sigma^2 in the proofs
Dp = sp.Symbol("D", positive=True)      # stands for sigma + eps in the proofs

F_MU = sp.Sum(x[i], (i, 1, n)) / n
F_SIG = sp.sqrt(sp.Sum((x[i] - mu) ** 2, (i, 1, n)) / n)
F_Y = (x[j] - mu) / sp.Add(sigma, eps, evaluate=False)
B_DSIG = -sp.Sum(g[i] * (x[i] - mu), (i, 1, n)) / sp.Add(sigma, eps, evaluate=False) ** 2
B_DSIGX = (x[j] - mu) / (n * sigma)
B_DMU = -sp.Sum(g[i], (i, 1, n)) / sp.Add(sigma, eps, evaluate=False)
B_DX = sp.Add(g[j] / sp.Add(sigma, eps, evaluate=False), dsig * dsigdx, dmu / n, evaluate=False)
C_DX = (g[j] - sp.Sum(g[i], (i, 1, n)) / n
        - y[j] * sp.Sum(g[i] * (x[i] - mu) / sigma, (i, 1, n)) / n) / sp.Add(sigma, eps, evaluate=False)
C_SUM = sp.Sum(dx[j], (j, 1, n))
LN_DX = bn.C_DX.xreplace({bn.m: n, bn.g: g, bn.xhat: y, var: sigma ** 2, eps: 0})
K_DIR = sp.Sum(g[i] * (h[i] - sp.Sum(h[k], (k, 1, n)) / n), (i, 1, n)) / eps
K_DX = (g[j] - sp.Sum(g[i], (i, 1, n)) / n) / eps


def document() -> Document:
    fwd = Section("Forward (one slice)", (
        Step("Mean over the slice's n values (the `axes`; default [0, 2, 3], per channel of NCHW).",
             sp.Eq(mu, F_MU)),
        Step("Biased standard deviation, without ε.", sp.Eq(sigma, F_SIG)),
        Step("ε (default 1e-9, ONNX's constant) is added to σ, not to the variance; no affine.",
             sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward (σ > 0)", (
        "x_j reaches ℓ through y_j, μ and σ. Unlike [LayerNorm](layer_norm.md), ε is outside the root, so "
        "the chain goes through σ itself rather than through σ² + ε.",
        Step("σ divides every y_i.", sp.Eq(dsig, B_DSIG), "dsig"),
        Step("σ's own derivative; its path through μ vanishes (Σ (x_i − μ) = 0).", sp.Eq(dsigdx, B_DSIGX), "dsigx"),
        Step("μ reaches ℓ through every y_i; its path through σ vanishes likewise.", sp.Eq(dmu, B_DMU), "dmu"),
        Step("The three paths from x_j (∂μ/∂x_j = 1/n).", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "[`mean_variance_norm.backward`](../refnorm/norms/mean_variance_norm.py) computes, with y_j the output:",
        Step("Two mean-removals; the second is weighted by (x_i − μ)/σ, the first by nothing, and both are "
             "divided by σ + ε.", sp.Eq(dx[j], C_DX), "compact"),
        Step("The gradient sums to zero over the slice.", sp.Eq(C_SUM, 0), "sum0"),
        Step("At ε = 0, where y_j = (x_j − μ)/σ, it is [BatchNorm's](batch_norm.md) closed form "
             "(`_common.centered_backward`) with ε = 0, x̂ = y and g = ∂ℓ/∂y.", sp.Eq(C_DX.xreplace({eps: 0}), LN_DX), "eps0"),
    ))
    const = Section("A constant slice (σ = 0)", (
        "Steps 4–7 need σ > 0. At a constant slice x = c (every x_i equal) with ε > 0, along any direction h "
        "and t > 0, σ(c + t h) = t σ(h), so y(c + t h) = t (h − mean h)/(t σ(h) + ε) = t (h − mean h)/ε + O(t²): "
        "y is differentiable there (the O(t²) term is bounded by |h|² uniformly).",
        Step("The directional derivative of ℓ = Σ g_i y_i at t = 0, for every h:", sp.Eq(dirder, K_DIR), "dir"),
        Step("It is linear in h, so this is the gradient; refnorm returns it (step 8 with y = 0, σ + ε = ε, "
             "and its last term, 0 times a 0/0 sum, taken as 0: `proj = 0` in the code).",
             sp.Eq(dx[j], K_DX), "const"),
        "Autograd of the same forward (torch) gives NaN there: the backward of sqrt at 0 multiplies ∞ by 0. "
        "With ε = 0 a constant slice is 0/0: y has no limit, and refnorm returns NaN for y and ∂ℓ/∂x.",
    ))
    return Document(
        name=NAME, title="Mean-variance normalization: the backward pass", notation=N,
        intro=("ONNX's MeanVarianceNormalization standardizes each slice over `axes` with ε added to the "
               "standard deviation (its function body adds 1e-9 to √Var). Below: one slice of n values; "
               "g_j = ∂ℓ/∂y_j is the upstream gradient.",),
        sections=(fwd, bwd, compact, const),
        checks=(
            "`prove()`: every backward step and the closed form against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i "
            "(σ > 0), the zero sum, the ε = 0 case, and the directional derivative at a constant slice, for "
            "n = 2..5 and for general n.",
            f"`check_numeric()`: against {spec_ref(NAME)} (y, dx) for the default "
            "axes of an NCHW tensor and one other axis, ε = 1e-9, 0.1 and 0; a constant slice with ε > 0 "
            "(step 12) and with ε = 0 (NaN).",
        ),
        links=navigation("mean_variance_norm", "z_score", "local_response_norm"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def _defs():
    """(MU, VAR, SIG, Y, L): the forward as functions of x (eqs. 1-3) and ℓ = Σ g_i y_i."""
    MU = sp.Sum(x[k], (k, 1, n)) / n
    VAR = sp.Sum((x[l] - MU) ** 2, (l, 1, n)) / n
    SIG = sp.sqrt(VAR)
    Y = lambda q: (x[q] - MU) / (SIG + eps)  # noqa: E731
    L = sp.Sum(g[i] * Y(i), (i, 1, n))
    return MU, VAR, SIG, Y, L


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Every keyed step of document() as an identity (n = ``sizes`` and general n)."""
    P = Prover(NAME)
    MU, VAR, SIG, Y, L = _defs()
    base = {SIG + eps: Dp, VAR: s}        # σ + ε first (xreplace matches the larger subtree)
    stats = {mu: MU, sigma: SIG}
    # graph view: ℓ(x, μ, σ) with μ and σ independent nodes
    Lg = sp.Sum(g[i] * (x[i] - mu) / (sigma + eps), (i, 1, n))
    P.identity("dsig", lambda J: sp.diff(Lg, sigma) - B_DSIG, m=n, sizes=sizes, general=general)
    P.identity("dsigx", lambda J: sp.diff(SIG, x[J]) - subs_all(B_DSIGX.xreplace({j: J}), stats),
               m=n, j=j, sizes=sizes, general=general, base=base)
    SMU = sp.sqrt(sp.Sum((x[l] - mu) ** 2, (l, 1, n)) / n)          # σ as a function of (x, μ)
    P.identity("dmu", lambda J: subs_all(sp.diff(Lg.xreplace({sigma: SMU}), mu) - B_DMU, stats),
               m=n, sizes=sizes, general=general, base=base)
    true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
    chain = subs_all(B_DX, {dsig: B_DSIG, dsigdx: B_DSIGX, dmu: B_DMU})      # ∂σ/∂x_j carries j
    P.identity("dx", lambda J: true_dx(J) - subs_all(chain.xreplace({j: J}), stats),
               m=n, j=j, sizes=sizes, general=general, base=base)
    closed = lambda q: subs_all(C_DX.xreplace({j: q}), by_index(y, Y), stats)  # noqa: E731
    P.identity("compact", lambda J: true_dx(J) - closed(J), m=n, j=j, sizes=sizes, general=general, base=base)
    P.identity("sum0", lambda J: sp.Sum(closed(k), (k, 1, n)), m=n, sizes=sizes, general=general, base=base)
    P.identity("eps0", lambda J: subs_all((C_DX.xreplace({eps: 0}) - LN_DX).xreplace({j: J}),
                                          by_index(y, lambda q: (x[q] - MU) / SIG), stats),
               m=n, j=j, sizes=sizes, general=general, base={VAR: s})
    # a constant slice: x = c + t h, σ(c + t h) = t σ(h) for t > 0 (σ(h) = S > 0 a symbol)
    t, S = sp.Symbol("t", positive=True), sp.Symbol("S", positive=True)
    Lt = sp.Sum(g[i] * t * (h[i] - sp.Sum(h[k], (k, 1, n)) / n) / (t * S + eps), (i, 1, n))
    P.identity("dir", lambda J: sp.diff(Lt, t).xreplace({t: 0}) - K_DIR, m=n, sizes=sizes, general=general)
    P.identity("const", lambda J: sp.Sum(h[k] * K_DX.xreplace({j: k}), (k, 1, n)) - K_DIR,
               m=n, sizes=sizes, general=general)
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def closed_forms(M: int):
    """Concrete expressions (y, dx) of positions 1..M for n = M."""
    MU, VAR, SIG, Y, _ = _defs()
    conc = lambda e: e.xreplace({n: M}).doit()  # noqa: E731
    ys = [conc(Y(J)) for J in range(1, M + 1)]
    dxs = [conc(subs_all(C_DX.xreplace({j: J}), by_index(y, Y), {mu: MU, sigma: SIG})) for J in range(1, M + 1)]
    return ys, dxs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261131) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    # (shape, axes, slices): the slices as rows of a (rows, n) view
    cases = (((3, 2, 2, 1), None, lambda a: np.moveaxis(a, 1, 0).reshape(2, -1)),
             ((4, 5), [1], lambda a: a))
    for shape, axes, rows in cases:
        M = rows(np.zeros(shape)).shape[1]
        ys, dxs = closed_forms(M)
        for ev in (1e-9, 0.1, 0.0):
            xs = rng.standard_normal(shape) * 1.5 + 0.7
            dyv = rng.standard_normal(shape)
            cfg = {"eps": ev, **({"axes": axes} if axes is not None else {})}
            res = spec_evaluate(NAME, {"x": xs}, config=cfg, grad_outputs={"y": dyv})
            X, G = rows(xs), rows(dyv)
            vals = lambdify_slices(ys + dxs, {x: X, g: G}, {eps: ev}, M)
            tag = f"{shape} axes={axes or 'default'} eps={ev}"
            chk.compare(f"y {tag}", rows(res.outputs["y"]), np.stack(vals[:M], -1))
            chk.compare(f"dx {tag}", rows(res.grads["x"]), np.stack(vals[M:], -1))
    # a constant slice (row 0) beside an ordinary one
    M = 5
    xs, dyv = np.stack([np.full(M, -2.5), rng.standard_normal(M)]), rng.standard_normal((2, M))
    kdx = [K_DX.xreplace({j: J, n: M}).doit() for J in range(1, M + 1)]
    ev = 0.1
    res = spec_evaluate(NAME, {"x": xs}, config={"axes": [1], "eps": ev}, grad_outputs={"y": dyv})
    chk.compare("constant slice y, eps > 0", res.outputs["y"][0], np.zeros(M))
    chk.compare("constant slice dx, eps > 0 (step 12)", res.grads["x"][0],
                np.stack(lambdify_slices(kdx, {g: dyv[:1]}, {eps: ev}, M), -1)[0])
    res = spec_evaluate(NAME, {"x": xs}, config={"axes": [1], "eps": 0.0}, grad_outputs={"y": dyv})
    chk.compare("constant slice, eps = 0: y and dx NaN",
                np.isnan(np.stack([res.outputs["y"][0], res.grads["x"][0]])).astype(float), np.ones((2, M)))
    return chk.done()
