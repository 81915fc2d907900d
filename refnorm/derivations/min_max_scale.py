"""Min-max scaling's backward (refnorm/norms/min_max_scale.py), proven with SymPy; ties by convention.

One slice: the n values x_1..x_n of the ``dim`` axes. The forward of the module docstring,

    yhat_j = (x_j - min) / (max - min + eps),   y_j = gamma_j yhat_j + beta_j,

is piecewise: where the max is attained at one position a only and the min at one position b only
(a != b), max = x_a and min = x_b near x, so dmax/dx_j = delta_ja, dmin/dx_j = delta_jb and

    dx_j = (g_j + delta_jb (S2 - S1) - delta_ja S2) / D,   D = max - min + eps,
    S1 = sum g_i,  S2 = sum g_i yhat_i,  g_j = gamma_j dl/dy_j.

At a tie y is not differentiable; ``min_max_scale.backward`` splits the max's (min's) share evenly
among the tied positions (torch's amax/amin rule). ``prove()`` checks that this is the unique-case
formula averaged over the choices of a and b among the ties, and that it keeps the zero sum and the
x-component of the unique case; ``check_numeric()`` compares both with the specification (engine="spec").
"""
from __future__ import annotations

import itertools

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, affine, dx, dy, eps, g, i, j, k, x, y

NAME = "min_max_scale"
N = ROW.copy()
n = N.symbol("n", "n", integer=True, positive=True)
a, b = N.symbol("a", "a", integer=True, positive=True), N.symbol("b", "b", integer=True, positive=True)
yhat = N.indexed("yhat", r"\hat{{y}}_{{{i}}}", "ŷ[{i}]")
mx, mn = N.symbol("xmax", r"\max", "max"), N.symbol("xmin", r"\min", "min")
D = N.symbol("D", "D", "D", positive=True)
gamma, beta, dgamma, dbeta = affine(N, "e")
dyhat, dmx, dmn = N.grad(yhat, "dyhat"), N.grad(mx, "dmax"), N.grad(mn, "dmin")
S1, S2 = N.symbol("S1", "S_1", "S₁"), N.symbol("S2", "S_2", "S₂")
at_max = N.indexed("at_max", r"[x_{{{i}}} = \max]", "[x[{i}] = max]")
at_min = N.indexed("at_min", r"[x_{{{i}}} = \min]", "[x[{i}] = min]")
nmax = N.symbol("nmax", r"n_{\max}", "n_max", integer=True, positive=True)
nmin = N.symbol("nmin", r"n_{\min}", "n_min", integer=True, positive=True)
delta = sp.KroneckerDelta

F_MAX = sp.Eq(mx, x[a])
F_MIN = sp.Eq(mn, x[b])
F_D = sp.Add(mx, -mn, eps, evaluate=False)
F_YHAT = (x[j] - mn) / D
F_Y = sp.Add(gamma[j] * yhat[j], beta[j], evaluate=False)
B_DGAMMA = dy[j] * yhat[j]
B_DBETA = dy[j]
B_G = gamma[j] * dy[j]
F_S1 = sp.Sum(g[i], (i, 1, n))
F_S2 = sp.Sum(g[i] * yhat[i], (i, 1, n))
B_DMAX = -S2 / D
B_DMIN = (S2 - S1) / D
B_DX = sp.Add(g[j] / D, delta(j, a) * dmx, delta(j, b) * dmn, evaluate=False)
C_DX = sp.Add(g[j], delta(j, b) * (S2 - S1), -delta(j, a) * S2, evaluate=False) / D
C_SUM = sp.Sum(dx[j], (j, 1, n))
C_X = sp.Sum(x[j] * dx[j], (j, 1, n))
C_XR = eps * S2 / D
T_DX = sp.Add(g[j], at_min[j] * (S2 - S1) / nmin, -at_max[j] * S2 / nmax, evaluate=False) / D
K_DX = (g[j] - S1 / n) / eps


def document() -> Document:
    fwd = Section("Forward (one slice)", (
        "Below, where it is not said otherwise: the max is attained at one position a only and the min at "
        "one position b only, a ≠ b (a non-constant slice without ties). Then, near x:",
        Step("The max is x_a, as a function of x (∂max/∂x_j = δ_ja).", F_MAX),
        Step("The min is x_b (∂min/∂x_j = δ_jb).", F_MIN),
        Step("The range plus ε (default 0), outside any root.", sp.Eq(D, F_D)),
        Step("Scale into [0, 1] (exactly [0, 1] at ε = 0).", sp.Eq(yhat[j], F_YHAT)),
        Step("Optional element-wise affine over the slice's shape (γ = 1, β = 0 without it).", sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward (unique max and min)", (
        Step("Per slice; refnorm sums this over the other axes.", sp.Eq(dgamma[j], B_DGAMMA), "dgamma"),
        Step("Likewise.", sp.Eq(dbeta[j], B_DBETA), "dbeta"),
        Step("ŷ_j reaches ℓ through y_j only: call it g_j.", sp.Eq(dyhat[j], B_G), "dyhat"),
        Step("Two sums of the upstream gradient over the slice.", sp.Eq(S1, F_S1)),
        Step("The second weights it by ŷ.", sp.Eq(S2, F_S2)),
        Step("The max appears only in D, in every ŷ_i (∂ŷ_i/∂max = −ŷ_i/D).", sp.Eq(dmx, B_DMAX), "dmax"),
        Step("The min appears in every numerator and in D (∂ŷ_i/∂min = (ŷ_i − 1)/D).", sp.Eq(dmn, B_DMIN), "dmin"),
        Step("x_j reaches ℓ directly, and through the max if j = a and the min if j = b.",
             sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "[`min_max_scale.backward`](../refnorm/norms/min_max_scale.py) computes:",
        Step("All of g, plus the min's and max's shares at their positions.", sp.Eq(dx[j], C_DX), "compact"),
        Step("The gradient sums to zero over the slice (a shift of x changes nothing).", sp.Eq(C_SUM, 0), "sum0"),
        Step("Its component along x; 0 at ε = 0, where y does not change when x is scaled.",
             sp.Eq(C_X, C_XR), "scale"),
    ))
    ties = Section("Ties: the convention", (
        "Where several positions tie for the max (or the min), the max is not differentiable: its one-sided "
        "derivatives pick different positions. refnorm follows torch's `amax`/`amin` backward (torch.max over "
        "a dim instead sends everything to one index): the share of the max is split evenly among the n_max "
        "positions that attain it, and the min's among the n_min that attain it. With the Iverson brackets "
        "[x_j = max] (1 at a position that attains the max, else 0):",
        Step("The convention; for n_max = n_min = 1 it is step 14. It equals step 14 averaged over every "
             "choice of a among the positions attaining the max and of b among those attaining the min.",
             sp.Eq(dx[j], T_DX), "ties"),
        "Averaging keeps the linear identities: with ties (the tied x_j equal to the max or the min), steps 15 "
        "and 16 still hold (`prove()` checks every tie pattern for n = 2..5).",
        Step("A constant slice with ε > 0: every position ties for both (n_max = n_min = n, ŷ = 0, D = ε), so "
             "S₂ = 0 and the convention gives the mean-removed g. It is not a derivative: the directional "
             "derivative there along h is Σ g_i (h_i − min h)/ε, not linear in h.",
             sp.Eq(dx[j], K_DX), "const"),
        "A constant slice with ε = 0 is 0/0; refnorm's convention is y = 0 (then y = β) and ∂ℓ/∂x = 0, the "
        "derivative of the constant chosen there (also what scikit-learn's MinMaxScaler gives for y).",
    ))
    return Document(
        name=NAME, title="Min-max scaling: the backward pass", notation=N,
        intro=("Min-max scaling (seed 002's \"feature normalization\" in place of LayerNorm) maps each slice of the "
               "`dim` axes onto [0, 1] by its min and max. Below: one slice of n values; the slices are "
               "independent except for γ and β, which they share. The forward is piecewise: the gradient is "
               "derived where the max and the min are each attained once, and ties follow a stated convention.",),
        sections=(fwd, bwd, compact, ties),
        checks=(
            "`prove()`: every backward step and the closed form against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i "
            "with max = x_a and min = x_b, for n = 2..5 (every a ≠ b) and for general n, a, b; the zero sum and "
            "the x-component; the tie convention as the average over the choices of a and b, and the zero sum "
            "and x-component under every tie pattern (n = 2..5); the constant slice.",
            f"`check_numeric()`: against {spec_ref(NAME)} (y, dx, dweight, dbias) at "
            "ε = 0 and ε > 0, one and two `dim` axes; slices with tied maxima and minima; constant slices with "
            "ε > 0 (step 18) and ε = 0 (y = β, ∂ℓ/∂x = 0).",
        ),
        links=navigation("min_max_scale", "offline", "z_score"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def _defs(A, B):
    """(DD, YH, L) with max = x_A, min = x_B: D, ŷ_q and ℓ = Σ ∂ℓ/∂y_i y_i as functions of x."""
    DD = x[A] - x[B] + eps
    YH = lambda q: (x[q] - x[B]) / DD  # noqa: E731
    L = sp.Sum(dy[i] * (gamma[i] * YH(i) + beta[i]), (i, 1, n))
    return DD, YH, L


def _sums(YH):
    """{S1: ..., S2: ...} with g = γ ∂ℓ/∂y and ŷ = YH."""
    return {S1: sp.Sum(gamma[i] * dy[i], (i, 1, n)), S2: sp.Sum(gamma[i] * dy[i] * YH(i), (i, 1, n))}


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    """Every keyed step of document() (n = ``sizes`` with every a != b, and general n, a, b)."""
    P = Prover(NAME)
    Dp = sp.Symbol("Dp", positive=True)
    sub_g = by_index(g, lambda q: gamma[q] * dy[q])

    def claims(A, B):
        DD, YH, L = _defs(A, B)
        base = {DD: Dp}
        rules = (_sums(YH), sub_g, {D: DD})
        sub_yh = by_index(yhat, YH)
        true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
        closed = lambda q: subs_all(C_DX.xreplace({j: q, a: A, b: B}), *rules)  # noqa: E731
        # graph view: ℓ(x, max, min) with max and min independent nodes
        Lg = sp.Sum(dy[i] * gamma[i] * (x[i] - mn) / (mx - mn + eps), (i, 1, n))
        at = {mx: x[A], mn: x[B]}
        return {
            "dgamma": lambda J: (sp.diff(L, gamma[J]) - subs_all(B_DGAMMA.xreplace({j: J}), sub_yh)).xreplace(base),
            "dbeta": lambda J: sp.diff(L, beta[J]) - B_DBETA.xreplace({j: J}),
            "dyhat": lambda J: sp.diff(sp.Sum(dy[i] * (gamma[i] * yhat[i] + beta[i]), (i, 1, n)), yhat[J])
            - B_G.xreplace({j: J}),
            "dmax": lambda J: (sp.diff(Lg, mx).xreplace(at) - subs_all(B_DMAX, *rules)).xreplace(base),
            "dmin": lambda J: (sp.diff(Lg, mn).xreplace(at) - subs_all(B_DMIN, *rules)).xreplace(base),
            "dx": lambda J: (true_dx(J) - subs_all(B_DX.xreplace({j: J, a: A, b: B}), {dmx: B_DMAX, dmn: B_DMIN},
                                                   *rules)).xreplace(base),
            "compact": lambda J: (true_dx(J) - closed(J)).xreplace(base),
            "sum0": lambda J: sp.Sum(closed(k), (k, 1, n)).xreplace(base),
            "scale": lambda J: (sp.Sum(x[k] * closed(k), (k, 1, n)) - subs_all(C_XR, *rules)).xreplace(base),
        }, {Dp: DD}

    for M in sizes:
        for A, B in itertools.permutations(range(1, M + 1), 2):
            cl, back = claims(A, B)
            for key, build in cl.items():
                for J in (range(1, M + 1) if key not in ("sum0", "scale") else [None]):
                    P.claim(key, f"{M}, a = {A}, b = {B}" + ("" if J is None else f", j = {J}"),
                            build(J).xreplace({n: M}), back=back if key == "scale" else None)
    if general:
        cl, back = claims(a, b)
        for key, build in cl.items():
            P.claim(key, "general", build(j), general=True, ranges={j: (1, n), a: (1, n), b: (1, n)},
                    back=back if key == "scale" else None)
    _prove_ties(P, sizes)
    return P.done()


def _prove_ties(P: Prover, sizes) -> None:
    """The convention (step 17) under every tie pattern: the sets T_max, T_min of positions attaining the
    max and the min (non-empty, disjoint; the constant slice separately)."""
    xmin, Dt = sp.Symbol("xmin", real=True), sp.Symbol("Dt", positive=True)
    xmax = xmin + Dt - eps                      # so that D = max − min + ε is the symbol Dt
    for M in sizes:
        pos = range(1, M + 1)
        subsets = [frozenset(c) for r in range(1, M) for c in itertools.combinations(pos, r)]
        for tmax, tmin in itertools.product(subsets, subsets):
            if tmax & tmin:
                continue
            xs = {q: (xmax if q in tmax else xmin if q in tmin else x[q]) for q in pos}
            YH = lambda q: (xs[q] - xmin) / Dt  # noqa: E731
            sums = {S1: sp.Sum(g[i], (i, 1, M)).doit(), S2: sum(g[q] * YH(q) for q in pos)}
            tie = {nmax: len(tmax), nmin: len(tmin), D: Dt}
            ind = {**{at_max[q]: int(q in tmax) for q in pos}, **{at_min[q]: int(q in tmin) for q in pos}}
            tdx = lambda q: subs_all(T_DX.xreplace({j: q}), ind, tie, sums)  # noqa: E731
            tag = f"{M}, T_max = {sorted(tmax)}, T_min = {sorted(tmin)}"
            for J in pos:
                avg = sum(C_DX.xreplace({j: J, a: A, b: B}) for A in tmax for B in tmin) / (len(tmax) * len(tmin))
                P.claim("ties", f"{tag}, j = {J}", tdx(J) - subs_all(avg, {D: Dt}, sums))
            P.claim("ties sum0", tag, sum(tdx(q) for q in pos))
            P.claim("ties scale", tag, sum(xs[q] * tdx(q) for q in pos) - subs_all(C_XR, {D: Dt}, sums))
        # a constant slice, ε > 0: all positions attain both, ŷ = 0, D = ε
        for J in pos:
            e = subs_all(T_DX.xreplace({j: J}), lambda t: t.replace(
                lambda u: isinstance(u, sp.Indexed) and u.base in (at_max, at_min), lambda u: sp.S.One),
                {nmax: M, nmin: M, D: eps, S2: 0}) - K_DX.xreplace({j: J, n: M})
            P.claim("const", f"{M}, j = {J}", e)


# ----------------------------------------------------------------------------------------- numeric
def _tie_forms(M: int):
    """Concrete ŷ_q and step 18 for n = M: symbols max, min, n_max, n_min per slice, indicators per position."""
    yh = [((x[q] - mn) / F_D) for q in range(1, M + 1)]
    sums = {S1: sum(g[q] for q in range(1, M + 1)), S2: sum(g[q] * yh[q - 1] for q in range(1, M + 1))}
    dxs = [subs_all(T_DX.xreplace({j: J}), sums, {D: F_D}) for J in range(1, M + 1)]
    return yh, dxs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261129) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    ties = np.array([[3.0, 1.0, 3.0, 0.0, 0.0, 2.0], [-1.0, 4.0, 4.0, 4.0, -1.0, 0.5],
                     [2.0, 2.0, 2.0, 2.0, 2.0, 2.0], [0.25, -3.0, 1.5, 1.5, -0.5, 1.0]])
    cases = (((5, 6), -1, None), ((2, 3, 2), [1, 2], None), ((4, 6), -1, ties))
    for shape, dim, fixed in cases:
        pshape = tuple(shape[1:])
        M = int(np.prod(pshape))
        for ev in (0.0, 0.1):
            xs = rng.standard_normal(shape) * 2 + 0.5 if fixed is None else fixed
            w, bb, dyv = rng.standard_normal(pshape), rng.standard_normal(pshape), rng.standard_normal(shape)
            res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": bb}, config={"dim": dim, "eps": ev},
                                   grad_outputs={"y": dyv})
            X, DY = xs.reshape(-1, M), dyv.reshape(-1, M)
            hi, lo = X.max(1, keepdims=True), X.min(1, keepdims=True)
            const = (hi == lo)[:, 0]
            ismax, ismin = (X == hi).astype(float), (X == lo).astype(float)
            yh, dxs = _tie_forms(M)
            with np.errstate(divide="ignore", invalid="ignore"):    # ŷ of a constant slice at ε = 0 is 0/0
                vals = lambdify_slices(yh + dxs, {x: X, g: DY * w.reshape(M), at_max: ismax, at_min: ismin},
                                       {mx: hi[:, 0], mn: lo[:, 0], nmax: ismax.sum(1), nmin: ismin.sum(1),
                                        eps: ev}, M)
            yhv, dxv = (np.stack(vals[q * M:(q + 1) * M], -1) for q in range(2))
            if ev == 0:      # the constant-slice convention at ε = 0
                yhv, dxv = np.where(const[:, None], 0.0, yhv), np.where(const[:, None], 0.0, dxv)
            tag = f"{shape} dim={dim} eps={ev}" + (" ties" if fixed is not None else "")
            chk.compare(f"y {tag}", res.outputs["y"], (yhv * w.reshape(M) + bb.reshape(M)).reshape(shape))
            chk.compare(f"dx {tag}", res.grads["x"], dxv.reshape(shape))
            chk.compare(f"dweight {tag}", res.grads["weight"], (DY * yhv).sum(0).reshape(pshape))
            chk.compare(f"dbias {tag}", res.grads["bias"], DY.sum(0).reshape(pshape))
            if fixed is not None and ev > 0:   # the constant row: step 18
                kdx = [K_DX.xreplace({j: J, n: M}) for J in range(1, M + 1)]
                row = np.flatnonzero(const)[0]
                gv = DY[row] * w.reshape(M)
                want = np.array([float(e.xreplace({S1: gv.sum(), eps: ev, **{g[q]: gv[q - 1] for q in range(1, M + 1)}}))
                                 for e in kdx])
                chk.compare("constant slice dx, eps > 0 (step 18)", res.grads["x"].reshape(-1, M)[row], want)
    return chk.done()
