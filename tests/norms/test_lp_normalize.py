"""lp_normalize: properties, numerical gradients, mpmath oracle, torch and ONNX-formula cross-checks, bad input."""
import mpmath
import numpy as np
import pytest
from hypothesis import given, strategies as st

import refnorm
from helpers import (MP_DPS, assert_close_rel, check_vjp, mp_grads, oracle_check, record, rel_error,
                     require_torch, to_mp, torch_vjp)
from strategies import shapes, well_spread

NAME = "lp_normalize"
PS = [0.5, 1.0, 1.5, 2.0, 3.0, 7.0]


def run(x, dy=None, **cfg):
    return refnorm.evaluate(NAME, {"x": x}, config=cfg, grad_outputs=None if dy is None else {"y": dy})


def np_norm(x, p, axes):
    """Plain (unscaled) p-norm for the moderate values the property tests draw."""
    return np.sum(np.abs(x) ** p, axis=axes, keepdims=True) ** (1 / p)


@st.composite
def case(draw, away_from_zero=False):
    """(x, cfg, axes): x, a p, a dim (int, negative int or list) and eps 1e-12 (all slices above it)."""
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=5))
    nd = len(shape)
    axes = sorted(draw(st.sets(st.integers(0, nd - 1), min_size=1, max_size=nd)))
    dim = draw(st.sampled_from([axes, [a - nd for a in axes]] + ([axes[0], axes[0] - nd] if len(axes) == 1 else [])))
    x = draw(well_spread(shape))
    p = draw(st.sampled_from(PS))
    if away_from_zero or p != 2.0:
        # |x|^p is not smooth at 0 for p != 2 (a kink at p = 1, unbounded derivative for p < 1, a jump
        # in a higher derivative otherwise): keep entries away from 0 so finite differences see a
        # smooth function (x_j = 0 itself is checked against torch's rule below)
        x = np.sign(x + (x == 0)) * (0.5 + np.abs(x))
    return x, {"p": p, "dim": dim}, tuple(axes)


@given(case(), st.sampled_from([1e-3, 0.5, 7.0, 1e4]))
def test_lp_normalize_scale_invariance_and_oddness(c, scale):
    # y(a x) = y(x) for a > 0 while norm(a x) >= eps; y(-x) = -y(x) exactly
    x, cfg, _ = c
    a = run(x, **cfg).outputs["y"]
    # a few roundings per element (x * scale, the scaled norm, the division): 1e-14 is generous
    np.testing.assert_allclose(run(x * scale, **cfg).outputs["y"], a, rtol=1e-14, atol=1e-14 * np.abs(a).max())
    np.testing.assert_array_equal(run(-x, **cfg).outputs["y"], -a)


@given(case())
def test_lp_normalize_output_has_unit_norm(c):
    x, cfg, axes = c
    res = run(x, **cfg)
    np.testing.assert_allclose(np_norm(res.outputs["y"], cfg["p"], axes), 1.0, rtol=1e-14)
    # the norm output is the unclamped norm
    np.testing.assert_allclose(res.outputs["norm"], np_norm(x, cfg["p"], axes), rtol=1e-14)


@given(case(), st.sampled_from(["torch", "onnx"]))
def test_lp_normalize_gradient_orthogonal_to_x(c, rule):
    # y(s x) = y(x) for s > 0, so sum_A(dx * x) = d/ds <dy, y(s x)> = 0 (derivations/lp_normalize.md step 8)
    x, cfg, axes = c
    dy = np.random.default_rng(1).standard_normal(x.shape)
    res = run(x, dy=dy, zero_rule=rule, **cfg)
    got = np.sum(res.grads["x"] * x, axis=axes)
    # x_j dx_j = u_j dy_j - u_j w_j sum(dy u) with |u_j| <= 1 and sum(u w) = sum |u|^p = 1: the terms
    # are at most 2 sum|dy| in total, so their sum cancels to ~n rounding units of that
    n = int(np.prod([x.shape[a] for a in axes]))
    assert np.all(np.abs(got) <= 1e-14 * n * np.sum(np.abs(dy), axis=axes))


@given(case())
def test_lp_normalize_batch_permutation_equivariance(c):
    x, cfg, axes = c
    free = [a for a in range(x.ndim) if a not in axes]
    if not free:
        return
    ax = free[0]
    perm = np.random.default_rng(0).permutation(x.shape[ax])
    a = run(x, **cfg).outputs["y"]
    np.testing.assert_array_equal(run(np.take(x, perm, axis=ax), **cfg).outputs["y"], np.take(a, perm, axis=ax))


@given(case(), st.floats(2.0, 1e3))
def test_lp_normalize_below_eps_divides_by_eps(c, factor):
    # every slice's norm below eps: y = x / eps and dx = dy / eps, exactly (one division)
    x, cfg, axes = c
    eps = float(np_norm(x, cfg["p"], axes).max()) * factor
    dy = np.random.default_rng(2).standard_normal(x.shape)
    res = run(x, dy=dy, eps=eps, **cfg)
    np.testing.assert_array_equal(res.outputs["y"], x / eps)
    np.testing.assert_array_equal(res.grads["x"], dy / eps)


@given(case(), st.sampled_from(["torch", "onnx"]))
def test_lp_normalize_backward_matches_numerical_differentiation(c, rule):
    x, cfg, axes = c
    check_vjp(NAME, {"x": x}, {**cfg, "zero_rule": rule}, grad_scale=1 / float(np_norm(x, cfg["p"], axes).min()))


@given(case(), st.data())
def test_lp_normalize_backward_with_slices_on_both_sides_of_eps(c, data):
    # eps between two slices' norms (at least a factor 2 from each, so finite differences never cross
    # the max(norm, eps) kink): one slice uses the projection, the other dy / eps
    x, cfg, axes = c
    norms = np.sort(np_norm(x, cfg["p"], axes).ravel())
    gaps = norms[1:] / norms[:-1]
    if norms.size < 2 or gaps.max() < 4:
        return
    i = int(np.argmax(gaps))
    eps = float(np.sqrt(norms[i] * norms[i + 1]))
    check_vjp(NAME, {"x": x}, {**cfg, "eps": eps}, grad_scale=1 / float(norms[0]) + 1 / eps)


def test_lp_normalize_backward_mixed_eps_regimes():
    # deterministic companion of the test above: rows of norm ~1e-3 and ~1 with eps = 0.03
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)) + 2.0
    x[[0, 2]] *= 1e-3
    for p in PS:
        check_vjp(NAME, {"x": x}, {"p": p, "dim": 1, "eps": 0.03}, grad_scale=1 / 0.03 + 1 / 1e-3)


# ----------------------------------------------------------------------------- mpmath oracle
def mp_lp_normalize(p, eps, rule="torch", dim=-1):
    """Independent forward: a plain loop over the slices along ``dim`` (one axis) in mpmath."""
    pm, em = mpmath.mpf(p), mpmath.mpf(eps)

    def f(d):
        x = np.moveaxis(d["x"], dim, -1)
        y = np.empty(x.shape, dtype=object)
        norm = np.empty(x.shape[:-1] + (1,), dtype=object)
        for r in np.ndindex(x.shape[:-1]):
            nrm = mpmath.fsum(abs(v) ** pm for v in x[r]) ** (1 / pm)
            norm[r + (0,)] = nrm
            for j, v in enumerate(x[r]):
                if rule == "torch":
                    y[r + (j,)] = v / max(nrm, em)
                else:
                    y[r + (j,)] = mpmath.mpf(0) if nrm == 0 else v / nrm
        return {"y": np.moveaxis(y, -1, dim), "norm": np.moveaxis(norm, -1, dim)}
    return f


_R = np.random.default_rng
ORACLE_CASES = [
    # (label, x, eps); no mean is removed, so cond = 0 for every case
    ("randn", _R(0).standard_normal((3, 6)), 1e-12),
    ("mean_1e6_std", 1e6 + _R(1).standard_normal((2, 5)), 1e-12),
    ("mean_1e6_std_small", 3.0 + 3e-6 * _R(2).standard_normal((2, 5)), 1e-12),
    ("constant_rows", np.full((2, 4), 0.1), 1e-12),
    ("constant_rows_eps0.3", np.full((2, 4), -7.3), 0.3),
    ("eps_0.3_mixed", np.vstack([_R(3).standard_normal((1, 7)), 1e-3 * _R(4).standard_normal((1, 7))]), 0.3),
    ("eps_1e-12_tiny", 1e-5 * _R(5).standard_normal((2, 5)), 1e-12),
    ("zero_row", np.vstack([np.zeros(4), _R(6).standard_normal(4)]), 1e-5),
    ("large_1e30", 1e30 * _R(7).standard_normal((2, 4)), 1e-12),
]


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("label,x,eps", ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_lp_normalize_matches_mpmath_oracle(label, x, eps, p):
    oracle_check(NAME, {"x": x}, {"p": p, "dim": -1, "eps": eps}, mp_lp_normalize(p, eps), cond=0.0,
                 outputs=("y", "norm"))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, 0.5])
def test_lp_normalize_onnx_rule_matches_mpmath_oracle(p):
    x = _R(8).standard_normal((2, 3, 4))
    oracle_check(NAME, {"x": x}, {"p": p, "dim": 1, "zero_rule": "onnx"}, mp_lp_normalize(p, 0, "onnx", dim=1),
                 outputs=("y", "norm"))


def test_lp_normalize_zero_entries_match_mpmath_oracle():
    # x_j = 0 with p = 1: the symmetric difference quotient of |x_j| at 0 is 0, which is the sign(0) = 0
    # rule refnorm follows (for p < 1 mpmath's step 1e-25 moves the norm by |h|^p ~ 1e-13: torch test only)
    x = np.array([[0.0, 1.5, -2.0, 0.0], [3.0, 0.0, 0.25, -1.0]])
    oracle_check(NAME, {"x": x}, {"p": 1.0, "dim": 1}, mp_lp_normalize(1.0, 1e-12), outputs=("y", "norm"))


@pytest.mark.parametrize("p", [1.0, 2.0, 0.5, 7.0])
@pytest.mark.parametrize("log2c", [-600, 660])
def test_lp_normalize_extreme_magnitudes_match_mpmath(p, log2c):
    # |x| ~ 1e-180 or 1e199: sum |x|^p under/overflows in float64 (torch: normalize([1e200, 1e200]) =
    # [0, 0], normalize([3e-170, 4e-170], eps=0) = [inf, inf]); refnorm's scaled norm does not. mp_grads'
    # fixed step cannot differentiate at these magnitudes: with eps = 0, y is 0-homogeneous, so
    # dx(c x0) = dx(x0) / c (c = 2^log2c, exact in both precisions).
    rng = np.random.default_rng(11)
    x0 = rng.standard_normal((2, 5))
    c = 2.0 ** log2c
    dy = rng.standard_normal(x0.shape)
    res = run(x0 * c, dy=dy, p=p, dim=1, eps=0.0)
    f = mp_lp_normalize(p, 0.0)
    worst = 0.0
    with mpmath.workdps(MP_DPS):
        want = f({"x": to_mp(x0 * c)})
        g = mp_grads(lambda d: {"y": f(d)["y"]}, {"x": to_mp(x0)}, {"y": dy})["x"] / mpmath.mpf(2) ** log2c
        for got, exact in ((res.outputs["y"], want["y"]), (res.outputs["norm"], want["norm"]), (res.grads["x"], g)):
            err = rel_error(got, exact)
            worst = max(worst, err)
            assert err <= 1e-13, f"error {err:.3e} vs mpmath at |x| ~ 2^{log2c}, p={p}"
    record(NAME, "mpmath", worst)


# ----------------------------------------------------------------------------- torch float64
@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("shape,dim", [((4, 7), 1), ((2, 3, 5), -1), ((3, 2, 2, 3), [1, 3]), ((5,), 0),
                                       ((2, 3, 4), [0, 1, 2])])
@pytest.mark.parametrize("eps", [1e-12, 0.5])
def test_lp_normalize_matches_torch_float64(p, shape, dim, eps):
    # worst case ~2.5e-15 (p = 0.5 over all 24 entries of (2, 3, 4)): measured against mpmath, torch's
    # gradient is 1.8e-15 off and refnorm's 7.8e-16 (|u|^(p-1) is large at the 1e-2 entry)
    torch = require_torch()
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    x[(0,) * x.ndim] *= 1e-2   # with eps = 0.5 some slices fall below eps
    dy = rng.standard_normal(shape)
    tdim = tuple(dim) if isinstance(dim, list) else dim

    def fn(x):
        return {"y": torch.nn.functional.normalize(x, p=p, dim=tdim, eps=eps), "norm": x.norm(p, tdim, keepdim=True)}

    t_out, t_grads = torch_vjp(torch, fn, {"x": x}, {"y": dy})
    res = run(x, dy=dy, p=p, dim=dim, eps=eps)
    for key in ("y", "norm"):
        assert_close_rel(res.outputs[key], t_out[key], 1e-13, f"output {key}", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)


@pytest.mark.parametrize("p", PS)
def test_lp_normalize_special_slices_like_torch(p):
    """Zero entries with p <= 1 (torch: sign(0) = 0, the norm path adds nothing), an all-zero slice
    (y = 0, dx = dy / eps), norm == eps exactly (clamp_min's gradient goes to the norm: the projection),
    and NaN / Inf slices (NaN where torch has NaN, also inf/inf = NaN next to 0 = 2/inf)."""
    torch = require_torch()
    t = 2.0 ** -42
    x = np.array([[0.0, 1.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0], [3 * t, 4 * t, 0.0, 0.0], [np.nan, 1.0, 2.0, 3.0],
                  [np.inf, 1.0, 2.0, -1.0], [1e-13, 0.0, -1e-13, 0.0]])
    # row 2's norm (3^p + 4^p)^(1/p) * 2^-42 is exact in float64 for p in {1, 2}: eps = that norm (~1e-12,
    # so rows 0, 3, 4 stay far above eps and rows 1, 5 below it)
    eps = {1.0: 7 * t, 2.0: 5 * t}.get(p, 1e-12)
    dy = np.random.default_rng(4).standard_normal(x.shape)
    fn = lambda x: {"y": torch.nn.functional.normalize(x, p=p, dim=1, eps=eps)}  # noqa: E731
    t_out, t_grads = torch_vjp(torch, fn, {"x": x}, {"y": dy})
    res = run(x, dy=dy, p=p, dim=1, eps=eps)
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
    for r in range(x.shape[0]):   # row by row: the dy / eps rows would swamp the other rows' errors
        assert_close_rel(res.grads["x"][r], t_grads["x"][r], 1e-13, f"grad x row {r}", NAME)
    if p in (1.0, 2.0):
        assert res.outputs["norm"][2, 0] == eps
        assert not np.allclose(res.grads["x"][2], dy[2] / eps)   # the projection, not the clamp branch
    # x_j = 0 in a non-zero slice: the norm path adds nothing (torch's sign(0) = 0, for every p)
    y0 = res.outputs["y"][0]
    np.testing.assert_allclose(res.grads["x"][0, [0, 3]], dy[0, [0, 3]] * y0[1] / x[0, 1], rtol=1e-15)


def test_lp_normalize_zero_slice_with_eps_zero_is_nan_like_torch():
    torch = require_torch()
    x = np.array([[0.0, 0.0], [1.0, 2.0]])
    dy = np.ones_like(x)
    t_out, t_grads = torch_vjp(torch, lambda x: {"y": torch.nn.functional.normalize(x, eps=0.0)}, {"x": x}, {"y": dy})
    res = run(x, dy=dy, eps=0.0)
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)
    assert np.isnan(res.outputs["y"][0]).all() and np.isnan(res.grads["x"][0]).all()


def test_lp_normalize_empty_like_torch():
    torch = require_torch()
    for shape in [(2, 0), (0, 4), (3, 0, 2)]:
        x = np.zeros(shape)
        tx = torch.tensor(x)
        res = run(x, dy=np.zeros(shape))
        np.testing.assert_array_equal(res.outputs["y"], torch.nn.functional.normalize(tx).numpy())
        np.testing.assert_array_equal(res.outputs["norm"], tx.norm(2, 1, keepdim=True).numpy())
        assert res.grads["x"].shape == shape


# ----------------------------------------------------------------------------- ONNX LpNormalization
def onnx_lp_normalization(x, axis, p):
    """Direct transcription of the ONNX LpNormalization-22 spec (not its reference evaluator, which drops
    the abs for p = 1): norm = (sum |x|^p)^(1/p) along axis; y = 0 where norm == 0, else x / norm."""
    norm = np.sum(np.abs(x) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, 0.0, x / norm)


@pytest.mark.parametrize("p", [1.0, 2.0])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalize_onnx_rule_matches_onnx_spec_formula(p, axis):
    x = np.random.default_rng(9).standard_normal((3, 4, 5))
    x[1, :, 2] = 0.0   # an all-zero slice along axis 1
    x[:, 1, :] = 0.0   # all-zero slices along axes 0 and 2
    assert np.all(x == 0, axis=axis).any()
    y = run(x, p=p, dim=axis, zero_rule="onnx").outputs["y"]
    # a few roundings apart (refnorm scales by max|x| before summing)
    np.testing.assert_allclose(y, onnx_lp_normalization(x, axis, p), rtol=1e-15, atol=1e-15)


def test_lp_normalize_p1_uses_absolute_values():
    # docs/conventions.md section 3: the ONNX reference evaluator (no abs) gives [[.5,-1,1.5],[0,0,0]] here
    x = np.array([[1.0, -2.0, 3.0], [-1.0, -1.0, 2.0]])
    want = np.array([[1 / 6, -1 / 3, 1 / 2], [-0.25, -0.25, 0.5]])
    for rule in ("torch", "onnx"):
        np.testing.assert_allclose(run(x, p=1.0, dim=1, zero_rule=rule).outputs["y"], want, rtol=1e-15)


def test_lp_normalize_onnx_zero_slice_gradient_like_torch_where():
    # ONNX's y = where(norm == 0, 0, x / norm), written the autograd-safe way (divide by
    # where(norm == 0, 1, norm)): float64 autograd gives dx = 0 on the all-zero slice (the derivative of
    # the constant branch) and the projection elsewhere. The naive where(norm == 0, 0, x / norm) gives
    # NaN there (0 * 1/0 in the unselected branch's backward): an autograd artefact, not a convention.
    torch = require_torch()
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    dy = np.random.default_rng(5).standard_normal(x.shape)

    def fn(x):
        norm = x.norm(2, 1, keepdim=True)
        zero = norm == 0
        return {"y": torch.where(zero, torch.zeros_like(x), x / torch.where(zero, torch.ones_like(norm), norm))}

    t_out, t_grads = torch_vjp(torch, fn, {"x": x}, {"y": dy})
    res = run(x, dy=dy, zero_rule="onnx")
    assert_close_rel(res.outputs["y"], t_out["y"], 1e-13, "output y", NAME)
    assert_close_rel(res.grads["x"], t_grads["x"], 1e-13, "grad x", NAME)
    np.testing.assert_array_equal(res.grads["x"][0], 0.0)
    # no eps: a tiny slice still normalizes. (An unscaled norm, as in torch or the spec formula above,
    # underflows here: sum x^2 = 1e-600 -> 0, so where() would wrongly pick 0.)
    np.testing.assert_array_equal(run(np.array([[1e-300, 0.0, 0.0]]), zero_rule="onnx").outputs["y"], [[1.0, 0.0, 0.0]])


# ----------------------------------------------------------------------------- bad input, NaN
def test_lp_normalize_rejects_bad_input():
    x = np.ones((2, 3))
    for p in (0, 0.0, -1.0):
        with pytest.raises(refnorm.ConfigError, match=rf"p={p!r}; expected a number > 0"):
            run(x, p=p)
    with pytest.raises(refnorm.ConfigError, match="p='2'"):
        run(x, p="2")
    with pytest.raises(refnorm.RefnormError, match="p=inf must be finite"):
        run(x, p=float("inf"))
    with pytest.raises(refnorm.ConfigError, match="eps=-1.0"):
        run(x, eps=-1.0)
    with pytest.raises(refnorm.ConfigError, match="zero_rule='numpy'"):
        run(x, zero_rule="numpy")
    with pytest.raises(refnorm.ConfigError, match="eps=0.001 with zero_rule='onnx'"):
        run(x, zero_rule="onnx", eps=1e-3)
    with pytest.raises(refnorm.ConfigError, match="axis 2 is out of range"):
        run(x, dim=2)
    with pytest.raises(refnorm.ConfigError, match="repeats an axis"):
        run(x, dim=[1, -1])
    with pytest.raises(refnorm.ConfigError, match=r"dim=\[\]; expected an int or a non-empty list"):
        run(x, dim=[])
    with pytest.raises(refnorm.ConfigError, match="axis 1 is out of range for an input with 1 dimensions"):
        run(np.ones(3))   # torch's default dim=1 needs 2 dimensions
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        run(np.ones((2, 3), dtype=np.int64))
    with pytest.raises(refnorm.UnknownNameError, match="'axis'"):
        run(x, axis=-1)
    with pytest.raises(refnorm.UnknownNameError, match="'norm' are statistics"):
        refnorm.evaluate(NAME, {"x": x}, grad_outputs={"norm": np.ones((2, 1))})


@pytest.mark.parametrize("rule", ["torch", "onnx"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_lp_normalize_nan_stays_in_its_slice(rule, bad):
    x = np.random.default_rng(0).standard_normal((3, 4, 2))
    x[1, 2, 0] = bad
    res = run(x, dy=np.ones_like(x), zero_rule=rule)   # dim=1: slices are x[n, :, w]
    for a in (res.outputs["y"], res.grads["x"]):
        mask = np.ones(x.shape, bool)
        mask[1, :, 0] = False
        assert np.isfinite(a[mask]).all()
        assert (~np.isfinite(a[1, :, 0])).any()
    assert np.isnan(res.grads["x"][1, :, 0]).all()
