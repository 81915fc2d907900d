"""Golden rows of the standard normalizers: layer_norm, batch_norm, group_norm, instance_norm, rms_norm."""
from __future__ import annotations

from ._base import F16_SUBNORMAL, Case, name_for, grid, _affine_inputs, variant_of


# --------------------------------------------------------------------------------- layer_norm
def layer_norm(regime, dtype, shape, *, k=1, eps=1e-5, affine="wb", weight_offset=0.0, why=""):
    ns = tuple(shape[len(shape) - k:])
    variant = variant_of(affine, f"k{k}" if k > 1 else "", "zc" if weight_offset else "")
    return Case("layer_norm", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, ns)}, regime,
                {"normalized_shape": list(ns), "eps": eps, **({"weight_offset": weight_offset} if weight_offset else {})},
                axes=tuple(range(len(shape) - k, len(shape))), why=why)


LAYER_NORM_SHAPES = {"odd": (9, 7), "mid": (6, 100), "pow2": (4, 128), "rows": (260, 3),
                     "batch1": (1, 1000), "nd": (2, 3, 7), "big": (1, 65536)}


def _layer_norm_rows():
    rows = grid(layer_norm, LAYER_NORM_SHAPES)
    rows += [layer_norm("normal", "float32", (2, 3, 5, 6), k=2, why="4-D input, normalized_shape of 2 dims"),
             layer_norm("mean1e3", "bfloat16", (3, 4, 2, 5, 3), k=3, why="5-D input, 3 normalized dims"),
             layer_norm("normal", "float64", (3, 1), why="one value per row: y = bias"),
             layer_norm("normal", "float16", (65537, 2), why="more than 65536 rows (F09: grid limits)"),
             layer_norm("normal", "float16", (65537, 1, 2), k=2,
                        why="more than 65536 rows with a 2-D normalized_shape (F12: dgamma shape)"),
             layer_norm("normal", "float16", (4, 128), weight_offset=1.0,
                        why="zero-centred gamma (TransformerEngine): x_hat * (1 + weight) + bias"),
             layer_norm("normal", "bfloat16", (24, 40), weight_offset=1.0,
                        why="zero-centred gamma in bfloat16: (1 + weight) is not a bfloat16 product"),
             layer_norm("std1e-4", "float16", (6, 100), eps=1e-12, why=F16_SUBNORMAL),
             layer_norm("std1e-3", "float16", (4, 128), eps=1e-12,
                        why="var + eps ~ 1e-6 is a float16 subnormal with 4 significant bits: rsqrt(half(var + eps)) "
                            "is off by up to 3%")]
    return rows


# --------------------------------------------------------------------------------- batch_norm
BN_STATE = {"running_mean": "stat_mean", "running_var": "stat_var"}
T3E = ("train", "train", "train", "eval")         # three training steps, then eval


def _running_state(c: int, stats: bool, nbt: int) -> dict:
    """The state of a batch_norm / instance_norm row: running statistics of c channels and
    num_batches_tracked = nbt, or none without ``stats``."""
    if not stats:
        return {}
    return {**{k: ((c,), r) for k, r in BN_STATE.items()}, "num_batches_tracked": ((), f"count:{nbt}")}


def batch_norm(regime, dtype, shape, *, eps=1e-5, affine="wb", steps=("train",), stats=True,
               nbt=0, tag="", why="", **options):
    """Rows of batch_norm; ``options`` (momentum, convention) go to the config as given."""
    c = shape[1]
    return Case("batch_norm", name_for(regime, dtype, shape, eps=eps, variant=variant_of(affine, tag)), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"eps": eps, **options},
                axes=(0,) + tuple(range(2, len(shape))), state=_running_state(c, stats, nbt), steps=tuple(steps),
                eval_outputs=("y",), why=why)


BATCH_NORM_SHAPES = {"odd": (7, 3), "mid": (6, 4, 25), "pow2": (8, 2, 4, 4), "rows": (16, 3, 4, 5),
                     "batch1": (1, 3, 5, 7), "nd": (2, 3, 3, 4, 5), "big": (4, 1, 128, 130)}


def _batch_norm_rows():
    bn = batch_norm
    rows = grid(bn, BATCH_NORM_SHAPES)
    rows += [
        bn("normal", "float32", (6, 3, 5), steps=T3E, tag="train3_eval",
           why="running statistics over 3 steps (torch momentum 0.1, unbiased running_var), then eval"),
        bn("mean1e3", "bfloat16", (6, 3, 5), steps=T3E, tag="train3_eval"),
        bn("normal", "float32", (6, 3, 5), steps=("train", "train:mean1e3", "train", "eval"), tag="shift_train3_eval",
           why="a batch from another distribution (mean 1e3) between two normal ones"),
        bn("normal", "float16", (4, 2, 3, 3), steps=T3E, tag="onnx_train3_eval", convention="onnx",
           why="ONNX convention: momentum 0.9 weights the old value, biased running_var (E05)"),
        bn("normal", "float64", (5, 3, 4), steps=("train",) * 3, tag="mom0.5_train3", momentum=0.5),
        bn("normal", "float32", (5, 3, 4), steps=("train",) * 3, nbt=2, tag="cumavg_nbt2_train3",
           momentum=None, why="momentum=None: cumulative average with 1/num_batches_tracked"),
        bn("heavy_tail", "float16", (3, 4, 6), steps=("train", "eval", "train", "eval"), tag="alternate"),
        bn("normal", "bfloat16", (2, 3, 4), steps=("eval",), tag="eval",
           why="eval with running statistics: an affine map; backward must not use batch statistics (E10)"),
        bn("mean1e4", "float32", (2, 3, 4), steps=("eval",), tag="eval"),
        bn("normal", "float32", (4, 3, 5), steps=("eval",), stats=False, tag="eval_nostats",
           why="eval without running statistics uses batch statistics (track_running_stats=False)"),
        bn("normal", "float16", (4, 3, 5), stats=False, tag="nostats"),
        bn("normal", "float64", (2, 2), eps=0.3, tag="n2",
           why="two values per channel: unbiased factor n/(n-1) = 2 (E01-E04)"),
        bn("const", "float32", (5, 3, 2, 2), eps=1e-12, steps=("train", "eval"), tag="train_eval",
           why="zero batch variance into running_var"),
        bn("std1e-4", "float16", (6, 4, 25), eps=1e-12, why=F16_SUBNORMAL),
    ]
    return rows


# --------------------------------------------------------------------------------- group_norm
def group_norm(regime, dtype, shape, *, groups, eps=1e-5, affine="wb", why=""):
    n, c = shape[:2]
    view = (n, groups, c // groups) + tuple(shape[2:])   # slices: one (sample, group) each
    variant = variant_of(affine, f"g{groups}")
    return Case("group_norm", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"num_groups": groups, "eps": eps},
                axes=tuple(range(2, len(view))), view=view, why=why)


GROUP_NORM_SHAPES = {"odd": ((3, 6, 7), 3), "mid": ((2, 8, 5, 7), 4), "pow2": ((2, 8, 4, 4), 2),
                     "rows": ((40, 4, 3, 3), 2), "batch1": ((1, 6, 5, 5), 3), "nd": ((2, 4, 3, 2, 5), 2),
                     "big": ((1, 1, 256, 257), 1)}


def _group_norm_rows():
    def make(regime, dtype, shape_groups, **kw):
        shape, groups = shape_groups
        return group_norm(regime, dtype, shape, groups=groups, **kw)
    rows = grid(make, GROUP_NORM_SHAPES)
    rows += [group_norm("normal", "float32", (3, 6), groups=2, why="2-D (N, C) input"),
             group_norm("mean1e3", "float64", (2, 6, 4, 5), groups=1, why="G = 1: layer norm over (C, *)"),
             group_norm("normal", "bfloat16", (2, 5, 3, 4), groups=5, why="G = C: instance norm"),
             group_norm("outlier", "float16", (4, 6, 9, 1), groups=3,
                        why="W = 1 with H > 1: backward means over H*W, not W (F15)"),
             group_norm("const", "float32", (1, 1, 256, 257), groups=1,
                        why="one constant group of 65792 values: correlated rounding errors of a serial "
                            "fp32 sum (A11)"),
             group_norm("normal", "float32", (130, 64, 2, 2), groups=16,
                        why="N > 128 and C > 32: the wave64 dgamma path (F14)"),
             group_norm("std1e-4", "float16", (2, 8, 5, 7), groups=4, eps=1e-12, why=F16_SUBNORMAL)]
    return rows


# ------------------------------------------------------------------------------ instance_norm
def instance_norm(regime, dtype, shape, *, eps=1e-5, affine="wb", steps=("train",), stats=False,
                  nbt=0, tag="", why="", **options):
    c = shape[1]
    return Case("instance_norm", name_for(regime, dtype, shape, eps=eps, variant=variant_of(affine, tag)), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"eps": eps, **options},
                axes=tuple(range(2, len(shape))), state=_running_state(c, stats, nbt), steps=tuple(steps),
                eval_outputs=("y",),
                why=why)


INSTANCE_NORM_SHAPES = {"odd": (3, 2, 7), "mid": (2, 3, 100), "pow2": (2, 2, 8, 8), "rows": (40, 3, 2, 3),
                        "batch1": (1, 3, 5, 7), "nd": (2, 3, 3, 4, 5), "big": (1, 1, 256, 257)}


def _instance_norm_rows():
    inn = instance_norm
    rows = grid(inn, INSTANCE_NORM_SHAPES)
    rows += [
        inn("normal", "float32", (4, 3, 6), stats=True, steps=T3E, tag="train3_eval",
            why="running statistics: torch's mean over n of the per-instance updates, unbiased var"),
        inn("mean1e3", "float16", (2, 3, 4, 5), stats=True, steps=T3E, tag="train3_eval"),
        inn("heavy_tail", "bfloat16", (3, 2, 5, 2), stats=True, steps=("train", "eval", "train"),
            tag="mom0.5_alternate", momentum=0.5),
        inn("normal", "float64", (2, 3, 5), stats=True, steps=("train", "train"), nbt=5, tag="momNone_train2",
            momentum=None, why="momentum=None means 0: running statistics never change; nbt untouched"),
        inn("normal", "float32", (2, 3, 4, 4), stats=True, steps=("eval",), tag="eval",
            why="eval with running statistics: an affine map, shared by all instances"),
        inn("normal", "bfloat16", (3, 4), stats=True, steps=("eval",), tag="eval_2d",
            why="eval accepts an (N, C) input"),
        inn("normal", "float16", (2, 3, 2), eps=0.3, tag="s2", why="two spatial values per instance"),
        inn("std1e-4", "float16", (2, 3, 100), eps=1e-12, why=F16_SUBNORMAL),
    ]
    return rows


# -------------------------------------------------------------------------------------- rms_norm
def rms_norm(regime, dtype, shape, *, k=1, eps=1e-5, affine="w", tag="", why="", **options):
    ns = tuple(shape[len(shape) - k:])
    variant = "_".join(v for v in ("" if "w" in affine else "noweight", f"k{k}" if k > 1 else "", tag) if v)
    cfg = {"normalized_shape": list(ns), **({} if eps is None else {"eps": eps}), **options}
    return Case("rms_norm", name_for(regime, dtype, shape, eps=eps, default_eps=None, variant=variant), dtype,
                {"x": tuple(shape), **({"weight": ns} if "w" in affine else {})}, regime, cfg,
                axes=tuple(range(len(shape) - k, len(shape))), centered=False, why=why)


def _rms_norm_rows():
    rows = grid(rms_norm, LAYER_NORM_SHAPES)
    rows += [rms_norm("normal", "float32", (6, 100), eps=None,
                      why="eps=None: finfo(float32).eps for a float32 input, torch's opmath rule"),
             rms_norm("std1e-3", "bfloat16", (6, 100), eps=None,
                      why="eps=None on bfloat16: finfo(float32).eps = 1.19e-7 (torch's opmath rule), ~10% of mean(x^2)"),
             rms_norm("zero", "float32", (3, 10), eps=1e-6, why="all-zero rows: y = 0, dx = g / sqrt(eps)"),
             rms_norm("normal", "float16", (4, 128), tag="gemma", weight_offset=1.0,
                      why="Gemma: x * rstd * (1 + weight) (D01, D02, D04)"),
             rms_norm("normal", "bfloat16", (260, 64), tag="gemma", weight_offset=1.0,
                      why="Gemma in bfloat16: (1 + weight) rounded to bfloat16 (D01, D04: 3.1406 + 1 -> 4.125)"),
             rms_norm("normal", "bfloat16", (6, 100), eps=0.3, tag="outside", eps_placement="outside",
                      why="eps outside the sqrt (B01)"),
             rms_norm("std1e-3", "float32", (6, 100), eps=1e-5, tag="outside", eps_placement="outside"),
             rms_norm("zero", "float64", (2, 7), eps=1e-3, tag="outside", eps_placement="outside"),
             rms_norm("heavy_tail", "float32", (2, 3, 5, 6), k=2),
             rms_norm("std1e-4", "float16", (6, 100), eps=1e-12, why=F16_SUBNORMAL.replace("var", "mean(x^2)")),
             rms_norm("std1e-4", "float16", (4, 128), eps=None,
                      why="eps=None (2.2e-16): mean(x^2) + eps ~ 1e-8 rounds to 0 in float16")]
    return rows
