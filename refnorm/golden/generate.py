"""Generated cases: a case as a recipe, its inputs regenerated bit for bit, the reference computed by the
judge on the fly (nothing stored). The judge gets the same ``GoldenCase`` as from the golden set.

A recipe is one line, ``OP key=value ...``:

    layer_norm shape=16384x5137 dtype=bfloat16 regime=mean1e3
    group_norm shape=8x256x28x28 groups=32 dtype=float16 layout=channels_last
    batch_norm shape=1x64 expect=error                 the backend must raise (one value per channel)

    shape    the activation's shape, AxBxC (required)
    dtype    float64, float32 (default), float16, bfloat16
    regime   how the activations are drawn (refnorm.golden.cases.REGIMES; default normal)
    layout   the memory layout the backend is handed (refnorm.golden.layouts.LAYOUTS; default contiguous)
    seed     an integer (default: derived from the recipe, as a golden row's from its id)
    expect   "error": the backend must raise (not raising fails); omitted: judge the values
    options  every option of the op, by its name (refnorm.get(op).options: eps, weight_offset,
             eps_placement, min_scale, ...), values as JSON (1e-5, 32, [2, 3], true, null) or plain words
             ("onnx"); each is checked (OPTION_KINDS: a bad value is a RecipeError naming the key, the
             value and what was expected). normalized_shape must be the activation's trailing sizes
    others   the op's row maker's keywords (refnorm.golden.cases: affine wb|w|b|none, k, groups, qd, ub,
             dropout, rowscale, parallel, steps, dyt's alpha init|big|tiny, poly_norm's bias, ...)

The case id is ``OP/gen_NAME[_KEY=VALUE...][@LAYOUT][_raises]``: NAME as the row maker names the case (as a
golden row's), then every option or maker keyword the recipe sets that NAME does not spell (``SPELLED``),
to a value other than the one the case has without it, and an explicit seed; a recipe that sets nothing
else keeps the plain name, and two recipes that differ in an option differ in their ids.

The recipe becomes a ``Case`` through the same row makers as the golden table, and its arrays come
from ``build.draw``, so a recipe that names a golden row's parameters regenerates that row's inputs bit
for bit (tests/test_generate.py).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import numbers
import json
import math
import os
import zlib

from .. import registry
from ..errors import RefnormError
from ..norms import add_norm as _add_norm, batch_norm as _batch_norm, norm_quant as _norm_quant
from ..norms import norm_quant_block as _norm_quant_block
from ..norms import unified_norm as _unified_norm
from . import build as B
from . import cases as T
from . import layouts as L
from .commands import GoldenCase, GoldenStep

AFFINE = {"wb": "wb", "w": "w", "b": "b", "none": ""}
# op -> (row maker, the name of its activation input, extra keywords always passed)
MAKERS = {
    "layer_norm": (T.layer_norm, "x", {}),
    "rms_norm": (T.rms_norm, "x", {}),
    "batch_norm": (T.batch_norm, "x", {}),
    "instance_norm": (T.instance_norm, "x", {}),
    "group_norm": (T.group_norm, "x", {}),
    "lp_normalize": (T.lp_normalize, "x", {}),
    "local_response_norm": (T.local_response_norm, "x", {}),
    "min_max_scale": (T.min_max_scale, "x", {}),
    "z_score": (T.z_score, "x", {}),
    "mean_variance_norm": (T.mean_variance_norm, "x", {}),
    "weight_norm": (T.weight_norm, "v", {}),
    "weight_standardization": (T.weight_standardization, "x", {}),
    "norm_quant": (T.norm_quant, "x", {}),
    "add_norm": (T.add_norm, "x", {}),
    "adaptive_layer_norm": (T.adaptive_layer_norm, "x", {}),
    "gated_norm": (T.gated_norm, "x", {}),
    "dyt": (T.dyt, "x", {}),
    "poly_norm": (T.poly_norm, "x", {}),
    "unified_norm": (T.unified_norm, "x", {}),
    "offline_batch_norm": (functools.partial(T.offline, "offline_batch_norm"), "x", {"steps": ("train",)}),
    "power_norm": (functools.partial(T.offline, "power_norm"), "x", {"steps": ("train",)}),
    "batch_renorm": (functools.partial(T.offline, "batch_renorm"), "x", {"steps": ("train",)}),
    "norm_quant_block": (T.norm_quant_block, "x", {}),
    "group_norm_silu": (T.group_norm_silu, "x", {}),
}
COMMON = ("shape", "dtype", "regime", "layout", "seed", "expect")
NOT_KEYS = ("regime", "dtype", "shape", "why", "tag")       # row maker parameters a recipe does not set

# What each option may be: a tuple of choices, or a kind (``_expected``). Every option of every op has one
# (tests/test_generate.py, which also runs every choice through the reference); the reference checks the rest
# (what depends on other options or the inputs, e.g. norm_quant's scale_ub with a static scale) when the case runs.
_TORCH_ONNX = ("torch", "onnx")
OPTION_KINDS = {
    "batch_norm": {"momentum": "number|null", "eps": "eps", "convention": tuple(_batch_norm.DEFAULT_MOMENTUM)},
    "layer_norm": {"normalized_shape": "shape", "eps": "eps", "weight_offset": "number"},
    "instance_norm": {"momentum": "number|null", "eps": "eps"},
    "group_norm": {"num_groups": "int>=1", "eps": "eps"},
    "rms_norm": {"normalized_shape": "shape", "eps": "eps|null", "eps_placement": ("inside", "outside"),
                 "weight_offset": "number"},
    "local_response_norm": {"size": "int>=1", "alpha": "number>=0", "beta": "number", "k": "number",
                            "window": _TORCH_ONNX},
    "lp_normalize": {"p": "number>0", "dim": "axes", "eps": "eps", "zero_rule": _TORCH_ONNX},
    "mean_variance_norm": {"axes": "axes-list", "eps": "eps"},
    "weight_norm": {"dim": "axis|null"},
    "weight_standardization": {"eps": "eps"},
    "min_max_scale": {"dim": "axes", "eps": "eps"},
    "z_score": {"dim": "axes", "ddof": "int>=0", "eps": "eps"},
    "unified_norm": {"window": "window", "warmup": "int>=0", "outlier_filtration": "bool", "eps": "eps",
                     "momentum": "number", "preset": tuple(_unified_norm.PRESETS)},
    "offline_batch_norm": {"momentum": "number", "eps": "eps"},
    "power_norm": {"alpha_fwd": "number", "alpha_bkw": "number", "eps": "eps"},
    "batch_renorm": {"momentum": "number", "r_max": "number>=1", "d_max": "number>=0", "eps": "eps"},
    "norm_quant": {"normalized_shape": "shape", "norm": _norm_quant.NORMS, "eps": "eps",
                   "quant_dtype": tuple(_norm_quant.QUANT_DTYPES), "scale_ub": "number>0|null",
                   "min_scale": "number>=0|null"},
    "add_norm": {"normalized_shape": "shape", "norm": _add_norm.NORMS, "eps": "eps",
                 "dropout_p": "[0,1)", "prenorm": "bool", "residual_in_fp32": "bool", "weight_offset": "number"},
    "adaptive_layer_norm": {"eps": "eps"},
    "gated_norm": {"norm": ("rms_norm", "layer_norm"), "norm_before_gate": "bool", "group_size": "int>=1|null",
                   "eps": "eps"},
    "dyt": {},
    "poly_norm": {"eps": "eps"},
    "norm_quant_block": {"normalized_shape": "shape", "norm": _norm_quant_block.NORMS, "eps": "eps",
                         "format": _norm_quant_block.FORMATS, "block_size": "int>=1|null",
                         "element_dtype": tuple(_norm_quant_block.ELEMENTS),
                         "scale_rule": tuple(r for rs in _norm_quant_block.FORMAT_RULES.values() for r in rs),
                         "min_scale": "number>=0|null", "residual_in_fp32": "bool"},
    "group_norm_silu": {"num_groups": "int>=1", "eps": "eps"},
}
# the row makers' own keywords (not options): what each may be. affine: AFFINE's words (adaptive_layer_norm's:
# AFFINE_ADALN's), mapped before the maker sees them
MAKER_KINDS = {"k": "ndims", "affine": None, "steps": "steps", "stats": "bool", "nbt": "int>=0", "groups": "int>=1",
               "flat_g": "bool", "qd": tuple(T.QSHORT), "static": "bool", "ub": "number>0", "ties": "bool",
               "x_regime": tuple(T.REGIMES), "dropout": "bool", "rowscale": "bool",
               "parallel": tuple(p for p in T.PARALLEL_TAG if p), "mask": "bool", "state": ("init", "warm"),
               "iters": "int>=0", "z_regime": tuple(T.REGIMES), "bias": "bool", "alpha": tuple(T.ALPHA),
               "residual": "bool", "w_regime": ("decades",), "bias_regime": ("neg20", "neg90")}
AFFINE_ADALN = {"ss": "ss", "s": "s", "none": ""}
# row maker keywords a maker takes for the shared grid and ignores: not recipe keys
IGNORED = {"local_response_norm": ("eps", "affine"), "weight_norm": ("eps", "affine"), "lp_normalize": ("affine",),
           "mean_variance_norm": ("affine",), "weight_standardization": ("affine",)}
# option -> the row maker keyword that makes it (the maker derives the option, and the inputs it needs)
ALIASES = {"group_norm": {"num_groups": "groups"}, "norm_quant": {"quant_dtype": "qd"},
           "add_norm": {"dropout_p": "dropout"}, "group_norm_silu": {"num_groups": "groups"}}
# key -> the values the row maker's name spells (None: every value): such a key adds nothing to the id.
# eps is spelled by every maker that names its eps (cases.name_for), when it keeps the value given
_ALL = None
SPELLED = {op: {"eps": _ALL, "normalized_shape": _ALL, "affine": _ALL} for op in MAKERS}
for _op in ("local_response_norm", "weight_norm"):
    del SPELLED[_op]["eps"]
SPELLED["group_norm"].update(num_groups=_ALL, groups=_ALL)
SPELLED["layer_norm"].update(k=_ALL, weight_offset=(0.0, 1.0))
SPELLED["rms_norm"].update(k=_ALL)
SPELLED["norm_quant"].update(norm=_ALL, quant_dtype=_ALL, qd=_ALL, ub=_ALL, static=(True, False), min_scale=_ALL,
                              ties=(True, False))
SPELLED["add_norm"].update(norm=_ALL, prenorm=_ALL, residual_in_fp32=_ALL, weight_offset=(0.0, 1.0),
                           dropout_p=(0.0, T.KEEP_P), dropout=(True, False), rowscale=(True, False),
                           parallel=_ALL, x_regime=_ALL)
SPELLED["weight_norm"].update(flat_g=(True, False))
SPELLED["unified_norm"].update(mask=(True, False))
SPELLED["gated_norm"].update(norm=_ALL, norm_before_gate=_ALL, group_size=_ALL, bias=_ALL, z_regime=_ALL)
SPELLED["dyt"].update(alpha=_ALL)
SPELLED["poly_norm"].update(bias=(True, False))
SPELLED["norm_quant_block"].update(norm=_ALL, format=_ALL, block_size=_ALL, element_dtype=_ALL, scale_rule=_ALL,
                                   min_scale=_ALL, residual_in_fp32=(True, False), residual=(True, False),
                                   w_regime=_ALL, static=(True, False))
SPELLED["group_norm_silu"].update(num_groups=_ALL, groups=_ALL, bias_regime=_ALL)
BYTES_PER_ELEMENT = 260     # what judging one element of the activation takes, judged whole (measured, docs)


class RecipeError(RefnormError):
    """A recipe that cannot be made into a case; the message names the value and the choices."""


@dataclasses.dataclass(frozen=True)
class Recipe:
    text: str
    case: T.Case
    layout: str
    seed: int
    expect_error: bool

    @property
    def id(self) -> str:
        lay = "" if self.layout == "contiguous" else f"@{self.layout}"
        return f"{self.case.op}/gen_{self.case.name}{lay}" + ("_raises" if self.expect_error else "")

    @property
    def elements(self) -> int:
        return sum(math.prod(s) for s in self.case.inputs.values())


def _value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _shape(text):
    try:
        shape = tuple(int(s) for s in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(s < 0 for s in shape):
        raise RecipeError(f"shape={text!r}: expected sizes joined by 'x', e.g. shape=4096x1024")
    return shape


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _expected(kind, v, ndim: int) -> str | None:
    """None when ``v`` is a value of ``kind`` (OPTION_KINDS) for an activation of ``ndim`` dimensions,
    else what was expected, in words."""
    if isinstance(kind, tuple):
        return None if v in kind else f"one of: {', '.join(kind)}"
    base, _, null = kind.partition("|")
    if null and v is None:
        return None
    axis = lambda a: _is_int(a) and -ndim <= a < ndim                     # noqa: E731
    ok, what = {
        "bool": (lambda: isinstance(v, bool), "true or false"),
        "eps": (lambda: _is_number(v) and v >= 0, "a finite number >= 0"),
        "number": (lambda: _is_number(v), "a finite number"),
        "number>=0": (lambda: _is_number(v) and v >= 0, "a finite number >= 0"),
        "number>0": (lambda: _is_number(v) and v > 0, "a finite number > 0"),
        "number>=1": (lambda: _is_number(v) and v >= 1, "a finite number >= 1"),
        "[0,1)": (lambda: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
        "int>=0": (lambda: _is_int(v) and v >= 0, "an integer >= 0"),
        "int>=1": (lambda: _is_int(v) and v >= 1, "an integer >= 1"),
        "axis": (lambda: axis(v), f"an axis of the {ndim}-D activation (-{ndim} .. {ndim - 1})"),
        "axes": (lambda: axis(v) or (isinstance(v, list) and v and all(map(axis, v))
                                     and len({a % ndim for a in v}) == len(v)),
                 f"an axis or a non-empty list of distinct axes of the {ndim}-D activation (-{ndim} .. {ndim - 1})"),
        "window": (lambda: (_is_int(v) and v >= 1) or (isinstance(v, list) and len(v) == 2
                                                         and all(_is_int(a) and a >= 1 for a in v)),
                   "an integer >= 1 or a list of two (forward, backward)"),
        "axes-list": (lambda: isinstance(v, list) and v and all(map(axis, v)) and len({a % ndim for a in v}) == len(v),
                      f"a non-empty list of distinct axes of the {ndim}-D activation (-{ndim} .. {ndim - 1})"),
        "ndims": (lambda: _is_int(v) and 1 <= v <= ndim, f"an integer in 1 .. {ndim} (the activation's dimensions)"),
        "steps": (lambda: isinstance(v, list) and v and all(
            isinstance(st, str) and st.partition(":")[0] in ("train", "eval") and st.partition(":")[2] in ("", *T.REGIMES)
            for st in v), 'a non-empty list of "train" or "eval" (or "train:REGIME"), e.g. ["train","eval"]'),
        "shape": (lambda: isinstance(v, list) and v and all(_is_int(a) for a in v), "a list of sizes"),
    }[base]
    if ok():
        return None
    return what + (", or null" if null else "")


def _fmt(v) -> str:
    """A value as the case id spells it: JSON's words for numbers, true/false/null, strings bare, lists
    as [a,b] (no spaces: an id is one word)."""
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(map(_fmt, v)) + "]"
    return v if isinstance(v, str) else json.dumps(v)


def _same(a, b) -> bool:
    """Equal as option values: tuples as lists ((8,) is [8]), 1 and 1.0 alike."""
    plain = lambda v: [plain(x) for x in v] if isinstance(v, (list, tuple)) else v      # noqa: E731
    return plain(a) == plain(b)


def _spelled(op, key, value, made) -> bool:
    """Whether the row maker's case name spells ``key=value`` (``SPELLED``; a float eps only where the name's
    %g gives it back, and only when the maker kept it: ``made`` is what the maker's config holds)."""
    spelled = SPELLED[op]
    if key not in spelled or (spelled[key] is not _ALL and value not in spelled[key]):
        return False
    if key == "eps":
        return _same(made, value) and (value is None or float(f"{value:g}") == value)
    return True


def parse(text: str) -> Recipe:
    """The ``Recipe`` of one line (module docstring); a RecipeError names a bad value and the choices."""
    words = text.split()
    if not words:
        raise RecipeError("empty recipe: expected 'OP shape=AxB [key=value ...]'")
    op, fields = words[0], {}
    if op not in MAKERS:
        known = "" if op in registry.names() else "unknown op; "
        raise RecipeError(f"recipe {text!r}: {known}{op!r} cannot be generated; expected one of: {', '.join(MAKERS)}")
    make, main_input, fixed = MAKERS[op]
    options = tuple(registry.get(op).options)
    params, free = _maker_params(op)
    keys = COMMON + options + tuple(p for p in params if p not in options)
    aliases = ALIASES.get(op, {})
    for w in words[1:]:
        k, eq, v = w.partition("=")
        if not eq or not k or not v:
            raise RecipeError(f"recipe {text!r}: {w!r} is not KEY=VALUE")
        if k not in keys:
            raise RecipeError(f"recipe {text!r}: unknown key {k!r}; expected one of: {', '.join(keys)}")
        if k in fields:
            raise RecipeError(f"recipe {text!r}: {k!r} given twice")
        fields[k] = v
    if "shape" not in fields:
        raise RecipeError(f"recipe {text!r}: shape=AxB... is required")
    shape = _shape(fields.pop("shape"))
    dtype = fields.pop("dtype", "float32")
    if dtype not in T.DTYPES:
        raise RecipeError(f"recipe {text!r}: dtype={dtype!r}; expected one of: {', '.join(T.DTYPES)}")
    regime = fields.pop("regime", "normal")
    if regime not in B.GENERATORS:
        raise RecipeError(f"recipe {text!r}: regime={regime!r}; expected one of: {', '.join(B.GENERATORS)}")
    layout = fields.pop("layout", "contiguous")
    if layout not in L.LAYOUTS:
        raise RecipeError(f"recipe {text!r}: layout={layout!r}; expected one of: {', '.join(L.LAYOUTS)}")
    expect = fields.pop("expect", "")
    if expect not in ("", "error"):
        raise RecipeError(f"recipe {text!r}: expect={expect!r}; expected 'error' (or leave it out)")
    seed_text = fields.pop("seed", None)
    given = {k: _value(v) for k, v in fields.items()}
    opts = {k: v for k, v in given.items() if k in options}
    for k, v in opts.items():
        what = _expected(OPTION_KINDS[op][k], v, len(shape))
        if what:
            raise RecipeError(f"recipe {text!r}: {k}={fields[k]}; expected {what}")
    kw = {k: v for k, v in given.items() if k not in options}           # the row maker's own keywords
    if "affine" in kw:
        affine = AFFINE_ADALN if op == "adaptive_layer_norm" else AFFINE
        if kw["affine"] not in affine:
            raise RecipeError(f"recipe {text!r}: affine={kw['affine']!r}; expected one of: {', '.join(affine)}")
        kw["affine"] = affine[kw["affine"]]
    for k, v in kw.items():
        what = MAKER_KINDS[k] and _expected(MAKER_KINDS[k], v, len(shape))
        if what:
            raise RecipeError(f"recipe {text!r}: {k}={fields[k]}; expected {what}")
    for k, v in opts.items():                                         # options the maker makes, or takes
        if k == "normalized_shape":
            kw.update(_normalized_shape(text, op, shape, v, kw, "k" in params))
        elif k in aliases:
            alias = aliases[k]
            value = v > 0 if alias == "dropout" else v
            if alias in kw and kw[alias] != value:
                raise RecipeError(f"recipe {text!r}: {k}={fields[k]} and {alias}={fields[alias]} disagree")
            kw[alias] = value
        elif k in params or free:
            kw[k] = v
    if op in ("group_norm", "group_norm_silu") and "groups" not in kw:
        raise RecipeError(f"recipe {text!r}: {op} needs groups=G (or num_groups=G)")
    if op in ("group_norm", "group_norm_silu") and len(shape) >= 2 and shape[1] % kw["groups"]:
        raise RecipeError(f"recipe {text!r}: groups={kw['groups']}; expected a divisor of the {shape[1]} channels")
    if op == "gated_norm" and kw.get("group_size") is not None and len(shape) and shape[-1] % kw["group_size"]:
        raise RecipeError(f"recipe {text!r}: group_size={kw['group_size']}; expected a divisor of the hidden "
                          f"dimension {shape[-1]} (or null: one group)")
    case = _make(text, op, make, regime, dtype, shape, {**fixed, **kw})
    made = dict(case.config)
    case = dataclasses.replace(case, config={**case.config, **opts})  # the values given, whatever the maker's
    try:
        seed = zlib.crc32(("gen:" + " ".join(sorted(words))).encode()) if seed_text is None else int(seed_text)
    except ValueError:
        raise RecipeError(f"recipe {text!r}: seed={seed_text!r} is not an integer") from None
    if not 0 <= seed < 2 ** 63:
        raise RecipeError(f"recipe {text!r}: seed={seed} out of range [0, 2^63)")
    try:
        L.check(layout, case.inputs[main_input], f"recipe {text!r}")
    except RefnormError as e:
        raise RecipeError(str(e)) from None
    extra = _unspelled(op, (regime, dtype, shape), given, kw, made) + ([("seed", seed)] if seed_text else [])
    name = case.name + "".join(f"_{k}={_fmt(v)}" for k, v in extra)
    return Recipe(text, dataclasses.replace(case, name=name), layout, seed, expect == "error")


def _maker_params(op) -> tuple[list, bool]:
    """The keywords of ``op``'s row maker a recipe may set, and whether it takes any option as a keyword."""
    sig = inspect.signature(MAKERS[op][0]).parameters
    params = [p for p, v in sig.items() if p not in NOT_KEYS + IGNORED.get(op, ()) and v.kind == v.KEYWORD_ONLY]
    return params, any(v.kind == v.VAR_KEYWORD for v in sig.values())


def _unspelled(op, args, given, kw, made) -> list:
    """[(key, value)] the case id adds to the row maker's name: each key ``given`` (options, then the maker's
    own keywords) whose value the name does not spell (``SPELLED``) and that differs from the value the case
    has without it. ``args``: (regime, dtype, shape); ``kw``: the maker's keywords; ``made``: its config."""
    make, _, fixed = MAKERS[op]
    options = registry.get(op).options
    plain = {k: v for k, v in kw.items() if k not in options and (k in ("k", "groups") or k in given)}
    try:
        base = dict(make(*args, **{**fixed, **plain}).config)        # the case without the options given
    except Exception:                                                 # noqa: BLE001 - then the defaults
        base = {}
    base = {**options, **base}
    extra = [(k, given[k]) for k in options                          # in the op's order, not the recipe's
             if k in given and not _spelled(op, k, given[k], made.get(k)) and not _same(given[k], base.get(k))]
    sig = inspect.signature(make).parameters
    for k in _maker_params(op)[0]:
        if k in given and k not in options and not _spelled(op, k, given[k], None) \
                and not _same(given[k], fixed.get(k, sig[k].default)):
            extra.append((k, given[k]))
    return extra


def _normalized_shape(text, op, shape, value, kw, has_k) -> dict:
    """The maker keywords of a ``normalized_shape`` given: it must be the activation's trailing sizes (the
    last one only where the maker normalizes one axis); ``k`` (how many) for the makers that take it."""
    k = len(value)
    if tuple(value) != tuple(shape[len(shape) - k:]) or k > len(shape) or (not has_k and k != 1):
        last = [list(shape[len(shape) - j:]) for j in (range(1, len(shape) + 1) if has_k else (1,))]
        raise RecipeError(f"recipe {text!r}: normalized_shape={_fmt(value)}; expected the activation's trailing "
                          f"sizes: {' or '.join(map(_fmt, last))}")
    if has_k:
        if "k" in kw and kw["k"] != k:
            raise RecipeError(f"recipe {text!r}: normalized_shape={_fmt(value)} and k={kw['k']} disagree")
        return {"k": k}
    return {}


def _make(text, op, make, regime, dtype, shape, kw):
    """The row maker's case; what it raises on a bad keyword is a RecipeError naming the recipe."""
    try:
        case = make(regime, dtype, shape, **kw)
    except (TypeError, ValueError, KeyError, ZeroDivisionError, IndexError) as e:
        raise RecipeError(f"recipe {text!r}: {type(e).__name__}: {e}") from None
    if case is None:
        raise RecipeError(f"recipe {text!r}: {op} has no case for these values")
    return case


def memory_needed(recipe: Recipe, bytes_per_element: int = BYTES_PER_ELEMENT) -> int:
    """Bytes judging the recipe takes (``bytes_per_element`` per element of its inputs, every step; the
    checker says how many for a case it judges in blocks)."""
    return recipe.elements * bytes_per_element * len(recipe.case.steps)


def memory_available() -> int:
    """Bytes of memory available now (MemAvailable of /proc/meminfo; elsewhere the physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def too_big(recipe: Recipe, bytes_per_element: int = BYTES_PER_ELEMENT) -> str | None:
    """Why the recipe cannot be judged here (the memory it needs and what is available), or None."""
    need, have = memory_needed(recipe, bytes_per_element), memory_available()
    if need <= have:
        return None
    return (f"needs ~{need / 2 ** 30:.1f} GiB to judge ({recipe.elements:,} elements x {bytes_per_element} B x "
            f"{len(recipe.case.steps)} step(s)); {have / 2 ** 30:.1f} GiB available here: not attempted")


def materialize(recipe: Recipe) -> GoldenCase:
    """The ``GoldenCase`` of a recipe: inputs, cotangents and initial state drawn (``build.draw``), no
    stored expected values (the judge computes the reference), what to compare from the op's names."""
    case = recipe.case
    spec = registry.get(case.op)
    drawn = _draw(recipe)
    steps = []
    for i, step in enumerate(case.steps):
        kind = step.partition(":")[0]
        outputs = [k for k in spec.produced(case.inputs)
                   if kind != "eval" or case.eval_outputs is None or k in case.eval_outputs]
        grads = [k for k in drawn.inputs[i] if k not in case.ignore_grads] if spec.differentiable else []
        steps.append(GoldenStep(kind == "train", drawn.inputs[i], drawn.cotangents[i], {}, {}, {},
                                {"outputs": tuple(outputs), "grads": tuple(grads),
                                 "state": tuple(spec.state) if case.state else ()}, 0.0))
    why = "; ".join(w for w in (T.REGIMES.get(case.regime, ""), case.why, f"recipe: {recipe.text}") if w)
    return GoldenCase(recipe.id, case.op, case.dtype, case.regime, dict(case.config), drawn.init_state,
                      tuple(steps), why, layout=recipe.layout, expect_error=recipe.expect_error)


def _draw(recipe: Recipe):
    """``build.draw`` with the recipe's seed. Every differentiable output of every op here has its main
    input's shape (add_norm's y, residual_out and y1), so no forward call is needed for the cotangents'
    shapes (an expected-error case could not make one: the reference raises on it)."""
    case = recipe.case
    diff = registry.get(case.op).differentiable          # () for a forward-only op: no cotangents
    # every differentiable output has the main input's shape (add_norm's y, residual_out and y1 too)
    return B.draw(case, seed=recipe.seed, output_shapes={out: case.inputs[MAKERS[case.op][1]] for out in diff})


# ---------------------------------------------------------------------------------------- suites
from .suites import SUITES  # noqa: E402  (the suites are recipes: they need parse above)


def suite(name: str) -> list[tuple[str, str]]:
    """[(recipe, why)] of a named suite (refnorm/golden/suites.py)."""
    if name not in SUITES:
        raise RecipeError(f"unknown suite {name!r}; expected one of: {', '.join(SUITES)}")
    return list(SUITES[name]["recipes"])


def recipes(suites=(), texts=()) -> list[Recipe]:
    """The parsed recipes of the named ``suites`` and of the recipe lines ``texts`` (the command line's
    --suite/--generate, the pytest plugin's); a RecipeError names the first bad one."""
    return [parse(t) for n in suites or () for t, _ in suite(n)] + [parse(t) for t in texts or ()]


def known_ids(recipes=()) -> set:
    """The generated case ids an expected-failures file may name besides the golden set's: every named
    suite's and those of ``recipes`` (a run's own --generate lines, in its layout)."""
    return {parse(t).id for name in SUITES for t, _ in suite(name)} | {r.id for r in recipes}


def with_layout(recipe: Recipe, layout: str) -> Recipe:
    """``recipe`` in another layout, its text saying so (one ``layout=``), so that it reproduces."""
    words = [w for w in recipe.text.split() if not w.startswith("layout=")]
    return dataclasses.replace(recipe, layout=layout, text=" ".join(words + [f"layout={layout}"]))
