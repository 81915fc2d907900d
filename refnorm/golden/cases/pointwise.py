"""Golden rows of the element-wise replacements of a norm: dyt (dynamic tanh) and poly_norm (PolyCom).

dyt's hard regimes: alpha * x saturating tanh (a large alpha, alpha="big", or mean-shifted
x), where tanh' = 1 - t^2 is tiny and a kernel computing it from a rounded t loses it; a tiny alpha
(alpha="tiny"), where t ~ alpha x; and many elements, since dalpha sums g * tanh' * x over EVERY element
of x (a full reduction, 65536 terms in the largest case). poly_norm's: x^3 overflowing float16
(|x| > 40.3: the sq_overflow and dev_overflow regimes), tiny rows (eps dominates every power's mean
square), mean-shifted rows (each power nearly constant along the row: its rms backward cancels), zero
rows, and many rows for the weight's three full-reduction gradients.
"""
from __future__ import annotations

from ._base import Case, name_for

ALPHA = {"init": ("alpha", ""), "big": ("alpha_big", "abig"), "tiny": ("alpha_tiny", "atiny")}  # param regime, tag
DYT_AFFINE = {"wb": "", "w": "nobias", "b": "noweight", "": "noaffine"}


# -------------------------------------------------------------------------------------------- dyt
def dyt(regime, dtype, shape, *, alpha="init", affine="wb", why=""):
    """x: (*, C); alpha (1,) drawn from the param regime ``ALPHA[alpha]`` (build.PARAM_GENERATORS: "init" ~ 0.5,
    "big" 4..12, "tiny" ~ 1e-3); weight and bias (C,) per ``affine`` ("wb", "w", "b" or "")."""
    regime_a, tag = ALPHA[alpha]
    variant = "_".join(v for v in (tag, DYT_AFFINE[affine]) if v)
    inputs = {"x": tuple(shape), "alpha": (1,),
              **{k: (shape[-1],) for k, f in (("weight", "w"), ("bias", "b")) if f in affine}}
    return Case("dyt", name_for(regime, dtype, shape, variant=variant), dtype, inputs, regime, {},
                axes=(len(shape) - 1,), centered=False, why=why,
                param_regimes={} if alpha == "init" else {"alpha": regime_a})


SAT = "alpha * x saturates tanh: tanh' = 1 - t^2 tiny, lost by a kernel that forms it from a rounded t"
TINY = "tiny alpha: t ~ alpha x, dx ~ alpha g"
MANY = "dalpha sums g * tanh' * x over every element: a full reduction"


def _dyt_rows():
    return [
        dyt("normal", "float64", (2, 5, 7)),
        dyt("normal", "float32", (3, 20, 12)),
        dyt("normal", "float16", (8, 64)),
        dyt("normal", "bfloat16", (6, 96)),
        dyt("normal", "float32", (7,), why="one row, x of one dimension"),
        dyt("normal", "float64", (4, 9), alpha="big", why=SAT),
        dyt("normal", "float32", (16, 64), alpha="big", why=SAT),
        dyt("normal", "float16", (16, 64), alpha="big", why=SAT),
        dyt("normal", "bfloat16", (16, 64), alpha="big", why=SAT),
        dyt("mean1e3", "float32", (4, 32), why="every alpha * x ~ 500: tanh' ~ 1e-434, 0 in every precision"),
        dyt("sq_overflow", "float16", (4, 32), why="alpha * x ~ 150: saturated, x^2 would overflow float16"),
        dyt("heavy_tail", "float32", (8, 40), alpha="big", why=SAT + ", with heavy tails"),
        dyt("normal", "float32", (8, 48), alpha="tiny", why=TINY),
        dyt("normal", "float16", (8, 48), alpha="tiny", why=TINY),
        dyt("normal", "bfloat16", (8, 48), alpha="tiny", why=TINY),
        dyt("std1e-3", "float32", (6, 32), why="tiny x: tanh in its linear range"),
        dyt("outlier", "float16", (8, 32), why="one x100 outlier per row saturates"),
        dyt("normal", "float32", (128, 512), why=MANY + " of 65536 terms"),
        dyt("normal", "bfloat16", (64, 256), alpha="big", why=MANY + " of 16384 terms; " + SAT),
        dyt("normal", "float16", (4, 16, 24), affine="w", why="no bias"),
        dyt("normal", "float32", (5, 24), affine="", why="neither weight nor bias (dweight, dbias absent)"),
        dyt("zero", "float64", (3, 8), why="x = 0: t = 0, tanh' = 1"),
        dyt("mean1e4", "float16", (4, 16), alpha="tiny", why="alpha * x ~ 15: saturating from a tiny alpha"),
        dyt("const", "float32", (4, 12), why="constant rows of N(0, 1e3) values: saturated"),
        dyt("one_std1e-3", "float32", (4, 24), why="alpha * x ~ 0.6: every element near one point of tanh"),
        dyt("normal", "float32", (1, 10, 24), affine="b", why="batch size 1, no weight"),
        dyt("heavy_tail", "float64", (3, 10), why="heavy tails: some elements saturate"),
    ]


# -------------------------------------------------------------------------------------- poly_norm
def poly_norm(regime, dtype, shape, *, eps=1e-6, bias=True, why=""):
    """x: (*, H); weight (3,) and bias (1,) (``bias=False``: no bias)."""
    inputs = {"x": tuple(shape), "weight": (3,), **({"bias": (1,)} if bias else {})}
    return Case("poly_norm", name_for(regime, dtype, shape, eps=eps, default_eps=1e-6,
                                      variant="" if bias else "nobias"),
                dtype, inputs, regime, {"eps": eps}, axes=(len(shape) - 1,), centered=False, why=why)


OVER = "x^3 overflows float16 (|x| > 40.3): the powers must be formed in the float32 accumulator"
SHIFT = "mean-shifted rows: every power nearly constant along the row, its rms backward cancels"
SMALL = "tiny rows: eps dominates every power's mean square"


def _poly_norm_rows():
    return [
        poly_norm("normal", "float64", (3, 7)),
        poly_norm("normal", "float32", (4, 64)),
        poly_norm("normal", "float16", (8, 32)),
        poly_norm("normal", "bfloat16", (8, 48)),
        poly_norm("normal", "float32", (2, 3, 40), why="two leading axes"),
        poly_norm("dev_overflow", "float16", (4, 64), why=OVER),
        poly_norm("sq_overflow", "float16", (4, 48), why=OVER + " (x^2 too)"),
        poly_norm("sq_overflow", "bfloat16", (4, 48), why="x^3 ~ 2.7e7 in bfloat16's 8 bits"),
        poly_norm("dev_overflow", "float32", (4, 40), why="x^6 ~ 1e19 in float32's mean square"),
        poly_norm("std1e-3", "float32", (6, 32), why=SMALL),
        poly_norm("std1e-3", "float16", (6, 32), why=SMALL + "; x^3 ~ 1e-9 underflows float16"),
        poly_norm("std1e-3", "bfloat16", (6, 32), why=SMALL),
        poly_norm("std1e-6", "float32", (4, 24), eps=1e-12, why=SMALL + "; x^6 ~ 1e-36 near float32's subnormals"),
        poly_norm("mean1e3", "float32", (4, 64), why=SHIFT),
        poly_norm("mean1e3", "float16", (4, 40), why=SHIFT + "; x^3 ~ 1e9 overflows float16"),
        poly_norm("mean1e4_std16", "bfloat16", (4, 40), why=SHIFT),
        poly_norm("one_std1e-3", "float32", (4, 48), eps=1e-12, why=SHIFT),
        poly_norm("mean1e3", "float64", (3, 10), why=SHIFT),
        poly_norm("const", "float32", (4, 16), why="constant rows: h_p = sign(x)^p / sqrt(1 + eps / x^2p)"),
        poly_norm("zero", "float32", (3, 16), why="all-zero rows: y = bias, dx = r_1 w2 dy"),
        poly_norm("heavy_tail", "float32", (8, 64)),
        poly_norm("outlier", "float64", (4, 20)),
        poly_norm("normal", "float32", (6, 30), eps=0.3, why="a large eps, visible in every power"),
        poly_norm("normal", "float16", (6, 32), bias=False, why="no bias"),
        poly_norm("normal", "float16", (1, 65536), why="one row of 65536: each power's mean square and dweight, "
                  "dbias sum 65536 terms"),
        poly_norm("normal", "bfloat16", (64, 256), why="dweight and dbias sum 16384 terms each"),
        poly_norm("mean1e4", "float32", (4, 32), why=SHIFT + "; x^6 ~ 1e24"),
        poly_norm("one_std1e-3", "float64", (2, 12), eps=1e-12, why=SHIFT),
    ]
