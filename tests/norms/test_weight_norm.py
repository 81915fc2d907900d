"""weight_norm: properties, numerical gradients, mpmath oracle, torch cross-check, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import assert_close_rel, check_vjp, oracle_check, require_torch, to_f64, to_mp, torch_vjp
from strategies import shapes, well_spread

NAME = "weight_norm"


def g_shape(shape, dim, flat=False):
    """torch's weight_g shape (1 on every axis but dim; () for None), or the flat (shape[dim],)."""
    if dim is None:
        return (1,) * len(shape) if flat else ()
    d = dim % len(shape)
    return (shape[d],) if flat else tuple(s if a == d else 1 for a, s in enumerate(shape))


def slice_axes(ndim, dim):
    return tuple(range(ndim)) if dim is None else tuple(a for a in range(ndim) if a != dim % ndim)


def run(v, g, dim=0, dw=None):
    return refnorm.evaluate(NAME, {"v": v, "g": g}, config={"dim": dim},
                            grad_outputs=None if dw is None else {"w": dw})


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=5))
    # every axis, counted from either end (but -1: refused, see the module docstring), and None
    dims = [None] + list(range(len(shape))) + [-k for k in range(2, len(shape) + 1)]
    dim = draw(st.sampled_from(dims))
    v = draw(well_spread(shape))
    flat = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    g = rng.standard_normal(g_shape(shape, dim, flat))
    return v, g, dim


@given(case())
def test_weight_norm_slices_have_norm_abs_g(c):
    v, g, dim = c
    w = run(v, g, dim).outputs["w"]
    norms = np.sqrt((w * w).sum(axis=slice_axes(v.ndim, dim)))
    # |w| = |g| |v| / ||v||: a few roundings per element, so a few ulps of |g| (observed <= 4.2e-16)
    np.testing.assert_allclose(norms.ravel(), np.abs(g).ravel(), rtol=2e-15)


@given(case(), st.floats(1e-3, 1e3), st.integers(-60, 60))
def test_weight_norm_invariant_to_scaling_v(c, scale, k):
    v, g, dim = c
    a = run(v, g, dim).outputs["w"]
    # a power-of-two scale is exact, and so is the norm's internal power-of-two scaling: bit-identical
    np.testing.assert_array_equal(run(v * 2.0**k, g, dim).outputs["w"], a)
    np.testing.assert_array_equal(run(-v, g, dim).outputs["w"], -a)
    # another scale rounds v (0.5 ulp per element): w moves by a few ulps of |g| (observed <= 3e-16)
    np.testing.assert_allclose(run(v * scale, g, dim).outputs["w"], a, rtol=0, atol=2e-15 * np.abs(g).max())


@given(case(), st.floats(-1e3, 1e3))
def test_weight_norm_linear_in_g(c, s):
    v, g, dim = c
    a, b = run(v, g, dim).outputs["w"], run(v, s * g, dim).outputs["w"]
    np.testing.assert_allclose(b, s * a, rtol=1e-15, atol=1e-300)


@given(case())
def test_weight_norm_gradient_is_orthogonal_to_v(c):
    v, g, dim = c
    dw = np.random.default_rng(1).standard_normal(v.shape)
    res = run(v, g, dim, dw=dw)
    axes = slice_axes(v.ndim, dim)
    # sum_A dv * v cancels terms of size |g| |dw| |v| / ||v|| (at most |g| |dw| per element, m of them)
    scale = np.abs(g).max() * np.abs(dw).max() * np.prod([v.shape[a] for a in axes])
    assert np.max(np.abs((res.grads["v"] * v).sum(axis=axes))) <= 1e-15 * scale
    # dg = sum_A(dw * w) / g: the gain only stretches w
    w = res.outputs["w"]
    want = (dw * w).sum(axis=axes).reshape(g.shape) / g
    # cancellation in sum(dw * w): absolute error ~ 1e-16 * sum|dw u| <= 1e-16 * max|dw| sqrt(m)
    np.testing.assert_allclose(res.grads["g"], want, rtol=1e-14, atol=1e-14 * np.abs(dw).max() * np.sqrt(v.size))


@given(case())
def test_weight_norm_permutation_equivariance_along_dim(c):
    v, g, dim = c
    if dim is None:
        return
    d = dim % v.ndim
    perm = np.random.default_rng(0).permutation(v.shape[d])
    a = run(v, g, dim).outputs["w"]
    p = run(np.take(v, perm, axis=d), np.take(g, perm, axis=d if g.ndim > 1 else 0), dim).outputs["w"]
    np.testing.assert_array_equal(p, np.take(a, perm, axis=d))


@given(case())
def test_weight_norm_flat_g_equals_torch_shaped_g(c):
    v, g, dim = c
    dw = np.random.default_rng(2).standard_normal(v.shape)
    keep, flat = g.reshape(g_shape(v.shape, dim)), g.reshape(g_shape(v.shape, dim, flat=True))
    a, b = run(v, keep, dim, dw=dw), run(v, flat, dim, dw=dw)
    np.testing.assert_array_equal(a.outputs["w"], b.outputs["w"])
    np.testing.assert_array_equal(a.outputs["norm"], b.outputs["norm"])
    np.testing.assert_array_equal(a.grads["v"], b.grads["v"])
    assert a.grads["g"].shape == keep.shape and b.grads["g"].shape == flat.shape
    np.testing.assert_array_equal(a.grads["g"].ravel(), b.grads["g"].ravel())


@given(case())
def test_weight_norm_backward_matches_numerical_differentiation(c):
    v, g, dim = c
    # no cancellation beyond the projection dw - u <u, dw>: grad_scale = |g| / ||v||
    norm = np.sqrt((v * v).sum(axis=slice_axes(v.ndim, dim))).min()
    check_vjp(NAME, {"v": v, "g": g}, {"dim": dim}, grad_scale=np.abs(g).max() / norm)


def test_weight_norm_backward_scales_exactly_with_v():
    """w(c v) = w(v), so dv(c v) = dv(v) / c; bit-identical for c = 2^k even at 1e+-300 (no overflow)."""
    rng = np.random.default_rng(3)
    v, g, dw = rng.standard_normal((3, 4)), rng.standard_normal((3, 1)), rng.standard_normal((3, 4))
    base = run(v, g, 0, dw=dw)
    for k in (-1000, -600, 600, 1000):
        res = run(v * 2.0**k, g, 0, dw=dw)
        np.testing.assert_array_equal(res.outputs["w"], base.outputs["w"])
        np.testing.assert_array_equal(res.outputs["norm"], base.outputs["norm"] * 2.0**k)
        np.testing.assert_array_equal(res.grads["v"], base.grads["v"] * 2.0**-k)
        np.testing.assert_array_equal(res.grads["g"], base.grads["g"])


# ----------------------------------------------------------------------------- mpmath oracle
def mp_weight_norm(dim):
    """Plain loops over the slices, in mpmath (independent of NumPy's reductions)."""
    def f(d):
        v, g = d["v"], d["g"]
        w = np.empty(v.shape, dtype=object)
        nshape = g_shape(v.shape, dim)
        norm = np.empty(nshape, dtype=object)
        gflat = list(g.ravel())
        n_slices = 1 if dim is None else v.shape[dim]
        for s in range(n_slices):
            idxs = [i for i in np.ndindex(v.shape) if dim is None or i[dim] == s]
            nr = mpmath.sqrt(mpmath.fsum(v[i] ** 2 for i in idxs))
            for i in idxs:
                w[i] = gflat[s] * v[i] / nr
            norm[() if dim is None else tuple(s if a == dim else 0 for a in range(v.ndim))] = nr
        return {"w": w, "norm": norm}
    return f


ORACLE_CASES = [
    # (name, v, dim, flat g)
    ("randn_dim0", np.random.default_rng(0).standard_normal((3, 2, 2)), 0, False),
    ("randn_dim1", np.random.default_rng(1).standard_normal((2, 3, 2)), 1, False),
    ("randn_last_flat", np.random.default_rng(2).standard_normal((2, 2, 3)), 2, True),
    ("randn_none", np.random.default_rng(3).standard_normal((3, 4)), None, False),
    ("one_dominant", np.array([[1e8, 1e-3, -2e-3], [1.0, 1.0, 1.0]]), 0, False),
    ("mean_1e6_std", 1e6 + np.random.default_rng(4).standard_normal((2, 4)), 0, False),
    ("tiny_1e-5", 1e-5 * np.random.default_rng(5).standard_normal((3, 3)), -2, False),
    ("vector", np.random.default_rng(6).standard_normal(5), 0, False),
]


@pytest.mark.parametrize("label,v,dim,flat", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_weight_norm_matches_mpmath_oracle(label, v, dim, flat):
    g = np.random.default_rng(7).standard_normal(g_shape(v.shape, dim, flat))
    nd = None if dim is None else dim % v.ndim
    # no mean is removed: cond = 0
    oracle_check(NAME, {"v": v, "g": g}, {"dim": dim}, mp_weight_norm(nd), cond=0.0, outputs=("w", "norm"))


@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1e160, 1e200])
def test_weight_norm_extreme_scales_match_mpmath(scale):
    """Where ||v||^2 under/overflows float64: refnorm scales exactly (forward; the backward is
    covered by the exact 2^k scaling test above, as mpmath central differences need |v| >> 1e-25)."""
    rng = np.random.default_rng(8)
    v, g = scale * rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    res = run(v, g, 0)
    with mpmath.workdps(50):
        want = mp_weight_norm(0)({"v": to_mp(v), "g": to_mp(g)})
        for k in ("w", "norm"):
            np.testing.assert_allclose(res.outputs[k], to_f64(want[k]), rtol=1e-15)


# ----------------------------------------------------------------------------- torch float64
def torch_dim(dim):
    return -1 if dim is None else dim            # torch's weight_norm stores dim=None as -1


@pytest.mark.parametrize("shape,dim", [((4, 3, 3, 3), 0), ((4, 3, 3, 3), 1), ((4, 3, 3, 3), 3),
                                       ((4, 3, 3, 3), -2), ((4, 3, 3, 3), None), ((6, 5), 0),
                                       ((6, 5), 1), ((6, 5), None), ((7,), 0), ((2, 3, 4), -3)])
def test_weight_norm_matches_torch_float64(shape, dim):
    torch = require_torch()
    rng = np.random.default_rng(9)
    v = rng.standard_normal(shape)
    g = rng.standard_normal(g_shape(shape, dim))
    dw = rng.standard_normal(shape)

    def fn(v, g):
        return {"w": torch._weight_norm(v, g, torch_dim(dim)),
                "norm": torch.norm_except_dim(v, 2, torch_dim(dim))}

    t_out, t_grads = torch_vjp(torch, fn, {"v": v, "g": g}, {"w": dw})
    res = run(v, g, dim, dw=dw)
    for k in ("w", "norm"):
        assert_close_rel(res.outputs[k], t_out[k], 1e-14, f"output {k}", NAME)
    assert_close_rel(res.grads["g"], t_grads["g"], 1e-14, "grad g", NAME)
    if v.size // np.size(g) > 1:
        assert_close_rel(res.grads["v"], t_grads["v"], 1e-14, "grad v", NAME)
    else:
        # one-element slices: w = g * sign(v), so dv = 0 exactly. refnorm's u = v / |v| is exactly
        # +-1 and dw - u * (u * dw) is exactly 0; torch's (v * (g / |v|)) backward leaves rounding
        # noise of a few ulps of |g dw / v|: refnorm is the exact one here
        np.testing.assert_array_equal(res.grads["v"], 0.0)
        assert np.all(np.abs(t_grads["v"]) <= 1e-15 * np.abs(g * dw / v))


def test_weight_norm_torch_dim_minus_one_is_refnorm_none():
    """torch._weight_norm(v, g, -1) normalizes over the whole tensor; refnorm spells that dim=None
    and refuses -1 (which NumPy would read as the last axis)."""
    torch = require_torch()
    rng = np.random.default_rng(10)
    v, g = rng.standard_normal((3, 4)), np.array(1.7)
    tw = torch._weight_norm(torch.tensor(v), torch.tensor(g), -1).numpy()
    assert_close_rel(run(v, g, None).outputs["w"], tw, 1e-15, "w", NAME)
    np.testing.assert_allclose(np.linalg.norm(tw), 1.7, rtol=1e-15)
    with pytest.raises(refnorm.ConfigError, match=r"dim=-1 is ambiguous.*dim=None.*dim=1"):
        run(v, g, -1)


def test_weight_norm_zero_slice_is_nan_like_torch():
    torch = require_torch()
    rng = np.random.default_rng(11)
    v, g, dw = rng.standard_normal((3, 4)), rng.standard_normal((3, 1)), rng.standard_normal((3, 4))
    v[1] = 0.0
    t_out, t_grads = torch_vjp(torch, lambda v, g: {"w": torch._weight_norm(v, g, 0)}, {"v": v, "g": g}, {"w": dw})
    res = run(v, g, 0, dw=dw)
    assert np.isnan(res.outputs["w"][1]).all() and np.isfinite(res.outputs["w"][[0, 2]]).all()
    assert res.outputs["norm"][1, 0] == 0.0
    # NaN exactly where torch has NaN (the zero slice), equal elsewhere
    assert_close_rel(res.outputs["w"], t_out["w"], 1e-14, "w", NAME)
    assert_close_rel(res.grads["v"], t_grads["v"], 1e-14, "grad v", NAME)
    assert_close_rel(res.grads["g"], t_grads["g"], 1e-14, "grad g", NAME)
    assert np.isnan(res.grads["g"][1]).all() and np.isnan(res.grads["v"][1]).all()


@pytest.mark.parametrize("shape,dim", [((3, 0), 0), ((0, 3), None), ((0, 3), 1), ((2, 0, 3), 0)])
def test_weight_norm_empty_vs_torch(shape, dim):
    """Empty slices: w empty and ||v|| = 0 as torch. dg: refnorm 0 (w has no entries, so the loss
    does not depend on g: the true derivative); torch gives NaN (its sum(dw * v) / ||v|| = 0/0)."""
    torch = require_torch()
    v, g = np.zeros(shape), np.full(g_shape(shape, dim), 1.5)
    t_out, t_grads = torch_vjp(torch, lambda v, g: {"w": torch._weight_norm(v, g, torch_dim(dim)),
                                                    "norm": torch.norm_except_dim(v, 2, torch_dim(dim))},
                               {"v": v, "g": g}, {"w": np.zeros(shape)})
    res = run(v, g, dim, dw=np.zeros(shape))
    for k in ("w", "norm"):
        np.testing.assert_array_equal(res.outputs[k], t_out[k])
    assert res.grads["v"].shape == shape
    np.testing.assert_array_equal(res.grads["g"], np.zeros(g.shape))
    assert np.isnan(t_grads["g"]).all()          # the documented torch disagreement


@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((3, 0), 1)])
def test_weight_norm_no_slices(shape, dim):
    """v.shape[dim] == 0: no slices, empty everything (torch 2.13 dies with SIGFPE here: not called)."""
    res = run(np.zeros(shape), np.zeros(g_shape(shape, dim)), dim, dw=np.zeros(shape))
    assert res.outputs["w"].shape == shape and res.outputs["norm"].size == 0
    assert res.grads["v"].shape == shape and res.grads["g"].shape == g_shape(shape, dim)


def test_weight_norm_overflow_where_torch_gives_zero():
    """||v||^2 overflows in torch for |v| ~ 1e200 (w = v * (g / inf) = 0); refnorm gives the true w."""
    torch = require_torch()
    v, g = np.array([[3e200, 4e200]]), np.array([[1.0]])
    tw = torch._weight_norm(torch.tensor(v), torch.tensor(g), 0).numpy()
    np.testing.assert_array_equal(tw, [[0.0, 0.0]])
    np.testing.assert_allclose(run(v, g, 0).outputs["w"], [[0.6, 0.8]], rtol=1e-15)


# ----------------------------------------------------------------------------- bad input, NaN
def test_weight_norm_rejects_bad_input():
    v = np.ones((2, 3))
    with pytest.raises(refnorm.ShapeError, match=r"'g' has shape \(3,\); expected \(2, 1\).*or \(2,\)"):
        run(v, np.ones(3), 0)
    with pytest.raises(refnorm.ShapeError, match=r"'g' has shape \(2, 1\); expected \(\)"):
        run(v, np.ones((2, 1)), None)
    with pytest.raises(refnorm.ConfigError, match=r"dim=\[2\]; axis 2 is out of range"):
        run(v, np.ones((2, 1)), 2)
    with pytest.raises(refnorm.ConfigError, match="dim=0.5; expected an int or None"):
        run(v, np.ones((2, 1)), 0.5)
    with pytest.raises(refnorm.ConfigError, match="dim=-1 is ambiguous"):
        run(v, np.ones((1, 3)), -1)
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(NAME, {"v": np.ones((2, 3), dtype=np.int64), "g": np.ones((2, 1))})
    with pytest.raises(refnorm.RefnormError, match="missing required input.*'g'"):
        refnorm.evaluate(NAME, {"v": v})
    with pytest.raises(refnorm.UnknownNameError, match="unknown option 'eps'"):
        refnorm.evaluate(NAME, {"v": v, "g": np.ones((2, 1))}, config={"eps": 1e-12})
    with pytest.raises(refnorm.UnknownNameError, match="'norm' are statistics"):
        refnorm.evaluate(NAME, {"v": v, "g": np.ones((2, 1))}, grad_outputs={"norm": np.ones((2, 1))})


def test_weight_norm_nan_stays_in_its_slice():
    rng = np.random.default_rng(12)
    v, g, dw = rng.standard_normal((3, 4)), rng.standard_normal((3, 1)), rng.standard_normal((3, 4))
    for bad_v, bad_g in ((True, False), (False, True)):
        vv, gg = v.copy(), g.copy()
        if bad_v:
            vv[1, 2] = np.nan
        if bad_g:
            gg[1, 0] = np.nan
        res = run(vv, gg, 0, dw=dw)
        # dg = sum(dw * v) / ||v|| does not involve g: NaN in g leaves dg finite (torch too)
        for arr in (res.outputs["w"], res.grads["v"]) + ((res.grads["g"],) if bad_v else ()):
            assert np.isnan(arr[1]).all() and np.isfinite(arr[[0, 2]]).all()
        if bad_g:
            assert np.isfinite(res.grads["g"]).all()
        assert np.isfinite(res.outputs["norm"][[0, 2]]).all()
    vv = v.copy()
    vv[1, 2] = np.inf                            # ||v|| = inf: finite entries 0, the infinite one NaN
    w = run(vv, g, 0).outputs["w"]
    assert np.isnan(w[1, 2]) and (w[1, [0, 1, 3]] == 0).all() and np.isfinite(w[[0, 2]]).all()
