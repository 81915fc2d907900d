"""The diagnosis's cost-saving paths change no diagnosis (issue 33: the diagnosis of a failing 4096x4096 case
costs at most 2x its judgement; benchmarks/diagnosis.py measures it).

Each shortcut is compared with the computation it replaces, figure for figure:
* layer_norm / rms_norm dweight taken a block of rows at a time (pitfalls._engine._pw_sums) equals
  param_sum's sum of the whole terms, bit for bit, and every engine variant's params_only result equals its
  full result on the arrays both hold;
* with every shortcut on (the memo and its waiting threads, the block sums in small blocks, the screen of
  localize.missing_rows, the check's own judgement of an array a variant leaves as the reference computes
  it, and a variant changing the parameter gradients alone computed for those alone), the diagnosis of screened cases (SCREEN_MIN forced, so the survivors' path runs)
  equals the one computed with every shortcut off.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys

import numpy as np
import pytest

from refnorm import _memo, pitfalls
from refnorm.check import diagnosis, localize
from refnorm.check.core import check_case
from refnorm.golden import commands, store
from refnorm.pitfalls import _engine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _bits(a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a.view(np.int64)


@pytest.mark.parametrize("m,n", [(1, 2), (3, 2), (260, 3), (1000, 5), (33, 64), (513, 1025), (5000, 17)])
def test_block_sums_equal_the_whole_sum_bit_for_bit(m, n, monkeypatch):
    rng = np.random.default_rng(m * 7 + n)
    x = rng.standard_normal((m, n)) * 300.0 + 1e4
    dy = rng.standard_normal((m, n))
    mean = x.mean(axis=1, keepdims=True)
    r = 1.0 / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    whole = _engine.param_sum(_engine.Mods(), dy * ((x - mean) * r), (1,), (n,), "float32", is_weight=True)
    for block in (1 << 19, 7, n, 3 * n + 1):
        monkeypatch.setattr(_engine, "_BLOCK", block)
        assert np.array_equal(_bits(_engine._pw_sums(x, mean, r, dy)), _bits(whole)), block


@pytest.mark.parametrize("op,shape,ns", [("layer_norm", (37, 16), 16), ("layer_norm", (3, 5, 12), (12,)),
                                         ("rms_norm", (37, 16), 16), ("rms_norm", (2, 3, 4, 6), (4, 6))])
def test_params_only_equals_the_full_evaluation(op, shape, ns, monkeypatch):
    """Every engine variant's statistics and parameter gradients are the same numbers whether computed
    alone (the diagnosis's params_only, block sums in blocks of a few rows) or with y and dx."""
    monkeypatch.setattr(_engine, "_BLOCK", 40)
    rng = np.random.default_rng(3)
    n = int(np.prod(np.atleast_1d(ns)))
    inputs = {"x": (rng.standard_normal(shape) * 4 + 100).astype(np.float32).astype(np.float64),
              "weight": rng.standard_normal(np.atleast_1d(ns)), "bias": rng.standard_normal(np.atleast_1d(ns))}
    if op == "rms_norm":
        inputs.pop("bias")
    cot = {"y": rng.standard_normal(shape)}
    config = {"normalized_shape": ns, "eps": 1e-5}
    checked = 0
    for scope in (_memo.scope, contextlib.nullcontext):
        for v in pitfalls.variants(op):
            if v.fn is not None or not v.applies(config, True, inputs, {}, cot, "float32"):
                continue
            with scope(), np.errstate(all="ignore"):
                full = v.evaluate(inputs, config, {}, True, cot, "float32")
                alone = v.evaluate(inputs, config, {}, True, cot, "float32", params_only=True)
            for part in ("outputs", "grads"):
                for name, a in getattr(alone, part).items():
                    assert np.array_equal(_bits(a), _bits(getattr(full, part)[name])), (v.id, part, name)
                    checked += 1
    assert checked > 40


def _evaluations(block, monkeypatch):
    """Every engine variant of the five row normalizers, full and params_only, training and eval, with
    the diagnosis's memo on and off, as bytes (blocks of ``block`` elements)."""
    monkeypatch.setattr(_engine, "_BLOCK", block)
    rng = np.random.default_rng(5)
    cases = {"layer_norm": ((37, 16), {"normalized_shape": 16, "eps": 1e-5}),
             "rms_norm": ((37, 16), {"normalized_shape": 16, "eps": 1e-5}),
             "group_norm": ((2, 8, 5), {"num_groups": 4, "eps": 1e-5}),
             "batch_norm": ((6, 4, 3), {"eps": 1e-5, "momentum": 0.1}),
             "instance_norm": ((2, 4, 9), {"eps": 1e-5})}
    out = {}
    for op, (shape, cfg) in cases.items():
        x = rng.standard_normal(shape) * 3 + 50
        C = shape[-1] if op in ("layer_norm", "rms_norm") else shape[1]
        ins = {"x": x, "weight": rng.standard_normal(C), "bias": rng.standard_normal(C)}
        if op == "rms_norm":
            ins.pop("bias")
        cot = {"y": rng.standard_normal(shape)}
        state = {"running_mean": np.zeros(C), "running_var": np.ones(C)} if op in ("batch_norm", "instance_norm") \
            else {}
        for v in pitfalls.variants(op):
            for scope in (_memo.scope, contextlib.nullcontext):
                for po in (False, True):
                    for tr in (True, False):
                        with scope(), np.errstate(all="ignore"):
                            res = v.evaluate(ins, cfg, state, tr, cot, "float32", params_only=po)
                        out[(op, v.id, scope is _memo.scope, po, tr)] = {
                            p: {k: np.asarray(a).tobytes() for k, a in getattr(res, p).items()}
                            for p in ("outputs", "grads", "state")}
    return out


def test_the_engine_gives_the_same_numbers_in_any_block(monkeypatch):
    """The row sums and temporaries taken a block of rows at a time (_engine._BLOCK) give every variant's
    every array bit for bit as in one block (a block boundary changes no summation order)."""
    whole = _evaluations(1 << 30, monkeypatch)
    assert len(whole) > 500
    assert _evaluations(40, monkeypatch) == whole


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_one_pass_statistics_in_blocks_equal_the_plain_sums(dtype, monkeypatch):
    from refnorm.pitfalls import _centered
    from refnorm.pitfalls._engine import in_w, sum_w, working
    rng = np.random.default_rng(11)
    for m, n in ((1, 1), (3, 2), (260, 3), (64, 1000), (7, 70000), (0, 5)):
        x = (rng.standard_normal((m, n)) * 3 + 1e3).astype(np.float32).astype(np.float64)
        W = working(dtype)
        xw, nW = in_w(x, dtype), W(max(n, 1))
        with np.errstate(all="ignore"):
            mean = sum_w(xw, dtype) / nW
            var = sum_w(xw * xw, dtype) / nW - mean * mean
        for block in (1 << 19, 7, 3 * n + 1):
            monkeypatch.setattr(_engine, "_BLOCK", block)
            a, b = _centered._one_pass_w(x, dtype)
            assert a.dtype == mean.dtype and np.array_equal(a.view(np.uint8), mean.view(np.uint8)), (m, n, block)
            assert np.array_equal(b.view(np.uint8), var.view(np.uint8)), (m, n, block)


def _load(ids):
    man = store.read_manifest(GOLDEN)
    return [commands.load_case(GOLDEN, i, manifest=man) for i in ids]


@pytest.mark.parametrize("bug,cases", [
    ("ln_dw_sum_dy", ["layer_norm/normal_f32_260x3", "layer_norm/mean1e4_f32_260x3"]),
    ("ln_one_pass", ["layer_norm/mean1e4_f32_260x3", "layer_norm/mean1e3_f32_6x100"]),
    ("ln_no_mean_g", ["layer_norm/normal_f32_260x3"]),
    ("rms_dw_rows_half", ["rms_norm/normal_eps1e-05_f32_260x3", "rms_norm/mean1e4_eps1e-05_f32_260x3"]),
])
def test_the_shortcuts_change_no_diagnosis(bug, cases, monkeypatch):
    pytest.importorskip("torch")
    from planted.torch_kernel import TorchKernel
    loaded = _load(cases)
    monkeypatch.setattr(diagnosis, "SCREEN_MIN", 1)          # the screened path, with its survivors
    monkeypatch.setattr(diagnosis, "SCREEN_ROWS", 8)
    monkeypatch.setattr(_engine, "_BLOCK", 16)               # block sums over several blocks
    fast = [check_case(TorchKernel(bug), c).diagnosis for c in loaded]
    monkeypatch.setattr(_memo, "scope", contextlib.nullcontext)
    monkeypatch.setattr(_engine, "_fused", lambda *a: False)
    monkeypatch.setattr(localize, "_SCREEN", 0.0)           # every missing-rows candidate summed and measured
    monkeypatch.setattr(diagnosis, "_as_judged", lambda *a: {})     # every array a variant leaves judged again
    monkeypatch.setattr(pitfalls.Variant, "params_change_only", property(lambda v: False))    # and computed
    plain = [check_case(TorchKernel(bug), c).diagnosis for c in loaded]
    assert all(d is not None and "error" not in d for d in plain), plain
    assert any(d["matched"] or d.get("explained_by") for d in plain), plain
    assert _same(fast, plain), (fast, plain)


def _same(a, b, rel=1e-6):
    """Equal, numbers within ``rel`` (relative): the check's own figures of an array a variant leaves as the
    reference computes it are those of the reference's values, which the variant's own summation order moves
    by float64 rounding (diagnosis._as_judged); every name, verdict and text is equal."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k], rel) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, str) and isinstance(b, str) and a != b:    # a message quoting figures (3 digits)
        return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", a) == re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", b)
    return a == b


def test_array_scale_in_blocks_is_the_plain_maximum(monkeypatch):
    """judge.array_scale, taken a block at a time, is max |ref| over the finite elements (0 when none)."""
    from refnorm.check import judge
    rng = np.random.default_rng(4)
    arrays = [np.zeros(0), rng.standard_normal((300, 70)) * 1e3, np.full((40, 3), np.inf),
              rng.standard_normal((50, 40))[:, ::3]]
    arrays[1][5, 7] = np.nan
    arrays[1][9, 1] = -np.inf
    arrays[1][2, 2] = -5e4
    want = [0.0, 5e4, 0.0, float(np.max(np.abs(arrays[3])))]
    for block in (1 << 18, 7, 1000):
        monkeypatch.setattr(judge, "SCALE_BLOCK", block)
        assert [judge.array_scale(a) for a in arrays] == want, block


def test_arrays_a_variant_leaves_are_taken_as_the_check_judged_them(monkeypatch):
    """diagnosis._as_judged: the arrays a variant computes as the reference does (dweight_from_dy's y, dx and
    dbias) are the check's own judgement, copied; the array it changes (dweight) is not; nor is one the check
    judged otherwise (a note: at the backend's saved statistics), nor anything of a record without its own
    judgement."""
    pytest.importorskip("torch")
    from planted.torch_kernel import TorchKernel
    seen = []
    original = diagnosis.diagnose
    monkeypatch.setattr(diagnosis, "diagnose", lambda case, records, *a, **k: seen.append((case, records))
                        or original(case, records, *a, **k))
    case = _load(["layer_norm/normal_f32_260x3"])[0]
    assert check_case(TorchKernel("ln_dw_sum_dy"), case).status == "failed"
    (c, records), = seen
    r = next(r for r in records if r.failing)
    v = next(v for v in pitfalls.variants("layer_norm") if v.id == "dweight_from_dy")
    ins, st, cot = diagnosis._args(r)
    res = v.evaluate(ins, c.config, st, r.training, cot, c.dtype)
    compare = {p: [k for k in r.compare[p] if k in r.got[p]] for p in ("outputs", "grads", "state")}
    taken = diagnosis._as_judged(r, res, compare)
    assert {("outputs", "y"), ("grads", "x"), ("grads", "bias")} <= set(taken) and ("grads", "weight") not in taken
    for key, a in taken.items():
        assert a is not r.judged[key] and a == r.judged[key]
    r.judged[("grads", "x")].note = "judged at the backend's saved statistics"
    assert ("grads", "x") not in diagnosis._as_judged(r, res, compare)
    r.judged = None
    assert diagnosis._as_judged(r, res, compare) == {}


@pytest.mark.parametrize("op", sorted(pitfalls.PARAMS_ONLY))
def test_a_params_change_leaves_everything_else_bit_for_bit(op):
    """pitfalls.Variant.params_change_only: such a variant's statistics, y and dx are the unchanged engine's,
    bit for bit (the diagnosis takes the reference's there: diagnosis._judge_variant)."""
    rng = np.random.default_rng(5)
    inputs = {"x": (rng.standard_normal((37, 24)) * 3 + 50).astype(np.float32).astype(np.float64),
              "weight": rng.standard_normal(24)}
    if op == "layer_norm":
        inputs["bias"] = rng.standard_normal(24)
    config = {"normalized_shape": 24, "eps": 1e-5}
    cot = {"y": rng.standard_normal((37, 24))}
    base = pitfalls.reference(op, inputs, config, {}, True, cot, "float32")
    left = [v for v in pitfalls.variants(op) if v.params_change_only]
    assert left
    for v in left:
        res = v.evaluate(inputs, config, {}, True, cot, "float32")
        for part in ("outputs", "grads"):
            for k, a in getattr(base, part).items():
                if (part, k) not in {("grads", "weight"), ("grads", "bias")}:
                    assert np.array_equal(_bits(getattr(res, part)[k]), _bits(a)), (v.id, part, k)
        assert not np.array_equal(res.grads["weight"], base.grads["weight"]) or v.id != "dweight_from_dy"
