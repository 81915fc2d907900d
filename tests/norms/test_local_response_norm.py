"""local_response_norm: properties, numerical gradients, mpmath oracle, torch and ONNX-formula cross-checks,
bad input."""
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import assert_close_rel, check_vjp, oracle_check, require_torch, torch_vjp
from strategies import shapes, well_spread

NAME = "local_response_norm"


def run(x, dy=None, **cfg):
    return refnorm.evaluate(NAME, {"x": x}, config=cfg, grad_outputs=None if dy is None else {"y": dy})


def reach(size, window):
    """(lo, hi) with window(c) = [c - lo, c + hi], written from the two conventions' definitions."""
    if window == "torch":      # torch pads (size // 2, (size - 1) // 2) channels before avg_pool
        return size // 2, (size - 1) // 2
    return math.floor((size - 1) / 2), math.ceil((size - 1) / 2)   # ONNX LRN-13 spec


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=3, max_dims=5, max_side=5))
    x = draw(well_spread(shape))
    cfg = {"size": draw(st.integers(1, shape[1] + 2)), "alpha": draw(st.sampled_from([1e-4, 0.5, 3.0])),
           "beta": draw(st.sampled_from([0.75, 0.5, 2.0, -0.5])), "k": draw(st.sampled_from([1.0, 0.3, 2.0])),
           "window": draw(st.sampled_from(["torch", "onnx"]))}
    return x, cfg


@given(case())
def test_local_response_norm_oddness_and_equivariance(c):
    x, cfg = c
    y = run(x, **cfg).outputs["y"]
    np.testing.assert_array_equal(run(-x, **cfg).outputs["y"], -y)
    # batch and spatial positions are independent: permuting them permutes y exactly
    rng = np.random.default_rng(0)
    for ax in [0] + list(range(2, x.ndim)):
        perm = rng.permutation(x.shape[ax])
        np.testing.assert_array_equal(run(np.take(x, perm, axis=ax), **cfg).outputs["y"], np.take(y, perm, axis=ax))


@given(case())
def test_local_response_norm_channel_flip_swaps_the_windows(c):
    # reversing the channels turns window [c - lo, c + hi] into [c - hi, c + lo]: torch's window on the
    # flipped input is ONNX's on the original (the same for odd size, where the two coincide)
    x, cfg = c
    other = "onnx" if cfg["window"] == "torch" else "torch"
    flipped = np.flip(run(np.flip(x, 1), **cfg).outputs["y"], 1)
    # the same terms summed in another order: a few rounding units
    np.testing.assert_allclose(flipped, run(x, **{**cfg, "window": other}).outputs["y"], rtol=1e-14, atol=0)
    if cfg["size"] % 2:
        np.testing.assert_array_equal(run(x, **{**cfg, "window": other}).outputs["y"], run(x, **cfg).outputs["y"])


@given(case())
def test_local_response_norm_special_cases(c):
    x, cfg = c
    # size 1: an element-wise map, y = x / (k + alpha x^2)^beta
    one = run(x, **{**cfg, "size": 1}).outputs
    np.testing.assert_allclose(one["y"], x / (cfg["k"] + cfg["alpha"] * x * x) ** cfg["beta"], rtol=1e-14, atol=0)
    # alpha = 0: y = x k^-beta, dx = dy k^-beta
    dy = np.random.default_rng(1).standard_normal(x.shape)
    res = run(x, dy=dy, **{**cfg, "alpha": 0.0})
    np.testing.assert_allclose(res.outputs["y"], x * cfg["k"] ** -cfg["beta"], rtol=1e-15, atol=0)
    np.testing.assert_allclose(res.grads["x"], dy * cfg["k"] ** -cfg["beta"], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(res.outputs["scale"], np.full(x.shape, cfg["k"]))


@given(case(), st.data())
def test_local_response_norm_channel_locality(c, data):
    # changing channel c0 changes y only at channels whose window holds c0 ([c0 - hi, c0 + lo]) and
    # dx at most one more window away
    x, cfg = c
    c0 = data.draw(st.integers(0, x.shape[1] - 1))
    lo, hi = reach(cfg["size"], cfg["window"])
    x2 = x.copy()
    x2[:, c0] += 1.0
    dy = np.random.default_rng(2).standard_normal(x.shape)
    a, b = run(x, dy=dy, **cfg), run(x2, dy=dy, **cfg)
    ch = np.arange(x.shape[1])
    far_y = (ch < c0 - hi) | (ch > c0 + lo)
    far_dx = (ch < c0 - hi - lo) | (ch > c0 + lo + hi)
    np.testing.assert_array_equal(a.outputs["y"][:, far_y], b.outputs["y"][:, far_y])
    np.testing.assert_array_equal(a.grads["x"][:, far_dx], b.grads["x"][:, far_dx])


@given(case())
def test_local_response_norm_backward_matches_numerical_differentiation(c):
    x, cfg = c
    check_vjp(NAME, {"x": x}, cfg, grad_scale=(1 + 2 * cfg["alpha"] * abs(cfg["beta"]) * np.abs(x).max() ** 2)
              * max(cfg["k"] ** -cfg["beta"], 1.0))


# ----------------------------------------------------------------------------- mpmath oracle
def mp_lrn(size, alpha, beta, k, window):
    """Independent forward: plain loops over (n, c, position) in mpmath, window bounds written out."""
    lo, hi = reach(size, window)
    a, b, kk = mpmath.mpf(alpha), mpmath.mpf(beta), mpmath.mpf(k)

    def f(d):
        x = d["x"]
        C = x.shape[1]
        y = np.empty(x.shape, dtype=object)
        scale = np.empty(x.shape, dtype=object)
        for idx in np.ndindex(x.shape):
            n, c, pos = idx[0], idx[1], idx[2:]
            sq = mpmath.fsum(x[(n, j) + pos] ** 2 for j in range(max(0, c - lo), min(C - 1, c + hi) + 1))
            s = kk + a / size * sq
            scale[idx] = s
            y[idx] = x[idx] / s ** b
        return {"y": y, "scale": scale}
    return f


_R = np.random.default_rng
ORACLE_CASES = [
    # (label, x, k); no mean is removed (cond = 0). LRN has no eps: k plays its part, from 1e-12 to 2
    ("randn", _R(0).standard_normal((2, 5, 3)), 1.0),
    ("mean_1e6_std", 1e6 + _R(1).standard_normal((1, 4, 2)), 1.0),
    ("mean_1e6_std_small", 3.0 + 3e-6 * _R(2).standard_normal((1, 5, 2)), 2.0),
    ("constant", np.full((1, 4, 2, 2), 0.1), 1e-12),
    ("constant_k0.3", np.full((2, 3, 2), -7.3), 0.3),
    ("zero_channels_k1e-12", np.concatenate([np.zeros((1, 2, 3)), _R(3).standard_normal((1, 4, 3))], 1), 1e-12),
    ("tiny", 1e-5 * _R(4).standard_normal((1, 5, 2)), 1e-12),
]


# The worst case (~5e-15, "mean_1e6_std_small" with size 1, alpha 0.5, k 2) is the conditioning of dx
# itself, not an implementation error: at x ~ 3 the two terms of dx, dy s^-beta and
# 2 alpha beta / size x^2 dy s^(-beta-1), are ~26 times larger than their difference.
@pytest.mark.parametrize("size,alpha,beta,window", [
    (1, 0.5, 0.75, "torch"), (3, 1e-4, 0.75, "torch"), (2, 0.7, 0.5, "torch"), (2, 0.7, 0.5, "onnx"),
    (4, 2.0, 2.0, "torch"), (4, 2.0, 2.0, "onnx"), (5, 0.3, -0.5, "onnx"), (9, 1.0, 0.75, "torch")])
@pytest.mark.parametrize("label,x,k", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_local_response_norm_matches_mpmath_oracle(label, x, k, size, alpha, beta, window):
    cfg = {"size": size, "alpha": alpha, "beta": beta, "k": k, "window": window}
    oracle_check(NAME, {"x": x}, cfg, mp_lrn(size, alpha, beta, k, window), cond=0.0, outputs=("y", "scale"))


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape", [(2, 6, 3), (2, 5, 3, 2), (1, 7, 2, 2, 2), (3, 1, 4)])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("alpha,beta,k", [(1e-4, 0.75, 1.0), (3e-5, 0.5, 1.25), (0.7, 2.0, 0.5)])
def test_local_response_norm_matches_torch_float64(shape, size, alpha, beta, k):
    torch = require_torch()
    rng = np.random.default_rng(7)
    x = 3 * rng.standard_normal(shape)
    dy = rng.standard_normal(shape)
    fn = lambda x: {"y": torch.nn.functional.local_response_norm(x, size, alpha, beta, k)}  # noqa: E731
    t_out, t_grads = torch_vjp(torch, fn, {"x": x}, {"y": dy})
    res = run(x, dy=dy, size=size, alpha=alpha, beta=beta, k=k)
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)


def test_local_response_norm_default_options_match_torch_module():
    torch = require_torch()
    x = np.random.default_rng(8).standard_normal((2, 4, 3, 3))
    want = torch.nn.LocalResponseNorm(3)(torch.tensor(x)).numpy()
    assert_close_rel(run(x, size=3).outputs["y"], want, 1e-13, "output y (defaults)", NAME)


def test_local_response_norm_even_size_differs_from_onnx_window():
    # size 2: torch's window is [c-1, c], ONNX's [c, c+1]; docs/conventions.md (section 5): 7.7e-2 at size 4
    x = np.random.default_rng(9).standard_normal((1, 4, 3))
    for size in (2, 4):
        t, o = run(x, size=size, alpha=1.0).outputs["y"], run(x, size=size, alpha=1.0, window="onnx").outputs["y"]
        assert np.max(np.abs(t - o)) > 1e-2


def test_local_response_norm_empty_like_torch():
    torch = require_torch()
    for shape in [(0, 3, 4), (2, 0, 4), (2, 3, 0), (1, 2, 0, 3)]:
        x = np.zeros(shape)
        res = run(x, dy=np.zeros(shape), size=3)
        np.testing.assert_array_equal(res.outputs["y"],
                                      torch.nn.functional.local_response_norm(torch.tensor(x), 3).numpy())
        assert res.outputs["scale"].shape == shape and res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- ONNX LRN
def onnx_lrn(x, size, alpha, beta, bias):
    """Direct transcription of the ONNX LRN-13 spec, looping over C (its reference evaluator loops over N):
    square_sum[n, c, ...] = sum(X[n, i, ...]^2) for i in [max(0, c - floor((size - 1) / 2)),
    min(C - 1, c + ceil((size - 1) / 2))];  Y = X / (bias + alpha / size * square_sum)^beta."""
    C = x.shape[1]
    square_sum = np.zeros_like(x)
    for c in range(C):
        first, last = max(0, c - math.floor((size - 1) / 2)), min(C - 1, c + math.ceil((size - 1) / 2))
        square_sum[:, c] = np.sum(x[:, first:last + 1] ** 2, axis=1)
    return x / (bias + alpha / size * square_sum) ** beta


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 6, 11])
@pytest.mark.parametrize("shape", [(2, 6, 3, 3), (3, 5, 4), (1, 4, 2, 2, 2)])
def test_local_response_norm_onnx_window_matches_onnx_spec_formula(size, shape):
    x = np.random.default_rng(10).standard_normal(shape)
    y = run(x, size=size, alpha=0.8, beta=0.75, k=1.5, window="onnx").outputs["y"]
    # the same sums in another order: a few rounding units
    np.testing.assert_allclose(y, onnx_lrn(x, size, 0.8, 0.75, 1.5), rtol=1e-14, atol=0)


# ----------------------------------------------------------------------------- bad input, NaN
def test_local_response_norm_rejects_bad_input():
    x = np.ones((2, 3, 4))
    with pytest.raises(refnorm.RefnormError, match="missing required option.*'size'"):
        run(x)
    with pytest.raises(refnorm.ConfigError, match="size=0; expected an integer >= 1"):
        run(x, size=0)
    with pytest.raises(refnorm.ConfigError, match="size=2.5; expected an integer"):
        run(x, size=2.5)
    with pytest.raises(refnorm.ConfigError, match="alpha=-0.1; expected a number >= 0"):
        run(x, size=3, alpha=-0.1)
    with pytest.raises(refnorm.ConfigError, match="k=0.0; expected a number > 0"):
        run(x, size=3, k=0.0)
    with pytest.raises(refnorm.ConfigError, match="beta='0.75'"):
        run(x, size=3, beta="0.75")
    with pytest.raises(refnorm.ConfigError, match="window='caffe'"):
        run(x, size=3, window="caffe")
    with pytest.raises(refnorm.ShapeError, match=r"shape \(2, 3\); expected at least 3 dimensions"):
        run(np.ones((2, 3)), size=3)
    with pytest.raises(refnorm.InputTypeError, match="int32"):
        run(np.ones((2, 3, 4), dtype=np.int32), size=3)
    with pytest.raises(refnorm.UnknownNameError, match="'bias'"):
        run(x, size=3, bias=1.0)
    with pytest.raises(refnorm.UnknownNameError, match="'scale' are statistics"):
        refnorm.evaluate(NAME, {"x": x}, config={"size": 3}, grad_outputs={"scale": np.ones_like(x)})


@pytest.mark.parametrize("window", ["torch", "onnx"])
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_local_response_norm_nan_stays_in_its_windows(window, size, bad):
    x = np.random.default_rng(0).standard_normal((2, 7, 3))
    c0 = 3
    x[1, c0, 2] = bad
    res = run(x, dy=np.ones_like(x), size=size, window=window)
    lo, hi = reach(size, window)
    ch = np.arange(7)
    near_y = (ch >= c0 - hi) & (ch <= c0 + lo)             # windows that contain c0
    near_dx = (ch >= c0 - hi - lo) & (ch <= c0 + lo + hi)  # one more (transposed) window
    for a, near in ((res.outputs["y"], near_y), (res.grads["x"], near_dx)):
        outside = np.ones(x.shape, bool)
        outside[1, near, 2] = False
        assert np.isfinite(a[outside]).all()
        assert (~np.isfinite(a[1, near, 2])).any()
    y = res.outputs["y"][1, :, 2]
    if np.isnan(bad):
        assert np.isnan(y[near_y]).all()
    else:   # scale = inf in those windows: y = x / inf^beta = 0, and inf / inf^beta = NaN at c0 itself
        assert np.isnan(y[c0]) and np.all(y[near_y & (ch != c0)] == 0)
