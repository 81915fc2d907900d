"""dyt (dynamic tanh) and poly_norm (PolyCom): the reference, its conventions and argument checks.

* every gradient against numerical differentiation (helpers.check_vjp), alpha's included;
* dyt's tanh' kept where tanh saturates (1/cosh^2, not 1 - t^2), alpha's gradient a sum over every element,
  returned in alpha's own shape;
* poly_norm in vLLM's order (weight[0] on the cube) with eps inside the square root, against vLLM's
  polynorm_naive written out in NumPy; no overflow in float64 where x^6 is huge;
* bad shapes and eps are refused with the value and what was expected.
"""
from __future__ import annotations

import numpy as np
import pytest

import refnorm
from helpers import check_vjp

RNG = np.random.default_rng(20261128)


@pytest.mark.parametrize("alpha", [0.7, 3.0, 1e-3])
@pytest.mark.parametrize("affine", ["wb", "w", ""])
def test_dyt_gradients_match_numerical_differentiation(alpha, affine):
    x = RNG.standard_normal((3, 5))
    inputs = {"x": x, "alpha": np.array([alpha])}
    if "w" in affine:
        inputs["weight"] = RNG.standard_normal(5)
    if "b" in affine:
        inputs["bias"] = RNG.standard_normal(5)
    check_vjp("dyt", inputs)


@pytest.mark.parametrize("eps", [1e-6, 0.3])
@pytest.mark.parametrize("bias", [True, False])
def test_poly_norm_gradients_match_numerical_differentiation(eps, bias):
    inputs = {"x": RNG.standard_normal((2, 3, 6)) + 0.2, "weight": RNG.standard_normal(3)}
    if bias:
        inputs["bias"] = RNG.standard_normal(1)
    check_vjp("poly_norm", inputs, {"eps": eps})


def test_dyt_keeps_tanh_prime_where_tanh_saturates():
    x = np.array([[20.0, 30.0, -25.0, 360.0, 800.0]])
    r = refnorm.evaluate("dyt", {"x": x, "alpha": np.array([1.0])}, grad_outputs={"y": np.ones_like(x)})
    want = 1.0 / np.cosh(x[0, :3]) ** 2
    assert np.all(1.0 - np.tanh(x[0, :3]) ** 2 == 0.0)                 # the naive form loses it in float64
    np.testing.assert_allclose(r.grads["x"][0, :3], want, rtol=1e-14)
    assert 0 < r.grads["x"][0, 3] < 2.3e-308                            # a subnormal, kept
    assert r.grads["x"][0, 3] == pytest.approx(4 * np.exp(-720.0), rel=1e-9)
    assert r.grads["x"][0, 4] == 0.0                                    # below the smallest subnormal
    assert np.all(np.isfinite(r.grads["x"]))


@pytest.mark.parametrize("shape", [(), (1,)])
def test_dyt_alpha_gradient_sums_every_element_in_alphas_shape(shape):
    x, dy, w = RNG.standard_normal((4, 3, 5)), RNG.standard_normal((4, 3, 5)), RNG.standard_normal(5)
    a = 0.6
    r = refnorm.evaluate("dyt", {"x": x, "alpha": np.full(shape, a), "weight": w}, grad_outputs={"y": dy})
    assert r.grads["alpha"].shape == shape
    terms = dy * w / np.cosh(a * x) ** 2 * x
    assert float(r.grads["alpha"].reshape(())) == pytest.approx(float(terms.sum()), rel=1e-13)
    assert abs(float(terms.sum()) - float(terms.sum(axis=(0, 1))[0])) > 1e-3      # not a per-channel sum
    np.testing.assert_allclose(r.grads["weight"], (dy * np.tanh(a * x)).sum(axis=(0, 1)), rtol=1e-13)


def test_poly_norm_is_vllms_polynorm_naive():
    x, w, b, eps = RNG.standard_normal((4, 16)), np.array([0.3, -1.2, 2.0]), np.array([0.25]), 1e-6

    def norm(u):
        return u / np.sqrt((u ** 2).mean(-1, keepdims=True) + eps)
    want = w[0] * norm(x ** 3) + w[1] * norm(x ** 2) + w[2] * norm(x) + b
    got = refnorm.evaluate("poly_norm", {"x": x, "weight": w, "bias": b}, config={"eps": eps}).outputs["y"]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    rev = w[2] * norm(x ** 3) + w[1] * norm(x ** 2) + w[0] * norm(x) + b
    assert np.max(np.abs(got - rev)) > 0.1                               # the order matters, and is vLLM's


def test_poly_norm_does_not_overflow_where_x_to_the_sixth_does():
    x = np.array([[1e60, -2e60, 3e60]])
    r = refnorm.evaluate("poly_norm", {"x": x, "weight": np.ones(3)}, grad_outputs={"y": np.ones_like(x)})
    assert np.all(np.isfinite(r.outputs["y"])) and np.all(np.isfinite(r.grads["weight"]))
    u = x ** 3 / 1e180
    want3 = u / np.sqrt((u ** 2).mean())
    want1 = x / np.sqrt((x ** 2).mean())
    want2 = (x / 1e60) ** 2 / np.sqrt((((x / 1e60) ** 2) ** 2).mean())
    np.testing.assert_allclose(r.outputs["y"], want3 + want2 + want1, rtol=1e-14)


def test_poly_norm_zero_row():
    x = np.zeros((1, 4))
    r = refnorm.evaluate("poly_norm", {"x": x, "weight": np.array([1.0, 2.0, 3.0]), "bias": np.array([0.5])},
                         config={"eps": 0.25}, grad_outputs={"y": np.ones_like(x)})
    np.testing.assert_array_equal(r.outputs["y"], np.full((1, 4), 0.5))
    np.testing.assert_allclose(r.grads["x"], np.full((1, 4), 3.0 / np.sqrt(0.25)), rtol=1e-15)   # w2 * r_1 * dy


@pytest.mark.parametrize("op,inputs,config,match", [
    ("dyt", {"x": np.ones((2, 4)), "alpha": np.ones(2)}, {}, r"'alpha' has shape \(2,\); expected \(\) or \(1,\)"),
    ("dyt", {"x": np.ones((2, 4)), "alpha": np.ones(1), "weight": np.ones(3)}, {},
     r"'weight' has shape \(3,\); expected \(C,\) = \(4,\)"),
    ("dyt", {"x": np.ones((2, 4)), "alpha": np.ones(1), "bias": np.ones((1, 4))}, {}, r"'bias' has shape \(1, 4\)"),
    ("dyt", {"x": np.array(1.0), "alpha": np.ones(1)}, {}, r"'x' has shape \(\)"),
    ("poly_norm", {"x": np.ones((2, 4)), "weight": np.ones(2)}, {}, r"'weight' has shape \(2,\); expected \(3,\)"),
    ("poly_norm", {"x": np.ones((2, 4)), "weight": np.ones(3), "bias": np.ones(4)}, {},
     r"'bias' has shape \(4,\); expected \(1,\) or \(\)"),
    ("poly_norm", {"x": np.ones((2, 4)), "weight": np.ones(3)}, {"eps": -1.0}, r"eps=-1.0; expected a finite number"),
])
@pytest.mark.parametrize("engine", ["fast", "spec"])
def test_bad_arguments_are_refused_with_the_value(op, inputs, config, match, engine):
    with pytest.raises(refnorm.RefnormError, match=match):
        refnorm.evaluate(op, inputs, config=config, engine=engine)


def test_dyt_requires_alpha_and_poly_norm_requires_weight():
    with pytest.raises(refnorm.RefnormError, match="missing required input"):
        refnorm.evaluate("dyt", {"x": np.ones((2, 4))})
    with pytest.raises(refnorm.RefnormError, match="missing required input"):
        refnorm.evaluate("poly_norm", {"x": np.ones((2, 4))})
