"""Golden rows of norm_quant (a norm followed by a quantizer)."""
from __future__ import annotations

from ._base import Case, name_for, AFFINE_VARIANT, _affine_inputs


# --------------------------------------------------------------------------------- norm_quant
QSHORT = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "i8"}
FLT_EPSILON = 2.0 ** -23           # vLLM's min_scaling_factor<int8_t>: std::numeric_limits<float>::epsilon()
EXACT_TIES = ("q = +-(k + 0.5) exactly in every precision: round half to even (2.5 -> 2, -1.5 -> -2) enforced; "
              "half away from zero fails")
VLLM_FUSED_INT8 = ("vLLM's fused int8 kernels (rms_norm_dynamic_per_token_quant, csrc/quantization/utils.cuh "
                   "min_scaling_factor<int8_t>): the scale floored at FLT_EPSILON = 2^-23")
VLLM_UNFUSED_INT8 = ("vLLM's unfused dynamic_scaled_int8_quant: scale = amax/127 with no floor; a zero row has "
                     "scale 0 and q 0 (0 * (127/0) = NaN, converted to 0 by cvt.rni.sat.s8.f32)")
QMAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "int8": 127.0}


def norm_quant(regime, dtype, shape, *, norm="rms_norm", qd="float8_e4m3fn", static=False, ub=None, eps=1e-5,
               affine="w", min_scale=None, ties=False, why=""):
    """``ub``: the dynamic scale's upper bound as an amplitude (scale_ub = ub / qmax: rows whose amax
    exceeds ub saturate). ``static``: a per-tensor static_scale input (drawn: an amplitude in [2, 4) / qmax,
    so the values beyond it saturate). ``min_scale``: the dynamic scale's floor (None: refnorm's default
    1/(qmax*512); 0: none; the name spells it exactly: ``nofloor``, ``floor<repr>``). ``ties``: exact ties
    before the quantizer (with regime "pm1" and rms_norm: rstd = 1 exactly): eps 0, a static scale 1/8 and a
    weight of (k + 0.5) / 8, so q = +-(k + 0.5), |q| < 30, in every precision (int8: every element a tie;
    float8 e4m3fn: those with 8 <= |q| < 16)."""
    ns = tuple(shape[-1:])
    if ties:
        static, eps = True, 0.0
    floor = "" if min_scale is None else "nofloor" if min_scale == 0 else f"floor{float(min_scale)!r}"
    variant = "_".join(v for v in ("ln" if norm == "layer_norm" else "rms", QSHORT[qd],
                                   "static" if static else "dyn", f"ub{ub:g}" if ub else "", floor,
                                   "ties" if ties else "",
                                   "" if affine == "w" else AFFINE_VARIANT[affine] or "wb") if v)
    cfg = {"normalized_shape": list(ns), "norm": norm, "eps": eps, "quant_dtype": qd,
           **({"scale_ub": ub / QMAX[qd]} if ub else {}), **({} if min_scale is None else {"min_scale": min_scale})}
    inputs = {"x": tuple(shape), **_affine_inputs(affine if norm == "layer_norm" else affine.replace("b", ""), ns),
              **({"static_scale": (1,)} if static else {})}
    return Case("norm_quant", name_for(regime, dtype, shape, eps=eps, default_eps=1e-5, variant=variant), dtype,
                inputs, regime, cfg, axes=(len(shape) - 1,), centered=norm == "layer_norm", why=why,
                param_regimes={"weight": "ties", "static_scale": "eighth"} if ties else {})


def _norm_quant_rows():
    nq = norm_quant
    return [
        nq("normal", "float32", (8, 256), why="dynamic per-token float8 e4m3fn scale: each row's amax lands on 448"),
        nq("normal", "bfloat16", (8, 256), why="the scale from the float32 output, not the bfloat16-rounded one"),
        nq("normal", "float16", (8, 256), norm="layer_norm", affine="wb"),
        nq("normal", "float64", (4, 100), qd="int8"),
        nq("mean1e3", "float16", (8, 256), norm="layer_norm", qd="int8", why="a mean-shifted residual stream"),
        nq("outlier", "bfloat16", (8, 256), ub=8.0, why="rows with a x100 outlier: scale_ub caps their scale, "
           "the outlier saturates"),
        nq("outlier", "float16", (8, 256), norm="layer_norm", affine="wb", qd="int8", ub=8.0),
        nq("outlier", "float32", (8, 256), qd="float8_e5m2", ub=8.0),
        nq("std1e-6", "float32", (4, 256), why="tiny rows: the scale is the floor min_scale = 1/(qmax*512)"),
        nq("std1e-6", "bfloat16", (4, 256), qd="int8"),
        nq("zero", "float32", (2, 64), why="all-zero rows: amax 0, the scale is the floor, q = 0"),
        nq("normal", "bfloat16", (8, 256), static=True, why="a static scale: values beyond 448 saturate (e4m3fn "
           "has no infinity: an unsaturated cast gives NaN)"),
        nq("normal", "float16", (8, 256), norm="layer_norm", affine="wb", static=True),
        nq("normal", "float32", (8, 256), qd="int8", static=True),
        nq("normal", "bfloat16", (4, 256), qd="float8_e5m2", static=True),
        nq("normal", "float16", (8, 256), qd="float8_e5m2"),
        nq("normal", "bfloat16", (8, 256), qd="int8", static=True),
        nq("normal", "bfloat16", (16, 64), norm="layer_norm", affine="wb"),
        nq("normal", "float64", (4, 100), static=True),
        nq("heavy_tail", "bfloat16", (2, 4, 64)),
        nq("normal", "float16", (1, 1029), qd="int8", why="one token, hidden 1029: a vector tail (vLLM's 1025-1029)"),
        nq("std1e-6", "float16", (4, 256), qd="float8_e5m2", ub=8.0, why="float16 subnormal inputs; the floor scale"),
        nq("mean1e4", "float16", (4, 64), norm="layer_norm", affine="wb"),
        nq("const", "float32", (4, 64), norm="layer_norm", affine="wb", eps=1e-12,
           why="constant rows: y = bias, the scale from max|bias|"),
        nq("std1e-3", "float32", (4, 64), norm="layer_norm", affine="wb", qd="int8"),
        nq("one_std1e-3", "float32", (4, 64), norm="layer_norm", eps=1e-12, static=True),
        nq("sq_overflow", "float16", (4, 64), qd="float8_e5m2", why="x^2 overflows float16: y from float32 sums"),
        nq("normal", "bfloat16", (4, 64), eps=0.3, affine="", why="no weight; eps 0.3 shrinks y"),
        # the scale floors users run (docs/conventions.md): vLLM's fused int8 kernels floor at FLT_EPSILON, its
        # unfused dynamic_scaled_int8_quant not at all, refnorm's default is 1/(qmax*512); on zero and tiny rows
        nq("zero", "float32", (2, 64), qd="int8", min_scale=FLT_EPSILON, why=VLLM_FUSED_INT8),
        nq("std1e-6", "bfloat16", (4, 256), qd="int8", min_scale=FLT_EPSILON,
           why=VLLM_FUSED_INT8 + "; amax/127 ~ 8e-6 lies between it and refnorm's default 1.5e-5"),
        nq("zero", "float32", (2, 64), qd="int8", min_scale=0, why=VLLM_UNFUSED_INT8),
        nq("std1e-6", "float16", (4, 256), qd="int8", min_scale=0,
           why=VLLM_UNFUSED_INT8 + "; tiny rows keep their own amax/127"),
        nq("zero", "bfloat16", (2, 64), qd="int8", why="refnorm's default floor for int8, 1/(127*512), on zero rows"),
        # exact ties before the quantizer: round half to even enforced (bounds/norm_quant.py exact_rows)
        nq("pm1", "float32", (4, 64), qd="int8", ties=True, why=EXACT_TIES),
        nq("pm1", "bfloat16", (4, 64), qd="int8", ties=True, why=EXACT_TIES),
        nq("pm1", "float16", (4, 64), qd="float8_e4m3fn", ties=True, why=EXACT_TIES + " (e4m3fn: 8 <= |q| < 16)"),
        # (48 columns: 1/48 is no float32 number, so a kernel dividing each square by n before the sum misses the
        # tie: the bound is not 0 there and either neighbour passes; the 64-column case above enforces the rule)
        nq("pm1", "float16", (3, 48), qd="float8_e4m3fn", ties=True,
           why="q = +-(k + 0.5) in exact arithmetic (e4m3fn: 8 <= |q| < 16), but 1/48 is no float32 number: a "
               "kernel averaging x^2 / 48 term by term moves off the tie, so neither rounding of a tie is enforced "
               "here (the 4x64 case enforces half to even)"),
    ]
