"""Localization of failures (refnorm/check/localize.py) and the diagnosis's report rules (issue 33)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from refnorm.check import localize as L  # noqa: E402
from refnorm.check.core import check_case, run_check  # noqa: E402
from refnorm.golden import load_case  # noqa: E402
from tests.planted.emulated import EmulatedBackend  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")


def test_ranges():
    assert L.ranges([0, 1, 2], 3) == "all"
    assert L.ranges([5, 6, 7], 8) == "from 5 on"
    assert L.ranges([3], 8) == "3"
    assert L.ranges([320, 321, 322, 323, 400], 1000) == "320-323, 400"
    assert L.ranges(list(range(0, 20, 2)), 100) == "0, 2, 4, 6 and 6 more"


def test_axis_names():
    assert L.axis_names((260, 3), (260, 3), (1,)) == ["row", "column"]
    assert L.axis_names((3,), (260, 3), (1,)) == ["column"]
    assert L.axis_names((2, 8, 5, 7), (2, 8, 5, 7), (0, 2, 3)) == ["sample", "channel", "position", "position"]
    assert L.axis_names((8,), (2, 8, 5, 7), (0, 2, 3)) == ["channel"]


def test_error_shape():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((16, 64))
    bad = np.ones(ref.shape, bool)
    assert "constant along each failing row" in L.error_shape(ref + rng.standard_normal((16, 1)), ref, bad, {0})
    scale = 1 + 0.01 * rng.standard_normal((16, 1))
    assert "proportional" in L.error_shape(ref * scale, ref, bad, {0})
    assert "throughout: a factor 1.01" in L.error_shape(ref * 1.01, ref, bad, {0})
    assert L.error_shape(ref + 0.1 * rng.standard_normal(ref.shape), ref, bad, {0}) == ""


def test_missing_rows():
    rng = np.random.default_rng(1)
    c = rng.standard_normal((256, 5))
    assert L.missing_rows(-c[-4:].sum(axis=0), c) == "the terms of the last 4 rows (252-255) missing"
    sel = (np.arange(256) % 64) >= 32
    assert L.missing_rows(-c[sel].sum(axis=0), c) == "the terms of rows 32-63 of every 64 missing"
    assert L.missing_rows(c[:3].sum(axis=0), c) == "the terms of the first 3 rows (0-2) counted twice"
    boundary = (np.arange(len(c)) % 4 == 0) & (np.arange(len(c)) >= 4)        # a loop's inclusive end
    assert L.missing_rows(c[boundary].sum(axis=0), c).startswith("the terms of row 0 of every 4 after the first")
    assert L.missing_rows(rng.standard_normal(5), c) == ""


def _missing_rows_full(err, c):
    """missing_rows's answer by measuring every candidate (the search without its screen)."""
    R, tot = len(c), np.sqrt(np.sum(err * err))
    pre = np.concatenate([np.zeros((1, c.shape[1])), np.cumsum(c, axis=0)])
    ks = range(1, R)
    if err.size < L.MIN_COLUMNS:          # a short sum: powers of two and half the rows only
        ks = [k for k in ks if k & (k - 1) == 0 or k in (R // 2, (R + 1) // 2)]
    cands = [(f"the last {k} rows ({R - k}-{R - 1})", pre[R] - pre[R - k]) for k in ks]
    cands += [(f"the first {k} rows (0-{k - 1})", pre[k]) for k in ks]
    P = 2
    while P < R:
        rows = np.arange(R) % P
        for a, b in ((P // 2, P), (0, P // 2), (P - 1, P)):
            cands.append((f"rows {a}-{b - 1} of every {P}", c[(rows >= a) & (rows < b)].sum(axis=0)))
        P *= 2
    best = None
    for text, s in cands:
        for sign, what in ((-1.0, "missing"), (1.0, "counted twice")):
            r = np.sqrt(np.sum((err - sign * s) ** 2))
            if r <= L.FIT * tot and (best is None or r < best[0]):
                best = (r, f"the terms of {text} {what}")
    return "" if best is None else best[1]


def test_missing_rows_screen_changes_no_answer():
    """The screen on err . s (localize.missing_rows) skips only candidates that cannot fit: on sums near
    the FIT threshold, both sides of it, and on noise, the answer equals the full search's."""
    rng = np.random.default_rng(7)
    hits = 0
    for R, C in ((256, 5), (64, 3), (300, 17)):
        c = rng.standard_normal((R, C))
        sel = (np.arange(R) % 32) >= 16
        for s in (c[-4:].sum(axis=0), c[:9].sum(axis=0), c[sel].sum(axis=0), c[R // 2:].sum(axis=0)):
            for sign in (-1.0, 1.0):
                for noise in (0.0, 0.05, 0.09, 0.11, 0.3, 3.0):
                    d = rng.standard_normal(C)
                    err = sign * s + noise * np.linalg.norm(s) * d / np.linalg.norm(d)
                    want = _missing_rows_full(err, c)
                    assert L.missing_rows(err, c) == want, (R, C, sign, noise)
                    hits += bool(want)
        noise = rng.standard_normal(C)
        assert L.missing_rows(noise, c) == _missing_rows_full(noise, c)
    assert hits >= 24                      # the cases near the threshold include fits (the test compares answers)


def test_nonfinite_first():
    ref = np.ones((4, 3))
    got = ref.copy()
    got[2] = np.nan
    locs = [L.localize("grads", "x", got, ref, 1e-6, (4, 3), (1,)),
            L.localize("outputs", "rstd", got[:, :1], ref[:, :1], 1e-6, (4, 3), (1,))]
    assert "rows 2" in locs[0]["text"] and locs[0]["nonfinite"] == 3
    first = L.first_nonfinite(locs)
    assert first.startswith("the first non-finite values appear in rstd (rows 2")


def test_a_16_bit_element_fails_as_the_judge_fails_it():
    """An element fails where the reference is farther than its bound from the reals that round to got in
    got's own dtype (the judge's test), not where |got - ref| exceeds the bound: 208 in bfloat16 (an interval
    of +-0.5) holds 207.98 with a bound of 1e-4; 209 does not."""
    import ml_dtypes
    ref = np.array([[207.98, 207.98], [1.0, 1.0]])
    got = np.array([[208.0, 209.0], [1.0, 1.0]]).astype(ml_dtypes.bfloat16)
    assert L.failing_mask(got, ref, 1e-4).tolist() == [[False, True], [False, False]]
    assert L.failing_mask(got.astype(np.float64), ref, 1e-4).tolist() == [[True, True], [False, False]]


@pytest.mark.parametrize("mutation, case_id, expect", [
    ("dgamma_warp32", "layer_norm/normal_f32_260x3", "dweight: 3 of 3 elements beyond their bound (throughout); "
                                                      "the terms of rows 32-63 of every 64 missing"),
    ("eps_outside", "rms_norm/normal_eps1e-05_f64_9x7", "the error is proportional to the expected value"),
    ("one_pass_noclamp", "layer_norm/normal_f32_260x3", "rstd: 4 of 260 elements beyond their bound (rows "),
])
def test_failures_are_localized(mutation, case_id, expect):
    r = check_case(EmulatedBackend(mutation), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["where"] and expect in d["message"], d["message"]
    failing = {(a.part, a.name) for a in r.arrays if not a.passed}
    assert {(w["part"], w["name"]) for w in d["where"]} == failing


def test_nan_failure_says_where_it_starts():
    """The one-pass variance without a guard goes negative on float16 rows of mean 1e3: dx gets NaN/inf
    (rstd and y are wrong but finite), and the diagnosis says where the first non-finite values are."""
    r = check_case(EmulatedBackend("one_pass_noclamp"), load_case(GOLDEN, "layer_norm/mean1e3_f16_260x3"))
    d = r.diagnosis
    assert r.status == "failed"
    assert d["first_nonfinite"].startswith("the first non-finite values appear in dx (rows 0-20"), d["first_nonfinite"]
    assert "where: the first non-finite values appear in dx" in d["message"]


def test_report_never_contradicts_itself():
    """'closest' is never listed as ruled out, and a named mechanism never is."""
    for mutation, case_id in [("one_pass_clamp", "group_norm/mean1e3_g4_f32_2x8x5x7"),
                              ("dgamma_warp32", "layer_norm/normal_f32_260x3"),
                              ("folded_affine", "layer_norm/mean1e3_f32_6x100"), ("pad_lanes", "layer_norm/mean1e3_f16_260x3")]:
        r = check_case(EmulatedBackend(mutation), load_case(GOLDEN, case_id))
        d = r.diagnosis
        if d is None:
            continue
        if d.get("mechanism"):
            assert d["mechanism"] not in d["ruled_out"]
        if d.get("closest"):
            assert d["closest"]["mechanism"] not in d["ruled_out"]
            assert d["closest"]["worst_ratio"] != "inf"


torch = pytest.importorskip("torch")


def test_torch_channels_last_group_norm_named_one_pass():
    """torch 2.13 CPU's channels_last GroupNorm keeps running sums of x and x^2 (docs/framework_defects.md):
    its failures on mean-shifted groups are named as the one-pass variance, float32 and float64."""
    from refnorm.check.backends import get_backend
    ids = ["group_norm/mean1e3_g4_f32_2x8x5x7", "group_norm/mean1e4_g4_f64_2x8x5x7"]
    rep = run_check(get_backend("torch-cpu"), GOLDEN, case_ids=ids, layout="channels_last")
    for c in rep.cases:
        assert c.status == "failed", c.id
        assert c.diagnosis["mechanism"] == "one_pass", (c.id, c.diagnosis["message"])


def test_distributed_runs_try_the_ordinary_variants():
    """A SyncBatchNorm updating running_var with the biased variance (E01, the ordinary mistake) is
    named in a distributed run (issue 33: only the distributed variants were tried)."""
    from refnorm.check.distributed import run_distributed
    from refnorm.golden import distributed as D
    from tests.planted.distributed import RunningBiased
    cases = [c for c in D.cases(()) if c.id.startswith("batch_norm/dist_batch_unequal_normal_f32")]
    rep = run_distributed(RunningBiased(), cases, world_size=2, timeout=120.0)
    failed = [c for c in rep.cases if c.status == "failed"]
    assert failed
    for c in failed:
        assert c.diagnosis["mechanism"] == "bessel", c.diagnosis["message"]
        assert "E01" in c.diagnosis["pitfalls"], c.diagnosis["message"]
        assert any(w["name"] == "running_var" for w in c.diagnosis["where"])


def test_nonfinite_first_over_steps():
    """The same array non-finite at two steps (a multi-step case): the earlier step comes first, and equal
    computation orders never compare the localizations themselves (a TypeError once ended the diagnosis)."""
    ref = np.ones((4, 3))
    got = ref.copy()
    got[1] = np.inf
    late = dict(L.localize("outputs", "y", got, ref, 1e-6, (4, 3), (1,)), step=3, text="step 3: y: rows 1")
    early = dict(L.localize("outputs", "y", got, ref, 1e-6, (4, 3), (1,)), step=1, text="step 1: y: rows 1")
    assert L.first_nonfinite([late, early]).startswith("the first non-finite values appear in step 1")
def test_a_truncating_store_is_not_named_a_lower_precision():
    """A bfloat16 result stored by truncation (tests/planted/blind.py) errs to one side: the lower-precision
    explanation (diagnosis.lower_precision, two-sided errors only) does not name it precision."""
    from planted.blind import BlindKernel
    r = check_case(BlindKernel("rms_bf16_truncation"), load_case(GOLDEN, "rms_norm/normal_eps1e-05_bf16_2x3x7"))
    assert r.status == "failed"
    assert r.diagnosis.get("mechanism") != "precision", r.diagnosis["message"]
