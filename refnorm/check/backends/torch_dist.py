"""torch-dist-cpu: distributed normalizers written from torch ops and torch.distributed collectives, as
users write them on CPU (a gloo group); the protocol is dist.py's.

    batch     SyncBatchNorm (train and eval, running statistics): each rank's (count, mean, M2) all-gathered
              and merged pairwise (Chan, Golub and LeVeque; torch's batch_norm_gather_stats_with_counts);
              the backward's sum_dy and sum_dy_xmu all-reduced and divided by the global count
              (torch's batch_norm_backward_reduce / batch_norm_backward_elemt)
    sequence  layer_norm and rms_norm on the rank's tokens (torch.native_layer_norm / F.rms_norm with
              autograd), the weight and bias gradients all-reduced (Megatron's sequence parallelism)
    tensor    rms_norm over a sharded hidden dimension: the sum of squares all-reduced before it
              normalizes, and the backward's sum(g * x) all-reduced

Working precision float32 (float64 for float64 cases); results are returned in it and the checker rounds
them to the case dtype (base.py's conversion rule): contract "strict". The collectives are in the methods
``merge_stats``, ``backward_means``, ``running_update``, ``reduce_param_grads``, ``hidden_sum`` and
``hidden_count``,
each one step a user writes (tests/planted/distributed.py plants a known mistake in one at a time).

``device="cuda"`` (torch-dist-cuda) uses torch's own ``nn.SyncBatchNorm`` for the batch cases, rank r on
cuda:r with an nccl group: nn.SyncBatchNorm runs only on GPUs. This machine has none, so that path is
reported unavailable here and has not been run.
"""
from __future__ import annotations

from ...norms.rms_norm import default_eps
from .base import Contract, Returned

OPS = {"batch": ("batch_norm",), "sequence": ("layer_norm", "rms_norm"), "tensor": ("rms_norm",)}


def _np(t):
    return t.detach().cpu().numpy()


class TorchDistBackend:
    distributed = True

    def __init__(self, device="cpu"):
        self.device = device
        self.name = f"torch-dist-{device}"

    # ------------------------------------------------------------------------------ protocol
    def available(self):
        try:
            import torch
            import torch.distributed as dist
        except ImportError as e:
            return f"torch is not installed ({e})"
        if not dist.is_available():
            return "torch was built without torch.distributed"
        if self.device == "cuda" and not torch.cuda.is_available():
            return ("no CUDA device: torch-dist-cuda needs one GPU per rank (nn.SyncBatchNorm runs only on GPUs); "
                    "use torch-dist-cpu here")
        if self.device == "cpu" and not dist.is_gloo_available():
            return "torch.distributed has no gloo backend"
        return None

    def supports(self, call):
        if call.op not in OPS.get(call.parallel, ()):
            return f"{call.op} under {call.parallel} parallelism is not implemented by {self.name}"
        cfg = call.config
        if cfg.get("convention", "torch") != "torch":
            return "only the torch convention of the running statistics"
        if cfg.get("weight_offset", 0.0) or cfg.get("eps_placement", "inside") != "inside":
            return "rms_norm with weight_offset or eps outside the sqrt is not implemented"
        if call.op != "batch_norm" and len(cfg.get("normalized_shape", [])) != 1:
            return "normalized_shape of one axis only"
        return None

    def contract(self, call):
        return Contract("strict", "block")

    def run(self, call, *, rank, group):
        import torch
        wd = torch.float64 if call.dtype == "float64" else torch.float32
        dev = self._dev = torch.device(f"cuda:{rank}" if self.device == "cuda" else "cpu")
        t = {k: torch.from_numpy(v.astype("float64")).to(dev, wd) for k, v in call.inputs.items()}
        dy = call.cotangents.get("y")
        dy = None if dy is None else torch.from_numpy(dy.astype("float64")).to(dev, wd)
        if call.parallel == "batch":
            if self.device == "cuda":
                return self._module_sync_bn(call, t, dy, group, dev, wd)
            return self._sync_bn(call, t, dy, group, wd)
        if call.parallel == "sequence":
            return self._sequence(call, t, dy, group)
        return self._tensor_rms(call, t, dy, group)

    # ------------------------------------------------------------ the collectives (one step each)
    def merge_stats(self, n, mean, m2, group):
        """(n, mean, M2) of this rank (per channel) -> the global ones: all-gathered, merged pairwise."""
        import torch
        import torch.distributed as dist
        mine = torch.stack([torch.full_like(mean, float(n)), mean, m2])
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, mine, group=group)
        while len(parts) > 1:
            nxt = []
            for i in range(0, len(parts), 2):
                if i + 1 == len(parts):
                    nxt.append(parts[i])
                    continue
                (na, ma, qa), (nb, mb, qb) = parts[i], parts[i + 1]
                nn = na + nb
                safe = torch.where(nn > 0, nn, torch.ones_like(nn))
                delta = mb - ma
                nxt.append(torch.stack([nn, ma + delta * nb / safe, qa + qb + delta * delta * na * nb / safe]))
            parts = nxt
        n_all, mean_all, m2_all = parts[0]
        return int(n_all[0].item()), mean_all, m2_all

    def backward_means(self, sum_dy, sum_dy_xmu, n_local, n_total, group):
        """The global mean_dy and mean_dy_xmu: the sums all-reduced, divided by the global count."""
        import torch.distributed as dist
        both = torch_stack(sum_dy, sum_dy_xmu)
        dist.all_reduce(both, group=group)
        return both[0] / n_total, both[1] / n_total

    def running_update(self, rm, rv, mean, var, n_total, x_local, momentum, nbt):
        """The running statistics after a batch: the global mean and variance, unbiased with the global count."""
        m = 1.0 / nbt if momentum is None else momentum
        return (1 - m) * rm + m * mean, (1 - m) * rv + m * var * (n_total / (n_total - 1))

    def reduce_param_grads(self, grads, group):
        """Sequence parallelism: the weight/bias gradients are partial sums over this rank's tokens."""
        import torch.distributed as dist
        for g in grads:
            dist.all_reduce(g, group=group)
        return grads

    def hidden_sum(self, t, group):
        """Tensor parallelism: a per-row sum over the rank's hidden slice -> over the whole hidden dimension."""
        import torch.distributed as dist
        dist.all_reduce(t, group=group)
        return t

    def hidden_count(self, m_local, group):
        """Tensor parallelism: the length of the whole hidden dimension (the ranks' slices summed)."""
        import torch
        import torch.distributed as dist
        m = torch.tensor([m_local], dtype=torch.int64, device=getattr(self, "_dev", "cpu"))
        dist.all_reduce(m, group=group)
        return int(m.item())

    # ---------------------------------------------------------------------------- the ops
    def _sync_bn(self, call, t, dy, group, wd):
        import torch
        x, w, b = t["x"], t.get("weight"), t.get("bias")
        C = x.shape[1]
        axes = [0] + list(range(2, x.ndim))
        bc = (1, C) + (1,) * (x.ndim - 2)
        eps = float(call.config.get("eps", 1e-5))
        st = call.state
        tracking = "running_mean" in st
        n_local = x.numel() // C if C else 0
        new_state = {}
        if call.training or not tracking:
            if n_local:
                mean_l = x.mean(dim=axes)
                m2_l = ((x - mean_l.view(bc)) ** 2).sum(dim=axes)
            else:
                mean_l = m2_l = torch.zeros(C, dtype=wd)
            n, mean, m2 = self.merge_stats(n_local, mean_l, m2_l, group)
            var = m2 / n if n else torch.full_like(mean, float("nan"))
            if call.training and tracking:
                rm = torch.from_numpy(st["running_mean"].astype("float64")).to(wd)
                rv = torch.from_numpy(st["running_var"].astype("float64")).to(wd)
                nbt = int(st["num_batches_tracked"]) + 1
                if n:
                    rm, rv = self.running_update(rm, rv, mean, var, n, x, call.config.get("momentum", 0.1), nbt)
                new_state = {"running_mean": _np(rm), "running_var": _np(rv),
                             "num_batches_tracked": __import__("numpy").asarray(nbt, dtype="int64")}
            used = True
        else:
            mean = torch.from_numpy(st["running_mean"].astype("float64")).to(wd)
            var = torch.from_numpy(st["running_var"].astype("float64")).to(wd)
            n, used = n_local, False
        if tracking and not new_state:
            new_state = {k: st[k].copy() for k in ("running_mean", "running_var", "num_batches_tracked")}
        rstd = torch.rsqrt(var + eps)
        xhat = (x - mean.view(bc)) * rstd.view(bc)
        y = xhat if w is None else xhat * w.view(bc)
        y = y if b is None else y + b.view(bc)
        out = Returned({"y": _np(y), "mean": _np(mean), "rstd": _np(rstd)}, {}, new_state)
        if dy is None:
            return out
        wv = torch.ones(C, dtype=wd) if w is None else w
        sum_dy = dy.sum(dim=axes)
        sum_dy_xmu = (dy * (x - mean.view(bc))).sum(dim=axes)
        if used:
            mean_dy, mean_dy_xmu = self.backward_means(sum_dy.clone(), sum_dy_xmu.clone(), n_local, n, group)
            dx = (wv * rstd).view(bc) * (dy - mean_dy.view(bc) - xhat * (rstd * mean_dy_xmu).view(bc))
        else:
            dx = dy * (wv * rstd).view(bc)
        grads = {"x": _np(dx)}
        params = []
        if w is not None:
            params.append(("weight", sum_dy_xmu * rstd))
        if b is not None:
            params.append(("bias", sum_dy))
        if params:
            import torch.distributed as dist
            for k, g in params:
                dist.all_reduce(g, group=group)          # data parallelism: the parameters' gradients
                grads[k] = _np(g)
        return Returned(out.outputs, grads, out.state)

    def _sequence(self, call, t, dy, group):
        import torch
        x = t["x"].requires_grad_(dy is not None)
        w, b = t.get("weight"), t.get("bias")
        params = [p.requires_grad_(dy is not None) for p in (w, b) if p is not None]
        ns = list(call.config["normalized_shape"])
        eps = call.config.get("eps", 1e-5)
        if call.op == "layer_norm":
            y, mean, rstd = torch.native_layer_norm(x, ns, w, b, eps)
            outputs = {"y": y, "mean": mean, "rstd": rstd}
        else:
            eps = default_eps(call.dtype) if eps is None else eps          # torch's rule, refnorm's
            y = torch.nn.functional.rms_norm(x, ns, w, eps)
            rstd = torch.rsqrt((x.detach() ** 2).mean(dim=-1, keepdim=True) + eps)
            outputs = {"y": y, "rstd": rstd}
        outputs = {k: _np(v) for k, v in outputs.items()}
        if dy is None:
            return Returned(outputs)
        y.backward(dy)
        grads = {"x": _np(x.grad)}
        names = [k for k in ("weight", "bias") if k in t]
        pg = self.reduce_param_grads([p.grad if p.grad is not None else torch.zeros_like(p) for p in params], group)
        grads.update({k: _np(g) for k, g in zip(names, pg)})
        return Returned(outputs, grads)

    def _tensor_rms(self, call, t, dy, group):
        import torch
        x, w = t["x"], t.get("weight")
        eps = call.config.get("eps")
        eps = default_eps(call.dtype) if eps is None else float(eps)   # torch's rule, refnorm's
        m_local = x.shape[-1]
        m_total = self.hidden_count(m_local, group)
        rstd = torch.rsqrt(self.hidden_sum((x * x).sum(dim=-1, keepdim=True), group) / m_total + eps)
        y = x * rstd if w is None else x * rstd * w
        outputs = {"y": _np(y), "rstd": _np(rstd)}
        if dy is None:
            return Returned(outputs)
        g = dy if w is None else dy * w
        dot = self.hidden_sum((g * x).sum(dim=-1, keepdim=True), group)
        dx = rstd * (g - x * rstd * rstd * dot / m_total)
        grads = {"x": _np(dx)}
        if w is not None:
            grads["weight"] = _np((dy * x * rstd).sum(dim=tuple(range(x.ndim - 1))))
        return Returned(outputs, grads)

    # -------------------------------------------------------------- torch's nn.SyncBatchNorm (GPUs)
    def _module_sync_bn(self, call, t, dy, group, dev, wd):
        """torch.nn.SyncBatchNorm on cuda:rank (never run on this CPU-only machine)."""
        import numpy as np
        import torch
        x = t["x"].requires_grad_(dy is not None)
        C = x.shape[1]
        st = call.state
        tracking = "running_mean" in st
        mod = torch.nn.SyncBatchNorm(C, eps=float(call.config.get("eps", 1e-5)),
                                     momentum=call.config.get("momentum", 0.1), affine="weight" in t,
                                     track_running_stats=tracking, process_group=group).to(dev, wd)
        with torch.no_grad():
            if "weight" in t:
                mod.weight.copy_(t["weight"])
                mod.bias.copy_(t.get("bias", torch.zeros_like(t["weight"])))
            if tracking:
                mod.running_mean.copy_(torch.from_numpy(st["running_mean"].astype("float64")))
                mod.running_var.copy_(torch.from_numpy(st["running_var"].astype("float64")))
                mod.num_batches_tracked.fill_(int(st["num_batches_tracked"]))
        mod.train(call.training)
        y = mod(x)
        state = {} if not tracking else {"running_mean": _np(mod.running_mean), "running_var": _np(mod.running_var),
                                         "num_batches_tracked": np.asarray(_np(mod.num_batches_tracked), dtype=np.int64)}
        if dy is None:
            return Returned({"y": _np(y)}, {}, state)
        y.backward(dy)
        grads = {"x": _np(x.grad)}
        if "weight" in t:
            grads["weight"] = _np(mod.weight.grad)
            if "bias" in t:
                grads["bias"] = _np(mod.bias.grad)
        return Returned({"y": _np(y)}, grads, state)


def torch_stack(*ts):
    import torch
    return torch.stack(list(ts))
