"""A thirty-ninth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind39Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn39``, ``_in39``, ``_gn39`` for group_norm and
group_norm_silu, ``_zs39``, ``_lp39``, ``_nqb39``, ``_aln39``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind39Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind37.py (the same mistake on the same op; the thirty-eighth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (
    affine,
    aln_inputs,
    aln_modulation,
    block_quotients,
    bn_momentum,
    channel_params,
    channel_rows,
    channel_running_stats,
    dy_and_g,
    from_channel_rows,
    group_outputs,
    group_params,
    group_rows,
    group_scales,
    instance_momentum_value,
    instance_outputs,
    instance_params,
    instance_running_stats,
    instance_running_update,
    instance_unbiased_var,
    mx_scales,
    nan_running,
    norm_outputs,
    nqb_format,
    nqb_returned,
    nvfp4_encode,
    nvfp4_scales,
    padded_blocks,
    per_sample,
    running_in,
    running_setup,
    running_state,
)
from ._blind_math import centred_dx as _centred_dx
from ._blind_math import channel_sums as _channel_sums
from ._blind_math import eps_value as _eps
from ._blind_math import half as _half
from ._blind_math import rsum as _rsum
from ._blind_math import sigmoids as _sigmoids
from ._blind_math import store as _store
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind39Kernel")

GH = "https://github.com/"
VSAG = ("cf. " + GH + "antgroup/vsag/pull/1926 (a SIMD normalization whose scalar tail loop called another routine "
        "than the vector body, the centroid subtraction missing there)")
WELFORD = ("cf. " + GH + "pbstark/SHANGRLA/issues/88 (a hand-written Welford running update whose terms were "
           "taken at the wrong step)")
RSQRT = ("cf. " + GH + "Tencent/ncnn/pull/6903 (layernorm / rmsnorm using the hardware approximate rsqrt without "
         "enough Newton-Raphson refinement, ~2.5e-4 relative error)")
HALFWARP = ("cf. " + GH + "xlite-dev/LeetCUDA/issues/357 (a layer norm's warp_reduce_sum instantiated with the wrong "
            "lane count, so part of the warp's partial sums are never added)")
TILEROW = ("cf. " + GH + "hao-ai-lab/FastVideo/pull/1719 (a per-row quantity read once for a tile of two rows and "
           "applied to both)")
DXINDY = ("cf. " + GH + "unslothai/unsloth/pull/4550 (a norm backward writing dX into dY's buffer while the "
          "parameter-gradient logic still reads dY from it)")
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_bwd_x_read_after_inplace_y": (
        "batch_norm", "backward",
        ("batch statistics: the forward writes y in place over x's buffer and the backward reloads 'x' from it, "
         "so x_hat is recomputed as (y - mean) * rstd (the output taken for the input): dx (the centred formula "
         "on that x_hat) and dweight = sum(dy * x_hat); the forward, the running update and dbias right"),
        "cf. " + GH + "PaddlePaddle/Paddle/pull/21065 (batch_norm run in place between X and Out, wrong because the "
        "backward needs X)"),
    "bn_dx_tail_positions_fixed_stats_formula": (
        "batch_norm", "backward",
        ("batch statistics, a spatial size S above 4 and not a multiple of 4: the dx kernel's vector body "
         "computes the centred formula, but its scalar remainder loop over the last S mod 4 positions of each "
         "(sample, channel) plane was written with the fixed-statistics formula dx = g * rstd: dx at those "
         "positions; the forward, dweight and dbias right"),
        VSAG),
    "bn_running_update_guarded_on_old_count": (
        "batch_norm", "running",
        ("training with running statistics: the running-statistics update placed under a guard on the "
         "num_batches_tracked loaded on entry (written against the cumulative average's division by zero), so "
         "a step entered with the count 0 leaves running_mean and running_var unchanged while the count is "
         "still incremented; the later steps' updates, y, the saved statistics and the gradients right"),
        "pattern: a division-by-zero guard wrapping more than the division"),
    "bn_dweight_without_invstd": (
        "batch_norm", "backward",
        ("with a weight: dweight stored from the backward-reduce's sum_dy_xmu = sum(dy * (x - mean)) per channel "
         "without its multiply by invstd (the factor the elementwise kernel applies itself); dx, dbias and the "
         "forward right"),
        "pattern: a reduction's partial handed out before its final scaling"),
    "bn_welford_m2_old_mean_delta_squared": (
        "batch_norm", "one_pass",
        ("batch statistics: each channel's variance by a Welford loop whose M2 update adds delta * delta (the "
         "deviation from the mean before the update, squared) where delta * (x - new mean) belongs, so M2 is the "
         "sum of squared deviations about the running means; var = M2 / n: rstd, y, the backward on it and the "
         "running variance; the mean right"),
        WELFORD),
    "bn_tile_channel_from_first_element": (
        "batch_norm", "layout",
        ("inputs of three or more axes, a spatial size S not a multiple of 256: the elementwise "
         "normalize pass walks the NCHW buffer in tiles of 256 values and computes the channel index once per "
         "tile from its first element, so the values of a tile past a plane boundary are normalized with the "
         "first element's channel's mean, rstd, weight and bias: y there; the statistics and the gradients "
         "right"),
        TILEROW),
    "bn_half2_stats_high_lane_dropped": (
        "batch_norm", "block",
        ("16-bit inputs, batch statistics: each channel's values loaded as half2 pairs (positions 2k, 2k + 1 of "
         "each plane) and only the low half of each pair accumulated into the sums for the mean and the "
         "variance, which are still divided by the full count: mean, rstd, y, the backward and the running "
         "update from them"),
        "cf. " + GH + "triton-lang/triton/issues/2483 (a reduction kernel's vectorized half loads giving a wrong "
        "result)"),
    # ------------------------------------------------------------------ group_norm
    "gn_stats_channel_loop_one_short": (
        "group_norm", "block",
        ("more than one channel a group: the statistics loop over a group's channels runs c0 .. c0 + C / G - 2 "
         "(its bound one short), so the mean and variance of each (sample, group) are taken over its first "
         "C / G - 1 channels (their count): mean, rstd, y of every channel, and the backward's formula on those "
         "saved statistics"),
        "pattern: an exclusive loop bound written with a -1 once more"),
    "gn_bwd_partials_read_channel_major": (
        "group_norm", "layout",
        ("more than one sample and channel: the backward's per-(sample, channel) partial sums of g and g * x_hat "
         "are stored at n * C + c and read back for the group reduction at c * N + n, so each group's mean(g) and "
         "mean(g * x_hat) in dx come from other (sample, channel) partials; dweight, dbias and the forward right"),
        "pattern: a scratch buffer written and read with different index orders"),
    "gn_half2_stats_high_lane_dropped": (
        "group_norm", "block",
        ("16-bit inputs: each group's values loaded as half2 pairs (consecutive values of the group's row) and "
         "only the low half of each pair accumulated into the sums for the mean and the variance, still divided "
         "by the group's full count: mean, rstd, y, and the backward on those statistics"),
        "pattern: a packed two-lane load whose second lane is never unpacked"),
    "gn_bwd_rstd_on_g_term_only": (
        "group_norm", "backward",
        ("dx = rstd * g - mean(g) - x_hat * mean(g * x_hat) per group: the parenthesis closed after g, so the "
         "group's rstd multiplies the elementwise term only and the two mean terms are subtracted unscaled; "
         "dweight, dbias and the forward right"),
        "pattern: a hand-derived backward's parenthesis misplaced"),
    "gn_dparams_from_dx_in_dy_buffer": (
        "group_norm", "backward",
        ("with a weight or a bias: the dx kernel writes dx in place into dy's buffer before the parameter-gradient "
         "kernel reads it, so dweight = per-channel sum of dx * x_hat and dbias = per-channel sum of dx; dx and "
         "the forward right"),
        DXINDY),
    "gn_stats_half_warp_reduce": (
        "group_norm", "block",
        ("each group's values strided over the 32 lanes of a warp (value j to lane j mod 32) and the lanes' "
         "partial sums combined by a butterfly of width 16, whose lane 0 then holds lanes 0-15 only: the sums "
         "for the mean and the variance miss every value with j mod 32 >= 16 and are divided by the full count: "
         "mean, rstd, y and the backward on them"),
        HALFWARP),
    # ------------------------------------------------------------------ instance_norm
    "in_2d_input_read_as_unbatched": (
        "instance_norm", "layout",
        ("2-D inputs (N <= C) in eval with running statistics: the (N, C) input taken for torch's unbatched (C, L) "
         "layout, so row r is normalized with running_mean[r] and running_var[r] and scaled by weight[r] and "
         "bias[r] (the row index where the column's channel belongs): y, the returned statistics and dx = dy * "
         "weight[r] * rstd"),
        "cf. " + GH + "pytorch/pytorch/pull/65323 (instance norm's functional form unable to tell a batched input "
        "from an unbatched one, treating the first axis as the batch)"),
    "in_tile_instance_from_first_element": (
        "instance_norm", "layout",
        ("instance statistics, a spatial size S not a multiple of 256: the elementwise normalize pass walks the "
         "(N * C, S) buffer in tiles of 256 values and takes the instance index once per tile from its first "
         "element, so a tile's values past an instance boundary use the previous instance's mean and rstd "
         "(and its channel's weight and bias): y there; the saved statistics and the gradients right"),
        TILEROW),
    "in_running_mean_over_batch_divided_by_C": (
        "instance_norm", "running",
        ("training with running statistics, N != C: the instances' momentum updates summed over the batch and "
         "divided by the channel count C instead of the batch size N (the average's count taken from the wrong "
         "axis): running_mean and running_var; y, the saved statistics and the gradients right"),
        "pattern: an average over one axis divided by another axis' length"),
    "in_welford_m2_old_mean_delta_squared": (
        "instance_norm", "one_pass",
        ("instance statistics: each instance's variance by a Welford loop whose M2 update adds delta * delta "
         "(the deviation from the mean before the update, squared) where delta * (x - new mean) belongs: var "
         "too large, rstd, y, the backward on it, and the running variance's update; the mean right"),
        WELFORD),
    "in_rstd_rsqrt_estimate": (
        "instance_norm", "precision",
        ("float32 inputs, instance statistics: rstd taken by the hardware reciprocal-square-root estimate without "
         "a Newton step (12 significant bits, the float32 result rounded to 12 bits): the saved rstd, y and dx "
         "from it"),
        RSQRT),
    # ------------------------------------------------------------------ z_score
    "zs_tail_lanes_not_centred": (
        "z_score", None,
        ("slices longer than 16 values, not a multiple of 16: the vector body writes y = (x - mean) / std * "
         "weight + bias, but the scalar tail loop over the last n mod 16 values of each slice computes x / std * "
         "weight + bias (the mean subtraction missing there): y at those positions; the statistics and dx right"),
        VSAG),
    "zs_eps_scaled_by_bessel_factor": (
        "z_score", "eps",
        ("ddof > 0, eps > 0: the variance formed as the biased variance plus eps (a layer-norm helper's var + "
         "eps) and then given the unbiased factor n / (n - ddof), so eps enters as eps * n / (n - ddof): std, y "
         "and dx from it; the mean right"),
        "pattern: a correction factor applied after a shared helper already added eps"),
    "zs_dparams_last_row_block_only": (
        "z_score", "reduction",
        ("more than 128 slices, with a weight or a bias: dweight and dbias reduced per block of 128 slices and "
         "each block's partial stored to the output (a plain store where an atomic add belongs), so the output "
         "holds the last block's partial only; dx and the forward right"),
        "pattern: a per-block partial stored where it should be accumulated"),
    "zs_tile_slice_from_first_element": (
        "z_score", "layout",
        ("more than one slice, a slice length not a multiple of 256: the elementwise pass walks the (slices, "
         "n) buffer in tiles of 256 values and takes the slice index once per tile from its first element, so a "
         "tile's values past a slice boundary use the previous slice's mean and std: y there; the statistics and "
         "dx right"),
        TILEROW),
    "zs_sumsq_half_warp_reduce": (
        "z_score", "block",
        ("each slice's scaled squared deviations strided over the 32 lanes of a warp and combined by a butterfly "
         "of width 16: the sum of squares misses every value with j mod 32 >= 16 and is divided by n - ddof as "
         "usual: std, y and dx from it; the mean right"),
        HALFWARP),
    # ------------------------------------------------------------------ lp_normalize
    "lp_norm_half_warp_reduce": (
        "lp_normalize", "block",
        ("each slice's sum of (|x| / s)^p strided over the 32 lanes of a warp and combined by a butterfly of "
         "width 16, so the norm misses every value with j mod 32 >= 16 (s = max |x| right): the norm output, y "
         "and dx from that norm"),
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/161 (a row-normalize kernel's reduction dropping lanes' "
        "contributions and yielding wrong row norms)"),
    "lp_p2_rsqrt_estimate": (
        "lp_normalize", "precision",
        ("p = 2, zero_rule='torch', float32 inputs: y = x * r with r the hardware reciprocal-square-root "
         "estimate of sum x^2 without a Newton step (12 significant bits), clamped at 1 / eps; dx from that r; "
         "the norm output (a separate sqrt) right"),
        RSQRT),
    "lp_y_from_abs_register": (
        "lp_normalize", None,
        ("the forward computes |x| in place in its register for the sum of powers and divides that register by "
         "the norm: y = |x| / max(norm, eps) (the sign of x lost); the norm output and dx right"),
        "pattern: a register reused after an in-place transform"),
    "lp_half2_sum_high_lane_dropped": (
        "lp_normalize", "block",
        ("16-bit inputs: each slice's values loaded as half2 pairs and only the low half of each pair's "
         "(|x| / s)^p added into the sum (s = max |x| over both halves): the norm over the even positions, the "
         "norm output, y and dx from it"),
        "pattern: a packed two-lane load whose second lane is never unpacked"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_grad_exp_overflow_nan": (
        "group_norm_silu", None,
        ("the backward's SiLU derivative written with e = exp(-p) in float32 as s + p * e / (1 + e)^2: where the "
         "pre-activation p is below about -88.7, e overflows and e / (1 + e)^2 is inf / inf = NaN, so dp, dx, "
         "dweight and dbias are NaN there; the forward right"),
        "cf. " + GH + "antirez/ds4/pull/498 (a naive SiLU whose exp(-gate) overflows for a large negative gate and "
        "gives NaN)"),
    "gns_stats_single_block_4096": (
        "group_norm_silu", "block",
        ("groups of more than 4096 values: the statistics kernel loads one block of min(pow2(n), 4096) values "
         "without a loop, so each group's mean and variance are those of its first 4096 values (divided by "
         "4096): mean, rstd, y and the backward on them"),
        "pattern: a block size capped without a loop over the remaining blocks"),
    "gns_weight_half2_halves_swapped": (
        "group_norm_silu", "layout",
        ("16-bit inputs, an even C, with a weight or a bias: the per-channel weight and bias loaded as half2 "
         "pairs whose halves are taken in the wrong order, so channel 2k uses weight[2k + 1] and bias[2k + 1] and "
         "channel "
         "2k + 1 the pair's first: p, y and the backward's g (dx); dweight and dbias reduced per channel as usual"),
        "pattern: the low and high halves of a packed pair exchanged"),
    "gns_bwd_dot_half_warp_reduce": (
        "group_norm_silu", "block",
        ("the backward's group sum of g * x_hat (the projection term) strided over the 32 lanes of a warp and "
         "combined by a butterfly of width 16 that misses every value with j mod 32 >= 16: dx; mean(g), the "
         "forward, dweight and dbias right"),
        "cf. " + GH + "turboderp-org/exllamav3/pull/363 (a norm reduction's warp partial taken from a lane that "
        "does not hold the complete sum)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_min_scale_floor_on_amax": (
        "norm_quant_block", "quant_scale",
        ("fp8_group with a min_scale: the floor applied to each block's amax before the division by qmax "
         "(amax = max(amax, min_scale), scale = amax / qmax) instead of to the scale, so the scale's floor is "
         "min_scale / qmax and the amax output is the floored amax: the scale and amax outputs of blocks below "
         "the floor, and q from that scale"),
        "cf. " + GH + "pytorch/ao/pull/193 (a per-token quantizer clamping amax with its epsilon before the "
        "division by q_max, where the scale's clamp belongs)"),
    "nqb_weight_loaded_as_bf16": (
        "norm_quant_block", "precision",
        ("inputs other than bfloat16 with a weight: the weight read through a bfloat16 pointer (the checkpoint's "
         "dtype, rounded to nearest) before the normalization's multiply: y, each block's amax, the scales and "
         "q"),
        "pattern: a parameter pointer typed for the model's storage dtype"),
    "nqb_ln_weight_bias_swapped": (
        "norm_quant_block", "affine",
        ("norm='layer_norm' with a weight and a bias: the fused kernel handed (bias, weight) in its (gamma, "
         "beta) slots, y = x_hat * bias + weight, then the blocks' amax, scales and q of that y"),
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a layer norm kernel assigning the weight's and the bias's "
        "roles the wrong way round)"),
    "nqb_nvfp4_encode_per_row": (
        "norm_quant_block", "quant_scale",
        ("nvfp4 without a global_scale: the encode factor 2688 / amax taken per row from the row's own amax "
         "instead of the tensor's, so each row's block scales amax_j / 6 * encode_row, q from them, and the "
         "tensor_scale output holds the first row's 1 / encode"),
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2931 (a row-scaled NVFP4 recipe's per-row global amax, the "
        "per-tensor one's variant)"),
    "nqb_rms_rsqrt_estimate": (
        "norm_quant_block", "precision",
        ("norm='rms_norm', float32 inputs: each row's rstd by the hardware reciprocal-square-root estimate "
         "without a Newton step (12 significant bits): y, the blocks' amax, the scales and q"),
        RSQRT),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_bwd_sums_over_sample": (
        "adaptive_layer_norm", "reduction",
        ("the backward's mean(g) and mean(g * x_hat) reduced over all T * H values of a sample (every token of "
         "it) instead of each token's H values: dx; dscale, dshift and the forward right"),
        "pattern: a backward reduction launched over the sample instead of the row"),
    "aln_gain_product_rounded_before_shift": (
        "adaptive_layer_norm", "precision",
        ("16-bit inputs with a scale and a shift: the unfused modulation rounds x_hat * (1 + scale) to the input "
         "dtype and adds the shift to that, rounding again: y; the statistics and the gradients right"),
        "pattern: an unfused elementwise chain storing its intermediate in the activation dtype"),
    "aln_dmod_from_dx_in_dy_buffer": (
        "adaptive_layer_norm", "backward",
        ("with a scale or a shift: the backward writes dx in place into dy's buffer before the modulation's "
         "gradients are reduced from it: dscale = per-sample sum of dx * x_hat and dshift = per-sample sum of "
         "dx; dx and the forward right"),
        DXINDY),
    "aln_half2_stats_high_lane_dropped": (
        "adaptive_layer_norm", "block",
        ("16-bit inputs: each token's values loaded as half2 pairs and only the low half of each pair "
         "accumulated into the sums for the mean and the variance, still divided by H: mean, rstd, y, dx and "
         "dscale from them"),
        "pattern: a packed two-lane load whose second lane is never unpacked"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _welford_old_delta(x, acc):
    """(mean, var) per row of ``x`` (rows, n) by a Welford loop whose M2 adds delta * delta (delta about the mean
    before the update)."""
    R, n = x.shape
    mean = np.zeros(R, acc)
    m2 = np.zeros(R, acc)
    for k in range(n):
        v = x[:, k]
        delta = v - mean
        mean = mean + delta / acc(k + 1)
        m2 = m2 + delta * delta                                  # delta * (v - mean) belongs
    return mean.reshape(R, 1), (m2 / acc(n)).reshape(R, 1)


def _rsqrt_estimate(v):
    """1 / sqrt(v) rounded to 12 significant bits (a hardware estimate without its Newton step)."""
    r = 1 / np.sqrt(v)
    with np.errstate(invalid="ignore", over="ignore"):
        m, e = np.frexp(r)
        est = np.ldexp(np.round(m * 4096.0) / 4096.0, e).astype(r.dtype)
    return np.where(np.isfinite(r), est, r)


def _lanes(n, keep):
    """A (1, n) mask of the row positions a reduction keeps: ``keep`` a function of the position index."""
    return keep(np.arange(n)).reshape(1, n)


def _half_warp(j):
    return j % 32 < 16


def _low_half2(j):
    return j % 2 == 0


def _masked_sum(a, mask):
    return _rsum(np.where(mask, a, a.dtype.type(0)))


def _tile_rows(R, n, T=256):
    """The row (of R rows of n) each element of the flat (R * n) buffer is processed with when the row is taken
    once per tile of T values from the tile's first element, as an (R, n) index array."""
    f = np.arange(R * n)
    return ((f // T) * T // n).reshape(R, n)


class Blind39Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind39"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn39(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn39(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_welford_m2_old_mean_delta_squared" and n:
                bmean, bvar = _welford_old_delta(x, acc)
            elif b == "bn_half2_stats_high_lane_dropped" and d in _HALF and n:
                mask = _lanes(n, lambda j: (j % S) % 2 == 0)     # the low half of each pair of a plane
                bmean = _masked_sum(x, mask) / n
                bvar = _masked_sum((x - bmean) ** 2, mask) / n
            else:
                bmean = _rsum(x) / n
                bvar = _rsum((x - bmean) ** 2) / n
            mean, rstd = bmean, 1 / np.sqrt(bvar + eps)
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                guarded = b == "bn_running_update_guarded_on_old_count" and int(nbt) == 0
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0 and not guarded:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        bv = bv * (acc(n / (n - 1)) if n > 1 else acc(np.inf))
                    keep, take = (1 - m, m) if torch else (m, 1 - m)
                    rm, rv = keep * rm + take * bm, keep * rv + take * bv
            state = running_state(rm, rv, nbt, d)
        y = affine(xhat, w, bias)
        if b == "bn_tile_channel_from_first_element" and x0.ndim >= 3 and C > 1 and S and (S % 256):
            flat = np.ascontiguousarray(x0.astype(acc)).reshape(-1)
            ch = ((np.arange(flat.size) // 256) * 256 // S) % C     # the tile's first element's channel
            wv = np.ones(C, acc) if w is None else w.reshape(C)
            bv_ = np.zeros(C, acc) if bias is None else bias.reshape(C)
            yf = (flat - mean.reshape(C)[ch]) * rstd.reshape(C)[ch] * wv[ch] + bv_[ch]
            yout = yf.reshape(x0.shape)
        else:
            yout = from_channel_rows(y, x0.shape)
        out = {"y": _store(yout, d), "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            xb = xhat
            if b == "bn_bwd_x_read_after_inplace_y" and batch:
                xb = (y - mean) * rstd                                   # 'x' reloaded from y's buffer
            if batch:
                dx = _centred_dx(g, xb, rstd)
                if b == "bn_dx_tail_positions_fixed_stats_formula" and S > 4 and S % 4:
                    tail = _lanes(n, lambda j: (j % S) >= (S // 4) * 4)
                    dx = np.where(tail, g * rstd, dx)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                if b == "bn_dweight_without_invstd":
                    dw = _rsum(dy * (x - mean)).reshape(C)
                else:
                    dw = _rsum(dy * xb).reshape(C)
                grads["weight"] = _store(dw, d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in39(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in39(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        unbatched = (b == "in_2d_input_read_as_unbatched" and x0.ndim == 2 and not inst and Nb <= C)
        imean = None
        if inst:
            if b == "in_welford_m2_old_mean_delta_squared" and S:
                imean, ivar = _welford_old_delta(x, acc)
                rstd = 1 / np.sqrt(ivar + eps)
            else:
                imean, rstd = self._ln_stats(x, eps)
                if b == "in_rstd_rsqrt_estimate" and d == "float32":
                    var = _rsum((x - imean) ** 2) / S
                    rstd = _rsqrt_estimate(var + eps)
            mean = imean
        elif unbatched:                                                   # row r read as channel r
            r = np.repeat(np.arange(Nb), C)
            mean = st["running_mean"].astype(acc).reshape(-1)[r].reshape(-1, 1)
            rstd = (1 / np.sqrt(st["running_var"].astype(acc).reshape(-1)[r] + eps)).reshape(-1, 1)
            wr = None if w is None else w.astype(acc).reshape(-1)[r].reshape(-1, 1)
            br = None if bias is None else bias.astype(acc).reshape(-1)[r].reshape(-1, 1)
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_tile_instance_from_first_element" and inst and S and S % 256:
            rows = _tile_rows(Nb * C, S)
            xt = (x - mean.reshape(-1)[rows]) * rstd.reshape(-1)[rows]
            wt = None if wr is None else wr.reshape(-1)[rows]
            bt = None if br is None else br.reshape(-1)[rows]
            out["y"] = _store(affine(xt, wt, bt).reshape(x0.shape), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                if b == "in_welford_m2_old_mean_delta_squared":
                    ub = ivar * acc(S / (S - 1) if S > 1 else np.inf)
                else:
                    ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_mean_over_batch_divided_by_C":
                    nm = (1 - m) * rm + m * imean.reshape(Nb, C)
                    nv = (1 - m) * rv + m * ub.reshape(Nb, C)
                    rm, rv = nm.sum(axis=0) / acc(C), nv.sum(axis=0) / acc(C)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            dx = _centred_dx(g, xhat, rstd) if inst else g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn39(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn39(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn39(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        mask = None
        if b == "gn_half2_stats_high_lane_dropped" and d in _HALF:
            mask = _lanes(n, _low_half2)
        elif b in ("gn_stats_half_warp_reduce",):
            mask = _lanes(n, _half_warp)
        if b == "gn_stats_channel_loop_one_short" and cg > 1:
            k = (cg - 1) * S                                              # the group's first C / G - 1 channels
            part = np.ascontiguousarray(xr[:, :k])
            mean = _rsum(part) / k
            var = _rsum((part - mean) ** 2) / k
        elif b == "gns_stats_single_block_4096" and n > 4096:
            part = np.ascontiguousarray(xr[:, :4096])
            mean = _rsum(part) / 4096
            var = _rsum((part - mean) ** 2) / 4096
        elif mask is not None:
            mean = _masked_sum(xr, mask) / n
            var = _masked_sum((xr - mean) ** 2, mask) / n
        else:
            mean = _rsum(xr) / n
            var = _rsum((xr - mean) ** 2) / n
        rstd = 1 / np.sqrt(var + eps)
        xhat = ((xr - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "gns_weight_half2_halves_swapped" and d in _HALF and C % 2 == 0:
            sw = np.arange(C) ^ 1                                         # the pair's halves exchanged
            wf = None if w is None else w[:, sw, :]
            bf = None if bias is None else bias[:, sw, :]
        p = affine(xhat, wf, bf)
        if silu:
            sg, _ = _sigmoids(p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        xb = (xr - mean) * rstd
        if silu and b == "gns_silu_grad_exp_overflow_nan":
            with np.errstate(over="ignore", invalid="ignore"):
                e = np.exp(-p)
                sg = 1 / (1 + e)
                dp = dy * (sg + p * e / ((1 + e) * (1 + e)))
        elif silu:
            sg, rest = _sigmoids(p)
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        g = dp if wf is None else dp * wf
        gr = g.reshape(Nb * G, n)
        sg_ = _rsum(gr)
        sgx = _rsum(gr * xb)
        if b == "gns_bwd_dot_half_warp_reduce":
            sgx = _masked_sum(gr * xb, _lanes(n, _half_warp))
        if b == "gn_bwd_partials_read_channel_major" and Nb > 1 and C > 1:
            def regroup(t):
                P = _channel_part(t, Nb, C, S)                            # (Nb, C) partials, n * C + c
                R_ = P.reshape(-1)[(np.arange(C)[None, :] * Nb + np.arange(Nb)[:, None])]
                return R_.reshape(Nb * G, cg).sum(axis=1, keepdims=True)
            sg_ = regroup(g)
            sgx = regroup(g * xb.reshape(Nb, C, S))
        if b == "gn_bwd_rstd_on_g_term_only":
            dx = (rstd * gr - sg_ / n - xb * (sgx / n)).reshape(Nb, C, S)
        else:
            dx = (rstd * (gr - sg_ / n - xb * (sgx / n))).reshape(Nb, C, S)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        xpv = xb.reshape(Nb, C, S)
        src_w, src_b = dp * xpv, dp
        if b == "gn_dparams_from_dx_in_dy_buffer":
            src_w, src_b = dx * xpv, dx                                   # dy's buffer holds dx by now
        for key, t, given in (("weight", src_w, w), ("bias", src_b, bias)):
            if given is None:
                continue
            grads[key] = _store(_channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs39(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows39(x, ddof, eps, acc, b):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
        m = n - ddof
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                       # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        if b == "zs_sumsq_half_warp_reduce":
            sumsq = _masked_sum(q * q, _lanes(n, _half_warp))
        else:
            sumsq = _rsum(q * q)
        if m <= 0:
            return mean, np.full(a.shape, np.nan, acc), dev
        if b == "zs_eps_scaled_by_bessel_factor" and ddof > 0:
            std = a * np.sqrt((sumsq / acc(n) + eps / (a * a)) * acc(n / m))
        else:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        return mean, std, dev

    def _zs39(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, std, dev = self._zs_rows39(x, ddof, eps, acc, b)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        y = affine(xhat, w, bias)
        if b == "zs_tail_lanes_not_centred" and n > 16 and n % 16:
            tail = _lanes(n, lambda j: j >= (n // 16) * 16)
            y = np.where(tail, affine(np.where(zero, acc(0), x / safe), w, bias), y)
        if b == "zs_tile_slice_from_first_element" and R > 1 and n and n % 256:
            rows = _tile_rows(R, n)
            mf, sf = mean.reshape(-1)[rows], safe.reshape(-1)[rows]
            y = affine((x - mf) / sf, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if w is None else dy * w
            if g.size == 0:
                dx = np.zeros_like(g)
            elif m <= 0:
                dx = np.full(g.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                if b == "zs_dparams_last_row_block_only" and R > 128:
                    t = t[((R - 1) // 128) * 128:]                      # each block's store overwrites
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp39(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm39(v, p, acc, mask=None):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|; the sum over ``mask``."""
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = np.abs(v) / s

        def tot(a):
            return _rsum(a) if mask is None else _masked_sum(a, mask)
        if p == 1.0:
            return s * tot(t)
        if p == 2.0:
            return s * np.sqrt(tot(t * t))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * tot(t ** acc(p)) ** inv

    def _lp39(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        mask = None
        if b == "lp_norm_half_warp_reduce":
            mask = _lanes(n, _half_warp)
        elif b == "lp_half2_sum_high_lane_dropped" and d in _HALF:
            mask = _lanes(n, _low_half2)
        norm = self._lp_norm39(x, p, acc, mask)
        nout = norm
        est = b == "lp_p2_rsqrt_estimate" and p == 2.0 and d == "float32" and torch_rule
        if est:
            s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
            s = np.where((s > 0) & np.isfinite(s), s, acc(1))
            with np.errstate(divide="ignore"):
                r = _rsqrt_estimate(_rsum((x / s) ** 2)) / s
            r = np.minimum(r, 1 / eps)                                    # x * min(rsqrt, 1 / eps)
            y = x * r
        elif torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        if b == "lp_y_from_abs_register":
            y = np.abs(y)
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            if est:
                safe = np.where(used, 1 / r, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        out = {"y": _store(back(y), d), "norm": back(nout, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb39(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized39(self, call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp, d = call.inputs, call.dtype
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        w = None if w is None else w.astype(acc).reshape(1, H)
        bias = None if bias is None else bias.astype(acc).reshape(1, H)
        if b == "nqb_weight_loaded_as_bf16" and w is not None and d != "bfloat16":
            w = _store(w, "bfloat16").astype(acc)
        if b == "nqb_ln_weight_bias_swapped" and cfg["norm"] == "layer_norm" and w is not None \
                and bias is not None:
            w, bias = bias, w
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        elif b == "nqb_rms_rsqrt_estimate" and d == "float32":
            y = s * _rsqrt_estimate(_rsum(s * s) / H + eps)
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w
        y = y if bias is None else y + bias
        return s, y

    def _nqb39(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized39(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            if b == "nqb_min_scale_floor_on_amax" and cfg["min_scale"] is not None:
                amax = np.maximum(amax, acc(cfg["min_scale"]))            # the floor on amax, not on the scale
                S = group_scales(amax, qmax, rule, {**cfg, "min_scale": None}, acc)
            else:
                S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        elif b == "nqb_nvfp4_encode_per_row" and inp.get("global_scale") is None:
            encs = [nvfp4_encode(None, amax[i:i + 1], acc) for i in range(amax.shape[0])]
            parts = [nvfp4_scales(amax[i:i + 1], e, acc) for i, e in enumerate(encs)]
            ts = parts[0][0]
            S = np.concatenate([pt[1] for pt in parts], axis=0)
            scale_out = np.concatenate([pt[2] for pt in parts], axis=0)
        else:
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln39(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln39(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_half2_stats_high_lane_dropped" and d in _HALF:
            mask = _lanes(H, _low_half2)
            mean = _masked_sum(x, mask) / H
            var = _masked_sum((x - mean) ** 2, mask) / H
        else:
            mean = _rsum(x) / H
            var = _rsum((x - mean) ** 2) / H
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        if b == "aln_gain_product_rounded_before_shift" and d in _HALF and gain is not None and sh is not None:
            y = _half(_half(xhat * gain, d) + sh, d)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_sums_over_sample" and T > 0:
            gs, xs = g.reshape(B, T * H), xhat.reshape(B, T * H)
            sg_ = np.repeat(_rsum(gs), T, axis=0) / H / T
            sgx = np.repeat(_rsum(gs * xs), T, axis=0) / H / T
            dx = rstd * (g - sg_ - xhat * sgx)
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        src = dx if b == "aln_dmod_from_dx_in_dy_buffer" else dy            # dy's buffer holds dx by now
        if scale is not None:
            grads["scale"] = _store(per_sample(src * xhat, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(src, B, T, H), d)
        return Returned(out, grads)


def _channel_part(t, Nb, C, S):
    """Per-(sample, channel) sums of t (Nb, C, S) or (Nb * G, C / G * S) as (Nb, C)."""
    return np.asarray(t).reshape(Nb, C, S).sum(axis=2)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_bwd_x_read_after_inplace_y": ("batch_norm/normal_f64_7x3", "grad.weight"),
    "bn_dx_tail_positions_fixed_stats_formula": ("batch_norm/normal_f32_6x4x25", "grad.x"),
    "bn_running_update_guarded_on_old_count": ("batch_norm/normal_train3_eval_f32_6x3x5", "state.running_mean"),
    "bn_dweight_without_invstd": ("batch_norm/normal_f64_7x3", "grad.weight"),
    "bn_welford_m2_old_mean_delta_squared": ("batch_norm/normal_f64_7x3", "output.rstd"),
    "bn_tile_channel_from_first_element": ("batch_norm/normal_f32_6x4x25", "output.y"),
    "bn_half2_stats_high_lane_dropped": ("batch_norm/normal_f16_8x2x4x4", "output.mean"),
    "gn_stats_channel_loop_one_short": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "gn_bwd_partials_read_channel_major": ("group_norm/normal_g4_f32_2x8x5x7", "grad.x"),
    "gn_half2_stats_high_lane_dropped": ("group_norm/normal_g2_f16_2x8x4x4", "output.mean"),
    "gn_bwd_rstd_on_g_term_only": ("group_norm/normal_g3_f64_3x6x7", "grad.x"),
    "gn_dparams_from_dx_in_dy_buffer": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_stats_half_warp_reduce": ("group_norm/normal_g4_f32_2x8x5x7", "output.mean"),
    "in_2d_input_read_as_unbatched": ("instance_norm/normal_eval_2d_bf16_3x4", "output.y"),
    "in_tile_instance_from_first_element": ("instance_norm/normal_f32_2x3x100", "output.y"),
    "in_running_mean_over_batch_divided_by_C": ("instance_norm/normal_train3_eval_f32_4x3x6", "state.running_mean"),
    "in_welford_m2_old_mean_delta_squared": ("instance_norm/normal_f64_3x2x7", "output.rstd"),
    "in_rstd_rsqrt_estimate": ("instance_norm/normal_f32_2x3x100", "output.rstd"),
    "zs_tail_lanes_not_centred": ("z_score/normal_f32_6x100", "output.y"),
    "zs_eps_scaled_by_bessel_factor": ("z_score/normal_eps0.3_f32_9x7", "output.std"),
    "zs_dparams_last_row_block_only": ("z_score/normal_f32_260x3", "grad.weight"),
    "zs_tile_slice_from_first_element": ("z_score/normal_f32_6x100", "output.y"),
    "zs_sumsq_half_warp_reduce": ("z_score/normal_f32_6x100", "output.std"),
    "lp_norm_half_warp_reduce": ("lp_normalize/normal_f32_6x100", "output.norm"),
    "lp_p2_rsqrt_estimate": ("lp_normalize/normal_f32_9x7", "output.y"),
    "lp_y_from_abs_register": ("lp_normalize/normal_f32_9x7", "output.y"),
    "lp_half2_sum_high_lane_dropped": ("lp_normalize/normal_f16_6x100", "output.norm"),
    "gns_silu_grad_exp_overflow_nan": ("group_norm_silu/normal_g2_neg90_f32_2x4x6x5", "grad.x"),
    "gns_stats_single_block_4096": ("group_norm_silu/normal_g2_f32_1x4x32x66", "output.mean"),
    "gns_weight_half2_halves_swapped": ("group_norm_silu/normal_g32_f16_2x64x4x4", "output.y"),
    "gns_bwd_dot_half_warp_reduce": ("group_norm_silu/normal_g4_f32_2x8x5x7", "grad.x"),
    "nqb_min_scale_floor_on_amax": ("norm_quant_block/zero_rms_g_floor2.2321428571428573e-13_f32_2x256",
                                    "output.scale"),
    "nqb_weight_loaded_as_bf16": ("norm_quant_block/normal_rms_g_wdecades_f32_4x512", "output.amax"),
    "nqb_ln_weight_bias_swapped": ("norm_quant_block/normal_ln_g_wb_f32_4x256", "output.amax"),
    "nqb_nvfp4_encode_per_row": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.scale"),
    "nqb_rms_rsqrt_estimate": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "aln_bwd_sums_over_sample": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_gain_product_rounded_before_shift": ("adaptive_layer_norm/normal_bf16_2x8x32", "output.y"),
    "aln_dmod_from_dx_in_dy_buffer": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.scale"),
    "aln_half2_stats_high_lane_dropped": ("adaptive_layer_norm/normal_bf16_2x8x32", "output.mean"),
}
