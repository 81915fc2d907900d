"""z_score: properties, numerical gradients, mpmath oracle, torch cross-check, bad input."""
import contextlib
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import refnorm
from helpers import (MP_DPS, affine_along, assert_like_torch, assert_permutation_equivariant_off_axes, check_vjp,
                     drawn_affine, inputs_of, mp_over_slices, oracle_check, record, rel_error, require_torch, to_mp,
                     torch_vjp)
from strategies import shapes, well_spread

NAME = "z_score"


def run(x, dim=-1, weight=None, bias=None, ddof=1, eps=0.0, dy=None):
    return refnorm.evaluate(NAME, inputs_of(x, weight, bias), config={"dim": dim, "ddof": ddof, "eps": eps},
                            grad_outputs=None if dy is None else {"y": dy})


def _axes(x, dim):
    dim = [dim] if isinstance(dim, int) else dim
    return tuple(sorted(d % x.ndim for d in dim))


def _view(p, x, axes):
    return 1.0 if p is None else p.reshape([s if i in axes else 1 for i, s in enumerate(x.shape)])


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=6))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    n = int(np.prod([shape[a] for a in axes]))
    if n == 1:   # n - ddof >= 1 needs n >= 2 for ddof = 1: widen one reduced axis
        shape = tuple(s + 1 if i == axes[0] else s for i, s in enumerate(shape))
        n = 2
    dim = axes[0] - len(shape) if len(axes) == 1 else [a - len(shape) * draw(st.booleans()) for a in axes]
    x = draw(well_spread(shape))
    pshape = tuple(shape[a] for a in sorted(axes))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    w = rng.standard_normal(pshape) if draw(st.booleans()) else None
    b = rng.standard_normal(pshape) if draw(st.booleans()) else None
    ddof = draw(st.integers(0, min(2, n - 1)))
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.3]))
    return x, dim, w, b, ddof, eps


def _std(x, dim, ddof, eps):
    axes = _axes(x, dim)
    n = int(np.prod([x.shape[a] for a in axes]))
    return np.sqrt(x.var(axis=axes, keepdims=True) * n / (n - ddof) + eps)


# ----------------------------------------------------------------------------- properties
@given(case(), st.floats(-1e3, 1e3))
def test_z_score_shift_invariance(c, shift):
    x, dim, w, b, ddof, eps = c
    a, s = run(x, dim, w, b, ddof, eps).outputs["y"], run(x + shift, dim, w, b, ddof, eps).outputs["y"]
    # x + shift rounds each entry by up to ulp(|x| + |shift|) / 2: relative to the std that is the
    # conditioning (|shift| + max|x|) / std, times |weight|; the rest is a few ulps of the output
    wmax = 1.0 if w is None else np.abs(w).max()
    cond = (abs(shift) + np.abs(x).max()) / _std(x, dim, ddof, eps).min()
    assert np.max(np.abs(a - s)) <= 1e-15 * (1 + cond) * wmax * np.sqrt(x.size) + 1e-15 * np.abs(a).max()


@given(case(), st.sampled_from([2.0**-700, 1e-3, 0.5, 7.0, 1e4, 2.0**600]))
def test_z_score_scale_invariance(c, scale):
    # y(a x; a^2 eps) == y(x; eps). The extreme powers of two put (x - mean)^2 far outside float64
    # (1e-421, 1e+361): refnorm's scaled sum of squares must still give the same y
    x, dim, w, b, ddof, eps = c
    scaled_eps = eps * scale * scale
    assume(eps == 0 or 1e-290 < scaled_eps < 1e290)     # the scaled eps must be a normal float
    a = run(x, dim, w, b, ddof, eps).outputs["y"]
    s = run(x * scale, dim, w, b, ddof, scaled_eps).outputs["y"]
    # x * scale rounds each entry by up to ulp(|x|) / 2 (not for the powers of two), which moves y by
    # that over the std, times |weight|: (1 + max|x| / std) is the conditioning. The mean, the
    # deviations, the std and the quotient add a few roundings per entry
    wmax = 1.0 if w is None else np.abs(w).max()
    cond = 1 + np.abs(x).max() / _std(x, dim, ddof, eps).min()
    np.testing.assert_allclose(s, a, rtol=1e-14, atol=1e-15 * cond * wmax + 1e-14 * np.abs(a).max())


@given(case())
def test_z_score_batch_permutation_equivariance(c):
    x, dim, w, b, ddof, eps = c
    assert_permutation_equivariant_off_axes(lambda v: run(v, dim, w, b, ddof, eps).outputs["y"], x, _axes(x, dim))


@given(case())
def test_z_score_outputs_have_zero_mean_and_the_ddof_variance(c):
    # at eps = 0 each slice of yhat has mean 0 and sum of squares n - ddof; mean/std outputs agree
    x, dim, _, _, ddof, _ = c
    axes = _axes(x, dim)
    n = int(np.prod([x.shape[a] for a in axes]))
    res = run(x, dim, ddof=ddof).outputs
    y = res["y"]
    assert np.all(np.abs(y.sum(axis=axes)) <= 1e-14 * n)
    np.testing.assert_allclose((y * y).sum(axis=axes), n - ddof, rtol=1e-14 * n)
    np.testing.assert_allclose(res["mean"], x.mean(axis=axes, keepdims=True),
                               rtol=1e-14, atol=1e-14 * np.abs(x).max())
    np.testing.assert_allclose(res["std"], _std(x, dim, ddof, 0.0), rtol=1e-13)


@given(case())
def test_z_score_gradient_sums_to_zero_and_is_scale_orthogonal(c):
    # sum_A dx = 0 (shift invariance); sum_A dx * (x - mean) = 0 at eps = 0 (scale invariance)
    x, dim, w, b, ddof, eps = c
    axes = _axes(x, dim)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = run(x, dim, w, b, ddof, eps, dy=dy).grads["x"]
    n = int(np.prod([x.shape[a] for a in axes]))
    wmax = 1.0 if w is None else np.abs(w).max()
    # each dx entry is a difference of terms of size (1 + n / (n - ddof) * max|xhat|) |dy w| / std
    std = _std(x, dim, ddof, eps)
    scale = np.abs(dy).max() * wmax * (1 + n * np.sqrt(n)) / std
    assert np.all(np.abs(dx.sum(axis=axes, keepdims=True)) <= 1e-15 * n * scale)
    if eps == 0.0:
        d = x - x.mean(axis=axes, keepdims=True)
        assert np.all(np.abs((dx * d).sum(axis=axes, keepdims=True)) <= 1e-15 * n * scale * np.abs(d).max())


@given(case())
def test_z_score_with_ddof_0_is_layer_norm(c):
    x, _, w, b, _, eps = c
    eps = eps or 1e-5
    k = 1 + (x.ndim > 1 and x.shape[-1] == 1)       # avoid one-element rows (those are 0 either way)
    dim = list(range(-k, 0))
    cfg_ln = {"normalized_shape": list(x.shape[x.ndim - k:]), "eps": eps}
    pshape = x.shape[x.ndim - k:]
    rng = np.random.default_rng(2)
    inputs = {"x": x, "weight": rng.standard_normal(pshape), "bias": rng.standard_normal(pshape)}
    dy = rng.standard_normal(x.shape)
    ln = refnorm.evaluate("layer_norm", inputs, config=cfg_ln, grad_outputs={"y": dy})
    zs = refnorm.evaluate(NAME, inputs, config={"dim": dim, "ddof": 0, "eps": eps}, grad_outputs={"y": dy})
    # the same arithmetic up to the order of a few roundings (hypot vs sqrt(var + eps))
    for key in ("y",):
        np.testing.assert_allclose(zs.outputs[key], ln.outputs[key], rtol=1e-13,
                                   atol=1e-14 * np.abs(ln.outputs[key]).max())
    np.testing.assert_allclose(zs.outputs["std"], 1 / ln.outputs["rstd"], rtol=1e-14)
    # dx is a difference of terms of size |dy w| / std that can cancel almost completely (two-entry
    # rows: y is +-1 up to eps, dx ~ eps); both are then rounding noise of that size
    n = int(np.prod(pshape))
    term = np.abs(dy).max() * np.abs(inputs["weight"]).max() * n * ln.outputs["rstd"].max()
    for key in inputs:
        np.testing.assert_allclose(zs.grads[key], ln.grads[key], rtol=1e-12,
                                   atol=1e-14 * max(np.abs(ln.grads[key]).max(), term))


# ------------------------------------------------------------------- numerical differentiation
@given(case())
def test_z_score_backward_matches_numerical_differentiation(c):
    x, dim, w, b, ddof, eps = c
    inputs = {"x": x, **({"weight": w} if w is not None else {}), **({"bias": b} if b is not None else {})}
    std = _std(x, dim, ddof, eps).min()
    # y varies on the length scale of the smallest slice std, which can be far below 1% of |x|
    # (two close draws): the finite-difference step must be a small fraction of that std
    check_vjp(NAME, inputs, {"dim": dim, "ddof": ddof, "eps": eps}, step=min(1e-2 * np.abs(x).max(), 1e-2 * std),
              wrt=["x"], grad_scale=(1 if w is None else np.abs(w).max()) / std)
    if len(inputs) > 1:
        check_vjp(NAME, inputs, {"dim": dim, "ddof": ddof, "eps": eps}, wrt=[k for k in inputs if k != "x"])


# ----------------------------------------------------------------------------- mpmath oracle
def mp_z_score(dim, ddof, eps):
    """Independent plain-loop forward: each slice flattened, mean and variance by explicit sums."""
    def standardized(row):
        n = len(row)
        mean = mpmath.fsum(row) / n
        std = mpmath.sqrt(mpmath.fsum((v - mean) ** 2 for v in row) / (n - ddof) + mpmath.mpf(eps))
        return [(v - mean) / std if std != 0 else mpmath.mpf(0) for v in row], (mean, std)

    def f(d):
        y, (mean, std) = mp_over_slices(d, _axes(d["x"], dim), standardized)
        return {"y": y, "mean": mean, "std": std}
    return f


def _cond(x, dim):
    # |mean| / std of the worst slice (the biased std: the conditioning of the mean removal)
    axes = _axes(x, dim)
    m = x.mean(axis=axes, keepdims=True)
    s = x.std(axis=axes, keepdims=True)
    c = np.abs(m) / np.where(s == 0, np.inf, s)
    return float(c.max())


ORACLE_CASES = [
    # (label, x, dim, ddof, eps)
    ("randn", np.random.default_rng(0).standard_normal((3, 6)), -1, 1, 0.0),
    ("randn_ddof0", np.random.default_rng(0).standard_normal((3, 6)), -1, 0, 0.0),
    ("randn_ddof2", np.random.default_rng(7).standard_normal((2, 5)), -1, 2, 1e-5),
    ("mean_1e6_std", 1e6 + np.random.default_rng(1).standard_normal((2, 5)), -1, 1, 0.0),
    ("mean_1e6_std_small", 3.0 + 3e-6 * np.random.default_rng(2).standard_normal((2, 5)), -1, 1, 1e-12),
    ("constant_rows_eps1e-12", np.full((2, 4), 0.1), -1, 1, 1e-12),
    ("constant_rows_eps0.3", np.full((2, 4), -7.3), -1, 1, 0.3),
    ("eps_0.3", np.random.default_rng(3).standard_normal((2, 7)), -1, 1, 0.3),
    ("eps_1e-12_tiny_var", 1e-5 * np.random.default_rng(4).standard_normal((2, 5)), -1, 1, 1e-12),
    ("dim_0_2", 5 + np.random.default_rng(5).standard_normal((2, 3, 2)), [0, 2], 1, 1e-3),
    ("dim_1", np.random.default_rng(6).standard_normal((2, 4, 2)), 1, 1, 0.0),
]


@pytest.mark.parametrize("label,x,dim,ddof,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_z_score_matches_mpmath_oracle(label, x, dim, ddof, eps):
    rng = np.random.default_rng(5)
    pshape = tuple(x.shape[a] for a in _axes(x, dim))
    inputs = {"x": x, "weight": rng.standard_normal(pshape), "bias": rng.standard_normal(pshape)}
    oracle_check(NAME, inputs, {"dim": dim, "ddof": ddof, "eps": eps}, mp_z_score(dim, ddof, eps),
                 cond=_cond(x, dim), outputs=("y", "mean", "std"))


@pytest.mark.parametrize("log2", [-700, 600])
def test_z_score_extreme_magnitudes_match_mpmath_forward(log2):
    # (x - mean)^2 underflows (1e-421) or overflows (1e+361) in float64; y and std do not. mp_grads'
    # fixed step (1e-25) cannot differentiate at these scales, so the forward is checked against
    # the oracle and the gradient against the unscaled input: dx(2^k x) = 2^-k dx(x)
    x0 = np.array([[0.0, 1.0, -2.5, 3.0], [1.0, 1.0 + 2**-40, 1.0, 1.0]])
    x = np.ldexp(x0, log2)
    dy = np.random.default_rng(0).standard_normal(x.shape)
    res = run(x, dy=dy)
    worst = 0.0
    with mpmath.workdps(MP_DPS):
        want = mp_z_score(-1, 1, 0.0)({"x": to_mp(x)})
        for key in ("y", "mean", "std"):
            err = rel_error(res.outputs[key], want[key])
            assert err <= 1e-13 * (1 + _cond(x0, -1)), (key, err)
            worst = max(worst, err)
    record(NAME, "mpmath", worst)
    base = run(x0, dy=dy)
    np.testing.assert_allclose(res.outputs["y"], base.outputs["y"], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(np.ldexp(res.grads["x"], log2), base.grads["x"], rtol=1e-14)


# ----------------------------------------------------------------------------- torch float64
def _torch_z_score(torch, dims, ddof, eps):
    """The explicit composition; a safe division makes a constant slice at eps = 0 give 0."""
    def fn(x, weight=None, bias=None):
        mean = x.mean(dims, keepdim=True)
        var = x.var(dims, keepdim=True, correction=ddof) + eps
        # both the sqrt (infinite slope at 0) and the division need the safe branch
        safe = torch.sqrt(torch.where(var == 0, torch.ones_like(var), var))
        y = torch.where(var == 0, torch.zeros_like(x), (x - mean) / safe)
        std = torch.sqrt(var)
        return {"y": affine_along(y, weight, bias, dims), "mean": mean, "std": std}
    return fn


@pytest.mark.parametrize("shape,dim", [((4, 7), -1), ((2, 3, 5), [1, 2]), ((3, 4, 2), 1), ((6,), 0),
                                       ((2, 3, 2, 3), [0, 3])])
@pytest.mark.parametrize("ddof,eps,affine", [(1, 0.0, "none"), (1, 0.0, "both"), (0, 1e-5, "weight"),
                                             (2, 0.3, "both"), (0, 0.0, "none")])
def test_z_score_matches_torch_float64(shape, dim, ddof, eps, affine):
    torch = require_torch()
    rng = np.random.default_rng(7)
    x = 2 + 3 * rng.standard_normal(shape)
    x[0] = 0.5                         # a constant slice for dim = -1 / 1, a partly constant one otherwise
    dims = list(_axes(x, dim))
    pshape = tuple(shape[a] for a in dims)
    inputs = {"x": x, **drawn_affine(rng, affine, pshape)}
    dy = rng.standard_normal(shape)
    t_out, t_grads = torch_vjp(torch, _torch_z_score(torch, dims, ddof, eps), inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"dim": dim, "ddof": ddof, "eps": eps}, grad_outputs={"y": dy})
    assert_like_torch(res, t_out, t_grads, ("y", "mean", "std"), 1e-14, NAME, grad_rtol=1e-13)


def test_z_score_constant_slice_at_eps_zero():
    # y = bias and dx = 0 there (the convention); torch's naive composition gives NaN, its safe
    # composition (tested above) 0. With eps > 0 the same rows are smooth: dx = (g - mean g) / sqrt(eps)
    x = np.array([[0.1, 0.1, 0.1], [1e6, 1e6, 1e6], [1.0, 2.0, 4.0]])
    dy = np.random.default_rng(0).standard_normal(x.shape)
    w, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.25, -1.0])
    res = run(x, weight=w, bias=b, dy=dy)
    np.testing.assert_array_equal(res.outputs["y"][:2], np.broadcast_to(b, (2, 3)))
    np.testing.assert_array_equal(res.outputs["std"][:2], 0.0)
    np.testing.assert_array_equal(res.grads["x"][:2], 0.0)
    for eps in (1e-12, 0.3):
        r = run(x, weight=w, bias=b, eps=eps, dy=dy)
        g = dy[:2] * w
        np.testing.assert_allclose(r.grads["x"][:2], (g - g.mean(axis=1, keepdims=True)) / np.sqrt(eps),
                                   rtol=1e-14)
    torch = require_torch()
    t = torch.tensor(x)
    naive = (t - t.mean(1, keepdim=True)) / t.std(1, keepdim=True)
    # torch: NaN (0/0) for the 1e6 row, and -inf for the 0.1 row: torch.mean([0.1] * 3) is
    # 0.10000000000000002 while torch.std gives 0. refnorm's re-centred deviations are exactly 0
    assert not torch.isfinite(naive[:2]).any()
    np.testing.assert_array_equal(res.outputs["mean"][:2, 0], x[:2, 0])


@contextlib.contextmanager
def _torch_dof_warning_expected():
    """torch.std warns when n - ddof <= 0, the very case these tests compare against: silence that
    one warning here, and nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"std\(\): degrees of freedom is <= 0", category=UserWarning)
        yield


def test_z_score_too_few_elements_for_ddof():
    # n - ddof <= 0: the variance is undefined, std and y are NaN (torch: NaN for n == ddof)
    torch = require_torch()
    x = np.array([[1.0], [2.0]])
    res = run(x, ddof=1, dy=np.ones_like(x))
    t = torch.tensor(x)
    with _torch_dof_warning_expected():
        t_y = (t - t.mean(-1, keepdim=True)) / t.std(-1, keepdim=True)
    np.testing.assert_array_equal(res.outputs["y"], t_y.numpy())
    assert np.isnan(res.outputs["std"]).all() and np.isnan(res.grads["x"]).all()
    np.testing.assert_array_equal(res.outputs["mean"], x)
    x2 = np.array([[1.0, 3.0]])
    assert np.isnan(run(x2, ddof=2).outputs["y"]).all() and np.isnan(run(x2, ddof=3).outputs["std"]).all()
    assert np.isfinite(run(x2, ddof=1).outputs["y"]).all()


def test_z_score_empty_like_torch():
    torch = require_torch()
    for shape, dim in [((2, 0), -1), ((0, 4), -1), ((0, 3), [0, 1]), ((2, 0, 3), [0, 2])]:
        x = np.zeros(shape)
        dims = list(_axes(x, dim))
        t = torch.tensor(x)
        t_mean = t.mean(dims, keepdim=True)
        with _torch_dof_warning_expected():
            t_std = t.std(dims, keepdim=True)
        res = run(x, dim, dy=np.zeros(shape))
        np.testing.assert_array_equal(res.outputs["mean"], t_mean.numpy())
        np.testing.assert_array_equal(res.outputs["std"], t_std.numpy())
        assert res.outputs["y"].shape == shape and res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- bad input, NaN
def test_z_score_rejects_bad_input():
    x = np.ones((2, 3))
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(4,\); expected \(3,\)"):
        run(x, weight=np.ones(4))
    with pytest.raises(refnorm.ShapeError, match=r"'bias' has shape \(3,\); expected \(2, 3\)"):
        run(x, dim=[0, 1], bias=np.ones(3))
    with pytest.raises(refnorm.ConfigError, match="eps=-0.5"):
        run(x, eps=-0.5)
    with pytest.raises(refnorm.ConfigError, match="ddof=-1; expected an integer >= 0"):
        run(x, ddof=-1)
    with pytest.raises(refnorm.ConfigError, match="ddof=0.5; expected an integer"):
        run(x, ddof=0.5)
    with pytest.raises(refnorm.ConfigError, match="axis -3 is out of range"):
        run(x, dim=-3)
    with pytest.raises(refnorm.ConfigError, match="non-empty list"):
        run(x, dim=[])
    with pytest.raises(refnorm.InputTypeError, match="int32"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3), dtype=np.int32)})
    with pytest.raises(refnorm.UnknownNameError, match="'correction'"):
        refnorm.evaluate(NAME, {"x": x}, config={"correction": 1})
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape"):
        refnorm.evaluate(NAME, {"x": x}, grad_outputs={"y": np.ones((3, 2))})


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_z_score_nonfinite_stays_in_its_slice(bad):
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[1, 2] = bad
    res = run(x, dy=np.ones_like(x) + np.arange(4))
    y, dx = res.outputs["y"], res.grads["x"]
    assert np.isnan(y[1]).all() and np.isnan(dx[1]).all()
    assert np.isfinite(y[[0, 2]]).all() and np.isfinite(dx[[0, 2]]).all()
    clean = run(x[[0, 2]], dy=(np.ones_like(x) + np.arange(4))[[0, 2]])
    np.testing.assert_array_equal(y[[0, 2]], clean.outputs["y"])
    np.testing.assert_array_equal(dx[[0, 2]], clean.grads["x"])
