"""The symbols the derivations share, each declared once with how it prints.

``ROW`` is the notation of one row (a channel, a slice) of m values: its size m and indices i, j, k, l; the
input x, the normalized x̂, the output y, the upstream gradient with the gain folded in g; the gradients
∂ℓ/∂y, ∂ℓ/∂x̂, ∂ℓ/∂x; the statistics μ, σ², ε and the gradients ∂ℓ/∂μ, ∂ℓ/∂σ². A family's notation
starts as a copy of ``ROW`` (or of the family it builds on) and adds its own symbols; the family imports
the shared ones from here. ``affine(N, per)`` declares a per-element or per-channel γ, β and their
gradients in ``N``.
"""
from __future__ import annotations

import sympy as sp

from ._render import Notation

ROW = Notation()
m = ROW.symbol("m", "m", integer=True, positive=True)
i, j, k, l = (ROW.symbol(c, c, integer=True, positive=True) for c in "ijkl")
x, y, g = (ROW.indexed(c, c + "_{{{i}}}") for c in "xyg")
xhat = ROW.indexed("xhat", r"\hat{{x}}_{{{i}}}", "x̂[{i}]")
dy, dxhat, dx = ROW.grad(y, "dy"), ROW.grad(xhat, "dxhat"), ROW.grad(x, "dx")
mu = ROW.symbol("mu", r"\mu", "μ")
var = ROW.symbol("var", r"\sigma^2", "σ²")
eps = ROW.symbol("eps", r"\varepsilon", "ε", positive=True)
dmu, dvar = ROW.grad(mu, "dmu"), ROW.grad(var, "dvar")
s = sp.Symbol("s", positive=True)     # stands for var + eps in the proofs


def affine(N: Notation, per: str) -> tuple:
    """(γ, β, ∂ℓ/∂γ, ∂ℓ/∂β), indexed, declared in ``N`` as gamma_<per> ...: ``per`` is "e" for one per
    element of the row (LayerNorm's), "c" for one per channel (GroupNorm's)."""
    gamma = N.indexed(f"gamma_{per}", r"\gamma_{{{i}}}", "γ[{i}]")
    beta = N.indexed(f"beta_{per}", r"\beta_{{{i}}}", "β[{i}]")
    return gamma, beta, N.grad(gamma, f"dgamma_{per}"), N.grad(beta, f"dbeta_{per}")
