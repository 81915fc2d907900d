"""torch compositions of the ops torch has no single op for (gated norms, DyT, PolyNorm, GroupNorm+SiLU,
block-scaled quantization, ...): each is written from torch's own ops exactly as a user's torch
reference of that layer would be, and documented with the op.

``COMPOSITES`` maps an op name to ``fn(backend, torch, t, cfg, st, training) -> (outputs, new_state)``,
the same signature as torch_ops.OPS' functions (``t``: the input tensors, leaves for autograd; ``cfg``: the
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
    acc = _acc(torch, x)
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
# ------------------------------------------------------------------------------ norm_quant_block
def _e2m1_codes(torch, v):
    """The float4 e2m1 codes (uint8, sign in bit 3) of ``v`` (already clamped to [-6, 6]), rounded to
    nearest, ties to even (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4): torch
    has no cast to float4_e2m1fn_x2, so the rounding is written out as a kernel's threshold ladder."""
    a = v.abs()
    code = torch.zeros(a.shape, dtype=torch.uint8, device=a.device)
    for thr, c, tie_up in ((0.25, 1, False), (0.75, 2, True), (1.25, 3, False), (1.75, 4, True),
                           (2.5, 5, False), (3.5, 6, True), (5.0, 7, False)):
        code = torch.where((a >= thr) if tie_up else (a > thr), torch.full_like(code, c), code)
    return code | ((v < 0).to(torch.uint8) << 3)


def _pow2(torch, k, W):
    """2^k (k an integer tensor) in the dtype W, exact (ldexp of 1)."""
    return torch.ldexp(torch.ones(k.shape, dtype=W, device=k.device), k.to(torch.int32))


def norm_quant_block(backend, torch, t, cfg, st, training):
    """The composition a fused add + norm + block-quantize kernel computes, in torch ops. The sum x + residual
    and F.rms_norm / F.layer_norm on float32 copies (float64 for a float64 case); the last axis cut into
    blocks (the last one padded with zeros); amax per block; then per format:
    fp8_group: scale = max(amax / qmax, min_scale) (pow2: 2^e from torch.frexp, the exponent rounded up),
    q = y * (1 / scale) clamped, .to(float8); mxfp8: the E8M0 exponent from torch.frexp of amax (floor:
    floor(log2 amax) - emax) or of amax * (1 / qmax) (round_up: the exponent rounded up, TransformerEngine's
    cvt.rp), clamped to [-127, 127], q = y * 2^-k clamped, .to(float8), scale .to(float8_e8m0fnu) (exact: a
    power of two); nvfp4: S_enc = 2688 / max amax (1 for 0) or the input global_scale, the block scale (amax / 6 *
    S_enc) clamped to 448 .to(float8_e4m3fn), q = y * (S_enc / block scale) clamped to 6 and rounded to e2m1
    (_e2m1_codes), packed two per byte as torch.float4_e2m1fn_x2 (element 2i in the low nibble).
    """
    import torch.nn.functional as F
    from ...norms import norm_quant_block as NB
    c = NB.resolve(cfg)
    x = t["x"]
    W = torch.float64 if x.dtype == torch.float64 else torch.float32
    H, B = x.shape[-1], c["block_size"]
    s = x.to(W) if t.get("residual") is None else x.to(W) + t["residual"].to(W)
    w, b = (None if t.get(k) is None else t[k].to(W) for k in ("weight", "bias"))
    if c["norm"] == "layer_norm":
        y = F.layer_norm(s, [H], w, b, float(c["eps"]))
    else:
        y = F.rms_norm(s, [H], w, eps=float(c["eps"]))
    nb = NB.num_blocks(H, B)
    yb = F.pad(y, (0, nb * B - H)).reshape(y.shape[:-1] + (nb, B))
    amax = yb.abs().amax(dim=-1)                                          # (..., nb)
    fmt, rule, el = c["format"], c["scale_rule"], c["element_dtype"]
    qm, emax = NB.ELEMENTS[el][1], NB.ELEMENTS[el][2]
    tensor_scale = torch.ones((1,) * x.dim(), dtype=W)
    if fmt == "fp8_group":
        scale = (amax * (1.0 / qm)).clamp(min=c["min_scale"])
        if rule == "pow2":
            m, e = torch.frexp(scale)
            k = torch.where(m == 0.5, e - 1, e).clamp(*NB.F32_POW2_EXP)
            scale = torch.where(scale == 0, torch.zeros_like(scale), _pow2(torch, k, W))
        rec = torch.where(scale == 0, torch.zeros_like(scale), scale.reciprocal())
        q = (yb * rec[..., None]).clamp(-qm, qm).to(getattr(torch, el))
        scale_out = scale
    elif fmt == "mxfp8":
        if rule == "floor":
            _, e = torch.frexp(amax)
            k = e - 1 - emax
        else:
            m, e = torch.frexp(amax * (1.0 / qm))
            k = torch.where(m == 0.5, e - 1, e)
        k = torch.where(amax == 0, torch.full_like(k, NB.E8M0_EXP[0]), k).clamp(*NB.E8M0_EXP)
        q = (yb * _pow2(torch, -k, W)[..., None]).clamp(-qm, qm).to(getattr(torch, el))
        scale_out = _pow2(torch, k, torch.float32).to(torch.float8_e8m0fnu)
    else:
        if t.get("global_scale") is not None:                     # a static encode scale (vLLM's)
            enc = t["global_scale"].to(W).reshape(())
        else:
            g = amax.amax() if amax.numel() else torch.zeros((), dtype=W)
            enc = (NB.NVFP4_GLOBAL / g).clamp(max=NB.FLT_MAX)
            enc = torch.where((g == 0) | (enc == 0), torch.ones_like(enc), enc)
        sb = (amax / 6.0 * enc).clamp(max=NB.E4M3_MAX).to(torch.float8_e4m3fn)
        sbf = sb.to(W)
        rec = torch.where(sbf == 0, torch.zeros_like(sbf), enc / torch.where(sbf == 0, torch.ones_like(sbf), sbf))
        codes = _e2m1_codes(torch, (yb * rec[..., None]).clamp(-6.0, 6.0))
        codes = codes.reshape(y.shape[:-1] + (nb * B,))[..., :H]
        q = (codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous().view(torch.float4_e2m1fn_x2)
        scale_out, tensor_scale = sb, (1.0 / enc).reshape((1,) * x.dim())
    if fmt != "nvfp4":
        q = q.reshape(y.shape[:-1] + (nb * B,))[..., :H]
    out = {"q": q.contiguous(), "scale": scale_out.contiguous(), "amax": amax, "tensor_scale": tensor_scale}
    if t.get("residual") is not None:
        low = x.dtype in (torch.float16, torch.bfloat16)
        out["residual_out"] = s.to(torch.float32 if low and cfg.get("residual_in_fp32") else x.dtype)
    return out, {}


COMPOSITES["norm_quant_block"] = norm_quant_block
def group_norm_silu(backend, torch, t, cfg, st, training):
    """F.silu(F.group_norm(x, num_groups, weight, bias, eps)), as a diffusion UNet/VAE block writes it
    (diffusers' ResnetBlock2D: self.norm1 then self.nonlinearity). F.group_norm is the adapter's group_norm
    (``torch_ops.group_norm``: torch.native_group_norm, F.group_norm's kernel with its memory-format
    choice and its Python check, bit for bit F.group_norm's y and gradients; it also returns mean and rstd);
    F.silu then runs on its output in the case dtype (float16/bfloat16: computed in float32 and rounded once,
    after group_norm's output was rounded to the case dtype), and autograd chains silu_backward (dp rounded to
    the case dtype) into native_group_norm_backward."""
    import torch.nn.functional as F
    from .torch_ops import group_norm
    out, _ = group_norm(backend, torch, t, cfg, st, training)
    return {"y": F.silu(out["y"]), "mean": out["mean"], "rstd": out["rstd"]}, {}


COMPOSITES["group_norm_silu"] = group_norm_silu
# float16/bfloat16: the pointwise intermediates p = group_norm(x) and dp = dy * silu'(p) are rounded to the case
# dtype between the two ops (bounds/group_norm_silu.py: "epi_d"); with float32 parameters torch's group_norm is
# its mixed kernel (statistics in float32), parameter-free it keeps mean/rstd in the case dtype (stats_d), which
# epi_d includes
LOW_CONTRACT["group_norm_silu"] = "epi_d"
