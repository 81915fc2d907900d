"""weight_standardization: properties, numerical gradients, mpmath oracle, torch cross-check, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (assert_close_rel, check_vjp, cond_number, mp_sqrt, oracle_check,
                     require_torch, torch_vjp)
from strategies import shapes, well_spread

NAME = "weight_standardization"


def run(x, eps=1e-5, dy=None):
    return refnorm.evaluate(NAME, {"x": x}, config={"eps": eps},
                            grad_outputs=None if dy is None else {"y": dy})


def fan_in(x):
    return tuple(range(1, x.ndim))


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=2, max_dims=4, max_side=5))
    x = draw(well_spread(shape))
    # eps = 0 with a one-element fan-in is 0/0 (NaN, as torch): drawn only where channels have spread
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.3] if np.prod(shape[1:]) > 1 else [1e-5, 0.3]))
    return x, eps


@given(case(), st.lists(st.floats(-1e3, 1e3), min_size=5, max_size=5))
def test_weight_standardization_per_channel_shift_invariance(c, shifts):
    x, eps = c
    shift = np.array(shifts[:x.shape[0]]).reshape((-1,) + (1,) * (x.ndim - 1))
    a, s = run(x, eps).outputs["y"], run(x + shift, eps).outputs["y"]
    # x + shift is rounded: up to 1.1e-16 * (|shift| + |x|) absolute per element, divided by the
    # channel's std in y; the algorithm itself adds a few ulps of |y| (re-centred deviations).
    # Observed worst over 3000 random cases: 1.2e-16 * cond.
    std = np.sqrt(x.var(axis=fan_in(x)).min() + eps)
    cond = 1 + (np.abs(shift).max() + np.abs(x).max()) / std
    assert np.max(np.abs(a - s)) <= 1e-15 * cond * max(1.0, np.abs(a).max())


@given(case(), st.sampled_from([1e-3, 0.5, 7.0, 1e4]))
def test_weight_standardization_scale_invariance(c, scale):
    x, eps = c
    a = run(x, eps).outputs["y"]
    s = run(x * scale, eps * scale**2).outputs["y"]
    # rounding x * scale (0.5 ulp of |x|) moves the deviations by 1.1e-16 |x| / std of |y|
    cond = 1 + np.abs(x).max() / np.sqrt(x.var(axis=fan_in(x)).min() + eps)
    assert np.max(np.abs(s - a)) <= 1e-15 * cond * max(1.0, np.abs(a).max())


@given(case(), st.lists(st.floats(1e-3, 1e3), min_size=5, max_size=5))
def test_weight_standardization_per_channel_scale_invariance_at_eps_zero(c, scales):
    x, eps = c
    if np.prod(x.shape[1:]) == 1:
        return                                   # one-element fan-in: 0/0 at eps = 0
    scale = np.array(scales[:x.shape[0]]).reshape((-1,) + (1,) * (x.ndim - 1))
    a, s = run(x, 0.0).outputs["y"], run(x * scale, 0.0).outputs["y"]
    cond = 1 + np.abs(x).max() / np.sqrt(x.var(axis=fan_in(x)).min())
    assert np.max(np.abs(s - a)) <= 1e-15 * cond * max(1.0, np.abs(a).max())


@given(case())
def test_weight_standardization_output_channel_permutation_equivariance(c):
    x, eps = c
    perm = np.random.default_rng(0).permutation(x.shape[0])
    a, p = run(x, eps), run(x[perm], eps)
    for k in ("y", "mean", "rstd"):          # channels are computed independently: bit-identical
        np.testing.assert_array_equal(p.outputs[k], a.outputs[k][perm])


@given(case())
def test_weight_standardization_gradient_sums_to_zero_per_channel(c):
    x, eps = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = run(x, eps, dy=dy).grads["x"]
    axes = fan_in(x)
    # each dx element is a difference of terms of size rstd * |dy|: their sum cancels to rounding
    scale = np.abs(dy).max() / np.sqrt(x.var(axis=axes).min() + eps)
    assert np.max(np.abs(dx.sum(axis=axes))) <= 1e-15 * scale * np.prod(x.shape[1:])


@given(case())
def test_weight_standardization_equals_layer_norm_over_the_fan_in(c):
    x, eps = c
    dy = np.random.default_rng(2).standard_normal(x.shape)
    ws = run(x, eps, dy=dy)
    ln = refnorm.evaluate("layer_norm", {"x": x}, config={"normalized_shape": list(x.shape[1:]), "eps": eps},
                          grad_outputs={"y": dy})
    # the same two-pass algorithm on the same data: equal to the last bit (a different summation
    # order in either module would show up here as a few ulps, not as a failure of WS)
    for got, want in ((ws.outputs["y"], ln.outputs["y"]), (ws.outputs["mean"], ln.outputs["mean"]),
                      (ws.outputs["rstd"], ln.outputs["rstd"]), (ws.grads["x"], ln.grads["x"])):
        np.testing.assert_allclose(got, want, rtol=4e-16, atol=4e-16 * np.abs(want).max())


@given(case())
def test_weight_standardization_backward_matches_numerical_differentiation(c):
    x, eps = c
    rstd = 1 / np.sqrt(x.var(axis=fan_in(x)).min() + eps)
    check_vjp(NAME, {"x": x}, {"eps": eps}, grad_scale=rstd)


# ----------------------------------------------------------------------------- mpmath oracle
def mp_weight_standardization(eps):
    """Plain loops over output channels, in mpmath (independent of NumPy's reductions)."""
    def f(d):
        x = d["x"]
        y = np.empty(x.shape, dtype=object)
        mean = np.empty((x.shape[0],) + (1,) * (x.ndim - 1), dtype=object)
        rstd = np.empty(mean.shape, dtype=object)
        for o in range(x.shape[0]):
            row = list(x[o].ravel())
            m = mpmath.fsum(row) / len(row)
            var = mpmath.fsum((r - m) ** 2 for r in row) / len(row)
            r = 1 / mpmath.sqrt(var + mpmath.mpf(eps))
            mean.flat[o], rstd.flat[o] = m, r
            for idx in np.ndindex(x.shape[1:]):
                y[(o,) + idx] = (x[(o,) + idx] - m) * r
        return {"y": y, "mean": mean, "rstd": rstd}
    return f


ORACLE_CASES = [
    # (name, x, eps)
    ("randn", 0.1 * np.random.default_rng(0).standard_normal((3, 2, 2)), 1e-5),
    ("mean_1e6_std", 1e6 + np.random.default_rng(1).standard_normal((2, 3, 2)), 1e-5),
    ("mean_1e6_std_small", 3.0 + 3e-6 * np.random.default_rng(2).standard_normal((2, 5)), 1e-12),
    ("constant_channels", np.full((2, 2, 2), 0.1), 1e-12),
    ("constant_channels_eps0.3", np.full((2, 3), -7.3), 0.3),
    ("eps_0.3", np.random.default_rng(3).standard_normal((2, 3, 1, 2)), 0.3),
    ("eps_1e-12_tiny_var", 1e-5 * np.random.default_rng(4).standard_normal((2, 2, 3)), 1e-12),
    ("eps_0", np.random.default_rng(5).standard_normal((3, 4)), 0.0),
]


@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_weight_standardization_matches_mpmath_oracle(label, x, eps):
    oracle_check(NAME, {"x": x}, {"eps": eps}, mp_weight_standardization(eps),
                 cond=cond_number(x, fan_in(x), eps), outputs=("y", "mean", "rstd"))


def test_mpmath_oracle_helpers_agree():
    """The loop oracle against the vectorized mp_sqrt formula (a check on the oracle itself)."""
    x = np.random.default_rng(6).standard_normal((2, 3))
    with mpmath.workdps(50):
        from helpers import to_mp
        xm = to_mp(x)
        y = mp_weight_standardization(1e-5)({"x": xm})["y"]
        m = np.sum(xm, axis=1, keepdims=True) / 3
        v = np.sum((xm - m) ** 2, axis=1, keepdims=True) / 3
        want = (xm - m) / mp_sqrt(v + mpmath.mpf(1e-5))
        assert max(abs(a - b) for a, b in zip(y.ravel(), want.ravel())) < mpmath.mpf(10) ** -45


# ----------------------------------------------------------------------------- torch float64
def torch_ws(torch, eps):
    """Weight Standardization written with torch ops (there is no torch op): biased var, eps inside."""
    def fn(x):
        dims = list(range(1, x.dim()))
        var, mean = torch.var_mean(x, dim=dims, keepdim=True, correction=0)
        rstd = torch.rsqrt(var + eps)
        return {"y": (x - mean) * rstd, "mean": mean, "rstd": rstd}
    return fn


@pytest.mark.parametrize("shape", [(4, 3, 3, 3), (8, 5), (2, 3, 2, 2, 2), (6, 1, 1, 1), (3, 16, 3, 3)])
@pytest.mark.parametrize("eps", [1e-5, 1e-10, 0.3])
def test_weight_standardization_matches_torch_float64(shape, eps):
    torch = require_torch()
    rng = np.random.default_rng(7)
    x = 0.05 + 0.2 * rng.standard_normal(shape)          # conv-weight-like values
    dy = rng.standard_normal(shape)
    t_out, t_grads = torch_vjp(torch, torch_ws(torch, eps), {"x": x}, {"y": dy})
    res = run(x, eps, dy=dy)
    # a one-element fan-in has y = 0 exactly in both; otherwise both are float64 two-pass
    # (torch.var_mean is two-pass too), differing by rounding: 1e-13 of the array's scale
    for key in ("y", "mean", "rstd"):
        assert_close_rel(res.outputs[key], t_out[key], 1e-13, f"output {key}", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)


def test_weight_standardization_empty_like_torch_native_layer_norm():
    torch = require_torch()
    for shape in [(0, 3, 3, 3), (3, 0, 3, 3), (2, 4, 0)]:
        x = np.zeros(shape)
        m = int(np.prod(shape[1:]))
        ty, tm, tr = torch.native_layer_norm(torch.tensor(x.reshape(shape[0], m)), [m], None, None, 1e-5)
        res = run(x, dy=np.zeros(shape))
        np.testing.assert_array_equal(res.outputs["y"], ty.numpy().reshape(shape))
        np.testing.assert_array_equal(res.outputs["mean"].ravel(), tm.numpy().ravel())
        np.testing.assert_array_equal(res.outputs["rstd"].ravel(), tr.numpy().ravel())
        assert res.outputs["mean"].shape == (shape[0],) + (1,) * (len(shape) - 1)
        assert res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- bad input, NaN
def test_weight_standardization_rejects_bad_input():
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 1))
    with pytest.raises(refnorm.ShapeError, match=r"shape \(5,\); expected at least 2 dimensions"):
        refnorm.evaluate(NAME, {"x": np.ones(5)})
    with pytest.raises(refnorm.ConfigError, match="eps=-1e-05"):
        refnorm.evaluate(NAME, {"x": x}, config={"eps": -1e-5})
    with pytest.raises(refnorm.ConfigError, match="eps='small'"):
        refnorm.evaluate(NAME, {"x": x}, config={"eps": "small"})
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3), dtype=np.int64)})
    with pytest.raises(refnorm.UnknownNameError, match="unknown option 'ddof'"):
        refnorm.evaluate(NAME, {"x": x}, config={"ddof": 1})
    with pytest.raises(refnorm.UnknownNameError, match="unknown input 'weight'"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(2)})
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape \(2, 3\)"):
        refnorm.evaluate(NAME, {"x": x}, grad_outputs={"y": np.ones((2, 3))})


def test_weight_standardization_nan_stays_in_its_channel():
    x = np.random.default_rng(0).standard_normal((3, 2, 2))
    x[1, 0, 1] = np.nan
    res = run(x, dy=np.ones_like(x))
    for arr in (res.outputs["y"], res.outputs["mean"], res.outputs["rstd"], res.grads["x"]):
        assert np.isnan(arr[1]).all() and np.isfinite(arr[[0, 2]]).all()
    x[1, 0, 1] = np.inf
    res = run(x, dy=np.ones_like(x))
    assert np.isnan(res.outputs["y"][1]).all() and np.isfinite(res.outputs["y"][[0, 2]]).all()
    assert np.isnan(res.grads["x"][1]).all() and np.isfinite(res.grads["x"][[0, 2]]).all()


def test_weight_standardization_constant_channel():
    """A constant output channel: y = 0, dx = (dy - mean dy) / sqrt(eps); NaN at eps = 0 (0/0)."""
    x = np.random.default_rng(1).standard_normal((2, 3))
    x[0] = 0.25
    dy = np.random.default_rng(2).standard_normal(x.shape)
    res = run(x, 1e-4, dy=dy)
    np.testing.assert_array_equal(res.outputs["y"][0], 0.0)
    np.testing.assert_allclose(res.grads["x"][0], (dy[0] - dy[0].mean()) / 1e-2, rtol=1e-14, atol=1e-14)
    res0 = run(x, 0.0, dy=dy)
    assert np.isnan(res0.outputs["y"][0]).all() and np.isfinite(res0.outputs["y"][1]).all()
    assert np.isnan(res0.grads["x"][0]).all() and np.isfinite(res0.grads["x"][1]).all()
