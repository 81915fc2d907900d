"""A second planted kernel (issue 21), written on torch ops independently of tests/planted/emulated.py:
float32 autograd (float64 for float64 cases), one rounding to the case dtype at the end. ``BUGS`` are
mistakes planted in it, each with the mechanism (refnorm/pitfalls/mechanisms.py) it is an instance of;
most are no catalogue row (the five classic LayerNorm mistakes, and others), and some have no variant
at all (mechanism None: the diagnosis must name nothing, or at least nothing wrong).

Where a bug is in a hand-written backward (``bwd`` bugs), the correct autograd gradient is patched with
the bug's formula; forward bugs are differentiated by autograd, as a user's torch module would be.
Used by tests/planted/folds.py (the measurement) and tests/test_planted.py (a small fixed set).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check import Contract, Returned

OPS = ("layer_norm", "rms_norm", "group_norm", "weight_standardization", "weight_norm")

# bug -> (op, mechanism it is an instance of, or None: no variant models it, what it does)
BUGS = {
    "ln_ddof1": ("layer_norm", "bessel", "variance with ddof=1 (torch.var's default)"),
    "ln_eps_outside": ("layer_norm", "eps", "eps outside the sqrt: (x - mean)/(std + eps)"),
    "ln_no_mean_g": ("layer_norm", "backward", "hand-written dx missing its -mean(g) term"),
    "ln_dw_sum_dy": ("layer_norm", "backward", "hand-written dweight = sum(dy)"),
    "ln_one_pass": ("layer_norm", "one_pass", "one-pass variance E[x^2] - E[x]^2 in float32, clamped"),
    "ln_stats_in_d": ("layer_norm", "precision", "mean and variance computed in the input dtype"),
    "ln_eps_twice": ("layer_norm", "eps", "eps added twice: var + 2 eps (an eps value no variant has)"),
    "rms_eps_outside": ("rms_norm", "eps", "eps outside the sqrt"),
    "rms_sq_in_d": ("rms_norm", "precision", "x*x computed in the input dtype before the float32 mean"),
    "rms_centered": ("rms_norm", "semantics", "the mean subtracted (layer_norm without bias)"),
    "rms_dw_rows_half": ("rms_norm", "reduction", "dweight summed over the first half of the rows only (no catalogue variant: named by the arithmetic search, issue 33)"),
    "gn_ddof1": ("group_norm", "bessel", "variance with ddof=1"),
    "gn_eps_outside": ("group_norm", "eps", "eps outside the sqrt"),
    "gn_one_pass": ("group_norm", "one_pass", "one-pass variance in float32, clamped"),
    "gn_no_mean_g": ("group_norm", "backward", "hand-written dx missing its -mean(g) term"),
    "ws_authors": ("weight_standardization", "bessel", "the authors' (x - mean)/(std_unbiased + eps)"),
    "ws_ddof1": ("weight_standardization", "bessel", "variance with ddof=1"),
    "ws_eps_outside": ("weight_standardization", "eps", "eps outside the sqrt"),
    "ws_one_pass": ("weight_standardization", "one_pass", "one-pass variance in float32, clamped"),
    "wn_norm_in_d": ("weight_norm", "precision", "the norm rounded to the input dtype"),
    "wn_no_projection": ("weight_norm", "backward", "hand-written dv = g/||v|| * dw (no projection)"),
}

_NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


class TorchKernel:
    """The kernel with at most one bug (``BUGS`` key, or None: the correct kernel)."""
    name = "torch-planted"

    def __init__(self, bug=None):
        import torch
        self.torch, self.bug = torch, bug

    def available(self):
        return None

    def supports(self, call):
        if call.op not in OPS:
            return f"torch-planted: {call.op} not implemented"
        if call.op == "rms_norm" and call.config.get("eps_placement", "inside") != "inside":
            return "torch-planted: eps_placement outside not implemented"
        if call.op == "weight_norm" and call.config.get("dim", 0) is None:
            return "torch-planted: dim=None not implemented"
        return None

    def contract(self, call):
        return Contract("strict", "block")

    # ------------------------------------------------------------------ helpers
    def _t(self, a, acc):
        return self.torch.tensor(np.asarray(a, dtype=np.float64), dtype=acc, requires_grad=True)

    def _d(self, t, acc, dtype):
        """Round a working-precision tensor to the case dtype (as torch would, then back to acc)."""
        T = self.torch
        low = {"float16": T.float16, "bfloat16": T.bfloat16}.get(dtype)
        return t if low is None else t.to(low).to(acc)

    def _stats(self, x, axes, acc, dtype, eps):
        b = self.bug or ""
        if b.endswith("one_pass"):
            mean = x.mean(dim=axes, keepdim=True)
            var = ((x * x).mean(dim=axes, keepdim=True) - mean * mean).clamp_min(0)
        elif b == "ln_stats_in_d":
            xd = self._d(x, acc, dtype)
            low = {"float16": self.torch.float16, "bfloat16": self.torch.bfloat16}.get(dtype, acc)
            xl = xd.to(low)
            mean = xl.mean(dim=axes, keepdim=True)
            var = ((xl - mean) ** 2).mean(dim=axes, keepdim=True)
            mean, var = mean.to(acc), var.to(acc)
        else:
            mean = x.mean(dim=axes, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=axes, keepdim=True)
            if b.endswith("ddof1") or b == "ws_authors":
                n = int(np.prod([x.shape[a] for a in axes]))
                var = var * (n / (n - 1))
        if b.endswith("eps_outside") or b == "ws_authors":
            rstd = 1 / (self.torch.sqrt(var) + eps)
        elif b == "ln_eps_twice":
            rstd = 1 / self.torch.sqrt(var + 2 * eps)
        else:
            rstd = 1 / self.torch.sqrt(var + eps)
        return mean, rstd

    def run(self, call):
        T = self.torch
        acc = T.float64 if call.dtype == "float64" else T.float32
        out_np = _NP[call.dtype]
        ins = {k: self._t(v, acc) for k, v in call.inputs.items()}
        y, extra = getattr(self, "_" + call.op)(call, ins, acc)
        oname = "w" if call.op == "weight_norm" else "y"
        grads = {}
        if call.cotangents:
            dy = T.tensor(np.asarray(call.cotangents[oname], dtype=np.float64), dtype=acc)
            got = T.autograd.grad(y, list(ins.values()), dy, allow_unused=True)
            grads = {k: (T.zeros_like(ins[k]) if g is None else g).detach() for k, g in zip(ins, got)}
            if extra is not None:
                grads = extra(grads, dy)
        yd = self._d(y.detach(), acc, call.dtype).double().numpy().astype(out_np)
        return Returned({oname: yd}, {k: self._d(g, acc, call.dtype).double().numpy().astype(out_np)
                                      for k, g in grads.items()}, {})

    def _centred(self, call, ins, acc, axes, x, pshape=None):
        """y = (x - mean) * rstd (* w + b); ``extra`` patches a hand-written backward bug."""
        eps = float(call.config.get("eps", 1e-5))
        mean, rstd = self._stats(x, axes, acc, call.dtype, eps)
        xhat = (x - mean) * rstd
        w, b = ins.get("weight"), ins.get("bias")
        wv = None if w is None else (w if pshape is None else w.reshape(pshape))
        if wv is not None and call.op == "layer_norm":      # zero-centred gamma: the weight is offset + w
            wv = wv + float(call.config.get("weight_offset", 0.0))
        bv = None if b is None else (b if pshape is None else b.reshape(pshape))
        y = xhat if wv is None else xhat * wv
        y = y if bv is None else y + bv
        bug = self.bug or ""

        def extra(grads, dy):
            xh, r = xhat.detach(), rstd.detach()
            g = dy if wv is None else dy * wv.detach()
            if bug.endswith("no_mean_g"):
                grads["x"] = r * (g - xh * (g * xh).mean(dim=axes, keepdim=True))
            if bug == "ln_dw_sum_dy" and w is not None:
                grads["weight"] = dy.reshape(-1, *w.shape).sum(dim=0)
            return grads
        return y, (extra if bug.endswith(("no_mean_g", "dw_sum_dy")) else None)

    def _layer_norm(self, call, ins, acc):
        ns = call.config["normalized_shape"]
        k = 1 if np.ndim(ns) == 0 else len(ns)
        x = ins["x"]
        return self._centred(call, ins, acc, tuple(range(x.ndim - k, x.ndim)), x)

    def _group_norm(self, call, ins, acc):
        x = ins["x"]
        G = int(call.config["num_groups"])
        N, C = x.shape[:2]
        xg = x.reshape(N, G, -1)
        y, extra = self._centred(call, {}, acc, (2,), xg)
        y = y.reshape(x.shape)
        shape = (1, C) + (1,) * (x.ndim - 2)
        if ins.get("weight") is not None:
            y = y * ins["weight"].reshape(shape)
        if ins.get("bias") is not None:
            y = y + ins["bias"].reshape(shape)
        if extra is None:
            return y, None
        T = self.torch

        def fix(grads, dy):                 # the hand-written dx, in group rows
            wv = 1.0 if ins.get("weight") is None else ins["weight"].detach().reshape(shape)
            g = (dy * wv).reshape(N, G, -1)
            xx = xg.detach()
            mean = xx.mean(dim=2, keepdim=True)
            var = ((xx - mean) ** 2).mean(dim=2, keepdim=True)
            r = 1 / T.sqrt(var + float(call.config.get("eps", 1e-5)))
            xh = (xx - mean) * r
            grads["x"] = (r * (g - xh * (g * xh).mean(dim=2, keepdim=True))).reshape(x.shape)
            return grads
        return y, fix

    def _weight_standardization(self, call, ins, acc):
        x = ins["x"]
        return self._centred(call, {}, acc, tuple(range(1, x.ndim)), x)

    def _rms_norm(self, call, ins, acc):
        T = self.torch
        ns = call.config["normalized_shape"]
        k = 1 if np.ndim(ns) == 0 else len(ns)
        x = ins["x"]
        axes = tuple(range(x.ndim - k, x.ndim))
        eps = call.config.get("eps")
        eps = float(np.finfo(np.float64 if call.dtype == "float64" else np.float32).eps) if eps is None else float(eps)
        if self.bug == "rms_sq_in_d":
            ms = self._d(x * x, acc, call.dtype).mean(dim=axes, keepdim=True)
        elif self.bug == "rms_centered":
            ms = ((x - x.mean(dim=axes, keepdim=True)) ** 2).mean(dim=axes, keepdim=True)
        else:
            ms = (x * x).mean(dim=axes, keepdim=True)
        xc = x - x.mean(dim=axes, keepdim=True) if self.bug == "rms_centered" else x
        rstd = 1 / (T.sqrt(ms) + eps) if self.bug == "rms_eps_outside" else 1 / T.sqrt(ms + eps)
        y = xc * rstd
        w = ins.get("weight")
        if w is not None:
            y = y * (w + float(call.config.get("weight_offset", 0.0)))
        if self.bug != "rms_dw_rows_half" or w is None:
            return y, None
        xhat = (xc * rstd).detach()

        def half(grads, dy):
            m = dy.numel() // w.numel()
            keep = (m + 1) // 2
            grads["weight"] = (dy * xhat).reshape(m, -1)[:keep].sum(dim=0).reshape(w.shape)
            return grads
        return y, half

    def _weight_norm(self, call, ins, acc):
        T = self.torch
        v, g = ins["v"], ins["g"]
        dim = int(call.config.get("dim", 0)) % v.ndim
        axes = tuple(a for a in range(v.ndim) if a != dim)
        norm = T.sqrt((v * v).sum(dim=axes, keepdim=True))
        if self.bug == "wn_norm_in_d":
            norm = self._d(norm, acc, call.dtype)
        keep = tuple(s if a == dim else 1 for a, s in enumerate(v.shape))
        gv = g.reshape(keep)
        w = gv * v / norm
        if self.bug != "wn_no_projection":
            return w, None

        def noproj(grads, dw):
            grads["v"] = gv.detach() / norm.detach() * dw
            return grads
        return w, noproj
