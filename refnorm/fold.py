"""Layer 2: fold an inference-time normalizer into a neighbouring Linear or convolution, in float64.

At inference some normalizers are a fixed per-channel affine map y_c = scale_c * x_c + shift_c, which
can be merged into the weight and bias of the Linear / convolution next to them:

    normalizer                                   what folds              into
    batch_norm, eval, running statistics         the whole normalizer    the next or the previous layer
    instance_norm, eval, running statistics      the whole normalizer    the next or the previous layer
    unified_norm, eval (running_var)             the whole normalizer    the next or the previous layer
    layer_norm  (one normalized axis)            weight, bias only       the next layer
    rms_norm    (one normalized axis)            weight + weight_offset  the next layer

For layer_norm and rms_norm only the elementwise affine moves: the normalization (mean / rms and
rstd of each row) depends on the input and stays. ``residual_normalizer`` says what must still run.

API
---
    affine_of(name, inputs=None, config=None, state=None, *, training=False, channels=None)
        -> (scale, shift)            float64 arrays of shape (C,)
    fold_into_next(scale, shift, weight, bias=None, *, kind="linear", groups=1, padding=0,
                   padding_mode="zeros") -> (new_weight, new_bias)
    fold_into_previous(scale, shift, weight, bias=None, *, kind="linear", groups=1)
        -> (new_weight, new_bias)
    fold(name, inputs, config, state, layer_weight, layer_bias=None, *, position="next",
         kind="linear", groups=1, padding=0, padding_mode="zeros", training=False)
        -> (new_weight, new_bias)    = affine_of + fold_into_next / fold_into_previous
    residual_normalizer(name, inputs=None, config=None) -> None | (inputs, config)
        None: the normalizer disappears; else the inputs and config to evaluate it with after folding
        (layer_norm: no weight, no bias; rms_norm: no weight, weight_offset 0.0).

``inputs``, ``config`` and ``state`` are what ``refnorm.evaluate`` takes for that normalizer (the
same names and keys: ``config`` is evaluate's keyword for the options) and are validated by it. An
activation ``x`` in ``inputs`` is not needed; if given, only its channel count is used (axis 1 for
batch_norm / instance_norm, the last axis for the others). unified_norm's ``pad_mask`` is ignored
in eval mode and so here. ``training`` must stay False: folding describes inference.
``channels`` gives C when nothing else does (unified_norm in eval with no weight, bias or state uses
running_var = 1); ``fold`` takes it from the layer's weight.

affine_of, per normalizer (C = number of channels):
* batch_norm / instance_norm (eval, state with running_mean and running_var):
  scale = weight * rstd, rstd = (running_var + eps)^-1/2; shift = bias - running_mean * scale,
  computed as the normalizer's own output at x = 0.
* unified_norm (eval): scale = weight / sqrt(running_var + eps), shift = bias (no mean: UN never centres).
* layer_norm: scale = weight, shift = bias (ones / zeros when absent) -- the affine part ONLY.
* rms_norm: scale = weight + weight_offset, shift = 0 -- the affine part ONLY.
Missing weight / bias count as ones / zeros.

Layer conventions (as torch)
----------------------------
* Linear ``kind="linear"``: weight (out, in), y = x @ W.T + b over the LAST axis of x.
* Convolution ``kind="conv1d" | "conv2d"``: weight (out, in / groups, *kernel), activation
  (N, C, *spatial), channels on axis 1. Output channel o belongs to group o // (out / groups) and
  reads input channels g * (in / groups) + j. Grouped and depthwise (groups = in) convolutions are
  supported; stride and dilation do not matter. Only ``padding`` matters (below).
The normalizer's channel is the layer's input channel (next) or output channel (previous), whatever
axis it lives on: a channel-last normalizer (layer_norm, rms_norm, unified_norm) before a convolution
means a transpose in between, which commutes with a per-channel map.

Formulas (docs/folding.md)
--------------------------
next, u = W (scale * x + shift) + b:
    W'[o, j, k...] = W[o, j, k...] * scale[c(o, j)],   c(o, j) = (o // (out/groups)) * (in/groups) + j
    b'[o]          = b[o] + sum_{j, k...} W[o, j, k...] * shift[c(o, j)]     (summed over the kernel taps)
previous, u = scale * (W x + b) + shift:
    W'[o, ...] = scale[o] * W[o, ...],   b' = scale * b + shift
``new_bias`` is None only when ``bias`` is None and every shift is 0 (a bias-free layer stays
bias-free, e.g. rms_norm -> Linear without bias); otherwise it is a float64 array of shape (out,).

Padding (next only). A convolution's zero padding pads the NORMALIZED activation with zeros; the
folded layer pads the raw activation with zeros, which the shift never reaches. So with zero padding
the fold is exact only where the window stays inside the input: at the borders the folded layer
misses the shift's contribution. ``fold_into_next`` therefore takes the convolution's ``padding``
(int, tuple of ints, "valid" or "same", as torch) and ``padding_mode``, and refuses (ConfigError)
nonzero zero-padding together with a nonzero shift. Zero padding with shift == 0 (rms_norm,
layer_norm without bias) is exact (scale * 0 == 0), and so are "reflect", "replicate" and "circular"
padding, which copy activation values (the affine map commutes with copying). Folding into a
previous layer is exact for any padding (the affine acts on the layer's output).

Refused, with a RefnormError subclass naming the value and what was expected: training=True and
statistics that depend on the input (batch_norm / instance_norm without running statistics, i.e.
batch / instance statistics); a previous layer for layer_norm or rms_norm; every other normalizer
(group_norm, lp_normalize, ...: unsupported, ConfigError); unknown names (UnknownNameError);
layer_norm / rms_norm over more than one axis (their affine is then not per channel); a channel count
mismatch, a weight of the wrong ndim for ``kind``, a bias of the wrong shape (ShapeError); groups that
are not a positive integer dividing the channels, groups != 1 for a Linear (ConfigError).

Accuracy. Everything is float64. The folded layer equals the unfused pair up to reassociation
rounding, about 1e-16 * (sum_j |W||scale x| + |W||shift|) per output; it degrades only when the
shift is large against the output (a running_mean much larger than the spread of x times rstd),
where the unfused pair cancels too. Casting W', b' back to float32 / bfloat16 adds that format's
rounding, which refnorm does not model.
"""
from __future__ import annotations

import numbers
from typing import Any, Mapping

import numpy as np

from .errors import ConfigError, RefnormError, ShapeError
from .registry import as_float64, evaluate, get

__all__ = ["affine_of", "fold_into_next", "fold_into_previous", "fold", "residual_normalizer",
           "FULLY_AFFINE", "AFFINE_ONLY", "KINDS", "PADDING_MODES"]

FULLY_AFFINE = ("batch_norm", "instance_norm", "unified_norm")
"""Normalizers that are a per-channel affine map at inference: fold into the next or previous layer."""

AFFINE_ONLY = ("layer_norm", "rms_norm")
"""Normalizers whose elementwise affine (not the normalization) folds into the next layer."""

KINDS = {"linear": 0, "conv1d": 1, "conv2d": 2}
"""Layer kind -> number of kernel axes (the weight has 2 + that many dimensions)."""

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")

_CHANNEL_FIRST = ("batch_norm", "instance_norm")  # x is (N, C, *); the others have C last


def _supported(name: str) -> None:
    get(name)  # UnknownNameError for names refnorm does not know
    if name not in FULLY_AFFINE + AFFINE_ONLY:
        raise ConfigError(
            f"{name} cannot be folded: its output is not a fixed per-channel affine map of the input "
            f"and it has no separate per-channel affine; expected one of {', '.join(FULLY_AFFINE)} "
            f"(eval mode: the whole normalizer) or {', '.join(AFFINE_ONLY)} (their weight/bias only)")


def _mapping(what: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RefnormError(f"{what} must be a mapping of name -> value, got {type(value).__name__}")
    return dict(value)


def _normalized_channels(name: str, config: dict) -> int | None:
    """C for layer_norm / rms_norm from normalized_shape; None if it is missing or malformed
    (evaluate then reports it). More than one normalized axis is refused."""
    ns = config.get("normalized_shape")
    if isinstance(ns, numbers.Integral) and not isinstance(ns, bool):
        return int(ns)
    if isinstance(ns, (list, tuple)) and len(ns) == 1 and isinstance(ns[0], numbers.Integral) \
            and not isinstance(ns[0], bool):
        return int(ns[0])
    if isinstance(ns, (list, tuple)) and len(ns) > 1:
        raise ConfigError(
            f"{name}: normalized_shape={list(ns)!r}; expected a single axis (the channel axis) to fold "
            "the affine into a neighbouring layer: over several axes the weight and bias are not per channel")
    return None


def _channels(name, inputs, config, state, channels, channels_from) -> int:
    """The normalizer's channel count, checked against every source that states one."""
    found: list[tuple[str, int]] = []
    if name in AFFINE_ONLY:
        c = _normalized_channels(name, config)
        if c is not None:
            found.append((f"normalized_shape={config['normalized_shape']!r}", c))
    for k in ("weight", "bias"):
        if inputs.get(k) is not None and np.ndim(inputs[k]) == 1:
            found.append((f"input {k!r} of shape {np.shape(inputs[k])}", np.shape(inputs[k])[0]))
    for k in ("running_mean", "running_var"):
        if state.get(k) is not None and np.ndim(state[k]) == 1:
            found.append((f"state {k!r} of shape {np.shape(state[k])}", np.shape(state[k])[0]))
    x = inputs.get("x")
    if x is not None and np.ndim(x) >= 2:
        axis = 1 if name in _CHANNEL_FIRST else -1
        found.append((f"input 'x' of shape {np.shape(x)} (channel axis {axis})", np.shape(x)[axis]))
    if channels is not None:
        if isinstance(channels, bool) or not isinstance(channels, numbers.Integral) or channels < 0:
            raise ConfigError(f"{name}: channels={channels!r}; expected a non-negative integer")
        found.append((channels_from, int(channels)))
    if not found:
        raise ShapeError(
            f"{name}: cannot tell the number of channels: no weight, bias or running statistics were given; "
            "expected one of them, or channels=C")
    (src0, c0), rest = found[0], found[1:]
    for src, c in rest:
        if c != c0:
            raise ShapeError(f"{name}: channel count mismatch: {src} has {c} channels, {src0} has {c0}; "
                             "expected the same number")
    return c0


def _affine(name, inputs, config, state, *, training, channels, channels_from):
    _supported(name)
    inputs, config, state = _mapping("inputs", inputs), _mapping("config", config), _mapping("state", state)
    if not isinstance(training, (bool, np.bool_)):
        raise RefnormError(f"training must be True or False, got {training!r}")
    if training:
        raise ConfigError(
            f"{name}: training=True normalizes with statistics of the current batch, which depend on the "
            "input; expected training=False (folding describes inference)")
    if name in _CHANNEL_FIRST and not {"running_mean", "running_var"} <= set(state):
        what = "batch statistics (torch's track_running_stats=False)" if name == "batch_norm" else \
            "instance statistics (torch's use_input_stats)"
        raise ConfigError(
            f"{name}: without running statistics (state has {sorted(state) or 'nothing'}) it normalizes with "
            f"{what} even in eval mode, which depend on the input; expected state with 'running_mean' and "
            "'running_var'")
    c = _channels(name, inputs, config, state, channels, channels_from)
    probe = {k: v for k, v in inputs.items() if k not in ("x", "pad_mask")}
    probe["x"] = np.zeros((1, c))
    # evaluate validates inputs, options and state exactly as for a normal call
    res = evaluate(name, probe, config=config, state=state or None, training=False)
    cfg = {**get(name).options, **config}
    w = None if inputs.get("weight") is None else as_float64(f"{name}: input 'weight'", inputs["weight"])
    scale = np.ones(c) if w is None else w.copy()
    if name in ("batch_norm", "instance_norm"):
        scale = scale * res.outputs["rstd"].reshape(c)
        shift = res.outputs["y"].reshape(c)          # (0 - mean) * rstd * weight + bias
    elif name == "unified_norm":
        scale = scale / np.sqrt(res.outputs["var"] + float(cfg["eps"]))
        shift = res.outputs["y"].reshape(c)          # = bias (or 0): UN does not centre
    else:  # layer_norm, rms_norm: the elementwise affine only
        if name == "rms_norm":
            scale = scale + float(cfg["weight_offset"])
            shift = np.zeros(c)
        else:
            b = inputs.get("bias")
            shift = np.zeros(c) if b is None else as_float64(f"{name}: input 'bias'", b)
    return scale, shift


def affine_of(name: str, inputs: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None,
              state: Mapping[str, Any] | None = None, *, training: bool = False,
              channels: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift), float64 (C,): the per-channel map y = scale * x + shift that folds.

    batch_norm, instance_norm (with running statistics) and unified_norm in eval mode ARE this map.
    For layer_norm and rms_norm it is only their elementwise affine (weight, bias / weight +
    weight_offset): the normalization itself depends on the input and must still run (see
    ``residual_normalizer``). Arguments as ``refnorm.evaluate``; see the module docstring.
    """
    return _affine(name, inputs, config, state, training=training, channels=channels,
                   channels_from=f"channels={channels!r}")


def residual_normalizer(name: str, inputs: Mapping[str, Any] | None = None,
                        config: Mapping[str, Any] | None = None):
    """What still runs after folding: None (the normalizer is gone) or (inputs, config) for evaluate.

    layer_norm: the inputs without 'weight' and 'bias'; rms_norm: without 'weight', and
    weight_offset=0.0 (an offset without a weight is an error, and the offset was folded too).
    """
    _supported(name)
    inputs, config = _mapping("inputs", inputs), _mapping("config", config)
    if name in FULLY_AFFINE:
        return None
    rest = {k: v for k, v in inputs.items() if k not in ("weight", "bias")}
    if name == "rms_norm":
        config = {**config, "weight_offset": 0.0}
    return rest, config


# ------------------------------------------------------------------------------------------ layers
def _check_kind(kind) -> int:
    if not isinstance(kind, str) or kind not in KINDS:
        raise ConfigError(f"kind={kind!r}; expected one of {', '.join(map(repr, KINDS))}")
    return KINDS[kind]


def _check_groups(kind: str, groups) -> int:
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise ConfigError(f"groups={groups!r}; expected a positive integer")
    if kind == "linear" and groups != 1:
        raise ConfigError(f"groups={groups!r} with kind='linear'; expected groups=1 (a Linear has no groups)")
    return int(groups)


def _check_layer(kind, weight, bias, groups, where: str):
    """float64 copies of (weight, bias) and groups, validated for ``kind``."""
    nk = _check_kind(kind)
    groups = _check_groups(kind, groups)
    w = as_float64(f"{where} {kind} weight", weight)
    layout = "(out, in)" if nk == 0 else f"(out, in/groups, {', '.join(['k'] * nk)})"
    if w.ndim != 2 + nk:
        raise ShapeError(f"{where} {kind} weight has shape {w.shape}; expected {2 + nk} dimensions {layout}")
    out = w.shape[0]
    if out % groups:
        raise ConfigError(f"groups={groups} does not divide the {where} {kind}'s {out} output channels "
                          f"(weight shape {w.shape}); expected a divisor of {out}")
    b = None
    if bias is not None:
        b = as_float64(f"{where} {kind} bias", bias)
        if b.shape != (out,):
            raise ShapeError(f"{where} {kind} bias has shape {b.shape}; expected ({out},), one per output channel")
    return w, b, groups


def _check_affine(scale, shift):
    s = as_float64("scale", scale)
    t = as_float64("shift", shift)
    if s.ndim != 1 or t.shape != s.shape:
        raise ShapeError(f"scale has shape {s.shape} and shift {t.shape}; expected two arrays of shape (C,)")
    return s, t


def _padded(padding, nk: int, kernel: tuple[int, ...], kind: str) -> bool:
    """Whether the layer pads its input; validates ``padding`` as torch does (a Linear: 0 only)."""
    if nk == 0:
        if isinstance(padding, str) and padding == "valid" or \
                isinstance(padding, numbers.Integral) and not isinstance(padding, bool) and padding == 0:
            return False
        raise ConfigError(f"padding={padding!r} for kind='linear'; expected 0 (a Linear does not pad)")
    if isinstance(padding, str):
        if padding == "valid":
            return False
        if padding == "same":
            return any(k > 1 for k in kernel)
        raise ConfigError(f"padding={padding!r}; expected an int, a tuple of ints, 'valid' or 'same'")
    pads = (padding,) if isinstance(padding, numbers.Integral) else padding
    if not (isinstance(pads, (tuple, list)) and len(pads) in (1, nk) and all(
            isinstance(p, numbers.Integral) and not isinstance(p, bool) and p >= 0 for p in pads)):
        raise ConfigError(f"padding={padding!r} for kind={kind!r}; expected an int >= 0, a tuple of {nk} "
                          "of them, 'valid' or 'same'")
    return any(p > 0 for p in pads)


def fold_into_next(scale, shift, weight, bias=None, *, kind: str = "linear", groups: int = 1,
                   padding=0, padding_mode: str = "zeros"):
    """(W', b') of the layer u = W (scale * x + shift) + b, i.e. u = W' x + b'.

    W'[o, j, k...] = W[o, j, k...] * scale[c(o, j)],  b'[o] = b[o] + sum_{j,k...} W[o, j, k...] shift[c(o, j)],
    c(o, j) = (o // (out/groups)) * (in/groups) + j. ``padding`` / ``padding_mode`` are the
    convolution's (torch's meaning); zero padding with a nonzero shift is refused (not exact at the
    borders). ``new_bias`` is None when ``bias`` is None and the shift is all zero.
    """
    s, t = _check_affine(scale, shift)
    w, b, groups = _check_layer(kind, weight, bias, groups, "following")
    nk = KINDS[kind]
    if not isinstance(padding_mode, str) or padding_mode not in PADDING_MODES:
        raise ConfigError(f"padding_mode={padding_mode!r}; expected one of {', '.join(map(repr, PADDING_MODES))}")
    out, cpg = w.shape[:2]
    if cpg * groups != s.shape[0]:
        what = f"{cpg} input features" if nk == 0 else \
            f"{cpg * groups} input channels ({cpg} per group x groups={groups})"
        raise ShapeError(f"the following {kind} takes {what} (weight shape {w.shape}); expected {s.shape[0]}, "
                         "the normalizer's channel count")
    has_shift = bool(np.any(t != 0))
    if _padded(padding, nk, w.shape[2:], kind) and padding_mode == "zeros" and has_shift:
        raise ConfigError(
            f"padding={padding!r} with padding_mode='zeros': the following {kind} pads the normalized activation "
            "with zeros, the folded one would pad the raw activation, and the nonzero shift would be missing at "
            "the borders; expected padding=0 / 'valid', a shift of 0, padding_mode 'reflect', 'replicate' or "
            "'circular', or fold into the previous layer instead")
    c = (np.arange(out) // (out // groups))[:, None] * cpg + np.arange(cpg)[None, :]   # (out, cpg)
    bshape = (out, cpg) + (1,) * nk
    new_w = w * s[c].reshape(bshape)
    if b is None and not has_shift:
        return new_w, None
    contrib = (w * t[c].reshape(bshape)).reshape(out, -1).sum(axis=1)
    new_b = contrib if b is None else b + contrib
    return new_w, new_b


def fold_into_previous(scale, shift, weight, bias=None, *, kind: str = "linear", groups: int = 1):
    """(W', b') of scale * (W x + b) + shift, i.e. u = W' x + b': W'[o] = scale[o] W[o], b' = scale b + shift.

    The normalizer's channels are the layer's output channels. ``groups`` is only validated (it must
    divide the output channels); the formula does not depend on it, nor on padding. ``new_bias`` is
    None when ``bias`` is None and the shift is all zero.
    """
    s, t = _check_affine(scale, shift)
    w, b, groups = _check_layer(kind, weight, bias, groups, "preceding")
    out = w.shape[0]
    if out != s.shape[0]:
        what = "output features" if kind == "linear" else "output channels"
        raise ShapeError(f"the preceding {kind} has {out} {what} (weight shape {w.shape}); expected "
                         f"{s.shape[0]}, the normalizer's channel count")
    new_w = w * s.reshape((out,) + (1,) * (w.ndim - 1))
    if b is None:
        return new_w, (t.copy() if np.any(t != 0) else None)
    return new_w, s * b + t


def fold(name: str, inputs: Mapping[str, Any] | None, config: Mapping[str, Any] | None,
         state: Mapping[str, Any] | None, layer_weight, layer_bias=None, *, position: str = "next",
         kind: str = "linear", groups: int = 1, padding=0, padding_mode: str = "zeros",
         training: bool = False):
    """Fold normalizer ``name`` (arguments as ``refnorm.evaluate``) into the layer after it
    (``position="next"``) or before it (``"previous"``, fully affine normalizers only).

    Returns (new_weight, new_bias) of the layer. For layer_norm / rms_norm the normalizer still runs
    after folding, without its affine: ``residual_normalizer(name, inputs, config)``.
    """
    _supported(name)
    if position not in ("next", "previous"):
        raise ConfigError(f"position={position!r}; expected 'next' or 'previous'")
    if position == "previous" and name not in FULLY_AFFINE:
        raise ConfigError(
            f"{name} cannot be folded into a preceding layer: its statistics are computed from each input "
            "row, so it is not a fixed affine map; expected position='next' (only its weight/bias fold), or "
            f"a normalizer that is affine at inference ({', '.join(FULLY_AFFINE)})")
    where = "following" if position == "next" else "preceding"
    w, _, groups = _check_layer(kind, layer_weight, layer_bias, groups, where)
    if position == "next":
        c = w.shape[1] * groups
        src = f"the following {kind}'s input (weight shape {w.shape}, groups={groups})"
    else:
        c = w.shape[0]
        src = f"the preceding {kind}'s output (weight shape {w.shape})"
    scale, shift = _affine(name, inputs, config, state, training=training, channels=c, channels_from=src)
    if position == "next":
        return fold_into_next(scale, shift, w, layer_bias, kind=kind, groups=groups, padding=padding,
                              padding_mode=padding_mode)
    return fold_into_previous(scale, shift, w, layer_bias, kind=kind, groups=groups)
