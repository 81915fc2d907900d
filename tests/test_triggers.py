"""Issue 35, section 2: golden triggers the set lacked, each shown to catch the kernel it is for (planted in the
emulated kernel of tests/planted/emulated.py) while the correct emulated kernel passes it.

The cases are built from the golden table (refnorm/golden/cases.py) into a scratch directory, so these tests
do not depend on the stored golden set being rebuilt; removing a trigger from the table fails them (KeyError).

* float16 rows whose var + eps lies below float16's smallest normal: rsqrt(half(var + eps)) (var_eps_in_d);
* norm_quant's scale floor (min_scale): vLLM's fused int8 floor FLT_EPSILON, its unfused no floor (0), and
  refnorm's default 1/(qmax*512), on all-zero and tiny rows;
* norm_quant's exact ties: round half to even enforced where every float32 kernel computes the tie exactly,
  never where the value before the quantizer is inexact (no false alarm);
* distributed cases: float16 and bfloat16 for every parallel kind and split, and batch_norm/rms_norm/layer_norm
  options (their runs: tests/test_distributed.py).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import refnorm
from planted import report
from refnorm.check.bounds import norm_quant as BQ
from refnorm.check.core import _judge_quantized
from refnorm.check.precision import quant_excess
from refnorm.golden import cases as T
from refnorm.golden import commands
from refnorm.golden import distributed as D

F16_SUBNORMAL = {  # case id -> op
    "layer_norm/std1e-4_eps1e-12_f16_6x100": "layer_norm",
    "layer_norm/std1e-3_eps1e-12_f16_4x128": "layer_norm",
    "rms_norm/std1e-4_eps1e-12_f16_6x100": "rms_norm",
    "rms_norm/std1e-4_f16_4x128": "rms_norm",
    "group_norm/std1e-4_eps1e-12_g4_f16_2x8x5x7": "group_norm",
    "batch_norm/std1e-4_eps1e-12_f16_6x4x25": "batch_norm",
    "instance_norm/std1e-4_eps1e-12_f16_2x3x100": "instance_norm",
}
FLOOR_FUSED = ("norm_quant/zero_rms_i8_dyn_floor1.1920928955078125e-07_f32_2x64",
               "norm_quant/std1e-6_rms_i8_dyn_floor1.1920928955078125e-07_bf16_4x256")
FLOOR_NONE = ("norm_quant/zero_rms_i8_dyn_nofloor_f32_2x64", "norm_quant/std1e-6_rms_i8_dyn_nofloor_f16_4x256")
FLOOR_DEFAULT = ("norm_quant/zero_rms_i8_dyn_bf16_2x64",)
TIES = ("norm_quant/pm1_eps0_rms_i8_static_ties_f32_4x64", "norm_quant/pm1_eps0_rms_i8_static_ties_bf16_4x64",
        "norm_quant/pm1_eps0_rms_e4m3_static_ties_f16_4x64", "norm_quant/pm1_eps0_rms_e4m3_static_ties_f16_3x48")
NEW = tuple(F16_SUBNORMAL) + FLOOR_FUSED + FLOOR_NONE + FLOOR_DEFAULT + TIES


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """The new cases, built from the table into a scratch golden directory (never golden/)."""
    table = T.by_id()
    d = str(tmp_path_factory.mktemp("triggers") / "golden")
    commands.build(d, cases=[table[i] for i in NEW])
    return d


def _outcomes(golden, mutation, op):
    return {c.id: c for c in report.run(mutation, op, golden).cases}


# ------------------------------------------------------------------ 1. var + eps below float16's normal range
def test_the_subnormal_cases_are_float16_with_var_plus_eps_below_the_smallest_normal():
    table = T.by_id()
    assert {table[i].op for i in F16_SUBNORMAL} == {"layer_norm", "rms_norm", "group_norm", "batch_norm",
                                                    "instance_norm"}
    tiny = float(np.finfo(np.float16).tiny)
    for i in F16_SUBNORMAL:
        c = table[i]
        assert c.dtype == "float16" and c.regime in ("std1e-4", "std1e-3"), i
        eps = c.config.get("eps") or 0.0
        assert (1e-4 if c.regime == "std1e-4" else 1e-3) ** 2 * 4 + eps < tiny, i     # var + eps, 2 sigma


@pytest.mark.parametrize("op", sorted(set(F16_SUBNORMAL.values())))
def test_rsqrt_of_var_plus_eps_rounded_to_float16_fails_and_the_correct_kernel_passes(golden, op):
    good, bad = _outcomes(golden, None, op), _outcomes(golden, "var_eps_in_d", op)
    for i in (i for i, o in F16_SUBNORMAL.items() if o == op):
        assert good[i].status == "passed", (i, good[i].message)
        assert bad[i].status == "failed" and "y" in bad[i].over, (i, bad[i].status, bad[i].message[:200])


def test_the_planted_kernel_declares_stats_d_and_is_not_caught_on_normal_float16_rows(golden):
    """The trigger is the subnormal range: on a normal float16 row rounding var + eps to float16 is within the
    stats_d contract the kernel declares (so the new cases, not the normal ones, are what catches it)."""
    from planted.emulated import EmulatedBackend
    from refnorm.check import check_case
    case = T.layer_norm("normal", "float16", (6, 100), eps=1e-12)
    import os
    d = os.path.join(os.path.dirname(golden), "normal_rows")
    commands.build(d, cases=[case])
    r = check_case(EmulatedBackend("var_eps_in_d"), commands.load_case(d, case.id))
    assert r.status == "passed", r.message


# ------------------------------------------------------------------ 3. the scale floor (min_scale)
def test_min_scale_zero_is_no_floor_and_a_zero_row_quantizes_to_zero():
    x = np.zeros((2, 8))
    x[1] = np.linspace(-1e-9, 1e-9, 8)
    r = refnorm.evaluate("norm_quant", {"x": x}, config={"normalized_shape": [8], "quant_dtype": "int8",
                                                         "min_scale": 0})
    assert r.outputs["scale"][0, 0] == 0.0 and (r.outputs["q"][0] == 0).all()
    assert r.outputs["scale"][1, 0] == r.outputs["amax"][1, 0] / 127 > 0       # a tiny row keeps amax / 127
    assert np.abs(r.outputs["q"][1]).max() == 127.0
    r = refnorm.evaluate("norm_quant", {"x": x}, config={"normalized_shape": [8], "quant_dtype": "int8",
                                                         "min_scale": 2.0 ** -23})
    assert r.outputs["scale"][0, 0] == 2.0 ** -23


def test_the_floor_cases_run_the_floors_users_run():
    table = T.by_id()
    assert all(table[i].config["min_scale"] == 2.0 ** -23 for i in FLOOR_FUSED)
    assert all(table[i].config["min_scale"] == 0 for i in FLOOR_NONE)
    assert all("min_scale" not in table[i].config and table[i].config["quant_dtype"] == "int8" for i in FLOOR_DEFAULT)
    assert {table[i].regime for i in FLOOR_FUSED + FLOOR_NONE} == {"zero", "std1e-6"}


def test_a_kernel_with_another_floor_fails_the_floor_cases(golden):
    good = _outcomes(golden, None, "norm_quant")
    assert all(good[i].status == "passed" for i in NEW if i in good), [(i, good[i].message) for i in good]
    default = _outcomes(golden, "q_floor_default", "norm_quant")      # refnorm's floor where another is asked
    assert all(default[i].status == "failed" and "scale" in default[i].over for i in FLOOR_FUSED + FLOOR_NONE)
    assert default[FLOOR_DEFAULT[0]].status == "passed"
    fused = _outcomes(golden, "q_floor_flt_eps", "norm_quant")         # vLLM's fused int8 floor everywhere
    assert all(fused[i].status == "passed" for i in FLOOR_FUSED)
    assert fused[FLOOR_NONE[0]].status == "failed" and fused[FLOOR_DEFAULT[0]].status == "failed"


def test_a_recipe_sets_the_floor():
    from refnorm.golden import generate as G
    r = G.parse("norm_quant shape=4x64 quant_dtype=int8 regime=zero min_scale=0")
    assert r.case.config["min_scale"] == 0 and r.id == "norm_quant/gen_zero_rms_i8_dyn_nofloor_f32_4x64"
    with pytest.raises(G.RecipeError, match="min_scale=-1; expected a finite number >= 0, or null"):
        G.parse("norm_quant shape=4x64 min_scale=-1")


# ------------------------------------------------------------------ 2. exact ties
def test_an_odd_value_does_not_own_the_ties_that_bound_it():
    got = np.array([2, 3, 3, 127, -3, 4], dtype=np.int8)
    ref = np.array([2.5, 2.5, 3.5, 126.5, -2.5, 3.5])
    ex = quant_excess(got, ref)
    assert ex[0] == 0 and ex[5] == 0                                     # 2.5 -> 2, 3.5 -> 4: the even ones
    assert (ex[[1, 2, 3, 4]] > 0).all() and (ex[[1, 2, 3, 4]] < 1e-13).all()


@pytest.mark.parametrize("E,passes_away", [(0.0, False), (1e-6, True)])
def test_a_tie_rounded_away_fails_only_under_a_bound_of_zero(E, passes_away):
    ref = np.array([2.5, -1.5, 0.5, 3.5])
    even = np.array([2, -2, 0, 4], dtype=np.int8)
    away = np.array([3, -2, 1, 4], dtype=np.int8)
    assert _judge_quantized(0, "outputs", "q", even, ref, E, "int8").ratio == 0
    r = _judge_quantized(0, "outputs", "q", away, ref, E, "int8")
    assert (r.ratio <= 1) == passes_away, r.ratio
    e4m3 = ml_dtypes.float8_e4m3fn                                       # 9.5 lies between 9 (odd) and 10
    assert _judge_quantized(0, "outputs", "q", np.array([10.0, 8.0]).astype(e4m3), np.array([9.5, 8.5]), E,
                            "float8_e4m3fn").ratio == 0
    r = _judge_quantized(0, "outputs", "q", np.array([9.0, 9.0]).astype(e4m3), np.array([9.5, 8.5]), E,
                         "float8_e4m3fn")
    assert (r.ratio <= 1) == passes_away, r.ratio


def _bound(x, w, s, eps=0.0, norm="rms_norm", contract="strict", dtype="float32"):
    cfg = {"normalized_shape": [x.shape[-1]], "norm": norm, "eps": eps, "quant_dtype": "int8"}
    inputs = {"x": x, "weight": w, "static_scale": None if s is None else np.array([s])}
    return BQ.bound(inputs, cfg, False, None, 2.0 ** -24, "block", contract, dtype)[0]["q"]


def test_the_bound_is_zero_only_where_every_float32_kernel_computes_the_value_exactly():
    rng = np.random.default_rng(0)
    x = np.where(rng.random((3, 16)) < 0.5, -1.0, 1.0)
    w = (rng.integers(-30, 30, 16) + 0.5) / 8
    assert (_bound(x, w, 0.125) == 0).all()                             # the ties cases' rows
    assert (_bound(x, w, 0.125, contract="epi_d", dtype="bfloat16") == 0).all()
    # no false alarm where the value before the quantizer is not exact in every kernel: a bound > 0 there
    assert (_bound(x, w, 0.125, eps=1e-5) > 0).all()                    # rsqrt(1 + 1e-5) is inexact
    assert (_bound(x, w, 0.1) > 0).all()                                # 0.1: not a float32 number
    assert (_bound(x, w, float(np.float32(0.1))) > 0).all()             # 1 / fl32(0.1) is inexact
    assert (_bound(x, w, 0.375) > 0).all()                              # 1 / 0.375 is inexact
    assert (_bound(x, w, None) > 0).all()                               # a dynamic scale, amax / 127
    assert (_bound(x * 3.0, w, 0.125) > 0).all()                        # rstd = 1/3
    assert (_bound(x, w, 0.125, norm="layer_norm") > 0).all()           # Welford's running mean / k
    big = x.copy()
    big[0, 0] = 2.0 ** 13                                               # partial sums of squares need 27 bits
    assert (_bound(big, w, 0.125)[0] > 0).all() and (_bound(big, w, 0.125)[1:] == 0).all()


def test_round_half_away_fails_the_ties_cases_and_round_half_even_passes(golden):
    good = _outcomes(golden, None, "norm_quant")
    away = _outcomes(golden, "q_ties_away", "norm_quant")
    for i in TIES:
        assert good[i].status == "passed" and good[i].ratio == 0, (i, good[i].message)
    for i in TIES[:2]:                                                   # int8: the mutation rounds half away
        assert away[i].status == "failed" and away[i].over == ["q"], (i, away[i].message)


class _Float8TiesAway:
    """The correct emulated kernel with its float8 codes rounded half away from zero at the exact ties of the
    ties cases (pm1 rows, eps 0, rms_norm: rstd = 1, so the quotient is x * weight / static_scale exactly)."""
    def __init__(self):
        from planted.emulated import EmulatedBackend
        self.k, self.name, self.changed = EmulatedBackend(None), "float8_ties_away", 0

    def __getattr__(self, name):
        return getattr(self.k, name)

    def run(self, call):
        from refnorm.check.backends.base import Returned
        r = self.k.run(call)
        f = lambda n: np.asarray(call.inputs[n], dtype=np.float64)              # noqa: E731
        v = f("x") * f("weight") / float(f("static_scale").reshape(()))
        dt = np.asarray(r.outputs["q"]).dtype
        grid = np.unique(np.arange(256, dtype=np.uint8).view(dt).astype(np.float64))
        grid = grid[np.isfinite(grid) & (grid >= 0)]
        i = np.clip(np.searchsorted(grid, np.abs(v)), 1, grid.size - 1)
        lo, hi = grid[i - 1], grid[i]
        tie = np.abs(v) - lo == hi - np.abs(v)
        q = np.asarray(r.outputs["q"]).astype(np.float64)
        away = np.where(tie, np.sign(v) * hi, q)
        self.changed += int(np.sum(away != q))
        return Returned({**r.outputs, "q": away.astype(dt)}, r.grads, r.state)


def test_float8_round_half_away_fails_the_64_column_ties_case_only(golden):
    """e4m3fn ties (8 <= |q| < 16) rounded half away from zero: caught where every float32 kernel computes the tie
    exactly (64 columns); at 48 columns (1/48 inexact) the bound is not 0 and the case does not claim the rule."""
    from refnorm.check.core import run_check
    k = _Float8TiesAway()
    res = {c.id: c for c in run_check(k, golden, case_ids=list(TIES[2:]), diagnose=False).cases}
    assert k.changed > 0                                                # the ties were there and moved
    assert res[TIES[2]].status == "failed" and res[TIES[2]].failing_arrays() == ["output.q"], res[TIES[2]].message
    assert res[TIES[3]].status == "passed", res[TIES[3]].message
    assert "neither rounding of a tie is enforced" in T.by_id()[TIES[3]].why


def test_the_ties_cases_are_all_ties_in_int8():
    from refnorm.golden import build as B
    case = T.by_id()[TIES[0]]
    drawn = B.draw(case)
    r = refnorm.evaluate("norm_quant", {k: v.astype(np.float64) for k, v in drawn.inputs[0].items()},
                         config=dict(case.config))
    q = r.outputs["q"]
    assert (np.abs(q - np.floor(q)) == 0.5).all() and np.abs(q).max() < 30


# ------------------------------------------------------------------ 4. distributed cases
def test_distributed_cases_cover_16_bit_for_every_parallel_kind_and_split():
    have = {(d.parallel, d.split, d.recipe.case.dtype, d.op) for d in D.cases()}
    for parallel, ops in D.PARALLEL.items():
        for split in D.SPLITS:
            for dtype in ("float16", "bfloat16"):
                assert any((parallel, split, dtype, op) in have for op in ops), (parallel, split, dtype)
    for op in ("layer_norm", "rms_norm"):
        for dtype in ("float16", "bfloat16"):
            assert all(("sequence", s, dtype, op) in have for s in D.SPLITS), (op, dtype)


def test_distributed_cases_cover_the_options():
    cs = D.cases()
    want = {
        "batch_norm momentum=None": lambda d: d.op == "batch_norm" and "momentum" in d.recipe.case.config
        and d.recipe.case.config["momentum"] is None and d.recipe.case.steps.count("train") >= 2,
        "batch_norm without running statistics": lambda d: d.op == "batch_norm" and not d.recipe.case.state,
        "batch_norm without affine": lambda d: d.op == "batch_norm" and "weight" not in d.recipe.case.inputs,
        "batch_norm starting in eval": lambda d: d.op == "batch_norm" and d.recipe.case.steps[0] == "eval",
        "rms_norm eps=None, sequence": lambda d: d.op == "rms_norm" and d.parallel == "sequence"
        and d.recipe.case.config.get("eps", 0) is None,
        "rms_norm eps=None, tensor": lambda d: d.op == "rms_norm" and d.parallel == "tensor"
        and d.recipe.case.config.get("eps", 0) is None,
        "layer_norm without bias": lambda d: d.op == "layer_norm" and "bias" not in d.recipe.case.inputs
        and "weight" in d.recipe.case.inputs,
    }
    for what, ok in want.items():
        splits = {d.split for d in cs if ok(d)}
        assert splits == set(D.SPLITS), (what, splits)
