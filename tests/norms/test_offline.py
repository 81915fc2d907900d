"""UN's offline framework (refnorm/norms/offline.py) and its instances: offline_batch_norm, power_norm,
batch_renorm, and unified_norm's presets rebuilt from the framework's UN pieces.

* each instance's multi-step runs (train calls carrying state, then eval) against an independent, loop-by-loop
  transcription of its paper's algorithm (offline_transcriptions.py), to 1e-12 relative;
* offline_batch_norm against refnorm's batch_norm module (forward, x/weight/bias gradients, running statistics);
* the hand-derived backward against numerical differentiation wherever it IS the gradient of the forward
  (current batch; Batch Renorm with r and d clipped, hence locally constant; PowerNorm's first call, nu = 0);
* bad options and state are refused with a message naming them.
"""
from __future__ import annotations

import numpy as np
import pytest

import refnorm
from helpers import check_vjp, record
from offline_transcriptions import PaperBatchRenorm, PaperPowerNorm


def rel(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = np.max(np.abs(want))
    diff = np.max(np.abs(got - want))
    return float(diff / scale) if scale else float(diff)


def rows(a, channels_first):
    """(N, C, *) or (..., C) as a list of rows [position][channel] (the transcriptions' layout)."""
    a = np.moveaxis(a, 1, -1) if channels_first else a
    return a.reshape(-1, a.shape[-1]).tolist()


def unrows(lst, shape, channels_first):
    a = np.array(lst)
    if channels_first:
        moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
        return np.moveaxis(a.reshape(moved), -1, 1)
    return a.reshape(shape)


def run_against(name, model, shape, steps, cfg, rng, channels_first, shifts=None):
    """Run ``steps`` ("train"/"eval") through refnorm.evaluate and the transcription; worst relative error."""
    c = shape[1] if channels_first else shape[-1]
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    st, worst = None, 0.0
    for i, step in enumerate(steps):
        x = rng.standard_normal(shape)
        if shifts is not None:
            loc, scl = shifts(i, c)
            cshape = (1, c) + (1,) * (len(shape) - 2) if channels_first else (c,)
            x = loc.reshape(cshape) + scl.reshape(cshape) * x
        dy = rng.standard_normal(shape)
        if step == "train":
            res = refnorm.evaluate(name, {"x": x, "weight": w, "bias": b}, config=cfg, state=st,
                                   grad_outputs={"y": dy})
            y, dx, dw, db = model.train(rows(x, channels_first), rows(dy, channels_first), list(w), list(b))
            worst = max(worst, rel(res.outputs["y"], unrows(y, shape, channels_first)),
                        rel(res.grads["x"], unrows(dx, shape, channels_first)),
                        rel(res.grads["weight"], dw), rel(res.grads["bias"], db))
        else:
            res = refnorm.evaluate(name, {"x": x, "weight": w, "bias": b}, config=cfg, state=st, training=False)
            y = model.infer(rows(x, channels_first), list(w), list(b))
            worst = max(worst, rel(res.outputs["y"], unrows(y, shape, channels_first)))
        for k, v in model.state().items():
            worst = max(worst, rel(res.state[k], v))
        st = res.state
    return worst


# ------------------------------------------------------------------------------------ PowerNorm
@pytest.mark.parametrize("cfg,shape", [({}, (5, 3, 4)), ({"alpha_fwd": 0.7, "alpha_bkw": 0.95, "eps": 0.0}, (6, 2)),
                                        ({"alpha_fwd": 0.5, "alpha_bkw": 0.5, "eps": 0.1}, (2, 3, 7, 3))])
def test_power_norm_multi_step_matches_the_papers_algorithm(cfg, shape):
    rng = np.random.default_rng(len(shape) * 10 + len(cfg))
    model = PaperPowerNorm(shape[-1], **cfg)
    shifts = lambda i, c: (np.zeros(c), np.full(c, 0.5 + 0.4 * i))  # noqa: E731  a growing scale: psi lags
    worst = run_against("power_norm", model, shape, ("train",) * 7 + ("eval",), cfg, rng, False, shifts)
    record("power_norm", "transcription", worst)
    assert worst <= 1e-12
    assert any(abs(v) > 1e-3 for v in model.nu), "nu never moved: the approximate backward was not exercised"


def test_power_norm_first_call_is_the_true_gradient_and_later_ones_subtract_nu_z():
    """psi_{t-1} does not depend on x, so the exact gradient is g / D; PN subtracts nu_{t-1} z / D, and
    nu_0 = 0 makes the first call exact."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 6, 3)), rng.standard_normal(3)
    check_vjp("power_norm", {"x": x, "weight": w, "bias": rng.standard_normal(3)})
    st = {"running_phi": rng.uniform(0.5, 2, 3), "nu": rng.standard_normal(3), "iters": np.array([7])}
    dy = rng.standard_normal(x.shape)
    res = refnorm.evaluate("power_norm", {"x": x, "weight": w}, state=st, grad_outputs={"y": dy})
    D = np.sqrt(st["running_phi"] + 1e-5)
    z = x / D
    assert rel(res.outputs["y"], w * z) <= 1e-15
    assert rel(res.grads["x"], (w * dy - st["nu"] * z) / D) <= 1e-14
    assert rel(res.grads["x"], w * dy / D) > 1e-2          # not the true gradient once nu != 0


# ------------------------------------------------------------------------------ Batch Renorm
def _drift(i, c):
    """Batches whose statistics jump away from the running ones (r and d hit their clips) and settle."""
    loc = np.linspace(-3, 3, c) * (1.0 if i % 3 else 0.1)
    scl = np.linspace(0.2, 6, c) if i % 2 else np.ones(c)
    return loc, scl


@pytest.mark.parametrize("cfg", [{}, {"r_max": 1.5, "d_max": 0.5, "momentum": 0.3},
                                 {"r_max": 1.0, "d_max": 0.0, "momentum": 0.1, "eps": 1e-3},
                                 {"r_max": 100.0, "d_max": 100.0, "momentum": 0.5}])
def test_batch_renorm_multi_step_matches_the_papers_algorithm(cfg):
    rng = np.random.default_rng(int(10 * cfg.get("r_max", 3)))
    shape = (5, 4, 3)
    model = PaperBatchRenorm(4, **cfg)
    clipped = unclipped = 0
    worst = 0.0
    st = None
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    for i, step in enumerate(("train",) * 6 + ("eval",)):
        loc, scl = _drift(i, 4)
        x = loc[:, None] + scl[:, None] * rng.standard_normal(shape)
        dy = rng.standard_normal(shape)
        if step == "train":
            res = refnorm.evaluate("batch_renorm", {"x": x, "weight": w, "bias": b}, config=cfg, state=st,
                                   grad_outputs={"y": dy})
            y, dx, dw, db = model.train(rows(x, True), rows(dy, True), list(w), list(b))
            worst = max(worst, rel(res.outputs["y"], unrows(y, shape, True)),
                        rel(res.grads["x"], unrows(dx, shape, True)),
                        rel(res.grads["weight"], dw), rel(res.grads["bias"], db))
            rmax, dmax = cfg.get("r_max", 3.0), cfg.get("d_max", 5.0)
            for r, d in zip(model.last_r, model.last_d):
                at_clip = r in (rmax, 1 / rmax) or abs(d) == dmax
                clipped += at_clip
                unclipped += not at_clip
        else:
            res = refnorm.evaluate("batch_renorm", {"x": x, "weight": w, "bias": b}, config=cfg, state=st,
                                   training=False)
            worst = max(worst, rel(res.outputs["y"], unrows(model.infer(rows(x, True), list(w), list(b)), shape, True)))
        for k, v in model.state().items():
            worst = max(worst, rel(res.state[k], v))
        st = res.state
    record("batch_renorm", "transcription", worst)
    assert worst <= 1e-12
    wide = cfg.get("r_max") == 100.0      # corrections never reach their bounds: the unclipped path
    assert (clipped == 0 if wide else clipped > 0) and (unclipped > 0 or cfg.get("r_max") == 1.0), (clipped, unclipped)


def test_batch_renorm_with_no_correction_allowed_is_batch_norm():
    rng = np.random.default_rng(5)
    x, dy, w, b = rng.standard_normal((6, 3, 4)), rng.standard_normal((6, 3, 4)), rng.standard_normal(3), \
        rng.standard_normal(3)
    st = {"running_mean": rng.standard_normal(3), "running_std": rng.uniform(0.5, 2, 3), "iters": np.array([4])}
    a = refnorm.evaluate("batch_renorm", {"x": x, "weight": w, "bias": b}, config={"r_max": 1.0, "d_max": 0.0},
                         state=st, grad_outputs={"y": dy})
    bn = refnorm.evaluate("batch_norm", {"x": x, "weight": w, "bias": b}, grad_outputs={"y": dy})
    assert rel(a.outputs["y"], bn.outputs["y"]) <= 1e-14
    for k in ("x", "weight", "bias"):
        assert rel(a.grads[k], bn.grads[k]) <= 1e-13, k


@pytest.mark.parametrize("cfg,shift", [({"r_max": 1.0, "d_max": 0.0}, 0.0), ({"r_max": 1.2, "d_max": 0.1}, 4.0)])
def test_batch_renorm_backward_is_the_gradient_when_r_and_d_are_clipped(cfg, shift):
    """Clipped r and d are locally constant, so the paper's backward (r, d constant) is then the exact gradient."""
    rng = np.random.default_rng(8)
    x = shift + 3.0 * rng.standard_normal((5, 2, 3))
    st = {"running_mean": np.zeros(2), "running_std": np.ones(2), "iters": np.array([0])}
    check_vjp("batch_renorm", {"x": x, "weight": rng.standard_normal(2), "bias": rng.standard_normal(2)},
              cfg, state=st)


# ----------------------------------------------------------------- current batch = batch_norm
@pytest.mark.parametrize("shape,momentum", [((4, 3, 5), 0.1), ((7, 2), 0.3), ((2, 3, 2, 3), 1.0)])
def test_offline_batch_norm_is_batch_norm(shape, momentum):
    rng = np.random.default_rng(sum(shape))
    c = shape[1]
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    bst = {"running_mean": np.zeros(c), "running_var": np.ones(c)}
    ost = None
    worst = 0.0
    for step in ("train",) * 4 + ("eval", "train", "eval"):
        x = 2.0 + rng.standard_normal(shape) * rng.uniform(0.5, 3)
        dy = rng.standard_normal(shape)
        train = step == "train"
        kw = dict(config={"momentum": momentum}, grad_outputs={"y": dy}, training=train)
        a = refnorm.evaluate("batch_norm", {"x": x, "weight": w, "bias": b}, state=bst, **kw)
        o = refnorm.evaluate("offline_batch_norm", {"x": x, "weight": w, "bias": b}, state=ost, **kw)
        for k in ("y", "mean", "rstd"):
            worst = max(worst, rel(o.outputs[k], a.outputs[k]))
        for k in ("x", "weight", "bias"):
            worst = max(worst, rel(o.grads[k], a.grads[k]))
        for k in ("running_mean", "running_var"):
            worst = max(worst, rel(o.state[k], a.state[k]))
        assert int(o.state["iters"][0]) == int(a.state["num_batches_tracked"])
        np.testing.assert_array_equal(o.outputs["r"], np.ones(c))
        bst, ost = a.state, o.state
    record("offline_batch_norm", "transcription", worst)
    assert worst <= 1e-12


def test_offline_batch_norm_backward_is_the_exact_gradient():
    rng = np.random.default_rng(9)
    check_vjp("offline_batch_norm", {"x": 1 + rng.standard_normal((5, 3, 2)), "weight": rng.standard_normal(3),
                                     "bias": rng.standard_normal(3)}, grad_scale=10.0)


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name,kwargs,match", [
    ("power_norm", dict(config={"alpha_fwd": 1.5}), r"alpha_fwd=1\.5; expected a number in \[0, 1\]"),
    ("batch_renorm", dict(config={"r_max": 0.5}), r"r_max=0\.5; expected a number >= 1"),
    ("batch_renorm", dict(config={"d_max": -1}), r"d_max=-1(\.0)?; expected a number >= 0"),
    ("offline_batch_norm", dict(config={"eps": -1.0}), r"eps=-1\.0; expected a finite number >= 0"),
    ("batch_renorm", dict(state={"running_mean": np.zeros(3)}), r"missing 'running_std', 'iters'"),
    ("power_norm", dict(state={"running_phi": np.ones(2), "nu": np.zeros(3), "iters": [0]}),
     r"'running_phi' has shape \(2,\); expected \(3,\)"),
    ("offline_batch_norm", dict(inputs={"weight": np.ones(2)}), r"'weight' has shape \(2,\); expected \(3,\)"),
])
def test_bad_options_and_state_are_refused_naming_them(name, kwargs, match):
    x = np.random.default_rng(0).standard_normal((4, 3))
    inputs = {"x": x, **kwargs.pop("inputs", {})}
    with pytest.raises(refnorm.RefnormError, match=match):
        refnorm.evaluate(name, inputs, **kwargs)


def test_one_value_per_channel_is_refused_for_centred_instances():
    with pytest.raises(refnorm.ShapeError, match="more than 1 value per channel"):
        refnorm.evaluate("batch_renorm", {"x": np.ones((1, 3))})


# ------------------------------------------------------------------- unified_norm as instances
def test_unified_norm_presets_are_framework_instances():
    """unified_norm runs its presets as OfflineNorm instances built from the framework's pieces (their
    equality with the official semantics is test_unified_norm.py's transcription runs and the golden
    vectors, which were built by the earlier dedicated code and still verify bit for bit)."""
    from refnorm.norms import _un_instances, offline
    names = {p: [e.name for e in inst.pieces] for p, inst in _un_instances.PRESETS.items()}
    assert all(isinstance(i, offline.OfflineNorm) for i in _un_instances.PRESETS.values())
    assert names["official"] == names["paper"] == [
        "geometric_window(buffer_x2)", "zero_mean", "tracker(running_var)", "window_ema_gz(ema_gz)", "zero_gmean"]
    assert _un_instances.OFFICIAL.compensation is not None and _un_instances.PAPER.compensation is None
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 3))
    for preset, inst in _un_instances.PRESETS.items():
        res = refnorm.evaluate("unified_norm", {"x": x}, config={"preset": preset, "window": 2, "warmup": 0},
                               grad_outputs={"y": dy})
        out, st, ctx = inst.forward(x, window_f=2, window_b=2, warmup=0)
        dx, _, _, st2 = inst.backward(dy, ctx)
        np.testing.assert_array_equal(res.outputs["y"], out["y"])
        np.testing.assert_array_equal(res.grads["x"], dx)
        for k in res.state:
            np.testing.assert_array_equal(res.state[k], st2[k])
