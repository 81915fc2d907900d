"""Weight Standardization's backward (Qiao et al. 2019), proven with SymPy.

Per output channel, over its fan-in (every other axis): LayerNorm without affine applied to the
weight, so the closed form is layer_norm's with g = dl/dW_hat.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from . import batch_norm as bn
from . import layer_norm as ln
from ._proof import spec_evaluate, SIZES, NumericCheck, Prover, lambdify_slices
from ._render import Document, Section, Step, family_functions, navigation, spec_ref
from ._symbols import ROW, eps, j, mu, var

NAME = "weight_standardization"
N = ROW.copy()
W = N.indexed("x", "W_{{{i}}}")           # same base as batch_norm's x: the proofs reuse layer_norm's
What = N.indexed("xhat", r"\hat{{W}}_{{{i}}}", "Ŵ[{i}]")
g = N.indexed("g", r"\frac{{\partial \ell}}{{\partial \hat{{W}}_{{{i}}}}}", "∂ℓ/∂Ŵ[{i}]")
dW = N.indexed("dx", r"\frac{{\partial \ell}}{{\partial W_{{{i}}}}}", "∂ℓ/∂W[{i}]")


def document() -> Document:
    fwd = Section("Forward (one output channel)", (
        Step("Mean over the channel's fan-in: its m = C_in · k_1 · k_2 · … weights.", sp.Eq(mu, bn.F_MU)),
        Step("Biased variance.", sp.Eq(var, bn.F_VAR)),
        Step("Standardize; ε inside the square root (see the note below); no affine.",
             sp.Eq(What[j], bn.F_XHAT)),
    ))
    bwd = Section("Backward", (
        "The forward is [LayerNorm's](layer_norm.md) on a row of the weight with γ = 1 and β = 0, so its chain "
        "rule gives, with the upstream gradient ∂ℓ/∂Ŵ in the role of g "
        "([refnorm/norms/weight_standardization.py](../refnorm/norms/weight_standardization.py)):",
        Step("Two mean-removals, one per statistic.", sp.Eq(dW[j], ln.C_DX), "compact"),
        Step("The gradient sums to zero over each output channel.", sp.Eq(ln.C_SUM, 0), "sum0"),
        "Note: the authors' reference code (and many copies of it) divides by the unbiased standard deviation "
        "plus ε, `(W - mean) / (std + 1e-5)`; refnorm follows the paper's equation, the biased variance with ε "
        "inside the root, as every other normalizer here.",
    ))
    return Document(
        name=NAME, title="Weight Standardization: the backward pass", notation=N,
        intro=("Weight Standardization (Qiao et al. 2019) standardizes each output channel of a convolution "
               "weight W (out, in, k...) over its fan-in.",),
        sections=(fwd, bwd),
        checks=(
            "`prove()`: LayerNorm's claims with γ = 1 (the chain-rule steps, the closed form, the zero sum) "
            "against the derivative of ℓ = Σ ∂ℓ/∂Ŵ_i · Ŵ_i, for m = 2..5 and general m.",
            f"`check_numeric()`: against {spec_ref(NAME)} (Ŵ and ∂ℓ/∂W).",
        ),
        links=navigation("weight_standardization", "weight_norm", "lp_normalize"),
    )


steps, render = family_functions(document)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    ln.centered_claims(P, lambda q: sp.S.One, sizes=sizes, general=general)
    return P.done()


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261127) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    shape = (3, 2, 2, 1)
    M = 4
    ws, dys = rng.standard_normal(shape) * 0.2 + 0.05, rng.standard_normal(shape)
    cfg = {"eps": 1e-5}
    res = spec_evaluate(NAME, {"x": ws}, config=cfg, grad_outputs={"y": dys})
    ys, dxs, _ = ln.closed_forms(M, lambda q: sp.S.One)
    vals = lambdify_slices(ys + dxs, {bn.x: ws.reshape(3, M), bn.dy: dys.reshape(3, M)}, {eps: cfg["eps"]}, M)
    chk.compare("y", res.outputs["y"], np.stack(vals[:M], -1).reshape(shape))
    chk.compare("dx", res.grads["x"], np.stack(vals[M:], -1).reshape(shape))
    return chk.done()
