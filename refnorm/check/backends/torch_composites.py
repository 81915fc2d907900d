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


def _gated_norm(backend, torch, t, cfg, st, training):
    """gated_norm as mamba_ssm's reference of its layernorm_gated kernels (rms_norm_ref, upcast=True): x, z,
    weight and bias upcast to float32 (float64 for a float64 case; exact), s = F.silu(z); norm_before_gate=False:
    v = x * s, else v = x; v viewed as (*, H / group_size, group_size); rstd = torch.rsqrt(mean(v^2) + eps)
    (rms_norm) or of the biased variance about the mean (layer_norm, v - mean first); y = vhat * weight + bias,
    times s when norm_before_gate; cast once to the case dtype. Gradients by autograd. Contract: strict (every
    intermediate in the float32 accumulator, one rounding at the end)."""
    import torch.nn.functional as F
    x = t["x"]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    H = int(x.shape[-1])
    K = H if cfg["group_size"] is None else int(cfg["group_size"])
    s = F.silu(t["z"].to(acc))
    v = x.to(acc) if cfg["norm_before_gate"] else x.to(acc) * s
    vg = v.reshape(tuple(v.shape[:-1]) + (H // K, K))
    if cfg["norm"] == "layer_norm":
        vg = vg - vg.mean(dim=-1, keepdim=True)
    vhat = (vg * torch.rsqrt(vg.square().mean(dim=-1, keepdim=True) + float(cfg["eps"]))).reshape(v.shape)
    y = vhat * t["weight"].to(acc)
    if t.get("bias") is not None:
        y = y + t["bias"].to(acc)
    if cfg["norm_before_gate"]:
        y = y * s
    return {"y": y.to(x.dtype)}, {}


COMPOSITES["gated_norm"] = _gated_norm
def _acc(torch, x):
    """The compute dtype of a user's torch reference: float32 for float32/float16/bfloat16 x, float64 for float64."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def dyt(backend, torch, t, cfg, st, training):
    """DyT as the paper's module computes it (``weight * torch.tanh(alpha * x) + bias``), with x, alpha, weight
    and bias upcast to float32 (float64 for a float64 case) and y cast to the case dtype once; every gradient
    (alpha's included: autograd sums it over the broadcast, all of x) by autograd. Contract: strict."""
    x = t["x"]
    acc = _acc(torch, x)
    y = torch.tanh(t["alpha"].to(acc) * x.to(acc))
    if "weight" in t:
        y = y * t["weight"].to(acc)
    if "bias" in t:
        y = y + t["bias"].to(acc)
    return {"y": y.to(x.dtype)}, {}


def poly_norm(backend, torch, t, cfg, st, training):
    """PolyNorm as vLLM's ``polynorm_naive`` (its test reference) writes it: x upcast to float32 (float64 for a
    float64 case), ``norm(u) = u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + eps)``, ``weight[0] *
    norm(x**3) + weight[1] * norm(x**2) + weight[2] * norm(x) + bias``, cast to the case dtype once; the
    gradients by autograd. Contract: strict (the powers and every statistic in float32)."""
    x = t["x"]
    acc = _acc(torch, x)
    xf = x.to(acc)
    w = t["weight"].to(acc)
    eps = float(cfg["eps"])

    def norm(u):
        return u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + eps)

    y = w[0] * norm(xf ** 3) + w[1] * norm(xf ** 2) + w[2] * norm(xf)
    if "bias" in t:
        y = y + t["bias"].to(acc)
    return {"y": y.to(x.dtype)}, {}


COMPOSITES.update({"dyt": dyt, "poly_norm": poly_norm})
