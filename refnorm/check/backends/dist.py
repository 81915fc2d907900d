"""The distributed backend interface: the single-process protocol (base.py) with the rank and group added.

A distributed backend is any object with these members (``DistributedBackend`` below):

    name: str
    distributed: bool = True                    marks it as distributed (``refnorm check --world-size N``
                                                refuses a backend without it, exit 2)
    device: str = "cpu"                         "cpu": the runner makes a gloo group; "cuda": an nccl group,
                                                rank r on cuda:r (each rank needs its own GPU)
    available() -> str | None                   as base.py
    supports(call: ShardCall) -> str | None     as base.py, asked with rank 0's shard
    contract(call: ShardCall) -> Contract       as base.py, for the gathered (global) arrays
    run(call: ShardCall, *, rank: int, group) -> Returned
                                                one call on one rank: ``group`` is the
                                                torch.distributed process group of all the ranks
                                                (world size ``group.size()``); collectives go through it

``ShardCall`` is a ``Call`` whose arrays are this rank's shard (refnorm.golden.distributed: the
activation ``x`` and its cotangent sliced along the sharded axis; weight and bias replicated, or sharded
under tensor parallelism; state replicated), plus ``parallel`` ("batch", "sequence" or "tensor") and the
sharded ``axis``. A rank's shard may be empty (0 along the axis). ``Returned`` holds this rank's part:
sharded arrays (y, dx, ...) for its shard, replicated ones (dweight under data or sequence parallelism,
SyncBatchNorm's mean/rstd, the running statistics) whole, as every rank holds them after its all-reduce.

The runner (refnorm/check/distributed.py) calls ``run`` on every rank at once in N processes, with one
process group for the whole check, gathers the parts (shards joined in rank order; a replicated array
is rank 0's, and a rank whose copy differs fails the case) and judges them as one call of the global op.
Loaded like the other backends: a built-in name, ``package.module:attr`` or an entry point; the object
is pickled to the rank processes, so it must be picklable (a module-level class or instance).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .base import Call, Contract, Returned


@dataclass(frozen=True)
class ShardCall(Call):
    """One rank's shard of a call (module docstring)."""
    parallel: str = "batch"
    axis: int = 0


@runtime_checkable
class DistributedBackend(Protocol):
    name: str
    distributed: bool

    def available(self) -> str | None: ...

    def supports(self, call: ShardCall) -> str | None: ...

    def contract(self, call: ShardCall) -> Contract: ...

    def run(self, call: ShardCall, *, rank: int, group) -> Returned: ...


def is_distributed(obj) -> bool:
    return getattr(obj, "distributed", False) is True and callable(getattr(obj, "run", None))
