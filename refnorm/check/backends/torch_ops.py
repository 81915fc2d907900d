"""torch's own normalization ops, one function per refnorm op, as the torch adapter (torch_backend.py) calls
them: ``fn(backend, torch, t, cfg, st, training) -> (outputs, new state)`` (``t``: the input tensors, leaves
for autograd; ``cfg``: the completed configuration; ``st``: the state tensors), the signature of the
compositions in torch_composites.py. What each calls, and why, is the adapter's module docstring. torch is
never imported here: the adapter passes it in. Gradients are taken by the adapter with respect to the leaf
tensors, so they come back in the shapes the inputs were given in.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import _translate as T
from ...spec import DEFAULT

ONNX_TRAINING = ("batch_norm convention='onnx' in training is not expressible in torch: ONNX's running_var "
                 "stores the biased batch variance, torch's the unbiased one (var * n / (n - 1)), and no torch "
                 "option changes that")


class Refused(ValueError):
    """The adapter refuses a call (torch's own Python-level argument checks, inputs that would crash the
    process) or cannot translate torch's answer back; the message says why."""


def onnx_momentum_to_torch(m_onnx) -> float | None:
    """torch's momentum for ONNX's m (the weight of the OLD value): 1 - m, when that is exact in float64
    (so that torch's (1 - momentum) is m again); None when it is not exactly expressible."""
    m = float(m_onnx)
    t = 1.0 - m
    if Fraction(t) == 1 - Fraction(m) and Fraction(1.0 - t) == Fraction(m):
        return t
    return None



def batch_norm(backend, torch, t, cfg, st, training):
    x, w, b = t["x"], t.get("weight"), t.get("bias")
    rm, rv, nbt = _running(torch, "batch_norm", st, backend.device)
    tracking = rm is not None
    use_batch = training or not tracking          # nn.BatchNorm: no running stats -> batch stats
    eps = float(cfg["eps"])
    if use_batch:                                 # F.batch_norm's checks (native_batch_norm has none)
        _verify_batch_size(list(x.shape))
        if eps <= 0:
            raise Refused(f"F.batch_norm refuses eps={eps!r} when batch statistics are used "
                          "('batch_norm eps must be positive during training')")
    factor = 0.0                                  # not read by torch unless it updates running stats
    if training and tracking:
        nbt = nbt + 1                             # nn.BatchNorm: num_batches_tracked.add_(1)
        mom = cfg["momentum"]
        if cfg["convention"] != "torch":          # supports() refuses onnx training
            raise Refused(ONNX_TRAINING)
        mom = 0.1 if mom is DEFAULT else mom
        factor = 1.0 / float(nbt.item()) if mom is None else float(mom)
    y, save_mean, save_rstd = torch.native_batch_norm(x, w, b, rm, rv, use_batch, factor, eps)
    out = {"y": y}
    if use_batch:                                 # eval: torch returns empty save_mean / save_invstd
        out["mean"], out["rstd"] = save_mean, save_rstd
    new = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt} if tracking else {}
    return out, new

def instance_norm(backend, torch, t, cfg, st, training):
    import torch.nn.functional as F
    x, w, b = t["x"], t.get("weight"), t.get("bias")
    rm, rv, nbt = _running(torch, "instance_norm", st, backend.device)
    tracking = rm is not None
    mom = cfg["momentum"]
    mom = 0.0 if mom is None else float(mom)      # nn.InstanceNorm passes momentum=None as 0.0
    y = F.instance_norm(x, rm, rv, w, b, use_input_stats=training or not tracking, momentum=mom,
                        eps=float(cfg["eps"]))
    new = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt} if tracking else {}
    return {"y": y}, new

def layer_norm(backend, torch, t, cfg, st, training):
    x = t["x"]
    ns = T.int_list(cfg["normalized_shape"])
    w = t.get("weight")
    if w is not None and float(cfg["weight_offset"]) != 0.0:
        w = w + float(cfg["weight_offset"])        # zero-centred gamma: torch has none, the offset is added
    y, mean, rstd = torch.native_layer_norm(x, ns, w, t.get("bias"), float(cfg["eps"]))
    k = len(ns)
    want = tuple(x.shape[:x.dim() - k]) + (1,) * k
    for name, s in (("mean", mean), ("rstd", rstd)):
        if tuple(s.shape) != want:
            raise Refused(f"torch.native_layer_norm returned {name} of shape {tuple(s.shape)}; "
                             f"refnorm's is {want}")
    return {"y": y, "mean": mean, "rstd": rstd}, {}

def group_norm(backend, torch, t, cfg, st, training):
    # what F.group_norm (aten's group_norm) hands native_group_norm: on CPU the input made contiguous in
    # its suggested memory format (a 4-D/5-D channels_last tensor stays channels_last and runs the
    # channels_last kernel; a transposed, strided or 3-D channels-last view becomes C order), elsewhere
    # C order (native_group_norm raises "Expected X.is_contiguous(memory_format)" on any other input:
    # calling it on the view as handed was this adapter's error, not torch's)
    x = t["x"]
    x = x.contiguous(memory_format=_suggested_format(torch, x)) if x.device.type == "cpu" else x.contiguous()
    if x.dim() < 2:
        raise Refused(f"F.group_norm: expected at least 2 dimensions for input tensor but received {x.dim()}")
    G = int(cfg["num_groups"])
    N, C = int(x.shape[0]), int(x.shape[1])
    _verify_batch_size([N * C // G, G] + list(x.shape[2:]))          # F.group_norm's check
    hxw = math.prod(int(s) for s in x.shape[2:])
    y, mean, rstd = torch.native_group_norm(x, t.get("weight"), t.get("bias"), N, C, hxw, G, float(cfg["eps"]))
    for name, s in (("mean", mean), ("rstd", rstd)):
        if tuple(s.shape) != (N, G):
            raise Refused(f"torch.native_group_norm returned {name} of shape {tuple(s.shape)}; "
                             f"refnorm's is {(N, G)}")
    return {"y": y, "mean": mean, "rstd": rstd}, {}

def add_norm(backend, torch, t, cfg, st, training):
    import torch.nn.functional as F
    x = t["x"]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    ns = T.int_list(cfg["normalized_shape"])
    k = len(ns)
    s = x.to(acc)
    if "mask" in t:                    # a 0/1 sample, not differentiable: its gradient is zeros (refnorm's)
        s = s * t["mask"].detach().to(acc)
    if "rowscale" in t:
        rs = t["rowscale"].to(acc)
        s = s * rs.reshape(tuple(rs.shape) + (1,) * k)
    p = float(cfg["dropout_p"])
    if p:
        s = s / (1.0 - p)
    if "x1" in t:                      # the parallel branch, its own keep-mask (flash-attention's order)
        s1 = t["x1"].to(acc)
        if "mask1" in t:
            s1 = s1 * t["mask1"].detach().to(acc)
        s = s + (s1 / (1.0 - p) if p else s1)
    if "residual" in t:
        s = s + t["residual"].to(acc)

    def norm(wk, bk):                  # as layer_norm_ref: F.layer_norm / F.rms_norm of s once per output
        w = t.get(wk)
        w = None if w is None else w.to(acc) + float(cfg["weight_offset"])
        b = t.get(bk)
        b = None if b is None else b.to(acc)
        if cfg["norm"] == "layer_norm":
            return F.layer_norm(s, ns, w, b, float(cfg["eps"])).to(x.dtype)
        y = F.rms_norm(s, ns, w, eps=float(cfg["eps"]))
        return (y if b is None else y + b).to(x.dtype)
    low = x.dtype in (torch.float16, torch.bfloat16)
    res_dt = torch.float32 if (cfg["residual_in_fp32"] and low) else x.dtype
    outs = {"y": norm("weight", "bias"), "residual_out": s.to(res_dt)}
    if "weight1" in t:
        outs["y1"] = norm("weight1", "bias1")
    return outs, {}

def adaptive_layer_norm(backend, torch, t, cfg, st, training):
    x = t["x"]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    H = int(x.shape[-1])
    y, mean, rstd = torch.native_layer_norm(x.to(acc), [H], None, None, float(cfg["eps"]))
    shape = (int(x.shape[0]),) + (1,) * (x.dim() - 2) + (H,)
    if "scale" in t:
        y = y * (1.0 + t["scale"].to(acc).reshape(shape))
    if "shift" in t:
        y = y + t["shift"].to(acc).reshape(shape)
    return {"y": y.to(x.dtype), "mean": mean, "rstd": rstd}, {}

def rms_norm(backend, torch, t, cfg, st, training):
    import torch.nn.functional as F
    eps = None if cfg["eps"] is None else float(cfg["eps"])      # None: torch's own default, refnorm's too
    y = F.rms_norm(t["x"], T.int_list(cfg["normalized_shape"]), t.get("weight"), eps=eps)
    return {"y": y}, {}

def norm_quant(backend, torch, t, cfg, st, training):
    """torch has no fused norm + quantize op: the composition a fused kernel computes, in torch ops.
    F.layer_norm / F.rms_norm on float32 copies (float64 for a float64 case: exact upcasts), amax =
    |y|.amax per token, the dynamic scale amax / qmax clamped to [min_scale, scale_ub] (or the static
    scale), y * (1 / scale), clamped to the quantized range, then .to(torch.float8_e4m3fn /
    float8_e5m2) (round to nearest even) or torch.round (ties to even) .to(torch.int8)."""
    import torch.nn.functional as F
    from ...norms.norm_quant import QUANT_DTYPES, default_min_scale, qmax
    x = t["x"]
    W = torch.float64 if x.dtype == torch.float64 else torch.float32
    ns = T.int_list(cfg["normalized_shape"])
    w, b = (None if t.get(k) is None else t[k].to(W) for k in ("weight", "bias"))
    if cfg["norm"] == "layer_norm":
        y = F.layer_norm(x.to(W), ns, w, b, float(cfg["eps"]))
    else:
        y = F.rms_norm(x.to(W), ns, w, eps=float(cfg["eps"]))
    axes = tuple(range(x.dim() - len(ns), x.dim()))
    amax = y.abs().amax(dim=axes, keepdim=True)
    qd = cfg["quant_dtype"]
    if t.get("static_scale") is not None:
        scale = t["static_scale"].to(W).reshape(()).expand(amax.shape)
    else:
        scale = amax / qmax(qd)
        if cfg["scale_ub"] is not None:
            scale = scale.clamp(max=float(cfg["scale_ub"]))
        floor = default_min_scale(qd) if cfg["min_scale"] is None else float(cfg["min_scale"])
        scale = scale.clamp(min=floor)
    _, lo, hi = QUANT_DTYPES[qd]
    # min_scale=0 on an all-zero row: scale 0, and q 0 (refnorm's convention), not 0 * inf = NaN
    v = torch.where(scale == 0, torch.zeros_like(y), y * scale.reciprocal()).clamp(lo, hi)
    q = torch.round(v).to(torch.int8) if qd == "int8" else v.to(getattr(torch, qd))
    return {"q": q, "scale": scale.contiguous(), "amax": amax}, {}

def local_response_norm(backend, torch, t, cfg, st, training):
    import torch.nn.functional as F
    size = cfg["size"]
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise Refused(f"local_response_norm: size={size!r}; expected an int")
    y = F.local_response_norm(t["x"], int(size), alpha=float(cfg["alpha"]), beta=float(cfg["beta"]),
                              k=float(cfg["k"]))
    return {"y": y}, {}

def lp_normalize(backend, torch, t, cfg, st, training):
    import torch.nn.functional as F
    dim = cfg["dim"]
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        dim = int(dim)
    else:
        dim = tuple(int(d) for d in dim)
    if dim == ():
        raise Refused("lp_normalize: dim=[] (torch reads it as every axis; refnorm refuses it)")
    y = F.normalize(t["x"], p=float(cfg["p"]), dim=dim, eps=float(cfg["eps"]))
    return {"y": y}, {}

def weight_norm(backend, torch, t, cfg, st, training):
    v, g = t["v"], t["g"]
    dim = cfg["dim"]
    nd = v.dim()
    if dim is None:
        tdim, keep = -1, ()                       # torch: dim=-1 is the whole tensor (v.norm())
        flat = (1,) * nd
    else:
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -nd <= dim < nd or dim == -1:
            raise Refused(f"weight_norm: dim={dim!r} for v with {nd} dimensions")
        tdim = int(dim) % nd
        keep = tuple(int(s) if a == tdim else 1 for a, s in enumerate(v.shape))
        flat = (int(v.shape[tdim]),)
        if v.shape[tdim] == 0:
            raise Refused(f"weight_norm: v.shape[{tdim}] == 0; torch 2.13's _weight_norm kills the process "
                             "with SIGFPE (or raises) on this input, so it is not called")
    gshape = tuple(g.shape)
    if gshape not in (keep, flat):
        raise Refused(f"weight_norm: g has shape {gshape}; expected {keep} or {flat}")
    gt = g.reshape(keep)                           # torch's weight_g layout; the gradient comes back in gshape
    w = torch._weight_norm(v, gt, tdim)
    return {"w": w}, {}


# ---------------------------------------------------------------------- helpers


OPS = {"batch_norm": batch_norm, "instance_norm": instance_norm, "layer_norm": layer_norm, "group_norm": group_norm, "add_norm": add_norm, "adaptive_layer_norm": adaptive_layer_norm, "rms_norm": rms_norm, "norm_quant": norm_quant, "local_response_norm": local_response_norm, "lp_normalize": lp_normalize, "weight_norm": weight_norm}


def _verify_batch_size(size):
    """torch.nn.functional._verify_batch_size (the check F.batch_norm and F.group_norm make)."""
    prod = size[0]
    for s in size[2:]:
        prod *= s
    if prod == 1:
        raise Refused(f"Expected more than 1 value per channel when training, got input size {size} "
                      "(the check F.batch_norm and F.group_norm make)")


def _running(torch, op, st, device):
    if not st:
        return None, None, None
    if not {"running_mean", "running_var"} <= set(st):
        raise Refused(f"{op}: state needs both 'running_mean' and 'running_var', got {sorted(st)}")
    nbt = st.get("num_batches_tracked")
    if nbt is None:
        nbt = torch.tensor(0, dtype=torch.int64, device=device)
    if nbt.dim() != 0:
        raise Refused(f"{op}: 'num_batches_tracked' has shape {tuple(nbt.shape)}; expected ()")
    # fresh tensors: torch updates the running statistics in place
    return st["running_mean"].clone(), st["running_var"].clone(), nbt.clone()


def _suggested_format(torch, x):
    """aten's ``Tensor::suggest_memory_format`` (not exposed in Python) for the dense layouts refnorm hands
    (refnorm/golden/layouts.py): channels_last (channels_last_3d) for a 4-D (5-D) tensor in that memory
    order and not C-contiguous, else C order."""
    for ndim, fmt in ((4, torch.channels_last), (5, torch.channels_last_3d)):
        if x.dim() == ndim and not x.is_contiguous() and x.is_contiguous(memory_format=fmt):
            return fmt
    return torch.contiguous_format
