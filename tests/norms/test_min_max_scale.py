"""min_max_scale: properties, numerical gradients, mpmath oracle, torch cross-check, ties, bad input."""
import itertools

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import given, strategies as st

import refnorm
from helpers import (MP_DPS, affine_along, assert_like_torch, assert_permutation_equivariant_off_axes, check_vjp,
                     drawn_affine, inputs_of, mp_over_slices, oracle_check, record, rel_error, require_torch, to_mp,
                     torch_vjp)
from strategies import shapes

NAME = "min_max_scale"


def run(x, dim=-1, weight=None, bias=None, eps=0.0, dy=None):
    return refnorm.evaluate(NAME, inputs_of(x, weight, bias), config={"dim": dim, "eps": eps},
                            grad_outputs=None if dy is None else {"y": dy})


def _axes(x, dim):
    dim = [dim] if isinstance(dim, int) else dim
    return tuple(sorted(d % x.ndim for d in dim))


@st.composite
def distinct(draw, shape):
    """Arrays whose elements all differ by at least 0.4 * spread / size: no ties, none near.

    Offset and spread are drawn; the values are a random permutation of a jittered grid.
    """
    size = int(np.prod(shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    offset = draw(st.floats(-10, 10))
    spread = draw(st.floats(1e-2, 10))
    grid = rng.permutation(size) + rng.uniform(-0.3, 0.3, size)
    return offset + spread * grid.reshape(shape) / max(size, 1), 0.4 * spread / max(size, 1)


@st.composite
def case(draw, eps_choices=(0.0, 1e-12, 1e-3, 0.3)):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=6))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    dim = axes[0] - len(shape) if len(axes) == 1 else [a - len(shape) * draw(st.booleans()) for a in axes]
    x, gap = draw(distinct(shape))
    pshape = tuple(shape[a] for a in sorted(axes))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    w = rng.standard_normal(pshape) if draw(st.booleans()) else None
    b = rng.standard_normal(pshape) if draw(st.booleans()) else None
    eps = draw(st.sampled_from(eps_choices))
    return x, dim, w, b, eps, gap


def _range(x, dim):
    axes = _axes(x, dim)
    return x.max(axis=axes, keepdims=True) - x.min(axis=axes, keepdims=True)


# ----------------------------------------------------------------------------- properties
@given(case(), st.floats(-1e3, 1e3))
def test_min_max_scale_shift_invariance(c, shift):
    x, dim, w, b, eps, _ = c
    a, s = run(x, dim, w, b, eps).outputs["y"], run(x + shift, dim, w, b, eps).outputs["y"]
    # x + shift rounds each entry by up to ulp(|x| + |shift|) / 2; that moves yhat by that over the
    # range, times |weight|; the rest of the computation is a few ulps of yhat (<= 1)
    wmax = 1.0 if w is None else np.abs(w).max()
    den = _range(x, dim).min() + eps         # 0: a constant slice with eps 0, where no bound holds
    bound = 4e-16 * (abs(shift) + np.abs(x).max()) / den * wmax if den > 0 else np.inf
    assert np.max(np.abs(a - s)) <= bound + 8e-16 * max(1.0, np.abs(a).max())


@given(case(), st.sampled_from([-1000, -3, 1, 700]))
def test_min_max_scale_power_of_two_scaling_is_exact(c, k):
    # y(2^k x; 2^k eps) == y(x; eps) bitwise: eps is added to the range, so it scales linearly, and
    # scaling by a power of two changes no rounding (the values stay normal floats)
    x, dim, w, b, eps, _ = c
    a = run(x, dim, w, b, eps).outputs["y"]
    s = run(np.ldexp(x, k), dim, w, b, np.ldexp(eps, k)).outputs["y"]
    np.testing.assert_array_equal(s, a)


@given(case(eps_choices=(0.0,)))
def test_min_max_scale_maps_each_slice_onto_0_1_monotonically(c):
    x, dim, _, _, _, _ = c
    axes = _axes(x, dim)
    y = run(x, dim).outputs["y"]
    n = int(np.prod([x.shape[a] for a in axes]))
    # a non-constant slice (n > 1: all entries distinct) reaches exactly 0 at its min and 1 at its max
    assert np.all(y.min(axis=axes) == 0.0)
    assert np.all(y.max(axis=axes) == (1.0 if n > 1 else 0.0))
    # order is preserved within each slice
    xs = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim)).reshape(-1, n)
    ys = np.moveaxis(y, axes, range(x.ndim - len(axes), x.ndim)).reshape(-1, n)
    order = np.argsort(xs, axis=1)
    assert np.all(np.diff(np.take_along_axis(ys, order, axis=1), axis=1) >= 0)


@given(case())
def test_min_max_scale_batch_permutation_equivariance(c):
    x, dim, w, b, eps, _ = c
    assert_permutation_equivariant_off_axes(lambda v: run(v, dim, w, b, eps).outputs["y"], x, _axes(x, dim))


@given(case())
def test_min_max_scale_gradient_sum_and_euler_identities(c):
    # sum_A dx = 0 (shift invariance) and sum_A dx * (x - min) = eps * sum_A(g * yhat) / D
    # (homogeneity: y(a x, a eps) = y(x, eps); zero at eps = 0)
    x, dim, w, b, eps, _ = c
    axes = _axes(x, dim)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    res = run(x, dim, w, b, eps, dy=dy)
    dx = res.grads["x"]
    lo, hi = res.outputs["min"], res.outputs["max"]
    den = hi - lo + eps
    const = den == 0                       # one-entry slices at eps = 0: the y = 0 convention, dx = 0
    assert np.all(dx[np.broadcast_to(const, x.shape)] == 0)
    den = np.where(const, 1.0, den)
    yhat = np.where(const, 0.0, (x - lo) / den)
    wv = 1.0 if w is None else w.reshape([s if i in axes else 1 for i, s in enumerate(x.shape)])
    g = dy * wv
    n = int(np.prod([x.shape[a] for a in axes]))
    # every dx entry is at most (|g| + n |g|) / D; n of them are summed: 1e-15 * n of that scale
    scale = np.abs(g).max() * (1 + n) / den
    assert np.all(np.abs(dx.sum(axis=axes, keepdims=True)) <= 1e-15 * n * scale)
    want = np.where(const, 0.0, eps * (g * yhat).sum(axis=axes, keepdims=True) / den)
    got = (dx * (x - lo)).sum(axis=axes, keepdims=True)
    # the products dx * (x - min) are at most scale * D each
    assert np.all(np.abs(got - want) <= 1e-15 * n * scale * den)


# ------------------------------------------------------------------- numerical differentiation
@given(case())
def test_min_max_scale_backward_matches_numerical_differentiation(c):
    x, dim, w, b, eps, gap = c
    inputs = {"x": x, **({"weight": w} if w is not None else {}), **({"bias": b} if b is not None else {})}
    n = int(np.prod([x.shape[a] for a in _axes(x, dim)]))
    # no ties and none within reach: the largest finite-difference offset (step * |t|, |t| < ~6 for
    # a normal draw over <= 1296 entries) stays below a fifth of the smallest gap between entries,
    # so the min and max are the same entries along the whole stencil (y is smooth there)
    wmax = 1.0 if w is None else np.abs(w).max()
    den = _range(x, dim).min() + eps         # 0: a constant slice with eps 0 (an unbounded gradient scale)
    check_vjp(NAME, inputs, {"dim": dim, "eps": eps}, step=gap / 30, wrt=["x"],
              grad_scale=(1 + n) * wmax / den if den > 0 else np.inf)
    if len(inputs) > 1:
        check_vjp(NAME, inputs, {"dim": dim, "eps": eps}, wrt=[k for k in inputs if k != "x"])


# ----------------------------------------------------------------------------- ties
def _tie_average_gradient(xrow, grow, eps):
    """Hand computation with sympy: the even-split rule is the average, over every choice of one
    tied max entry i and one tied min entry j, of the gradient of the smooth function
    f_ij(x) = sum_k g_k (x_k - x_j) / (x_i - x_j + eps) (differentiated symbolically)."""
    xs = sympy.symbols(f"x0:{len(xrow)}")
    xr = [sympy.Rational(v) for v in xrow]
    e = sympy.Rational(eps)
    imax = [i for i, v in enumerate(xrow) if v == max(xrow)]
    imin = [j for j, v in enumerate(xrow) if v == min(xrow)]
    total = [sympy.Integer(0)] * len(xrow)
    for i, j in itertools.product(imax, imin):
        f = sum(sympy.Rational(gk) * (xs[k] - xs[j]) for k, gk in enumerate(grow)) / (xs[i] - xs[j] + e)
        for k in range(len(xrow)):
            total[k] += sympy.diff(f, xs[k]).subs(dict(zip(xs, xr)))
    return np.array([float(t / (len(imax) * len(imin))) for t in total])


@pytest.mark.parametrize("row,eps", [
    ([1.0, 3.0, 3.0, 0.0, 0.0, 0.0], 0.0),        # max tied twice, min three times
    ([2.5, -1.0, 2.5, 2.5, 0.5, -1.0], 0.0),
    ([0.25, 0.25, 0.25, 0.25], 0.5),              # constant row, eps > 0: every entry ties for both
    ([4.0, -2.0, 1.0, 4.0], 0.125),
])
def test_min_max_scale_ties_match_hand_computation(row, eps):
    x = np.array([row])
    g = np.random.default_rng(3).integers(-5, 6, x.shape).astype(float)
    res = run(x, eps=eps, dy=g)
    want = _tie_average_gradient(row, list(g[0]), eps)
    np.testing.assert_allclose(res.grads["x"][0], want, rtol=1e-15, atol=1e-15 * np.abs(want).max())


def _torch_min_max(torch, dims, eps):
    """The explicit composition, with a safe division so a constant slice at eps = 0 gives 0."""
    def fn(x, weight=None, bias=None):
        lo, hi = x.amin(dims, keepdim=True), x.amax(dims, keepdim=True)
        den = hi - lo + eps
        y = torch.where(den == 0, torch.zeros_like(x), (x - lo) / torch.where(den == 0, torch.ones_like(den), den))
        return {"y": affine_along(y, weight, bias, dims), "min": lo, "max": hi}
    return fn


@pytest.mark.parametrize("shape,dim", [((4, 7), -1), ((2, 3, 5), [1, 2]), ((3, 4, 2), 1), ((6,), 0),
                                       ((2, 3, 2, 3), [0, 3])])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("eps,affine", [(0.0, "none"), (0.0, "both"), (1e-3, "weight"), (0.7, "both")])
def test_min_max_scale_matches_torch_float64(shape, dim, ties, eps, affine):
    torch = require_torch()
    rng = np.random.default_rng(7)
    x = 2 + 3 * rng.standard_normal(shape)
    if ties:   # small integers: many entries tie for the min and the max, and some slices are constant
        x = rng.integers(-1, 2, shape).astype(float) * 1.5
    dims = _axes(x, dim)
    pshape = tuple(shape[a] for a in dims)
    inputs = {"x": x, **drawn_affine(rng, affine, pshape)}
    dy = rng.standard_normal(shape)
    t_out, t_grads = torch_vjp(torch, _torch_min_max(torch, list(dims), eps), inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"dim": dim, "eps": eps}, grad_outputs={"y": dy})
    # the gradients: a handful of roundings on either side; torch sums in a different order: 1e-14 of the scale
    assert_like_torch(res, t_out, t_grads, ("y", "min", "max"), 1e-15, NAME, grad_rtol=1e-14)


def test_torch_amax_splits_the_gradient_evenly_among_ties():
    # the rule this module copies, checked on torch itself (and torch.max over a dim, which differs)
    torch = require_torch()
    x = torch.tensor([1.0, 3.0, 3.0, 0.0, 0.0, 0.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(2 * x.amax(0) + 3 * x.amin(0), x)
    np.testing.assert_array_equal(g.numpy(), [0, 1, 1, 1, 1, 1])          # 2/2 and 3/3
    (g,) = torch.autograd.grad(x.max(0).values, x)
    assert g.sum().item() == 1 and (g > 0).sum().item() == 1              # all to one index
    # and refnorm follows it on that row (amax/amin composition, cotangent 0..5)
    xr = np.array([1.0, 3.0, 3.0, 0.0, 0.0, 0.0])
    _, t_grads = torch_vjp(torch, _torch_min_max(torch, [0], 0.0), {"x": xr}, {"y": np.arange(6.0)})
    np.testing.assert_allclose(run(xr, dim=0, dy=np.arange(6.0)).grads["x"], t_grads["x"], rtol=1e-15, atol=1e-15)


def test_min_max_scale_constant_slices():
    x = np.array([[0.1, 0.1, 0.1], [-7.0, -7.0, -7.0], [1.0, 2.0, 4.0]])
    dy = np.random.default_rng(0).standard_normal(x.shape)
    w, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.25, -1.0])
    r0 = run(x, weight=w, bias=b, eps=0.0, dy=dy)
    # eps = 0: y = bias (yhat = 0), dx = 0, dweight gets nothing from the constant rows
    np.testing.assert_array_equal(r0.outputs["y"][:2], np.broadcast_to(b, (2, 3)))
    np.testing.assert_array_equal(r0.grads["x"][:2], 0.0)
    yhat_row2 = (x[2] - 1.0) / 3.0
    np.testing.assert_allclose(r0.grads["weight"], dy[2] * yhat_row2, rtol=1e-15)
    # eps > 0: y = bias, dx = (g - mean(g)) / eps with g = dy * w (all entries tie for min and max)
    for eps in (1e-12, 0.3):
        r = run(x, weight=w, bias=b, eps=eps, dy=dy)
        np.testing.assert_array_equal(r.outputs["y"][:2], np.broadcast_to(b, (2, 3)))
        g = dy[:2] * w
        np.testing.assert_allclose(r.grads["x"][:2], (g - g.mean(axis=1, keepdims=True)) / eps, rtol=1e-14)
    # the torch composition: naive gives NaN, the safe one gives refnorm's 0 and 0
    torch = require_torch()
    t = torch.tensor(x, requires_grad=True)
    naive = (t - t.amin(1, keepdim=True)) / (t.amax(1, keepdim=True) - t.amin(1, keepdim=True))
    assert torch.isnan(naive[:2]).all()
    t_out, t_grads = torch_vjp(torch, _torch_min_max(torch, [1], 0.0), {"x": x}, {"y": dy})
    r = run(x, dy=dy)
    np.testing.assert_array_equal(r.outputs["y"][:2], t_out["y"][:2])
    np.testing.assert_array_equal(r.grads["x"][:2], t_grads["x"][:2])


# ----------------------------------------------------------------------------- mpmath oracle
def mp_min_max(dim, eps):
    """Independent plain-loop forward: each slice flattened, min/max by Python's min()/max()."""
    def scaled(row):
        lo, hi = min(row), max(row)
        den = hi - lo + mpmath.mpf(eps)
        return [(v - lo) / den if den != 0 else mpmath.mpf(0) for v in row], (lo, hi)

    def f(d):
        y, (lo, hi) = mp_over_slices(d, _axes(d["x"], dim), scaled)
        return {"y": y, "min": lo, "max": hi}
    return f


ORACLE_CASES = [
    # (label, x, dim, eps)
    ("randn", np.random.default_rng(0).standard_normal((3, 6)), -1, 0.0),
    ("mean_1e6_std", 1e6 + np.random.default_rng(1).standard_normal((2, 5)), -1, 0.0),
    ("mean_1e6_std_eps1e-12", 3.0 + 3e-6 * np.random.default_rng(2).standard_normal((2, 5)), -1, 1e-12),
    ("eps_0.3", np.random.default_rng(3).standard_normal((2, 7)), -1, 0.3),
    ("eps_1e-12_tiny_range", 1e-5 * np.random.default_rng(4).standard_normal((2, 5)), -1, 1e-12),
    ("dim_0_1", np.random.default_rng(5).standard_normal((2, 3, 2)), [0, 1], 1e-3),
    ("dim_1", np.random.default_rng(6).standard_normal((2, 4, 2)), 1, 0.0),
]


@pytest.mark.parametrize("label,x,dim,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_min_max_scale_matches_mpmath_oracle(label, x, dim, eps):
    # cond = 0: x - min and max - min are single correctly rounded subtractions of two floats, so an
    # offset of 1e6 times the spread costs no accuracy (the 1e6 cases check exactly that).
    # Inputs are tie-free (continuous draws): mp_grads' central differences across a tie give the
    # average of the one-sided slopes (1/2 for any number of ties), not a derivative
    rng = np.random.default_rng(5)
    pshape = tuple(x.shape[a] for a in _axes(x, dim))
    inputs = {"x": x, "weight": rng.standard_normal(pshape), "bias": rng.standard_normal(pshape)}
    oracle_check(NAME, inputs, {"dim": dim, "eps": eps}, mp_min_max(dim, eps), cond=0.0,
                 outputs=("y", "min", "max"))


def test_min_max_scale_constant_rows_match_mpmath_forward():
    # constant rows are ties of every entry (no derivative: gradients are tested above by hand and
    # against torch); the forward is compared with the oracle's convention-following loop
    x = np.array([[0.1] * 4, [-7.3] * 4, [1e6, 1e6 + 1, 1e6 - 2, 1e6]])
    worst = 0.0
    for eps in (0.0, 1e-12, 0.3):
        res = run(x, eps=eps).outputs
        with mpmath.workdps(MP_DPS):
            want = mp_min_max(-1, eps)({"x": to_mp(x)})
            for key in ("y", "min", "max"):
                err = rel_error(res[key], want[key])
                assert err <= 1e-13, (key, eps, err)
                worst = max(worst, err)
    record(NAME, "mpmath", worst)


@pytest.mark.parametrize("eps", [0.0, 1e300])
def test_min_max_scale_range_overflow(eps):
    # max - min (+ eps) overflows though the true y is finite: refnorm scales by 1/4 first.
    # Forward against mpmath; the gradient against the unscaled input (dx(2^k x) = 2^-k dx(x))
    x = np.array([[-1.2e308, 1.5e308, 0.0, 5e307, -1e307]])
    res = run(x, eps=eps, dy=np.arange(5.0)[None])
    with mpmath.workdps(MP_DPS):
        want = mp_min_max(-1, eps)({"x": to_mp(x)})
        err = rel_error(res.outputs["y"], want["y"])
    assert err <= 1e-15
    record(NAME, "mpmath", err)
    small = run(np.ldexp(x, -1000), eps=np.ldexp(eps, -1000), dy=np.arange(5.0)[None])
    np.testing.assert_array_equal(res.outputs["y"], small.outputs["y"])
    np.testing.assert_allclose(res.grads["x"], np.ldexp(small.grads["x"], -1000), rtol=1e-13)


# ----------------------------------------------------------------------------- empty
def test_min_max_scale_empty_like_torch():
    torch = require_torch()
    x = np.zeros((0, 4))
    t = torch.tensor(x)
    res = run(x, dy=np.zeros_like(x))
    assert res.outputs["y"].shape == (0, 4) and res.grads["x"].shape == (0, 4)
    assert res.outputs["min"].shape == tuple(t.amin(-1, keepdim=True).shape) == (0, 1)
    # an empty slice has no min or max: torch raises, refnorm raises ShapeError
    for shape, dim in [((2, 0), -1), ((0, 3), [0, 1])]:
        with pytest.raises(IndexError, match="non-zero size"):
            torch.zeros(shape, dtype=torch.float64).amax(dim)
        with pytest.raises(refnorm.ShapeError, match="has size 0"):
            run(np.zeros(shape), dim)


# ----------------------------------------------------------------------------- bad input, NaN
def test_min_max_scale_rejects_bad_input():
    x = np.ones((2, 3))
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(4,\); expected \(3,\)"):
        run(x, weight=np.ones(4))
    with pytest.raises(refnorm.ShapeError, match=r"'bias' has shape \(3,\); expected \(2,\)"):
        run(x, dim=0, bias=np.ones(3))
    with pytest.raises(refnorm.ConfigError, match="eps=-0.5"):
        run(x, eps=-0.5)
    with pytest.raises(refnorm.ConfigError, match="axis 2 is out of range"):
        run(x, dim=2)
    with pytest.raises(refnorm.ConfigError, match="repeats an axis"):
        run(x, dim=[1, -1])
    with pytest.raises(refnorm.ConfigError, match="non-empty list"):
        run(x, dim=[])
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3), dtype=np.int64)})
    with pytest.raises(refnorm.UnknownNameError, match="'axis'"):
        refnorm.evaluate(NAME, {"x": x}, config={"axis": -1})
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape"):
        refnorm.evaluate(NAME, {"x": x}, grad_outputs={"y": np.ones(3)})
    with pytest.raises(refnorm.UnknownNameError, match="'min' are statistics"):
        refnorm.evaluate(NAME, {"x": x}, grad_outputs={"min": np.ones((2, 1))})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_min_max_scale_nonfinite_stays_in_its_slice(bad):
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[1, 2] = bad
    res = run(x, dy=np.ones_like(x) + np.arange(4))
    y, dx = res.outputs["y"], res.grads["x"]
    assert np.isfinite(y[[0, 2]]).all() and np.isfinite(dx[[0, 2]]).all()
    np.testing.assert_array_equal(y[[0, 2]], run(x[[0, 2]]).outputs["y"])
    if np.isnan(bad):
        assert np.isnan(y[1]).all() and np.isnan(dx[1]).all()
    elif bad > 0:   # the range is Inf: the +Inf entry gives inf/inf = NaN, the finite ones 0
        assert np.isnan(y[1, 2]) and np.all(y[1, [0, 1, 3]] == 0) and np.isnan(dx[1]).all()
    else:           # min = -Inf: x - min is Inf (finite x) or NaN, over an Inf range: all NaN
        assert np.isnan(y[1]).all() and np.isnan(dx[1]).all()
    torch = require_torch()
    t = torch.tensor(x)
    t_y = (t - t.amin(1, keepdim=True)) / (t.amax(1, keepdim=True) - t.amin(1, keepdim=True))
    np.testing.assert_array_equal(y, t_y.numpy())      # same NaN pattern and values as torch
    t_out, t_grads = torch_vjp(torch, _torch_min_max(torch, [1], 0.0), {"x": x}, {"y": np.ones_like(x)})
    np.testing.assert_array_equal(np.isnan(dx), np.isnan(t_grads["x"]))
