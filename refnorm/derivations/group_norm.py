"""GroupNorm's backward (Wu & He 2018), and InstanceNorm as its case G = C, proven with SymPy.

One (sample, group) slice: K = C/G channels a = 1..K times S spatial positions p = 1..S, m = K S
values x_{a,p}; gamma_a and beta_a are per channel. The closed form is LayerNorm's on the slice with
g_{a,p} = gamma_a dl/dy_{a,p}; dgamma_a sums over the channel's positions (and over the samples).
"""
from __future__ import annotations

import itertools

import numpy as np
import sympy as sp

from . import batch_norm as bn
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, lambdify_slices, subs_all
from ._render import Document, Erratum, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, affine, dx, dy, eps, g, mu, s, var, x, xhat, y

NAME = "group_norm"
N = ROW.copy()
Kc = N.symbol("Kc", "K", "K", integer=True, positive=True)
S = N.symbol("S", "S", "S", integer=True, positive=True)
a, b, p, q, a2, p2 = (N.symbol(c, c.rstrip("2"), integer=True, positive=True) for c in ("a", "b", "p", "q", "a2", "p2"))
gamma, beta, dgamma, dbeta = affine(N, "c")


def _mean(f):
    """(1/(K S)) sum over the slice of f(b, q)."""
    return sp.Sum(sp.Sum(f(b, q), (q, 1, S)), (b, 1, Kc)) / (Kc * S)


F_MU = _mean(lambda b_, q_: x[b_, q_])
F_VAR = _mean(lambda b_, q_: (x[b_, q_] - mu) ** 2)
F_XHAT = (x[a, p] - mu) / sp.sqrt(var + eps)
F_Y = sp.Add(gamma[a] * xhat[a, p], beta[a], evaluate=False)
B_DGAMMA = sp.Sum(dy[a, q] * xhat[a, q], (q, 1, S))
B_DBETA = sp.Sum(dy[a, q], (q, 1, S))
B_G = gamma[a] * dy[a, p]
C_DX = (g[a, p] - _mean(lambda b_, q_: g[b_, q_])
        - xhat[a, p] * _mean(lambda b_, q_: g[b_, q_] * xhat[b_, q_])) / sp.sqrt(var + eps)
C_SUM = sp.Sum(sp.Sum(dx[a, p], (p, 1, S)), (a, 1, Kc))


def _one_channel(e):
    """K = 1: drop the channel sum (b = 1..1) for display."""
    def drop(sm):
        lims = [lim for lim in sm.limits if not (lim[1] == lim[2] == 1)]
        f = sm.function.xreplace({lim[0]: 1 for lim in sm.limits if lim[1] == lim[2] == 1})
        return sp.Sum(f, *lims) if lims else f
    return e.xreplace({Kc: 1, a: 1}).replace(lambda t: isinstance(t, sp.Sum), drop)


C_DX_IN = _one_channel(C_DX)


def document() -> Document:
    fwd = Section("Forward (one sample, one group)", (
        Step("Mean over the group's K = C/G channels and S spatial positions (m = K S values).", sp.Eq(mu, F_MU)),
        Step("Biased variance over the same values.", sp.Eq(var, F_VAR)),
        Step("Normalize; ε inside the square root.", sp.Eq(xhat[a, p], F_XHAT)),
        Step("Per-channel affine, shared by all positions and samples.", sp.Eq(y[a, p], F_Y)),
    ))
    bwd = Section("Backward", (
        Step("One sample; refnorm also sums over the samples.", sp.Eq(dgamma[a], B_DGAMMA), "dgamma"),
        Step("Likewise.", sp.Eq(dbeta[a], B_DBETA), "dbeta"),
        Step("Fold each position's γ into its upstream gradient.", sp.Eq(g[a, p], B_G)),
        Step("[LayerNorm's](layer_norm.md) closed form on the slice: the chain rule is the same, with a "
             "double index (see [group_norm.py](../refnorm/norms/group_norm.py), `centered_backward` on the "
             "(N, G, C/G · S) view).", sp.Eq(dx[a, p], C_DX), "compact"),
        Step("The gradient sums to zero over each (sample, group) slice.", sp.Eq(C_SUM, 0), "sum0"),
    ))
    inorm = Section("InstanceNorm: the case G = C", (
        "With K = 1 a slice is one channel of one sample (m = S) and γ is constant on it: "
        "[BatchNorm's steps](batch_norm.md) apply with the statistics per (sample, channel) instead of "
        "per channel ([instance_norm.py](../refnorm/norms/instance_norm.py)).",
        Step("The closed form with K = 1.", sp.Eq(dx[1, p], C_DX_IN), "instance"),
        "With running statistics in eval mode (torch's `track_running_stats=True`), the map is BatchNorm's "
        "eval-mode affine map, and so is its gradient (batch_norm.md, steps 16–18).",
    ))
    errata = (
        Erratum("InstanceNorm's statistics",
                r"\mu_i = \frac{1}{HWT}\sum_{t=1}^T\sum_{l=1}^W\sum_{m=1}^H x_{tilm}",
                r"\mu_{ti} = \frac{1}{HW}\sum_{l=1}^W\sum_{m=1}^H x_{tilm}",
                "This averages over the batch index t as well: it is the paper's BatchNorm formula. InstanceNorm "
                "(Ulyanov et al. 2016) takes the mean and the variance σ² per sample t and channel i."),
        Erratum("GroupNorm's code", r"\frac{x - \operatorname{mean}(x)}{\operatorname{std}(x) + \epsilon}",
                sp.Eq(xhat[a, p], F_XHAT),
                "`x.std()` is the unbiased standard deviation (divides by m − 1) and ε is added outside the root "
                "(default 1e-10). GroupNorm (Wu & He 2018, Fig. 3) and torch use the biased variance inside "
                "`sqrt(var + eps)` (eps 1e-5); the two differ most for small groups and small variances."),
    )
    return Document(
        name=NAME, title="GroupNorm and InstanceNorm: the backward pass", notation=N,
        intro=("GroupNorm (Wu & He 2018) normalizes each sample over groups of C/G channels and all spatial "
               "positions; InstanceNorm (Ulyanov et al. 2016) is the case G = C.",),
        sections=(fwd, bwd, inorm),
        errata_source="seed 003, InstanceNorm and GroupNorm sections", errata=errata,
        checks=(
            "`prove()`: every step against the derivative of ℓ = Σ ∂ℓ/∂y_{a,p} · y_{a,p} for every (K, S) "
            "with K S = 2..5 and for general K and S (double indexed sums).",
            f"`check_numeric()`: against {spec_ref(NAME)} and "
            f"{spec_ref('instance_norm')} (y, dx, dweight, dbias; instance_norm in eval mode too).",
        ),
        links=navigation("group_norm", "rms_norm", "weight_norm"),
    )


steps, render = family_functions(document)


def _defs():
    MU = sp.Sum(sp.Sum(x[a2, p2], (p2, 1, S)), (a2, 1, Kc)) / (Kc * S)
    VAR = sp.Sum(sp.Sum((x[a2, p2] - MU) ** 2, (p2, 1, S)), (a2, 1, Kc)) / (Kc * S)
    XH = lambda a_, p_: (x[a_, p_] - MU) / sp.sqrt(VAR + eps)  # noqa: E731
    L = sp.Sum(sp.Sum(dy[b, q] * (gamma[b] * XH(b, q) + beta[b]), (q, 1, S)), (b, 1, Kc))
    return MU, VAR, XH, L


def _xhat_rule(XH):
    return lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == xhat, lambda t: XH(*t.indices))


def slice_claims(P: Prover, claims: dict, sizes, base: dict, general=()) -> None:
    """Each claim ``build(A, P_)`` (0 when it holds) at every position (a, p) of a slice of every shape
    (K, S) with K S in ``sizes``, and for general K and S if its key is in ``general``."""
    shapes = [(k_, m_ // k_) for m_ in sizes for k_ in range(1, m_ + 1) if m_ % k_ == 0]
    for key, build in claims.items():
        for K_, S_ in shapes:
            for A, P_ in itertools.product(range(1, K_ + 1), range(1, S_ + 1)):
                P.claim(key, f"{K_ * S_}: K = {K_}, S = {S_}, a = {A}, p = {P_}",
                        build(A, P_).xreplace(base).xreplace({Kc: K_, S: S_}))
        if key in general:
            P.claim(key, "general K, S", build(a, p).xreplace(base), general=True,
                    ranges={a: (1, Kc), p: (1, S)})


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    MU, VAR, XH, L = _defs()
    base = {VAR + eps: s}
    sub_g = lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == g,  # noqa: E731
                                lambda t: gamma[t.indices[0]] * dy[t.indices])
    stats = {mu: MU, var: VAR}
    closed = lambda A, P_: subs_all(C_DX.xreplace({a: A, p: P_}), sub_g, _xhat_rule(XH), stats)  # noqa: E731
    claims = {
        "dgamma": lambda A, P_: sp.diff(L, gamma[A]) - subs_all(B_DGAMMA.xreplace({a: A}), _xhat_rule(XH)),
        "dbeta": lambda A, P_: sp.diff(L, beta[A]) - B_DBETA.xreplace({a: A}),
        "compact": lambda A, P_: sp.diff(L, x[A, P_]) - closed(A, P_),
        "sum0": lambda A, P_: sp.Sum(sp.Sum(closed(b, q), (q, 1, S)), (b, 1, Kc)),
    }
    slice_claims(P, claims, sizes, base, general=claims if general else ())
    # InstanceNorm's step is the K = 1 case of the same closed form
    for S_ in sizes:
        for P_ in range(1, S_ + 1):
            e = (closed(1, P_) - subs_all(C_DX_IN.xreplace({p: P_}), sub_g, _xhat_rule(XH),
                                          {mu: MU, var: VAR})).xreplace(base).xreplace({Kc: 1, S: S_})
            P.claim("instance", f"{S_}, p = {P_}", e)
    return P.done()


def _closed_numeric(K_, S_):
    MU, VAR, XH, _ = _defs()
    sub_g = lambda e: e.replace(lambda t: isinstance(t, sp.Indexed) and t.base == g,  # noqa: E731
                                lambda t: gamma[t.indices[0]] * dy[t.indices])
    conc = lambda e: e.xreplace({Kc: K_, S: S_}).doit()  # noqa: E731
    idx = list(itertools.product(range(1, K_ + 1), range(1, S_ + 1)))
    xh = [conc(XH(A, P_)) for A, P_ in idx]
    dxs = [conc(subs_all(C_DX.xreplace({a: A, p: P_}), sub_g, _xhat_rule(XH), {mu: MU, var: VAR})) for A, P_ in idx]
    return xh, dxs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261125) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    ev = 1e-2
    for name, (Nb, C, Sp), G in (("group_norm", (2, 4, 3), 2), ("group_norm", (2, 3, 2), 1),
                                 ("instance_norm", (2, 3, 4), 3)):
        K_ = C // G
        xs = rng.standard_normal((Nb, C, Sp)) * 2 + rng.standard_normal((1, C, 1))
        w, bb, dyv = rng.standard_normal(C), rng.standard_normal(C), rng.standard_normal((Nb, C, Sp))
        cfg = {"eps": ev, **({"num_groups": G} if name == "group_norm" else {})}
        res = spec_evaluate(name, {"x": xs, "weight": w, "bias": bb}, config=cfg, grad_outputs={"y": dyv})
        view = lambda t: t.reshape(Nb, G, K_, Sp)  # noqa: E731  (sample, group, channel in group, position)
        xh_f, dx_f = _closed_numeric(K_, Sp)
        wv = np.broadcast_to(w.reshape(1, G, K_), (Nb, G, K_))
        vals = lambdify_slices(xh_f + dx_f, {x: view(xs), dy: view(dyv), gamma: (wv, (K_,))}, {eps: ev}, (K_, Sp))
        n = K_ * Sp
        xhv = np.stack(vals[:n], -1).reshape(Nb, G, K_, Sp).reshape(xs.shape)
        dxv = np.stack(vals[n:], -1).reshape(Nb, G, K_, Sp).reshape(xs.shape)
        tag = f"{name} x{xs.shape} G={G}"
        chk.compare(f"{tag}: y", res.outputs["y"], xhv * w[:, None] + bb[:, None])
        chk.compare(f"{tag}: dx", res.grads["x"], dxv)
        chk.compare(f"{tag}: dweight", res.grads["weight"], (dyv * xhv).sum((0, 2)))
        chk.compare(f"{tag}: dbias", res.grads["bias"], dyv.sum((0, 2)))
    # instance_norm in eval mode with running statistics: BatchNorm's eval-mode affine map
    xs = rng.standard_normal((2, 3, 4))
    w, bb, dyv = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal((2, 3, 4))
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    res = spec_evaluate("instance_norm", {"x": xs, "weight": w, "bias": bb}, config={"eps": ev},
                           grad_outputs={"y": dyv}, state={"running_mean": rm, "running_var": rv}, training=False)
    fy = sp.lambdify([bn.x[1], bn.gamma, bn.beta, bn.E, bn.V, bn.eps], bn.EV_AFFINE.xreplace({bn.j: 1}))
    fdx = sp.lambdify([bn.dy[1], bn.gamma, bn.V, bn.eps], bn.EV_DX.xreplace({bn.j: 1}))
    col = lambda v: v[None, :, None]  # noqa: E731
    chk.compare("instance_norm eval: y", res.outputs["y"], fy(xs, col(w), col(bb), col(rm), col(rv), ev))
    chk.compare("instance_norm eval: dx", res.grads["x"], fdx(dyv, col(w), col(rv), ev))
    return chk.done()
