"""Golden rows of norm_quant_block (a norm, optionally after a residual add, with a block-scaled quantized output:
fp8 groups, MXFP8, NVFP4)."""
from __future__ import annotations

from ._base import Case, name_for, AFFINE_VARIANT, _affine_inputs

BSHORT = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "float4_e2m1fn": "e2m1"}
FSHORT = {"fp8_group": "g", "mxfp8": "mx", "nvfp4": "nvfp4"}
DEFAULT_RULE = {"fp8_group": "exact", "mxfp8": "floor", "nvfp4": "e4m3"}
VLLM_GROUP_EPS = 1e-10 / 448.0        # vLLM's per_token_group_quant_fp8: amax clamped at eps = 1e-10
DECADES = ("a weight across 36 decades per run of 128 (1, 1e-5, 1e-36, 1e-3): NVFP4 block scales E4M3-subnormal "
           "and rounded to 0, float32-subnormal group scales, E8M0's lowest scale 2^-127")


def norm_quant_block(regime, dtype, shape, *, format="fp8_group", scale_rule=None, element_dtype=None,
                     block_size=None, norm="rms_norm", residual=False, residual_in_fp32=False, affine="w",
                     min_scale=None, eps=1e-5, w_regime=None, static=False, why=""):
    """A row: the op's options by name (None: the format's default), ``residual`` the fused add (an
    activation input drawn by the regime), ``w_regime`` a parameter regime for the weight ("decades"),
    ``static`` NVFP4's static encode scale (the input global_scale, 2688 / a calibrated amax in [3, 6))."""
    fmt, rule = format, scale_rule
    ns = tuple(shape[-1:])
    variant = "_".join(v for v in (
        "ln" if norm == "layer_norm" else "rms", FSHORT[fmt] + (str(block_size) if block_size else ""),
        rule if rule and rule != DEFAULT_RULE[fmt] else "", BSHORT[element_dtype] if element_dtype else "",
        "res" if residual else "", "fp32res" if residual_in_fp32 else "", "static" if static else "",
        "" if min_scale is None else f"floor{float(min_scale)!r}",
        "w" + w_regime if w_regime else "", "" if affine == "w" else AFFINE_VARIANT[affine] or "wb") if v)
    cfg = {"normalized_shape": list(ns), "norm": norm, "eps": eps, "format": fmt,
           **({"scale_rule": rule} if rule else {}), **({"element_dtype": element_dtype} if element_dtype else {}),
           **({"block_size": block_size} if block_size else {}),
           **({} if min_scale is None else {"min_scale": min_scale}),
           **({"residual_in_fp32": True} if residual_in_fp32 else {})}
    inputs = {"x": tuple(shape), **({"residual": tuple(shape)} if residual else {}),
              **({"global_scale": (1,)} if static else {}),
              **_affine_inputs(affine if norm == "layer_norm" else affine.replace("b", ""), ns)}
    return Case("norm_quant_block", name_for(regime, dtype, shape, eps=eps, default_eps=1e-5, variant=variant),
                dtype, inputs, regime, cfg, axes=(len(shape) - 1,), centered=norm == "layer_norm", why=why,
                param_regimes={"weight": w_regime} if w_regime else {})


def _norm_quant_block_rows():
    nb = norm_quant_block
    rows = []
    for fmt, rules in (("fp8_group", ("exact", "pow2")), ("mxfp8", ("floor", "round_up")), ("nvfp4", ("e4m3",))):
        for rule in rules:
            r = None if rule == DEFAULT_RULE[fmt] else rule
            rows += [
                nb("normal", "bfloat16", (8, 512), format=fmt, scale_rule=r,
                   why="every block's amax lands on its scale"),
                nb("normal", "float32", (4, 256), format=fmt, scale_rule=r, norm="layer_norm", affine="wb"),
                nb("outlier", "float16", (8, 256), format=fmt, scale_rule=r, residual=True,
                   why="a block with one x100 value (its other values small against its scale); the fused add"),
                nb("zero_runs", "bfloat16", (4, 512), format=fmt, scale_rule=r,
                   why="all-zero blocks: q = 0, the scale of the rule's zero (0, or E8M0's 2^-127)"),
                nb("normal", "float32", (4, 512), format=fmt, scale_rule=r, w_regime="decades", why=DECADES),
                nb("normal", "float32", (3, 200), format=fmt, scale_rule=r,
                   why="a partial last block: 200 = 12 x 16 + 8 = 6 x 32 + 8 = 128 + 72 (its amax over the values "
                       "present, as if padded with zeros)"),
                nb("normal", "float64", (2, 96), format=fmt, scale_rule=r, residual=True),
            ]
    rows += [
        nb("normal", "bfloat16", (8, 256), format="mxfp8", element_dtype="float8_e5m2",
           why="MXFP8 with e5m2 elements (emax 15)"),
        nb("normal", "bfloat16", (8, 256), format="mxfp8", scale_rule="round_up", element_dtype="float8_e5m2"),
        nb("mean1e3", "float16", (4, 256), format="fp8_group", norm="layer_norm", affine="wb", residual=True,
           why="a mean-shifted residual stream"),
        nb("normal", "bfloat16", (8, 256), format="fp8_group", block_size=64, element_dtype="float8_e5m2"),
        nb("zero", "float32", (2, 256), format="fp8_group", min_scale=VLLM_GROUP_EPS,
           why="all-zero rows with vLLM's group floor (amax clamped at 1e-10): the scale 1e-10/448"),
        nb("std1e-6", "bfloat16", (4, 256), format="fp8_group", min_scale=VLLM_GROUP_EPS),
        nb("normal", "bfloat16", (2, 8, 256), format="nvfp4", residual=True, why="a 3-D activation, one tensor scale"),
        # the shared regimes (tests/test_golden.py: every op meets them)
        nb("mean1e4", "float16", (4, 256), format="mxfp8", norm="layer_norm", affine="wb"),
        nb("const", "float32", (4, 64), format="fp8_group", block_size=32, norm="layer_norm", affine="wb", eps=1e-12,
           why="constant rows: y = bias, each block's scale from max|bias| over it"),
        nb("std1e-3", "float32", (4, 128), format="mxfp8", scale_rule="round_up", why="eps dominates: small y"),
        nb("one_std1e-3", "float32", (4, 64), format="nvfp4", norm="layer_norm", eps=1e-12),
        nb("sq_overflow", "float16", (4, 256), format="mxfp8", element_dtype="float8_e5m2",
           why="x^2 overflows float16: y from float32 sums"),
        nb("heavy_tail", "bfloat16", (2, 4, 256), format="fp8_group", scale_rule="pow2"),
        nb("normal", "bfloat16", (4, 64), format="mxfp8", eps=0.3, affine="", why="no weight; eps 0.3 shrinks y"),
        nb("normal", "float16", (1, 1040), format="nvfp4", residual=True, why="one token, hidden 1040 = 65 x 16"),
        nb("normal", "bfloat16", (8, 256), format="nvfp4", static=True, why="a static NVFP4 encode scale "
           "(vLLM's input_global_scale) from an amax below the rows': block scales above 448 saturate, and their "
           "values with them"),
        nb("outlier", "float32", (4, 256), format="nvfp4", static=True, residual=True),
        nb("mean1e3", "bfloat16", (4, 256), format="mxfp8", scale_rule="round_up", residual=True,
           residual_in_fp32=True, why="the residual stream kept in float32 (residual_out judged in float32)"),
    ]
    return rows
