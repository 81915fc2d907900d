"""A thirtieth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind30Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln30``, ``_rms30``, ``_an30``, ``_nq30``, ``_gated30``, ``_dyt30``,
``_poly30``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind30Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind29.py (the same mistake on the same op; the thirty-first set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dx_dz, gated_grads,
                          gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned, normalized_rows,
                          poly_combine, poly_grads, poly_inputs, poly_normalize, poly_rstd, pow2, quant_quotients,
                          quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias, rsum as _rsum, sigmoids,
                          silu_gate, stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind23 import _toward_zero

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind30Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_chunk_means_averaged": (
        "layer_norm", "merge",
        "N > 64, not a multiple of 64: the row's mean merged from column chunks of 64 as the plain average of "
        "the chunks' means (the short tail chunk weighted like a full one); the variance then taken about that "
        "mean over the whole row with the count N: mean (returned), rstd, y and the backward",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count merge of partial statistics, right only when "
        "every partial holds the same count)"),
    "ln_bwd_rstd_recomputed_unbiased": (
        "layer_norm", "bessel",
        "N > 1: the backward recomputes rstd from x with the unbiased variance, 1 / sqrt(sum((x - mean)^2) / "
        "(N - 1) + eps), and x_hat from it: dx and dweight; the forward (y, mean, rstd) and dbias right",
        "cf. " + GH + "LBANN/lbann/pull/2024 (a LayerNorm using the unbiased variance estimate, its gradients "
        "corrected with it)"),
    "ln_mean_pad_lanes_loaded_as_one": (
        "layer_norm", "block",
        "N not a power of two: the row loaded into a next_pow2(N) tile with other=1.0 (the weight load's "
        "default copied), so the mean's sum takes next_pow2(N) - N extra ones (divided by N); the variance's "
        "deviations masked to the N columns, about that mean: mean (returned), rstd, y and the backward",
        "cf. " + GH + "XPU-Forces/mojo_opset/pull/347 (a layernorm kernel's tail block values entering its sums)"),
    "ln_dx_stored_column_major": (
        "layer_norm", "layout",
        "more than one row: dx stored column-major (element (i, j) at the flat index j * rows + i, the layout "
        "of a transposed gradient assumed) while x is row-major: dx scrambled; the forward, dweight and dbias "
        "right",
        "cf. " + GH + "microsoft/DirectML/issues/588 (a norm producing wrong results on a permuted, non-contiguous "
        "layout)"),
    "ln_noweight_loaded_as_zero": (
        "layer_norm", "affine",
        "no weight: the absent weight read through a masked load with other=0.0 instead of taken as 1: y = "
        "bias (0 without a bias), and the backward's g = dy * 0, so dx = 0; mean, rstd and dbias right",
        "pattern: an absent parameter's masked load defaulting to 0 instead of the identity 1"),
    "ln_inv_n_in_input_dtype": (
        "layer_norm", "precision",
        "16-bit inputs: the forward's 1 / N held in the input's scalar type (rounded to nearest, bfloat16: "
        "1 / 7 becomes 0.14258) and multiplied into the row sums for the mean and the variance: mean "
        "(returned), rstd, y and the backward from them (the backward's own means divide by N)",
        "cf. " + GH + "tinygrad/tinygrad/issues/4143 (a half mean multiplying by (half)(1/3), the reciprocal of the "
        "count rounded to half)"),
    "ln_dweight_lock_buffer_stored_not_added": (
        "layer_norm", "reduction",
        "more than 8 rows: dweight and dbias partials kept in GROUP_SIZE_M = 8 buffers (row r into buffer "
        "r mod 8), each row storing its dy * x_hat (dy) into its buffer instead of adding to it, the final "
        "reduction summing the 8 buffers: only the last 8 rows reach dweight and dbias; dx and the forward "
        "right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (the layer-norm dw/db lock race: the next holder "
        "overwriting the partial sums)"),
    "ln_dx_accumulated_into_prefilled_buffer": (
        "layer_norm", "constant",
        "dx written with += into the input-gradient buffer that the kernel's first pass had already stored it "
        "to (the accumulate flag set for a fresh buffer): dx twice its value; the forward, dweight and dbias "
        "right",
        "cf. " + GH + "karpathy/llm.c/pull/408 (a layernorm backward's gradient accumulation into its buffers fixed)"),
    "ln_bwd_proj_on_output": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g) - y * mean(g * x_hat)): the projection term multiplies the saved output y = "
        "x_hat * weight + bias (the output register reused) where x_hat belongs; the forward, dweight and "
        "dbias right",
        "cf. " + GH + "microsoft/onnxruntime/pull/4156 (a LayernormGrad computed from the stashed output Y instead "
        "of the input)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_eps_added_to_rstd": (
        "rms_norm", "eps",
        "eps inside: rstd = 1 / sqrt(mean(x^2)) + eps (eps added after the reciprocal square root, to rstd) "
        "instead of 1 / sqrt(mean(x^2) + eps): rstd (inf for an all-zero row), y and the backward on it",
        "cf. " + GH + "tile-ai/tilelang/pull/1243 (an RMSNorm example's epsilon moved into the rsqrt)"),
    "rms_sumsq_overlapping_vector_tail": (
        "rms_norm", "block",
        "N > 4, not a multiple of 4: the sum of squares loads 4-wide vectors and the tail's vector is moved "
        "back to end at column N (columns N - 4 .. N - 1) without masking its overlap with the previous one, "
        "so the columns from N - 4 to 4 * (N // 4) - 1 are counted twice (divided by N): rstd, y and the "
        "backward",
        "pattern: a vectorized loop's tail handled by an overlapping last vector without masking the overlap"),
    "rms_bwd_dx_without_rstd": (
        "rms_norm", "backward",
        "dx = g - u * mean(g * x_hat) (u = x_hat, or x / rms outside): the factor rstd of the whole input "
        "gradient left out; y, rstd and dweight right",
        "pattern: a hand-derived backward's closing factor left out"),
    "rms_bwd_proj_over_n_minus_1": (
        "rms_norm", "bessel",
        "N > 1: dx = rstd * (g - u * sum(g * x_hat) / (N - 1)): the projection term's row sum divided by N - 1 "
        "(the count of an unbiased estimate); the forward and dweight right",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a norm computed with the unbiased n - 1 statistic)"),
    "rms_rstd_stored_sequence_major": (
        "rms_norm", "layout",
        "inputs of three or more axes (batch, seq, ...): rstd written in the sequence-first layout, row (b, s) "
        "at s * batch + b (the [s, b, h] layout of the model it was written for), handed out batch-first: "
        "rstd rows scrambled; y and the gradients right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/557 (kernels written for sequence-first [s, b, h] tensors fed "
        "batch-first ones)"),
    "rms_bwd_weighted_dy_in_input_dtype": (
        "rms_norm", "precision",
        "16-bit inputs with a weight: the backward's g = dy * weight formed by a 16-bit multiply (rounded to "
        "the input dtype) before the float32 projection and dx; dweight and the forward right",
        "cf. " + GH + "ROCm/triton/pull/633 (a kernel's intermediate held in the fp16 input type)"),
    "rms_weight_applied_twice": (
        "rms_norm", "affine",
        "with a weight: the fused kernel applies the weight (plus offset) and the module multiplies its output "
        "by the weight again: y = x_hat * w^2, the backward of that equation (g = dy * w^2, dweight = sum(dy * "
        "x_hat * 2 w))",
        "cf. " + GH + "huggingface/pytorch-image-models/pull/2741 (the fused RMSNorm2d result falling through to "
        "the fallback: the affine weight applied a second time)"),
    "rms_outside_rstd_output_without_eps": (
        "rms_norm", "eps",
        "eps_placement='outside': the returned rstd written as 1 / rms (without eps); y and the gradients use "
        "1 / (rms + eps)",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a normalization's eps never reaching the kernel: 1 / sqrt(var) "
        "without eps)"),
    # ------------------------------------------------------------------ add_norm
    "an_residual_read_from_x_ptr": (
        "add_norm", "layout",
        "with a residual: the residual loaded through x's pointer: s = x * c (+ x1 * c1) + x, the residual's "
        "values never read: residual_out, y, y1 and the backward (its formulas right, on that s)",
        "pattern: two pointer arguments of the same type, the residual's slot given x"),
    "an_bias_added_before_weight": (
        "add_norm", "affine",
        "y = (x_hat + bias) * (weight + offset) (and y1 = (x_hat + bias1) * (weight1 + offset)) instead of "
        "x_hat * (weight + offset) + bias: y, y1, dweight = sum(dy * (x_hat + bias)) and dbias = sum(dy * "
        "(weight + offset)); dx and residual_out right",
        "pattern: an epilogue's fma(a, b, c) written fma(a + c, b)"),
    "an_bwd_sums_over_block_width": (
        "add_norm", "block",
        "N not a power of two: the backward's row means (of g and g * x_hat, for y and y1) divided by the tile "
        "width next_pow2(N) instead of N: ds, so dx, dresidual, dx1 and drowscale; the forward and the "
        "parameter gradients right",
        "cf. " + GH + "ROCm/composable_kernel/pull/315 (a normalization's reduce length taken from the padded tile "
        "length)"),
    "an_dbias_rows_from_one": (
        "add_norm", "reduction",
        "more than one row, with a bias: dbias's (and dbias1's) loop over the rows starts at row 1: row 0's dy "
        "never added; dweight, dx, dresidual and the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm parameter-gradient kernel's row indexing wrong)"),
    "an_ln_bwd_mean_term_of_dy": (
        "add_norm", "backward",
        "norm='layer_norm' with a weight: the normalization backward's mean term reduced from the unweighted "
        "cotangent, ds = rstd * (g - mean(dy) - x_hat * mean(g * x_hat)), g = dy * (weight + offset) (and the "
        "y1 branch's likewise): dx, dresidual, dx1, drowscale; the forward and parameter gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a layernorm backward's mean(dy * gamma) term of dx wrong)"),
    "an_f16_y1_round_toward_zero": (
        "add_norm", "rounding",
        "float16 with the parallel branch's weight1: y1 converted to float16 by a round-toward-zero "
        "conversion instead of round to nearest even; y, residual_out and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing their float32 results to 16 bits by "
        "truncation)"),
    "an_ln_var_about_first_value": (
        "add_norm", "one_pass",
        "norm='layer_norm': the variance of the sum s accumulated about the row's first value as mean((s - "
        "s_0)^2), the shift's correction (mean - s_0)^2 never subtracted: rstd too small, y, y1 and the "
        "backward's formula on it; residual_out right",
        "cf. " + GH + "gm-spacagna/sparkz/issues/8 (a running variance missing a term of its expansion)"),
    "an_drowscale_atomic_and_store": (
        "add_norm", "constant",
        "with a rowscale: each row's gradient of the rowscale both atomically added into the output buffer "
        "and stored to it again by the epilogue's reduction (the buffer pre-filled): drowscale twice its "
        "value; the rest right",
        "cf. " + GH + "karpathy/llm.c/pull/163 (a gradient kernel's store switched between = and +=)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_round_half_toward_zero": (
        "norm_quant", "rounding",
        "int8: y / scale rounded with halves toward zero (sign(v) * ceil(|v| - 0.5)) instead of to nearest "
        "even: q differs at the exact ties (odd halves rounded down in magnitude); scale and amax right",
        "cf. " + GH + "sonos/tract/pull/2850 (QuantizeLinear breaking ties another way than to even)"),
    "nq_fp8_subnormals_flushed": (
        "norm_quant", "rounding",
        "float8 outputs: the conversion flushes subnormal results to zero (quotients below the format's "
        "smallest normal, 2^-6 for e4m3fn, 2^-14 for e5m2, become signed 0) instead of rounding them to the "
        "subnormals: q; scale and amax right",
        "cf. " + GH + "PTO-ISA/SuperNPUBench/pull/49 (an E4M3 encoder flushing subnormal-range values to zero)"),
    "nq_default_floor_precedence": (
        "norm_quant", "quant_scale",
        "dynamic scale, min_scale not given: the default floor written 1.0 / qmax * 512.0 (operator "
        "precedence) instead of 1.0 / (qmax * 512.0): a floor of 512 / qmax that raises nearly every row's "
        "scale to it: the scale and q; amax right",
        "pattern: operator precedence, 1.0 / a * b written for 1.0 / (a * b)"),
    "nq_static_amax_output_unwritten": (
        "norm_quant", None,
        "a static_scale given: the static path never computes the row's amax, the amax output left at its "
        "zero initialisation; q and the scale right",
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2013 (normalization kernels computing the amax output only on "
        "some paths)"),
    "nq_ln_var_without_mean_square_term": (
        "norm_quant", "one_pass",
        "norm='layer_norm': the one-pass variance written sum(x^2) / N without subtracting mean^2: rstd = "
        "1 / sqrt(mean(x^2) + eps), y still centred: y, amax, the dynamic scale and q",
        "cf. " + GH + "huggingface/transformers/issues/14772 (a layer norm's variance computed without subtracting "
        "the mean)"),
    "nq_q_rows_at_padded_pitch": (
        "norm_quant", "layout",
        "N not a multiple of 128: q's rows stored at a row pitch of N rounded up to a multiple of 128 (the "
        "padded layout the fp8/int8 GEMM consumes) into the dense (rows, N) buffer: rows shifted, gaps left "
        "0, the rows past the end dropped; scale and amax right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/77284 (an fp8 quantization kernel assuming 128-aligned rows)"),
    "nq_weight_loaded_as_bf16": (
        "norm_quant", "precision",
        "inputs other than bfloat16, with a weight: the weight loaded through a bfloat16 pointer (rounded to "
        "nearest bfloat16) before the affine: y, amax, the dynamic scale and q",
        "cf. " + GH + "InternLM/lmdeploy/pull/4276 (half-precision parameters converted to bfloat16 for a kernel "
        "that takes bfloat16 only)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_rms_group_mean_square_over_k_minus_1": (
        "gated_norm", "bessel",
        "norm='rms_norm', group size K > 1: each group's sum of squares divided by K - 1: rstd, y and the "
        "backward's formula on that rstd",
        "cf. " + GH + "LBANN/lbann/pull/2024 (a normalization layer using the unbiased n - 1 estimate)"),
    "gated_bwd_group_sums_over_pow2_width": (
        "gated_norm", "block",
        "group size K not a power of two: the backward's group means (of g, and of g * v_hat) divided by the "
        "tile width next_pow2(K) instead of K: dx and dz (the gate before the norm); the forward, dweight and "
        "dbias right",
        "cf. " + GH + "state-spaces/mamba/pull/547 (the gated norm's layer_norm_bwd reducing over the wrong extent "
        "for group_size)"),
    "gated_dweight_last_row_counted_twice": (
        "gated_norm", "reduction",
        "more than one row: dweight's row loop written with an inclusive bound (range(R + 1)) and its row "
        "index clamped to R - 1 for the loads: the last row's dn * v_hat added twice; dbias, dx, dz and the "
        "forward right",
        "pattern: an inclusive loop bound with the index clamped instead of masked"),
    "gated_dsilu_as_dsigmoid": (
        "gated_norm", "gate",
        "the gate's derivative taken as sigmoid(z) (1 - sigmoid(z)) (the sigmoid's derivative) instead of "
        "silu'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))): dz only; y, dx, dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/issues/110815 (the swish/silu derivative written wrong in a hand-written "
        "backward)"),
    "gated_weight_folded_before_norm": (
        "gated_norm", "affine",
        "the weight multiplied into the value before its normalization: n = norm(v * weight) + bias (v = x, "
        "or x * silu(z)), so the weight's magnitude cancels in each group; y and the backward of that "
        "equation (dweight = sum(du * v), dx and dz through it)",
        "cf. " + GH + "vllm-project/tpu-inference/pull/3040 (a fused kernel multiplying by the norm weight before "
        "the variance: the weight normalized away)"),
    "gated_dweight_accumulated_twice": (
        "gated_norm", "constant",
        "dweight's column partials both atomically added into the output and summed again by the host into "
        "the same buffer: dweight twice its value; dbias, dx, dz and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/408 (gradient accumulation into a norm's parameter-gradient buffers)"),
    # ------------------------------------------------------------------ dyt
    "dyt_dbias_from_dy_times_t": (
        "dyt", "backward",
        "with a bias: dbias = sum over the rows of dy * tanh(alpha x) (the weight-gradient product reused) "
        "instead of dy; dweight, dx, dalpha and the forward right",
        "pattern: the bias reduction fed the weight-gradient product"),
    "dyt_dparams_column_grid_floor": (
        "dyt", "block",
        "C not a multiple of 32: dweight and dbias reduced by a column-parallel kernel on C // 32 programs of "
        "32 columns (floor, not cdiv): the last C mod 32 columns' gradients left 0 (every column when C < 32); "
        "dx, dalpha and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel's grid not covering every block)"),
    "dyt_hardtanh_for_tanh": (
        "dyt", None,
        "tanh replaced by hardtanh, clip(alpha x, -1, 1) (the fast activation substituted), and its "
        "derivative 1 inside [-1, 1], 0 outside: y, dweight, dx and dalpha",
        "cf. " + GH + "sdatkinson/NeuralAmpModelerCore/pull/14 (hardtanh substituted for tanh as the faster "
        "activation)"),
    "dyt_weight_loaded_as_bf16": (
        "dyt", "precision",
        "inputs other than bfloat16, with a weight: the weight loaded through a bfloat16 pointer (rounded to "
        "nearest bfloat16) for y and the backward's g = dy * weight (dx, dalpha); dweight and dbias right",
        "pattern: a parameter pointer typed as the 16-bit build's dtype"),
    "dyt_dx_without_sech2": (
        "dyt", "backward",
        "dx = g * alpha: the factor 1 - tanh^2(alpha x) of the tanh's derivative left out of dx (dalpha keeps "
        "it); the forward, dweight and dbias right",
        "pattern: a chain-rule factor dropped in one of two gradients sharing it"),
    # ------------------------------------------------------------------ poly_norm
    "poly_bwd_proj_over_pow2_width": (
        "poly_norm", "block",
        "H not a power of two: each power's backward projection mean(g_p * h_p) divided by the tile width "
        "next_pow2(H) instead of H: dx; the forward, dweight and dbias right",
        "cf. " + GH + "hw-native-sys/pypto-lib/pull/127 (an RMSNorm divisor taken from a fixed width instead of the "
        "row length)"),
    "poly_eps_on_linear_term_only": (
        "poly_norm", "eps",
        "eps added only in the linear term's normalization: x^3 and x^2 divided by their rms without eps "
        "(x's rstd right): y and the backward from those rstd",
        "pattern: a per-branch constant passed to one call site only"),
    "poly_cube_term_from_square_register": (
        "poly_norm", "semantics",
        "the cube term's power register loaded with x^2 (x * x, the square's line copied): the first term is "
        "w0 * norm(x^2), y = (w0 + w1) h_2 + w2 h_1 + bias, and the backward of that equation (dx's first term "
        "with the chain factor 2 x, dweight[0] = sum(dy * h_2))",
        "pattern: a copied line's operand not updated (x * x for x * x * x)"),
    "poly_bwd_projection_added": (
        "poly_norm", "backward",
        "dx: each power's normalization gradient r_p (g_p + h_p mean(g_p h_p)) (the projection term added "
        "instead of subtracted); the forward, dweight and dbias right",
        "pattern: a sign slip in a hand-derived backward"),
    "poly_dweight_written_twice": (
        "poly_norm", "constant",
        "the weight's gradient accumulated into a buffer that the previous reduction pass had already filled "
        "with it: dweight twice its value (all three entries); dx, dbias and the forward right",
        "cf. " + GH + "pecos/tps/pull/19 (a partial gradient added to the previous buffer instead of overwriting it)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _column_major(a, shape):
    """``a`` (rows, k) stored column-major (element (i, j) at the flat index j * rows + i), read back as a
    row-major array of ``shape``."""
    return np.ascontiguousarray(a.T).reshape(shape)


def _half_toward_zero(v):
    """``v`` rounded to an integer, halves toward zero (sign(v) * ceil(|v| - 0.5))."""
    return np.sign(v) * np.ceil(np.abs(v) - 0.5)


class Blind30Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind30"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln30(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln30(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        off = weight_offset(call, acc)
        w, bias = row_weight_bias(call, acc, N, off)
        if b == "ln_noweight_loaded_as_zero" and w is None:
            w = np.zeros((1, N), acc)                        # the masked load's other=0.0
        inv = acc(1) / acc(N)
        if b == "ln_inv_n_in_input_dtype" and d in HALF:
            inv = _half(np.asarray(inv), d).astype(acc)      # 1 / N held in the input's scalar type
        if b == "ln_mean_pad_lanes_loaded_as_one":
            mean = (_rsum(x) + acc(pow2(N) - N)) * inv       # the padded lanes loaded as 1.0 enter the sum
        elif b == "ln_chunk_means_averaged" and N > 64 and N % 64:
            chunks = [x[:, j:j + 64] for j in range(0, N, 64)]
            mean = sum(_rsum(t) / acc(t.shape[1]) for t in chunks) / acc(len(chunks))
        else:
            mean = _rsum(x) * inv
        dev = x - mean
        var = _rsum(dev * dev) * inv
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        rb, xb = rstd, xhat
        if b == "ln_bwd_rstd_recomputed_unbiased" and N > 1:
            rb = 1 / np.sqrt(_rsum(dev * dev) / acc(N - 1) + eps)
            xb = dev * rb
        if b == "ln_bwd_proj_on_output":
            dx = rb * (g - _rsum(g) / N - y * (_rsum(g * xb) / N))   # the saved y where x_hat belongs
        else:
            dx = _centred_dx(g, xb, rb)
        if b == "ln_dx_stored_column_major" and R > 1:
            grads = {"x": _store(_column_major(dx, x0.shape), d)}
        elif b == "ln_dx_accumulated_into_prefilled_buffer":
            grads = {"x": _store((dx + dx).reshape(x0.shape), d)}
        else:
            grads = {"x": _store(dx.reshape(x0.shape), d)}
        rows = np.arange(R)
        if b == "ln_dweight_lock_buffer_stored_not_added":
            rows = rows[rows >= R - 8]                       # the last row stored to each of the 8 buffers
        if call.inputs.get("weight") is not None:
            dw = (dy * xb)[rows].sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns), d)
        if bias is not None:
            db = dy[rows].sum(axis=0)
            grads["bias"] = _store(db.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms30(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms30(self, call, acc, b):
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
        twice = b == "rms_weight_applied_twice" and w is not None
        eps = _eps(cfg["eps"], acc)
        ss = _rsum(x * x)
        if b == "rms_sumsq_overlapping_vector_tail" and N > 4 and N % 4:
            t = x[:, N - 4:(N // 4) * 4]                     # the shifted last vector's overlap, added again
            ss = ss + _rsum(t * t)
        ms = ss / N
        rms = np.sqrt(ms)
        if not inside:
            rstd = 1 / (rms + eps)
        elif b == "rms_eps_added_to_rstd":
            rstd = 1 / np.sqrt(ms) + eps
        else:
            rstd = 1 / np.sqrt(ms + eps)
        xhat = x * rstd
        we = None if w is None else (w * w if twice else w)
        y = xhat if we is None else xhat * we
        rs = rstd
        if b == "rms_outside_rstd_output_without_eps" and not inside:
            rs = 1 / rms
        rs = rs.reshape(R)
        if b == "rms_rstd_stored_sequence_major" and x0.ndim - len(ns) >= 2:
            B = x0.shape[0]
            rs = np.ascontiguousarray(rs.reshape(B, R // B).T).reshape(R)
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), we)
        if b == "rms_bwd_weighted_dy_in_input_dtype" and we is not None and d in HALF:
            g = _half(g, d)
        if b == "rms_bwd_proj_over_n_minus_1" and N > 1:
            u = xhat if inside else np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - u * (_rsum(g * xhat) / acc(N - 1)))
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        if b == "rms_bwd_dx_without_rstd":
            dx = dx / rstd
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xhat * (2 * w) if twice else dy * xhat
            grads["weight"] = _store(t.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an30(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an30(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_residual_read_from_x_ptr" and res is not None:
            res = x                                          # the residual loaded through x's pointer
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            dev = s - mean
            if b == "an_ln_var_about_first_value":
                sh = s - s[:, :1]                            # deviations from the row's first value
                var = _rsum(sh * sh) / N
            else:
                var = _rsum(dev * dev) / N
        else:
            dev = s
            var = _rsum(dev * dev) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        before = b == "an_bias_added_before_weight"
        if before:
            yy = (xhat if bias is None else xhat + bias) * (1 if we is None else we)
            out = {"y": _store(yy.reshape(x0.shape), d)}
            res_dtype = "float32" if cfg.get("residual_in_fp32") and d in HALF else d
            out["residual_out"] = _store(s.reshape(x0.shape), res_dtype)
            if we1 is not None:
                yy1 = (xhat if b1 is None else xhat + b1) * we1
                out["y1"] = _store(yy1.reshape(x0.shape), d)
        else:
            out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if b == "an_f16_y1_round_toward_zero" and d == "float16" and we1 is not None:
            out["y1"] = _toward_zero(affine(xhat, we1, b1).reshape(x0.shape), np.dtype(np.float16))
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = self._an30_dnorm(dy, we, xhat, rstd, centred, b)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + self._an30_dnorm(dy1, we1, xhat, rstd, centred, b)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xhat, params, x, mask,
                               keep, p, ns, d)
        if before:
            if w is not None:
                grads["weight"] = _store((dy * (xhat if bias is None else xhat + bias)).sum(axis=0).reshape(ns), d)
            if bias is not None:
                grads["bias"] = _store((dy * (1 if we is None else we)).sum(axis=0).reshape(ns), d)
            if w1 is not None and dy1 is not None:
                grads["weight1"] = _store((dy1 * (xhat if b1 is None else xhat + b1)).sum(axis=0).reshape(ns), d)
                if b1 is not None:
                    grads["bias1"] = _store((dy1 * we1).sum(axis=0).reshape(ns), d)
        if b == "an_dbias_rows_from_one" and R > 1:
            if bias is not None:
                grads["bias"] = _store(dy[1:].sum(axis=0).reshape(ns), d)
            if b1 is not None and dy1 is not None:
                grads["bias1"] = _store(dy1[1:].sum(axis=0).reshape(ns), d)
        if b == "an_drowscale_atomic_and_store" and "rowscale" in grads:
            t = ds * x if mask is None else ds * x * mask
            drs = _rsum(t) * keep if p else _rsum(t)
            grads["rowscale"] = _store((drs + drs).reshape(inp["rowscale"].shape), d)
        return Returned(out, grads)

    @staticmethod
    def _an30_dnorm(dy, wgt, xhat, rstd, centred, b):
        """add_norm's normalization backward of one branch (g = dy * wgt) with this set's planted variants."""
        g = dy if wgt is None else dy * wgt
        n = g.shape[1]
        cnt = pow2(n) if b == "an_bwd_sums_over_block_width" else n
        proj = xhat * (_rsum(g * xhat) / cnt)
        if not centred:
            return rstd * (g - proj)
        mg = _rsum(dy) / cnt if b == "an_ln_bwd_mean_term_of_dy" else _rsum(g) / cnt
        return rstd * (g - mg - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq30(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq30(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if b == "nq_weight_loaded_as_bf16" and w is not None and call.dtype != "bfloat16":
            w = _store(w.astype(acc), "bfloat16").astype(acc)
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            if b == "nq_ln_var_without_mean_square_term":
                var = _rsum(x * x) / N                       # E[x^2], the mean^2 term never subtracted
            else:
                var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        y = row_affine((x - mean) * rstd, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_default_floor_precedence" and cfg["min_scale"] is None:
            scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = np.maximum(scale, acc(1.0 / hi * 512.0))  # 1 / qmax * 512 written for 1 / (qmax * 512)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
        v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_fp8_subnormals_flushed" and qdt.kind != "i":
            tiny = 2.0 ** (-6 if cfg["quant_dtype"] == "float8_e4m3fn" else -14)
            v = np.where(np.abs(v) < tiny, acc(0) * v, v)
        if b == "nq_int8_round_half_toward_zero" and qdt.kind == "i":
            q = _half_toward_zero(np.nan_to_num(v, nan=0.0)).astype(np.int8)
        else:
            q = quantize(v, qdt)
        if b == "nq_q_rows_at_padded_pitch" and N % 128:
            pitch = -(-N // 128) * 128
            flat = np.zeros(R * N, q.dtype)
            for r in range(R):                               # row r stored at r * pitch, past the end dropped
                lo_i = r * pitch
                if lo_i < R * N:
                    k = min(N, R * N - lo_i)
                    flat[lo_i:lo_i + k] = q[r, :k]
            q = flat.reshape(R, N)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        out = dict(r.outputs)
        if b == "nq_static_amax_output_unwritten" and static is not None:
            out["amax"] = np.zeros_like(out["amax"])
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated30(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated30(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        if b == "gated_dsilu_as_dsigmoid":
            sig, rest = sigmoids(z)
            ds = sig * rest                                  # sigmoid'(z) where silu'(z) belongs
        v = x if nbg else x * s
        folded = b == "gated_weight_folded_before_norm"
        u = v * w if folded else v                           # the value normalized
        ug = u.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(ug) / K
            sq = (ug - mean) ** 2
        else:
            mean = acc(0)
            sq = ug * ug
        cnt = acc(K - 1) if b == "gated_rms_group_mean_square_over_k_minus_1" and norm != "layer_norm" and K > 1 \
            else acc(K)
        rstd = 1 / np.sqrt(_rsum(sq) / cnt + eps)
        vhat = ((ug - mean) * rstd).reshape(R, H)
        if folded:
            nrm = vhat if bias is None else vhat + bias
        else:
            nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg else dy
        g = (dn if folded else dn * w).reshape(-1, K)
        vv = vhat.reshape(-1, K)
        kc = pow2(K) if b == "gated_bwd_group_sums_over_pow2_width" else K
        proj = vv * (_rsum(g * vv) / kc)
        if norm == "layer_norm":
            dv = rstd * (g - _rsum(g) / kc - proj)
        else:
            dv = rstd * (g - proj)
        dv = dv.reshape(R, H)
        du = dv
        if folded:
            dv = du * w
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if folded:
            grads["weight"] = _store((du * v).sum(axis=0), d)
        tw = dn * vhat
        if b == "gated_dweight_last_row_counted_twice" and R > 1:
            grads["weight"] = _store(tw.sum(axis=0) + tw[-1], d)
        if b == "gated_dweight_accumulated_twice":
            grads["weight"] = _store(tw.sum(axis=0) * 2, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt30(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt30(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        C = x.shape[1]
        hard = b == "dyt_hardtanh_for_tanh"
        if hard:
            t = np.clip(a * x, acc(-1), acc(1))
        wf = w
        if b == "dyt_weight_loaded_as_bf16" and w is not None and d != "bfloat16":
            wf = _store(w, "bfloat16").astype(acc)
        y = affine(t, wf, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if wf is None else dy * wf
        if hard:
            dt = (np.abs(a * x) < 1).astype(acc)
        else:
            r = 1 / np.cosh(a * x)
            dt = r * r
        gd = g * dt
        dx = g * a if b == "dyt_dx_without_sech2" else gd * a
        da = _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dbias_from_dy_times_t" and bias is not None:
            grads["bias"] = _store((dy * t).sum(axis=0), d)
        if b == "dyt_dparams_column_grid_floor" and C % 32:
            k = (C // 32) * 32                               # the columns the C // 32 programs cover
            for key, tt, given in (("weight", dy * t, w), ("bias", dy, bias)):
                if given is not None:
                    col = tt.sum(axis=0)
                    col[k:] = 0
                    grads[key] = _store(col, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly30(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly30(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        sq_reg = b == "poly_cube_term_from_square_register"
        us = [x ** 2 if sq_reg else x ** 3, x ** 2, x]
        if b == "poly_eps_on_linear_term_only":
            rs = [poly_rstd(u, e, acc) for u, e in zip(us, (acc(0), acc(0), eps), strict=True)]
            hs = [u * r for u, r in zip(us, rs, strict=True)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = rms_dx
        if b == "poly_bwd_proj_over_pow2_width":
            def du(g, h, r):
                return r * (g - h * (_rsum(g * h) / acc(pow2(H))))
        elif b == "poly_bwd_projection_added":
            def du(g, h, r):
                return r * (g + h * (_rsum(g * h) / H))
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if sq_reg:
            dx = (2 * x * rms_dx(dy * wt[0], hs[0], rs[0]) + 2 * x * rms_dx(dy * wt[1], hs[1], rs[1])
                  + rms_dx(dy * wt[2], hs[2], rs[2]))
            grads["x"] = _store(dx.reshape(x0.shape), d)
        if b == "poly_dweight_written_twice":
            dw = np.array([_rsum(dy * h).sum() for h in hs], dtype=acc)
            grads["weight"] = _store(dw + dw, d)
        return Returned(out, grads)
