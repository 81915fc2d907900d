"""The correct arithmetic the held-out blind kernels share (tests/planted/blind.py, blind2.py, blind3.py,
blind4.py, blind5.py).

Each blind set was written from the previous one's conventions: a fused float32 kernel written in NumPy, inputs
upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to
the output dtype at the end (round to nearest even). What the sets' correct kernels compute alike lives here,
once. Nothing here is a planted bug: every bug (its ``BUGS`` entry and every ``if self.bug == ...`` branch)
stays in its own set's file, where its author wrote it, and the sets stay held-out measurements.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Contract, Returned

# norm_quant's quantized dtypes: name -> (NumPy dtype, lowest, highest)
QUANT = {"float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), -448.0, 448.0),
         "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), -57344.0, 57344.0),
         "int8": (np.dtype(np.int8), -128.0, 127.0)}
# norm_quant_block's element dtypes: name -> (NumPy dtype, qmax, emax)
STD_ELEMENTS = {
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), 448.0, 8),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), 57344.0, 15),
    "float4_e2m1fn": (np.dtype(ml_dtypes.float4_e2m1fn), 6.0, 2),
}
# norm_quant_block's formats: name -> (block size, element dtype, scale rule)
FORMAT_DEFAULTS = {"fp8_group": (128, "float8_e4m3fn", "exact"), "mxfp8": (32, "float8_e4m3fn", "floor"),
                   "nvfp4": (16, "float4_e2m1fn", "e4m3")}


def rsum(a):
    """Row sums of a 2-D array, keepdims (NumPy sums a contiguous row pairwise)."""
    return np.ascontiguousarray(a).sum(axis=1, keepdims=True)


def pow2(n):
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def np_dtype(dtype):
    """The NumPy dtype of a case dtype's name ("bfloat16" through ml_dtypes)."""
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def store(a, dtype):
    """One rounding to ``dtype`` (a name: the case dtype, "float32", ...), nearest even."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(a).astype(np_dtype(dtype))


def half(a, dtype):
    """``a`` rounded to a 16-bit ``dtype`` and back to its own dtype (unchanged for 32/64-bit cases)."""
    if dtype not in ("float16", "bfloat16"):
        return a
    return store(a, dtype).astype(a.dtype)


def normalized_shape(config):
    """The config's normalized_shape as a tuple."""
    ns = config["normalized_shape"]
    return (ns,) if isinstance(ns, int) else tuple(ns)


def eps_value(value, acc):
    """The configured eps in the compute dtype ``acc``; None: ``acc``'s machine epsilon."""
    return acc(np.finfo(acc).eps) if value is None else acc(value)


def sigmoids(z):
    """(sigmoid(z), 1 - sigmoid(z)) from e = exp(-|z|), without overflow or cancellation."""
    e = np.exp(-np.abs(z))
    big, small = 1 / (1 + e), e / (1 + e)
    return np.where(z >= 0, big, small), np.where(z >= 0, small, big)


def centred_dx(g, xhat, rstd):
    """rstd * (g - mean(g) - xhat * mean(g * xhat)) per row of 2-D arrays."""
    n = g.shape[1]
    return rstd * (g - rsum(g) / n - xhat * (rsum(g * xhat) / n))


def frexp_exp(v):
    """(m, e) with v = m 2^e, m in [0.5, 1), for v > 0 (float64 arithmetic on the float32 values)."""
    return np.frexp(np.where(v > 0, v, 1.0).astype(np.float64))


# the options blind3 and blind4 implement (any value; base.py's declared options)
FUSED_OPTIONS = ("normalized_shape", "eps", "weight_offset", "eps_placement", "num_groups", "momentum",
                 "convention", "norm", "norm_before_gate", "group_size", "format", "block_size", "element_dtype",
                 "scale_rule", "min_scale", "residual_in_fp32", "dropout_p", "prenorm", "quant_dtype", "scale_ub")


def ln_stats(x, eps, ddof=0):
    """mean, rstd (rows, 1) of 2-D ``x``, two-pass (``ddof``: 1 for the unbiased variance)."""
    n = x.shape[1]
    mean = rsum(x) / n
    d = x - mean
    var = rsum(d * d) / (n - ddof if n > ddof else n)
    return mean, 1 / np.sqrt(var + eps)


def rms_stats(x, eps, placement="inside"):
    """rms, rstd (rows, 1) of 2-D ``x`` (``placement``: eps inside the root, or "outside" added to rms)."""
    ms = rsum(x * x) / x.shape[1]
    rms = np.sqrt(ms)
    return rms, (1 / (rms + eps) if placement == "outside" else 1 / np.sqrt(ms + eps))


def ln_rows(x, eps):
    """(mean, rstd, x_hat) of 2-D ``x``: ln_stats and x normalized by them."""
    mean, rstd = ln_stats(x, eps)
    return mean, rstd, (x - mean) * rstd


def rms_rows(x, eps):
    """(rms, rstd, x_hat) of 2-D ``x``: rms_stats (eps inside) and x normalized by them."""
    rms, rstd = rms_stats(x, eps)
    return rms, rstd, x * rstd


def stat_shape(x0, ns):
    """The shape of a per-row statistic of x0 normalized over its last ``len(ns)`` axes (those axes kept, 1)."""
    return x0.shape[:x0.ndim - len(ns)] + (1,) * len(ns)


def weight_offset(call, acc):
    """The config's weight_offset (0 when absent or None) in ``acc``."""
    return acc(call.config.get("weight_offset", 0.0) or 0.0)


def norm_outputs(y, mean, rstd, x0, stat, dtype, sdt):
    """A layer norm's outputs: y in x0's shape rounded to ``dtype``, mean and rstd in ``stat`` shape in
    ``sdt`` (the statistics' dtype)."""
    return {"y": store(y.reshape(x0.shape), dtype), "mean": mean.reshape(stat).astype(sdt),
            "rstd": rstd.reshape(stat).astype(sdt)}


class BlindKernelBase:
    """The backend protocol of a blind kernel: ``bug`` is a key of the subclass's ``BUGS`` or None (correct);
    ``run`` computes in float32 (float64 for a float64 case) by the method ``_<op>``. A subclass sets ``BUGS``,
    ``OPS``, ``LABEL`` (its name: "blind", "blind2", ...) and ``options``.

    ``options`` declares the options the kernel implements (any value), so a case setting an option added to
    one of its ops later is skipped with the reason instead of judged against a kernel that ignores it."""

    BUGS: dict = {}
    OPS: tuple = ()
    LABEL = ""

    def __init__(self, bug=None):
        if bug is not None and bug not in self.BUGS:
            raise ValueError(f"unknown bug {bug!r}; expected None or one of {', '.join(self.BUGS)}")
        self.bug = bug
        self.name = self.LABEL if bug is None else f"{self.LABEL}:{bug}"

    def available(self):
        return None

    def supports(self, call):
        if call.op not in self.OPS:
            return f"{self.LABEL} kernel: {call.op} is not implemented (only {', '.join(self.OPS)})"
        return None

    def contract(self, call):
        return Contract("strict")

    def run(self, call):
        acc = np.float64 if call.dtype == "float64" else np.float32
        with np.errstate(all="ignore"):      # a planted bug may overflow or divide by zero: judged, not raised
            return getattr(self, "_" + call.op)(call, acc)


class GroupNormPair:
    """group_norm and group_norm_silu of a kernel computing both in ``_gn_core(call, acc, silu)``, which
    returns (outputs, grads)."""

    def _group_norm(self, call, acc):
        return Returned(*self._gn_core(call, acc, silu=False))

    def _group_norm_silu(self, call, acc):
        return Returned(*self._gn_core(call, acc, silu=True))


# ---------------------------------------------------------------- rows, affine parameters and the rms_norm backward
def normalized_rows(call, acc):
    """(normalized_shape, N = its size, x as (rows, N) in ``acc``) of a call normalizing x's last axes."""
    ns = normalized_shape(call.config)
    N = math.prod(ns)
    return ns, N, call.inputs["x"].astype(acc).reshape(-1, N)


def reshaped(a, acc, shape):
    """``a`` in ``acc`` reshaped to ``shape``; None stays None."""
    return None if a is None else a.astype(acc).reshape(shape)


def affine(xhat, w, bias):
    """xhat * w + bias, each of w, bias skipped when None."""
    y = xhat if w is None else xhat * w
    return y if bias is None else y + bias


def rms_dx(g, xhat, rstd):
    """rstd * (g - xhat * mean(g * xhat)) per row of 2-D arrays (rms_norm's dx, eps inside)."""
    n = g.shape[1]
    return rstd * (g - xhat * (rsum(g * xhat) / n))


def rms_norm_dx(g, x, xhat, rstd, rms, placement):
    """rms_norm's dx per row of 2-D arrays, g = dy * w: rstd * (g - u * mean(g * x_hat)), u = x_hat (eps
    inside) or x / rms (``placement`` "outside"; 0 where rms is 0)."""
    proj = rsum(g * xhat) / g.shape[1]
    if placement == "outside":
        u = np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
    else:
        u = xhat
    return rstd * (g - u * proj)


def channel_sums(a, C):
    """Per-channel sums (C,) of ``a`` (N, C, S)."""
    return rsum(np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(C, -1)).reshape(C)


def group_params(inputs, acc, C):
    """group_norm's (weight, bias) as (1, C, 1) in ``acc``, each None when absent."""
    w, bias = inputs.get("weight"), inputs.get("bias")
    return (None if w is None else w.astype(acc).reshape(1, C, 1),
            None if bias is None else bias.astype(acc).reshape(1, C, 1))


# ---------------------------------------------------------------- batch_norm (running statistics: instance_norm too)
def channel_rows(a, acc):
    """(C, n) in ``acc``: ``a``'s channel axis (axis 1) first, the other axes flattened."""
    return np.ascontiguousarray(np.moveaxis(a.astype(acc), 1, 0)).reshape(a.shape[1], -1)


def from_channel_rows(a, shape):
    """channel_rows undone: (C, n) back to ``shape`` (channel axis 1)."""
    return np.moveaxis(a.reshape((shape[1], shape[0]) + tuple(shape[2:])), 0, 1)


def channel_running_stats(state, C, eps, acc):
    """batch_norm's (mean, rstd) per channel, (C, 1), from the running statistics (eval)."""
    return (state["running_mean"].astype(acc).reshape(C, 1),
            1 / np.sqrt(state["running_var"].astype(acc).reshape(C, 1) + eps))


def channel_outputs(xhat, w, bias, mean, rstd, shape, dtype, acc):
    """batch_norm's outputs from channel_rows (C, n): y = xhat * w + bias in ``shape`` rounded to ``dtype``,
    mean and rstd per channel in ``acc``."""
    C = shape[1]
    return {"y": store(from_channel_rows(affine(xhat, w, bias), shape), dtype),
            "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}


def channel_grads(dx, dy, xhat, w, bias, shape, dtype):
    """batch_norm's grads from dx, dy, xhat as channel_rows (C, n): x (in ``shape``), weight, bias."""
    grads = {"x": store(from_channel_rows(dx, shape), dtype)}
    if w is not None:
        grads["weight"] = store(rsum(dy * xhat).reshape(shape[1]), dtype)
    if bias is not None:
        grads["bias"] = store(rsum(dy).reshape(shape[1]), dtype)
    return grads


def running_setup(call, acc):
    """batch/instance norm's (config, state, eps in ``acc``, whether the running statistics are given)."""
    cfg, st = call.config, call.state
    return cfg, st, eps_value(cfg["eps"], acc), st.get("running_mean") is not None


def bn_running_update(rm, rv, m, x, mean, convention, acc, count=None):
    """batch_norm's running (mean, var) after a training step on x (C, n) with batch mean ``mean`` (C, 1) and
    momentum m: torch's convention (1 - m) * running + m * batch, with the unbiased variance (Bessel's
    correction by ``count``, default n; inf for a count of 1), else m * running + (1 - m) * batch with the
    biased one; unchanged for n = 0."""
    C, n = x.shape
    count = n if count is None else count
    bm = mean.reshape(C)
    bv = (rsum((x - mean) ** 2) / n).reshape(C)
    if n > 0 and convention == "torch":
        ub = bv * acc(count / (count - 1)) if count > 1 else bv * acc(np.inf)
        return (1 - m) * rm + m * bm, (1 - m) * rv + m * ub
    if n > 0:
        return m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
    return rm, rv


def instance_unbiased_var(x, mi, acc):
    """Each instance's unbiased variance (rows, 1) of x (Nb * C, S) about its mean ``mi`` (inf for S = 1)."""
    S = x.shape[1]
    var = rsum((x - mi) ** 2) / S
    return var * acc(S / (S - 1) if S > 1 else np.inf)


def instance_momentum(rm, rv, m, mi, ub, Nb, C):
    """Each instance's momentum update of (running_mean, running_var), (Nb, C), by its mean ``mi`` and
    variance ``ub`` (rows, 1)."""
    return (1 - m) * rm + m * mi.reshape(Nb, C), (1 - m) * rv + m * ub.reshape(Nb, C)


def running_in(state, acc):
    """batch/instance norm's (running_mean, running_var) in ``acc`` and num_batches_tracked as int64."""
    return (state["running_mean"].astype(acc), state["running_var"].astype(acc),
            np.asarray(state.get("num_batches_tracked", 0)).astype(np.int64))


def running_state(rm, rv, nbt, dtype):
    """batch/instance norm's new state: the running statistics rounded to ``dtype``, the count as int64."""
    return {"running_mean": store(rm, dtype), "running_var": store(rv, dtype),
            "num_batches_tracked": np.asarray(nbt, dtype=np.int64)}


# ---------------------------------------------------------------- group_norm, instance_norm
def group_dims(x0, config):
    """group_norm's (N, C, G, S, C // G) of x (N, C, *spatial), S the spatial size, G num_groups."""
    Nb, C = x0.shape[0], x0.shape[1]
    G = int(config["num_groups"])
    return Nb, C, G, math.prod(x0.shape[2:]), C // G


def group_rows(x0, config, acc):
    """group_dims and x in ``acc`` as (N, C, S) and as one row per (sample, group), (N * G, C // G * S)."""
    Nb, C, G, S, cg = group_dims(x0, config)
    x = x0.astype(acc).reshape(Nb, C, S)
    return Nb, C, G, S, cg, x, x.reshape(Nb * G, cg * S)


def per_instance(v, Nb):
    """A per-channel vector (C,) as (Nb * C, 1), one row per instance (sample, channel)."""
    return np.tile(v, Nb).reshape(-1, 1)


def instance_rows(x0, acc):
    """instance_norm's (Nb, C, S, x as (Nb * C, S) rows in ``acc``)."""
    Nb, C = x0.shape[0], x0.shape[1]
    S = math.prod(x0.shape[2:])
    return Nb, C, S, x0.astype(acc).reshape(Nb * C, S)


def instance_running_stats(state, Nb, eps, acc):
    """instance_norm's (mean, rstd) per instance from the running statistics (eval)."""
    return (per_instance(state["running_mean"].astype(acc), Nb),
            per_instance(1 / np.sqrt(state["running_var"].astype(acc) + eps), Nb))


def instance_stats(x, st, Nb, eps, acc, inst, stats=ln_stats):
    """instance_norm's (mean, rstd, x_hat) of x (Nb * C, S): the instances' own statistics by ``stats``
    when ``inst``, else the running ones of the state ``st``."""
    mean, rstd = stats(x, eps) if inst else instance_running_stats(st, Nb, eps, acc)
    return mean, rstd, (x - mean) * rstd


def instance_params(inputs, Nb, acc):
    """instance_norm's (weight, bias) as given and as (Nb * C, 1) rows (wr, br); each None when absent."""
    w, bias = inputs.get("weight"), inputs.get("bias")
    wr = None if w is None else per_instance(w.astype(acc), Nb)
    br = None if bias is None else per_instance(bias.astype(acc), Nb)
    return w, bias, wr, br


def instance_outputs(xhat, wr, br, mean, rstd, shape, dtype, acc):
    """instance_norm's outputs from (Nb * C, S) rows: y = xhat * wr + br in ``shape`` rounded to ``dtype``,
    mean and rstd (Nb, C) in ``acc``."""
    Nb, C = shape[0], shape[1]
    return {"y": store(affine(xhat, wr, br).reshape(shape), dtype), "mean": mean.reshape(Nb, C).astype(acc),
            "rstd": rstd.reshape(Nb, C).astype(acc)}


def instance_norm_grads(dy, xhat, rstd, w, bias, wr, centred, shape, dtype):
    """instance_norm's grads from dy, xhat, rstd as (Nb * C, S) rows (``wr``: the weight per row, or None);
    ``centred``: dx through the instances' own statistics (training), else through fixed ones."""
    Nb, C = shape[0], shape[1]
    g = dy if wr is None else dy * wr
    dx = centred_dx(g, xhat, rstd) if centred else g * rstd
    grads = {"x": store(dx.reshape(shape), dtype)}
    if w is not None:
        grads["weight"] = store(rsum(dy * xhat).reshape(Nb, C).sum(axis=0), dtype)
    if bias is not None:
        grads["bias"] = store(rsum(dy).reshape(Nb, C).sum(axis=0), dtype)
    return grads


def instance_grads(call, xhat, rstd, w, bias, wr, centred, acc):
    """instance_norm_grads of a call ({} without y's cotangent), xhat and rstd as (Nb * C, S) rows."""
    if "y" not in call.cotangents:
        return {}
    dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
    return instance_norm_grads(dy, xhat, rstd, w, bias, wr, centred, call.inputs["x"].shape, call.dtype)


# ---------------------------------------------------------------- adaptive_layer_norm
def aln_inputs(inp, acc):
    """adaptive_layer_norm's (B samples, H, T tokens per sample, x as (B * T, H) in ``acc``, scale, shift)."""
    x0 = inp["x"]
    B, H = x0.shape[0], x0.shape[-1]
    x = x0.astype(acc).reshape(-1, H)
    return B, H, (x.shape[0] // B if B else 0), x, inp.get("scale"), inp.get("shift")


def per_token(v, B, H, T, acc):
    """A per-sample modulation (B, H values a sample) as (B * T, H) in ``acc``, one row per token."""
    return np.repeat(v.astype(acc).reshape(B, H), T, axis=0)


# ---------------------------------------------------------------- gated_norm, dyt, poly_norm
def gated_stats(v, eps, norm, ln_stats):
    """(mean, rstd) of the rows of ``v`` for gated_norm's ``norm`` (rms_norm: mean 0);
    ``ln_stats``: the kernel's two-pass (mean, rstd)."""
    if norm == "layer_norm":
        return ln_stats(v, eps)
    return 0, 1 / np.sqrt(rsum(v * v) / v.shape[1] + eps)


def gated_normalize(v, w, bias, eps, K, norm, ln_stats):
    """gated_norm's (rstd, vhat, vhat * w + bias) of v (rows, H) normalized in groups of K."""
    R, H = v.shape
    vg = v.reshape(-1, K)
    mean, rstd = gated_stats(vg, eps, norm, ln_stats)
    vhat = ((vg - mean) * rstd).reshape(R, H)
    return rstd, vhat, (vhat * w if bias is None else vhat * w + bias)


def gated_dx(norm, g, vhat, rstd):
    """The normalization's dx per row (gated_norm's ``norm``)."""
    return centred_dx(g, vhat, rstd) if norm == "layer_norm" else rms_dx(g, vhat, rstd)


def gated_inputs(inp, acc):
    """gated_norm's (R, H, x and z as (R, H), weight (1, H), bias (1, H) or None) in ``acc``."""
    x0 = inp["x"]
    H = x0.shape[-1]
    R = x0.size // H if H else 0
    x, z = x0.astype(acc).reshape(R, H), inp["z"].astype(acc).reshape(R, H)
    w = inp["weight"].astype(acc).reshape(1, H)
    bias = inp.get("bias")
    bias = None if bias is None else bias.astype(acc).reshape(1, H)
    return R, H, x, z, w, bias


def gated_grads(dx, dz, dw_from, db_from, vhat, shape, dtype):
    """gated_norm's grads: x, z, weight = sum(dw_from * vhat) over the rows, bias = sum(db_from) (None: no
    bias)."""
    grads = {"x": store(dx.reshape(shape), dtype), "z": store(dz.reshape(shape), dtype),
             "weight": store((dw_from * vhat).sum(axis=0), dtype)}
    if db_from is not None:
        grads["bias"] = store(db_from.sum(axis=0), dtype)
    return grads


def dyt_inputs(inp, acc):
    """dyt's (x as (rows, C), alpha, weight (1, C) or None, bias (1, C) or None) in ``acc`` and tanh(alpha x)."""
    x0 = inp["x"]
    C = x0.shape[-1] if x0.ndim else 1
    x = x0.astype(acc).reshape(-1, C)
    a = acc(np.asarray(inp["alpha"]).astype(acc).reshape(()))
    w, bias = inp.get("weight"), inp.get("bias")
    w = None if w is None else w.astype(acc).reshape(1, C)
    bias = None if bias is None else bias.astype(acc).reshape(1, C)
    return x, a, w, bias, np.tanh(a * x)


def poly_rstd(u, eps, acc):
    """1 / sqrt(mean(u^2) + eps) per row of ``u``, the mean of squares taken of u / max|u| (no overflow)."""
    sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
    sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
    rms = sc * np.sqrt(rsum((u / sc) ** 2) / u.shape[1])
    return 1 / np.hypot(rms, np.sqrt(eps))


def dyt_gd(dy, w, a, x):
    """dyt's g * (1 - tanh^2(alpha x)), g = dy * weight (dy without a weight)."""
    g = dy if w is None else dy * w
    r = 1 / np.cosh(a * x)
    return g * (r * r)


def poly_inputs(call, acc):
    """poly_norm's (H, x as (rows, H), weight (3,), bias or None, eps) in ``acc``."""
    inp = call.inputs
    H = inp["x"].shape[-1]
    return (H, inp["x"].astype(acc).reshape(-1, H), inp["weight"].astype(acc), inp.get("bias"),
            eps_value(call.config["eps"], acc))


def poly_grads(dy, x, wt, hs, rs, bias, shape, dtype, acc, du=rms_dx, dw_from=None):
    """poly_norm's grads from dy (rows, H) and the normalized powers hs = (h3, h2, h1) with their rstd rs:
    x (``du``: each power's dx), weight = sum(dy * h) per power (``dw_from``: other factors than hs),
    bias."""
    dx = np.zeros_like(x)
    for k, p in enumerate((3, 2, 1)):
        dp = du(dy * wt[k], hs[k], rs[k])
        dx = dx + (dp if p == 1 else p * x ** (p - 1) * dp)
    src = hs if dw_from is None else dw_from
    grads = {"x": store(dx.reshape(shape), dtype),
             "weight": store(np.array([rsum(dy * h).sum() for h in src], dtype=acc), dtype)}
    if bias is not None:
        grads["bias"] = store(np.reshape(rsum(dy).sum(), np.shape(bias)), dtype)
    return grads


def poly_combine(wt, hs, bias, acc):
    """poly_norm's y = w0 h0 + w1 h1 + w2 h2 (+ the scalar bias)."""
    y = wt[0] * hs[0] + wt[1] * hs[1] + wt[2] * hs[2]
    return y if bias is None else y + acc(np.asarray(bias).astype(acc).reshape(()))


# ---------------------------------------------------------------- add_norm, norm_quant
def add_norm_dims(call, acc):
    """add_norm's (normalized_shape, N its size, rows R, dropout p, 1 / (1 - p) and weight_offset in ``acc``)."""
    cfg = call.config
    ns = normalized_shape(cfg)
    N = math.prod(ns)
    R = call.inputs["x"].size // N if N else 0
    p = float(cfg["dropout_p"] or 0.0)
    return ns, N, R, p, acc(1.0 / (1.0 - p)), acc(cfg.get("weight_offset", 0.0) or 0.0)


def kept(mask, rs, keep, p, shape, acc):
    """add_norm's factor of an input: its keep-mask (ones when None), times the rowscale ``rs`` (rows, 1)
    when given, times ``keep`` = 1 / (1 - p) when p."""
    c = np.ones(shape, acc) if mask is None else mask.copy()
    if rs is not None:
        c = c * rs
    return c * keep if p else c


def add_norm_outputs(xhat, we, bias, we1, b1, s, shape, cfg, dtype):
    """add_norm's outputs: y = xhat * we + bias, residual_out = s (float32 for residual_in_fp32 with 16-bit
    inputs), y1 = xhat * we1 + b1 when ``we1`` is given."""
    res_dtype = "float32" if cfg.get("residual_in_fp32") and dtype in ("float16", "bfloat16") else dtype
    out = {"y": store(affine(xhat, we, bias).reshape(shape), dtype),
           "residual_out": store(s.reshape(shape), res_dtype)}
    if we1 is not None:
        out["y1"] = store(affine(xhat, we1, b1).reshape(shape), dtype)
    return out


def norm_dx(dy, wgt, xhat, rstd, centred):
    """dx per row of the normalization with g = dy * wgt: LayerNorm's (``centred``) or RMSNorm's."""
    g = dy if wgt is None else dy * wgt
    return centred_dx(g, xhat, rstd) if centred else rms_dx(g, xhat, rstd)


def add_norm_ds(call, xhat, rstd, centred, we, we1, prenorm, acc):
    """add_norm's (d s, dy, dy1): s = the sum normalized; dy1 None without y1's cotangent (or weight1);
    ``prenorm``: residual_out's cotangent added."""
    R, N = xhat.shape
    dy = call.cotangents["y"].astype(acc).reshape(R, N)
    ds = norm_dx(dy, we, xhat, rstd, centred)
    dy1 = None
    if we1 is not None and "y1" in call.cotangents:
        dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        ds = ds + norm_dx(dy1, we1, xhat, rstd, centred)
    if prenorm and "residual_out" in call.cotangents:
        ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
    return ds, dy, dy1


def add_norm_input_grads(ds, c, c1, dres, shape, dtype):
    """add_norm's grads of x (ds * c), of the residual (``dres``; None: no residual) and of x1 (ds * c1;
    None: no x1)."""
    grads = {"x": store((ds * c).reshape(shape), dtype)}
    if dres is not None:
        grads["residual"] = store(dres.reshape(shape), dtype)
    if c1 is not None:
        grads["x1"] = store((ds * c1).reshape(shape), dtype)
    return grads


def rowscale_grad(ds, x, mask, keep, p, shape, dtype):
    """add_norm's rowscale gradient: sum(ds * x * mask) per row (no mask: ones), times ``keep`` when p."""
    t = ds * x if mask is None else ds * x * mask
    drs = rsum(t) * keep if p else rsum(t)
    return store(drs.reshape(shape), dtype)


def row_affine(xhat, w, bias, acc):
    """xhat (rows, N) * weight + bias, weight and bias (any shape of N values) in ``acc``, each skipped
    when None."""
    N = xhat.shape[1]
    y = xhat if w is None else xhat * w.astype(acc).reshape(1, N)
    return y if bias is None else y + bias.astype(acc).reshape(1, N)


def norm_quant_returned(q, scale, amax, x0, ns, acc):
    """norm_quant's Returned: q in x0's shape, scale and amax per row in ``acc``."""
    stat = stat_shape(x0, ns)
    return Returned({"q": q.reshape(x0.shape), "scale": scale.reshape(stat).astype(acc),
                     "amax": amax.reshape(stat).astype(acc)})


def add_norm_affine_grads(inp, dy, dy1, xhat, params, ns, dtype):
    """add_norm's grads of the masks (zero), of weight and bias from dy, and of weight1 and bias1 from dy1
    (when given); ``params``: (weight, bias, weight1, bias1), each None when absent."""
    w, bias, w1, b1 = params
    grads = {}
    for name in ("mask", "mask1"):
        if name in inp:
            grads[name] = store(np.zeros(inp["x"].shape), dtype)
    if w is not None:
        grads["weight"] = store((dy * xhat).sum(axis=0).reshape(ns), dtype)
    if bias is not None:
        grads["bias"] = store(dy.sum(axis=0).reshape(ns), dtype)
    if w1 is not None and dy1 is not None:
        grads["weight1"] = store((dy1 * xhat).sum(axis=0).reshape(ns), dtype)
        if b1 is not None:
            grads["bias1"] = store(dy1.sum(axis=0).reshape(ns), dtype)
    return grads


# ---------------------------------------------------------------- norm_quant_block
def nqb_format(cfg):
    """norm_quant_block's (format, block size, scale rule, element NumPy dtype, qmax, emax), defaults filled."""
    fmt = cfg["format"] or "fp8_group"
    B0, el0, rule0 = FORMAT_DEFAULTS[fmt]
    qdt, qmax, emax = STD_ELEMENTS[cfg["element_dtype"] or el0]
    return fmt, int(cfg["block_size"] or B0), cfg["scale_rule"] or rule0, qdt, qmax, emax


def nqb_normalized(inp, cfg, acc, ln_stats):
    """norm_quant_block's (s, y): s = x (+ residual) as (rows, H) in ``acc``, y its normalization with weight
    and bias; ``ln_stats``: the kernel's two-pass (mean, rstd) for layer_norm."""
    x0 = inp["x"]
    H = x0.shape[-1]
    x = x0.astype(acc).reshape(-1, H)
    res = inp.get("residual")
    s = x if res is None else x + res.astype(acc).reshape(-1, H)
    eps = eps_value(cfg["eps"], acc)
    w, bias = inp.get("weight"), inp.get("bias")
    if cfg["norm"] == "layer_norm":
        mean, rstd = ln_stats(s, eps)
        y = (s - mean) * rstd
    else:
        y = s * (1 / np.sqrt(rsum(s * s) / H + eps))
    y = y if w is None else y * w.astype(acc).reshape(1, H)
    y = y if bias is None else y + bias.astype(acc).reshape(1, H)
    return s, y


def block_layout(y, B):
    """norm_quant_block's (rows, H, blocks per row, padding of the last block) of y (rows, H), blocks of B."""
    R, H = y.shape
    nb = -(-H // B)
    return R, H, nb, nb * B - H


def padded_blocks(y, B, acc):
    """(yb, amax): y (rows, H) zero-padded to whole blocks of B as (rows, blocks, B), and each block's amax."""
    R, H, nb, pad = block_layout(y, B)
    yb = np.concatenate([y, np.zeros((R, pad), acc)], axis=1).reshape(R, nb, B)
    return yb, np.max(np.abs(yb), axis=-1, initial=0.0)


def pow2_scale(v, k, acc):
    """2^k where v > 0, else 0, in ``acc``."""
    return np.where(v > 0, np.ldexp(1.0, k.astype(np.int64)), 0.0).astype(acc)


def mx_scales(amax, rule, emax, qmax, acc):
    """mxfp8's block scales (in ``acc``, as float8_e8m0fnu): 2^(floor(log2 amax) - emax) for the "floor"
    rule, else the smallest power of two >= amax / qmax."""
    if rule == "floor":
        v = amax / acc(2.0 ** emax)
        m, e = frexp_exp(v)
        k = e - 1
    else:
        v = amax / acc(qmax)
        m, e = frexp_exp(v)
        k = pow2_up(m, e)
    return e8m0_scale(v, k, acc)


def nvfp4_block_scales(amax, enc, ts, acc):
    """nvfp4's block scales (S = the float8_e4m3fn scale times the tensor scale ``ts``, in ``acc``; the
    float8_e4m3fn scale) of amax / 6 * enc."""
    v = amax / acc(6.0) * enc
    Sb = np.clip(v, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
    return Sb.astype(acc) * ts, Sb


def pow2_up(m, e):
    """k with 2^k the smallest power of two >= v, from (m, e) = frexp_exp(v)."""
    return np.where(m == 0.5, e - 1, e)


def e8m0_scale(v, k, acc):
    """mxfp8's block scales 2^k (k clipped to [-127, 127], -127 where v <= 0): (in ``acc``, as float8_e8m0fnu)."""
    k = np.clip(np.where(v > 0, k, -127), -127, 127)
    S = np.ldexp(1.0, k.astype(np.int64)).astype(acc)
    return S, S.astype(ml_dtypes.float8_e8m0fnu)


def nvfp4_encode(gs, amax, acc):
    """nvfp4's tensor encode scale: the given ``gs`` (global_scale), else 2688 / the tensor's amax (1 for an
    all-zero tensor), at most float32's largest."""
    if gs is not None:
        return acc(np.asarray(gs).astype(acc).reshape(()))
    g = acc(np.max(amax, initial=0.0))
    enc = acc(1.0) if g == 0 else acc(min(acc(2688.0) / g, np.finfo(np.float32).max))
    return acc(1.0) if enc == 0 else enc


def block_quotients(yb, S, acc):
    """yb (rows, blocks, B) divided by each block's scale S (rows, blocks); 0 (NaN for non-finite yb) where
    the scale is 0."""
    Sx = S[..., None]
    return np.where(Sx == 0, acc(0) * yb, yb / np.where(Sx == 0, acc(1), Sx))


def nqb_returned(q, qdt, scale_out, amax, ts, call, s, acc):
    """norm_quant_block's Returned from the clipped block quotients q (rows, blocks, B), the block scales and
    amax (rows, blocks), the tensor scale ts and s (x + residual, handed out as residual_out)."""
    x0, cfg, d = call.inputs["x"], call.config, call.dtype
    R, nb, B = q.shape
    q = q.reshape(R, nb * B)[:, :x0.shape[-1]]
    lead = x0.shape[:-1]
    out = {"q": q.astype(qdt).reshape(x0.shape), "scale": scale_out.reshape(lead + (nb,)),
           "amax": amax.astype(acc).reshape(lead + (nb,)),
           "tensor_scale": np.full((1,) * x0.ndim, ts, dtype=acc)}
    if call.inputs.get("residual") is not None:
        rd = "float32" if cfg.get("residual_in_fp32") and d in ("float16", "bfloat16") else d
        out["residual_out"] = store(s.reshape(x0.shape), rd)
    return Returned(out)


# ---------------------------------------------------------------- pieces the kernels repeated (blind.py to blind5.py), by op
def row_weight_bias(call, acc, N, off):
    """A row norm's (weight + ``off``, bias) as (1, N) in ``acc``, each None when absent."""
    w, bias = call.inputs.get("weight"), call.inputs.get("bias")
    return (None if w is None else w.astype(acc).reshape(1, N) + off,
            None if bias is None else bias.astype(acc).reshape(1, N))


def dy_and_g(call, acc, shape, w=None):
    """(dy, g): y's cotangent in ``acc`` reshaped to ``shape``, and g = dy * w (dy when ``w`` is None)."""
    dy = call.cotangents["y"].astype(acc).reshape(shape)
    return dy, (dy if w is None else dy * w)


def row_param_grads(dy, xw, w, bias, ns, dtype):
    """A row norm's weight grad sum(dy * xw) and bias grad sum(dy) over the rows, in ``ns``'s shape rounded to
    ``dtype``, each only when ``w`` (``bias``) is given."""
    grads = {}
    if w is not None:
        grads["weight"] = store((dy * xw).sum(axis=0).reshape(ns), dtype)
    if bias is not None:
        grads["bias"] = store(dy.sum(axis=0).reshape(ns), dtype)
    return grads


def group_outputs(y, ms, rs, shape, dtype, acc):
    """group_norm's outputs: y in ``shape`` rounded to ``dtype``, mean and rstd (N, G) in ``acc``."""
    return {"y": store(y.reshape(shape), dtype), "mean": ms.astype(acc), "rstd": rs.astype(acc)}


def group_param_grads(dw_from, db_from, w, bias, C, dtype):
    """group_norm's weight grad (per-channel sums of ``dw_from``) and bias grad (of ``db_from``), each only
    when ``w`` (``bias``) is given."""
    grads = {}
    if w is not None:
        grads["weight"] = store(channel_sums(dw_from, C), dtype)
    if bias is not None:
        grads["bias"] = store(channel_sums(db_from, C), dtype)
    return grads


def bn_momentum(mom, nbt, acc):
    """batch_norm's momentum in ``acc``: the configured one, or 1 / num_batches_tracked (cumulative average)
    when None (``nbt`` already incremented)."""
    return acc(mom) if mom is not None else acc(1.0 / float(nbt))


def instance_momentum_value(cfg, acc):
    """instance_norm's momentum in ``acc`` (None: 0)."""
    return acc(0.0 if cfg["momentum"] is None else cfg["momentum"])


def nan_running(C, acc):
    """instance_norm's running (mean, var) after a training step on an empty batch: NaN per channel."""
    return np.full(C, np.nan, acc), np.full(C, np.nan, acc)


def instance_running_update(rm, rv, m, mi, ub, Nb, C):
    """instance_norm's running (mean, var): each instance's momentum update (instance_momentum) averaged over
    the batch."""
    new_m, new_v = instance_momentum(rm, rv, m, mi, ub, Nb, C)
    return new_m.mean(axis=0), new_v.mean(axis=0)


def gate_group_size(cfg, H):
    """gated_norm's group size K (H when group_size is None)."""
    return H if cfg["group_size"] is None else int(cfg["group_size"])


def silu_gate(z):
    """gated_norm's gate s = z sigmoid(z) and its derivative ds / dz."""
    sig, rest = sigmoids(z)
    return z * sig, sig * (1 + z * rest)


def gated_dn(call, acc, w, s, nbg, K):
    """gated_norm's backward start: (dy (rows, H), dn = dy * s (before the gate: ``nbg``) or dy, g = dn * w
    in groups of K)."""
    R, H = s.shape
    dy = call.cotangents["y"].astype(acc).reshape(R, H)
    dn = dy * s if nbg else dy
    return dy, dn, (dn * w).reshape(-1, K)


def gated_dx_dz(dv, dy, dz_from, x, s, ds, nbg):
    """gated_norm's (dx, dz) from dv, the normalization's dx: (dv, dy * dz_from * ds) when the norm comes
    before the gate (``dz_from``: the normalized value the gate multiplies), else (dv * s, dv * x * ds)."""
    return (dv, dy * dz_from * ds) if nbg else (dv * s, dv * x * ds)


def dyt_grads(dx, da, dy, t, w, bias, inp, shape, dtype):
    """dyt's grads: x (``dx`` in ``shape``), alpha (``da`` in alpha's shape), weight sum(dy * t) and bias
    sum(dy) over the rows when given."""
    grads = {"x": store(dx.reshape(shape), dtype), "alpha": store(np.reshape(da, np.shape(inp["alpha"])), dtype)}
    if w is not None:
        grads["weight"] = store((dy * t).sum(axis=0), dtype)
    if bias is not None:
        grads["bias"] = store(dy.sum(axis=0), dtype)
    return grads


def poly_normalize(us, eps, acc):
    """poly_norm's normalized powers and their rstd: ([u * poly_rstd(u)], [poly_rstd(u)]) of each u of
    ``us``."""
    rs = [poly_rstd(u, eps, acc) for u in us]
    return [u * r for u, r in zip(us, rs)], rs


def add_norm_rows(inp, R, N, acc):
    """add_norm's (x, residual, mask, x1, mask1) as (R, N) and rowscale as (R, 1) in ``acc``, None when absent."""
    rows = tuple(reshaped(inp.get(k), acc, (R, N)) for k in ("x", "residual", "mask", "x1", "mask1"))
    return rows + (reshaped(inp.get("rowscale"), acc, (R, 1)),)


def add_norm_sum(x, res, x1, mask1, c, keep, p, acc):
    """add_norm's (s, c1): s = x * c (+ x1 * c1, c1 = kept(mask1)) (+ residual), c1 None without x1."""
    s = x * c
    c1 = None
    if x1 is not None:
        c1 = kept(mask1, None, keep, p, x.shape, acc)
        s = s + x1 * c1
    return (s if res is None else s + res), c1


def add_norm_params(inp, acc, N, off):
    """add_norm's (weight, bias, weight1, bias1) as (1, N) in ``acc`` and the weights plus ``off`` (we, we1),
    each None when absent."""
    w, bias, w1, b1 = (reshaped(inp.get(k), acc, (1, N)) for k in ("weight", "bias", "weight1", "bias1"))
    return w, bias, w1, b1, (None if w is None else w + off), (None if w1 is None else w1 + off)


def add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xhat, params, x, mask, keep, p, ns, dtype):
    """add_norm's grads: add_norm_input_grads (``dres``: the residual's, None: no residual),
    add_norm_affine_grads, and the rowscale's when given."""
    grads = add_norm_input_grads(ds, c, c1, dres, inp["x"].shape, dtype)
    grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, params, ns, dtype))
    if inp.get("rowscale") is not None:
        grads["rowscale"] = rowscale_grad(ds, x, mask, keep, p, inp["rowscale"].shape, dtype)
    return grads


def static_scale(static, shape, acc):
    """norm_quant's scale from the given static_scale: its one value in ``acc``, in ``shape``."""
    return np.full(shape, acc(static.astype(acc).reshape(())))


def scale_floor(scale, cfg, hi, acc):
    """norm_quant's dynamic scale raised to its floor: min_scale, or 1 / (512 * the dtype's highest)."""
    floor = 1.0 / (hi * 512.0) if cfg["min_scale"] is None else float(cfg["min_scale"])
    return np.maximum(scale, acc(floor))


def dynamic_scale(amax, hi, cfg, acc):
    """norm_quant's dynamic scale per row: amax / highest, at most scale_ub, at least scale_floor's."""
    scale = amax / acc(hi)
    if cfg["scale_ub"] is not None:
        scale = np.minimum(scale, acc(cfg["scale_ub"]))
    return scale_floor(scale, cfg, hi, acc)


def quant_quotients(y, scale, lo, hi, acc):
    """y / scale clipped to [lo, hi]; 0 (NaN for non-finite y) where the scale is 0."""
    v = np.where(scale == 0, acc(0) * y, y / np.where(scale == 0, acc(1), scale))
    return np.clip(v, lo, hi)


def quantize(v, qdt):
    """v in the quantized dtype ``qdt``: int8 rounded to nearest even (NaN as 0), a float8 by its cast."""
    if qdt.kind == "i":
        return np.rint(np.nan_to_num(v, nan=0.0)).astype(np.int8)
    return v.astype(qdt)


def group_scales(amax, qmax, rule, cfg, acc):
    """fp8_group's block scales: amax / qmax, at least min_scale, rounded up to a power of two for the "pow2"
    rule."""
    v = np.maximum(amax / acc(qmax), acc(cfg["min_scale"] or 0.0))
    if rule == "pow2":
        m, e = frexp_exp(v)
        return pow2_scale(v, pow2_up(m, e), acc)
    return v


def nvfp4_scales(amax, enc, acc):
    """nvfp4's (tensor scale 1 / enc, block scales S, the float8_e4m3fn scales handed out)."""
    ts = acc(1) / enc
    return (ts,) + nvfp4_block_scales(amax, enc, ts, acc)


def nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc):
    """norm_quant_block's Returned: the block quotients of yb by S clipped to [-qmax, qmax] (nqb_returned)."""
    q = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
    return nqb_returned(q, qdt, scale_out, amax, ts, call, s, acc)


def per_sample(t, B, T, H):
    """adaptive_layer_norm's per-sample sums: (B * T, H) -> (B, H), summed over the tokens."""
    return t.reshape(B, T, H).sum(axis=1)


def bn_normalize(x, st, eps, batch, acc, ln_stats):
    """batch_norm's (mean, rstd, x_hat) of x (C, n): the batch's statistics by ``ln_stats`` (the kernel's
    two-pass) when ``batch``, else the running ones of the state ``st``."""
    mean, rstd = ln_stats(x, eps) if batch else channel_running_stats(st, x.shape[0], eps, acc)
    return mean, rstd, (x - mean) * rstd


def channel_params(inputs, acc, C):
    """batch_norm's (weight, bias) as (C, 1) in ``acc``, each None when absent."""
    return tuple(reshaped(inputs.get(k), acc, (C, 1)) for k in ("weight", "bias"))


def channel_dy_and_g(call, acc, w):
    """batch_norm's (dy, g) as channel_rows (C, n): y's cotangent and g = dy * w (dy when ``w`` is None)."""
    dy = channel_rows(call.cotangents["y"], acc)
    return dy, (dy if w is None else dy * w)


def aln_modulation(scale, shift, B, H, T, acc):
    """adaptive_layer_norm's (gain 1 + scale, shift) per token, (B * T, H) in ``acc``, each None when absent."""
    return (None if scale is None else acc(1) + per_token(scale, B, H, T, acc),
            None if shift is None else per_token(shift, B, H, T, acc))
