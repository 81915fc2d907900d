"""GroupNorm + SiLU fused (y = silu(gamma x_hat + beta)): the backward, proven with SymPy.

One (sample, group) slice as in group_norm.py (K = C/G channels a, S positions p). The activation is kept
opaque in the chain-rule claims (``act``, whose derivative is ``act_p``), so the closed forms are proven for
any pointwise activation after the affine, and SiLU's derivatives are proven on their own: dx is group_norm's
closed form with the upstream gradient dp = dl/dy * silu'(p) at the pre-activation p = gamma x_hat + beta.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import group_norm as gn
from ._proof import SIZES, NumericCheck, Prover, lambdify_slices, spec_evaluate, subs_all
from ._render import Document, Section, Step, family_functions
from ._symbols import dx, dy, eps, g, mu, s, var, x, xhat

NAME = "group_norm_silu"
N = gn.N.copy()
Kc, S = gn.Kc, gn.S
a, b, p, q, a2, p2 = gn.a, gn.b, gn.p, gn.q, gn.a2, gn.p2
gamma, beta, dgamma, dbeta = gn.gamma, gn.beta, gn.dgamma, gn.dbeta
pre = N.indexed("pre", "p_{{{i}}}", "p[{i}]")
dpre = N.grad(pre, "dpre")
z = N.symbol("z", "z", "z", real=True)
sig = N.symbol("sigma_z", r"\sigma(z)", "σ(z)")
silu_z = N.symbol("silu_z", r"\operatorname{silu}(z)", "silu(z)")
d1 = N.symbol("dsilu_z", r"\operatorname{silu}'(z)", "silu'(z)")
d2 = N.symbol("d2silu_z", r"\operatorname{silu}''(z)", "silu''(z)")


class act(sp.Function):
    """The activation, opaque in the chain-rule claims; its derivative is ``act_p``."""

    def fdiff(self, argindex=1):
        return act_p(self.args[0])


class act_p(sp.Function):
    """The derivative of ``act``."""


SIGMA = 1 / (1 + sp.exp(-z))
F_PRE = sp.Add(gamma[a] * xhat[a, p], beta[a], evaluate=False)
F_SILU = z * SIGMA
F_D1 = sig * (1 + z * (1 - sig))
F_D2 = sig * (1 - sig) * (2 + z * (1 - 2 * sig))
B_DGAMMA = sp.Sum(dpre[a, q] * xhat[a, q], (q, 1, S))
B_DBETA = sp.Sum(dpre[a, q], (q, 1, S))
B_G = gamma[a] * dpre[a, p]
C_DX = gn.C_DX


def document() -> Document:
    fwd = Section("Forward (one sample, one group)", (
        "The statistics and x̂ are [GroupNorm's](group_norm.md) (biased variance, ε inside the square root, "
        "channel axis 1, groups of C/G consecutive channels). The affine comes first and SiLU last, as "
        "diffusers' ResnetBlock2D (norm1, then the nonlinearity) and F.silu(F.group_norm(x)) compute: "
        "γ silu(x̂) + β is another function wherever γ ≠ 1 or β ≠ 0.",
        Step("The pre-activation: the per-channel affine first.", sp.Eq(pre[a, p], F_PRE)),
        Step("SiLU (swish) last, σ the logistic sigmoid.", sp.Eq(silu_z, F_SILU)),
        Step("Its derivative, written with σ = σ(z).", sp.Eq(d1, F_D1), "silu1"),
        Step("Its second derivative (the bounds, refnorm/check/bounds/group_norm_silu.py, use it and "
             "|silu'''| ≤ σ(1 − σ)(3 + 1.5|z|)).", sp.Eq(d2, F_D2), "silu2"),
    ))
    bwd = Section("Backward", (
        Step("Through the activation, at the pre-activation p (not at x̂, not at the output y); act_p is the "
             "activation's derivative, silu' of step 3 for SiLU (the proof keeps the activation opaque).",
             sp.Eq(dpre[a, p], dy[a, p] * sp.Function("act_p")(pre[a, p])), "dpre"),
        Step("One sample; refnorm also sums over the samples.", sp.Eq(dgamma[a], B_DGAMMA), "dgamma"),
        Step("Likewise.", sp.Eq(dbeta[a], B_DBETA), "dbeta"),
        Step("Fold each position's γ into the gradient of the pre-activation.", sp.Eq(g[a, p], B_G)),
        Step("GroupNorm's closed form on the slice with that g.", sp.Eq(dx[a, p], C_DX), "compact"),
    ))
    return Document(
        name=NAME, title="GroupNorm + SiLU: the backward pass", notation=N,
        intro=("A diffusion UNet/VAE block's normalization: GroupNorm (Wu & He 2018) with its affine, then "
               "SiLU (Elfwing et al. 2018; Ramachandran et al.'s swish with β = 1), fused in one kernel.",),
        sections=(fwd, bwd),
        errata_source="", errata=(),
        checks=(
            "`prove()`: silu' and silu'' against SymPy's derivatives of z σ(z); the chain-rule steps against the "
            "derivative of ℓ = Σ ∂ℓ/∂y_{a,p} · act(γ_a x̂_{a,p} + β_a) with an opaque activation, for "
            "every "
            "(K, S) with K S = 2..5 and, for ∂ℓ/∂p, for general K and S.",
            "`check_numeric()`: against `refnorm.evaluate('group_norm_silu', ..., engine='spec')` (the "
            "specification, refnorm/specs/group_norm_silu.py): y, dx, dweight, dbias, the SiLU derivatives "
            "lambdified from the proven formulas; the bounds' envelopes |silu''| ≤ σ(1 − σ)(2 + |z|), "
            "|silu'''| ≤ σ(1 − σ)(3 + 1.5|z|), σ(1 − σ) ≤ min(1/4, e^{-|z|}) on a grid of z.",
        ),
        links=(("index", "README.md"), ("GroupNorm", "group_norm.md"),
               ("code: refnorm/specs/group_norm_silu.py", "../refnorm/specs/group_norm_silu.py")),
    )


steps, render = family_functions(document)


def _sig_rule(e):
    return e.xreplace({sig: SIGMA})


def _loss(XH):
    return sp.Sum(sp.Sum(dy[b, q] * act(gamma[b] * XH(b, q) + beta[b]), (q, 1, S)), (b, 1, Kc))


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    # SiLU's derivatives: scalar identities (the same at every size)
    for key, want, order in (("silu1", F_D1, 1), ("silu2", F_D2, 2)):
        e = sp.simplify(sp.diff(F_SILU, z, order) - _sig_rule(want))
        P.claim(key, "1: scalar z", e)
        P.claim(key, "general: scalar z", e, general=True)
    MU, VAR, XH, _ = gn._defs()
    base = {VAR + eps: s}
    L = _loss(XH)
    PRE = lambda A, P_: gamma[A] * XH(A, P_) + beta[A]                                          # noqa: E731
    DP = lambda A, P_: dy[A, P_] * act_p(PRE(A, P_))                                              # noqa: E731
    sub_dpre = lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == dpre,      # noqa: E731
                                   lambda t: DP(*t.indices))
    sub_g = lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == g,            # noqa: E731
                                lambda t: gamma[t.indices[0]] * DP(*t.indices))
    closed = lambda A, P_: subs_all(C_DX.xreplace({a: A, p: P_}), sub_g, gn._xhat_rule(XH),     # noqa: E731
                                    {mu: MU, var: VAR})
    Lp = sp.Sum(sp.Sum(dy[b, q] * act(pre[b, q]), (q, 1, S)), (b, 1, Kc))      # l as a function of p
    claims = {
        "dpre": lambda A, P_: sp.diff(Lp, pre[A, P_]) - dy[A, P_] * act_p(pre[A, P_]),
        "dgamma": lambda A, P_: sp.diff(L, gamma[A]) - subs_all(B_DGAMMA.xreplace({a: A}), sub_dpre, gn._xhat_rule(XH)),
        "dbeta": lambda A, P_: sp.diff(L, beta[A]) - subs_all(B_DBETA.xreplace({a: A}), sub_dpre),
        "compact": lambda A, P_: sp.diff(L, x[A, P_]) - closed(A, P_),
    }
    gn.slice_claims(P, claims, sizes, base, general=("dpre",) if general else ())
    return P.done()


def _silu_numeric():
    """silu, silu', silu'' as NumPy functions of z, from the proven formulas."""
    return (sp.lambdify(z, F_SILU, "numpy"), sp.lambdify(z, _sig_rule(F_D1), "numpy"),
            sp.lambdify(z, _sig_rule(F_D2), "numpy"))


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261128) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    silu, dsilu, d2silu = _silu_numeric()
    ev = 1e-2
    for (Nb, C, Sp), G, shift in (((2, 4, 3), 2, 0.0), ((2, 3, 2), 1, -3.0), ((2, 3, 4), 3, 1.0)):
        K_ = C // G
        xs = rng.standard_normal((Nb, C, Sp)) * 2 + rng.standard_normal((1, C, 1))
        w, bb, dyv = rng.standard_normal(C), rng.standard_normal(C) + shift, rng.standard_normal((Nb, C, Sp))
        res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": bb}, config={"eps": ev, "num_groups": G},
                            grad_outputs={"y": dyv})
        view = lambda t: t.reshape(Nb, G, K_, Sp)  # noqa: E731
        wv = np.broadcast_to(w.reshape(1, G, K_), (Nb, G, K_))
        xh_f, dx_f = gn._closed_numeric(K_, Sp)
        xhv = np.stack(lambdify_slices(xh_f, {x: view(xs)}, {eps: ev}, (K_, Sp)), -1).reshape(xs.shape)
        pv = xhv * w[:, None] + bb[:, None]
        dpv = dyv * dsilu(pv)                                       # dl/dp, then group_norm's closed form
        dxv = np.stack(lambdify_slices(dx_f, {x: view(xs), dy: view(dpv), gamma: (wv, (K_,))}, {eps: ev},
                                       (K_, Sp)), -1).reshape(xs.shape)
        tag = f"x{xs.shape} G={G}"
        chk.compare(f"{tag}: y", res.outputs["y"], silu(pv))
        chk.compare(f"{tag}: dx", res.grads["x"], dxv)
        chk.compare(f"{tag}: dweight", res.grads["weight"], (dpv * xhv).sum((0, 2)))
        chk.compare(f"{tag}: dbias", res.grads["bias"], dpv.sum((0, 2)))
    # the bounds' envelopes of silu'' and silu''' (bounds/group_norm_silu.py), on a grid
    zz = np.linspace(-60.0, 60.0, 240001)
    qq = np.exp(-np.abs(zz)) / (1.0 + np.exp(-np.abs(zz))) ** 2                   # sigma (1 - sigma), exactly
    d3 = sp.lambdify(z, _sig_rule(sp.diff(F_SILU, z, 3)), "numpy")(zz)
    az = np.abs(zz)
    over = max(float(np.max(np.abs(d2silu(zz)) - qq * (2 + az))), float(np.max(np.abs(d3) - qq * (3 + 1.5 * az))),
               float(np.max(qq - np.minimum(0.25, np.exp(-az)))), float(np.max(np.abs(dsilu(zz)))) - 1.1,
               float(np.max(np.abs(d2silu(zz)))) - 0.5, float(np.ptp(dsilu(zz))) - 1.2)
    chk.compare("envelopes (their largest excess, 0 when they hold)", np.array([max(over, 0.0)]), np.zeros(1))
    return chk.done()
