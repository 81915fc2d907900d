"""A thirty-sixth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind36Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln36``, ``_rms36``, ``_an36``, ``_nq36``, ``_gated36``, ``_dyt36``,
``_poly36``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind36Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug by docs/verdicts.md's "Which mechanism a bug
is" (the first rule that applies), one of ``LABELS`` (the project's taxonomy, the same tuple as blind3's), or
None where none fits. ``source`` is a public bug report or fix where the mistake really happened (a GitHub
issue or pull request), "cf. ..." where a public report shows the same mistake in a neighbouring kernel, or
"pattern: ..." for a mistake common in hand-written kernels.

``CAUGHT_BY[name] = (case id, array)``: a small golden case of the bug's op on which the bug makes refnorm's check
fail, and one array among the failing ones there (the correct kernel passes that case).

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic, docs/verdicts.md's labelling rule and public bug reports
only, by an author who did not read refnorm's diagnosis nor its planted-pitfall catalogue, and who never ran
the diagnosis on these bugs. None of its bugs repeats one of tests/planted/blind.py, blind2.py, ...,
blind35.py (the same mistake on the same op; the thirty-seventh set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, eps_value as _eps, gate_group_size, gated_dx_dz, gated_grads, gated_inputs,
                          kept, norm_outputs, norm_quant_returned, normalized_rows, np_dtype, poly_combine,
                          poly_grads, poly_inputs, quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine,
                          row_weight_bias, rsum as _rsum, scale_floor, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind36Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
SHAPE0 = ("cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm backward taking its row count from input.shape[0], "
          "a 2-D input assumed)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_weight_outside_projection": (
        "layer_norm", "backward",
        "with a weight: dx = weight * rstd * (dy - mean(dy) - x_hat mean(dy * x_hat)) (the unweighted dx of the "
        "normalization multiplied by the weight afterwards, as if the weight were a scalar) where g = dy * weight "
        "belongs inside both row sums; the forward, dweight and dbias right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (a norm's input gradient applying the weight at the wrong place "
        "in the projection term)"),
    "ln_bwd_g_from_bias_ptr": (
        "layer_norm", "layout",
        "with a weight and a bias: the backward kernel's weight argument given the bias tensor, so dx is formed from "
        "g = dy * bias; the forward (y, mean, rstd), dweight = sum(dy * x_hat) and dbias right",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where another's was "
        "meant)"),
    "ln_y_tail_tile_unwritten": (
        "layer_norm", "block",
        "N > 64, not a multiple of 64: the normalization pass stores y in whole 64-wide tiles only (its loop bound "
        "N // 64), the last N mod 64 columns of y left 0; mean, rstd (from the masked statistics pass) and the "
        "gradients right",
        "cf. " + GH + "tile-ai/tilelang-ascend/issues/890 (an RMSNorm whose tail block was not handled for N not a "
        "multiple of the tile)"),
    "ln_stats_over_trailing_axes_of_sample": (
        "layer_norm", "reduction",
        "inputs of three or more axes: the kernel views x as (x.shape[0], -1), so the mean and variance are taken "
        "over every row of a sample at once (all of its trailing axes) and shared by that sample's rows: mean, "
        "rstd, y, and the backward of that normalization (dx centred over the sample, dweight from it)",
        SHAPE0),
    "ln_row_index_16bit_wraps": (
        "layer_norm", "layout",
        "more than 65536 rows: the load offset computed from a 16-bit row index (the store's from the 32-bit "
        "program id), so row r is computed from x[r mod 65536]: y, mean and rstd of the rows from 65536 on are row "
        "r - 65536's, and the backward uses those saved statistics with the right x",
        "cf. " + GH + "ggml-org/llama.cpp/pull/25103 (a norm-adjacent kernel's row index limited to 16 bits, rows "
        "past 65535 mishandled)"),
    "ln_bwd_rstd_recomputed_eps_squared": (
        "layer_norm", "eps",
        "the backward recomputes rstd from the saved variance as 1 / sqrt(var + eps^2) (its epsilon argument taken "
        "as a standard-deviation epsilon and squared) and x_hat from it: dx and dweight; the forward (y, mean, "
        "rstd) and dbias right",
        "pattern: the backward kernel's eps convention differing from the forward's"),
    "ln_bwd_mean_term_over_n_minus_1": (
        "layer_norm", "bessel",
        "N > 1: dx = rstd * (g - sum(g) / (N - 1) - x_hat mean(g * x_hat)): the mean(g) term's row sum divided by "
        "N - 1 (the count variable of an unbiased-variance helper), the projection term divided by N; the forward, "
        "dweight and dbias right",
        "pattern: a count constant of an unbiased estimate reused in one term of the backward"),
    "ln_k2_dparams_stored_fortran": (
        "layer_norm", "layout",
        "normalized_shape of two or more axes, with a weight or a bias: dweight and dbias reduced right over the "
        "flat N columns but written back in column-major (Fortran) order of normalized_shape (flat column j stored "
        "at the position whose column-major index is j); the forward and dx right",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (LayerNorm's dgamma for a multi-dimensional normalized_shape "
        "laid out and shaped wrong)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_dweight_from_dx_in_dy_buffer": (
        "rms_norm", "backward",
        "with a weight: the backward kernel writes dx in place into dy's buffer and dweight is reduced from that "
        "buffer afterwards: dweight = sum over rows of dx * x_hat where dy * x_hat belongs; dx and the forward "
        "right",
        GH + "unslothai/unsloth/pull/4550 (fast_rms_layernorm's dX aliasing dY, the weight-gradient logic reading "
        "the overwritten buffer)"),
    "rms_bwd_dot_over_row_block": (
        "rms_norm", "block",
        "the backward's programs take 4 rows each and reduce g * x_hat over the whole (4, N) tile (tl.sum without "
        "axis=1): every row of a block uses the block's summed dot, divided by N, in its projection term: dx; the "
        "forward and dweight right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward with BLOCK_ROW_SIZE > 1 reducing over the whole "
        "2-D block)"),
    "rms_vec_row_start_aligned_down": (
        "rms_norm", "layout",
        "N not a multiple of 4: the vectorized forward assumes aligned rows and starts row r's 4-wide loads at the "
        "aligned offset 4 * floor(r N / 4), so row r reads the N values from there (the previous row's tail "
        "included): rstd and y of every misaligned row; the backward reads x right with that saved rstd",
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorized RMSNorm corrupting row-boundary elements for hidden "
        "sizes not a multiple of its vector width)"),
    "rms_f64_weight_loaded_as_float": (
        "rms_norm", "precision",
        "float64 inputs with a weight: the weight loaded through a float32 pointer (rounded to nearest float32) "
        "before the offset and the multiply, forward and the backward's g = dy * weight; rstd and dweight right",
        "pattern: a parameter pointer declared float in a kernel templated on the activation type"),
    "rms_rstd_from_centred_variance": (
        "rms_norm", "semantics",
        "eps inside: rstd taken from the layer-norm statistics helper, 1 / sqrt(mean((x - mean(x))^2) + eps) (the "
        "centred variance), while x is not centred: y = x * rstd * weight, the returned rstd, and the rms backward "
        "formula on that rstd",
        "pattern: a shared statistics helper returning the centred variance reused by the uncentred norm"),
    "rms_outside_eps_squared_into_root": (
        "rms_norm", "eps",
        "eps_placement='outside': the kernel moves the epsilon inside the root as its square, rstd = 1 / sqrt(mean("
        "x^2) + eps^2) where 1 / (rms + eps) belongs: rstd, y and the backward (the inside formula on that rstd)",
        "pattern: an outside epsilon converted to an inside one by squaring it"),
    "rms_rstd_store_without_row_offset": (
        "rms_norm", "layout",
        "more than one row: every row stores its rstd at slot 0 of the buffer (the row offset left out of the "
        "store), so slot 0 holds the last row's rstd and the other slots stay 0: the returned rstd, and the "
        "backward's x_hat, dx and dweight from that buffer; y right",
        "pattern: a per-row store pointer missing its row term"),
    # ------------------------------------------------------------------ add_norm
    "an_dx_dresidual_swapped": (
        "add_norm", None,
        "with a residual: the backward's gradients of x and of the residual returned in each other's place (the "
        "output tuple in the wrong order): dx = ds and dresidual = ds * c, which differ wherever dropout or a "
        "rowscale makes c other than 1; the forward and the parameter gradients right",
        "pattern: a fused backward's output tuple unpacked in the wrong order"),
    "an_ln_chunk_var_merged_without_spread": (
        "add_norm", "one_pass",
        "norm='layer_norm', N > 64: the variance of the sum s from column chunks of 64, each chunk's sum of squared "
        "deviations about its own mean added without the spread of the chunk means about the row mean (the mean "
        "right): rstd, y, y1 and the backward's formula on that rstd; residual_out right",
        "pattern: partial variances merged without Chan's delta^2 n_a n_b / n term"),
    "an_ln_mean_of_branch_without_residual": (
        "add_norm", "layout",
        "norm='layer_norm' with a residual: the mean pass reads the dropped branch x * c (+ x1 * c1) before the "
        "residual is added (the residual loaded only in the variance loop), so the mean is the branch's while s is "
        "centred by it: var = mean((s - mean_b)^2), y, y1, and the backward on those statistics; residual_out right",
        "pattern: two passes over a fused sum reading different buffers"),
    "an_dparams_column_grid_floor": (
        "add_norm", "block",
        "N > 64, not a multiple of 64: the parameter gradients (dweight, dbias, dweight1, dbias1) reduced by a "
        "column-parallel kernel on N // 64 programs of 64 columns (floor, not cdiv): their last N mod 64 entries "
        "left 0; dx, dresidual and the forward right",
        "cf. " + GH + "BobMcDear/attorch/issues/18 (a norm's weight-gradient partial buffer sized by floor division "
        "while the grid is a ceiling)"),
    "an_residual_loaded_as_bf16": (
        "add_norm", "precision",
        "inputs other than bfloat16 with a residual: the residual read through a bfloat16 pointer (the residual "
        "stream's type of a bfloat16 model, rounded to nearest) before the add: s, residual_out, y, y1 and the "
        "backward through that sum",
        "cf. " + GH + "vllm-project/vllm-omni/pull/6878 (a fused residual + norm kernel reading the residual in "
        "another precision than the unfused path)"),
    "an_dweight1_from_dweight_accumulator": (
        "add_norm", "backward",
        "with the parallel branch's weight1 and y1's cotangent: dweight1 stored from the dweight accumulator, "
        "sum(dy * x_hat) where sum(dy1 * x_hat) belongs; dbias1, dx, dresidual and the forward right",
        "pattern: two column accumulators mixed up at the store"),
    "an_eps_slot_given_dropout_p": (
        "add_norm", "eps",
        "the launch wrapper passes its positional arguments shifted, the eps slot receiving dropout_p: rstd = 1 / "
        "sqrt(var + p) (0 without dropout), y, y1 and the backward's formula on that rstd",
        "pattern: a fused kernel's scalar arguments passed positionally in the wrong order"),
    # ------------------------------------------------------------------ norm_quant
    "nq_default_floor_float32_eps": (
        "norm_quant", "quant_scale",
        "dynamic scale, min_scale not given: the scale's default floor taken as finfo(float32).eps (1.19e-7) for "
        "every quantized dtype instead of 1 / (qmax * 512): the scale of rows whose amax / qmax falls below the "
        "default floor (zero or tiny rows), and q from it",
        "cf. " + GH + "vllm-project/vllm/pull/32201 (a quantizer's scale clamp constant taken from another "
        "convention than its range)"),
    "nq_static_scale_read_from_weight_ptr": (
        "norm_quant", "layout",
        "a static_scale given, with a weight: the scale loaded through the weight's pointer, scale = weight[0]: q = "
        "y / weight[0] and that scale returned; amax right",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where another's was "
        "meant)"),
    "nq_amax_output_signed": (
        "norm_quant", None,
        "the row's amax output written as the signed value of the element of largest magnitude (the argmax of |y| "
        "reloaded without its abs): negative for rows whose extreme value is negative; the scale and q (from |y|) "
        "right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/534 (an amax recorded as the signed max where the absolute max "
        "belongs)"),
    "nq_amax_as_xhat_amax_times_weight_amax": (
        "norm_quant", "quant_scale",
        "with a weight: the row's amax computed before the affine as max|x_hat| * max|weight| (+ max|bias|), a "
        "cheap upper bound of max|y|: the amax returned, the dynamic scale from it and q = y / that scale",
        "pattern: an amax bound computed from the factors' maxima instead of the product's"),
    "nq_ln_mean_held_in_bf16": (
        "norm_quant", "precision",
        "norm='layer_norm': the row mean held in a bfloat16 register (rounded to nearest) for every input dtype, "
        "the variance, x_hat and y centred by that rounded mean: y, amax, the dynamic scale and q (grossly wrong "
        "for rows with a large mean)",
        "pattern: a statistic's register declared with the 16-bit storage type"),
    "nq_rms_stats_of_weighted_x": (
        "norm_quant", "affine",
        "norm='rms_norm' with a weight: the weight multiplied into x before the statistics, rstd = 1 / sqrt(mean((x "
        "* weight)^2) + eps) and y = x * weight * rstd, then amax, the scale and q from that y",
        "pattern: the weight folded into the input of a fused norm + quant kernel"),
    "nq_int8_clipped_at_e4m3_max": (
        "norm_quant", "saturation",
        "int8: y / scale clipped to [-448, 448] (the float8 path's bound shared by both branches) before the round "
        "and the int8 store, which wraps: quotients beyond [-128, 127] (a scale capped by scale_ub) land on "
        "wrapped codes; scale and amax right",
        "cf. " + GH + "vllm-project/vllm/pull/32201 (a quantizer's clamp bounds inconsistent with the range its "
        "scale was computed for)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dbias_gated_when_norm_after": (
        "gated_norm", "gate",
        "norm_before_gate=False, with a bias: dbias = sum over rows of dy * silu(z) (the norm-before-gate branch's "
        "dn reused) where dy belongs; dweight, dx, dz and the forward right",
        "pattern: a backward's branch variable computed for one setting of the gate order used for both"),
    "gated_sigmoid_via_tanh_half_dropped": (
        "gated_norm", "gate",
        "the gate's sigmoid evaluated through tanh as 0.5 (1 + tanh(z)) where 0.5 (1 + tanh(z / 2)) belongs: the "
        "gate is z sigmoid(2 z), y (either side of the norm) and the backward of that function",
        "cf. " + GH + "rushter/MLAlgorithms/pull/50 (the tanh / sigmoid identity's factor 2 wrong in a sigmoid); "
        "cf. " + GH + "1bit-MONSTER/1bit-MONSTER/issues/1350 (a SiLU's tanh-based sigmoid wrong)"),
    "gated_z_loaded_as_bf16": (
        "gated_norm", "precision",
        "inputs other than bfloat16: the gate z read through a bfloat16 pointer (rounded to nearest bfloat16) "
        "before silu(z), forward and backward (dz evaluated at the rounded z)",
        "pattern: the gate tensor's pointer declared with the model's 16-bit type"),
    "gated_dparams_rows_from_one": (
        "gated_norm", "reduction",
        "dweight and dbias: the column kernel's loop over the rows starts at row 1, row 0's dn * v_hat and dn never "
        "added; dx, dz and the forward right",
        "pattern: a reduction loop written range(1, M) after its accumulator was meant to take row 0"),
    "gated_eps_added_to_rstd": (
        "gated_norm", "eps",
        "each group's rstd = 1 / sqrt(var) + eps (or 1 / sqrt(mean(v^2)) + eps): eps added after the reciprocal "
        "square root instead of under it: y and the backward's formula on that rstd",
        "pattern: eps added to the result of rsqrt instead of to its argument"),
    "gated_bwd_stats_of_next_group": (
        "gated_norm", "layout",
        "group_size < H: the backward loads each group's saved mean and rstd one slot late (the statistics pointer "
        "advanced before the load): group k's v_hat, dx, dz and dweight from group k + 1's statistics (the last "
        "group of the tensor its own); the forward and dbias right",
        "pattern: a statistics pointer advanced before its load"),
    # ------------------------------------------------------------------ dyt
    "dyt_dx_stored_column_major": (
        "dyt", "layout",
        "more than one row: dx stored column-major (element (r, j) at the flat index j * rows + r, the layout of a "
        "transposed gradient assumed) while x is row-major: dx scrambled; dalpha, dweight, dbias and the forward "
        "right",
        "pattern: an output's strides taken from a transposed view"),
    "dyt_dparams_last_sample_only": (
        "dyt", "reduction",
        "inputs of three or more axes: dweight and dbias written per sample (a store instead of an accumulate): "
        "the last sample's rows only; dx, dalpha and the forward right",
        SHAPE0),
    "dyt_dalpha_weight_applied_twice": (
        "dyt", "backward",
        "with a weight: dalpha = sum(g * weight * sech^2(alpha x) * x) with g = dy * weight already weighted (the "
        "weight multiplied in again in alpha's reduction only); dx, dweight, dbias and the forward right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (a norm backward multiplying one term by the weight twice)"),
    "dyt_noweight_dbias_from_weight_branch": (
        "dyt", "backward",
        "a bias without a weight: the backward's has-weight flag read from the bias's presence, so dbias is "
        "reduced by the weight branch's product, sum(dy * tanh(alpha x)), where sum(dy) belongs; dx, dalpha and "
        "the forward right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/77274 (a norm backward's condition for computing a parameter's "
        "gradient wrong)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_bwd_proj_sums_in_half": (
        "poly_norm", "precision",
        "16-bit inputs: the backward's row sums of g_p * h_p (each power's projection mean(g_p h_p)) accumulated "
        "left to right in the input dtype: dx; the forward, dweight and dbias right",
        "cf. " + GH + "NVIDIA/apex/issues/1652 (a fused norm's gradients losing precision in a 16-bit accumulation)"),
    "poly_persistent_loop_drops_last_row": (
        "poly_norm", "block",
        "more than one row: the persistent kernel's row loop written range(pid, rows - 1, programs) (off by one): "
        "the last row never processed, forward and backward: its y and dx left 0 and its terms missing from "
        "dweight and dbias",
        "cf. " + GH + "BobMcDear/attorch/issues/18 (a norm kernel's last block of rows dropped by a grid and a "
        "buffer that disagree)"),
    "poly_dparams_rows_of_first_axis": (
        "poly_norm", "reduction",
        "inputs of three or more axes: the weight's and the bias's gradients reduced over the first x.shape[0] rows "
        "of the flattened input only (the row count taken from x.shape[0]); dx and the forward right",
        SHAPE0),
    "poly_eps_added_after_rsqrt": (
        "poly_norm", "eps",
        "each power's rstd = 1 / rms(x^p) + eps (eps added to the reciprocal root) instead of 1 / sqrt(mean(x^(2p)) "
        "+ eps): y and the backward from those r_p",
        "pattern: eps added to the result of rsqrt instead of to its argument"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _seq_sum(a, d):
    """Row sums (rows, 1) of ``a`` accumulated left to right in the 16-bit dtype ``d`` (each term and partial
    rounded), returned in ``a``'s dtype."""
    dt = np_dtype(d)
    s = np.zeros(a.shape[0], dt)
    for j in range(a.shape[1]):
        s = (s.astype(np.float32) + a[:, j].astype(dt).astype(np.float32)).astype(dt)
    return s.astype(a.dtype).reshape(-1, 1)


def _int8_wrapped(v):
    """int8 codes of rint(v) stored with two's-complement wrap-around."""
    r = np.rint(np.nan_to_num(v, nan=0.0)).astype(np.int64)
    return (((r + 128) % 256) - 128).astype(np.int8)


class Blind36Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind36"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln36(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln36(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        inv = acc(1) / acc(N)
        xs = x
        if b == "ln_row_index_16bit_wraps" and R > 65536:
            xs = x[np.arange(R) % 65536]                     # the 16-bit row index of the load
        S = x0.shape[0] if x0.ndim else 1
        sample = b == "ln_stats_over_trailing_axes_of_sample" and x0.ndim - len(ns) >= 2 and S and R % S == 0
        if sample:
            xv = xs.reshape(S, -1)                           # x viewed as (x.shape[0], -1)
            n = acc(xv.shape[1])
            ms = _rsum(xv) / n
            vs = _rsum((xv - ms) ** 2) / n
            mean = np.repeat(ms, R // S, axis=0)
            var = np.repeat(vs, R // S, axis=0)
        else:
            mean = _rsum(xs) * inv
            dv = xs - mean
            var = _rsum(dv * dv) * inv
        rstd = 1 / np.sqrt(var + eps)
        xhat = (xs - mean) * rstd
        y = np.array(affine(xhat, w, bias), copy=True)
        if b == "ln_y_tail_tile_unwritten" and N > 64 and N % 64:
            y[:, (N // 64) * 64:] = 0                        # the store loop over whole tiles only
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        rb = rstd
        if b == "ln_bwd_rstd_recomputed_eps_squared":
            rb = 1 / np.sqrt(var + eps * eps)
        xb = (x - mean) * rb                                 # the backward's x_hat from the saved statistics
        if b == "ln_bwd_g_from_bias_ptr" and w is not None and bias is not None:
            g = dy * bias                                    # the weight slot given the bias
        if sample:
            P = (R // S) * N
            dx = _centred_dx(g.reshape(S, P), xb.reshape(S, P), rb.reshape(S, -1)[:, :1]).reshape(R, N)
        elif b == "ln_bwd_weight_outside_projection" and w is not None:
            dx = w * _centred_dx(dy, xb, rb)
        elif b == "ln_bwd_mean_term_over_n_minus_1" and N > 1:
            dx = rb * (g - _rsum(g) / acc(N - 1) - xb * (_rsum(g * xb) / N))
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        fortran = b == "ln_k2_dparams_stored_fortran" and len(ns) >= 2
        if call.inputs.get("weight") is not None:
            dw = (dy * xb).sum(axis=0)
            grads["weight"] = _store(np.reshape(dw, ns, order="F") if fortran else dw.reshape(ns), d)
        if bias is not None:
            db = dy.sum(axis=0)
            grads["bias"] = _store(np.reshape(db, ns, order="F") if fortran else db.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms36(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms36(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        placement = cfg.get("eps_placement", "inside") or "inside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None
        if w0 is not None:
            wl = w0.astype(np.float32) if b == "rms_f64_weight_loaded_as_float" and d == "float64" else w0
            w = wl.astype(acc).reshape(1, N) + off
        eps = _eps(cfg["eps"], acc)
        xs = x
        if b == "rms_vec_row_start_aligned_down" and N % 4:
            starts = (np.arange(R) * N // 4) * 4             # the aligned start assumed for every row
            xs = x.reshape(-1)[starts[:, None] + np.arange(N)]
        ms = _rsum(xs * xs) / N
        rms = np.sqrt(ms)
        if b == "rms_rstd_from_centred_variance" and placement != "outside":
            mc = _rsum(xs) / N
            rstd = 1 / np.sqrt(_rsum((xs - mc) ** 2) / N + eps)
        elif b == "rms_outside_eps_squared_into_root" and placement == "outside":
            rstd = 1 / np.sqrt(ms + eps * eps)
            placement = "inside"
        elif placement == "outside":
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        xhat = xs * rstd
        y = xhat if w is None else xhat * w
        rs = rstd
        if b == "rms_rstd_store_without_row_offset" and R > 1:
            rs = np.zeros_like(rstd)
            rs[0] = rstd[-1]                                 # every row's store at slot 0, the last one wins
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        xb = x * rs                                          # the backward reloads x and the saved rstd
        if b == "rms_bwd_dot_over_row_block":
            dot = _rsum(g * xb)
            blk = np.arange(R) // 4
            tile = np.array([dot[blk == k].sum() for k in range(blk[-1] + 1)], dtype=dot.dtype)
            dx = rs * (g - xb * (tile[blk].reshape(R, 1) / N)) if placement != "outside" else \
                rms_norm_dx(g, x, xb, rs, rms, placement)
        else:
            dx = rms_norm_dx(g, x, xb, rs, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            src = dx if b == "rms_dweight_from_dx_in_dy_buffer" else dy
            grads["weight"] = _store((src * xb).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an36(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an36(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        res_in = res
        if b == "an_residual_loaded_as_bf16" and res is not None and d != "bfloat16":
            res_in = _store(res, "bfloat16").astype(acc)     # the residual's bfloat16 pointer
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res_in, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = acc(p) if b == "an_eps_slot_given_dropout_p" else _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            if b == "an_ln_mean_of_branch_without_residual" and res is not None:
                mean = _rsum(s - res_in) / N                 # the branch before the residual add
            else:
                mean = _rsum(s) / N
            dev = s - mean
        else:
            mean = acc(0)
            dev = s
        if b == "an_ln_chunk_var_merged_without_spread" and centred and N > 64:
            var = 0
            for j in range(0, N, 64):                        # each chunk about its own mean
                t = s[:, j:j + 64]
                var = var + _rsum((t - _rsum(t) / acc(t.shape[1])) ** 2)
            var = var / N
        else:
            var = _rsum(dev * dev) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = self._an36_dnorm(dy, we, xhat, rstd, centred)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + self._an36_dnorm(dy1, we1, xhat, rstd, centred)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        dres = None if res is None else ds
        grads = add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xhat, params, x, mask, keep, p, ns, d)
        if b == "an_dx_dresidual_swapped" and "residual" in grads:
            grads["x"], grads["residual"] = grads["residual"], grads["x"]
        if b == "an_dparams_column_grid_floor" and N > 64 and N % 64:
            cut = (N // 64) * 64                             # N // 64 column programs
            for k in ("weight", "bias", "weight1", "bias1"):
                if k in grads:
                    flat = grads[k].reshape(-1).copy()
                    flat[cut:] = 0
                    grads[k] = flat.reshape(grads[k].shape)
        if b == "an_dweight1_from_dweight_accumulator" and "weight1" in grads and "weight" in grads:
            grads["weight1"] = grads["weight"].copy()
        return Returned(out, grads)

    @staticmethod
    def _an36_dnorm(dy, wgt, xhat, rstd, centred):
        """add_norm's normalization backward of one branch (g = dy * wgt)."""
        g = dy if wgt is None else dy * wgt
        n = g.shape[1]
        proj = xhat * (_rsum(g * xhat) / n)
        if not centred:
            return rstd * (g - proj)
        return rstd * (g - _rsum(g) / n - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq36(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq36(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            if b == "nq_ln_mean_held_in_bf16":
                mean = _store(mean, "bfloat16").astype(acc)
            rstd = 1 / np.sqrt(_rsum((x - mean) ** 2) / N + eps)
            xhat = (x - mean) * rstd
            y = row_affine(xhat, w, bias, acc)
        elif b == "nq_rms_stats_of_weighted_x" and w is not None:
            xw = x * w.astype(acc).reshape(1, N)             # the weight folded in before the statistics
            xhat = xw * (1 / np.sqrt(_rsum(xw * xw) / N + eps))
            y = row_affine(xhat, None, bias, acc)
        else:
            xhat = x * (1 / np.sqrt(_rsum(x * x) / N + eps))
            y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        if b == "nq_amax_as_xhat_amax_times_weight_amax" and w is not None:
            amax = np.max(np.abs(xhat), axis=1, keepdims=True, initial=0.0) * acc(np.max(np.abs(w.astype(acc))))
            if bias is not None:
                amax = amax + acc(np.max(np.abs(bias.astype(acc))))
        static = inp.get("static_scale")
        if static is not None and b == "nq_static_scale_read_from_weight_ptr" and w is not None:
            scale = np.full(amax.shape, acc(w.astype(acc).reshape(-1)[0]))
        elif static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            if b == "nq_default_floor_float32_eps" and cfg["min_scale"] is None:
                scale = np.maximum(scale, acc(np.finfo(np.float32).eps))
            else:
                scale = scale_floor(scale, cfg, hi, acc)
        int8 = qdt.kind == "i"
        clip = b == "nq_int8_clipped_at_e4m3_max" and int8
        v = quant_quotients(y, scale, -448.0 if clip else lo, 448.0 if clip else hi, acc)
        if clip:
            q = _int8_wrapped(v)
        else:
            q = quantize(v, qdt)
        if b == "nq_amax_output_signed":
            j = np.argmax(np.abs(y), axis=1)
            amax = y[np.arange(y.shape[0]), j].reshape(-1, 1)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated36(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated36(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        if b == "gated_z_loaded_as_bf16" and d != "bfloat16":
            z = _store(z, "bfloat16").astype(acc)
        K = gate_group_size(cfg, H)
        if b == "gated_sigmoid_via_tanh_half_dropped":
            th = np.tanh(z)
            sig = acc(0.5) * (1 + th)                        # 0.5 (1 + tanh(z)) for sigmoid(z)
            s, ds = z * sig, sig + z * acc(0.5) * (1 - th * th)
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            ss = _rsum((vg - mean) ** 2)
        else:
            mean = np.zeros((vg.shape[0], 1), acc)
            ss = _rsum(vg * vg)
        if b == "gated_eps_added_to_rstd":
            rstd = 1 / np.sqrt(ss / K) + eps
        else:
            rstd = 1 / np.sqrt(ss / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        vv, rb = vhat.reshape(-1, K), rstd
        if b == "gated_bwd_stats_of_next_group" and K < H:
            mb = np.concatenate([mean[1:], mean[-1:]], axis=0)   # the statistics pointer one group late
            rb = np.concatenate([rstd[1:], rstd[-1:]], axis=0)
            vv = (vg - mb) * rb
        g = (dn * w).reshape(-1, K)
        proj = vv * (_rsum(g * vv) / K)
        if norm == "layer_norm":
            dv = rb * (g - _rsum(g) / K - proj)
        else:
            dv = rb * (g - proj)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        db_from = None
        if bias is not None:
            db_from = dy * s if b == "gated_dbias_gated_when_norm_after" and not nbg else dn
        dw_from = dn
        if b == "gated_dparams_rows_from_one" and R > 1:
            dw_from = dn.copy()
            dw_from[0] = 0                                   # range(1, M)
            if db_from is not None:
                db_from = db_from.copy()
                db_from[0] = 0
        grads = gated_grads(dx, dz, dw_from, db_from, vv.reshape(R, H), x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt36(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt36(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        R, C = x.shape
        y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(a * x)
        gd = g * (r * r)
        dx = gd * a
        if b == "dyt_dalpha_weight_applied_twice" and w is not None:
            da = _rsum(gd * w * x).sum()                     # the weight applied again to g
        else:
            da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dx_stored_column_major" and R > 1:
            grads["x"] = _store(dx.reshape(-1).reshape(C, R).T.reshape(x0.shape), d)
        if b == "dyt_dparams_last_sample_only" and x0.ndim >= 3 and x0.shape[0] and R % x0.shape[0] == 0:
            P = R // x0.shape[0]                             # each sample's store overwrites the last
            if w is not None:
                grads["weight"] = _store((dy * t)[-P:].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[-P:].sum(axis=0), d)
        if b == "dyt_noweight_dbias_from_weight_branch" and w is None and bias is not None:
            grads["bias"] = _store((dy * t).sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly36(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly36(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        us = [x ** 3, x ** 2, x]
        rs = []
        for u in us:
            sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = sc * np.sqrt(_rsum((u / sc) ** 2) / H)
            if b == "poly_eps_added_after_rsqrt":
                rs.append(1 / rms + eps)
            else:
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = np.array(poly_combine(wt, hs, bias, acc), copy=True)
        drop = b == "poly_persistent_loop_drops_last_row" and R > 1
        if drop:
            y[-1] = 0                                        # range(pid, rows - 1, programs)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        if drop:
            dy = dy.copy()
            dy[-1] = 0
        def du_half(g, h, r):                                # the projection's row sums in the input dtype
            return r * (g - h * (_seq_sum(g * h, d) / g.shape[1]))
        du = du_half if b == "poly_bwd_proj_sums_in_half" and d in HALF else rms_dx
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_dparams_rows_of_first_axis" and x0.ndim >= 3:
            M = x0.shape[0]                                  # the row count taken from x.shape[0]
            grads["weight"] = _store(np.array([_rsum(dy[:M] * h[:M]).sum() for h in hs], dtype=acc), d)
            if bias is not None:
                grads["bias"] = _store(np.reshape(_rsum(dy[:M]).sum(), np.shape(bias)), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_bwd_weight_outside_projection": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_g_from_bias_ptr": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_y_tail_tile_unwritten": ("layer_norm/normal_f32_6x100", "output.y"),
    "ln_stats_over_trailing_axes_of_sample": ("layer_norm/normal_bf16_2x3x7", "output.mean"),
    "ln_row_index_16bit_wraps": ("layer_norm/normal_f16_65537x2", "output.y"),
    "ln_bwd_rstd_recomputed_eps_squared": ("layer_norm/normal_eps0.3_f32_9x7", "grad.x"),
    "ln_bwd_mean_term_over_n_minus_1": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_k2_dparams_stored_fortran": ("layer_norm/normal_k2_f32_2x3x5x6", "grad.weight"),
    "rms_dweight_from_dx_in_dy_buffer": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_bwd_dot_over_row_block": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_vec_row_start_aligned_down": ("rms_norm/normal_eps1e-05_f64_9x7", "output.y"),
    "rms_f64_weight_loaded_as_float": ("rms_norm/normal_eps1e-05_f64_9x7", "output.y"),
    "rms_rstd_from_centred_variance": ("rms_norm/mean1e3_eps1e-05_f32_6x100", "output.rstd"),
    "rms_outside_eps_squared_into_root": ("rms_norm/normal_eps0.3_outside_bf16_6x100", "output.rstd"),
    "rms_rstd_store_without_row_offset": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "an_dx_dresidual_swapped": ("add_norm/normal_p_rs_f64_9x7", "grad.x"),
    "an_ln_chunk_var_merged_without_spread": ("add_norm/normal_f32_6x100", "output.y"),
    "an_ln_mean_of_branch_without_residual": ("add_norm/normal_f32_6x100", "output.y"),
    "an_dparams_column_grid_floor": ("add_norm/normal_f32_6x100", "grad.weight"),
    "an_residual_loaded_as_bf16": ("add_norm/mean1e3_fp32res_xnormal_f16_6x100", "output.residual_out"),
    "an_dweight1_from_dweight_accumulator": ("add_norm/normal_par_f64_5x12", "grad.weight1"),
    "an_eps_slot_given_dropout_p": ("add_norm/normal_p_rs_f64_9x7", "output.y"),
    "nq_default_floor_float32_eps": ("norm_quant/zero_rms_i8_dyn_bf16_2x64", "output.scale"),
    "nq_static_scale_read_from_weight_ptr": ("norm_quant/normal_rms_e4m3_static_bf16_8x256", "output.scale"),
    "nq_amax_output_signed": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_amax_as_xhat_amax_times_weight_amax": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_ln_mean_held_in_bf16": ("norm_quant/mean1e3_ln_i8_dyn_f16_8x256", "output.amax"),
    "nq_rms_stats_of_weighted_x": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_int8_clipped_at_e4m3_max": ("norm_quant/outlier_ln_i8_dyn_ub8_wb_f16_8x256", "output.q"),
    "gated_dbias_gated_when_norm_after": ("gated_norm/normal_f32_4x64", "grad.bias"),
    "gated_sigmoid_via_tanh_half_dropped": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_z_loaded_as_bf16": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_dparams_rows_from_one": ("gated_norm/normal_f32_4x64", "grad.weight"),
    "gated_eps_added_to_rstd": ("gated_norm/normal_eps0.3_gs8_bf16_3x40", "output.y"),
    "gated_bwd_stats_of_next_group": ("gated_norm/normal_gs32_f32_8x96", "grad.x"),
    "dyt_dx_stored_column_major": ("dyt/normal_f64_2x5x7", "grad.x"),
    "dyt_dparams_last_sample_only": ("dyt/normal_f32_3x20x12", "grad.weight"),
    "dyt_dalpha_weight_applied_twice": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_noweight_dbias_from_weight_branch": ("dyt/normal_noweight_f32_1x10x24", "grad.bias"),
    "poly_bwd_proj_sums_in_half": ("poly_norm/normal_bf16_64x256", "grad.x"),
    "poly_persistent_loop_drops_last_row": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_dparams_rows_of_first_axis": ("poly_norm/normal_f32_2x3x40", "grad.weight"),
    "poly_eps_added_after_rsqrt": ("poly_norm/normal_eps0.3_f32_6x30", "output.y"),
}
