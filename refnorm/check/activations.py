"""The activations a normalization kernel fuses or gates with, each as (name, f, f'): pure NumPy, float64.

SiLU p sigmoid(p); GELU 0.5 p (1 + erf(p / sqrt 2)) and its tanh approximation 0.5 p (1 + tanh(sqrt(2 / pi)
(p + 0.044715 p^3))); ReLU; sigmoid; tanh; quick-GELU p sigmoid(1.702 p) (CLIP's); Mish p tanh(softplus(p));
p sigmoid(2 p) and p sigmoid(p / 2) (a SiLU's sigmoid written through tanh with its halving dropped or doubled);
p sigmoid(p ln 2) (its exponential written as exp2 without the log2(e) factor); p sigmoid(|p|) (an overflow-safe
sigmoid without its branch for negative p, its slope by the SiLU's formula from that sigmoid).
Sigmoids from refnorm/specs/_math.sigmoids (no overflow), softplus as log(1 + e^p) = logaddexp(0, p).
Layer 4 (the checker's explanations: explain.py's epilogues, spec_search.py's activation read as another).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf

from ..specs._math import sigmoids

_K = math.sqrt(2.0 / math.pi)


def sigmoid(p):
    return sigmoids(p)[0]


def _gelu_tanh(p):
    return 0.5 * p * (1.0 + np.tanh(_K * (p + 0.044715 * p ** 3)))


def _gelu_tanh_slope(p):
    t = np.tanh(_K * (p + 0.044715 * p ** 3))
    return 0.5 * (1.0 + t) + 0.5 * p * (1.0 - t * t) * _K * (1.0 + 3 * 0.044715 * p * p)


def _silu_at(k):
    """p sigmoid(k p) and its slope: quick-GELU (k = 1.702); a SiLU whose sigmoid is written through tanh without
    its halving, 0.5 (1 + tanh(p)) = sigmoid(2 p) (k = 2), or halved twice (k = 1/2)."""
    def slope(p):
        s, rest = sigmoids(k * p)
        return s + k * p * s * rest
    return (lambda p: p * sigmoid(k * p)), slope


def _quick_gelu_slope(p):
    return _silu_at(1.702)[1](p)


def _silu_abs_slope(p):
    s, rest = sigmoids(np.abs(p))
    return s * (1.0 + p * rest)


def _mish(p):
    return p * np.tanh(np.logaddexp(0.0, p))


def _mish_slope(p):
    t = np.tanh(np.logaddexp(0.0, p))
    return t + p * sigmoid(p) * (1.0 - t * t)


ACTIVATIONS = (
    ("SiLU", lambda p: p * sigmoid(p), lambda p: sigmoid(p) * (1.0 + p * sigmoids(p)[1])),
    ("GELU", lambda p: 0.5 * p * (1.0 + erf(p / math.sqrt(2.0))),
     lambda p: 0.5 * (1.0 + erf(p / math.sqrt(2.0))) + p * np.exp(-0.5 * p * p) / math.sqrt(2.0 * math.pi)),
    ("GELU (tanh approximation)", _gelu_tanh, _gelu_tanh_slope),
    ("ReLU", lambda p: np.maximum(p, 0.0), lambda p: (p > 0).astype(np.float64)),
    ("sigmoid", sigmoid, lambda p: sigmoid(p) * sigmoids(p)[1]),
    ("tanh", np.tanh, lambda p: 1.0 - np.tanh(p) ** 2),
    ("quick-GELU", lambda p: p * sigmoid(1.702 * p), _quick_gelu_slope),
    ("Mish", _mish, _mish_slope),
    ("p sigmoid(2 p) (the sigmoid through tanh without its halving, 0.5 (1 + tanh(p)))", *_silu_at(2.0)),
    ("p sigmoid(p / 2) (the sigmoid through tanh halved twice, 0.5 (1 + tanh(p / 4)))", *_silu_at(0.5)),
    ("p sigmoid(p ln 2) (the sigmoid through exp2 without its log2(e) factor, 1 / (1 + 2^-p))", *_silu_at(math.log(2.0))),
    ("p sigmoid(|p|) (an overflow-safe sigmoid 1 / (1 + e^-|p|) without its branch for p < 0; its slope the SiLU's "
     "formula s (1 + p (1 - s)) from that s)", lambda p: p * sigmoid(np.abs(p)), _silu_abs_slope),
)
