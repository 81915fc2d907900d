"""A thirty-eighth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind38Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln38``, ``_rms38``, ``_an38``, ``_nq38``, ``_gated38``, ``_dyt38``,
``_poly38``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind38Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind37.py (the same mistake on the same op; the thirty-ninth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, eps_value as _eps, gate_group_size, gated_dx_dz, gated_grads, gated_inputs,
                          kept, norm_outputs, norm_quant_returned, normalized_rows, poly_combine, poly_grads,
                          poly_inputs, quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine,
                          row_weight_bias, rowscale_grad, rsum as _rsum, scale_floor, silu_gate, stat_shape,
                          static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind38Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
APEX_HALF = ("cf. " + GH + "NVIDIA/apex/issues/1652 (a fused norm's gradients losing precision in a 16-bit "
             "accumulation)")
QUACK = ("cf. " + GH + "Dao-AILab/quack/pull/53 (an RMS prenorm backward adding residual_out's cotangent at the "
         "wrong point of the chain)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_xhat_from_y_bias_kept": (
        "layer_norm", "backward",
        "with a weight and a bias: the memory-efficient backward recomputes x_hat from the saved output as y / weight "
        "without subtracting the bias first, x_b = x_hat + bias / weight, and uses it for dx (its projection term) "
        "and dweight = sum(dy * x_b); the forward (y, mean, rstd) and dbias right",
        "cf. " + GH + "NVIDIA/apex/pull/1715 (a LayerNorm backward recomputing its input from the saved output y, "
        "which needs the bias handed to the backward kernel)"),
    "ln_bwd_dy_loaded_as_bf16": (
        "layer_norm", "precision",
        "inputs other than bfloat16: the backward reads dy through a bfloat16 pointer (the gradient type of a "
        "bfloat16 model), each cotangent rounded to nearest bfloat16 before g = dy * weight: dx, dweight and dbias "
        "from the rounded dy; the forward right",
        "cf. " + GH + "vllm-project/vllm-omni/pull/6878 (a fused norm kernel reading one of its inputs in another "
        "precision than the unfused path)"),
    "ln_row_split_halves_own_stats": (
        "layer_norm", "block",
        "N > 64: the row split between two programs of ceil(N / 2) and floor(N / 2) columns (a two-CTA cluster), "
        "whose exchange of the partial sums is missing: each half centred and scaled by its own half's mean and "
        "variance, the returned mean and rstd the first half's; the backward per half on those statistics (dx, "
        "dweight)",
        "pattern: a cluster-split row reduction whose cross-CTA exchange of the partial sums is left out"),
    "ln_dparams_even_rows_only": (
        "layer_norm", "reduction",
        "more than one row: the dweight/dbias column kernel's row loop unrolled by two with the second row's load "
        "dropped (for r in range(0, M, 2): acc += dy[r] * x_hat[r]): rows 1, 3, 5, ... never reach dweight and "
        "dbias; dx and the forward right",
        "cf. " + GH + "cupy/cupy/pull/874 (a reduction kernel's loop over the reduced axis striding by the wrong "
        "step)"),
    "ln_dweight_centred_sign_flipped": (
        "layer_norm", "constant",
        "with a weight: the dweight kernel recomputes x_hat as (mean - x) * rstd (the centring's operands in the "
        "wrong order): dweight = -sum(dy * x_hat), the whole array negated; dx, dbias and the forward right",
        "pattern: a subtraction's operands swapped in a recomputation used by one gradient only"),
    "ln_bwd_first_term_unweighted": (
        "layer_norm", "backward",
        "with a weight: dx = rstd * (dy - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight: the weight left "
        "out of dx's first term only (both row sums weighted); dweight, dbias and the forward right",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (a norm's input gradient applying the weight at the wrong place)"),
    "ln_bias_loaded_at_row_index": (
        "layer_norm", "layout",
        "with a bias: the epilogue loads the bias at the row index (bias + row, mod N) instead of the columns' "
        "(bias + cols): every value of row r shifted by bias[r mod N]; mean, rstd and the backward (dbias = "
        "sum(dy) from its own kernel) right",
        "pattern: a parameter pointer offset by the program id where the column offsets belong"),
    "ln_k3_rows_of_last_two_axes": (
        "layer_norm", "group",
        "normalized_shape of three or more axes: the row length computed by a loop over normalized_shape starting "
        "at index 1 (the product of the axes after the first), so the statistics are taken over each run of "
        "prod(normalized_shape[1:]) values: y, the backward over those runs (dx, dweight), the returned mean and "
        "rstd each row's last run's",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (LayerNorm with a multi-dimensional normalized_shape using part "
        "of its extent where the product belongs)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_renormalizes_saved_xhat": (
        "rms_norm", "backward",
        "eps inside: the checkpointed backward loads its saved activation, which is already x_hat, and applies the "
        "normalization to it again: rstd_b = 1 / sqrt(mean(x_hat^2) + eps), x_b = x_hat * rstd_b, dx = rstd_b * (g "
        "- x_b * mean(g * x_b)) and dweight = sum(dy * x_b); the forward right",
        "cf. " + GH + "state-spaces/mamba/issues/885 (a backward re-applying an RMSNorm to tensors saved after the "
        "norm)"),
    "rms_sumsq_even_lanes_only": (
        "rms_norm", "block",
        "N > 1: the sum of squares reduced over packed pairs (float2 / half2 loads) taking only each pair's low "
        "lane: the odd columns never enter mean(x^2) (still divided by N): rstd, y and the backward on that rstd",
        "pattern: a packed two-wide load whose high lane is never accumulated"),
    "rms_dweight_from_weighted_dy": (
        "rms_norm", "backward",
        "with a weight: dweight = sum over the rows of g * x_hat with g = dy * (weight + offset), the weighted "
        "gradient formed for dx reused; dx and the forward right",
        "cf. " + GH + "unslothai/unsloth/pull/4550 (an RMSNorm weight gradient reduced from the wrong tensor)"),
    "rms_prescaled_by_rsqrt_n_in_half": (
        "rms_norm", "precision",
        "16-bit inputs: to keep x^2 from overflowing, each x is multiplied by 1 / sqrt(N) held in the input dtype "
        "and the product rounded to it before the float32 sum of squares (not divided by N again): mean(x^2) off "
        "by the rounding of 1 / sqrt(N) and of each product: rstd, y and the backward on that rstd (a few 16-bit "
        "ulps)",
        "pattern: a 16-bit prescale to avoid overflow of the squares, rounded in the storage type"),
    "rms_dweight_rstd_at_column_index": (
        "rms_norm", "layout",
        "with a weight: the column-parallel dweight kernel (one thread per column j, looping over the rows) "
        "recomputes x_hat = x * rstd with rstd loaded at index j mod rows instead of the row's: dweight; dx and "
        "the forward right",
        "pattern: a statistics load indexed by the thread's column in a column-parallel reduction"),
    "rms_sumsq_tree_drops_odd_partial": (
        "rms_norm", "block",
        "the row's squares reduced by a pairwise tree in shared memory that halves the count each level and drops "
        "the unpaired last partial whenever the count is odd (N not a power of two), divided by N: rstd, y and "
        "the backward on that rstd",
        "cf. " + GH + "xlite-dev/LeetCUDA/issues/357 (a block reduction written for a power-of-two count, wrong "
        "otherwise)"),
    "rms_zero_row_rstd_guard": (
        "rms_norm", "eps",
        "rows with mean(x^2) == 0: a division-by-zero guard writes rstd = 0 (the eps never reached) instead of 1 / "
        "sqrt(eps) (1 / eps outside): the returned rstd, and dx = rstd * g = 0 on those rows; y (0) right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/55347 (an rms_norm path dropping epsilon for zero input)"),
    # ------------------------------------------------------------------ add_norm
    "an_f64_eps_through_float_arg": (
        "add_norm", "eps",
        "float64 inputs: eps handed to the kernel through a float (float32) argument, rounded to nearest float32 "
        "(1e-5 becomes 9.99999975e-06) before it is added to the float64 variance (mean(s^2) for the rms norm): "
        "rstd, y, y1 and the backward's formula on that rstd, off by a few float64 ulps",
        "cf. " + GH + "tensorflow/tensorflow/pull/58863 (a fused LayerNorm kernel's epsilon argument not carried "
        "through as configured)"),
    "an_ln_mean_in_input_dtype": (
        "add_norm", "precision",
        "norm='layer_norm', 16-bit inputs: the row mean of the sum s held in a register of the input dtype "
        "(rounded to nearest) and used to centre s for the variance and x_hat: y, y1 and the backward (grossly "
        "wrong for a residual stream with a large mean); residual_out right",
        "pattern: a statistic's register declared with the activation's 16-bit scalar type"),
    "an_stats_before_x1_added": (
        "add_norm", "layout",
        "norm='layer_norm' with the parallel input x1: the statistics pass reads x * c + residual only (x1's branch "
        "added in the normalization pass), so mean and variance are the sum's without x1 while the full s is "
        "centred and scaled by them: y, y1 and the backward on those statistics; residual_out right",
        "pattern: two passes over a fused sum reading different sets of buffers"),
    "an_prenorm_dx1_without_dres_out": (
        "add_norm", "backward",
        "prenorm with the parallel input x1 and residual_out's cotangent: dx1 = ds' * c1 with ds' the "
        "normalization's input gradient before residual_out's cotangent is added (x1's store placed before that "
        "add); dx, dresidual and the rest right",
        QUACK),
    "an_rowscale_after_residual_add": (
        "add_norm", "dropout",
        "with a rowscale: the row's scale applied to the whole sum, s = (x * mask / (1 - p) (+ x1 * c1) + residual) "
        "* rowscale, instead of to the dropped x alone: residual_out, y and the backward of that equation "
        "(dresidual = ds * rowscale, drowscale = sum(ds * (dropped x + residual)))",
        "pattern: a stochastic-depth row scale applied after the residual add it was meant to precede"),
    "an_dres_out_cotangent_from_dy_ptr": (
        "add_norm", "layout",
        "prenorm with residual_out's cotangent: the backward's dresidual_out argument given y's cotangent buffer, "
        "so ds = dnorm + dy instead of dnorm + d residual_out: dx, dresidual (dx1, drowscale); the forward and the "
        "parameter gradients right",
        QUACK),
    "an_drowscale_over_first_tile": (
        "add_norm", "block",
        "N > 64 with a rowscale: its gradient, the row sum of ds * x * mask / (1 - p), accumulated over the first "
        "64-column tile only (the tile loop's accumulation placed after the loop): drowscale; dx, dresidual and "
        "the forward right",
        "pattern: a row reduction over column tiles that keeps only one tile's partial"),
    # ------------------------------------------------------------------ norm_quant
    "nq_static_scale_applied_twice": (
        "norm_quant", "quant_scale",
        "a static_scale given: the wrapper divides y by the scale and the kernel divides the result again, q = "
        "clip(y / s^2); the returned scale s and amax right",
        "pattern: a scale applied both by the caller and by the fused kernel"),
    "nq_amax_as_row_range": (
        "norm_quant", "quant_scale",
        "dynamic scale: the row's amax taken as max(y) - min(y) (the range an asymmetric quantizer needs) instead "
        "of max |y|: the amax returned, the scale from it and q",
        "pattern: an asymmetric quantizer's range reduction reused for a symmetric scale"),
    "nq_weight_tail_tile_zero": (
        "norm_quant", "block",
        "N > 64, not a multiple of 64: the weight (and bias) loaded in whole 64-wide tiles only, the last N mod 64 "
        "columns' parameters read as 0: y there 0 (the bias alike), q there 0, amax and the scale over the rest",
        "cf. " + GH + "flashinfer-ai/flashinfer/pull/4480 (a fused add + RMSNorm + quant kernel whose loads are not "
        "predicated for hidden sizes off its tile width)"),
    "nq_int8_clip_half_beyond_range": (
        "norm_quant", "saturation",
        "int8: y / scale clipped to [-128.5, 127.5] (half a code beyond each end, so that rounding reaches the "
        "extreme codes) before rint: a quotient at or above 127.5 rounds (to even) to 128, which the int8 store "
        "wraps to -128; scale and amax right",
        "cf. " + GH + "uxlfoundation/oneDNN/pull/5879 (an int8 quantizer whose value rounding to 128 is written "
        "as -128)"),
    "nq_inv_n_in_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: 1 / N held in the input's scalar type (rounded to nearest) and multiplied into the row sums "
        "for the mean and the variance (the mean square for the rms norm): y, amax, the dynamic scale and q",
        "pattern: a reciprocal of the row length precomputed in the activation dtype"),
    "nq_q_stored_column_major": (
        "norm_quant", "layout",
        "more than one row: q written column-major (element (r, j) at the flat index j * rows + r, the transposed "
        "layout a GEMM operand wants) into the row-major (rows, N) buffer: q scrambled; scale and amax right",
        "pattern: an output's strides taken from a transposed consumer"),
    "nq_dyn_scale_amax_plus_eps": (
        "norm_quant", "quant_scale",
        "dynamic scale: scale = (amax + eps) / qmax with the norm's eps added to amax as a division guard, then "
        "scale_ub and min_scale: the scale (visible where amax is small, as for rows whose normalization is "
        "dominated by eps) and q; amax right",
        "cf. " + GH + "pytorch/FBGEMM/pull/1628 (a quantization scale computed as qmax / (eps + amax), the eps "
        "distorting small tensors)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dsilu_saved_bf16": (
        "gated_norm", "gate",
        "inputs other than bfloat16: the gate's derivative silu'(z) saved for the backward in a bfloat16 buffer "
        "(rounded to nearest): dz from it; y, dx, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/35885 (an activation's derivative evaluated from a value held in "
        "bfloat16)"),
    "gated_ln_bwd_vhat_uncentred": (
        "gated_norm", "backward",
        "norm='layer_norm': the backward recomputes each group's v_hat as v * rstd (the RMS kernel's recompute, the "
        "saved mean never loaded): dx, dz and dweight from it; the forward and dbias right",
        "pattern: a layer-norm backward sharing the RMS path's x_hat recomputation"),
    "gated_weight_bias_swapped": (
        "gated_norm", "affine",
        "with a bias: the weight and the bias passed in each other's slots: n = v_hat * bias + weight, y from it "
        "and the backward's g = dn * bias (dx, dz); the slots' gradients (sum dn * v_hat, sum dn) returned in the "
        "slots' order",
        "cf. " + GH + "mstrazar/mklaren/pull/4 (a kernel's bias and scale parameters switched)"),
    "gated_sumsq_row_pair_tile": (
        "gated_norm", "block",
        "norm='rms_norm', more than one row: programs of two rows reduce each group's squares over the whole (2, K) "
        "tile (no axis), so both rows of a pair share the pair's sum of squares, divided by K (the last row of an "
        "odd count its own): rstd, y and the backward on that rstd",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm kernel with several rows per program reducing over the "
        "whole 2-D block)"),
    "gated_dv_rounded_unfused_bwd": (
        "gated_norm", "precision",
        "norm after the gate, 16-bit inputs: the normalization's input gradient dv written to a buffer of the input "
        "dtype (an unfused backward: the norm's kernel, then the gate's) before dx = dv * silu(z) and dz = dv * x * "
        "silu'(z): dx and dz; y, dweight and dbias right",
        APEX_HALF),
    # ------------------------------------------------------------------ dyt
    "dyt_dtanh_precedence": (
        "dyt", "backward",
        "the backward's g * (1 - t^2) written without its parentheses, g * 1 - t * t: dx = alpha * (g - t^2) and "
        "dalpha = sum((g - t^2) * x); the forward, dweight and dbias right",
        "cf. " + GH + "apache/tvm/pull/7340 (a tanh gradient broken by missing parentheses)"),
    "dyt_saturation_test_on_x": (
        "dyt", None,
        "a fast path returns t = sign for saturated values (|v| > 4.97, where tanh(v) rounds to 1 in 16 bits) with "
        "its test written on x instead of on the tanh's argument alpha x: where |x| > 4.97 but |alpha x| is not "
        "that large, t = sign(x) and the backward's derivative 0: y, dweight, dx and dalpha",
        "cf. " + GH + "sonos/tract/pull/84 (a tanh's saturation branch returning the wrong value)"),
    "dyt_dparams_last_block_clamped": (
        "dyt", "reduction",
        "more than 16 rows, not a multiple of 16: dweight and dbias reduced over blocks of 16 rows whose last block "
        "starts at rows - 16 (clamped to stay in bounds): the rows it shares with the previous block counted "
        "twice; dx, dalpha and the forward right",
        "pattern: a last block clamped back into bounds instead of masked"),
    "dyt_dweight_t_of_previous_row": (
        "dyt", "layout",
        "with a weight, more than one row: the software-pipelined dweight loop multiplies dy of row r by the tanh "
        "register still holding row r - 1's t (row 0 by 0): dweight; dx, dalpha, dbias and the forward right",
        "pattern: a loop-carried register read before the current iteration's load"),
    "dyt_x_loaded_as_bf16": (
        "dyt", "precision",
        "inputs other than bfloat16: x read through a bfloat16 pointer (rounded to nearest) for tanh(alpha x) and "
        "the backward's sech^2(alpha x) and x: y, dx, dalpha and dweight",
        "pattern: the activation pointer declared with a bfloat16 model's type"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dx_terms_accumulated_in_half": (
        "poly_norm", "precision",
        "16-bit inputs: dx's three power terms (3 x^2 du_3, 2 x du_2, du_1) each rounded to the input dtype and "
        "summed in it (the dx buffer of the input dtype accumulated once per power): dx; the forward, dweight and "
        "dbias right",
        APEX_HALF),
    "poly_bwd_proj_over_whole_tensor": (
        "poly_norm", "reduction",
        "more than one row: each power's projection mean(g_p * h_p) reduced over the whole tensor (the sum over "
        "every row and column, divided by rows * H) and used for every row: dx; the forward, dweight and dbias "
        "right",
        "pattern: a reduction without its axis argument over a tile holding every row"),
    "poly_linear_weight_from_bias_ptr": (
        "poly_norm", "layout",
        "with a bias: the linear term's weight w2 loaded through the bias's pointer: y = w0 h_3 + w1 h_2 + bias * "
        "h_1 + bias, and the backward's g_1 = dy * bias for dx; dweight and dbias right",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where another's was "
        "meant)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _int8_wrapped(v):
    """int8 codes of rint(v) stored with two's-complement wrap-around."""
    r = np.rint(np.nan_to_num(v, nan=0.0)).astype(np.int64)
    return (((r + 128) % 256) - 128).astype(np.int8)


def _tree_sum_dropping_odd(a):
    """Row sums of ``a`` by a pairwise tree that drops the unpaired last partial at every odd level."""
    while a.shape[1] > 1:
        m = (a.shape[1] // 2) * 2
        a = a[:, 0:m:2] + a[:, 1:m:2]
    return a.reshape(-1, 1)


class Blind38Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind38"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln38(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    @staticmethod
    def _ln38_stats(xr, eps):
        """mean, var, rstd (rows, 1) of 2-D ``xr``, two-pass."""
        n = xr.shape[1]
        mean = _rsum(xr) / n
        dv = xr - mean
        var = _rsum(dv * dv) / n
        return mean, var, 1 / np.sqrt(var + eps)

    def _ln38(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        K = N
        if b == "ln_k3_rows_of_last_two_axes" and len(ns) >= 3:
            K = int(np.prod(ns[1:]))                         # the product from normalized_shape[1] on
        split = b == "ln_row_split_halves_own_stats" and N > 64
        if split:
            h = (N + 1) // 2                                 # two programs, no exchange of their partials
            parts = [self._ln38_stats(x[:, :h], eps), self._ln38_stats(x[:, h:], eps)]
            xhat = np.concatenate([(x[:, :h] - parts[0][0]) * parts[0][2],
                                   (x[:, h:] - parts[1][0]) * parts[1][2]], axis=1)
            mean, rstd = parts[0][0], parts[0][2]
        else:
            xr = x.reshape(-1, K)
            mr, vr, rr = self._ln38_stats(xr, eps)
            xhat = ((xr - mr) * rr).reshape(R, N)
            mean, rstd = mr.reshape(R, -1)[:, -1:], rr.reshape(R, -1)[:, -1:]
        bias_y = bias
        if b == "ln_bias_loaded_at_row_index" and bias is not None:
            bias_y = bias.reshape(-1)[np.arange(R) % N].reshape(R, 1)   # bias + row
        y = affine(xhat, w, bias_y)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        if b == "ln_bwd_dy_loaded_as_bf16" and d != "bfloat16":
            dy = _store(dy, "bfloat16").astype(acc)          # dy through a bfloat16 pointer
        g = dy if w is None else dy * w
        xb = xhat                                            # the backward's x_hat from the saved statistics
        if b == "ln_bwd_xhat_from_y_bias_kept" and w is not None and bias is not None:
            xb = y / w                                       # (y - bias) / weight without the bias
        if split:
            h = (N + 1) // 2
            dx = np.concatenate([_centred_dx(g[:, :h], xb[:, :h], parts[0][2]),
                                 _centred_dx(g[:, h:], xb[:, h:], parts[1][2])], axis=1)
        elif K != N:
            dx = _centred_dx(g.reshape(-1, K), xb.reshape(-1, K), rr).reshape(R, N)
        elif b == "ln_bwd_first_term_unweighted" and w is not None:
            dx = rstd * (dy - _rsum(g) / N - xb * (_rsum(g * xb) / N))
        else:
            dx = _centred_dx(g, xb, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        rows = slice(None)
        if b == "ln_dparams_even_rows_only" and R > 1:
            rows = slice(0, None, 2)                         # for r in range(0, M, 2), the odd row's load dropped
        if call.inputs.get("weight") is not None:
            xw = xb
            if b == "ln_dweight_centred_sign_flipped":
                xw = -xb                                     # (mean - x) * rstd
            grads["weight"] = _store((dy[rows] * xw[rows]).sum(axis=0).reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(dy[rows].sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms38(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms38(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        placement = cfg.get("eps_placement", "inside") or "inside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        eps = _eps(cfg["eps"], acc)
        if b == "rms_sumsq_even_lanes_only" and N > 1:
            ms = _rsum(x[:, 0::2] * x[:, 0::2]) / N          # the low lane of each pair only
        elif b == "rms_sumsq_tree_drops_odd_partial":
            ms = _tree_sum_dropping_odd(x * x) / N
        elif b == "rms_prescaled_by_rsqrt_n_in_half" and d in HALF:
            c = _store(1 / np.sqrt(np.float64(N)), d)        # 1 / sqrt(N) in the input dtype
            v = _store(x * acc(c), d).astype(acc)
            ms = _rsum(v * v)
        else:
            ms = _rsum(x * x) / N
        rms = np.sqrt(ms)
        if placement == "outside":
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        if b == "rms_zero_row_rstd_guard":
            rstd = np.where(ms > 0, rstd, acc(0))            # the zero-row guard
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        xb = x * rstd                                        # the backward reloads x and the saved rstd
        if b == "rms_bwd_renormalizes_saved_xhat" and placement != "outside":
            rb = 1 / np.sqrt(_rsum(xhat * xhat) / N + eps)   # the saved x_hat normalized once more
            xb = xhat * rb
            dx = rms_dx(g, xb, rb)
        else:
            dx = rms_norm_dx(g, x, xb, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            src, xw = dy, xb
            if b == "rms_dweight_from_weighted_dy":
                src = g
            if b == "rms_dweight_rstd_at_column_index":
                xw = x * rstd.reshape(-1)[np.arange(N) % R].reshape(1, N)
            grads["weight"] = _store((src * xw).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an38(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an38(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        after = b == "an_rowscale_after_residual_add" and rs is not None
        if after:
            c = kept(mask, None, keep, p, (R, N), acc)       # the branch's factor without the rowscale
            s0, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
            s = s0 * rs                                      # the row scale applied to the whole sum
        else:
            c = kept(mask, rs, keep, p, (R, N), acc)
            s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = _eps(cfg["eps"], acc)
        if b == "an_f64_eps_through_float_arg" and d == "float64":
            eps = acc(np.float32(eps))                       # the kernel's float eps argument
        centred = cfg["norm"] == "layer_norm"
        st = s
        if b == "an_stats_before_x1_added" and centred and x1 is not None:
            st = s - x1 * c1                                 # the statistics pass reads x * c + residual only
        if centred:
            mean = _rsum(st) / N
            if b == "an_ln_mean_in_input_dtype" and d in HALF:
                mean = _store(mean, d).astype(acc)
            var = _rsum((st - mean) ** 2) / N
            dev = s - mean
        else:
            mean = acc(0)
            dev = s
            var = _rsum(s * s) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = self._an38_dnorm(dy, we, xhat, rstd, centred)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + self._an38_dnorm(dy1, we1, xhat, rstd, centred)
        ds_norm = ds
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            if b == "an_dres_out_cotangent_from_dy_ptr":
                ds = ds + dy                                 # the dresidual_out slot given dy's buffer
            else:
                ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        if after:
            dsr = ds * rs
            grads = add_norm_grads(inp, dsr, None if res is None else dsr, c, c1, dy, dy1, xhat, params, x,
                                   mask, keep, p, ns, d)
            grads["rowscale"] = _store(_rsum(ds * s0).reshape(inp["rowscale"].shape), d)
            return Returned(out, grads)
        dres = None if res is None else ds
        grads = add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xhat, params, x, mask, keep, p, ns, d)
        if b == "an_prenorm_dx1_without_dres_out" and c1 is not None and ds_norm is not ds:
            grads["x1"] = _store((ds_norm * c1).reshape(x0.shape), d)
        if b == "an_drowscale_over_first_tile" and rs is not None and N > 64:
            grads["rowscale"] = rowscale_grad(ds[:, :64], x[:, :64], None if mask is None else mask[:, :64],
                                              keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    @staticmethod
    def _an38_dnorm(dy, wgt, xhat, rstd, centred):
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
            return self._nq38(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq38(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if b == "nq_weight_tail_tile_zero" and N > 64 and N % 64:
            cut = (N // 64) * 64                             # whole 64-wide tiles of the parameters only
            if w is not None:
                w = w.astype(acc).reshape(-1).copy()
                w[cut:] = 0
            if bias is not None:
                bias = bias.astype(acc).reshape(-1).copy()
                bias[cut:] = 0
        if b == "nq_inv_n_in_input_dtype" and d in HALF:
            inv = acc(_store(1 / np.float64(N), d))          # 1 / N in the input's scalar type

            def per_n(t):
                return t * inv
        else:
            def per_n(t):
                return t / N
        if cfg["norm"] == "layer_norm":
            mean = per_n(_rsum(x))
            rstd = 1 / np.sqrt(per_n(_rsum((x - mean) ** 2)) + eps)
            xhat = (x - mean) * rstd
        else:
            xhat = x * (1 / np.sqrt(per_n(_rsum(x * x)) + eps))
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        if b == "nq_amax_as_row_range":
            amax = np.max(y, axis=1, keepdims=True) - np.min(y, axis=1, keepdims=True)
        static = inp.get("static_scale")
        yq = y
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
            if b == "nq_static_scale_applied_twice":
                yq = y / scale                               # the caller's division, then the kernel's
        else:
            num = amax + eps if b == "nq_dyn_scale_amax_plus_eps" else amax
            scale = num / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        int8 = qdt.kind == "i"
        if b == "nq_int8_clip_half_beyond_range" and int8:
            q = _int8_wrapped(quant_quotients(yq, scale, lo - 0.5, hi + 0.5, acc))
        else:
            q = quantize(quant_quotients(yq, scale, lo, hi, acc), qdt)
        if b == "nq_q_stored_column_major" and R > 1:
            q = np.ascontiguousarray(q.T).reshape(R, N)      # element (r, j) at j * rows + r
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated38(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated38(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        if b == "gated_weight_bias_swapped" and bias is not None:
            w, bias = bias, w                                # each passed in the other's slot
        K = gate_group_size(cfg, H)
        G = H // K
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
            if b == "gated_sumsq_row_pair_tile" and R > 1:
                sr = ss.reshape(R, G)
                pr = sr.copy()
                top = (R // 2) * 2
                pair = sr[0:top:2] + sr[1:top:2]             # tl.sum over the (2, K) tile
                pr[0:top:2], pr[1:top:2] = pair, pair
                ss = pr.reshape(-1, 1)
        rstd = 1 / np.sqrt(ss / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        vv = vhat.reshape(-1, K)
        if b == "gated_ln_bwd_vhat_uncentred" and norm == "layer_norm":
            vv = vg * rstd                                   # the saved mean never loaded
        g = (dn * w).reshape(-1, K)
        proj = vv * (_rsum(g * vv) / K)
        if norm == "layer_norm":
            dv = rstd * (g - _rsum(g) / K - proj)
        else:
            dv = rstd * (g - proj)
        dv = dv.reshape(R, H)
        if b == "gated_dv_rounded_unfused_bwd" and not nbg and d in HALF:
            dv = _store(dv, d).astype(acc)                   # the norm's dv stored in the input dtype
        dsb = ds
        if b == "gated_dsilu_saved_bf16" and d != "bfloat16":
            dsb = _store(ds, "bfloat16").astype(acc)         # silu'(z) saved in bfloat16
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, dsb, nbg)
        db_from = None if bias is None else dn
        grads = gated_grads(dx, dz, dn, db_from, vv.reshape(R, H), x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt38(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt38(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_x_loaded_as_bf16" and d != "bfloat16":
            x = _store(x, "bfloat16").astype(acc)            # x through a bfloat16 pointer
            t = np.tanh(a * x)
        sat = None
        if b == "dyt_saturation_test_on_x":
            sat = np.abs(x) > 4.97                           # the fast path tested on x, not on alpha x
            t = np.where(sat, np.sign(x), t)
        R, C = x.shape
        y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(a * x)
        sech2 = r * r
        if sat is not None:
            sech2 = np.where(sat, acc(0), sech2)
        if b == "dyt_dtanh_precedence":
            gd = g * 1 - t * t                               # g * 1 - t^2 for g * (1 - t^2)
        else:
            gd = g * sech2
        dx = gd * a
        da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dparams_last_block_clamped" and R > 16 and R % 16:
            starts = list(range(0, R - 16, 16)) + [R - 16]   # the last block clamped back into bounds
            rows = np.concatenate([np.arange(s0, s0 + 16) for s0 in starts])
            if w is not None:
                grads["weight"] = _store((dy * t)[rows].sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[rows].sum(axis=0), d)
        if b == "dyt_dweight_t_of_previous_row" and w is not None and R > 1:
            tp = np.concatenate([np.zeros((1, C), acc), t[:-1]], axis=0)
            grads["weight"] = _store((dy * tp).sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly38(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly38(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        if b == "poly_linear_weight_from_bias_ptr" and bias is not None:
            wt = np.array([wt[0], wt[1], acc(np.asarray(bias).astype(acc).reshape(()))], dtype=acc)
        us = [x ** 3, x ** 2, x]
        rs = []
        for u in us:
            sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = sc * np.sqrt(_rsum((u / sc) ** 2) / H)
            rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)

        def du_tensor(g, h, r):                              # the projection's sum over the whole tensor
            return r * (g - h * ((g * h).sum() / (g.shape[0] * g.shape[1])))
        du = du_tensor if b == "poly_bwd_proj_over_whole_tensor" and R > 1 else rms_dx
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_dx_terms_accumulated_in_half" and d in HALF:
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2, 1)):
                dp = rms_dx(dy * wt[k], hs[k], rs[k])
                term = dp if p == 1 else p * x ** (p - 1) * dp
                dx = _store(dx + _store(term, d).astype(acc), d).astype(acc)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_bwd_xhat_from_y_bias_kept": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_bwd_dy_loaded_as_bf16": ("layer_norm/normal_f64_9x7", "grad.bias"),
    "ln_row_split_halves_own_stats": ("layer_norm/normal_f32_6x100", "output.y"),
    "ln_dparams_even_rows_only": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_dweight_centred_sign_flipped": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_bwd_first_term_unweighted": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bias_loaded_at_row_index": ("layer_norm/normal_f64_9x7", "output.y"),
    "ln_k3_rows_of_last_two_axes": ("layer_norm/mean1e3_k3_bf16_3x4x2x5x3", "output.y"),
    "rms_bwd_renormalizes_saved_xhat": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_sumsq_even_lanes_only": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "rms_dweight_from_weighted_dy": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_prescaled_by_rsqrt_n_in_half": ("rms_norm/normal_eps1e-05_f16_6x100", "output.rstd"),
    "rms_dweight_rstd_at_column_index": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_sumsq_tree_drops_odd_partial": ("rms_norm/normal_eps1e-05_f32_6x100", "output.rstd"),
    "rms_zero_row_rstd_guard": ("rms_norm/zero_eps1e-06_f32_3x10", "output.rstd"),
    "an_f64_eps_through_float_arg": ("add_norm/normal_p_rs_f64_9x7", "output.y"),
    "an_ln_mean_in_input_dtype": ("add_norm/mean1e3_fp32res_xnormal_f16_6x100", "output.y"),
    "an_stats_before_x1_added": ("add_norm/normal_par_f64_5x12", "output.y"),
    "an_prenorm_dx1_without_dres_out": ("add_norm/normal_p_par_f64_5x12", "grad.x1"),
    "an_rowscale_after_residual_add": ("add_norm/mean1e3_rs_noprenorm_xnormal_f32_6x40", "output.residual_out"),
    "an_dres_out_cotangent_from_dy_ptr": ("add_norm/normal_p_rs_f64_9x7", "grad.x"),
    "an_drowscale_over_first_tile": ("add_norm/mean1e3_p_rs_xnormal_f16_4x128", "grad.rowscale"),
    "nq_static_scale_applied_twice": ("norm_quant/normal_rms_i8_static_f32_8x256", "output.q"),
    "nq_amax_as_row_range": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_weight_tail_tile_zero": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_int8_clip_half_beyond_range": ("norm_quant/outlier_ln_i8_dyn_ub8_wb_f16_8x256", "output.q"),
    "nq_inv_n_in_input_dtype": ("norm_quant/normal_rms_i8_dyn_f16_1x1029", "output.amax"),
    "nq_q_stored_column_major": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_dyn_scale_amax_plus_eps": ("norm_quant/std1e-6_rms_i8_dyn_nofloor_f16_4x256", "output.scale"),
    "gated_dsilu_saved_bf16": ("gated_norm/normal_f32_4x64", "grad.z"),
    "gated_ln_bwd_vhat_uncentred": ("gated_norm/normal_ln_nbg_gs16_f32_6x48", "grad.weight"),
    "gated_weight_bias_swapped": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_sumsq_row_pair_tile": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_dv_rounded_unfused_bwd": ("gated_norm/normal_gs32_bf16_4x128", "grad.x"),
    "dyt_dtanh_precedence": ("dyt/normal_f64_2x5x7", "grad.x"),
    "dyt_saturation_test_on_x": ("dyt/heavy_tail_f64_3x10", "output.y"),
    "dyt_dparams_last_block_clamped": ("dyt/normal_f32_3x20x12", "grad.weight"),
    "dyt_dweight_t_of_previous_row": ("dyt/normal_f64_2x5x7", "grad.weight"),
    "dyt_x_loaded_as_bf16": ("dyt/normal_f64_2x5x7", "output.y"),
    "poly_dx_terms_accumulated_in_half": ("poly_norm/normal_bf16_8x48", "grad.x"),
    "poly_bwd_proj_over_whole_tensor": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_linear_weight_from_bias_ptr": ("poly_norm/normal_f64_3x7", "output.y"),
}
