"""Plain, loop-by-loop transcriptions of PowerNorm and Batch Renormalization, for the tests only.

Each class follows its paper's Algorithm 1 line by line, with Python floats and loops over scalars;
nothing here imports refnorm (no code shared with refnorm/norms/offline.py). Data are lists of rows:
x[p][c], p = every position of the batch (the caller flattens the layout), c = channel.

PaperPowerNorm: Shen et al., ICML 2020, Algorithm 1 ("Power Normalization, every iteration"), with eps
inside the square root as the official code (sqrt(psi^2 + eps)).
PaperBatchRenorm: Ioffe, NeurIPS 2017, Algorithm 1 and the backward formulas of section 3.
"""
from __future__ import annotations

import math


def _clip(v, lo, hi):
    return min(max(v, lo), hi)


class PaperPowerNorm:
    def __init__(self, C, *, alpha_fwd=0.9, alpha_bkw=0.9, eps=1e-5):
        self.C, self.af, self.ab, self.eps = C, alpha_fwd, alpha_bkw, eps
        self.psi2 = [1.0] * C      # psi_0^2 = 1 (MaskPowerNorm's running_phi)
        self.nu = [0.0] * C        # nu_0 = 0
        self.t = 0

    def train(self, x, dy, w, b):
        """One iteration: forward, then backward. Returns y, dx, dw, db (lists)."""
        P = len(x)
        y = [[0.0] * self.C for _ in range(P)]
        dx = [[0.0] * self.C for _ in range(P)]
        dw, db = [0.0] * self.C, [0.0] * self.C
        for c in range(self.C):
            # forward
            psiB2 = sum(x[p][c] * x[p][c] for p in range(P)) / P          # psi_B^2 = 1/B sum x_i^2
            psi_prev = math.sqrt(self.psi2[c] + self.eps)                  # psi_{t-1}
            xh = [x[p][c] / psi_prev for p in range(P)]                    # X_hat = X / psi_{t-1}
            for p in range(P):
                y[p][c] = w[c] * xh[p] + b[c]                               # Y = gamma X_hat + beta
            self.psi2[c] = self.af * self.psi2[c] + (1 - self.af) * psiB2  # psi_t^2
            # backward
            dxh = [w[c] * dy[p][c] for p in range(P)]                      # dL/dX_hat = gamma dL/dY
            xt = [dxh[p] - self.nu[c] * xh[p] for p in range(P)]           # X~' = dL/dX_hat - nu_{t-1} X_hat
            for p in range(P):
                dx[p][c] = xt[p] / psi_prev                                 # dL/dX = X~' / psi_{t-1}
            gamma_t = sum(xh[p] * xh[p] for p in range(P)) / P
            lambda_t = sum(xh[p] * dxh[p] for p in range(P)) / P
            self.nu[c] = self.nu[c] * (1 - (1 - self.ab) * gamma_t) + (1 - self.ab) * lambda_t
            dw[c] = sum(dy[p][c] * xh[p] for p in range(P))
            db[c] = sum(dy[p][c] for p in range(P))
        self.t += 1
        return y, dx, dw, db

    def infer(self, x, w, b):
        return [[w[c] * x[p][c] / math.sqrt(self.psi2[c] + self.eps) + b[c] for c in range(self.C)]
                for p in range(len(x))]

    def state(self):
        return {"running_phi": list(self.psi2), "nu": list(self.nu), "iters": [self.t]}


class PaperBatchRenorm:
    def __init__(self, C, *, momentum=0.01, r_max=3.0, d_max=5.0, eps=1e-5):
        self.C, self.alpha, self.rmax, self.dmax, self.eps = C, momentum, r_max, d_max, eps
        self.mu = [0.0] * C
        self.sigma = [1.0] * C
        self.t = 0
        self.last_r, self.last_d = [], []

    def train(self, x, dy, w, b):
        m = len(x)
        y = [[0.0] * self.C for _ in range(m)]
        dx = [[0.0] * self.C for _ in range(m)]
        dw, db = [0.0] * self.C, [0.0] * self.C
        self.last_r, self.last_d = [], []
        for c in range(self.C):
            xs = [x[i][c] for i in range(m)]
            mu_b = sum(xs) / m
            sig_b = math.sqrt(self.eps + sum((v - mu_b) ** 2 for v in xs) / m)
            r = _clip(sig_b / self.sigma[c], 1 / self.rmax, self.rmax)
            d = _clip((mu_b - self.mu[c]) / self.sigma[c], -self.dmax, self.dmax)
            self.last_r.append(r)
            self.last_d.append(d)
            xh = [(v - mu_b) / sig_b * r + d for v in xs]
            for i in range(m):
                y[i][c] = w[c] * xh[i] + b[c]
            self.mu[c] = self.mu[c] + self.alpha * (mu_b - self.mu[c])
            self.sigma[c] = self.sigma[c] + self.alpha * (sig_b - self.sigma[c])
            # backward, r and d treated as constants (section 3)
            dxh = [dy[i][c] * w[c] for i in range(m)]
            dsig_b = sum(dxh[i] * (xs[i] - mu_b) for i in range(m)) * (-r / sig_b ** 2)
            dmu_b = sum(dxh) * (-r / sig_b)
            for i in range(m):
                dx[i][c] = dxh[i] * r / sig_b + dsig_b * (xs[i] - mu_b) / (m * sig_b) + dmu_b / m
            dw[c] = sum(dy[i][c] * xh[i] for i in range(m))
            db[c] = sum(dy[i][c] for i in range(m))
        self.t += 1
        return y, dx, dw, db

    def infer(self, x, w, b):
        return [[w[c] * (x[p][c] - self.mu[c]) / self.sigma[c] + b[c] for c in range(self.C)]
                for p in range(len(x))]

    def state(self):
        return {"running_mean": list(self.mu), "running_std": list(self.sigma), "iters": [self.t]}
