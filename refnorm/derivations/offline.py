"""UN's offline framework: what the estimated gradient statistics replace in the exact chain rule (SymPy).

Framework: refnorm/norms/offline.py. One channel, its m values x_1..x_m in one training call; the
forward normalizes with estimated statistics, z_j = (x_j - mu_hat) / D, D = sqrt(sigma_hat^2 + eps),
and the backward is dx_j = (g_j - psi_mu - z_j psi_sigma) / D. ``prove()`` shows: the exact gradient
has exactly this form, with psi_mu, psi_sigma given by two batch sums of the upstream gradient, when the
estimators are (locally) linear in the batch statistics; and which terms PowerNorm and Batch Renorm use.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation
from ._symbols import dx, dy, eps, g, i, j, k, l, m, s, x

NAME = "offline"
N = bn.N.copy()
gamma, beta = bn.gamma, bn.beta
z = N.indexed("z", "z_{{{i}}}")
xt = N.indexed("xt", r"\tilde{{x}}_{{{i}}}", "x̃[{i}]")
muh = N.symbol("muh", r"\hat{\mu}", "μ̂")
D = N.symbol("D", "D", "D", positive=True)
mut = N.symbol("mut", r"\mu_t", "μ_t")
vart = N.symbol("vart", r"\sigma_t^2", "σ_t²", positive=True)
sigh = N.symbol("sigh", r"\hat{\sigma}^2", "σ̂²", positive=True)
pmu, psig = N.symbol("pmu", r"\psi_{\mu}", "ψ_μ"), N.symbol("psig", r"\psi_{\sigma}", "ψ_σ")
a_mu, c_mu = N.symbol("a_mu", r"a_{\mu}", "a_μ"), N.symbol("c_mu", r"c_{\mu}", "c_μ")
a_s, c_s = N.symbol("a_s", r"a_{\sigma}", "a_σ", nonnegative=True), N.symbol("c_s", r"c_{\sigma}", "c_σ",
                                                                              nonnegative=True)
r, d = N.symbol("r", "r", "r", positive=True), N.symbol("d", "d", "d")
sigB = N.symbol("sigB", r"\sigma_{\mathcal{B}}", "σ_B", positive=True)
nu0, nu1 = N.symbol("nu0", r"\nu_{t-1}", "ν_{t−1}"), N.symbol("nu1", r"\nu_t", "ν_t")
alpha = N.symbol("alpha", r"\alpha", "α")
Gam, Lam = N.symbol("Gam", r"\Gamma_t", "Γ_t"), N.symbol("Lam", r"\Lambda_t", "Λ_t")
v = N.symbol("v", r"\psi_{t-1}^2", "ψ²_{t−1}", positive=True)
dxf = N.indexed("dxf", r"\left(\frac{{\partial \ell}}{{\partial x_{{{i}}}}}\right)_{{\mathrm{{fw}}}}",
                "(∂ℓ/∂x[{i}])_fw")

MG = sp.Sum(g[i], (i, 1, m)) / m                 # mean(g)
MGZ = sp.Sum(g[i] * z[i], (i, 1, m)) / m         # mean(g z)
F_MUT = sp.Sum(x[i], (i, 1, m)) / m
F_VART = sp.Sum((x[i] - mut) ** 2, (i, 1, m)) / m
F_MS = sp.Sum(x[i] ** 2, (i, 1, m)) / m
F_MUH = a_mu + c_mu * mut
F_SIGH = a_s + c_s * vart
F_Z = (x[j] - muh) / D
F_D = sp.sqrt(sigh + eps)
F_DX = (g[j] - pmu - z[j] * psig) / D
E_PSIG = c_s * MGZ
E_PMU = c_mu * MG + c_s * (muh - mut) / D * MGZ
U_PSIG = c_s * MGZ
DIFF = (sp.Add(MG - pmu, evaluate=False) + z[j] * (MGZ - psig)) / D
R_Z = (x[j] - mut) / sigB * r + d
R_D = sigB / r
R_MUH = mut - d * sigB / r
R_PSIG = (MGZ - d * MG) / r ** 2
R_PMU = MG - d * psig
PN_DX = g[j] / D
PN_FW = (g[j] - nu0 * z[j]) / D
PN_NU = nu0 * (1 - (1 - alpha) * Gam) + (1 - alpha) * Lam
PN_EMA = alpha * nu0 + (1 - alpha) * Lam


def document() -> Document:
    fw = Section("The framework (one training call, one channel)", (
        "μ_t, σ_t² are the batch statistics (mean and biased variance; or μ_t = 0 and the mean square σ_t² = "
        "(1/m) Σ x_i² when uncentred). The estimators μ̂ = Θ_μ(μ_t, μ_{t−1}, …) and σ̂² = Θ_σ(σ_t², σ²_{t−1}, …) "
        "may use earlier calls; g_j = γ ∂ℓ/∂y_j.",
        Step("Normalize with the estimates.", sp.Eq(z[j], F_Z)),
        Step("The scale; ε inside the square root.", sp.Eq(D, F_D)),
        Step("The framework's backward: two gradient statistics ψ_μ = Θ_gμ(…), ψ_σ = Θ_gσ(…) (seed 000).",
             sp.Eq(dxf[j], F_DX)),
        Step("Against the same form with the two batch sums ψ_μ = (1/m) Σ g_i, ψ_σ = (1/m) Σ g_i z_i, the "
             "gap is what the estimates miss of those sums.", sp.Eq(
                 F_DX - (g[j] - MG - z[j] * MGZ) / D, DIFF), "gap"),
    ))
    exact = Section("What the exact chain rule needs", (
        "Take estimators linear in this call's statistic (an EMA with its history fixed: c = 1 − α; the current "
        "batch: a = 0, c = 1; a statistic of earlier calls only: c = 0), μ̂ = a_μ + c_μ μ_t and σ̂² = a_σ + c_σ σ_t². "
        "Any differentiable estimator is this to first order, with c the derivative with respect to the current "
        "statistic (the geometric mean of a window of M: c = G/(M σ_t²), [unified_norm](unified_norm.md)).",
        Step("Centred: the exact gradient is the framework's form with this ψ_σ ...", sp.Eq(psig, E_PSIG),
             "exact_centred"),
        Step("... and this ψ_μ (the second term appears when μ̂ ≠ μ_t: σ_t² is about μ_t, z about μ̂).",
             sp.Eq(pmu, E_PMU), "exact_centred"),
        Step("Uncentred (μ̂ = 0, σ_t² the mean square): ψ_μ = 0 and", sp.Eq(psig, U_PSIG), "exact_uncentred"),
        "So the current-batch estimators (c = 1, μ̂ = μ_t) give BatchNorm's closed form ([batch_norm](batch_norm.md)): "
        "`offline_batch_norm` is exact. An estimator that does not use the current batch (c = 0) has the exact "
        "gradient g/D. An offline method instead puts an estimate of the batch sums in ψ: UN an EMA of windowed "
        "means of (1/m) Σ g_i r z_i, PowerNorm an EMA ν, while its forward has c = 0.",
    ))
    brn = Section("Batch Renormalization (Ioffe 2017): r and d held constant", (
        "σ_B = √(σ_t² + ε), r = clip(σ_B/σ, 1/r_max, r_max), d = clip((μ_t − μ)/σ, −d_max, d_max), both "
        "treated as constants by the backward (stop_gradient); x̃_j = (x_j − μ_t)/σ_B.",
        Step("The normalized value of the paper.", sp.Eq(z[j], R_Z)),
        Step("Is the framework's z with this scale ...", sp.Eq(D, R_D)),
        Step("... and this mean.", sp.Eq(muh, R_MUH), "renorm_forward"),
        Step("The paper's backward (the chain rule through μ_t, σ_B) is the framework's with", sp.Eq(psig, R_PSIG),
             "renorm"),
        Step("and", sp.Eq(pmu, R_PMU), "renorm"),
        "With r = 1, d = 0 (r_max = 1, d_max = 0) this is BatchNorm. When r or d is not at its clip it depends "
        "on x, and the paper's backward is not the gradient of its forward (on purpose: the running statistics "
        "must not be trained by the batch).",
    ))
    pn = Section("PowerNorm (Shen et al. 2020): the paper departs from the framework's exact terms", (
        "The forward normalizes with the running quadratic mean of earlier calls, D = √(ψ²_{t−1} + ε) (c_σ = 0), "
        "μ̂ = 0.",
        Step("So the exact gradient of the forward is", sp.Eq(dx[j], PN_DX), "pn_exact"),
        Step("The paper's approximate backpropagation subtracts ν_{t−1} z_j (ψ_σ = ν_{t−1}, ψ_μ = 0):",
             sp.Eq(dxf[j], PN_FW)),
        Step("It differs from the exact gradient by", sp.Eq(PN_FW - PN_DX, -nu0 * z[j] / D), "pn_diff"),
        Step("ν is updated after use, with Γ_t = (1/m) Σ z_i² and Λ_t = (1/m) Σ g_i z_i:", sp.Eq(nu1, PN_NU)),
        Step("When the batch is normalized by its own statistic (Γ_t = 1) this is an EMA of Λ_t, the exact ψ_σ "
             "of the current-batch forward: ν estimates the term the chain rule through ψ²_B would give.",
             sp.Eq(PN_NU.xreplace({Gam: 1}), PN_EMA), "pn_ema"),
        "The official code differs again (documented in refnorm/norms/power_norm.py): it divides dx by the batch "
        "√(ψ²_B + ε) although its forward used the running one, and uses batch statistics during warm-up. "
        "refnorm's `power_norm` follows the paper.",
    ))
    return Document(
        name=NAME, title="UN's offline framework: estimated gradient statistics versus the chain rule", notation=N,
        intro=("Unified Normalization's paper (seed 000) writes offline normalizers as four averaging functions: "
               "two estimate the forward statistics, two the backward's gradient statistics. Below: which batch "
               "sums the gradient statistics stand for, and how BatchNorm, Batch Renormalization and PowerNorm "
               "fit ([offline.py](../refnorm/norms/offline.py)).",),
        sections=(fw, exact, brn, pn),
        checks=(
            "`prove()`: the gap identity; the exact gradients (derivative of ℓ = Σ ∂ℓ/∂y_i · y_i through the "
            "forward with linear estimators, centred and uncentred), Batch Renorm's ψ's and PowerNorm's exact "
            "gradient, for m = 2..5 and general m.",
            "`check_numeric()`: the framework's formulas against the specification (`refnorm.evaluate(..., engine='spec')`) for offline_batch_norm, "
            "batch_renorm (r and d inside and at their clips) and power_norm (ν ≠ 0).",
        ),
        links=navigation("offline", "unified_norm", "min_max_scale"),
    )


steps, render = family_functions(document)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    sub_g = by_index(g, lambda q: gamma * dy[q])
    MU_X = F_MUT.xreplace({i: k})
    VAR_X = sp.Sum((x[l] - MU_X) ** 2, (l, 1, m)) / m
    MS_X = F_MS.xreplace({i: l})
    # the gap identity (pure algebra)
    P.identity("gap", lambda J: (F_DX - (g[j] - MG - z[j] * MGZ) / D - DIFF).xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general)
    # centred, linear estimators
    MUH_X = F_MUH.xreplace({mut: MU_X})
    D_X = sp.sqrt(F_SIGH.xreplace({vart: VAR_X}) + eps)
    L = sp.Sum(dy[i] * (gamma * (x[i] - MUH_X) / D_X + beta), (i, 1, m))
    zs = by_index(z, lambda q: (x[q] - MUH_X) / D_X)
    base = {a_s + c_s * VAR_X + eps: s}

    def framework(J, ps, pm, zrule, extra):
        return subs_all(F_DX.xreplace({j: J}), {psig: ps, pmu: pm}, sub_g, zrule, extra)
    P.identity("exact_centred", lambda J: sp.diff(L, x[J]) - framework(
        J, E_PSIG, E_PMU, zs, {muh: MUH_X, mut: MU_X, D: D_X}), m=m, j=j, sizes=sizes, general=general, base=base)
    # uncentred
    D_U = sp.sqrt(a_s + c_s * MS_X + eps)
    Lu = sp.Sum(dy[i] * (gamma * x[i] / D_U + beta), (i, 1, m))
    zu = by_index(z, lambda q: x[q] / D_U)
    P.identity("exact_uncentred", lambda J: sp.diff(Lu, x[J]) - framework(J, U_PSIG, 0, zu, {D: D_U}),
               m=m, j=j, sizes=sizes, general=general, base={a_s + c_s * MS_X + eps: s})
    # Batch Renorm
    SB = sp.sqrt(VAR_X + eps)
    Lr = sp.Sum(dy[i] * (gamma * ((x[i] - MU_X) / SB * r + d) + beta), (i, 1, m))
    zr = by_index(z, lambda q: (x[q] - MU_X) / SB * r + d)
    P.identity("renorm_forward", lambda J: (R_Z - F_Z.xreplace({muh: R_MUH, D: R_D})).xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general, simplify=True)
    P.identity("renorm", lambda J: sp.diff(Lr, x[J]) - framework(J, R_PSIG, R_PMU.xreplace({psig: R_PSIG}), zr,
                                                                 {D: SB / r}),
               m=m, j=j, sizes=sizes, general=general, base={VAR_X + eps: s})
    # PowerNorm
    Lp = sp.Sum(dy[i] * (gamma * x[i] / sp.sqrt(v + eps) + beta), (i, 1, m))
    P.identity("pn_exact", lambda J: sp.diff(Lp, x[J]) - subs_all(PN_DX.xreplace({j: J}), sub_g,
                                                                   {D: sp.sqrt(v + eps)}),
               m=m, j=j, sizes=sizes, general=general)
    P.identity("pn_diff", lambda J: (PN_FW - PN_DX + nu0 * z[j] / D).xreplace({j: J}), m=m, j=j, sizes=sizes,
               general=general)
    P.identity("pn_ema", lambda J: PN_NU.xreplace({Gam: 1}) - PN_EMA, m=m, sizes=sizes, general=general)
    return P.done()


def _closed(expr_j, M, arrays, scalars):
    """A per-position closed form (index j), made concrete for m = M and evaluated per channel."""
    exprs = [expr_j.xreplace({j: J}).xreplace({m: M}).doit() for J in range(1, M + 1)]
    return np.stack(lambdify_slices(exprs, arrays, scalars, M), -1)


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261123) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    Nb, C, S = 3, 2, 2
    M = Nb * S
    xs, dys = 0.7 + 1.5 * rng.standard_normal((Nb, C, S)), rng.standard_normal((Nb, C, S))
    w, b = rng.standard_normal(C), rng.standard_normal(C)
    cols = lambda a: np.moveaxis(a, 1, 0).reshape(C, M)  # noqa: E731
    back = lambda a: np.moveaxis(a.reshape(C, Nb, S), 0, 1)  # noqa: E731
    X, G = cols(xs), cols(dys) * w[:, None]
    ev = 1e-3

    def fw(z_, scale, ps, pm):
        return _closed(F_DX, M, {g: G, z: z_}, {D: scale, psig: ps, pmu: pm})

    # offline_batch_norm: current batch, exact psi's
    res = spec_evaluate("offline_batch_norm", {"x": xs, "weight": w, "bias": b}, config={"eps": ev},
                           grad_outputs={"y": dys})
    mu_, var_ = X.mean(1), X.var(1)
    Dv = np.sqrt(var_ + ev)
    zv = (X - mu_[:, None]) / Dv[:, None]
    chk.compare("offline_batch_norm y", res.outputs["y"], back(w[:, None] * zv + b[:, None]))
    chk.compare("offline_batch_norm dx (psi = batch sums)", res.grads["x"],
                back(fw(zv, Dv, (G * zv).mean(1), G.mean(1))))
    # batch_renorm: one call inside the clips, one at them
    for label, st in (("inside the clips", {"running_mean": mu_ + 0.1, "running_std": np.sqrt(var_ + ev) * 1.2}),
                      ("at the clips", {"running_mean": mu_ - 50.0, "running_std": np.sqrt(var_ + ev) * 40.0})):
        st = {**st, "iters": np.array([3])}
        res = spec_evaluate("batch_renorm", {"x": xs, "weight": w, "bias": b}, config={"eps": ev}, state=st,
                               grad_outputs={"y": dys})
        sb = np.sqrt(var_ + ev)
        rr = np.clip(sb / st["running_std"], 1 / 3, 3)
        dd = np.clip((mu_ - st["running_mean"]) / st["running_std"], -5, 5)
        zr = _closed(R_Z, M, {x: X}, {mut: mu_, sigB: sb, r: rr, d: dd})
        psv, pmv = lambdify_slices([R_PSIG.xreplace({m: M}).doit(),
                                    R_PMU.xreplace({psig: R_PSIG}).xreplace({m: M}).doit()],
                                   {g: G, z: zr}, {r: rr, d: dd}, M)
        chk.compare(f"batch_renorm psi_sigma, {label} (the paper's backward)", psv,
                    ((G * zr).mean(1) - dd * G.mean(1)) / rr ** 2)
        chk.compare(f"batch_renorm y, {label}", res.outputs["y"], back(w[:, None] * zr + b[:, None]))
        chk.compare(f"batch_renorm dx, {label}", res.grads["x"], back(fw(zr, sb / rr, psv, pmv)))
    # power_norm (channel-last (P, C)): psi_sigma = nu_{t-1}, then the nu update
    xp, dyp = 1.5 * rng.standard_normal((M, C)), rng.standard_normal((M, C))
    st = {"running_phi": rng.uniform(0.5, 2, C), "nu": rng.standard_normal(C), "iters": np.array([5])}
    res = spec_evaluate("power_norm", {"x": xp, "weight": w}, config={"eps": ev}, state=st, grad_outputs={"y": dyp})
    Dp = np.sqrt(st["running_phi"] + ev)
    zp, Gp = (xp / Dp).T, (dyp * w).T
    chk.compare("power_norm dx = (g - nu z) / D", res.grads["x"], _closed(PN_FW, M, {g: Gp, z: zp},
                                                                            {nu0: st["nu"], D: Dp}).T)
    nu_new = sp.lambdify([nu0, alpha, Gam, Lam], PN_NU)(st["nu"], 0.9, (zp * zp).mean(1), (Gp * zp).mean(1))
    chk.compare("power_norm y", res.outputs["y"], (w[:, None] * zp).T)
    chk.compare("power_norm nu update", res.state["nu"], nu_new)
    return chk.done()
