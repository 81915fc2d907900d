"""The process group of the distributed runner's rank processes (torch.distributed; imported in them only).

``init(rank, world, port, device)``: gloo over TCP on 127.0.0.1 for device "cpu"; nccl with rank r on
cuda:r for device "cuda" (each rank its own GPU). One group for the whole check; ``destroy`` ends it.
torch uses one intra-op thread per rank (N ranks share the machine's cores).
"""
from __future__ import annotations

import datetime

PRELOAD = ("torch", "torch.distributed")     # what the runner's forkserver imports once for every rank


def init(rank: int, world: int, port: int, device: str = "cpu", timeout_s: float = 600.0):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if device == "cuda":
        if torch.cuda.device_count() < world:
            raise RuntimeError(f"world size {world} needs {world} GPUs (one per rank); "
                               f"torch.cuda.device_count() = {torch.cuda.device_count()}")
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    dist.barrier()          # the connections are made now, within the start's limit, not in the first case's
    return dist.group.WORLD


def destroy():
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
