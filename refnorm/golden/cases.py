"""The golden case table: every golden case is one declarative row (SciPy's BOOST_TESTS style).

A ``Case`` names an op, its input shapes, the case dtype, the input regime, the config, the steps
(``"train"``/``"eval"``, several for stateful ops) and the initial state. ``refnorm.golden.build``
turns a row into arrays; the seed is derived from the case id, so a row never needs a hand-picked
seed and two rows never share one (checked). Adding an op is adding rows: write a row maker (the
op's input shapes, config and reduction axes), list its rows, and register them in ``ROW_MAKERS``.

Case ids say what they test: ``<op>/<regime>[_eps<eps>][_<variant>]_<dtype>_<shape>``, e.g.
``layer_norm/mean1e3_f16_260x3`` (rows of mean 1e3 and std 1, float16, 260 rows of 3) or
``batch_norm/normal_onnx_train3_eval_f16_4x2x3x3``.

Shapes in the shared grid (``GRID``) are given by kind, each op maps a kind to a concrete shape:
``odd`` (a small non-power-of-two reduction), ``mid`` (~600 values, non-power-of-two),
``pow2`` (power-of-two reductions), ``rows`` (many slices, >= 256 where the op has rows: parameter
gradients sum many contributions), ``big`` (one reduction of 65536+ values), ``batch1`` (batch size
1) and ``nd`` (more or fewer dimensions).
"""
from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

DTYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}

# regime -> what it is and which real bugs it exposes (ids: docs/pitfalls.md)
REGIMES = {
    "normal": "standard normal",
    "mean1e3": "1e3 + N(0,1): |mean|/std = 1e3, one-pass variance cancels (A01-A09)",
    "mean1e4": "1e4 + N(0,1): |mean|/std = 1e4 (A01-A09); in float16/bfloat16 (spacing 8/64 at 1e4) the "
               "slices round to large constants",
    "mean1e4_std16": "1e4 + 16 N(0,1): a few float16/bfloat16 levels per slice, |mean|/std ~ 600 "
                     "(the worst a low-precision slice gets while not constant)",
    "const": "every slice constant, values ~ N(0, 1e3): zero variance, rstd = eps^-1/2 (A04-A06, B03-B05)",
    "std1e-3": "1e-3 * N(0,1): variance 1e-6 below eps=1e-5, eps dominates (B01, C04)",
    "one_std1e-3": "1 + 1e-3 * N(0,1): tiny variance on an offset, with eps=1e-12 (A02, A03, C04)",
    "sq_overflow": "300 + 20 * N(0,1): x^2 overflows float16 (C01-C03, C06)",
    "dev_overflow": "500 * N(0,1): deviations |x - mean| beyond 256, so (x - mean)^2 overflows float16 "
                    "(C01-C03: squares of deviations in the input dtype)",
    "heavy_tail": "Student t with 2 degrees of freedom: heavy tails, occasional huge values",
    "outlier": "N(0,1) with one x100 outlier per slice",
    "zero": "all zeros (norms of an all-zero slice)",
    "spike": "N(0,1) with one whole slice scaled by 25 (a channel outlier, for stateful filters)",
    "std1e-4": "1e-4 * N(0,1): with eps 1e-12, var + eps ~ 1e-8 lies below float16's smallest normal (6.1e-5) and "
               "rounds to 0 there: a kernel taking rsqrt of var + eps rounded to float16 gives inf (rstd ~ 1e4)",
    "pm1": "+1 or -1, signs at random: every mean of squares is exactly 1 (with eps 0, rstd = 1 in every "
           "precision: norm_quant's exact ties)",
    "std1e-6": "1e-6 * N(0,1): tiny rows, far below eps, so the norm's output is tiny and a dynamic quantization "
               "scale amax/qmax falls below its floor min_scale (norm_quant; 1/scale overflows float16)",
}
# state regimes (generators: build.STATE_GENERATORS)
STATE_REGIMES = ("stat_mean", "stat_var", "zeros", "ones")  # plus "count:<k>" for integer counters

# inputs that are parameters (drawn once per case) draw from these regimes; every other input is an
# activation (drawn per step, by the case regime)
PARAM_REGIMES = {"weight": "weight", "g": "weight", "bias": "bias", "pad_mask": "mask", "static_scale": "qscale",
                 "mask": "keep", "rowscale": "weight", "scale": "bias", "shift": "bias", "mask1": "keep",
                 "weight1": "weight", "bias1": "bias"}

_ID = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9][A-Za-z0-9_.+-]*$")


@dataclass(frozen=True)
class Case:
    """One golden case.

    op:       normalizer name (refnorm.names()).
    name:     what it tests; the id is ``op/name`` and the file ``op/name.npz``.
    dtype:    float64, float32, float16 or bfloat16: every input, cotangent and initial state is
              exactly representable in it; expected values are the float64 reference.
    inputs:   input name -> shape, in the op's input order; absent optional inputs are left out.
    regime:   how the activation inputs are drawn (``REGIMES``); parameters use ``PARAM_REGIMES``.
    config:   options for refnorm.evaluate (JSON-able).
    axes:     the activation's reduction axes (constant/outlier regimes work per slice; the
              conditioning recorded in the manifest is per slice). None: the whole tensor.
    view:     a reshape of the activation that ``axes`` refer to, when slices are not whole axes
              (group_norm: (N, C, *) viewed as (N, G, C/G, *)). None: the activation's own shape.
    centered: the op removes a mean over ``axes`` (the conditioning |mean|/std is then recorded).
    state:    initial state, name -> (shape, state regime), for stateful ops.
    steps:    "train"/"eval" per call, optionally "train:<regime>" to draw that step's activations
              from another regime; each step draws fresh activations and cotangents, the
              parameters stay, the state carries over (the float64 reference chain).
    eval_outputs: outputs compared in eval steps (None: all), e.g. batch_norm's saved statistics
              are not part of the eval-mode contract (torch CPU returns empty tensors, pitfall E13).
    ignore_grads: inputs whose gradient is stored but not compared (unified_norm's pad_mask: a
              0/1 mask, not differentiable; the reference returns zeros to fill the contract).
    why:      extra words for the manifest; the regime's description is always included.
    input_regimes: activation input -> the regime it is drawn from instead of ``regime`` (add_norm's
              small branch x drawn "normal" on a "mean1e3" residual stream); absent from the manifest
              row when empty.
    param_regimes: parameter input -> the parameter regime (build.PARAM_GENERATORS) it is drawn from instead
              of ``PARAM_REGIMES``'s (norm_quant's exact ties: weight "ties", static_scale "eighth"); absent
              from the manifest row when empty.
    """

    op: str
    name: str
    dtype: str
    inputs: Mapping[str, tuple[int, ...]]
    regime: str = "normal"
    config: Mapping[str, Any] = field(default_factory=dict)
    axes: tuple[int, ...] | None = None
    view: tuple[int, ...] | None = None
    centered: bool = True
    state: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    steps: tuple[str, ...] = ("train",)
    eval_outputs: tuple[str, ...] | None = None
    ignore_grads: tuple[str, ...] = ()
    why: str = ""
    input_regimes: Mapping[str, str] = field(default_factory=dict)
    param_regimes: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"

    @property
    def seed(self) -> int:
        """Derived from the id (crc32), so rows need no hand-picked seeds."""
        return zlib.crc32(self.id.encode())

    def to_json(self) -> dict:
        """The row as plain JSON values (stored in the manifest; verify compares it with the table)."""
        d = {"id": self.id, "op": self.op, "dtype": self.dtype, "regime": self.regime, "seed": self.seed,
             "inputs": {k: list(v) for k, v in self.inputs.items()}, "config": dict(self.config),
             "axes": None if self.axes is None else list(self.axes),
             "view": None if self.view is None else list(self.view), "centered": self.centered,
             "state": {k: [list(s), r] for k, (s, r) in self.state.items()}, "steps": list(self.steps),
             "eval_outputs": None if self.eval_outputs is None else list(self.eval_outputs),
             "ignore_grads": list(self.ignore_grads),
             "why": "; ".join(w for w in (REGIMES.get(self.regime, ""), self.why) if w)}
        if self.input_regimes:
            d["input_regimes"] = dict(self.input_regimes)
        if self.param_regimes:
            d["param_regimes"] = dict(self.param_regimes)
        return json.loads(json.dumps(d, allow_nan=False))  # canonical: tuples -> lists


def name_for(regime: str, dtype: str, shape, *, eps=None, default_eps=1e-5, variant: str = "") -> str:
    """``<regime>[_eps<eps>][_<variant>]_<dtype>_<shape>``; eps only when it is not the op's default."""
    parts = [regime]
    if eps is not None and eps != default_eps:
        parts.append(f"eps{eps:g}")
    if variant:
        parts.append(variant)
    parts += [DTYPES[dtype], "x".join(map(str, shape)) or "scalar"]
    return "_".join(parts)


AFFINE_VARIANT = {"wb": "", "w": "nobias", "b": "noweight", "": "noaffine"}

# The shared grid: (regime, dtype, shape kind, eps, affine). Each op maps it through its row maker;
# together the rows give every op all four dtypes and every regime of issue 5.
GRID = (
    ("normal", "float64", "odd", 1e-5, "wb"),
    ("normal", "float32", "mid", 1e-5, "wb"),
    ("normal", "float16", "pow2", 1e-5, "wb"),
    ("normal", "bfloat16", "mid", 1e-5, "wb"),
    ("normal", "float32", "rows", 1e-5, "wb"),       # parameter gradients over >= 256 slices
    ("normal", "bfloat16", "rows", 1e-5, "wb"),
    ("mean1e3", "float32", "mid", 1e-5, "wb"),
    ("mean1e3", "bfloat16", "odd", 1e-5, "wb"),
    ("mean1e3", "float16", "rows", 1e-5, "wb"),
    ("mean1e4", "float16", "pow2", 1e-5, "wb"),      # large constants in float16
    ("mean1e4_std16", "float16", "mid", 1e-5, "wb"),
    ("mean1e4_std16", "bfloat16", "rows", 1e-5, "wb"),
    ("mean1e4", "float64", "mid", 1e-5, "wb"),
    ("mean1e4", "float32", "rows", 1e-5, "wb"),
    ("const", "float32", "mid", 1e-5, "wb"),
    ("const", "float16", "odd", 1e-12, "wb"),        # fp16 rstd = 1e6 overflows if stored in fp16
    ("const", "bfloat16", "pow2", 1e-12, "wb"),
    ("std1e-3", "bfloat16", "mid", 1e-5, "wb"),
    ("std1e-3", "float32", "odd", 1e-5, "wb"),
    ("one_std1e-3", "float32", "mid", 1e-12, "wb"),
    ("one_std1e-3", "float16", "pow2", 1e-12, "wb"),
    ("sq_overflow", "float16", "mid", 1e-5, "wb"),
    ("sq_overflow", "bfloat16", "odd", 1e-5, "wb"),
    ("sq_overflow", "float32", "pow2", 1e-5, "wb"),
    ("heavy_tail", "float32", "mid", 1e-5, "wb"),
    ("heavy_tail", "float16", "rows", 1e-5, "wb"),
    ("outlier", "bfloat16", "pow2", 1e-5, "wb"),
    ("outlier", "float64", "mid", 1e-5, "wb"),
    ("normal", "float32", "odd", 0.3, "wb"),         # eps placement visible (B01, B02, B10)
    ("normal", "bfloat16", "mid", 0.3, "wb"),
    ("normal", "float16", "pow2", 0.3, "wb"),
    ("normal", "float64", "mid", 1e-12, "wb"),
    ("normal", "float32", "pow2", 1e-3, "wb"),
    ("normal", "float16", "mid", 1e-5, "w"),         # bias absent / weight absent (D06, F12)
    ("normal", "float32", "odd", 1e-5, "b"),
    ("normal", "bfloat16", "pow2", 1e-5, ""),
    ("mean1e3", "float64", "mid", 1e-5, ""),
    ("normal", "float32", "batch1", 1e-5, "wb"),     # batch size 1
    ("normal", "bfloat16", "nd", 1e-5, "wb"),        # more dimensions
    ("mean1e3", "float16", "nd", 1e-5, "w"),
    ("mean1e3", "float16", "big", 1e-5, ""),         # one reduction of 65536+ values
)


def grid(make, shapes: Mapping[str, tuple[int, ...]], entries=GRID) -> list[Case]:
    """Map the shared grid through ``make(regime, dtype, shape, eps=, affine=)``; kinds the op
    has no shape for are skipped, and so are rows ``make`` returns None for."""
    out = []
    for regime, dtype, kind, eps, affine in entries:
        if kind in shapes:
            case = make(regime, dtype, shapes[kind], eps=eps, affine=affine)
            if case is not None:
                out.append(case)
    return out


# why of the float16 rows whose var + eps lies below float16's smallest normal (issue 35: a kernel taking
# rsqrt(half(var + eps)) passed every other golden case)
F16_SUBNORMAL = ("var + eps ~ 1e-8 below float16's smallest normal (6.1e-5) and smallest subnormal: rounded to "
                 "float16 before the rsqrt it is 0 (rstd inf); statistics must stay in float32")


def _affine_inputs(affine: str, shape) -> dict:
    return {k: tuple(shape) for k, flag in (("weight", "w"), ("bias", "b")) if flag in affine}


# --------------------------------------------------------------------------------- layer_norm
def layer_norm(regime, dtype, shape, *, k=1, eps=1e-5, affine="wb", weight_offset=0.0, why=""):
    ns = tuple(shape[len(shape) - k:])
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], f"k{k}" if k > 1 else "", "zc" if weight_offset else "")
                       if v)
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


# --------------------------------------------------------------------------------- batch_norm
BN_STATE = {"running_mean": "stat_mean", "running_var": "stat_var"}


def batch_norm(regime, dtype, shape, *, eps=1e-5, affine="wb", steps=("train",), stats=True,
               nbt=0, tag="", why="", **options):
    """Rows of batch_norm; ``options`` (momentum, convention) go to the config as given."""
    c = shape[1]
    state = {k: ((c,), r) for k, r in BN_STATE.items()} if stats else {}
    if stats:
        state["num_batches_tracked"] = ((), f"count:{nbt}")
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], tag) if v)
    return Case("batch_norm", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"eps": eps, **options},
                axes=(0,) + tuple(range(2, len(shape))), state=state, steps=tuple(steps),
                eval_outputs=("y",), why=why)


BATCH_NORM_SHAPES = {"odd": (7, 3), "mid": (6, 4, 25), "pow2": (8, 2, 4, 4), "rows": (16, 3, 4, 5),
                     "batch1": (1, 3, 5, 7), "nd": (2, 3, 3, 4, 5), "big": (4, 1, 128, 130)}


def _batch_norm_rows():
    bn = batch_norm
    rows = grid(bn, BATCH_NORM_SHAPES)
    t3e = ("train", "train", "train", "eval")
    rows += [
        bn("normal", "float32", (6, 3, 5), steps=t3e, tag="train3_eval",
           why="running statistics over 3 steps (torch momentum 0.1, unbiased running_var), then eval"),
        bn("mean1e3", "bfloat16", (6, 3, 5), steps=t3e, tag="train3_eval"),
        bn("normal", "float32", (6, 3, 5), steps=("train", "train:mean1e3", "train", "eval"), tag="shift_train3_eval",
           why="a batch from another distribution (mean 1e3) between two normal ones"),
        bn("normal", "float16", (4, 2, 3, 3), steps=t3e, tag="onnx_train3_eval", convention="onnx",
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
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], f"g{groups}") if v)
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
    state = {k: ((c,), r) for k, r in BN_STATE.items()} if stats else {}
    if stats:
        state["num_batches_tracked"] = ((), f"count:{nbt}")
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], tag) if v)
    return Case("instance_norm", name_for(regime, dtype, shape, eps=eps, variant=variant), dtype,
                {"x": tuple(shape), **_affine_inputs(affine, (c,))}, regime, {"eps": eps, **options},
                axes=tuple(range(2, len(shape))), state=state, steps=tuple(steps), eval_outputs=("y",),
                why=why)


INSTANCE_NORM_SHAPES = {"odd": (3, 2, 7), "mid": (2, 3, 100), "pow2": (2, 2, 8, 8), "rows": (40, 3, 2, 3),
                        "batch1": (1, 3, 5, 7), "nd": (2, 3, 3, 4, 5), "big": (1, 1, 256, 257)}


def _instance_norm_rows():
    inn = instance_norm
    rows = grid(inn, INSTANCE_NORM_SHAPES)
    t3e = ("train", "train", "train", "eval")
    rows += [
        inn("normal", "float32", (4, 3, 6), stats=True, steps=t3e, tag="train3_eval",
            why="running statistics: torch's mean over n of the per-instance updates, unbiased var"),
        inn("mean1e3", "float16", (2, 3, 4, 5), stats=True, steps=t3e, tag="train3_eval"),
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
        nq("pm1", "float16", (3, 48), qd="float8_e4m3fn", ties=True, why=EXACT_TIES + " (e4m3fn: 8 <= |q| < 16)"),
    ]


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
def min_max_scale(regime, dtype, shape, *, dim=-1, eps=1e-5, affine="wb", tag="", why=""):
    dims = [dim] if isinstance(dim, int) else list(dim)
    axes = tuple(sorted(d % len(shape) for d in dims))
    eps = 0.0 if eps == 1e-5 else eps    # the shared grid's default eps: min_max_scale's default, 0
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], tag) if v)
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
    dims = [dim] if isinstance(dim, int) else list(dim)
    axes = tuple(sorted(d % len(shape) for d in dims))
    eps = 0.0 if eps == 1e-5 else eps    # the shared grid's default eps: z_score's default, 0
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], tag) if v)
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
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], "mask" if mask else "", tag) if v)
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
    variant = "_".join(v for v in (AFFINE_VARIANT[affine], tag) if v)
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


def _rows() -> tuple[Case, ...]:
    rows = []
    for make in ROW_MAKERS.values():
        rows += make()
    ids = [c.id for c in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    assert not dup, f"duplicate golden case ids: {dup}"
    assert len({c.seed for c in rows}) == len(rows), "two case ids hash to the same seed: rename one"
    for c in rows:
        assert _ID.match(c.id), c.id
        assert c.dtype in DTYPES and c.regime in REGIMES, c.id
        assert all(k in c.inputs and r in REGIMES for k, r in c.input_regimes.items()), c.id
        assert all(k in c.inputs and k in PARAM_REGIMES for k in c.param_regimes), c.id
        assert c.steps and all(s.partition(":")[0] in ("train", "eval") and s.partition(":")[2] in ("", *REGIMES)
                               for s in c.steps), c.id
        assert all(r in STATE_REGIMES or r.startswith("count:") for _, r in c.state.values()), c.id
        assert all(isinstance(s, int) and s >= 0 for shape in c.inputs.values() for s in shape), c.id
    return tuple(rows)


# op -> its rows; the order here is the order of the manifest
ROW_MAKERS = {
    "batch_norm": _batch_norm_rows,
    "layer_norm": _layer_norm_rows,
    "group_norm": _group_norm_rows,
    "instance_norm": _instance_norm_rows,
    "rms_norm": _rms_norm_rows,
    "lp_normalize": _lp_normalize_rows,
    "local_response_norm": _local_response_norm_rows,
    "min_max_scale": _min_max_scale_rows,
    "z_score": _z_score_rows,
    "mean_variance_norm": _mean_variance_norm_rows,
    "weight_norm": _weight_norm_rows,
    "weight_standardization": _weight_standardization_rows,
    "unified_norm": _unified_norm_rows,
    "offline_batch_norm": _offline_batch_norm_rows,
    "power_norm": _power_norm_rows,
    "batch_renorm": _batch_renorm_rows,
    "norm_quant": _norm_quant_rows,
    "add_norm": _add_norm_rows,
    "adaptive_layer_norm": _adaptive_layer_norm_rows,
}

CASES: tuple[Case, ...] = _rows()


def by_id() -> dict[str, Case]:
    return {c.id: c for c in CASES}

