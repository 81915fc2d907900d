"""instance_norm: instance/running statistics, torch's running-stat rule, properties, gradients, oracles."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (MP_DPS, assert_close_rel, assert_eval_is_affine_map, assert_input_gradient_sums_to_zero,
                     assert_like_torch, channel_norm_torch_case, check_train_eval_oracle, check_vjp, cond_number,
                     mp_norm_over_sets, oracle_check, record, rel_error, require_torch, steps_against_torch_module,
                     to_mp, torch_vjp)
from strategies import well_spread

NAME = "instance_norm"


def spatial(x):
    return tuple(range(2, x.ndim))


@st.composite
def case(draw):
    n = draw(st.integers(1, 3))
    c = draw(st.integers(1, 4))
    sp = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    if int(np.prod(sp)) < 2:  # instance statistics need more than 1 spatial element (torch too)
        sp = sp[:-1] + (sp[-1] + 1,)
    x = draw(well_spread((n, c) + sp))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    inputs = {"x": x}
    if draw(st.booleans()):
        inputs["weight"] = rng.standard_normal(c)
    if draw(st.booleans()):
        inputs["bias"] = rng.standard_normal(c)
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.3]))
    return inputs, eps


def stats_state(c, rng, nbt=3):
    return {"running_mean": rng.standard_normal(c), "running_var": rng.uniform(0.5, 2, c),
            "num_batches_tracked": np.asarray(nbt)}


def grad_scale(inputs, eps):
    """rstd * |weight|: the size of the terms that cancel inside one dx element."""
    x = inputs["x"]
    return np.abs(inputs.get("weight", np.ones(1))).max() / np.sqrt(x.var(axis=spatial(x)).min() + eps)


# ----------------------------------------------------------------------------- properties
# shift and scale invariance: tests/norms/test_centred_invariances.py (one test for the four centred norms)
@given(case())
def test_instance_norm_batch_permutation_equivariance(c):
    inputs, eps = c
    x = inputs["x"]
    perm = np.random.default_rng(0).permutation(x.shape[0])
    st0 = stats_state(x.shape[1], np.random.default_rng(1))
    a = refnorm.evaluate(NAME, inputs, config={"eps": eps}, state=st0)
    p = refnorm.evaluate(NAME, {**inputs, "x": x[perm]}, config={"eps": eps}, state=st0)
    for k in ("y", "mean", "rstd"):  # every instance is computed alone: bit for bit
        np.testing.assert_array_equal(p.outputs[k], a.outputs[k][perm])
    for k in ("running_mean", "running_var"):  # averages over n, in another order: to rounding
        np.testing.assert_allclose(p.state[k], a.state[k], rtol=1e-14, atol=1e-14 * np.abs(a.state[k]).max())


@given(case())
def test_instance_norm_input_gradient_sums_to_zero_per_instance(c):
    inputs, eps = c
    assert_input_gradient_sums_to_zero(NAME, inputs, eps, spatial(inputs["x"]))


@given(case())
def test_instance_norm_eval_with_running_stats_is_an_affine_map(c):
    inputs, eps = c
    x = inputs["x"]
    st0 = stats_state(x.shape[1], np.random.default_rng(1))
    dy = np.random.default_rng(3).standard_normal(x.shape)
    r = assert_eval_is_affine_map(NAME, inputs, {"eps": eps}, st0, grad_outputs={"y": dy})
    shp = (1, -1) + (1,) * (x.ndim - 2)
    want_dx = dy * inputs.get("weight", np.ones(x.shape[1])).reshape(shp) \
        / np.sqrt(st0["running_var"] + eps).reshape(shp)
    np.testing.assert_allclose(r.grads["x"], want_dx, rtol=1e-15)
    np.testing.assert_array_equal(r.outputs["mean"], np.broadcast_to(st0["running_mean"], x.shape[:2]))


@given(case(), st.sampled_from([0.0, 0.1, 1.0, -1.2, None]))
def test_instance_norm_running_stats_rule(c, momentum):
    """mean over n of the per-instance batch_norm update: (1-m)*running + m*stat, unbiased variance."""
    inputs, eps = c
    x = inputs["x"]
    st0 = stats_state(x.shape[1], np.random.default_rng(4), nbt=5)
    r = refnorm.evaluate(NAME, inputs, config={"eps": eps, "momentum": momentum}, state=st0)
    m = 0.0 if momentum is None else momentum  # torch's InstanceNorm passes 0.0 for momentum=None
    mean_nc = x.mean(axis=spatial(x))
    var_nc = x.var(axis=spatial(x), ddof=1)
    want_m = (1 - m) * st0["running_mean"] + m * mean_nc.mean(axis=0)
    want_v = (1 - m) * st0["running_var"] + m * var_nc.mean(axis=0)
    np.testing.assert_allclose(r.state["running_mean"], want_m, rtol=1e-13,
                               atol=1e-13 * (np.abs(st0["running_mean"]).max() + abs(m) * np.abs(x).max()))
    np.testing.assert_allclose(r.state["running_var"], want_v, rtol=1e-13,
                               atol=1e-13 * (st0["running_var"].max() + abs(m) * var_nc.max()))
    assert r.state["num_batches_tracked"].dtype == np.int64 and int(r.state["num_batches_tracked"]) == 5
    if momentum == 0.0 or momentum is None:
        np.testing.assert_array_equal(r.state["running_mean"], st0["running_mean"])


@given(case(), st.booleans())
def test_instance_norm_backward_matches_numerical_differentiation(c, with_state):
    inputs, eps = c
    state = stats_state(inputs["x"].shape[1], np.random.default_rng(3)) if with_state else None
    check_vjp(NAME, inputs, {"eps": eps, "momentum": 0.3}, state=state, training=True,
              grad_scale=grad_scale(inputs, eps))


@given(case())
def test_instance_norm_eval_backward_matches_numerical_differentiation(c):
    inputs, eps = c
    state = stats_state(inputs["x"].shape[1], np.random.default_rng(3))
    check_vjp(NAME, inputs, {"eps": eps}, state=state, training=False)
    # (N, C) input: accepted in eval mode with running statistics (as torch)
    x2 = inputs["x"].reshape(inputs["x"].shape[:2] + (-1,))[:, :, 0]
    check_vjp(NAME, {**inputs, "x": x2}, {"eps": eps}, state=state, training=False)


# ----------------------------------------------------------------------------- mpmath oracle
def mp_instance_norm(eps, state=None):
    """Plain loops over (n, c); eval mode (state given) uses the running statistics of channel c."""
    def f(d):
        positions = list(np.ndindex(d["x"].shape[2:]))
        running = None if state is None else (state["running_mean"], state["running_var"])
        return mp_norm_over_sets(d, eps, d["x"].shape[1], lambda n, c: [(n, c) + p for p in positions],
                                 running)
    return f


_r = np.random.default_rng(0)
ORACLE_CASES = [
    ("randn_nchw", _r.standard_normal((2, 3, 2, 2)), 1e-5),
    ("mean_1e6_std", 1e6 + _r.standard_normal((2, 2, 5)), 1e-5),
    ("mean_1e6_std_small", 3.0 + 3e-6 * _r.standard_normal((2, 2, 4)), 1e-12),
    ("constant_instances", np.full((2, 2, 3), 0.1), 1e-12),
    ("constant_instances_eps0.3", np.full((2, 2, 3), -7.3), 0.3),
    ("eps_0.3", _r.standard_normal((2, 2, 6)), 0.3),
    ("tiny_var_eps_1e-12", 1e-5 * _r.standard_normal((2, 2, 2, 2)), 1e-12),
    ("5d", 2 + _r.standard_normal((1, 2, 2, 1, 3)), 1e-5),
]


@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_instance_norm_matches_mpmath_oracle(label, x, eps, mode):
    check_train_eval_oracle(NAME, x, eps, mode, mp_instance_norm, stats_state, spatial(x))


def test_instance_norm_eval_2d_input_matches_mpmath_oracle():
    rng = np.random.default_rng(6)
    inputs = {"x": rng.standard_normal((3, 4)), "weight": rng.standard_normal(4), "bias": rng.standard_normal(4)}
    state = stats_state(4, rng)
    oracle_check(NAME, inputs, {}, mp_instance_norm(1e-5, state), state=state, training=False,
                 outputs=("y", "mean", "rstd"))


@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
@pytest.mark.parametrize("momentum", [0.1, 1.0])
def test_instance_norm_running_stats_match_mpmath(label, x, eps, momentum):
    st0 = stats_state(x.shape[1], np.random.default_rng(8))
    new = refnorm.evaluate(NAME, {"x": x}, config={"eps": eps, "momentum": momentum}, state=st0).state
    cond = cond_number(x, spatial(x))
    with mpmath.workdps(MP_DPS):
        xm = to_mp(x)
        s = x[0, 0].size
        m = mpmath.mpf(momentum)
        want_m, want_v = [], []
        for c in range(x.shape[1]):
            rm, rv = mpmath.mpf(st0["running_mean"][c]), mpmath.mpf(st0["running_var"][c])
            ms, vs = [], []
            for n in range(x.shape[0]):
                vals = list(xm[n, c].ravel())
                mu = mpmath.fsum(vals) / s
                ms.append((1 - m) * rm + m * mu)
                vs.append((1 - m) * rv + m * mpmath.fsum((v - mu) ** 2 for v in vals) / (s - 1))
            want_m.append(mpmath.fsum(ms) / len(ms))
            want_v.append(mpmath.fsum(vs) / len(vs))
        err = max(rel_error(new["running_mean"], np.array(want_m, dtype=object)),
                  rel_error(new["running_var"], np.array(want_v, dtype=object)))
    record(NAME, "mpmath", err)
    assert err <= 1e-13 * (1 + cond), f"running stats error {err:.3e} vs mpmath"


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape", [(4, 3, 5), (2, 3, 2, 3), (2, 2, 2, 1, 3)])
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
@pytest.mark.parametrize("eps", [1e-5, 0.3])
def test_instance_norm_matches_torch_float64(shape, affine, eps):
    torch = require_torch()
    N, C = shape[:2]
    inputs, dy = channel_norm_torch_case(shape, affine)

    def fn(x, weight=None, bias=None):
        return {"y": torch.nn.functional.instance_norm(x, weight=weight, bias=bias, eps=eps)}

    t_out, t_grads = torch_vjp(torch, fn, inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"eps": eps}, grad_outputs={"y": dy})
    assert_like_torch(res, t_out, t_grads, ("y",), 1e-13, NAME)
    # torch computes instance norm as batch norm on the (1, N*C, *) view: its saved statistics
    _, smean, sinvstd = torch.native_batch_norm(torch.tensor(inputs["x"]).reshape((1, N * C) + shape[2:]),
                                                None, None, None, None, True, 0.0, eps)
    assert_close_rel(res.outputs["mean"], smean.numpy().reshape(N, C), 1e-13, "mean", NAME)
    assert_close_rel(res.outputs["rstd"], sinvstd.numpy().reshape(N, C), 1e-13, "rstd", NAME)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 2, 3), (3, 2, 2, 1, 3)])
@pytest.mark.parametrize("momentum", [0.1, 0.5, None, -1.2, 0.0])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_matches_torch_module_over_steps(shape, momentum, affine):
    """Three training steps then one eval step, against torch's InstanceNorm{1,2,3}d(track_running_stats).
    momentum=-1.2 drives running_var negative: eval then gives NaN where torch does too."""
    torch = require_torch()
    cls = {3: torch.nn.InstanceNorm1d, 4: torch.nn.InstanceNorm2d, 5: torch.nn.InstanceNorm3d}[len(shape)]
    mod = cls(shape[1], momentum=momentum, affine=affine, track_running_stats=True).double()
    counts = steps_against_torch_module(NAME, mod, shape, momentum, affine)
    # torch's InstanceNorm never increments num_batches_tracked; refnorm returns it unchanged
    assert counts == [(0, 0)] * 4, counts


def test_instance_norm_2d_input_like_torch():
    """(N, C): torch refuses it with instance statistics and accepts it in eval with running stats."""
    torch = require_torch()
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(4)
    st0 = stats_state(4, rng)
    dy = rng.standard_normal(x.shape)

    def fn(x, weight, bias):
        return {"y": torch.nn.functional.instance_norm(
            x, torch.tensor(st0["running_mean"]), torch.tensor(st0["running_var"]), weight, bias,
            use_input_stats=False)}

    t_out, t_grads = torch_vjp(torch, fn, {"x": x, "weight": w, "bias": b}, {"y": dy})
    res = refnorm.evaluate(NAME, {"x": x, "weight": w, "bias": b}, state=st0, training=False,
                           grad_outputs={"y": dy})
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "(N, C) eval y", NAME)
    for k in t_grads:
        assert_close_rel(res.grads[k], t_grads[k], 1e-13, f"(N, C) eval grad {k}", NAME)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        torch.nn.functional.instance_norm(torch.tensor(x))
    with pytest.raises(refnorm.ShapeError, match=r"more than 1 spatial element.*\(3, 4\)"):
        refnorm.evaluate(NAME, {"x": x})


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0), (2, 0, 4), (0, 3, 0)])
@pytest.mark.parametrize("mode", ["train_tracking", "eval_tracking", "no_state"])
def test_instance_norm_empty_like_torch(shape, mode):
    torch = require_torch()
    c = shape[1]
    x = np.zeros(shape)
    st0 = {"running_mean": np.full(c, 0.5), "running_var": np.full(c, 2.0)} if mode != "no_state" else None
    rm = torch.tensor(st0["running_mean"]) if st0 else None
    rv = torch.tensor(st0["running_var"]) if st0 else None
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.nn.functional.instance_norm(xt, rm, rv, use_input_stats=mode != "eval_tracking")
    (gt,) = torch.autograd.grad(yt.sum(), [xt])
    res = refnorm.evaluate(NAME, {"x": x}, state=st0, training=mode != "eval_tracking",
                           grad_outputs={"y": np.ones(shape)})
    np.testing.assert_array_equal(res.outputs["y"], yt.detach().numpy())
    np.testing.assert_array_equal(res.grads["x"], gt.numpy())
    assert res.outputs["mean"].shape == res.outputs["rstd"].shape == shape[:2]
    if st0:
        # N == 0 in training: torch averages the updated copies over zero instances, giving NaN
        np.testing.assert_array_equal(res.state["running_mean"], rm.numpy())
        np.testing.assert_array_equal(res.state["running_var"], rv.numpy())
        assert int(res.state["num_batches_tracked"]) == 0
    if mode != "eval_tracking" and shape[0] and shape[1]:  # empty instances: mean 0, rstd NaN
        np.testing.assert_array_equal(res.outputs["mean"], np.zeros(shape[:2]))
        assert np.isnan(res.outputs["rstd"]).all()


# ----------------------------------------------------------------------------- bad input, NaN
def test_instance_norm_rejects_bad_input():
    x = np.ones((2, 3, 4))
    good = {"running_mean": np.zeros(3), "running_var": np.ones(3)}
    with pytest.raises(refnorm.ShapeError, match=r"more than 1 spatial element.*\(2, 3, 1\)"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3, 1))})
    with pytest.raises(refnorm.ShapeError, match="more than 1 spatial element"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3, 1, 1))}, training=False)  # no running stats: instance stats
    refnorm.evaluate(NAME, {"x": np.ones((2, 3, 1))}, training=False, state=good)  # eval with running stats: fine
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(4,\); expected \(3,\)"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(4)})
    with pytest.raises(refnorm.ShapeError, match=r"'bias' has shape \(2,\); expected \(3,\)"):
        refnorm.evaluate(NAME, {"x": x, "bias": np.ones(2)})
    with pytest.raises(refnorm.ShapeError, match=r"'running_var' has shape \(2,\); expected \(3,\)"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros(3), "running_var": np.ones(2)})
    with pytest.raises(refnorm.ShapeError, match=r"'running_mean' has shape \(2, 3\)"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros((2, 3)), "running_var": np.ones(3)})
    with pytest.raises(refnorm.RefnormError, match="both 'running_mean' and 'running_var'"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros(3)})
    with pytest.raises(refnorm.RefnormError, match="both 'running_mean' and 'running_var'"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_var": np.ones(3), "num_batches_tracked": 1})
    with pytest.raises(refnorm.ShapeError, match="'num_batches_tracked' has shape"):
        refnorm.evaluate(NAME, {"x": x}, state={**good, "num_batches_tracked": np.zeros(2)})
    with pytest.raises(refnorm.ConfigError, match="eps=-1e-05"):
        refnorm.evaluate(NAME, {"x": x}, config={"eps": -1e-5})
    with pytest.raises(refnorm.ConfigError, match="momentum='fast'"):
        refnorm.evaluate(NAME, {"x": x}, config={"momentum": "fast"})
    with pytest.raises(refnorm.InputTypeError, match="int32"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 3, 4), dtype=np.int32)})
    with pytest.raises(refnorm.UnknownNameError, match="'running_std'"):
        refnorm.evaluate(NAME, {"x": x}, state={"running_std": np.ones(3)})
    with pytest.raises(refnorm.UnknownNameError, match="'affine'"):
        refnorm.evaluate(NAME, {"x": x}, config={"affine": True})
    with pytest.raises(refnorm.ShapeError, match=r"shape \(3,\); expected at least 2 dimensions"):
        refnorm.evaluate(NAME, {"x": np.ones(3)})


def test_instance_norm_does_not_mutate_its_arguments():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5))
    st0 = {"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.asarray(2)}
    copies = {k: v.copy() for k, v in st0.items()}
    x0 = x.copy()
    res = refnorm.evaluate(NAME, {"x": x}, state=st0, grad_outputs={"y": np.ones_like(x)})
    np.testing.assert_array_equal(x, x0)
    for k in st0:
        np.testing.assert_array_equal(st0[k], copies[k])
        assert res.state[k] is not st0[k]
    # no state given: no state returned
    assert dict(refnorm.evaluate(NAME, {"x": x}).state) == {}
    # num_batches_tracked is optional; it comes back (as int64 0) whenever state is given
    res = refnorm.evaluate(NAME, {"x": x}, state={"running_mean": np.zeros(3), "running_var": np.ones(3)})
    assert res.state["num_batches_tracked"].dtype == np.int64 and int(res.state["num_batches_tracked"]) == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_instance_norm_nan_stays_in_its_instance(bad):
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    x[1, 2, 0] = bad
    st0 = {"running_mean": np.zeros(4), "running_var": np.ones(4)}
    res = refnorm.evaluate(NAME, {"x": x, "weight": np.ones(4), "bias": np.zeros(4)}, state=st0,
                           grad_outputs={"y": np.ones_like(x)})
    inside = np.zeros(x.shape, dtype=bool)
    inside[1, 2] = True
    for arr in (res.outputs["y"], res.grads["x"]):
        assert np.isnan(arr[inside]).all() and np.isfinite(arr[~inside]).all()
    out = np.ones((3, 4), dtype=bool)
    out[1, 2] = False
    assert np.isfinite(res.outputs["mean"][out]).all() and np.isfinite(res.outputs["rstd"][out]).all()
    assert not np.isfinite(res.outputs["mean"][1, 2]) and np.isnan(res.outputs["rstd"][1, 2])
    # channel 2's dweight and running statistics (sums/averages over n); dbias does not involve x
    assert np.isnan(res.grads["weight"][2]) and np.isfinite(np.delete(res.grads["weight"], 2)).all()
    assert np.isfinite(res.grads["bias"]).all()
    for k in ("running_mean", "running_var"):
        assert not np.isfinite(res.state[k][2]) and np.isfinite(np.delete(res.state[k], 2)).all()
