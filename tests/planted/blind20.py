"""A twentieth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind20Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln20``, ``_rms20``, ``_an20``, ``_nq20``, ``_gated20``, ``_dyt20``,
``_poly20``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind20Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind19.py (the same mistake on the same op; the twenty-first set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx_dz,
                          gated_grads, gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned,
                          normalized_rows, np_dtype, poly_combine, poly_grads, poly_inputs, poly_normalize, pow2,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, rms_stats, row_affine, row_param_grads,
                          row_weight_bias, rsum as _rsum, sigmoids as _sigmoids, silu_gate, stat_shape,
                          static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind20Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_eps_truncated_to_int": (
        "layer_norm", "eps",
        "the eps argument received through an integer parameter of the launch wrapper (truncated toward zero): "
        "any eps below 1 becomes 0, rstd = 1 / sqrt(var), forward and the backward's formula on that rstd",
        GH + "VeriSilicon/TIM-VX/pull/589 (LayerNormalization's eps always 0 because of a wrong data type of "
        "its parameter)"),
    "ln_var_sum_in_half": (
        "layer_norm", "precision",
        "16-bit inputs: the row's sum of squared deviations accumulated left to right in the input dtype (the "
        "accumulator declared with the input's scalar type; the mean's sum in float32): var, rstd, y and the "
        "backward's formula on that rstd",
        "cf. " + GH + "apache/mxnet/issues/14073 (a LayerNorm performing its reductions in fp16 for fp16 "
        "inputs)"),
    "ln_var_over_block_width": (
        "layer_norm", "block",
        "N not a power of two: the row loaded into a tile of BLOCK_N = next_pow2(N) lanes, the padded lanes "
        "masked out of both sums, the mean divided by N but the sum of squared deviations divided by BLOCK_N: "
        "var too small, rstd, y and the backward's formula on that rstd",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/518 (a power-of-two block's width entering a norm's "
        "statistics where the row length belongs)"),
    "ln_bwd_proj_on_centred_x": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g) - (x - mean) * mean(g * x_hat)): the projection term multiplies the centred "
        "input where x_hat belongs (one factor rstd missing); y, the statistics, dweight and dbias right",
        "pattern: the centred input and its normalized value confused in one term of a hand-derived backward"),
    "ln_dweight_stats_at_column_index": (
        "layer_norm", "layout",
        "with a weight: the column-parallel dweight kernel (one thread per column j, looping over the rows) "
        "recomputes x_hat with the mean and rstd loaded at index j (mod the row count) instead of the row's: "
        "dweight from another row's statistics; dx, dbias and the forward right",
        "pattern: the thread's column index used to load a per-row statistic"),
    "ln_rstd_output_is_variance": (
        "layer_norm", None,
        "the returned rstd holds the row's variance (the accumulator after its division by N, stored before eps "
        "and the rsqrt); y, mean and the gradients right",
        "cf. " + GH + "131250208/TPlinker-joint-extraction/issues/37 (a norm's variance and the statistic "
        "derived from it confused)"),
    "ln_zc_offset_never_applied": (
        "layer_norm", "affine",
        "weight_offset set (zero-centred gamma): the kernel ignores it, y = x_hat * weight + bias and the "
        "backward's g = dy * weight; dweight = sum(dy * x_hat) and dbias right in form",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel missing the 1.0 weight offset a "
        "zero-centred gamma needs)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_chunk_mean_squares_averaged": (
        "rms_norm", "merge",
        "N > 64: the row reduced in chunks of 64 columns, each chunk's mean of squares (divided by its own "
        "count), the chunks merged by a plain average of their means (unweighted by the counts, wrong when the "
        "last chunk is shorter): rstd, y and the backward's formula on that rstd",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count merge of partial statistics, right only "
        "when every partial holds the same count)"),
    "rms_eps_none_as_float64_eps": (
        "rms_norm", "eps",
        "eps=None resolved to finfo(float64).eps (2.2e-16) for every input dtype instead of the compute dtype's "
        "machine epsilon (finfo(float32).eps for 32- and 16-bit inputs), forward and backward",
        "cf. " + GH + "pytorch/pytorch/pull/173039 (RMSNorm's eps=None default taken from the opmath dtype, "
        "not the input dtype)"),
    "rms_bwd_dot_in_half": (
        "rms_norm", "precision",
        "16-bit inputs: the backward's row sum of g * x_hat (its projection term mean(g * x_hat)) accumulated "
        "left to right in the input dtype: dx; the forward and dweight right",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's row sum accumulated in the fp16 input type)"),
    "rms_k2_weight_fortran_order": (
        "rms_norm", "layout",
        "normalized_shape of two or more axes: the weight flattened in column-major (Fortran) order while x's "
        "normalized axes are row-major: y, the backward's g = dy * weight and dweight (stored back through the "
        "same order) at the wrong elements",
        "pattern: a multi-axis parameter flattened in the other memory order"),
    "rms_bwd_rstd_on_first_term_only": (
        "rms_norm", "backward",
        "eps inside: dx = rstd * g - x_hat * mean(g * x_hat): the factor rstd multiplies the first term only; "
        "y, rstd and dweight right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (review of an RMSNorm backward's factors)"),
    "rms_dweight_odd_program_partial_dropped": (
        "rms_norm", "reduction",
        "with a weight, more than 64 rows: dweight reduced by two programs striding blocks of 64 rows (blocks "
        "pid, pid + 2, ...), each into its own partial row, the final sum reading partial 0 only: the rows of "
        "blocks 1, 3, ... never reach dweight; dx right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (the layer-norm tutorial's per-group dw/db partial "
        "buffers losing some rows' contributions)"),
    # ------------------------------------------------------------------ add_norm
    "an_bwd_row_sums_in_half": (
        "add_norm", "precision",
        "16-bit inputs: the backward's row sums of g and g * x_hat (mean(g), mean(g * x_hat) of the "
        "normalization's dx, for y and y1) accumulated left to right in the input dtype: ds, dx, dresidual "
        "(and dx1, drowscale); the forward and the parameter gradients right",
        "cf. " + GH + "apache/mxnet/issues/14073 (a normalization op performing its reductions in fp16 for fp16 "
        "inputs)"),
    "an_bwd_rstd_of_next_row": (
        "add_norm", "layout",
        "more than one row: the backward loads the saved rstd after advancing the row pointer: row r's x_hat, "
        "ds and the parameter gradients use row r + 1's rstd (the last row its own); the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's saved "
        "statistics)"),
    "an_ln_bwd_mean_term_dropped": (
        "add_norm", "backward",
        "norm='layer_norm': the backward's dnorm is the RMS formula rstd * (g - x_hat * mean(g * x_hat)), the "
        "- mean(g) term missing: ds, dx, dresidual (dx1, drowscale); the forward and dweight, dbias right",
        "cf. " + GH + "BVLC/caffe/issues/4110 (a normalization backward missing its mean-correction term)"),
    "an_eps_squared": (
        "add_norm", "eps",
        "rstd = 1 / sqrt(var + eps * eps) (or mean(s^2) + eps * eps): the eps argument taken as a standard-"
        "deviation epsilon and squared into the variance of the fused sum, forward and the backward's formula "
        "on that rstd",
        "cf. " + GH + "keras-team/keras/pull/8726 (where a normalization's epsilon enters the denominator)"),
    "an_pad_lanes_in_var": (
        "add_norm", "block",
        "norm='layer_norm', N not a power of two: x and the residual loaded into a next_pow2(N) tile with "
        "other=0 and the deviations s - mean not masked, so each padded lane adds mean^2 to the sum of squares "
        "(still divided by N): rstd, y (y1) and the backward's formula on that rstd",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/518 (the padded lanes of a power-of-two block entering a "
        "norm's statistics)"),
    "an_dparams_mean_over_rows": (
        "add_norm", "reduction",
        "the parameter gradients (dweight, dbias, dweight1, dbias1) reduced over the rows as a mean (each column "
        "sum divided by the row count) instead of a sum; dx, dresidual right",
        "cf. " + GH + "apache/mxnet/issues/2427 (a weight gradient averaged over the batch where it is "
        "summed)"),
    "an_y_y1_swapped": (
        "add_norm", None,
        "with the parallel branch's weight1: the outputs y and y1 returned in each other's place (the kernel's "
        "output tuple unpacked in the wrong order); the gradients right",
        "pattern: two outputs of the same shape unpacked in the wrong order"),
    # ------------------------------------------------------------------ norm_quant
    "nq_rms_square_in_half": (
        "norm_quant", "precision",
        "norm='rms_norm', 16-bit inputs: x * x formed in the input dtype (float16 overflows to inf beyond 256) "
        "before the float32 sum: rstd, y, amax, scale and q from it",
        "cf. " + GH + "jingyaogong/minimind/issues/301 (an RMSNorm squaring x before its cast to float32)"),
    "nq_dyn_scale_rounded_up_pow2": (
        "norm_quant", "scale_rounding",
        "dynamic scale: the kernel's UE8M0 flag on by default, so each row's scale max(amax / qmax, floor) "
        "(at most scale_ub) is rounded up to a power of two, 2^ceil(log2 scale); q divided by it and it returned",
        "cf. " + GH + "PaddlePaddle/FastDeploy/pull/5563 (per_token_quant_fp8's UE8M0 option: the scale rounded "
        "up to a power of two)"),
    "nq_unfused_y_bf16_truncated": (
        "norm_quant", "rounding",
        "bfloat16 inputs: the normalized y written to a bfloat16 buffer by truncation (the low 16 bits dropped) "
        "and the quantizing kernel reading it back: amax, scale and q from the truncated values",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
    "nq_rows_of_first_sample": (
        "norm_quant", "layout",
        "inputs of three or more axes: row r of x loaded at its index within its sample (r mod rows-per-sample, "
        "the batch stride left out of the offset): every sample normalizes and quantizes sample 0's rows",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding batches wrong)"),
    "nq_rms_eps_outside_root": (
        "norm_quant", "eps",
        "norm='rms_norm': rstd = 1 / (sqrt(mean(x^2)) + eps) instead of 1 / sqrt(mean(x^2) + eps), then amax, "
        "scale and q from y",
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (NormalizeL2: eps applied before the sqrt in some "
        "paths and after it in others)"),
    "nq_ln_var_about_first_value": (
        "norm_quant", "one_pass",
        "norm='layer_norm': the variance accumulated about the row's first value as mean((x - x_0)^2), the "
        "shift's correction (mean - x_0)^2 never subtracted; the mean right; y, amax, scale and q from it",
        "cf. " + GH + "tracel-ai/burn/issues/5607 (a fused float32 layer norm's variance computed by an "
        "expansion)"),
    "nq_stats_single_block_1024": (
        "norm_quant", "block",
        "N > 1024: the statistics pass loads one block of BLOCK = 1024 columns with no loop over blocks, so "
        "columns 1024 on never enter the sums (still divided by N); every column normalized and quantized with "
        "those statistics",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dx_gate_factor_sigmoid": (
        "gated_norm", "gate",
        "norm_before_gate=False: dx = dv * sigmoid(z) (the saved sigmoid register used where silu(z) = z * "
        "sigmoid(z) belongs); dz, dweight, dbias and the forward right",
        "pattern: the gate's sigmoid factor used for the whole gate value"),
    "gated_float64_computed_in_float32": (
        "gated_norm", "precision",
        "float64 inputs: the kernel instantiated for float32 only, x, z, the parameters, the statistics, y and "
        "the backward computed in float32 and widened to float64",
        "cf. " + GH + "google/flax/pull/1804 (normalization layers computing in float32 whatever the input "
        "dtype, a float64 input downcast)"),
    "gated_z_rows_without_batch_stride": (
        "gated_norm", "layout",
        "inputs of three or more axes: the gate z of row r loaded at its index within its sample (r mod "
        "rows-per-sample, the batch stride left out of z's offset): every sample gated by sample 0's z, forward "
        "and backward (dz written for the rows read)",
        "pattern: a batch stride left out of one pointer's offset"),
    "gated_rms_group_over_pow2_width": (
        "gated_norm", "block",
        "norm='rms_norm', group_size not a power of two: each group's sum of squares divided by the tile width "
        "next_pow2(K) instead of K: rstd, y and the backward's formula on that rstd",
        "cf. " + GH + "hw-native-sys/pypto-lib/pull/127 (an RMSNorm divisor taken from a fixed width instead "
        "of the row length)"),
    "gated_dweight_from_weighted_dn": (
        "gated_norm", "backward",
        "dweight = sum over the rows of g * v_hat with g = dn * weight (the weighted gradient formed for dv "
        "reused) instead of dn * v_hat; dx, dz, dbias and the forward right",
        "pattern: the weighted gradient reused for the weight's own reduction"),
    "gated_dparams_tail_row_block_dropped": (
        "gated_norm", "reduction",
        "more than 64 rows, not a multiple of 64: dweight and dbias reduced over blocks of 64 rows with the loop "
        "bound rows // 64, the last partial block never added; dx, dz and the forward right",
        "pattern: a block loop bound written with a floor division, the remainder block never reduced"),
    # ------------------------------------------------------------------ dyt
    "dyt_dalpha_first_row_twice": (
        "dyt", "reduction",
        "alpha's gradient: the accumulator initialised with row 0's partial sum and the loop over the rows then "
        "starting at row 0, so row 0 is counted twice; dx, dweight and dbias right",
        "pattern: an accumulator initialized with the first partial and the loop not starting after it"),
    "dyt_dx_weight_applied_twice": (
        "dyt", "backward",
        "with a weight: dx = g * weight * sech^2(alpha x) * alpha with g = dy * weight already weighted (the "
        "weight multiplied in again where the scalar-weight kernel's factor was): dx; dalpha, dweight, dbias "
        "and the forward right",
        "pattern: a factor already folded into a saved product applied a second time"),
    "dyt_bias_inside_tanh": (
        "dyt", "affine",
        "with a bias: the bias added to alpha * x inside the tanh, y = weight * tanh(alpha x + bias), forward "
        "and the backward of that function (dbias = sum(g * sech^2(alpha x + bias)))",
        "pattern: an FMA's addend placed in the wrong operation of a fused epilogue"),
    "dyt_dweight_from_sech2": (
        "dyt", "backward",
        "with a weight: dweight = sum over the rows of dy * (1 - tanh^2(alpha x)) (the derivative's register "
        "reduced where tanh(alpha x) belongs); dx, dalpha, dbias and the forward right",
        "cf. " + GH + "yizt/numpy_neural_network/issues/6 (a tanh backward returning 1 - tanh^2 where the "
        "product with the upstream gradient belongs)"),
    "dyt_dbias_rows_in_half": (
        "dyt", "precision",
        "16-bit inputs with a bias: dbias's sum of dy over the rows accumulated left to right in the input dtype "
        "(the column partial buffer allocated like the bias); dx, dalpha and dweight right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward's parameter-gradient reduction run in "
        "bfloat16)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_float64_computed_in_float32": (
        "poly_norm", "precision",
        "float64 inputs: the kernel instantiated for float32 only: the powers, their rstd, y and the backward "
        "computed in float32 and widened to float64",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling single-precision math for "
        "double inputs)"),
    "poly_mean_square_over_h_minus_1": (
        "poly_norm", "bessel",
        "H > 1: each power's mean of squares divided by H - 1 (the row-length constant passed as for an "
        "unbiased estimate), in the forward (r_p, y) and in the backward's projection mean(g_p * h_p)",
        "cf. " + GH + "pytorch/pytorch/issues/22617 (a normalization written with torch.var's default unbiased "
        "estimator)"),
    "poly_bwd_chain_factors_reversed": (
        "poly_norm", "backward",
        "dx: the chain factor p x^(p - 1) taken with p counting up (1, 2, 3) while the normalized powers are "
        "stored counting down (x^3, x^2, x): the x^3 term's gradient gets 1, the x term's 3 x^2; dweight, dbias "
        "and the forward right",
        "pattern: two loops over the same terms indexed in opposite orders"),
    "poly_rstd_list_reversed": (
        "poly_norm", "layout",
        "the per-power rstd buffer written in ascending power order and read in descending order: x^3 scaled by "
        "x's rstd and x by x^3's (x^2 right), forward and the backward's formula on those saved values",
        "pattern: a per-term buffer written and read in opposite orders"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _bf16_toward_zero(a):
    """``a`` (float32/float64) converted to bfloat16 by dropping the low 16 bits of its float32 value."""
    bits = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(np_dtype("bfloat16"))


def _next_row(a):
    """Row r of ``a`` (rows, k) replaced by row r + 1's (the last row its own)."""
    return np.concatenate([a[1:], a[-1:]]) if a.shape[0] > 1 else a


def _norm_dx(dy, wgt, xhat, rstd, centred, sums):
    """The normalization's dx per row with g = dy * wgt, its two row sums by ``sums``: LayerNorm's
    (``centred``) or RMSNorm's."""
    g = dy if wgt is None else dy * wgt
    n = g.shape[1]
    proj = xhat * (sums(g * xhat) / n)
    return rstd * (g - sums(g) / n - proj) if centred else rstd * (g - proj)


class Blind20Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind20"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln20(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln20(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        if b == "ln_eps_truncated_to_int":
            eps = acc(np.trunc(eps))
        off = acc(0) if b == "ln_zc_offset_never_applied" else weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        mean = _rsum(x) / N
        dev = x - mean
        cnt = acc(pow2(N)) if b == "ln_var_over_block_width" else acc(N)
        if b == "ln_var_sum_in_half" and d in HALF:
            var = _half_row_sums(dev * dev, d) / cnt
        else:
            var = _rsum(dev * dev) / cnt
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, var if b == "ln_rstd_output_is_variance" else rstd, x0, stat_shape(x0, ns),
                           d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_proj_on_centred_x":
            dx = rstd * (g - _rsum(g) / N - dev * (_rsum(g * xhat) / N))
        elif cnt != N:
            dx = rstd * (g - _rsum(g) / N - xhat * (_rsum(g * xhat) / cnt))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        grads.update(row_param_grads(dy, xhat, w, bias, ns, d))
        if b == "ln_dweight_stats_at_column_index" and w is not None:
            j = np.arange(N) % R
            xh = (x - mean[j, 0][None, :]) * rstd[j, 0][None, :]
            grads["weight"] = _store((dy * xh).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms20(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms20(self, call, acc, b):
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
        fortran = b == "rms_k2_weight_fortran_order" and w0 is not None and len(ns) >= 2
        w = None
        if w0 is not None:
            wf = np.asarray(w0).reshape(ns).flatten(order="F") if fortran else np.asarray(w0)
            w = wf.astype(acc).reshape(1, N) + off
        if b == "rms_eps_none_as_float64_eps" and cfg["eps"] is None:
            eps = acc(np.finfo(np.float64).eps)
        else:
            eps = _eps(cfg["eps"], acc)
        if b == "rms_chunk_mean_squares_averaged" and N > 64:
            parts = [_rsum(x[:, k:k + 64] * x[:, k:k + 64]) / acc(min(64, N - k)) for k in range(0, N, 64)]
            ms = np.concatenate(parts, axis=1).mean(axis=1, keepdims=True)
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_dot_in_half" and d in HALF:
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - u * (_half_row_sums(g * xhat, d) / N))
        elif b == "rms_bwd_rstd_on_first_term_only" and inside:
            dx = rstd * g - xhat * (_rsum(g * xhat) / N)
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xhat
            if b == "rms_dweight_odd_program_partial_dropped" and R > 64:
                dw = np.zeros((N,), acc)
                for r0 in range(0, R, 128):                  # program 0's blocks: 0, 2, 4, ...
                    dw = dw + t[r0:r0 + 64].sum(axis=0)
            else:
                dw = t.sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns, order="F") if fortran else dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an20(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an20(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        if b == "an_eps_squared":
            eps = eps * eps
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            dev = s - mean
            ss = _rsum(dev * dev)
            if b == "an_pad_lanes_in_var" and pow2(N) != N:
                ss = ss + acc(pow2(N) - N) * mean * mean
            rstd = 1 / np.sqrt(ss / N + eps)
        else:
            dev = s
            rstd = 1 / np.sqrt(_rsum(s * s) / N + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_y_y1_swapped" and "y1" in out:
            out["y"], out["y1"] = out["y1"], out["y"]
        if "y" not in call.cotangents:
            return Returned(out, {})
        rb, xb = rstd, xhat
        if b == "an_bwd_rstd_of_next_row" and R > 1:
            rb = _next_row(rstd)
            xb = dev * rb
        sums = _rsum
        if b == "an_bwd_row_sums_in_half" and d in HALF:
            def sums(a):                                     # noqa: F811
                return _half_row_sums(a, d)
        bc = centred and b != "an_ln_bwd_mean_term_dropped"
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = _norm_dx(dy, we, xb, rb, bc, sums)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + _norm_dx(dy1, we1, xb, rb, bc, sums)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xb, params, x, mask, keep,
                               p, ns, d)
        if b == "an_dparams_mean_over_rows":
            for k, t in (("weight", None if w is None else dy * xb), ("bias", None if bias is None else dy),
                         ("weight1", None if dy1 is None else dy1 * xb), ("bias1", None if dy1 is None else dy1)):
                if k in grads and t is not None:
                    grads[k] = _store((t.sum(axis=0) / acc(R)).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq20(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq20(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        if b == "nq_rows_of_first_sample" and x0.ndim >= 3 and x0.shape[0] > 1:
            x = x[np.arange(R) % (R // x0.shape[0])]
        eps = _eps(cfg["eps"], acc)
        k = 1024 if b == "nq_stats_single_block_1024" and N > 1024 else N     # the columns the sums load
        xs = x[:, :k]
        if cfg["norm"] == "layer_norm":
            mean = _rsum(xs) / N
            if b == "nq_ln_var_about_first_value":
                var = _rsum((x - x[:, :1]) ** 2) / N
            else:
                var = _rsum((xs - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            sq = _half(xs * xs, d) if b == "nq_rms_square_in_half" and d in HALF else xs * xs
            ms = _rsum(sq) / N
            rstd = 1 / (np.sqrt(ms) + eps) if b == "nq_rms_eps_outside_root" else 1 / np.sqrt(ms + eps)
        xhat = (x - mean) * rstd
        y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
        if b == "nq_unfused_y_bf16_truncated" and d == "bfloat16":
            y = _bf16_toward_zero(y).astype(acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
            if b == "nq_dyn_scale_rounded_up_pow2":
                m, e = np.frexp(np.where(scale > 0, scale, 1.0).astype(np.float64))
                kk = np.where(m == 0.5, e - 1, e)
                scale = np.where(scale > 0, np.ldexp(1.0, kk.astype(np.int64)), 0.0).astype(acc)
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated20(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated20(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        if b == "gated_float64_computed_in_float32" and d == "float64":
            acc = np.float32
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        if b == "gated_z_rows_without_batch_stride" and x0.ndim >= 3 and x0.shape[0] > 1:
            z = z[np.arange(R) % (R // x0.shape[0])]
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        cnt = acc(K)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / K + eps)
        else:
            mean = 0
            if b == "gated_rms_group_over_pow2_width":
                cnt = acc(pow2(K))
            rstd = 1 / np.sqrt(_rsum(vg * vg) / cnt + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        vv = vhat.reshape(-1, K)
        if norm == "layer_norm":
            dv = _centred_dx(g, vv, rstd)
        else:
            dv = rstd * (g - vv * (_rsum(g * vv) / cnt))
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if b == "gated_dx_gate_factor_sigmoid" and not nbg:
            dx = dv * _sigmoids(z)[0]
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if b == "gated_z_rows_without_batch_stride" and x0.ndim >= 3 and x0.shape[0] > 1:
            P = R // x0.shape[0]
            dzr = np.zeros_like(dz)
            np.add.at(dzr, np.arange(R) % P, dz)             # dz written for the rows read (sample 0's)
            dzr = np.where((np.arange(R) < P)[:, None], dzr, acc(0))
            grads["z"] = _store(dzr.reshape(x0.shape), d)
        if b == "gated_dweight_from_weighted_dn":
            grads["weight"] = _store((dn * w * vhat).sum(axis=0), d)
        if b == "gated_dparams_tail_row_block_dropped" and R > 64 and R % 64:
            kr = (R // 64) * 64
            grads["weight"] = _store((dn * vhat)[:kr].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dn[:kr].sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt20(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt20(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        inner = b == "dyt_bias_inside_tanh" and bias is not None
        u = a * x
        if inner:
            u = u + bias
            t = np.tanh(u)
            y = affine(t, w, None)
        else:
            y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, x.shape, w)
        r = 1 / np.cosh(u)
        D = r * r
        gd = g * D
        dx = gd * a
        if b == "dyt_dx_weight_applied_twice" and w is not None:
            dx = dx * w
        rows = _rsum(gd * x)
        da = rows.sum()
        if b == "dyt_dalpha_first_row_twice":
            da = da + rows[0, 0]
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if inner:
            grads["bias"] = _store(gd.sum(axis=0), d)
        if b == "dyt_dweight_from_sech2" and w is not None:
            grads["weight"] = _store((dy * D).sum(axis=0), d)
        if b == "dyt_dbias_rows_in_half" and bias is not None and d in HALF:
            grads["bias"] = _store(_half_row_sums(np.ascontiguousarray(dy.T), d).reshape(-1), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly20(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly20(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        if b == "poly_float64_computed_in_float32" and d == "float64":
            acc = np.float32
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        cnt = acc(H)
        if b == "poly_mean_square_over_h_minus_1" and H > 1:
            cnt = acc(H - 1)
            rs = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rms = sc * np.sqrt(_rsum((u / sc) ** 2) / cnt)
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        if b == "poly_rstd_list_reversed":
            rs = rs[::-1]
            hs = [u * r for u, r in zip(us, rs)]
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = rms_dx
        if cnt != H:
            def du(g, h, r):                                 # noqa: F811
                return r * (g - h * (_rsum(g * h) / cnt))
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_bwd_chain_factors_reversed":
            dx = np.zeros_like(x)
            for k, pp in enumerate((1, 2, 3)):                # the powers counted up, the terms stored down
                dp = du(dy * wt[k], hs[k], rs[k])
                dx = dx + (dp if pp == 1 else pp * x ** (pp - 1) * dp)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)
