"""Weight Standardization (Qiao et al. 2019, "Micro-Batch Training with Batch-Channel Normalization
and Weight Standardization", arXiv:1903.10520, eq. 2-3).

    y = (x - mean_A(x)) * rstd,     rstd = (var_A(x) + eps) ** -1/2

``x`` is a weight tensor (out, in, *k) (at least 2-D: a convolution or linear weight); each output
channel x[o] is standardized over its fan-in, A = every axis but 0 (m = in * prod(k) elements).
Biased variance (ddof=0), eps inside the square root, no affine (WS has no weight/bias: the layer's
own weight IS the input). Inputs ``x`` only. There is no torch op (WS is a reparameterization that
models write by hand): ``y`` is layer_norm over ``x.shape[1:]`` without weight and bias.

``eps`` (default 1e-5, >= 0): the paper's equation writes sigma = sqrt(var + eps) without a value;
implementations differ, and none of the variants below is this formula with another eps:
* the authors' code (joe-siyuan-qiao/WeightStandardization): (x - mean) / (std + 1e-5) with the
  UNBIASED std (torch.std's default) and eps added to the std;
* BiT (google-research/big_transfer): biased var, eps inside, 1e-10;
* timm StdConv2d / ScaledStdConv2d: biased var via F.batch_norm, eps inside, 1e-6.
refnorm takes the paper's form (biased var, eps inside the root, as every other normalizer here)
with 1e-5, the authors' constant and torch's norm default; BiT and timm are eps=1e-10 and eps=1e-6.
The authors' unbiased-std-plus-eps variant is a different function (not provided; at eps -> 0 it
equals this one times sqrt((m - 1) / m)).

Outputs ``y`` (the standardized weight) and ``mean`` and ``rstd`` with keepdims shape
(out, 1, 1, ...), as statistics (not differentiable outputs).

Backward (derivations/weight_standardization.md: layer_norm's with weight 1), xhat = y, g = dy:
    dx = rstd * (g - mean_A(g) - xhat * mean_A(g * xhat))          (_common.centered_backward)
so sum_A dx = 0 for every output channel.
Statistics are two-pass with re-centred deviations (_common.centered_moments): accurate when
|mean| >> std, and a constant channel gives y = 0 and dx = (g - mean_A(g)) / sqrt(eps) (NaN for
eps = 0: 0/0, as torch's composition and layer_norm).
NaN/Inf in an output channel reach only that channel's y, mean, rstd and dx.
Empty: out = 0 gives empty outputs; a zero fan-in (some in/k axis 0) gives mean 0 and rstd NaN for
each channel and an empty y, as torch.native_layer_norm on the same view.
"""
from __future__ import annotations

import numpy as np

from ..spec import Forward, NormSpec
from . import _common as C

NAME = "weight_standardization"


def _fan_in_axes(x: np.ndarray) -> tuple[int, ...]:
    C.check_ndim(NAME, x, 2, "(out, in, *kernel): a weight tensor")
    return tuple(range(1, x.ndim))


def check(x, eps):
    """The argument checks (shared with the specification, refnorm/specs/weight_standardization.py):
    (eps, the fan-in axes)."""
    eps = C.check_eps(NAME, eps)
    return eps, _fan_in_axes(x)


def forward(x, *, eps=1e-5):
    """Returns (y, mean, rstd). See the module docstring for the equation and shapes."""
    eps, axes = check(x, eps)
    mean, var, d = C.centered_moments(x, axes)
    rstd = 1.0 / np.sqrt(var + eps)
    return d * rstd, mean, rstd


def backward(dy, x, rstd):
    """Returns dx for the forward above (rstd from the forward)."""
    axes = _fan_in_axes(x)
    xhat = C.centered(x, axes)[1] * rstd
    return C.centered_backward(dy, xhat, rstd, axes)


def _forward(inputs, config, state, training):
    x = inputs["x"]
    y, mean, rstd = forward(x, **config)
    return Forward({"y": y, "mean": mean, "rstd": rstd}, {}, ((x, rstd), {}))


SPEC = NormSpec(
    name=NAME,
    summary="y = (x - mean) / sqrt(var + eps) per output channel (axis 0) over the fan-in (all other axes)",
    inputs=("x",), required=("x",),
    outputs=("y", "mean", "rstd"),
    options={"eps": 1e-5},
    forward=_forward, backward=C.x_backward(backward),
)
