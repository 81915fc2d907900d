"""The fused residual add (add_norm) and adaptive LayerNorm: LayerNorm's (and RMSNorm's) backward composed
with an element-wise input map, proven with SymPy.

add_norm: one row of m values; s_j = c_j x_j + r_j (c_j = mask_j rowscale / (1 - p)) is normalized, and s
itself is returned (the new residual), so its cotangent joins the gradient of the residual. adaptive
LayerNorm: one row of one sample, whose per-sample scale and shift act as LayerNorm's gain 1 + a_j and
bias b_j; the sample's rows share them, so their gradients sum over the tokens.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from . import layer_norm as ln
from . import rms_norm as rn
from ._proof import SIZES, NumericCheck, Prover, by_index, lambdify_slices, spec_evaluate, subs_all
from ._render import Document, Section, Step, family_functions
from ._symbols import dx, dy, eps, g, i, j, k, m, mu, s, var, x, xhat, y

NAME = "add_norm"
N = ln.N.copy()
gamma, beta = ln.gamma, ln.beta
X = N.indexed("xin", "u_{{{i}}}", "u[{i}]")                  # the branch input (refnorm's x)
R = N.indexed("res", "r_{{{i}}}", "r[{i}]")                  # the residual
c = N.indexed("c", "c_{{{i}}}", "c[{i}]")
keep = N.indexed("keep", "k_{{{i}}}", "k[{i}]")
rho = N.symbol("rowscale", r"\rho", "ρ")
p = N.symbol("p", "p", "p")
o = N.indexed("o", "o_{{{i}}}", "o[{i}]")                    # residual_out
do, dX, dR, drho = N.grad(o, "do"), N.grad(X, "dxin"), N.grad(R, "dres"), N.grad(rho, "drowscale")
X1 = N.indexed("xin1", "v_{{{i}}}", "v[{i}]")               # the parallel branch (refnorm's x1)
c1 = N.indexed("cone", "c'_{{{i}}}", "c'[{i}]")
keep1 = N.indexed("keepone", "k'_{{{i}}}", "k'[{i}]")
gamma1 = N.indexed("gammaone", r"\gamma'_{{{i}}}", "γ'[{i}]")
beta1 = N.indexed("betaone", r"\beta'_{{{i}}}", "β'[{i}]")
y1 = N.indexed("yone", "y'_{{{i}}}", "y'[{i}]")
dy1, dX1, dgamma1 = N.grad(y1, "dyone"), N.grad(X1, "dxinone"), N.grad(gamma1, "dgammaone")
sc = N.indexed("scale", "a_{{{i}}}", "a[{i}]")               # adaptive: per-sample scale
sh = N.indexed("shift", "b_{{{i}}}", "b[{i}]")               # adaptive: per-sample shift
dsc, dsh = N.grad(sc, "dscale"), N.grad(sh, "dshift")

F_C = keep[j] * rho / (1 - p)
F_S = sp.Add(c[j] * X[j], R[j], evaluate=False)
F_O = x[j]
B_DS = sp.Add(bn.C_DX, do[j], evaluate=False)                # LayerNorm's dx at x = s, plus the returned residual's
B_DX = c[j] * dx[j]
B_DR = dx[j]
B_DRHO = sp.Sum(dx[i] * keep[i] * X[i], (i, 1, m)) / (1 - p)
P_C1 = keep1[j] / (1 - p)
P_S = sp.Add(c[j] * X[j], c1[j] * X1[j], R[j], evaluate=False)
P_Y1 = sp.Add(gamma1[j] * xhat[j], beta1[j], evaluate=False)
P_G = gamma[j] * dy[j] + gamma1[j] * dy1[j]
P_DX1 = c1[j] * dx[j]
P_DGAMMA1 = dy1[j] * xhat[j]
A_Y = sp.Add((1 + sc[j]) * xhat[j], sh[j], evaluate=False)
A_G = (1 + sc[j]) * dy[j]
A_DSC = dy[j] * xhat[j]
A_DSH = dy[j]


def document() -> Document:
    fwd = Section("Forward (one row)", (
        Step("The branch's scale: the dropout keep-mask k_j (0 or 1), the row's scale ρ (rowscale), and the "
             "inverted-dropout factor 1/(1 − p).", sp.Eq(c[j], F_C)),
        Step("The new residual stream; x_j below stands for this s_j (refnorm's input x is u here).",
             sp.Eq(x[j], F_S)),
        Step("LayerNorm of the row of x, as in [layer_norm](layer_norm.md) (μ, σ², x̂ from x; RMSNorm: "
             "[rms_norm](rms_norm.md), the same composition); γ includes `weight_offset`.",
             sp.Eq(y[j], ln.F_Y)),
        Step("The new residual is returned too (prenorm): o_j = x_j.", sp.Eq(o[j], F_O)),
    ))
    bwd = Section("Backward", (
        "ℓ reaches x_j through y (LayerNorm's backward, g_j = γ_j ∂ℓ/∂y_j) and through the returned residual "
        "o_j. With prenorm=False o is not returned to the model: ∂ℓ/∂o = 0.",
        Step("Both paths into the sum (proven as ∂ℓ/∂r_j, next step).", sp.Eq(dx[j], B_DS), "dres"),
        Step("The residual enters the sum with coefficient 1.", sp.Eq(dR[j], B_DR), "dres"),
        Step("The branch enters with coefficient c_j: dropped elements get 0, kept ones ρ/(1 − p).",
             sp.Eq(dX[j], B_DX), "dxin"),
        Step("ρ scales the whole row's branch.", sp.Eq(drho, B_DRHO), "drowscale"),
        Step("γ and β: LayerNorm's, at the sum (x̂ of x).", sp.Eq(ln.dgamma[j], ln.B_DGAMMA), "dgamma"),
    ))
    par = Section("The parallel branch (x1, weight1, bias1)", (
        "flash-attention's second branch v (refnorm's x1, with its own keep-mask k'; no rowscale) joins the sum, "
        "and a second output y' (y1) is taken from the same x̂ with its own γ' (weight1 + weight_offset) and β' "
        "(bias1).",
        Step("The second branch's scale.", sp.Eq(c1[j], P_C1)),
        Step("The sum of both branches and the residual.", sp.Eq(x[j], P_S)),
        Step("The second output, from the same x̂.", sp.Eq(y1[j], P_Y1)),
        Step("The norm's backward is linear in its cotangent: y' adds γ'_j ∂ℓ/∂y'_j to g, then steps 5 and 6 "
             "as before (proven as ∂ℓ/∂r_j).", sp.Eq(g[j], P_G), "par_dres"),
        Step("The second branch enters with coefficient c'_j.", sp.Eq(dX1[j], P_DX1), "par_dxin1"),
        Step("γ' from y' as γ from y; β': the sum of ∂ℓ/∂y'_j.", sp.Eq(dgamma1[j], P_DGAMMA1), "par_dgamma1"),
    ))
    ada = Section("Adaptive LayerNorm (`adaptive_layer_norm`)", (
        "One token's row of a sample whose scale a and shift b (one vector per sample) are shared by all its "
        "tokens; x̂ as in [layer_norm](layer_norm.md).",
        Step("Forward: LayerNorm with the gain 1 + a_j and the bias b_j.", sp.Eq(y[j], A_Y)),
        Step("x̂_j reaches ℓ through y_j, scaled by 1 + a_j; then LayerNorm's closed form.", sp.Eq(g[j], A_G)),
        Step("Per row; refnorm sums it over the sample's tokens.", sp.Eq(dsc[j], A_DSC), "dscale"),
        Step("Per row; summed over the tokens likewise.", sp.Eq(dsh[j], A_DSH), "dshift"),
        Step("The gradient of x: LayerNorm's closed form with g_j = (1 + a_j) ∂ℓ/∂y_j.",
             sp.Eq(dx[j], bn.C_DX), "ada_dx"),
    ))
    return Document(
        name=NAME, title="Residual add + norm (add_norm) and adaptive LayerNorm: the backward pass", notation=N,
        intro=("The fused kernels of today's transformers: flash-attention's `layer_norm_fn` and vLLM's "
               "`fused_add_rms_norm` add a (dropped-out, row-scaled) branch to the residual stream and normalize "
               "the sum, returning the sum as the new residual; DiT's adaptive LayerNorm modulates LayerNorm by a "
               "per-sample scale and shift. Both are LayerNorm (or RMSNorm) composed with an element-wise map, so "
               "the backward is the chain rule around [layer_norm](layer_norm.md)'s closed form.",),
        sections=(fwd, bwd, par, ada),
        checks=(
            "`prove()` (with t standing for 1/(1 − p)): ∂ℓ/∂u, ∂ℓ/∂r, ∂ℓ/∂ρ and ∂ℓ/∂γ against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i + "
            "Σ ∂ℓ/∂o_i · o_i, with LayerNorm (m = 2, 3 and general m) and with RMSNorm (m = 2, 3); adaptive "
            "LayerNorm's ∂ℓ/∂a, ∂ℓ/∂b, ∂ℓ/∂x for m = 2, 3 and general m; the parallel branch's ∂ℓ/∂r, ∂ℓ/∂v "
            "and ∂ℓ/∂γ' against the derivative of ℓ + Σ ∂ℓ/∂y'_i · y'_i with both branches in the sum, with "
            "LayerNorm (m = 2, 3 and general m) and RMSNorm (m = 2, 3).",
            "`check_numeric()`: against `refnorm.evaluate('add_norm' | 'adaptive_layer_norm', ..., engine='spec')` "
            "(the specifications refnorm/specs/add_norm.py, adaptive_layer_norm.py): y, residual_out and every "
            "gradient, with LayerNorm and RMSNorm, dropout, rowscale and weight_offset, prenorm on and off; "
            "the parallel branch (x1 with its own mask, y1, dx1, dweight1, dbias1) likewise.",
        ),
        links=(("index", "README.md"), ("LayerNorm", "layer_norm.md"), ("RMSNorm", "rms_norm.md"),
               ("code: refnorm/specs/add_norm.py", "../refnorm/specs/add_norm.py"),
               ("code: refnorm/specs/adaptive_layer_norm.py", "../refnorm/specs/adaptive_layer_norm.py")),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
T = sp.Symbol("t", positive=True)      # stands for 1 / (1 - p) in the proofs (polynomials in t, not in p)


def _sum_of(q):
    """s_q as a function of the inputs: c_q u_q + r_q with c_q = k_q ρ t, t = 1 / (1 - p)."""
    return keep[q] * rho * T * X[q] + R[q]


def _in_sum(e):
    """e with every x[q] replaced by s_q (the norm's input is the sum)."""
    return subs_all(e, by_index(x, _sum_of))


def _claims(P, L_norm, closed, base, *, sizes, general, prefix, back=None):
    """The chain rule around a norm whose ℓ (as a function of x) is L_norm and whose dℓ/dx_q is closed(q)."""
    L = _in_sum(L_norm) + sp.Sum(do[i] * _sum_of(i), (i, 1, m))
    ds = lambda q: _in_sum(closed(q)) + do[q]  # noqa: E731
    b = {_in_sum(a): v for a, v in base.items()}
    bk = None if back is None else {a: _in_sum(v) for a, v in back.items()}
    P.identity(prefix + "dres", lambda J: sp.diff(L, R[J]) - ds(J), m=m, j=j, sizes=sizes, general=general, base=b,
               back=bk)
    P.identity(prefix + "dxin", lambda J: sp.diff(L, X[J]) - keep[J] * rho * T * ds(J), m=m, j=j, sizes=sizes,
               general=general, base=b, back=bk)
    P.identity(prefix + "drowscale", lambda J: sp.diff(L, rho) - sp.Sum(ds(k) * keep[k] * X[k], (k, 1, m)) * T,
               m=m, sizes=sizes, general=general, base=b, back=bk)


def _par_sum_of(q):
    """s_q with the parallel branch: c_q u_q + c'_q v_q + r_q (c = k t, c' = k' t; no rowscale)."""
    return keep[q] * T * X[q] + keep1[q] * T * X1[q] + R[q]


def _par_claims(P, L_norm, L1_norm, closed, base, *, sizes, general, prefix, xh):
    """The parallel branch around a norm: ℓ = L_norm (y's) + L1_norm (y1's) + Σ do s; closed(q): dℓ/dx_q of
    the norm with g = γ dy + γ' dy1; xh(q): x̂_q (all as functions of x, the sum)."""
    ins = lambda e: subs_all(e, by_index(x, _par_sum_of))  # noqa: E731
    L = ins(L_norm + L1_norm) + sp.Sum(do[i] * _par_sum_of(i), (i, 1, m))
    ds = lambda q: ins(closed(q)) + do[q]  # noqa: E731
    b = {ins(a): v for a, v in base.items()}
    P.identity(prefix + "par_dres", lambda J: sp.diff(L, R[J]) - ds(J), m=m, j=j, sizes=sizes, general=general,
               base=b)
    P.identity(prefix + "par_dxin1", lambda J: sp.diff(L, X1[J]) - keep1[J] * T * ds(J), m=m, j=j, sizes=sizes,
               general=general, base=b)
    P.identity(prefix + "par_dgamma1", lambda J: sp.diff(L, gamma1[J]) - ins(dy1[J] * xh(J)), m=m, j=j,
               sizes=sizes, general=general, base=b)


def _y1_loss(XH):
    """Σ ∂ℓ/∂y'_i · y'_i with y'_i = γ'_i x̂_i + β'_i."""
    return sp.Sum(dy1[i] * (gamma1[i] * XH(i) + beta1[i]), (i, 1, m))


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Concrete m up to 3 (the general-m claims cover every m; the compositions expand slowly)."""
    P = Prover(NAME)
    sizes = tuple(z for z in sizes if z <= 3) or sizes[:1]
    # add_norm with LayerNorm
    MU, VAR, XH, L = ln.defs(lambda q: gamma[q], lambda q: beta[q])
    stats = {mu: MU, var: VAR}
    sub_g = by_index(g, lambda q: gamma[q] * dy[q])
    closed = lambda q: subs_all(bn.C_DX.xreplace({j: q}), sub_g, by_index(xhat, XH), stats)  # noqa: E731
    _claims(P, L, closed, {VAR + eps: s}, sizes=sizes, general=general, prefix="")
    Lg = _in_sum(L) + sp.Sum(do[i] * _sum_of(i), (i, 1, m))
    P.identity("dgamma", lambda J: sp.diff(Lg, gamma[J]) - _in_sum(dy[J] * XH(J)), m=m, j=j, sizes=sizes,
               general=general, base={_in_sum(VAR + eps): s})
    # add_norm with RMSNorm (weight_offset o folded into the gain)
    NU, XHr, Lr = rn._defs()
    sub_gr = by_index(g, lambda q: (rn.gamma[q] + rn.off) * dy[q])
    closed_r = lambda q: subs_all(rn.C_DX.xreplace({j: q}), sub_gr, by_index(xhat, XHr), {rn.nu: NU})  # noqa: E731
    _claims(P, Lr, closed_r, {NU + eps: s}, sizes=sizes, general=False, prefix="rms_")
    # the parallel branch: g = γ dy + γ' dy1 in the closed forms
    sub_gp = by_index(g, lambda q: gamma[q] * dy[q] + gamma1[q] * dy1[q])
    closed_p = lambda q: subs_all(bn.C_DX.xreplace({j: q}), sub_gp, by_index(xhat, XH), stats)  # noqa: E731
    _par_claims(P, L, _y1_loss(XH), closed_p, {VAR + eps: s}, sizes=sizes, general=general, prefix="", xh=XH)
    sub_gpr = by_index(g, lambda q: (rn.gamma[q] + rn.off) * dy[q] + gamma1[q] * dy1[q])
    closed_pr = lambda q: subs_all(rn.C_DX.xreplace({j: q}), sub_gpr, by_index(xhat, XHr), {rn.nu: NU})  # noqa: E731
    _par_claims(P, Lr, _y1_loss(XHr), closed_pr, {NU + eps: s}, sizes=sizes, general=False, prefix="rms_", xh=XHr)
    # adaptive LayerNorm: LayerNorm with gain 1 + a and bias b
    MU, VAR, XH, La = ln.defs(lambda q: 1 + sc[q], lambda q: sh[q])
    base = {VAR + eps: s}
    P.identity("dscale", lambda J: sp.diff(La, sc[J]) - subs_all(A_DSC.xreplace({j: J}), by_index(xhat, XH)),
               m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity("dshift", lambda J: sp.diff(La, sh[J]) - A_DSH.xreplace({j: J}), m=m, j=j, sizes=sizes,
               general=general)
    ln.centered_claims(P, lambda q: 1 + sc[q], sizes=sizes, general=general, prefix="ada_")
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261125) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    R_, M = 4, 5
    u, r = rng.standard_normal((R_, M)), rng.standard_normal((R_, M)) * 2 + 3
    kp = (rng.random((R_, M)) < 0.7).astype(float)
    rs, w, b = rng.standard_normal(R_) + 1, rng.standard_normal(M), rng.standard_normal(M)
    dyv, dov = rng.standard_normal((R_, M)), rng.standard_normal((R_, M))
    ev, pv, off = 1e-2, 0.25, 0.5
    MU, VAR, XH, _ = ln.defs(lambda q: gamma[q])
    NU, XHr, _ = rn._defs()
    for norm in ("layer_norm", "rms_norm"):
        for prenorm in (True, False):
            res = spec_evaluate(NAME, {"x": u, "residual": r, "weight": w, "bias": b, "mask": kp, "rowscale": rs},
                                config={"normalized_shape": [M], "eps": ev, "norm": norm, "dropout_p": pv,
                                        "prenorm": prenorm, "weight_offset": off},
                                grad_outputs={"y": dyv, "residual_out": dov})
            sv = u * kp * rs[:, None] / (1 - pv) + r
            if norm == "layer_norm":
                xh = [XH(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
                gm = {gamma: np.broadcast_to(w + off, sv.shape)}
                dxs = [subs_all(bn.C_DX.xreplace({j: J}), by_index(g, lambda q: gamma[q] * dy[q]), by_index(xhat, XH),
                                {mu: MU, var: VAR}).xreplace({m: M}).doit() for J in range(1, M + 1)]
                sym = {eps: ev}
            else:
                xh = [XHr(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
                gm = {rn.gamma: np.broadcast_to(w, sv.shape)}
                dxs = [subs_all(rn.C_DX.xreplace({j: J}), by_index(g, lambda q: (rn.gamma[q] + rn.off) * dy[q]),
                                by_index(xhat, XHr), {rn.nu: NU}).xreplace({m: M}).doit() for J in range(1, M + 1)]
                sym = {eps: ev, rn.off: off}
            vals = lambdify_slices(xh + dxs, {x: sv, dy: dyv, **gm}, sym, M)
            xhv, dsv = (np.stack(vals[a * M:(a + 1) * M], -1) for a in range(2))
            if prenorm:
                dsv = dsv + dov
            tag = f"{norm} prenorm={prenorm}"
            chk.compare(f"y {tag}", res.outputs["y"], xhv * (w + off) + b)
            chk.compare(f"residual_out {tag}", res.outputs["residual_out"], sv)
            chk.compare(f"dresidual {tag}", res.grads["residual"], dsv)
            chk.compare(f"dx {tag}", res.grads["x"], dsv * kp * rs[:, None] / (1 - pv))
            chk.compare(f"drowscale {tag}", res.grads["rowscale"], (dsv * kp * u).sum(-1) / (1 - pv))
            chk.compare(f"dweight {tag}", res.grads["weight"], (dyv * xhv).sum(0))
            chk.compare(f"dbias {tag}", res.grads["bias"], dyv.sum(0))
    # the parallel branch: x1 with its own mask, y1 from weight1/bias1 (no rowscale, flash-attention's rule)
    u1, kp1, w1, b1 = rng.standard_normal((R_, M)), (rng.random((R_, M)) < 0.7).astype(float), \
        rng.standard_normal(M), rng.standard_normal(M)
    dy1v = rng.standard_normal((R_, M))
    for norm in ("layer_norm", "rms_norm"):
        res = spec_evaluate(NAME, {"x": u, "residual": r, "weight": w, "bias": b, "mask": kp, "x1": u1, "mask1": kp1,
                                   "weight1": w1, "bias1": b1},
                            config={"normalized_shape": [M], "eps": ev, "norm": norm, "dropout_p": pv,
                                    "weight_offset": off},
                            grad_outputs={"y": dyv, "residual_out": dov, "y1": dy1v})
        sv = (u * kp + u1 * kp1) / (1 - pv) + r
        if norm == "layer_norm":
            XHn, Cn, sub = XH, bn.C_DX, {mu: MU, var: VAR}
            gsub = by_index(g, lambda q: gamma[q] * dy[q] + gamma1[q] * dy1[q])
            gm, sym = {gamma: np.broadcast_to(w + off, sv.shape)}, {eps: ev}
        else:
            XHn, Cn, sub = XHr, rn.C_DX, {rn.nu: NU}
            gsub = by_index(g, lambda q: (rn.gamma[q] + rn.off) * dy[q] + gamma1[q] * dy1[q])
            gm, sym = {rn.gamma: np.broadcast_to(w, sv.shape)}, {eps: ev, rn.off: off}
        xh = [XHn(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
        dxs = [subs_all(Cn.xreplace({j: J}), gsub, by_index(xhat, XHn), sub).xreplace({m: M}).doit()
               for J in range(1, M + 1)]
        vals = lambdify_slices(xh + dxs, {x: sv, dy: dyv, dy1: dy1v, gamma1: np.broadcast_to(w1 + off, sv.shape),
                                          **gm}, sym, M)
        xhv, dsv = (np.stack(vals[a * M:(a + 1) * M], -1) for a in range(2))
        dsv = dsv + dov
        tag = f"{norm} parallel"
        chk.compare(f"y1 {tag}", res.outputs["y1"], xhv * (w1 + off) + b1)
        chk.compare(f"residual_out {tag}", res.outputs["residual_out"], sv)
        chk.compare(f"dresidual {tag}", res.grads["residual"], dsv)
        chk.compare(f"dx {tag}", res.grads["x"], dsv * kp / (1 - pv))
        chk.compare(f"dx1 {tag}", res.grads["x1"], dsv * kp1 / (1 - pv))
        chk.compare(f"dweight1 {tag}", res.grads["weight1"], (dy1v * xhv).sum(0))
        chk.compare(f"dbias1 {tag}", res.grads["bias1"], dy1v.sum(0))
    # adaptive LayerNorm: x (B, T, H), scale and shift (B, H)
    B_, T_, H = 2, 3, 5
    xv = rng.standard_normal((B_, T_, H)) * 2 - 1
    av, bv, dyv = rng.standard_normal((B_, H)), rng.standard_normal((B_, H)), rng.standard_normal((B_, T_, H))
    res = spec_evaluate("adaptive_layer_norm", {"x": xv, "scale": av, "shift": bv}, config={"eps": ev},
                        grad_outputs={"y": dyv})
    MU, VAR, XH, _ = ln.defs(lambda q: 1 + sc[q])
    xh = [XH(J).xreplace({m: H}).doit() for J in range(1, H + 1)]
    dxs = [subs_all(bn.C_DX.xreplace({j: J}), by_index(g, lambda q: (1 + sc[q]) * dy[q]), by_index(xhat, XH),
                    {mu: MU, var: VAR}).xreplace({m: H}).doit() for J in range(1, H + 1)]
    vals = lambdify_slices(xh + dxs, {x: xv, dy: dyv, sc: np.broadcast_to(av[:, None, :], xv.shape)}, {eps: ev}, H)
    xhv, dxv = (np.stack(vals[a * H:(a + 1) * H], -1) for a in range(2))
    chk.compare("adaptive y", res.outputs["y"], xhv * (1 + av[:, None, :]) + bv[:, None, :])
    chk.compare("adaptive dx", res.grads["x"], dxv)
    chk.compare("adaptive dscale", res.grads["scale"], (dyv * xhv).sum(1))
    chk.compare("adaptive dshift", res.grads["shift"], dyv.sum(1))
    return chk.done()
