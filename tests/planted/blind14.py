"""A fourteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind14Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln14``, ``_rms14``, ``_an14``, ``_nq14``, ``_gated14``, ``_dyt14``,
``_poly14``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind14Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind13.py (the same mistake on the same op; the fifteenth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_ds, add_norm_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dy_and_g, dyt_grads, dyt_inputs, dynamic_scale,
                          eps_value as _eps, gate_group_size, gated_dn, gated_dx, gated_dx_dz, gated_grads,
                          gated_inputs, half as _half, kept, ln_rows, ln_stats, norm_outputs, norm_quant_returned,
                          normalized_rows, poly_combine, poly_grads, poly_inputs, poly_normalize, pow2,
                          quant_quotients, quantize, rms_norm_dx, rms_rows, rms_stats, row_affine, row_param_grads,
                          row_weight_bias, rsum as _rsum, silu_gate, stat_shape, static_scale, store as _store,
                          weight_offset)
from .blind3 import LABELS
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind14Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_lane_welford_merge_drops_spread": (
        "layer_norm", "one_pass",
        "the row's columns strided over the 32 lanes of a warp (lane l takes the columns j = l mod 32), each lane "
        "keeping a Welford (count, mean, M2); the cross-lane merge adds the lanes' M2 and weights their means by "
        "their counts but leaves out the delta^2 * n_a * n_b / n term: var = sum of the lanes' M2 / N (the spread "
        "of the lane means lost; rows of at most 32 values get var 0); the mean right; forward and the "
        "backward's formula on that rstd",
        "cf. " + GH + "Oneflow-Inc/oneflow/issues/7471 (a layer norm's WelfordCombine: the merged M2 is the parts' "
        "M2 plus the count-weighted squared difference of their means)"),
    "ln_bwd_rows_per_program_floored": (
        "layer_norm", "block",
        "the backward launched on 108 programs (the SM count) each taking rows_per_program = max(1, M // 108) "
        "rows (floor instead of cdiv): for M above 108 and not a multiple of it the rows from 108 * (M // 108) "
        "on are never processed (their dx left 0, their dy * x_hat and dy missing from dweight and dbias); the "
        "forward right",
        "cf. " + GH + "ServiceNow/Fast-LLM/pull/546 (a normalization backward grid-striding its rows over a "
        "program count fixed by the SM count)"),
    "ln_eps_as_variance_floor": (
        "layer_norm", "eps",
        "rstd = 1 / sqrt(max(var, eps)) (eps used as a floor of the variance, the clamp form of "
        "l2_normalize-style kernels) instead of 1 / sqrt(var + eps), forward and the backward's formula on "
        "that rstd",
        "cf. " + GH + "keras-team/keras/pull/8726 (where a normalization's epsilon enters the denominator)"),
    "ln_bias_added_before_weight": (
        "layer_norm", "affine",
        "with a weight and a bias: y = (x_hat + bias) * weight instead of x_hat * weight + bias (the epilogue's "
        "fused multiply-add with its operands in the wrong order), forward and backward (dweight = sum(dy * "
        "(x_hat + bias)), dbias = sum(dy * weight); dx right)",
        "pattern: an epilogue's fma(a, b, c) written fma(a + c, b)"),
    "ln_bwd_mean_term_of_dy": (
        "layer_norm", "backward",
        "with a weight: dx = rstd * (g - mean(dy) - x_hat * mean(g * x_hat)), g = dy * weight: the mean term "
        "reduced from the unscaled dy instead of g (the projection term right); dweight, dbias right",
        "pattern: one of two row reductions fed the wrong operand"),
    "ln_mean_block_partials_in_half": (
        "layer_norm", "precision",
        "16-bit inputs: the mean's row sum taken per 64-column block in float32 and each block's partial "
        "written to shared memory of the input dtype (rounded to it) before the partials are added: the mean "
        "off by the partials' rounding (large for mean-shifted rows), the variance, x_hat and y from it, forward "
        "and backward",
        "cf. " + GH + "Xilinx/mlir-air/pull/2007 (a LayerNorm row kernel holding its mean in bfloat16)"),
    "ln_dparams_partials_averaged": (
        "layer_norm", "reduction",
        "dweight and dbias: one float32 partial per block of 64 rows, the final reduction over the partial "
        "buffer a mean instead of a sum (each divided by the number of row blocks, ceil(M / 64)): right for M "
        "<= 64, too small beyond",
        "cf. " + GH + "apache/mxnet/issues/2427 (a weight gradient summed or averaged over the batch)"),
    "ln_bwd_proj_unbiased_count": (
        "layer_norm", "bessel",
        "N > 1: dx = rstd * (g - mean(g) - x_hat * sum(g * x_hat) / (N - 1)): the projection term's row sum "
        "divided by N - 1 (a backward derived for the unbiased std) while the forward divides by N; dweight, "
        "dbias right",
        "pattern: a hand-derived backward taken from torch.std's unbiased default"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_proj_on_x_over_rms": (
        "rms_norm", "eps",
        "eps inside: dx = rstd * (g - (x / rms) * mean(g * x_hat)), rms = sqrt(mean(x^2)) without eps (the "
        "eps-outside backward's u = x / rms used where u = x_hat = x * rstd belongs); y, rstd, dweight right",
        "pattern: a backward shared by both eps placements, recomputing the scale without eps"),
    "rms_mean_square_in_input_dtype": (
        "rms_norm", "precision",
        "16-bit inputs: the float32 mean of squares stored in the input dtype (a __half register) before eps is "
        "added and the rsqrt taken: float16 overflows beyond 65504 (rstd 0, y 0), bfloat16 rounds it; forward "
        "(y, rstd) and the backward from that rstd",
        "pattern: a statistic's register declared with the activation's scalar type"),
    "rms_bwd_dot_shuffle_missing_16": (
        "rms_norm", "block",
        "N > 16: the backward's row sum of g * x_hat reduced over a 32-lane warp (lane l takes the columns j = l "
        "mod 32) by a butterfly with offsets 8, 4, 2, 1 (16 missing): lane 0 holds the sum of lanes 0-15, the "
        "columns with j mod 32 >= 16 never enter mean(g * x_hat) (still divided by N): dx; y, rstd, dweight "
        "right",
        "cf. " + GH + "vllm-project/vllm-xpu-kernels/pull/521 (a sub-group XOR-shuffle reduction over the wrong "
        "lane span)"),
    "rms_sum_of_squares_not_averaged": (
        "rms_norm", "semantics",
        "eps inside: the sum of squares never divided by N: rstd = 1 / sqrt(sum(x^2) + eps) (the L2 "
        "normalization, y about sqrt(N) times too small), forward (y, rstd) and the backward's formula on that "
        "rstd",
        GH + "tenstorrent/tt-mlir/pull/8798 (an RMS norm's statistic left as the sum of squares, not their mean: "
        "the output shrunk by sqrt(N))"),
    "rms_bwd_proj_sum_not_mean": (
        "rms_norm", "backward",
        "eps inside: dx = rstd * (g - x_hat * sum(g * x_hat)): the projection term's row sum not divided by N; "
        "y, rstd, dweight right",
        "pattern: a reduction's mean taken as its sum (the 1 / N folded into rstd twice in the derivation, then "
        "dropped)"),
    "rms_dweight_clamped_rows_repeat_last": (
        "rms_norm", "reduction",
        "with a weight, M not a multiple of 64: dweight reduced over blocks of 64 rows whose row index is "
        "clamped to M - 1 instead of masked, so the last block's padded rows all load the last row: dy * x_hat "
        "of row M - 1 added 64 * ceil(M / 64) - M extra times; dx right",
        "pattern: an out-of-range row index clamped (min(row, M - 1)) where a mask belongs"),
    # ------------------------------------------------------------------ add_norm
    "an_ln_var_unbiased": (
        "add_norm", "bessel",
        "norm='layer_norm', N > 1: the variance of the sum s divided by N - 1 (the unbiased estimator) instead "
        "of N, forward (y, y1) and the backward's formula on that rstd",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a LayerNorm taking the unbiased std where the "
        "biased one belongs)"),
    "an_branch_masks_swapped": (
        "add_norm", "dropout",
        "with the parallel input x1 and both keep-masks: the mask and mask1 pointers passed in each other's "
        "slots, x dropped with mask1 and x1 with mask, forward and backward (dx, dx1 and drowscale from the "
        "swapped masks)",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (a fused add + layer norm backward applying another dropout "
        "mask than the forward's)"),
    "an_x1_read_from_x_ptr": (
        "add_norm", "layout",
        "with the parallel input x1: x1 loaded through x's pointer, s = x * c + x * c1 + residual (x1's own "
        "values never read), forward; the gradients' formulas unchanged (dx1 = ds * c1)",
        "pattern: two pointer arguments of the same type passed in each other's slot"),
    "an_rms_bias_dropped": (
        "add_norm", "affine",
        "norm='rms_norm' with a bias: the IS_RMS_NORM branch never loads the bias (nor bias1): y = x_hat * "
        "(weight + offset) (y1 likewise); the gradients right (dbias = sum(dy))",
        "cf. " + GH + "OpenNMT/OpenNMT-py/pull/2363 (an RMSNorm path written without a bias)"),
    "an_dres_out_added_without_prenorm": (
        "add_norm", "backward",
        "prenorm=False with residual_out's cotangent given: the cotangent added to ds anyway (the flag not read "
        "in the backward): dx, dresidual (and drowscale) take it; the forward right",
        "pattern: a flag honoured in the forward and not forwarded to the backward"),
    "an_eps_not_forwarded": (
        "add_norm", "eps",
        "the configured eps not forwarded to the fused kernel, which uses its own default 1e-6, forward and "
        "backward",
        "cf. " + GH + "foundation-model-stack/foundation-model-stack/pull/99 (a norm's eps default taken as 1e-6 "
        "where the model's 1e-5 belongs)"),
    "an_dparams_tail_row_block_dropped": (
        "add_norm", "reduction",
        "more than 64 rows, not a multiple of 64: the parameter gradients (dweight, dbias, dweight1, dbias1) "
        "reduced over blocks of 64 rows with the loop bound M // 64, the partial last block never added; dx "
        "right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer norm backward kernel wrong once a program covers more "
        "than one row)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_vec8_tail_columns_dropped": (
        "norm_quant", "block",
        "N not a multiple of 8: every loop over the row vectorised 8 wide with no scalar tail: the statistics "
        "(sum of squares, or mean and variance) over the first 8 * (N // 8) columns (still divided by N), amax "
        "over them, and the tail columns' q never written (0)",
        GH + "ROCm/aiter/issues/5044 (an rmsnorm_quant vectorised path mishandling the row's tail for hidden "
        "sizes not a multiple of its vector width)"),
    "nq_float64_computed_in_float32": (
        "norm_quant", "precision",
        "float64 inputs: the normalization, amax, scale and q computed in float32 (the kernel instantiated for "
        "float32 only), the scale and amax widened to float64",
        "cf. " + GH + "tenstorrent/tt-metal/issues/49600 (a norm op on wider inputs computed in a narrower format "
        "internally)"),
    "nq_zero_eps_read_as_unset": (
        "norm_quant", "eps",
        "eps = 0 given: the option tested for truth (`eps or 1e-6`), so the explicit 0 falls back to the kernel "
        "default 1e-6, then quantized",
        "pattern: a numeric option of 0 replaced by its default through a falsy `or`"),
    "nq_rms_branch_centres": (
        "norm_quant", "semantics",
        "norm='rms_norm' computed by the layer-norm code path (the IS_RMS flag dropped): x centred and divided "
        "by its standard deviation, then quantized",
        "cf. " + GH + "keras-team/keras/pull/22393 (an RMS-scaling normalization using the variance instead of "
        "the mean of squares)"),
    "nq_static_scale_read_as_amax": (
        "norm_quant", "quant_scale",
        "a static_scale given: the value read as a calibrated amax, scale = static_scale / qmax; q = y / that "
        "scale, and that scale returned",
        "cf. " + GH + "NVIDIA/Model-Optimizer/issues/215 (a quantization scale converted with the wrong ratio "
        "between the amax and the dtype's largest value)"),
    "nq_clamp_before_scale_division": (
        "norm_quant", "saturation",
        "the clamp to [qmin, qmax] applied to y before the division by the scale instead of to y / scale: "
        "quotients beyond the range (a scale capped by scale_ub, a static scale) are not saturated (float8: "
        "NaN / inf)",
        "cf. " + GH + "vllm-project/vllm/pull/4570 (static FP8 scaling: x / scale clamped to +-FP8_MAX before the "
        "conversion)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dz_silu_value_for_derivative": (
        "gated_norm", "gate",
        "dz uses silu(z) where silu'(z) belongs (the saved gate value reused): dz = dy * n * silu(z) "
        "(norm_before_gate) or dv * x * silu(z); dx, dweight, dbias right",
        "pattern: a saved activation reused where its derivative belongs"),
    "gated_bwd_row_sums_in_half": (
        "gated_norm", "precision",
        "16-bit inputs: the backward's per-group sums of g and g * x_hat (mean(g), mean(g * x_hat)) accumulated "
        "left to right in the input dtype: dx and dz",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward's reduction run in bfloat16)"),
    "gated_eps_kernel_default": (
        "gated_norm", "eps",
        "the configured eps not forwarded: the kernel's default 1e-6 used, forward and backward",
        "pattern: a config value dropped between the module and the kernel launch"),
    "gated_rms_bwd_centred": (
        "gated_norm", "backward",
        "norm='rms_norm': the backward is the layer-norm formula (the - mean(g) term included): dx and dz; the "
        "forward, dweight and dbias right",
        "pattern: a shared backward kernel's IS_RMS_NORM flag not passed"),
    "gated_dparams_rows_from_leading_dim": (
        "gated_norm", "reduction",
        "inputs of three or more axes: dweight and dbias reduced over the first x.shape[0] rows only (the row "
        "count M taken from x.shape[0], a 2-D input assumed); dx, dz right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm backward taking M from input.shape[0], wrong for "
        "rank >= 3 inputs)"),
    "gated_dweight_dbias_swapped": (
        "gated_norm", None,
        "with a bias: the weight's and the bias's gradients returned in each other's place (the backward's "
        "output tuple in the wrong order)",
        "pattern: two returned gradients of the same shape swapped"),
    # ------------------------------------------------------------------ dyt
    "dyt_weight_read_at_tile_column": (
        "dyt", "layout",
        "with a weight, C > 64: the weight loaded at the column's index within its 64-wide tile (j mod 64) "
        "instead of j (the tile offset added to x's pointer only), forward and dx, dalpha; dweight right",
        "pattern: a per-tile column offset applied to the activation pointer and not to the parameter's"),
    "dyt_dweight_rows_in_half": (
        "dyt", "precision",
        "16-bit inputs: dweight's sum over the rows of dy * tanh(alpha x) accumulated left to right in the input "
        "dtype",
        "cf. " + GH + "pytorch/helion/pull/3595 (a norm's parameter gradient accumulated over rows in bfloat16)"),
    "dyt_dalpha_first_column_only": (
        "dyt", "reduction",
        "dalpha reduced over the leading axes per column (as dweight is) into a (C,) buffer and its first entry "
        "returned: only column 0's contributions",
        "cf. " + GH + "lucidrains/CoLT5-attention/issues/8 (a Triton backward's scalar gradient summed over the "
        "wrong axis)"),
    "dyt_dalpha_from_dx": (
        "dyt", "backward",
        "dalpha = sum(dx * x) with dx = g * sech^2(alpha x) * alpha already scaled by alpha: dalpha alpha times "
        "too large; dx, dweight, dbias right",
        "pattern: a finished gradient reused in another's reduction"),
    "dyt_output_bf16_truncated": (
        "dyt", "rounding",
        "bfloat16 outputs: y stored by dropping the low 16 bits of the float32 value (round toward zero); the "
        "gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (unary kernels storing fp32 -> bf16 by truncation)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_pad_lanes_loaded_as_one": (
        "poly_norm", "block",
        "H not a power of two: the row loaded into a power-of-two tile with other=1.0, so each power's sum of "
        "squares takes next_pow2(H) - H extra ones (divided by H), forward and the backward from those rstd",
        "pattern: a masked load's `other` copied from a weight load (1.0)"),
    "poly_terms_rounded_to_input_dtype": (
        "poly_norm", "precision",
        "16-bit inputs: each normalized power h_p stored in the input dtype before the weighted sum w0 h3 + w1 "
        "h2 + w2 h1 + bias (three rounded terms); the backward from the float32 values",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/1132 (a norm's output cast to bfloat16 before the weight "
        "multiply)"),
    "poly_eps_kernel_default": (
        "poly_norm", "eps",
        "the configured eps not forwarded: 1e-6 (the module's default) used, forward and backward",
        "pattern: a config value dropped between the module and the kernel launch"),
    "poly_bwd_projection_on_last_power": (
        "poly_norm", "backward",
        "dx: each power's projection term uses the normalized power left in the loop variable from the last "
        "iteration (h_1, x's) in place of its own h_p: du_p = r_p (g_p - h_1 mean(g_p h_1)); dweight, dbias "
        "right",
        "pattern: a loop variable read after its loop"),
    "poly_bias_loaded_from_weight_ptr": (
        "poly_norm", "layout",
        "with a bias: the scalar bias loaded from the weight's pointer (weight[0]), forward; the gradients "
        "right",
        "pattern: two pointer arguments passed in each other's slot"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _truncate_bf16(a):
    """``a`` stored to bfloat16 by dropping the low 16 bits of its float32 value (round toward zero)."""
    f = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    bits = f.view(np.uint32) & np.uint32(0xFFFF0000)
    return _store(bits.view(np.float32), "bfloat16")


class Blind14Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind14"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self.bug in self._LN:
            return self._ln14(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln14(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        if b == "ln_mean_block_partials_in_half" and d in HALF:
            mean = acc(0) * _rsum(x[:, :1])
            for j in range(0, N, 64):
                mean = mean + _half(_rsum(x[:, j:j + 64]), d)
            mean = mean / N
        else:
            mean = _rsum(x) / N
        dev = x - mean
        var = _rsum(dev * dev) / N
        if b == "ln_lane_welford_merge_drops_spread":
            m2 = acc(0) * var
            for lane in range(min(32, N)):
                xs = x[:, lane::32]
                m2 = m2 + _rsum((xs - _rsum(xs) / xs.shape[1]) ** 2)
            var = m2 / N
        if b == "ln_eps_as_variance_floor":
            rstd = 1 / np.sqrt(np.maximum(var, eps))
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        both = w is not None and bias is not None
        if b == "ln_bias_added_before_weight" and both:
            y = (xhat + bias) * w
        else:
            y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_mean_term_of_dy" and w is not None:
            dx = rstd * (g - _rsum(dy) / N - xhat * (_rsum(g * xhat) / N))
        elif b == "ln_bwd_proj_unbiased_count" and N > 1:
            dx = rstd * (g - _rsum(g) / N - xhat * (_rsum(g * xhat) / (N - 1)))
        else:
            dx = _centred_dx(g, xhat, rstd)
        done = R
        if b == "ln_bwd_rows_per_program_floored" and R > 108 and R % 108:
            done = (R // 108) * 108
            dx = dx.copy()
            dx[done:] = 0
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if b == "ln_bias_added_before_weight" and both:
            grads["weight"] = _store((dy * (xhat + bias)).sum(axis=0).reshape(ns), d)
            grads["bias"] = _store((dy * w).sum(axis=0).reshape(ns), d)
        elif b == "ln_dparams_partials_averaged" and R > 64:
            nb = acc(-(-R // 64))
            if w is not None:
                grads["weight"] = _store(((dy * xhat).sum(axis=0) / nb).reshape(ns), d)
            if bias is not None:
                grads["bias"] = _store((dy.sum(axis=0) / nb).reshape(ns), d)
        else:
            grads.update(row_param_grads(dy[:done], xhat[:done], w, bias, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self.bug in self._RMS:
            return self._rms14(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms14(self, call, acc, b):
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
        eps = _eps(cfg["eps"], acc)
        if b == "rms_mean_square_in_input_dtype" and d in HALF:
            ms = _half(_rsum(x * x) / N, d)
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        elif b == "rms_sum_of_squares_not_averaged" and inside:
            ss = _rsum(x * x)
            rms, rstd = np.sqrt(ss), 1 / np.sqrt(ss + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_proj_on_x_over_rms" and inside:
            r0 = np.sqrt(_rsum(x * x) / N)
            u = np.where(r0 == 0, 0, x / np.where(r0 == 0, 1, r0))
            dx = rstd * (g - u * (_rsum(g * xhat) / N))
        elif b == "rms_bwd_proj_sum_not_mean" and inside:
            dx = rstd * (g - xhat * _rsum(g * xhat))
        elif b == "rms_bwd_dot_shuffle_missing_16" and N > 16:
            low = (np.arange(N) % 32 < 16)[None, :]
            proj = _rsum(np.where(low, g * xhat, acc(0))) / N
            u = xhat if inside else np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
            dx = rstd * (g - u * proj)
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            dw = (dy * xhat).sum(axis=0)
            if b == "rms_dweight_clamped_rows_repeat_last" and R % 64:
                extra = -(-R // 64) * 64 - R
                dw = dw + acc(extra) * (dy[-1] * xhat[-1])
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self.bug in self._AN:
            return self._an14(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an14(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_branch_masks_swapped" and x1 is not None and mask is not None and mask1 is not None:
            mask, mask1 = mask1, mask
        if b == "an_x1_read_from_x_ptr" and x1 is not None:
            x1 = x.copy()
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = acc(1e-6) if b == "an_eps_not_forwarded" else _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if b == "an_ln_var_unbiased" and centred and N > 1:
            mean, rstd = ln_stats(s, eps, ddof=1)
            xhat = (s - mean) * rstd
        else:
            _, rstd, xhat = (ln_rows if centred else rms_rows)(s, eps)
        bo, b1o = bias, b1
        if b == "an_rms_bias_dropped" and not centred:
            bo, b1o = None, None
        out = add_norm_outputs(xhat, we, bo, we1, b1o, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        prenorm = cfg["prenorm"] or b == "an_dres_out_added_without_prenorm"
        ds, dy, dy1 = add_norm_ds(call, xhat, rstd, centred, we, we1, prenorm, acc)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xhat, params, x, mask, keep, p,
                               ns, d)
        if b == "an_dparams_tail_row_block_dropped" and R > 64 and R % 64:
            done = (R // 64) * 64
            grads.update(add_norm_affine_grads(inp, dy[:done], None if dy1 is None else dy1[:done], xhat[:done],
                                               params, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self.bug in self._NQ:
            return self._nq14(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq14(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        sdt = acc
        if b == "nq_float64_computed_in_float32" and d == "float64":
            acc = np.float32
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        if b == "nq_zero_eps_read_as_unset" and cfg["eps"] is not None and not float(cfg["eps"]):
            eps = acc(1e-6)
        centred = cfg["norm"] == "layer_norm" or b == "nq_rms_branch_centres"
        cols = N
        if b == "nq_vec8_tail_columns_dropped" and N % 8:
            cols = (N // 8) * 8
        xs = x[:, :cols]
        if centred:
            mean = _rsum(xs) / N
            dev = xs - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(xs * xs) / N + eps)
        xhat = (x - mean) * rstd
        y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y[:, :cols]), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        scale = dynamic_scale(amax, hi, cfg, acc) if static is None else static_scale(static, amax.shape, acc)
        if b == "nq_static_scale_read_as_amax" and static is not None:
            scale = scale / acc(hi)
        if b == "nq_clamp_before_scale_division":
            yc = np.clip(y, lo, hi)
            v = np.where(scale == 0, acc(0) * yc, yc / np.where(scale == 0, acc(1), scale))
        else:
            v = quant_quotients(y, scale, lo, hi, acc)
        q = quantize(v, qdt)
        if cols < N:
            q = q.copy()
            q[:, cols:] = 0
        return norm_quant_returned(q, scale, amax, x0, ns, sdt)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self.bug in self._GATED:
            return self._gated14(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated14(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = acc(1e-6) if b == "gated_eps_kernel_default" else _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean, rstd = self._ln_stats(vg, eps)
        else:
            mean = 0
            rstd = 1 / np.sqrt(_rsum(vg * vg) / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if b == "gated_rms_bwd_centred" and norm != "layer_norm":
            dv = _centred_dx(g, vv, rstd)
        elif b == "gated_bwd_row_sums_in_half" and d in HALF:
            proj = _half_row_sums(np.ascontiguousarray(g * vv), d) / K
            if norm == "layer_norm":
                dv = rstd * (g - _half_row_sums(np.ascontiguousarray(g), d) / K - vv * proj)
            else:
                dv = rstd * (g - vv * proj)
        else:
            dv = gated_dx(norm, g, vv, rstd)
        dv = dv.reshape(R, H)
        dsil = s if b == "gated_dz_silu_value_for_derivative" else ds
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, dsil, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if b == "gated_dparams_rows_from_leading_dim" and x0.ndim >= 3:
            M0 = x0.shape[0]
            grads["weight"] = _store((dn[:M0] * vhat[:M0]).sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dn[:M0].sum(axis=0), d)
        if b == "gated_dweight_dbias_swapped" and bias is not None:
            grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self.bug in self._DYT:
            return self._dyt14(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt14(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        C = x.shape[1]
        wr = w
        if b == "dyt_weight_read_at_tile_column" and w is not None and C > 64:
            wr = w[:, np.arange(C) % 64]
        y = affine(t, wr, bias)
        if b == "dyt_output_bf16_truncated" and d == "bfloat16":
            out = {"y": _truncate_bf16(y).reshape(x0.shape)}
        else:
            out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, x.shape, wr)
        r = 1 / np.cosh(a * x)
        gd = g * (r * r)
        dx = gd * a
        if b == "dyt_dalpha_from_dx":
            da = _rsum(dx * x).sum()
        elif b == "dyt_dalpha_first_column_only":
            da = (gd * x).sum(axis=0)[0]
        else:
            da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dweight_rows_in_half" and d in HALF and w is not None and x.shape[0]:
            dw = _half_row_sums(np.ascontiguousarray((dy * t).T), d)
            grads["weight"] = _store(dw.reshape(C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self.bug in self._POLY:
            return self._poly14(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly14(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        if b == "poly_eps_kernel_default":
            eps = acc(1e-6)
        us = [x ** 3, x ** 2, x]
        if b == "poly_pad_lanes_loaded_as_one" and pow2(H) != H:
            extra = acc(pow2(H) - H)
            rs = [1 / np.sqrt((_rsum(u * u) + extra) / H + eps) for u in us]
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        hy = hs
        if b == "poly_terms_rounded_to_input_dtype" and d in HALF:
            hy = [_half(h, d) for h in hs]
        by = bias
        if b == "poly_bias_loaded_from_weight_ptr" and bias is not None:
            by = inp["weight"][:1]
        y = poly_combine(wt, hy, by, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
        if b == "poly_bwd_projection_on_last_power":
            h = hs[-1]
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2, 1)):
                gp = dy * wt[k]
                du = rs[k] * (gp - h * (_rsum(gp * h) / H))
                dx = dx + (du if p == 1 else p * x ** (p - 1) * du)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)
