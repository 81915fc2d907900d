"""A sixteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind16Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln16``, ``_rms16``, ``_an16``, ``_nq16``, ``_gated16``, ``_dyt16``,
``_poly16``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind16Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind15.py (the same mistake on the same op; the seventeenth set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import math

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs,
                          add_norm_params, add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx,
                          dy_and_g, dyt_grads, dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size,
                          gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_inputs, half as _half, kept,
                          ln_rows, norm_dx, norm_outputs, norm_quant_returned, normalized_rows, poly_combine,
                          poly_grads, poly_inputs, poly_normalize, quant_quotients, quantize, rms_dx,
                          rms_norm_dx, rms_rows, rms_stats, row_affine, row_param_grads, row_weight_bias,
                          rsum as _rsum, silu_gate, sigmoids as _sigmoids, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind16Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_warp_welford_merge_equal_counts": (
        "layer_norm", "merge",
        "the row's columns strided over the 32 lanes of a warp (lane l takes the columns j = l mod 32), each lane "
        "a Welford (count, mean, M2) merged by a tree with offsets 16, 8, 4, 2, 1 whose combine takes the new mean "
        "as (mean_a + mean_b) / 2 (the counts assumed equal; an empty side skipped) while M2 gets the right "
        "delta^2 * n_a * n_b / n term: rows whose lanes hold unequal counts (N not a multiple of 32, or below "
        "32) get a wrong mean, the variance about it; forward (y, mean, rstd) and the backward from them",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count Welford merge, valid only when every partial "
        "has the same count)"),
    "ln_stats_store_without_batch_stride": (
        "layer_norm", "layout",
        "inputs of three or more axes: the mean and rstd of row r stored at the row's index within its sample "
        "(r mod rows-per-sample, the batch stride left out of the store offset): every sample overwrites sample "
        "0's slots (the last sample's values stay), the later slots never written (0); y and the gradients from "
        "the registers, right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding batches wrong: every "
        "batch after the first normalized the wrong data)"),
    "ln_bwd_weighted_dy_in_input_dtype": (
        "layer_norm", "precision",
        "16-bit inputs with a weight: the backward forms g = dy * weight with a 16-bit multiply (rounded to the "
        "input dtype) before the float32 row sums and the dx formula; dweight and dbias from dy, right",
        "cf. " + GH + "apache/mxnet/issues/14073 (a LayerNorm performing its reductions in fp16 for fp16 inputs)"),
    "ln_eps_in_squared_deviation_sum": (
        "layer_norm", "eps",
        "eps added to the row's sum of squared deviations before the division by N: rstd = 1 / sqrt((sum((x - "
        "mean)^2) + eps) / N) (an effective eps / N), forward and the backward's formula on that rstd",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/317 (a norm kernel's eps grouped at the wrong place of its rsqrt "
        "expression)"),
    "ln_bwd_mean_term_without_count": (
        "layer_norm", "backward",
        "dx = rstd * (g - sum(g) - x_hat * mean(g * x_hat)): the first term's row sum of g not divided by N (the "
        "projection term's right); dweight and dbias right",
        "pattern: a reduction's mean taken as its sum"),
    "ln_saved_rstd_unbiased": (
        "layer_norm", "bessel",
        "N > 1: the rstd output written from a second finalization with the unbiased variance, 1 / sqrt(sum((x - "
        "mean)^2) / (N - 1) + eps); y, mean and the gradients use the biased variance, right",
        "cf. " + GH + "CanReader/FastNN/issues/11 (biased and unbiased variances mixed between two code paths)"),
    "ln_f16_output_round_toward_zero": (
        "layer_norm", "rounding",
        "float16 outputs: y converted by the round-toward-zero intrinsic (__float2half_rz) instead of to nearest "
        "even; mean, rstd and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (unary kernels storing fp32 -> bf16 by truncation)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_sumsq_second_warp_dropped": (
        "rms_norm", "block",
        "N > 32: the row's columns strided over a block of 64 threads (two warps, thread t takes j = t mod 64); "
        "the shared-memory combine of the warps' partial sums of squares reads warp 0's slot only, so the columns "
        "with j mod 64 >= 32 never enter mean(x^2) (still divided by N): rstd, y and the backward from it",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns its offsets "
        "never reach)"),
    "rms_bwd_xhat_from_stored_output": (
        "rms_norm", "precision",
        "16-bit inputs with a weight (the memory-efficient backward): x_hat recomputed as y / (weight + offset) "
        "from the output y already rounded to the input dtype, for dx and dweight; the forward right",
        "cf. " + GH + "NVIDIA/apex/pull/1715 (LayerNorm/RMSNorm memory_efficient: the backward from the saved "
        "output)"),
    "rms_rstd_reciprocal_without_root": (
        "rms_norm", "semantics",
        "eps inside: rstd = 1 / (mean(x^2) + eps) (the reciprocal intrinsic called where the reciprocal square "
        "root belongs, the root left out), forward (y, rstd) and the backward's formula on that rstd",
        "pattern: rcp() written for rsqrt() in a hand-written kernel"),
    "rms_dweight_from_raw_x": (
        "rms_norm", "backward",
        "with a weight: dweight = sum over the rows of dy * x (the loaded x, the factor rstd of x_hat left out); "
        "dx and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (review of an RMSNorm backward's factors: 'I forgot to multiply by "
        "the weight in the backward pass')"),
    "rms_dweight_mean_over_rows": (
        "rms_norm", "reduction",
        "more than one row: dweight reduced over the rows as a mean (divided by the row count) instead of a sum",
        "cf. " + GH + "deeplearning4j/deeplearning4j/pull/366 (bias gradients taken as a mean over the batch where "
        "a sum belongs)"),
    "rms_rstd_output_is_rms": (
        "rms_norm", None,
        "the returned rstd is sqrt(mean(x^2) + eps) (the denominator the kernel divides by, stored before its "
        "reciprocal); y and the gradients right",
        "pattern: the saved statistic stored at another stage of its finalization"),
    # ------------------------------------------------------------------ add_norm
    "an_residual_rows_without_batch_stride": (
        "add_norm", "layout",
        "inputs of three or more axes: the residual's row r loaded at the row's index within its sample (r mod "
        "rows-per-sample, the batch stride left out): every sample adds sample 0's residual rows, forward "
        "(residual_out, y) and the backward from that sum",
        "cf. " + GH + "tenstorrent/tt-metal/pull/57223 (a group norm kernel's per-batch offset wrong)"),
    "an_dx_from_stored_dresidual": (
        "add_norm", "precision",
        "16-bit inputs: dx (and dx1) computed by a second pass from the stored dresidual, already rounded to the "
        "input dtype: dx = round(ds) * c instead of ds * c rounded once (two roundings where the factor c is "
        "not a power of two)",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/39501 (dropout on fp16 computed from fp16 intermediates; cast "
        "through fp32 for accuracy)"),
    "an_drowscale_summed_over_row_block": (
        "add_norm", "reduction",
        "with a rowscale: its gradient reduced with a sum over the whole 2-D tile of 4 rows (tl.sum without "
        "axis=1): every row of a block gets the block's total sum(ds * x * mask) / (1 - p)",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer norm backward kernel wrong with BLOCK_ROW_SIZE > 1: "
        "tl.sum over the 2-D tile instead of axis=1)"),
    "an_ln_eps_added_to_std": (
        "add_norm", "eps",
        "norm='layer_norm': rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), forward (y, y1) and the "
        "backward's formula on that rstd",
        "cf. " + GH + "codertimo/BERT-pytorch/issues/30 (a LayerNorm dividing by std + eps where sqrt(var + eps) "
        "belongs)"),
    "an_bwd_y1_branch_through_weight": (
        "add_norm", "affine",
        "with y1's cotangent: the parallel branch's term of ds taken through weight (+ offset) instead of weight1 "
        "(+ offset): ds += dnorm(dy1 * weight); the forward, dweight1 and dbias1 right",
        "pattern: the second branch's backward copied from the first with its weight pointer unchanged"),
    "an_bwd_stats_recomputed_without_residual": (
        "add_norm", "backward",
        "with a residual: the backward recomputes rstd and x_hat from the dropped x (x * c, + x1 * c1) it reloads, "
        "the residual left out of the recomputed sum: ds, dx, dresidual, drowscale, dweight and dbias from those; "
        "the forward right",
        "cf. " + GH + "vllm-project/vllm/issues/52104 (fused_add_rms_norm computing its statistics from "
        "another (rounded) sum than the residual it returns)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_reset_per_tile": (
        "norm_quant", "block",
        "N > 128: the amax accumulator initialised inside the loop over 128-wide column tiles: amax is the last "
        "tile's max |y|; the dynamic scale from it, the other tiles' larger values saturating; amax returned so",
        "cf. " + GH + "AMD-AGI/Primus-Turbo/pull/306 (an amax reduction returning the first tile's max only: "
        "wrong FP8 scales)"),
    "nq_static_scale_loaded_as_float": (
        "norm_quant", "precision",
        "float64 inputs with a static_scale: the scale loaded through a float32 pointer (rounded to float32), q "
        "divided by it and it returned",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling a single-precision routine "
        "on double inputs)"),
    "nq_scale_row_within_sample": (
        "norm_quant", "quant_scale",
        "dynamic scale, inputs of three or more axes: the quantizing pass loads row r's scale at r mod "
        "rows-per-sample (the batch stride left out): every sample divided by sample 0's scales; the scale and "
        "amax outputs right",
        "cf. " + GH + "vllm-project/compressed-tensors/issues/394 (per-token dynamic scales indexed over the wrong "
        "dimensions of a 3-D activation)"),
    "nq_eps_in_input_dtype": (
        "norm_quant", "eps",
        "16-bit inputs: eps converted to the input dtype (a kernel argument of the activation's scalar type) "
        "before it is added to the float32 statistic (bfloat16: 0.3 becomes 0.30078), then quantized",
        "cf. " + GH + "deepspeedai/DeepSpeed/issues/581 (a layernorm kernel losing its epsilon to a float16 "
        "conversion)"),
    "nq_rms_weight_not_applied": (
        "norm_quant", "affine",
        "norm='rms_norm' with a weight: the fused kernel's RMS path never multiplies by the weight (y = x_hat), "
        "then quantized (amax, scale and q from the unweighted values)",
        "pattern: a parameter pointer passed and never read on one branch of a fused kernel"),
    # ------------------------------------------------------------------ gated_norm
    "gated_silu_grad_sign_flipped": (
        "gated_norm", "gate",
        "the gate's derivative written s' = sigmoid(z) (1 - z (1 - sigmoid(z))) (the sign of the z term flipped): "
        "dz only",
        "cf. " + GH + "sausheong/gonn/issues/8 (a sigmoid derivative written with the wrong sign)"),
    "gated_group_size_read_as_ngroups": (
        "gated_norm", "group",
        "group_size given: the value passed as the number of groups, the kernel's group length K = H / group_size "
        "(right only where the two coincide), forward and backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/15507 (the grouped post-SSM norm's group count and group length "
        "laid out the other way)"),
    "gated_rstd_in_input_dtype": (
        "gated_norm", "precision",
        "16-bit inputs: each group's rstd held in the input dtype (rounded) and used for the normalization and "
        "the backward",
        "cf. " + GH + "pytorch/helion/pull/2273 (rms_norm: inv_rms saved in fp32 to fix the bf16 backward)"),
    "gated_eps_added_before_group_mean": (
        "gated_norm", "eps",
        "eps added to each group's sum (of squares, or of squared deviations) before the division by K: rstd = 1 "
        "/ sqrt((sum + eps) / K) (an effective eps / K), forward and backward",
        "pattern: eps added to an accumulator before its finalization"),
    "gated_ln_bwd_mean_term_dropped": (
        "gated_norm", "backward",
        "norm='layer_norm': the backward is the RMS formula dv = rstd (g - v_hat mean(g v_hat)) (the - mean(g) "
        "term missing): dx and dz; the forward, dweight and dbias right",
        "pattern: a shared backward kernel's IS_RMS_NORM flag set for both norms"),
    "gated_dparams_buffer_of_group_width": (
        "gated_norm", "reduction",
        "group_size < H: the dweight/dbias partial buffers sized by the group length K: entry j collects the "
        "sums over every group's column j mod K, broadcast back to each group; dx and dz right",
        "cf. " + GH + "state-spaces/mamba/pull/547 (Consider group_size in layer_norm_bwd)"),
    "gated_ln_var_one_pass": (
        "gated_norm", "one_pass",
        "norm='layer_norm': each group's variance as E[v^2] - E[v]^2 from one pass of float32 sums (clamped at "
        "0), forward and the backward's formula on that rstd",
        "cf. " + GH + "tracel-ai/burn/issues/5607 (a fused f32 layer_norm's E[x^2] - E[x]^2 losing rows with a "
        "large mean)"),
    # ------------------------------------------------------------------ dyt
    "dyt_dtanh_sech_not_squared": (
        "dyt", "backward",
        "tanh'(alpha x) taken as sech(alpha x) = 1 / cosh(alpha x) (the square dropped): dx and dalpha; the "
        "forward, dweight and dbias right",
        "cf. " + GH + "microsoft/knossos-ksc/pull/505 (wrong derivatives for tanh)"),
    "dyt_dalpha_partials_single_block": (
        "dyt", "reduction",
        "more than 32 rows: dalpha reduced in two stages, one partial per row, the second stage loading a single "
        "block of 32 partials (no loop over the partial buffer): the rows from 32 on never reach dalpha",
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing all but one block's partial "
        "sums)"),
    "dyt_channel_index_from_axis1": (
        "dyt", "layout",
        "inputs of three or more axes (axis 1 shorter than the last): weight and bias indexed by the element's "
        "channel taken as in a channels-first tensor, (flat index mod C1) with C1 = x.shape[1] (the channels_last "
        "flag read the other way) instead of the last axis's index, forward and the backward (dx, dalpha; "
        "dweight and dbias accumulated at those indices)",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (a normalization kernel giving wrong results when its input's "
        "memory layout is not the one it indexes with)"),
    "dyt_dweight_dbias_swapped": (
        "dyt", None,
        "with a weight and a bias: their gradients returned in each other's place (the backward's output tuple in "
        "the wrong order)",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (the weight and bias gradients assigned the wrong way round)"),
    "dyt_elementwise_grid_floor": (
        "dyt", "block",
        "the elementwise kernel over the flattened input in blocks of 256 launched on numel // 256 programs "
        "(floor, not cdiv): the last numel mod 256 elements never processed (y and dx left 0, their terms "
        "missing from dalpha, dweight and dbias)",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering part of the elements: the rest "
        "of the output never written)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_row_partials_in_half": (
        "poly_norm", "precision",
        "16-bit inputs: each row's float32 partial of sum(dy * h_p) accumulated over the rows left to right in the "
        "input dtype (the weight-gradient buffer allocated like the weight), for the three entries of dweight",
        "cf. " + GH + "pytorch/helion/pull/3595 (a norm's parameter gradient accumulated over rows in bfloat16)"),
    "poly_bwd_rstd_buffer_transposed": (
        "poly_norm", "layout",
        "the forward saves the three powers' rstd power-major (k * rows + r), the backward reads them row-major "
        "(r * 3 + k): dx and dweight from another row's or power's rstd; the forward right",
        "cf. " + GH + "ROCm/aiter/pull/4506 (a scale buffer written column-major and read row-major)"),
    "poly_bwd_proj_sum_without_count": (
        "poly_norm", "backward",
        "dx: each power's projection term takes sum(g_p h_p) where mean(g_p h_p) belongs (the 1 / H missing); "
        "dweight, dbias and the forward right",
        "pattern: a reduction's mean taken as its sum"),
    "poly_dweight_accumulator_not_reset": (
        "poly_norm", "reduction",
        "the weight's gradient accumulated in the loop over the three powers into one accumulator never reset: "
        "dweight = (s3, s3 + s2, s3 + s2 + s1); dx, dbias right",
        "pattern: an accumulator declared outside the loop it should be reset in"),
    "poly_rows_grid_floor_div": (
        "poly_norm", "block",
        "programs of 4 rows launched on a grid of rows // 4 (floor, not cdiv): the last rows mod 4 never "
        "processed (y and dx left 0, their terms missing from dweight and dbias)",
        "cf. " + GH + "ServiceNow/Fast-LLM/pull/546 (a normalization backward grid-striding its rows over a "
        "program count fixed by the SM count)"),
    "poly_eps_added_to_sum_of_squares": (
        "poly_norm", "eps",
        "each power's rstd = 1 / sqrt((sum(u^2) + eps) / H): eps added to the sum of squares before the division "
        "by H (an effective eps / H), forward and the backward from those rstd",
        "pattern: eps added to an accumulator before its finalization"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _rows_per_sample(x0, k):
    """The rows of x0 (normalized over its last ``k`` axes) in one sample (its leading axis)."""
    lead = x0.shape[:x0.ndim - k]
    return math.prod(lead[1:]) if len(lead) >= 2 else None


def _f16_toward_zero(a):
    """``a`` (float32/float64) converted to float16 rounding toward zero."""
    a = np.asarray(a)
    h = a.astype(np.float16)
    over = np.isfinite(a) & (np.abs(h.astype(a.dtype)) > np.abs(a))
    return np.where(over, np.nextafter(h, np.float16(0)), h)


class Blind16Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind16"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self.bug in self._LN:
            return self._ln16(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln16(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        if b == "ln_warp_welford_merge_equal_counts":
            lanes = []
            for lane in range(32):
                xs = x[:, lane::32]
                n = xs.shape[1]
                if n:
                    m = _rsum(xs) / acc(n)
                    lanes.append([n, m, _rsum((xs - m) ** 2)])
                else:
                    lanes.append([0, None, None])
            for off in (16, 8, 4, 2, 1):
                for lane in range(off):
                    na, ma, m2a = lanes[lane]
                    nb, mb, m2b = lanes[lane + off]
                    if nb == 0:
                        continue
                    if na == 0:
                        lanes[lane] = [nb, mb, m2b]
                        continue
                    n = na + nb
                    delta = mb - ma
                    lanes[lane] = [n, (ma + mb) / acc(2), m2a + m2b + delta * delta * acc(na * nb / n)]
            mean, var = lanes[0][1], lanes[0][2] / acc(N)
            dev = x - mean
        else:
            mean = _rsum(x) / N
            dev = x - mean
            ss = _rsum(dev * dev)
            var = (ss + eps) / N - eps if b == "ln_eps_in_squared_deviation_sum" else ss / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        rs_out = rstd
        if b == "ln_saved_rstd_unbiased" and N > 1:
            rs_out = 1 / np.sqrt(_rsum(dev * dev) / (N - 1) + eps)
        out = norm_outputs(y, mean, rs_out, x0, stat_shape(x0, ns), d, acc)
        if b == "ln_f16_output_round_toward_zero" and d == "float16":
            out["y"] = _f16_toward_zero(y.reshape(x0.shape))
        rps = _rows_per_sample(x0, len(ns))
        if b == "ln_stats_store_without_batch_stride" and rps is not None and R > rps:
            for k in ("mean", "rstd"):
                src = out[k].reshape(R)
                buf = np.zeros(R, src.dtype)
                for r in range(R):
                    buf[r % rps] = src[r]
                out[k] = buf.reshape(out[k].shape)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_weighted_dy_in_input_dtype" and d in HALF and w is not None:
            g = _half(g, d)
        if b == "ln_bwd_mean_term_without_count":
            dx = rstd * (g - _rsum(g) - xhat * (_rsum(g * xhat) / N))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        grads.update(row_param_grads(dy, xhat, w, bias, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self.bug in self._RMS:
            return self._rms16(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms16(self, call, acc, b):
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
        if b == "rms_sumsq_second_warp_dropped" and N > 32:
            warp0 = (np.arange(N) % 64 < 32)[None, :]
            ms = _rsum(np.where(warp0, x * x, acc(0))) / N
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        elif b == "rms_rstd_reciprocal_without_root" and inside:
            ms = _rsum(x * x) / N
            rms, rstd = np.sqrt(ms), 1 / (ms + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        rs_out = rstd
        if b == "rms_rstd_output_is_rms":
            rs_out = 1 / rstd
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs_out.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        xb = xhat
        if b == "rms_bwd_xhat_from_stored_output" and d in HALF and w is not None:
            ys = _half(y, d)
            xb = np.where(w == 0, xhat, ys / np.where(w == 0, acc(1), w))
            dx = rstd * (g - xb * (_rsum(g * xb) / N)) if inside else rms_norm_dx(g, x, xb, rstd, rms, placement)
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            dw = (dy * (x if b == "rms_dweight_from_raw_x" else xb)).sum(axis=0)
            if b == "rms_dweight_mean_over_rows" and R > 1:
                dw = dw / acc(R)
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self.bug in self._AN:
            return self._an16(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an16(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        rps = _rows_per_sample(x0, len(ns))
        if b == "an_residual_rows_without_batch_stride" and res is not None and rps is not None and R > rps:
            res = res[np.arange(R) % rps]
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if b == "an_ln_eps_added_to_std" and centred:
            mean = _rsum(s) / N
            dev = s - mean
            rstd = 1 / (np.sqrt(_rsum(dev * dev) / N) + eps)
            xhat = dev * rstd
        else:
            _, rstd, xhat = (ln_rows if centred else rms_rows)(s, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        rb, xb = rstd, xhat
        if b == "an_bwd_stats_recomputed_without_residual" and res is not None:
            _, rb, xb = (ln_rows if centred else rms_rows)(s - res, eps)
        ds, dy, dy1 = add_norm_ds(call, xb, rb, centred, we, we1, cfg["prenorm"], acc)
        if b == "an_bwd_y1_branch_through_weight" and dy1 is not None:
            ds = ds - norm_dx(dy1, we1, xb, rb, centred) + norm_dx(dy1, we, xb, rb, centred)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xb, params, x, mask, keep, p,
                               ns, d)
        if b == "an_dx_from_stored_dresidual" and d in HALF:
            dsr = _half(ds, d)
            grads["x"] = _store((dsr * c).reshape(x0.shape), d)
            if c1 is not None:
                grads["x1"] = _store((dsr * c1).reshape(x0.shape), d)
        if b == "an_drowscale_summed_over_row_block" and "rowscale" in grads:
            g = grads["rowscale"]
            t = ds * x if mask is None else ds * x * mask
            per_row = _rsum(t) * keep if p else _rsum(t)
            blk = np.zeros_like(per_row)
            for r0 in range(0, R, 4):
                blk[r0:r0 + 4] = per_row[r0:r0 + 4].sum()
            grads["rowscale"] = _store(blk.reshape(g.shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self.bug in self._NQ:
            return self._nq16(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq16(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        if b == "nq_eps_in_input_dtype" and d in HALF:
            eps = _half(eps, d)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(x) / N
            dev = x - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        xhat = (x - mean) * rstd
        wt = inp.get("weight")
        if b == "nq_rms_weight_not_applied" and not centred:
            wt = None
        y = row_affine(xhat, wt, inp.get("bias"), acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        if b == "nq_amax_reset_per_tile" and N > 128:
            t0 = ((N - 1) // 128) * 128
            amax = np.max(np.abs(y[:, t0:]), axis=1, keepdims=True, initial=0.0)
        else:
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None and b == "nq_static_scale_loaded_as_float" and d == "float64":
            static = static.astype(np.float32)
        scale = dynamic_scale(amax, hi, cfg, acc) if static is None else static_scale(static, amax.shape, acc)
        sq = scale
        rps = _rows_per_sample(x0, len(ns))
        if b == "nq_scale_row_within_sample" and static is None and rps is not None and x.shape[0] > rps:
            sq = scale[np.arange(x.shape[0]) % rps]
        v = quant_quotients(y, sq, lo, hi, acc)
        q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self.bug in self._GATED:
            return self._gated16(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated16(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_group_size_read_as_ngroups" and cfg["group_size"] is not None:
            K = H // K
        s, ds = silu_gate(z)
        if b == "gated_silu_grad_sign_flipped":
            sig, rest = _sigmoids(z)
            ds = sig * (1 - z * rest)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            if b == "gated_ln_var_one_pass":
                var = np.maximum(_rsum(vg * vg) / K - mean * mean, acc(0))
            elif b == "gated_eps_added_before_group_mean":
                var = (_rsum(dev * dev) + eps) / K - eps
            else:
                var = _rsum(dev * dev) / K
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = 0
            ss = _rsum(vg * vg)
            rstd = 1 / np.sqrt((ss + eps) / K if b == "gated_eps_added_before_group_mean" else ss / K + eps)
        if b == "gated_rstd_in_input_dtype" and d in HALF:
            rstd = _half(rstd, d)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if b == "gated_ln_bwd_mean_term_dropped" and norm == "layer_norm":
            dv = rms_dx(g, vv, rstd)
        else:
            dv = gated_dx(norm, g, vv, rstd)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if b == "gated_dparams_buffer_of_group_width" and K < H:
            G = H // K
            dwk = (dn * vhat).sum(axis=0).reshape(G, K).sum(axis=0)
            grads["weight"] = _store(np.tile(dwk, G), d)
            if bias is not None:
                grads["bias"] = _store(np.tile(dn.sum(axis=0).reshape(G, K).sum(axis=0), G), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self.bug in self._DYT:
            return self._dyt16(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt16(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        ci = None
        if b == "dyt_channel_index_from_axis1" and x0.ndim >= 3 and x0.shape[1] < x.shape[1]:
            ci = (np.arange(x.size) % x0.shape[1]).reshape(x.shape)
            w = None if w is None else w.reshape(-1)[ci]
            bias = None if bias is None else bias.reshape(-1)[ci]
        y = affine(t, w, bias)
        live = None
        if b == "dyt_elementwise_grid_floor" and x.size % 256:
            live = (np.arange(x.size) < (x.size // 256) * 256).reshape(x.shape)
            y = np.where(live, y, acc(0))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, x.shape, w)
        if live is not None:
            dy = np.where(live, dy, acc(0))
            g = np.where(live, g, acc(0))
        r = 1 / np.cosh(a * x)
        gd = g * r if b == "dyt_dtanh_sech_not_squared" else g * (r * r)
        dx = gd * a
        rows = _rsum(gd * x)
        if b == "dyt_dalpha_partials_single_block" and x.shape[0] > 32:
            da = rows[:32].sum()
        else:
            da = rows.sum()
        if ci is not None:
            C = x.shape[1]
            grads = {"x": _store(dx.reshape(x0.shape), d), "alpha": _store(np.reshape(da, np.shape(inp["alpha"])), d)}
            for k, tt, given in (("weight", dy * t, inp.get("weight")), ("bias", dy, inp.get("bias"))):
                if given is not None:
                    grads[k] = _store(np.bincount(ci.reshape(-1), weights=tt.reshape(-1), minlength=C)[:C], d)
            return Returned(out, grads)
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dweight_dbias_swapped" and w is not None and bias is not None:
            grads["weight"], grads["bias"] = grads["bias"], grads["weight"]
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self.bug in self._POLY:
            return self._poly16(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly16(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        us = [x ** 3, x ** 2, x]
        if b == "poly_eps_added_to_sum_of_squares":
            rs = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rs.append(1 / np.sqrt((sc * sc * _rsum((u / sc) ** 2) + eps) / H))
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        live = None
        if b == "poly_rows_grid_floor_div" and R % 4:
            live = (np.arange(R) < (R // 4) * 4)[:, None]
            y = np.where(live, y, acc(0))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        if live is not None:
            dy = np.where(live, dy, acc(0))
        hb, rb = hs, rs
        if b == "poly_bwd_rstd_buffer_transposed":
            flat = np.concatenate([r.reshape(-1) for r in rs])          # power-major: k * R + r
            rr = flat.reshape(R, 3)                                      # read row-major: r * 3 + k
            rb = [rr[:, k:k + 1] for k in range(3)]
            hb = [u * r for u, r in zip(us, rb)]
        du = rms_dx
        if b == "poly_bwd_proj_sum_without_count":
            def du(g, h, r):
                return r * (g - h * _rsum(g * h))
        grads = poly_grads(dy, x, wt, hb, rb, bias, x0.shape, d, acc, du=du)
        if b == "poly_dweight_accumulator_not_reset":
            parts = [_rsum(dy * h).sum() for h in hs]
            grads["weight"] = _store(np.cumsum(np.array(parts, dtype=acc)).astype(acc).reshape(inp["weight"].shape),
                                     d)
        if b == "poly_dweight_row_partials_in_half" and d in HALF:
            dw = [_half_row_sums(np.ascontiguousarray(_rsum(dy * h).T), d).reshape(()) for h in hs]
            grads["weight"] = _store(np.array(dw, dtype=acc).reshape(inp["weight"].shape), d)
        return Returned(out, grads)
