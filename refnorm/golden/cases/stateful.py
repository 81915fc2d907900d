"""Golden rows of unified_norm and the offline framework instances (refnorm/norms/offline.py)."""
from __future__ import annotations

from ._base import Case, name_for, GRID, grid, _affine_inputs, variant_of


# ----------------------------------------------------------------------------- unified_norm
def unified_norm(regime, dtype, shape, *, eps=1e-5, affine="wb", steps=("train",), window=4, mask=False,
                 state="init", iters=0, tag="", why="", **options):
    """Rows of unified_norm; x is (B, N, C) or (N, C), per-channel statistics over all the rest.

    state "init" is the official initialisation (a zero-history start); "warm" draws a history of
    positive statistics and starts the call counter at ``iters``.
    """
    c = shape[-1]
    mf, mb = (window, window) if isinstance(window, int) else window
    warm = state == "warm"
    st = {"running_var": ((c,), "stat_var" if warm else "ones"), "ema_gz": ((c,), "stat_mean" if warm else "zeros"),
          "buffer_x2": ((mf, c), "stat_var" if warm else "zeros"),
          "buffer_gz": ((mb, c), "stat_mean" if warm else "zeros"),
          "iters": ((1,), f"count:{iters}"), "skip_counter": ((1,), "count:0")}
    variant = variant_of(affine, "mask" if mask else "", tag)
    inputs = {"x": tuple(shape), **({"pad_mask": tuple(shape[:-1])} if mask else {}),
              **_affine_inputs(affine, (c,))}
    return Case("unified_norm", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype, inputs, regime,
                {"eps": eps, "window": window, **options}, axes=tuple(range(len(shape) - 1)), centered=False,
                state=st, steps=tuple(steps), ignore_grads=("pad_mask",) if mask else (), why=why)


UN_SHAPES = {"odd": (2, 7, 3), "mid": (2, 50, 6), "pow2": (4, 32, 4), "rows": (2, 130, 3),
             "batch1": (1, 20, 8), "nd": (30, 5), "big": (1, 65536, 1)}


def _unified_norm_rows():
    un = unified_norm
    rows = grid(un, UN_SHAPES)
    t8e = ("train",) * 8 + ("eval",)
    rows += [
        un("normal", "float32", (2, 6, 4), steps=t8e, window=3, warmup=2, tag="w3_warm2_train8_eval",
           why="geometric-mean smoothing after warm-up, psi history, then eval with running_var"),
        un("normal", "bfloat16", (2, 6, 4), steps=("train",) * 5 + ("train:spike",) + ("train",) * 3,
           window=4, warmup=3, outlier_filtration=True, tag="filter_spike_train9",
           why="outlier filtration after a channel spike: the layer-wide pooled threshold, slot overwrites"),
        un("normal", "float32", (2, 5, 3), steps=("train",) * 3, window=4, warmup=0, outlier_filtration=True,
           tag="filter_warm0_train3", why="warmup 0 with an empty history: log 0 makes the filter fire"),
        un("mean1e3", "float32", (2, 5, 3), steps=("train",) * 4, window=2, warmup=2, state="warm", iters=999,
           tag="iters999_train4", why="gradient compensation r from call 1001 on, clipped at 5"),
        un("std1e-3", "float16", (2, 5, 3), steps=("train",) * 4, window=2, warmup=2, state="warm", iters=999,
           tag="iters999_train4", why="gradient compensation r clipped at 1/5"),
        un("normal", "float16", (2, 6, 3), steps=("train",) * 6, window=[3, 2], warmup=1, mask=True,
           tag="w3x2_train6", why="forward/backward windows differ; padding out of the forward statistic only"),
        un("heavy_tail", "bfloat16", (3, 4, 2), steps=("train",) * 4 + ("eval",), window=1, tag="w1_train4_eval",
           why="window 1: every call takes the skip branch (uncounted)"),
        un("normal", "float64", (2, 5, 3), steps=("train",) * 6, window=3, warmup=2, outlier_filtration=True,
           preset="paper", tag="paper_filter_train6", why="the paper preset"),
        un("normal", "float32", (2, 5, 3), steps=("train",) * 4, window=2, warmup=1, momentum=0.5,
           tag="mom0.5_train4"),
        un("normal", "float16", (2, 9, 4), mask=True, why="padding excluded from the forward statistic"),
        un("normal", "float32", (2, 5, 3), steps=("eval",), state="warm", iters=10, tag="eval",
           why="eval: y = weight * x / sqrt(running_var + eps) + bias"),
    ]
    return rows


# --------------------------------------------- offline framework instances (refnorm/norms/offline.py)
OFFLINE_STATE = {  # op -> state entry -> (per-channel, initial regime, warm regime)
    "offline_batch_norm": {"running_mean": ("zeros", "stat_mean"), "running_var": ("ones", "stat_var")},
    "power_norm": {"running_phi": ("ones", "stat_var"), "nu": ("zeros", "stat_mean")},
    "batch_renorm": {"running_mean": ("zeros", "stat_mean"), "running_std": ("ones", "stat_var")},
}
CHANNELS_FIRST = ("offline_batch_norm", "batch_renorm")
# one training call from the initial state per entry: a subset of GRID that still gives every dtype, regime,
# eps extreme, affine variant, batch size 1 and power-of-two / other reductions, with small shapes (the
# offline instances' reductions are the same two-pass sums over rows as batch_norm's and unified_norm's,
# whose grids include the 65536-value reductions; see tests/test_golden.py NO_BIG_REDUCTION)
OFFLINE_GRID = tuple(e for e in GRID if e in (
    ("normal", "float64", "odd", 1e-5, "wb"), ("normal", "float16", "pow2", 1e-5, "wb"),
    ("mean1e3", "bfloat16", "odd", 1e-5, "wb"), ("mean1e4", "float16", "pow2", 1e-5, "wb"),
    ("mean1e4", "float64", "mid", 1e-5, "wb"), ("const", "float16", "odd", 1e-12, "wb"),
    ("std1e-3", "bfloat16", "mid", 1e-5, "wb"), ("one_std1e-3", "float32", "mid", 1e-12, "wb"),
    ("sq_overflow", "float16", "mid", 1e-5, "wb"), ("heavy_tail", "float32", "mid", 1e-5, "wb"),
    ("normal", "float32", "odd", 0.3, "wb"), ("normal", "float16", "mid", 1e-5, "w"),
    ("normal", "float32", "odd", 1e-5, "b"), ("normal", "bfloat16", "pow2", 1e-5, ""),
    ("normal", "float32", "batch1", 1e-5, "wb"), ("normal", "bfloat16", "nd", 1e-5, "wb")))
OFFLINE_SHAPES = {"channels_first": {"odd": (3, 2, 5), "pow2": (4, 2, 8), "mid": (5, 3, 12), "batch1": (1, 3, 10),
                                     "nd": (2, 3, 2, 3)},
                  "channels_last": {"odd": (3, 5, 2), "pow2": (4, 8, 2), "mid": (6, 10, 3), "batch1": (1, 10, 3),
                                    "nd": (30, 2)}}


def _offline_grid(op):
    shapes = OFFLINE_SHAPES["channels_first" if op in CHANNELS_FIRST else "channels_last"]
    return grid(lambda regime, dtype, shape, *, eps, affine: offline(op, regime, dtype, shape, steps=("train",),
                                                                     eps=eps, affine=affine), shapes, OFFLINE_GRID)


def offline(op, regime, dtype, shape, *, steps, eps=1e-5, affine="wb", state="init", iters=0, tag="", why="",
            **options):
    """Rows of the offline instances; state "init" is the instance's initial state, "warm" a drawn one
    (positive statistics for variances, iters = ``iters``)."""
    first = op in CHANNELS_FIRST
    c = shape[1] if first else shape[-1]
    st = {k: ((c,), warm if state == "warm" else init) for k, (init, warm) in OFFLINE_STATE[op].items()}
    st["iters"] = ((1,), f"count:{iters}")
    axes = (0,) + tuple(range(2, len(shape))) if first else tuple(range(len(shape) - 1))
    variant = variant_of(affine, tag)
    return Case(op, name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"eps": eps, **options}, axes=axes,
                centered=op != "power_norm", state=st, steps=tuple(steps), why=why)


def _offline_batch_norm_rows():
    ob = lambda *a, **k: offline("offline_batch_norm", *a, **k)  # noqa: E731
    return _offline_grid("offline_batch_norm") + [
        ob("normal", "float32", (6, 3, 5), steps=("train",) * 3 + ("eval",), tag="train3_eval",
           why="current-batch instance: batch statistics, exact backward, torch-style running statistics"),
        ob("mean1e3", "float64", (5, 3, 4), steps=("train", "train:heavy_tail", "train", "eval"), state="warm",
           iters=2, momentum=0.3, tag="mom0.3_train3_eval"),
        ob("normal", "bfloat16", (4, 2, 3, 3), steps=("train", "train"), affine="w", tag="train2"),
    ]


def _power_norm_rows():
    pn = lambda *a, **k: offline("power_norm", *a, **k)  # noqa: E731
    return _offline_grid("power_norm") + [
        pn("normal", "float32", (2, 6, 4), steps=("train",) * 5 + ("eval",), tag="train5_eval",
           why="running quadratic mean psi_{t-1} in the forward, nu_{t-1} in the approximate backward"),
        pn("heavy_tail", "float16", (3, 4, 3), steps=("train",) * 4, state="warm", iters=10, alpha_fwd=0.7,
           alpha_bkw=0.95, tag="warm_a0.7_0.95_train4"),
        pn("normal", "float64", (10, 3), eps=0.0, steps=("train", "train:spike", "train", "eval"),
           tag="spike_train3_eval", why="eps = 0: the paper's X / psi_{t-1}; a channel spike enters psi late"),
        pn("normal", "bfloat16", (2, 5, 3), steps=("eval",), state="warm", iters=4, affine="b", tag="eval"),
    ]


def _batch_renorm_rows():
    br = lambda *a, **k: offline("batch_renorm", *a, **k)  # noqa: E731
    return _offline_grid("batch_renorm") + [
        br("normal", "float32", (6, 3, 5), steps=("train", "train:mean1e3", "train:std1e-3", "train", "eval"),
           r_max=2.0, d_max=1.0, momentum=0.3, tag="clip_train4_eval",
           why="batches far from the running statistics: d clipped at d_max, r at 1/r_max, then unclipped"),
        br("normal", "float64", (5, 3, 4), steps=("train",) * 4 + ("eval",), tag="train4_eval",
           why="paper defaults r_max 3, d_max 5, rate 0.01"),
        br("heavy_tail", "float16", (4, 2, 3), steps=("train",) * 3, state="warm", iters=100, momentum=0.1,
           tag="warm_train3"),
        br("mean1e3", "bfloat16", (4, 3, 2), steps=("eval",), state="warm", iters=5, tag="eval",
           why="eval: weight * (x - mu) / sigma + bias, no eps"),
    ]
