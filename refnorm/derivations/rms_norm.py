"""RMSNorm's backward (Zhang & Sennrich 2019; torch.nn.functional.rms_norm), proven with SymPy.

One row of m values; no mean is removed, so only the mean-square path remains. Also the two
conventions refnorm offers: ``weight_offset`` (Gemma's (1 + weight) scale) and ``eps_placement``
"outside" (x / (sqrt(mean x^2) + eps)).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, by_index, lambdify_slices, subs_all
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, affine, dx, dxhat, dy, eps, g, i, j, k, m, s, x, xhat, y

NAME = "rms_norm"
N = ROW.copy()
nu = N.symbol("nu", r"\nu", "ν")
dnu = N.grad(nu, "dnu")
off = N.symbol("offset", "o", "o")
gamma, _, dgamma, _ = affine(N, "e")
t = sp.Symbol("t", positive=True)       # stands for sqrt(nu) in the eps-outside proofs

F_NU = sp.Sum(x[i] ** 2, (i, 1, m)) / m
F_XHAT = x[j] / sp.sqrt(nu + eps)
F_Y = sp.Add(gamma[j], off, evaluate=False) * xhat[j]
B_DGAMMA = dy[j] * xhat[j]
B_G = sp.Add(gamma[j], off, evaluate=False) * dy[j]
B_DNU = -sp.Sum(g[i] * x[i], (i, 1, m)) / (2 * (nu + eps) ** sp.Rational(3, 2))
B_DX = sp.Add(g[j] / sp.sqrt(nu + eps), dnu * 2 * x[j] / m, evaluate=False)
C_DX = (g[j] - xhat[j] * sp.Sum(g[i] * xhat[i], (i, 1, m)) / m) / sp.sqrt(nu + eps)
C_ORTH_L = sp.Sum(x[j] * dx[j], (j, 1, m))
C_ORTH_R = eps * sp.Sum(g[i] * x[i], (i, 1, m)) / (nu + eps) ** sp.Rational(3, 2)
_RMS_EPS = sp.Add(sp.sqrt(nu), eps, evaluate=False)
O_Y = gamma[j] * x[j] / _RMS_EPS
O_DX = (g[j] - x[j] * sp.Sum(g[i] * x[i], (i, 1, m)) / (m * sp.sqrt(nu) * _RMS_EPS)) / _RMS_EPS


def document() -> Document:
    fwd = Section("Forward (one row)", (
        Step("Mean square of the row's m elements: no mean is removed.", sp.Eq(nu, F_NU)),
        Step("Normalize by the root mean square; ε inside the square root, as torch.",
             sp.Eq(xhat[j], F_XHAT)),
        Step("Element-wise scale; o is `weight_offset` (0 by default, 1 for Gemma's (1 + γ)); no bias.",
             sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward", (
        Step("Per row; refnorm sums it over the rows. The offset does not change it.",
             sp.Eq(dgamma[j], B_DGAMMA), "dgamma"),
        Step("x̂_j reaches ℓ through y_j only.", sp.Eq(dxhat[j], B_G), "dxhat"),
        Step("ν reaches ℓ through every x̂_i.", sp.Eq(dnu, B_DNU), "dnu"),
        Step("x_j reaches ℓ directly and through ν (∂ν/∂x_j = 2 x_j / m).", sp.Eq(dx[j], B_DX), "dx"),
    ))
    compact = Section("Closed form used in refnorm", (
        "With g_j as in step 5: LayerNorm's formula without the mean term (compare [layer_norm](layer_norm.md)); "
        "see [refnorm/norms/rms_norm.py](../refnorm/norms/rms_norm.py).",
        Step("One projection: the component of g along x̂ is removed.", sp.Eq(dx[j], C_DX), "compact"),
        Step("So at ε = 0 the gradient is orthogonal to x (y does not change when x is scaled).",
             sp.Eq(C_ORTH_L, C_ORTH_R), "orth"),
    ))
    outside = Section("Variant: ε outside the square root (`eps_placement=\"outside\"`)", (
        Step("Some implementations add ε to the root mean square instead.", sp.Eq(y[j], O_Y)),
        Step("Then the derivative of √ν appears on its own. The formula needs ν > 0; at an all-zero row "
             "with ε > 0 the limit exists (y = x/ε + O(|x|²)), so ∂ℓ/∂x_j = g_j / ε there (g_j as in step 5), which is "
             "what refnorm returns.", sp.Eq(dx[j], O_DX), "outside"),
    ))
    return Document(
        name=NAME, title="RMSNorm: the backward pass", notation=N,
        intro=("RMSNorm (Zhang & Sennrich 2019) rescales each row by its root mean square. One row of m "
               "values below; the rows share γ only.",),
        sections=(fwd, bwd, compact, outside),
        checks=(
            "`prove()`: every step against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i with a different γ_i at "
            "every position and a symbolic offset o, for m = 2..5 and general m; also the ε-outside variant.",
            f"`check_numeric()`: against {spec_ref(NAME)} (y, dx, dweight), with the "
            "offset and the ε-outside variant where the module offers them.",
        ),
        links=navigation("rms_norm", "layer_norm", "group_norm"),
    )


steps, render = family_functions(document)


def _defs():
    NU = sp.Sum(x[k] ** 2, (k, 1, m)) / m
    XH = lambda q: x[q] / sp.sqrt(NU + eps)  # noqa: E731
    L = sp.Sum(dy[i] * (gamma[i] + off) * XH(i), (i, 1, m))
    return NU, XH, L


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    NU, XH, L = _defs()
    base = {NU + eps: s}
    sub_g = by_index(g, lambda q: (gamma[q] + off) * dy[q])
    P.identity("dgamma", lambda J: sp.diff(L, gamma[J]) - subs_all(B_DGAMMA.xreplace({j: J}), by_index(xhat, XH)),
               m=m, j=j, sizes=sizes, general=general, base=base)
    X = sp.IndexedBase("X")
    P.identity("dxhat", lambda J: sp.diff(sp.Sum(dy[i] * (gamma[i] + off) * X[i], (i, 1, m)), X[J])
               - B_G.xreplace({j: J}), m=m, j=j, sizes=sizes, general=general)
    Lg = sp.Sum(dy[i] * (gamma[i] + off) * x[i] / sp.sqrt(nu + eps), (i, 1, m))
    P.identity("dnu", lambda J: sp.diff(Lg, nu) - subs_all(B_DNU, sub_g), m=m, sizes=sizes, general=general)
    true_dx = lambda J: sp.diff(L, x[J])  # noqa: E731
    P.identity("dx", lambda J: true_dx(J) - subs_all(B_DX.xreplace({j: J}), {dnu: B_DNU}, sub_g, {nu: NU}),
               m=m, j=j, sizes=sizes, general=general, base=base)
    closed = lambda q: subs_all(C_DX.xreplace({j: q}), sub_g, by_index(xhat, XH), {nu: NU})  # noqa: E731
    P.identity("compact", lambda J: true_dx(J) - closed(J), m=m, j=j, sizes=sizes, general=general, base=base)
    P.identity("orth", lambda J: sp.Sum(x[k] * closed(k), (k, 1, m)) - subs_all(C_ORTH_R, sub_g, {nu: NU}),
               m=m, sizes=sizes, general=general, base=base, back={s: NU + eps})
    Lo = sp.Sum(dy[i] * O_Y.xreplace({j: i}), (i, 1, m)).xreplace({nu: NU})
    sub_go = by_index(g, lambda q: gamma[q] * dy[q])
    P.identity("outside", lambda J: sp.diff(Lo, x[J]) - subs_all(O_DX.xreplace({j: J}), sub_go, {nu: NU}),
               m=m, j=j, sizes=sizes, general=general, base={NU: t ** 2})
    return P.done()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    import refnorm
    rng = np.random.default_rng(20261124) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    options = refnorm.get(NAME).options
    NU, XH, _ = _defs()
    M, R = 5, 4
    xs = rng.standard_normal((R, M)) * 2 + 0.3
    w, dyv, ev = rng.standard_normal(M), rng.standard_normal((R, M)), 1e-2
    variants = [({}, 0.0, False)]
    if "weight_offset" in options:
        variants.append(({"weight_offset": 1.0}, 1.0, False))
    if "eps_placement" in options:
        variants.append(({"eps_placement": "outside"}, 0.0, True))
    for extra, o, outside in variants:
        res = spec_evaluate(NAME, {"x": xs, "weight": w}, config={"normalized_shape": [M], "eps": ev, **extra},
                               grad_outputs={"y": dyv})
        gain = {off: o}
        if outside:
            ys = [O_Y.xreplace({j: J, nu: NU}).xreplace({m: M}).doit() for J in range(1, M + 1)]
            dxs = [subs_all(O_DX.xreplace({j: J}), by_index(g, lambda q: gamma[q] * dy[q]), {nu: NU})
                   .xreplace({m: M}).doit() for J in range(1, M + 1)]
            xhs = [(x[J] / (sp.sqrt(NU) + eps)).xreplace({m: M}).doit() for J in range(1, M + 1)]
        else:
            ys = [subs_all(F_Y.xreplace({j: J}), by_index(xhat, XH)).xreplace({m: M}).doit() for J in range(1, M + 1)]
            dxs = [subs_all(C_DX.xreplace({j: J}), by_index(g, lambda q: (gamma[q] + off) * dy[q]),
                            by_index(xhat, XH), {nu: NU}).xreplace({m: M}).doit() for J in range(1, M + 1)]
            xhs = [XH(J).xreplace({m: M}).doit() for J in range(1, M + 1)]
        vals = lambdify_slices(ys + dxs + xhs, {x: xs, dy: dyv, gamma: np.broadcast_to(w, xs.shape)},
                               {eps: ev, **gain}, M)
        yv, dxv, xhv = (np.stack(vals[a * M:(a + 1) * M], -1) for a in range(3))
        tag = str(extra or "default")
        chk.compare(f"y {tag}", res.outputs["y"], yv)
        chk.compare(f"dx {tag}", res.grads["x"], dxv)
        chk.compare(f"dweight {tag}", res.grads["weight"], (dyv * xhv).sum(0))
    return chk.done()
