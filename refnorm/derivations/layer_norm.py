"""LayerNorm's backward: BatchNorm's algebra on a row, with a per-element gain, proven with SymPy.

One row: the m values x_1..x_m of the trailing ``normalized_shape`` axes. The chain rule is the one of
batch_norm.py; what changes is that gamma_j varies along the row, so it is folded into g_j = gamma_j
dl/dy_j before the two means. ``centered_claims`` is reused by group_norm and weight_standardization.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Erratum, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, affine, dmu, dvar, dx, dxhat, dy, eps, g, i, j, k, l, m, mu, s, var, x, xhat, y

NAME = "layer_norm"
N = ROW.copy()
gamma, beta, dgamma, dbeta = affine(N, "e")

F_Y = sp.Add(gamma[j] * xhat[j], beta[j], evaluate=False)
B_DGAMMA = dy[j] * xhat[j]
B_DBETA = dy[j]
B_G = gamma[j] * dy[j]
B_DVAR = -sp.Sum(g[i] * (x[i] - mu), (i, 1, m)) / (2 * (var + eps) ** sp.Rational(3, 2))
B_DMU = -sp.Sum(g[i], (i, 1, m)) / sp.sqrt(var + eps)
B_DX = sp.Add(g[j] / sp.sqrt(var + eps), dvar * 2 * (x[j] - mu) / m, dmu / m, evaluate=False)
C_DX = bn.C_DX
C_SUM = sp.Sum(dx[j], (j, 1, m))


def document() -> Document:
    fwd = Section("Forward (one row)", (
        Step("Mean and biased variance over the row's m elements (the trailing `normalized_shape` axes).",
             sp.Eq(mu, bn.F_MU)),
        Step("Same as BatchNorm, over a row instead of a channel.", sp.Eq(var, bn.F_VAR)),
        Step("Normalize; ε inside the square root.", sp.Eq(xhat[j], bn.F_XHAT)),
        Step("Element-wise affine: γ and β have the row's shape.", sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward", (
        "The graph is [BatchNorm's](batch_norm.md) with the axes transposed: statistics over the row, "
        "parameter gradients summed over the rows (the leading axes) instead of within the channel.",
        Step("Per row; refnorm sums this over all rows.", sp.Eq(dgamma[j], B_DGAMMA), "dgamma"),
        Step("Per row; summed over all rows likewise.", sp.Eq(dbeta[j], B_DBETA), "dbeta"),
        Step("x̂_j reaches ℓ through y_j only, scaled by its own γ_j: call it g_j.", sp.Eq(dxhat[j], B_G), "dxhat"),
        Step("Variance path, as in BatchNorm with ∂ℓ/∂x̂_i = g_i.", sp.Eq(dvar, B_DVAR), "dvar"),
        Step("Mean path; its σ² term vanishes as in BatchNorm (Σ (x_i − μ) = 0).", sp.Eq(dmu, B_DMU), "dmu"),
        Step("The three paths from x_j.", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "[`layer_norm.backward`](../refnorm/norms/layer_norm.py) calls "
        "[`_common.centered_backward`](../refnorm/norms/_common.py) with g = dy · weight:",
        Step("BatchNorm's formula with g_j = γ_j ∂ℓ/∂y_j: γ_j varies along the row, so it must be folded "
             "into g before the two means (in BatchNorm γ could be factored out).", sp.Eq(dx[j], C_DX), "compact"),
        Step("The gradient sums to zero along each row, whatever γ.", sp.Eq(C_SUM, 0), "sum0"),
    ))
    errata = (
        Erratum("LayerNorm's formula", r"LN(z;\alpha, \beta) = \frac{(z - \mu)}{\sigma}\odot\alpha + \beta",
                sp.Eq(xhat[j], bn.F_XHAT),
                "Without ε a constant row (σ = 0) gives 0/0; torch, ONNX and refnorm put ε inside the square "
                "root (default 1e-5). The seed's remark that the backward is BatchNorm's holds, with g_j as above."),
    )
    return Document(
        name=NAME, title="LayerNorm: the backward pass", notation=N,
        intro=("LayerNorm (Ba, Kiros & Hinton 2016) normalizes each sample over its trailing axes. "
               "Below: one row of m values; the rows are independent except for γ and β, which they share.",),
        sections=(fwd, bwd, compact),
        errata_source="seed 003, LayerNorm section", errata=errata,
        checks=(
            "`prove()`: every backward step against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i with a "
            "different γ_i, β_i at every position, for m = 2..5 and for general m.",
            f"`check_numeric()`: the closed forms against {spec_ref(NAME)} "
            "(y, dx, dweight, dbias; one and two normalized axes).",
        ),
        links=navigation("layer_norm", "batch_norm", "rms_norm"),
    )


steps, render = family_functions(document)


# ------------------------------------------------------------------------------------------ proofs
def defs(gain, shift=None):
    """(MU, VAR, XH, L): the forward as functions of x; gain(q), shift(q) give position q's affine."""
    MU = sp.Sum(x[k], (k, 1, m)) / m
    VAR = sp.Sum((x[l] - MU) ** 2, (l, 1, m)) / m
    XH = lambda q: (x[q] - MU) / sp.sqrt(VAR + eps)  # noqa: E731
    L = sp.Sum(dy[i] * (gain(i) * XH(i) + (shift(i) if shift else 0)), (i, 1, m))
    return MU, VAR, XH, L


def centered_claims(P: Prover, gain, *, sizes, general, prefix: str = "") -> None:
    """The claims shared by every mean-and-variance normalizer whose gain at position q is gain(q)."""
    MU, VAR, XH, L = defs(gain)
    base = {VAR + eps: s}
    stats = {mu: MU, var: VAR}
    sub_g = by_index(g, lambda q: gain(q) * dy[q])
    Lg = sp.Sum(dy[i] * gain(i) * (x[i] - mu) / sp.sqrt(var + eps), (i, 1, m))
    P.identity(prefix + "dvar", lambda J: sp.diff(Lg, var) - subs_all(B_DVAR, sub_g),
               m=m, sizes=sizes, general=general)
    VMU = sp.Sum((x[l] - mu) ** 2, (l, 1, m)) / m
    P.identity(prefix + "dmu", lambda J: subs_all(sp.diff(Lg.xreplace({var: VMU}), mu) - B_DMU, sub_g, stats),
               m=m, sizes=sizes, general=general, base={VAR + eps: s})
    true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
    P.identity(prefix + "dx", lambda J: true_dx(J) - subs_all(B_DX.xreplace({j: J}), {dmu: B_DMU, dvar: B_DVAR},
                                                                sub_g, stats),
               m=m, j=j, sizes=sizes, general=general, base=base)
    closed = lambda q: subs_all(C_DX.xreplace({j: q}), sub_g, by_index(xhat, XH), stats)  # noqa: E731
    P.identity(prefix + "compact", lambda J: true_dx(J) - closed(J), m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity(prefix + "sum0", lambda J: sp.Sum(closed(k), (k, 1, m)), m=m, sizes=sizes, general=general, base=base)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    MU, VAR, XH, L = defs(lambda q: gamma[q], lambda q: beta[q])
    base = {VAR + eps: s}
    P.identity("dgamma", lambda J: sp.diff(L, gamma[J]) - subs_all(B_DGAMMA.xreplace({j: J}), by_index(xhat, XH)),
               m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity("dbeta", lambda J: sp.diff(L, beta[J]) - B_DBETA.xreplace({j: J}), m=m, j=j, sizes=sizes,
               general=general)
    X = sp.IndexedBase("X")
    P.identity("dxhat", lambda J: sp.diff(sp.Sum(dy[i] * (gamma[i] * X[i] + beta[i]), (i, 1, m)), X[J])
               - B_G.xreplace({j: J}), m=m, j=j, sizes=sizes, general=general)
    centered_claims(P, lambda q: gamma[q], sizes=sizes, general=general)
    return P.done()


# ----------------------------------------------------------------------------------------- numeric
def closed_forms(M: int, gain):
    """Concrete-M expressions (y without shift, dx) of position J = 1..M, for lambdify."""
    MU, VAR, XH, _ = defs(gain)
    stats = {mu: MU, var: VAR}
    xh = by_index(xhat, XH)
    sub_g = by_index(g, lambda q: gain(q) * dy[q])
    ys = [(gain(J) * XH(J)).xreplace({m: M}).doit() for J in range(1, M + 1)]
    dxs = [subs_all(C_DX.xreplace({j: J}), sub_g, xh, stats).xreplace({m: M}).doit() for J in range(1, M + 1)]
    xhs = [XH(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
    return ys, dxs, xhs


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261123) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    for shape in ((4, 5), (2, 2, 3)):
        k_ = 1 if len(shape) == 2 else 2
        nshape = shape[len(shape) - k_:]
        M = int(np.prod(nshape))
        xs = rng.standard_normal(shape) * 3 - 1
        w, b = rng.standard_normal(nshape), rng.standard_normal(nshape)
        dyv = rng.standard_normal(shape)
        ev = 1e-2
        res = spec_evaluate(NAME, {"x": xs, "weight": w, "bias": b},
                               config={"normalized_shape": list(nshape), "eps": ev}, grad_outputs={"y": dyv})
        rows, drows = xs.reshape(-1, M), dyv.reshape(-1, M)
        ys, dxs, xhs = closed_forms(M, lambda q: gamma[q])
        vals = lambdify_slices(ys + dxs + xhs, {x: rows, dy: drows, gamma: np.broadcast_to(w.reshape(M), rows.shape)},
                               {eps: ev}, M)
        yv, dxv, xhv = (np.stack(vals[a * M:(a + 1) * M], -1) for a in range(3))
        chk.compare(f"y {shape}", res.outputs["y"], (yv + b.reshape(M)).reshape(shape))
        chk.compare(f"dx {shape}", res.grads["x"], dxv.reshape(shape))
        chk.compare(f"dweight {shape}", res.grads["weight"], (drows * xhv).sum(0).reshape(nshape))
        chk.compare(f"dbias {shape}", res.grads["bias"], drows.sum(0).reshape(nshape))
    return chk.done()
