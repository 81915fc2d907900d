"""BatchNorm's backward by the multivariate chain rule, in the order of seed 003, proven with SymPy.

One channel: its m values x_1..x_m (batch and spatial positions). Steps: the forward, dl/dgamma,
dl/dbeta, dl/dxhat, dl/dvar, dl/dmu, dl/dx, the compact form of refnorm/norms/batch_norm.py
(``_common.centered_backward``), then eval mode (running statistics folded into one affine map).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Erratum, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, dmu, dvar, dx, dxhat, dy, eps, g, i, j, k, l, m, mu, s, var, x, xhat, y

NAME = "batch_norm"
N = ROW.copy()
gamma = N.symbol("gamma", r"\gamma", "γ")
beta = N.symbol("beta", r"\beta", "β")
dgamma, dbeta = N.grad(gamma, "dgamma"), N.grad(beta, "dbeta")
E = N.symbol("E", r"\operatorname{E}[x]", "E[x]")
V = N.symbol("V", r"\operatorname{Var}[x]", "Var[x]", positive=True)
K = N.symbol("K", "K", integer=True, positive=True)
mu_b = N.indexed("mu_b", r"\mu_{{\mathcal{{B}},{i}}}", "μ_B[{i}]")
var_b = N.indexed("var_b", r"\sigma^2_{{\mathcal{{B}},{i}}}", "σ²_B[{i}]")
rho = N.symbol("rho", r"\rho", "ρ")
Vnew = N.symbol("Vnew", r"\operatorname{Var}[x]_{\mathrm{new}}", "Var[x]_new")
half = sp.Rational(1, 2)

# ------------------------------------------------------------------------------------------- steps
F_MU = sp.Sum(x[i], (i, 1, m)) / m
F_VAR = sp.Sum((x[i] - mu) ** 2, (i, 1, m)) / m
F_XHAT = (x[j] - mu) / sp.sqrt(var + eps)
F_Y = sp.Add(gamma * xhat[j], beta, evaluate=False)
B_DGAMMA = sp.Sum(dy[i] * xhat[i], (i, 1, m))
B_DBETA = sp.Sum(dy[i], (i, 1, m))
B_DXHAT = gamma * dy[j]
B_DVAR = -half * (var + eps) ** (-3 * half) * sp.Sum(dxhat[i] * (x[i] - mu), (i, 1, m))
B_DMU = -sp.Sum(dxhat[i], (i, 1, m)) / sp.sqrt(var + eps) + dvar * sp.Sum(-2 * (x[i] - mu), (i, 1, m)) / m
B_DMU0 = -sp.Sum(dxhat[i], (i, 1, m)) / sp.sqrt(var + eps)
B_DX = sp.Add(dxhat[j] / sp.sqrt(var + eps), dvar * 2 * (x[j] - mu) / m, dmu / m, evaluate=False)
C_G = gamma * dy[j]
C_DX = (g[j] - sp.Sum(g[i], (i, 1, m)) / m - xhat[j] * sp.Sum(g[i] * xhat[i], (i, 1, m)) / m) / sp.sqrt(var + eps)
C_SUM = sp.Sum(dx[j], (j, 1, m))
EV_Y = sp.Add(gamma * (x[j] - E) / sp.sqrt(V + eps), beta, evaluate=False)
EV_AFFINE = sp.Add(gamma / sp.sqrt(V + eps) * x[j], beta, -gamma * E / sp.sqrt(V + eps), evaluate=False)
EV_DX = gamma * dy[j] / sp.sqrt(V + eps)
EV_DGAMMA = sp.Sum(dy[i] * (x[i] - E), (i, 1, m)) / sp.sqrt(V + eps)
EV_E = sp.Sum(mu_b[k], (k, 1, K)) / K
EV_V = m / (m - 1) * sp.Sum(var_b[k], (k, 1, K)) / K
EV_EMA = (1 - rho) * V + rho * m / (m - 1) * var


def document() -> Document:
    fwd = Section("Forward (training mode: batch statistics)", (
        Step("Mean of the channel's m values (all batch and spatial positions).", sp.Eq(mu, F_MU)),
        Step("Biased variance (divides by m): the one used to normalize.", sp.Eq(var, F_VAR)),
        Step("Normalize; ε sits inside the square root.", sp.Eq(xhat[j], F_XHAT)),
        Step("Scale and shift by the channel's γ and β.", sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward by the chain rule (the seed's order)", (
        "Given the upstream gradients ∂ℓ/∂y_i, each quantity's gradient collects every path through "
        "which it reaches ℓ; x_i reaches ℓ through x̂_i, μ and σ², and μ also through σ².",
        Step("γ scales every x̂_i, so its gradient sums over all m positions.", sp.Eq(dgamma, B_DGAMMA), "dgamma"),
        Step("β shifts every y_i by the same amount.", sp.Eq(dbeta, B_DBETA), "dbeta"),
        Step("x̂_j reaches ℓ only through y_j = γ x̂_j + β.", sp.Eq(dxhat[j], B_DXHAT), "dxhat"),
        Step("σ² reaches ℓ through every x̂_i, each via (σ²+ε)^(-1/2).", sp.Eq(dvar, B_DVAR), "dvar"),
        Step("μ reaches ℓ through every x̂_i, and through σ² = (1/m) Σ (x_i − μ)².", sp.Eq(dmu, B_DMU), "dmu"),
        Step("At μ = mean of x, Σ (x_i − μ) = 0: the σ² path to μ vanishes.", sp.Eq(dmu, B_DMU0), "dmu0"),
        Step("x_j reaches ℓ directly through x̂_j, and through σ² (∂σ²/∂x_j = 2(x_j − μ)/m) "
             "and μ (∂μ/∂x_j = 1/m).", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "Substituting steps 7–10 into step 11, with x̂ written back in: the formula of "
        "[`_common.centered_backward`](../refnorm/norms/_common.py), called by "
        "[`batch_norm.backward`](../refnorm/norms/batch_norm.py).",
        Step("Fold γ into the upstream gradient.", sp.Eq(g[j], C_G)),
        Step("The input gradient: two mean-removals, one per statistic.", sp.Eq(dx[j], C_DX), "compact"),
        Step("Hence the gradient sums to zero over the channel (a shift of x changes nothing).",
             sp.Eq(C_SUM, 0), "sum0"),
    ))
    evalm = Section("Eval mode: running statistics", (
        "The statistics are the running estimates E[x], Var[x]: constants, so no gradient flows through them.",
        Step("Normalize with the running estimates.", sp.Eq(y[j], EV_Y)),
        Step("Which is one affine map per channel (the seed's last formula, which is right).",
             sp.Eq(y[j], EV_AFFINE), "affine"),
        Step("So the input gradient is the affine map's slope (refnorm: `dx = g * rstd`).",
             sp.Eq(dx[j], EV_DX), "eval_dx"),
        Step("And ∂ℓ/∂γ uses the running statistics; ∂ℓ/∂β is unchanged (step 6).",
             sp.Eq(dgamma, EV_DGAMMA), "eval_dgamma"),
        Step("Ioffe & Szegedy (Alg. 2), as the seed: average over K training batches ...", sp.Eq(E, EV_E)),
        Step("... with Bessel's factor m/(m−1): the unbiased variance, although training normalizes "
             "with the biased one.", sp.Eq(V, EV_V)),
        Step("torch keeps an exponential average instead (momentum ρ = 0.1); "
             "`momentum=None` gives exactly the averages above.", sp.Eq(Vnew, EV_EMA)),
    ))
    seed = r"\frac{\partial \ell}{\partial y_i}"
    errata = (
        Erratum("Every sum", r"\sum_{i=0}^{m}", r"\sum_{i=1}^{m}",
                "A batch of m values is indexed 1..m (or 0..m−1): i = 0..m counts m + 1 terms."),
        Erratum("∂ℓ/∂γ", r"\frac{\partial \ell}{\partial \gamma} = " + seed + r"\sum_{i=0}^m\hat{x}_i",
                sp.Eq(dgamma, B_DGAMMA),
                "Each x̂_i is weighted by its own upstream gradient, so the factor belongs inside the sum."),
        Erratum("∂ℓ/∂β", r"\frac{\partial \ell}{\partial \beta} = " + seed + r"\sum_{i=0}^m",
                sp.Eq(dbeta, B_DBETA), "The sum has lost its summand: it is the sum of the upstream gradients."),
        Erratum("∂ℓ/∂x̂", r"\frac{\partial \ell}{\partial \hat{x}_i} = \gamma", sp.Eq(dxhat[j], B_DXHAT),
                "γ is ∂y_i/∂x̂_i; the chain rule multiplies it by ∂ℓ/∂y_i."),
        Erratum("∂ℓ/∂μ", r"\frac{\partial \ell}{\partial \mu} = \frac{\partial \ell}{\partial \hat{x}_i}"
                r"\sum_{i=0}^{m}-\frac{1}{\sqrt{\sigma^2 + \varepsilon}} + \frac{\partial \ell}{\partial \sigma^2}"
                r"\frac{\sum_{i=0}^m-2(x_i - \mu)}{m}", sp.Eq(dmu, B_DMU),
                "∂ℓ/∂x̂_i depends on i and must stay inside the first sum; the second term is right (and is 0)."),
        Erratum("∂ℓ/∂x", r"\frac{\partial \ell}{\partial x_i} = \frac{\partial \ell}{\partial \hat{x}_i}"
                r"(\sigma^2 + \varepsilon)^{-\frac{1}{2}} + \frac{\partial \ell}{\partial \sigma^2}\frac{1}{m}"
                r"\sum_{i=0}^m 2(x_i-\mu) + \frac{\partial \ell}{\partial \mu}\frac{1}{m}", sp.Eq(dx[j], B_DX),
                "∂σ²/∂x_j = 2(x_j − μ)/m involves x_j alone; the seed's sum is identically 0 and would drop "
                "the whole variance path (the third term of the closed form). `prove()` checks that the "
                "seed's version is not the gradient."),
    )
    return Document(
        name=NAME, title="BatchNorm: the backward pass, step by step", notation=N,
        intro=("BatchNorm (Ioffe & Szegedy 2015) normalizes each channel over the batch and spatial axes. "
               "Everything below concerns one channel and its m values; the other channels are independent.",
               "ℓ is the loss and ∂ℓ/∂y_i the upstream gradient (the cotangent `grad_outputs['y']`)."),
        sections=(fwd, bwd, compact, evalm),
        errata_source="seed 003 (notes in Chinese on BatchNorm's backward)", errata=errata,
        checks=(
            "`prove()`: each backward step equals the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i through the "
            "forward graph, for m = 2, 3, 4, 5 (explicit terms) and for general m (indexed sums, "
            "Kronecker deltas resolved for 1 ≤ j ≤ m); so do the closed form, the zero sum and eval mode.",
            "`prove()` also checks that the seed's ∂ℓ/∂x (with the sum) is not the gradient.",
            f"`check_numeric()`: the closed forms, lambdified, against {spec_ref(NAME)} "
            "in float64 (outputs, dx, dweight, dbias; eval mode; running statistics with `momentum=None` "
            "and with ρ = 0.1).",
        ),
        links=navigation("batch_norm", None, "layer_norm"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def _defs():
    """The forward as functions of x alone (for the true derivatives) and the substitution rules."""
    MU = sp.Sum(x[k], (k, 1, m)) / m
    VAR = sp.Sum((x[l] - MU) ** 2, (l, 1, m)) / m
    XH = lambda q: (x[q] - MU) / sp.sqrt(VAR + eps)  # noqa: E731
    L = sp.Sum(dy[i] * (gamma * XH(i) + beta), (i, 1, m))
    return MU, VAR, XH, L


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Check every claimed step symbolically; returns the claims checked, raises ProofError otherwise."""
    P = Prover(NAME)
    MU, VAR, XH, L = _defs()
    base = {VAR + eps: s}
    stats = {mu: MU, var: VAR}
    sub_dxhat = by_index(dxhat, lambda q: gamma * dy[q])
    sub_xhat = by_index(xhat, XH)
    P.identity("dgamma", lambda J: sp.diff(L, gamma) - subs_all(B_DGAMMA, sub_xhat),
               m=m, sizes=sizes, general=general, base=base)
    P.identity("dbeta", lambda J: sp.diff(L, beta) - B_DBETA, m=m, sizes=sizes, general=general)
    X = sp.IndexedBase("X")     # x-hat as an independent variable of the graph
    P.identity("dxhat", lambda J: sp.diff(sp.Sum(dy[i] * (gamma * X[i] + beta), (i, 1, m)), X[J])
               - B_DXHAT.xreplace({j: J}), m=m, j=j, sizes=sizes, general=general)
    # graph view: l(x, mu, var) with mu and var independent nodes
    Lg = sp.Sum(dy[i] * (gamma * (x[i] - mu) / sp.sqrt(var + eps) + beta), (i, 1, m))
    P.identity("dvar", lambda J: sp.diff(Lg, var) - subs_all(B_DVAR, sub_dxhat),
               m=m, sizes=sizes, general=general)
    VMU = sp.Sum((x[l] - mu) ** 2, (l, 1, m)) / m          # var as a function of (x, mu)
    P.identity("dmu", lambda J: sp.diff(Lg.xreplace({var: VMU}), mu)
               - subs_all(B_DMU, {dvar: B_DVAR}, sub_dxhat, {var: VMU}),
               m=m, sizes=sizes, general=general, base={VMU + eps: s})
    P.identity("dmu0", lambda J: subs_all(B_DMU - B_DMU0, {dvar: B_DVAR}, sub_dxhat, stats),
               m=m, sizes=sizes, general=general, base=base)
    true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
    P.identity("dx", lambda J: true_dx(J) - subs_all(B_DX.xreplace({j: J}), {dmu: B_DMU, dvar: B_DVAR},
                                                      sub_dxhat, stats),
               m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity("compact", lambda J: true_dx(J) - subs_all(C_DX.xreplace({j: J}), by_index(g, lambda q: gamma * dy[q]),
                                                           sub_xhat, stats),
               m=m, j=j, sizes=sizes, general=general, base=base)
    sub_g = by_index(g, lambda r: gamma * dy[r])
    compact_of = lambda q: subs_all(C_DX.xreplace({j: q}), sub_g, sub_xhat, stats)  # noqa: E731
    P.identity("sum0", lambda J: sp.Sum(compact_of(k), (k, 1, m)), m=m, sizes=sizes, general=general, base=base)
    # eval mode: E and V are constants
    Le = sp.Sum(dy[i] * EV_Y.xreplace({j: i}), (i, 1, m))
    P.identity("affine", lambda J: (EV_Y - EV_AFFINE).xreplace({j: J}), m=m, j=j, sizes=sizes, general=general)
    P.identity("eval_dx", lambda J: sp.diff(Le, x[J]) - EV_DX.xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general)
    P.identity("eval_dgamma", lambda J: sp.diff(Le, gamma) - EV_DGAMMA, m=m, sizes=sizes, general=general)
    # erratum: the seed's dl/dx (with the sum over 2(x_i - mu)) is not the gradient
    seed_dx = dxhat[j] / sp.sqrt(var + eps) + dvar * sp.Sum(2 * (x[i] - mu), (i, 1, m)) / m + dmu / m
    P.identity("seed dx is wrong", lambda J: true_dx(J) - subs_all(seed_dx.xreplace({j: J}),
                                                                   {dmu: B_DMU, dvar: B_DVAR}, sub_dxhat, stats),
               m=m, j=j, sizes=sizes, general=general, base=base, expect_zero=False)
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def _concrete(expr, M, J=None):
    e = expr if J is None else expr.xreplace({j: J})
    return e.xreplace({m: M}).doit()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    """The closed forms (lambdified) against the specification; returns the worst relative error."""
    rng = np.random.default_rng(20261122) if rng is None else rng
    Nb, C, S = 3, 2, 2
    M = Nb * S
    xs = rng.standard_normal((Nb, C, S)) * 2 + 0.5
    w, b = rng.standard_normal(C), rng.standard_normal(C)
    dyv = rng.standard_normal(xs.shape)
    ev = 1e-3
    chk = NumericCheck(NAME, tol)
    res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": b}, config={"eps": ev},
                           grad_outputs={"y": dyv})
    cols = lambda a: np.moveaxis(a, 1, 0).reshape(C, M)  # noqa: E731  (C, m): channel c's m values
    X, DY = cols(xs), cols(dyv)
    sc = {eps: ev, gamma: w, beta: b}
    MU, VAR, _, _ = _defs()
    stats = {mu: MU, var: VAR}
    xh = by_index(xhat, lambda q: F_XHAT.xreplace({j: q}))
    y_f = [_concrete(subs_all(F_Y, xh, stats), M, J) for J in range(1, M + 1)]
    dx_f = [_concrete(subs_all(C_DX, by_index(g, lambda q: gamma * dy[q]), xh, stats), M, J) for J in range(1, M + 1)]
    sub_dxhat = by_index(dxhat, lambda q: gamma * dy[q])
    chain = [_concrete(subs_all(B_DX, {dmu: B_DMU, dvar: B_DVAR}, sub_dxhat, stats), M, J) for J in range(1, M + 1)]
    dg_f = _concrete(subs_all(B_DGAMMA, xh, stats), M)
    db_f = _concrete(B_DBETA, M)
    vals = lambdify_slices(y_f + dx_f + chain + [dg_f, db_f], {x: X, dy: DY}, sc, M)
    back = lambda cols_: np.moveaxis(np.stack(cols_, -1).reshape(C, Nb, S), 0, 1)  # noqa: E731
    chk.compare("y (forward)", res.outputs["y"], back(vals[:M]))
    chk.compare("dx (closed form)", res.grads["x"], back(vals[M:2 * M]))
    chk.compare("dx (chain rule, step 11)", res.grads["x"], back(vals[2 * M:3 * M]))
    chk.compare("dweight", res.grads["weight"], vals[3 * M])
    chk.compare("dbias", res.grads["bias"], vals[3 * M + 1])
    # eval mode with running statistics
    rm, rv = rng.standard_normal(C), rng.uniform(0.5, 2.0, C)
    res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": b}, config={"eps": ev}, grad_outputs={"y": dyv},
                           state={"running_mean": rm, "running_var": rv}, training=False)
    sc_e = {eps: ev, gamma: w, beta: b, E: rm, V: rv}
    ya = [_concrete(EV_AFFINE, M, J) for J in range(1, M + 1)]
    dxe = [_concrete(EV_DX, M, J) for J in range(1, M + 1)]
    vals = lambdify_slices(ya + dxe + [_concrete(EV_DGAMMA, M)], {x: X, dy: DY}, sc_e, M)
    chk.compare("eval y (affine form)", res.outputs["y"], back(vals[:M]))
    chk.compare("eval dx", res.grads["x"], back(vals[M:2 * M]))
    chk.compare("eval dweight", res.grads["weight"], vals[2 * M])
    # running statistics: momentum=None is the plain average of K batches (E, Var of Alg. 2)
    state = {"running_mean": np.zeros(C), "running_var": np.ones(C)}
    batches = [rng.standard_normal((Nb, C, S)) * rng.uniform(0.5, 3) + rng.standard_normal() for _ in range(3)]
    for xb in batches:
        state = dict(spec_evaluate(NAME, {"x": xb}, config={"momentum": None}, state=state).state)
    Kb = len(batches)
    mus = np.stack([cols(xb).mean(1) for xb in batches], -1)
    vars_ = np.stack([cols(xb).var(1) for xb in batches], -1)
    fE = sp.lambdify([[mu_b[q] for q in range(1, Kb + 1)]], EV_E.xreplace({K: Kb}).doit())
    fV = sp.lambdify([[var_b[q] for q in range(1, Kb + 1)]], EV_V.xreplace({K: Kb, m: M}).doit())
    chk.compare("running_mean = E[x] (momentum=None)", state["running_mean"], fE(list(mus.T)))
    chk.compare("running_var = Var[x] (momentum=None)", state["running_var"], fV(list(vars_.T)))
    # one step of the exponential average, torch's default momentum
    rv0 = rng.uniform(0.5, 2.0, C)
    st1 = spec_evaluate(NAME, {"x": xs}, config={"momentum": 0.1},
                           state={"running_mean": np.zeros(C), "running_var": rv0}).state
    fema = sp.lambdify([V, var, rho], EV_EMA.xreplace({m: M}))
    chk.compare("running_var EMA (momentum 0.1)", st1["running_var"], fema(rv0, cols(xs).var(1), 0.1))
    return chk.done()
