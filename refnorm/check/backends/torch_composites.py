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


def group_norm_silu(backend, torch, t, cfg, st, training):
    """F.silu(F.group_norm(x, num_groups, weight, bias, eps)), as a diffusion UNet/VAE block writes it
    (diffusers' ResnetBlock2D: self.norm1 then self.nonlinearity). F.group_norm is the adapter's group_norm
    (``TorchBackend._group_norm``: torch.native_group_norm, F.group_norm's kernel with its memory-format
    choice and its Python check, bit for bit F.group_norm's y and gradients; it also returns mean and rstd);
    F.silu then runs on its output in the case dtype (float16/bfloat16: computed in float32 and rounded once,
    after group_norm's output was rounded to the case dtype), and autograd chains silu_backward (dp rounded to
    the case dtype) into native_group_norm_backward."""
    import torch.nn.functional as F
    out, _ = backend._group_norm(torch, t, cfg, st, training)
    return {"y": F.silu(out["y"]), "mean": out["mean"], "rstd": out["rstd"]}, {}


COMPOSITES["group_norm_silu"] = group_norm_silu
# float16/bfloat16: the pointwise intermediates p = group_norm(x) and dp = dy * silu'(p) are rounded to the case
# dtype between the two ops (bounds/group_norm_silu.py: "epi_d"); with float32 parameters torch's group_norm is
# its mixed kernel (statistics in float32), parameter-free it keeps mean/rstd in the case dtype (stats_d), which
# epi_d includes
LOW_CONTRACT["group_norm_silu"] = "epi_d"
