"""An "otherwise correct" backend: an emulated fused normalization kernel in NumPy float32.

What a careful fused kernel does, written out in NumPy so that every rounding is explicit:

* inputs (case dtype) are upcast to the accumulation dtype A = float32 (float64 for float64 cases:
  the strict contract's "float32 internals, float64 for float64 cases");
* statistics are two-pass in A: mean = sum(x) / n, then var = sum((x - mean)^2) / n; the sums run
  along a contiguous axis, so NumPy accumulates them pairwise (the "tree" model; the backend declares
  the more generous default, "block");
* rstd = 1 / sqrt(var + eps) in A (rms_norm: eps inside or outside, weight_offset added in A);
* y = xhat * weight + bias in A, rounded ONCE to the case dtype with refnorm.check.precision.round_to
  (correct rounding; ml_dtypes' float64 -> bfloat16 cast would round twice);
* a hand-written backward in A with the reference's formulas:
  dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight (rms_norm: no mean(g) term,
  and x / rms in place of xhat for eps outside), dweight = sum(dy * xhat), dbias = sum(dy), the
  parameter sums again pairwise in A;
* running statistics updated in A (batch_norm: torch convention with the unbiased variance and
  momentum=None as the cumulative average, ONNX convention with the biased variance; instance_norm:
  torch's mean over n of the per-instance updates), stored in the case dtype.

It declares the strict/block contract and must pass every golden case of its ops.

``EmulatedBackend(mutation)`` plants one bug (a name of ``MUTATIONS``); ``pitfalls.py`` maps each
docs/pitfalls.md row to a mutation. A mutation changes only the computation it names; everything else
stays the correct kernel above, so a failure is that bug's and nobody else's.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Call, Contract, Returned
from refnorm.check.precision import NP, round_to
from refnorm.norms.rms_norm import default_eps

OPS = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "norm_quant", "add_norm", "dyt",
       "poly_norm", "group_norm_silu")
CENTERED = ("layer_norm", "group_norm", "batch_norm", "instance_norm")
BF16 = np.dtype(ml_dtypes.bfloat16)


# every mutation the kernel knows: name -> what it changes (pitfalls.py says which real bug each is)
MUTATIONS = {
    # statistics
    "one_pass_clamp": "var = max(0, sum(x^2)/n - mean^2) in the accumulation dtype (one pass, no centering)",
    "one_pass_thresh": "one-pass variance, then var < 1e-6 set to 0",
    "one_pass_noclamp": "one-pass variance with no guard: a negative variance gives sqrt(<0) = NaN",
    "folded_affine": "x_hat = fma(x, rstd, -mean*rstd): the centring folded into the scale (the shift "
                     "-mean*rstd rounded on its own), then * w + b",
    "pad_lanes": "masked lanes of a power-of-two block loaded as 0 enter sum((x - mean)^2): "
                 "var += (next_pow2(n) - n) * mean^2 / n",
    "pow2_divisor": "the block length next_pow2(n) used as the divisor of the mean and variance (mean of squares "
                    "for rms_norm)",
    "serial_acc": "every reduction (mean, variance, backward means, parameter sums) accumulated serially, "
                  "one element after another, in float32",
    "welford_merge_counts": "4 lane partials (count, mean, M2) merged as if every lane held ceil(n/4) values",
    # eps
    "eps_outside": "rms_norm: rstd = 1/(sqrt(mean x^2) + eps) where eps belongs inside the sqrt",
    "eps_none_f64": "rms_norm: eps=None taken as float64's machine epsilon 2^-52 for every dtype, where torch's rule "
                    "gives the float32 compute dtype's 2^-23 for float32/float16/bfloat16 input",
    "eps_in_d": "eps rounded to the case dtype before use (float16: 1e-12 -> 0)",
    "eps_min": "eps silently raised to max(eps, 1.001e-5)",
    "eps_square": "rstd = 1/(var + eps)^2: a square where the square root belongs",
    # precision
    "sq_in_d": "squares (x^2, or (x - mean)^2) rounded to the case dtype before the float32 sum",
    "var_in_d": "the variance stored in the case dtype before rstd",
    "var_eps_in_d": "rstd = rsqrt(var + eps) with var + eps rounded to the case dtype (float16: below its smallest "
                    "normal 6.1e-5 it keeps few bits, below 3e-8 it is 0 and rstd inf)",
    "sumsq_in_d": "rms_norm: sum of squares accumulated in the case dtype (squares and pairwise sums in d)",
    "ms_rstd_in_d": "rms_norm: mean of squares accumulated in the case dtype and rsqrt rounded to it",
    "stats_in_d": "mean and variance accumulated in the case dtype (pairwise in d, deviations in d)",
    "all_in_d": "the whole forward in the case dtype (every intermediate rounded to d)",
    "one_pass_in_d": "sum and sum of squares accumulated in the case dtype, one-pass variance",
    "dw_acc_in_d": "dweight: products rounded to d and reduced (pairwise) in the case dtype",
    "rstd_bf16": "rstd rounded to bfloat16 before the multiply",
    "truncate_out": "outputs converted to the case dtype by truncation instead of round-to-nearest",
    # affine conventions
    "no_offset": "rms_norm: weight_offset ignored (x_hat * w where x_hat * (1 + w) is asked)",
    "llama_cast": "rms_norm: x_hat rounded to d, multiplied by (w + offset) rounded to d, rounded again",
    "one_plus_in_d": "rms_norm: (w + weight_offset) rounded to the case dtype",
    "dx_no_offset": "rms_norm backward: g = dy * w instead of dy * (w + offset) (dweight unchanged)",
    "no_bias_drops_weight": "layer_norm: weight ignored when bias is absent (affine assumed to come in pairs)",
    "no_B_term": "dx = rstd * (g - mean(g)): the -x_hat * mean(g * x_hat) term missing",
    # running statistics, modes
    "running_var_biased": "running_var updated with the biased batch variance (torch convention wants unbiased)",
    "normalize_unbiased": "normalize with the unbiased variance var * n/(n-1)",
    "onnx_bessel": "ONNX convention: running_var updated with the unbiased variance (ONNX keeps the biased one)",
    "onnx_momentum_flip": "ONNX convention: momentum applied to the new value (torch's meaning)",
    "torch_momentum_flip": "torch convention: momentum applied to the old value (ONNX's meaning)",
    "rv_not_updated": "running_var left unchanged by a training call",
    "nbt_not_incremented": "batch_norm: num_batches_tracked not incremented by a training call",
    "eval_bwd_batch": "batch_norm eval with running stats: backward computed with the batch statistics",
    "in_eval_instance": "instance_norm eval with running stats: normalizes with the instance statistics",
    # layout, indexing, sizes
    "nhwc_param_index": "batch_norm in an NHWC buffer: weight/bias indexed with the NCHW formula (i // HW) % C",
    "gn_dgamma_layout": "group_norm: dweight reduced from an NHWC buffer read with NCHW indexing",
    "dy_layout": "group_norm backward: dy's channels-last memory read with x's (NCHW) indexing",
    "gn_bwd_W": "group_norm backward: means, dweight, dbias over the first row (W values) of each channel "
                "instead of all H*W (hidden_size = dy.shape[-1])",
    "param_mean_spatial": "group/batch/instance norm dweight, dbias: summed over the batch axis but averaged "
                          "(not summed) over the spatial axes",
    "dgamma_warp32": "dweight/dbias: each 64-row tile sums only its first 32 rows (warp size 64 on 32-wide hw)",
    "lost_partial": "layer_norm dweight/dbias: one lost update per partial buffer (GROUP_SIZE_M buffers; the "
                    "first holder's partial is overwritten when a second row uses the same buffer)",
    "row_index_2_16": "layer_norm: row index limited to 2^16 (rows >= 65536 repeat row r mod 65536)",
    "rows_2_23_mod4": "layer_norm: rows >= 2^23 come out zero when n % 4 != 0",
    "offset_int32": "layer_norm: 32-bit element offsets (numel > 2^32 wraps)",
    "gn_hwc_int32": "group_norm: int32 H*W*C index overflow (elements past 2^31 wrong)",
    "dgamma_shape_huge_m": "layer_norm, M > 65536: dgamma scratch sized normalized_shape[-1] (wrong shape)",
    "gn_wave64": "group_norm, N > 128 and C > 32: dgamma of channel c also sums the tile column c + 32",
    "dx_into_dy": "rms_norm backward: dx written in place into the caller's dy buffer",
    # fused residual add (add_norm)
    "residual_add_in_d": "add_norm: the residual sum rounded to the case dtype before the norm (and returned so)",
    "residual_out_in_d": "add_norm: residual_out rounded to the case dtype although residual_in_fp32 asks float32",
    "dropout_unscaled": "add_norm: dropout without the 1/(1 - p) scale",
    "no_dresidual_out": "add_norm backward: dresidual without the cotangent of the returned residual",
    "parallel_shared_mask": "add_norm: the parallel branch x1 dropped with x's keep-mask (mask1 ignored)",
    "no_dy1": "add_norm backward: ds without y1's path (dx, dresidual, dx1 from dy and dresidual_out only)",
    # GroupNorm + SiLU fused (group_norm_silu)
    "silu_before_affine": "group_norm_silu: SiLU applied before the affine (silu(x_hat) * w + b)",
    "silu_grad_at_xhat": "group_norm_silu backward: silu' evaluated at x_hat, without the affine",
    "silu_grad_at_output": "group_norm_silu backward: silu' evaluated at the output y = silu(p)",
    "gns_strided_groups": "group_norm_silu: group g over the channels c % G == g (the NHWC kernel's group index) "
                          "instead of the C/G consecutive channels",
    # semantic conventions
    "rms_centered_var": "rms_norm: x * rsqrt(var(x) + eps) with the centred variance in place of mean(x^2)",
    "rms_as_ln": "rms_norm computed as layer_norm (the mean removed)",
    "ln_as_rms": "layer_norm computed as rms_norm (no mean removed; T5LayerNorm)",
    "gn1_as_ln": "group_norm with G = 1 computed as layer_norm over C at every position",
    "gn_unbiased": "group_norm normalizes with the unbiased variance",
    # quantized outputs (norm_quant)
    "q_scale_rounded": "norm_quant: y rounded to the case dtype, the dynamic scale from its amax, q from it",
    "q_e4m3_nan": "norm_quant: float8 e4m3fn cast without the saturating clamp (overflow gives NaN)",
    "q_ub_ignored": "norm_quant: scale_ub ignored",
    "q_rcp_f16": "norm_quant: 1 / scale rounded to float16 before the multiply",
    "q_floor_default": "norm_quant: the case's min_scale ignored, the scale floored at 1/(qmax*512) (refnorm's and "
                       "vLLM's float8 default)",
    "q_floor_flt_eps": "norm_quant: the scale floored at FLT_EPSILON = 2^-23 whatever min_scale asks (vLLM's fused "
                       "int8 kernels)",
    "q_ties_away": "norm_quant int8: round half away from zero (C's roundf / llrintf-free casts) instead of half to "
                   "even",
    # dyt (dynamic tanh)
    "dyt_dalpha_row": "dyt: dalpha reduced over the last dimension only, the last row's partial kept",
    "dyt_dalpha_mean": "dyt: dalpha averaged over the elements instead of summed",
    "dyt_dx_no_alpha": "dyt backward: dx = g * (1 - t^2), alpha (the inner derivative) dropped",
    "dyt_sech_in_d": "dyt backward: 1 - t^2 from t rounded to the case dtype",
    # poly_norm (PolyCom)
    "pn_eps_outside": "poly_norm: r_p = 1 / (sqrt(mean(x^2p)) + eps), eps outside the square root",
    "pn_pow_in_d": "poly_norm: x^2 and x^3 rounded to the case dtype before the statistics",
    "pn_w_reversed": "poly_norm: weight[0] on x, weight[2] on x^3 (the order reversed)",
    "pn_no_chain": "poly_norm backward: dx = du_3 + du_2 + du_1 (the powers' derivatives dropped)",
}


# mutations a kernel would ship with an honest relaxed contract: a kernel that keeps its statistics in the case
# dtype declares "stats_d" (its rounding of var + eps to the dtype is then within contract wherever the dtype
# holds var + eps to its relative precision, i.e. above its smallest normal)
CONTRACT_OF = {"var_eps_in_d": "stats_d"}


def _next_pow2(n):
    return 1 << max(0, (int(n) - 1).bit_length())


class _K:
    """The numerics of one call: accumulation dtype A, case dtype d, the planted mutation."""

    def __init__(self, dtype, mutation):
        self.d = dtype
        self.A = np.float64 if dtype == "float64" else np.float32
        self.mut = mutation

    # ------------------------------------------------------------------ conversions
    def a(self, v):
        return None if v is None else np.asarray(v).astype(self.A)

    def q(self, v):
        """Round to the case dtype (kept in A). float32 -> float16 (NumPy) and float32 -> bfloat16
        (ml_dtypes) are single, correct roundings; float32/float64 cases: no-op."""
        v = np.asarray(v, dtype=self.A)
        if self.d in ("float32", "float64"):
            return v
        return v.astype(NP[self.d]).astype(self.A)

    def out(self, v):
        """The one final rounding to the case dtype."""
        v = np.asarray(v)
        if self.mut == "truncate_out" and self.d in ("float16", "bfloat16"):
            v64 = v.astype(np.float64)
            r = round_to(v64, self.d)
            r64 = r.astype(np.float64)
            with np.errstate(invalid="ignore"):
                over = np.isfinite(v64) & (np.abs(r64) > np.abs(v64))
            toward0 = np.nextafter(r, np.zeros((), dtype=r.dtype)) if r.size else r
            return np.where(over, toward0, r)
        return round_to(v.astype(np.float64), self.d)

    # ------------------------------------------------------------------ sums over axis 1 of (m, n)
    def sum(self, a):
        if self.mut == "serial_acc":
            return self.sum_serial(np.asarray(a, dtype=self.A))
        return np.ascontiguousarray(a, dtype=self.A).sum(axis=1, dtype=self.A, keepdims=True)

    def sum_d(self, a):
        """Pairwise sum with every partial rounded to the case dtype."""
        a = self.q(a)
        if a.shape[1] == 0:
            return np.zeros((a.shape[0], 1), self.A)
        while a.shape[1] > 1:
            h = a.shape[1] // 2
            s = self.q(a[:, :h] + a[:, h:2 * h])
            a = np.concatenate([s, a[:, 2 * h:]], axis=1) if a.shape[1] % 2 else s
        return a

    def sum_serial(self, a):
        acc = np.zeros((a.shape[0],), self.A)
        for j in range(a.shape[1]):
            acc = acc + a[:, j]
        return acc[:, None]

    # ------------------------------------------------------------------ statistics
    def eps(self, eps):
        eps = float(eps)
        if self.mut == "eps_in_d":
            eps = float(self.q(eps))
        if self.mut == "eps_min":
            eps = max(eps, 1.001e-5)
        return eps

    def moments(self, x):
        """(mean, deviations, variance) of rows x (m, n), each (m, 1) / (m, n)."""
        A, M = self.A, self.mut
        n = x.shape[1]
        nA = A(_next_pow2(n)) if M == "pow2_divisor" else A(max(n, 1))
        if M in ("one_pass_clamp", "one_pass_thresh", "one_pass_noclamp"):
            mean = self.sum(x) / nA
            var = self.sum(x * x) / nA - mean * mean
            if M == "one_pass_clamp":
                var = np.maximum(var, A(0))
            if M == "one_pass_thresh":
                var = np.where(var < A(1e-6), A(0), var)
            return mean, x - mean, var
        if M == "one_pass_in_d":
            mean = self.q(self.sum_d(x) / nA)
            var = self.q(self.q(self.sum_d(self.q(x * x)) / nA) - self.q(mean * mean))
            return mean, self.q(x - mean), var
        if M in ("stats_in_d", "all_in_d"):
            mean = self.q(self.sum_d(x) / nA)
            d = self.q(x - mean)
            return mean, d, self.q(self.sum_d(self.q(d * d)) / nA)
        if M == "welford_merge_counts" and n % 4:
            L = 4
            nominal = A(math.ceil(n / L))
            parts = [x[:, j::L] for j in range(L)]
            means = [self.sum(p) / A(p.shape[1]) for p in parts]
            m2s = [self.sum((p - mu) ** 2) for p, mu in zip(parts, means)]
            cnt, mean, m2 = nominal, means[0], m2s[0]
            for mu, s2 in zip(means[1:], m2s[1:]):          # Chan et al. merge with the nominal count
                tot = cnt + nominal
                delta = mu - mean
                mean = mean + delta * (nominal / tot)
                m2 = m2 + s2 + delta * delta * (cnt * nominal / tot)
                cnt = tot
            return mean, x - mean, m2 / cnt
        mean = self.sum(x) / nA
        d = x - mean
        sq = d * d
        if M == "sq_in_d":
            sq = self.q(sq)
        var = self.sum(sq) / nA
        if M == "pad_lanes":
            var = var + A(_next_pow2(n) - n) * (mean * mean) / nA
        if M == "var_in_d":
            var = self.q(var)
        if M in ("normalize_unbiased", "gn_unbiased") and n > 1:
            var = var * A(n / (n - 1))
        return mean, d, var

    def mean_square(self, x):
        A, M = self.A, self.mut
        nA = A(_next_pow2(x.shape[1])) if M == "pow2_divisor" else A(max(x.shape[1], 1))
        if M in ("sumsq_in_d", "ms_rstd_in_d"):
            return self.q(self.sum_d(self.q(x * x)) / nA)
        sq = x * x
        if M == "sq_in_d":
            sq = self.q(sq)
        return self.sum(sq) / nA

    def rstd(self, var, eps, placement="inside"):
        A = self.A
        one = A(1)
        with np.errstate(all="ignore"):
            if self.mut == "eps_square":
                r = one / (var + A(eps)) ** 2
            elif placement == "outside":
                r = one / (np.sqrt(var) + A(eps))
            elif self.mut == "var_eps_in_d":
                r = one / np.sqrt(self.q(var + A(eps)))
            else:
                r = one / np.sqrt(var + A(eps))
        if self.mut == "rstd_bf16":
            r = r.astype(BF16).astype(A)
        if self.mut in ("ms_rstd_in_d", "all_in_d"):
            r = self.q(r)
        return r

    # ------------------------------------------------------------------ rows: forward + backward
    def standardize(self, x, *, centered, eps, placement="inside", w=None, b=None, dy=None, w_bwd="same",
                    bwd_mask=None):
        """x (m, n) rows in A; w, b (effective weight, bias) broadcastable to (m, n) or None; dy (m, n)
        or None. Returns y, mean, rstd, var (m, 1), xhat, and given dy: dx and the per-element
        parameter-gradient terms pw = dy * xhat, pb = dy (masked by ``bwd_mask`` when given)."""
        A, M = self.A, self.mut
        m, n = x.shape
        eps = self.eps(eps)
        with np.errstate(all="ignore"):
            if centered:
                mean, d, var = self.moments(x)
            else:
                mean, d = np.zeros((m, 1), A), x
                if M == "rms_centered_var":
                    _, _, var = self.moments(x)
                else:
                    var = self.mean_square(x)
            r = self.rstd(var, eps, placement)
            xhat = d * r
            if M == "all_in_d":
                xhat = self.q(xhat)
            if M == "folded_affine" and centered:
                # torch CPU layer_norm_kernel's form: y = fma(x, rstd, -mean * rstd) * w + b, the shift
                # rounded on its own (the FMA emulated through float64 for float32)
                shift = -mean * r
                if A == np.float32:
                    xh = (x.astype(np.float64) * r.astype(np.float64) + shift.astype(np.float64)).astype(A)
                else:
                    xh = x * r + shift
                y = xh if w is None else xh * w
                if b is not None:
                    y = y + b
            elif M == "llama_cast" and w is not None:
                y = self.q(self.q(xhat) * self.q(w))
            else:
                y = xhat if w is None else xhat * w
                if M == "all_in_d":
                    y = self.q(y)
                if b is not None:
                    y = y + b
            res = {"y": y, "mean": mean, "rstd": r, "var": var, "xhat": xhat}
            if dy is None:
                return res
            wb = w if isinstance(w_bwd, str) else w_bwd
            g = dy if wb is None else dy * wb
            sel = (lambda t: t) if bwd_mask is None else (lambda t: t * bwd_mask)
            cnt = A(n) if bwd_mask is None else self.sum(bwd_mask)
            if centered:
                Am = self.sum(sel(g)) / cnt
                Bm = self.sum(sel(g * xhat)) / cnt
                dx = r * (g - Am) if M == "no_B_term" else r * (g - Am - xhat * Bm)
            else:
                Bm = self.sum(g * xhat) / A(n)
                if placement == "outside":
                    rms = np.sqrt(var)
                    u = np.where(rms == 0, A(0), x / np.where(rms == 0, A(1), rms))
                else:
                    u = xhat
                dx = r * (g - u * Bm)
            res.update(dx=dx, pw=sel(dy * xhat), pb=sel(dy))
        return res

    def param_sum(self, T, keep, shape, *, is_weight):
        """Sum the per-element terms T (x-shaped) over every axis but ``keep`` (pairwise in A)."""
        other = tuple(i for i in range(T.ndim) if i not in keep)
        Tt = np.ascontiguousarray(np.transpose(T, tuple(keep) + other), dtype=self.A)
        Tt = Tt.reshape(int(np.prod([T.shape[i] for i in keep], dtype=np.int64)), -1)
        if self.mut == "dw_acc_in_d" and is_weight:
            return self.sum_d(self.q(Tt)).reshape(shape)
        return self.sum(Tt).reshape(shape)


# ---------------------------------------------------------------------------------------- ops
def _perm_rows(x, axes):
    """Rows (m, n) of x reducing over ``axes`` (kept axes first, C order), and the inverse map."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    t = np.ascontiguousarray(np.transpose(x, perm))
    m = int(np.prod([x.shape[i] for i in keep], dtype=np.int64))
    rows = t.reshape(m, -1)
    tshape = t.shape

    def back(r):
        return np.transpose(np.asarray(r).reshape(tshape), np.argsort(perm))
    return rows, back


def _bcast_rows(p, x, axes):
    """A parameter broadcast (as x-shaped) and laid out as x's rows."""
    return _perm_rows(np.broadcast_to(p, x.shape), axes)[0]


class EmulatedBackend:
    """Backend protocol (refnorm.check.backends.base). ``mutation``: None (correct) or a MUTATIONS key."""

    def __init__(self, mutation: str | None = None):
        if mutation is not None and mutation not in MUTATIONS:
            raise ValueError(f"unknown mutation {mutation!r}")
        self.mutation = mutation
        self.name = "emulated-fp32" + (f"[{mutation}]" if mutation else "")

    def available(self):
        return None

    def supports(self, call):
        return None if call.op in OPS else f"the emulated kernel implements {', '.join(OPS)} only"

    def contract(self, call):
        return Contract(CONTRACT_OF.get(self.mutation, "strict"), "block")

    def run(self, call: Call) -> Returned:
        k = _K(call.dtype, self.mutation)
        with np.errstate(all="ignore"):         # a kernel's inf/NaN is a value to judge, never a Python warning
            return getattr(self, "_" + call.op)(call, k)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _dy(call, k):
        dy = call.cotangents.get("y") if call.cotangents else None
        return None if dy is None else k.a(dy)

    @staticmethod
    def _finish(k, outs, grads, state=None):
        return Returned({n: k.out(v) for n, v in outs.items()}, {n: k.out(v) for n, v in grads.items()},
                        state or {})

    # ------------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, k):
        M = k.mut
        ns = call.config["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        x = k.a(call.inputs["x"])
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        if w is not None and float(call.config.get("weight_offset", 0.0)):
            w = w + k.A(call.config["weight_offset"])          # zero-centred gamma
        if M == "no_bias_drops_weight" and w is not None and b is None:
            w = None
        nd = len(ns)
        lead = x.shape[:x.ndim - nd]
        m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
        xr = x.reshape(m, n)
        dy = self._dy(call, k)
        r = k.standardize(xr, centered=(M != "ln_as_rms"), eps=call.config.get("eps", 1e-5),
                          w=None if w is None else w.reshape(1, n), b=None if b is None else b.reshape(1, n),
                          dy=None if dy is None else dy.reshape(m, n))
        y = r["y"]
        if M == "row_index_2_16" and m > 65536:
            y = y[np.arange(m) % 65536]
        if M == "rows_2_23_mod4" and m >= 2 ** 23 and n % 4:
            y = np.where(np.arange(m)[:, None] >= 2 ** 23, 0, y)
        if M == "offset_int32" and x.size > 2 ** 32:
            y = y.reshape(-1)[np.arange(y.size) % 2 ** 32].reshape(y.shape)
        stat = lead + (1,) * nd
        outs = {"y": y.reshape(x.shape), "rstd": r["rstd"].reshape(stat)}
        outs["mean"] = r["mean"].reshape(stat)
        grads = {}
        if dy is not None:
            grads["x"] = r["dx"].reshape(x.shape)
            for name, p, t in (("weight", w, "pw"), ("bias", b, "pb")):
                if call.inputs.get(name) is None:
                    continue
                if p is None:                          # the weight a mutation dropped: still reported
                    p = k.a(call.inputs[name])
                T = r[t]
                if M == "dgamma_warp32":
                    T = T * ((np.arange(m) % 64) < 32)[:, None]
                if M == "lost_partial":
                    group = 256 if n <= 1024 else 128 if n <= 4096 else 96 if n <= 8192 else 64
                    rows = np.arange(m)
                    T = T * ~((rows < group) & (rows + group < m))[:, None]
                g = k.param_sum(T.reshape(x.shape), tuple(range(len(lead), x.ndim)), ns, is_weight=t == "pw")
                if M == "dgamma_shape_huge_m" and m > 65536 and nd > 1:
                    g = g.reshape(-1, ns[-1]).sum(axis=0)
                grads[name] = g
        return self._finish(k, outs, grads)

    # ------------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, k):
        M = k.mut
        cfg = call.config
        ns = cfg["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        eps = cfg.get("eps", None)
        eps = (2.0 ** -52 if M == "eps_none_f64" else default_eps(call.dtype)) if eps is None else float(eps)
        placement = cfg.get("eps_placement", "inside")
        if M == "eps_outside":
            placement = "outside"
        off = float(cfg.get("weight_offset", 0.0))
        x = k.a(call.inputs["x"])
        w = k.a(call.inputs.get("weight"))
        nd = len(ns)
        lead = x.shape[:x.ndim - nd]
        m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
        w_eff = w_bwd = None
        if w is not None:
            w_eff = w.reshape(1, n) if (off == 0.0 or M == "no_offset") else w.reshape(1, n) + k.A(off)
            if M == "one_plus_in_d":
                w_eff = k.q(w_eff)
            w_bwd = w.reshape(1, n) if M == "dx_no_offset" else w_eff
        dy = self._dy(call, k)
        r = k.standardize(x.reshape(m, n), centered=(M == "rms_as_ln"), eps=eps, placement=placement, w=w_eff,
                          dy=None if dy is None else dy.reshape(m, n), w_bwd=w_bwd)
        outs = {"y": r["y"].reshape(x.shape), "rstd": r["rstd"].reshape(lead + (1,) * nd)}
        grads = {}
        if dy is not None:
            grads["x"] = r["dx"].reshape(x.shape)
            if M == "dx_into_dy":
                np.copyto(call.cotangents["y"], k.out(grads["x"]))     # the caller's buffer
            if w is not None:
                T = r["pw"]
                if M == "dgamma_warp32":
                    T = T * ((np.arange(m) % 64) < 32)[:, None]
                grads["weight"] = k.param_sum(T.reshape(x.shape), tuple(range(len(lead), x.ndim)), ns,
                                              is_weight=True)
        return self._finish(k, outs, grads)

    # ------------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, k):
        """The fused kernel: y in A (as _layer_norm / _rms_norm, never rounded to d), amax, the scale
        amax / qmax capped by scale_ub and floored by min_scale in A (or the static scale), y * (1 / scale)
        in A, clamped to the quantized range, then one rounding to the quantized dtype (ml_dtypes' float8
        casts from float32/float64 round to nearest even; int8: np.rint). scale and amax come back in A."""
        from refnorm.norms.norm_quant import QUANT_DTYPES, default_min_scale, qmax
        M, cfg = k.mut, call.config
        ns = cfg["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        x = k.a(call.inputs["x"])
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        lead = x.shape[:x.ndim - len(ns)]
        m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
        r = k.standardize(x.reshape(m, n), centered=cfg.get("norm", "rms_norm") == "layer_norm",
                          eps=cfg.get("eps", 1e-5), w=None if w is None else w.reshape(1, n),
                          b=None if b is None else b.reshape(1, n))
        y = r["y"]
        if M == "q_scale_rounded" and "static_scale" not in call.inputs:
            y = k.q(y)
        qd = cfg.get("quant_dtype", "float8_e4m3fn")
        amax = np.max(np.abs(y), axis=1, keepdims=True)
        if "static_scale" in call.inputs:
            scale = np.full((m, 1), k.a(call.inputs["static_scale"]).reshape(()))
        else:
            scale = amax / k.A(qmax(qd))
            if cfg.get("scale_ub") is not None and M != "q_ub_ignored":
                scale = np.minimum(scale, k.A(cfg["scale_ub"]))
            floor = cfg.get("min_scale")
            floor = default_min_scale(qd) if floor is None or M == "q_floor_default" else floor
            scale = np.maximum(scale, k.A(2.0 ** -23 if M == "q_floor_flt_eps" else floor))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            rcp = k.A(1) / scale
            if M == "q_rcp_f16":
                rcp = rcp.astype(np.float16).astype(k.A)
            v = np.where(scale == 0, k.A(0), y * rcp)    # min_scale=0, an all-zero row: 0, not 0 * inf
        dt, lo, hi = QUANT_DTYPES[qd]
        if not (M == "q_e4m3_nan" and qd == "float8_e4m3fn"):
            v = np.clip(v, k.A(lo), k.A(hi))
        if dt.kind == "i":                       # a NaN (0 * inf) converts to 0, as a saturating cvt does
            v = np.where(np.isnan(v), k.A(0), v)
            q = (np.sign(v) * np.floor(np.abs(v) + k.A(0.5)) if M == "q_ties_away" else np.rint(v)).astype(dt)
        else:
            q = v.astype(dt)
        stat = lead + (1,) * len(ns)
        return Returned({"q": q.reshape(x.shape), "scale": scale.reshape(stat), "amax": amax.reshape(stat)})

    # ------------------------------------------------------------------ add_norm
    def _add_norm(self, call, k):
        """s = x * mask * rowscale * (1/(1 - p)) (+ x1 * mask1 * (1/(1 - p))) + residual in A, then the
        layer/rms kernel above on s (once more with weight1, bias1, dy1 for y1: its dx joins ds);
        residual_out = s rounded once to its dtype (float32 under residual_in_fp32 for 16-bit cases)."""
        M, cfg = k.mut, call.config
        A = k.A
        ns = cfg["normalized_shape"]
        ns = (ns,) if isinstance(ns, int) else tuple(ns)
        nd = len(ns)
        x = k.a(call.inputs["x"])
        lead = x.shape[:x.ndim - nd]
        m, n = int(np.prod(lead, dtype=np.int64)), int(np.prod(ns, dtype=np.int64))
        res, mask, rs = (k.a(call.inputs.get(key)) for key in ("residual", "mask", "rowscale"))
        c = np.ones(x.shape, A)
        if mask is not None:
            c = c * mask
        if rs is not None:
            c = c * rs.reshape(rs.shape + (1,) * nd)
        p = float(cfg.get("dropout_p", 0.0))
        if p and M != "dropout_unscaled":
            c = c * A(1.0 / (1.0 - p))
        s = x * c if (mask is not None or rs is not None or p) else x
        x1 = k.a(call.inputs.get("x1"))
        if x1 is not None:
            m1 = k.a(call.inputs.get("mask" if M == "parallel_shared_mask" else "mask1"))
            c1 = np.ones(x.shape, A) if m1 is None else m1
            if p and M != "dropout_unscaled":      # a kernel without the scale drops it on both branches
                c1 = c1 * A(1.0 / (1.0 - p))
            s = s + (x1 * c1 if (m1 is not None or p) else x1)
        if res is not None:
            s = s + res
        if M == "residual_add_in_d":
            s = k.q(s)
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        if w is not None:
            w = w + A(cfg.get("weight_offset", 0.0))
        dy = self._dy(call, k)
        def norm(w, b, dy):
            return k.standardize(s.reshape(m, n), centered=cfg.get("norm", "layer_norm") == "layer_norm",
                                 eps=cfg.get("eps", 1e-5), w=None if w is None else w.reshape(1, n),
                                 b=None if b is None else b.reshape(1, n), dy=None if dy is None else dy.reshape(m, n))
        r = norm(w, b, dy)
        res_dt = "float32" if cfg.get("residual_in_fp32", False) and k.d in ("float16", "bfloat16") else k.d
        ro = k.q(s) if M == "residual_out_in_d" else s
        outs = {"y": k.out(r["y"].reshape(x.shape)), "residual_out": round_to(ro.astype(np.float64), res_dt)}
        w1, b1 = k.a(call.inputs.get("weight1")), k.a(call.inputs.get("bias1"))
        dy1 = None
        if w1 is not None:
            w1 = w1 + A(cfg.get("weight_offset", 0.0))
            dy1 = None if dy is None or call.cotangents.get("y1") is None else k.a(call.cotangents["y1"])
            r1 = norm(w1, b1, dy1)
            outs["y1"] = k.out(r1["y"].reshape(x.shape))
        grads = {}
        if dy is not None:
            ds = r["dx"].reshape(x.shape)
            if dy1 is not None and M != "no_dy1":
                ds = ds + r1["dx"].reshape(x.shape)
            dro = call.cotangents.get("residual_out")
            if cfg.get("prenorm", True) and dro is not None and M != "no_dresidual_out":
                ds = ds + k.a(dro)
            grads["x"] = ds * c
            if res is not None:
                grads["residual"] = ds
            keep = tuple(range(len(lead), x.ndim))
            if w is not None:
                grads["weight"] = k.param_sum(r["pw"].reshape(x.shape), keep, ns, is_weight=True)
            if b is not None:
                grads["bias"] = k.param_sum(r["pb"].reshape(x.shape), keep, ns, is_weight=False)
            if x1 is not None:
                grads["x1"] = ds * c1
            if dy1 is not None:
                grads["weight1"] = k.param_sum(r1["pw"].reshape(x.shape), keep, ns, is_weight=True)
                if b1 is not None:
                    grads["bias1"] = k.param_sum(r1["pb"].reshape(x.shape), keep, ns, is_weight=False)
            if rs is not None:
                t = ds * x * (1 if mask is None else mask)
                if p and M != "dropout_unscaled":
                    t = t * A(1.0 / (1.0 - p))
                grads["rowscale"] = k.sum(t.reshape(m, n)).reshape(lead)
            grads = {name: k.out(v) for name, v in grads.items()}
        return Returned(outs, grads, {})

    # ------------------------------------------------------------------ dyt
    def _dyt(self, call, k):
        """t = tanh(alpha * x) in A, y = t * w + b rounded once; backward: D = 1 - t * t (autograd's tanh
        backward), dx = g * D * alpha, dalpha = the pairwise sum of g * D * x over every element, dweight and
        dbias pairwise over the rows."""
        M = k.mut
        x = k.a(call.inputs["x"])
        alpha = call.inputs["alpha"]
        a = k.a(alpha).reshape(())
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        t = np.tanh(a * x)
        y = t if w is None else t * w
        y = y if b is None else y + b
        grads = {}
        dy = self._dy(call, k)
        if dy is not None:
            C = x.shape[-1]
            rows = lambda v: v.reshape(-1, C)                               # noqa: E731
            g = dy if w is None else dy * w
            tb = k.q(t) if M == "dyt_sech_in_d" else t
            gd = g * (k.A(1.0) - tb * tb)
            grads["x"] = gd if M == "dyt_dx_no_alpha" else gd * a
            terms = gd * x
            if M == "dyt_dalpha_row":
                da = k.sum(rows(terms))[-1, 0]
            else:
                da = k.sum(terms.reshape(1, -1))[0, 0]
                if M == "dyt_dalpha_mean":
                    da = da / k.A(max(x.size, 1))
            grads["alpha"] = np.full(np.shape(alpha), da, dtype=k.A)
            if w is not None:
                grads["weight"] = k.sum(np.ascontiguousarray(rows(dy * t).T))[:, 0]
            if b is not None:
                grads["bias"] = k.sum(np.ascontiguousarray(rows(dy).T))[:, 0]
        return self._finish(k, {"y": y}, grads)

    # ------------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, k):
        """Per power p = 3, 2, 1: U = x*x*x, x*x, x in A, r = 1 / sqrt(sum(U*U)/n + eps), h = U * r (rms_norm's
        kernel); y = w0 h_3 + w1 h_2 + w2 h_1 + b rounded once; backward: du = r * (g - h * sum(g * h)/n),
        g = dy * w_p, dx = 3 x^2 du_3 + 2 x du_2 + du_1, dweight and dbias pairwise over every element."""
        M = k.mut
        x = k.a(call.inputs["x"])
        n = x.shape[-1]
        X = x.reshape(-1, n)
        A = k.A
        w, b = k.a(call.inputs["weight"]), k.a(call.inputs.get("bias"))
        if M == "pn_w_reversed":
            w = w[::-1].copy()
        eps = A(call.config.get("eps", 1e-6))
        dy = self._dy(call, k)
        G = None if dy is None else dy.reshape(-1, n)
        y = np.zeros(X.shape, A) + (A(0) if b is None else b.reshape(()))
        dx = np.zeros(X.shape, A)
        dw = np.zeros(3, A)
        for j, U in enumerate((X * X * X, X * X, X)):
            p = 3 - j
            if M == "pn_pow_in_d" and p > 1:
                U = k.q(U)
            ms = k.sum(U * U) / A(n)
            rms = np.sqrt(ms)
            r = A(1) / (rms + eps) if M == "pn_eps_outside" else A(1) / np.sqrt(ms + eps)
            h = U * r
            y = y + w[j] * h
            if G is not None:
                g = G * w[j]
                B = k.sum(g * h) / A(n)
                uh = np.where(rms == 0, A(0), U / np.where(rms == 0, A(1), rms)) if M == "pn_eps_outside" else h
                du = r * (g - uh * B)
                q = A(3) * X * X if p == 3 else (A(2) * X if p == 2 else None)
                dx = dx + (du if (q is None or M == "pn_no_chain") else q * du)
                dw[j] = k.sum((G * h).reshape(1, -1))[0, 0]
        grads = {}
        if G is not None:
            grads["x"] = dx.reshape(x.shape)
            grads["weight"] = dw[::-1].copy() if M == "pn_w_reversed" else dw
            if b is not None:
                grads["bias"] = np.full(np.shape(call.inputs["bias"]), k.sum(G.reshape(1, -1))[0, 0], dtype=A)
        return self._finish(k, {"y": y.reshape(x.shape)}, grads)

    # ------------------------------------------------------------------ group_norm
    def _group_norm(self, call, k):
        M = k.mut
        G = int(call.config["num_groups"])
        eps = call.config.get("eps", 1e-5)
        x = k.a(call.inputs["x"])
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        N, C = x.shape[:2]
        S = int(np.prod(x.shape[2:], dtype=np.int64))
        pb = (1, C) + (1,) * (x.ndim - 2)
        wf = None if w is None else np.broadcast_to(w.reshape(pb), x.shape)
        bf = None if b is None else np.broadcast_to(b.reshape(pb), x.shape)
        dy = self._dy(call, k)
        if M == "dy_layout" and dy is not None and x.ndim > 2:
            dy = np.moveaxis(dy, 1, -1).reshape(-1).reshape(dy.shape)
        outs = {}
        if M == "gn1_as_ln" and G == 1:
            # normalize over C at every (n, position): rows (N * S, C)
            axes = (1,)
            xr, back = _perm_rows(x, axes)
            r = k.standardize(xr, centered=True, eps=eps,
                              w=None if w is None else _bcast_rows(wf, x, axes),
                              b=None if b is None else _bcast_rows(bf, x, axes),
                              dy=None if dy is None else _perm_rows(dy, axes)[0])
            outs["y"] = back(r["y"])
        else:
            view = (N * G, (C // G) * S)
            mask = None
            if M == "gn_bwd_W" and x.ndim >= 4:
                first = np.zeros(x.shape, dtype=bool)
                first[(slice(None), slice(None)) + (0,) * (x.ndim - 3) + (slice(None),)] = True
                mask = first.reshape(view).astype(k.A)
            r = k.standardize(x.reshape(view), centered=True, eps=eps,
                              w=None if w is None else wf.reshape(view), b=None if b is None else bf.reshape(view),
                              dy=None if dy is None else dy.reshape(view), bwd_mask=mask)
            back = lambda t: np.asarray(t).reshape(x.shape)                     # noqa: E731
            outs["y"] = back(r["y"])
            outs["mean"] = r["mean"].reshape(N, G)
            outs["rstd"] = r["rstd"].reshape(N, G)
        y = outs["y"]
        if M == "gn_hwc_int32" and x.size >= 2 ** 31:
            outs["y"] = y.reshape(-1)[np.arange(y.size) % 2 ** 31].reshape(y.shape)
        grads = {}
        if dy is not None:
            grads["x"] = back(r["dx"])
            for name, p, t in (("weight", w, "pw"), ("bias", b, "pb")):
                if p is None:
                    continue
                T = back(r[t])
                if M == "gn_dgamma_layout" and t == "pw" and x.ndim > 2:
                    T = np.moveaxis(T, 1, -1).reshape(-1).reshape(T.shape)
                g = k.param_sum(T, (1,), (C,), is_weight=t == "pw")
                if M == "param_mean_spatial":
                    g = g / k.A(S)
                if M == "gn_wave64" and N > 128 and C > 32:
                    c = np.arange(C)
                    partner = np.where(c % 64 < 32, c + 32, c)
                    g = g + np.where((partner < C) & (partner != c), g[np.minimum(partner, C - 1)], 0)
                grads[name] = g
        return self._finish(k, outs, grads)

    # ------------------------------------------------------------------ group_norm_silu
    def _group_norm_silu(self, call, k):
        """group_norm's rows in A (every statistics mutation of k.standardize applies), y = p * sigmoid(p) in A
        (sigmoid as 1 / (1 + exp(-p)): -0 where exp(-p) overflows), the backward dp = dy * s (1 + p (1 - s)) in
        A, then group_norm's backward with dp; one final rounding of each array."""
        from refnorm.pitfalls.group_norm_silu import strided_order
        M, A = k.mut, k.A
        G = int(call.config["num_groups"])
        eps = call.config.get("eps", 1e-5)
        x = k.a(call.inputs["x"])
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        dy = self._dy(call, k)
        N, C = x.shape[:2]
        perm = strided_order(C, G) if M == "gns_strided_groups" else np.arange(C)
        inv = np.argsort(perm)
        x = x[:, perm]
        w, b = (None if v is None else v[perm] for v in (w, b))
        dy = None if dy is None else dy[:, perm]
        view = (N * G, x.size // (N * G) if N * G else 0)
        pb = (1, C) + (1,) * (x.ndim - 2)
        wv, bv = (None if v is None else np.broadcast_to(v.reshape(pb), x.shape).reshape(view) for v in (w, b))
        one = A(1)

        def sig(t):
            return one / (one + np.exp(-t))

        def silu_grad(t):
            s = sig(t)
            return s * (one + t * (one - s))
        before = M == "silu_before_affine"
        r = k.standardize(x.reshape(view), centered=True, eps=eps, w=None if before else wv, b=None if before else bv)
        xhat, p = r["xhat"], r["y"]
        if before:
            y = xhat * sig(xhat)
            y = y if wv is None else y * wv
            y = y if bv is None else y + bv
        else:
            y = p * sig(p)
        back = lambda t: np.asarray(t).reshape(x.shape)[:, inv]          # noqa: E731
        outs = {"y": back(y), "mean": r["mean"].reshape(N, G), "rstd": r["rstd"].reshape(N, G)}
        grads = {}
        if dy is not None:
            dyv = dy.reshape(view)
            if before:
                g = dyv if wv is None else dyv * wv
                rb = k.standardize(x.reshape(view), centered=True, eps=eps, dy=g * silu_grad(xhat))
                pw, pb_ = dyv * (xhat * sig(xhat)), dyv
            else:
                at = {"silu_grad_at_xhat": xhat, "silu_grad_at_output": y}.get(M, p)
                rb = k.standardize(x.reshape(view), centered=True, eps=eps, w=wv, b=bv, dy=dyv * silu_grad(at))
                pw, pb_ = rb["pw"], rb["pb"]
            grads["x"] = back(rb["dx"])
            for name, v, t in (("weight", w, pw), ("bias", b, pb_)):
                if v is not None:
                    T = np.asarray(t).reshape(x.shape)
                    grads[name] = k.param_sum(T, (1,), (C,), is_weight=name == "weight")[inv]
        return self._finish(k, outs, grads)

    # ------------------------------------------------------------------ batch_norm, instance_norm
    def _affine_eval(self, k, x, rm, rv, eps, wf, bf, dy, pb):
        """Normalization with given per-channel statistics (eval mode): y = (x - rm) r w + b;
        ``wf``, ``bf``: the weight and bias broadcast to x's shape (or None)."""
        eps = k.eps(eps)
        r = k.rstd(rv, eps).reshape(pb)
        xhat = (x - rm.reshape(pb)) * r
        y = xhat if wf is None else xhat * wf
        if bf is not None:
            y = y + bf
        res = {"y": y, "rstd": r}
        if dy is not None:
            g = dy if wf is None else dy * wf
            res.update(dx=g * r, pw=dy * xhat, pb=dy)
        return res

    @staticmethod
    def _nhwc_affine(xhat, w, b):
        """F01: the affine epilogue in an NHWC buffer, per-channel parameters indexed as if NCHW."""
        N, C = xhat.shape[:2]
        S = int(np.prod(xhat.shape[2:], dtype=np.int64))
        buf = np.moveaxis(xhat, 1, -1).reshape(-1)             # NHWC memory
        ch = (np.arange(buf.size) // S) % C                    # NCHW channel formula on NHWC memory
        yb = buf if w is None else buf * w[ch]
        if b is not None:
            yb = yb + b[ch]
        return np.moveaxis(yb.reshape((N,) + xhat.shape[2:] + (C,)), -1, 1)

    def _batch_norm(self, call, k):
        return self._bn_in(call, k, "batch_norm")

    def _instance_norm(self, call, k):
        return self._bn_in(call, k, "instance_norm")

    def _bn_in(self, call, k, op):
        M, A = k.mut, k.A
        cfg = call.config
        eps = cfg.get("eps", 1e-5)
        x = k.a(call.inputs["x"])
        w, b = k.a(call.inputs.get("weight")), k.a(call.inputs.get("bias"))
        N, C = x.shape[:2]
        pb = (1, C) + (1,) * (x.ndim - 2)
        st = call.state or {}
        tracking = st.get("running_mean") is not None
        rm = k.a(st.get("running_mean"))
        rv = k.a(st.get("running_var"))
        nbt = np.asarray(st.get("num_batches_tracked", 0), dtype=np.int64)
        dy = self._dy(call, k)
        axes = (0,) + tuple(range(2, x.ndim)) if op == "batch_norm" else tuple(range(2, x.ndim))
        use_batch = call.training or not tracking or (op == "instance_norm" and M == "in_eval_instance")
        wf = None if w is None else np.broadcast_to(w.reshape(pb), x.shape)
        bf = None if b is None else np.broadcast_to(b.reshape(pb), x.shape)
        stat_shape = (C,) if op == "batch_norm" else (N, C)
        outs, state = {}, {}
        if M == "nhwc_param_index" and op == "batch_norm" and x.ndim > 2:
            ones = np.ones(x.shape, k.A)
            wf = None if w is None else self._nhwc_affine(ones, w, None)
            bf = None if b is None else self._nhwc_affine(ones * 0, None, b)
        if use_batch:
            xr, back = _perm_rows(x, axes)
            n = xr.shape[1]
            r = k.standardize(xr, centered=True, eps=eps,
                              w=None if w is None else _bcast_rows(wf, x, axes),
                              b=None if b is None else _bcast_rows(bf, x, axes),
                              dy=None if dy is None else _perm_rows(dy, axes)[0])
            outs = {"y": back(r["y"]), "mean": r["mean"].reshape(stat_shape), "rstd": r["rstd"].reshape(stat_shape)}
            res = {"dx": None if dy is None else back(r["dx"]), "pw": None if dy is None else back(r["pw"]),
                   "pb": None if dy is None else back(r["pb"])}
            if tracking and call.training:
                mean = r["mean"].reshape(stat_shape)
                var = r["var"].reshape(stat_shape)
                if M == "normalize_unbiased" and n > 1:            # the tracked value stays the true one
                    var = var / A(n / (n - 1))
                state = self._running(k, op, cfg, rm, rv, nbt, mean, var, n)
        else:
            res = self._affine_eval(k, x, rm, rv, eps, wf, bf, dy, pb)
            if M == "eval_bwd_batch" and dy is not None and op == "batch_norm":
                xr, back = _perm_rows(x, axes)
                r = k.standardize(xr, centered=True, eps=eps, w=None if w is None else _bcast_rows(wf, x, axes),
                                  dy=_perm_rows(dy, axes)[0])
                res.update(dx=back(r["dx"]), pw=back(r["pw"]), pb=back(r["pb"]))
            rstd = np.broadcast_to(res["rstd"].reshape(C), stat_shape)
            outs = {"y": res["y"], "mean": np.broadcast_to(rm, stat_shape), "rstd": rstd}
        if tracking and not state:
            state = {"running_mean": rm, "running_var": rv, "num_batches_tracked": nbt.copy()}
        grads = {}
        if dy is not None:
            grads["x"] = res["dx"]
            for name, p, t in (("weight", w, "pw"), ("bias", b, "pb")):
                if p is not None:
                    g = k.param_sum(res[t], (1,), (C,), is_weight=t == "pw")
                    if M == "param_mean_spatial":
                        g = g / A(int(np.prod(x.shape[2:], dtype=np.int64)))
                    grads[name] = g
        ret = self._finish(k, outs, grads)
        if tracking:
            state = {"running_mean": k.out(state["running_mean"]), "running_var": k.out(state["running_var"]),
                     "num_batches_tracked": np.asarray(state["num_batches_tracked"], dtype=np.int64)}
        return Returned(ret.outputs, ret.grads, state)

    def _running(self, k, op, cfg, rm, rv, nbt, mean, var, n):
        """New running statistics (in A) after one training call; mean, var: biased batch statistics."""
        M, A = k.mut, k.A
        new_nbt = nbt + 1 if (op == "batch_norm" and M != "nbt_not_incremented") else nbt.copy()
        if n == 0:
            return {"running_mean": rm, "running_var": rv, "num_batches_tracked": new_nbt}
        if op == "batch_norm":
            conv = cfg.get("convention", "torch")
            if conv == "onnx":
                mom = cfg.get("momentum", 0.9)
                keep, take = float(mom), 1.0 - float(mom)             # ONNX: momentum weights the OLD value
                if M == "onnx_momentum_flip":
                    keep, take = take, keep
                bessel = n / (n - 1) if (M == "onnx_bessel" and n > 1) else 1.0
            else:
                mom = cfg.get("momentum", 0.1)
                p = 1.0 / float(nbt + 1) if mom is None else float(mom)
                keep, take = 1.0 - p, p
                if M == "torch_momentum_flip":
                    keep, take = take, keep
                bessel = 1.0 if (M == "running_var_biased" or n <= 1) else n / (n - 1)
            new_rm = A(keep) * rm + A(take) * mean
            new_rv = rv if M == "rv_not_updated" else A(keep) * rv + A(take) * (var * A(bessel))
        else:
            mom = cfg.get("momentum", 0.1)
            p = 0.0 if mom is None else float(mom)
            keep, take = 1.0 - p, p
            if M == "torch_momentum_flip":
                keep, take = take, keep
            bessel = 1.0 if (M == "running_var_biased" or n <= 1) else n / (n - 1)
            new_rm = (A(keep) * rm + A(take) * mean).mean(axis=0, dtype=A)
            new_rv = rv if M == "rv_not_updated" else \
                (A(keep) * rv + A(take) * (var * A(bessel))).mean(axis=0, dtype=A)
        return {"running_mean": new_rm, "running_var": new_rv, "num_batches_tracked": new_nbt}
