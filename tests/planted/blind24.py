"""A twenty-fourth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind24Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln24``, ``_rms24``, ``_an24``, ``_nq24``, ``_gated24``, ``_dyt24``,
``_poly24``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind24Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug by docs/verdicts.md's "Which mechanism a bug
is" (the first rule that applies), one of ``LABELS`` (the project's taxonomy, the same tuple as blind3's), or
None where none fits. ``source`` is a public bug report or fix where the mistake really happened (a GitHub
issue or pull request), "cf. ..." where a public report shows the same mistake in a neighbouring kernel, or
"pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic, docs/verdicts.md's labelling rule and public bug reports
only, by an author who did not read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran
the diagnosis on these bugs. None of its bugs repeats one of tests/planted/blind.py, blind2.py, ...,
blind23.py (the same mistake on the same op; the twenty-fifth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx_dz,
                          gated_grads, gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned,
                          normalized_rows, poly_combine, poly_grads, poly_inputs, poly_normalize, pow2,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, rms_stats, row_affine, row_weight_bias,
                          rowscale_grad, rsum as _rsum, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind20 import _bf16_toward_zero, _next_row, _norm_dx
from .blind23 import _toward_zero

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind24Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_dy_of_next_row": (
        "layer_norm", "layout",
        "more than one row: the backward kernel advances its dy pointer at the top of the row loop (x's and the "
        "statistics' at the bottom): row r's dy is row r + 1's, the last row's load masked out of bounds (0): dx, "
        "dweight and dbias; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's values)"),
    "ln_bwd_dx_bf16_truncated": (
        "layer_norm", "rounding",
        "bfloat16 inputs: the backward stores dx by dropping the low 16 bits of its float32 value (round toward "
        "zero) instead of round to nearest even; y, the statistics, dweight and dbias right",
        "cf. " + GH + "ROCm/aiter/issues/5151 (a fused norm kernel truncating float32 to bfloat16 on store)"),
    "ln_mean_count_unbiased": (
        "layer_norm", "bessel",
        "more than one value a row: the mean divided by N - 1 (the count variable of an unbiased-variance "
        "helper reused) while the variance about that mean is divided by N: mean, rstd, y and the backward",
        "cf. " + GH + "CanReader/FastNN/issues/11 (biased and unbiased counts mixed between two code paths)"),
    "ln_var_tail_tile_skipped": (
        "layer_norm", "block",
        "rows longer than 64, not a multiple of 64: the variance's second pass loops over whole 64-wide tiles "
        "only (its tail tile never loaded; the mean's first pass masks it right) and divides by N: rstd, y and "
        "dx",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "ln_zc_offset_added_to_bias": (
        "layer_norm", "affine",
        "weight_offset set (zero-centred weight), with a bias: the parameter loader adds the offset to both "
        "parameters, y = x_hat * (weight + offset) + (bias + offset); the statistics and the gradients right",
        "cf. " + GH + "vllm-project/vllm-ascend/pull/5666 (an RMSNorm kernel extended with a bias and its "
        "offset convention)"),
    "ln_dweight_from_saved_output": (
        "layer_norm", "backward",
        "with a weight: dweight = sum over rows of dy * y (the saved output y = x_hat * weight + bias read where "
        "x_hat belongs); dx, dbias and the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm backward working from the stored output)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_rstd_store_index_for_strided_rows": (
        "rms_norm", "layout",
        "more than 4 rows: a persistent kernel of 4 programs takes rows p, p + 4, p + 8, ... (grid-stride) but "
        "stores the i-th row's rstd at p * ceil(rows / 4) + i (a blocked layout); indices past the end dropped, "
        "slots never written 0; y and dx right",
        "pattern: a statistic's store index written for a blocked row assignment in a grid-stride loop"),
    "rms_weight_cast_to_bf16": (
        "rms_norm", "precision",
        "inputs other than bfloat16 with a weight: the kernel, templated on a bfloat16 weight type, converts the "
        "weight to bfloat16 (nearest even) before applying it: y and dx with the rounded weight; rstd and "
        "dweight right",
        "cf. " + GH + "pytorch/helion/pull/2273 (an rms_norm's saved values held in the wrong precision)"),
    "rms_dweight_atomic_and_host_sum": (
        "rms_norm", "constant",
        "with a weight: the per-block dweight partials are both atomically added into the output and summed "
        "again by the host's second stage into the same buffer: dweight twice its value; dx and the forward "
        "right",
        "cf. " + GH + "karpathy/llm.c/pull/163 (a bias-gradient kernel's store switched between = and +=)"),
    "rms_bwd_projection_added": (
        "rms_norm", "backward",
        "dx = rstd * (g + u * mean(g * x_hat)) (the projection term added instead of subtracted); dweight and "
        "the forward right",
        "pattern: a sign slip in a hand-derived backward"),
    "rms_bwd_proj_dot_float32_for_float64": (
        "rms_norm", "precision",
        "float64 inputs: the backward's row dot sum(g * x_hat) accumulated in float32 (the kernel's accumulator "
        "type fixed to float) while the rest of dx is float64; dweight and the forward right",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (single-precision arithmetic in a double path)"),
    "rms_sumsq_scalar_tail_index_not_advanced": (
        "rms_norm", "block",
        "rows whose length is not a multiple of 8: the sum of squares' scalar tail loop (after the 8-wide "
        "vector loads) loads the tail's first element for every tail index: each of the last N mod 8 squares "
        "replaced by the first tail element's: rstd, y and dx",
        GH + "ROCm/aiter/issues/5044 (RMSNorm wrong for hidden sizes not a multiple of its vector width)"),
    # ------------------------------------------------------------------ add_norm
    "an_drowscale_keep_scale_twice": (
        "add_norm", "dropout",
        "rowscale with dropout: drowscale = sum(ds * x * mask) / (1 - p)^2, the 1 / (1 - p) of the keep factor "
        "applied once in the factor the kernel reads and once more as the formula's; dx and the forward right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/39501 (dropout's backward and the scaling of its kept values)"),
    "an_bwd_branch_grads_summed_in_half": (
        "add_norm", "precision",
        "16-bit inputs with y1's cotangent: the two branches' norm backward each rounded to the input dtype "
        "and summed in it (an unfused backward called once per branch): ds, then dx, dresidual and drowscale; "
        "the parameter gradients and the forward right",
        "cf. " + GH + "apache/mxnet/issues/14073 (a LayerNorm performing its reductions in fp16 for fp16 "
        "inputs)"),
    "an_y1_bias_from_bias": (
        "add_norm", "affine",
        "the parallel branch with bias1: y1 = x_hat * (weight1 + offset) + bias (bias1's pointer argument "
        "passed the bias tensor); y and the gradients right",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a fused norm assuming its two affine inputs come in "
        "pairs)"),
    "an_y1_branch_bwd_rms_formula": (
        "add_norm", "backward",
        "norm='layer_norm' with y1's cotangent: the parallel branch's term of ds taken by the rms formula "
        "rstd * (g1 - x_hat * mean(g1 * x_hat)) (its mean(g1) term left out); y's term, dweight1 and the "
        "forward right",
        "cf. " + GH + "BVLC/caffe/issues/4110 (a normalization backward missing its mean-correction term)"),
    "an_residual_added_after_norm": (
        "add_norm", "semantics",
        "the residual added after the norm (post-norm): y = norm(x * c) * (weight + offset) + bias + residual "
        "(+ the x1 branch inside the norm), residual_out = x * c + residual; the backward of that equation "
        "(dresidual = dy + residual_out's cotangent)",
        "cf. " + GH + "NVIDIA-NeMo/Speech/pull/4048 (apply_residual_connection_post_layernorm: which value "
        "the residual is added to)"),
    "an_residual_out_tail_tile_unwritten": (
        "add_norm", "block",
        "N > 64, not a multiple of 64: the residual_out store loops over whole 64-wide tiles only: its last "
        "N mod 64 columns of every row never written (0); y and the gradients right",
        "cf. " + GH + "ROCm/aiter/pull/5290 (a fused norm's stores of the row's tail wrong when the row is not "
        "a multiple of the vector width)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_dyn_scale_pow2_floor": (
        "norm_quant", "scale_rounding",
        "dynamic scale: amax / qmax rounded DOWN to a power of two (the exponent bits kept, the mantissa "
        "dropped) where the exact scale belongs: the scale, and q clipped where |y| / scale exceeds qmax",
        "cf. " + GH + "sgl-project/sglang/pull/31210 (UE8M0 scale rounding: the power of two must be rounded "
        "up)"),
    "nq_q_from_y_rounded_to_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: the quantizing pass re-reads y from a staging buffer of the input dtype (y rounded to "
        "nearest) while amax and the scale come from the float32 y of the first pass: q",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's intermediate held in the fp16 input type)"),
    "nq_rms_mean_square_over_block_width": (
        "norm_quant", "block",
        "norm='rms_norm', N not a power of two: the sum of squares divided by the block width (the next power "
        "of two) instead of N: rstd too large, y, amax, the dynamic scale and q",
        "pattern: the padded block's width used as the row's count"),
    "nq_amax_output_in_quantized_units": (
        "norm_quant", None,
        "the amax output written from the register holding amax / scale (the row's largest |q| before "
        "rounding) instead of amax; q and the scale right",
        "pattern: an output written from an intermediate register of the quantizer"),
    "nq_e4m3_clip_at_480": (
        "norm_quant", "saturation",
        "float8_e4m3fn outputs: the format's largest value computed as (2 - 2^-3) * 2^8 = 480 (the mantissa 111 "
        "of the top exponent, which is NaN, taken as finite): the dynamic scale amax / 480 and the clamp at "
        "480, so quotients above 464 become NaN",
        GH + "OpenPPL/ppq/issues/398 (FP8 E4M3's largest value taken as 480 instead of 448)"),
    "nq_fp8_dyn_scale_over_int8_max": (
        "norm_quant", "quant_scale",
        "float8 outputs with a dynamic scale: scale = amax / 127 (the int8 path's constant) instead of amax / "
        "the float8 dtype's largest value, its floor 1 / (512 * 127) alike: the scale and q",
        "pattern: a quantization constant copied from the int8 branch"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dparams_last_row_block_clamped": (
        "gated_norm", "reduction",
        "more than 16 rows, not a multiple of 16: dweight and dbias reduced over blocks of 16 rows whose last "
        "block starts at rows - 16 (clamped to stay in bounds): the rows it shares with the previous block "
        "counted twice; dx, dz and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel's grid not covering its row blocks "
        "right)"),
    "gated_bwd_vhat_recomputed_without_gate": (
        "gated_norm", "gate",
        "norm_before_gate=False: the backward recomputes v_hat from the loaded x times rstd (the gate factor "
        "silu(z) of v = x * silu(z) left out of the recomputation): dx, dz and dweight; the forward right",
        "cf. " + GH + "state-spaces/mamba/pull/547 (a gated layer_norm backward's recomputation)"),
    "gated_group_tail_tile_skipped": (
        "gated_norm", "block",
        "group size not a multiple of 16: each group's statistics loop over whole 16-wide tiles only (the "
        "group's tail never loaded) and divide by the group size: rstd (and the mean), y and the backward",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "gated_dweight_from_v_unnormalized": (
        "gated_norm", "backward",
        "dweight = sum over rows of dn * v (the loaded pre-norm value where v_hat belongs); dx, dz, dbias and "
        "the forward right",
        "pattern: a saved statistic left out of a recomputed x_hat in the parameter-gradient pass"),
    "gated_f16_y_round_toward_zero": (
        "gated_norm", "rounding",
        "float16 inputs: y converted to float16 by a round-toward-zero conversion (__float2half_rz) instead of "
        "round to nearest even; the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> 16-bit by truncation)"),
    "gated_bias_before_weight": (
        "gated_norm", "affine",
        "with a bias: n = (v_hat + bias) * weight (then the gate), and the parameter gradients of that "
        "equation dweight = sum dn * (v_hat + bias), dbias = sum dn * weight; dx and dz right",
        "cf. " + GH + "apple/coremltools/issues/1639 ('(value * scale) + bias or (value + bias) * scale?')"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_of_half_argument": (
        "dyt", None,
        "t computed as 2 * sigmoid(alpha x) - 1 (the identity tanh(u) = 2 sigmoid(2u) - 1 with its inner 2 left "
        "out), i.e. tanh(alpha x / 2): y and dweight from it; dx and dalpha (from sech^2(alpha x)) right",
        "cf. " + GH + "tinygrad/tinygrad/pull/107 (tanh written as 2 * sigmoid(2x) - 1)"),
    "dyt_dweight_mean_over_rows": (
        "dyt", "reduction",
        "with a weight: dweight = the mean over rows of dy * t (the row sum divided by the number of rows); "
        "dbias, dx, dalpha and the forward right",
        "cf. " + GH + "apache/mxnet/issues/2427 (a weight gradient averaged over the batch where it is summed)"),
    "dyt_bwd_weighted_dy_in_input_dtype": (
        "dyt", "precision",
        "16-bit inputs with a weight: the backward's g = dy * weight computed in the input dtype (rounded to "
        "nearest) before the float32 sech^2 factor: dx and dalpha; dweight, dbias and the forward right",
        "cf. " + GH + "ROCm/triton/pull/633 (a kernel's intermediate held in the fp16 input type)"),
    "dyt_weight_inside_tanh": (
        "dyt", "affine",
        "with a weight: y = tanh(alpha * weight * x) + bias (the per-channel weight folded into the tanh's "
        "argument), and the backward of that equation: dx, dalpha, dweight; dbias right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm's weight applied the wrong way)"),
    "dyt_dx_alpha_squared": (
        "dyt", "constant",
        "dx = g * D' * alpha where D' comes from the helper returning d tanh(alpha x) / dx = alpha * sech^2 "
        "(already scaled by alpha): dx alpha times too large; dalpha, dweight, dbias and the forward right",
        "cf. " + GH + "microsoft/knossos-ksc/pull/505 (wrong derivatives for tanh)"),
    "dyt_dx_f16_round_toward_zero": (
        "dyt", "rounding",
        "float16 inputs: dx converted to float16 by a round-toward-zero conversion instead of round to nearest "
        "even; y, dalpha, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> 16-bit by truncation)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_bwd_x_of_next_row": (
        "poly_norm", "layout",
        "more than one row: the backward's chain factors 3 x^2 and 2 x loaded after the x pointer was "
        "advanced: row r's from row r + 1's x (the last row its own): dx; dweight, dbias and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a backward kernel loading another row's values)"),
    "poly_bwd_rstd_recomputed_default_eps": (
        "poly_norm", "eps",
        "the backward recomputes the three rstd (and the normalized powers) with the kernel's default eps 1e-6 "
        "instead of the configured eps: dx and dweight; the forward right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1114 (a poly_norm backward kernel's per-power terms)"),
    "poly_dx_chain_power_in_half": (
        "poly_norm", "precision",
        "16-bit inputs: the backward's chain factors 3 x^2 and 2 x computed in the input dtype (x^2 and its "
        "product by 3 rounded to nearest) before the float32 products: dx; dweight, dbias and the forward right",
        "cf. " + GH + "ROCm/triton/pull/633 (a kernel's intermediate held in the fp16 input type)"),
    "poly_weight_folded_before_rms": (
        "poly_norm", "affine",
        "each weight folded into its power before the normalization: y = sum_p norm(w_p x^p) + bias (the "
        "weight's magnitude cancelled by its own rms, only its sign kept); the backward right",
        "pattern: a scale folded into the value before a normalization that divides it out"),
    "poly_bwd_linear_term_doubled": (
        "poly_norm", "backward",
        "dx = 3 x^2 du_3 + 2 x du_2 + 2 du_1: the linear power's term added inside the loop over the powers "
        "and once more after it; dweight, dbias and the forward right",
        "pattern: a special-cased loop iteration also handled after the loop"),
    "poly_rstd_powers_of_linear_rstd": (
        "poly_norm", "semantics",
        "the rstd of x^2 and x^3 taken as the rstd of x squared and cubed (r_p = r_1^p, the rms of a power "
        "taken as the power of the rms): the squared and cubic terms of y; the backward from the same r_p",
        "pattern: a normalization's statistic of a power approximated by the power of the statistic"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


class Blind24Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind24"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln24(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln24(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        if b == "ln_zc_offset_added_to_bias" and off != 0 and bias is not None:
            bias = bias + off
        cnt = acc(N - 1) if b == "ln_mean_count_unbiased" and N > 1 else acc(N)
        mean = _rsum(x) / cnt
        dev = x - mean
        k = N
        if b == "ln_var_tail_tile_skipped" and N > 64 and N % 64:
            k = (N // 64) * 64                               # the whole tiles the second pass covers
        var = _rsum(dev[:, :k] * dev[:, :k]) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_dy_of_next_row" and dy.shape[0] > 1:
            dy = np.concatenate([dy[1:], np.zeros_like(dy[:1])])
            g = dy if w is None else dy * w
        dx = _centred_dx(g, xhat, rstd)
        if b == "ln_bwd_dx_bf16_truncated" and d == "bfloat16":
            gx = _bf16_toward_zero(dx).reshape(x0.shape)
        else:
            gx = _store(dx.reshape(x0.shape), d)
        grads = {"x": gx}
        dw_from = xhat
        if b == "ln_dweight_from_saved_output":
            dw_from = out["y"].astype(acc).reshape(-1, N)
        for key, t, given in (("weight", dy * dw_from, w), ("bias", dy, bias)):
            if given is None:
                continue
            grads[key] = _store(t.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms24(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms24(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        placement = cfg.get("eps_placement", "inside") or "inside"
        inside = placement != "outside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        if b == "rms_weight_cast_to_bf16" and w0 is not None and d != "bfloat16":
            w = _half(w0.astype(acc).reshape(1, N), "bfloat16") + off
        eps = _eps(cfg["eps"], acc)
        if b == "rms_sumsq_scalar_tail_index_not_advanced" and N % 8:
            k = (N // 8) * 8
            xs = x.copy()
            xs[:, k:] = x[:, k:k + 1]                        # every tail index loads the tail's first element
            ms = _rsum(xs * xs) / N
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        rs_out = rstd
        if b == "rms_rstd_store_index_for_strided_rows" and R > 4:
            per = -(-R // 4)
            rs_out = np.zeros_like(rstd)
            for r in range(R):
                idx = (r % 4) * per + r // 4
                if idx < R:
                    rs_out[idx] = rstd[r]
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs_out.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_projection_added":
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g + u * (_rsum(g * xhat) / N))
        elif b == "rms_bwd_proj_dot_float32_for_float64" and d == "float64":
            f = np.float32
            proj = (np.ascontiguousarray((g * xhat).astype(f)).sum(axis=1, keepdims=True, dtype=f)
                    / f(N)).astype(acc)
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - u * proj)
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            dw = (dy * xhat).sum(axis=0)
            if b == "rms_dweight_atomic_and_host_sum":
                dw = dw + dw
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an24(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an24(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        post = b == "an_residual_added_after_norm"
        if post:
            sn, c1 = add_norm_sum(x, None, x1, mask1, c, keep, p, acc)    # the norm's input, residual left out
            s = sn if res is None else sn + res
        else:
            s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
            sn = s
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(sn) / N
            dev = sn - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            dev = sn
            rstd = 1 / np.sqrt(_rsum(sn * sn) / N + eps)
        xhat = dev * rstd
        b1f = bias if b == "an_y1_bias_from_bias" and b1 is not None else b1
        out = add_norm_outputs(xhat, we, bias, we1, b1f, s, x0.shape, cfg, d)
        if post and res is not None:
            out["y"] = _store((affine(xhat, we, bias) + res).reshape(x0.shape), d)
        if b == "an_residual_out_tail_tile_unwritten" and N > 64 and N % 64:
            ro = out["residual_out"].reshape(R, N).copy()
            ro[:, (N // 64) * 64:] = 0
            out["residual_out"] = ro.reshape(x0.shape)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = _norm_dx(dy, we, xhat, rstd, centred, _rsum)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            if b == "an_y1_branch_bwd_rms_formula" and centred:
                ds1 = _norm_dx(dy1, we1, xhat, rstd, False, _rsum)
            else:
                ds1 = _norm_dx(dy1, we1, xhat, rstd, centred, _rsum)
            if b == "an_bwd_branch_grads_summed_in_half" and d in HALF:
                ds = _half(_half(ds, d) + _half(ds1, d), d)
            else:
                ds = ds + ds1
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
            ds = ds + dres_out
        dres = ds
        if post:
            dres = dy if dres_out is None else dy + dres_out
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else dres, c, c1, dy, dy1, xhat, params, x, mask,
                               keep, p, ns, d)
        if b == "an_drowscale_keep_scale_twice" and rs is not None and p:
            grads["rowscale"] = rowscale_grad(ds, x, mask, keep * keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq24(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq24(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            cnt = acc(pow2(N)) if b == "nq_rms_mean_square_over_block_width" else acc(N)
            rstd = 1 / np.sqrt(_rsum(x * x) / cnt + eps)
        xhat = (x - mean) * rstd
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        if b == "nq_e4m3_clip_at_480" and hi == 448.0:
            lo, hi = -480.0, 480.0
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_fp8_dyn_scale_over_int8_max" and qdt.kind != "i":
            scale = dynamic_scale(amax, 127.0, cfg, acc)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
            if b == "nq_dyn_scale_pow2_floor":
                m, e = np.frexp(np.where(scale > 0, scale, 1.0).astype(np.float64))
                scale = np.where(scale > 0, np.ldexp(1.0, (e - 1).astype(np.int64)), scale).astype(acc)
        yq = y
        if b == "nq_q_from_y_rounded_to_input_dtype" and d in HALF:
            yq = _half(y, d)
        q = quantize(quant_quotients(yq, scale, lo, hi, acc), qdt)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        out = dict(r.outputs)
        if b == "nq_amax_output_in_quantized_units":
            aq = np.where(scale == 0, amax, amax / np.where(scale == 0, acc(1), scale))
            out["amax"] = aq.reshape(out["amax"].shape).astype(acc)
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated24(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated24(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        kk = K
        if b == "gated_group_tail_tile_skipped" and K % 16:
            kk = (K // 16) * 16                              # the whole 16-wide tiles of a group
        vt = vg[:, :kk]
        if norm == "layer_norm":
            mean = _rsum(vt) / K
            dev = vg - mean
            rstd = 1 / np.sqrt(_rsum(dev[:, :kk] * dev[:, :kk]) / K + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(vt * vt) / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        fold = b == "gated_bias_before_weight" and bias is not None
        if fold:
            nrm = (vhat + bias) * w
        else:
            nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        if b == "gated_f16_y_round_toward_zero" and d == "float16":
            out = {"y": _toward_zero(y.reshape(x0.shape), np.dtype(np.float16))}
        else:
            out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if b == "gated_bwd_vhat_recomputed_without_gate" and not nbg:
            vv = (x.reshape(-1, K) - mean) * rstd
        if norm == "layer_norm":
            dv = _centred_dx(g, vv, rstd)
        else:
            dv = rms_dx(g, vv, rstd)
        dv = dv.reshape(R, H)
        vb = vv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vb, x0.shape, d)
        dw_t, db_t = dn * vb, dn
        if b == "gated_dweight_from_v_unnormalized":
            dw_t = dn * v
        if fold:
            dw_t, db_t = dn * (vhat + bias), dn * w
        if b == "gated_dparams_last_row_block_clamped" and R > 16 and R % 16:
            extra = slice(R - 16, (R // 16) * 16)            # the rows the clamped last block repeats
            dw = dw_t.sum(axis=0) + dw_t[extra].sum(axis=0)
            db = db_t.sum(axis=0) + db_t[extra].sum(axis=0)
        else:
            dw, db = dw_t.sum(axis=0), db_t.sum(axis=0)
        grads["weight"] = _store(dw, d)
        if bias is not None:
            grads["bias"] = _store(db, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt24(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt24(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_of_half_argument":
            sig, _ = _sigmoids(a * x)
            t = 2 * sig - 1
        inside = b == "dyt_weight_inside_tanh" and w is not None
        if inside:
            t = np.tanh(a * w * x)
            y = t if bias is None else t + bias
        else:
            y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        if inside:
            r = 1 / np.cosh(a * w * x)
            gd = dy * (r * r)
            dx = gd * a * w
            da = _rsum(gd * w * x).sum()
            grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
            grads["weight"] = _store((gd * a * x).sum(axis=0), d)
            return Returned(out, grads)
        g = dy if w is None else dy * w
        if b == "dyt_bwd_weighted_dy_in_input_dtype" and d in HALF and w is not None:
            g = _half(g, d)
        r = 1 / np.cosh(a * x)
        gd = g * (r * r)
        dx = gd * a
        if b == "dyt_dx_alpha_squared":
            dx = (gd * a) * a
        da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dweight_mean_over_rows" and w is not None:
            grads["weight"] = _store((dy * t).sum(axis=0) / acc(x.shape[0]), d)
        if b == "dyt_dx_f16_round_toward_zero" and d == "float16":
            grads["x"] = _toward_zero(dx.reshape(x0.shape), np.dtype(np.float16))
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly24(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly24(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        hs, rs = poly_normalize(us, eps, acc)
        if b == "poly_rstd_powers_of_linear_rstd":
            r1 = rs[2]
            rs = [r1 * r1 * r1, r1 * r1, r1]
            hs = [u * r for u, r in zip(us, rs)]
        if b == "poly_weight_folded_before_rms":
            hw, _ = poly_normalize([wt[k] * us[k] for k in range(3)], eps, acc)
            y = poly_combine(np.ones(3, acc), hw, bias, acc)
        else:
            y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        hb, rb = hs, rs
        if b == "poly_bwd_rstd_recomputed_default_eps":
            hb, rb = poly_normalize(us, acc(1e-6), acc)
        grads = poly_grads(dy, x, wt, hb, rb, bias, x0.shape, d, acc)
        xc = x                                               # the x the chain factors are loaded from
        if b == "poly_bwd_x_of_next_row" and x.shape[0] > 1:
            xc = _next_row(x)
        chain_half = b == "poly_dx_chain_power_in_half" and d in HALF
        if xc is not x or chain_half or b == "poly_bwd_linear_term_doubled":
            dx = np.zeros_like(x)
            for k, pp in enumerate((3, 2, 1)):
                dp = rms_dx(dy * wt[k], hb[k], rb[k])
                if pp == 1:
                    dx = dx + dp
                elif chain_half:
                    dx = dx + _half(acc(pp) * _half(xc ** (pp - 1), d), d) * dp
                else:
                    dx = dx + pp * xc ** (pp - 1) * dp
            if b == "poly_bwd_linear_term_doubled":
                dx = dx + rms_dx(dy * wt[2], hb[2], rb[2])
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)
