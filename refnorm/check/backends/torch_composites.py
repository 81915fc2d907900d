"""torch compositions of the ops torch has no single op for (gated norms, DyT, PolyNorm, GroupNorm+SiLU,
block-scaled quantization, ...): each is written from torch's own ops exactly as a user's torch
reference of that layer would be, and documented with the op.

``COMPOSITES`` maps an op name to ``fn(backend, torch, t, cfg, st, training) -> (outputs, new_state)``,
the same signature as ``TorchBackend._<op>`` (``t``: the input tensors, leaves for autograd; ``cfg``: the
completed configuration; ``st``: the state tensors). ``LOW_CONTRACT`` gives a composite's contract for
float16/bfloat16 calls where it is not "strict". torch is never imported here: the adapter passes it in.
"""
from __future__ import annotations

COMPOSITES: dict = {}
LOW_CONTRACT: dict[str, str] = {}
