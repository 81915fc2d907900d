"""Unified Normalization's two presets as instances of the offline framework (offline.py).

The public entry point and the documentation are in ``unified_norm.py``, which runs these instances
(options ``window_f``, ``window_b`` are its ``window`` split in two). Each preset is four estimators, a
tracker and, for the official code, a gradient-compensation factor:

official (docs/unified_norm_semantics.md section 3):
    Theta_mu = 0;  Theta_sigma = geometric_window over H_x with warm-up and the POOLED outlier gate, whose
    firing skips the smoothing for the layer, counts skip_counter and stores running_var in the slot;
    a window of 1 always skips;
    Theta_gmu = 0;  Theta_gsigma = window_ema_gz: EMA of the window mean of q = mean_P(g z), updated every
    call, used after its update; on skipped calls dx uses q and the slot stores the old EMA;
    r = clip(sqrt((sig2 + eps) / (v + eps)), 1/5, 5) after call max(1000, T_w) on unskipped calls, else 1;
    tracker running_var <- alpha v + (1 - alpha) sig2;  gradient statistics over ALL positions (pads too).
paper (the seed's equations, with the choices documented in unified_norm.py):
    the same pieces with the per-channel gate (threshold from the previous window, only once the window is
    full), no slot overwrite, no skip for window 1, psi = q on warm-up/early/skipped calls (no EMA then),
    r = 1, and the exact chain rule's positions (sums divided by |K|, psi subtracted at real tokens only).
"""
from __future__ import annotations

import numpy as np

from . import offline as O

R_AFTER = 1000  # the official code's hard-coded start of the gradient compensation r
R_MIN, R_MAX = 0.2, 5.0
OPTIONS = {"window_f": 4, "window_b": 4, "warmup": 4000, "outlier_filtration": False, "eps": 1e-5,
           "momentum": 0.9}


def _official_r(call: O.Call) -> np.ndarray:
    """UN's gradient-compensation factor (Batch-Renorm-like r, against the running variance before the update)."""
    sig2, v, eps = call.values["sig2"], call.state["running_var"], call.opts["eps"]
    if call.t <= max(R_AFTER, call.opts["warmup"]) or call.events["skip"]:
        return np.ones_like(sig2)
    return np.clip(np.sqrt(sig2 + eps) / np.sqrt(v + eps), R_MIN, R_MAX)


def _eval(st, o):
    return np.zeros_like(st["running_var"]), np.sqrt(st["running_var"] + o["eps"])


_RUNNING_VAR = O.tracker("running_var", "used", "momentum", init=1.0, new_weight=False)

OFFICIAL = O.OfflineNorm(
    name="unified_norm", summary="UN, official code",
    theta_mu=O.zero_mean(),
    theta_sigma=O.geometric_window(
        "buffer_x2", "window_f", warmup="warmup",
        gate=O.am_gm_gate(pooled=True, warmup="warmup", enabled="outlier_filtration"),
        on_skip=lambda call: call.state["running_var"]),
    theta_gmu=O.zero_gmean(),
    theta_gsigma=O.window_ema_gz("ema_gz", "buffer_gz", "window_b", "momentum", warmup="warmup"),
    trackers=(_RUNNING_VAR,), compensation=_official_r, eval_stats=_eval,
    centred=False, layout="channels_last", options=OPTIONS, backward_positions="all",
)

PAPER = O.OfflineNorm(
    name="unified_norm", summary="UN, the paper's equations",
    theta_mu=O.zero_mean(),
    theta_sigma=O.geometric_window(
        "buffer_x2", "window_f", warmup="warmup",
        gate=O.am_gm_gate(pooled=False, warmup="warmup", enabled="outlier_filtration"), one_skips=False),
    theta_gmu=O.zero_gmean(),
    theta_gsigma=O.window_ema_gz("ema_gz", "buffer_gz", "window_b", "momentum", warmup="warmup",
                                 store_old_on_skip=False, ema_always=False),
    trackers=(_RUNNING_VAR,), eval_stats=_eval,
    centred=False, layout="channels_last", options=OPTIONS, backward_positions="statistic",
)

PRESETS = {"official": OFFICIAL, "paper": PAPER}
