"""Golden rows of the gated norms: gated_norm (Mamba2's RMSNormGated, the layernorm_gated kernels)."""
from __future__ import annotations

from ._base import Case, name_for

GATED_DEFAULTS = {"norm": "rms_norm", "norm_before_gate": False, "group_size": None, "eps": 1e-5}


def gated_norm(regime, dtype, shape, *, z_regime="", norm="rms_norm", norm_before_gate=False, group_size=None,
               bias=True, eps=1e-5, why=""):
    """A row of gated_norm: x drawn from ``regime``, the gate z from ``z_regime`` (default: normal), slices
    drawn per group (an outlier per group). The name lists every option that differs from the default:
    ln (layer_norm), nbg (norm_before_gate), gs<K> (group_size), nobias, z<regime>."""
    H = shape[-1]
    cfg = {**GATED_DEFAULTS, "norm": norm, "norm_before_gate": bool(norm_before_gate), "group_size": group_size,
           "eps": eps}
    tags = ["ln" if norm == "layer_norm" else "", "nbg" if norm_before_gate else "",
            f"gs{group_size}" if group_size is not None else "", "" if bias else "nobias",
            f"z{z_regime}" if z_regime else ""]
    inputs = {"x": tuple(shape), "z": tuple(shape), "weight": (H,), **({"bias": (H,)} if bias else {})}
    K = H if group_size is None else group_size
    view = tuple(shape[:-1]) + (H // K, K)
    return Case("gated_norm", name_for(regime, dtype, shape, eps=eps, variant="_".join(t for t in tags if t)),
                dtype, inputs, regime, cfg, axes=(len(view) - 1,), view=view,
                centered=norm == "layer_norm" and bool(norm_before_gate), why=why,
                input_regimes={"z": z_regime or "normal"})


def _gated_norm_rows():
    sat = "the gate z far into saturation (|z| in [5, 100], both signs): silu(z) ~ z or ~ -|z| e^-|z|"
    return [
        gated_norm("normal", "float64", (3, 7, 12), group_size=4, why="Mamba2's default (gate before the norm), "
                   "3 groups of 4"),
        gated_norm("normal", "float32", (4, 64)),
        gated_norm("normal", "float32", (8, 96), group_size=32, why="ngroups = 3: each group normalized alone"),
        gated_norm("normal", "float16", (4, 128), group_size=64),
        gated_norm("normal", "bfloat16", (4, 128), group_size=32),
        gated_norm("normal", "float32", (6, 48), norm="layer_norm", norm_before_gate=True, group_size=16),
        gated_norm("mean1e3", "float32", (4, 64), norm="layer_norm", norm_before_gate=True,
                   why="mean-shifted rows normalized before the gate (A01-A09)"),
        gated_norm("mean1e3", "float16", (4, 64), norm="layer_norm", norm_before_gate=True, group_size=16,
                   why="mean-shifted groups normalized before the gate (A01-A09)"),
        gated_norm("mean1e3", "bfloat16", (4, 96), z_regime="const", norm="layer_norm", group_size=32,
                   why="a gate constant per row keeps x's mean shift in x * silu(z) (A01-A09)"),
        gated_norm("normal", "float32", (4, 64), z_regime="gate_sat", group_size=16, why=sat),
        gated_norm("normal", "float16", (4, 64), z_regime="gate_sat", norm_before_gate=True, why=sat),
        gated_norm("normal", "bfloat16", (4, 64), z_regime="gate_sat", norm="layer_norm", group_size=32, why=sat),
        gated_norm("normal", "float64", (3, 40), z_regime="gate_sat", norm="layer_norm", norm_before_gate=True,
                   bias=False, why=sat),
        gated_norm("normal", "float32", (4, 64), z_regime="gate_sat", norm_before_gate=True, group_size=8,
                   bias=False, why=sat),
        gated_norm("heavy_tail", "float32", (4, 80), group_size=20, bias=False),
        gated_norm("outlier", "bfloat16", (4, 64), group_size=16),
        gated_norm("std1e-3", "float16", (4, 32), norm_before_gate=True, why="eps dominates the mean square"),
        gated_norm("normal", "float32", (2, 3, 5, 24), group_size=8, why="4-D input, 3 groups"),
        gated_norm("normal", "bfloat16", (300, 32), group_size=8, why="dweight/dbias over 300 rows"),
        gated_norm("const", "float16", (3, 32), norm="layer_norm", norm_before_gate=True, eps=1e-12,
                   why="constant rows: y = bias * silu(z)"),
        gated_norm("normal", "float16", (2, 16), group_size=16, why="group_size = hidden, given explicitly"),
        gated_norm("sq_overflow", "float16", (4, 64), norm_before_gate=True, group_size=32,
                   why="x^2 overflows float16 (C01-C03)"),
        gated_norm("normal", "float64", (5, 6), norm="layer_norm", group_size=2, why="groups of 2"),
        gated_norm("mean1e4", "float32", (4, 64), norm="layer_norm", norm_before_gate=True, group_size=32,
                   why="|mean|/std = 1e4 in each group, normalized before the gate (A01-A09)"),
        gated_norm("one_std1e-3", "float32", (4, 48), norm="layer_norm", norm_before_gate=True, group_size=16,
                   eps=1e-12, why="tiny variance on an offset, eps 1e-12"),
        gated_norm("normal", "bfloat16", (3, 40), eps=0.3, group_size=8, why="eps 0.3 dominates small groups"),
        gated_norm("normal", "float16", (1, 4, 48), norm_before_gate=True, group_size=12, why="batch size 1"),
    ]
