"""DyT's backward (dynamic tanh, "Transformers without Normalization", 2025), proven with SymPy.

One row of m values; alpha is one scalar shared by every element of x (every row), gamma and beta one
value per position of the row, shared by the rows. Nothing is reduced in the forward; the backward's
only reduction is alpha's gradient, a sum over every element.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ._proof import SIZES, NumericCheck, Prover, by_index, lambdify_slices, spec_evaluate, subs_all
from ._render import Document, Section, Step, family_functions, spec_ref
from ._symbols import ROW, affine, dx, dy, i, j, m, x, y

NAME = "dyt"
N = ROW.copy()
alpha = N.symbol("alpha", r"\alpha", "α")
t = N.indexed("t", "t_{{{i}}}", "t[{i}]")
gamma, beta, dgamma, dbeta = affine(N, "e")
dalpha = N.grad(alpha, "dalpha")

F_T = sp.tanh(alpha * x[j])
F_Y = sp.Add(gamma[j] * t[j], beta[j], evaluate=False)
B_DGAMMA = dy[j] * t[j]
B_DBETA = dy[j]
B_DX = alpha * gamma[j] * dy[j] * (1 - t[j] ** 2)
B_DALPHA = sp.Sum(gamma[i] * dy[i] * (1 - t[i] ** 2) * x[i], (i, 1, m))
C_SECH = 1 / sp.cosh(alpha * x[j]) ** 2


def document() -> Document:
    fwd = Section("Forward (one row)", (
        Step("The element-wise squashing: alpha is one learnable scalar for the whole tensor.", sp.Eq(t[j], F_T)),
        Step("Per-channel scale and shift (`weight`, `bias`), as LayerNorm's affine.", sp.Eq(y[j], F_Y)),
    ))
    bwd = Section("Backward", (
        Step("Per row; refnorm sums it over the rows.", sp.Eq(dgamma[j], B_DGAMMA), "dgamma"),
        Step("Per row; summed over the rows likewise.", sp.Eq(dbeta[j], B_DBETA), "dbeta"),
        Step("x_j reaches the loss through t_j only: tanh' = 1 - t^2, times the inner derivative alpha.",
             sp.Eq(dx[j], B_DX), "dx"),
        Step("alpha reaches the loss through EVERY t_i: the sum runs over the row here, and refnorm adds the "
             "rows' sums: one reduction over all of x, N = x.size terms.", sp.Eq(dalpha, B_DALPHA), "dalpha"),
    ))
    sat = Section("Where tanh saturates", (
        "For |alpha x| beyond ~9 (float32) or ~19 (float64) the computed t is 1 and 1 - t^2 is 0, while the "
        "true tanh' is about 4 exp(-2 |alpha x|). The specification computes tanh' as (1 / cosh)^2, which keeps "
        "it until it underflows; a float32 kernel's 1 - t^2 errs there by at most its tanh's own error (the "
        "bound in refnorm/check/bounds/pointwise.py); one that rounds t to float16 first loses 2^-10.",
        Step("The identity the specification uses.", sp.Eq(1 - t[j] ** 2, C_SECH), "sech"),
    ))
    return Document(
        name=NAME, title="DyT (dynamic tanh): the backward pass", notation=N,
        intro=("DyT (Zhu, Chen, He, LeCun, Liu 2025) replaces a transformer's LayerNorm by y = γ tanh(αx) + β, "
               "with one learnable scalar α. One row of m values below.",),
        sections=(fwd, bwd, sat),
        checks=(
            "`prove()`: ∂ℓ/∂γ_j, ∂ℓ/∂β_j, ∂ℓ/∂x_j and ∂ℓ/∂α against the derivative of ℓ = Σ ∂ℓ/∂y_i · y_i, with a "
            "different γ_i and β_i at every position, for m = 2..5 and general m; the cosh identity likewise.",
            f"`check_numeric()`: against {spec_ref(NAME)}: y, dx, dalpha (summed over the rows), dweight and dbias.",
        ),
        links=(("index", "README.md"), ("code: refnorm/specs/dyt.py", "../refnorm/specs/dyt.py"),
               ("next: poly_norm", "poly_norm.md")),
    )


steps, render = family_functions(document)


def _T(q):
    return sp.tanh(alpha * x[q])


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    L = sp.Sum(dy[i] * (gamma[i] * _T(i) + beta[i]), (i, 1, m))
    sub_t = by_index(t, _T)
    for key, var, closed in (("dgamma", gamma, B_DGAMMA), ("dbeta", beta, B_DBETA), ("dx", x, B_DX)):
        P.identity(key, lambda J, var=var, closed=closed: sp.diff(L, var[J]) - subs_all(closed.xreplace({j: J}), sub_t),
                   m=m, j=j, sizes=sizes, general=general)
    P.identity("dalpha", lambda J: sp.diff(L, alpha) - subs_all(B_DALPHA, sub_t), m=m, sizes=sizes, general=general)
    P.identity("sech", lambda J: subs_all((1 - t[j] ** 2 - C_SECH).xreplace({j: J}), sub_t), m=m, j=j,
               sizes=sizes[:1], general=general, simplify=True)
    return P.done()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261128) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    R, M = 4, 5
    xs = rng.standard_normal((R, M)) * 2
    w, b, dyv, a = rng.standard_normal(M), rng.standard_normal(M), rng.standard_normal((R, M)), 0.8
    res = spec_evaluate(NAME, {"x": xs, "alpha": np.array([a]), "weight": w, "bias": b}, grad_outputs={"y": dyv})
    sub_t = by_index(t, _T)
    at = lambda e, J: subs_all(e.xreplace({j: J}), sub_t).xreplace({m: M}).doit()  # noqa: E731
    ys = [at(F_Y, J) for J in range(1, M + 1)]
    dxs = [at(B_DX, J) for J in range(1, M + 1)]
    dgs = [at(B_DGAMMA, J) for J in range(1, M + 1)]
    vals = lambdify_slices(ys + dxs + dgs + [at(B_DALPHA, 1)],
                           {x: xs, dy: dyv, gamma: np.broadcast_to(w, xs.shape), beta: np.broadcast_to(b, xs.shape)},
                           {alpha: a}, M)
    yv, dxv, dgv = (np.stack(vals[q * M:(q + 1) * M], -1) for q in range(3))
    chk.compare("y", res.outputs["y"], yv)
    chk.compare("dx", res.grads["x"], dxv)
    chk.compare("dweight", res.grads["weight"], dgv.sum(0))
    chk.compare("dbias", res.grads["bias"], dyv.sum(0))
    chk.compare("dalpha", res.grads["alpha"], np.array([vals[3 * M].sum()]))
    return chk.done()
