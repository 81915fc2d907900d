"""A forty-second held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind42Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln42``, ``_rms42``, ``_an42``, ``_nq42``, ``_gated42``, ``_dyt42``,
``_poly42``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind42Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
the diagnosis on these bugs (session 35). None of its bugs repeats one of tests/planted/blind.py, blind2.py,
..., blind41.py (the same mistake on the same op; the forty-third set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_input_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dy_and_g, dyt_grads, dyt_inputs, eps_value as _eps,
                          gate_group_size, gated_dx_dz, gated_grads, gated_inputs, kept, norm_outputs,
                          norm_quant_returned, normalized_rows, poly_combine, poly_grads, poly_inputs,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias,
                          rowscale_grad, rsum as _rsum, scale_floor, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind42Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
INPLACE = ("cf. " + GH + "linkedin/Liger-Kernel/pull/262 (in-place writes inside a Triton kernel corrupting a "
           "tensor that a later gradient computation still reads)")
PARTIAL_WARP = (GH + "flashinfer-ai/flashinfer/pull/3879 (blockReduceSumV2 / blockReduceMaxV2 with a floored "
                "warp mask: the last partial warp's sum written but never read, the RMS denominator over 8/9 of "
                "the row)")
NO_ROOT = ("cf. " + GH + "blue-oil/blueoil/pull/116 (a square root implemented as a reciprocal square root: one "
           "root and reciprocal too many or too few)")
F64_AS_F32 = ("cf. " + GH + "ooples/AiDotNet.Tensors/pull/937 (double-precision data silently computed in float: "
              "float32-accurate results for a float64 caller)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_half2_stats_drop_odd_column": (
        "layer_norm", "block",
        "16-bit inputs, N odd: the statistics loop reads the row as N // 2 half2 pairs (half_n = n / 2) with no "
        "scalar tail, so the last column never enters the mean's sum nor the squared deviations' sum (both still "
        "divided by N); the normalization pass covers every column: mean and rstd (returned), y, and the "
        "backward's formula on those statistics (dx, dweight)",
        "cf. " + GH + "vectorch-ai/ScaleLLM/pull/139 (a half2 layernorm kernel looping over half_n = n / 2 pairs; "
        "review: what if n % 2 != 0?)"),
    "ln_dx_row_pointer_early": (
        "layer_norm", "layout",
        "more than one row: the backward's dx store pointer advanced at the top of the row loop: row r's dx "
        "written at row r + 1 (row 0 left 0 from the zero-initialised buffer, the last row's dropped); the "
        "forward, dweight and dbias right",
        "pattern: a row pointer incremented before the store in a row loop"),
    "ln_bwd_proj_weighted_twice": (
        "layer_norm", "backward",
        "with a weight: dx = rstd * (g - mean(g) - weight * x_hat * mean(g * x_hat)), g = dy * weight: the "
        "projection term multiplied by the weight once more (the register of the normalized output x_hat * weight "
        "used where x_hat belongs); the forward, dweight and dbias right",
        "pattern: a hand-written LayerNorm backward reusing the weighted register in the projection term"),
    "ln_bwd_mean_term_over_rows": (
        "layer_norm", "backward",
        "the backward's mean term reduced with tl.sum(g, axis=0) over the rows of the (rows, N) tile instead of "
        "axis=1: column j's sum of g over every row divided by N, broadcast to each row, where each row's own "
        "mean(g) belongs (the projection term right): dx; the forward, dweight and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer_norm backward's row sums of dx_hat reduced over the "
        "wrong axes of a 2-D tile)"),
    "ln_zc_offset_added_in_input_dtype": (
        "layer_norm", "affine",
        "weight_offset set (zero-centred weight), 16-bit inputs: weight + offset formed in the input dtype "
        "(rounded to nearest; a bfloat16 1 + w keeps 8 significant bits) before the float32 multiply: y and the "
        "backward's g = dy * (weight + offset) (dx); mean, rstd, dweight and dbias right",
        "cf. " + GH + "unslothai/unsloth/pull/217 (Gemma's norm, whose 1 + weight must be formed in float32)"),
    "ln_weight_loaded_one_column_late": (
        "layer_norm", "layout",
        "N > 1, with a weight: the weight loaded at W + cols + 1 (a 1-based column index) with the mask "
        "cols + 1 < N: column j scaled by weight[j + 1], the last column by 0 (plus the offset), forward and the "
        "backward's g = dy * weight (dx); mean, rstd, dweight and dbias right",
        "pattern: a parameter load offset computed from a 1-based index"),
    # ------------------------------------------------------------------ rms_norm
    "rms_block_reduce_partial_warp_dropped": (
        "rms_norm", "block",
        "the row read in 16-byte vectors (16 / element size columns a thread) by T = ceil(N / vector width) "
        "threads; when T > 32 is not a multiple of 32 the cross-warp reduction reads the partials of the T // 32 "
        "full warps only (a floored warp count), so the last partial warp's columns never enter the sum of "
        "squares (still divided by N): rstd, y and the backward's formula on that rstd",
        PARTIAL_WARP),
    "rms_outside_rsqrt_of_rms_plus_eps": (
        "rms_norm", "semantics",
        "eps_placement='outside': rstd = rsqrt(rms + eps) (the reciprocal square root intrinsic called where the "
        "reciprocal 1 / (rms + eps) belongs: one root too many): rstd, y and the backward's outside-eps formula "
        "on that rstd",
        NO_ROOT),
    "rms_bwd_xhat_from_y_without_offset": (
        "rms_norm", "affine",
        "weight_offset set, with a weight (the memory-efficient backward): x_hat recomputed from the stored "
        "output as y / weight, the raw weight where weight + offset belongs (the offset never added in the "
        "recompute): dx and dweight from that x_hat; the forward right",
        "pattern: a recompute-from-output backward missing the forward's parameter convention"),
    "rms_dweight_from_dx_in_x_buffer": (
        "rms_norm", "backward",
        "with a weight: the backward writes dx in place into x's buffer (x no longer needed by the row kernel) "
        "and the column kernel for dweight recomputes x_hat = 'x' * rstd from that buffer: dweight = sum over the "
        "rows of dy * dx * rstd (dx rounded to the input dtype); dx and the forward right",
        INPLACE),
    "rms_bwd_rstd_recomputed_eps_outside": (
        "rms_norm", "eps",
        "eps inside (the configured placement): the backward recomputes rstd from x as 1 / (sqrt(mean(x^2)) + eps) "
        "(the outside-eps helper) and x_hat from it: dx and dweight; the forward (y, rstd) right",
        "pattern: a backward recompute calling the other placement's helper"),
    "rms_zc_bwd_offset_twice": (
        "rms_norm", "affine",
        "weight_offset set, with a weight: the backward's g = dy * (weight + 2 * offset) (the weight tensor "
        "already shifted by the loader and the kernel's offset added again); the forward and dweight right",
        "pattern: a zero-centred weight shifted by both the caller and the kernel"),
    # ------------------------------------------------------------------ add_norm
    "an_ln_two_cta_means_averaged": (
        "add_norm", "merge",
        "norm='layer_norm', N odd: the row of the sum s split between two programs of ceil(N / 2) and floor(N / 2) "
        "columns (a two-CTA cluster) whose means are merged as their plain average (m1 + m2) / 2, the counts not "
        "weighted; the squared deviations then summed about that mean (divided by N): mean, rstd, y (y1) and the "
        "backward's formula on them; residual_out right",
        "pattern: per-block partial means merged without their element counts"),
    "an_y1_bwd_guarded_by_bias1": (
        "add_norm", "backward",
        "the parallel branch with weight1 but no bias1: the backward's y1 branch guarded by 'bias1 is not None', "
        "so y1's cotangent never enters ds (dx, dresidual, dx1, drowscale) and dweight1 is never written (left "
        "0); the forward right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/77274 (rms_norm's backward: the condition deciding whether a "
        "parameter's gradient is computed read from the wrong input)"),
    "an_f64_rowscale_loaded_as_float": (
        "add_norm", "precision",
        "float64 inputs with a rowscale: the rowscale loaded through a float32 pointer (rounded to nearest "
        "float32) for the forward's scaled branch x * mask * rowscale / (1 - p) and the backward's dx: s "
        "(residual_out), y and every gradient through it; drowscale's formula right",
        F64_AS_F32),
    "an_residual_tail_tile_zero": (
        "add_norm", "block",
        "with a residual, N > 16 and not a multiple of 16: the residual loaded with the mask of the 16-wide "
        "vector loop (cols < 16 * (N // 16)), so its last N mod 16 columns read 0: s = x * c (+ x1 * c1) + "
        "residual without them (residual_out), the statistics, y and the backward on that s",
        "cf. " + GH + "ROCm/aiter/pull/5290 (an add + rmsnorm kernel's vectorised tail mishandled for rows not a "
        "multiple of the vector width)"),
    "an_drowscale_row_pointer_early": (
        "add_norm", "layout",
        "with a rowscale, more than one row: drowscale's store pointer advanced before the store: row r's "
        "gradient written at row r + 1 (row 0 left 0, the last row's dropped); the forward, dx and the other "
        "gradients right",
        "pattern: a row pointer incremented before the store in a row loop"),
    "an_eps_added_after_rsqrt": (
        "add_norm", "eps",
        "rstd = 1 / sqrt(var) + eps (1 / sqrt(mean(s^2)) + eps for the rms norm): eps added to the reciprocal "
        "root instead of inside it: y (y1) and the backward's formula on that rstd; residual_out right",
        "pattern: eps added on the wrong side of the reciprocal square root"),
    # ------------------------------------------------------------------ norm_quant
    "nq_q_scale_of_previous_row": (
        "norm_quant", "layout",
        "dynamic scale, more than one row: the software-pipelined quantizing pass divides row r by the scale "
        "register still holding row r - 1's (row 0 its own): q; the returned scale and amax right",
        "pattern: a stale register of the previous iteration in a software-pipelined row loop"),
    "nq_amax_partial_warp_dropped": (
        "norm_quant", "block",
        "the row's amax reduced by T = ceil(N / vector width) threads (16-byte vectors); when T > 32 is not a "
        "multiple of 32 the cross-warp max reads the T // 32 full warps' partials only, so the last partial "
        "warp's columns never enter amax: amax, the dynamic scale and q",
        "cf. " + PARTIAL_WARP),
    "nq_ln_eps_only_in_rms_branch": (
        "norm_quant", "eps",
        "norm='layer_norm': rstd = 1 / sqrt(var), the eps added in the rms branch only: y, amax, the dynamic "
        "scale and q",
        "pattern: an eps term written in one branch of a fused kernel and not the other"),
    "nq_qmax_from_input_dtype_finfo": (
        "norm_quant", "quant_scale",
        "float8 outputs, dynamic scale: the largest value taken as finfo(x.dtype).max (the activation's dtype: "
        "65504 for float16, about 3.4e38 for float32 and bfloat16) instead of the float8 format's, for amax / "
        "qmax and the default floor; the clamp still the float8 range: the scale (and so q, mostly saturated); "
        "amax right",
        "cf. " + GH + "vllm-project/vllm/pull/32201 (an fp8 scale computed from a finfo max that differs from "
        "the largest value the clamp uses)"),
    "nq_x_rows_at_q_byte_pitch": (
        "norm_quant", "layout",
        "more than one row, N a multiple of the element size: x's row pointer advanced by q's row pitch in bytes "
        "(row * N, for the one-byte output) from a byte-typed base pointer: row r read from element "
        "r * N / (element size) of x on: every statistic, y, amax, the scale and q of the rows past the first",
        "cf. " + GH + "chelsea0x3b/dfdx/pull/588 (a kernel scaling an index by the input's row width where the "
        "output's belongs)"),
    "nq_ln_weight_bias_swapped": (
        "norm_quant", "affine",
        "norm='layer_norm' with a weight and a bias: the two pointers passed in each other's slots, y = x_hat * "
        "bias + weight, then amax, the dynamic scale and q",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (layer norm's weight and bias gradients assigned in each "
        "other's place)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_weight_per_group": (
        "gated_norm", "affine",
        "group_size < H: the weight loaded at the group index (W + group) instead of the column's, one weight "
        "value per group (weight[j // group_size]), forward (n = v_hat * weight[group] + bias) and the backward's "
        "g = dn * weight[group]; dweight's column reduction right",
        "pattern: a per-group pointer offset applied to the per-channel parameter"),
    "gated_dweight_from_normed_output": (
        "gated_norm", "backward",
        "dweight = sum over the rows of dn * n with n = v_hat * weight + bias (the recomputed normalized output "
        "register reduced where v_hat belongs); dx, dz, dbias and the forward right",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/1071 (a gated norm backward contracting the gradient "
        "with the wrong recomputed output)"),
    "gated_dz_bias_left_out": (
        "gated_norm", "gate",
        "norm before the gate (norm_before_gate=True), with a bias: dz = dy * (v_hat * weight) * silu'(z): the "
        "bias left out of the normalized value the gate multiplies; dx, dweight, dbias and the forward right",
        "pattern: a recomputed epilogue value missing one of its terms in the gate's gradient"),
    "gated_bwd_rstd_recomputed_eps_squared": (
        "gated_norm", "eps",
        "the backward recomputes each group's rstd as 1 / sqrt(var + eps^2) (1 / sqrt(mean(v^2) + eps^2) for the "
        "rms norm; its eps argument taken as a standard deviation) and v_hat from it: dx, dz, dweight; the "
        "forward right",
        "pattern: a backward recompute squaring an eps meant for the variance"),
    "gated_dz_product_in_input_dtype": (
        "gated_norm", "gate",
        "norm before the gate, 16-bit inputs: dz's product dy * n formed by a 16-bit multiply (rounded to the "
        "input dtype) before the float32 multiply by silu'(z); dx, dweight, dbias and the forward right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (an RMSNorm backward's product formed in bfloat16 before "
        "its float32 reduction)"),
    "gated_dparams_block_partial_stored": (
        "gated_norm", "reduction",
        "more than 4 rows: dweight and dbias partials per program of 4 rows stored into the output instead of "
        "added, so only the last row block's sums remain; dx, dz and the forward right",
        "pattern: a store where an accumulate belongs in a blocked reduction"),
    # ------------------------------------------------------------------ dyt
    "dyt_channel_from_block_local_offset": (
        "dyt", "layout",
        "the elementwise kernel over the flattened input in blocks of 256 takes each element's channel as "
        "(offset within the block) mod C, the program's start left out: with more than 256 elements and 256 not "
        "a multiple of C, every block past the first reads the weight and bias of shifted channels, forward and "
        "the backward's g = dy * weight (dx, dalpha); dweight and dbias (a column kernel) right",
        "cf. " + GH + "kraiskil/onnx2c/issues/7 (a bias addition indexed along the wrong dimension)"),
    "dyt_bwd_dy_read_column_major": (
        "dyt", "layout",
        "more than one row: the backward reads dy column-major (element (r, j) from the flat index j * rows + r, "
        "the layout of a transposed gradient assumed) while x is row-major: dx, dalpha, dweight and dbias from the "
        "scrambled dy; the forward right",
        "pattern: a gradient's layout assumed without checking its strides"),
    "dyt_dalpha_row_tail_tile_dropped": (
        "dyt", "block",
        "alpha's gradient: each row's partial sum of g * sech^2(alpha x) * x taken over whole 32-wide column tiles "
        "only (its loop bound C // 32 tiles), the last C mod 32 columns (every column for C < 32) never added: "
        "dalpha; dx, dweight, dbias and the forward right",
        "pattern: a tail tile dropped by a floor division of the loop bound"),
    "dyt_bf16_dalpha_truncated": (
        "dyt", "rounding",
        "bfloat16 inputs: alpha's gradient converted from float32 by dropping the low 16 bits (round toward "
        "zero) instead of to nearest even; dx, dweight, dbias and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/27171 (a truncating fp32 -> bf16 conversion replaced by "
        "round-to-nearest-even)"),
    "dyt_dtanh_one_minus_t_squared": (
        "dyt", "backward",
        "the backward's tanh'(alpha x) written (1 - t)^2 instead of 1 - t^2 (the square misplaced): dx and dalpha; "
        "dweight, dbias and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/55349 (a tanh backward whose derivative formula was wrong)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_rstd_without_root": (
        "poly_norm", "semantics",
        "each power's r_p = 1 / (mean(x^(2p)) + eps) (the reciprocal of the mean square, its square root "
        "missing) instead of 1 / sqrt(mean(x^(2p)) + eps): y and the backward's formula on those r_p",
        NO_ROOT),
    "poly_sumsq_last_column_masked": (
        "poly_norm", "block",
        "H > 1: each power's sum of squares loaded with the mask cols < H - 1 (off by one): the last column never "
        "enters any power's mean of squares (still divided by H): the three r_p, y and the backward's formula on "
        "them",
        "pattern: an off-by-one load mask in a row reduction"),
    "poly_dx_row_pointer_early": (
        "poly_norm", "layout",
        "more than one row: the backward's dx store pointer advanced before the store: row r's dx written at "
        "row r + 1 (row 0 left 0, the last row's dropped); dweight, dbias and the forward right",
        "pattern: a row pointer incremented before the store in a row loop"),
    "poly_dweight_tree_drops_odd_row": (
        "poly_norm", "reduction",
        "the weight's gradient: each row's partials sum(dy * h_p) reduced over the rows by a pairwise tree that "
        "halves the count each level and drops the unpaired last partial whenever the count is odd; dx, dbias "
        "and the forward right",
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd "
        "lengths)"),
    "poly_dweight_float32_for_float64": (
        "poly_norm", "precision",
        "float64 inputs: the weight's gradient products dy * h_p rounded to float32 and summed in float32 "
        "accumulators (the partial buffer allocated as float32), widened at the store; dx, dbias and the forward "
        "right",
        F64_AS_F32),
    "poly_dbias_from_dx_in_dy_buffer": (
        "poly_norm", "backward",
        "with a bias: the row kernel writes dx in place into dy's buffer (after its own dweight partials) and the "
        "later dbias pass sums 'dy' from that buffer: dbias = sum of dx (rounded to the input dtype); dx, dweight "
        "and the forward right",
        INPLACE),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _prev_row(a):
    """Row r of 2-D ``a`` replaced by row r - 1's, row 0 zero (a store pointer advanced one row early)."""
    return np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a[:-1]], axis=0)


def _warp_kept_cols(N, itemsize):
    """The columns a block reduction with a floored warp count keeps: 16-byte vectors over T = ceil(N / width)
    threads, the partials of the T // 32 full warps read (all N when T <= 32 or T is a multiple of 32)."""
    width = max(1, 16 // int(itemsize))
    T = -(-N // width)
    if T <= 32 or T % 32 == 0:
        return N
    return min(N, width * 32 * (T // 32))


def _tree_sum(v):
    """Sum of 1-D ``v`` by a pairwise tree dropping the unpaired last partial at every odd level."""
    while v.shape[0] > 1:
        m = (v.shape[0] // 2) * 2
        v = v[0:m:2] + v[1:m:2]
    return v[0]


def _bf16_truncated(v):
    """float32 ``v`` converted to bfloat16 by dropping its low 16 bits."""
    u = np.ascontiguousarray(np.asarray(v, np.float32)).view(np.uint32) & np.uint32(0xFFFF0000)
    return u.view(np.float32).astype(ml_dtypes.bfloat16)


class Blind42Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind42"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln42(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln42(self, call, acc, b):
        d = call.dtype
        inp = call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        w0 = inp.get("weight")
        if w0 is not None and b == "ln_weight_loaded_one_column_late" and N > 1:
            wr = w0.astype(acc).reshape(1, N)
            w = np.concatenate([wr[:, 1:], np.zeros((1, 1), acc)], axis=1) + off     # W + cols + 1
        if w is not None and b == "ln_zc_offset_added_in_input_dtype" and off != 0 and d in HALF:
            w = _store(w, d).astype(acc)                     # weight + offset in the input dtype
        xs = x
        if b == "ln_half2_stats_drop_odd_column" and d in HALF and N % 2 and N > 1:
            xs = x[:, :N - 1]                                # N // 2 half2 pairs, no tail
        mean = _rsum(xs) / N
        dv = xs - mean
        rstd = 1 / np.sqrt(_rsum(dv * dv) / N + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        g = dy if w is None else dy * w
        if b == "ln_bwd_proj_weighted_twice" and w is not None:
            dx = rstd * (g - _rsum(g) / N - w * xhat * (_rsum(g * xhat) / N))
        elif b == "ln_bwd_mean_term_over_rows":
            dx = rstd * (g - g.sum(axis=0, keepdims=True) / N - xhat * (_rsum(g * xhat) / N))   # axis=0
        else:
            dx = _centred_dx(g, xhat, rstd)
        if b == "ln_dx_row_pointer_early" and R > 1:
            dx = _prev_row(dx)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w0 is not None:
            grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms42(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms42(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        placement = cfg.get("eps_placement", "inside") or "inside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        eps = _eps(cfg["eps"], acc)
        kc = N
        if b == "rms_block_reduce_partial_warp_dropped":
            kc = _warp_kept_cols(N, np.dtype(x0.dtype).itemsize)
        xs = x[:, :kc]
        ms = _rsum(xs * xs) / N
        rms = np.sqrt(ms)
        if placement == "outside":
            rstd = 1 / np.sqrt(rms + eps) if b == "rms_outside_rsqrt_of_rms_plus_eps" else 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_zc_bwd_offset_twice" and w is not None and off != 0:
            g = dy * (w + off)
        rb = rstd                                            # the backward reloads x and the saved rstd
        if b == "rms_bwd_rstd_recomputed_eps_outside" and placement == "inside":
            rb = 1 / (rms + eps)
        xb = x * rb
        if b == "rms_bwd_xhat_from_y_without_offset" and w is not None and off != 0:
            xb = _store(y, d).astype(acc) / w0.astype(acc).reshape(1, N)     # y / weight, no offset
        dx = rms_norm_dx(g, x, xb, rb, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xb
            if b == "rms_dweight_from_dx_in_x_buffer":
                t = dy * (_store(dx, d).astype(acc) * rb)    # x's buffer now holds dx
            grads["weight"] = _store(t.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an42(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an42(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_f64_rowscale_loaded_as_float" and rs is not None and d == "float64":
            rs = rs.astype(np.float32).astype(acc)           # through a float pointer
        if b == "an_residual_tail_tile_zero" and res is not None and N > 16 and N % 16:
            res = res.copy()
            res[:, (N // 16) * 16:] = 0                      # the vector loop's mask
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            if b == "an_ln_two_cta_means_averaged" and N % 2 and N > 1:
                h = (N + 1) // 2
                mean = (_rsum(s[:, :h]) / h + _rsum(s[:, h:]) / (N - h)) / 2     # counts not weighted
            var = _rsum((s - mean) ** 2) / N
        else:
            mean = np.zeros((R, 1), acc)
            var = _rsum(s * s) / N
        if b == "an_eps_added_after_rsqrt":
            rstd = 1 / np.sqrt(var) + eps
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = (s - mean) * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        dy1 = None
        skip1 = b == "an_y1_bwd_guarded_by_bias1" and b1 is None
        if we1 is not None and "y1" in call.cotangents and not skip1:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        ds = self._an42_dnorm(dy, we, xhat, rstd, centred)
        if dy1 is not None:
            ds = ds + self._an42_dnorm(dy1, we1, xhat, rstd, centred)
        if dres_out is not None:
            ds = ds + dres_out
        grads = add_norm_input_grads(ds, c, c1, None if res is None else ds, x0.shape, d)
        grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, (w, bias, w1, b1), ns, d))
        if skip1 and w1 is not None and "y1" in call.cotangents:
            grads["weight1"] = _store(np.zeros(ns), d)       # never written
        if inp.get("rowscale") is not None:
            grads["rowscale"] = rowscale_grad(ds, x, mask, keep, p, inp["rowscale"].shape, d)
            if b == "an_drowscale_row_pointer_early" and R > 1:
                t = ds * x if mask is None else ds * x * mask
                drs = _rsum(t) * keep if p else _rsum(t)
                grads["rowscale"] = _store(_prev_row(drs).reshape(inp["rowscale"].shape), d)
        return Returned(out, grads)

    @staticmethod
    def _an42_dnorm(dy, wgt, xhat, rstd, centred):
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
            return self._nq42(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq42(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        size = np.dtype(x0.dtype).itemsize
        if b == "nq_x_rows_at_q_byte_pitch" and R > 1 and N % size == 0:
            starts = np.arange(R) * (N // size)              # row * N bytes from a byte pointer
            x = x.reshape(-1)[starts[:, None] + np.arange(N)[None, :]]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        ln = cfg["norm"] == "layer_norm"
        if b == "nq_ln_weight_bias_swapped" and ln and w is not None and bias is not None:
            w, bias = bias, w
        if ln:
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var) if b == "nq_ln_eps_only_in_rms_branch" else 1 / np.sqrt(var + eps)
            xhat = (x - mean) * rstd
        else:
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
            xhat = x * rstd
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        ya = np.abs(y)
        if b == "nq_amax_partial_warp_dropped":
            ya = ya[:, :_warp_kept_cols(N, size)]
        amax = np.max(ya, axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            qmax = hi
            if b == "nq_qmax_from_input_dtype_finfo" and qdt.kind != "i":
                qmax = float(ml_dtypes.finfo(x0.dtype).max)  # the activation dtype's largest value
            scale = amax / acc(qmax)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, qmax, acc)
        sq = scale
        if b == "nq_q_scale_of_previous_row" and static is None and R > 1:
            sq = np.concatenate([scale[:1], scale[:-1]], axis=0)     # the register of row r - 1
        q = quantize(quant_quotients(y, sq, lo, hi, acc), qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated42(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated42(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_weight_per_group" and K < H:
            w = np.repeat(w.reshape(-1)[:H // K], K).reshape(1, H)   # W + group
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            st = _rsum((vg - mean) ** 2) / K
        else:
            mean = np.zeros((vg.shape[0], 1), acc)
            st = _rsum(vg * vg) / K
        rstd = 1 / np.sqrt(st + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        rb, vh, nb = rstd, vhat, nrm
        if b == "gated_bwd_rstd_recomputed_eps_squared":
            rb = 1 / np.sqrt(st + eps * eps)
            vh = ((vg - mean) * rb).reshape(R, H)
            nb = vh * w if bias is None else vh * w + bias
        dn = dy * s if nbg else dy
        vv = vh.reshape(-1, K)
        g = (dn * w).reshape(-1, K)
        proj = vv * (_rsum(g * vv) / K)
        if norm == "layer_norm":
            dv = rb * (g - _rsum(g) / K - proj)
        else:
            dv = rb * (g - proj)
        dv = dv.reshape(R, H)
        zf = nb
        if b == "gated_dz_bias_left_out" and nbg and bias is not None:
            zf = vh * w                                      # the bias left out
        dx, dz = gated_dx_dz(dv, dy, zf, x, s, ds, nbg)
        if b == "gated_dz_product_in_input_dtype" and nbg and d in HALF:
            dz = _store(dy * nb, d).astype(acc) * ds         # a 16-bit multiply
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vh, x0.shape, d)
        if b == "gated_dweight_from_normed_output":
            grads["weight"] = _store((dn * nb).sum(axis=0), d)
        if b == "gated_dparams_block_partial_stored" and R > 4:
            r0 = ((R - 1) // 4) * 4                          # the last block's partial, stored
            grads["weight"] = _store((dn[r0:] * vh[r0:]).sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dn[r0:].sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt42(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt42(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        R, C = x.shape
        wf, bf = w, bias
        if b == "dyt_channel_from_block_local_offset" and x.size > 256 and 256 % C:
            ch = ((np.arange(x.size) % 256) % C).reshape(R, C)     # the program's start left out
            wf = None if w is None else w.reshape(-1)[ch]
            bf = None if bias is None else bias.reshape(-1)[ch]
        y = affine(t, wf, bf)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        if b == "dyt_bwd_dy_read_column_major" and R > 1:
            dy = np.ascontiguousarray(dy.reshape(C, R).T)   # element (r, j) from the flat index j * rows + r
        g = dy if wf is None else dy * wf
        if b == "dyt_dtanh_one_minus_t_squared":
            gd = g * ((1 - t) * (1 - t))
        else:
            r = 1 / np.cosh(a * x)
            gd = g * (r * r)
        dx = gd * a
        gx = gd * x
        if b == "dyt_dalpha_row_tail_tile_dropped" and C % 32:
            gx = gx[:, :(C // 32) * 32]                      # whole 32-wide tiles only
        da = _rsum(gx).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_bf16_dalpha_truncated" and d == "bfloat16":
            grads["alpha"] = _bf16_truncated(np.reshape(da, np.shape(inp["alpha"])))
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly42(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly42(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        us = [x ** 3, x ** 2, x]
        rs = []
        for u in us:
            uu = u[:, :H - 1] if b == "poly_sumsq_last_column_masked" and H > 1 else u     # cols < H - 1
            sc = np.max(np.abs(uu), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = sc * np.sqrt(_rsum((uu / sc) ** 2) / H)
            if b == "poly_rstd_without_root":
                rs.append(1 / (rms * rms + eps))
            else:
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=rms_dx)
        if b == "poly_dx_row_pointer_early" and R > 1:
            grads["x"] = np.ascontiguousarray(_prev_row(grads["x"].reshape(-1, H))).reshape(x0.shape)
        if b == "poly_dweight_tree_drops_odd_row":
            dw = np.array([_tree_sum(_rsum(dy * h).reshape(-1)) for h in hs], dtype=acc)
            grads["weight"] = _store(dw.reshape(np.shape(inp["weight"])), d)
        if b == "poly_dweight_float32_for_float64" and d == "float64":
            f = np.float32
            dw = np.array([_rsum((dy * h).astype(f)).sum(dtype=f) for h in hs], dtype=f)
            grads["weight"] = _store(dw.reshape(np.shape(inp["weight"])), d)
        if b == "poly_dbias_from_dx_in_dy_buffer" and bias is not None:
            db = grads["x"].astype(acc).sum()                # dy's buffer now holds dx
            grads["bias"] = _store(np.reshape(db, np.shape(bias)), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_half2_stats_drop_odd_column": ("layer_norm/normal_bf16_2x3x7", "output.mean"),
    "ln_dx_row_pointer_early": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_proj_weighted_twice": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_mean_term_over_rows": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_zc_offset_added_in_input_dtype": ("layer_norm/normal_zc_bf16_24x40", "output.y"),
    "ln_weight_loaded_one_column_late": ("layer_norm/normal_f64_9x7", "output.y"),
    "rms_block_reduce_partial_warp_dropped": ("rms_norm/normal_eps1e-12_f64_6x100", "output.rstd"),
    "rms_outside_rsqrt_of_rms_plus_eps": ("rms_norm/std1e-3_eps1e-05_outside_f32_6x100", "output.rstd"),
    "rms_bwd_xhat_from_y_without_offset": ("rms_norm/normal_eps1e-05_gemma_f16_4x128", "grad.weight"),
    "rms_dweight_from_dx_in_x_buffer": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_bwd_rstd_recomputed_eps_outside": ("rms_norm/normal_eps0.3_f32_9x7", "grad.x"),
    "rms_zc_bwd_offset_twice": ("rms_norm/normal_eps1e-05_gemma_f16_4x128", "grad.x"),
    "an_ln_two_cta_means_averaged": ("add_norm/normal_p_rs_f64_9x7", "output.y"),
    "an_y1_bwd_guarded_by_bias1": ("add_norm/mean1e3_nobias_rms_zc_xnormal_par_bf16_4x64", "grad.x"),
    "an_f64_rowscale_loaded_as_float": ("add_norm/normal_p_rs_f64_9x7", "output.residual_out"),
    "an_residual_tail_tile_zero": ("add_norm/normal_f32_6x100", "output.residual_out"),
    "an_drowscale_row_pointer_early": ("add_norm/normal_p_rs_f64_9x7", "grad.rowscale"),
    "an_eps_added_after_rsqrt": ("add_norm/normal_f32_6x100", "output.y"),
    "nq_q_scale_of_previous_row": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_amax_partial_warp_dropped": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_ln_eps_only_in_rms_branch": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "nq_qmax_from_input_dtype_finfo": ("norm_quant/normal_rms_e4m3_dyn_f32_8x256", "output.scale"),
    "nq_x_rows_at_q_byte_pitch": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.q"),
    "nq_ln_weight_bias_swapped": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.q"),
    "gated_weight_per_group": ("gated_norm/normal_gs4_f64_3x7x12", "output.y"),
    "gated_dweight_from_normed_output": ("gated_norm/normal_gs4_f64_3x7x12", "grad.weight"),
    "gated_dz_bias_left_out": ("gated_norm/normal_ln_nbg_gs16_f32_6x48", "grad.z"),
    "gated_bwd_rstd_recomputed_eps_squared": ("gated_norm/normal_eps0.3_gs8_bf16_3x40", "grad.x"),
    "gated_dz_product_in_input_dtype": ("gated_norm/normal_nbg_zgate_sat_f16_4x64", "grad.z"),
    "gated_dparams_block_partial_stored": ("gated_norm/normal_ln_nbg_gs16_f32_6x48", "grad.weight"),
    "dyt_channel_from_block_local_offset": ("dyt/normal_f32_3x20x12", "output.y"),
    "dyt_bwd_dy_read_column_major": ("dyt/normal_f64_2x5x7", "grad.x"),
    "dyt_dalpha_row_tail_tile_dropped": ("dyt/heavy_tail_abig_f32_8x40", "grad.alpha"),
    "dyt_bf16_dalpha_truncated": ("dyt/normal_abig_bf16_16x64", "grad.alpha"),
    "dyt_dtanh_one_minus_t_squared": ("dyt/normal_f64_2x5x7", "grad.x"),
    "poly_rstd_without_root": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_sumsq_last_column_masked": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_dx_row_pointer_early": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_dweight_tree_drops_odd_row": ("poly_norm/normal_f64_3x7", "grad.weight"),
    "poly_dweight_float32_for_float64": ("poly_norm/normal_f64_3x7", "grad.weight"),
    "poly_dbias_from_dx_in_dy_buffer": ("poly_norm/normal_f64_3x7", "grad.bias"),
}
