"""layer_norm: properties, numerical gradients, mpmath oracle, torch cross-check, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (assert_like_torch, assert_refuses_normalized_shape_misuse, check_vjp, cond_number,
                     drawn_affine, inputs_of, mp_sqrt, oracle_check, require_torch, torch_vjp)
from strategies import shapes, well_spread

NAME = "layer_norm"


def run(x, k=1, weight=None, bias=None, eps=1e-5, dy=None):
    cfg = {"normalized_shape": list(x.shape[x.ndim - k:]), "eps": eps}
    return refnorm.evaluate(NAME, inputs_of(x, weight, bias), config=cfg,
                            grad_outputs=None if dy is None else {"y": dy})


@st.composite
def case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=6))
    k = draw(st.integers(1, len(shape)))
    x = draw(well_spread(shape))
    pshape = shape[len(shape) - k:]
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    w = rng.standard_normal(pshape) if draw(st.booleans()) else None
    b = rng.standard_normal(pshape) if draw(st.booleans()) else None
    # eps = 0 with a one-element row is 0/0 (NaN, as in torch): drawn only where rows have spread
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.3] if np.prod(pshape) > 1 else [1e-5, 0.3]))
    return x, k, w, b, eps


# shift and scale invariance: tests/norms/test_centred_invariances.py (one test for the four centred norms)
@given(case())
def test_layer_norm_batch_permutation_equivariance(c):
    x, k, w, b, eps = c
    if x.ndim == k:
        return
    perm = np.random.default_rng(0).permutation(x.shape[0])
    a, p = run(x, k, w, b, eps).outputs["y"], run(x[perm], k, w, b, eps).outputs["y"]
    np.testing.assert_array_equal(p, a[perm])


@given(case())
def test_layer_norm_input_gradient_sums_to_zero(c):
    x, k, w, b, eps = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = run(x, k, w, b, eps, dy=dy).grads["x"]
    axes = tuple(range(x.ndim - k, x.ndim))
    # each dx element is a difference of terms of size rstd * |dy * w|; their sum cancels to rounding
    # (no |mean|/std factor: the deviations are re-centred, _common.centered)
    scale = np.abs(dy).max() * (np.abs(w).max() if w is not None else 1) / np.sqrt(x.var(axis=axes).min() + eps)
    n = int(np.prod([x.shape[a] for a in axes]))
    assert np.max(np.abs(dx.sum(axis=axes))) <= 1e-15 * scale * n


@given(case())
def test_layer_norm_backward_matches_numerical_differentiation(c):
    x, k, w, b, eps = c
    inputs = inputs_of(x, w, b)
    axes = tuple(range(x.ndim - k, x.ndim))
    rstd = 1 / np.sqrt(x.var(axis=axes).min() + eps)
    check_vjp(NAME, inputs, {"normalized_shape": list(x.shape[x.ndim - k:]), "eps": eps},
              grad_scale=rstd * (1 if w is None else np.abs(w).max()))


# ----------------------------------------------------------------------------- mpmath oracle
def mp_layer_norm(k, eps):
    def f(d):
        x = d["x"]
        axes = tuple(range(x.ndim - k, x.ndim))
        n = int(np.prod(x.shape[x.ndim - k:]))
        mean = np.sum(x, axis=axes, keepdims=True) / n
        var = np.sum((x - mean) ** 2, axis=axes, keepdims=True) / n
        y = (x - mean) / mp_sqrt(var + mpmath.mpf(eps))
        if "weight" in d:
            y = y * d["weight"]
        if "bias" in d:
            y = y + d["bias"]
        return {"y": y, "mean": mean, "rstd": 1 / mp_sqrt(var + mpmath.mpf(eps))}
    return f


ORACLE_CASES = [
    # (name, x, eps)
    ("randn", np.random.default_rng(0).standard_normal((3, 6)), 1e-5),
    ("mean_1e6_std", 1e6 + np.random.default_rng(1).standard_normal((2, 5)), 1e-5),
    ("mean_1e6_std_small", 3.0 + 3e-6 * np.random.default_rng(2).standard_normal((2, 5)), 1e-12),
    ("constant_rows", np.full((2, 4), 0.1), 1e-12),
    ("constant_rows_eps0.3", np.full((2, 4), -7.3), 0.3),
    ("eps_0.3", np.random.default_rng(3).standard_normal((2, 7)), 0.3),
    ("eps_1e-12_tiny_var", 1e-5 * np.random.default_rng(4).standard_normal((2, 5)), 1e-12),
]


@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_layer_norm_matches_mpmath_oracle(label, x, eps):
    rng = np.random.default_rng(5)
    inputs = {"x": x, "weight": rng.standard_normal(x.shape[-1:]), "bias": rng.standard_normal(x.shape[-1:])}
    cfg = {"normalized_shape": [x.shape[-1]], "eps": eps}
    oracle_check(NAME, inputs, cfg, mp_layer_norm(1, eps), cond=cond_number(x, (-1,), eps),
                 outputs=("y", "mean", "rstd"))


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape,k", [((4, 7), 1), ((2, 3, 5), 2), ((3, 2, 2, 3), 3), ((5,), 1)])
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_layer_norm_matches_torch_float64(shape, k, affine):
    torch = require_torch()
    rng = np.random.default_rng(7)
    ns = shape[len(shape) - k:]
    inputs = {"x": 2 + 3 * rng.standard_normal(shape), **drawn_affine(rng, affine, ns)}
    dy = rng.standard_normal(shape)

    def fn(x, weight=None, bias=None):
        y, mean, rstd = torch.native_layer_norm(x, list(ns), weight, bias, 1e-5)
        return {"y": y, "mean": mean, "rstd": rstd}

    t_out, t_grads = torch_vjp(torch, fn, inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"normalized_shape": list(ns)}, grad_outputs={"y": dy})
    assert_like_torch(res, t_out, t_grads, ("y", "mean", "rstd"), 1e-13, NAME)


def test_layer_norm_empty_like_torch():
    torch = require_torch()
    for shape, ns in [((2, 0), [0]), ((0, 4), [4])]:
        x = np.zeros(shape)
        ty, tm, tr = torch.native_layer_norm(torch.tensor(x), ns, None, None, 1e-5)
        res = refnorm.evaluate(NAME, {"x": x}, config={"normalized_shape": ns},
                               grad_outputs={"y": np.zeros(shape)})
        for got, want in ((res.outputs["y"], ty), (res.outputs["mean"], tm), (res.outputs["rstd"], tr)):
            np.testing.assert_array_equal(got, want.numpy())
        assert res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- bad input, NaN
def test_layer_norm_rejects_bad_input():
    assert_refuses_normalized_shape_misuse(NAME)


def test_layer_norm_nan_stays_in_its_row():
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[1, 2] = np.nan
    res = run(x, dy=np.ones_like(x))
    assert np.isnan(res.outputs["y"][1]).all() and np.isfinite(res.outputs["y"][[0, 2]]).all()
    assert np.isnan(res.grads["x"][1]).all() and np.isfinite(res.grads["x"][[0, 2]]).all()
