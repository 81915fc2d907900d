"""PolyNorm (PolyCom, "Polynomial Composition Activations", Zhuo et al., ICLR 2025, arXiv:2411.03884), as vLLM's
``poly_norm`` kernel and its ``polynorm_naive`` reference and Liger's ``LigerPolyNorm``:

    y = w0 * rms(x^3) + w1 * rms(x^2) + w2 * rms(x) + bias,    rms(u) = u / sqrt(mean_H(u^2) + eps)

x: (*, H), each power normalized over the last axis H on its own (eps inside the square root, default
1e-6 as vLLM and Liger). ``weight``: (3,), in that order: weight[0] multiplies the CUBIC term, weight[2]
the linear one (vLLM: ``weight[0] * norm(x**3) + weight[1] * norm(x**2) + weight[2] * norm(x)``;
PolyCom initializes it to 1/3 each, Liger to (0.3, 0.4, 0.3)). ``bias``: one scalar, shape (1,) as vLLM's
(or ()), optional. Both are shared by every element, so their gradients sum over all of x.
Outputs ``y`` only.

The powers are the float64 values of the input: a kernel must form x^3 in its float32 accumulator, not
in the input dtype (float16's x^3 overflows at |x| > 40.3: 40.3^3 = 65504).

Backward (derivations/poly_norm.md), per power p with its weight c_p (c_3 = w0, c_2 = w1, c_1 = w2),
h_p = rms(x^p), r_p = (mean(x^(2p)) + eps)^(-1/2), g_p = dy * c_p:
    du_p = r_p * (g_p - h_p * mean_H(g_p * h_p))        rms_norm's backward, u_p = x^p
    dx = 3 x^2 du_3 + 2 x du_2 + du_1
    dweight[k] = sum over every element of dy * h_(3 - k),      dbias = sum over every element of dy
The arguments are checked in _poly_norm_check.py; the equations are the specification's
(refnorm/specs/poly_norm.py, whole-array NumPy: no separate fast path).
"""
from __future__ import annotations

from ..spec import NormSpec
from ..specs import poly_norm as S
from ._poly_norm_check import NAME, check  # noqa: F401 (check: the argument checks, re-exported)


SPEC = NormSpec(
    name=NAME,
    summary="y = w0 rms(x^3) + w1 rms(x^2) + w2 rms(x) + bias, rms(u) = u / sqrt(mean_H(u^2) + eps), weight (3,)",
    inputs=("x", "weight", "bias"), required=("x", "weight"),
    outputs=("y",),
    options={"eps": 1e-6},
    forward=S.forward, backward=S.backward,
)
