"""group_norm_silu (GroupNorm, its affine, then SiLU): the gradients against central differences, the
composition it is (silu of group_norm with the affine inside), the SiLU's far tails, and the bad inputs."""
from __future__ import annotations

import numpy as np
import pytest

import refnorm
from refnorm.errors import ConfigError, ShapeError
from refnorm.specs.group_norm_silu import sigmoid, silu, silu_grad

from helpers import central_differences


def _fd(inputs, config, dy, key, h=1e-6):
    def loss(a):
        return float((refnorm.evaluate("group_norm_silu", a, config=config).outputs["y"] * dy).sum())
    return central_differences(loss, inputs, key, h)


@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 3), ((1, 4, 2, 3), 1), ((2, 4, 3), 4)])
def test_gradients_are_the_derivatives(shape, groups):
    rng = np.random.default_rng(36)
    inputs = {"x": rng.standard_normal(shape), "weight": 1 + 0.5 * rng.standard_normal(shape[1]),
              "bias": rng.standard_normal(shape[1])}
    cfg = {"num_groups": groups, "eps": 1e-5}
    dy = rng.standard_normal(shape)
    for engine in ("fast", "spec"):
        r = refnorm.evaluate("group_norm_silu", inputs, config=cfg, grad_outputs={"y": dy}, engine=engine)
        for k in inputs:
            np.testing.assert_allclose(r.grads[k], _fd(inputs, cfg, dy, k), rtol=1e-6, atol=1e-7, err_msg=k)


def test_it_is_silu_of_group_norm_with_the_affine_inside():
    rng = np.random.default_rng(1)
    x = 3 + rng.standard_normal((2, 8, 5))
    w, b = rng.standard_normal(8), rng.standard_normal(8) - 2
    dy = rng.standard_normal(x.shape)
    cfg = {"num_groups": 2, "eps": 1e-5}
    r = refnorm.evaluate("group_norm_silu", {"x": x, "weight": w, "bias": b}, config=cfg, grad_outputs={"y": dy})
    gn = refnorm.evaluate("group_norm", {"x": x, "weight": w, "bias": b}, config=cfg)
    p = gn.outputs["y"]
    np.testing.assert_array_equal(r.outputs["y"], silu(p))
    np.testing.assert_allclose(r.outputs["y"], p / (1 + np.exp(-p)), rtol=1e-15, atol=0)
    for k in ("mean", "rstd"):
        np.testing.assert_array_equal(r.outputs[k], gn.outputs[k])
    s = 1 / (1 + np.exp(-p))
    back = refnorm.evaluate("group_norm", {"x": x, "weight": w, "bias": b}, config=cfg,
                            grad_outputs={"y": dy * s * (1 + p * (1 - s))})
    for k in ("x", "weight", "bias"):
        np.testing.assert_allclose(r.grads[k], back.grads[k], rtol=1e-13, atol=1e-15, err_msg=k)
    # silu applied before the affine is another function: the convention is visible
    xhat = (p - b[None, :, None]) / w[None, :, None]
    assert np.max(np.abs(r.outputs["y"] - (silu(xhat) * w[None, :, None] + b[None, :, None]))) > 0.1


def test_silu_tails_do_not_overflow_and_keep_their_relative_accuracy():
    p = np.array([-800.0, -40.0, -1.2784645427610738, 0.0, 40.0, 800.0])
    with np.errstate(over="raise", invalid="raise"):     # exp(800) is never formed (exp(-800) underflows to 0)
        s, y, d = sigmoid(p), silu(p), silu_grad(p)
    assert y[0] == 0.0 and y[-1] == 800.0 and y[3] == 0.0 and d[3] == 0.5
    np.testing.assert_allclose(y[1], -40.0 * np.exp(-40.0) / (1 + np.exp(-40.0)), rtol=1e-15)
    assert abs(d[2]) < 1e-15                              # silu' has its root at p = -1.27846...
    assert s[1] > 0 and d[1] < 0


def test_bad_inputs_name_the_op_and_what_was_expected():
    x = np.ones((2, 6, 3))
    with pytest.raises(ConfigError, match="group_norm_silu: num_groups=4 does not divide .* C=6"):
        refnorm.evaluate("group_norm_silu", {"x": x}, config={"num_groups": 4})
    with pytest.raises(refnorm.RefnormError, match="group_norm_silu: missing required option.*num_groups"):
        refnorm.evaluate("group_norm_silu", {"x": x})
    with pytest.raises(ShapeError, match="group_norm_silu"):
        refnorm.evaluate("group_norm_silu", {"x": x, "weight": np.ones(3)}, config={"num_groups": 3})
    with pytest.raises(refnorm.RefnormError, match="group_norm_silu"):
        refnorm.evaluate("group_norm_silu", {"x": np.ones(6)}, config={"num_groups": 3})
    with pytest.raises(refnorm.RefnormError, match="group_norm_silu.*eps"):
        refnorm.evaluate("group_norm_silu", {"x": x}, config={"num_groups": 3, "eps": -1.0})
