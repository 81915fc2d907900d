"""The bias test: correct rounding passes at the stated false-alarm rate; a systematic scale error
below one rounding step per element is caught once a group has enough elements."""
from __future__ import annotations

import numpy as np
import pytest

from refnorm.check.bias import bias_test, group_count
from refnorm.check.precision import UNIT_ROUNDOFF, round_to


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_correct_rounding_has_no_false_alarm_even_at_a_loose_rate(dtype):
    """The correctly rounded reference: S = 0 exactly (the test measures against it). A kernel with
    internal errors within its bound (random, |e| <= E = 2^-20 |ref|) before its one rounding: no alarm
    at a 5% budget either (Hoeffding is conservative: expect 0)."""
    rng = np.random.default_rng(0)
    alarms = 0
    for trial in range(200):
        ref = rng.standard_normal((16, 300))
        r, _, S, _ = bias_test(round_to(ref, dtype), ref, np.zeros_like(ref), p_array=0.05)
        assert r == 0 and S == 0
        E = np.abs(ref) * 2.0 ** -20
        got = round_to(ref + E * rng.uniform(-1, 1, ref.shape), dtype)
        r, *_ = bias_test(got, ref, E, p_array=0.05)
        alarms += r > 1
    assert alarms == 0


def test_repeated_values_are_not_independent_roundings():
    ref = np.full((4, 3000), 0.1 + 2 ** -12)            # every element rounds the same way
    got = round_to(ref, "bfloat16")
    r, *_ = bias_test(got, ref, np.zeros_like(ref), p_array=1e-9)
    assert r <= 1


@pytest.mark.parametrize("dtype,delta,n", [("bfloat16", 2.0 ** -9, 4096), ("float16", 2.0 ** -12, 4096)])
def test_a_scale_error_below_half_an_ulp_is_caught(dtype, delta, n):
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((8, n))
    got = round_to(ref * (1 + delta), dtype)            # every element biased by delta, < ulp/2
    assert np.max(np.abs(got.astype(float) - ref) / np.abs(ref)) < 2 * UNIT_ROUNDOFF[dtype] * 1.01
    r, label, S, allow = bias_test(got, ref, np.zeros_like(ref), p_array=1e-9)
    assert r > 1, (r, label)


def test_the_internal_error_allowance_absorbs_a_bias_it_permits():
    rng = np.random.default_rng(2)
    ref = rng.standard_normal((8, 4096))
    delta = 2.0 ** -9
    got = round_to(ref * (1 + delta), "bfloat16")
    r, *_ = bias_test(got, ref, delta * np.abs(ref) * 1.01, p_array=1e-9)   # a contract allowing it
    assert r <= 1


def test_group_count():
    assert group_count((5,)) == 1 and group_count((3, 4)) == 8 and group_count((2, 1, 5)) == 8


def test_value_counts_of_16_bit_dtypes_equal_numpy_unique():
    """The linear-time count (a 65536-bin histogram of the bit patterns) gives exactly the counts of
    np.unique on the values, -0 and +0 together, for float16 and bfloat16."""
    import ml_dtypes
    from refnorm.check.bias import value_counts
    rng = np.random.default_rng(3)
    for dt in (np.float16, ml_dtypes.bfloat16):
        for n in (1, 2, 7, 1000, 4099):
            g = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 300.0])).astype(dt)
            g[rng.integers(0, n, size=max(n // 10, 1))] = 0
            g[0] = -0.0
            _, inv, counts = np.unique(g.astype(np.float64), return_inverse=True, return_counts=True)
            assert np.array_equal(value_counts(g), counts[inv])
