"""Golden rows of lp_normalize, local_response_norm, min_max_scale, z_score, mean_variance_norm,
weight_norm and weight_standardization."""
from __future__ import annotations

from .standard import LAYER_NORM_SHAPES
from ._base import Case, name_for, grid, _affine_inputs, variant_of


# --------------------------------------------------------------------------------- lp_normalize
def lp_normalize(regime, dtype, shape, *, dim=-1, eps=1e-12, affine="", tag="", why="", **options):
    dims = [dim] if isinstance(dim, int) else list(dim)
    axes = tuple(sorted(d % len(shape) for d in dims))
    if eps == 1e-5:      # the shared grid's default eps: use lp_normalize's default
        eps = 1e-12
    cfg = {"dim": dim, "eps": eps, **options}
    if options.get("zero_rule") == "onnx":
        del cfg["eps"]
    return Case("lp_normalize", name_for(regime, dtype, shape, eps=eps, default_eps=1e-12, variant=tag), dtype,
                {"x": tuple(shape)}, regime, cfg, axes=axes, centered=False, why=why)


def _lp_normalize_rows():
    lp = lp_normalize
    rows = grid(lp, LAYER_NORM_SHAPES)
    rows += [lp("normal", "float32", (2, 6, 3, 4), dim=1, tag="dim1", why="torch's default dim=1 on a 4-D input"),
             lp("normal", "bfloat16", (2, 6, 3, 4), dim=[1, 2], tag="dim12"),
             lp("heavy_tail", "float32", (6, 100), tag="p1", p=1.0,
                why="p = 1 uses |x| (the ONNX evaluator forgets it)"),
             lp("normal", "float16", (6, 100), tag="p3", p=3.0),
             lp("normal", "float64", (9, 7), tag="p0.5", p=0.5),
             lp("std1e-3", "float32", (9, 7), eps=0.3, why="norm < eps: y = x / eps"),
             lp("zero", "float32", (3, 7), eps=1e-12, why="all-zero rows: y = 0, dx = dy / eps"),
             lp("zero", "bfloat16", (3, 7), tag="onnx", zero_rule="onnx", why="ONNX: zero rows give y = 0, dx = 0"),
             lp("normal", "float16", (4, 128), tag="p1_onnx", p=1.0, zero_rule="onnx")]
    return rows


# -------------------------------------------------------------------------- local_response_norm
LRN_CONFIG = {"size": 5, "alpha": 1.0, "beta": 0.75, "k": 1.0}   # alpha = 1: the scale matters


def local_response_norm(regime, dtype, shape, *, eps=None, affine="", tag="", why="", **options):
    """No eps and no affine parameters: the grid's eps and affine columns are ignored."""
    cfg = {**LRN_CONFIG, **options}
    return Case("local_response_norm", name_for(regime, dtype, shape, variant=tag), dtype, {"x": tuple(shape)},
                regime, cfg, axes=None, centered=False, why=why)


LRN_SHAPES = {"odd": (2, 7, 3), "mid": (2, 10, 30), "pow2": (2, 8, 4, 4), "rows": (40, 6, 5),
              "batch1": (1, 9, 5, 5), "nd": (2, 6, 3, 2, 5)}


def _local_response_norm_rows():
    lrn = local_response_norm
    rows = list({c.id: c for c in grid(lrn, LRN_SHAPES)}.values())   # grid rows differing only in eps
    rows += [lrn("normal", "float32", (2, 10, 6), tag="alexnet", size=5, alpha=1e-4, beta=0.75, k=2.0,
                 why="AlexNet's constants"),
             lrn("normal", "float32", (2, 8, 5), tag="size4", size=4, why="even size: torch's window"),
             lrn("normal", "float32", (2, 8, 5), tag="size4_onnx", size=4, window="onnx",
                 why="even size: ONNX's window, one channel higher (H02)"),
             lrn("sq_overflow", "float16", (2, 6, 7), tag="size2_onnx", size=2, window="onnx"),
             lrn("normal", "bfloat16", (2, 5, 6), tag="size1", size=1),
             lrn("normal", "float64", (2, 3, 6), tag="size7", size=7, why="window wider than C"),
             lrn("heavy_tail", "float16", (3, 6, 5), tag="beta-0.5", beta=-0.5)]
    return rows


# ------------------------------------------------------------------------------ min_max_scale
def _over_dim(shape, dim, eps):
    """(axes, eps) of a min_max_scale or z_score row: the axes ``dim`` names (an int or a list), and eps with
    the shared grid's default (1e-5) read as these ops' own default, 0."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    return tuple(sorted(d % len(shape) for d in dims)), 0.0 if eps == 1e-5 else eps


def min_max_scale(regime, dtype, shape, *, dim=-1, eps=1e-5, affine="wb", tag="", why=""):
    axes, eps = _over_dim(shape, dim, eps)
    variant = variant_of(affine, tag)
    return Case("min_max_scale", name_for(regime, dtype, shape, eps=eps, default_eps=0.0, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, tuple(shape[a] for a in axes))}, regime,
                {"dim": dim, "eps": eps}, axes=axes,
                why="; ".join(w for w in ("ties for the min/max share its gradient evenly" if dtype in
                                          ("float16", "bfloat16") else "", why) if w))


def _min_max_scale_rows():
    mm = min_max_scale
    rows = grid(mm, LAYER_NORM_SHAPES)
    rows += [mm("normal", "float32", (2, 3, 5, 6), dim=[2, 3], tag="dim23", why="a reduction over two axes"),
             mm("const", "float64", (4, 6), eps=0.0, why="constant rows with eps = 0: y = bias, dx = 0"),
             mm("normal", "bfloat16", (2, 6, 4), dim=1, tag="dim1")]
    return rows


# -------------------------------------------------------------------------------------- z_score
def z_score(regime, dtype, shape, *, dim=-1, eps=1e-5, affine="wb", tag="", why="", **options):
    axes, eps = _over_dim(shape, dim, eps)
    variant = variant_of(affine, tag)
    return Case("z_score", name_for(regime, dtype, shape, eps=eps, default_eps=0.0, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, tuple(shape[a] for a in axes))}, regime,
                {"dim": dim, "eps": eps, **options}, axes=axes, why=why)


def _z_score_rows():
    z = z_score
    rows = grid(z, LAYER_NORM_SHAPES)
    rows += [z("normal", "float32", (2, 3, 5, 6), dim=[2, 3], tag="dim23"),
             z("mean1e3", "bfloat16", (6, 100), tag="ddof0", ddof=0, why="ddof 0: layer_norm without affine"),
             z("normal", "float16", (9, 7), eps=0.3, tag="ddof0", ddof=0),
             z("const", "float64", (4, 6), eps=0.0, why="constant rows with eps = 0: y = bias, dx = 0"),
             z("normal", "float32", (2, 6, 4), dim=1, tag="dim1"),
             z("normal", "float64", (4, 2), tag="n2", why="two values per slice: the n - 1 divisor is 1")]
    return rows


# ---------------------------------------------------------------------------- mean_variance_norm
def mean_variance_norm(regime, dtype, shape, *, axes=(0, 2, 3), eps=1e-5, affine="", tag="", why=""):
    """No affine parameters (the grid's affine column is ignored); eps is added to the std."""
    eps = 1e-9 if eps == 1e-5 else eps   # the shared grid's default eps: ONNX's fixed 1e-9
    cfg = {"axes": list(axes), "eps": eps}
    return Case("mean_variance_norm", name_for(regime, dtype, shape, eps=eps, default_eps=1e-9, variant=tag),
                dtype, {"x": tuple(shape)}, regime, cfg, axes=tuple(sorted(a % len(shape) for a in axes)), why=why)


MVN_SHAPES = {"odd": (1, 2, 3, 7), "mid": (2, 3, 10, 15), "pow2": (2, 2, 8, 16), "rows": (3, 64, 2, 3),
              "batch1": (1, 3, 5, 7), "big": (4, 1, 128, 130)}


def _mean_variance_norm_rows():
    mvn = mean_variance_norm
    rows = list({c.id: c for c in grid(mvn, MVN_SHAPES)}.values())   # grid rows differing only in affine
    rows += [mvn("normal", "bfloat16", (6, 100), axes=(-1,), tag="axis-1", why="2-D, per row (LN-like)"),
             mvn("mean1e3", "float16", (2, 3, 4, 5, 2), axes=(0, 2, 3, 4), tag="5d"),
             mvn("const", "float32", (2, 3, 4, 5), eps=1e-9, tag="axes23", axes=(2, 3),
                 why="constant slices with eps = 1e-9: dx = (g - mean(g)) / eps")]
    return rows


# ------------------------------------------------------------------------------- weight_norm
def weight_norm(regime, dtype, shape, *, dim=0, flat_g=False, eps=None, affine="", tag="", why=""):
    """v by the regime, g ~ 1 + 0.5 N(0,1); no eps and no affine (grid columns ignored)."""
    if dim is None:
        gshape, axes = (), tuple(range(len(shape)))
    else:
        d = dim % len(shape)
        gshape = (shape[d],) if flat_g else tuple(s if i == d else 1 for i, s in enumerate(shape))
        axes = tuple(i for i in range(len(shape)) if i != d)
    variant = "_".join(v for v in (tag, "flatg" if flat_g else "") if v)
    return Case("weight_norm", name_for(regime, dtype, shape, variant=variant), dtype,
                {"v": tuple(shape), "g": gshape}, regime, {"dim": dim}, axes=axes, centered=False, why=why)


WEIGHT_NORM_SHAPES = {"odd": (3, 7), "mid": (6, 100), "pow2": (4, 128), "rows": (260, 3), "batch1": (1, 1000),
                      "nd": (4, 3, 3, 3), "big": (1, 65536)}


def _weight_norm_rows():
    wn = weight_norm
    rows = list({c.id: c for c in grid(wn, WEIGHT_NORM_SHAPES)}.values())
    rows += [wn("normal", "float32", (5, 6), dim=1, tag="dim1", why="one norm per column (H07)"),
             wn("normal", "float16", (3, 4, 5), dim=2, tag="dim2"),
             wn("normal", "bfloat16", (4, 3, 3, 3), dim=None, tag="dimNone", why="one norm over the whole tensor"),
             wn("heavy_tail", "float64", (8, 3, 2), flat_g=True, why="a flat (out,) g"),
             wn("normal", "float32", (6, 4), dim=1, flat_g=True, tag="dim1", why="a flat g on dim 1 (H08)")]
    return rows


# ------------------------------------------------------------------------ weight_standardization
def weight_standardization(regime, dtype, shape, *, eps=1e-5, affine="", tag="", why=""):
    """No affine parameters (the grid's affine column is ignored)."""
    return Case("weight_standardization", name_for(regime, dtype, shape, eps=eps, variant=tag), dtype,
                {"x": tuple(shape)}, regime, {"eps": eps}, axes=tuple(range(1, len(shape))), why=why)


WS_SHAPES = {"odd": (9, 7), "mid": (6, 100), "pow2": (4, 8, 4, 4), "rows": (260, 3), "batch1": (1, 1000),
             "nd": (4, 3, 3, 3), "big": (1, 64, 32, 33)}


def _weight_standardization_rows():
    ws = weight_standardization
    rows = list({c.id: c for c in grid(ws, WS_SHAPES)}.values())
    rows += [ws("normal", "float32", (8, 4, 3, 3, 3), tag="conv3d", why="a 3-D convolution weight"),
             ws("normal", "bfloat16", (6, 5, 3, 3), eps=1e-10, why="BiT's eps"),
             ws("normal", "float16", (6, 5, 3, 3), eps=1e-6, why="timm's eps")]
    return rows
