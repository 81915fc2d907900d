"""rms_norm: properties, numerical gradients, mpmath oracle, torch cross-check, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (MP_DPS, assert_close_rel, assert_like_torch, assert_refuses_normalized_shape_misuse, check_vjp,
                     inputs_of, mp_grads, oracle_check, record, rel_error, require_torch, to_mp, torch_vjp)
from strategies import shapes, well_spread

NAME = "rms_norm"
F64_EPS = float(np.finfo(np.float64).eps)


def run(x, k=1, weight=None, eps=None, placement="inside", offset=0.0, dy=None):
    cfg = {"normalized_shape": list(x.shape[x.ndim - k:]), "eps": eps, "eps_placement": placement,
           "weight_offset": offset}
    return refnorm.evaluate(NAME, inputs_of(x, weight), config=cfg, grad_outputs=None if dy is None else {"y": dy})


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=6))
    k = draw(st.integers(1, len(shape)))
    x = draw(well_spread(shape))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    w = rng.standard_normal(shape[len(shape) - k:]) if draw(st.booleans()) else None
    offset = draw(st.sampled_from([0.0, 1.0, -0.5])) if w is not None else 0.0
    eps = draw(st.sampled_from([None, 0.0, 1e-12, 1e-5, 0.3]))
    placement = draw(st.sampled_from(["inside", "outside"]))
    return x, k, w, eps, placement, offset


def _axes(x, k):
    return tuple(range(x.ndim - k, x.ndim))


def _eps(eps):
    return F64_EPS if eps is None else eps


@given(case(), st.sampled_from([1e-3, 0.5, 7.0, 1e4]))
def test_rms_norm_scale_invariance(c, scale):
    # y(a x; eps') == y(x; eps) with eps' = a^2 eps inside the sqrt, a eps outside it
    x, k, w, eps, placement, offset = c
    a = run(x, k, w, eps, placement, offset).outputs["y"]
    scaled_eps = _eps(eps) * (scale**2 if placement == "inside" else scale)
    s = run(x * scale, k, w, scaled_eps, placement, offset).outputs["y"]
    # a few roundings per element (x*scale, the scaled rms, the product): relative 1e-14 is generous
    np.testing.assert_allclose(s, a, rtol=1e-14, atol=1e-14 * np.abs(a).max())


@given(case())
def test_rms_norm_output_rms_is_weight_scale_at_eps_zero(c):
    x, k, w, _, placement, offset = c
    y = run(x, k, w, 0.0, placement, offset).outputs["y"]
    axes = _axes(x, k)
    gain = 1.0 if w is None else w + offset
    # y / (w + o) = x / rms(x) has RMS exactly 1 (to rounding) in every row
    np.testing.assert_allclose(np.sqrt(np.mean((y / gain) ** 2, axis=axes)), 1.0, rtol=1e-14)


@given(case())
def test_rms_norm_gradient_orthogonality(c):
    # sum_A(dx * x) = <g, x> * eps / (ms + eps)^(3/2) inside, <g, x> * eps / (rms + eps)^2 outside
    # (derivations/rms_norm.md step 9; d/ds y(s x) at s = 1): exactly 0 at eps = 0, with or without weight
    x, k, w, eps, placement, offset = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    res = run(x, k, w, eps, placement, offset, dy=dy)
    axes, e = _axes(x, k), _eps(eps)
    g = dy if w is None else dy * (w + offset)
    rstd = res.outputs["rstd"]
    factor = e * rstd**3 if placement == "inside" else e * rstd**2
    want = factor * np.sum(g * x, axis=axes, keepdims=True)
    got = np.sum(res.grads["x"] * x, axis=axes, keepdims=True)
    # each term dx_j x_j has size |g_j| |x_j| rstd = |g_j| |xhat_j|; their sum cancels to rounding
    n = int(np.prod([x.shape[a] for a in axes]))
    scale = np.sum(np.abs(g * x), axis=axes, keepdims=True) * rstd
    assert np.all(np.abs(got - want) <= 1e-14 * n * scale)
    if eps == 0.0:
        assert np.all(np.abs(got) <= 1e-14 * n * scale)


@given(case())
def test_rms_norm_batch_permutation_equivariance_and_oddness(c):
    x, k, w, eps, placement, offset = c
    a = run(x, k, w, eps, placement, offset).outputs["y"]
    np.testing.assert_array_equal(run(-x, k, w, eps, placement, offset).outputs["y"], -a)
    if x.ndim == k:
        return
    perm = np.random.default_rng(0).permutation(x.shape[0])
    np.testing.assert_array_equal(run(x[perm], k, w, eps, placement, offset).outputs["y"], a[perm])


@given(case())
def test_rms_norm_backward_matches_numerical_differentiation(c):
    x, k, w, eps, placement, offset = c
    inputs = {"x": x} if w is None else {"x": x, "weight": w}
    rms = np.sqrt(np.mean(x**2, axis=_axes(x, k)).min())
    cfg = {"normalized_shape": list(x.shape[x.ndim - k:]), "eps": eps, "eps_placement": placement,
           "weight_offset": offset}
    check_vjp(NAME, inputs, cfg, grad_scale=(1 if w is None else np.abs(w + offset).max()) / rms)


def test_rms_norm_zero_row_gradient_matches_numerical_differentiation():
    # all-zero rows: inside, dx = g / sqrt(eps); outside, dx = g / eps (the limit of x / rms -> 0)
    x = np.zeros((2, 4))
    x[1] = [1.0, -2.0, 0.5, 3.0]
    w = np.random.default_rng(2).standard_normal(4)
    for placement in ("inside", "outside"):
        cfg = {"normalized_shape": [4], "eps": 0.3, "eps_placement": placement}
        check_vjp(NAME, {"x": x, "weight": w}, cfg, step=1e-3)
        dy = np.random.default_rng(3).standard_normal(x.shape)
        res = run(x, 1, w, 0.3, placement, dy=dy)
        div = np.sqrt(0.3) if placement == "inside" else 0.3
        np.testing.assert_allclose(res.grads["x"][0], dy[0] * w / div, rtol=1e-15)


# ----------------------------------------------------------------------------- mpmath oracle
def mp_rms_norm(eps, placement, offset):
    """Independent forward: a plain loop over rows (normalized over the last axis) in mpmath."""
    e = mpmath.mpf(F64_EPS if eps is None else eps)

    def f(d):
        x = d["x"]
        y = np.empty(x.shape, dtype=object)
        rstd = np.empty(x.shape[:-1] + (1,), dtype=object)
        for r in np.ndindex(x.shape[:-1]):
            row = x[r]
            ms = mpmath.fsum(v * v for v in row) / len(row)
            div = mpmath.sqrt(ms + e) if placement == "inside" else mpmath.sqrt(ms) + e
            rstd[r + (0,)] = 1 / div
            for j, v in enumerate(row):
                y[r + (j,)] = v / div * (d["weight"][j] + mpmath.mpf(offset) if "weight" in d else 1)
        return {"y": y, "rstd": rstd}
    return f


_R = np.random.default_rng
ORACLE_CASES = [
    # (label, x, eps); no mean is removed, so cond = 0 for every case
    ("randn", _R(0).standard_normal((3, 6)), None),
    ("mean_1e6_std", 1e6 + _R(1).standard_normal((2, 5)), 1e-5),
    ("mean_1e6_std_small", 3.0 + 3e-6 * _R(2).standard_normal((2, 5)), 1e-12),
    ("constant_rows", np.full((2, 4), 0.1), 1e-12),
    ("constant_rows_eps0.3", np.full((2, 4), -7.3), 0.3),
    ("eps_0.3", _R(3).standard_normal((2, 7)), 0.3),
    ("eps_1e-12_tiny", 1e-5 * _R(4).standard_normal((2, 5)), 1e-12),
    ("zero_row", np.vstack([np.zeros(4), _R(5).standard_normal(4)]), 1e-5),
    ("large_1e30", 1e30 * _R(6).standard_normal((2, 4)), 0.3),
]


@pytest.mark.parametrize("placement", ["inside", "outside"])
@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_rms_norm_matches_mpmath_oracle(label, x, eps, placement):
    rng = np.random.default_rng(5)
    offset = 1.0 if label == "randn" else 0.0
    inputs = {"x": x, "weight": rng.standard_normal(x.shape[-1:])}
    cfg = {"normalized_shape": [x.shape[-1]], "eps": eps, "eps_placement": placement, "weight_offset": offset}
    oracle_check(NAME, inputs, cfg, mp_rms_norm(eps, placement, offset), cond=0.0, outputs=("y", "rstd"))


@pytest.mark.parametrize("placement", ["inside", "outside"])
@pytest.mark.parametrize("log2c", [-600, 660])
def test_rms_norm_extreme_magnitudes_match_mpmath(placement, log2c):
    # |x| ~ 1e-180 or 1e199: mean(x^2) under/overflows in float64 (torch: rms_norm([1e200, 1e200]) = [0, 0]),
    # refnorm's scaled rms does not. mp_grads' fixed step (1e-25) cannot differentiate at these
    # magnitudes, so the exact gradient comes from x0 = x / c: at eps = 0, y is 0-homogeneous in x, hence
    # dx(c x0) = dx(x0) / c and dweight(c x0) = dweight(x0) (c = 2^log2c, exact in both precisions).
    rng = np.random.default_rng(11)
    x0, w = rng.standard_normal((2, 5)), rng.standard_normal(5)
    c = 2.0 ** log2c
    x = x0 * c
    dy = rng.standard_normal(x.shape)
    cfg = {"normalized_shape": [5], "eps": 0.0, "eps_placement": placement}
    res = refnorm.evaluate(NAME, {"x": x, "weight": w}, config=cfg, grad_outputs={"y": dy})
    f = mp_rms_norm(0.0, placement, 0.0)
    worst = 0.0
    with mpmath.workdps(MP_DPS):
        want = f({"x": to_mp(x), "weight": to_mp(w)})
        grads = mp_grads(lambda d: {"y": f(d)["y"]}, {"x": to_mp(x0), "weight": to_mp(w)}, {"y": dy})
        cm = mpmath.mpf(2) ** log2c
        for got, exact in ((res.outputs["y"], want["y"]), (res.outputs["rstd"], want["rstd"]),
                           (res.grads["x"], grads["x"] / cm), (res.grads["weight"], grads["weight"])):
            err = rel_error(got, exact)
            worst = max(worst, err)
            assert err <= 1e-13, f"error {err:.3e} vs mpmath at |x| ~ 2^{log2c}"
    record(NAME, "mpmath", worst)


def test_rms_norm_matches_mpmath_oracle_without_weight():
    x = 2.0 + _R(8).standard_normal((3, 5))
    oracle_check(NAME, {"x": x}, {"normalized_shape": [5], "eps": 1e-3}, mp_rms_norm(1e-3, "inside", 0.0),
                 outputs=("y", "rstd"))


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape,k", [((4, 7), 1), ((2, 3, 5), 2), ((3, 2, 2, 3), 3), ((5,), 1)])
@pytest.mark.parametrize("eps", [None, 1e-5, 0.5])
@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm_matches_torch_float64(shape, k, eps, weighted):
    torch = require_torch()
    rng = np.random.default_rng(7)
    ns = list(shape[len(shape) - k:])
    inputs = {"x": 2 + 3 * rng.standard_normal(shape)}
    if weighted:
        inputs["weight"] = rng.standard_normal(ns)
    dy = rng.standard_normal(shape)

    def fn(x, weight=None):
        y, rstd = torch.ops.aten._fused_rms_norm(x, ns, weight, eps)
        return {"y": y, "rstd": rstd}

    t_out, t_grads = torch_vjp(torch, fn, inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"normalized_shape": ns, "eps": eps}, grad_outputs={"y": dy})
    assert_like_torch(res, t_out, t_grads, ("y", "rstd"), 1e-13, NAME)
    # the public function agrees with the fused op
    np.testing.assert_array_equal(torch.rms_norm(torch.tensor(inputs["x"]), ns,
                                                 None if not weighted else torch.tensor(inputs["weight"]),
                                                 eps).numpy(), t_out["y"])


@pytest.mark.parametrize("placement,offset", [("inside", 1.0), ("outside", 0.0), ("outside", 1.0)])
def test_rms_norm_offset_and_eps_outside_match_torch_composition(placement, offset):
    # torch has no offset or eps-outside option: compare with float64 autograd of the written-out formula
    torch = require_torch()
    rng = np.random.default_rng(8)
    inputs = {"x": rng.standard_normal((3, 4, 6)), "weight": rng.standard_normal(6)}
    dy = rng.standard_normal((3, 4, 6))
    eps = 1e-2

    def fn(x, weight):
        ms = (x * x).mean(dim=-1, keepdim=True)
        div = torch.sqrt(ms + eps) if placement == "inside" else torch.sqrt(ms) + eps
        return {"y": x / div * (weight + offset)}

    t_out, t_grads = torch_vjp(torch, fn, inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"normalized_shape": [6], "eps": eps, "eps_placement": placement,
                                                 "weight_offset": offset}, grad_outputs={"y": dy})
    assert_like_torch(res, t_out, t_grads, ("y",), 1e-13, NAME)


def test_rms_norm_zero_rows_like_torch():
    torch = require_torch()
    x = np.zeros((2, 3))
    x[1] = [1.0, 2.0, -3.0]
    dy = np.random.default_rng(9).standard_normal(x.shape)
    for eps in (None, 0.0):   # eps = 0: 0/0 = NaN in the zero row, as torch
        t_out, t_grads = torch_vjp(torch, lambda x: {"y": torch.rms_norm(x, [3], None, eps)}, {"x": x}, {"y": dy})
        res = run(x, eps=eps, dy=dy)
        assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
        assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)


def test_rms_norm_empty_like_torch():
    torch = require_torch()
    for shape, ns in [((2, 0), [0]), ((0, 4), [4])]:
        x = np.zeros(shape)
        ty, tr = torch.ops.aten._fused_rms_norm(torch.tensor(x), ns, None, None)
        res = refnorm.evaluate(NAME, {"x": x}, config={"normalized_shape": ns}, grad_outputs={"y": np.zeros(shape)})
        np.testing.assert_array_equal(res.outputs["y"], ty.numpy())
        np.testing.assert_array_equal(res.outputs["rstd"], tr.numpy())   # NaN for an empty row
        assert res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- bad input, NaN
def test_rms_norm_rejects_bad_input():
    assert_refuses_normalized_shape_misuse(NAME)    # and what rms_norm's own options add:
    x = np.ones((2, 3))
    with pytest.raises(refnorm.ConfigError, match="eps_placement='between'"):
        refnorm.evaluate(NAME, {"x": x}, config={"normalized_shape": [3], "eps_placement": "between"})
    with pytest.raises(refnorm.ConfigError, match="weight_offset=1.0 needs a 'weight'"):
        refnorm.evaluate(NAME, {"x": x}, config={"normalized_shape": [3], "weight_offset": 1.0})
    with pytest.raises(refnorm.ConfigError, match="weight_offset='1'"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(3)}, config={"normalized_shape": [3], "weight_offset": "1"})
    with pytest.raises(refnorm.ConfigError, match=r"normalized_shape=\[\]"):
        refnorm.evaluate(NAME, {"x": x}, config={"normalized_shape": []})
    with pytest.raises(refnorm.UnknownNameError, match="'bias'"):
        refnorm.evaluate(NAME, {"x": x, "bias": np.ones(3)}, config={"normalized_shape": [3]})


@pytest.mark.parametrize("placement", ["inside", "outside"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_rms_norm_nan_stays_in_its_row(placement, bad):
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[1, 2] = bad
    res = run(x, weight=np.ones(4), placement=placement, dy=np.ones_like(x))
    for a in (res.outputs["y"], res.grads["x"]):
        assert np.isfinite(a[[0, 2]]).all()
        assert (~np.isfinite(a[1])).any()
    assert np.isnan(res.grads["x"][1]).all()
    assert not np.isfinite(res.grads["weight"]).all()   # the weight gradient sums over every row
