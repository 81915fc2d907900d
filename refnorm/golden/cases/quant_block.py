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


def norm_quant_block(regime, dtype, shape, *, fmt="fp8_group", rule=None, el=None, block=None, norm="rms_norm",
                     residual=False, affine="w", min_scale=None, eps=1e-5, weight=None, why=""):
    """A row: ``fmt`` the format, ``rule`` its scale rule (None: the format's default), ``el`` the element
    dtype (None: the default), ``block`` the fp8_group block size (None: 128), ``residual`` the fused add
    (an activation input drawn by the regime), ``weight`` a parameter regime for the weight ("decades")."""
    ns = tuple(shape[-1:])
    variant = "_".join(v for v in (
        "ln" if norm == "layer_norm" else "rms", FSHORT[fmt] + (str(block) if block else ""),
        rule if rule and rule != DEFAULT_RULE[fmt] else "", BSHORT[el] if el else "",
        "res" if residual else "", "" if min_scale is None else f"floor{float(min_scale)!r}",
        "w" + weight if weight else "", "" if affine == "w" else AFFINE_VARIANT[affine] or "wb") if v)
    cfg = {"normalized_shape": list(ns), "norm": norm, "eps": eps, "format": fmt,
           **({"scale_rule": rule} if rule else {}), **({"element_dtype": el} if el else {}),
           **({"block_size": block} if block else {}), **({} if min_scale is None else {"min_scale": min_scale})}
    inputs = {"x": tuple(shape), **({"residual": tuple(shape)} if residual else {}),
              **_affine_inputs(affine if norm == "layer_norm" else affine.replace("b", ""), ns)}
    return Case("norm_quant_block", name_for(regime, dtype, shape, eps=eps, default_eps=1e-5, variant=variant),
                dtype, inputs, regime, cfg, axes=(len(shape) - 1,), centered=norm == "layer_norm", why=why,
                param_regimes={"weight": weight} if weight else {})


def _norm_quant_block_rows():
    nb = norm_quant_block
    rows = []
    for fmt, rules in (("fp8_group", ("exact", "pow2")), ("mxfp8", ("floor", "round_up")), ("nvfp4", ("e4m3",))):
        for rule in rules:
            r = None if rule == DEFAULT_RULE[fmt] else rule
            rows += [
                nb("normal", "bfloat16", (8, 512), fmt=fmt, rule=r, why="every block's amax lands on its scale"),
                nb("normal", "float32", (4, 256), fmt=fmt, rule=r, norm="layer_norm", affine="wb"),
                nb("outlier", "float16", (8, 256), fmt=fmt, rule=r, residual=True,
                   why="a block with one x100 value (its other values small against its scale); the fused add"),
                nb("zero_runs", "bfloat16", (4, 512), fmt=fmt, rule=r, why="all-zero blocks: q = 0, the scale "
                   "of the rule's zero (0, or E8M0's 2^-127)"),
                nb("normal", "float32", (4, 512), fmt=fmt, rule=r, weight="decades", why=DECADES),
                nb("normal", "float32", (3, 200), fmt=fmt, rule=r, why="a partial last block: 200 = 12 x 16 + 8 "
                   "= 6 x 32 + 8 = 128 + 72 (its amax over the values present, as if padded with zeros)"),
                nb("normal", "float64", (2, 96), fmt=fmt, rule=r, residual=True),
            ]
    rows += [
        nb("normal", "bfloat16", (8, 256), fmt="mxfp8", el="float8_e5m2", why="MXFP8 with e5m2 elements (emax 15)"),
        nb("normal", "bfloat16", (8, 256), fmt="mxfp8", rule="round_up", el="float8_e5m2"),
        nb("mean1e3", "float16", (4, 256), fmt="fp8_group", norm="layer_norm", affine="wb", residual=True,
           why="a mean-shifted residual stream"),
        nb("normal", "bfloat16", (8, 256), fmt="fp8_group", block=64, el="float8_e5m2"),
        nb("zero", "float32", (2, 256), fmt="fp8_group", min_scale=VLLM_GROUP_EPS,
           why="all-zero rows with vLLM's group floor (amax clamped at 1e-10): the scale 1e-10/448"),
        nb("std1e-6", "bfloat16", (4, 256), fmt="fp8_group", min_scale=VLLM_GROUP_EPS),
        nb("normal", "bfloat16", (2, 8, 256), fmt="nvfp4", residual=True, why="a 3-D activation, one tensor scale"),
    ]
    return rows
