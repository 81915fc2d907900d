"""Unified Normalization's official backward, next to the true gradient of its forward (SymPy).

Semantics: docs/unified_norm_semantics.md (what the official code computes), refnorm/norms/unified_norm.py.
One channel c; its values at the m positions (b, n) of the batch; no centring anywhere. The official
backward replaces the exact gradient statistic by an EMA (also during warm-up) and scales the upstream
gradient by r; ``prove()`` shows exactly which terms differ and when the two coincide.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, spec_ref
from . import batch_norm as bn
from ._symbols import dx, dy, eps, g, i, j, k, m, s, x, y

NAME = "unified_norm"
N = bn.N.copy()
gamma, beta, dgamma = bn.gamma, bn.beta, bn.dgamma
z = N.indexed("z", "z_{{{i}}}")
kk = N.indexed("mask", "k_{{{i}}}", "k[{i}]")
sig = N.symbol("sig2", r"\hat{\sigma}^2", "σ̂²", positive=True)
st = N.symbol("stat", "s", "s", positive=True)
Gm = N.symbol("G", "G", "G", positive=True)
Mw = N.symbol("Mw", "M", "M", integer=True, positive=True)
H = N.indexed("H", "H_{{{i}}}")
w = N.symbol("w", "w", "w", integer=True, positive=True)
r = N.symbol("r", "r", "r", positive=True)
v = N.symbol("v", "v", "v", positive=True)
q = N.symbol("q", "q", "q")
qt = N.symbol("qtrue", r"q^{\star}", "q*")
psi, psi0 = N.symbol("psi", r"\psi_t", "ψ_t"), N.symbol("psi0", r"\psi_{t-1}", "ψ_{t-1}")
alpha = N.symbol("alpha", r"\alpha", "α")
mt = N.symbol("mt", "m_t", "m_t")
p = N.symbol("pcoef", "p", "p")
gu = N.indexed("gu", r"g^{{\mathrm{{UN}}}}_{{{i}}}", "g_UN[{i}]")
dxu = N.indexed("dxu", r"\left(\frac{{\partial \ell}}{{\partial x_{{{i}}}}}\right)_{{\mathrm{{UN}}}}",
                "(∂ℓ/∂x[{i}])_UN")
dgu = N.symbol("dgu", r"\left(\frac{\partial \ell}{\partial \gamma}\right)_{\mathrm{UN}}", "(∂ℓ/∂γ)_UN")
dG = N.symbol("dG", r"\frac{\partial G}{\partial s}", "∂G/∂s")

F_S = sp.Sum(kk[i] * x[i] ** 2, (i, 1, m)) / sp.Sum(kk[i], (i, 1, m))
F_G = sp.exp(sp.Sum(sp.log(H[w]), (w, 1, Mw)) / Mw)
F_Z = x[j] / sp.sqrt(sig + eps)
F_Y = sp.Add(gamma * z[j], beta, evaluate=False)
T_WARM = (g[j] - kk[j] * z[j] * sp.Sum(g[i] * z[i], (i, 1, m)) / sp.Sum(kk[i], (i, 1, m))) / sp.sqrt(st + eps)
T_DG = Gm / (Mw * st)
T_SMOOTH = (g[j] - T_DG * kk[j] * z[j] * sp.Sum(g[i] * z[i], (i, 1, m)) / sp.Sum(kk[i], (i, 1, m))) / sp.sqrt(Gm + eps)
O_G = r * gamma * dy[j]
O_Q = sp.Sum(gu[i] * z[i], (i, 1, m)) / m
O_PSI = alpha * psi0 + (1 - alpha) * mt
O_DX = (gu[j] - p * z[j]) / sp.sqrt(sig + eps)
O_DGAMMA = sp.Sum(r * dy[i] * z[i], (i, 1, m))
Q_TRUE = sp.Sum(g[i] * z[i], (i, 1, m)) / m
D_WARM = alpha * (qt - psi0) * z[j] / sp.sqrt(st + eps)
D_SMOOTH = ((r - 1) * g[j] - (p - T_DG * qt) * z[j]) / sp.sqrt(Gm + eps)


def document() -> Document:
    fwd = Section("Forward (training, one channel)", (
        "Positions i = 1..m are all (batch, token) pairs; k_i is 1 where the token is real and 0 where "
        "`pad_mask` marks padding. No mean is removed (μ̂ = 0): the statistic is a mean square.",
        Step("The current statistic, over the real tokens only.", sp.Eq(st, F_S)),
        Step("Smoothed statistic: the geometric mean of the window H_1..H_M, whose current slot H_M is s; "
             "σ̂² = G once t > M and t ≥ T_w on calls that are not filtered, otherwise σ̂² = s.", sp.Eq(Gm, F_G)),
        Step("Normalize every position, padding included.", sp.Eq(z[j], F_Z)),
        Step("Affine.", sp.Eq(y[j], F_Y)),
    ))
    true = Section("The true gradient of this forward", (
        "What autograd of the forward above would give; g_j = γ ∂ℓ/∂y_j.",
        Step("σ̂² = s (warm-up, or a filtered call): RMSNorm's closed form ([rms_norm](rms_norm.md)), "
             "with the statistic's 1/|K| and mask.", sp.Eq(dx[j], T_WARM), "true_warm"),
        Step("The geometric mean moves with its current slot.", sp.Eq(dG, T_DG), "dG"),
        Step("σ̂² = G: the same, with the chain factor ∂G/∂s.", sp.Eq(dx[j], T_SMOOTH), "true_smooth"),
    ))
    official = Section("The official backward", (
        "As the official code computes it ([unified_norm_semantics.md](../docs/unified_norm_semantics.md) §3), refnorm's `preset=\"official\"` "
        "([unified_norm.py](../refnorm/norms/unified_norm.py)):",
        Step("The upstream gradient times r: r = 1 up to call max(1000, T_w) and on filtered calls, "
             "otherwise clip(√((σ̂²+ε)/(v+ε)), 1/5, 5) with v the running variance.", sp.Eq(gu[j], O_G)),
        Step("Backward statistic over ALL m positions, padding included.", sp.Eq(q, O_Q)),
        Step("EMA, updated on every call: m_t = q in warm-up, for t ≤ M_b and on filtered calls, else the "
             "mean of the last M_b values of q.", sp.Eq(psi, O_PSI)),
        Step("The input gradient: p = q on a filtered call, p = ψ_t (after the update) otherwise.",
             sp.Eq(dxu[j], O_DX)),
        Step("And ∂ℓ/∂γ carries r too (∂ℓ/∂β = Σ ∂ℓ/∂y_i is exact).", sp.Eq(dgu, O_DGAMMA)),
    ))
    diff = Section("Where they differ (no padding: k_i = 1, so |K| = m)", (
        Step("Exact statistic of the true gradient, to compare with q and ψ.", sp.Eq(qt, Q_TRUE)),
        Step("Filtered call (r = 1, p = q): the official gradient IS the true one.",
             sp.Eq(dxu[j] - dx[j], 0), "filtered"),
        Step("Warm-up (r = 1, p = ψ_t, m_t = q): off by the EMA's memory, zero only if ψ_{t−1} = q.",
             sp.Eq(dxu[j] - dx[j], D_WARM), "warmup"),
        Step("Smoothed calls: the factor r, and ψ_t in place of the GM's (G/(Ms)) q.",
             sp.Eq(dxu[j] - dx[j], D_SMOOTH), "smooth"),
        "With padding they differ even on filtered calls: the true gradient has no z-term at padded positions "
        "and divides by |K|, the official one subtracts q z at every position with q divided by m.",
    ))
    return Document(
        name=NAME, title="Unified Normalization: the official backward versus the true gradient", notation=N,
        intro=("UN (Yang et al. 2022) trains with a hand-written backward that is not the gradient of its "
               "forward. Below: one channel, one training call t; the state (windows H, running variance v, "
               "EMA ψ) comes from earlier calls.",),
        sections=(fwd, true, official, diff),
        checks=(
            "`prove()`: the true gradients (with a symbolic 0/1-or-any mask k_i and a window of symbolic "
            "length M) against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i, for m = 2..5 and general m; ∂G/∂s for "
            "general M; the three differences as identities between the official formulas and the true ones.",
            f"`check_numeric()`: the official formulas against {spec_ref(NAME)} on a "
            "warm-up call, a window-1 (always filtered) call, a padded call and a smoothed call with r ≠ 1.",
        ),
        links=(("index", "README.md"), ("previous: lp_normalize", "lp_normalize.md"),
               ("next: offline", "offline.md"),
               ("code: refnorm/norms/unified_norm.py", "../refnorm/norms/unified_norm.py")),
    )


steps, render = family_functions(document)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    S_X = F_S.xreplace({i: k})
    sub_g = by_index(g, lambda a: gamma * dy[a])
    # true gradient, sigma^2 = s(x)
    L = sp.Sum(dy[i] * (gamma * x[i] / sp.sqrt(S_X + eps) + beta), (i, 1, m))
    zs = by_index(z, lambda a: x[a] / sp.sqrt(S_X + eps))
    P.identity("true_warm", lambda J: sp.diff(L, x[J]) - subs_all(T_WARM.xreplace({j: J}), sub_g, zs, {st: S_X}),
               m=m, j=j, sizes=sizes, general=general, base={S_X + eps: s})
    # dG/ds with s in the window's last slot
    P.identity("dG", lambda J: sp.diff(F_G, H[Mw]) - T_DG.xreplace({Gm: F_G, st: H[Mw]}), m=Mw, j=None,
               sizes=sizes, general=general, ranges={Mw: (1, Mw)})
    # true gradient, sigma^2 = G = (C s)^(1/M), C the product of the other slots
    C = sp.Symbol("C", positive=True)
    Gx = (C * S_X) ** (1 / Mw)
    Lg = sp.Sum(dy[i] * (gamma * x[i] / sp.sqrt(Gx + eps) + beta), (i, 1, m))
    zg = by_index(z, lambda a: x[a] / sp.sqrt(Gx + eps))
    sig_s = sp.Symbol("sigma_s", positive=True)
    P.identity("true_smooth", lambda J: (sp.diff(Lg, x[J]) - subs_all(T_SMOOTH.xreplace({j: J}), sub_g, zg,
                                                                      {Gm: Gx, st: S_X})).xreplace({Gx + eps: s}),
               m=m, j=j, sizes=sizes, general=general, base={S_X: sig_s})
    # the differences, with no padding (k = 1)
    ones = by_index(kk, lambda a: sp.S.One)
    off = lambda rr, pp: subs_all(O_DX.xreplace({sig: st}), by_index(gu, lambda a: rr * g[a]), {p: pp})  # noqa: E731
    P.identity("filtered", lambda J: (off(1, Q_TRUE) - subs_all(T_WARM, ones)).xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general)
    P.identity("warmup", lambda J: (off(1, O_PSI.xreplace({mt: Q_TRUE})) - subs_all(T_WARM, ones)
                                    - D_WARM.xreplace({qt: Q_TRUE})).xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general)
    P.identity("smooth", lambda J: (off(r, p).xreplace({st: Gm}) - subs_all(T_SMOOTH, ones)
                                    - D_SMOOTH.xreplace({qt: Q_TRUE})).xreplace({j: J}),
               m=m, j=j, sizes=sizes, general=general)
    return P.done()


def _official(xs, dys, mask, gam, eps_, sig2, rr, pcoef_fn):
    """The official formulas above (per channel, positions flattened), in NumPy via lambdify."""
    M = xs.shape[0]
    zf = [F_Z.xreplace({j: J}) for J in range(1, M + 1)]
    (zv,) = [np.stack(lambdify_slices(zf, {x: xs.T}, {sig: sig2, eps: eps_}, M), 0)]
    gv = rr * gam * dys
    qv = (gv * zv).mean(0)
    pv = pcoef_fn(qv)
    dxf = [O_DX.xreplace({j: J}) for J in range(1, M + 1)]
    dxv = np.stack(lambdify_slices(dxf, {gu: gv.T, z: zv.T}, {p: pv, sig: sig2, eps: eps_}, M), 0)
    return zv, qv, dxv


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261129) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    B, T, Cc = 2, 3, 2
    M = B * T
    xs, dys = rng.standard_normal((B, T, Cc)) * 1.5, rng.standard_normal((B, T, Cc))
    w_, b_ = rng.standard_normal(Cc), rng.standard_normal(Cc)
    ev, al = 1e-5, 0.9
    flat = lambda a: a.reshape(M, Cc)  # noqa: E731
    inputs = {"x": xs, "weight": w_, "bias": b_}
    # 1. first call from the official initial state: warm-up, r = 1, psi_1 = (1 - alpha) q
    res = spec_evaluate(NAME, inputs, config={"eps": ev, "momentum": al}, grad_outputs={"y": dys})
    s_ = (flat(xs) ** 2).mean(0)
    zv, qv, dxv = _official(flat(xs), flat(dys), None, w_, ev, s_, 1.0, lambda q_: (1 - al) * q_)  # psi_0 = 0
    chk.compare("warm-up y", res.outputs["y"], (zv * w_ + b_).reshape(xs.shape))
    chk.compare("warm-up dx", res.grads["x"], dxv.reshape(xs.shape))
    chk.compare("warm-up dweight", res.grads["weight"], (flat(dys) * zv).sum(0))
    chk.compare("warm-up ema_gz", res.state["ema_gz"], (1 - al) * qv)
    # 2. window 1: every call is filtered, and the official gradient is the true one (no padding)
    res = spec_evaluate(NAME, inputs, config={"eps": ev, "window": 1}, grad_outputs={"y": dys})
    true = [subs_all(T_WARM.xreplace({j: J}), by_index(kk, lambda a: sp.S.One)).xreplace({m: M}).doit()
            for J in range(1, M + 1)]
    tv = np.stack(lambdify_slices(true, {g: (flat(dys) * w_).T, z: zv.T}, {st: s_, eps: ev}, M), 0)
    chk.compare("window 1: dx = true gradient", res.grads["x"], tv.reshape(xs.shape))
    # 3. padding: the forward statistic skips padded tokens, the backward statistic does not
    pad = np.zeros((B, T))
    pad[1, 2] = 1.0
    res = spec_evaluate(NAME, {**inputs, "pad_mask": pad}, config={"eps": ev, "window": 1},
                           grad_outputs={"y": dys})
    keep = flat(np.broadcast_to((1 - pad)[..., None], xs.shape))
    s_pad = (keep * flat(xs) ** 2).sum(0) / keep.sum(0)
    zv, qv, dxv = _official(flat(xs), flat(dys), None, w_, ev, s_pad, 1.0, lambda q_: q_)
    chk.compare("padded y", res.outputs["y"], (zv * w_ + b_).reshape(xs.shape))
    chk.compare("padded dx (official, q over all positions)", res.grads["x"], dxv.reshape(xs.shape))
    # 4. a smoothed call with r != 1: t = 2001 > max(1000, warmup), window (3, 2), history given as state
    Mf, Mb, t0 = 3, 2, 2000
    hx, hg = rng.uniform(0.5, 3.0, (Mf, Cc)), rng.standard_normal((Mb, Cc))
    v0, psi_0 = rng.uniform(0.05, 0.2, Cc), rng.standard_normal(Cc)
    state = {"running_var": v0, "ema_gz": psi_0, "buffer_x2": hx, "buffer_gz": hg,
             "iters": np.array([t0]), "skip_counter": np.array([0])}
    res = spec_evaluate(NAME, inputs, config={"eps": ev, "window": [Mf, Mb], "warmup": 4, "momentum": al},
                           grad_outputs={"y": dys}, state=state)
    t1 = t0 + 1
    hx1 = hx.copy()
    hx1[t1 % Mf] = s_
    G_ = np.exp(np.log(hx1).mean(0))
    r_ = np.clip(np.sqrt((G_ + ev) / (v0 + ev)), 0.2, 5.0)

    def psi_new(q_):
        hg1 = hg.copy()
        hg1[t1 % Mb] = q_
        return al * psi_0 + (1 - al) * hg1.mean(0)
    zv, qv, dxv = _official(flat(xs), flat(dys), None, w_, ev, G_, r_, psi_new)
    chk.compare("smoothed y (geometric mean)", res.outputs["y"], (zv * w_ + b_).reshape(xs.shape))
    chk.compare("smoothed dx (r, psi)", res.grads["x"], dxv.reshape(xs.shape))
    chk.compare("smoothed dweight (carries r)", res.grads["weight"], (r_ * flat(dys) * zv).sum(0))
    return chk.done()
