"""norm_quant (a norm with a quantized output): no backward (forward only); what is derived is the checker's
bound on the pre-rounding value q = y / scale, from the bounds on y and on the scale, and the rule that
judges a quantized value with it (docs/tolerances.md, "Quantized outputs"). Proven with SymPy.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import sympy as sp

from ..norms._rounding import float32_odd
from ._proof import SIZES, NumericCheck, Prover, spec_evaluate
from ._render import Document, Section, Step, family_functions, navigation
from ._symbols import ROW, j, m, y

NAME = "norm_quant"
N = ROW.copy()
q = N.indexed("q", "q_{{{i}}}")
eta = N.indexed("eta", r"\eta_{{{i}}}", "η[{i}]")
Ey = N.indexed("Ey", r"E_{{y,{i}}}", "E_y[{i}]")
Eq = N.indexed("Eq", r"E_{{q,{i}}}", "E_q[{i}]")
dq = N.indexed("dq", r"\Delta q_{{{i}}}", "Δq[{i}]")
s = N.symbol("s", "s", "s", positive=True)
e = N.symbol("e", r"\epsilon_s", "ε_s", real=True)
a = N.symbol("a", "a", "a", real=True)
d1 = N.symbol("d1", r"\delta_1", "δ1", real=True)
d2 = N.symbol("d2", r"\delta_2", "δ2", real=True)
d3 = N.symbol("d3", r"\delta_3", "δ3", real=True)
d4 = N.symbol("d4", r"\delta_4", "δ4", real=True)
u = N.symbol("u", "u", "u", positive=True)
amax = N.symbol("amax", r"a_{\max}", "amax", positive=True)
da = N.symbol("da", r"\Delta a", "Δa", real=True)
qmax = N.symbol("qmax", r"q_{\max}", "qmax", positive=True)
Es = N.symbol("Es", "E_s", "E_s", positive=True)
Eamax = N.symbol("Eamax", r"E_{a}", "E_a", positive=True)
sb = N.symbol("sb", r"s_b", "s_b", positive=True)
g = N.symbol("g", "g", "g", positive=True)
dg = N.symbol("dg", r"\Delta g", "Δg", real=True)
D = N.symbol("D", "D", "D", positive=True)

# the backend's value before its final rounding: y_b = y (1 + eta), s_b = s (1 + e), 1/s_b and the product rounded
Q_BACKEND = y[j] * (1 + eta[j]) / (s * (1 + e)) * (1 + d1) * (1 + d2)
RATIO = (y[j] / s) * (eta[j] - e) / (1 + e)                       # y_b / s_b - y / s
ROUNDED = a + (1 + a) * (d1 + d2 + d1 * d2)                        # (1 + a)(1 + d1)(1 + d2) - 1
SCALE = da / qmax + (amax + da) / qmax * (d3 + d4 + d3 * d4)      # (amax + da) fl(1 / qmax), rounded, - amax / qmax
# the bound (e = E_s / s < 1): |y eta| <= E_y, |e| <= E_s / s, |d| <= u, 2u + u^2 <= 3u
A = (Ey[j] / s + sp.Abs(q[j]) * e) / (1 - e)
E_Q = A + 3 * u * (sp.Abs(q[j]) + A)
# norm_quant_block: NVFP4's pre-rounding block scale v = 448 a / g (a the block's amax, g the tensor's)
NVFP4_V = 448 * (da * g - amax * dg) / (g * (g + dg))             # 448 (a + Δa) / (g + Δg) - 448 a / g


def document() -> Document:
    fwd = Section("Forward (one row of m values; forward only)", (
        "y_1..y_m: the row's layer_norm or rms_norm output ([layer_norm.md](layer_norm.md), "
        "[rms_norm.md](rms_norm.md)); q_max: 448 (float8 e4m3fn), 57344 (e5m2), 127 (int8).",
        Step("The dynamic scale puts the row's amax = max_i |y_i| on q_max (then capped by scale_ub and "
             "floored by min_scale; a static scale is an input).", sp.Eq(s, amax / qmax)),
        Step("The value the quantizer rounds, clipped to the quantized range; the quantized output is its "
             "rounding to nearest (ties to even) in the quantized dtype.", sp.Eq(q[j], y[j] / s)),
        "No gradient: the rounding is piecewise constant. What follows derives the checker's bound on q.",
    ))
    err = Section("The bound on q (refnorm/check/bounds/norm_quant.py)", (
        "A kernel computes y_b = y (1 + η) with |y η| ≤ E_y (the norm's bound), the scale s_b = s (1 + ε_s) "
        "with |ε_s| ≤ E_s / s, then y_b · fl(1 / s_b), the reciprocal and the product each rounded "
        "(relative errors δ_1, δ_2, |δ| ≤ u):",
        Step("The backend's value before its final rounding.", sp.Eq(dq[j], Q_BACKEND - y[j] / s)),
        Step("The scale's error enters relative to q, divided by 1 + ε_s.",
             sp.Eq(y[j] * (1 + eta[j]) / (s * (1 + e)) - y[j] / s, RATIO), "ratio"),
        Step("The two roundings, on top of a relative error a.",
             sp.Eq((1 + a) * (1 + d1) * (1 + d2) - 1, ROUNDED), "rounded"),
        Step("The dynamic scale: amax_b = amax + Δa with |Δa| ≤ E_a = max_i E_y,i (the max of |y| is exact), "
             "times the rounded 1 / q_max and rounded (a division rounds once: δ_4 = 0); min(·, scale_ub) and "
             "max(·, min_scale) are 1-Lipschitz.",
             sp.Eq((amax + da) * (1 + d3) * (1 + d4) / qmax - amax / qmax, SCALE), "scale"),
        Step("Hence E_s = E_a / q_max + 3u (s + E_a / q_max) (0 for a static scale), and with ε_s = E_s / s < 1, "
             "by 4 and 5 "
             "(2u + u² ≤ 3u), the bound on q; clip is 1-Lipschitz, so it bounds the clipped value too.",
             sp.Eq(Eq[j], E_Q)),
        "The rule (docs/tolerances.md, \"Quantized outputs\"): a backend's quantized value g passes iff the reals "
        "that a saturating quantizer rounds to g (between the midpoints to its neighbours; everything above "
        "q_max for g = q_max, below q_min for g = q_min) come within E_q of the reference's q. So g may be one "
        "step from the correct rounding only where q lies within E_q of a rounding boundary or of the saturation "
        "point; elsewhere it must be exact. The scale and amax are judged as float32 values with E_s and E_a.",
    ))
    blk = Section("Block scales (norm_quant_block, refnorm/check/bounds/norm_quant_block.py)", (
        "norm_quant_block quantizes blocks of the hidden axis, each with its own scale, and the scale is itself "
        "rounded by its rule (float32; a power of two rounded up; E8M0 floor or round-up; E4M3 to nearest). The "
        "pre-rounding scale v of a block (amax / q_max, amax / 2^emax, or NVFP4's 448 amax / g) has the bound E_v "
        "of step 7's E_s (NVFP4: below); the backend's scale must be its rule's rounding of a value within E_v of "
        "v, so its decode scale D' lies in [D_lo, D_hi] = [rule(v - E_v), rule(v + E_v)] (every rule is "
        "monotone), times the tensor scale's own range for NVFP4.",
        Step("NVFP4: the block's amax a and the tensor's g = max amax, each within its bound (|Δa| ≤ E_a, "
             "|Δg| ≤ E_g), move v = 448 a / g by this; so |Δv| ≤ 448 (E_a g + a E_g) / (g (g - E_g)) for "
             "E_g < g, plus four roundings (2688 / g, the products with fl(1/6) and S_enc).",
             sp.Eq(448 * (amax + da) / (g + dg) - 448 * amax / g, NVFP4_V), "nvfp4"),
        Step("y / D' is monotone in D' > 0, so over [D_lo, D_hi] the quotient moves at most to its value at an "
             "end: the spread max(|clip(y / D_lo) - q|, |clip(y / D_hi) - q|) (clip is monotone too).",
             sp.Eq(sp.diff(y[j] / D, D), -y[j] / D ** 2), "monotone"),
        "Hence E_q = spread + (E_y + 3u (|y| + E_y)) / D_pos, D_pos the smallest positive admissible scale "
        "(a zero scale gives q = 0 exactly; every admissible scale zero: E_q = 0). The spread is 0 wherever v "
        "is not within E_v of a rounding boundary of its rule: there the scale must be exact and q is judged as "
        "in step 7; a scale one step off is accepted only where the rule's boundary is that close, and there q "
        "may be the one computed with any admissible scale (the check does not pair q with the returned scale).",
    ))
    return Document(
        name=NAME, title="norm_quant: the bound on the quantized output", notation=N,
        intro=("A norm with a quantized output ([refnorm/norms/norm_quant.py](../refnorm/norms/norm_quant.py)): "
               "layer_norm or rms_norm, a static or dynamic per-token scale, a saturating round to float8 "
               "e4m3fn, e5m2 or int8. Forward only; the derivation is of the tolerance.",),
        sections=(fwd, err, blk),
        checks=(
            "`prove()`: the identities 4-6 for every element j of rows of m = 2..5 values and for general j.",
            "`prove()`: the identities 9 and 10 (norm_quant_block).",
            "`check_numeric()`: q = y / (amax / q_max) and the static q = clip(y / s) against "
            "`refnorm.evaluate('norm_quant', ..., engine='spec')` with y from the layer_norm and rms_norm "
            "specifications; norm_quant_block's exact group, MXFP8 round-up and NVFP4 scales and q against their "
            "formulas; tests/test_norm_quant.py checks that refnorm/check/bounds/norm_quant.py computes "
            "step 7's E_q, and that perturbations within E_y, E_s and u stay within it.",
        ),
        links=navigation("norm_quant", "local_response_norm"),
    )


steps, render = family_functions(document)


def prove(sizes=SIZES, general: bool = True) -> list[str]:
    P = Prover(NAME)
    ratio = lambda J: y[J] * (1 + eta[J]) / (s * (1 + e)) - y[J] / s - RATIO.xreplace({j: J})  # noqa: E731
    P.identity("ratio", ratio, m=m, j=j, sizes=sizes, general=general, simplify=True)
    P.identity("rounded", lambda J: (1 + a) * (1 + d1) * (1 + d2) - 1 - ROUNDED, m=m, sizes=sizes, general=general)
    P.identity("scale", lambda J: (amax + da) * (1 + d3) * (1 + d4) / qmax - amax / qmax - SCALE, m=m, sizes=sizes,
               general=general)
    P.identity("nvfp4", lambda J: 448 * (amax + da) / (g + dg) - 448 * amax / g - NVFP4_V, m=m, sizes=sizes,
               general=general, simplify=True)
    P.identity("monotone", lambda J: sp.diff(y[J] / D, D) + y[J] / D ** 2, m=m, j=j, sizes=sizes, general=general)
    return P.done()


def E_q(Ey_, q_, s_, e_, u_):
    """Step 7's E_q evaluated with NumPy (the checker's bound, tests/test_norm_quant.py compares)."""
    f = sp.lambdify((Ey[j], q[j], s, e, u), E_Q, modules="numpy")
    return f(Ey_, q_, s_, e_, u_)


def check_numeric(rng=None, tol: float = 1e-12) -> float:
    rng = np.random.default_rng(20261125) if rng is None else rng
    chk = NumericCheck(NAME, tol)
    x = rng.standard_normal((5, 16))
    w = 1 + 0.5 * rng.standard_normal(16)
    for norm, qd, top, low in (("rms_norm", "float8_e4m3fn", 448.0, -448.0), ("layer_norm", "int8", 127.0, -128.0)):
        cfg = {"normalized_shape": [16], "eps": 1e-5}
        yv = spec_evaluate(norm, {"x": x, "weight": w}, config=cfg).outputs["y"]
        res = spec_evaluate(NAME, {"x": x, "weight": w}, config={**cfg, "norm": norm, "quant_dtype": qd})
        am = np.abs(yv).max(axis=1, keepdims=True)
        chk.compare(f"{norm} {qd} scale", res.outputs["scale"], am / top)
        chk.compare(f"{norm} {qd} q", res.outputs["q"], yv / (am / top))
        st = np.array([2.0 / top])
        res = spec_evaluate(NAME, {"x": x, "weight": w, "static_scale": st}, config={**cfg, "norm": norm,
                                                                                     "quant_dtype": qd})
        chk.compare(f"{norm} {qd} static q", res.outputs["q"], np.clip(yv / st[0], low, top))
    # norm_quant_block: the block rules against their formulas (blocks of 8 in rows of 16)
    cfg = {"normalized_shape": [16], "eps": 1e-5}
    yv = spec_evaluate("rms_norm", {"x": x, "weight": w}, config=cfg).outputs["y"]
    am = np.abs(yv).reshape(5, 2, 8).max(axis=2)
    res = spec_evaluate("norm_quant_block", {"x": x, "weight": w}, config={**cfg, "format": "fp8_group",
                                                                           "block_size": 8})
    chk.compare("block exact scale", res.outputs["scale"], am / 448)
    chk.compare("block exact q", res.outputs["q"], yv / np.repeat(am / 448, 8, axis=1))
    res = spec_evaluate("norm_quant_block", {"x": x, "weight": w}, config={**cfg, "format": "mxfp8",
                                                                           "scale_rule": "round_up"})
    am = np.abs(yv).max(axis=1, keepdims=True)
    chk.compare("mxfp8 round-up q", res.outputs["q"], yv / 2.0 ** np.ceil(np.log2(am / 448)))
    res = spec_evaluate("norm_quant_block", {"x": x, "weight": w}, config={**cfg, "format": "nvfp4"})
    g = float(np.abs(yv).max())
    chk.compare("nvfp4 block scale", res.outputs["scale"], 448 * am / g)
    sb = float32_odd(np.clip(448 * am / g, 0, 448)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    chk.compare("nvfp4 q", res.outputs["q"], np.clip(yv / (sb * g / 2688), -6, 6))
    return chk.done()
