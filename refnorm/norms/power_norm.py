"""PowerNorm (Shen, Yao, Gholami, Mahoney & Keutzer, ICML 2020, arXiv:2003.07845), Algorithm 1, as an
instance of UN's offline framework (offline.py).

Training call t, per channel c, statistics pooled over every position of x (..., C) (channel-last, the
(T, B, C) tokens of a Transformer); NO mean is removed (relaxed zero-mean normalization):
    psi_B^2 = mean(x^2)                                   the batch's quadratic mean
    z = x / sqrt(psi_{t-1}^2 + eps),  y = weight * z + bias  normalize with the RUNNING psi, before this batch
    psi_t^2 = alpha_fwd psi_{t-1}^2 + (1 - alpha_fwd) psi_B^2
Backward (approximate backpropagation; the forward's psi_{t-1} does not depend on x):
    g = weight * dy;  dx = (g - nu_{t-1} z) / sqrt(psi_{t-1}^2 + eps)
    nu_t = nu_{t-1} (1 - (1 - alpha_bkw) Gamma_t) + (1 - alpha_bkw) Lambda_t,  Gamma_t = mean(z^2), Lambda_t = mean(g z)
    dweight = sum(dy z), dbias = sum(dy)
!! Both momenta weigh the OLD value (alpha psi_{t-1}^2 + (1 - alpha) new), the OPPOSITE of torch BN's momentum;
defaults alpha_fwd = alpha_bkw = 0.9 (the official MaskPowerNorm). Eval: y = weight x / sqrt(running_phi + eps) + bias.
State: running_phi = psi^2 (C,), initially 1; nu (C,), initially 0; iters (training calls).
Outputs: y, mean (the mu_hat used), rstd (1 / the scale D), r (gradient compensation: always 1 here).

In framework terms: Theta_mu = 0, Theta_sigma = the previous EMA of the mean square (previous_ema_var),
Theta_gmu = 0, Theta_gsigma = nu_{t-1} (powernorm_gz). The exact gradient of this forward is g / D (no
statistic depends on x); PN subtracts nu z, an estimate of the z-term the chain rule through psi_B^2
would give (derivations/offline.md). The instance follows the paper, not the framework's EMA pieces.

Sources. The paper's Algorithm 1 (X_hat = X / psi_{t-1}; psi_t^2 updated after use; dL/dX = (dL/dX_hat -
nu_{t-1} X_hat) / psi_{t-1}; the nu update with Gamma and Lambda), from the published algorithm: the paper's
PDF could not be re-read when this module was written, so the backward was cross-checked line by line
against the official code github.com/sIncerass/powernorm (fairseq/modules/norms/mask_powernorm.py, commit
1159641f), whose buffer ema_gz is nu / (1 - alpha_bkw): its ``g - (1 - abkw) ema_gz z`` and
``ema_gz += mean((g - (1 - abkw) ema_gz z) z)`` are exactly the two lines above. Where the official code
departs from the paper, this instance follows the paper:
* the code normalizes with the BATCH statistic for t <= warmup_iters (default 10000) and updates
  running_phi twice during warm-up (a cumulative average, then the EMA); the paper has no warm-up;
* after warm-up the code divides dx by the batch sqrt(psi_B^2 + eps), not the running scale the forward used;
* the code first rescales every token by its RMS over channel groups (GroupScaling1D, a separate layer:
  compose with rms_norm without weight to reproduce it) and excludes padding from psi_B^2;
* eps: the paper divides by psi_{t-1}; here, as in the code, by sqrt(psi_{t-1}^2 + eps) (eps=0: the paper).
"""
from __future__ import annotations

import numpy as np

from . import offline as O

NAME = "power_norm"


def _check(opts):
    for k in ("alpha_fwd", "alpha_bkw"):
        opts[k] = O.check_momentum(NAME, k, opts[k])


INSTANCE = O.OfflineNorm(
    name=NAME,
    summary="PowerNorm: y = weight * x / sqrt(psi_{t-1}^2 + eps) + bias with the running quadratic mean, "
            "approximate backward dx = (g - nu z) / sqrt(psi_{t-1}^2 + eps)",
    theta_mu=O.zero_mean(), theta_sigma=O.previous_ema_var("running_phi", "alpha_fwd"),
    theta_gmu=O.zero_gmean(), theta_gsigma=O.powernorm_gz("nu", "alpha_bkw"),
    eval_stats=lambda st, o: (np.zeros_like(st["running_phi"]), np.sqrt(st["running_phi"] + o["eps"])),
    centred=False, layout="channels_last", options={"alpha_fwd": 0.9, "alpha_bkw": 0.9, "eps": 1e-5},
    check=_check,
)
SPEC = INSTANCE.spec()


def check(x, weight, bias, state, training, config) -> dict:
    """The argument checks of one call (shared with the specification, refnorm/specs/power_norm.py):
    options, shapes and the state (a training state must be complete); returns the checked options."""
    return INSTANCE.check_call(x, weight, bias, state, training, config)[0]
