"""Golden rows of group_norm_silu (GroupNorm, its affine, then SiLU: diffusion UNet/VAE blocks).

The shared grid through group_norm's shapes (every dtype and regime: mean-shifted groups, constant groups,
tiny variances, float16 overflow of x^2, one group of 65792 values), then the rows of the SiLU: pre-activations
far negative (bias ~ -20: silu ~ -4e-8, float16 subnormals; bias ~ -90: exp(90) overflows float32, silu ~ -7e-38),
G = 1 and G = C, the GroupNorm(32, C) shapes of Stable Diffusion's blocks (2 channels a group), 4-D and 5-D
inputs (the channels_last and channels_last_3d layouts, ``refnorm check --layout channels_last``).
"""
from __future__ import annotations

from ._base import Case, _affine_inputs, grid, name_for, variant_of
from .standard import GROUP_NORM_SHAPES

BIAS_TAG = {"": "", "neg20": "neg20", "neg90": "neg90"}


def group_norm_silu(regime, dtype, shape, *, groups, eps=1e-5, affine="wb", bias_regime="", why=""):
    """A row: x from ``regime``; ``bias_regime``: the bias's parameter regime ("neg20", "neg90"; default: N(0, 0.5))."""
    n, c = shape[:2]
    view = (n, groups, c // groups) + tuple(shape[2:])   # slices: one (sample, group) each
    variant = variant_of(affine, f"g{groups}", BIAS_TAG[bias_regime])
    return Case("group_norm_silu", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"num_groups": groups, "eps": eps},
                axes=tuple(range(2, len(view))), view=view, why=why,
                param_regimes={"bias": bias_regime} if bias_regime else {})


def _group_norm_silu_rows():
    def make(regime, dtype, shape_groups, **kw):
        shape, groups = shape_groups
        return group_norm_silu(regime, dtype, shape, groups=groups, **kw)
    neg = "pre-activations far negative (bias ~ -20): silu ~ -4e-8 and silu' ~ -4e-8, the SiLU's flat tail"
    rows = grid(make, GROUP_NORM_SHAPES)
    rows += [
        group_norm_silu("normal", "float64", (2, 6, 3, 4), groups=3, bias_regime="neg20", why=neg),
        group_norm_silu("normal", "float32", (2, 8, 5, 7), groups=4, bias_regime="neg20", why=neg),
        group_norm_silu("normal", "float16", (2, 8, 4, 4), groups=2, bias_regime="neg20",
                        why=neg + "; float16 subnormals (its smallest is 6e-8)"),
        group_norm_silu("mean1e3", "bfloat16", (2, 8, 5, 7), groups=4, bias_regime="neg20", why=neg + ", mean-shifted"),
        group_norm_silu("normal", "float32", (2, 4, 6, 5), groups=2, bias_regime="neg90",
                        why="bias ~ -90: exp(-p) overflows float32 (x / (1 + exp(-x)) gives -0), silu ~ -7e-38"),
        group_norm_silu("mean1e3", "float64", (2, 6, 4, 5), groups=1, why="G = 1: layer norm over (C, *)"),
        group_norm_silu("normal", "bfloat16", (2, 6, 4, 5), groups=1, why="G = 1: layer norm over (C, *)"),
        group_norm_silu("normal", "bfloat16", (2, 5, 3, 4), groups=5, why="G = C: instance norm"),
        group_norm_silu("mean1e3", "float32", (2, 6, 3, 3), groups=6, why="G = C: instance norm, mean-shifted"),
        group_norm_silu("normal", "float16", (2, 64, 4, 4), groups=32,
                        why="GroupNorm(32, 64) + SiLU: Stable Diffusion's ResnetBlock2D, 2 channels a group"),
        group_norm_silu("mean1e3", "bfloat16", (1, 64, 6, 6), groups=32,
                        why="GroupNorm(32, 64) + SiLU, mean-shifted groups, batch 1"),
        group_norm_silu("normal", "float32", (1, 4, 32, 66), groups=2,
                        why="two groups of 4224 values over a 32x66 image (the grid's big row: one group of 65792)"),
        group_norm_silu("normal", "float32", (3, 6), groups=2, why="2-D (N, C) input"),
        group_norm_silu("heavy_tail", "bfloat16", (2, 8, 3, 4, 5), groups=4, why="5-D (channels_last_3d)"),
    ]
    return rows
