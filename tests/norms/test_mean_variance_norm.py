"""mean_variance_norm: properties, numerical gradients, mpmath oracle, ONNX-spec transcription, torch
autograd of the same formula, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (assert_close_rel, check_vjp, cond_number, oracle_check, require_torch,
                     rel_error, to_mp, torch_vjp)
from strategies import shapes, well_spread

NAME = "mean_variance_norm"


def run(x, axes=(0, 2, 3), eps=1e-9, dy=None):
    return refnorm.evaluate(NAME, {"x": x}, config={"axes": list(axes), "eps": eps},
                            grad_outputs=None if dy is None else {"y": dy})


def norm_axes(axes, ndim):
    return tuple(sorted(a % ndim for a in axes))


def slice_size(x, axes):
    return int(np.prod([x.shape[a] for a in norm_axes(axes, x.ndim)]))


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=5))
    nd = len(shape)
    axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
    # each axis spelled from either end (the module normalizes negative axes)
    signs = draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)))
    axes = [a - nd if s else a for a, s in zip(axes, signs)]
    x = draw(well_spread(shape))
    n = int(np.prod([shape[a] for a in axes]))
    # eps = 0 with a one-element slice is 0/0 (NaN): drawn only where slices have spread
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-9, 1e-3, 0.3] if n > 1 else [1e-9, 0.3]))
    return x, axes, eps


def min_std(x, axes):
    return float(np.sqrt(x.var(axis=norm_axes(axes, x.ndim)).min()))


@given(case(), st.floats(-1e3, 1e3))
def test_mean_variance_norm_shift_invariance(c, shift):
    x, axes, eps = c
    a, s = run(x, axes, eps).outputs["y"], run(x + shift, axes, eps).outputs["y"]
    # x + shift is rounded: up to 1.1e-16 * (|shift| + |x|) absolute, divided by the std in y;
    # the two-pass algorithm adds a few ulps of |y|
    cond = 1 + (abs(shift) + np.abs(x).max()) / max(min_std(x, axes), 1e-300)
    assert np.max(np.abs(a - s)) <= 1e-15 * cond * max(1.0, np.abs(a).max())


@given(case(), st.sampled_from([1e-3, 0.5, 7.0, 1e4]))
def test_mean_variance_norm_scale_invariance_with_eps_scaled_linearly(c, scale):
    x, axes, eps = c
    # eps is added to the std, so it scales with x itself (not with scale^2, as eps inside the root)
    a = run(x, axes, eps).outputs["y"]
    s = run(x * scale, axes, eps * scale).outputs["y"]
    # rounding x * scale (0.5 ulp of |x|) moves the deviations by 1.1e-16 |x| / std of |y|
    cond = 1 + np.abs(x).max() / max(min_std(x, axes), 1e-300)
    assert np.max(np.abs(s - a)) <= 1e-15 * cond * max(1.0, np.abs(a).max())


@given(case())
def test_mean_variance_norm_permutation_equivariance(c):
    x, axes, eps = c
    A = norm_axes(axes, x.ndim)
    rng = np.random.default_rng(0)
    a = run(x, axes, eps)
    for ax in range(x.ndim):
        perm = rng.permutation(x.shape[ax])
        p = run(np.take(x, perm, axis=ax), axes, eps)
        if ax not in A:      # slices are reordered, each computed alone: bit-identical
            np.testing.assert_array_equal(p.outputs["y"], np.take(a.outputs["y"], perm, axis=ax))
            np.testing.assert_array_equal(p.outputs["std"], np.take(a.outputs["std"], perm, axis=ax))
        else:                # elements reordered inside a slice: only the summation order changes
            np.testing.assert_allclose(p.outputs["y"], np.take(a.outputs["y"], perm, axis=ax),
                                       rtol=0, atol=1e-14 * max(1.0, np.abs(a.outputs["y"]).max()))


@given(case())
def test_mean_variance_norm_gradient_sums_to_zero_per_slice(c):
    x, axes, eps = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = run(x, axes, eps, dy=dy).grads["x"]
    A = norm_axes(axes, x.ndim)
    # each dx element is a difference of terms of size |dy| / (std + eps): their sum cancels to rounding
    scale = np.abs(dy).max() / (min_std(x, axes) + eps)
    assert np.max(np.abs(dx.sum(axis=A))) <= 1e-15 * scale * slice_size(x, axes)


@given(case())
def test_mean_variance_norm_at_eps_zero_is_layer_norm_at_eps_zero(c):
    x, _, eps = c
    k = 1 + x.ndim // 2 if x.ndim > 1 else 1
    axes = list(range(x.ndim - k, x.ndim))
    if slice_size(x, axes) == 1:
        return                               # 0/0 at eps = 0
    dy = np.random.default_rng(2).standard_normal(x.shape)
    m = run(x, axes, 0.0, dy=dy)
    ln = refnorm.evaluate("layer_norm", {"x": x}, config={"normalized_shape": list(x.shape[x.ndim - k:]),
                                                          "eps": 0.0}, grad_outputs={"y": dy})
    # same deviations; std = 2^k sqrt(mean((d/2^k)^2)) vs sqrt(mean(d^2)): an ulp or two apart
    np.testing.assert_allclose(m.outputs["y"], ln.outputs["y"], rtol=0, atol=1e-15 * np.abs(ln.outputs["y"]).max())
    np.testing.assert_allclose(m.outputs["std"], 1 / ln.outputs["rstd"], rtol=1e-15)
    np.testing.assert_allclose(m.grads["x"], ln.grads["x"], rtol=0,
                               atol=1e-14 * np.abs(dy).max() * ln.outputs["rstd"].max())


@given(case())
def test_mean_variance_norm_backward_matches_numerical_differentiation(c):
    x, axes, eps = c
    check_vjp(NAME, {"x": x}, {"axes": axes, "eps": eps}, grad_scale=1 / (min_std(x, axes) + eps))


# ----------------------------------------------------------------------------- mpmath oracle
def mp_mean_variance_norm(axes, eps):
    """Plain loops over the slices, in mpmath: y = (x - mean) / (sqrt(biased var) + eps)."""
    def f(d):
        x = d["x"]
        A = norm_axes(axes, x.ndim)
        kept = [a for a in range(x.ndim) if a not in A]
        stat_shape = tuple(1 if a in A else s for a, s in enumerate(x.shape))
        y = np.empty(x.shape, dtype=object)
        mean, std = np.empty(stat_shape, dtype=object), np.empty(stat_shape, dtype=object)
        for key in np.ndindex(stat_shape):
            idxs = [i for i in np.ndindex(x.shape) if all(i[a] == key[a] for a in kept)]
            vals = [x[i] for i in idxs]
            m = mpmath.fsum(vals) / len(vals)
            s = mpmath.sqrt(mpmath.fsum((v - m) ** 2 for v in vals) / len(vals))
            mean[key], std[key] = m, s
            for i in idxs:
                y[i] = (x[i] - m) / (s + mpmath.mpf(eps))
        return {"y": y, "mean": mean, "std": std}
    return f


ORACLE_CASES = [
    # (name, x, axes, eps)
    ("randn_default_axes", np.random.default_rng(0).standard_normal((2, 3, 2, 2)), [0, 2, 3], 1e-9),
    ("mean_1e6_std", 1e6 + np.random.default_rng(1).standard_normal((2, 2, 2, 2)), [0, 2, 3], 1e-9),
    ("mean_1e6_std_small", 3.0 + 3e-6 * np.random.default_rng(2).standard_normal((2, 5)), [-1], 1e-12),
    ("constant_slices", np.full((2, 2, 1, 2), 0.1), [0, 2, 3], 1e-9),
    ("constant_slices_eps0.3", np.full((3, 4), -7.3), [1], 0.3),
    ("constant_and_random", np.concatenate([np.full((1, 4), 2.5), np.arange(4.0)[None]]), [-1], 1e-3),
    ("eps_0.3", np.random.default_rng(3).standard_normal((3, 2, 3)), [0, -1], 0.3),
    ("eps_1e-12_tiny_var", 1e-5 * np.random.default_rng(4).standard_normal((2, 6)), [1], 1e-12),
    ("eps_0", np.random.default_rng(5).standard_normal((4, 3)), [0], 0.0),
]


@pytest.mark.parametrize("label,x,axes,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_mean_variance_norm_matches_mpmath_oracle(label, x, axes, eps):
    oracle_check(NAME, {"x": x}, {"axes": axes, "eps": eps}, mp_mean_variance_norm(axes, eps),
                 cond=cond_number(x, norm_axes(axes, x.ndim)), outputs=("y", "mean", "std"))


# ----------------------------------------------------------------------------- ONNX spec transcription
def onnx_mvn(x, axes=(0, 2, 3)):
    """ONNX MeanVarianceNormalization-13's function body, node by node, in float64 NumPy:
    X_RM = ReduceMean(X); EX_squared = Pow(X_RM, 2); X_squared = Pow(X, 2);
    E_Xsquared = ReduceMean(X_squared); Variance = Sub(E_Xsquared, EX_squared); STD = Sqrt(Variance);
    X_variance = Sub(X, X_RM); Processed_STD = Add(STD, 1e-9); Y = Div(X_variance, Processed_STD)."""
    axes = tuple(axes)
    x_rm = np.mean(x, axis=axes, keepdims=True)
    variance = np.mean(np.power(x, 2.0), axis=axes, keepdims=True) - np.power(x_rm, 2.0)
    with np.errstate(invalid="ignore"):
        return (x - x_rm) / (np.sqrt(variance) + 1e-9)


@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), [0, 2, 3]), ((3, 4, 5), [0, 2]), ((4, 6), [1]),
                                        ((2, 3, 4, 5), [-1, -2]), ((2, 3, 4), [0, 1, 2]), ((5, 1, 3, 3), [0, 2, 3])])
@pytest.mark.parametrize("offset", [0.0, 2.0, 30.0])
def test_mean_variance_norm_matches_onnx_spec_transcription(shape, axes, offset):
    x = offset + np.random.default_rng(6).standard_normal(shape)
    want = onnx_mvn(x, norm_axes(axes, x.ndim))
    got = run(x, axes).outputs["y"]
    # the one-pass variance loses ~1e-16 * E[x^2] absolutely, i.e. 1e-16 * (1 + cond^2) of var
    # relatively (cond = |mean| / std); half of that reaches y through the sqrt
    cond = cond_number(x, norm_axes(axes, x.ndim))
    assert_close_rel(got, want, 1e-14 * (1 + cond**2), "y vs the ONNX function body")


def test_mean_variance_norm_large_mean_where_the_onnx_body_fails():
    """|mean| = 1e6 std: the ONNX body's E[x^2] - E[x]^2 keeps ~4 digits of var (float64; none in
    float32, where ORT runs it); refnorm's two-pass result is right to 1e-15 (mpmath). This is why
    onnxruntime disagrees with refnorm on badly conditioned inputs: refnorm is the correct one."""
    x = 1e6 + np.random.default_rng(7).standard_normal((4, 2, 3, 3))
    got = run(x).outputs["y"]
    with mpmath.workdps(50):
        want = mp_mean_variance_norm([0, 2, 3], 1e-9)({"x": to_mp(x)})["y"]
        assert rel_error(got, want) <= 1e-15 * 10
        assert rel_error(onnx_mvn(x), want) > 1e-6          # the one-pass body: cond^2 * 1e-16
    x = 1e9 + np.random.default_rng(8).standard_normal((4, 2, 3, 3))
    assert not np.isfinite(onnx_mvn(x)).all() or np.abs(onnx_mvn(x) - run(x).outputs["y"]).max() > 0.1


# ----------------------------------------------------------------------------- torch autograd, same formula
def torch_mvn(torch, axes, eps):
    """The formula in torch ops (there is no torch op): two-pass biased var, eps on the std."""
    def fn(x):
        var, mean = torch.var_mean(x, dim=axes, keepdim=True, correction=0)
        std = torch.sqrt(var)
        return {"y": (x - mean) / (std + eps), "mean": mean, "std": std}
    return fn


@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), [0, 2, 3]), ((4, 6), [1]), ((3, 4, 5), [0, 2]),
                                        ((2, 2, 3, 3), [1, 2, 3])])
@pytest.mark.parametrize("eps", [1e-9, 1e-3, 0.3])
def test_mean_variance_norm_matches_torch_autograd_float64(shape, axes, eps):
    torch = require_torch()
    rng = np.random.default_rng(9)
    x = 2 + 3 * rng.standard_normal(shape)
    dy = rng.standard_normal(shape)
    t_out, t_grads = torch_vjp(torch, torch_mvn(torch, axes, eps), {"x": x}, {"y": dy})
    res = run(x, axes, eps, dy=dy)
    for key in ("y", "mean", "std"):
        assert_close_rel(res.outputs[key], t_out[key], 1e-13, f"output {key}", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)


def test_mean_variance_norm_constant_slice_gradient():
    """A constant slice, eps > 0: y = 0 and dx = (dy - mean dy) / eps, the exact derivative (y is
    d / eps + O(|d|^2) there; mpmath central differences agree in test_..._mpmath_oracle). torch
    autograd of the same formula gives NaN (sqrt backward at var = 0: inf * 0): an autograd artefact.
    With eps = 0: y and dx are NaN (0/0) in that slice only."""
    torch = require_torch()
    x = np.random.default_rng(10).standard_normal((3, 5))
    x[1] = -4.25
    dy = np.random.default_rng(11).standard_normal(x.shape)
    res = run(x, [1], 1e-3, dy=dy)
    np.testing.assert_array_equal(res.outputs["y"][1], 0.0)
    np.testing.assert_allclose(res.grads["x"][1], (dy[1] - dy[1].mean()) / 1e-3, rtol=1e-14, atol=0)
    # one-sided limit: a slightly perturbed slice has nearly the same gradient (difference O(std/eps))
    xp = x.copy()
    xp[1] += 1e-10 * np.random.default_rng(12).standard_normal(5)
    near = run(xp, [1], 1e-3, dy=dy).grads["x"][1]
    assert np.max(np.abs(near - res.grads["x"][1])) <= 1e-5 * np.abs(res.grads["x"][1]).max()
    _, t_grads = torch_vjp(torch, torch_mvn(torch, [1], 1e-3), {"x": x}, {"y": dy})
    assert np.isnan(t_grads["x"][1]).all()
    np.testing.assert_allclose(res.grads["x"][[0, 2]], t_grads["x"][[0, 2]], rtol=1e-13)
    res0 = run(x, [1], 0.0, dy=dy)
    for arr in (res0.outputs["y"], res0.grads["x"]):
        assert np.isnan(arr[1]).all() and np.isfinite(arr[[0, 2]]).all()


def test_mean_variance_norm_extreme_scales():
    """std from exactly scaled deviations: no overflow of d^2 at 1e200, no underflow at 1e-170."""
    base = np.array([[1.0, -2.0, 3.5, 0.25]])
    want = run(base, [1], 0.0).outputs["y"]
    for s in (2.0**-560, 2.0**660):
        got = run(base * s, [1], 0.0)
        np.testing.assert_array_equal(got.outputs["y"], want)
        assert np.isfinite(got.outputs["std"]).all() and got.outputs["std"][0, 0] > 0


def test_mean_variance_norm_empty():
    for shape in [(0, 3, 2, 2), (2, 3, 0, 2)]:
        res = run(np.zeros(shape), dy=np.zeros(shape))
        assert res.outputs["y"].shape == shape and res.grads["x"].shape == shape
        np.testing.assert_array_equal(res.outputs["mean"], 0.0)          # _common: empty mean is 0
        assert np.isnan(res.outputs["std"]).all() and res.outputs["std"].shape == (1, 3, 1, 1)
    res = run(np.zeros((2, 0, 2, 2)), dy=np.zeros((2, 0, 2, 2)))     # no slices at all
    assert res.outputs["mean"].shape == (1, 0, 1, 1) and res.grads["x"].shape == (2, 0, 2, 2)


# ----------------------------------------------------------------------------- bad input, NaN
def test_mean_variance_norm_rejects_bad_input():
    x = np.random.default_rng(0).standard_normal((2, 3))
    with pytest.raises(refnorm.ConfigError, match=r"axes=\[0, 2, 3\]; axis 2 is out of range for an input with 2"):
        refnorm.evaluate(NAME, {"x": x})
    with pytest.raises(refnorm.ConfigError, match=r"axes=\[1, -1\] repeats an axis"):
        run(x, [1, -1])
    with pytest.raises(refnorm.ConfigError, match=r"axes=\[\]; expected a non-empty list"):
        run(x, [])
    with pytest.raises(refnorm.ConfigError, match=r"axes=\[0.5\]; axis 0.5 is out of range"):
        run(x, [0.5])
    with pytest.raises(refnorm.ConfigError, match="eps=-1e-09"):
        run(x, [1], -1e-9)
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3), dtype=np.int64)}, config={"axes": [1]})
    with pytest.raises(refnorm.UnknownNameError, match="unknown option 'epsilon'"):
        refnorm.evaluate(NAME, {"x": x}, config={"axes": [1], "epsilon": 1e-9})
    with pytest.raises(refnorm.UnknownNameError, match="unknown input 'weight'"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(3)}, config={"axes": [1]})
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape \(3,\)"):
        run(x, [1], dy=np.ones(3))


def test_mean_variance_norm_nan_stays_in_its_slice():
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2))
    dy = np.ones_like(x)
    for bad in (np.nan, np.inf, -np.inf):
        xb = x.copy()
        xb[1, 1, 0, 1] = bad                      # default axes [0, 2, 3]: the slice is channel 1
        res = run(xb, dy=dy)
        for arr in (res.outputs["y"], res.grads["x"]):
            assert np.isnan(arr[:, 1]).all() and np.isfinite(arr[:, [0, 2]]).all()
        assert np.isfinite(res.outputs["std"][:, [0, 2]]).all()
