"""Batch Renormalization (Ioffe, NeurIPS 2017, arXiv:1702.03275), Algorithm 1, as an instance of UN's
offline framework (offline.py).

Training call, per channel c over the batch and spatial axes of x (N, C, *) (as batch_norm):
    mu_B = mean(x),  sigma_B = sqrt(mean((x - mu_B)^2) + eps)      BIASED variance, eps inside the sqrt
    r = clip(sigma_B / sigma, 1/r_max, r_max),  d = clip((mu_B - mu) / sigma, -d_max, d_max)   (stop_gradient)
    x_hat = (x - mu_B) / sigma_B * r + d,  y = weight * x_hat + bias
    mu <- mu + momentum (mu_B - mu),  sigma <- sigma + momentum (sigma_B - sigma)
!! ``momentum`` (the paper's update rate alpha) weighs the NEW value, as torch BN's momentum; default 0.01
(Keras' renorm_momentum = 0.99). The running sigma is a moving average of sigma_B itself (a std that
includes eps), as in the paper, not of the variance. r_max (default 3) and d_max (default 5) are the
paper's final values; the paper ramps them up from 1 and 0 during training: the ramp is left to the
caller (pass the current values each call). r_max = 1, d_max = 0 is BatchNorm in training.
Backward: r and d are constants (the paper's section 3 formulas), g = weight * dy:
    dx = r / sigma_B * (g - mean(g) - x_tilde mean(g x_tilde)),  x_tilde = (x - mu_B) / sigma_B
    dweight = sum(dy x_hat), dbias = sum(dy)
Eval: y = weight * (x - mu) / sigma + bias (no eps: sigma already holds it).
State: running_mean mu (C,) (initially 0), running_std sigma (C,) (initially 1), iters (training calls).
Outputs: y, mean (the mu_hat used), rstd (1 / the scale D), r (gradient compensation: always 1 here).

In framework terms (derivations/offline.md): D = sigma_B / r and mu_hat = mu_B - d D, so x_hat = (x -
mu_hat) / D; psi_sigma = (mean(g x_hat) - d mean(g)) / r^2 and psi_mu = mean(g) - d psi_sigma (the exact
chain rule through mu_B, sigma_B with r, d frozen). Source: the paper's Algorithm 1 and its backward
equations; no code was used.
"""
from __future__ import annotations

from . import offline as O

NAME = "batch_renorm"


def _check(opts):
    opts["momentum"] = O.check_momentum(NAME, "momentum", opts["momentum"])
    opts["r_max"] = O.C.check_real(NAME, "r_max", opts["r_max"])
    opts["d_max"] = O.C.check_real(NAME, "d_max", opts["d_max"])
    if opts["r_max"] < 1:
        raise O.ConfigError(f"{NAME}: r_max={opts['r_max']!r}; expected a number >= 1")
    if opts["d_max"] < 0:
        raise O.ConfigError(f"{NAME}: d_max={opts['d_max']!r}; expected a number >= 0")


_SCALE, _MEAN = O.renorm()
_GZ, _GMEAN = O.renorm_grads()
INSTANCE = O.OfflineNorm(
    name=NAME,
    summary="Batch Renormalization: y = weight * ((x - mu_B) / sigma_B * r + d) + bias, r and d clipped "
            "corrections towards the running mu, sigma; backward with r, d constant",
    theta_mu=_MEAN, theta_sigma=_SCALE, theta_gmu=_GMEAN, theta_gsigma=_GZ,
    eval_stats=lambda st, o: (st["running_mean"], st["running_std"]),
    centred=True, layout="channels_first",
    options={"momentum": 0.01, "r_max": 3.0, "d_max": 5.0, "eps": 1e-5}, check=_check,
)
SPEC = INSTANCE.spec()


def check(x, weight, bias, state, training, config) -> dict:
    """The argument checks of one call (shared with the specification, refnorm/specs/batch_renorm.py):
    options, shapes and the state (a training state must be complete); returns the checked options."""
    return INSTANCE.check_call(x, weight, bias, state, training, config)[0]
