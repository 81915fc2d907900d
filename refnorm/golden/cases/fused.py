"""Golden rows of the fused normalizers: add_norm (residual add + norm), adaptive_layer_norm."""
from __future__ import annotations

from ._base import Case, name_for, AFFINE_VARIANT, _affine_inputs


# ------------------------------------------------------------------------------------ add_norm
ADD_NORM_DEFAULTS = {"norm": "layer_norm", "dropout_p": 0.0, "prenorm": True, "residual_in_fp32": False,
                     "weight_offset": 0.0}
KEEP_P = 0.25          # the keep-mask regime ("keep") keeps ~75%: dropout_p = 0.25 matches it


PARALLEL_TAG = {"": "", "x1": "parx1", "w1": "parw1", "x1w1": "par"}


def add_norm(regime, dtype, shape, *, x_regime="", affine="wb", dropout=False, rowscale=False, norm="layer_norm",
             prenorm=True, residual_in_fp32=False, weight_offset=0.0, eps=1e-5, parallel="", why=""):
    """A row of add_norm: residual drawn from ``regime``, x from ``x_regime`` (default: the same); the
    name lists every option that differs from the default (rms, p, rs, fp32res, noprenorm, zc, par).
    ``parallel``: the parallel branch, "x1" (x1, and mask1 with dropout), "w1" (weight1, and bias1 when
    ``affine`` has a bias: the output y1) or "x1w1" (both); x1 is drawn as x."""
    cfg = {**ADD_NORM_DEFAULTS, "norm": norm, "prenorm": bool(prenorm), "residual_in_fp32": bool(residual_in_fp32),
           "weight_offset": weight_offset, **({} if eps == 1e-5 else {"eps": eps}), "normalized_shape": [shape[-1]]}
    if dropout:
        cfg["dropout_p"] = KEEP_P
    tags = [AFFINE_VARIANT[affine], "rms" if cfg["norm"] == "rms_norm" else "", "p" if dropout else "",
            "rs" if rowscale else "", "fp32res" if cfg["residual_in_fp32"] else "",
            "" if cfg["prenorm"] else "noprenorm", "zc" if cfg["weight_offset"] else "",
            f"x{x_regime}" if x_regime else "", PARALLEL_TAG[parallel]]
    inputs = {"x": tuple(shape), "residual": tuple(shape), **_affine_inputs(affine, shape[-1:])}
    if dropout:
        inputs["mask"] = tuple(shape)
    if rowscale:
        inputs["rowscale"] = tuple(shape[:-1])
    if "x1" in parallel:
        inputs["x1"] = tuple(shape)
        if dropout:
            inputs["mask1"] = tuple(shape)
    if "w1" in parallel:
        inputs.update({k + "1": v for k, v in _affine_inputs("w" + ("b" if "b" in affine else ""),
                                                              shape[-1:]).items()})
    masks = tuple(k for k in ("mask", "mask1") if k in inputs)
    return Case("add_norm", name_for(regime, dtype, shape, eps=eps, variant="_".join(t for t in tags if t)), dtype,
                inputs,
                regime, cfg, axes=(len(shape) - 1,), ignore_grads=masks, why=why,
                input_regimes={k: x_regime for k in ("x", "x1") if k in inputs} if x_regime else {})


def _add_norm_rows():
    shifted = "a mean-shifted residual stream (1e3 + N(0,1)) plus a N(0,1) branch: the sum rounded to {} loses the branch"
    return [
        add_norm("normal", "float64", (9, 7), dropout=True, rowscale=True, why="every option at once"),
        add_norm("normal", "float32", (6, 100)),
        add_norm("mean1e3", "float16", (6, 100), x_regime="normal", residual_in_fp32=True,
                 why=shifted.format("float16")),
        add_norm("mean1e3", "bfloat16", (4, 128), x_regime="normal", norm="rms_norm", residual_in_fp32=True,
                 dropout=True, why=shifted.format("bfloat16")),
        add_norm("mean1e3", "float16", (4, 128), x_regime="normal", dropout=True, rowscale=True,
                 why=shifted.format("float16") + "; the residual returned in float16"),
        add_norm("normal", "bfloat16", (6, 100), norm="rms_norm", residual_in_fp32=True, weight_offset=1.0,
                 dropout=True, affine="w", why="vLLM/Gemma: fused add + RMSNorm with (1 + weight)"),
        add_norm("normal", "float32", (9, 7), dropout=True, prenorm=False, why="prenorm=False: no dresidual_out"),
        add_norm("mean1e4", "float32", (130, 3), x_regime="normal", rowscale=True,
                 why="a residual stream of 1e4 in float32, parameter gradients over 130 rows"),
        add_norm("normal", "float16", (2, 3, 16), norm="rms_norm", affine="", why="3-D input, no affine"),
        add_norm("const", "float16", (3, 16), eps=1e-12, why="constant sums: y = bias, rstd = 1e6"),
        add_norm("std1e-3", "bfloat16", (4, 32), dropout=True),
        add_norm("one_std1e-3", "float32", (6, 20), eps=1e-12),
        add_norm("sq_overflow", "float16", (4, 32), norm="rms_norm", why="x^2 of the sum overflows float16"),
        add_norm("heavy_tail", "float32", (5, 24), norm="rms_norm", rowscale=True),
        add_norm("normal", "bfloat16", (1, 50), eps=0.3, affine="b", residual_in_fp32=True, why="one row"),
        add_norm("mean1e3", "float32", (6, 40), x_regime="normal", dropout=True, rowscale=True, prenorm=False),
        add_norm("mean1e4_std16", "float16", (4, 24), norm="rms_norm", affine="w"),
        add_norm("outlier", "bfloat16", (4, 32)),
        add_norm("normal", "float64", (3, 1), why="one value per row: y = bias"),
        add_norm("normal", "float32", (2, 3, 5), residual_in_fp32=True, weight_offset=1.0,
                 why="residual_in_fp32 on a float32 case changes nothing"),
        add_norm("mean1e3", "bfloat16", (8, 16), x_regime="normal", norm="rms_norm", residual_in_fp32=True,
                 weight_offset=1.0, affine="w", dropout=True, why=shifted.format("bfloat16") + " (Gemma's (1 + w))"),
        add_norm("mean1e3", "float64", (4, 16), x_regime="normal", norm="rms_norm"),
        add_norm("heavy_tail", "float64", (3, 12), dropout=True),
        # the parallel branch (flash-attention's x1, weight1, bias1; GPT-J parallel blocks)
        add_norm("normal", "float64", (5, 12), dropout=True, parallel="x1w1",
                 why="the parallel branch: x1 with its own keep-mask, y1 = x_hat * weight1 + bias1"),
        add_norm("mean1e3", "float32", (6, 40), x_regime="normal", norm="rms_norm", parallel="x1w1",
                 why="the parallel branch on a residual stream of 1e3 in float32"),
        add_norm("mean1e3", "float16", (4, 64), x_regime="normal", residual_in_fp32=True, dropout=True,
                 parallel="x1w1", why=shifted.format("float16") + " (two branches)"),
        add_norm("mean1e3", "bfloat16", (4, 64), x_regime="normal", norm="rms_norm", weight_offset=1.0, affine="w",
                 dropout=True, parallel="x1w1", why=shifted.format("bfloat16") + " (two branches, (1 + weight1))"),
        add_norm("normal", "float16", (3, 32), prenorm=False, parallel="w1", why="y1 without x1, prenorm=False"),
        add_norm("normal", "bfloat16", (4, 24), dropout=True, parallel="x1", why="x1 without y1"),
        # every feature combination above that has dropout, also without it (a kernel without dropout is
        # judged on each): tests/test_golden.py checks that none is left with dropout only
        add_norm("mean1e3", "bfloat16", (4, 128), x_regime="normal", norm="rms_norm", residual_in_fp32=True,
                 why=shifted.format("bfloat16") + ", without dropout"),
        add_norm("normal", "bfloat16", (6, 100), norm="rms_norm", residual_in_fp32=True, weight_offset=1.0,
                 affine="w", why="vLLM/Gemma: fused add + RMSNorm with (1 + weight), without dropout"),
        add_norm("normal", "float32", (9, 7), prenorm=False, why="prenorm=False without dropout"),
        add_norm("mean1e3", "float32", (6, 40), x_regime="normal", rowscale=True, prenorm=False,
                 why="rowscale, prenorm=False, without dropout"),
        add_norm("normal", "float64", (5, 12), parallel="x1w1", why="the parallel branch without dropout"),
        add_norm("mean1e3", "float16", (4, 64), x_regime="normal", residual_in_fp32=True, parallel="x1w1",
                 why=shifted.format("float16") + " (two branches, without dropout)"),
        add_norm("mean1e3", "bfloat16", (4, 64), x_regime="normal", norm="rms_norm", weight_offset=1.0, affine="w",
                 parallel="x1w1", why=shifted.format("bfloat16") + " (two branches, (1 + weight1), without dropout)"),
        add_norm("normal", "bfloat16", (4, 24), parallel="x1", why="x1 without y1, without dropout"),
    ]


# ------------------------------------------------------------------------------- adaptive_layer_norm
def adaptive_layer_norm(regime, dtype, shape, *, eps=1e-6, affine="ss", why=""):
    """x: (B, T, H); scale and shift (B, H) per sample ("ss": both, "s": scale only, "": neither)."""
    variant = {"ss": "", "s": "noshift", "": "noaffine"}[affine]
    inputs = {"x": tuple(shape), **{k: (shape[0], shape[-1]) for k, f in (("scale", "s"), ("shift", "ss"))
                                    if affine.startswith(f) or (f == "s" and affine)}}
    return Case("adaptive_layer_norm", name_for(regime, dtype, shape, eps=eps, default_eps=1e-6, variant=variant),
                dtype, inputs, regime, {"eps": eps}, axes=(len(shape) - 1,), why=why)


def _adaptive_layer_norm_rows():
    return [
        adaptive_layer_norm("normal", "float64", (2, 5, 7)),
        adaptive_layer_norm("normal", "float32", (3, 20, 12), why="dscale/dshift summed over 20 tokens"),
        adaptive_layer_norm("mean1e3", "float16", (2, 8, 64)),
        adaptive_layer_norm("normal", "bfloat16", (2, 8, 32)),
        adaptive_layer_norm("mean1e4_std16", "bfloat16", (2, 6, 40)),
        adaptive_layer_norm("heavy_tail", "float32", (2, 4, 3, 16), affine="s", why="two token axes"),
        adaptive_layer_norm("const", "float16", (2, 3, 9), eps=1e-12),
        adaptive_layer_norm("mean1e4", "float32", (2, 4, 16)),
        adaptive_layer_norm("one_std1e-3", "float32", (2, 3, 20), eps=1e-12),
        adaptive_layer_norm("sq_overflow", "float16", (2, 4, 32)),
        adaptive_layer_norm("std1e-3", "bfloat16", (2, 5, 24), affine=""),
        adaptive_layer_norm("normal", "float32", (1, 10, 24), eps=0.3, why="one sample"),
        adaptive_layer_norm("mean1e3", "float64", (2, 3, 8)),
        adaptive_layer_norm("outlier", "float64", (2, 4, 10)),
        adaptive_layer_norm("std1e-3", "float64", (1, 3, 6), affine="s"),
        adaptive_layer_norm("normal", "float32", (2, 6, 9), affine="s"),
    ]
