"""The jax adapter: ``JaxBackend(platform="cpu" | "gpu", variance="fast" | "stable")``.

jax has one normalization op, ``jax.nn.standardize`` (flax's layers are not used: flax pulls orbax,
tensorstore, optax and a dozen more packages, so it is not a dependency; see "What is not judged").
The adapter calls ``jax.nn.standardize`` wherever refnorm's op is a standardization, and for the
other normalizers it runs a short **jax.numpy implementation of the normalizer - a re-implementation,
written the way jax users write these layers by hand** (there is no jax op to call). Gradients are
``jax.vjp`` of the forward inside ``jax.jit`` (as users run a training step), for every floating input;
the jitted functions are kept per (op, options but eps, mode), so XLA compiles once per shape signature
(eps is an argument of the program: ``JaxBackend._key``), and ``prepare`` (the checker's hint) compiles
the next cases' programs in threads while earlier cases are judged (``JaxBackend.prepare``). Every
program is ``jax.jit``'s, with default options: what a user's ``jax.jit`` of the same function runs.
jax is imported inside the methods only (``import refnorm`` and importing this module never import
jax). Every array is in the case dtype (x, parameters, running statistics: golden inputs are exactly
representable in it), and results come back in the dtype jax computes them in (the case dtype).

float64: the adapter turns on ``jax.config.update("jax_enable_x64", True)`` the first time it runs
(without it jax silently computes float64 input in float32). The flag is process-wide; it does not
change float32/float16/bfloat16 computations here, since every array is explicitly typed and Python
scalars (eps, momentum) are weakly typed, i.e. take the array's dtype (eps=1e-5 is rounded to the
case dtype, as in every jax program: bfloat16 eps=1e-5 becomes 1.0013580322265625e-05).

Ops and what is called (``variance`` is jax.nn.standardize's ``algorithm``):

    layer_norm           jax.nn.standardize(x, axis=trailing axes, epsilon=eps, algorithm=variance)
                         * weight + bias (each only when given). No statistics are returned.
    group_norm           the (N, G, -1) view of x, jax.nn.standardize over its last axis, reshaped
                         back, * weight[c] + bias[c] (per channel).
    instance_norm        jax.nn.standardize over the spatial axes; eval with running statistics:
                         jax.nn.standardize(x, mean=running_mean, variance=running_var) (the per
                         channel affine map). Running statistics (training): re-implemented in
                         jax.numpy (refnorm's torch rule: the N per-instance updates averaged, the
                         unbiased variance), from the same mean and variance formulas standardize
                         uses (``variance``); num_batches_tracked unchanged (torch never counts it).
    batch_norm           jax.nn.standardize over (0, 2, 3, ...); eval with running statistics as
                         instance_norm. Running statistics: re-implemented in jax.numpy, both
                         conventions (torch: a = 1 - momentum, p = momentum, unbiased variance,
                         momentum=None the cumulative average; onnx: a = m, p = 1 - m, biased), as
                         ``running = a * running + p * batch`` in the case dtype;
                         num_batches_tracked += 1 per training call (integer bookkeeping in NumPy).
    weight_standardization  jax.nn.standardize(x, axis=(1, ..., ndim-1), epsilon=eps).
    rms_norm             jax.numpy: ms = jnp.mean(jnp.square(x), axes); x * lax.rsqrt(ms + eps)
                         (eps_placement "inside") or x / (jnp.sqrt(ms) + eps) ("outside"), times
                         weight (or weight + weight_offset, computed in the case dtype as Gemma's
                         ``1 + scale``). eps=None is refnorm's (torch's) default for the case dtype:
                         finfo(float32).eps for fp16/bf16/fp32, finfo(float64).eps for float64.
    local_response_norm  jax.numpy: lax.reduce_window sum of jnp.square(x) over the channel window
                         (zero padded; torch's or ONNX's window per ``window``), then
                         x / (k + alpha / size * sum) ** beta.
    lp_normalize         jax.numpy: x / jnp.maximum(jnp.linalg.vector_norm(x, ord=p, axis=dim,
                         keepdims=True), eps) (F.normalize's rule). zero_rule="onnx" is skipped.
    weight_norm          jax.numpy: v * (g / jnp.linalg.vector_norm(v, axis=every axis but dim)); a
                         flat g is reshaped to the keepdims shape (its gradient comes back flat).
    mean_variance_norm   jax.numpy: (x - jnp.mean(x, axes)) / (jnp.std(x, axes) + eps).
    z_score, min_max_scale, unified_norm, offline_batch_norm, power_norm, batch_renorm: skipped, jax has
                         no such op.

``variance``: "fast" (jax.nn.standardize's default, what ``jax.nn.standardize(x)`` runs) is the
one-pass var = mean(x^2) - mean(x)^2 clipped at 0; "stable" is the two-pass mean((x - mean)^2).
The registered backend ``jax`` runs the default; ``jax-stable`` the two-pass algorithm.

Contracts (``contract``). Measured on jax 0.10.2 CPU (2 cores) by running this adapter (both
``variance`` settings) through refnorm's checker under every contract and reduction model on every
golden case:
* float64, float32: strict. Reduction "serial": XLA CPU's sums over several axes exceed the block
  model - 150 equal float32 values summed over a (6, 25) view err by 37 u, above the block model's
  2 sqrt(150) + 2 = 26.5 u (a single axis of 150: < 1 u; tests). That is golden
  batch_norm/const_f32_6x4x25's running_mean, 1.03x its block bound; every other golden case gives the
  same verdict under block and serial.
* float16, bfloat16: epi_d. jax computes float16/bfloat16 input in that dtype (jnp.mean and jnp.sum
  accumulate in float32 and round the result to the case dtype; x - mean, the square, rsqrt, the
  products and the whole backward round to it). stats_d fails 6 of 12 golden bfloat16 layer_norm
  cases (dx), epi_d passes them; the weakest contract still fails a few cases where autodiff's many
  roundings exceed epi_d's few (known_failures/jax.txt: the same computation on the float32 upcast,
  rounded once, passes). As rounding points (contracts.py; layer_norm and rms_norm take any list) epi_d
  is rounds mean, rstd, xhat, xhat_w, g, dy_xhat, dx_terms = input; acc dweight, dbias = input, and it is
  the narrowest list measured: with any one entry left out, golden float16/bfloat16 layer_norm/rms_norm
  cases fail beyond the list (mean 13, rstd 9, xhat 5, xhat_w 5, g 4, dy_xhat 4, dx_terms 5, the dweight
  and dbias accumulations 25 of 59 cases), so the preset stays. No saved statistics: jax's backward is
  autodiff through the mean and the variance, not the formula at the returned statistics.

Measured worst excess / bound of the passing cases (``refnorm check --backend jax``, float32 |
bfloat16): batch_norm 0.80 | 0.82, group_norm 0.70 | 0.83, instance_norm 0.86 | 0.75, layer_norm 0.56
| 0.85, weight_standardization 0.80 | 0.69 (the fast variance sits close to its bound even where it
passes; jax-stable: 0.43 | 1.2 (fails one), 0.11 | 0.89, 0.26 | 1.00, 0.19 | 0.98, 0.16 | 4.5 (fails
one)), rms_norm 0.26 | 0.60, local_response_norm 0.25 | 0.41, lp_normalize 0.18 | 0.55,
weight_norm 0.19 | 0.55, mean_variance_norm 0.10 | 0.73.

Disagreements with the reference, and who is right (known_failures/jax.txt, 138 cases, each
explained there and reproduced in tests/test_jax_backend.py): the reference is right in all of them.
* jax.nn.standardize's default variance (fast, one-pass) cancels when |mean| >> std: 77 cases over
  every dtype (20 float32, 20 bfloat16, 11 float64, 26 float16), up to 3.9e5x the bound in float32;
  all pass with algorithm="stable".
* autodiff of sqrt at 0 (jnp.std, jnp.linalg.vector_norm, sqrt(mean(x^2))): NaN gradients on all-zero
  or constant slices (lp_normalize, mean_variance_norm, rms_norm eps outside), where the normalizer is
  differentiable.
* float16 range: x*x overflows (|x| >= 256), eps=1e-12 rounds to 0, the backward's (var + eps)^-3/2
  overflows on rows constant in float16.
* float16/bfloat16 autodiff roundings beyond epi_d on 5 cases (1.0-4.5x the bound).

Compilation cache. XLA compiles one program per shape signature: the golden set has 267 (250 distinct
(op, shapes) alone), at 0.1-0.3 s of CPU each with jax.jit's default options, so a first ``refnorm check
--backend jax`` is ~75 s of CPU, ~42 s on 2 cores, and no refnorm code can cut it without compiling
something else: XLA at --xla_backend_optimization_level=0 compiles in 60% of the time, and its
float32 layer_norm gradients differ in the last bits (measured), i.e. it is not the program users run.
So the programs are kept in jax's own persistent compilation cache, which stores the very executable
XLA compiled, keyed by the program, the compile options, the jax/XLA versions and the device: a later
run (another process, another day) loads it instead of compiling, and returns the same bits (test).
``compilation_cache`` (the registered backends: "default"; ``--backend-option compilation_cache=...``):
"default" is $REFNORM_JAX_CACHE when set ("off" or empty: off), else $XDG_CACHE_HOME/refnorm/jax or
~/.cache/refnorm/jax; "off" (and None, a plain ``JaxBackend()``'s default) leaves jax's configuration
alone; anything else is that directory. The setting is jax's, so process-wide: it is made on the first
run, and only when the process has no cache directory of its own (JAX_COMPILATION_CACHE_DIR or
``jax.config``), which is then used as it is; with refnorm's directory, jax's threshold for caching a
program (1 s of compile time) is set to 0. A cache is trusted code (jax's warning): keep it in a
directory only you can write. Measured (``refnorm check --backend jax --expect-failures
known_failures/jax.txt``, 2 cores, idle): 43.2 s with an empty cache (79 s CPU), 16.2 s and 16.5 s
with it filled (3.5 MB), 42.8 s with "off"; the same report in all four.

What is not judged: flax's layers (flax.linen LayerNorm/GroupNorm/BatchNorm/RMSNorm/WeightNorm) - not
installed here. Their source (flax/linen/normalization.py, _compute_stats) computes the statistics
in float32 for half-precision input and, by default (use_fast_variance=True), with the same one-pass
Var = E[|x|^2] - |E[x]|^2; so flax users inherit the fast-variance findings above in float32, not the
float16/bfloat16 ones. The jax.numpy re-implementations above stand for the hand-written layers.
"""
from __future__ import annotations

import math
import os
from typing import Mapping

import numpy as np

from ... import registry
from . import _translate as T
from . import jax_ops
from .jax_ops import _eps_value
from .base import Call, Contract, Returned

DTYPES = ("float64", "float32", "float16", "bfloat16")
LOW = ("float16", "bfloat16")
VARIANCES = ("fast", "stable")
STANDARDIZE = ("layer_norm", "group_norm", "instance_norm", "batch_norm", "weight_standardization")
REIMPLEMENTED = ("rms_norm", "local_response_norm", "lp_normalize", "weight_norm", "mean_variance_norm")
SUPPORTED = STANDARDIZE + REIMPLEMENTED
NO_JAX = {
    "z_score": "jax has no z_score op (jax.scipy.stats has no zscore; composing mean/std would be "
               "refnorm's formula re-typed, not a jax implementation)",
    "min_max_scale": "jax has no min_max_scale op ((x - min) / (max - min) composed from jnp.min/jnp.max "
                     "would be refnorm's formula re-typed, not a jax implementation)",
    "unified_norm": "jax has no unified_norm op (UnifiedNorm exists only as third-party torch modules)",
    "offline_batch_norm": "jax has no offline_batch_norm op (refnorm's framework instance of batch_norm)",
    "power_norm": "jax has no power_norm op (PowerNorm exists only as the authors' torch module)",
    "batch_renorm": "jax has no batch_renorm op (flax has no Batch Renormalization layer)",
    "add_norm": "jax has no fused residual add + norm op (flax composes x + residual and LayerNorm: refnorm's "
                "formula re-typed, not a jax implementation)",
    "adaptive_layer_norm": "jax has no adaptive_layer_norm op (DiT's adaLN is LayerNorm composed with a "
                           "per-sample scale and shift in model code)",
    "gated_norm": "jax has no gated norm op (Mamba2's RMSNormGated in jax ports is x * silu(z) and an RMSNorm "
                  "composed in model code: refnorm's formula re-typed, not a jax implementation)",
    "dyt": "jax has no dynamic-tanh op (DyT is jnp.tanh composed with a learnable scalar and an affine in model "
           "code: refnorm's formula re-typed, not a jax implementation)",
    "poly_norm": "jax has no PolyNorm op (PolyCom's norm is composed from jnp powers and means in model code: "
                 "refnorm's formula re-typed, not a jax implementation)",
    "norm_quant_block": "jax has no norm with a block-scaled quantized output (fp8 groups, MXFP8, NVFP4 are kernel "
                        "library ops; the torch composite checks the convention)",
    "group_norm_silu": "jax has no GroupNorm + SiLU op: jax.nn.silu of this adapter's group_norm "
                       "(jax.nn.standardize) would be a composition whose float16/bfloat16 SiLU runs in the case "
                       "dtype (its exp, add and division each rounded to it), a rounding model the group_norm_silu "
                       "bounds do not define (their epi_d rounds only p and dp to the case dtype)",
}
INSTALL = "pip install jax (or pip install 'refnorm[jax]')"


def _contract_kind(op: str, dtype: str) -> str:
    """Measured (module docstring): strict for float64/float32, epi_d for float16/bfloat16 (jax computes
    fp16/bf16 input in that dtype: only reductions are accumulated in float32)."""
    return "strict" if dtype not in LOW else "epi_d"


def _import_jax(compilation_cache: str | None = None):
    try:
        import jax
    except ImportError as e:             # pragma: no cover - depends on the environment
        raise RuntimeError(f"jax is not installed ({e}); {INSTALL}") from e
    if not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)       # float64 cases (module docstring)
    if compilation_cache and not jax.config.jax_compilation_cache_dir:
        _use_compilation_cache(jax, compilation_cache)
    return jax


CACHE_ENV = "REFNORM_JAX_CACHE"


def cache_dir(setting: str) -> str:
    """The directory of jax's persistent compilation cache that ``compilation_cache=setting`` asks for
    ("": off). "default": $REFNORM_JAX_CACHE when set (empty or "off": off), else
    $XDG_CACHE_HOME/refnorm/jax, else ~/.cache/refnorm/jax; "off": none; anything else: that directory,
    which must not be a file."""
    if setting == "default":
        env = os.environ.get(CACHE_ENV)
        if env is None:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            return os.path.join(base, "refnorm", "jax")
        what, setting = f"${CACHE_ENV}", env.strip() or "off"
    else:
        what = "compilation_cache"
        if not setting.strip():
            raise ValueError(f"compilation_cache {setting!r}: expected a directory, 'default' or 'off'")
    if setting == "off":
        return ""
    path = os.path.abspath(os.path.expanduser(setting))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{what} {path!r} exists and is not a directory; expected a directory, 'default' or 'off'")
    return path


def _use_compilation_cache(jax, path: str) -> None:
    """Point jax's persistent compilation cache at ``path`` (module docstring, "Compilation cache"); the
    caller leaves a directory the process set itself (JAX_COMPILATION_CACHE_DIR, ``jax.config``, an
    earlier backend) as it is."""
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    # refnorm's programs compile in 0.1-0.3 s, under jax's default threshold of 1 s for caching one
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


class JaxBackend:
    """jax.nn.standardize and jax.numpy normalizers on jax's ``platform`` device (module docstring)."""

    forward_only = False

    def __init__(self, platform: str = "cpu", variance: str = "fast", compilation_cache: str | None = None):
        if platform not in ("cpu", "gpu"):
            raise ValueError(f"platform {platform!r}: expected 'cpu' or 'gpu'")
        if variance not in VARIANCES:
            raise ValueError(f"variance {variance!r}: expected one of {', '.join(VARIANCES)}")
        if compilation_cache is not None and not isinstance(compilation_cache, str):
            raise TypeError(f"compilation_cache {compilation_cache!r}: expected a directory, 'default', 'off' or None")
        self.platform = platform
        self.variance = variance
        self.compilation_cache = None if compilation_cache is None else cache_dir(compilation_cache)
        self.name = "jax" + ("" if platform == "cpu" else f"-{platform}") + ("" if variance == "fast" else "-stable")

    # ------------------------------------------------------------------ protocol
    def available(self) -> str | None:
        try:
            import jax
        except ImportError as e:
            return f"jax is not installed ({e}); {INSTALL}"
        try:
            devs = jax.devices(self.platform)
        except RuntimeError as e:
            return f"jax has no {self.platform} device on this machine ({str(e).splitlines()[0]})"
        if not devs:
            return f"jax has no {self.platform} device on this machine"
        return None

    def supports(self, call: Call) -> str | None:
        return self.supports_config(call.op, call.dtype, call.config, call.training)

    def supports_config(self, op: str, dtype: str, config: Mapping, training: bool) -> str | None:
        """Whether this adapter has a jax implementation of (op, dtype, configuration)."""
        reason, cfg = T.preamble(op, dtype, config, supported=SUPPORTED, unsupported=NO_JAX, dtypes=DTYPES,
                                 backend="jax")
        if reason:
            return reason
        cfg = registry.resolve_options(op, cfg, dtype)
        if op == "layer_norm" and float(cfg["weight_offset"]) != 0.0:
            return (f"layer_norm weight_offset={cfg['weight_offset']!r}: jax.nn.standardize with refnorm's affine "
                    "has no zero-centred gamma (TransformerEngine's)")
        if op == "lp_normalize" and cfg["zero_rule"] == "onnx":
            return ("lp_normalize zero_rule='onnx' (y = 0 on an all-zero slice, no eps) is ONNX's rule; the jax "
                    "idiom x / max(||x||, eps) has torch's")
        if op == "weight_norm":
            d = cfg["dim"]
            if T.is_int(d) and d == -1:
                return "weight_norm dim=-1 is refused by refnorm (ambiguous); use dim=None or dim=v.ndim - 1"
        return None

    def contract(self, call: Call) -> Contract:
        return self.contract_for(call.op, call.dtype)

    def contract_for(self, op: str, dtype: str) -> Contract:
        """The contract of one (op, dtype), measured (module docstring, "Contracts"): strict for float64
        and float32, epi_d for float16 and bfloat16; "serial" reductions (XLA CPU's sums over several
        axes exceed the block model)."""
        return Contract(_contract_kind(op, dtype), "serial")

    def run(self, call: Call) -> Returned:
        cfg = registry.resolve_options(call.op, T.start_run(self, call), call.dtype)   # eps=None: by the dtype
        jax = _import_jax(self.compilation_cache)
        spec = registry.get(call.op)
        dt = T.np_dtype(call.dtype)
        dev = jax.devices(self.platform)[0]

        diff = {}
        for k, a in call.inputs.items():
            diff[k] = jax.device_put(_exact(f"input {k!r}", a, dt), dev)
        const, nbt = T.split_state(call, spec, lambda what, a: jax.device_put(_exact(what, a, dt), dev))
        if const and not {"running_mean", "running_var"} <= set(const):
            raise ValueError(f"{call.op}: state needs both 'running_mean' and 'running_var', got {sorted(call.state)}")

        tracking = bool(const)
        nbt_after = _nbt_after(call, tracking, nbt)
        want_grad = bool(call.cotangents)
        dkey = spec.differentiable[0]
        key, eps = self._key(call, cfg, tracking, nbt_after)
        args = (diff, const, None if eps is None else jax.device_put(np.asarray(eps).astype(dt), dev))
        if want_grad:
            if dkey not in call.cotangents:
                raise KeyError(f"{call.op}: cotangents given without one for the differentiable output {dkey!r}")
            args += (jax.device_put(_exact(f"cotangent {dkey!r}", call.cotangents[dkey], dt), dev),)
        what = "forward and backward (jax.vjp)" if want_grad else "forward"
        try:
            result = self._executable(jax, key, cfg, call.training, tracking, nbt_after, want_grad, args)(*args)
        except _CotangentShape as e:
            raise ValueError(f"{call.op}: cotangent {dkey!r} {e}") from None
        except Exception as e:
            raise RuntimeError(f"jax's {what} of {call.op} raised {type(e).__name__}: {e}") from e
        out, new_state = result[0], result[1]
        grads = {k: _to_numpy(v) for k, v in result[2].items()} if want_grad else {}
        state = {k: _to_numpy(v) for k, v in new_state.items()}
        if tracking and "num_batches_tracked" in spec.state:
            base = np.int64(0) if nbt is None else nbt
            state["num_batches_tracked"] = np.asarray(nbt_after if nbt_after is not None else base, dtype=np.int64)
        return Returned({dkey: _to_numpy(out)}, grads, state)

    def prepare(self, calls) -> None:
        """A hint (the checker's ``prepare``, base.py): the calls of a case about to be run, in order.
        Each one this adapter supports is traced and lowered here and handed to a pool of threads that
        compile it (XLA releases the GIL while it compiles), so compilation overlaps the judging of
        earlier cases. What is compiled is ``jax.jit(f).lower(args).compile()`` of the very function and
        argument shapes ``run`` calls, i.e. the program ``jax.jit(f)(args)`` compiles; ``run`` falls back
        to calling ``jax.jit(f)`` when a hint was wrong or failed, so a hint never changes a result."""
        jax = _import_jax(self.compilation_cache)
        dev = jax.devices(self.platform)[0]
        ahead = self.__dict__.setdefault("_ahead", {})
        nbt = None                           # num_batches_tracked before each call, as run() will see it
        for i, call in enumerate(calls):
            if self.supports(call):
                return
            cfg = registry.resolve_options(call.op, T.config(call.op, call.config), call.dtype)
            dt = T.np_dtype(call.dtype)
            spec = registry.get(call.op)
            const = {k: a for k, a in call.state.items() if k not in spec.integer_state}
            if i == 0:
                given = [call.state[k] for k in spec.integer_state if k in call.state]
                nbt = np.int64(np.asarray(given[0])) if given else None
            tracking = bool(const)
            nbt_after = _nbt_after(call, tracking, nbt)
            nbt = nbt if nbt_after is None else nbt_after
            want_grad = bool(call.cotangents)
            dkey = spec.differentiable[0]
            if want_grad and dkey not in call.cotangents:
                return
            key, eps = self._key(call, cfg, tracking, nbt_after)

            def aval(a):
                return jax.ShapeDtypeStruct(np.shape(a), dt, sharding=jax.sharding.SingleDeviceSharding(dev))
            args = ({k: aval(a) for k, a in call.inputs.items()}, {k: aval(a) for k, a in const.items()},
                    None if eps is None else aval(eps))
            if want_grad:
                args += (aval(call.cotangents[dkey]),)
            sig = _signature(key, want_grad, args)
            if sig in ahead:
                continue
            fn = self._jitted(jax, key, cfg, call.training, tracking, nbt_after)[want_grad]
            try:
                lowered = fn.lower(*args)
            except Exception:                # noqa: BLE001 - a hint; run() raises it where it belongs
                continue
            ahead[sig] = _pool(self).submit(lowered.compile)

    def _executable(self, jax, key, cfg, training, tracking, nbt_after, want_grad, args):
        """The compiled program for ``args``: the one ``prepare`` compiled ahead for this signature when
        there is one (and it compiled), else ``jax.jit(f)`` itself (which traces and compiles on its first
        call for a signature and reuses the program after)."""
        fut = self.__dict__.get("_ahead", {}).get(_signature(key, want_grad, args))
        if fut is not None:
            try:
                return fut.result()
            except Exception:                # noqa: BLE001 - the jit call below raises it again, in place
                pass
        return self._jitted(jax, key, cfg, training, tracking, nbt_after)[want_grad]

    def _key(self, call, cfg, tracking, nbt_after):
        """(key, eps): the key of the jitted program, and eps when it is passed as an argument (a traced
        0-d array in the case dtype) rather than baked in as a constant, so that cases differing only by
        eps share one compiled program. eps meets only arrays of the case dtype (``var + eps``,
        ``sqrt(ms) + eps``, ``maximum(norm, eps)``), and the argument is eps rounded to that dtype exactly
        as jax rounds a Python float constant (``np.asarray(eps).astype(dtype)``), so every operation
        computes the same values; eps = 0 stays a constant (XLA simplifies x + 0 to x, which keeps -0).
        Bit-identical outputs, gradients and statistics on every golden case (both variances). The
        running-statistics update enters the key as its factors (a, p, unbiased), not as
        num_batches_tracked (which only momentum=None's cumulative average depends on)."""
        eps = _traced_eps(call.op, cfg)
        static = dict(cfg, eps="traced") if eps is not None else cfg
        rule = (T.momentum_rule(call.op, cfg, None if nbt_after is None else int(nbt_after))
                if call.training and tracking else None)
        return (call.op, _frozen(static), bool(call.training), tracking, rule), eps

    def _jitted(self, jax, key, cfg, training, tracking, nbt_after):
        """(forward, forward + ``jax.vjp`` pullback), each ``jax.jit``-ed once per ``key`` (``_key``) and
        kept, so that jax traces and XLA compiles once per shape and dtype signature, not on every call.
        The backward is ``jax.vjp`` of the same forward, inside one jit: one program computes the outputs,
        the new statistics and the gradients.

        Measured, ``/usr/bin/time -v refnorm check --backend jax --golden golden --expect-failures
        known_failures/jax.txt`` on the shared 2-core machine, runs interleaved with the previous adapter
        (one program per (op, every option, num_batches_tracked), no ``prepare``): at load ~2.5, 67 s and
        65 s wall (93 s, 85 s CPU) before, 42 s and 39 s (77 s, 72 s CPU) now; at load 4-7, 140 s and 141 s
        before, 131 s and 137 s now (threads gain little when the cores are taken). Every case's status,
        verdicts and figures identical, every returned array bit-identical (jax and jax-stable). Without
        ``prepare`` (load ~3): 68 s and 70 s wall. 267 programs are compiled (338 before: eps cut 62, the
        running-update key 9), at ~0.2-0.3 s of CPU each (MLIR fusion emission and LLVM); that is nearly
        all of the time (``refnorm check --backend torch-cpu``: 4 s in the same session). Only fewer
        distinct (op, options, shapes, dtype) in the golden set, or a compiler configuration other than
        ``jax.jit``'s default (not the program users run), would cut it further."""
        cache = self.__dict__.setdefault("_jit_cache", {})
        if key not in cache:
            traced = _traced_eps(key[0], cfg) is not None
            fwd = self._forward(jax, key[0], cfg, training, tracking, nbt_after, traced)

            def fwd_bwd(d, c, e, cot):
                out, pullback, new_state = jax.vjp(lambda dd: fwd(dd, c, e), d, has_aux=True)
                if cot.shape != out.shape:
                    raise _CotangentShape(f"has shape {cot.shape}; jax's output has shape {out.shape}")
                (g,) = pullback(cot)
                return out, new_state, g
            cache[key] = (jax.jit(fwd), jax.jit(fwd_bwd))
        return cache[key]

    def __getstate__(self):
        """Pickled (``refnorm check --isolate``) without its programs and compile pool."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_jit_cache", "_ahead", "_pool")}

    def _forward(self, jax, op, cfg, training, tracking, nbt_after, traced_eps):
        """The forward of one call (jax_ops.forward, with this backend's variance algorithm)."""
        return jax_ops.forward(jax, op, cfg, training, tracking, nbt_after, traced_eps, self.variance)


# ---------------------------------------------------------------------- helpers
class _CotangentShape(ValueError):
    """A cotangent whose shape is not the output's (raised while tracing the pullback)."""


def _traced_eps(op: str, cfg) -> float | None:
    """eps when it is passed to the program as an argument (``JaxBackend._key``): a finite, non-zero eps."""
    v = _eps_value(op, cfg)
    return v if v is not None and v != 0.0 and math.isfinite(v) else None


def _nbt_after(call: Call, tracking: bool, nbt):
    """batch_norm's num_batches_tracked after a training call with running statistics, else None."""
    if call.op == "batch_norm" and tracking and call.training:
        return (np.int64(0) if nbt is None else nbt) + 1
    return None


def _signature(key, want_grad: bool, args) -> tuple:
    """The program key and the shapes and dtypes of its arguments (dicts of arrays, an array or None)."""
    def sd(a):
        return tuple(a.shape), str(a.dtype)
    parts = tuple(tuple(sorted((k, sd(v)) for k, v in a.items())) if isinstance(a, dict) else
                  None if a is None else sd(a) for a in args)
    return key, want_grad, parts


def _pool(backend):
    """The backend's compile threads (one per CPU this process may run on), started on first use."""
    pool = backend.__dict__.get("_pool")
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor
        n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        pool = backend.__dict__["_pool"] = ThreadPoolExecutor(max_workers=max(1, n),
                                                              thread_name_prefix="refnorm-jax-compile")
    return pool


def _frozen(v):
    """A hashable, type-exact key for an option value (lists -> tuples; 1 and 1.0 and True kept apart)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_frozen(x) for x in v)
    return (type(v).__name__, repr(v))


def _exact(what: str, a, dt) -> np.ndarray:
    """A fresh NumPy array of ``a``'s values in ``dt``; refuses a conversion that would round."""
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype != T.bfloat16():
        raise TypeError(f"{what} has dtype {a.dtype}; expected float64, float32, float16 or bfloat16")
    out = np.array(a, dtype=dt, copy=True)
    if a.dtype != dt:
        back = out.astype(np.float64)
        src = a.astype(np.float64)
        if not np.array_equal(back, src, equal_nan=True):
            raise ValueError(f"{what} ({a.dtype}) is not exactly representable in {dt}; the adapter does not "
                             "round inputs")
    return out


def _to_numpy(a) -> np.ndarray:
    return np.array(a, copy=True)
