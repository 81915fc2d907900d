"""Issue 17: the specification of every normalizer (refnorm/specs/) is the definition; the fast path
(refnorm/norms/) is tested against it on every golden case and on hypothesis inputs, bit for bit
except the arrays a specification's AGREEMENT lists (summed in another order; its docstring says why)."""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings

import refnorm
from refnorm.golden.commands import load_case

from helpers import sample

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
with open(os.path.join(GOLDEN, "MANIFEST.json")) as _f:
    MANIFEST = json.load(_f)
EPS64 = 2.0 ** -52


def _spec(name):
    return importlib.import_module(f"refnorm.specs.{name}")


def _has_spec(name):
    return importlib.util.find_spec(f"refnorm.specs.{name}") is not None


def agree(fast, spec, k, what):
    """k == 0: the same bits (NaN where NaN, the sign of zeros too); else within k * 2^-52 * max|fast|."""
    fast, spec = np.asarray(fast), np.asarray(spec)
    assert fast.shape == spec.shape and fast.dtype == spec.dtype, (what, fast.shape, spec.shape)
    if fast.dtype.kind in "iu":
        assert np.array_equal(fast, spec), what
        return
    assert np.array_equal(np.isnan(fast), np.isnan(spec)), f"{what}: NaN in different places"
    if k == 0:
        same = (fast == spec) | (np.isnan(fast) & np.isnan(spec))
        assert same.all() and np.array_equal(np.signbit(fast), np.signbit(spec)), \
            f"{what}: not the same bits ({int((~same).sum())} elements differ, max |diff| " \
            f"{float(np.nanmax(np.abs(fast - spec), initial=0)):.3g})"
        return
    fin = np.isfinite(fast)
    assert np.array_equal(fin, np.isfinite(spec)) and np.array_equal(fast[~fin & ~np.isnan(fast)],
                                                                     spec[~fin & ~np.isnan(spec)]), what
    scale = float(np.max(np.abs(fast[fin]), initial=0.0))
    diff = float(np.max(np.abs(fast[fin] - spec[fin]), initial=0.0))
    assert diff <= k * EPS64 * scale, f"{what}: differs by {diff / (EPS64 * scale) if scale else diff:.3g} " \
                                      f"units of 2^-52 max|x| (AGREEMENT allows {k})"


def compare_engines(op, inputs, config, cotangents, state, training, what):
    """Run ``op`` with both engines on one call and compare every array to the spec's AGREEMENT."""
    kw = dict(config=config, grad_outputs=cotangents or None, state=state, training=training)
    fast = refnorm.evaluate(op, inputs, **kw)
    spec = refnorm.evaluate(op, inputs, engine="spec", **kw)
    allowed = _spec(op).AGREEMENT
    for part in ("outputs", "grads", "state"):
        f, s = getattr(fast, part), getattr(spec, part)
        assert set(f) == set(s), (what, part, sorted(f), sorted(s))
        for k in f:
            agree(f[k], s[k], allowed.get(k, 0), f"{what}: {part} {k}")
    return fast, spec


def test_every_normalizer_has_a_specification():
    missing = [n for n in refnorm.names() if not _has_spec(n)]
    assert not missing, f"no specification in refnorm/specs/ for {missing}"


CASES = [e["id"] for e in MANIFEST["cases"] if _has_spec(e["case"]["op"])]


def _reproduces_stored(cid, st, res):
    """The specification's result of a golden step equals its stored expected values within the golden
    tolerance (VERIFY_RTOL * (1 + cond) of each array's scale)."""
    from refnorm.golden.commands import VERIFY_RTOL
    for part in ("outputs", "grads", "state"):
        for k, want in getattr(st, part).items():
            got = np.asarray(getattr(res, part)[k], dtype=np.float64)
            want = np.asarray(want, dtype=np.float64)
            fin = np.isfinite(want)
            scale = float(np.max(np.abs(want[fin]), initial=0.0))
            assert np.array_equal(np.isnan(got), np.isnan(want)), (cid, part, k)
            with np.errstate(invalid="ignore"):
                assert float(np.max(np.abs(got[fin] - want[fin]), initial=0.0)) <= \
                    VERIFY_RTOL * (1 + st.cond) * scale, (cid, part, k)


@pytest.mark.parametrize("op", sorted({e["case"]["op"] for e in MANIFEST["cases"]}))
def test_fast_path_agrees_with_the_specification_on_every_golden_case(op):
    """Every step of every golden case of ``op`` (every 4th case in the quick profile): the fast path agrees
    with the specification, and any golden value can be reproduced with the plain code: step 0, with
    engine="spec", equals the stored expected values within the golden tolerance (the step starts from the
    case's own initial state; later steps start from the fast path's state)."""
    ids = sample([c for c in CASES if c.startswith(op + "/")], 4)      # every case in the thorough profile
    if not _has_spec(op):
        pytest.fail(f"{op} has no specification")
    for cid in ids:
        case = load_case(GOLDEN, cid)
        state = dict(case.init_state)
        for i, st in enumerate(case.steps):
            fast, spec = compare_engines(op, st.inputs, case.config, st.cotangents, state, st.training,
                                         f"{cid} step {i}")
            if i == 0:
                _reproduces_stored(cid, st, spec)
            state = dict(fast.state)


@pytest.mark.parametrize("op", [n for n in refnorm.names() if _has_spec(n)])
def test_fast_path_agrees_with_the_specification_on_hypothesis_inputs(op):
    from refnorm.strategies import inputs

    @settings(max_examples=25, deadline=None)
    @given(inputs(op))
    def check(d):
        compare_engines(op, d["inputs"], d["config"], d["cotangents"], d["state"], d["training"], op)
    check()


def test_engine_argument_is_checked():
    with pytest.raises(refnorm.UnknownNameError, match="engine 'slow'"):
        refnorm.evaluate("layer_norm", {"x": np.ones((2, 3))}, config={"normalized_shape": [3]}, engine="slow")
    with pytest.raises(refnorm.RefnormError, match="normalized_shape"):      # the same validation
        refnorm.evaluate("layer_norm", {"x": np.ones((2, 3))}, config={"normalized_shape": [4]}, engine="spec")


# ------------------------------------------------------------------------ the reader's test
READABLE = ("layer_norm", "rms_norm", "batch_norm", "group_norm")
SCREEN = 60          # lines of code (docstrings and blank lines left out) of the readable functions


def _code_lines(fn):
    src = inspect.getsource(fn)
    tree = ast.parse(src)
    doc = ast.get_docstring(tree.body[0]) or ""
    lines = [ln for ln in src.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return len(lines) - (len(doc.splitlines()) if doc else 0)


@pytest.mark.parametrize("op", READABLE)
def test_a_specification_fits_on_one_screen_and_uses_only_numpy_and_the_math_helpers(op):
    if not _has_spec(op):
        pytest.fail(f"{op} has no specification")
    mod = _spec(op)
    fns = [getattr(mod, op), getattr(mod, f"{op}_backward")]
    n = sum(_code_lines(f) for f in fns)
    assert n <= SCREEN, f"{op}: forward + backward are {n} lines of code"
    allowed = {"__future__", "numpy", "refnorm.specs._math", "refnorm.spec"}
    tree = ast.parse(inspect.getsource(mod))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = importlib.util.resolve_name("." * node.level + (node.module or ""), mod.__package__)
            ok = target in allowed or (target.startswith("refnorm.norms.") and
                                       {a.name for a in node.names} <= {"check", "check_eps", "check_param"})
            assert ok, f"{op}: imports {target} ({[a.name for a in node.names]})"
        elif isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= {"numpy", "math"}, f"{op}: imports {[a.name for a in node.names]}"
