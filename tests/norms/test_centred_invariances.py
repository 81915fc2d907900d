"""Shift and scale invariance of the normalizers that centre x and divide by sqrt(var + eps): batch_norm,
instance_norm, group_norm and layer_norm, each drawn from its own module's hypothesis strategy ``case``.

y(x + shift) equals y(x) to rounding: x + shift rounds each element to an ulp of |shift| + |x|, relative to
the spread of the normalized values that is a condition number, 1 + (|shift| + max|x|) / spread.
y(x * scale) with eps * scale^2 equals y(x) to the same condition number without the shift: x * scale
rounds each element to its ulp too (scale 7), and the mean's own rounding errs by an ulp of max|x| whatever
the scale, which the centring turns into that much relative to the spread (a nearly constant instance,
x = [2.01756615, 2.01750627]: |dy| = 1.6e-14 at scale 1e-3, the former bound, 1e-12 of max|y|, 9.5e-15)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
import test_batch_norm
import test_group_norm
import test_instance_norm
import test_layer_norm


def _batch_norm(c):
    inputs, eps = c
    return inputs["x"], eps, inputs["x"].std(), \
        lambda x, e: refnorm.evaluate("batch_norm", {**inputs, "x": x}, config={"eps": e}).outputs["y"]


def _instance_norm(c):
    inputs, eps = c
    x = inputs["x"]
    return x, eps, x.std(axis=test_instance_norm.spatial(x)).min(), \
        lambda v, e: refnorm.evaluate("instance_norm", {**inputs, "x": v}, config={"eps": e}).outputs["y"]


def _group_norm(c):
    x, G, w, b, eps = c
    return x, eps, x.std(), lambda v, e: test_group_norm.run(v, G, w, b, e).outputs["y"]


def _layer_norm(c):
    x, k, w, b, eps = c
    return x, eps, x.std(), lambda v, e: test_layer_norm.run(v, k, w, b, e).outputs["y"]


# op -> (its strategy of cases, case -> (x, eps, the spread that conditions a shift, y_of(x, eps)))
OPS = {"batch_norm": (test_batch_norm.case(), _batch_norm),
       "instance_norm": (test_instance_norm.case(), _instance_norm),
       "group_norm": (test_group_norm.case(), _group_norm),
       "layer_norm": (test_layer_norm.case(), _layer_norm)}


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_shift_invariance(op, data):
    strategy, unpack = OPS[op]
    x, eps, spread, y_of = unpack(data.draw(strategy, label="case"))    # the case first, as the op modules draw
    shift = data.draw(st.floats(-1e3, 1e3), label="shift")
    a, s = y_of(x, eps), y_of(x + shift, eps)
    cond = 1 + (abs(shift) + np.abs(x).max()) / max(spread, 1e-3)
    assert np.max(np.abs(a - s)) <= 1e-12 * cond * max(1.0, np.abs(a).max())


@pytest.mark.parametrize("op", OPS)
@given(data=st.data())
def test_scale_invariance(op, data):
    strategy, unpack = OPS[op]
    x, eps, spread, y_of = unpack(data.draw(strategy, label="case"))
    scale = data.draw(st.sampled_from([1e-3, 0.5, 7.0, 1e4]), label="scale")
    a, s = y_of(x, eps), y_of(x * scale, eps * scale**2)
    cond = 1 + np.abs(x).max() / max(spread, 1e-3)
    assert np.max(np.abs(a - s)) <= 1e-12 * cond * max(1.0, np.abs(a).max())


def test_scale_invariance_of_a_nearly_constant_instance():
    """hypothesis's find (module docstring): within the conditioned bound, beyond a fixed 1e-12."""
    x = np.array([[[2.01756615, 2.01750627]]])
    y = lambda v, e: refnorm.evaluate("instance_norm", {"x": v}, config={"eps": e}).outputs["y"]  # noqa: E731
    a, s = y(x, 1e-5), y(x * 1e-3, 1e-5 * 1e-6)
    cond = 1 + np.abs(x).max() / max(x.std(), 1e-3)
    err = np.max(np.abs(a - s))
    assert 1e-12 * np.abs(a).max() < err <= 1e-12 * cond * max(1.0, np.abs(a).max())
