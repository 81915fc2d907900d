"""group_norm: properties, equivalences (G=1 LayerNorm, G=C InstanceNorm), gradients, oracles, bad input."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (assert_close_rel, channel_norm_torch_case, check_vjp, cond_number, inputs_of,
                     mp_norm_over_sets, oracle_check, record, require_torch, torch_vjp)
from strategies import well_spread

NAME = "group_norm"


def run(x, G, weight=None, bias=None, eps=1e-5, dy=None):
    return refnorm.evaluate(NAME, inputs_of(x, weight, bias), config={"num_groups": G, "eps": eps},
                            grad_outputs=None if dy is None else {"y": dy})


def group_view(x, G):
    return x.reshape(x.shape[0], G, -1)


@st.composite
def case(draw, min_spatial_dims=0, min_spatial=1):
    n = draw(st.integers(1, 3))
    c = draw(st.sampled_from([1, 2, 3, 4, 6]))
    spatial = tuple(draw(st.lists(st.integers(1, 3), min_size=min_spatial_dims, max_size=3)))
    if int(np.prod(spatial)) < min_spatial:
        spatial = spatial[:-1] + (spatial[-1] + min_spatial,) if spatial else (min_spatial + 1,)
    shape = (n, c) + spatial
    G = draw(st.sampled_from([g for g in range(1, c + 1) if c % g == 0]))
    x = draw(well_spread(shape))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    w = rng.standard_normal(c) if draw(st.booleans()) else None
    b = rng.standard_normal(c) if draw(st.booleans()) else None
    # eps = 0 with a one-element group is 0/0 (NaN, as torch): drawn only where groups have spread
    m = (c // G) * int(np.prod(spatial))
    eps = draw(st.sampled_from([0.0, 1e-12, 1e-5, 0.3] if m > 1 else [1e-5, 0.3]))
    return x, G, w, b, eps


def grad_scale(x, G, w, eps):
    """rstd * |weight|: the size of the terms that cancel inside one dx element."""
    return (np.abs(w).max() if w is not None else 1.0) / np.sqrt(group_view(x, G).var(axis=2).min() + eps)


# ----------------------------------------------------------------------------- properties
# shift and scale invariance: tests/norms/test_centred_invariances.py (one test for the four centred norms)
@given(case())
def test_group_norm_batch_permutation_equivariance(c):
    x, G, w, b, eps = c
    perm = np.random.default_rng(0).permutation(x.shape[0])
    r, p = run(x, G, w, b, eps).outputs, run(x[perm], G, w, b, eps).outputs
    for k in ("y", "mean", "rstd"):  # every sample is computed alone: bit for bit
        np.testing.assert_array_equal(p[k], r[k][perm])


@given(case())
def test_group_norm_channel_permutation_within_groups(c):
    """Shuffling the channels inside each group (with weight and bias) shuffles y the same way."""
    x, G, w, b, eps = c
    k = x.shape[1] // G
    rng = np.random.default_rng(3)
    perm = np.concatenate([g * k + rng.permutation(k) for g in range(G)])
    a = run(x, G, w, b, eps).outputs["y"]
    p = run(x[:, perm], G, None if w is None else w[perm], None if b is None else b[perm], eps).outputs["y"]
    # the group sums run in another order: equal to rounding, not bit for bit
    np.testing.assert_allclose(p, a[:, perm], rtol=1e-13, atol=1e-13 * max(1.0, np.abs(a).max()))


@given(case())
def test_group_norm_input_gradient_sums_to_zero_per_group(c):
    x, G, w, b, eps = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = run(x, G, w, b, eps, dy=dy).grads["x"]
    m = group_view(x, G).shape[2]
    # each dx element is a difference of terms of size rstd * |dy * w|; their sum cancels to rounding
    # (no |mean|/std factor: the deviations are re-centred, _common.centered)
    scale = np.abs(dy).max() * grad_scale(x, G, w, eps)
    assert np.max(np.abs(group_view(dx, G).sum(axis=2))) <= 1e-15 * scale * m


@given(case())
def test_group_norm_with_one_group_is_layer_norm_over_c_and_spatial(c):
    x, _, w, b, eps = c
    shape = x.shape[1:]
    full = lambda p: None if p is None else np.broadcast_to(p.reshape((-1,) + (1,) * (x.ndim - 2)), shape).copy()
    dy = np.random.default_rng(2).standard_normal(x.shape)
    gn = run(x, 1, w, b, eps, dy=dy)
    ln = refnorm.evaluate("layer_norm", inputs_of(x, full(w), full(b)),
                          config={"normalized_shape": list(shape), "eps": eps}, grad_outputs={"y": dy})
    # same formula, sums over the same values in another order (axis 2 of the (N, 1, m) view vs axes
    # 1.. of x): equal to rounding. Gradient scale as in the zero-sum test.
    tol = 1e-13 * max(1.0, np.abs(ln.outputs["y"]).max())
    np.testing.assert_allclose(gn.outputs["y"], ln.outputs["y"], rtol=0, atol=tol)
    np.testing.assert_allclose(gn.outputs["mean"].ravel(), ln.outputs["mean"].ravel(), rtol=1e-14,
                               atol=1e-14 * np.abs(x).max())
    np.testing.assert_allclose(gn.outputs["rstd"].ravel(), ln.outputs["rstd"].ravel(), rtol=1e-13)
    gtol = 1e-13 * np.abs(dy).max() * grad_scale(x, 1, w, eps) * x[0].size
    np.testing.assert_allclose(gn.grads["x"], ln.grads["x"], rtol=0, atol=gtol)
    spatial = tuple(range(1, x.ndim - 1))  # layer_norm's dweight has shape (C, *): sum its spatial axes
    if w is not None:
        np.testing.assert_allclose(gn.grads["weight"], ln.grads["weight"].sum(axis=spatial), rtol=0,
                                   atol=1e-13 * np.abs(dy).sum())
    if b is not None:
        np.testing.assert_allclose(gn.grads["bias"], ln.grads["bias"].sum(axis=spatial), rtol=0,
                                   atol=1e-13 * np.abs(dy).sum())


@given(case(min_spatial_dims=1, min_spatial=2))
def test_group_norm_with_one_channel_per_group_is_instance_norm(c):
    x, _, w, b, eps = c
    C = x.shape[1]
    dy = np.random.default_rng(4).standard_normal(x.shape)
    gn = run(x, C, w, b, eps, dy=dy)
    inn = refnorm.evaluate("instance_norm", inputs_of(x, w, b), config={"eps": eps}, grad_outputs={"y": dy})
    # the (N, C, m) view of group_norm and the spatial axes of instance_norm reduce the same values;
    # a multi-axis reduction may add them in another order: equal to rounding
    np.testing.assert_allclose(gn.outputs["y"], inn.outputs["y"], rtol=0,
                               atol=1e-13 * max(1.0, np.abs(inn.outputs["y"]).max()))
    np.testing.assert_allclose(gn.outputs["mean"], inn.outputs["mean"], rtol=1e-14, atol=1e-14 * np.abs(x).max())
    np.testing.assert_allclose(gn.outputs["rstd"], inn.outputs["rstd"], rtol=1e-13)
    gtol = 1e-13 * np.abs(dy).max() * grad_scale(x, C, w, eps) * x[0, 0].size
    np.testing.assert_allclose(gn.grads["x"], inn.grads["x"], rtol=0, atol=gtol)
    for k in ("weight", "bias"):
        if k in inn.grads:
            np.testing.assert_allclose(gn.grads[k], inn.grads[k], rtol=0, atol=1e-13 * np.abs(dy).sum())


@given(case())
def test_group_norm_backward_matches_numerical_differentiation(c):
    x, G, w, b, eps = c
    check_vjp(NAME, inputs_of(x, w, b), {"num_groups": G, "eps": eps}, grad_scale=grad_scale(x, G, w, eps))


# ----------------------------------------------------------------------------- mpmath oracle
def mp_group_norm(G, eps):
    """Plain loops over (n, group): the values of the group's channels at every spatial position."""
    def f(d):
        K = d["x"].shape[1] // G
        positions = list(np.ndindex(d["x"].shape[2:]))
        return mp_norm_over_sets(d, eps, G, lambda n, g: [(n, ch) + p for ch in range(g * K, (g + 1) * K)
                                                          for p in positions])
    return f


_r = np.random.default_rng(0)
ORACLE_CASES = [
    # (label, x, num_groups, eps)
    ("randn_nchw", _r.standard_normal((2, 4, 2, 2)), 2, 1e-5),
    ("mean_1e6_std", 1e6 + _r.standard_normal((2, 4, 3)), 2, 1e-5),
    ("mean_1e6_std_small", 3.0 + 3e-6 * _r.standard_normal((2, 2, 3)), 1, 1e-12),
    ("constant_groups", np.full((2, 4, 2), 0.1), 2, 1e-12),
    ("constant_groups_eps0.3", np.full((2, 2, 3), -7.3), 2, 0.3),
    ("eps_0.3", _r.standard_normal((2, 6, 2)), 3, 0.3),
    ("eps_1e-12_tiny_var", 1e-5 * _r.standard_normal((2, 4, 3)), 4, 1e-12),
    ("2d_input", _r.standard_normal((3, 6)), 3, 1e-5),
    ("5d_input", 2 + _r.standard_normal((2, 2, 2, 1, 3)), 2, 1e-5),
]


@pytest.mark.parametrize("label,x,G,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_group_norm_matches_mpmath_oracle(label, x, G, eps):
    rng = np.random.default_rng(5)
    c = x.shape[1]
    inputs = {"x": x, "weight": rng.standard_normal(c), "bias": rng.standard_normal(c)}
    oracle_check(NAME, inputs, {"num_groups": G, "eps": eps}, mp_group_norm(G, eps),
                 cond=cond_number(group_view(x, G), (2,), eps), outputs=("y", "mean", "rstd"))


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("shape", [(4, 6), (2, 6, 5), (2, 6, 2, 3), (2, 6, 2, 1, 3)])
@pytest.mark.parametrize("G", [1, 2, 3, 6])
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_group_norm_matches_torch_float64(shape, G, affine):
    torch = require_torch()
    N, C = shape[:2]
    inputs, dy = channel_norm_torch_case(shape, affine)
    hw = int(np.prod(shape[2:]))

    def fn(x, weight=None, bias=None):
        y, mean, rstd = torch.native_group_norm(x, weight, bias, N, C, hw, G, 1e-5)
        return {"y": y, "mean": mean, "rstd": rstd}

    t_out, t_grads = torch_vjp(torch, fn, inputs, {"y": dy})
    res = refnorm.evaluate(NAME, inputs, config={"num_groups": G}, grad_outputs={"y": dy})
    for key in ("mean", "rstd"):
        assert_close_rel(res.outputs[key], t_out[key], 1e-13, f"output {key}", NAME)
    if C // G * hw == 1:
        # One value per group: x - mean is exactly 0, so y = bias, dx = 0 and dweight = 0 exactly, and
        # refnorm gives exactly those (_common.centered). torch's x - mean carries a rounding error of
        # an ulp of |x|, multiplied by rstd = eps^-1/2 = 316 (measured: 1.4e-13 relative in y).
        bias = inputs.get("bias", np.zeros(C))
        np.testing.assert_array_equal(res.outputs["y"], np.broadcast_to(bias, shape))
        np.testing.assert_array_equal(res.grads["x"], np.zeros(shape))
        if "weight" in inputs:
            np.testing.assert_array_equal(res.grads["weight"], np.zeros(C))
            wmax = np.abs(inputs["weight"]).max()
        else:
            wmax = 1.0
        ulp_bound = 2 * np.finfo(float).eps * np.abs(inputs["x"]).max() * (1e-5) ** -0.5 * wmax
        assert np.abs(t_out["y"] - res.outputs["y"]).max() <= ulp_bound
        if "bias" in inputs:
            assert_close_rel(res.grads["bias"], t_grads["bias"], 1e-13, "grad bias", NAME)
        return
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
    for key in inputs:
        if key != "x":
            assert_close_rel(res.grads[key], t_grads[key], 1e-13, f"grad {key}", NAME)
    # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) cancels almost completely when a group has
    # few elements: with 2 per group (G=3 on (4, 6)) dx = rstd * (g1 - g2)/2 * eps / (var + eps), 1e-5
    # of the terms. Measured against mpmath for that case: refnorm 5e-13 and torch 2e-11 relative
    # to max|dx|, both ~1e-16 of the cancelling terms. So dx is compared at the scale of those terms,
    # rstd of its group times max|dy * weight| (per element), where both are accurate to rounding.
    gmax = np.abs(dy * (inputs["weight"].reshape((1, -1) + (1,) * (len(shape) - 2))
                        if "weight" in inputs else dy)).max()
    r = np.repeat(res.outputs["rstd"], C // G, axis=1).reshape((N, C) + (1,) * (len(shape) - 2))
    err = float(np.max(np.abs(res.grads["x"] - t_grads["x"]) / np.maximum(r * gmax, np.abs(t_grads["x"]).max())))
    record(NAME, "torch", err)
    assert err <= 1e-13, f"grad x: error {err:.3e} relative to rstd * max|dy * weight| > 1e-13"
    # F.group_norm is native_group_norm's first output
    ty = torch.nn.functional.group_norm(torch.tensor(inputs["x"]), G,
                                        *(torch.tensor(inputs[k]) if k in inputs else None
                                          for k in ("weight", "bias")))
    assert_close_rel(res.outputs["y"], ty.numpy(), 1e-13, "F.group_norm y", NAME)


@pytest.mark.parametrize("shape,G", [((0, 2), 1), ((0, 4, 3), 2), ((2, 4, 0), 2), ((2, 0, 3), 1), ((2, 0), 2)])
def test_group_norm_empty_like_torch(shape, G):
    torch = require_torch()
    x, w, b = np.zeros(shape), np.ones(shape[1]), np.ones(shape[1])
    xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ty, tm, tr = torch.native_group_norm(xt, wt, bt, shape[0], shape[1], int(np.prod(shape[2:])), G, 1e-5)
    tdx, tdw, tdb = torch.autograd.grad(ty.sum(), [xt, wt, bt])
    res = refnorm.evaluate(NAME, {"x": x, "weight": w, "bias": b}, config={"num_groups": G},
                           grad_outputs={"y": np.ones(shape)})
    for got, want in ((res.outputs["y"], ty), (res.outputs["mean"], tm), (res.outputs["rstd"], tr),
                      (res.grads["x"], tdx), (res.grads["bias"], tdb)):
        np.testing.assert_array_equal(got, want.detach().numpy())
    # dweight: y is empty, so the loss does not depend on weight and the gradient is the empty sum, 0.
    # torch 2.13 returns NaN for (2, 4, 0): its backward forms (ds - db * mean) * rstd with rstd = NaN.
    # refnorm keeps the exact value 0.
    np.testing.assert_array_equal(res.grads["weight"], np.zeros(shape[1]))


# ----------------------------------------------------------------------------- bad input, NaN
def test_group_norm_rejects_bad_input():
    x = np.ones((2, 4, 3))
    with pytest.raises(refnorm.ConfigError, match=r"num_groups=3 does not divide the number of channels C=4"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 3})
    with pytest.raises(refnorm.ConfigError, match=r"num_groups=0; expected an integer >= 1"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 0})
    with pytest.raises(refnorm.ConfigError, match=r"num_groups=2.0; expected an integer"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 2.0})
    with pytest.raises(refnorm.RefnormError, match="missing required option.*'num_groups'"):
        refnorm.evaluate(NAME, {"x": x})
    with pytest.raises(refnorm.ConfigError, match="eps=-0.5"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 2, "eps": -0.5})
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(2,\); expected \(4,\)"):
        refnorm.evaluate(NAME, {"x": x, "weight": np.ones(2)}, config={"num_groups": 2})
    with pytest.raises(refnorm.ShapeError, match=r"'bias' has shape \(4, 1\); expected \(4,\)"):
        refnorm.evaluate(NAME, {"x": x, "bias": np.ones((4, 1))}, config={"num_groups": 2})
    with pytest.raises(refnorm.ShapeError, match=r"shape \(4,\); expected at least 2 dimensions"):
        refnorm.evaluate(NAME, {"x": np.ones(4)}, config={"num_groups": 2})
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(NAME, {"x": np.ones((2, 4), dtype=np.int64)}, config={"num_groups": 2})
    with pytest.raises(refnorm.UnknownNameError, match="'groups'"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 2, "groups": 2})
    with pytest.raises(refnorm.RefnormError, match="stateless"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 2}, state={"running_mean": np.zeros(4)})
    with pytest.raises(refnorm.ShapeError, match=r"grad_outputs\['y'\] has shape"):
        refnorm.evaluate(NAME, {"x": x}, config={"num_groups": 2}, grad_outputs={"y": np.ones((2, 4))})


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_group_norm_nan_stays_in_its_group(bad):
    x = np.random.default_rng(0).standard_normal((3, 4, 2))
    x[1, 2, 0] = bad
    res = run(x, 2, weight=np.ones(4), bias=np.zeros(4), dy=np.ones_like(x))
    y, dx = res.outputs["y"], res.grads["x"]
    inside = np.zeros(x.shape, dtype=bool)
    inside[1, 2:4] = True  # sample 1, group 1 = channels 2 and 3
    for arr in (y, dx):
        assert np.isnan(arr[inside]).all() and np.isfinite(arr[~inside]).all()
    stat_in = np.zeros((3, 2), dtype=bool)
    stat_in[1, 1] = True
    assert np.isfinite(res.outputs["mean"][~stat_in]).all() and np.isfinite(res.outputs["rstd"][~stat_in]).all()
    # NaN: mean and rstd NaN; Inf: mean Inf, deviations Inf - Inf = NaN, rstd NaN
    assert not np.isfinite(res.outputs["mean"][1, 1]) and np.isnan(res.outputs["rstd"][1, 1])
    # dweight sums dy * xhat over samples: NaN for channels 2 and 3 only; dbias does not involve x
    assert np.isfinite(res.grads["weight"][:2]).all() and np.isnan(res.grads["weight"][2:]).all()
    assert np.isfinite(res.grads["bias"]).all()
