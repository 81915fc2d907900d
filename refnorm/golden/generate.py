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
    others   the op's row maker's keywords (refnorm.golden.cases: eps, affine wb|w|b|none, k, groups,
             dim, momentum, ...), values as JSON (1e-5, 32, "onnx") or plain words

The recipe becomes a ``Case`` through the same row makers as the golden table, and its arrays come
from ``build.draw``, so a recipe that names a golden row's parameters regenerates that row's inputs bit
for bit (tests/test_generate.py).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
import zlib

from .. import registry
from ..errors import RefnormError
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
}
COMMON = ("shape", "dtype", "regime", "layout", "seed", "expect")
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


def parse(text: str) -> Recipe:
    """The ``Recipe`` of one line (module docstring); a RecipeError names a bad value and the choices."""
    words = text.split()
    if not words:
        raise RecipeError("empty recipe: expected 'OP shape=AxB [key=value ...]'")
    op, fields = words[0], {}
    if op not in MAKERS:
        known = "" if op in registry.names() else "unknown op; "
        raise RecipeError(f"recipe {text!r}: {known}{op!r} cannot be generated; expected one of: {', '.join(MAKERS)}")
    make, _, fixed = MAKERS[op]
    params = [p for p in inspect.signature(make).parameters if p not in ("regime", "dtype", "shape", "why", "tag")]
    for w in words[1:]:
        k, eq, v = w.partition("=")
        if not eq or not k or not v:
            raise RecipeError(f"recipe {text!r}: {w!r} is not KEY=VALUE")
        if k not in COMMON and k not in params:
            raise RecipeError(f"recipe {text!r}: unknown key {k!r}; expected one of: {', '.join(COMMON + tuple(params))}")
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
    kw = {k: _value(v) for k, v in fields.items()}
    if "affine" in kw:
        if kw["affine"] not in AFFINE:
            raise RecipeError(f"recipe {text!r}: affine={kw['affine']!r}; expected one of: {', '.join(AFFINE)}")
        kw["affine"] = AFFINE[kw["affine"]]
    if op == "group_norm" and "groups" not in kw:
        raise RecipeError(f"recipe {text!r}: group_norm needs groups=G")
    try:
        case = make(regime, dtype, shape, **fixed, **kw)
    except (TypeError, ValueError, KeyError, ZeroDivisionError, IndexError) as e:
        raise RecipeError(f"recipe {text!r}: {type(e).__name__}: {e}") from None
    if case is None:
        raise RecipeError(f"recipe {text!r}: {op} has no case for these values")
    try:
        seed = zlib.crc32(("gen:" + " ".join(sorted(words))).encode()) if seed_text is None else int(seed_text)
    except ValueError:
        raise RecipeError(f"recipe {text!r}: seed={seed_text!r} is not an integer") from None
    if not 0 <= seed < 2 ** 63:
        raise RecipeError(f"recipe {text!r}: seed={seed} out of range [0, 2^63)")
    try:
        L.check(layout, case.inputs[MAKERS[op][1]], f"recipe {text!r}")
    except RefnormError as e:
        raise RecipeError(str(e)) from None
    return Recipe(text, case, layout, seed, expect == "error")


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


def with_layout(recipe: Recipe, layout: str) -> Recipe:
    """``recipe`` in another layout, its text saying so (one ``layout=``), so that it reproduces."""
    words = [w for w in recipe.text.split() if not w.startswith("layout=")]
    return dataclasses.replace(recipe, layout=layout, text=" ".join(words + [f"layout={layout}"]))
