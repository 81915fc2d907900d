"""A fortieth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind40Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln40``, ``_rms40``, ``_an40``, ``_nq40``, ``_gated40``, ``_dyt40``,
``_poly40``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind40Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
the diagnosis on these bugs (session 34). None of its bugs repeats one of tests/planted/blind.py, blind2.py,
..., blind39.py (the same mistake on the same op; the forty-first set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_affine_grads, add_norm_dims, add_norm_input_grads,
                          add_norm_outputs, add_norm_params, add_norm_rows, add_norm_sum, affine,
                          centred_dx as _centred_dx, dy_and_g, dyt_grads, dyt_inputs, eps_value as _eps,
                          gate_group_size, gated_dx_dz, gated_grads, gated_inputs, kept, norm_outputs,
                          norm_quant_returned, normalized_rows, poly_combine, poly_grads, poly_inputs, pow2,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, row_affine, row_weight_bias,
                          rowscale_grad, rsum as _rsum, scale_floor, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind40Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
INPLACE = ("cf. " + GH + "linkedin/Liger-Kernel/issues/272 (a Triton kernel's in-place gradient write corrupting a "
           "tensor another backward still reads)")
FLAX_F32 = ("cf. " + GH + "google/flax/pull/1804 (normalization layers computing in float32 whatever the input "
            "dtype, a float64 input downcast)")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_stats_over_row_pair_tile": (
        "layer_norm", "block",
        "more than one row: programs of two rows load a (2, N) tile and reduce the mean and the squared deviations "
        "over the whole tile (tl.sum without axis=1, divided by 2N): both rows of a pair centred and scaled by the "
        "pair's pooled mean and variance (the last row of an odd count by its own), the returned mean and rstd "
        "the pair's; y and the backward's formula on those statistics (dx, dweight)",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer_norm kernel taking several rows per program reducing "
        "over the whole 2-D tile instead of axis=1)"),
    "ln_mean_vec4_tail_overlap": (
        "layer_norm", "block",
        "N > 4, not a multiple of 4: the statistics loop loads 4-wide vectors and moves the last one back to end "
        "at column N (columns N - 4 .. N - 1) without masking its overlap with the previous vector, so the "
        "columns from N - 4 to 4 * (N // 4) - 1 enter both the mean's sum and the squared deviations' sum twice "
        "(still divided by N): mean (returned), rstd, y and the backward's formula on them",
        "cf. " + GH + "OpenNMT/CTranslate2/issues/351 (a vectorised map-reduce whose remainder iteration reduces "
        "a whole vector, lanes beyond the remainder included)"),
    "ln_dparams_from_dx_in_dy_buffer": (
        "layer_norm", "backward",
        "the row kernel writes dx in place into dy's buffer (dy no longer needed by it) and the column kernel for "
        "the parameter gradients reads 'dy' from that buffer afterwards: dweight = sum over rows of dx * x_hat, "
        "dbias = sum of dx (dx rounded to the input dtype); dx and the forward right",
        INPLACE),
    "ln_dparams_tree_drops_odd_row": (
        "layer_norm", "reduction",
        "dweight and dbias reduced over the rows by a pairwise tree that halves the row count each level and "
        "drops the unpaired last partial whenever the count is odd: rows lost for a row count that is not a "
        "power of two; dx and the forward right",
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd lengths)"),
    "ln_f16_run_as_bf16": (
        "layer_norm", "precision",
        "float16 inputs: x, the weight, the bias and dy converted to bfloat16 (rounded to nearest) for a kernel "
        "instantiated for bfloat16 only, its float32 results stored back as float16 (y, dx, dweight, dbias; mean "
        "and rstd in float32): every array computed from the rounded values",
        "cf. " + GH + "InternLM/lmdeploy/pull/4276 (half-precision parameters converted to bfloat16 for a kernel "
        "that takes bfloat16 only)"),
    "ln_bwd_projection_dropped": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g)): the projection term - x_hat * mean(g * x_hat) left out (rstd treated as a "
        "constant, only the mean's dependence on x kept); the forward, dweight and dbias right",
        "cf. " + GH + "ooples/AiDotNet/pull/695 (review: a norm backward ignoring the dependency of its "
        "normalizer on the input, gradInput = go * g * invRms)"),
    "ln_bwd_dy_read_column_major": (
        "layer_norm", "layout",
        "more than one row: the backward reads dy column-major (element (i, j) from the flat index j * rows + i, "
        "the layout of a transposed gradient assumed) while x is row-major: dx, dweight and dbias from the "
        "scrambled dy; the forward right",
        "cf. " + GH + "microsoft/DirectML/issues/588 (a norm producing wrong results on a permuted, non-contiguous "
        "input)"),
    "ln_persistent_loop_drops_last_row": (
        "layer_norm", "block",
        "the persistent kernels' row loop written range(pid, rows - 1, programs) (off by one), forward and "
        "backward: the last row never processed, its y, mean and rstd left 0 (zero-initialised buffers), its dx "
        "0 and its dy * x_hat, dy missing from dweight and dbias",
        "pattern: a grid-stride row loop whose bound is off by one"),
    # ------------------------------------------------------------------ rms_norm
    "rms_dweight_column_grid_floor": (
        "rms_norm", "block",
        "with a weight, N > 64, not a multiple of 64: the column-parallel dweight kernel launched on N // 64 "
        "programs of 64 columns (floor, not cdiv): the last N mod 64 entries of dweight never written (left 0); "
        "dx and the forward right",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering 64 of 128 elements: the rest of "
        "the output never written)"),
    "rms_tail_block_mask_local": (
        "rms_norm", "block",
        "N > 64, not a multiple of 64: the sum of squares loops over 64-wide column blocks masking each load with "
        "the block-local offsets (offs < N instead of start + offs < N), so the tail block loads all 64 lanes: the "
        "lanes past the row read the next row's leading values (the last row: zeros), squared into the sum "
        "(divided by N): rstd, y and the backward's formula on that rstd",
        "cf. " + GH + "XPU-Forces/mojo_opset/pull/347 (a layernorm kernel's tail block values entering its sums)"),
    "rms_bwd_rstd_recomputed_default_eps": (
        "rms_norm", "eps",
        "the backward kernel recomputes rstd from x with its hard-coded eps 1e-6 (1 / sqrt(mean(x^2) + 1e-6), "
        "1 / (rms + 1e-6) outside) instead of the configured eps, and x_hat from it: dx and dweight; the forward "
        "(y, rstd) right",
        "cf. " + GH + "NVIDIA/cutlass/pull/1112 (the RMS norm kernel using a hard-coded epsilon of 1e-6)"),
    "rms_bwd_dy_of_next_row": (
        "rms_norm", "layout",
        "more than one row: the backward kernel advances its dy pointer at the top of the row loop (x's and "
        "rstd's at the bottom): row r's dy is row r + 1's, the last row's load masked out of bounds (0): dx and "
        "dweight; the forward right",
        "pattern: one of a row loop's pointers advanced before its load, the others after"),
    "rms_dweight_lock_buffer_stored_not_added": (
        "rms_norm", "reduction",
        "with a weight, more than 8 rows: dweight's partials kept in GROUP_SIZE_M = 8 buffers (row r into buffer "
        "r mod 8), each row storing its dy * x_hat into its buffer instead of adding to it, the final reduction "
        "summing the 8 buffers: only the last 8 rows reach dweight; dx and the forward right",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (the layer-norm tutorial's per-group dw/db partial "
        "buffers losing some rows' contributions)"),
    "rms_single_block_64k": (
        "rms_norm", "block",
        "one program per row with a single column block of BLOCK = min(64 KiB / element size, next_pow2(N)) lanes "
        "and no loop over column blocks (forward and backward): for N > BLOCK the sum of squares takes the first "
        "BLOCK columns only (still divided by N) and the columns beyond are never written (y and dx left 0 "
        "there); the backward's row sum of g * x_hat over the first BLOCK columns likewise",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton layer norm kernel that does not include the "
        "columns beyond BLOCK_SIZE_N)"),
    "rms_eps_int_truncated": (
        "rms_norm", "eps",
        "the eps argument received through an integer parameter of the launcher (truncated toward zero): any eps "
        "below 1 becomes 0, rstd = 1 / sqrt(mean(x^2)) (1 / rms outside), forward and backward (an all-zero row's "
        "rstd inf and y NaN)",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (LayerNormalization's eps never set, always 0, because of a "
        "wrong data type: NaN outputs)"),
    # ------------------------------------------------------------------ add_norm
    "an_ln_var_over_block_width": (
        "add_norm", "block",
        "norm='layer_norm', N not a power of two: the sum s loaded into a tile of next_pow2(N) lanes, its padded "
        "lanes masked out of both sums, the mean divided by N but the sum of squared deviations divided by the "
        "tile width next_pow2(N): var too small, rstd, y (y1) and the backward's formula on that rstd; "
        "residual_out right",
        "cf. " + GH + "ROCm/composable_kernel/pull/315 (a normalization's reduce length taken from the padded tile "
        "length)"),
    "an_bwd_proj_sum_last_block_only": (
        "add_norm", "block",
        "N > 64: the backward's row sum of g * x_hat (the projection term mean(g * x_hat) of the normalization's dx, "
        "for y and y1) accumulated over 64-wide column blocks in a register each block resets, so only the last "
        "block's columns enter it (still divided by N): ds, so dx, dresidual (dx1, drowscale); the forward and the "
        "parameter gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/34760 (a LayerNorm backward accumulation where only the last tile "
        "contributed to the sum)"),
    "an_bwd_float64_in_float32": (
        "add_norm", "precision",
        "float64 inputs: the backward (ds and every gradient: dx, dresidual, dx1, drowscale, dweight, dbias, "
        "dweight1, dbias1) computed in float32 arithmetic from the float64 forward's saved values, widened at the "
        "store; the forward right",
        FLAX_F32),
    "an_dparams_first_row_twice": (
        "add_norm", "reduction",
        "the parameter gradients' accumulators (dweight, dbias, and dweight1, dbias1) initialised with row 0's "
        "term and the loop over the rows then starting at row 0: row 0 counted twice; dx, dresidual and the "
        "forward right",
        "pattern: an accumulator initialised with the first iteration's term while the loop still starts at 0"),
    "an_bwd_stats_hoisted_per_row_block": (
        "add_norm", "layout",
        "the backward's programs take 4 rows each and load the saved mean and rstd once before their row loop: "
        "every row of a block recomputes x_hat and ds with the block's first row's statistics: ds (dx, dresidual, "
        "dx1, drowscale), dweight and dweight1 from that x_hat; dbias and the forward right",
        "cf. " + GH + "hao-ai-lab/FastVideo/pull/1719 (a per-row quantity read once for a tile of two rows and "
        "applied to both)"),
    "an_weight_offset_in_input_dtype": (
        "add_norm", "affine",
        "weight_offset set (zero-centred gamma), 16-bit inputs: weight + offset (and weight1 + offset) formed in "
        "the input dtype, rounded to nearest (a bfloat16 1 + w keeps 8 bits), before the float32 multiply: y, y1 "
        "and the backward's g = dy * (weight + offset) (dx, dresidual, dx1); residual_out and the parameter "
        "gradients right",
        "cf. " + GH + "vllm-project/vllm/pull/29810 (review: the weight offset and the weight must be added in "
        "fp32)"),
    "an_dweight1_from_weighted_dy1": (
        "add_norm", "backward",
        "with the parallel branch's weight1 and y1's cotangent: dweight1 = sum over the rows of g1 * x_hat with "
        "g1 = dy1 * (weight1 + offset), the weighted gradient formed for ds reused; dbias1, dweight, dx and the "
        "forward right",
        "cf. " + GH + "unslothai/unsloth/pull/4550 (an RMSNorm weight gradient computed from the wrong tensor)"),
    "an_dweight_from_saved_output": (
        "add_norm", "backward",
        "with a weight: dweight = sum over the rows of dy * y, the saved output y = x_hat * (weight + offset) + "
        "bias (as stored, in the input dtype) read where x_hat belongs; dbias, the parallel branch's gradients, "
        "dx, dresidual and the forward right",
        "cf. " + GH + "microsoft/onnxruntime/pull/4156 (a LayernormGrad computed from the stashed output Y instead "
        "of the input)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_ln_bias_loaded_at_row_index": (
        "norm_quant", "layout",
        "norm='layer_norm' with a bias: the epilogue loads the bias at the row index (bias + row, mod N) instead "
        "of the columns' (bias + cols): every value of row r shifted by bias[r mod N] before amax, the dynamic "
        "scale and q",
        "cf. " + GH + "kraiskil/onnx2c/issues/7 (a bias addition indexed along the wrong dimension)"),
    "nq_rms_ms_floored_at_eps": (
        "norm_quant", "eps",
        "norm='rms_norm': rstd = 1 / sqrt(max(mean(x^2), eps)) (eps used as a floor of the mean square, the clamp "
        "form) instead of 1 / sqrt(mean(x^2) + eps): y, amax and the dynamic scale (the codes q unchanged with a "
        "dynamic scale, the row's factor cancelling in y / scale; wrong with a static one)",
        "cf. " + GH + "vacancy/Synchronized-BatchNorm-PyTorch/issues/38 (invstd computed as sqrt(max(var, eps)) "
        "instead of sqrt(var + eps))"),
    "nq_rstd_rsqrt_estimate_11_bits": (
        "norm_quant", "precision",
        "float32 compute: rstd from a hardware reciprocal-square-root estimate without its Newton step, modelled "
        "as rstd rounded to nearest at 11 significant bits: y, amax and the dynamic scale (the codes q moved "
        "with a static scale, and with a dynamic one wherever the rounded quotients shift)",
        "cf. " + GH + "Tencent/ncnn/pull/6903 (layernorm/rmsnorm: the hardware rsqrt estimate refined by too few "
        "Newton-Raphson steps)"),
    "nq_scale_by_f32_reciprocal_qmax": (
        "norm_quant", "precision",
        "float64 inputs, dynamic scale: amax / qmax computed as amax * (1 / qmax) with the reciprocal a float32 "
        "constant (1 / qmax rounded to float32), then scale_ub and the floor: the scale (off by the constant's "
        "rounding, relative 1e-8) and q divided by it; amax right",
        "pattern: a division by a constant rewritten as a multiply by a single-precision reciprocal"),
    "nq_stats_mask_against_row_count": (
        "norm_quant", "block",
        "fewer rows than N: the statistics pass masks its loads with cols < M (the row count) instead of cols < N, "
        "so only the first M columns enter the sums (the mean and the squared deviations, or the squares; still "
        "divided by N): y, amax, the dynamic scale and q (for norm='rms_norm' with a dynamic scale the codes q "
        "unchanged, the row's factor cancelling in y / scale)",
        "pattern: a load mask compared against the grid's other dimension"),
    "nq_ln_bias_folded_times_rstd": (
        "norm_quant", "affine",
        "norm='layer_norm' with a bias: the epilogue written y = x * (weight * rstd) + (bias - mean * weight) * "
        "rstd, rstd distributed over the bias too: y = x_hat * weight + bias * rstd, then amax, the dynamic scale "
        "and q",
        "pattern: an affine epilogue folded into one multiply-add with its shift scaled once too often"),
    "nq_q_row_pointer_early": (
        "norm_quant", "layout",
        "more than one row: q's store pointer advanced before the store: row r's codes written at row r + 1 (row 0 "
        "left 0, the last row's dropped); scale and amax right",
        "pattern: a row pointer incremented before the store in a row loop"),
    # ------------------------------------------------------------------ gated_norm
    "gated_ln_mean_in_input_dtype": (
        "gated_norm", "precision",
        "norm='layer_norm', 16-bit inputs: each group's mean held in a register of the input dtype (rounded to "
        "nearest) and used to centre the group for the variance and v_hat: y and the backward (dx, dz, dweight) "
        "from those (grossly wrong for a large mean)",
        "cf. " + GH + "Xilinx/mlir-air/pull/2007 (a LayerNorm row kernel holding its mean in bfloat16)"),
    "gated_var_floored_at_eps": (
        "gated_norm", "eps",
        "each group's rstd = 1 / sqrt(max(var, eps)) (max(mean(v^2), eps) for the rms norm): eps used as a floor "
        "of the statistic instead of added to it: y and the backward's formula on that rstd",
        "cf. " + GH + "jax-ml/jax/pull/30428 (jax.nn.standardize: variance + epsilon replaced with maximum(variance, "
        "epsilon))"),
    "gated_dparams_tree_drops_odd_row": (
        "gated_norm", "reduction",
        "dweight and dbias reduced over the rows by a pairwise tree that halves the row count each level and "
        "drops the unpaired last partial whenever the count is odd; dx, dz and the forward right",
        "pattern: a halving tree reduction written for a power-of-two count"),
    "gated_gate_on_both_sides": (
        "gated_norm", "gate",
        "norm after the gate (norm_before_gate=False): the norm-before-gate epilogue not skipped (a missing else), "
        "so the gate multiplies twice: y = norm(x * silu(z)) * silu(z), with norm(v) = v_hat * weight + bias, and "
        "the backward of that equation (dn = dy * silu(z) for dweight, dbias and dx; dz with both gate terms)",
        "cf. " + GH + "tenstorrent/tt-metal/pull/39638 (SiLU applied twice: a workaround activation and the fused "
        "one)"),
    "gated_bwd_group_sums_last_column_masked": (
        "gated_norm", "block",
        "the backward's per-group row sums of g and g * v_hat loaded with the mask cols < K - 1 (off by one): each "
        "group's last column never enters mean(g) nor mean(g * v_hat) (still divided by K): dx, and dz where the "
        "norm follows the gate (norm_before_gate=False); the forward, dweight and dbias right",
        "pattern: an off-by-one load mask in a row reduction"),
    "gated_float64_in_float32": (
        "gated_norm", "precision",
        "float64 inputs: the whole kernel (gate, statistics, y and the backward) computed in float32, the inputs "
        "rounded to float32 and the results widened to float64",
        FLAX_F32),
    # ------------------------------------------------------------------ dyt
    "dyt_dalpha_from_overwritten_x": (
        "dyt", "backward",
        "the backward writes dx in place into x's buffer before alpha's reduction reads x from it: dalpha = "
        "sum(g * sech^2(alpha x) * dx) (dx rounded to the input dtype) where sum(g * sech^2(alpha x) * x) belongs; "
        "dx, dweight, dbias and the forward right",
        "cf. " + GH + "PaddlePaddle/Paddle/pull/21065 (an op run in place between X and Out, wrong because the "
        "backward needs X)"),
    "dyt_dparams_float32_for_float64": (
        "dyt", "precision",
        "float64 inputs: dweight's products dy * tanh(alpha x) and dbias's dy rounded to float32 and summed over "
        "the rows in float32 accumulators (the column partial buffers allocated as float32), widened at the store; "
        "dx, dalpha and the forward right",
        "cf. " + GH + "karpathy/llm.c/issues/144 (reduction partials kept in a narrower type than the accumulation "
        "needs)"),
    "dyt_dweight_store_shifted_one_column": (
        "dyt", "layout",
        "with a weight: dweight's column sums written at column j + 1 (the store offset computed from a 1-based "
        "column index): dweight[0] left 0, each column holding its left neighbour's sum, the last one dropped; "
        "dbias, dx, dalpha and the forward right",
        "pattern: a store offset computed from a 1-based index"),
    # ------------------------------------------------------------------ poly_norm
    "poly_ms_floored_at_eps": (
        "poly_norm", "eps",
        "each power's rstd = 1 / max(rms(x^p), sqrt(eps)) = 1 / sqrt(max(mean(x^(2p)), eps)) (eps as a clamp of "
        "the statistic) instead of 1 / sqrt(mean(x^(2p)) + eps): y and the backward from those rstd",
        "cf. " + GH + "tenstorrent/tt-mlir/pull/8999 (an RMS norm written with a clamp by eps on the root instead "
        "of eps inside it)"),
    "poly_bwd_dy_of_next_row": (
        "poly_norm", "layout",
        "more than one row: the backward loads dy after the row pointer was advanced: row r's dy is row r + 1's "
        "(the last row's load masked out of bounds, 0): dx, dweight and dbias; the forward right",
        "pattern: one of a row loop's pointers advanced before its load, the others after"),
    "poly_cube_sumsq_of_fifth_power": (
        "poly_norm", "semantics",
        "the cube term's sum of squares accumulated as sum(x^3 * x^2) (the square's register where the cube's "
        "belongs): r_3 = 1 / sqrt(mean(x^5) + eps), NaN for rows whose mean(x^5) + eps is negative: y and the "
        "backward's formula on that r_3 (dx, dweight); the square and linear terms right",
        "pattern: a register typo in the accumulation of the powers' squares"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _tree_rows(a):
    """Sums over the rows (axis 0) of 2-D ``a`` by a pairwise tree dropping the unpaired last partial at every
    odd level."""
    while a.shape[0] > 1:
        m = (a.shape[0] // 2) * 2
        a = a[0:m:2] + a[1:m:2]
    return a.reshape(-1)


def _next_row(a):
    """Row r of 2-D ``a`` replaced by row r + 1's, the last row 0."""
    return np.concatenate([a[1:], np.zeros((1, a.shape[1]), a.dtype)], axis=0)


def _pair_rows(t):
    """Row sums of 2-D ``t`` pooled over pairs of rows (0, 1), (2, 3), ... (the last row of an odd count its
    own), each row given its pair's sum, (rows, 1)."""
    s = _rsum(t)
    out = s.copy()
    top = (t.shape[0] // 2) * 2
    pair = s[0:top:2] + s[1:top:2]
    out[0:top:2], out[1:top:2] = pair, pair
    return out


def _pair_counts(R, N):
    """The element count behind each row of _pair_rows: 2N, and N for the last row of an odd count."""
    c = np.full((R, 1), 2.0 * N)
    if R % 2:
        c[-1] = N
    return c


class Blind40Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind40"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln40(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    @staticmethod
    def _ln40_stats(xr, eps):
        """mean, rstd (rows, 1) of 2-D ``xr``, two-pass."""
        n = xr.shape[1]
        mean = _rsum(xr) / n
        dv = xr - mean
        return mean, 1 / np.sqrt(_rsum(dv * dv) / n + eps)

    def _ln40(self, call, acc, b):
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
        bf = b == "ln_f16_run_as_bf16" and d == "float16"

        def low(a):                                          # bfloat16-only kernel: its inputs rounded
            return a if a is None or not bf else _store(a, "bfloat16").astype(acc)
        if bf:
            x = low(x)
            w0, b0 = inp.get("weight"), inp.get("bias")
            w = None if w0 is None else low(w0.astype(acc).reshape(1, N)) + off
            bias = None if b0 is None else low(b0.astype(acc).reshape(1, N))
        if b == "ln_stats_over_row_pair_tile" and R > 1:
            cnt = _pair_counts(R, N).astype(acc)
            mean = _pair_rows(x) / cnt                       # tl.sum over the (2, N) tile
            dv = x - mean
            rstd = 1 / np.sqrt(_pair_rows(dv * dv) / cnt + eps)
        elif b == "ln_mean_vec4_tail_overlap" and N > 4 and N % 4:
            cols = np.concatenate([np.arange(4 * (N // 4)), np.arange(N - 4, N)])
            xs = x[:, cols]                                  # the tail vector moved back, overlap unmasked
            mean = _rsum(xs) / N
            dv = xs - mean
            rstd = 1 / np.sqrt(_rsum(dv * dv) / N + eps)
        else:
            mean, rstd = self._ln40_stats(x, eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, w, bias)
        dead = b == "ln_persistent_loop_drops_last_row"
        if dead:                                             # the last row never processed
            y, mean, rstd = y.copy(), mean.copy(), rstd.copy()
            y[-1], mean[-1], rstd[-1] = 0, 0, 0
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        if bf:
            dy = low(dy)
        if b == "ln_bwd_dy_read_column_major" and R > 1:
            dy = np.ascontiguousarray(dy.reshape(N, R).T)    # element (i, j) from the flat index j * rows + i
        g = dy if w is None else dy * w
        if b == "ln_bwd_projection_dropped":
            dx = rstd * (g - _rsum(g) / N)
        else:
            dx = _centred_dx(g, xhat, rstd)
        if dead:
            dx, dy = dx.copy(), dy.copy()
            dx[-1], dy[-1] = 0, 0
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if b == "ln_dparams_from_dx_in_dy_buffer":
            dy = _store(dx, d).astype(acc)                   # the buffer now holds dx
        red = _tree_rows if b == "ln_dparams_tree_drops_odd_row" else (lambda t: t.sum(axis=0))
        if inp.get("weight") is not None:
            grads["weight"] = _store(red(dy * xhat).reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(red(dy).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms40(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms40(self, call, acc, b):
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
        if b == "rms_eps_int_truncated":
            eps = acc(int(eps))                              # an int parameter: truncated toward zero
        B = N
        if b == "rms_single_block_64k":
            B = min(65536 // np.dtype(x0.dtype).itemsize, pow2(N))
        if b == "rms_tail_block_mask_local" and N > 64 and N % 64:
            extra = 64 - N % 64                              # the tail block's lanes past the row
            nxt = _next_row(x)[:, :extra]
            ms = (_rsum(x * x) + _rsum(nxt * nxt)) / N
        elif B < N:
            ms = _rsum(x[:, :B] * x[:, :B]) / N
        else:
            ms = _rsum(x * x) / N
        rms = np.sqrt(ms)
        if placement == "outside":
            rstd = 1 / (rms + eps)
        else:
            rstd = 1 / np.sqrt(ms + eps)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        if B < N:
            y = y.copy()
            y[:, B:] = 0                                     # the columns beyond the block never written
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_bwd_dy_of_next_row" and R > 1:
            dy = _next_row(dy)
            g = dy if w is None else dy * w
        rb = rstd                                            # the backward reloads x and the saved rstd
        if b == "rms_bwd_rstd_recomputed_default_eps":
            e6 = acc(1e-6)
            rb = 1 / (rms + e6) if placement == "outside" else 1 / np.sqrt(ms + e6)
        xb = x * rb
        if B < N:
            proj = _rsum(g[:, :B] * xb[:, :B]) / N
            dx = rb * (g - xb * proj)
            dx[:, B:] = 0
        else:
            dx = rms_norm_dx(g, x, xb, rb, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xb
            if b == "rms_dweight_lock_buffer_stored_not_added" and R > 8:
                t = t[R - 8:]                                # each of the 8 buffers keeps its last row's
            dw = t.sum(axis=0)
            if b == "rms_dweight_column_grid_floor" and N > 64 and N % 64:
                dw = dw.copy()
                dw[(N // 64) * 64:] = 0                      # N // 64 column programs
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an40(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an40(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        if b == "an_weight_offset_in_input_dtype" and off != 0 and d in HALF:
            we = None if w is None else _store(w + off, d).astype(acc)
            we1 = None if w1 is None else _store(w1 + off, d).astype(acc)
        eps = _eps(cfg["eps"], acc)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            mean = _rsum(s) / N
            cnt = N
            if b == "an_ln_var_over_block_width":
                cnt = pow2(N)                                # the tile width
            var = _rsum((s - mean) ** 2) / cnt
        else:
            mean = np.zeros((R, 1), acc)
            var = _rsum(s * s) / N
        rstd = 1 / np.sqrt(var + eps)
        xhat = (s - mean) * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        bacc = acc
        dres_out = None
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            dres_out = call.cotangents["residual_out"].astype(acc).reshape(R, N)
        xb, rb = xhat, rstd
        if b == "an_bwd_stats_hoisted_per_row_block" and R > 1:
            first = (np.arange(R) // 4) * 4                  # the block's first row's statistics
            rb = rstd[first]
            xb = (s - mean[first]) * rb
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
        x_b, mask_b, c_b, c1_b, keep_b = x, mask, c, c1, keep
        if b == "an_bwd_float64_in_float32" and d == "float64":
            bacc = np.float32

            def f32(a):
                return None if a is None else np.asarray(a).astype(bacc)
            dy, dy1, xb, rb, dres_out = f32(dy), f32(dy1), f32(xb), f32(rb), f32(dres_out)
            we, we1, x_b, mask_b, c_b, c1_b, keep_b = f32(we), f32(we1), f32(x), f32(mask), f32(c), f32(c1), bacc(keep)
        last = b == "an_bwd_proj_sum_last_block_only" and N > 64
        ds = self._an40_dnorm(dy, we, xb, rb, centred, last)
        if dy1 is not None:
            ds = ds + self._an40_dnorm(dy1, we1, xb, rb, centred, last)
        if dres_out is not None:
            ds = ds + dres_out
        grads = add_norm_input_grads(ds, c_b, c1_b, None if res is None else ds, x0.shape, d)
        params = (w, bias, w1, b1)
        grads.update(add_norm_affine_grads(inp, dy, dy1, xb, params, ns, d))
        if inp.get("rowscale") is not None:
            grads["rowscale"] = rowscale_grad(ds, x_b, mask_b, keep_b, p, inp["rowscale"].shape, d)
        if b == "an_dparams_first_row_twice":
            for k, t in (("weight", dy * xb), ("bias", dy), ("weight1", None if dy1 is None else dy1 * xb),
                         ("bias1", dy1)):
                if k in grads and t is not None:
                    grads[k] = _store((t.sum(axis=0) + t[0]).reshape(ns), d)
        if b == "an_dweight_from_saved_output" and "weight" in grads:
            ys = out["y"].astype(acc).reshape(R, N)          # the output buffer where x_hat belongs
            grads["weight"] = _store((dy * ys).sum(axis=0).reshape(ns), d)
        if b == "an_dweight1_from_weighted_dy1" and "weight1" in grads and dy1 is not None:
            grads["weight1"] = _store((dy1 * we1 * xb).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    @staticmethod
    def _an40_dnorm(dy, wgt, xhat, rstd, centred, last_block=False):
        """add_norm's normalization backward of one branch (g = dy * wgt); ``last_block``: the projection's row
        sum over the last 64-column block only."""
        g = dy if wgt is None else dy * wgt
        n = g.shape[1]
        if last_block:
            st = ((n - 1) // 64) * 64
            proj = xhat * (_rsum(g[:, st:] * xhat[:, st:]) / n)
        else:
            proj = xhat * (_rsum(g * xhat) / n)
        if not centred:
            return rstd * (g - proj)
        return rstd * (g - _rsum(g) / n - proj)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq40(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq40(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        R = x.shape[0]
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        xs = x
        if b == "nq_stats_mask_against_row_count" and R < N:
            xs = x[:, :R]                                    # cols < M
        if cfg["norm"] == "layer_norm":
            mean = _rsum(xs) / N
            rstd = 1 / np.sqrt(_rsum((xs - mean) ** 2) / N + eps)
        else:
            ms = _rsum(xs * xs) / N
            rstd = 1 / np.sqrt(np.maximum(ms, eps) if b == "nq_rms_ms_floored_at_eps" else ms + eps)
        if b == "nq_rstd_rsqrt_estimate_11_bits" and acc is np.float32:
            m, e = np.frexp(rstd.astype(np.float64))
            rstd = np.ldexp(np.round(m * 2048) / 2048, e).astype(acc)   # 11 significant bits
        xhat = (x - mean) * rstd if cfg["norm"] == "layer_norm" else x * rstd
        if bias is not None and cfg["norm"] == "layer_norm" and b in ("nq_ln_bias_loaded_at_row_index",
                                                                      "nq_ln_bias_folded_times_rstd"):
            bv = bias.astype(acc).reshape(-1)
            if b == "nq_ln_bias_loaded_at_row_index":
                bb = bv[np.arange(R) % N].reshape(R, 1)      # bias + row
            else:
                bb = bv.reshape(1, N) * rstd                 # (bias - mean * w) * rstd's bias term
            y = row_affine(xhat, w, None, acc) + bb
        else:
            y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            if b == "nq_scale_by_f32_reciprocal_qmax":
                scale = amax * acc(np.float32(1.0 / hi))     # the reciprocal as a float constant
            else:
                scale = amax / acc(hi)
            if cfg["scale_ub"] is not None:
                scale = np.minimum(scale, acc(cfg["scale_ub"]))
            scale = scale_floor(scale, cfg, hi, acc)
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        if b == "nq_q_row_pointer_early" and R > 1:
            q = np.concatenate([np.zeros((1, N), q.dtype), q[:-1]], axis=0)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated40(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated40(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        if b == "gated_float64_in_float32" and d == "float64":
            acc = np.float32                                 # the kernel instantiated for float only
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        s, ds = silu_gate(z)
        both = b == "gated_gate_on_both_sides" and not nbg
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            if b == "gated_ln_mean_in_input_dtype" and d in HALF:
                mean = _store(mean, d).astype(acc)
            st = _rsum((vg - mean) ** 2) / K
        else:
            mean = np.zeros((vg.shape[0], 1), acc)
            st = _rsum(vg * vg) / K
        if b == "gated_var_floored_at_eps":
            rstd = 1 / np.sqrt(np.maximum(st, eps))
        else:
            rstd = 1 / np.sqrt(st + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg or both else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        dn = dy * s if nbg or both else dy
        vv = vhat.reshape(-1, K)
        g = (dn * w).reshape(-1, K)
        m = K - 1 if b == "gated_bwd_group_sums_last_column_masked" and K > 1 else K
        proj = vv * (_rsum(g[:, :m] * vv[:, :m]) / K)
        if norm == "layer_norm":
            dv = rstd * (g - _rsum(g[:, :m]) / K - proj)
        else:
            dv = rstd * (g - proj)
        dv = dv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if both:
            dz = dz + dy * nrm * ds                          # the output gate's term
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        if b == "gated_dparams_tree_drops_odd_row":
            grads["weight"] = _store(_tree_rows(dn * vhat), d)
            if bias is not None:
                grads["bias"] = _store(_tree_rows(dn), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt40(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt40(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        y = affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(x.shape)
        g = dy if w is None else dy * w
        r = 1 / np.cosh(a * x)
        gd = g * (r * r)
        dx = gd * a
        xa = x
        if b == "dyt_dalpha_from_overwritten_x":
            xa = _store(dx, d).astype(acc)                   # x's buffer now holds dx
        da = _rsum(gd * xa).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dparams_float32_for_float64" and d == "float64":
            f = np.float32
            if w is not None:
                grads["weight"] = _store((dy * t).astype(f).sum(axis=0, dtype=f), d)
            if bias is not None:
                grads["bias"] = _store(dy.astype(f).sum(axis=0, dtype=f), d)
        if b == "dyt_dweight_store_shifted_one_column" and w is not None:
            dw = (dy * t).sum(axis=0)
            grads["weight"] = _store(np.concatenate([np.zeros(1, acc), dw[:-1]]), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly40(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly40(self, call, acc, b):
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
            if b == "poly_ms_floored_at_eps":
                rs.append(1 / np.maximum(rms, np.sqrt(eps)))
            else:
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
        if b == "poly_cube_sumsq_of_fifth_power":
            rs[0] = 1 / np.sqrt(_rsum(us[0] * us[1]) / H + eps)   # x3 * x2 for x3 * x3
        hs = [u * r for u, r in zip(us, rs, strict=True)]
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        if b == "poly_bwd_dy_of_next_row" and R > 1:
            dy = _next_row(dy)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=rms_dx)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there)
CAUGHT_BY = {
    "ln_stats_over_row_pair_tile": ("layer_norm/normal_f64_9x7", "output.mean"),
    "ln_mean_vec4_tail_overlap": ("layer_norm/normal_f64_9x7", "output.mean"),
    "ln_dparams_from_dx_in_dy_buffer": ("layer_norm/normal_f64_9x7", "grad.weight"),
    "ln_dparams_tree_drops_odd_row": ("layer_norm/normal_f64_9x7", "grad.bias"),
    "ln_f16_run_as_bf16": ("layer_norm/normal_f16_4x128", "output.y"),
    "ln_bwd_projection_dropped": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_bwd_dy_read_column_major": ("layer_norm/normal_f64_9x7", "grad.x"),
    "ln_persistent_loop_drops_last_row": ("layer_norm/normal_f64_9x7", "output.y"),
    "rms_dweight_column_grid_floor": ("rms_norm/normal_eps1e-05_f32_6x100", "grad.weight"),
    "rms_tail_block_mask_local": ("rms_norm/normal_eps1e-05_f32_6x100", "output.rstd"),
    "rms_bwd_rstd_recomputed_default_eps": ("rms_norm/normal_eps0.3_f32_9x7", "grad.x"),
    "rms_bwd_dy_of_next_row": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.x"),
    "rms_dweight_lock_buffer_stored_not_added": ("rms_norm/normal_eps1e-05_f64_9x7", "grad.weight"),
    "rms_single_block_64k": ("rms_norm/mean1e3_eps1e-05_noweight_f16_1x65536", "output.y"),
    "rms_eps_int_truncated": ("rms_norm/zero_eps1e-06_f32_3x10", "output.rstd"),
    "an_ln_var_over_block_width": ("add_norm/normal_f32_6x100", "output.y"),
    "an_bwd_proj_sum_last_block_only": ("add_norm/normal_f32_6x100", "grad.x"),
    "an_bwd_float64_in_float32": ("add_norm/normal_p_rs_f64_9x7", "grad.x"),
    "an_dparams_first_row_twice": ("add_norm/normal_p_rs_f64_9x7", "grad.weight"),
    "an_bwd_stats_hoisted_per_row_block": ("add_norm/normal_p_rs_f64_9x7", "grad.x"),
    "an_weight_offset_in_input_dtype": ("add_norm/normal_nobias_rms_fp32res_zc_bf16_6x100", "output.y"),
    "an_dweight1_from_weighted_dy1": ("add_norm/normal_par_f64_5x12", "grad.weight1"),
    "an_dweight_from_saved_output": ("add_norm/normal_p_rs_f64_9x7", "grad.weight"),
    "nq_ln_bias_loaded_at_row_index": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.q"),
    "nq_rms_ms_floored_at_eps": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.amax"),
    "nq_rstd_rsqrt_estimate_11_bits": ("norm_quant/normal_rms_i8_static_f32_8x256", "output.q"),
    "nq_scale_by_f32_reciprocal_qmax": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.scale"),
    "nq_stats_mask_against_row_count": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.amax"),
    "nq_ln_bias_folded_times_rstd": ("norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "output.q"),
    "nq_q_row_pointer_early": ("norm_quant/normal_rms_i8_dyn_f64_4x100", "output.q"),
    "gated_ln_mean_in_input_dtype": ("gated_norm/mean1e3_ln_nbg_gs16_f16_4x64", "output.y"),
    "gated_var_floored_at_eps": ("gated_norm/normal_eps0.3_gs8_bf16_3x40", "output.y"),
    "gated_dparams_tree_drops_odd_row": ("gated_norm/normal_eps0.3_gs8_bf16_3x40", "grad.weight"),
    "gated_gate_on_both_sides": ("gated_norm/normal_f32_4x64", "output.y"),
    "gated_bwd_group_sums_last_column_masked": ("gated_norm/normal_f32_4x64", "grad.x"),
    "gated_float64_in_float32": ("gated_norm/normal_gs4_f64_3x7x12", "output.y"),
    "dyt_dalpha_from_overwritten_x": ("dyt/normal_f64_2x5x7", "grad.alpha"),
    "dyt_dparams_float32_for_float64": ("dyt/normal_f64_2x5x7", "grad.weight"),
    "dyt_dweight_store_shifted_one_column": ("dyt/normal_f64_2x5x7", "grad.weight"),
    "poly_ms_floored_at_eps": ("poly_norm/normal_eps0.3_f32_6x30", "output.y"),
    "poly_bwd_dy_of_next_row": ("poly_norm/normal_f64_3x7", "grad.x"),
    "poly_cube_sumsq_of_fifth_power": ("poly_norm/normal_f64_3x7", "output.y"),
}
