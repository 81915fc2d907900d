"""batch_norm: train/eval, running statistics in both conventions, properties, gradients, oracles."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (assert_close_rel, assert_eval_is_affine_map, assert_input_gradient_sums_to_zero,
                     check_train_eval_oracle, check_vjp, mp_sqrt, require_torch, steps_against_torch_module)
from strategies import shapes, well_spread

NAME = "batch_norm"


@st.composite
def case(draw, min_dims=2):
    shape = draw(shapes(min_dims=min_dims, max_dims=5, max_side=4))
    if np.prod(shape) // shape[1] < 2:
        shape = (shape[0] + 1,) + tuple(shape[1:])
    x = draw(well_spread(shape))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    c = shape[1]
    inputs = {"x": x}
    if draw(st.booleans()):
        inputs["weight"] = rng.standard_normal(c)
    if draw(st.booleans()):
        inputs["bias"] = rng.standard_normal(c)
    eps = draw(st.sampled_from([1e-12, 1e-5, 0.3]))
    return inputs, eps


def stats_state(c, rng):
    return {"running_mean": rng.standard_normal(c), "running_var": rng.uniform(0.5, 2, c),
            "num_batches_tracked": np.asarray(3)}


# shift and scale invariance: tests/norms/test_centred_invariances.py (one test for the four centred norms)
@given(case())
def test_batch_norm_batch_permutation_equivariance(c):
    inputs, eps = c
    x = inputs["x"]
    perm = np.random.default_rng(0).permutation(x.shape[0])
    a = refnorm.evaluate(NAME, inputs, config={"eps": eps}).outputs["y"]
    p = refnorm.evaluate(NAME, {**inputs, "x": x[perm]}, config={"eps": eps}).outputs["y"]
    # the batch statistics are sums in another order: equal to rounding, not bit for bit
    np.testing.assert_allclose(p, a[perm], rtol=1e-13, atol=1e-13 * np.abs(a).max())


@given(case())
def test_batch_norm_eval_is_an_affine_map(c):
    inputs, eps = c
    x = inputs["x"]
    assert_eval_is_affine_map(NAME, inputs, {"eps": eps}, stats_state(x.shape[1], np.random.default_rng(1)))


@given(case())
def test_batch_norm_input_gradient_sums_to_zero_per_channel(c):
    inputs, eps = c
    assert_input_gradient_sums_to_zero(NAME, inputs, eps, (0,) + tuple(range(2, inputs["x"].ndim)))


@given(case(), st.booleans(), st.sampled_from(["torch", "onnx"]))
def test_batch_norm_backward_matches_numerical_differentiation(c, training, convention):
    inputs, eps = c
    x = inputs["x"]
    state = stats_state(x.shape[1], np.random.default_rng(3)) if not training or convention == "onnx" else None
    axes = (0,) + tuple(range(2, x.ndim))
    rstd = 1 / np.sqrt(x.var(axis=axes).min() + eps)
    check_vjp(NAME, inputs, {"eps": eps, "convention": convention}, state=state, training=training,
              grad_scale=rstd * np.abs(inputs.get("weight", np.ones(1))).max())


# ----------------------------------------------------------------------------- mpmath oracle
def mp_batch_norm(eps, state=None):
    def f(d):
        x = d["x"]
        axes = (0,) + tuple(range(2, x.ndim))
        shp = (1, -1) + (1,) * (x.ndim - 2)
        if state is None:
            n = x.size // x.shape[1]
            mean = np.sum(x, axis=axes, keepdims=True) / n
            var = np.sum((x - mean) ** 2, axis=axes, keepdims=True) / n
        else:
            from helpers import to_mp
            mean = to_mp(state["running_mean"]).reshape(shp)
            var = to_mp(state["running_var"]).reshape(shp)
        y = (x - mean) / mp_sqrt(var + mpmath.mpf(eps))
        if "weight" in d:
            y = y * d["weight"].reshape(shp)
        if "bias" in d:
            y = y + d["bias"].reshape(shp)
        return {"y": y, "mean": mean.reshape(-1), "rstd": (1 / mp_sqrt(var + mpmath.mpf(eps))).reshape(-1)}
    return f


_r = np.random.default_rng(0)
ORACLE_CASES = [
    ("randn_nchw", _r.standard_normal((3, 2, 2, 2)), 1e-5),
    ("mean_1e6_std", 1e6 + _r.standard_normal((4, 2, 2)), 1e-5),
    ("constant_channels", np.full((3, 2, 2), 0.1), 1e-12),
    ("eps_0.3", _r.standard_normal((5, 2)), 0.3),
    ("tiny_var_eps_1e-12", 1e-5 * _r.standard_normal((3, 2, 3)), 1e-12),
]


@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_batch_norm_matches_mpmath_oracle(label, x, eps, mode):
    check_train_eval_oracle(NAME, x, eps, mode, mp_batch_norm, stats_state, (0,) + tuple(range(2, x.ndim)))


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 2, 3), (2, 2, 2, 1, 3)])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None, -1.2, 0.0])
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_matches_torch_float64_over_steps(shape, momentum, affine):
    """Three training steps then one eval step, against torch's BatchNorm module in float64."""
    torch = require_torch()
    mod = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
           5: torch.nn.BatchNorm3d}[len(shape)](shape[1], momentum=momentum, affine=affine).double()
    counts = steps_against_torch_module(NAME, mod, shape, momentum, affine)
    assert all(mine == torchs for mine, torchs in counts) and counts[-1][0] == 3, counts


def test_batch_norm_onnx_convention_is_torch_with_flipped_momentum_and_biased_var():
    """ONNX: running = m*running + (1-m)*batch with the biased variance (docs/conventions.md section 5)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 2))
    st0 = {"running_mean": rng.standard_normal(3), "running_var": rng.uniform(1, 2, 3)}
    on = refnorm.evaluate(NAME, {"x": x}, config={"convention": "onnx", "momentum": 0.8}, state=st0).state
    to = refnorm.evaluate(NAME, {"x": x}, config={"momentum": 0.2}, state=st0).state
    np.testing.assert_allclose(on["running_mean"], to["running_mean"], rtol=1e-15, atol=1e-15)
    n = 10
    var_b = x.var(axis=(0, 2))
    np.testing.assert_allclose(on["running_var"], 0.8 * st0["running_var"] + 0.2 * var_b, rtol=1e-14)
    np.testing.assert_allclose(to["running_var"], 0.8 * st0["running_var"] + 0.2 * var_b * n / (n - 1), rtol=1e-14)
    # the ONNX default momentum is 0.9, weighting the old value
    d = refnorm.evaluate(NAME, {"x": x}, config={"convention": "onnx"}, state=st0).state
    np.testing.assert_allclose(d["running_mean"], 0.9 * st0["running_mean"] + 0.1 * x.mean(axis=(0, 2)), rtol=1e-14)


def test_batch_norm_eval_without_running_stats_uses_batch_stats_like_torch():
    torch = require_torch()
    x = np.random.default_rng(0).standard_normal((4, 3, 2))
    mod = torch.nn.BatchNorm1d(3, track_running_stats=False, affine=False).double().eval()
    want = mod(torch.tensor(x)).numpy()
    got = refnorm.evaluate(NAME, {"x": x}, training=False).outputs["y"]
    assert_close_rel(got, want, 1e-13, "eval without running stats", NAME)


def test_batch_norm_empty_batch_like_torch():
    torch = require_torch()
    mod = torch.nn.BatchNorm1d(3).double()
    x = np.zeros((0, 3, 4))
    y = mod(torch.tensor(x))
    st0 = {"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.asarray(0)}
    res = refnorm.evaluate(NAME, {"x": x}, state=st0, grad_outputs={"y": np.zeros_like(x)})
    assert res.outputs["y"].shape == tuple(y.shape) and res.grads["x"].shape == x.shape
    np.testing.assert_array_equal(res.state["running_mean"], mod.running_mean.numpy())
    np.testing.assert_array_equal(res.state["running_var"], mod.running_var.numpy())
    assert int(res.state["num_batches_tracked"]) == int(mod.num_batches_tracked) == 1


# ----------------------------------------------------------------------------- bad input, NaN
def test_batch_norm_rejects_bad_input():
    x = np.ones((2, 3, 4))
    with pytest.raises(refnorm.ShapeError, match="more than 1 value per channel"):
        refnorm.evaluate(NAME, {"x": np.ones((1, 3))})
    with pytest.raises(refnorm.ShapeError, match="more than 1 value per channel"):
        refnorm.evaluate(NAME, {"x": np.ones((1, 3, 1, 1))}, training=False)  # no running stats: batch stats
    refnorm.evaluate(NAME, {"x": np.ones((1, 3))}, training=False,  # eval with running stats is fine
                     state={"running_mean": np.zeros(3), "running_var": np.ones(3)})
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(4,\); expected \(3,\)"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(4)})
    with pytest.raises(refnorm.ShapeError, match="'running_var' has shape"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros(3), "running_var": np.ones(2)})
    with pytest.raises(refnorm.RefnormError, match="both 'running_mean' and 'running_var'"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros(3)})
    with pytest.raises(refnorm.ConfigError, match="eps=-1e-05"):
        refnorm.evaluate(NAME, {"x": x}, config={"eps": -1e-5})
    with pytest.raises(refnorm.ConfigError, match="convention='caffe'"):
        refnorm.evaluate(NAME, {"x": x}, config={"convention": "caffe"})
    with pytest.raises(refnorm.RefnormError, match="momentum=None"):
        refnorm.evaluate(NAME, {"x": x}, config={"convention": "onnx", "momentum": None})
    with pytest.raises(refnorm.InputTypeError, match="int32"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3), dtype=np.int32)})
    with pytest.raises(refnorm.UnknownNameError, match="'running_std'"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_std": np.ones(3)})
    with pytest.raises(refnorm.ShapeError, match="at least 2 dimensions"):
        refnorm.evaluate(NAME, {"x": np.ones(3)})


def test_batch_norm_does_not_mutate_its_arguments():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3))
    st0 = {"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.asarray(2)}
    copies = {k: v.copy() for k, v in st0.items()}
    x0 = x.copy()
    refnorm.evaluate(NAME, {"x": x}, state=st0, grad_outputs={"y": np.ones_like(x)})
    np.testing.assert_array_equal(x, x0)
    for k in st0:
        np.testing.assert_array_equal(st0[k], copies[k])


def test_batch_norm_nan_stays_in_its_channel():
    x = np.random.default_rng(0).standard_normal((4, 3, 2))
    x[1, 2, 0] = np.nan
    st0 = {"running_mean": np.zeros(3), "running_var": np.ones(3)}
    res = refnorm.evaluate(NAME, {"x": x}, state=st0, grad_outputs={"y": np.ones_like(x)})
    for arr in (res.outputs["y"], res.grads["x"]):
        assert np.isnan(arr[:, 2]).all() and np.isfinite(arr[:, :2]).all()
    for k in ("running_mean", "running_var"):
        assert np.isnan(res.state[k][2]) and np.isfinite(res.state[k][:2]).all()
