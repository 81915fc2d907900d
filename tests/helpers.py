"""Shared test machinery: numerical VJP checks, the mpmath oracle harness, torch access.

check_vjp      -- every backward against numerical differentiation (scipy.differentiate.derivative,
                  Richardson-extrapolated central differences) along random directions.
mp_grads       -- the exact gradient of an mpmath forward at 50+ digits (central differences with
                  h = 1e-25 at dps = 80: truncation O(h^2) ~ 1e-50, cancellation ~ 1e-55).
oracle_check   -- compare refnorm's outputs and gradients with the oracle, error relative to each
                  array's scale, against 1e-13 * (1 + cond).
"""
from __future__ import annotations

import os
import sys

import mpmath
import numpy as np
import pytest
import scipy.differentiate

import refnorm
from refnorm.check.backends.base import Call

MP_DPS = 80

# worst errors seen this session, per (normalizer, "mpmath" | "torch"): printed by conftest's
# terminal summary so the figures in the closing notes come from the test run itself
WORST: dict[tuple[str, str], float] = {}


def record(name: str, kind: str, err: float) -> None:
    WORST[(name, kind)] = max(WORST.get((name, kind), 0.0), float(err))
MP_STEP = mpmath.mpf("1e-25")


# ---------------------------------------------------------------------------- numerical VJP check
def _phi(name, inputs, config, state, training, cot, direction, s):
    shifted = {k: v + s * direction[k] if k in direction else v for k, v in inputs.items()}
    out = refnorm.evaluate(name, shifted, config=config, state=state, training=training).outputs
    return sum(float(np.sum(cot[k] * out[k])) for k in cot)


def check_vjp(name, inputs, config=None, *, state=None, training=True, seed=20261122, n_dirs=2,
              rtol=1e-7, step=None, wrt=None, grad_scale=0.0):
    """Assert <grad, t> == d/ds <cot, f(inputs + s t)> at s=0 for random t, per input.

    Passes when |got - want| <= rtol * max(|want|, sum|grad * t|) + 2 * (scipy's error estimate)
    + 1e-11 * grad_scale * max|cot| * sum|t|:
    ``grad_scale`` is the size of the terms that cancel inside one gradient element (rstd * |weight|
    for the centred norms), so exact-zero gradients computed as rounding noise do not fail.
    Returns the worst relative discrepancy seen. ``step`` is the initial finite-difference step
    (default: 1e-2 times the input's scale); ``wrt`` restricts the inputs checked.
    """
    rng = np.random.default_rng(seed)
    spec = refnorm.get(name)
    base = refnorm.evaluate(name, inputs, config=config, state=state, training=training)
    cot = {k: rng.standard_normal(base.outputs[k].shape) for k in spec.differentiable if k in base.outputs}
    res = refnorm.evaluate(name, inputs, config=config, state=state, training=training, grad_outputs=cot)
    worst = 0.0
    for k in (wrt or inputs):
        v = np.asarray(inputs[k], dtype=np.float64)
        if v.size == 0:
            continue
        scale = max(float(np.max(np.abs(v))), 1e-3)
        for _ in range(n_dirs):
            t = rng.standard_normal(v.shape)
            h = step if step is not None else 1e-2 * scale
            f = np.vectorize(lambda s: _phi(name, inputs, config, state, training, cot, {k: t}, s))
            # order-8 Richardson from a step of 1% of the input's scale; few halvings, so rounding noise
            # (which grows as the step shrinks) cannot dominate the estimate
            d = scipy.differentiate.derivative(f, 0.0, initial_step=h, step_factor=2.0, order=8, maxiter=6,
                                               tolerances=dict(rtol=1e-11, atol=0.0))
            got = float(np.sum(res.grads[k] * t))
            want = float(d.df)
            denom = max(abs(want), float(np.sum(np.abs(res.grads[k] * t))), 1e-300)
            rel = abs(got - want) / denom
            floor = 1e-11 * float(grad_scale) * max(float(np.max(np.abs(c))) for c in cot.values()) \
                * float(np.sum(np.abs(t)))
            worst = max(worst, rel)
            assert abs(got - want) <= rtol * denom + floor + 2 * float(d.error), (
                f"{name}: gradient of input {k!r} disagrees with numerical differentiation: "
                f"<grad, t> = {got!r}, d/ds = {want!r} (+- {float(d.error):.2e}), relative {rel:.2e} > {rtol:.0e}; "
                f"config={config}")
    return worst


def central_differences(loss, inputs, key, h=1e-6):
    """d loss / d inputs[key], element by element: (loss(key + h) - loss(key - h)) / 2h, the other
    inputs held (``loss`` takes a dict of inputs and returns a float)."""
    g = np.zeros_like(inputs[key])
    for idx in np.ndindex(inputs[key].shape):
        hi, lo = dict(inputs), dict(inputs)
        hi[key], lo[key] = inputs[key].copy(), inputs[key].copy()
        hi[key][idx] += h
        lo[key][idx] -= h
        g[idx] = (loss(hi) - loss(lo)) / (2 * h)
    return g


# ------------------------------------------------------------------------------- mpmath oracle
def to_mp(a) -> np.ndarray:
    """float64 array -> object array of exact mpf values."""
    a = np.asarray(a, dtype=np.float64)
    out = np.empty(a.shape, dtype=object)
    for i, v in np.ndenumerate(a):
        out[i] = mpmath.mpf(float(v))
    return out


def to_f64(a) -> np.ndarray:
    a = np.asarray(a, dtype=object)
    out = np.empty(a.shape, dtype=np.float64)
    for i, v in np.ndenumerate(a):
        out[i] = float(v)
    return out


mp_sqrt = np.vectorize(mpmath.sqrt, otypes=[object])
mp_abs = np.vectorize(abs, otypes=[object])


def mp_sum(a, axis, keepdims=True):
    """Exact-ish sum of an object array (mpmath adds at the working precision)."""
    return np.sum(a, axis=axis, keepdims=keepdims)


def mp_over_slices(d, axes, normalize):
    """A plain-loop mpmath forward over the slices of d["x"] along ``axes`` (min_max_scale, z_score): each
    slice flattened to a row, ``normalize(row) -> (normalized row, (statistics, ...))``, then weight and
    bias (shaped as the slice, where d has them) entry by entry. Returns y and the statistics, each shaped
    as x with ``axes`` kept as 1."""
    x = d["x"]
    k = len(axes)
    moved = np.moveaxis(x, axes, range(x.ndim - k, x.ndim))
    rows = moved.reshape(-1, int(np.prod(moved.shape[x.ndim - k:])))
    w = d["weight"].ravel() if "weight" in d else None
    b = d["bias"].ravel() if "bias" in d else None
    ys, stats = np.empty(rows.shape, object), []
    for r, row in enumerate(rows):
        normalized, s = normalize(row)
        for j, y in enumerate(normalized):
            ys[r, j] = y * (w[j] if w is not None else 1) + (b[j] if b is not None else 0)
        stats.append(s)
    y = np.moveaxis(ys.reshape(moved.shape), range(x.ndim - k, x.ndim), axes)
    stat_shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
    return y, [np.array(column, dtype=object).reshape(stat_shape) for column in zip(*stats)]


def mp_norm_over_sets(d, eps, n_sets, members, running=None):
    """A plain-loop mpmath centred norm (group_norm, instance_norm): for each instance n (axis 0 of
    x = d["x"]) and set s < ``n_sets``, the elements ``members(n, s)`` (index tuples into x) are
    normalized by their mean and biased variance, or, when ``running`` = (means, variances) is given (eval
    on running statistics), by ``running[0][s]`` and ``running[1][s]``, with eps added to the variance;
    then the per-channel (axis 1) d["weight"] and d["bias"] where d has them. Returns {"y", "mean",
    "rstd"}, mean and rstd of shape (N, n_sets)."""
    x = d["x"]
    N = x.shape[0]
    y = np.empty(x.shape, dtype=object)
    mean = np.empty((N, n_sets), dtype=object)
    rstd = np.empty((N, n_sets), dtype=object)
    for n in range(N):
        for s in range(n_sets):
            idx = members(n, s)
            if running is None:
                mu = mpmath.fsum(x[i] for i in idx) / len(idx)
                var = mpmath.fsum((x[i] - mu) ** 2 for i in idx) / len(idx)
            else:
                mu, var = mpmath.mpf(running[0][s]), mpmath.mpf(running[1][s])
            r = 1 / mpmath.sqrt(var + mpmath.mpf(eps))
            for i in idx:
                v = (x[i] - mu) * r
                if "weight" in d:
                    v = v * d["weight"][i[1]]
                if "bias" in d:
                    v = v + d["bias"][i[1]]
                y[i] = v
            mean[n, s], rstd[n, s] = mu, r
    return {"y": y, "mean": mean, "rstd": rstd}


def mp_grads(f, inputs_mp: dict, cot: dict, wrt=None) -> dict:
    """Gradient of sum_k <cot_k, f(inputs)_k> wrt every input, by central differences in mpmath.

    ``f(inputs_mp) -> dict name -> object array``. Must be called inside ``mpmath.workdps(MP_DPS)``.
    """
    cot_mp = {k: to_mp(v) for k, v in cot.items()}

    def phi(inp):
        out = f(inp)
        return sum((np.sum(cot_mp[k] * out[k]) for k in cot_mp), mpmath.mpf(0))

    grads = {}
    for name in (wrt or inputs_mp):
        base = inputs_mp[name]
        g = np.empty(base.shape, dtype=object)
        for idx in np.ndindex(base.shape):
            plus, minus = base.copy(), base.copy()
            plus[idx] = base[idx] + MP_STEP
            minus[idx] = base[idx] - MP_STEP
            g[idx] = (phi({**inputs_mp, name: plus}) - phi({**inputs_mp, name: minus})) / (2 * MP_STEP)
        grads[name] = g
    return grads


def rel_error(got, want_mp) -> float:
    """max |got - want| / max |want| (absolute error when want is all zero)."""
    want = np.asarray(want_mp, dtype=object)
    if want.size == 0:
        return 0.0
    diff = max(abs(mpmath.mpf(float(g)) - w) for g, w in zip(np.ravel(got), want.ravel()))
    scale = max(abs(w) for w in want.ravel())
    return float(diff / scale) if scale != 0 else float(diff)


def oracle_check(name, inputs, config, f_mp, *, cond=0.0, state=None, training=True, seed=20261122,
                 outputs=None, factor=1e-13):
    """Compare refnorm (forward and backward) with the mpmath oracle ``f_mp``; return the worst error.

    ``f_mp(inputs_mp) -> dict`` computes the outputs named in ``outputs`` (default: the
    differentiable ones) in mpmath; the gradients come from ``mp_grads``. Asserts every error is
    below ``factor * (1 + cond)`` relative to the array's scale.
    """
    spec = refnorm.get(name)
    rng = np.random.default_rng(seed)
    base = refnorm.evaluate(name, inputs, config=config, state=state, training=training)
    cot = {k: rng.standard_normal(base.outputs[k].shape) for k in spec.differentiable if k in base.outputs}
    res = refnorm.evaluate(name, inputs, config=config, state=state, training=training, grad_outputs=cot)
    bound = factor * (1.0 + cond)
    worst = 0.0
    with mpmath.workdps(MP_DPS):
        inp_mp = {k: to_mp(v) for k, v in inputs.items()}
        want = f_mp(inp_mp)
        for k in outputs or spec.differentiable:
            err = rel_error(res.outputs[k], want[k])
            worst = max(worst, err)
            assert err <= bound, f"{name}: output {k!r} error {err:.3e} > {bound:.3e} vs mpmath; config={config}"
        grads = mp_grads(lambda d: {k: v for k, v in f_mp(d).items() if k in cot}, inp_mp, cot)
        for k, g in grads.items():
            err = rel_error(res.grads[k], g)
            worst = max(worst, err)
            assert err <= bound, f"{name}: grad {k!r} error {err:.3e} > {bound:.3e} vs mpmath; config={config}"
    record(name, "mpmath", worst)
    record(name, "mpmath/(1+cond)", worst / (1.0 + cond))
    return worst


# ----------------------------------------------------------------------------------------- torch
def require_torch():
    """The torch module, or a skip that says why (torch is an optional dependency)."""
    return pytest.importorskip(
        "torch", reason="torch is not installed: cross-checks against torch float64 autograd skipped "
                        "(pip install torch==2.13.0)")


def torch_vjp(torch, fn, inputs: dict, cot: dict):
    """Run ``fn(**tensors) -> dict of outputs`` in float64 autograd; return (outputs, grads) as NumPy."""
    ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in inputs.items()}
    out = fn(**ts)
    loss = sum((out[k] * torch.tensor(cot[k], dtype=torch.float64)).sum() for k in cot)
    params = [t for t in ts.values()]
    gs = torch.autograd.grad(loss, params, allow_unused=True)
    grads = {k: (np.zeros_like(inputs[k]) if g is None else g.detach().numpy()) for k, g in zip(ts, gs)}
    return {k: v.detach().numpy() for k, v in out.items()}, grads


def inputs_of(x, weight=None, bias=None) -> dict:
    """{"x": x} with the affine parameters that are given (None: left out)."""
    return {"x": x, **({"weight": weight} if weight is not None else {}),
            **({"bias": bias} if bias is not None else {})}


def drawn_affine(rng, affine, pshape) -> dict:
    """The affine parameters of a cross-check, N(0, 1) of shape ``pshape`` from ``rng``: weight for
    ``affine`` "weight" or "both", then bias for "both"; none for "none"."""
    p = {}
    if affine in ("weight", "both"):
        p["weight"] = rng.standard_normal(pshape)
    if affine == "both":
        p["bias"] = rng.standard_normal(pshape)
    return p


def channel_norm_torch_case(shape, affine, seed=7) -> tuple:
    """(inputs, dy) of a torch float64 cross-check of a per-channel norm, all from one rng(seed): x = 2 + 3
    N(0, 1) of ``shape``, then drawn_affine parameters of shape (C,) (C = shape[1]), then dy N(0, 1)."""
    rng = np.random.default_rng(seed)
    inputs = {"x": 2 + 3 * rng.standard_normal(shape), **drawn_affine(rng, affine, shape[1])}
    return inputs, rng.standard_normal(shape)


def check_train_eval_oracle(name, x, eps, mode, mp_norm, stats_state, axes):
    """oracle_check of ``name`` (outputs y, mean, rstd) on ``x`` with a per-channel (axis 1) N(0, 1)
    weight and bias drawn from rng(5): ``mode`` "train" on x's own statistics (conditioned as
    cond_number over ``axes``), "eval" on the running statistics ``stats_state(C, rng)`` drawn next (no
    conditioning). ``mp_norm(eps, state)`` is the op's mpmath forward (state None in train mode)."""
    rng = np.random.default_rng(5)
    c = x.shape[1]
    inputs = {"x": x, "weight": rng.standard_normal(c), "bias": rng.standard_normal(c)}
    state = stats_state(c, rng) if mode == "eval" else None
    cond = cond_number(x, axes, eps) if mode == "train" else 0.0
    oracle_check(name, inputs, {"eps": eps}, mp_norm(eps, state), cond=cond, state=state,
                 training=mode == "train", outputs=("y", "mean", "rstd"))


def affine_along(y, weight, bias, dims):
    """y * weight + bias (NumPy or torch), the parameters laid along the axes ``dims`` of y (None: left out)."""
    view = [s if i in dims else 1 for i, s in enumerate(y.shape)]
    if weight is not None:
        y = y * weight.reshape(view)
    if bias is not None:
        y = y + bias.reshape(view)
    return y


def assert_like_torch(res, t_out, t_grads, outputs, rtol, name, grad_rtol=None):
    """refnorm's result ``res`` against torch's (torch_vjp): each of ``outputs`` within ``rtol``, every
    gradient torch gives within ``grad_rtol`` (default ``rtol``), relative to its largest magnitude."""
    for key in outputs:
        assert_close_rel(res.outputs[key], t_out[key], rtol, f"output {key}", name)
    for key in t_grads:
        assert_close_rel(res.grads[key], t_grads[key], rtol if grad_rtol is None else grad_rtol, f"grad {key}", name)


def assert_eval_is_affine_map(name, inputs, config, state, grad_outputs=None):
    """Eval mode of ``name`` on running statistics ``state`` is an affine map of x: f(2x - z/2) equals
    2 f(x) - f(z)/2 - f(0)/2 to 1e-11 (z a fixed standard normal draw), and leaves every array of ``state``
    unchanged. Returns the eval Result at ``inputs`` (with ``grad_outputs``, when given)."""
    x = inputs["x"]
    f = lambda v: refnorm.evaluate(name, {**inputs, "x": v}, config=config, state=state,
                                   training=False).outputs["y"]
    z = np.random.default_rng(2).standard_normal(x.shape)
    lhs = f(2.0 * x - 0.5 * z)
    rhs = 2.0 * f(x) - 0.5 * f(z) - 0.5 * f(np.zeros_like(x))  # affine: f(a+b) = f(a)+f(b)-f(0)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-11, atol=1e-11 * np.abs(lhs).max())
    r = refnorm.evaluate(name, inputs, config=config, state=state, training=False, grad_outputs=grad_outputs)
    for k in state:  # eval leaves the running statistics alone
        np.testing.assert_array_equal(r.state[k], state[k])
    return r


def assert_input_gradient_sums_to_zero(name, inputs, eps, axes):
    """The x gradient of the centred norm ``name`` (dy N(0, 1) from rng(1)) sums to zero over each set it
    normalizes (``axes`` of x), to 1e-15 of |dy| max * |weight| max * the largest rstd * the set's size.
    No |mean|/std factor: the deviations are re-centred (_common.centered)."""
    x = inputs["x"]
    dy = np.random.default_rng(1).standard_normal(x.shape)
    dx = refnorm.evaluate(name, inputs, config={"eps": eps}, grad_outputs={"y": dy}).grads["x"]
    w = np.abs(inputs.get("weight", np.ones(1))).max()
    scale = np.abs(dy).max() * w / np.sqrt(x.var(axis=axes).min() + eps)
    size = int(np.prod([x.shape[a] for a in axes]))
    assert np.max(np.abs(dx.sum(axis=axes))) <= 1e-15 * scale * size


def assert_close_rel(got, want, rtol, what, name=None):
    """max|got - want| <= rtol * max(max|want|, tiny); NaN must match NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN positions differ"
    m = ~np.isnan(want)
    if not m.any():
        return 0.0
    scale = float(np.max(np.abs(want[m]))) or 1.0
    err = float(np.max(np.abs(got[m] - want[m]))) / scale
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.0e}"
    if name:
        record(name, "torch", err)
    return err


def assert_permutation_equivariant_off_axes(y_of, x, axes):
    """y_of(x permuted along its first axis outside ``axes``) is y_of(x) permuted the same way, bit for bit
    (nothing is summed along that axis); nothing to check where every axis is normalized."""
    free = [i for i in range(x.ndim) if i not in axes]
    if not free:
        return
    perm = np.random.default_rng(0).permutation(x.shape[free[0]])
    np.testing.assert_array_equal(y_of(np.take(x, perm, axis=free[0])), np.take(y_of(x), perm, axis=free[0]))


def assert_refuses_normalized_shape_misuse(name):
    """What an op configured by normalized_shape (layer_norm, rms_norm) refuses, naming the value: a
    normalized_shape that is not x's trailing shape, a weight of another shape, eps < 0, integer x, an
    unknown config key, no normalized_shape at all."""
    x = np.ones((2, 3))
    with pytest.raises(refnorm.ShapeError, match="normalized_shape"):
        refnorm.evaluate(name, {"x": x}, config={"normalized_shape": [4]})
    with pytest.raises(refnorm.ShapeError, match="'weight' has shape"):
        refnorm.evaluate(name, {"x": x, "weight": np.ones(4)}, config={"normalized_shape": [3]})
    with pytest.raises(refnorm.ConfigError, match="eps=-0.5"):
        refnorm.evaluate(name, {"x": x}, config={"normalized_shape": [3], "eps": -0.5})
    with pytest.raises(refnorm.InputTypeError, match="int64"):
        refnorm.evaluate(name, {"x": np.ones((2, 3), dtype=np.int64)}, config={"normalized_shape": [3]})
    with pytest.raises(refnorm.UnknownNameError, match="'axis'"):
        refnorm.evaluate(name, {"x": x}, config={"normalized_shape": [3], "axis": -1})
    with pytest.raises(refnorm.RefnormError, match="normalized_shape"):
        refnorm.evaluate(name, {"x": x})


def cond_number(x, axes, eps=0.0):
    """|mean| / sqrt(var + eps) of the worst slice: the conditioning of mean removal."""
    x = np.asarray(x, dtype=np.float64)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.abs(m) / np.sqrt(v + eps)
    c = c[np.isfinite(c)]
    return float(c.max()) if c.size else 0.0


class StrictTestBackend:
    """The parts of a test backend that say nothing (refnorm.check.backends.base.Backend): always
    available, supports every call, the strict contract with the block reduction model. A subclass
    gives ``name`` and ``run``."""

    def available(self):
        return None

    def supports(self, call):
        return None

    def contract(self, call):
        from refnorm.check.backends.base import Contract
        return Contract("strict", "block")


class VariantBackend(StrictTestBackend):
    """Returns the float64 values of the pitfall variant ``vid`` of ``op`` (refnorm.pitfalls), and no state,
    under the contract ``kind`` (default strict) with the block reduction model."""
    name = "variant"

    def __init__(self, op, vid, kind="strict"):
        from refnorm import pitfalls
        self.variant = [v for v in pitfalls.variants(op) if v.id == vid][0]
        self.kind = kind

    def contract(self, call):
        from refnorm.check.backends.base import Contract
        return Contract(self.kind, "block")

    def run(self, call):
        from refnorm.check.backends.base import Returned
        f = {k: np.asarray(v, dtype=np.float64) for k, v in call.inputs.items()}
        c = {k: np.asarray(v, dtype=np.float64) for k, v in call.cotangents.items()}
        r = self.variant.evaluate(f, call.config, {}, call.training, c, call.dtype)
        return Returned(dict(r.outputs), dict(r.grads), {})


# ------------------------------------------------------------------ runners that never leak a process
def descendants(pid) -> set:
    """Every process below ``pid`` (its children, theirs, ...), read from /proc."""
    out, changed = {pid}, True
    while changed:
        changed = False
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) in out:
                continue
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in out:
                out.add(int(p))
                changed = True
    return out - {pid}


def living(pids) -> list:
    """The processes of ``pids`` still running (a zombie has ended)."""
    alive = []
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(p)
        except OSError:
            pass
    return alive


def kill_runner_and_count_survivors(code, *, cwd, workers, sig, within=5.0, start_limit=120.0):
    """Run the Python ``code`` in a child process (the runner), wait until it has at least ``workers``
    descendant processes and they have settled (a hung worker), send the runner ``sig``, and return the
    descendants still running ``within`` seconds later (each is then killed, so a failing test leaves
    nothing either). The runner's own output goes to a pipe that is drained."""
    import signal
    import subprocess
    import time
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    seen = set()
    try:
        deadline = time.monotonic() + start_limit
        while time.monotonic() < deadline and proc.poll() is None:
            seen = descendants(proc.pid)
            if len(seen) >= workers:
                break
            time.sleep(0.2)
        assert proc.poll() is None, f"the runner ended before its workers started (exit {proc.returncode})"
        assert len(seen) >= workers, f"only {len(seen)} worker processes started within {start_limit} s"
        time.sleep(3.0)                                  # the call is sent and the worker hangs in it
        seen |= descendants(proc.pid)
        os.kill(proc.pid, sig)
        proc.wait(30)
        time.sleep(within)
        return living(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in seen:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


class Wrapping:
    """A test backend around another one (``self.inner``): available, supports and contract are the inner
    backend's; a subclass sets ``name`` and ``inner`` and writes ``run``."""

    def available(self):
        return None

    def supports(self, call):
        return self.inner.supports(call)

    def contract(self, call):
        return self.inner.contract(call)


# ------------------------------------------------------------------ the quick and thorough test profiles
def thorough() -> bool:
    """True in the thorough profile (REFNORM_TESTS=thorough: what .ci/run runs; tests/conftest.py)."""
    return os.environ.get("REFNORM_TESTS", "quick") == "thorough"


def sample(items, every: int) -> list:
    """``items`` in the thorough profile; every ``every``-th of them (from the first, in their order) in the
    quick one: the same property checked on a fixed, spread-out part of the cases."""
    items = list(items)
    return items if thorough() else items[::every]


# ------------------------------------------------------------------ what a fresh interpreter loads
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")


def assert_loads_none_of(code, modules, timeout=120):
    """Run the Python ``code`` in a fresh interpreter in the repository root: it exits 0 (its stderr is the
    message otherwise) and leaves no module loaded whose name starts with one of ``modules``."""
    import subprocess
    check = (f"\nimport sys\nbad = sorted(m for m in sys.modules if m.startswith({tuple(modules)!r}))\n"
             "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code + check], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr


def assert_adapter_loads_no_framework(make, unsupported, contract, frameworks):
    """A framework adapter answers without its framework: after ``make`` (Python that imports the adapter and
    binds its backend to ``b``), supports_config of a float32 layer_norm (None: supported), of the float32 op
    ``unsupported`` (a reason) and contract_for(*``contract``) load none of ``frameworks``."""
    assert_loads_none_of(
        f"import refnorm, refnorm.check\n{make}\n"
        "assert b.supports_config('layer_norm', 'float32', {'normalized_shape': [4]}, True) is None\n"
        f"assert b.supports_config({unsupported!r}, 'float32', {{}}, True)\n"
        f"b.contract_for{tuple(contract)!r}\n", frameworks)


def assert_checker_accepts(backend, ids, skip_message):
    """check_case of ``backend`` on each golden case of ``ids`` is passed, or partial where an array is
    ill-posed under the declared contract, never unchecked; on z_score/normal_f32_6x100 (an op no framework
    has) it is skipped, its message holding ``skip_message``."""
    from refnorm import golden
    from refnorm.check.core import check_case
    for cid in ids:
        r = check_case(backend, golden.load_case(GOLDEN, cid))
        assert r.status in ("passed", "partial") and not r.unchecked, (cid, r.status, r.message)
    r = check_case(backend, golden.load_case(GOLDEN, "z_score/normal_f32_6x100"))
    assert r.status == "skipped" and skip_message in r.message, (r.status, r.message)


# ------------------------------------------------------------------ the Triton examples
def triton_example(module):
    """(torch, the Triton example ``module``), or a skip of the whole test module saying why (triton and torch
    are optional; CI pins triton). Call it at collection, before anything imports triton: without a GPU the
    example sets TRITON_INTERPRET=1 first (triton reads it when it is first imported)."""
    import importlib
    import importlib.util
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (CI pins triton==3.9.0 in .ci/run)", allow_module_level=True)
    torch = pytest.importorskip("torch")
    return torch, importlib.import_module(module)


def small_case_ids(op, dtypes=None, limit=1000):
    """The ids of the golden cases of ``op`` (of ``dtypes``, default all) whose x has at most ``limit``
    elements: the ones an interpreted Triton kernel checks in seconds."""
    from refnorm.golden import store
    return [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == op
            and np.prod(e["case"]["inputs"]["x"]) <= limit and (dtypes is None or e["case"]["dtype"] in dtypes)]


# ------------------------------------------------------------------ a framework adapter against golden values
def f64(a):
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else a.astype(np.float64)


def run_case(backend, case):
    """Every step of a golden case through ``backend``, chaining the state it returns (as the checker
    does). Returns [(step, Returned)], or the skip reason."""
    for st in case.steps:
        reason = backend.supports_config(case.op, case.dtype, dict(case.config), st.training)
        if reason:
            return reason
    state, out = dict(case.init_state), []
    for st in case.steps:
        ret = backend.run(Call(case.op, case.dtype, dict(case.config), st.training, dict(st.inputs),
                               dict(st.cotangents), dict(state)))
        out.append((st, ret))
        state = dict(ret.state)
    return out


def assert_agrees(case, results, rtol):
    """Every returned array agrees with the golden float64 value to rtol * (its largest magnitude); an
    all-zero expected array (e.g. dx of a one-element layer_norm row) is compared at the scale of the
    step's largest expected value instead. NaN and inf must sit where the reference has them."""
    spec = refnorm.get(case.op)
    for i, (st, ret) in enumerate(results):
        made = spec.produced(st.inputs)      # add_norm's y1 only with weight1
        assert set(spec.differentiable) & set(made) <= set(ret.outputs), (case.id, i, sorted(ret.outputs))
        assert set(ret.outputs) <= set(made), (case.id, i, sorted(ret.outputs))
        if st.cotangents:
            assert set(ret.grads) == set(st.inputs), (case.id, i, sorted(ret.grads))
        if spec.state and case.init_state:
            assert set(ret.state) == set(spec.state), (case.id, i, sorted(ret.state))
        every = [np.abs(f64(w)[np.isfinite(f64(w))]) for part in (st.outputs, st.grads, st.state)
                 for w in part.values()]
        step_scale = max((float(a.max()) for a in every if a.size), default=0.0)
        for part, want in (("outputs", st.outputs), ("grads", st.grads), ("state", st.state)):
            got = getattr(ret, part)
            for k, w in want.items():
                if k not in got:
                    assert part == "outputs" and k not in spec.differentiable, (case.id, i, part, k)
                    continue
                g, w = f64(got[k]), f64(w)
                assert g.shape == w.shape, (case.id, i, part, k, g.shape, w.shape)
                assert np.array_equal(np.isnan(g), np.isnan(w)), (case.id, i, part, k, "NaN pattern")
                assert np.array_equal(np.isposinf(g), np.isposinf(w)), (case.id, i, part, k, "+inf pattern")
                assert np.array_equal(np.isneginf(g), np.isneginf(w)), (case.id, i, part, k, "-inf pattern")
                fin = np.isfinite(w)
                scale = float(np.max(np.abs(w[fin]), initial=0.0)) or step_scale
                err = float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))
                assert err <= rtol * scale, (f"{case.id} step {i} {part} {k}: max |returned - golden| = {err:.3g}, "
                                             f"{err / scale if scale else np.inf:.3g} of the scale {scale:.3g}")


def assert_agreeing_cases(backend, cases, rtol, least, run=run_case, agree=assert_agrees):
    """At least ``least`` of the golden ``cases`` run through ``backend`` -- run(backend, case) gives
    [(step, Returned)], or the reason the case is not supported (never empty) -- and every one that runs
    agrees with its golden values: agree(case, results, rtol)."""
    ran = 0
    for case in cases:
        res = run(backend, case)
        if isinstance(res, str):
            assert res.strip(), case.id
            continue
        agree(case, res, rtol)
        ran += 1
    assert ran >= least, f"only {ran} of {len(cases)} cases ran: {[c.id for c in cases]}"


def steps_against_torch_module(name, mod, shape, momentum, affine) -> list:
    """Three training steps then one eval step of ``name`` (batch_norm, instance_norm) against the float64
    torch module ``mod`` holding running statistics, the state chained: y, every gradient, running_mean
    and running_var within 1e-13 relative at each step. Returns (refnorm's, torch's) num_batches_tracked
    after each step."""
    torch = require_torch()
    rng = np.random.default_rng(11)
    c = shape[1]
    inputs_p = {}
    if affine:
        with torch.no_grad():
            mod.weight.copy_(torch.tensor(rng.standard_normal(c)))
            mod.bias.copy_(torch.tensor(rng.standard_normal(c)))
        inputs_p = {"weight": mod.weight.detach().numpy().copy(), "bias": mod.bias.detach().numpy().copy()}
    state = {"running_mean": np.zeros(c), "running_var": np.ones(c), "num_batches_tracked": np.asarray(0)}
    counts = []
    for step, training in enumerate([True, True, True, False]):
        mod.train(training)
        x = 3 * rng.standard_normal(shape) + step
        dy = rng.standard_normal(shape)
        xt = torch.tensor(x, requires_grad=True)
        yt = mod(xt)
        params = [xt] + ([mod.weight, mod.bias] if affine else [])
        gt = torch.autograd.grad((yt * torch.tensor(dy)).sum(), params)
        res = refnorm.evaluate(name, {"x": x, **inputs_p}, config={"momentum": momentum}, state=state,
                               training=training, grad_outputs={"y": dy})
        assert_close_rel(res.outputs["y"], yt.detach().numpy(), 1e-13, f"step {step} y", name)
        for k, g in zip(["x", "weight", "bias"], gt):
            assert_close_rel(res.grads[k], g.numpy(), 1e-13, f"step {step} grad {k}", name)
        assert_close_rel(res.state["running_mean"], mod.running_mean.numpy(), 1e-13, "running_mean", name)
        assert_close_rel(res.state["running_var"], mod.running_var.numpy(), 1e-13, "running_var", name)
        counts.append((int(res.state["num_batches_tracked"]), int(mod.num_batches_tracked)))
        state = res.state
    return counts


def listed_cases_fail(backend: str, ids, golden_dir, json_path) -> dict:
    """``refnorm check`` of ``backend`` on the cases ``ids`` alone, without their expected-failures list:
    it fails (exit status 1). Returns the summary of the JSON report written to ``json_path``."""
    import json
    from refnorm.cli import main
    args = ["check", "--backend", backend, "--golden", str(golden_dir), "--no-progress", "--json", str(json_path)]
    for i in ids:
        args += ["--case", i]
    assert main(args) == 1
    with open(json_path, encoding="utf-8") as f:
        return json.load(f)["summary"]
