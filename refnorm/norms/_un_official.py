"""Unified Normalization's numerical helpers: the geometric mean of a window and its AM - GM gap.

Used by the offline framework's UN pieces (offline.py ``geometric_window``, ``am_gm_gate``); the presets
themselves are framework instances (_un_instances.py), documented in unified_norm.py. Both helpers scale
the window by its largest slot, so a constant history gives its constant and a gap of 0 exactly.
"""
from __future__ import annotations

import numpy as np


def _log_ratio(H: np.ndarray):
    """(ref, h, L): ref = max_i H[i] per channel, h = H / ref in [0, 1], L = mean_i log(h).

    Scaling by the largest slot makes a constant history give h == 1, L == 0 EXACTLY, so its
    geometric mean is exactly the constant and its AM - GM gap exactly 0 (not a few ulps, which
    the outlier test could mistake for a fluctuation). Channels with ref 0, Inf or NaN fall back
    to the plain formulas (exp(mean log H): 0 for a zero slot, Inf/NaN propagate).
    """
    ref = H.max(axis=0) if H.shape[0] else np.zeros(H.shape[1:])
    good = np.isfinite(ref) & (ref > 0)
    safe = np.where(good, ref, 1.0)
    h = np.where(good, H / safe, H)
    with np.errstate(divide="ignore"):      # log(0) = -inf: a zero slot makes the geometric mean 0
        return ref, good, h, np.log(h).mean(axis=0)


def geometric_mean(H: np.ndarray) -> np.ndarray:
    """exp(mean_i log H[i, c]) per channel of a window H (M, C) of non-negative statistics."""
    ref, good, _, L = _log_ratio(H)
    return np.where(good, ref * np.exp(L), np.exp(L))


def am_gm_gap(H: np.ndarray) -> np.ndarray:
    """A_c - G_c = mean_i H[i, c] - geometric_mean(H)[c], without cancelling the leading terms.

    With h = H / ref: A - G = ref * (mean(h - 1) - expm1(mean log h)); h - 1 is exact (Sterbenz)
    and both terms are accurate relative to themselves, so the O(spread^2) gap keeps its digits.
    """
    ref, good, h, L = _log_ratio(H)
    plain = H.mean(axis=0) - np.exp(L)
    return np.where(good, ref * ((h - 1.0).mean(axis=0) - np.expm1(L)), plain)
