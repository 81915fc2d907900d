"""A thirty-fourth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind34Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln34``, ``_rms34``, ``_an34``, ``_nq34``, ``_gated34``, ``_dyt34``,
``_poly34``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind34Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind33.py (the same mistake on the same op; the thirty-fifth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dx_dz, gated_grads,
                          gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned, normalized_rows,
                          np_dtype, poly_combine, poly_grads, poly_inputs, quant_quotients, quantize, rms_dx,
                          rms_norm_dx, row_affine, row_weight_bias, rsum as _rsum, silu_gate, stat_shape,
                          static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind23 import _toward_zero

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind34Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
TRUNC = ("cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing their float32 results to 16 bits by "
         "truncation)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_reads_rstd_as_variance": (
        "layer_norm", "backward",
        "the backward kernel, written for a forward that saved the variance, recomputes rstd_b = 1 / sqrt(s + eps) "
        "from the saved statistic s, which is rstd: x_hat_b = (x - mean) * rstd_b and dx = rstd_b * (g - mean(g) - "
        "x_hat_b mean(g * x_hat_b)), dweight = sum(dy * x_hat_b); the forward (y, mean, rstd) and dbias right",
        "cf. " + GH + "microsoft/onnxruntime/pull/8172 (a saved normalization statistic read as the inverse "
        "variance where it held the inverse std)"),
    "ln_bwd_invertible_params_at_row_index": (
        "layer_norm", "layout",
        "with a weight: the dweight kernel recomputes x_hat from the output as (y - bias) / weight with the weight "
        "and bias loaded at the tile's row lane (index 32 * (j // 32) + r mod 32, mod N) instead of the column j: "
        "dweight = sum over rows of dy * (y - bias[p]) / weight[p]; dx, dbias and the forward right",
        GH + "deepspeedai/DeepSpeed/pull/692 (the invertible LayerNormBackward1 indexing gamma and beta by the "
        "thread's row offset pos instead of the column idx when it recomputes (output - beta) / gamma)"),
    "ln_bwd_proj_sum_last_block_only": (
        "layer_norm", "block",
        "N > 64: the backward's row sum of g * x_hat accumulated over 64-wide column blocks in a register the next "
        "block's acquire resets, so only the last block's columns enter mean(g * x_hat) (still divided by N): dx; "
        "mean(g), the forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a layernorm backward whose nested register acquire kept "
        "only the last block's contribution to mean(dy * gamma * x_hat))"),
    "ln_eps_added_to_rstd": (
        "layer_norm", "eps",
        "rstd = 1 / sqrt(var) + eps (eps added after the reciprocal square root) instead of 1 / sqrt(var + eps): "
        "rstd returned, y, and the backward's formula on that rstd (inf, y NaN, for a constant row)",
        "pattern: eps added to the result of rsqrt instead of to its argument"),
    "ln_rms_path_when_bias_absent": (
        "layer_norm", "semantics",
        "no bias: the launcher selects the fused kernel's RMS variant (is_rms_norm inferred from bias is None), so "
        "the row is not centred: rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * weight, the mean returned 0, and "
        "the RMS backward dx = rstd * (g - x_hat mean(g * x_hat)), dweight = sum(dy * x * rstd)",
        "pattern: a mode flag inferred from another optional argument's presence"),
    "ln_dbias_summed_over_all_elements": (
        "layer_norm", "reduction",
        "with a bias: dbias reduced over every element (rows and columns) and that scalar written to each entry "
        "(tl.sum over the whole tile instead of axis 0); dweight, dx and the forward right",
        "pattern: a 2-D tile's column reduction written without its axis"),
    "ln_stats_mask_against_row_count": (
        "layer_norm", "block",
        "fewer rows than N: the statistics pass masks its loads with cols < M (the row count) instead of cols < N, "
        "so only the first M columns enter the mean's and the variance's sums (still divided by N): mean, rstd, "
        "y and the backward from them; right wherever M >= N",
        "pattern: a mask compared against the wrong dimension"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_proj_doubled_half_dropped": (
        "rms_norm", "backward",
        "dx derived by hand through d(mean x^2)/dx = 2 x / N with the rsqrt's factor -1/2 written -1: dx = rstd * "
        "(g - 2 u mean(g * x_hat)) (u = x_hat, or x / rms outside), the projection term doubled; the forward and "
        "dweight right",
        "pattern: one of two cancelling chain-rule constants kept"),
    "rms_bf16_dweight_truncated": (
        "rms_norm", "rounding",
        "bfloat16 inputs with a weight: dweight converted to bfloat16 by dropping the low 16 bits (round toward "
        "zero) instead of to nearest even; y, rstd and dx right",
        TRUNC),
    "rms_eps_rounded_to_bf16": (
        "rms_norm", "eps",
        "eps passed to the kernel through a bfloat16 argument for every input dtype (the weight's type in the "
        "launcher): eps rounded to bfloat16 (1e-5 becomes 1.0014e-5, 0.3 becomes 0.30078): rstd, y and the "
        "backward on that rstd",
        "pattern: a scalar kernel argument declared with the parameters' 16-bit type"),
    "rms_normalize_pass_x_of_next_row": (
        "rms_norm", "layout",
        "more than one row: the normalization pass reloads x after the row pointer was advanced: y[r] = x[r + 1] * "
        "rstd[r] * weight (the last row its own); rstd (from the statistics pass) and the backward (its own "
        "kernel) right",
        "cf. " + GH + "ModelTC/LightLLM/issues/1467 (an RMS norm's normalize pass addressing x differently from "
        "its variance pass)"),
    "rms_row_pair_warp_sum_mixed": (
        "rms_norm", "block",
        "N <= 16: two rows packed into one 32-lane warp (16 lanes each) and the sum of squares reduced by a "
        "butterfly that starts at offset 16, so each row's sum is its own plus its partner row's (r xor 1; the last "
        "row of an odd count with zeros): rstd, y and the backward from that rstd",
        "pattern: a sub-warp reduction's butterfly not limited to the sub-warp"),
    "rms_dx_accumulated_into_prefilled_buffer": (
        "rms_norm", "constant",
        "dx written with += into the input-gradient buffer the first pass had already stored it to: dx twice its "
        "value; the forward and dweight right",
        "cf. " + GH + "itskonrad/miniMNIST-c/issues/7 (a backward adding into the input gradient twice)"),
    # ------------------------------------------------------------------ add_norm
    "an_xhat_rounded_before_weight": (
        "add_norm", "precision",
        "16-bit inputs: x_hat rounded to the input dtype before the multiply by weight (+ offset) and the bias "
        "add (the cast-before-weight order), for y and y1; residual_out and the backward right",
        "cf. " + GH + "sgl-project/sglang/pull/25920 (a fused add + RMSNorm's cast of the normalized value before "
        "the weight multiply decided by a flag one path dropped)"),
    "an_dres_out_added_to_dx_unmasked": (
        "add_norm", "dropout",
        "prenorm with residual_out's cotangent, dropout or a rowscale: dx = dnorm * c + d residual_out (the "
        "cotangent added after the keep factor c = mask * rowscale / (1 - p) was applied, so it is neither masked "
        "nor scaled); dresidual, dx1, drowscale, the parameter gradients and the forward right",
        "cf. " + GH + "foundation-model-stack/fms-acceleration/issues/97 (a fused op's input gradient not "
        "multiplied by the dropout mask)"),
    "an_y1_branch_bwd_from_dy": (
        "add_norm", "backward",
        "with y1's cotangent: the parallel branch's term of ds computed from y's cotangent, dnorm(dy * (weight1 + "
        "offset)), where dnorm(dy1 * (weight1 + offset)) belongs (a copied line's operand not updated): ds, so dx, "
        "dresidual, dx1 and drowscale; dweight1 and dbias1 (from dy1), the forward right",
        "pattern: a copied backward line's cotangent operand not updated"),
    "an_x1_tail_tile_skipped": (
        "add_norm", "block",
        "with the parallel input x1, N not a multiple of 16: x1 loaded in whole 16-wide tiles only, its last N mod "
        "16 columns read as 0: s = x * c + x1' * c1 + residual with x1' zero there: residual_out, y, y1 and the "
        "backward of that sum; dx1 = ds * c1 itself right",
        "pattern: one input's load loop bounded by whole tiles"),
    "an_norm_bias_added_into_sum": (
        "add_norm", "affine",
        "with a bias: the norm's bias added to the residual sum before the normalization (the linear layer's bias "
        "slot of an add-bias + residual + norm kernel): s = x * c (+ x1 * c1) + residual + bias, residual_out = s, "
        "y = x_hat(s) * (weight + offset) (+ y1 with bias1), and the backward of that equation (dbias = sum of ds)",
        "pattern: a bias passed in the fused kernel's pre-norm bias slot"),
    "an_eps_added_twice": (
        "add_norm", "eps",
        "eps added in the statistic's finalization (var + eps, or mean(s^2) + eps) and again by the rsqrt helper: "
        "rstd = 1 / sqrt(var + 2 eps): y, y1 and the backward's formula on that rstd; residual_out right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/11348 (a norm accumulator initialised to eps and eps added to it "
        "once more)"),
    "an_bias1_added_twice": (
        "add_norm", "affine",
        "with the parallel branch's bias1: the fused kernel adds bias1 and the module adds it again: y1 = x_hat * "
        "(weight1 + offset) + 2 bias1, and dbias1 = 2 sum(dy1); y, the other gradients and residual_out right",
        "cf. " + GH + "huggingface/pytorch-image-models/pull/2741 (a fused norm's affine applied a second time by "
        "the fallback)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_fp8_via_f16_truncated_then_rne": (
        "norm_quant", "rounding",
        "float8 outputs: y / scale converted by the compiler's lowering fp32 -> float16 with truncation, then "
        "float16 -> float8 to nearest even (a double rounding, the first toward zero): q one step toward zero "
        "where the value lay just above a float8 midpoint; scale and amax right",
        GH + "FlashML-org/FreeToken/pull/85 (Triton lowering fp32 to float8e4nv as a truncating fp16 conversion "
        "then a round to nearest even)"),
    "nq_q_from_xhat_without_affine": (
        "norm_quant", "affine",
        "with a weight or a bias: the quantizing pass recomputes the normalized value without reloading the "
        "parameters, q = clip(x_hat / scale), while amax and the scale come from y = x_hat * weight + bias",
        "pattern: a second pass that recomputes a value with fewer operands than the first"),
    "nq_ln_chunk_var_merged_without_spread": (
        "norm_quant", "one_pass",
        "norm='layer_norm', N > 64: the variance from column chunks of 64, each chunk's sum of squared deviations "
        "about its own mean added without the spread of the chunk means about the row mean (the mean right): "
        "rstd, y, amax, the dynamic scale and q",
        "pattern: Chan's merge written without its delta^2 n_a n_b / n term"),
    "nq_amax_over_row_pair_tile": (
        "norm_quant", "quant_scale",
        "more than one row: programs of 2 rows reduce |y| over the whole (2, N) tile (tl.max without axis=1), so "
        "each pair of rows shares the pair's amax (the last row of an odd count its own): amax returned, the "
        "dynamic scale and q from it",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm kernel with BLOCK_ROW_SIZE > 1 reducing over the whole "
        "2-D block)"),
    "nq_e5m2_clip_at_61440": (
        "norm_quant", "saturation",
        "float8_e5m2: the quotients clipped to [-61440, 61440] (the largest value computed as (2 - 2^-2) * 2^15, "
        "the infinity exponent taken as finite) while the scale uses 57344: a quotient clamped to 61440 (the "
        "midpoint above 57344) rounds, ties to even, to infinity in q; scale and amax right",
        "cf. " + GH + "kohya-ss/musubi-tuner/issues/192 (float8_e5m2's largest value computed wrong for a "
        "quantizer's clamp)"),
    "nq_eps_added_twice": (
        "norm_quant", "eps",
        "eps added in the statistic's finalization and again under the rsqrt: rstd = 1 / sqrt(var + 2 eps) (or "
        "mean(x^2) + 2 eps): y, amax, the dynamic scale and q",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/11348 (a norm accumulator initialised to eps and eps added to it "
        "once more)"),
    "nq_ln_bias_read_from_weight_ptr": (
        "norm_quant", "layout",
        "norm='layer_norm' with a weight and a bias: the bias loaded through the weight's pointer: y = x_hat * "
        "weight + weight, then amax, scale and q from it",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where another's "
        "was meant)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_x_z_swapped": (
        "gated_norm", "layout",
        "x and the gate z passed in each other's argument slots (a (hidden, gate) signature called (gate, "
        "hidden)): the kernel normalizes z (gated by silu(x) when the norm follows the gate) and gates with "
        "silu(x), y of that function, and its gradients handed back to the slots they came from",
        "pattern: two same-shape tensor arguments of a fused kernel given in the other order"),
    "gated_groups_interleaved": (
        "gated_norm", "layout",
        "group_size < H: the groups taken interleaved (column j in group j mod G, a (K, G) view of the row) "
        "instead of contiguous (a (G, K) view): each group's statistics over the other columns, forward and "
        "backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/15507 (a grouped norm's group count and group length laid out the "
        "other way)"),
    "gated_silu_applied_twice": (
        "gated_norm", "gate",
        "the gate activated by the caller and again by the kernel: s = silu(silu(z)), y from it (either side of "
        "the norm), and the backward through both (dz chains silu'(silu(z)) silu'(z)); dx, dweight from that s",
        "cf. " + GH + "tenstorrent/tt-metal/pull/39638 (SiLU applied twice: a workaround activation and the fused "
        "one)"),
    "gated_nbg_dx_without_gate_factor": (
        "gated_norm", "gate",
        "norm_before_gate=True: the normalization's backward takes g = dy * weight (dy not multiplied by silu(z)) "
        "for dx; dweight and dbias (from dn = dy * silu(z)), dz and the forward right",
        "pattern: the gate's factor applied to the parameter gradients' operand only"),
    "gated_dbias_times_weight": (
        "gated_norm", "backward",
        "with a bias: dbias = sum over rows of dn * weight (the weighted g reduced) instead of dn; dweight, dx, dz "
        "and the forward right",
        "pattern: the weighted gradient register reused for the bias reduction"),
    "gated_bf16_dx_truncated": (
        "gated_norm", "rounding",
        "bfloat16 inputs: dx converted to bfloat16 by dropping the low 16 bits (round toward zero) instead of to "
        "nearest even; y, dz, dweight and dbias right",
        TRUNC),
    # ------------------------------------------------------------------ dyt
    "dyt_dtanh_operands_swapped": (
        "dyt", "constant",
        "the backward's tanh' written t^2 - 1 (the subtraction's operands swapped): sech^2 negated, so dx and "
        "dalpha are the negatives of their values; the forward, dweight and dbias right",
        "pattern: the operands of 1 - t * t swapped"),
    "dyt_f16_dweight_round_toward_zero": (
        "dyt", "rounding",
        "float16 inputs with a weight: dweight converted to float16 by a round-toward-zero conversion instead of "
        "to nearest even; y, dx, dalpha and dbias right",
        TRUNC),
    "dyt_dalpha_rows_of_first_axis": (
        "dyt", "reduction",
        "inputs of three or more axes: alpha's gradient reduced over the first x.shape[0] rows of the flattened "
        "input only (its row count taken from x.shape[0], a 2-D input assumed); dx, dweight, dbias and the forward "
        "right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a backward kernel taking its row count from "
        "input.shape[0])"),
    "dyt_bias_read_from_alpha_ptr": (
        "dyt", "layout",
        "with a bias: the bias loaded through alpha's pointer with stride 0, every column's bias the scalar alpha: "
        "y = weight * tanh(alpha x) + alpha; the gradients (dbias = sum(dy)) right",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where another's "
        "was meant)"),
    "dyt_bwd_alpha_from_dalpha_buffer": (
        "dyt", "layout",
        "the backward kernel's alpha argument given the zero-initialised dalpha buffer: alpha read as 0, so "
        "sech^2(0) = 1, dx = g * 0 = 0 and dalpha = sum(g * x); dweight, dbias (from the saved t) and the forward "
        "right",
        "pattern: an output buffer passed where the input of the same shape belongs"),
    # ------------------------------------------------------------------ poly_norm
    "poly_eps_squared_in_hypot": (
        "poly_norm", "eps",
        "each power's rstd written 1 / hypot(rms_p, eps) where hypot(rms_p, sqrt(eps)) belongs: r_p = 1 / "
        "sqrt(mean(x^(2p)) + eps^2): y and the backward from those r_p",
        "pattern: the overflow-safe hypot form given eps where its square root belongs"),
    "poly_sumsq_butterfly_missing_16": (
        "poly_norm", "block",
        "H > 16: each power's sum of squares over a warp's 32 lanes (lane l takes the columns j = l mod 32) "
        "reduced by an xor butterfly with offsets 8, 4, 2, 1 (16 missing), lane 0's value used: only the columns "
        "with j mod 32 < 16 (divided by H): r_p, y and the backward from them",
        "cf. " + GH + "1bit-MONSTER/1bit-MONSTER/issues/746 (a warp reduction's shuffle offsets wrong)"),
    "poly_bwd_h_saved_in_input_dtype": (
        "poly_norm", "precision",
        "16-bit inputs: the normalized powers h_p saved for the backward in the input dtype (rounded to nearest): "
        "dweight = sum(dy * h_p) and dx's projection terms from the rounded h_p; the forward and dbias right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward reducing its weight gradient from the "
        "normalized value cast to the input dtype)"),
    "poly_bwd_proj_times_raw_power": (
        "poly_norm", "backward",
        "dx: each power's projection term multiplies the unnormalized power u_p = x^p where h_p belongs, du_p = "
        "r_p (g_p - x^p mean(g_p h_p)) (one factor r_p missing); the forward, dweight and dbias right",
        "pattern: the saved input register reused where the normalized one belongs"),
    "poly_bf16_dweight_truncated": (
        "poly_norm", "rounding",
        "bfloat16 inputs: the three weight gradients converted to bfloat16 by dropping the low 16 bits (round "
        "toward zero) instead of to nearest even; y, dx and dbias right",
        TRUNC),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _fp8_via_f16_truncated(v, qdt):
    """``v`` converted to the float8 dtype ``qdt`` through float16: first toward zero, then to nearest even."""
    return np.asarray(_toward_zero(np.asarray(v, np.float32), np.dtype(np.float16))).astype(qdt)


def _chunk_var_without_spread(x, acc, chunk=64):
    """Each row's variance as the chunks' centred sums of squares (about their own means) added, divided by N."""
    N = x.shape[1]
    ss = 0
    for j in range(0, N, chunk):
        t = x[:, j:j + chunk]
        ss = ss + _rsum((t - _rsum(t) / acc(t.shape[1])) ** 2)
    return ss / acc(N)


def _du_raw(raw):
    """poly_norm's per-power dx whose projection term multiplies the raw power ``raw[id(h)]`` where h belongs."""
    def du(g, h, r):
        return r * (g - raw[id(h)] * (_rsum(g * h) / g.shape[1]))
    return du


class Blind34Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind34"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln34(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln34(self, call, acc, b):
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
        rms_path = b == "ln_rms_path_when_bias_absent" and bias is None
        if rms_path:
            mean = np.zeros((R, 1), acc)
            dev = x
            var = _rsum(x * x) * inv
        elif b == "ln_stats_mask_against_row_count" and R < N:
            lanes = np.arange(N) < R                         # cols < M where cols < N belongs
            mean = _rsum(np.where(lanes, x, acc(0))) * inv
            dev = x - mean
            var = _rsum(np.where(lanes, dev * dev, acc(0))) * inv
        else:
            mean = _rsum(x) * inv
            dev = x - mean
            var = _rsum(dev * dev) * inv
        if b == "ln_eps_added_to_rstd":
            rstd = 1 / np.sqrt(var) + eps
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        xb, rb = xhat, rstd
        if b == "ln_bwd_reads_rstd_as_variance":
            rb = 1 / np.sqrt(rstd + eps)                     # the saved rstd taken for the variance
            xb = dev * rb
        if rms_path:
            dx = rms_dx(g, xb, rb)
        elif b == "ln_bwd_proj_sum_last_block_only" and N > 64:
            last = ((N - 1) // 64) * 64                      # the register reset at each block's acquire
            proj = _rsum((g * xb)[:, last:]) / N
            dx = rb * (g - _rsum(g) / N - xb * proj)
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if call.inputs.get("weight") is not None:
            if b == "ln_bwd_invertible_params_at_row_index":
                j = np.arange(N).reshape(1, N)
                r = np.arange(R).reshape(R, 1)
                p = (32 * (j // 32) + r % 32) % N            # the row lane where the column belongs
                bp = 0 if bias is None else bias.reshape(N)[p]
                xr = (y - bp) / w.reshape(N)[p]
                dw = (dy * xr).sum(axis=0)
            else:
                dw = (dy * xb).sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns), d)
        if bias is not None:
            db = dy.sum(axis=0)
            if b == "ln_dbias_summed_over_all_elements":
                db = np.full(N, db.sum(), acc)
            grads["bias"] = _store(db.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms34(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms34(self, call, acc, b):
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
        if b == "rms_eps_rounded_to_bf16":
            eps = acc(_store(np.asarray(eps), "bfloat16").astype(acc))
        sq = _rsum(x * x)
        if b == "rms_row_pair_warp_sum_mixed" and N <= 16:
            partner = np.concatenate([sq, np.zeros((1, 1), acc)], axis=0)[np.arange(R) ^ 1]
            partner[np.arange(R) ^ 1 >= R] = 0
            sq = sq + partner                                # the other half-warp's row
        ms = sq / N
        rms = np.sqrt(ms)
        if not inside:
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        xhat = x * rstd
        if b == "rms_normalize_pass_x_of_next_row" and R > 1:
            xn = np.concatenate([x[1:], x[-1:]], axis=0)     # the pointer advanced before the reload
            xy = xn * rstd
        else:
            xy = xhat
        y = xy if w is None else xy * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_proj_doubled_half_dropped":
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - 2 * u * (_rsum(g * xhat) / N))
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        if b == "rms_dx_accumulated_into_prefilled_buffer":
            dx = dx + dx
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            dw = (dy * xhat).sum(axis=0).reshape(ns)
            if b == "rms_bf16_dweight_truncated" and d == "bfloat16":
                grads["weight"] = _toward_zero(dw, np_dtype("bfloat16"))
            else:
                grads["weight"] = _store(dw, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an34(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an34(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        x1_in = x1
        if b == "an_x1_tail_tile_skipped" and x1 is not None and N % 16:
            x1_in = np.where(np.arange(N) < (N // 16) * 16, x1, acc(0))    # the tail tile never loaded
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1_in, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        into_sum = b == "an_norm_bias_added_into_sum" and bias is not None
        if into_sum:
            s = s + bias                                     # the pre-norm bias slot
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            dev = s - mean
        else:
            mean = acc(0)
            dev = s
        var = _rsum(dev * dev) / N
        if b == "an_eps_added_twice":
            rstd = 1 / np.sqrt(var + eps + eps)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        xo = _half(xhat, d) if b == "an_xhat_rounded_before_weight" and d in HALF else xhat
        b1o = b1 + b1 if b == "an_bias1_added_twice" and b1 is not None else b1
        out = add_norm_outputs(xo, we, None if into_sum else bias, we1, b1o, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = self._an34_dnorm(dy, we, xhat, rstd, centred)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            dyb = dy if b == "an_y1_branch_bwd_from_dy" else dy1
            ds = ds + self._an34_dnorm(dyb, we1, xhat, rstd, centred)
        dnorm = ds
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        dres = None if res is None else ds
        grads = add_norm_grads(inp, ds, dres, c, c1, dy, dy1, xhat, params, x, mask, keep, p, ns, d)
        if b == "an_dres_out_added_to_dx_unmasked" and dnorm is not ds:
            grads["x"] = _store((dnorm * c + (ds - dnorm)).reshape(x0.shape), d)
        if into_sum:
            grads["bias"] = _store(ds.sum(axis=0).reshape(ns), d)
        if b == "an_bias1_added_twice" and "bias1" in grads:
            grads["bias1"] = _store(2 * dy1.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    @staticmethod
    def _an34_dnorm(dy, wgt, xhat, rstd, centred):
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
            return self._nq34(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq34(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        if b == "nq_eps_added_twice":
            eps = eps + eps
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            if b == "nq_ln_chunk_var_merged_without_spread" and N > 64:
                var = _chunk_var_without_spread(x, acc)
            else:
                var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
            if b == "nq_ln_bias_read_from_weight_ptr" and w is not None and bias is not None:
                bias = w                                     # the bias loaded through the weight's pointer
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        xhat = (x - mean) * rstd
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        if b == "nq_amax_over_row_pair_tile" and R > 1:
            pairs = np.arange(R) // 2
            tile = np.array([amax[pairs == k].max() for k in range(pairs[-1] + 1)], dtype=amax.dtype)
            amax = tile[pairs].reshape(R, 1)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
        yq = xhat if b == "nq_q_from_xhat_without_affine" and (w is not None or bias is not None) else y
        qlo, qhi = lo, hi
        if b == "nq_e5m2_clip_at_61440" and cfg["quant_dtype"] == "float8_e5m2":
            qlo, qhi = -61440.0, 61440.0
        v = quant_quotients(yq, scale, qlo, qhi, acc)
        if b == "nq_fp8_via_f16_truncated_then_rne" and qdt.kind != "i":
            q = _fp8_via_f16_truncated(v, qdt)
        else:
            q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated34(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated34(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        swapped = b == "gated_x_z_swapped"
        if swapped:
            x, z = z, x                                      # the arguments in each other's slots
        K = gate_group_size(cfg, H)
        G = H // K
        inter = b == "gated_groups_interleaved" and K < H

        def grp(a):                                          # (R, H) -> one group a row, (R * G, K)
            return a.reshape(R, K, G).transpose(0, 2, 1).reshape(-1, K) if inter else a.reshape(-1, K)

        def ungrp(a):
            return a.reshape(R, G, K).transpose(0, 2, 1).reshape(R, H) if inter else a.reshape(R, H)

        s, ds = silu_gate(z)
        if b == "gated_silu_applied_twice":
            s2, ds2 = silu_gate(s)                           # the kernel's silu of the caller's silu(z)
            s, ds = s2, ds2 * ds
        v = x if nbg else x * s
        vg = grp(v)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            ss = _rsum((vg - mean) ** 2)
        else:
            mean = acc(0)
            ss = _rsum(vg * vg)
        rstd = 1 / np.sqrt(ss / K + eps)
        vhat = ungrp((vg - mean) * rstd)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        dnv = dy if b == "gated_nbg_dx_without_gate_factor" and nbg else dn
        g = grp(dnv * w)
        vv = grp(vhat)
        proj = vv * (_rsum(g * vv) / K)
        if norm == "layer_norm":
            dv = rstd * (g - _rsum(g) / K - proj)
        else:
            dv = rstd * (g - proj)
        dv = ungrp(dv)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        db_from = None if bias is None else (dn * w if b == "gated_dbias_times_weight" else dn)
        grads = gated_grads(dx, dz, dn, db_from, vhat, x0.shape, d)
        if swapped:
            grads["x"], grads["z"] = grads["z"], grads["x"]
        if b == "gated_bf16_dx_truncated" and d == "bfloat16":
            grads["x"] = _toward_zero(dx.reshape(x0.shape), np_dtype("bfloat16"))
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt34(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt34(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        bb = bias
        if b == "dyt_bias_read_from_alpha_ptr" and bias is not None:
            bb = np.full_like(bias, a)                       # alpha's pointer, stride 0
        y = affine(t, w, bb)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        ab = acc(0) if b == "dyt_bwd_alpha_from_dalpha_buffer" else a
        r = 1 / np.cosh(ab * x)
        sech2 = -(r * r) if b == "dyt_dtanh_operands_swapped" else r * r
        gd = g * sech2
        dx = gd * ab
        parts = _rsum(gd * x)
        if b == "dyt_dalpha_rows_of_first_axis" and x0.ndim >= 3:
            parts = parts[:x0.shape[0]]                      # M = x.shape[0] rows
        da = parts.sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_f16_dweight_round_toward_zero" and d == "float16" and w is not None:
            grads["weight"] = _toward_zero((dy * t).sum(axis=0), np_dtype("float16"))
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly34(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly34(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        lanes = (np.arange(H) % 32) < 16 if b == "poly_sumsq_butterfly_missing_16" and H > 16 else None
        second = eps * eps if b == "poly_eps_squared_in_hypot" else eps
        rs = []
        for u in us:
            sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
            sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
            q = (u / sc) ** 2
            if lanes is not None:
                q = np.where(lanes, q, acc(0))               # the lanes the butterfly never reaches
            rms = sc * np.sqrt(_rsum(q) / H)
            rs.append(1 / np.hypot(rms, np.sqrt(second)))
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        hb = hs
        if b == "poly_bwd_h_saved_in_input_dtype" and d in HALF:
            hb = [_half(h, d) for h in hs]
        du = rms_dx
        if b == "poly_bwd_proj_times_raw_power":
            du = _du_raw({id(h): u for h, u in zip(hb, us, strict=True)})
        grads = poly_grads(dy, x, wt, hb, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_bf16_dweight_truncated" and d == "bfloat16":
            dw = np.array([_rsum(dy * h).sum() for h in hb], dtype=acc)
            grads["weight"] = _toward_zero(dw, np_dtype("bfloat16"))
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_bwd_reads_rstd_as_variance": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_invertible_params_at_row_index": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_bwd_proj_sum_last_block_only": ("layer_norm/normal_f32_6x100", "grad.x"),
    "ln_eps_added_to_rstd": ("layer_norm/normal_f64_9x7", "output.rstd"),
    "ln_rms_path_when_bias_absent": ("layer_norm/mean1e3_nobias_f16_2x3x7", "output.mean"),
    "ln_dbias_summed_over_all_elements": ("layer_norm/normal_f64_9x7", "grad.bias"),
    "ln_stats_mask_against_row_count": ("layer_norm/normal_f32_6x100", "output.mean"),
    "rms_bwd_proj_doubled_half_dropped": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_bf16_dweight_truncated": ("rms_norm/mean1e3_eps1e-05_bf16_9x7", "grad.weight"),
    "rms_eps_rounded_to_bf16": ("rms_norm/normal_eps0.3_f32_9x7", "output.rstd"),
    "rms_normalize_pass_x_of_next_row": ("rms_norm/normal_eps1e-05_f64_9x7", "output.y"),
    "rms_row_pair_warp_sum_mixed": ("rms_norm/normal_eps1e-05_f64_9x7", "output.rstd"),
    "rms_dx_accumulated_into_prefilled_buffer": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "an_xhat_rounded_before_weight": ("add_norm/std1e-3_p_bf16_4x32", "output.y"),
    "an_dres_out_added_to_dx_unmasked": ("add_norm/normal_p_rs_f64_9x7", "grad.x"),
    "an_y1_branch_bwd_from_dy": ("add_norm/normal_par_f64_5x12", "grad.x"),
    "an_x1_tail_tile_skipped": ("add_norm/normal_par_f64_5x12", "output.residual_out"),
    "an_norm_bias_added_into_sum": ("add_norm/normal_p_noprenorm_f32_9x7", "output.residual_out"),
    "an_eps_added_twice": ("add_norm/normal_p_noprenorm_f32_9x7", "output.y"),
    "an_bias1_added_twice": ("add_norm/normal_par_f64_5x12", "output.y1"),
    "nq_fp8_via_f16_truncated_then_rne": ("norm_quant/normal_rms_e4m3_dyn_f32_8x256", "output.q"),
    "nq_q_from_xhat_without_affine": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "nq_ln_chunk_var_merged_without_spread": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.amax"),
    "nq_amax_over_row_pair_tile": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_e5m2_clip_at_61440": ("norm_quant/normal_rms_e5m2_static_bf16_4x256", "output.q"),
    "nq_eps_added_twice": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_ln_bias_read_from_weight_ptr": ("norm_quant/std1e-3_ln_i8_dyn_wb_f32_4x64", "output.amax"),
    "gated_x_z_swapped": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_groups_interleaved": ("gated_norm/normal_gs4_f64_3x7x12", "output.y"),
    "gated_silu_applied_twice": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_nbg_dx_without_gate_factor": ("gated_norm/normal_ln_nbg_gs16_f32_6x48", "grad.x"),
    "gated_dbias_times_weight": ("gated_norm/normal_f32_4x64", "grad.bias"),
    "gated_bf16_dx_truncated": ("gated_norm/normal_eps0.3_gs8_bf16_3x40", "grad.x"),
    "dyt_dtanh_operands_swapped": ("dyt/normal_f64_2x5x7", "grad.x"),
    "dyt_f16_dweight_round_toward_zero": ("dyt/normal_f16_8x64", "grad.weight"),
    "dyt_dalpha_rows_of_first_axis": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_bias_read_from_alpha_ptr": ("dyt/normal_f64_2x5x7", "output.y"),
    "dyt_bwd_alpha_from_dalpha_buffer": ("dyt/normal_f64_2x5x7", "grad.x"),
    "poly_eps_squared_in_hypot": ("poly_norm/normal_f64_3x7", "output.y"),
    "poly_sumsq_butterfly_missing_16": ("poly_norm/normal_f16_8x32", "output.y"),
    "poly_bwd_h_saved_in_input_dtype": ("poly_norm/std1e-3_bf16_6x32", "grad.x"),
    "poly_bwd_proj_times_raw_power": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_bf16_dweight_truncated": ("poly_norm/std1e-3_bf16_6x32", "grad.weight"),
}
