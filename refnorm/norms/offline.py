"""UN's unified framework for offline normalizers (Yang et al. 2022, seed 000, "Unified framework").

One training call t of an offline normalizer, per channel c (statistics pooled over every other
position p = 1..P, like BatchNorm; x is laid out as (P, C)):

    forward    mu_t, sigma_t^2 = batch statistics   (centred: mean and BIASED variance about it;
                                                       uncentred: mu_t = 0, sigma_t^2 = mean(x^2))
               D      = Theta_sigma(sigma_t^2, sigma_{t-1}^2, ...)   the scale, D = sqrt(sigma_hat^2 + eps)
               mu_hat = Theta_mu(mu_t, mu_{t-1}, ...)
               z = (x - mu_hat) / D,   y = weight * z + bias
    backward   g = dy * weight * r                  r: an optional gradient-compensation factor (1 if none)
               psi_sigma = Theta_gsigma(mean_P(g z), ...),  psi_mu = Theta_gmu(mean_P(g), ...)
               dx = (g - psi_mu - z * psi_sigma) / D
               dweight = sum_P(dy * r * z),  dbias = sum_P(dy)

(the seed's dL/dX = (dL/dZ - psi_mu - Z psi_sigma) / sqrt(sigma_hat^2 + eps)). With the current-batch
estimators (D = sqrt(sigma_t^2 + eps), mu_hat = mu_t, psi_mu = mean_P(g), psi_sigma = mean_P(g z)) dx is
the EXACT gradient of the forward: BatchNorm's (or, uncentred, a batch-pooled RMSNorm's) closed form,
derivations/offline.md. Every other estimator replaces a term of that chain rule by an estimate.

An estimator is a small named object (``Estimator``): its documentation, the state entries it owns
(name -> initial value for C channels) and ``step(call) -> (value, state updates)``. ``Call`` holds
what it may read: the call count t, the state BEFORE this call, the options, the batch statistics,
the values computed earlier in the call, and ``events`` (flags an estimator raises for the others,
e.g. an outlier gate's "skip"). Estimators never mutate anything; the framework merges their updates.
Order of a call: theta_sigma, theta_mu, trackers (eval-mode statistics, updated but not used in
training), then in the backward theta_gsigma, theta_gmu. Forward estimators read the OLD state;
backward estimators read the state after the forward.

``OfflineNorm(...)`` turns four estimators (+ options) into a registered normalizer's ``NormSpec``
(outputs y, mean = the mu_hat used, rstd = 1 / D, r = the gradient-compensation factor; state = every
piece's entries + ``iters``). Instances: offline_batch_norm.py (current batch), power_norm.py (PowerNorm),
batch_renorm.py (Batch Renormalization), and unified_norm's presets "official" and "paper"
(_un_instances.py: geometric_window with an outlier gate, window_ema_gz, UN's r as ``compensation``).

Conventions shared by all pieces: ``momentum`` (alpha) of an EMA is the weight on the OLD value,
EMA(old, new) = alpha * old + (1 - alpha) * new (UN's and PowerNorm's convention), unless a piece
says otherwise (``ema_new_weight`` for torch/Batch-Renorm-style rates). eps sits inside the square
root. State is float64 per-channel (C,) or windows (M, C); the call counter ``iters`` is int64 (1,).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import ConfigError, RefnormError, ShapeError
from ..spec import Backward, Forward, NormSpec
from . import _common as C


# ------------------------------------------------------------------------------------ the pieces
@dataclass
class Call:
    """What an estimator reads on one training call (all per channel, shape (C,))."""

    t: int                      # 1-based training-call count (incremented before the call)
    state: Mapping[str, Any]    # state before the call (forward) / after the forward (backward)
    opts: Mapping[str, Any]     # the instance's checked options
    n: int                      # positions in the statistic (the kept ones, see OfflineNorm.forward)
    mean: np.ndarray            # batch mean mu_t (zeros when uncentred)
    var: np.ndarray             # sigma_t^2: biased variance about mu_t, or the mean square when uncentred
    values: dict = field(default_factory=dict)  # "scale", "mu_hat", "gmean", "gz", "psi_sigma", ...
    events: dict = field(default_factory=dict)  # flags shared between pieces (e.g. "skip": True)


@dataclass(frozen=True)
class Estimator:
    """One averaging function Theta: ``step(call) -> (value (C,), {state name: new value})``."""

    name: str
    doc: str
    step: Callable[[Call], tuple[np.ndarray, dict]]
    state: Callable[[int, Mapping], dict] = lambda c, opts: {}

    def __repr__(self) -> str:
        return f"Estimator({self.name})"


def use_var(call: Call, s2: np.ndarray) -> np.ndarray:
    """Record sigma_hat^2 = s2 (``call.values["sig2"]``) and return the scale D = sqrt(s2 + eps)."""
    call.values["sig2"] = s2
    return np.sqrt(s2 + call.opts["eps"])


def _window(opts, key) -> int:
    return C.check_int("offline", key, opts[key], minimum=1)


def ema(old, new, alpha):
    """alpha * old + (1 - alpha) * new: alpha weighs the OLD value."""
    return alpha * old + (1 - alpha) * new


# ---- forward: the mean
def current_mean() -> Estimator:
    """mu_hat = mu_t, the batch mean (BatchNorm)."""
    return Estimator("current_mean", current_mean.__doc__, lambda call: (call.mean, {}))


def zero_mean() -> Estimator:
    """mu_hat = 0: no centring (UN, PowerNorm; pair with ``centred=False``)."""
    return Estimator("zero_mean", zero_mean.__doc__, lambda call: (np.zeros_like(call.var), {}))


# ---- forward: the scale D = sqrt(sigma_hat^2 + eps)
def current_var() -> Estimator:
    """sigma_hat^2 = sigma_t^2, the batch statistic."""
    return Estimator("current_var", current_var.__doc__,
                     lambda call: (use_var(call, call.var), {}))


def previous_ema_var(key: str, alpha: str, init: float = 1.0) -> Estimator:
    """sigma_hat^2 = EMA_{t-1}: normalize with the running statistic BEFORE this batch enters it, then
    EMA_t = alpha EMA_{t-1} + (1 - alpha) sigma_t^2 (PowerNorm's psi_{t-1}^2; option ``alpha``)."""
    def step(call):
        old = call.state[key]
        return use_var(call, old), {key: ema(old, call.var, call.opts[alpha])}
    return Estimator(f"previous_ema_var({key})", previous_ema_var.__doc__, step,
                     lambda c, opts: {key: np.full(c, init)})


def arithmetic_window(key: str, window: str) -> Estimator:
    """sigma_hat^2 = mean of the last M batch statistics (current included), ring buffer ``key`` (M, C);
    the current statistic alone while t <= M (the window is not yet full). Option ``window`` = M."""
    def step(call):
        H = call.state[key].copy()
        H[call.t % H.shape[0]] = call.var
        s2 = call.var if call.t <= H.shape[0] else H.mean(axis=0)
        return use_var(call, s2), {key: H}
    return Estimator(f"arithmetic_window({key})", arithmetic_window.__doc__, step,
                     lambda c, opts: {key: np.zeros((_window(opts, window), c))})


def geometric_window(key: str, window: str, *, warmup: str | None = None,
                     gate: Callable[[Call, np.ndarray], bool] | None = None,
                     on_skip: Callable[[Call], np.ndarray] | None = None, one_skips: bool = True) -> Estimator:
    """sigma_hat^2 = geometric mean of the last M batch statistics (current included), per channel:
    UN's fluctuation smoothing. The current statistic while t <= M, t < T_w (option ``warmup``), or
    when the outlier ``gate(call, H)`` fires: it then raises ``events["skip"]`` (read by the gradient
    estimators), counts ``skip_counter`` and stores ``on_skip(call)`` in the current slot instead of
    the statistic (None: keep it). one_skips: a window of 1 always skips (uncounted), as the official code."""
    from ._un_official import geometric_mean

    def step(call):
        H = call.state[key].copy()
        M = H.shape[0]
        H[call.t % M] = call.var
        skip = one_skips and M <= 1
        upd = {}
        if gate is not None and gate(call, H):
            if on_skip is not None:
                H[call.t % M] = on_skip(call)
            skip = True
            upd["skip_counter"] = call.state["skip_counter"] + 1
        call.events["skip"] = skip
        early = call.t <= M or (warmup is not None and call.t < call.opts[warmup]) or skip
        s2 = call.var if early else geometric_mean(H)
        return use_var(call, s2), {key: H, **upd}

    def init(c, opts):
        return {key: np.zeros((_window(opts, window), c)), **({"skip_counter": 0} if gate is not None else {})}
    return Estimator(f"geometric_window({key})", geometric_window.__doc__, step, init)


def am_gm_gate(*, pooled: bool, warmup: str, enabled: str) -> Callable[[Call, np.ndarray], bool]:
    """UN's outlier filtration: fire when any channel has AM - GM of the window > M * theta, at t >= T_w.
    pooled=True (official code): theta = ONE Var_ddof1(sqrt(H_before)) over all M*C entries; pooled=False
    (paper): theta per channel, and never before the window is full."""
    from ._un_official import am_gm_gap

    def gate(call, H):
        old = call.state["buffer_x2"]
        M = H.shape[0]
        if not call.opts[enabled] or call.t < call.opts[warmup]:
            return False
        if pooled:
            theta = C.moments(np.sqrt(old).reshape(-1), (0,), ddof=1)[1][0]
        else:
            if M <= 1 or call.t <= M:
                return False
            theta = C.moments(np.sqrt(old), (0,), ddof=1)[1][0]
        return bool(np.any(am_gm_gap(H) > M * theta))
    return gate


def renorm() -> tuple[Estimator, Estimator]:
    """Batch Renormalization's pair (Ioffe 2017, Algorithm 1), running mu and sigma in state ``running_mean``,
    ``running_std``: sigma_B = sqrt(sigma_t^2 + eps), r = clip(sigma_B / sigma, 1/r_max, r_max),
    d = clip((mu_t - mu) / sigma, -d_max, d_max), then D = sigma_B / r and mu_hat = mu_t - d D, so that
    z = (x - mu_hat) / D = (x - mu_t) / sigma_B * r + d. r and d are raised as events (constants for the
    backward). Updates mu += rate (mu_t - mu), sigma += rate (sigma_B - sigma): ``rate`` weighs the NEW value."""
    def scale(call):
        o = call.opts
        sig_b = np.sqrt(call.var + o["eps"])
        sig, mu = call.state["running_std"], call.state["running_mean"]
        r = np.clip(sig_b / sig, 1 / o["r_max"], o["r_max"])
        d = np.clip((call.mean - mu) / sig, -o["d_max"], o["d_max"])
        call.events.update(r=r, d=d)
        a = o["momentum"]
        return sig_b / r, {"running_mean": mu + a * (call.mean - mu), "running_std": sig + a * (sig_b - sig)}

    def mean(call):
        return call.mean - call.events["d"] * call.values["scale"], {}
    init = lambda c, opts: {"running_mean": np.zeros(c), "running_std": np.ones(c)}  # noqa: E731
    return (Estimator("renorm_scale", renorm.__doc__, scale, init),
            Estimator("renorm_mean", renorm.__doc__, mean))


# ---- trackers: eval-mode statistics, updated in training but not used there
def tracker(key: str, source: str, rate: str, *, init: float, new_weight: bool,
            unbiased: bool = False) -> Estimator:
    """EMA of a batch statistic for eval mode: ``source`` is "mean", "var" or "used" (the sigma_hat^2 the
    scale estimator recorded with ``use_var``); new_weight=True: option ``rate``
    weighs the NEW value (torch's momentum), else the OLD one; unbiased: var * n / (n - 1) (torch)."""
    def step(call):
        if source == "mean":
            new = call.mean
        elif source == "var":
            new = call.var * (call.n / (call.n - 1)) if unbiased else call.var
        else:
            new = call.values["sig2"]
        m = call.opts[rate]
        old = call.state[key]
        return None, {key: (1 - m) * old + m * new if new_weight else ema(old, new, m)}
    return Estimator(f"tracker({key})", tracker.__doc__, step, lambda c, opts: {key: np.full(c, init)})


# ---- backward: gradient statistics
def current_gmean() -> Estimator:
    """psi_mu = mean_P(g): exact for mu_hat = mu_t (BatchNorm)."""
    return Estimator("current_gmean", current_gmean.__doc__, lambda call: (call.values["gmean"], {}))


def zero_gmean() -> Estimator:
    """psi_mu = 0: the mean does not depend on x (mu_hat = 0 or a running mean)."""
    return Estimator("zero_gmean", zero_gmean.__doc__, lambda call: (np.zeros_like(call.values["gz"]), {}))


def current_gz() -> Estimator:
    """psi_sigma = mean_P(g z): exact for sigma_hat^2 = sigma_t^2."""
    return Estimator("current_gz", current_gz.__doc__, lambda call: (call.values["gz"], {}))


def ema_gz(key: str, alpha: str) -> Estimator:
    """psi_sigma = EMA_t = alpha EMA_{t-1} + (1 - alpha) mean_P(g z): the updated EMA of the gradient statistic."""
    def step(call):
        new = ema(call.state[key], call.values["gz"], call.opts[alpha])
        return new, {key: new}
    return Estimator(f"ema_gz({key})", ema_gz.__doc__, step, lambda c, opts: {key: np.zeros(c)})


def window_ema_gz(key: str, buffer: str, window: str, alpha: str, *, warmup: str | None = None,
                  skip_exact: bool = True, store_old_on_skip: bool = True, ema_always: bool = True
                  ) -> Estimator:
    """UN's Theta_gsigma: m_t = mean of the last M gradient statistics (ring buffer ``buffer``, current
    included; the current one alone while t <= M or t < T_w), psi = alpha psi_{t-1} + (1 - alpha) m_t.
    On a call whose forward raised ``events["skip"]``: psi_sigma = mean_P(g z) exactly (skip_exact), the
    slot stores psi_{t-1} (store_old_on_skip, official) or the statistic (paper). ema_always=False (paper):
    psi is set to the current statistic (not an EMA) on skipped and early calls."""
    def step(call):
        q, skip = call.values["gz"], call.events.get("skip", False)
        old = call.state[key]
        H = call.state[buffer].copy()
        M = H.shape[0]
        H[call.t % M] = old if (skip and store_old_on_skip) else q
        early = call.t <= M or (warmup is not None and call.t < call.opts[warmup]) or skip
        if early and not ema_always:
            psi = q
        else:
            psi = ema(old, q if early else H.mean(axis=0), call.opts[alpha])
        return (q if (skip and skip_exact) else psi), {key: psi, buffer: H}
    return Estimator(f"window_ema_gz({key})", window_ema_gz.__doc__, step,
                     lambda c, opts: {key: np.zeros(c), buffer: np.zeros((_window(opts, window), c))})


def powernorm_gz(key: str, alpha: str) -> Estimator:
    """PowerNorm's approximate backpropagation (Shen et al. 2020, Algorithm 1): psi_sigma = nu_{t-1}, then
    nu_t = nu_{t-1} (1 - (1 - alpha) Gamma_t) + (1 - alpha) Lambda_t, Gamma_t = mean_P(z^2), Lambda_t = mean_P(g z).
    (With Gamma_t = 1 this is an EMA of Lambda_t, used one call late.)"""
    def step(call):
        old, a = call.state[key], call.opts[alpha]
        gam = call.values["zz"]
        return old, {key: old * (1 - (1 - a) * gam) + (1 - a) * call.values["gz"]}
    return Estimator(f"powernorm_gz({key})", powernorm_gz.__doc__, step, lambda c, opts: {key: np.zeros(c)})


def renorm_grads() -> tuple[Estimator, Estimator]:
    """Batch Renormalization's backward: the exact chain rule through mu_t and sigma_B with r, d held
    constant, written in the framework's terms (derivations/offline.md):
    psi_sigma = (mean_P(g z) - d mean_P(g)) / r^2,  psi_mu = mean_P(g) - d psi_sigma."""
    def gs(call):
        r, d = call.events["r"], call.events["d"]
        return (call.values["gz"] - d * call.values["gmean"]) / (r * r), {}

    def gm(call):
        return call.values["gmean"] - call.events["d"] * call.values["psi_sigma"], {}
    return (Estimator("renorm_gz", renorm_grads.__doc__, gs), Estimator("renorm_gmean", renorm_grads.__doc__, gm))


# ------------------------------------------------------------------------------- the framework
LAYOUTS = ("channels_first", "channels_last")


@dataclass(frozen=True)
class OfflineNorm:
    """An offline normalizer stated as four estimators; ``.spec()`` is its NormSpec.

    name, summary:   registry name and one-line equation.
    theta_mu, theta_sigma, theta_gmu, theta_gsigma: the four estimators.
    centred:         batch statistics about the batch mean (True) or uncentred mean squares (False).
    layout:          "channels_first": x is (N, C, *) as batch_norm; "channels_last": x is (..., C).
    options:         option name -> default; ``eps`` is always one. ``check(opts)`` validates them.
    trackers:        estimators updated every training call, not used in training (eval statistics).
    compensation:    ``fn(call) -> r`` (C,), the gradient-compensation factor applied to g; None: 1.
    eval_stats:      ``fn(state, opts) -> (mu, D)`` for eval mode (the running statistics).
    backward_positions: with padding (``forward(..., keep=)``, uncentred instances only; the forward
                     statistic is over the kept positions K, every position is normalized):
                     "statistic" (the exact chain rule): the gradient statistics are sums over all
                     positions divided by |K|, and psi is subtracted at the kept positions only;
                     "all" (UN's official code): sums divided by all P positions, psi subtracted everywhere.
    """

    name: str
    summary: str
    theta_mu: Estimator
    theta_sigma: Estimator
    theta_gmu: Estimator
    theta_gsigma: Estimator
    eval_stats: Callable[[Mapping, Mapping], tuple[np.ndarray, np.ndarray]]
    centred: bool = True
    layout: str = "channels_first"
    options: Mapping[str, Any] = field(default_factory=lambda: {"eps": 1e-5})
    check: Callable[[dict], None] | None = None
    trackers: tuple[Estimator, ...] = ()
    compensation: Callable[[Call], np.ndarray] | None = None
    backward_positions: str = "statistic"

    def __post_init__(self):
        if self.backward_positions not in ("statistic", "all"):
            raise ConfigError(f"{self.name}: backward_positions={self.backward_positions!r}; "
                              "expected 'statistic' or 'all'")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"{self.name}: layout={self.layout!r}; expected one of {LAYOUTS}")
        if "eps" not in self.options:
            raise ConfigError(f"{self.name}: options must include 'eps'")

    @property
    def pieces(self) -> tuple[Estimator, ...]:
        return (self.theta_sigma, self.theta_mu, *self.trackers, self.theta_gsigma, self.theta_gmu)

    def initial_state(self, c: int, opts: Mapping) -> dict:
        st = {}
        for p in self.pieces:
            st.update(p.state(c, opts))
        st["iters"] = 0
        return st

    def state_names(self) -> tuple[str, ...]:
        return tuple(self.initial_state(1, self._probe_opts()))

    def _probe_opts(self):
        return {k: (1 if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in self.options.items()}

    # ---- layout
    def _to_rows(self, x):
        if self.layout == "channels_first":
            C.check_ndim(self.name, x, 2, "(N, C, *)")
            moved = np.moveaxis(x, 1, -1)
            return moved.reshape(int(np.prod(moved.shape[:-1])), x.shape[1])
        C.check_ndim(self.name, x, 1, "(..., C)")
        return x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])

    def _from_rows(self, a, shape):
        if self.layout == "channels_first":
            moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
            return np.moveaxis(a.reshape(moved), -1, 1)
        return a.reshape(shape)

    # ---- state
    def _check_state(self, state, c, opts, training):
        init = self.initial_state(c, opts)
        missing = [k for k in init if k not in state]
        if state and missing and training:
            raise RefnormError(f"{self.name}: a training state must have every entry; missing "
                               f"{', '.join(map(repr, missing))} (give no state at all for the initial one)")
        st = {**init, **state}
        for k, v in init.items():
            a = np.asarray(st[k])
            if isinstance(v, int):
                if a.shape not in ((), (1,)):
                    raise ShapeError(f"{self.name}: {k!r} has shape {a.shape}; expected (1,) or ()")
                st[k] = int(a.reshape(-1)[0])
                if st[k] < 0:
                    raise RefnormError(f"{self.name}: {k}={st[k]}; expected a count >= 0")
            else:
                C.check_param(self.name, k, a, np.shape(v))
                st[k] = np.array(a, dtype=np.float64)
        return st

    def _public(self, st):
        return {k: (np.array([v], dtype=np.int64) if isinstance(v, (int, np.integer))
                    else np.array(v, dtype=np.float64))
                for k, v in st.items()}

    # ---- one call
    def check_call(self, x, weight, bias, state, training, config, keep=None):
        """The argument checks of one call (shared with the specifications, refnorm/specs/): returns
        (opts: the checked options, st: the checked state, missing entries initial, counts as ints,
        keep: the flat mask or None, n: the positions in the statistic)."""
        opts = {**self.options, **config}
        opts["eps"] = C.check_eps(self.name, opts["eps"])
        if self.check is not None:
            self.check(opts)
        if self.layout == "channels_first":
            C.check_ndim(self.name, x, 2, "(N, C, *)")
            c, positions = x.shape[1], math.prod(x.shape[:1] + x.shape[2:])
        else:
            C.check_ndim(self.name, x, 1, "(..., C)")
            c, positions = x.shape[-1], math.prod(x.shape[:-1])
        C.check_param(self.name, "weight", weight, (c,))
        C.check_param(self.name, "bias", bias, (c,))
        st = self._check_state(dict(state or {}), c, opts, training)
        if keep is not None:
            if self.centred or self.layout != "channels_last":
                raise ConfigError(f"{self.name}: padding (keep) is supported by uncentred channel-last instances only")
            keep = np.asarray(keep, dtype=bool).reshape(-1)
        n = positions if keep is None else int(np.count_nonzero(keep))
        if training and n < 2 and self.centred:
            raise ShapeError(f"{self.name}: expected more than 1 value per channel when training, got input "
                             f"of shape {x.shape}")
        return opts, st, keep, n

    def forward(self, x, weight=None, bias=None, state=None, *, training=True, keep=None, **config):
        """Returns (outputs, new_state, ctx). See the module docstring.

        ``keep``: optional boolean mask over the positions (x.shape without the channel axis, channel-last
        instances): the batch statistic is taken over the True ones only (padding); uncentred instances only.
        """
        opts, st, keep, n = self.check_call(x, weight, bias, state, training, config, keep=keep)
        x2d = self._to_rows(x)
        c = x2d.shape[1]
        if training:
            if self.centred:
                m, d = C.centered(x2d, (0,))
                mean, var = m.reshape(c), (d * d).sum(axis=0) / n
            else:
                xs = x2d if keep is None else x2d[keep]      # padded rows selected out: NaN there stays out
                mean = np.zeros(c)
                var = (xs * xs).sum(axis=0) / n if n else np.full(c, np.nan)
            t = st["iters"] + 1
            call = Call(t=t, state=st, opts=opts, n=n, mean=mean, var=var)
            new = {**st, "iters": t}
            scale, upd = self.theta_sigma.step(call)
            call.values["scale"] = scale
            new.update(upd)
            mu_hat, upd = self.theta_mu.step(call)
            call.values["mu_hat"] = mu_hat
            new.update(upd)
            for tr in self.trackers:
                new.update(tr.step(call)[1])
            # x - mu_hat: exact deviations when mu_hat = mu_t; x itself when uncentred with mu_hat = 0
            dev = d + (mean - mu_hat) if self.centred else (x2d if not np.any(mu_hat) else x2d - mu_hat)
            r = np.ones(c) if self.compensation is None else self.compensation(call)
        else:
            mu_hat, scale = self.eval_stats(st, opts)
            dev, call, new, r = x2d - mu_hat, None, st, np.ones(c)
        z = dev / scale
        y = z if weight is None else z * weight
        if bias is not None:
            y = y + bias
        outputs = {"y": self._from_rows(y, x.shape), "mean": np.array(mu_hat, dtype=np.float64),
                   "rstd": 1.0 / scale, "r": r}
        ctx = dict(shape=x.shape, z=z, scale=scale, r=r, weight=weight, has_bias=bias is not None,
                   call=call, state=new, keep=keep)
        return outputs, self._public(new), ctx

    def backward(self, dy, ctx):
        """Returns (dx, dweight or None, dbias or None, new_state or None (eval: unchanged))."""
        z, scale, r, weight, call = (ctx[k] for k in ("z", "scale", "r", "weight", "call"))
        dy2d = self._to_rows(dy)
        g = dy2d * r if weight is None else dy2d * (weight * r)
        new = None
        if call is None:                 # eval: a fixed affine map
            dx = g / scale
        else:
            keep = ctx["keep"]
            n = g.shape[0] if keep is None or self.backward_positions == "all" else call.n
            bcall = Call(t=call.t, state=ctx["state"], opts=call.opts, n=n, mean=call.mean, var=call.var,
                         values=dict(call.values), events=call.events)
            if n:
                bcall.values.update(gmean=np.sum(g, axis=0) / n, gz=np.sum(g * z, axis=0) / n,
                                    zz=np.sum(z * z, axis=0) / n)
            else:
                bcall.values.update({k: np.full(g.shape[1], np.nan) for k in ("gmean", "gz", "zz")})
            new = dict(ctx["state"])
            ps, upd = self.theta_gsigma.step(bcall)
            bcall.values["psi_sigma"] = ps
            new.update(upd)
            pm, upd = self.theta_gmu.step(bcall)
            new.update(upd)
            term = z * ps if not np.any(pm) else pm + z * ps
            if keep is not None and self.backward_positions == "statistic":
                term = np.where(keep[:, None], term, 0.0)
            dx = (g - term) / scale
            new = self._public(new)
        dw = None if weight is None else np.sum(dy2d * r * z, axis=0)
        db = np.sum(dy2d, axis=0) if ctx["has_bias"] else None
        return self._from_rows(dx, ctx["shape"]), dw, db, new

    # ---- the registry's contract
    def spec(self) -> NormSpec:
        def _forward(inputs, config, state, training):
            out, new, ctx = self.forward(inputs["x"], inputs.get("weight"), inputs.get("bias"), state,
                                         training=training, **config)
            return Forward(out, new, ctx)

        def _backward(ctx, cot):
            dx, dw, db, new = self.backward(cot["y"], ctx)
            return Backward(C.affine_grads(dx, dw, db, dw is not None, db is not None), new)

        return NormSpec(name=self.name, summary=self.summary, inputs=("x", "weight", "bias"), required=("x",),
                        outputs=("y", "mean", "rstd", "r"), options=self.options, forward=_forward,
                        backward=_backward, state=self.state_names(), integer_state=self._integer_state())

    def _integer_state(self):
        return tuple(k for k, v in self.initial_state(1, self._probe_opts()).items() if isinstance(v, int))


def check_momentum(name: str, key: str, value) -> float:
    a = C.check_real(name, key, value)
    if not 0.0 <= a <= 1.0:
        raise ConfigError(f"{name}: {key}={value!r}; expected a number in [0, 1]")
    return a
