"""The pieces every golden case row shares: the ``Case`` type, regimes, ids, the shared grid."""
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
    "gate_sat": "+-(5 + 95 U(0,1)): a SiLU gate far into saturation, silu(z) ~ z above and ~ -|z| e^-|z| below "
                "(exp(-z) overflows float32 past z = -88.7)",
    "zero_runs": "N(0,1) with the first 128 values of every slice and each aligned run of 16 values with "
                 "probability 1/2 set to 0: all-zero quantization blocks (norm_quant_block)",
}
# state regimes (generators: build.STATE_GENERATORS)
STATE_REGIMES = ("stat_mean", "stat_var", "zeros", "ones")  # plus "count:<k>" for integer counters

# inputs that are parameters (drawn once per case) draw from these regimes; every other input is an
# activation (drawn per step, by the case regime)
PARAM_REGIMES = {"weight": "weight", "g": "weight", "bias": "bias", "pad_mask": "mask", "static_scale": "qscale",
                 "mask": "keep", "rowscale": "weight", "scale": "bias", "shift": "bias", "mask1": "keep",
                 "weight1": "weight", "bias1": "bias", "alpha": "alpha",
                 "global_scale": "nvfp4_enc"}

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


def variant_of(affine: str, *tags: str) -> str:
    """The variant part of a case name: the affine's (AFFINE_VARIANT) then the tags, the empty ones left out."""
    return "_".join(v for v in (AFFINE_VARIANT[affine], *tags) if v)

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


