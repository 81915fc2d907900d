"""A deliberately plain, loop-by-loop transcription of Unified Normalization, for the tests only.

OfficialUN follows docs/unified_norm_semantics.md sections 2-4 step by step (numbered as there);
PaperUN follows the paper's equations (as the seed summary states them) with the choices documented
in refnorm/norms/unified_norm.py. Nothing here imports refnorm: every statistic is a Python loop
over scalars, with the arithmetic given by ``ops`` -- FLOAT (Python floats, the 1e-12 multi-step
comparison) or MP (mpmath at the caller's precision, the oracle). Arrays are nested lists
x[b][n][c]; pad[b][n] is True at padding.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np


class _Ops:
    def __init__(self, num, sqrt, exp, log):
        self.num, self.sqrt, self.exp, self.log = num, sqrt, exp, log


FLOAT = _Ops(float, math.sqrt, math.exp, lambda v: -math.inf if v == 0 else math.log(v))
MP = _Ops(lambda v: mpmath.mpf(float(v)), mpmath.sqrt, mpmath.exp, mpmath.log)


def _nested(a, ops):
    a = np.asarray(a, dtype=np.float64)
    return [_nested(r, ops) for r in a] if a.ndim else ops.num(a)


def _windows(window):
    return (window, window) if isinstance(window, int) else (window[0], window[1])


class _Base:
    def __init__(self, C, *, window=4, warmup=4000, outlier_filtration=False, eps=1e-5, momentum=0.9,
                 ops=FLOAT, state=None):
        self.C, self.ops = C, ops
        self.Mf, self.Mb = _windows(window)
        self.Tw, self.filt = warmup, outlier_filtration
        self.eps, self.alpha = ops.num(eps), ops.num(momentum)
        zero, one = ops.num(0.0), ops.num(1.0)
        # section 2: initialisation
        self.v = [one] * C
        self.psi = [zero] * C
        self.Hx = [[zero] * C for _ in range(self.Mf)]
        self.Hg = [[zero] * C for _ in range(self.Mb)]
        self.t = 0
        self.skip_counter = 0
        if state is not None:
            self.v = _nested(state["running_var"], ops)
            self.psi = _nested(state["ema_gz"], ops)
            self.Hx = _nested(state["buffer_x2"], ops)
            self.Hg = _nested(state["buffer_gz"], ops)
            self.t = int(np.asarray(state["iters"]).reshape(-1)[0])
            self.skip_counter = int(np.asarray(state["skip_counter"]).reshape(-1)[0])

    def state(self):
        f = np.vectorize(float, otypes=[np.float64])
        return {"running_var": f(np.array(self.v, dtype=object)), "ema_gz": f(np.array(self.psi, dtype=object)),
                "buffer_x2": f(np.array(self.Hx, dtype=object)).reshape(self.Mf, self.C),
                "buffer_gz": f(np.array(self.Hg, dtype=object)).reshape(self.Mb, self.C),
                "iters": np.array([self.t]), "skip_counter": np.array([self.skip_counter])}

    def _positions(self, x, pad):
        B, N = len(x), len(x[0]) if x else 0
        P = [(b, n) for b in range(B) for n in range(N)]
        K = [(b, n) for (b, n) in P if not (pad is not None and pad[b][n])]
        return B, N, P, K

    def _mean_square(self, x, K, c):
        tot = self.ops.num(0.0)
        for (b, n) in K:
            tot += x[b][n][c] * x[b][n][c]
        return tot / len(K) if K else self.ops.num(math.nan)

    def _am_gm(self, H, c):
        M = len(H)
        am, lg = self.ops.num(0.0), self.ops.num(0.0)
        for i in range(M):
            am += H[i][c]
            lg += self.ops.log(H[i][c])
        return am / M, self.ops.exp(lg / M)

    def _var(self, vals, ddof):
        n = len(vals)
        if n - ddof <= 0:
            return self.ops.num(math.nan)
        mu = self.ops.num(0.0)
        for u in vals:
            mu += u
        mu = mu / n
        ss = self.ops.num(0.0)
        for u in vals:
            ss += (u - mu) * (u - mu)
        return ss / (n - ddof)

    def eval(self, x, w=None, b=None):
        """Section 4: y = w x / sqrt(v + eps) + b; nothing changes."""
        ops = self.ops
        x = _nested(x, ops)
        out = []
        for xb in x:
            out.append([[(ops.num(1.0) if w is None else ops.num(w[c])) * xb[n][c] / ops.sqrt(self.v[c] + self.eps)
                         + (ops.num(0.0) if b is None else ops.num(b[c])) for c in range(self.C)]
                        for n in range(len(xb))])
        return out

    def _affine_out(self, x, z, w, b, B, N):
        ops = self.ops
        return [[[(ops.num(1.0) if w is None else ops.num(w[c])) * z[bb][n][c]
                  + (ops.num(0.0) if b is None else ops.num(b[c])) for c in range(self.C)]
                 for n in range(N)] for bb in range(B)]


class OfficialUN(_Base):
    """docs/unified_norm_semantics.md section 3, the training-mode algorithm of the official code."""

    def train(self, x, pad=None, w=None, b=None, dy=None):
        ops, C, Mf, Mb, eps, alpha = self.ops, self.C, self.Mf, self.Mb, self.eps, self.alpha
        x = _nested(x, ops)
        B, N, P, K = self._positions(x, pad)
        # forward 1
        self.t += 1
        t = self.t
        # forward 2
        s = [self._mean_square(x, K, c) for c in range(C)]
        # forward 3
        skip = Mf <= 1
        # forward 4: one scalar over every window entry and channel, before s goes in
        roots = [ops.sqrt(self.Hx[i][c]) for i in range(Mf) for c in range(C)]
        theta = self._var(roots, 1)
        # forward 5
        k = t % Mf
        for c in range(C):
            self.Hx[k][c] = s[c]
        # forward 6
        if self.filt and t >= self.Tw:
            fire = False
            for c in range(C):
                A, G = self._am_gm(self.Hx, c)
                if A - G > Mf * theta:
                    fire = True
            if fire:
                for c in range(C):
                    self.Hx[k][c] = self.v[c]
                skip = True
                self.skip_counter += 1
        # forward 7
        sig2 = []
        for c in range(C):
            if t <= Mf or t < self.Tw or skip:
                sig2.append(s[c])
            else:
                sig2.append(self._am_gm(self.Hx, c)[1])
        # forward 8
        r = []
        for c in range(C):
            if t <= max(1000, self.Tw) or skip:
                r.append(ops.num(1.0))
            else:
                rc = ops.sqrt(sig2[c] + eps) / ops.sqrt(self.v[c] + eps)
                r.append(min(max(rc, ops.num(0.2)), ops.num(5.0)) if rc == rc else rc)
        # forward 9
        z = [[[x[bb][n][c] / ops.sqrt(sig2[c] + eps) for c in range(C)] for n in range(N)] for bb in range(B)]
        out = {"y": self._affine_out(x, z, w, b, B, N), "var": sig2, "r": r}
        # forward 10
        for c in range(C):
            self.v[c] = alpha * self.v[c] + (1 - alpha) * sig2[c]
        if dy is None:
            return out
        dy = _nested(dy, ops)
        # backward 1
        g = [[[dy[bb][n][c] * (ops.num(1.0) if w is None else ops.num(w[c])) * r[c] for c in range(C)]
              for n in range(N)] for bb in range(B)]
        # backward 2: over ALL positions
        q = []
        for c in range(C):
            tot = ops.num(0.0)
            for (bb, n) in P:
                tot += g[bb][n][c] * z[bb][n][c]
            q.append(tot / len(P) if P else ops.num(math.nan))
        # backward 3
        j = t % Mb
        for c in range(C):
            self.Hg[j][c] = self.psi[c] if skip else q[c]
        # backward 4 and 5
        for c in range(C):
            if t <= Mb or t < self.Tw or skip:
                m = q[c]
            else:
                m = ops.num(0.0)
                for i in range(Mb):
                    m += self.Hg[i][c]
                m = m / Mb
            self.psi[c] = alpha * self.psi[c] + (1 - alpha) * m
        # backward 6
        pc = [q[c] if skip else self.psi[c] for c in range(C)]
        out["dx"] = [[[(g[bb][n][c] - pc[c] * z[bb][n][c]) / ops.sqrt(sig2[c] + eps) for c in range(C)]
                      for n in range(N)] for bb in range(B)]
        # backward 7
        out["dweight"], out["dbias"] = [], []
        for c in range(C):
            dg, db = ops.num(0.0), ops.num(0.0)
            for (bb, n) in P:
                dg += dy[bb][n][c] * r[c] * z[bb][n][c]
                db += dy[bb][n][c]
            out["dweight"].append(dg)
            out["dbias"].append(db)
        return out


class PaperUN(_Base):
    """The seed's equations, with the choices refnorm documents for preset="paper"."""

    def train(self, x, pad=None, w=None, b=None, dy=None):
        ops, C, Mf, Mb, eps, alpha = self.ops, self.C, self.Mf, self.Mb, self.eps, self.alpha
        x = _nested(x, ops)
        B, N, P, K = self._positions(x, pad)
        self.t += 1
        t = self.t
        s = [self._mean_square(x, K, c) for c in range(C)]         # sigma_t^2 with mu_hat = 0
        prev = [[self.Hx[i][c] for i in range(Mf)] for c in range(C)]  # Omega_{t-1}
        self.Hx[t % Mf] = list(s)                                    # Omega_t
        early = t < self.Tw or t <= Mf
        skip = False
        if self.filt and Mf > 1 and not early:
            for c in range(C):
                A, G = self._am_gm(self.Hx, c)
                if A - G > Mf * self._var([ops.sqrt(h) for h in prev[c]], 1):
                    skip = True
            if skip:
                self.skip_counter += 1
        sig2 = [s[c] if (early or skip) else self._am_gm(self.Hx, c)[1] for c in range(C)]
        z = [[[x[bb][n][c] / ops.sqrt(sig2[c] + eps) for c in range(C)] for n in range(N)] for bb in range(B)]
        out = {"y": self._affine_out(x, z, w, b, B, N), "var": sig2, "r": [ops.num(1.0)] * C}
        for c in range(C):
            self.v[c] = alpha * self.v[c] + (1 - alpha) * sig2[c]
        if dy is None:
            return out
        dy = _nested(dy, ops)
        dz = [[[dy[bb][n][c] * (ops.num(1.0) if w is None else ops.num(w[c])) for c in range(C)]
               for n in range(N)] for bb in range(B)]
        gsig = []
        for c in range(C):
            tot = ops.num(0.0)
            for (bb, n) in P:
                tot += dz[bb][n][c] * z[bb][n][c]
            gsig.append(tot / len(K) if K else ops.num(math.nan))
        self.Hg[t % Mb] = list(gsig)
        for c in range(C):
            if skip or t < self.Tw or t <= Mb:
                self.psi[c] = gsig[c]
            else:
                m = ops.num(0.0)
                for i in range(Mb):
                    m += self.Hg[i][c]
                self.psi[c] = alpha * self.psi[c] + (1 - alpha) * (m / Mb)
        kept = [[not (pad is not None and pad[bb][n]) for n in range(N)] for bb in range(B)]
        out["dx"] = [[[(dz[bb][n][c] - (self.psi[c] * z[bb][n][c] if kept[bb][n] else 0))
                       / ops.sqrt(sig2[c] + eps) for c in range(C)] for n in range(N)] for bb in range(B)]
        out["dweight"] = [sum((dy[bb][n][c] * z[bb][n][c] for (bb, n) in P), ops.num(0.0)) for c in range(C)]
        out["dbias"] = [sum((dy[bb][n][c] for (bb, n) in P), ops.num(0.0)) for c in range(C)]
        return out
