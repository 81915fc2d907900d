"""A forty-eighth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind48Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln48``, ``_rms48``, ``_an48``, ``_nq48``, ``_gated48``, ``_dyt48``,
``_poly48``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind48Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
the diagnosis on these bugs (session 38). None of its bugs repeats one of tests/planted/blind.py, blind2.py,
..., blind47.py (the same mistake on the same op).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_input_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dyt_grads, dyt_inputs, eps_value as _eps,
                          gate_group_size, gated_dx_dz, gated_grads, gated_inputs, half as _half, kept,
                          norm_outputs, norm_quant_returned, normalized_rows, poly_combine, poly_grads,
                          poly_inputs, quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine,
                          row_weight_bias, rowscale_grad, rsum as _rsum, scale_floor, sigmoids, silu_gate,
                          stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind48Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
RESET = ("cf. " + GH + "pytorch/FBGEMM/pull/5927 (a kernel turned into a row-stride loop must reset its per-row "
         "state at the top of each iteration)")
GRID_CAP = ("cf. " + GH + "pytorch/FBGEMM/pull/5927 (a host-side grid capped without a grid-stride loop in the "
            "kernel silently drops the rows beyond it)")
ZC_FWD = (GH + "NVIDIA/Megatron-LM/pull/6859 (a norm's forward dropping zero_centered_gamma, weight + 1, while its "
          "backward honoured it)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_row_sums_carried_across_rows": (
        "layer_norm", "block",
        "more than 4 rows: the backward runs as a persistent kernel of 4 programs taking rows p, p + 4, p + 8, ... "
        "with its two row-sum accumulators (of g = dy * weight and of g * x_hat) initialised before the row loop "
        "instead of inside it: row r's mean(g) and mean(g * x_hat) include the sums of the program's earlier rows "
        "(rows 0..3 right): dx; the forward, dweight and dbias right",
        RESET),
    "ln_bwd_xhat_from_y_weight_not_divided": (
        "layer_norm", "backward",
        "with a weight (the memory-efficient backward that saves the output instead of the input): x_hat "
        "recomputed from the stored y as y - bias, the division by weight (+ offset) left out, x_b = x_hat * "
        "weight: dx's projection term and dweight = sum(dy * x_b); the forward, dbias and dx's mean term right",
        "cf. " + GH + "NVIDIA/apex/pull/1715 (a LayerNorm backward recomputing x_hat from the saved output, "
        "(y - beta) / gamma)"),
    "ln_f32_dx_stored_through_bf16": (
        "layer_norm", "precision",
        "float32 inputs: the input-gradient buffer allocated in bfloat16 (the autocast dtype of the surrounding "
        "model) and handed back widened: dx rounded to nearest bfloat16; the forward, dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/pull/192161 (a normalization backward producing its input gradient in "
        "another dtype than the input's under mixed dtypes)"),
    "ln_bwd_dx_rows_at_chunk_index": (
        "layer_norm", "layout",
        "more than 4 rows: the persistent backward's 4 programs load their rows grid-stride (rows p, p + 4, ...) "
        "but store the i-th row's dx at p * ceil(M / 4) + i (the contiguous-chunk schedule of the other kernel): "
        "dx rows scrambled, some rows left 0 and the stores past the end dropped; dweight, dbias and the forward "
        "right",
        "pattern: two row-scheduling conventions (grid-stride and chunked) mixed in a persistent kernel"),
    "ln_zc_offset_backward_only": (
        "layer_norm", "affine",
        "weight_offset set (zero-centred weight): the forward launcher does not pass the zero-centred flag, so "
        "y = x_hat * weight + bias with the raw weight, while the backward's g = dy * (weight + offset) (right); "
        "mean, rstd, dx and the parameter gradients right",
        "cf. " + ZC_FWD),
    "ln_dbias_stored_through_dweight_ptr": (
        "layer_norm", "layout",
        "with a weight and a bias: the column kernel stores its dbias accumulator through dweight's pointer (the "
        "store line copied), after dweight's own store: dweight holds sum(dy) and dbias is returned from its "
        "zero-initialised buffer; dx and the forward right",
        "cf. " + GH + "stephane-rivaud/ForwardLocalGradient/issues/2 (a bias's gradient assigned to weight.grad)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_outside_dweight_xhat_without_eps": (
        "rms_norm", "eps",
        "eps_placement='outside', with a weight: the dweight kernel recomputes x_hat as x / rms with rms = "
        "sqrt(mean(x^2)), the eps left out of the denominator (0 where rms is 0): dweight = sum(dy * x / rms) "
        "where sum(dy * x / (rms + eps)) belongs; y, rstd and dx right",
        "pattern: a recomputed denominator written without the eps its forward added"),
    "rms_rstd_weight_product_in_half": (
        "rms_norm", "precision",
        "16-bit inputs with a weight: the epilogue folds the row's rstd into the weight, a = rstd * (weight + "
        "offset), held in a half2 register of the input dtype (rounded), and y = x * a: y rounded twice; rstd and "
        "the backward right",
        "cf. " + GH + "vllm-project/vllm/pull/42379 (an RMSNorm epilogue whose multiply by the weight was moved "
        "to another dtype than the reference's)"),
    "rms_zc_offset_dropped_in_forward": (
        "rms_norm", "affine",
        "weight_offset set (zero-centred gamma), with a weight: the forward computes weight + offset into a "
        "variable and then multiplies by the raw weight, y = x_hat * weight; the backward honours the offset "
        "(g = dy * (weight + offset)); rstd, dx and dweight right",
        ZC_FWD),
    "rms_fwd_inplace_bwd_reads_y": (
        "rms_norm", "backward",
        "the forward writes y in place into x's buffer (the in-place variant used for inference, reused under "
        "autograd) and the backward loads 'x' from that buffer: x_b = y (as stored), x_hat_b = y * rstd with the "
        "saved rstd, dx = rstd * (g - u mean(g * x_hat_b)) and dweight = sum(dy * x_hat_b); y and rstd right",
        "cf. " + GH + "ggml-org/ggml/issues/1491 (an rms_norm backward reading a buffer that in-place aliasing "
        "had already overwritten)"),
    "rms_row_mask_against_n": (
        "rms_norm", "block",
        "more rows than N: the kernel's (rows, columns) tile masks its rows with rows < N (the column count) "
        "instead of rows < M, forward and backward: rows from N on never processed, their y, rstd and dx left 0 "
        "and their terms missing from dweight",
        "cf. " + GH + "thu-ml/TurboDiffusion/pull/103 (the row masks of a 2-D-tiled normalization kernel wrong "
        "for M not a multiple of the row block)"),
    "rms_y_rows_stored_at_padded_pitch": (
        "rms_norm", "layout",
        "N not a multiple of 8: y's rows stored at a row pitch of N rounded up to a multiple of 8 (the padded "
        "layout of the GEMM the kernel feeds) into the dense output: row r's values written from flat index "
        "r * pitch on, the gaps 0 and the stores past the end dropped; rstd and the backward right",
        "pattern: an output written with the row pitch of a padded layout into a dense buffer"),
    "rms_saved_rstd_holds_mean_square": (
        "rms_norm", "backward",
        "the rstd buffer written from the register of the mean square, mean(x^2), instead of rstd (y right, "
        "normalized with the right rstd in registers), and the backward loads that saved value as rstd: the "
        "returned rstd, dx = ms * (g - u mean(g * x * ms)) and dweight = sum(dy * x * ms)",
        GH + "flagos-ai/FlagGems/pull/5771 (rms_norm's forward storing var in the INV_RMS buffer, the backward "
        "reading it as the inverse rms)"),
    # ------------------------------------------------------------------ add_norm
    "an_bias_needs_weight": (
        "add_norm", "affine",
        "a bias without a weight: the epilogue adds the bias inside its 'weight is not None' branch, so y = x_hat "
        "(the bias never added); residual_out and the gradients (dbias = sum(dy)) right",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a layer_norm kernel assuming gamma and beta come in pairs)"),
    "an_dx1_without_keep_factor": (
        "add_norm", "dropout",
        "the parallel input x1 with dropout: dx1 stored as ds, its keep factor c1 = mask1 / (1 - p) never "
        "applied in the backward (dropped elements get a gradient, kept ones miss the 1 / (1 - p)); the forward, "
        "dx, dresidual and the parameter gradients right",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (dx1 of a parallel LayerNorm written without the factor its "
        "forward applied to x1)"),
    "an_rms_bias_added_after_rounding": (
        "add_norm", "precision",
        "norm='rms_norm' with a bias, 16-bit inputs: the RMS kernel (which has no bias) stores x_hat * (weight + "
        "offset) in the input dtype and a separate elementwise op adds the bias and rounds again: y rounded "
        "twice; residual_out and the gradients right",
        "cf. " + GH + "vllm-project/vllm/pull/52151 (a fused add + RMSNorm kernel whose intermediate was rounded "
        "to the 16-bit dtype where the reference keeps float32)"),
    "an_drowscale_before_dres_out": (
        "add_norm", "backward",
        "prenorm with residual_out's cotangent and a rowscale: drowscale reduced from the normalization's input "
        "gradient before residual_out's cotangent is added, sum(dnorm * x * mask) / (1 - p) where sum(ds * x * "
        "mask) / (1 - p) belongs; dx, dresidual, the parameter gradients and the forward right",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (an RMS prenorm backward adding the residual's gradient at the "
        "wrong point of the chain)"),
    "an_mask_row_stride_zero": (
        "add_norm", "dropout",
        "with keep-masks, more than one row: the masks loaded with a row stride of 0 (a (1, N) mask assumed), so "
        "every row is dropped with row 0's mask (mask1 alike), forward and backward: s, residual_out, y, dx, dx1 "
        "and drowscale",
        "cf. " + GH + "Dao-AILab/flash-attention/issues/314 (a fused dropout + LayerNorm reusing one dropout mask "
        "where each must be its own)"),
    "an_rows_grid_capped_128": (
        "add_norm", "block",
        "more than 128 rows: one program per row on a grid capped at 128 with no grid-stride loop, forward and "
        "backward: rows from 128 on never processed, their y, residual_out, dx, dresidual (and drowscale) left 0 "
        "and their terms missing from the parameter gradients",
        GRID_CAP),
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_of_y_rounded_to_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: the fused amax taken over y converted to the input dtype (rounded to nearest) while q is "
        "quantized from the float32 y: the amax returned and the dynamic scale from the rounded amax (q divided "
        "by that scale)",
        GH + "NVIDIA/TransformerEngine/pull/2355 (a normalization kernel's fused amax moved to the output_t "
        "representation of y)"),
    "nq_dyn_scale_mx_floor_rule": (
        "norm_quant", "scale_rounding",
        "dynamic scale: the scale taken by the MX shared-exponent rule, 2^(floor(log2(amax)) - emax) with emax = "
        "floor(log2(qmax)) (8 for e4m3fn, 15 for e5m2, 6 for int8), instead of amax / qmax, then scale_ub and "
        "the floor: the scale, and q (quotients up to twice 2^emax, saturated at qmax); amax right",
        "cf. " + GH + "vllm-project/vllm/pull/43557 (an E8M0 scale derived from the exponent of the block "
        "maximum, the block maximum then saturating)"),
    "nq_fp8_clipped_at_int8_max": (
        "norm_quant", "saturation",
        "float8 outputs: the quotients clipped to [-127, 127] (the clamp constant shared with the int8 branch) "
        "while the scale is amax / the float8 dtype's largest value: q saturated at 127; scale and amax right",
        "cf. " + GH + "vllm-project/vllm/pull/32201 (an fp8 quantizer whose clamp range disagreed with the "
        "maximum its scale was computed from)"),
    "nq_stats_per_128_column_group": (
        "norm_quant", "group",
        "N > 128, a multiple of 128: the normalization's statistics (the mean square, or the mean and variance) "
        "reduced per 128-column group (the group size of the block quantizer the kernel was derived from) "
        "instead of over the row: y, amax, the dynamic scale and q",
        "pattern: a per-group reduction constant of a block-quantizing kernel left in the per-token variant"),
    "nq_amax_output_of_xhat": (
        "norm_quant", None,
        "with a weight or a bias: the amax output written from the register of max |x_hat| (the normalized row "
        "before the affine) while the scale and q use max |y|: the returned amax; scale and q right",
        "pattern: a returned statistic stored from the register of an earlier stage"),
    "nq_weight_stride_zero": (
        "norm_quant", "layout",
        "with a weight: the weight loaded with a stride of 0 (the per-tensor parameter path), every column "
        "scaled by weight[0]: y = x_hat * weight[0] (+ bias), amax, the dynamic scale and q",
        "cf. " + GH + "openvinotoolkit/nncf/pull/526 (a per-channel scale handled with the per-tensor scale's "
        "layout)"),
    "nq_untuned_kernel_amax_not_computed": (
        "norm_quant", "quant_scale",
        "dynamic scale, N not a multiple of 256 (the hidden sizes of the tuned kernels): the general kernel "
        "never computes the row's amax, left 0, so the scale is its floor (min_scale, or 1 / (512 qmax)) and q "
        "saturates (0 with min_scale = 0); the amax returned 0",
        GH + "NVIDIA/TransformerEngine/pull/2061 (the untuned normalization kernels not computing the amax of "
        "the fused current-scaling path)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dsilu_without_z": (
        "gated_norm", "gate",
        "the gate's derivative written sigmoid(z) + sigmoid(z) (1 - sigmoid(z)), the factor z of the second "
        "term dropped: s' = sigmoid(z) (2 - sigmoid(z)): dz only; y, dx, dweight and dbias right",
        "pattern: a hand-written product rule for z * sigmoid(z)"),
    "gated_bwd_proj_unweighted": (
        "gated_norm", "backward",
        "the normalization's backward takes its projection's sum from dn * v_hat instead of g * v_hat (g = dn * "
        "weight): dv = rstd * (g - [mean(g)] - v_hat mean(dn * v_hat)): dx and dz (norm after the gate); the "
        "forward, dweight and dbias right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (an RMSNorm backward whose author had left the weight out of one "
        "product)"),
    "gated_bias_from_weight_ptr": (
        "gated_norm", "layout",
        "with a bias: the bias loaded through the weight's pointer, n = v_hat * weight + weight, forward and the "
        "backward's recomputed n (dz for the norm before the gate); dweight, dbias = sum(dn) and dx right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (norm kernels passing their affine parameters through the "
        "wrong pointers)"),
    "gated_grid_rows_from_two_leading_axes": (
        "gated_norm", "block",
        "inputs of four or more axes: the grid's row count taken as x.shape[0] * x.shape[1] (a (batch, seq, "
        "hidden) input assumed), forward and backward: only the first x.shape[0] * x.shape[1] rows of the "
        "flattened input processed, the others' y, dx and dz left 0 and their terms missing from dweight and "
        "dbias",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a kernel's row count derived from the leading axes of an "
        "input of another rank)"),
    "gated_bwd_rstd_saved_bf16": (
        "gated_norm", "precision",
        "each group's rstd saved for the backward in a bfloat16 buffer for every input dtype (rounded to "
        "nearest), the backward's v_hat, dv and dweight from it; the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/221 (a layer_norm forward saving its mean and rstd for the "
        "backward in a 16-bit dtype)"),
    "gated_no_group_size_as_8_groups": (
        "gated_norm", "group",
        "group_size=None: the launcher resolves the missing group size from the model's default ngroups = 8, K = "
        "H / 8, where None means one group over the whole hidden dimension: each eighth of the row normalized "
        "alone, forward and backward",
        "cf. " + GH + "state-spaces/mamba/pull/910 (RMSNormGated's group_size=None meaning one group, confused "
        "with the model's ngroups)"),
    # ------------------------------------------------------------------ dyt
    "dyt_dalpha_first_row_partial_only": (
        "dyt", "reduction",
        "more than one row: alpha's gradient reduced in two stages, one partial per row, and the host reads "
        "element 0 of the partial buffer (the second stage never launched): dalpha = row 0's sum(g * sech^2(alpha "
        "x) * x); dx, dweight, dbias and the forward right",
        "pattern: a two-stage reduction's second stage skipped"),
    "dyt_dalpha_uses_alpha_for_x": (
        "dyt", "backward",
        "alpha's gradient reduced as sum(g * sech^2(alpha x) * alpha) (the derivative of alpha x with respect to "
        "x reused where the one with respect to alpha, x, belongs); dx, dweight, dbias and the forward right",
        "pattern: a chain factor of one input reused for another"),
    "dyt_absent_bias_loaded_as_one": (
        "dyt", "affine",
        "a weight without a bias: the absent bias read through a masked load whose other=1.0 (the weight "
        "load's default copied), y = weight * tanh(alpha x) + 1; dx, dalpha and dweight right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (norm kernels loading absent affine parameters through "
        "their pointers)"),
    "dyt_rows_without_batch_stride": (
        "dyt", "layout",
        "inputs of three or more axes with more than one sample: x's row r loaded at its index within its "
        "sample (r mod rows-per-sample, the batch stride left out of x's pointer only): every sample computes "
        "with sample 0's x: y, dx, dalpha and dweight; dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a kernel indexing a 3-D input as if it were 2-D)"),
    "dyt_dalpha_rows_capped_48": (
        "dyt", "block",
        "more than 48 rows: alpha's per-row partials computed by a kernel launched on at most 48 programs (the "
        "core count) with no loop over the remaining rows: rows from 48 on missing from dalpha; dx, dweight, "
        "dbias and the forward right",
        GRID_CAP),
    "dyt_tanh_pade_unclamped": (
        "dyt", None,
        "tanh replaced by the fast rational approximation u (27 + u^2) / (27 + 9 u^2) of u = alpha x without the "
        "clamp to [-1, 1] it needs (off by a few percent near |u| = 1 and unbounded beyond): y; the backward "
        "(its own kernel, accurate tanh) right",
        "cf. " + GH + "huonw/fast-math/pull/6 (a continued-fraction tanh that is wrong for large |x| without "
        "clamping)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_weight_offset_by_one": (
        "poly_norm", "affine",
        "the three weights loaded at W + 1 + k (a packed [bias, w0, w1, w2] parameter buffer assumed), the load "
        "past the end masked to 0: y = w1 h_3 + w2 h_2 + 0 h_1 + bias, and the backward's g_p from the same "
        "shifted weights (dx); dweight and dbias right",
        "pattern: a parameter pointer offset for a packed layout the caller does not use"),
    "poly_bwd_proj_sum_carried_across_powers": (
        "poly_norm", "backward",
        "dx: the projection's row-sum accumulator not reset between the three powers, so mean(g_2 h_2) includes "
        "mean(g_3 h_3) and mean(g_1 h_1) both earlier ones: du_2 and du_1 wrong; the forward, dweight and dbias "
        "right",
        RESET),
    "poly_sumsq_loop_bound_block_width": (
        "poly_norm", "block",
        "H > 32: each power's sum of squares loops over column blocks with its bound written as the block width "
        "(range(0, BLOCK, BLOCK), one iteration) instead of H: only the first 32 columns enter the mean of "
        "squares (still divided by H): the three r_p, y and the backward's formula on them",
        "pattern: a loop bound written with the tile width where the row length belongs"),
    "poly_dx_accumulator_initialised_from_dy": (
        "poly_norm", "backward",
        "dx accumulated over the three powers in the buffer of dy (reused in place), which still holds dy: dx = "
        "dy + 3 x^2 du_3 + 2 x du_2 + du_1; the forward, dweight and dbias right",
        "cf. " + GH + "ggml-org/ggml/pull/1519 (a norm backward accumulating into a buffer aliasing the incoming "
        "gradient)"),
    "poly_bias_added_after_rounding": (
        "poly_norm", "precision",
        "16-bit inputs with a bias: y = w0 h_3 + w1 h_2 + w2 h_1 stored in the input dtype and the scalar bias "
        "added by a separate elementwise op, rounded again: y rounded twice; the gradients right",
        "pattern: an epilogue's bias add left to a separate 16-bit op"),
    "poly_norm_of_weighted_sum": (
        "poly_norm", "semantics",
        "the weighted sum normalized once instead of each power: y = rms_norm(w0 x^3 + w1 x^2 + w2 x) + bias "
        "(eps inside), and the backward of that equation (dx through the one norm, dweight[k] = sum(du x^p), "
        "dbias right)",
        "pattern: an equation's normalization moved outside its sum"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _carried(t, P=4):
    """Per-row sums ``t`` (rows, 1) accumulated over a persistent program's rows p, p + P, ... (never reset)."""
    t = t.copy()
    for r in range(P, t.shape[0]):
        t[r] = t[r] + t[r - P]
    return t


def _chunk_rows(a, P=4):
    """Rows of ``a`` loaded grid-stride by P programs and stored at the chunked schedule's index."""
    R = a.shape[0]
    C = -(-R // P)
    out = np.zeros_like(a)
    for p in range(P):
        for i, r in enumerate(range(p, R, P)):
            if p * C + i < R:
                out[p * C + i] = a[r]
    return out


def _padded_pitch(a, pitch):
    """Rows of ``a`` (R, N) written at a row pitch ``pitch`` >= N into a dense (R, N) buffer."""
    R, N = a.shape
    flat = np.zeros(R * N, a.dtype)
    for r in range(R):
        s = r * pitch
        if s >= R * N:
            break
        n = min(N, R * N - s)
        flat[s:s + n] = a[r, :n]
    return flat.reshape(R, N)


def _bf16(a):
    return np.asarray(a).astype(ml_dtypes.bfloat16).astype(a.dtype)


def _rstd_of(ms, rms, eps, placement):
    return 1 / (rms + eps) if placement == "outside" else 1 / np.sqrt(ms + eps)


class Blind48Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind48"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln48(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln48(self, call, acc, b):
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
        mean = _rsum(x) / N
        dv = x - mean
        var = _rsum(dv * dv) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        wf = w
        if b == "ln_zc_offset_backward_only" and w0 is not None and off:
            wf = w0.astype(acc).reshape(1, N)                # the zero-centred flag not passed to the forward
        y = affine(xhat, wf, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        g = dy if w is None else dy * w
        xb = xhat
        if b == "ln_bwd_xhat_from_y_weight_not_divided" and w is not None:
            ys = _store(y, d).astype(acc)                    # the saved output
            xb = ys if bias is None else ys - bias           # / weight left out
        if b == "ln_bwd_row_sums_carried_across_rows" and R > 4:
            sg, sgx = _carried(_rsum(g)), _carried(_rsum(g * xb))
            dx = rstd * (g - sg / N - xb * (sgx / N))
        else:
            dx = _centred_dx(g, xb, rstd)
        if b == "ln_bwd_dx_rows_at_chunk_index":
            dx = _chunk_rows(dx)
        if b == "ln_f32_dx_stored_through_bf16" and d == "float32":
            dx = _bf16(dx)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w0 is not None:
            grads["weight"] = _store((dy * xb).sum(axis=0).reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
        if b == "ln_dbias_stored_through_dweight_ptr" and w0 is not None and bias is not None:
            grads["weight"] = grads["bias"]                  # the second store through dweight's pointer
            grads["bias"] = _store(np.zeros(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms48(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms48(self, call, acc, b):
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
        ms = _rsum(x * x) / N
        rms = np.sqrt(ms)
        rstd = _rstd_of(ms, rms, eps, placement)
        xhat = x * rstd
        wf = w
        if b == "rms_zc_offset_dropped_in_forward" and w0 is not None and off:
            wf = w0.astype(acc).reshape(1, N)                # weight + offset computed, the raw weight used
        y = xhat if wf is None else xhat * wf
        if b == "rms_rstd_weight_product_in_half" and d in HALF and w is not None:
            y = x * _half(rstd * w, d)                       # a = rstd * w in a half2 register
        live = None
        if b == "rms_row_mask_against_n" and R > N:
            live = (np.arange(R) < N).reshape(R, 1)          # rows < N where rows < M belongs
            y = np.where(live, y, 0)
        if b == "rms_y_rows_stored_at_padded_pitch" and N % 8:
            y = _padded_pitch(y, -(-N // 8) * 8)
        saved = rstd
        if b == "rms_saved_rstd_holds_mean_square":
            saved = ms                                       # the mean square's register stored
        rout = saved if live is None else np.where(live, saved, 0)
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rout.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        g = dy if w is None else dy * w
        rb, xs = saved, x
        if b == "rms_fwd_inplace_bwd_reads_y":
            xs = _store(y, d).astype(acc)                    # x's buffer now holds y
        xb = xs * rb
        dx = rms_norm_dx(g, xs, xb, rb, rms, placement)
        if live is not None:
            dx = np.where(live, dx, 0)
            dy = np.where(live, dy, 0)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xb
            if b == "rms_outside_dweight_xhat_without_eps" and placement == "outside":
                t = dy * np.where(rms == 0, 0, x / np.where(rms == 0, 1, rms))
            grads["weight"] = _store(t.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an48(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an48(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_mask_row_stride_zero" and R > 1:
            mask = None if mask is None else np.broadcast_to(mask[:1], (R, N)).copy()
            mask1 = None if mask1 is None else np.broadcast_to(mask1[:1], (R, N)).copy()
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            var = _rsum((s - mean) ** 2) / N
        else:
            mean = np.zeros((R, 1), acc)
            var = _rsum(s * s) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = (s - mean) * rstd
        yb = bias
        if b == "an_bias_needs_weight" and we is None:
            yb = None                                        # the bias added in the weight's branch only
        out = add_norm_outputs(xhat, we, yb, we1, b1, s, x0.shape, cfg, d)
        if b == "an_rms_bias_added_after_rounding" and not centred and bias is not None and d in HALF:
            yr = _half(xhat if we is None else xhat * we, d)     # the RMS kernel's stored output
            out["y"] = _store((yr + bias).reshape(x0.shape), d)
        live = None
        if b == "an_rows_grid_capped_128" and R > 128:
            live = (np.arange(R) < 128).reshape(R, 1)
            for k in out:
                out[k] = np.where(live, out[k].reshape(R, N), 0).astype(out[k].dtype).reshape(x0.shape)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        if live is not None:
            dy = np.where(live, dy, 0)
            dy1 = None if dy1 is None else np.where(live, dy1, 0)
            dres_out = None if dres_out is None else np.where(live, dres_out, 0)
        dn = self._an48_dnorm(dy, we, xhat, rstd, centred)
        if dy1 is not None:
            dn = dn + self._an48_dnorm(dy1, we1, xhat, rstd, centred)
        ds = dn if dres_out is None else dn + dres_out
        grads = add_norm_input_grads(ds, c, c1, None if res is None else ds, x0.shape, d)
        if b == "an_dx1_without_keep_factor" and c1 is not None:
            grads["x1"] = _store(ds.reshape(x0.shape), d)    # c1 never applied
        grads.update(add_norm_affine_grads(inp, dy, dy1, xhat, (w, bias, w1, b1), ns, d))
        if inp.get("rowscale") is not None:
            dsr = dn if b == "an_drowscale_before_dres_out" else ds
            grads["rowscale"] = rowscale_grad(dsr, x, mask, keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    @staticmethod
    def _an48_dnorm(dy, wgt, xhat, rstd, centred):
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
            return self._nq48(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq48(self, call, acc, b):
        cfg, inp, d = call.config, call.inputs, call.dtype
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if b == "nq_weight_stride_zero" and w is not None:
            w = np.full(N, w.reshape(-1)[0])                 # weight[0] for every column
        xs = x
        if b == "nq_stats_per_128_column_group" and N > 128 and N % 128 == 0:
            xs = x.reshape(-1, 128)                          # the block quantizer's groups
        if cfg["norm"] == "layer_norm":
            mean = _rsum(xs) / xs.shape[1]
            var = _rsum((xs - mean) ** 2) / xs.shape[1]
            xhat = ((xs - mean) * (1 / np.sqrt(var + eps))).reshape(x.shape)
        else:
            xhat = (xs * (1 / np.sqrt(_rsum(xs * xs) / xs.shape[1] + eps))).reshape(x.shape)
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        ya = np.abs(y)
        if b == "nq_amax_of_y_rounded_to_input_dtype" and d in HALF:
            ya = np.abs(_half(y, d))                         # amax of the output_t values
        amax = np.max(ya, axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is None and b == "nq_untuned_kernel_amax_not_computed" and N % 256:
            amax = np.zeros_like(amax)                       # the general kernel never reduces it
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            if b == "nq_dyn_scale_mx_floor_rule":
                emax = int(np.floor(np.log2(hi)))
                _, e = np.frexp(np.where(amax > 0, amax, 1.0).astype(np.float64))
                scale = np.where(amax > 0, np.ldexp(1.0, (e - 1 - emax).astype(np.int64)), 0.0).astype(acc)
            else:
                scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        if b == "nq_fp8_clipped_at_int8_max" and cfg["quant_dtype"] != "int8":
            lo, hi = -127.0, 127.0                           # the int8 branch's clamp constant
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        if b == "nq_amax_output_of_xhat" and (w is not None or bias is not None):
            amax = np.max(np.abs(xhat), axis=1, keepdims=True, initial=0.0)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated48(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated48(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_no_group_size_as_8_groups" and cfg["group_size"] is None and H % 8 == 0:
            K = H // 8                                       # ngroups = 8 assumed
        s, ds = silu_gate(z)
        if b == "gated_dsilu_without_z":
            sig = sigmoids(z)[0]
            ds = sig * (2 - sig)                             # sig + sig (1 - sig): the z dropped
        eps = _eps(cfg["eps"], acc)
        bn = bias
        if b == "gated_bias_from_weight_ptr" and bias is not None:
            bn = w
        live = None
        if b == "gated_grid_rows_from_two_leading_axes" and x0.ndim > 3:
            live = (np.arange(R) < x0.shape[0] * x0.shape[1]).reshape(R, 1)

        def stats(v):
            vg = v.reshape(-1, K)
            if norm == "layer_norm":
                mean = _rsum(vg) / K
                sq = _rsum((vg - mean) ** 2)
            else:
                mean = np.zeros((vg.shape[0], 1), acc)
                sq = _rsum(vg * vg)
            return mean, 1 / np.sqrt(sq / K + eps)

        v = x if nbg else x * s
        mean, rstd = stats(v)
        vhat = ((v.reshape(-1, K) - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bn is None else vhat * w + bn
        y = nrm * s if nbg else nrm
        if live is not None:
            y = np.where(live, y, 0)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        if live is not None:
            dy = np.where(live, dy, 0)
        rb = rstd
        if b == "gated_bwd_rstd_saved_bf16":
            rb = _bf16(rstd)
            vhat = ((v.reshape(-1, K) - mean) * rb).reshape(R, H)
            nrm = vhat * w if bn is None else vhat * w + bn
        dn = dy * s if nbg else dy
        vv = vhat.reshape(-1, K)
        g = (dn * w).reshape(-1, K)
        pr = (dn.reshape(-1, K) if b == "gated_bwd_proj_unweighted" else g) * vv
        proj = vv * (_rsum(pr) / K)
        dv = g - _rsum(g) / K - proj if norm == "layer_norm" else g - proj
        dv = (rb * dv).reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt48(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt48(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        R, C = x.shape
        if b == "dyt_rows_without_batch_stride" and x0.ndim > 2 and x0.shape[0] > 1:
            S = R // x0.shape[0]
            x = x[np.arange(R) % S]                          # the batch stride left out of x's offset
            t = np.tanh(a * x)
        bf = bias
        if b == "dyt_absent_bias_loaded_as_one" and w is not None and bias is None:
            bf = np.ones((1, C), acc)                        # other=1.0 where the bias is absent
        tf = t
        if b == "dyt_tanh_pade_unclamped":
            u = a * x
            tf = u * (27 + u * u) / (27 + 9 * u * u)
        y = affine(tf, w, bf)
        return self._dyt48_bwd(call, acc, b, x, a, w, bias, t, {"y": _store(y.reshape(x0.shape), d)})

    def _dyt48_bwd(self, call, acc, b, x, a, w, bias, t, out):
        """dyt's backward (``out``: the forward's outputs)."""
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        R = x.shape[0]
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(a * x)
        gd = g * (r * r)
        dx = gd * a
        rows = _rsum(gd * (a if b == "dyt_dalpha_uses_alpha_for_x" else x))
        if b == "dyt_dalpha_first_row_partial_only" and R > 1:
            da = rows[0, 0]
        elif b == "dyt_dalpha_rows_capped_48" and R > 48:
            da = rows[:48].sum()
        else:
            da = rows.sum()
        return Returned(out, dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d))

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly48(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly48(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        if b == "poly_norm_of_weighted_sum":
            return self._poly48_one_norm(call, acc, x, wt, bias, eps)
        if b == "poly_weight_offset_by_one":
            wt = np.array([wt[1], wt[2], 0], dtype=acc)      # W + 1 + k, the load past the end 0
        us = [x ** 3, x ** 2, x]
        rs = []
        for u in us:
            uu = u[:, :32] if b == "poly_sumsq_loop_bound_block_width" and H > 32 else u
            sc = np.max(np.abs(uu), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            rms = sc * np.sqrt(_rsum((uu / sc) ** 2) / H)
            rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc)
        if b == "poly_bias_added_after_rounding" and bias is not None and d in HALF:
            y = _half(poly_combine(wt, hs, None, acc), d) + acc(np.asarray(bias).astype(acc).reshape(()))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
        if b in ("poly_bwd_proj_sum_carried_across_powers", "poly_dx_accumulator_initialised_from_dy"):
            dx = dy.copy() if b == "poly_dx_accumulator_initialised_from_dy" else np.zeros_like(x)
            acc_b = np.zeros((x.shape[0], 1), acc)
            for k, p in enumerate((3, 2, 1)):
                gp = dy * wt[k]
                bk = _rsum(gp * hs[k]) / H
                if b == "poly_bwd_proj_sum_carried_across_powers":
                    acc_b = acc_b + bk                       # never reset between the powers
                    bk = acc_b
                dp = rs[k] * (gp - hs[k] * bk)
                dx = dx + (dp if p == 1 else p * x ** (p - 1) * dp)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        return Returned(out, grads)

    def _poly48_one_norm(self, call, acc, x, wt, bias, eps):
        """poly_norm_of_weighted_sum: y = rms_norm(w0 x^3 + w1 x^2 + w2 x) + bias and its backward."""
        d, x0 = call.dtype, call.inputs["x"]
        H = x.shape[1]
        u = wt[0] * x ** 3 + wt[1] * x ** 2 + wt[2] * x
        sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
        sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
        r = 1 / np.hypot(sc * np.sqrt(_rsum((u / sc) ** 2) / H), np.sqrt(eps))
        h = u * r
        y = h if bias is None else h + acc(np.asarray(bias).astype(acc).reshape(()))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        du = rms_dx(dy, h, r)
        dx = du * (3 * wt[0] * x ** 2 + 2 * wt[1] * x + wt[2])
        grads = {"x": _store(dx.reshape(x0.shape), d),
                 "weight": _store(np.array([_rsum(du * x ** p).sum() for p in (3, 2, 1)], dtype=acc), d)}
        if bias is not None:
            grads["bias"] = _store(np.reshape(_rsum(dy).sum(), np.shape(bias)), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_bwd_row_sums_carried_across_rows": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_xhat_from_y_weight_not_divided": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_f32_dx_stored_through_bf16": ("layer_norm/normal_f32_6x100", "grad.x"),
    "ln_bwd_dx_rows_at_chunk_index": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_zc_offset_backward_only": ("layer_norm/normal_zc_bf16_24x40", "output.y"),
    "ln_dbias_stored_through_dweight_ptr": ("layer_norm/normal_f64_9x7", "grad.bias"),
    "rms_outside_dweight_xhat_without_eps": ("rms_norm/normal_eps0.3_outside_bf16_6x100", "grad.weight"),
    "rms_rstd_weight_product_in_half": ("rms_norm/normal_eps1e-05_bf16_2x3x7", "output.y"),
    "rms_zc_offset_dropped_in_forward": ("rms_norm/normal_eps1e-05_gemma_f16_4x128", "output.y"),
    "rms_fwd_inplace_bwd_reads_y": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_row_mask_against_n": ("rms_norm/normal_eps1e-05_f32_260x3", "output.y"),
    "rms_y_rows_stored_at_padded_pitch": ("rms_norm/normal_eps1e-05_f64_9x7", "output.y"),
    "rms_saved_rstd_holds_mean_square": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "an_bias_needs_weight": ("add_norm/normal_eps0.3_noweight_fp32res_bf16_1x50", "output.y"),
    "an_dx1_without_keep_factor": ("add_norm/normal_p_par_f64_5x12", "grad.x1"),
    "an_rms_bias_added_after_rounding": ("add_norm/sq_overflow_rms_f16_4x32", "output.y"),
    "an_drowscale_before_dres_out": ("add_norm/normal_p_rs_f64_9x7", "grad.rowscale"),
    "an_mask_row_stride_zero": ("add_norm/heavy_tail_p_f64_3x12", "output.residual_out"),
    "an_rows_grid_capped_128": ("add_norm/mean1e4_rs_xnormal_f32_130x3", "output.y"),
    "nq_amax_of_y_rounded_to_input_dtype": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.amax"),
    "nq_dyn_scale_mx_floor_rule": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.scale"),
    "nq_fp8_clipped_at_int8_max": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.q"),
    "nq_stats_per_128_column_group": ("norm_quant/normal_rms_e5m2_static_bf16_4x256", "output.q"),
    "nq_amax_output_of_xhat": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "nq_weight_stride_zero": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.q"),
    "nq_untuned_kernel_amax_not_computed": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "gated_dsilu_without_z": ("gated_norm/normal_ln_gs2_f64_5x6", "grad.z"),
    "gated_bwd_proj_unweighted": ("gated_norm/normal_ln_gs2_f64_5x6", "grad.x"),
    "gated_bias_from_weight_ptr": ("gated_norm/normal_ln_gs2_f64_5x6", "output.y"),
    "gated_grid_rows_from_two_leading_axes": ("gated_norm/normal_gs8_f32_2x3x5x24", "output.y"),
    "gated_bwd_rstd_saved_bf16": ("gated_norm/normal_ln_gs2_f64_5x6", "grad.x"),
    "gated_no_group_size_as_8_groups": ("gated_norm/std1e-3_nbg_f16_4x32", "output.y"),
    "dyt_dalpha_first_row_partial_only": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_dalpha_uses_alpha_for_x": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_absent_bias_loaded_as_one": ("dyt/normal_nobias_f16_4x16x24", "output.y"),
    "dyt_rows_without_batch_stride": ("dyt/normal_f64_2x5x7", "output.y"),
    "dyt_dalpha_rows_capped_48": ("dyt/normal_f32_3x20x12", "grad.alpha"),
    "dyt_tanh_pade_unclamped": ("dyt/normal_f64_2x5x7", "output.y"),
    "poly_weight_offset_by_one": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_bwd_proj_sum_carried_across_powers": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_sumsq_loop_bound_block_width": ("poly_norm/normal_f32_2x3x40", "output.y"),
    "poly_dx_accumulator_initialised_from_dy": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_bias_added_after_rounding": ("poly_norm/normal_f16_8x32", "output.y"),
    "poly_norm_of_weighted_sum": ("poly_norm/normal_f64_3x7", "output.y"),
}
