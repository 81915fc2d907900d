"""Gated RMSNorm / LayerNorm's backward (Mamba2's RMSNormGated, the layernorm_gated kernels), proven with SymPy.

One group of m values (``group_size``; the groups of a row are independent, each its own row of m values, and
the affine and the gate are per element). The gate s_j = silu(z_j) enters either before the norm (v = x s,
``norm_before_gate=False``) or after it (y = (w x̂ + b) s); each path's gradients are proven for the RMS norm and,
before the gate, for the centred (LayerNorm) one. s_j depends on z_j alone, so ∂ℓ/∂z_j = silu'(z_j) ∂ℓ/∂s_j.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, spec_ref
from ._symbols import ROW, affine, dx, dy, eps, g, i, j, k, l, m, mu, s, var, x, xhat, y

NAME = "gated_norm"
N = ROW.copy()
nu = N.symbol("nu", r"\nu", "ν")
zz = N.symbol("zeta", r"\zeta", "ζ")
z = N.indexed("z", "z_{{{i}}}")
sg = N.indexed("sg", "s_{{{i}}}")
v = N.indexed("v", "v_{{{i}}}")
gamma, beta, dgamma, dbeta = affine(N, "e")
dv, dz = N.grad(v, "dv"), N.grad(z, "dz")
ds = N.indexed("ds", r"\frac{{\partial \ell}}{{\partial s_{{{i}}}}}", "∂ℓ/∂s[{i}]")
sig = N.symbol("sigma", r"\sigma", "σ")

SIG = 1 / (1 + sp.exp(-zz))
F_SILU = zz * SIG
D_SILU = SIG * (1 + zz * (1 - SIG))
F_V = x[j] * sg[j]
F_NU = sp.Sum(v[i] ** 2, (i, 1, m)) / m
F_VHAT = v[j] / sp.sqrt(nu + eps)
F_Y_BEFORE = sp.Add(gamma[j] * xhat[j], beta[j], evaluate=False)
F_Y_AFTER = sp.Mul(sp.Add(gamma[j] * xhat[j], beta[j], evaluate=False), sg[j], evaluate=False)
C_RMS = (g[j] - xhat[j] * sp.Sum(g[i] * xhat[i], (i, 1, m)) / m) / sp.sqrt(nu + eps)
C_LN = bn.C_DX
B_DX_BEFORE = sg[j] * dv[j]
B_DS_BEFORE = x[j] * dv[j]
B_DZ = sp.Mul(D_SILU.xreplace({zz: z[j]}), ds[j], evaluate=False)
B_DS_AFTER = dy[j] * sp.Add(gamma[j] * xhat[j], beta[j], evaluate=False)
B_G_AFTER = gamma[j] * sg[j] * dy[j]
B_DGAMMA_AFTER = sg[j] * dy[j] * xhat[j]
B_DBETA_AFTER = sg[j] * dy[j]


def document() -> Document:
    fwd = Section("Forward (one group of m values)", (
        Step("The gate: SiLU of z (σ the logistic sigmoid).", sp.Eq(sg[j], F_SILU.xreplace({zz: z[j]}))),
        Step("Gate before the norm (`norm_before_gate=False`, Mamba2's default): the norm sees v = x s; gate "
             "after the norm: v = x.", sp.Eq(v[j], F_V)),
        Step("Mean square of the group (RMSNorm; LayerNorm removes the group's mean first and uses its "
             "biased variance).", sp.Eq(nu, F_NU)),
        Step("Normalize; ε inside the square root.", sp.Eq(xhat[j], F_VHAT)),
        Step("Gate before the norm: the affine is the output.", sp.Eq(y[j], F_Y_BEFORE)),
        Step("Gate after the norm (`norm_before_gate=True`): the affine's output times the gate, as mamba's "
             "reference (the bias inside the product).", sp.Eq(y[j], F_Y_AFTER)),
    ))
    gate = Section("The gate's derivative", (
        Step("silu'(ζ) = σ(ζ) (1 + ζ (1 − σ(ζ))): the product rule on ζ σ(ζ) with σ' = σ (1 − σ).",
             sp.Eq(sp.Derivative(F_SILU, zz), D_SILU), "dsilu"),
        Step("s_j depends on z_j alone: the chain rule, with ∂ℓ/∂s_j from the sections below.",
             sp.Eq(dz[j], B_DZ)),
    ))
    before = Section("Gate before the norm", (
        "The norm's backward is RMSNorm's ([rms_norm](rms_norm.md)) or LayerNorm's ([layer_norm](layer_norm.md)) "
        "in v; the gate then splits it between x and s.",
        Step("RMSNorm in v, g_j = γ_j ∂ℓ/∂y_j.", sp.Eq(dv[j], C_RMS), "b_dv"),
        Step("x reaches ℓ through v only.", sp.Eq(dx[j], B_DX_BEFORE), "b_dx"),
        Step("So does s: the gate's gradient carries x, and dz = silu'(z) x ∂ℓ/∂v.",
             sp.Eq(ds[j], B_DS_BEFORE), "b_ds"),
        Step("The weight's gradient, per row (refnorm sums it over the rows); the bias's is ∂ℓ/∂y_j.",
             sp.Eq(dgamma[j], dy[j] * xhat[j]), "b_dgamma"),
        Step("LayerNorm (μ and σ² of v): the centred closed form in v, times s_j for x.",
             sp.Eq(dx[j], sg[j] * C_LN), "b_ln"),
    ))
    after = Section("Gate after the norm", (
        Step("The gate multiplies the affine's output: ∂ℓ/∂s_j is the norm's output times ∂ℓ/∂y_j, "
             "and dz = silu'(z) ∂ℓ/∂y (γ x̂ + β).", sp.Eq(ds[j], B_DS_AFTER), "a_ds"),
        Step("x̂_j reaches ℓ scaled by γ_j s_j: the gate is folded into g before the mean.",
             sp.Eq(g[j], B_G_AFTER), "a_g"),
        Step("RMSNorm's closed form with that g.", sp.Eq(dx[j], C_RMS), "a_dx"),
        Step("The weight's gradient carries the gate (forgetting it is a planted pitfall, R-dwgate).",
             sp.Eq(dgamma[j], B_DGAMMA_AFTER), "a_dgamma"),
        Step("The bias's gradient likewise.", sp.Eq(dbeta[j], B_DBETA_AFTER), "a_dbeta"),
    ))
    groups = Section("Groups", (
        "`group_size` K splits each row of H values into H / K groups; every quantity above is per group "
        "(m = K), the statistics of one group never see another's. A backward that takes its two means over "
        "the whole row while the forward normalized groups is wrong whenever H / K > 1 (the bug of Mamba's "
        "layernorm_gated backward; planted as R-bwdgroup).",
    ))
    return Document(
        name=NAME, title="Gated RMSNorm / LayerNorm: the backward pass", notation=N,
        intro=("The gated norm of Mamba2 and gated-delta-net layers normalizes x * silu(z) (or normalizes x and "
               "multiplies by silu(z)), per group of the hidden dimension. One group of m values below.",),
        sections=(fwd, gate, before, after, groups),
        checks=(
            "`prove()`: every step against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i with a different γ_i, β_i and "
            "s_i at every position, for m = 2..5 and general m; silu' symbolically.",
            f"`check_numeric()`: against {spec_ref(NAME)}: y, dx, dz, dweight, dbias, both gate sides, RMSNorm and LayerNorm, "
            "three groups per row.",
        ),
        links=(("index", "README.md"), ("RMSNorm", "rms_norm.md"), ("LayerNorm", "layer_norm.md"),
               ("code: refnorm/specs/gated_norm.py", "../refnorm/specs/gated_norm.py")),
    )


steps, render = family_functions(document)


def _rms(vq):
    """(NU, VH, Lfun): the mean square of v, v-hat at q, and ℓ for a gain/shift/gate of position q."""
    NU = sp.Sum(vq(k) ** 2, (k, 1, m)) / m
    VH = lambda q: vq(q) / sp.sqrt(NU + eps)  # noqa: E731
    return NU, VH


def _ln(vq):
    MU = sp.Sum(vq(k), (k, 1, m)) / m
    VAR = sp.Sum((vq(l) - MU) ** 2, (l, 1, m)) / m
    VH = lambda q: (vq(q) - MU) / sp.sqrt(VAR + eps)  # noqa: E731
    return MU, VAR, VH


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    P.identity("dsilu", lambda J: sp.diff(F_SILU, zz) - D_SILU, m=m, sizes=sizes[:1], general=general,
               simplify=True)
    # gate before the norm, RMSNorm: l(x, s) = sum dy_i (gamma_i vhat_i + beta_i), v = x s
    NU, VH = _rms(lambda q: x[q] * sg[q])
    L = sp.Sum(dy[i] * (gamma[i] * VH(i) + beta[i]), (i, 1, m))
    base = {NU + eps: s}
    sub_g = by_index(g, lambda q: gamma[q] * dy[q])
    closed = lambda q: subs_all(C_RMS.xreplace({j: q}), sub_g, by_index(xhat, VH), {nu: NU})  # noqa: E731
    V = sp.IndexedBase("V")                  # v as an independent variable
    NUv, VHv = _rms(lambda q: V[q])
    Lv = sp.Sum(dy[i] * (gamma[i] * VHv(i) + beta[i]), (i, 1, m))
    closed_v = lambda q: subs_all(C_RMS.xreplace({j: q}), sub_g, by_index(xhat, VHv), {nu: NUv})  # noqa: E731
    P.identity("b_dv", lambda J: sp.diff(Lv, V[J]) - closed_v(J), m=m, j=j, sizes=sizes, general=general,
               base={NUv + eps: s})
    P.identity("b_dx", lambda J: sp.diff(L, x[J]) - sg[J] * closed(J), m=m, j=j, sizes=sizes, general=general,
               base=base)
    P.identity("b_ds", lambda J: sp.diff(L, sg[J]) - x[J] * closed(J), m=m, j=j, sizes=sizes, general=general,
               base=base)
    P.identity("b_dgamma", lambda J: sp.diff(L, gamma[J]) - dy[J] * VH(J), m=m, j=j, sizes=sizes, general=general,
               base=base)
    # gate before the norm, LayerNorm
    MU, VAR, VHl = _ln(lambda q: x[q] * sg[q])
    Ll = sp.Sum(dy[i] * (gamma[i] * VHl(i) + beta[i]), (i, 1, m))
    stats = {mu: MU, var: VAR}
    closed_l = lambda q: subs_all(C_LN.xreplace({j: q}), sub_g, by_index(xhat, VHl), stats)  # noqa: E731
    P.identity("b_ln", lambda J: sp.diff(Ll, x[J]) - sg[J] * closed_l(J), m=m, j=j, sizes=sizes, general=general,
               base={VAR + eps: s})
    # gate after the norm, RMSNorm of x: l = sum dy_i (gamma_i xhat_i + beta_i) s_i
    NUa, VHa = _rms(lambda q: x[q])
    La = sp.Sum(dy[i] * (gamma[i] * VHa(i) + beta[i]) * sg[i], (i, 1, m))
    basea = {NUa + eps: s}
    sub_ga = by_index(g, lambda q: gamma[q] * sg[q] * dy[q])
    P.identity("a_ds", lambda J: sp.diff(La, sg[J]) - subs_all(B_DS_AFTER.xreplace({j: J}), by_index(xhat, VHa)),
               m=m, j=j, sizes=sizes, general=general, base=basea)
    X = sp.IndexedBase("X")                  # x-hat as an independent variable
    P.identity("a_g", lambda J: sp.diff(sp.Sum(dy[i] * (gamma[i] * X[i] + beta[i]) * sg[i], (i, 1, m)), X[J])
               - B_G_AFTER.xreplace({j: J}), m=m, j=j, sizes=sizes, general=general)
    closed_a = lambda q: subs_all(C_RMS.xreplace({j: q}), sub_ga, by_index(xhat, VHa), {nu: NUa})  # noqa: E731
    P.identity("a_dx", lambda J: sp.diff(La, x[J]) - closed_a(J), m=m, j=j, sizes=sizes, general=general, base=basea)
    P.identity("a_dgamma", lambda J: sp.diff(La, gamma[J]) - subs_all(B_DGAMMA_AFTER.xreplace({j: J}),
                                                                       by_index(xhat, VHa)),
               m=m, j=j, sizes=sizes, general=general, base=basea)
    P.identity("a_dbeta", lambda J: sp.diff(La, beta[J]) - B_DBETA_AFTER.xreplace({j: J}), m=m, j=j, sizes=sizes,
               general=general)
    return P.done()


def _silu(zv):
    """silu and silu' in float64, written independently of the specification's (direct logistic)."""
    with np.errstate(over="ignore"):
        sv = 1.0 / (1.0 + np.exp(-zv))
    return zv * sv, sv * (1.0 + zv * (1.0 - sv))


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261128) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    R, G, M = 3, 3, 4                         # 3 rows, 3 groups of 4
    xs = rng.standard_normal((R, G * M)) * 2 + 0.3
    zs = 2 * rng.standard_normal((R, G * M))
    w, b = rng.standard_normal(G * M), rng.standard_normal(G * M)
    dyv = rng.standard_normal((R, G * M))
    ev = 1e-2
    s_num, ds_num = _silu(zs)
    rows = lambda a: np.broadcast_to(a, (R, G * M)).reshape(R * G, M)  # noqa: E731
    back = lambda a: np.asarray(a).reshape(R, G * M)  # noqa: E731
    arrays = {x: rows(xs), sg: rows(s_num), dy: rows(dyv), gamma: rows(w), beta: rows(b)}
    for norm in ("rms_norm", "layer_norm"):
        for nbg in (False, True):
            res = spec_evaluate(NAME, {"x": xs, "z": zs, "weight": w, "bias": b},
                                config={"norm": norm, "norm_before_gate": nbg, "group_size": M, "eps": ev},
                                grad_outputs={"y": dyv})
            vq = (lambda q: x[q]) if nbg else (lambda q: x[q] * sg[q])
            if norm == "rms_norm":
                NU, VH = _rms(vq)
                stats = {nu: NU}
                cf = C_RMS
            else:
                MU, VAR, VH = _ln(vq)
                stats = {mu: MU, var: VAR}
                cf = C_LN
            gain = (lambda q: gamma[q] * sg[q] * dy[q]) if nbg else (lambda q: gamma[q] * dy[q])
            dvs = [subs_all(cf.xreplace({j: J}), by_index(g, gain), by_index(xhat, VH), stats).xreplace({m: M}).doit()
                   for J in range(1, M + 1)]
            vhs = [VH(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
            vals = lambdify_slices(dvs + vhs, arrays, {eps: ev}, M)
            dvn, vhn = back(np.stack(vals[:M], -1)), back(np.stack(vals[M:], -1))
            n = vhn * w + b
            tag = f"{norm} norm_before_gate={nbg}"
            if nbg:
                chk.compare(f"y {tag}", res.outputs["y"], n * s_num)
                chk.compare(f"dx {tag}", res.grads["x"], dvn)
                chk.compare(f"dz {tag}", res.grads["z"], dyv * n * ds_num)
                chk.compare(f"dweight {tag}", res.grads["weight"], (dyv * s_num * vhn).sum(0))
                chk.compare(f"dbias {tag}", res.grads["bias"], (dyv * s_num).sum(0))
            else:
                chk.compare(f"y {tag}", res.outputs["y"], n)
                chk.compare(f"dx {tag}", res.grads["x"], s_num * dvn)
                chk.compare(f"dz {tag}", res.grads["z"], xs * dvn * ds_num)
                chk.compare(f"dweight {tag}", res.grads["weight"], (dyv * vhn).sum(0))
                chk.compare(f"dbias {tag}", res.grads["bias"], dyv.sum(0))
    return chk.done()
