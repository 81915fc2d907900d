"""The torch adapter: ``TorchBackend(device="cpu" | "cuda", param_dtype="float32" | "case")``.

It translates refnorm's names, layouts, dtypes and conventions to torch's own normalization ops and
back, and nothing else: no normalizer is rebuilt out of torch primitives. torch is imported inside
the methods only (``import refnorm`` and importing this module never import torch).

Ops and what is called. Where a native op is called instead of the ``torch.nn.functional`` function
users call (to get its statistics), the two were checked bit for bit equal - y, every gradient and
the running statistics, in every dtype and both layouts (tests/test_torch_backend.py):

    batch_norm           torch.native_batch_norm (what F.batch_norm dispatches to on CPU); it also
                         returns save_mean / save_invstd = refnorm's ``mean`` / ``rstd`` (C,) in
                         training; in eval mode they are empty and no statistic is returned.
                         F.batch_norm's Python checks are kept: more than one value per channel and
                         eps > 0 whenever batch statistics are used. ``momentum=None`` is
                         nn.BatchNorm's cumulative average: num_batches_tracked += 1 on every
                         training call with running statistics, factor 1 / num_batches_tracked.
                         convention="onnx": eval mode is the same computation in both conventions
                         (momentum unused) and is run; training is skipped (torch stores the
                         UNBIASED batch variance in running_var, ONNX the biased one; no torch
                         option changes that), whatever the momentum (ONNX m maps to torch 1 - m
                         only when that subtraction is exact in float64).
    instance_norm        F.instance_norm(use_input_stats = training or no running statistics);
                         ``momentum=None`` is passed as 0.0 (nn.InstanceNorm's rule, refnorm's
                         meaning); num_batches_tracked is returned unchanged (torch never touches
                         it). No statistics (torch's instance_norm returns none).
    layer_norm           torch.native_layer_norm (F.layer_norm's kernel): y, mean, rstd (keepdims).
                         weight_offset (zero-centred gamma, not in torch): weight + offset, in the
                         parameter dtype, is passed as the weight; in the case-dtype layout that sum is
                         rounded to float16/bfloat16 by the adapter itself, so those calls are epi_d
                         (production layer_norm 64x4096 bf16 weight_offset=1: grad x 1.68 x the stats_d
                         bound, on CPU and CUDA alike).
    group_norm           torch.native_group_norm (F.group_norm's kernel): y, mean, rstd (N, G).
                         F.group_norm's Python check (more than one value per channel) is kept.
    rms_norm             F.rms_norm. eps=None is passed to torch as None: refnorm's eps=None is torch's
                         (the machine epsilon of the opmath dtype: float32's for fp16/bf16/fp32 input,
                         float64's for float64; refnorm/norms/rms_norm.py), so the golden eps=None
                         cases judge torch's own default. eps_placement
                         "outside" and weight_offset != 0 do not exist in torch: skipped. No
                         statistic (under autograd torch runs the composite, which returns y only).
    local_response_norm  F.local_response_norm; window="onnx" only for odd size (the windows are
                         identical then), skipped for even size.
    lp_normalize         F.normalize(p, dim, eps); zero_rule="onnx" is skipped (no eps reproduces
                         it: eps=0 gives NaN on an all-zero slice, any eps > 0 changes slices with
                         0 < norm < eps and gives dx = dy/eps instead of 0 on all-zero slices).
    weight_norm          torch._weight_norm(v, g, dim); refnorm's dim=None is torch's dim=-1
                         (whole tensor), other dims are passed non-negative (refnorm refuses -1); a
                         flat g of shape (v.shape[dim],) is reshaped to torch's weight_g shape and
                         its gradient reshaped back. v.shape[dim] == 0 raises here: torch 2.13 dies
                         with SIGFPE on it (reproduced), which would kill the checker.
    norm_quant           no torch op fuses a norm and a quantization: composed (``_norm_quant``) as a fused
                         kernel computes it: F.layer_norm / F.rms_norm in float32 (float64 for float64
                         cases), amax, the scale, y * (1 / scale) clamped, then .to(torch.float8_e4m3fn /
                         float8_e5m2) or torch.round(.).to(torch.int8); q comes back as ml_dtypes' float8.
    add_norm             a composition of torch ops, as flash-attention's upcast reference (layer_norm_ref,
                         upcast=True): s = x * mask * rowscale / (1 - p) + residual in float32 (float64 for
                         float64 cases), then F.layer_norm or F.rms_norm (+ bias) of s in that precision, y
                         cast to the case dtype once (the parallel branch: + x1 * mask1 / (1 - p) before
                         the residual, y1 = the same norm of s with weight1, bias1, as layer_norm_ref
                         computes out1); residual_out = s cast once to float32 when
                         residual_in_fp32 on a float16/bfloat16 case, to the case dtype otherwise. Gradients
                         by autograd from both cotangents (prenorm=False: from y's only). weight_offset is
                         added to the upcast weight.
    adaptive_layer_norm  a composition: torch.native_layer_norm of x in float32 (float64 for float64 cases),
                         times (1 + scale), plus shift (both (B, H), broadcast over the tokens), cast once;
                         mean and rstd are native_layer_norm's.
    dyt, poly_norm       compositions (torch_composites.dyt / .poly_norm: the paper's DyT module, vLLM's
                         polynorm_naive), upcast to float32 (float64 for float64 cases), cast once; strict.
    group_norm_silu      a composite (torch_composites.py): F.silu of group_norm above (native_group_norm,
                         F.group_norm's kernel), in the case dtype; float16/bfloat16: epi_d (p and dp
                         rounded to the case dtype between the two ops).
    mean_variance_norm, weight_standardization, min_max_scale, z_score, unified_norm, offline_batch_norm,
    power_norm, batch_renorm: skipped,
                         torch has no native op.

Layout (``param_dtype``). The activations (x and its cotangent; v and g of weight_norm, which are
both "the input" of that op) are always in the case dtype. With param_dtype="float32" (the default)
the parameters weight and bias and the running statistics are float32 when the case dtype is
float16 or bfloat16 (exact upcasts); their gradients and the new running statistics come back in
float32. This is the layout of mixed-precision training with float32 normalization parameters
(fp16/bf16 activations; torch CPU has mixed-dtype kernels for it, which keep mean/rstd in float32).
With param_dtype="case" everything is in the case dtype; the backend's name gets "-caseparams".
float64 and float32 cases are all in the case dtype in both layouts. The default is float32 because
torch's all-fp16/bf16 kernels keep mean/rstd in the case dtype, and at eps=1e-12 on (near-)constant
rows rstd = 1e6 overflows fp16 to inf so y, dx, dw become inf/NaN (docs/tolerances.md section 10, finding 3,
reproduced: golden batch_norm/const_eps1e-12_f16_7x3 fails only in the "case" layout) - a genuine
torch defect that the "case" layout reports and the mixed layout, the usual way to run fp16/bf16,
does not hit. Note: a call with neither weight nor bias (nor float32 running statistics) has
nothing to upcast, so torch runs its all-fp16/bf16 kernel in either layout.

Contracts (``contract``). Measured on torch 2.13 CPU (2 threads) by running this adapter through
refnorm's checker (``check_case``) under each contract, on every golden case and on 12 random
cases per configuration (fp16 and bf16; affine / parameter-free; with and without running
statistics; weight_norm dim 0 / middle / None):
* float64, float32: strict/block for every op; every golden case passes it (one error: see below).
* float16/bfloat16, both layouts:
  - rms_norm: strict. F.rms_norm upcasts to float32 and rounds once (passes strict everywhere). It
    returns no statistic (autograd runs the composite): no saved statistics to judge its backward at.
  - layer_norm: rounding points ``acc dweight=input, dbias=input; recompute xhat=saved_stats`` (CPU_POINTS;
    its preset, ``preset_for``, is stats_d). Its backward accumulates dgamma/dbeta across rows in per-thread
    buffers of the INPUT dtype even with float32 parameters (finding 1). Reproduced bit for bit: with 2
    threads, torch's float32 dbias equals each thread summing its half of the rows serially in
    bf16 (fp16) and the two buffers added in float32; over 4096 rows of 64 its relative error is
    3.9e-2 (bf16) and 6.0e-3 (fp16), against 5.5e-8 for the same data in float32. Strict fails
    22 of the 24 golden fp16/bf16 layer_norm cases (dbias up to 1.1e4 x the bound); stats_d passes
    all of them. stats_d's other points, mean and rstd held in the case dtype, are what the all-fp16/bf16
    kernel (parameter-free calls; the "case" layout) saves; its backward reads them as saved and returned
    (LayerNormBackwardKernel: a = rstd, b = -rstd * mean), so with its backward judged at the returned
    statistics (contracts.py, ``recompute xhat=saved_stats``; every dtype, CPU) they are not needed.
    Measured on the whole golden set (958 cases), against stats_d: both layouts, statuses identical but
    4 partial -> passed (layer_norm/mean1e3_bf16_9x7, mean1e3_f16_260x3, mean1e3_k3_bf16_3x4x2x5x3,
    mean1e4_f32_260x3: dweight unconstrained -> verified; jax and onnxruntime unchanged), the production
    suite's gen_mean1e3_bf16_256x4096 partial -> passed,
    worst ratio of the 16-bit layer_norm arrays 0.17 (mixed) and 0.92
    (case layout, y of the weight_offset cases below); the acc list WITHOUT the saved statistics fails 24
    of the 50 golden layer_norm cases in the case layout (dx up to 2.5e3 x the bound: the rounded mean and
    rstd). weight_offset in the case layout: the adapter rounds weight + offset to the case dtype, a
    rounding of w, i.e. of x_hat * w in y and of g = dy * w in dx: ``rounds xhat_w=input, g=input`` plus
    the above (was epi_d; golden normal_zc_f16_4x128, normal_zc_bf16_24x40 pass, y at 0.92 x its bound).
    CUDA keeps the presets measured on the GPU (docs/gpu_probe.md): saved statistics not measured there.
    Calls of more than SAVED_MAX_ELEMENTS (4M) elements keep the presets: a contract beyond them is judged
    on whole arrays in NumPy, the presets in blocks of bounded memory (the limits suite's 2^31 elements).
  - batch_norm, instance_norm, group_norm: stats_d. With float32 parameters (or float32 running
    statistics) torch's mixed kernels pass strict (every golden and random affine case), but a
    parameter-free call runs the all-d kernel, whose mean/rstd are rounded to the case dtype
    (finding 2): strict fails it (random: 1.2e3 x bound for bf16 batch_norm y, 80-1.6e3 x for the
    others; golden instance_norm/normal_noaffine_bf16_2x2x8x8 and
    group_norm/normal_noaffine_g2_bf16_2x8x4x4), stats_d passes. A contract is per (op, dtype),
    so the weaker one is declared. In the "case" layout every call is all-d: stats_d passes the
    golden layer/group_norm cases except the fp16 eps=1e-12 overflow above; batch_norm and
    instance_norm still fail on their RUNNING STATISTICS (torch updates them with case-dtype tensor
    arithmetic, reproduced bit for bit in bf16 as rd(rd(rd(1 - m) * rv) + rd(rd(m) * rd(var * n /
    (n - 1)))), about one bf16 ulp off, finding 4; no contract covers that - reported, not
    accepted) and instance_norm's parameter gradients in eval mode (torch sums the N per-instance
    copies in the case dtype, which stats_d allows by its definition, but the checker's eval-path
    bound, bounds/standardize.py affine_bounds, does not model d-dtype accumulators yet).
  - weight_norm: stats_d. dim=0 and the last axis use torch's fused kernel (strict passes); dim=None
    and middle axes use the composite v * (g / norm_except_dim(v)), whose norm is rounded to the
    case dtype: strict fails (up to 4.9e3 x), stats_d passes.
  - add_norm, adaptive_layer_norm: strict. The compositions upcast to float32 and cast once (every
    golden case and the production suite's recipes pass strict in both layouts).
  - lp_normalize: epi_d. F.normalize is a composite: ||x|| is rounded to the case dtype, then the
    division, and autograd's backward rounds every intermediate; stats_d fails (up to 6 x on
    grad x), epi_d passes - except where ||x|| overflows fp16 (e.g. 128 values of 1e4) and y
    becomes 0: a defect no contract accepts.
  - local_response_norm: epi_d. F.local_response_norm is a composite of tensor ops each rounding to
    the case dtype (x*x, the window average, *alpha + k, **beta, the division); stats_d fails (up
    to 1.4 x), epi_d passes - except where x*x overflows fp16 (|x| >= 256: y becomes 0), a defect.
    On CPU, 4-D and higher fp16/bf16 inputs raise NotImplementedError ("avg_pool3d_out_frame" not
    implemented for 'Half'/'BFloat16'): a torch limitation, raised as a case error.

On CUDA (measured on an NVIDIA H200 and again on an H100, torch 2.11.0+cu130, cuDNN 9.19, by
benchmarks/gpu_probe.py; the figures are in docs/gpu_probe.md, generated by that script):
  - batch_norm, instance_norm in float16/bfloat16: stats_d in both layouts. torch's CUDA batch-norm
    kernels (native_batch_norm; instance_norm runs them on an (1, N*C, ...) view; cuDNN is used only
    by F.batch_norm for float16) return float32 parameter gradients whose error, against the float64
    sums and without any bound, is ~0.06 u_d * sum|terms| in both float16 and bfloat16 (651 and 9.4e3
    u32 * sum|terms| on 16x3x4x5): it scales with the case dtype's unit roundoff, which a float32
    accumulation cannot give: accumulators held in the case dtype, what stats_d models. strict fails
    them up to 1.2e3 x; stats_d passes every golden case but a few grad x, which stay listed in
    known_failures/torch-cuda*.txt (they pass epi_d; declaring epi_d to absorb them is not done
    without the mechanism).
  - layer_norm, group_norm in float16/bfloat16 with float32 weight or bias: torch's CUDA kernels
    raise ("expected scalar type Half but found Float"): their mixed-dtype kernels exist on CPU
    only. Refused here (skipped with that reason); torch-cuda-caseparams judges those cases with
    parameters in the case dtype.

torch defects found while measuring (raised, never worked around):
* group_norm backward with weight=None and a bias raises "tensor does not have a device" on CPU
  (native_group_norm_backward with an undefined gamma and the dbias output requested; F.group_norm
  too). Golden group_norm/normal_noweight_g3_f32_3x6x7 is an error for that reason.
* torch._weight_norm with v.shape[dim] == 0 kills the process with SIGFPE (guarded above).
"""
from __future__ import annotations

import dataclasses

import warnings
from typing import Mapping

import numpy as np

from ... import registry
from . import _translate as T
from . import torch_composites as TC
from . import torch_ops as OPS_
from .torch_ops import (ONNX_TRAINING, Refused, _running, _suggested_format,  # noqa: F401  (re-exported)
                        _verify_batch_size, onnx_momentum_to_torch)
from ...spec import DEFAULT
from .base import Call, Contract, Returned

DTYPES = ("float64", "float32", "float16", "bfloat16")
LOW = ("float16", "bfloat16")
SUPPORTED = ("batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm", "local_response_norm",
             "lp_normalize", "weight_norm", "norm_quant", "add_norm", "adaptive_layer_norm") + tuple(TC.COMPOSITES)
NO_TORCH = {
    "mean_variance_norm": "torch has no native mean_variance_norm; ONNX MeanVarianceNormalization has no torch "
                          "op (it would have to be composed from torch.mean/var, a re-implementation)",
    "weight_standardization": "torch has no native weight_standardization; torch.nn has no such layer (timm and "
                              "BiT compose it from batch_norm or mean/var, a re-implementation)",
    "min_max_scale": "torch has no native min_max_scale; there is no torch op for (x - min) / (max - min) "
                     "(composing amin/amax would be a re-implementation)",
    "z_score": "torch has no native z_score; there is no torch op for (x - mean) / std with ddof "
               "(composing mean/std would be a re-implementation)",
    "unified_norm": "torch has no native unified_norm; UnifiedNorm exists only as third-party modules, "
                    "not as a torch op",
    "offline_batch_norm": "torch has no native offline_batch_norm; it is refnorm's framework instance of "
                          "batch_norm (check torch's batch_norm under that name)",
    "power_norm": "torch has no native power_norm; PowerNorm exists only as the authors' fairseq module "
                  "(MaskPowerNorm), not as a torch op",
    "batch_renorm": "torch has no native batch_renorm; torch.nn has no Batch Renormalization layer",
}
# the inputs of each op that are activations (case dtype in every layout); the others are parameters
ACTIVATIONS = T.ACTIVATIONS
# the contract of float16/bfloat16 calls (module docstring, "Contracts"); unlisted ops: strict
LOW_CONTRACT = {"batch_norm": "stats_d", "instance_norm": "stats_d", "group_norm": "stats_d",
                "layer_norm": "stats_d", "weight_norm": "stats_d", "lp_normalize": "epi_d",
                "local_response_norm": "epi_d", **TC.LOW_CONTRACT}
# the ops whose torch CPU backward forms x_hat per element from the mean and rstd it returns (its saved
# statistics: torch.native_layer_norm's LayerNormBackwardKernel reads mean/rstd as saved, a = rstd,
# b = -rstd * mean): judged at them (module docstring, "Contracts"). rms_norm returns no statistic.
SAVED_STATS = ("layer_norm",)
# torch CPU's float16/bfloat16 layer_norm as rounding points, in place of its preset (with its saved statistics:
# the mean and rstd it stores in the case dtype are read back as returned, so stats_d's rounds mean, rstd are
# not needed; module docstring, "Contracts"): dgamma/dbeta partials in the case dtype; with weight_offset in
# the case-dtype layout, weight + offset rounded to it by this adapter (a rounding of w: of x_hat * w in y,
# of g = dy * w in dx)
_DW = {"dweight": "input", "dbias": "input"}
# a contract beyond the presets is judged on whole arrays in NumPy (bounds/saved.py): beyond this many
# elements of x the presets above, judged in blocks of bounded memory (stream.py), are declared instead
SAVED_MAX_ELEMENTS = 1 << 22
CPU_POINTS = {("layer_norm", "stats_d"): {"acc": _DW},
              ("layer_norm", "epi_d"): {"rounds": {"xhat_w": "input", "g": "input"}, "acc": _DW}}
CUDA_UNAVAILABLE = "CUDA is not available on this machine (torch.cuda.is_available() is False)"
def _import_torch():
    try:
        import torch
    except ImportError as e:             # pragma: no cover - depends on the environment
        raise RuntimeError(f"torch is not installed ({e}); pip install torch==2.13.0") from e
    return torch


class TorchBackend:
    """torch's normalization ops on ``device`` (module docstring)."""

    def __init__(self, device: str = "cpu", param_dtype: str = "float32"):
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device {device!r}: expected 'cpu' or 'cuda'")
        if param_dtype not in ("float32", "case"):
            raise ValueError(f"param_dtype {param_dtype!r}: expected 'float32' or 'case'")
        self.device = device
        self.param_dtype = param_dtype
        self.name = f"torch-{device}" if param_dtype == "float32" else f"torch-{device}-caseparams"

    # ------------------------------------------------------------------ protocol
    def available(self) -> str | None:
        try:
            import torch
        except ImportError as e:
            return f"torch is not installed ({e}); pip install torch==2.13.0"
        if self.device == "cuda" and not torch.cuda.is_available():
            return CUDA_UNAVAILABLE
        return None

    def supports(self, call: Call) -> str | None:
        """The protocol's check: the configuration (``supports_config``) and the shapes."""
        reason = self.supports_config(call.op, call.dtype, call.config, call.training)
        if reason:
            return reason
        if (self.device == "cuda" and self.param_dtype == "float32" and call.dtype in LOW
                and call.op in ("layer_norm", "group_norm", "group_norm_silu")
                and any(k in call.inputs for k in ("weight", "bias"))):
            return (f"torch's CUDA {call.op} takes its weight and bias in the input's dtype only (float32 "
                    f"parameters with {call.dtype} input raise 'expected scalar type ... but found Float'; the "
                    "mixed-dtype kernel is CPU-only): judge these cases with --backend torch-cuda-caseparams")
        x = call.inputs.get("x")
        if (call.op == "local_response_norm" and self.device == "cpu" and call.dtype in LOW
                and x is not None and np.ndim(x) >= 4):
            return (f"torch CPU has no {call.dtype} avg_pool3d, which F.local_response_norm uses for inputs "
                    "with 4 or more dimensions (NotImplementedError: avg_pool3d_out_frame)")
        return None

    def supports_config(self, op: str, dtype: str, config: Mapping, training: bool) -> str | None:
        """Whether torch has this (op, dtype, configuration), whatever the shapes."""
        reason, cfg = T.preamble(op, dtype, config, supported=SUPPORTED, unsupported=NO_TORCH, dtypes=DTYPES,
                                 backend="torch")
        if reason:
            return reason
        if op == "batch_norm":
            if cfg["convention"] == "onnx":
                if training:
                    m = 0.9 if cfg["momentum"] is DEFAULT else cfg["momentum"]
                    if isinstance(m, (int, float)) and not isinstance(m, bool) and onnx_momentum_to_torch(m) is None:
                        return (f"{ONNX_TRAINING}; besides, ONNX momentum {m!r} has no exact torch equivalent "
                                f"(1 - {m!r} is not exact in float64)")
                    return ONNX_TRAINING
            elif training and isinstance(cfg["eps"], (int, float)) and cfg["eps"] <= 0:
                return (f"F.batch_norm refuses eps={cfg['eps']!r} in training "
                        "('batch_norm eps must be positive during training')")
        elif op == "rms_norm":
            if cfg["eps_placement"] != "inside":
                return (f"rms_norm eps_placement={cfg['eps_placement']!r}: torch's rms_norm has eps inside the "
                        "sqrt only (1 / (rms + eps) is not in torch)")
            if float(cfg["weight_offset"]) != 0.0:
                return (f"rms_norm weight_offset={cfg['weight_offset']!r}: torch's rms_norm scales by the weight "
                        "itself; a (offset + weight) scale (Gemma) is not in torch")
        elif op == "local_response_norm":
            if cfg["window"] == "onnx" and int(cfg["size"]) % 2 == 0:
                return (f"local_response_norm window='onnx' with even size={cfg['size']}: torch's window "
                        "[c - size//2, c + (size-1)//2] is one channel lower than ONNX's; they agree for odd "
                        "size only")
        elif op == "lp_normalize":
            if cfg["zero_rule"] == "onnx":
                return ("lp_normalize zero_rule='onnx': F.normalize divides by max(norm, eps); no eps gives "
                        "ONNX's rule (eps=0: NaN on an all-zero slice; eps > 0: changes slices with "
                        "0 < norm < eps, and dx = dy/eps instead of 0 on an all-zero slice)")
        elif op == "weight_norm":
            d = cfg["dim"]
            if d is not None and not isinstance(d, bool) and isinstance(d, (int, np.integer)) and d == -1:
                return ("weight_norm dim=-1 is refused by refnorm (torch reads it as the whole tensor, NumPy as "
                        "the last axis); use dim=None or dim=v.ndim - 1")
        return None

    def contract(self, call: Call) -> Contract:
        """Measured on torch 2.13 CPU (module docstring)."""
        return self.contract_for(call.op, call.dtype, call.inputs, call.state, call.config)

    def contract_for(self, op: str, dtype: str, inputs=(), state=(), config=None) -> Contract:
        """The contract of one call: the rounding points below (``preset_for``), and on CPU, for the ops
        whose backward forms x_hat from the mean and rstd torch returns (SAVED_STATS), the backward judged
        at those statistics (``recompute xhat=saved_stats``; module docstring, "Contracts")."""
        c = self.preset_for(op, dtype, inputs, state, config)
        x = inputs.get("x") if hasattr(inputs, "get") else None
        if op in SAVED_STATS and self.device == "cpu" and np.size(x) <= SAVED_MAX_ELEMENTS:
            narrow = CPU_POINTS.get((op, c.kind))
            c = c if narrow is None else Contract("strict", c.reduction, **narrow)
            return dataclasses.replace(c, recompute={**c.recompute, "xhat": "saved_stats"})
        return c

    def preset_for(self, op: str, dtype: str, inputs=(), state=(), config=None) -> Contract:
        """The contract of one call but its saved statistics (``contract_for``). Reduction: "serial" for
        lp_normalize and weight_norm (torch CPU's
        vector_norm / _weight_norm sum in 8 AVX2 lanes, each serially over n/8 terms: 344 u at
        n = 65536, beyond the block model), "block" otherwise. Kind: module docstring; batch_norm,
        group_norm and instance_norm in float16/bfloat16 are "strict" when float32 parameters or
        running statistics make torch pick its mixed-dtype kernel, "stats_d" otherwise; on CUDA
        batch_norm and instance_norm are "stats_d" in every layout (measured, module docstring)."""
        red = "serial" if op in ("lp_normalize", "weight_norm") else "block"
        if dtype not in LOW:
            return Contract("strict", red)
        kind = LOW_CONTRACT.get(op, "strict")
        if op in ("batch_norm", "instance_norm") and self.device == "cuda":
            return Contract("stats_d", red)      # CUDA: parameter-gradient accumulators in d (module docstring)
        if op == "layer_norm" and self.param_dtype == "case" and float((config or {}).get("weight_offset", 0.0)):
            # torch has no zero-centred gamma: this adapter passes weight + offset, rounded to the case
            # dtype by its own tensor addition, a pointwise rounding to d before the affine: epi_d
            return Contract("epi_d", red)
        if op in ("batch_norm", "group_norm", "instance_norm") and self.param_dtype == "float32":
            has_params = any(k in inputs for k in ("weight", "bias"))
            has_stats = op == "batch_norm" and "running_mean" in state
            if has_params or has_stats:
                kind = "strict"
        if op in ("batch_norm", "instance_norm") and self.param_dtype == "case" and "running_mean" in state:
            kind = "epi_d"   # running statistics updated with case-dtype tensor arithmetic (1 - momentum rounded)
        if op == "weight_norm":
            dim = (config or {}).get("dim", 0)
            v = inputs.get("v") if hasattr(inputs, "get") else None
            if v is not None and dim is not None and dim in (0, np.ndim(v) - 1):
                kind = "strict"      # the fused kernel: float32 internals, one rounding
        return Contract(kind, red)

    def run(self, call: Call) -> Returned:
        cfg = T.start_run(self, call)
        torch = _import_torch()
        spec = registry.get(call.op)

        act_dt = _torch_dtype(torch, call.dtype)
        par_dt = torch.float32 if (self.param_dtype == "float32" and call.dtype in LOW) else act_dt
        acts = ACTIVATIONS.get(call.op, ("x",))
        want_grad = bool(call.cotangents)
        leaves = {}
        for k, a in call.inputs.items():
            t = _to_torch(torch, f"input {k!r}", a, act_dt if k in acts else par_dt, self.device)
            if want_grad:
                t.requires_grad_(True)
            leaves[k] = t
        state = {}
        for k, a in call.state.items():
            if k in spec.integer_state:
                arr = np.asarray(a)
                if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
                    raise ValueError(f"{call.op}: state {k!r} must hold whole numbers, got {arr!r}")
                state[k] = torch.tensor(arr.astype(np.int64), dtype=torch.int64, device=self.device)
            else:
                state[k] = _to_torch(torch, f"state {k!r}", a, par_dt, self.device)

        with warnings.catch_warnings():
            # F.rms_norm warns that fp16/bf16 input with a float32 weight cannot use its fused kernel:
            # expected in the float32-parameter layout (the composite path is torch's mixed-dtype rms_norm)
            warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")
            try:
                outputs, new_state = self._op(call.op)(torch, leaves, cfg, state, call.training)
            except Refused:
                raise
            except Exception as e:
                raise RuntimeError(f"torch's forward of {call.op} raised {type(e).__name__}: {e}") from e
            grads = {}
            if want_grad and spec.differentiable:
                dkey = spec.differentiable[0]
                out = outputs[dkey]
                if dkey not in call.cotangents:
                    raise KeyError(f"{call.op}: cotangents given without one for the differentiable output {dkey!r}")
                cot = _to_torch(torch, f"cotangent {dkey!r}", call.cotangents[dkey], out.dtype, self.device)
                if tuple(cot.shape) != tuple(out.shape):
                    raise ValueError(f"{call.op}: cotangent {dkey!r} has shape {tuple(cot.shape)}; torch's output "
                                     f"has shape {tuple(out.shape)}")
                names = list(leaves)
                outs, cots = [out], [cot]
                for k2 in T.flowing_outputs(spec, cfg, call.cotangents, outputs)[1:]:     # add_norm's residual_out
                    outs.append(outputs[k2])
                    cots.append(_to_torch(torch, f"cotangent {k2!r}", call.cotangents[k2], outputs[k2].dtype,
                                          self.device))
                # materialize_grads: an input the output does not depend on gets torch's zero gradient
                try:
                    res = torch.autograd.grad(outs, [leaves[k] for k in names], cots, allow_unused=True,
                                              materialize_grads=True)
                except Exception as e:
                    raise RuntimeError(f"torch's backward of {call.op} (gradients of {', '.join(names)}) raised "
                                       f"{type(e).__name__}: {e}") from e
                grads = {k: _to_numpy(torch, g) for k, g in zip(names, res)}
        return Returned({k: _to_numpy(torch, v) for k, v in outputs.items()}, grads,
                        {k: _to_numpy(torch, v) for k, v in new_state.items()})

    def _op(self, op: str):
        """The function computing ``op``: torch's own op (torch_ops.OPS) or a composite (torch_composites.COMPOSITES)."""
        fn = OPS_.OPS.get(op) or TC.COMPOSITES[op]
        return lambda *a: fn(self, *a)

def _torch_dtype(torch, name: str):
    return {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
            "bfloat16": torch.bfloat16}[name]


def _to_torch(torch, what: str, a, dtype, device):
    """A fresh tensor holding exactly the values of NumPy array ``a``, in ``dtype`` (never a rounding)."""
    a = np.asarray(a)
    name = a.dtype.name
    if name == "bfloat16":                  # the same bits (as int16: NumPy has no bfloat16 torch knows)
        src = torch.from_numpy(np.array(a.view(np.int16), copy=True)).view(torch.bfloat16)
    elif name in ("float16", "float32", "float64"):
        src = torch.from_numpy(np.array(a, copy=True))
    else:
        raise TypeError(f"{what} has dtype {a.dtype}; expected float64, float32, float16 or bfloat16")
    t = src.to(dtype)
    if t.dtype != src.dtype:
        back = t.to(src.dtype)
        same = (back == src) | (torch.isnan(back) & torch.isnan(src))
        if not bool(same.all()):
            raise ValueError(f"{what} ({src.dtype}) is not exactly representable in {dtype}; "
                             "the adapter does not round inputs")
    return _with_layout(torch, t.to(device), a)


def _with_layout(torch, t, a: np.ndarray):
    """``t`` (contiguous, ``a``'s values) re-laid with ``a``'s memory layout: its strides, and its offset
    into the buffer it views (refnorm.golden.layouts), so torch runs its channels_last, transposed or
    strided kernels, as on a user's tensor of that layout. A C-contiguous ``a`` gives ``t`` itself."""
    if a.ndim < 2 or a.flags.c_contiguous and a.base is None:
        return t
    item = a.itemsize
    if any(st % item or st < 0 for st in a.strides):
        return t
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    offset = (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // item
    span = offset + 1 + sum((n - 1) * (st // item) for n, st in zip(a.shape, a.strides) if n > 0)
    storage = torch.zeros(max(span, 1), dtype=t.dtype, device=t.device)
    out = torch.as_strided(storage, a.shape, [st // item for st in a.strides], offset)
    out.copy_(t)
    return out


def _to_numpy(torch, t) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e8m0fnu):   # no NumPy float8: the bits,
        import ml_dtypes                                                            # as ml_dtypes'
        return t.view(torch.uint8).numpy().copy().view(getattr(ml_dtypes, str(t.dtype).split(".")[1]))
    if t.dtype == torch.float4_e2m1fn_x2:     # two e2m1 per byte, element 2i in the low nibble: unpacked
        import ml_dtypes
        b = t.view(torch.uint8).numpy()
        return np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[:-1] + (-1,)).astype(np.uint8).view(
            ml_dtypes.float4_e2m1fn)
    if t.dtype == torch.bfloat16:                                 # the bits, as ml_dtypes' (its layout kept)
        import ml_dtypes
        return t.view(torch.int16).numpy().copy(order="K").view(ml_dtypes.bfloat16)
    return t.numpy().copy()
