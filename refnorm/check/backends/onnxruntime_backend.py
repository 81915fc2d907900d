"""The onnxruntime adapter: ``OnnxruntimeBackend(provider="cpu" | "cuda")``, forward only.

For every call it builds a one-node ONNX model with ``onnx.helper`` (the op's own ONNX operator,
never a composition), runs it in an ``onnxruntime.InferenceSession`` on the CPU execution provider
(or the CUDA one, with CPU fallback disabled, so nothing runs elsewhere silently) and returns its
outputs. onnxruntime is an inference engine: no gradients. The backend declares ``forward_only =
True`` (base.py), so the checker lists the golden cases' gradients as unchecked, never as passed.
onnx and onnxruntime are imported inside the methods only (``import refnorm`` never imports them).

Ops and the ONNX node (opset in brackets):

    layer_norm           LayerNormalization [17], axis = -len(normalized_shape), epsilon,
                         stash_type = 1 (float32, the default). Outputs Y, Mean, InvStdDev = refnorm's
                         y, mean, rstd (keepdims shapes, as ONNX's). For float64 cases Mean/InvStdDev
                         are float32 (stash_type; onnxruntime implements no stash_type = double), so
                         they are not returned (a statistic less precise than the case is not judged).
    group_norm           GroupNormalization [21]: scale and bias per CHANNEL (C,), refnorm's and
                         torch's convention. GroupNormalization-18 took them per GROUP (G,), a
                         different function (that is why opset 21 changed it); it is not used.
                         stash_type = 1, and 11 (double) for float64 cases (the function body casts x
                         to the stash type: stash_type = 1 would compute a float64 case in float32).
                         onnxruntime has no GroupNormalization kernel: it runs the ONNX function body,
                         which computes Var = E[x^2] - E[x]^2 (one pass; see "Disagreements").
    batch_norm           BatchNormalization [15]. Eval with running statistics: training_mode = 0.
                         Training (or no running statistics: batch statistics, torch's rule):
                         training_mode = 1, momentum = refnorm's ONNX m (convention="onnx");
                         outputs Y, running_mean, running_var. ONNX's running_var takes the BIASED
                         batch variance and m weights the OLD value: convention="torch" training with
                         running statistics is skipped (no ONNX attribute gives torch's unbiased
                         update), without running statistics the dummy input_mean/input_var (0, 1)
                         are required inputs (and ONNX's shape inference requires all three outputs
                         in training mode) whose updated values are not read. num_batches_tracked
                         (refnorm's counter of training calls) is counted here, ONNX has none.
    instance_norm        InstanceNormalization [22]. Eval with running statistics: BatchNormalization
                         [15] with them (what torch.onnx exports for InstanceNorm with running stats:
                         batch_norm over the per-channel statistics); state returned unchanged.
                         Training with running statistics: skipped (ONNX has none for instance norm).
    rms_norm             RMSNormalization [23], axis = -len(normalized_shape), epsilon (refnorm's
                         eps=None is torch's: finfo(float32).eps = 2^-23 for fp16/bf16/fp32, 2^-52 for
                         float64), stash_type 1 (11 for float64).
                         eps_placement="outside" and weight_offset != 0 are not in ONNX: skipped.
    local_response_norm  LRN [13], size, alpha, beta, bias = k. onnxruntime's kernel takes 4-D input
                         only: x (N, C, *) is passed as (N, C, prod(*), 1) (LRN works across channels
                         at each position, so the reshape changes nothing) and y reshaped back. Even
                         size and beta <= 0 are skipped: onnxruntime refuses them ("size_ % 2 == 1",
                         "beta_ > 0.0f" in lrn.h), though the spec allows them; for odd size torch's
                         window is ONNX's.
    lp_normalize         LpNormalization [22], axis = dim (one axis; ONNX has no list), p in {1, 2}.
                         ONNX has no eps: zero_rule="onnx" is its rule exactly; zero_rule="torch"
                         (x / max(norm, eps)) is the same function on every slice whose norm is 0 or
                         >= eps, so such calls are run and the others skipped (supports looks at the
                         inputs).
    mean_variance_norm   MeanVarianceNormalization [13], axes. ONNX has no eps attribute: its function
                         body adds 1e-9 (a float32 constant) to the std, so only eps = 1e-9 is run.
    weight_norm, weight_standardization, z_score, min_max_scale, unified_norm, offline_batch_norm,
    power_norm, batch_renorm: skipped, ONNX has no
                         such operator (exporters emit compositions of elementary ops).

Absent optional inputs. ONNX's LayerNormalization, GroupNormalization, BatchNormalization,
InstanceNormalization and RMSNormalization REQUIRE scale (and the last three bias): an absent weight
is passed as ones and an absent bias as zeros, in the case dtype, as torch.onnx does (exact: x * 1
and x + 0 change nothing).

Attributes are 32-bit floats in ONNX (epsilon, momentum, alpha, beta, bias): eps = 1e-5 is stored as
9.99999974738e-06. For float32 and narrower cases that rounding (relative 2^-24) is within every
bound; a float64 case whose float attribute is not a float32 number is skipped with the reason.

dtypes: the case dtype throughout (a float16 model for a float16 case). A kernel onnxruntime lacks
for a dtype ("NOT_IMPLEMENTED: Could not find an implementation") makes the case skipped with that
message (bfloat16 has none of these ops on the CPU provider).

Contracts (``contract``). Measured on onnxruntime 1.32.0 CPU (onnx 1.23.2, 2 cores) by running this
adapter through refnorm's checker under each contract on every golden case:
* strict, "block" reductions: every op in every dtype onnxruntime runs (float32, float16 and bfloat16
  LayerNormalization: all golden cases pass it but the defects below). strict is the empty list of
  rounding points (contracts.py): nothing narrower to declare for layer_norm and rms_norm; forward only,
  so no saved statistics either.
* group_norm: "serial" reductions: the function body's ReduceMean sums a constant row of 65536 float32
  values with an error of 1413 u, beyond the block model's 514 u (a ReduceSum probe; tests); and in
  float16/bfloat16 epi_d: the function body casts the normalized x back to the case dtype BEFORE the
  affine Mul/Add (NormalizedT = Cast(NormalizedU, to=T)), x_hat rounded before the epilogue - strict
  fails 6 of 13 float16 golden group_norm cases, epi_d fails only the one-pass ones below.

Disagreements with the reference, and who is right (known_failures/onnxruntime.txt; tests):
* GroupNormalization: onnxruntime has no kernel and runs the ONNX function body, which computes
  Var = ReduceMean(x*x) - ReduceMean(x)^2 in one pass. With |mean|/std = c the variance loses about
  c^2 u: the golden rows with mean 1e3 (std 1) are off by up to 0.97 in y (170x the bound), and rows
  that are constant, or nearly (mean 1e4, std 1), get a NEGATIVE variance and y = NaN. The spec's
  equation is the exact normalization, which refnorm (two-pass) computes: refnorm is right.
* MeanVarianceNormalization: onnxruntime's CPU kernel divides by sqrt(var) WITHOUT the 1e-9 the
  spec's function body adds (Processed_STD = Add(STD, 1e-9)): a constant slice gives 0/0 = NaN where
  the spec (and refnorm) give 0, and a slice with std ~ 1e-9 differs by a factor ~2. The spec is
  right, onnxruntime deviates from it. For float64/float16/bfloat16 (types the spec lists) there is
  no kernel and the function body does not even type-check (it adds a float32 Constant to T): the
  model is rejected, an ONNX defect.
* LRN: onnxruntime keeps a sliding window sum (adds the entering channel's x^2, subtracts the leaving
  one's), so a large square's rounding error outlives its window: up to 2.3x the bound in float32 on
  heavy-tailed input, reproduced to 2 ulp by a float32 emulation of that loop. refnorm (each window
  summed afresh) is right.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ... import registry
from ...norms.rms_norm import default_eps
from ...spec import DEFAULT
from . import _translate as T
from .base import Call, Contract, Returned

DTYPES = ("float64", "float32", "float16", "bfloat16")
LOW = ("float16", "bfloat16")
SUPPORTED = ("layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "local_response_norm",
             "lp_normalize", "mean_variance_norm")
NO_ONNX = {
    "weight_norm": "ONNX has no weight-normalization operator (torch.onnx exports weight_norm as a composition "
                   "of ReduceL2/Div/Mul)",
    "weight_standardization": "ONNX has no weight-standardization operator",
    "z_score": "ONNX has no z_score operator (MeanVarianceNormalization adds eps to the std and has ddof 0)",
    "min_max_scale": "ONNX has no min-max scaling operator",
    "add_norm": "ONNX has no residual add + norm operator (onnxruntime's contrib SkipLayerNormalization / "
                "SkipSimplifiedLayerNormalization, com.microsoft, computes one; not wired into this adapter)",
    "adaptive_layer_norm": "ONNX has no adaptive LayerNorm operator (LayerNormalization's scale and bias are "
                           "per-feature, not per-sample)",
    "unified_norm": "ONNX has no unified_norm operator",
    "offline_batch_norm": "ONNX has no offline_batch_norm operator (refnorm's framework instance of batch_norm)",
    "power_norm": "ONNX has no power_norm operator",
    "batch_renorm": "ONNX has no batch_renorm operator",
    "gated_norm": "ONNX has no gated norm operator (Mamba2's RMSNormGated exports as Sigmoid/Mul and "
                  "RMSNormalization or a decomposition; no single operator to wire)",
    "dyt": "ONNX has no dynamic-tanh operator (an exporter writes Tanh, Mul and Add: no normalization op to "
           "check)",
    "poly_norm": "ONNX has no PolyNorm operator (an exporter writes Pow, ReduceMean, Sqrt and Div: no "
                 "normalization op to check)",
    "norm_quant_block": "ONNX has no norm with a block-scaled quantized output (QuantizeLinear's blocked mode "
                        "takes its scales as an input: no amax-derived, E8M0 or two-level NVFP4 scales)",
    "group_norm_silu": "ONNX has no GroupNorm + SiLU operator (GroupNormalization then Sigmoid and Mul in the "
                       "graph); onnxruntime's contrib com.microsoft GroupNorm (activation=1: SiLU) takes NHWC input and "
                       "is a CUDA/ROCm kernel, not wired into this adapter",
}
OPSET = {"layer_norm": 17, "group_norm": 21, "batch_norm": 15, "instance_norm": 22, "rms_norm": 23,
         "local_response_norm": 13, "lp_normalize": 22, "mean_variance_norm": 13}
MVN_EPS = (1e-9, float(np.float32(1e-9)))        # ONNX's constant (a float32 tensor) and its decimal name
INSTALL = "pip install onnx onnxruntime (or pip install 'refnorm[onnx]')"
ONNX_TORCH_TRAINING = ("batch_norm convention='torch' in training with running statistics is not expressible in "
                       "ONNX: BatchNormalization's running_var takes the BIASED batch variance (torch's the "
                       "unbiased var * n / (n - 1)) and no attribute changes that")
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


def _f32_exact(v) -> bool:
    v = float(v)
    return not math.isfinite(v) or float(np.float32(v)) == v


def _channel_affine(ins, x, dt):
    """The per-channel (C,) scale and bias of an ONNX normalization node: the call's weight and bias, ones
    and zeros (in dt) where it has none."""
    C = x.shape[1]
    return ins.get("weight", np.ones((C,), dt)), ins.get("bias", np.zeros((C,), dt))


class OnnxruntimeBackend:
    """One-node ONNX models on onnxruntime (module docstring). Forward only."""

    forward_only = True

    def __init__(self, provider: str = "cpu"):
        if provider not in PROVIDERS:
            raise ValueError(f"provider {provider!r}: expected 'cpu' or 'cuda'")
        self.provider = provider
        self.name = "onnxruntime" if provider == "cpu" else f"onnxruntime-{provider}"

    # ------------------------------------------------------------------ protocol
    def available(self) -> str | None:
        try:
            import onnx  # noqa: F401
            import onnxruntime as ort
        except ImportError as e:
            return f"onnx/onnxruntime is not installed ({e}); {INSTALL}"
        if PROVIDERS[self.provider] not in ort.get_available_providers():
            return (f"onnxruntime's {PROVIDERS[self.provider]} is not available here (available: "
                    f"{', '.join(ort.get_available_providers())})")
        return None

    def supports(self, call: Call) -> str | None:
        """supports_config, and for lp_normalize's torch zero rule the inputs' norms."""
        reason = self.supports_config(call.op, call.dtype, call.config, call.training, bool(call.state))
        if reason:
            return reason
        if call.op == "lp_normalize":
            cfg = T.config(call.op, call.config)
            x = call.inputs.get("x")
            if cfg["zero_rule"] == "torch" and x is not None:
                eps = float(cfg["eps"])
                if eps > 0:
                    x64 = np.asarray(x).astype(np.float64)
                    ax = int(cfg["dim"]) % max(x64.ndim, 1)
                    with np.errstate(all="ignore"):
                        nrm = np.sum(np.abs(x64) ** float(cfg["p"]), axis=ax) ** (1.0 / float(cfg["p"]))
                    small = (nrm > 0) & (nrm < eps * (1 + 1e-6))
                    if np.any(small):
                        return (f"lp_normalize zero_rule='torch' with a slice whose norm ({float(nrm[small].min()):.3g}) "
                                f"is below eps={eps!r}: torch's rule divides by eps there, ONNX's LpNormalization "
                                "(no eps) by the norm: a different function on this input")
        return None

    def supports_config(self, op: str, dtype: str, config: Mapping, training: bool, has_state: bool = False) -> str | None:
        """Whether ONNX has an operator for (op, dtype, configuration, training, running statistics)."""
        reason, cfg = T.preamble(op, dtype, config, supported=SUPPORTED, unsupported=NO_ONNX, dtypes=DTYPES,
                                 backend="onnxruntime")
        if reason:
            return reason
        floats = {}
        if op in ("layer_norm", "group_norm", "batch_norm", "instance_norm"):
            floats["epsilon"] = cfg["eps"]
        if op == "batch_norm":
            if training and has_state:
                if cfg["convention"] == "torch":
                    return ONNX_TORCH_TRAINING
                m = 0.9 if cfg["momentum"] is DEFAULT else cfg["momentum"]
                if m is None:
                    return "batch_norm convention='onnx' momentum=None: ONNX has no cumulative average"
                floats["momentum"] = m
        elif op == "instance_norm":
            if training and has_state:
                return ("instance_norm with running statistics in training: ONNX InstanceNormalization has no "
                        "running statistics")
        elif op == "layer_norm" and float(cfg["weight_offset"]) != 0.0:
            return (f"layer_norm weight_offset={cfg['weight_offset']!r}: ONNX LayerNormalization scales by Scale "
                    "itself (a zero-centred gamma would be a separate Add node)")
        elif op == "rms_norm":
            if cfg["eps_placement"] != "inside":
                return (f"rms_norm eps_placement={cfg['eps_placement']!r}: ONNX RMSNormalization has eps inside the "
                        "square root only")
            if float(cfg["weight_offset"]) != 0.0:
                return (f"rms_norm weight_offset={cfg['weight_offset']!r}: ONNX RMSNormalization scales by Scale "
                        "itself (an offset scale would be a separate Add node)")
            floats["epsilon"] = default_eps(dtype) if cfg["eps"] is None else cfg["eps"]
        elif op == "local_response_norm":
            size = cfg["size"]
            if not T.is_int(size) or size < 1:
                return f"local_response_norm size={size!r}: expected a positive int"
            if size % 2 == 0:
                return (f"local_response_norm size={size} (even): onnxruntime's LRN kernel refuses even sizes "
                        "('size_ % 2 == 1' in lrn.h), although the ONNX spec allows them")
            if float(cfg["beta"]) <= 0:
                return (f"local_response_norm beta={cfg['beta']!r}: onnxruntime's LRN kernel refuses beta <= 0 "
                        "('beta_ > 0.0f' in lrn.h); the ONNX spec does not restrict beta")
            floats.update(alpha=cfg["alpha"], beta=cfg["beta"], bias=cfg["k"])
        elif op == "lp_normalize":
            if not T.is_int(cfg["dim"]):
                return f"lp_normalize dim={cfg['dim']!r}: ONNX LpNormalization normalizes along one axis"
            if float(cfg["p"]) not in (1.0, 2.0):
                return f"lp_normalize p={cfg['p']!r}: ONNX LpNormalization has p = 1 or 2 only"
        elif op == "mean_variance_norm":
            if float(cfg["eps"]) not in MVN_EPS:
                return (f"mean_variance_norm eps={cfg['eps']!r}: ONNX MeanVarianceNormalization has no eps attribute "
                        "(its function body adds the constant 1e-9 to the std)")
        if dtype == "float64":
            bad = {k: v for k, v in floats.items() if not _f32_exact(v)}
            if bad:
                k, v = next(iter(bad.items()))
                return (f"ONNX stores the float attribute {k} as a 32-bit float: {v!r} would become "
                        f"{float(np.float32(v))!r}, a different function at float64 precision")
        return None

    def contract(self, call: Call) -> Contract:
        return self.contract_for(call.op, call.dtype)

    def contract_for(self, op: str, dtype: str) -> Contract:
        """Measured (module docstring, "Contracts"): strict, except group_norm in float16/bfloat16 (epi_d:
        the function body casts the normalized x to the case dtype before the affine Mul/Add);
        "serial" reductions for group_norm (the function body's ReduceMean), "block" otherwise."""
        kind = "epi_d" if (op == "group_norm" and dtype in LOW) else "strict"
        return Contract(kind, "serial" if op == "group_norm" else "block")

    def run(self, call: Call) -> Returned:
        cfg = T.start_run(self, call)
        spec = registry.get(call.op)
        dt = T.np_dtype(call.dtype)
        ins = {k: _exact(f"input {k!r}", a, dt) for k, a in call.inputs.items()}
        st, nbt = T.split_state(call, spec, lambda what, a: _exact(what, a, dt))
        if st and not {"running_mean", "running_var"} <= set(st):
            raise ValueError(f"{call.op}: state needs both 'running_mean' and 'running_var', got {sorted(call.state)}")
        outputs, new_state = getattr(self, "_" + call.op)(cfg, call, ins, st, dt)
        if spec.state and call.state:
            if nbt is None:
                nbt = np.asarray(0, dtype=np.int64)
            if call.op == "batch_norm" and call.training:
                nbt = nbt + 1                         # refnorm's counter of training calls (ONNX has none)
            new_state["num_batches_tracked"] = np.asarray(nbt, dtype=np.int64)
        return Returned(outputs, {}, new_state)

    # ------------------------------------------------------------------ ONNX plumbing
    def _run_node(self, op_type, opset, inputs, outputs, attrs, dt, what):
        """Build and run a one-node model. inputs: [(name, array)]; outputs: [(name, dtype, shape)], read
        into NumPy arrays preallocated here (onnxruntime writes them through an I/O binding, which also
        carries bfloat16, a type its Python binding cannot convert)."""
        import onnx
        import onnxruntime as ort
        from onnx import helper
        vi_in = [helper.make_tensor_value_info(n, _elem(a.dtype), list(a.shape)) for n, a in inputs]
        vi_out = [helper.make_tensor_value_info(n, _elem(d), list(shape)) for n, d, shape in outputs]
        node = helper.make_node(op_type, [n for n, _ in inputs], [n for n, _, _ in outputs], **attrs)
        graph = helper.make_graph([node], f"refnorm_{what}", vi_in, vi_out)
        opsets = [helper.make_opsetid("", opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="refnorm")
        model.ir_version = helper.find_min_ir_version_for(opsets)
        onnx.checker.check_model(model)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        providers = [PROVIDERS[self.provider]]
        if self.provider != "cpu":
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        name = f"{op_type}-{opset} ({np.dtype(dt).name})"
        try:
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=providers)
        except Exception as e:
            msg = str(e).strip()
            if "NOT_IMPLEMENTED" in msg or "Could not find an implementation" in msg:
                raise NotImplementedError(f"onnxruntime {ort.__version__} ({providers[0]}) has no kernel for "
                                          f"{name}: {msg}") from e
            raise RuntimeError(f"onnxruntime refused the {name} model: {type(e).__name__}: {msg}") from e
        binding = sess.io_binding()
        for n, a in inputs:
            binding.bind_ortvalue_input(n, _ortvalue(ort, onnx, np.ascontiguousarray(a)))
        res = {}
        for n, d, shape in outputs:
            res[n] = np.empty(shape, dtype=d)
            binding.bind_ortvalue_output(n, _ortvalue(ort, onnx, res[n]))
        try:
            sess.run_with_iobinding(binding)
        except Exception as e:
            raise RuntimeError(f"onnxruntime's {name} raised {type(e).__name__}: {str(e).strip()}") from e
        return res

    # ------------------------------------------------------------------ ops
    # each returns (outputs: refnorm name -> array, new float state: name -> array)

    def _layer_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        k = len(T.int_list(cfg["normalized_shape"]))
        ns = x.shape[x.ndim - k:]
        w = ins.get("weight", np.ones(ns, dt))
        feeds = [("x", x), ("scale", w)] + ([("bias", ins["bias"])] if "bias" in ins else [])
        stats = call.dtype != "float64"               # Mean/InvStdDev are float32 (stash_type = 1)
        sshape = x.shape[:x.ndim - k] + (1,) * k
        f32 = np.dtype(np.float32)
        outs = [("y", dt, x.shape)] + ([("mean", f32, sshape), ("rstd", f32, sshape)] if stats else [])
        r = self._run_node("LayerNormalization", 17, feeds, outs,
                           dict(axis=-k, epsilon=float(cfg["eps"]), stash_type=1), dt, "layer_norm")
        return r, {}

    def _group_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        w, b = _channel_affine(ins, x, dt)
        r = self._run_node("GroupNormalization", 21, [("x", x), ("scale", w), ("bias", b)], [("y", dt, x.shape)],
                           dict(num_groups=int(cfg["num_groups"]), epsilon=float(cfg["eps"]),
                                stash_type=11 if call.dtype == "float64" else 1), dt, "group_norm")
        return r, {}

    def _bn_eval(self, x, ins, st, eps, dt, what):
        w, b = _channel_affine(ins, x, dt)
        r = self._run_node("BatchNormalization", 15, [("x", x), ("scale", w), ("B", b),
                                                      ("input_mean", st["running_mean"]),
                                                      ("input_var", st["running_var"])],
                           [("y", dt, x.shape)], dict(epsilon=eps, training_mode=0), dt, what)
        return {"y": r["y"]}, {"running_mean": st["running_mean"].copy(), "running_var": st["running_var"].copy()}

    def _batch_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        eps = float(cfg["eps"])
        if st and not call.training:
            return self._bn_eval(x, ins, st, eps, dt, "batch_norm")
        w, b = _channel_affine(ins, x, dt)
        C = x.shape[1]
        attrs = dict(epsilon=eps, training_mode=1)
        if st:                                        # convention onnx (supports refuses torch)
            attrs["momentum"] = 0.9 if cfg["momentum"] is DEFAULT else float(cfg["momentum"])
            running = (st["running_mean"], st["running_var"])
        else:
            # ONNX's shape inference requires all three outputs in training mode; the running ones are not read
            running = (np.zeros((C,), dt), np.ones((C,), dt))
        r = self._run_node("BatchNormalization", 15,
                           [("x", x), ("scale", w), ("B", b), ("input_mean", running[0]), ("input_var", running[1])],
                           [("y", dt, x.shape), ("running_mean", dt, (C,)), ("running_var", dt, (C,))],
                           attrs, dt, "batch_norm")
        return {"y": r["y"]}, ({"running_mean": r["running_mean"], "running_var": r["running_var"]} if st else {})

    def _instance_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        eps = float(cfg["eps"])
        if st and not call.training:
            return self._bn_eval(x, ins, st, eps, dt, "instance_norm")
        w, b = _channel_affine(ins, x, dt)
        r = self._run_node("InstanceNormalization", 22, [("x", x), ("scale", w), ("B", b)], [("y", dt, x.shape)],
                           dict(epsilon=eps), dt, "instance_norm")
        return r, {}

    def _rms_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        k = len(T.int_list(cfg["normalized_shape"]))
        w = ins.get("weight", np.ones(x.shape[x.ndim - k:], dt))
        eps = default_eps(call.dtype) if cfg["eps"] is None else float(cfg["eps"])   # torch's rule, refnorm's
        r = self._run_node("RMSNormalization", 23, [("x", x), ("scale", w)], [("y", dt, x.shape)],
                           dict(axis=-k, epsilon=eps, stash_type=11 if call.dtype == "float64" else 1), dt, "rms_norm")
        return r, {}

    def _local_response_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        if x.ndim < 3:
            raise ValueError(f"local_response_norm: x has {x.ndim} dimensions; refnorm (and torch) need at least 3")
        x4 = x.reshape(x.shape[0], x.shape[1], -1, 1)          # onnxruntime's LRN takes 4-D only
        r = self._run_node("LRN", 13, [("x", x4)], [("y", dt, x4.shape)],
                           dict(size=int(cfg["size"]), alpha=float(cfg["alpha"]), beta=float(cfg["beta"]),
                                bias=float(cfg["k"])), dt, "local_response_norm")
        return {"y": r["y"].reshape(x.shape)}, {}

    def _lp_normalize(self, cfg, call, ins, st, dt):
        r = self._run_node("LpNormalization", 22, [("x", ins["x"])], [("y", dt, ins["x"].shape)],
                           dict(axis=int(cfg["dim"]), p=int(float(cfg["p"]))), dt, "lp_normalize")
        return r, {}

    def _mean_variance_norm(self, cfg, call, ins, st, dt):
        x = ins["x"]
        axes = [int(a) % x.ndim for a in cfg["axes"]]
        r = self._run_node("MeanVarianceNormalization", 13, [("x", x)], [("y", dt, x.shape)], dict(axes=axes), dt,
                           "mean_variance_norm")
        return r, {}


# ---------------------------------------------------------------------- helpers
def _elem(dt) -> int:
    from onnx import TensorProto
    dt = np.dtype(dt)
    if dt == T.bfloat16():
        return TensorProto.BFLOAT16
    return {np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.float32): TensorProto.FLOAT,
            np.dtype(np.float16): TensorProto.FLOAT16}[dt]


def _ortvalue(ort, onnx, a: np.ndarray):
    """An OrtValue sharing ``a``'s memory (bfloat16 passed as its 16-bit words with the ONNX type)."""
    if a.dtype == T.bfloat16():
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def _exact(what: str, a, dt) -> np.ndarray:
    """A fresh NumPy array of ``a``'s values in ``dt``; refuses a conversion that would round."""
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype != T.bfloat16():
        raise TypeError(f"{what} has dtype {a.dtype}; expected float64, float32, float16 or bfloat16")
    out = np.array(a, dtype=dt, copy=True)
    if a.dtype != dt and not np.array_equal(out.astype(np.float64), a.astype(np.float64), equal_nan=True):
        raise ValueError(f"{what} ({a.dtype}) is not exactly representable in {dt}; the adapter does not round inputs")
    return out
