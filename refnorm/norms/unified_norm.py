"""Unified Normalization (UN; Yang et al., ACM MM 2022, arXiv:2208.01313), official UN1d semantics.

    y = weight * x / sqrt(sig2 + eps) + bias,     sig2 per channel, NO mean removed (mu_hat = 0)

Input ``x`` is (B, N, C) or (N, C) (= B 1). Every statistic is per channel c, pooled over all batch
and token positions (b, n) (BatchNorm-like, not LayerNorm-like): the "variance" is the UNCENTRED
mean square s_c = mean_K(x^2) over the non-padded positions K. eps sits inside the sqrt.
``pad_mask`` (optional, shape x.shape[:-1]) holds only 0 and 1, 1 = padding: a floating array, or a
boolean one as the official code passes (True = padding; ``SPEC.masks``, converted by the registry); padded positions are left out of the forward statistic only and are
still normalized. Its "gradient" is zeros (it is not differentiable; the contract wants an entry).
``weight`` and ``bias`` have shape (C,) and are optional (then 1 and 0, and no gradient for them).
Outputs: ``y``; ``var`` (C,) = the sig2 used to normalize; ``r`` (C,) = the gradient-compensation
factor that the backward of this call applies (1 in eval mode and in the paper preset).

Options: ``window`` M (int, or [M_f, M_b] for the forward / backward histories; default 4),
``warmup`` T_w (forward calls; default 4000), ``outlier_filtration`` (default False), ``eps`` (1e-5),
``momentum`` alpha (default 0.9) -- !! UN's momentum is the weight on the OLD value in both EMAs,
v <- alpha v + (1 - alpha) new: the OPPOSITE of torch BatchNorm's momentum !!, ``preset``.

State (the official buffer names; float64, ``iters``/``skip_counter`` int64 of shape (1,)):
running_var v (C,), ema_gz psi (C,), buffer_x2 H_x (M_f, C), buffer_gz H_g (M_b, C), iters t,
skip_counter. No state given = the official initialisation: v = ones, psi = 0, H_x = H_g = 0, t = 0,
skip_counter = 0. In training a given state must be complete; in eval mode missing entries take the
initial values. ``iters`` counts TRAINING FORWARD calls (not optimizer steps; reset it to 0 to rerun
warm-up when fine-tuning, as the upstream README says).

Iterations. UN's backward is not the gradient of its forward: the backward of call t reads and
updates state. ``evaluate(..., grad_outputs=...)`` runs ONE full training iteration (forward, which
updates iters, buffer_x2, skip_counter, running_var; then backward, which updates buffer_gz and
ema_gz) and returns the state after both; without ``grad_outputs`` it returns the state after the
forward (the official code when no backward follows). A run is a loop:
    st = None
    for x_t, dy_t in batches:
        res = refnorm.evaluate("unified_norm", {"x": x_t}, config=cfg, state=st, grad_outputs={"y": dy_t})
        st = res.state
preset="official" (default): what the official code computes (docs/unified_norm_semantics.md section 3; the full
algorithm, as four estimators of the offline framework, is in _un_instances.py). In short: sig2 = s
during warm-up (t < T_w), for t <= M_f and on
skipped calls, otherwise the per-channel geometric mean G of the window H_x (which holds s). The
outlier filter (only if enabled and t >= T_w) fires when ANY channel has A_c - G_c > M_f * theta,
theta = ONE unbiased variance of sqrt(H_x) pooled over channels and window BEFORE s is inserted; it
then sets H_x[k] = v (not s), skips the smoothing for the whole layer and counts skip_counter.
Window M_f = 1 always skips (not counted). Backward (g = dy * weight * r):
    q = mean_P(g z) (pads included),  psi <- alpha psi + (1 - alpha) m  (m = q, or mean(H_g) after
    warm-up for t > M_b when not skipped),  dx = (g - p z) / sqrt(sig2 + eps),  p = q on skipped
    calls, else the UPDATED psi;  dweight = sum(dy r z),  dbias = sum(dy).
r = clip(sqrt(sig2 + eps) / sqrt(v + eps), 1/5, 5) after call max(1000, T_w) on unskipped calls, else 1.
dx is the TRUE gradient of the forward only on skipped calls (incl. window 1) without padding;
dweight is the true gradient whenever r = 1 and dbias always (derivations/unified_norm.md).

preset="paper": the seed's equations (as framework pieces in _un_instances.py). The paper's filter fires when
E(Omega_t) - Pi(Omega_t) > M V(Omega_t^(1/2)), Omega_t = the M latest statistics WITH the current one.
That never happens: with h_i = sqrt(Omega_i), Kober's inequality gives
    A - G <= (1/M) sum_{i<j} (h_i - h_j)^2 = M * Var_ddof0(h) <= M * Var_ddof1(h)
for every positive Omega, with equality at M = 2 for ddof 0 (A - G = (h_1 - h_2)^2 / 2). So the
paper preset takes V, per channel as in the paper, from the M_f statistics BEFORE the current one
(as the official code does), with ddof 1 (the official code's V); a firing channel drops the moving
averages for the whole layer ("in a specific normalization layer"). Other choices the seed leaves
open: sigma_t^2 = mean square (mu_hat = 0); no smoothing for t < T_w or t <= M_f (forward) / t <= M_b
(backward); H_x and H_g always store the current statistics; a filtered or warm-up call sets
psi = g_t exactly; psi's window holds g_t .. g_{t-M+1} (the seed's g_{t-1} is a typo); r = 1;
running_var as the official code (the seed has no inference rule). The backward statistic is the
exact one, g = sum_P(weight dy z) / |K|, and dx = (weight dy - [not padded] psi z) / sqrt(sig2 + eps):
with psi = g (warm-up, filtered calls) this is the true gradient, padding included.
Found by simulation: this per-channel test is scale-free (its firing does not depend on the noise
level or batch size, to leading order) and fires on i.i.d. sampling noise: about 9% of calls per
channel for M = 4 (so a layer of many channels skips most calls); the official pooled theta does not.

Eval mode (training=False): y = weight * x / sqrt(v + eps) + bias, a fixed per-channel affine map;
no statistic, pad_mask ignored, state unchanged. dx = weight dy / sqrt(v + eps), the true gradient.
NaN/Inf: a non-finite x in channel c makes s_c, y[..., c], the gradients and the buffers of channel c
non-finite (at a padded position: only y there and, through the backward statistic, channel c's
gradients). Other channels stay finite. Beyond the layer-wide skip decision, channels interact only
through the official filter's pooled theta: a NaN in H_x disables that filter until it leaves the window.
Empty batch (no position, or all padded): s = 0/0 = NaN, as torch's mean, and it enters the buffers.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError, RefnormError, ShapeError
from ..spec import Backward, Forward, NormSpec
from . import _common as C
from ._un_instances import PRESETS

NAME = "unified_norm"
STATE = ("running_var", "ema_gz", "buffer_x2", "buffer_gz", "iters", "skip_counter")


def _windows(window) -> tuple[int, int]:
    if isinstance(window, (list, tuple)):
        if len(window) != 2:
            raise ConfigError(f"{NAME}: window={list(window)!r}; expected an int or a pair [forward, backward]")
        return C.check_int(NAME, "window", window[0], minimum=1), C.check_int(NAME, "window", window[1], minimum=1)
    w = C.check_int(NAME, "window", window, minimum=1)
    return w, w


def initial_state(c: int, mf: int, mb: int) -> dict:
    """The official initialisation of the buffers for C channels and windows (M_f, M_b)."""
    return {"running_var": np.ones(c), "ema_gz": np.zeros(c), "buffer_x2": np.zeros((mf, c)),
            "buffer_gz": np.zeros((mb, c)), "iters": 0, "skip_counter": 0}


def _check_state(state, c, mf, mb, training) -> dict:
    missing = [k for k in STATE if k not in state]
    if state and missing and training:
        raise RefnormError(f"{NAME}: a training state must have every entry; missing {', '.join(map(repr, missing))}"
                           " (give no state at all for the official initialisation)")
    st = {**initial_state(c, mf, mb), **state}
    for k, shape in (("running_var", (c,)), ("ema_gz", (c,)), ("buffer_x2", (mf, c)), ("buffer_gz", (mb, c))):
        C.check_param(NAME, k, np.asarray(st[k]), shape)
    for k in ("iters", "skip_counter"):
        a = np.asarray(st[k])
        if a.shape not in ((), (1,)):
            raise ShapeError(f"{NAME}: {k!r} has shape {a.shape}; expected (1,) or ()")
        if int(a.reshape(-1)[0]) < 0:
            raise RefnormError(f"{NAME}: {k}={int(a.reshape(-1)[0])}; expected a count >= 0")
        st[k] = int(a.reshape(-1)[0])
    for k in ("running_var", "buffer_x2"):
        if np.any(st[k] < 0):
            raise RefnormError(f"{NAME}: state {k!r} holds negative values; expected mean squares >= 0")
    return st


def check(x, weight, bias, pad_mask, state, training, *, window=4, warmup=4000, outlier_filtration=False,
          eps=1e-5, momentum=0.9, preset="official"):
    """The argument checks (shared with the specification, refnorm/specs/unified_norm.py): returns the
    checked options (preset, window_f, window_b, warmup, outlier_filtration, eps, momentum) and the checked
    state (missing entries: the official initialisation; counts as ints)."""
    preset = C.check_choice(NAME, "preset", preset, PRESETS)
    mf, mb = _windows(window)
    warmup = C.check_int(NAME, "warmup", warmup, minimum=0)
    if not isinstance(outlier_filtration, (bool, np.bool_)):
        raise ConfigError(f"{NAME}: outlier_filtration={outlier_filtration!r}; expected True or False")
    eps = C.check_eps(NAME, eps)
    alpha = C.check_real(NAME, "momentum", momentum)
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"{NAME}: momentum={momentum!r}; expected a number in [0, 1] (UN's momentum is the "
                          "weight on the OLD value, default 0.9)")
    if x.ndim not in (2, 3):
        raise ShapeError(f"{NAME}: input 'x' has shape {x.shape}; expected (B, N, C) or (N, C)")
    c = x.shape[-1]
    C.check_param(NAME, "weight", weight, (c,))
    C.check_param(NAME, "bias", bias, (c,))
    if pad_mask is not None:
        C.check_param(NAME, "pad_mask", pad_mask, x.shape[:-1])
        if not np.all((pad_mask == 0) | (pad_mask == 1)):
            raise ConfigError(f"{NAME}: 'pad_mask' holds values other than 0 and 1, e.g. "
                              f"{float(pad_mask[(pad_mask != 0) & (pad_mask != 1)].reshape(-1)[0])!r}; "
                              "expected 1 = padding, 0 = token")
    st = _check_state(dict(state or {}), c, mf, mb, training)
    return dict(preset=preset, window_f=mf, window_b=mb, warmup=warmup, outlier_filtration=bool(outlier_filtration),
                eps=eps, momentum=alpha), st


def forward(x, weight=None, bias=None, pad_mask=None, state=None, *, training=True, **config):
    """Returns (y, var, r, new_state, ctx); ``ctx`` feeds ``backward``. See the module docstring.
    config: window, warmup, outlier_filtration, eps, momentum, preset (defaults: see ``check``)."""
    opts, st = check(x, weight, bias, pad_mask, state, training, **config)
    inst = PRESETS[opts.pop("preset")]
    keep = None if pad_mask is None else pad_mask == 0
    out, new, ctx = inst.forward(x, weight, bias, st, training=training, keep=keep, **opts)
    sig2 = ctx["call"].values["sig2"] if training else st["running_var"]
    ctx.update(inst=inst, has_pad=pad_mask is not None)
    return out["y"], np.array(sig2, dtype=np.float64), out["r"], _ordered(new), ctx


def _ordered(st):
    """The state in the official buffer order (STATE)."""
    return None if st is None else {k: st[k] for k in STATE}


def backward(dy, ctx):
    """Returns (dx, dweight or None, dbias or None, new_state or None (eval: unchanged))."""
    dx, dw, db, new = ctx["inst"].backward(dy, ctx)
    return dx, dw, db, _ordered(new)


def _forward(inputs, config, state, training):
    y, var, r, new, ctx = forward(inputs["x"], inputs.get("weight"), inputs.get("bias"), inputs.get("pad_mask"),
                                  state, training=training, **config)
    return Forward({"y": y, "var": var, "r": r}, new, ctx)


def _backward(ctx, cot):
    dx, dw, db, new = backward(cot["y"], ctx)
    grads = C.affine_grads(dx, dw, db, dw is not None, db is not None)
    if ctx["has_pad"]:  # not differentiable (a 0/1 mask): the contract wants an entry, so zeros
        grads["pad_mask"] = np.zeros(ctx["shape"][:-1])
    return Backward(grads, new)


SPEC = NormSpec(
    name=NAME,
    summary="y = weight * x / sqrt(sig2 + eps) + bias, sig2 per channel: the (smoothed) mean square over "
            "batch and tokens; hand-written stateful backward (official UN1d)",
    inputs=("x", "pad_mask", "weight", "bias"), required=("x",),
    outputs=("y", "var", "r"),
    options={"window": 4, "warmup": 4000, "outlier_filtration": False, "eps": 1e-5, "momentum": 0.9,
             "preset": "official"},
    forward=_forward, backward=_backward,
    state=STATE, integer_state=("iters", "skip_counter"), masks=("pad_mask",),
)
