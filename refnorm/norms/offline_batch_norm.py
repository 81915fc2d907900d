"""BatchNorm in training mode as the current-batch instance of UN's offline framework (offline.py).

    y = (x - mu_t) / sqrt(sigma_t^2 + eps) * weight + bias,  mu_t, sigma_t^2 = batch mean and BIASED variance

Input x is (N, C, *) as ``batch_norm``; statistics per channel over the batch and spatial axes; eps inside
the sqrt. The four estimators are the current batch: Theta_mu = mu_t, Theta_sigma = sigma_t^2,
Theta_gmu = mean(g), Theta_gsigma = mean(g z), so the framework's backward
dx = (g - mean(g) - z mean(g z)) / sqrt(sigma_t^2 + eps) is the exact gradient (derivations/offline.md).
tests/norms/test_offline.py proves it equals ``batch_norm`` (train and eval mode, outputs, gradients,
running statistics) to 1e-12 relative.

Running statistics (trackers: updated every training call, used only in eval mode) follow batch_norm's
"torch" convention: ``momentum`` m (default 0.1) weighs the NEW value, running = (1 - m) running + m batch,
running_var stores the UNBIASED batch variance var * n / (n - 1). State: running_mean (C,) (initially 0),
running_var (C,) (initially 1), iters (training calls; batch_norm's num_batches_tracked). torch's
momentum=None (cumulative average) is not modelled. Eval mode: y = (x - running_mean) / sqrt(running_var
+ eps) * weight + bias, dx = weight dy / sqrt(running_var + eps). Outputs: y, mean (the mu_hat used),
rstd = 1 / D, r (the gradient-compensation factor: always 1 here).
"""
from __future__ import annotations

import numpy as np

from . import offline as O

NAME = "offline_batch_norm"


def _check(opts):
    opts["momentum"] = O.check_momentum(NAME, "momentum", opts["momentum"])


INSTANCE = O.OfflineNorm(
    name=NAME,
    summary="BatchNorm train mode as the framework's current-batch instance: y = (x - mu_t) / sqrt(var_t + eps) "
            "* weight + bias, exact backward",
    theta_mu=O.current_mean(), theta_sigma=O.current_var(),
    theta_gmu=O.current_gmean(), theta_gsigma=O.current_gz(),
    trackers=(O.tracker("running_mean", "mean", "momentum", init=0.0, new_weight=True),
              O.tracker("running_var", "var", "momentum", init=1.0, new_weight=True, unbiased=True)),
    eval_stats=lambda st, o: (st["running_mean"], np.sqrt(st["running_var"] + o["eps"])),
    centred=True, layout="channels_first", options={"momentum": 0.1, "eps": 1e-5}, check=_check,
)
SPEC = INSTANCE.spec()


def check(x, weight, bias, state, training, config) -> dict:
    """The argument checks of one call (shared with the specification, refnorm/specs/offline_batch_norm.py):
    options, shapes and the state (a training state must be complete); returns the checked options."""
    return INSTANCE.check_call(x, weight, bias, state, training, config)[0]
