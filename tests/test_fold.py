"""fold: eval-mode normalizers folded into the next / previous Linear or convolution, and every refusal.

The unfused pair is refnorm.evaluate (the normalizer, eval mode) followed or preceded by a plain
NumPy Linear / convolution (``conv_ref``: einsum over sliding windows, with groups and torch's padding
modes; cross-checked against torch.nn.Conv*d when torch is installed). The folded layer must equal it
to 1e-12 relative to the output's max magnitude. The worst errors measured are printed at the end of
the run ("refnorm: folding ...").
"""
import zlib

import numpy as np
import pytest
from hypothesis import given, strategies as st
from numpy.lib.stride_tricks import sliding_window_view

import refnorm
from refnorm import fold as F
from helpers import require_torch

RTOL = 1e-12
C = 6  # channels of the normalizer in the grid: divisible by the group counts 2, 3 and 6

# worst relative error of folded vs unfused, per (normalizer, position); printed in the terminal summary
WORST: dict[tuple[str, str], float] = {}


class _Summary:
    def pytest_terminal_summary(self, terminalreporter):
        if not WORST:
            return
        terminalreporter.section("refnorm: folding, worst relative error folded vs unfused (max|diff| / max|out|)")
        for (name, pos), err in sorted(WORST.items()):
            terminalreporter.write_line(f"{name:16s} {pos:9s} {err:10.2e}")
        terminalreporter.write_line(f"{'all':16s} {'':9s} {max(WORST.values()):10.2e}   (bound {RTOL:.0e})")


@pytest.fixture(scope="module", autouse=True)
def _fold_summary(request):
    pm = request.config.pluginmanager
    if not pm.has_plugin("refnorm-fold-summary"):
        pm.register(_Summary(), "refnorm-fold-summary")
    yield


def rel_err(got, want, name, position) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got - want))) / (scale if scale > 0 else 1.0)
    WORST[(name, position)] = max(WORST.get((name, position), 0.0), err)
    return err


# --------------------------------------------------------------------------- plain NumPy layers
NP_PAD = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def conv_ref(x, w, b=None, *, groups=1, padding=0, padding_mode="zeros"):
    """torch's conv{1,2}d (stride 1, dilation 1): x (N, Cin, *S), w (out, Cin/groups, *K)."""
    nk = w.ndim - 2
    pads = (padding,) * nk if np.isscalar(padding) else tuple(padding)
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads], mode=NP_PAD[padding_mode])
    n, cin = x.shape[:2]
    out, cpg = w.shape[:2]
    k = w.shape[2:]
    assert cin == cpg * groups and out % groups == 0
    win = sliding_window_view(x, k, axis=tuple(range(2, 2 + nk)))        # (N, Cin, *S_out, *K)
    win = win.reshape((n, groups, cpg) + win.shape[2:])
    wg = w.reshape((groups, out // groups, cpg) + k)
    sp, ks = "hw"[:nk], "ij"[:nk]
    y = np.einsum(f"ngc{sp}{ks},goc{ks}->ngo{sp}", win, wg)
    y = y.reshape((n, out) + y.shape[3:])
    return y if b is None else y + b.reshape((1, out) + (1,) * nk)


def layer_ref(kind, x, w, b=None, *, groups=1, padding=0, padding_mode="zeros"):
    if kind == "linear":
        y = x @ w.T
        return y if b is None else y + b
    return conv_ref(x, w, b, groups=groups, padding=padding, padding_mode=padding_mode)


def apply_norm(name, a, axis, inputs, config, state):
    """refnorm.evaluate in eval mode on activation ``a`` whose channels are on ``axis``
    (moved to axis 1 for batch_norm / instance_norm, to the last axis for the others)."""
    if name in ("batch_norm", "instance_norm"):
        t = np.moveaxis(a, axis, 1)
        y = refnorm.evaluate(name, {**inputs, "x": t}, config=config, state=state, training=False).outputs["y"]
        return np.moveaxis(y, 1, axis)
    t = np.moveaxis(a, axis, -1)
    flat = t.reshape(-1, t.shape[-1])  # unified_norm takes (N, C) or (B, N, C); the rest any leading axes
    y = refnorm.evaluate(name, {**inputs, "x": flat}, config=config, state=state, training=False).outputs["y"]
    return np.moveaxis(y.reshape(t.shape), -1, axis)


# --------------------------------------------------------------------------------- normalizers
AFFINES = {"batch_norm": ("none", "weight", "bias", "both"), "instance_norm": ("none", "weight", "bias", "both"),
           "unified_norm": ("none", "weight", "bias", "both", "no-state"),
           "layer_norm": ("none", "weight", "bias", "both"), "rms_norm": ("none", "weight", "offset")}


def make_norm(name, c, rng, affine):
    """(inputs without x, config, state) of an eval-mode normalizer over c channels."""
    inputs = {}
    if affine in ("weight", "both", "offset"):
        inputs["weight"] = rng.uniform(0.5, 2.0, c) * rng.choice([-1.0, 1.0], c)
    if affine in ("bias", "both"):
        inputs["bias"] = rng.standard_normal(c)
    state = None
    if name in ("batch_norm", "instance_norm"):
        config = {"eps": 1e-5}
        state = {"running_mean": rng.standard_normal(c), "running_var": rng.uniform(0.2, 3.0, c),
                 "num_batches_tracked": np.asarray(7)}
    elif name == "unified_norm":
        config = {"eps": 1e-5, "window": 4}
        if affine != "no-state":
            state = {"running_var": rng.uniform(0.2, 3.0, c)}
        else:
            inputs = {"weight": rng.standard_normal(c), "bias": rng.standard_normal(c)}
    elif name == "layer_norm":
        config = {"normalized_shape": [c], "eps": 1e-5}
    else:
        config = {"normalized_shape": [c], "eps": 1e-6}
        if affine == "offset":
            config["weight_offset"] = 1.0
    return inputs, config, state


# ---------------------------------------------------------------------------------------- layers
LAYERS = {  # name -> (kind, groups for C channels, kernel)
    "linear": ("linear", 1, ()),
    "conv1d": ("conv1d", 1, (3,)),
    "conv2d": ("conv2d", 1, (3, 2)),
    "conv1d-grouped": ("conv1d", 3, (2,)),
    "conv2d-grouped": ("conv2d", 2, (2, 3)),
    "conv1d-depthwise": ("conv1d", C, (3,)),
    "conv2d-depthwise": ("conv2d", C, (3, 3)),
}
SPATIAL = {"linear": (4,), "conv1d": (7,), "conv2d": (5, 4)}  # linear: a token axis before the features


def layer_weight(kind, groups, kernel, cin, cout, rng, with_bias):
    w = rng.standard_normal((cout, cin // groups) + kernel)
    return w, (rng.standard_normal(cout) if with_bias else None)


def activation(kind, c, rng, batch=3):
    """A layer input of c channels, and its channel axis (last for a Linear, 1 for a convolution)."""
    if kind == "linear":
        return rng.standard_normal((batch,) + SPATIAL[kind] + (c,)), -1
    return rng.standard_normal((batch, c) + SPATIAL[kind]), 1


def seeded(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def every_layer(test):
    """``test`` parametrized over every layer of LAYERS, with and without the layer's bias."""
    return pytest.mark.parametrize("layer_bias", [False, True], ids=["nobias", "bias"])(
        pytest.mark.parametrize("layer", list(LAYERS))(test))


NEXT_CASES = [(n, a) for n in AFFINES for a in AFFINES[n]]
PREV_CASES = [(n, a) for n in F.FULLY_AFFINE for a in AFFINES[n]]


@every_layer
@pytest.mark.parametrize("name,affine", NEXT_CASES)
def test_fold_into_next_equals_the_unfused_pair(name, affine, layer, layer_bias):
    rng = seeded("next", name, affine, layer, layer_bias)
    kind, groups, kernel = LAYERS[layer]
    cout = 5 if groups == 1 else 2 * groups  # depthwise: channel multiplier 2
    inputs, config, state = make_norm(name, C, rng, affine)
    w, b = layer_weight(kind, groups, kernel, C, cout, rng, layer_bias)
    x, axis = activation(kind, C, rng)

    want = layer_ref(kind, apply_norm(name, x, axis, inputs, config, state), w, b, groups=groups)
    new_w, new_b = F.fold(name, inputs, config, state, w, b, position="next", kind=kind, groups=groups)
    rest = F.residual_normalizer(name, inputs, config)
    xin = x if rest is None else apply_norm(name, x, axis, rest[0], rest[1], None)
    got = layer_ref(kind, xin, new_w, new_b, groups=groups)
    err = rel_err(got, want, name, "next")
    assert err <= RTOL, f"{name}/{affine} -> {layer}: folded differs from unfused by {err:.2e} relative"
    assert new_w.shape == w.shape and new_w.dtype == np.float64
    _, shift = F.affine_of(name, inputs, config, state, channels=C)
    assert (new_b is None) == (b is None and not np.any(shift))
    assert rest is None or ("weight" not in rest[0] and "bias" not in rest[0])


@every_layer
@pytest.mark.parametrize("name,affine", PREV_CASES)
def test_fold_into_previous_equals_the_unfused_pair(name, affine, layer, layer_bias):
    rng = seeded("previous", name, affine, layer, layer_bias)
    kind, groups, kernel = LAYERS[layer]
    cin = 4 if groups == 1 else (C if groups == C else 2 * groups)  # depthwise: groups == in == out
    inputs, config, state = make_norm(name, C, rng, affine)
    w, b = layer_weight(kind, groups, kernel, cin, C, rng, layer_bias)
    h, axis = activation(kind, cin, rng)
    pad = 0 if kind == "linear" else 1  # padding does not matter for a previous layer: zero padding here

    want = apply_norm(name, layer_ref(kind, h, w, b, groups=groups, padding=pad), axis, inputs, config, state)
    new_w, new_b = F.fold(name, inputs, config, state, w, b, position="previous", kind=kind, groups=groups)
    assert F.residual_normalizer(name, inputs, config) is None
    got = layer_ref(kind, h, new_w, new_b, groups=groups, padding=pad)
    err = rel_err(got, want, name, "previous")
    assert err <= RTOL, f"{layer} -> {name}/{affine}: folded differs from unfused by {err:.2e} relative"


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("layer", ["conv1d", "conv2d-grouped", "conv2d-depthwise"])
@pytest.mark.parametrize("name", ["batch_norm", "unified_norm", "layer_norm"])
def test_fold_into_next_is_exact_with_value_copying_padding(name, layer, padding_mode):
    rng = seeded("pad", name, layer, padding_mode)
    kind, groups, kernel = LAYERS[layer]
    inputs, config, state = make_norm(name, C, rng, "both")
    w, b = layer_weight(kind, groups, kernel, C, 2 * groups, rng, True)
    x, axis = activation(kind, C, rng)
    pad = (1,) + (2,) * (len(kernel) - 1)
    want = layer_ref(kind, apply_norm(name, x, axis, inputs, config, state), w, b, groups=groups, padding=pad,
                     padding_mode=padding_mode)
    new_w, new_b = F.fold(name, inputs, config, state, w, b, kind=kind, groups=groups, padding=pad,
                          padding_mode=padding_mode)
    rest = F.residual_normalizer(name, inputs, config)
    xin = x if rest is None else apply_norm(name, x, axis, rest[0], rest[1], None)
    err = rel_err(layer_ref(kind, xin, new_w, new_b, groups=groups, padding=pad, padding_mode=padding_mode),
                  want, name, "next")
    assert err <= RTOL


@pytest.mark.parametrize("padding", [1, (2, 1), "same"])
@pytest.mark.parametrize("name,affine", [("rms_norm", "offset"), ("rms_norm", "weight"), ("layer_norm", "weight"),
                                         ("unified_norm", "weight")])
def test_zero_padding_is_exact_when_the_shift_is_zero(name, affine, padding):
    rng = seeded("zero-shift", name, affine, padding)
    inputs, config, state = make_norm(name, C, rng, affine)
    w, b = layer_weight("conv2d", 2, (3, 3), C, 4, rng, True)
    x, axis = activation("conv2d", C, rng)
    pad = 1 if padding == "same" else padding  # 'same' for a 3x3 kernel = 1 on each side
    want = conv_ref(apply_norm(name, x, axis, inputs, config, state), w, b, groups=2, padding=pad)
    new_w, new_b = F.fold(name, inputs, config, state, w, b, kind="conv2d", groups=2, padding=padding)
    rest = F.residual_normalizer(name, inputs, config)
    xin = x if rest is None else apply_norm(name, x, axis, rest[0], rest[1], None)
    assert rel_err(conv_ref(xin, new_w, new_b, groups=2, padding=pad), want, name, "next") <= RTOL


def test_zero_padding_with_a_shift_is_wrong_at_the_borders_and_refused():
    """Why the refusal: with the check bypassed, the folded layer is exact inside and wrong at the border."""
    rng = seeded("border")
    inputs, config, state = make_norm("batch_norm", C, rng, "both")
    w, b = layer_weight("conv1d", 1, (3,), C, 5, rng, True)
    x, axis = activation("conv1d", C, rng)
    want = conv_ref(apply_norm("batch_norm", x, axis, inputs, config, state), w, b, padding=1)
    with pytest.raises(refnorm.ConfigError, match=r"padding=1 with padding_mode='zeros'.*nonzero shift"):
        F.fold("batch_norm", inputs, config, state, w, b, kind="conv1d", padding=1)
    new_w, new_b = F.fold("batch_norm", inputs, config, state, w, b, kind="conv1d")  # as if unpadded
    got = conv_ref(x, new_w, new_b, padding=1)
    inner = np.max(np.abs(got[..., 1:-1] - want[..., 1:-1])) / np.max(np.abs(want))
    border = np.max(np.abs(got[..., [0, -1]] - want[..., [0, -1]])) / np.max(np.abs(want))
    assert inner <= RTOL and border > 1e-3


# ------------------------------------------------------------------------ hypothesis: any shape
@st.composite
def fold_case(draw):
    kind = draw(st.sampled_from(["linear", "conv1d", "conv2d"]))
    position = draw(st.sampled_from(["next", "previous"]))
    names = F.FULLY_AFFINE + (F.AFFINE_ONLY if position == "next" else ())
    name = draw(st.sampled_from(names))
    groups = 1 if kind == "linear" else draw(st.integers(1, 4))
    per_group = draw(st.integers(1, 3))          # normalizer channels per group
    other = groups * draw(st.integers(1, 3))     # the layer's other channel count
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(F.KINDS[kind]))
    affine = draw(st.sampled_from(AFFINES[name]))
    layer_bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    pad, mode = 0, "zeros"
    if kind != "linear" and draw(st.booleans()):
        pad = draw(st.integers(1, 2))
        mode = draw(st.sampled_from(["zeros", "reflect", "replicate", "circular"] if position == "previous"
                                    else ["reflect", "replicate", "circular"]))
    return kind, position, name, groups, groups * per_group, other, kernel, affine, layer_bias, seed, pad, mode


@given(fold_case())
def test_fold_equals_the_unfused_pair_on_drawn_shapes(case):
    kind, position, name, groups, c, other, kernel, affine, layer_bias, seed, pad, mode = case
    rng = np.random.default_rng(seed)
    inputs, config, state = make_norm(name, c, rng, affine)
    scale, shift = F.affine_of(name, inputs, config, state, channels=c)
    opts = dict(groups=groups, padding=pad, padding_mode=mode)
    if position == "next":
        w, b = layer_weight(kind, groups, kernel, c, other, rng, layer_bias)
        x, axis = activation(kind, c, rng, batch=2)
        want = layer_ref(kind, apply_norm(name, x, axis, inputs, config, state), w, b, **opts)
        new_w, new_b = F.fold_into_next(scale, shift, w, b, kind=kind, **opts)
        rest = F.residual_normalizer(name, inputs, config)
        xin = x if rest is None else apply_norm(name, x, axis, rest[0], rest[1], None)
        got = layer_ref(kind, xin, new_w, new_b, **opts)
    else:
        w, b = layer_weight(kind, groups, kernel, other, c, rng, layer_bias)
        h, axis = activation(kind, other, rng, batch=2)
        want = apply_norm(name, layer_ref(kind, h, w, b, **opts), axis, inputs, config, state)
        new_w, new_b = F.fold_into_previous(scale, shift, w, b, kind=kind, groups=groups)
        got = layer_ref(kind, h, new_w, new_b, **opts)
    assert rel_err(got, want, name, position) <= RTOL


@pytest.mark.parametrize("name", F.FULLY_AFFINE)
def test_affine_of_is_the_eval_mode_map(name):
    rng = seeded("affine", name)
    inputs, config, state = make_norm(name, C, rng, "both")
    scale, shift = F.affine_of(name, inputs, config, state)
    x, axis = activation("conv1d", C, rng)
    want = apply_norm(name, x, axis, inputs, config, state)
    got = scale[:, None] * x + shift[:, None]
    assert rel_err(got, want, name, "affine_of") <= 1e-14


def test_affine_of_the_affine_only_normalizers_is_their_weight_and_bias():
    w, b = np.array([1.0, -2.0, 0.5]), np.array([0.25, 0.0, -1.0])
    s, t = F.affine_of("layer_norm", {"weight": w, "bias": b}, {"normalized_shape": 3})
    np.testing.assert_array_equal(s, w), np.testing.assert_array_equal(t, b)
    s, t = F.affine_of("layer_norm", {}, {"normalized_shape": [3]})
    np.testing.assert_array_equal(s, np.ones(3)), np.testing.assert_array_equal(t, np.zeros(3))
    s, t = F.affine_of("rms_norm", {"weight": w}, {"normalized_shape": [3], "weight_offset": 1.0})
    np.testing.assert_array_equal(s, w + 1.0), np.testing.assert_array_equal(t, np.zeros(3))
    assert F.residual_normalizer("rms_norm", {"weight": w}, {"normalized_shape": [3], "weight_offset": 1.0}) == \
        ({}, {"normalized_shape": [3], "weight_offset": 0.0})
    # unified_norm in eval with no state uses the initial running_var = 1: scale = 1 / sqrt(1 + eps)
    s, t = F.affine_of("unified_norm", channels=2)
    np.testing.assert_array_equal(s, np.full(2, 1 / np.sqrt(1 + 1e-5))), np.testing.assert_array_equal(t, 0)


def test_fold_does_not_mutate_its_arguments():
    rng = seeded("mutate")
    inputs, config, state = make_norm("batch_norm", C, rng, "both")
    w, b = layer_weight("conv2d", 2, (3, 3), C, 4, rng, True)
    w2 = rng.standard_normal((C, 2, 3, 3))
    copies = [{k: np.copy(v) for k, v in d.items()} for d in (inputs, state)] + [w.copy(), b.copy(), w2.copy()]
    F.fold("batch_norm", inputs, config, state, w, b, kind="conv2d", groups=2)
    F.fold("batch_norm", inputs, config, state, w2, b[:1].repeat(C), kind="conv2d", position="previous")
    np.testing.assert_array_equal(w2, copies[4])
    for d, c in zip((inputs, state), copies[:2]):
        for k in d:
            np.testing.assert_array_equal(d[k], c[k])
    np.testing.assert_array_equal(w, copies[2]), np.testing.assert_array_equal(b, copies[3])


def test_low_precision_layer_weights_are_folded_in_float64():
    rng = seeded("dtype")
    inputs, config, state = make_norm("batch_norm", C, rng, "both")
    w = rng.standard_normal((5, C)).astype(np.float32)
    new_w, new_b = F.fold("batch_norm", inputs, config, state, w)
    scale, shift = F.affine_of("batch_norm", inputs, config, state)
    assert new_w.dtype == np.float64 and new_b.dtype == np.float64
    np.testing.assert_array_equal(new_w, w.astype(np.float64) * scale)


# ------------------------------------------------------------------------------------- refusals
BN = dict(inputs={"weight": np.ones(C)}, config={}, state={"running_mean": np.zeros(C), "running_var": np.ones(C)})
W_LIN = np.ones((4, C))


@pytest.mark.parametrize("name", F.FULLY_AFFINE)
def test_refuses_training_mode(name):
    with pytest.raises(refnorm.ConfigError, match=r"training=True .*expected training=False"):
        F.fold(name, BN["inputs"], {}, BN["state"] if name != "unified_norm" else None, W_LIN, training=True)
    with pytest.raises(refnorm.ConfigError, match="training=True"):
        F.affine_of(name, BN["inputs"], training=True)


@pytest.mark.parametrize("name,what", [("batch_norm", "batch statistics"), ("instance_norm", "instance statistics")])
@pytest.mark.parametrize("state", [None, {"running_mean": np.zeros(C)}], ids=["no-state", "no-running-var"])
def test_refuses_batch_and_instance_statistics(name, what, state):
    with pytest.raises(refnorm.ConfigError, match=f"without running statistics .*{what}.*'running_mean' and "
                                                  "'running_var'"):
        F.fold(name, {"weight": np.ones(C)}, {}, state, W_LIN)


@pytest.mark.parametrize("name", F.AFFINE_ONLY)
@pytest.mark.parametrize("kind,w", [("linear", np.ones((C, 3))), ("conv2d", np.ones((C, 3, 1, 1)))])
def test_refuses_a_previous_layer_for_input_dependent_statistics(name, kind, w):
    with pytest.raises(refnorm.ConfigError, match=f"{name} cannot be folded into a preceding layer.*"
                                                  "position='next'"):
        F.fold(name, {"weight": np.ones(C)}, {"normalized_shape": [C]}, None, w, kind=kind, position="previous")


@pytest.mark.parametrize("name", [n for n in refnorm.names() if n not in F.FULLY_AFFINE + F.AFFINE_ONLY])
@pytest.mark.parametrize("position", ["next", "previous"])
def test_refuses_every_other_normalizer(name, position):
    with pytest.raises(refnorm.ConfigError, match=f"{name} cannot be folded: .*expected one of batch_norm"):
        F.fold(name, {}, {}, None, W_LIN, position=position)
    with pytest.raises(refnorm.ConfigError, match=f"{name} cannot be folded"):
        F.affine_of(name, {})
    with pytest.raises(refnorm.ConfigError, match=f"{name} cannot be folded"):
        F.residual_normalizer(name)


def test_refuses_unknown_names():
    with pytest.raises(refnorm.UnknownNameError, match="unknown normalizer 'batchnorm'.*batch_norm"):
        F.fold("batchnorm", {}, {}, None, W_LIN)
    with pytest.raises(refnorm.UnknownNameError, match="unknown normalizer"):
        F.affine_of("nonorm")
    with pytest.raises(refnorm.UnknownNameError, match="unknown input 'gamma'"):
        F.affine_of("batch_norm", {"gamma": np.ones(C)}, {}, BN["state"])
    with pytest.raises(refnorm.UnknownNameError, match="unknown option 'epsilon'"):
        F.affine_of("batch_norm", {}, {"epsilon": 1e-5}, BN["state"])


@pytest.mark.parametrize("position,w,kind,groups,message", [
    ("next", np.ones((4, C + 1)), "linear", 1,
     r"following linear's input \(weight shape \(4, 7\), groups=1\) has 7 channels, input 'weight' of shape "
     r"\(6,\) has 6"),
    ("next", np.ones((4, 2, 3, 3)), "conv2d", 2, r"following conv2d's input .* has 4 channels"),
    ("next", np.ones((4, 1, 3)), "conv1d", 4, r"following conv1d's input .* has 4 channels, input 'weight' of "
                                              r"shape \(6,\) has 6"),
    ("previous", np.ones((C + 2, 3)), "linear", 1, r"preceding linear's output \(weight shape \(8, 3\)\) has 8"),
    ("previous", np.ones((4, 2, 3)), "conv1d", 2, r"preceding conv1d's output .* has 4 channels"),
], ids=["next-linear", "next-grouped", "next-depthwise", "previous-linear", "previous-grouped"])
def test_refuses_a_channel_count_mismatch(position, w, kind, groups, message):
    with pytest.raises(refnorm.ShapeError, match="channel count mismatch: the " + message):
        F.fold("batch_norm", BN["inputs"], {}, BN["state"], w, position=position, kind=kind, groups=groups)


def test_refuses_mismatched_scale_shift_and_layer():
    s, t = np.ones(C), np.zeros(C)
    with pytest.raises(refnorm.ShapeError, match=r"following linear takes 5 input features .*expected 6"):
        F.fold_into_next(s, t, np.ones((3, 5)))
    with pytest.raises(refnorm.ShapeError, match=r"takes 4 input channels \(2 per group x groups=2\).*expected 6"):
        F.fold_into_next(s, t, np.ones((4, 2, 3)), kind="conv1d", groups=2)
    with pytest.raises(refnorm.ShapeError, match=r"preceding conv2d has 4 output channels .*expected 6"):
        F.fold_into_previous(s, t, np.ones((4, 2, 3, 3)), kind="conv2d")
    with pytest.raises(refnorm.ShapeError, match=r"scale has shape \(6,\) and shift \(5,\)"):
        F.fold_into_next(s, np.zeros(5), np.ones((3, C)))
    with pytest.raises(refnorm.ShapeError, match=r"scale has shape \(6, 1\)"):
        F.fold_into_previous(s[:, None], t[:, None], np.ones((C, 3)))
    with pytest.raises(refnorm.ShapeError, match=r"following linear bias has shape \(4,\); expected \(3,\)"):
        F.fold_into_next(s, t, np.ones((3, C)), np.ones(4))
    with pytest.raises(refnorm.ShapeError, match=r"preceding conv1d bias has shape \(2, 3\); expected \(6,\)"):
        F.fold_into_previous(s, t, np.ones((C, 3, 3)), np.ones((2, 3)), kind="conv1d")
    with pytest.raises(refnorm.InputTypeError, match="following linear weight has dtype int64"):
        F.fold_into_next(s, t, np.ones((3, C), dtype=np.int64))


@pytest.mark.parametrize("kind,shape", [("linear", (4, C, 1)), ("linear", (C,)), ("conv1d", (4, C)),
                                        ("conv1d", (4, C, 3, 3)), ("conv2d", (4, C, 3))])
@pytest.mark.parametrize("position", ["next", "previous"])
def test_refuses_a_weight_of_the_wrong_ndim(kind, shape, position):
    n = 2 + F.KINDS[kind]
    with pytest.raises(refnorm.ShapeError, match=rf"{kind} weight has shape \({shape[0]}.*expected {n} dimensions"):
        F.fold("batch_norm", BN["inputs"], {}, BN["state"], np.ones(shape), kind=kind, position=position)


@pytest.mark.parametrize("kind,w,groups,message", [
    ("conv2d", np.ones((5, 3, 3, 3)), 2, r"groups=2 does not divide the following conv2d's 5 output channels"),
    ("conv1d", np.ones((4, 2, 3)), 0, r"groups=0; expected a positive integer"),
    ("conv1d", np.ones((4, 2, 3)), 1.5, r"groups=1.5; expected a positive integer"),
    ("conv1d", np.ones((4, 2, 3)), True, r"groups=True; expected a positive integer"),
    ("linear", np.ones((4, C)), 2, r"groups=2 with kind='linear'; expected groups=1"),
])
def test_refuses_bad_groups(kind, w, groups, message):
    with pytest.raises(refnorm.ConfigError, match=message):
        F.fold_into_next(np.ones(C), np.zeros(C), w, kind=kind, groups=groups)
    with pytest.raises(refnorm.ConfigError, match=message.replace("following", "preceding")):
        F.fold("batch_norm", BN["inputs"], {}, BN["state"], w, kind=kind, groups=groups, position="previous")


def test_refuses_bad_kind_position_padding_and_options():
    s, t = np.ones(C), np.ones(C)
    with pytest.raises(refnorm.ConfigError, match=r"kind='conv3d'; expected one of 'linear', 'conv1d', 'conv2d'"):
        F.fold_into_next(s, t, np.ones((2, C, 1, 1, 1)), kind="conv3d")
    with pytest.raises(refnorm.ConfigError, match=r"position='after'; expected 'next' or 'previous'"):
        F.fold("batch_norm", BN["inputs"], {}, BN["state"], W_LIN, position="after")
    with pytest.raises(refnorm.ConfigError, match=r"padding=1 for kind='linear'; expected 0"):
        F.fold_into_next(s, t, np.ones((2, C)), padding=1)
    with pytest.raises(refnorm.ConfigError, match=r"padding='full'; expected an int"):
        F.fold_into_next(s, t, np.ones((2, C, 3)), kind="conv1d", padding="full")
    with pytest.raises(refnorm.ConfigError, match=r"padding=-1 for kind='conv1d'; expected an int >= 0"):
        F.fold_into_next(s, t, np.ones((2, C, 3)), kind="conv1d", padding=-1)
    with pytest.raises(refnorm.ConfigError, match=r"padding=\(1, 1, 1\) for kind='conv2d'.*a tuple of 2"):
        F.fold_into_next(s, t, np.ones((2, C, 3, 3)), kind="conv2d", padding=(1, 1, 1))
    with pytest.raises(refnorm.ConfigError, match=r"padding_mode='mirror'; expected one of 'zeros', 'reflect'"):
        F.fold_into_next(s, t, np.ones((2, C, 3)), kind="conv1d", padding_mode="mirror")
    for padding in (1, (0, 2), "same"):
        with pytest.raises(refnorm.ConfigError, match="padding_mode='zeros'.*missing at the borders"):
            F.fold_into_next(s, t, np.ones((2, C, 3, 3)), kind="conv2d", padding=padding)
    F.fold_into_next(s, t, np.ones((2, C, 1, 1)), kind="conv2d", padding="same")  # 1x1 'same' pads nothing
    F.fold_into_next(s, t, np.ones((2, C, 3, 3)), kind="conv2d", padding=1, padding_mode="reflect")
    with pytest.raises(refnorm.ConfigError, match=r"eps=-1.0; expected a finite number >= 0"):
        F.affine_of("batch_norm", {}, {"eps": -1.0}, BN["state"])
    with pytest.raises(refnorm.RefnormError, match="missing required option"):
        F.affine_of("layer_norm", {"weight": np.ones(C)}, {})


def test_refuses_a_layer_or_rms_norm_over_several_axes():
    for name in F.AFFINE_ONLY:
        with pytest.raises(refnorm.ConfigError, match=r"normalized_shape=\[4, 6\]; expected a single axis"):
            F.fold(name, {"weight": np.ones((4, C))}, {"normalized_shape": [4, C]}, None, np.ones((3, C)))


def test_refuses_an_unknown_or_inconsistent_channel_count():
    with pytest.raises(refnorm.ShapeError, match="cannot tell the number of channels.*channels=C"):
        F.affine_of("unified_norm")
    with pytest.raises(refnorm.ShapeError, match=r"mismatch: channels=4 has 4 channels, input 'weight' of shape "
                                                 r"\(6,\) has 6"):
        F.affine_of("unified_norm", {"weight": np.ones(C)}, channels=4)
    with pytest.raises(refnorm.ShapeError, match=r"mismatch: state 'running_mean' of shape \(5,\) has 5 channels"):
        F.affine_of("batch_norm", {"weight": np.ones(C)}, {}, {"running_mean": np.zeros(5), "running_var": np.ones(5)})
    with pytest.raises(refnorm.ShapeError, match=r"input 'x' of shape \(2, 3, 4\) \(channel axis 1\) has 3"):
        F.affine_of("batch_norm", {"x": np.ones((2, 3, 4))}, {}, BN["state"])
    with pytest.raises(refnorm.ShapeError, match=r"'weight' has shape \(6, 1\); expected \(6,\)"):
        F.affine_of("batch_norm", {"weight": np.ones((C, 1))}, {}, BN["state"])
    with pytest.raises(refnorm.ConfigError, match=r"channels=-1; expected a non-negative integer"):
        F.affine_of("unified_norm", channels=-1)


# ---------------------------------------------------------------------------------------- torch
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("nk,groups,cin,cout", [(1, 1, 4, 5), (1, 2, 4, 6), (1, 4, 4, 8), (2, 1, 3, 2),
                                                (2, 3, 6, 3), (2, 6, 6, 12)])
def test_conv_ref_matches_torch(nk, groups, cin, cout, padding_mode):
    torch = require_torch()
    rng = seeded("torch-conv", nk, groups, padding_mode)
    kernel = (3, 2)[:nk]
    pad = (1, 2)[:nk]
    x = rng.standard_normal((2, cin) + (6, 5)[:nk])
    conv = (torch.nn.Conv1d if nk == 1 else torch.nn.Conv2d)(cin, cout, kernel, groups=groups, padding=pad,
                                                             padding_mode=padding_mode, dtype=torch.float64)
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    with torch.no_grad():
        want = conv(torch.tensor(x)).numpy()
    got = conv_ref(x, w, b, groups=groups, padding=pad, padding_mode=padding_mode)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


@pytest.mark.parametrize("kind", ["linear", "conv2d"])
def test_fold_into_previous_matches_torch_fuse_bn(kind):
    torch = require_torch()
    from torch.nn.utils import fusion
    rng = seeded("torch-fuse", kind)
    inputs, config, state = make_norm("batch_norm", C, rng, "both")
    w = rng.standard_normal((C, 4) + ((3, 3) if kind == "conv2d" else ()))
    b = rng.standard_normal(C)
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    args = (t(w), t(b), t(state["running_mean"]), t(state["running_var"]), config["eps"],
            t(inputs["weight"]), t(inputs["bias"]))
    tw, tb = (fusion.fuse_conv_bn_weights if kind == "conv2d" else fusion.fuse_linear_bn_weights)(*args)
    new_w, new_b = F.fold("batch_norm", inputs, config, state, w, b, kind=kind, position="previous")
    np.testing.assert_allclose(new_w, tw.detach().numpy(), rtol=1e-14, atol=1e-15 * np.abs(new_w).max())
    np.testing.assert_allclose(new_b, tb.detach().numpy(), rtol=1e-14, atol=1e-15 * np.abs(new_b).max())
