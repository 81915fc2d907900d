"""Planted distributed pitfalls: torch-dist-cpu (refnorm/check/backends/torch_dist.py) with one known
mistake in one of its collective steps, and backends with faults (a rank that raises, hangs, dies or
returns a wrong shape). ``run(backend)`` judges one on every distributed case with 4 ranks;
``python tests/planted/distributed.py`` prints the table of docs/pitfall_detection.md, section 9.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

if __package__ in (None, ""):                       # run as a script: make ``planted`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from refnorm.check.backends.base import Returned  # noqa: E402
from refnorm.check.backends.torch_dist import TorchDistBackend  # noqa: E402


class _Planted(TorchDistBackend):
    def __init__(self):
        super().__init__("cpu")
        self.name = f"torch-dist-cpu+{type(self).__name__}"


class E08(_Planted):
    """Per-rank statistics averaged unweighted (every rank's count taken as equal)."""
    def merge_stats(self, n, mean, m2, group):
        import torch
        import torch.distributed as dist
        mine = torch.stack([torch.full_like(mean, float(n)), mean, m2])
        parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, mine, group=group)
        means = torch.stack([p[1] if p[0][0] > 0 else torch.full_like(mean, float("nan")) for p in parts])
        mu = means.mean(dim=0)
        var = torch.stack([p[2] / p[0] for p in parts]).mean(dim=0) + ((means - mu) ** 2).mean(dim=0)
        n_all = int(sum(p[0][0].item() for p in parts))
        return n_all, mu, var * n_all


class E09(_Planted):
    """The backward's mean_dy / mean_dy_xmu: each rank's local means, averaged over ranks unweighted."""
    def backward_means(self, sum_dy, sum_dy_xmu, n_local, n_total, group):
        import torch
        import torch.distributed as dist
        both = torch.stack([sum_dy, sum_dy_xmu]) / n_local if n_local else torch.full((2,) + sum_dy.shape, float("nan"),
                                                                                       dtype=sum_dy.dtype)
        dist.all_reduce(both, group=group)
        return both[0] / dist.get_world_size(group), both[1] / dist.get_world_size(group)


class RunningLocalVar(_Planted):
    """running_var updated with the rank's local (unbiased) variance."""
    def running_update(self, rm, rv, mean, var, n_total, x_local, momentum, nbt):
        m = 1.0 / nbt if momentum is None else momentum
        local = x_local.var(dim=[0] + list(range(2, x_local.ndim)), unbiased=True)
        return (1 - m) * rm + m * mean, (1 - m) * rv + m * local


class RunningLocalCount(_Planted):
    """running_var's unbiased correction n / (n - 1) with the rank's local count."""
    def running_update(self, rm, rv, mean, var, n_total, x_local, momentum, nbt):
        m = 1.0 / nbt if momentum is None else momentum
        n = float(x_local.numel() // x_local.shape[1])
        return (1 - m) * rm + m * mean, (1 - m) * rv + m * var * n / (var.new_tensor(n) - 1)


class RunningBiased(_Planted):
    """SyncBatchNorm updating running_var with the global biased variance (the ordinary E01 mistake, made
    by every rank alike: named by the op's ordinary variants, which distributed runs try too)."""
    def running_update(self, rm, rv, mean, var, n_total, x_local, momentum, nbt):
        m = 1.0 / nbt if momentum is None else momentum
        return (1 - m) * rm + m * mean, (1 - m) * rv + m * var


class NoGradAllReduce(_Planted):
    """Sequence parallelism: the weight/bias gradients left as the rank's partial sums."""
    def reduce_param_grads(self, grads, group):
        return grads


class LocalSumSquares(_Planted):
    """Tensor parallelism: each rank normalizes by the sum of squares of its own hidden slice."""
    def hidden_sum(self, t, group):
        return t

    def hidden_count(self, m_local, group):
        return m_local


# (backend class, the pitfall id the diagnosis must name, what it plants)
PLANTED = [
    (E08, "E08", "statistics averaged over ranks unweighted"),
    (E09, "E09", "backward mean_dy / mean_dy_xmu not count-weighted"),
    (RunningLocalVar, "DP-RS1", "running_var from the local variance"),
    (RunningLocalCount, "DP-RS2", "unbiased correction with the local count"),
    (NoGradAllReduce, "DP-SP1", "sequence parallelism: no all-reduce of weight/bias gradients"),
    (LocalSumSquares, "DP-TP1", "tensor parallelism: local sum of squares only"),
]


# ------------------------------------------------------------------------------------ faults
class Faulty(TorchDistBackend):
    """torch-dist-cpu with a fault on rank ``rank`` for the cases of op ``op`` (module docstring)."""

    def __init__(self, fault, rank=1, op="layer_norm"):
        super().__init__("cpu")
        self.name = f"torch-dist-cpu+{fault}@rank{rank}"
        self.fault, self.bad_rank, self.bad_op = fault, rank, op

    def run(self, call, *, rank, group):
        if rank == self.bad_rank and call.op == self.bad_op:
            if self.fault == "raise":
                raise RuntimeError("planted fault")
            if self.fault == "hang":
                time.sleep(3600)
            if self.fault == "die":
                os._exit(7)
            if self.fault == "shape":
                ret = super().run(call, rank=rank, group=group)
                return Returned({**ret.outputs, "y": np.zeros((3,), dtype=np.float32)}, ret.grads, ret.state)
            if self.fault == "disagree":                # a replicated array one ulp off rank 0's copy
                ret = super().run(call, rank=rank, group=group)
                w = np.asarray(ret.grads["weight"])
                return Returned(ret.outputs, {**ret.grads, "weight": np.nextafter(w, np.inf).astype(w.dtype)},
                                ret.state)
        return super().run(call, rank=rank, group=group)


class NoWeightGrad(TorchDistBackend):
    """torch-dist-cpu whose kernel does not compute dweight, and says so on every rank
    (``Returned.not_computed``): the gradient is unchecked with that reason, never zero-filled."""

    def run(self, call, *, rank, group):
        ret = super().run(call, rank=rank, group=group)
        grads = {k: v for k, v in ret.grads.items() if k != "weight"}
        return Returned(ret.outputs, grads, ret.state, {"grad.weight": "dweight is left to the optimizer's kernel"})


def run(backend, world_size=4, texts=(), timeout=60.0):
    from refnorm.check.distributed import run_distributed
    from refnorm.golden import distributed as D
    return run_distributed(backend, D.cases(texts), world_size=world_size, timeout=timeout)


def section(world_size=4) -> list:
    """docs/pitfall_detection.md, section 9 (lines): every planted backend on every distributed case."""
    from refnorm.check.diagnosis import matched_ids
    L = ["## 9. Distributed normalizers: planted in torch-dist-cpu, judged across processes", "",
         f"`refnorm check --backend BACKEND --world-size {world_size}` over every distributed case "
         "(refnorm/golden/distributed.py: SyncBatchNorm, sequence-parallel layer_norm/rms_norm, tensor-parallel "
         "rms_norm, each split equal, unequal, with a one-sample rank and with an empty rank; gloo on CPU, one "
         "process group per run). BACKEND is torch-dist-cpu or one of `tests/planted/distributed.py`, each "
         "torch-dist-cpu with one mistake in one collective step. \"caught\": cases failed or errored; \"named\": "
         "caught cases whose diagnosis names the planted pitfall (the distributed variants of "
         "refnorm/pitfalls/distributed.py, bound to the case's split). An equal split cannot show E08 or E09 "
         "(equal counts weigh equally), so those pass there. Produced by `python tests/planted/distributed.py`.", "",
         "| planted (tests/planted/distributed.py) | pitfall | cases judged | caught | named by the diagnosis | "
         "catching cases, by split |", "|---|---|---|---|---|---|"]
    r = run(TorchDistBackend(), world_size)
    bad = [c for c in r.cases if c.status != "passed"]
    L.append(f"| torch-dist-cpu (correct) | none | {len(r.cases)} | {len(bad)} (false alarms) | - | - |")
    for cls, pid, what in PLANTED:
        r = run(cls(), world_size)
        caught = [c for c in r.cases if c.status in ("failed", "error")]
        named = [c for c in caught if pid in matched_ids(c.diagnosis)]
        splits = {}
        for c in caught:
            s = c.id.split("/dist_")[1].split("_")[1]
            splits[s] = splits.get(s, 0) + 1
        by = ", ".join(f"{k} {v}" for k, v in splits.items())
        L.append(f"| `{cls.__name__}`: {what} | {pid} | {len(r.cases)} | {len(caught)} | {len(named)} | {by} |")
    return L + [""]


if __name__ == "__main__":
    print("\n".join(section()))
