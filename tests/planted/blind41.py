"""A forty-first held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind41Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn41``, ``_in41``, ``_gn41`` for group_norm and
group_norm_silu, ``_zs41``, ``_lp41``, ``_nqb41``, ``_aln41``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind41Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind39.py (the same mistake on the same op; the fortieth set, written at the same time for the other ops,
shares none of these ops). Written in session 34.
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
    pow2,
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
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind41Kernel")

GH = "https://github.com/"
WELFORD = ("cf. " + GH + "pbstark/SHANGRLA/issues/88 (a hand-written Welford running update whose terms were "
           "taken at the wrong step)")
RSQRT = ("cf. " + GH + "Tencent/ncnn/pull/6903 (layernorm / rmsnorm using the hardware approximate rsqrt without "
         "enough Newton-Raphson refinement, ~2.5e-4 relative error)")
X_CL = (GH + "pytorch/pytorch/pull/64100 (sync batch norm backward: when grad_output is channels-last but the "
        "input is not, the input read as if it were channels-last, 'so reading the wrong values')")
UNROLL = "pattern: a loop unrolled by two (its stride doubled) whose body still handles one step"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_bwd_x_read_channels_last": (
        "batch_norm", "layout",
        ("batch statistics, inputs of three or more axes with more than one channel and position: the backward "
         "kernels reload x with channels-last strides (element (n, c, s) of the NCHW-contiguous buffer taken "
         "from flat position (n * S + s) * C + c; dy read right), so x_hat recomputed there is (that x - mean) * "
         "rstd: dx (the centred formula on it) and dweight = sum(dy * x_hat); the forward, the running update and "
         "dbias right"),
        X_CL),
    "bn_dx_elementwise_term_unweighted": (
        "batch_norm", "backward",
        ("batch statistics with a weight: dx = rstd * (dy - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight: "
         "the elementwise term written with the raw dy while both reductions use g; dweight, dbias and the "
         "forward right"),
        "pattern: one of three terms of a hand-derived backward left on the unscaled operand"),
    "bn_bessel_factor_from_plane_size": (
        "batch_norm", "bessel",
        ("torch convention, training with running statistics, inputs of three or more axes: the unbiased factor "
         "of the running variance taken as S / (S - 1) with S the spatial size of one (sample, channel) plane "
         "(the per-plane count the statistics kernel loops over) instead of n / (n - 1), n = N * S: running_var; "
         "running_mean, y, the saved statistics and the gradients right"),
        "pattern: a correction factor computed from the inner loop's count instead of the reduction's total"),
    "bn_chan_merge_weight_of_own_count": (
        "batch_norm", "merge",
        ("batch statistics, more than one sample: each channel's statistics merged sample by sample from the "
         "per-sample partials (S, mean_i, M2_i) by Chan's update with the mean step written delta * n_a / n (the "
         "accumulated count where the incoming partial's n_b belongs), M2 += delta^2 * n_a * n_b / n from those "
         "means: the mean, the variance, rstd, y, the backward on them and the running update"),
        "cf. " + GH + "NVIDIA/apex/issues/1768 (a channels-last batch norm's Welford mean/var merge giving a wrong "
        "mean and variance)"),
    "bn_stats_pairs_added_in_half": (
        "batch_norm", "precision",
        ("16-bit inputs, batch statistics: the sums for the mean add each (sample, channel) plane's values in "
         "pairs (positions 2k, 2k + 1) with a packed half-precision add, each pair's sum rounded to the input "
         "dtype before the float32 accumulation; the variance in float32 about that mean: the mean, rstd, y, the "
         "backward and the running update from them"),
        "pattern: a packed __hadd2 of two inputs before the widening to the float accumulator"),
    "bn_momentum_never_read": (
        "batch_norm", "running",
        ("training with running statistics and a configured momentum: the update factor always taken as the "
         "cumulative average's 1 / num_batches_tracked (after the increment), the configured momentum never "
         "read: running_mean and running_var (replaced by the batch's on the first step); y, the saved "
         "statistics, the gradients and num_batches_tracked right"),
        "cf. " + GH + "pytorch/pytorch/issues/31498 (momentum=None's cumulative average handled on the Python "
        "side, the kernel's factor chosen apart from the configured momentum)"),
    "bn_stats_sample_split_middle_twice": (
        "batch_norm", "reduction",
        ("batch statistics, an odd batch of more than one sample: each channel's sums split between two programs, "
         "the first over samples 0 .. ceil(N / 2) - 1 and the second starting at floor(N / 2), so the middle "
         "sample is summed twice, the totals still divided by n = N * S: the mean, the variance, rstd, y, the "
         "backward and the running update from them"),
        "pattern: the two halves of a split taken with ceil for one bound and floor for the other"),
    "bn_bwd_rstd_eps_outside_sqrt": (
        "batch_norm", "eps",
        ("batch statistics: the backward kernel recomputes each channel's rstd from the saved variance as "
         "1 / (sqrt(var) + eps) (the forward uses 1 / sqrt(var + eps)): x_hat, dx and dweight from that rstd; "
         "the forward, the saved statistics and dbias right"),
        "pattern: a second copy of the rstd formula written with eps outside the root"),
    "bn_eval_dparams_not_computed": (
        "batch_norm", "backward",
        ("eval with running statistics, with a weight or a bias: the backward-reduce kernel launched under "
         "'training' only, so dweight and dbias are returned as their zero-filled buffers; dx = g * rstd and "
         "the forward right"),
        "cf. " + GH + "torch/nn/pull/615 (batch normalization's backward written for training mode only, the "
        "evaluate-mode backprop added later) and pytorch/xla/issues/913 (BatchNorm producing wrong gradients in "
        "eval mode)"),
    "bn_affine_channel_index_channels_last": (
        "batch_norm", "layout",
        ("inputs of three or more axes with more than one channel and position, with a weight or a bias: the "
         "elementwise kernel takes the channel of the parameters' load as (flat index within the sample) mod C "
         "(the channels-last index) instead of index // S: y = x_hat * weight[that] + bias[that] and dx from "
         "g = dy * weight[that]; the statistics, the running update, dweight and dbias right"),
        "cf. " + GH + "pytorch/pytorch/issues/62594 (BatchNorm2d giving wrong results for a channels-last "
        "input: its strides misread in the elementwise kernel)"),
    # ------------------------------------------------------------------ group_norm
    "gn_store_mask_spills_into_next_group": (
        "group_norm", "layout",
        ("more than one group, a channel count per group C / G not a power of two: each program loads its "
         "group's channels into pow2(C / G) lanes and masks the statistics right, but its store is masked by "
         "c < C only, so the padding lanes write the first pow2(C / G) - C / G channels of the next group with "
         "this group's mean and rstd (and those channels' weight and bias), landing after that group's own "
         "stores: y there; the saved statistics and the gradients right"),
        GH + "flagos-ai/FlagGems/issues/4984 (group_norm wrong when C / num_groups is not a power of two; the "
        "fix, flagos-ai/FlagGems/pull/4985: the padding lanes' mask only bounded the channel by C, and 'the "
        "tl.store used the same mask, so program g also wrote normalized values into channels owned by program "
        "g+1')"),
    "gn_bwd_c3_mean_term_sign_flipped": (
        "group_norm", "backward",
        ("backward in the ds / db form (ds = sum g x, db = sum g per (sample, group), c2 = (db * mean - ds) * "
         "rstd^3 / n, dx = rstd * g + c2 * x + c3) with c3 written c2 * mean - db * rstd / n (the sign of its "
         "c2 * mean term flipped): dx off by 2 * c2 * mean; dweight, dbias and the forward right"),
        "cf. " + GH + "uxlfoundation/oneDNN/issues/3543 (a group normalization backward whose diff_src is wrong "
        "while the forward is right)"),
    "gn_dweight_from_g": (
        "group_norm", "backward",
        ("with a weight: dweight per channel = sum of g * x_hat, g = dy * weight (the weighted gradient the dx "
         "pass forms, reused for the weight's reduction) instead of dy * x_hat; dx, dbias and the forward right"),
        "pattern: one g = dy * w computed for the whole backward and reused for dweight"),
    "gn_affine_before_normalization": (
        "group_norm", "semantics",
        ("with a weight or a bias: the per-channel affine applied to x before the group normalization and none "
         "after: y = GN(x * weight + bias), the statistics (and the saved mean and rstd) those of the affine "
         "input, dx = dx_n * weight, dweight = sum(dx_n * x) and dbias = sum(dx_n) with dx_n the normalization's "
         "input gradient (the derivative of that function)"),
        "pattern: the affine epilogue moved to a prologue when fusing the norm into a preceding kernel"),
    "gn_stats_loop_unrolled_body_once": (
        "group_norm", "block",
        ("groups of more than 32 values: the statistics loop walks each group's row in tiles of 32 with a stride "
         "of 64 (unrolled by two, its body written for one tile), so every value j with (j // 32) odd never "
         "enters the sums for the mean and the variance, still divided by the group's count: mean, rstd, y and "
         "the backward on them"),
        UNROLL),
    "gn_rstd_rsqrt_estimate": (
        "group_norm", "precision",
        ("float32 inputs: each group's rstd by the hardware reciprocal-square-root estimate without a Newton "
         "step (12 significant bits): y, the saved rstd and the backward from it; the mean right"),
        RSQRT),
    "gn_bwd_weight_of_next_channel": (
        "group_norm", "layout",
        ("more than one channel, with a weight: the dx kernel loads the weight of channel (c + 1) mod C for "
         "channel c (the weight pointer advanced before the load), g = dy * that weight in the elementwise term "
         "and both reductions; the forward, dweight and dbias right"),
        "pattern: a parameter pointer advanced before its load in a channel loop"),
    # ------------------------------------------------------------------ instance_norm
    "in_bwd_x_read_channels_last": (
        "instance_norm", "layout",
        ("instance statistics, more than one channel and spatial position: the backward kernel reloads x with "
         "channels-last strides (element (n, c, s) of the NCHW-contiguous buffer from flat position (n * S + s) "
         "* C + c; dy read right), x_hat = (that x - mean) * rstd: dx and dweight; the forward, the running "
         "update and dbias right"),
        "cf. " + X_CL),
    "in_running_read_repeat_interleaved": (
        "instance_norm", "running",
        ("training with running statistics, more than one sample and channel: the running buffers expanded to "
         "the N * C instance rows with repeat_interleave (row n * C + c takes running[(n * C + c) // N]) where "
         "repeat belongs, each row's momentum update taken from that value and averaged back per channel: "
         "running_mean and running_var; y, the saved statistics and the gradients right"),
        "pattern: repeat_interleave written for repeat when tiling a per-channel buffer over the batch"),
    "in_f16_y_through_bf16": (
        "instance_norm", "precision",
        ("float16 inputs: y converted from float32 to bfloat16 and that to float16 (the store helper's "
         "conversion through the other 16-bit type, two roundings, 8 significant bits): y; the statistics, the "
         "running update and the gradients right"),
        "cf. " + GH + "triton-lang/triton/pull/2583 (prevent double rounding when converting f32 -> fp8 through "
        "an intermediate 16-bit type)"),
    "in_bwd_projection_rstd_twice": (
        "instance_norm", "backward",
        ("instance statistics: dx = rstd * (g - mean(g) - x_hat * rstd * mean(g * x_hat)), the projection term "
         "carrying one factor rstd too many (the (x - mean) * k form's k = dot * rstd^3 / n applied to x_hat); "
         "dweight, dbias and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a batch norm backward getting the powers of the saved "
        "inverse std wrong)"),
    "in_row_pair_shared_mean": (
        "instance_norm", "layout",
        ("instance statistics, more than one instance: the normalize pass takes two instance rows (n * C + c) "
         "per program and loads the mean once, for the first row of the pair, each row with its own rstd: "
         "y of every odd row = (x - the even row's mean) * its rstd * weight + bias; the saved mean and rstd, "
         "the running update and the gradients (their own kernel, from the saved statistics) right"),
        "cf. " + GH + "hao-ai-lab/FastVideo/pull/1719 (a per-row quantity read once for a tile of two rows and "
        "applied to both)"),
    # ------------------------------------------------------------------ z_score
    "zs_dparams_from_dx_in_dy_buffer": (
        "z_score", "backward",
        ("with a weight or a bias: the dx pass writes dx in place into dy's buffer before the parameter-gradient "
         "pass reads it: dweight = sum over the slices of dx * x_hat and dbias = sum of dx; dx and the forward "
         "right"),
        "cf. " + GH + "unslothai/unsloth/pull/4550 (a norm backward writing dX into dY's buffer while the "
        "parameter-gradient logic still reads dY from it)"),
    "zs_inv_std_rsqrt_estimate": (
        "z_score", "precision",
        ("inputs other than float64 (the float32 kernel): each slice's 1 / std by the hardware "
         "reciprocal-square-root estimate of var + eps "
         "without a Newton step (12 significant bits), y = (x - mean) * that, the std output its reciprocal and "
         "dx divided by it; the mean right"),
        RSQRT),
    "zs_welford_m2_old_mean_delta_squared": (
        "z_score", "one_pass",
        ("each slice's sum of squared deviations by a Welford loop whose M2 update adds delta * delta (the "
         "deviation from the mean before the update, squared) where delta * (x - new mean) belongs; var = M2 / "
         "(n - ddof): std, y and dx; the mean right"),
        WELFORD),
    "zs_bwd_var_derivative_two_dropped": (
        "z_score", "backward",
        ("dx = (g - mean(g) - x_hat * sum(g * x_hat) / (2 (n - ddof))) / std: the chain through std written as "
         "d std = d var / (2 std) with d var = 2 (x - mean) / (n - ddof) * ... missing its factor 2, the "
         "projection term halved; the mean term, dweight, dbias and the forward right"),
        "pattern: the factor 2 of d(x^2)/dx dropped in a hand-derived variance gradient"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_dot_loop_unrolled_body_once": (
        "lp_normalize", "block",
        ("slices longer than 32: the backward's projection sum(dy * u) walks each slice in tiles of 32 with a "
         "stride of 64 (unrolled by two, its body written for one tile), the values j with (j // 32) odd never "
         "entering it: dx; y and the norm right"),
        UNROLL),
    "lp_y_dims_restored_transposed": (
        "lp_normalize", "layout",
        ("dim a tuple of two or more axes whose last two are both longer than one: y computed right on the "
         "slices but stored with those two normalized axes' strides exchanged (element (i, j) of each slice "
         "written at flat position j * I + i of its I x J block, the inverse permute's last two axes taken in "
         "the wrong order): y; the norm output and dx right"),
        "pattern: an inverse permutation built by reversing the forward one's trailing axes"),
    "lp_reciprocal_in_input_dtype": (
        "lp_normalize", "precision",
        ("16-bit inputs: y = x * r with the reciprocal r = 1 / max(norm, eps) (onnx: 1 / norm) held in a "
         "register of the input dtype (rounded), the product rounded again at the store: y; the norm output "
         "and dx right"),
        "pattern: the scaling factor of a 16-bit kernel declared with the element type"),
    "lp_f64_root_in_float32": (
        "lp_normalize", "precision",
        ("float64 inputs: the root of each slice's sum of powers taken by the single-precision function "
         "(sqrtf / powf: the sum narrowed to float32, the root widened back): the norm output, y and dx from it"),
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a kernel templated on T calling sqrtf, the "
        "single-precision root, for T = double)"),
    "lp_sum_halving_tree_drops_odd": (
        "lp_normalize", "block",
        ("each slice's sum of (|x| / s)^p reduced by a halving tree (element i added to element i + floor(k / 2) "
         "for a length k) that drops the unpaired last element at every level of odd length: the norm misses "
         "those values (s = max |x| right); the norm output, y and dx from it"),
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd "
        "lengths)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_fwd_stats_read_group_major": (
        "group_norm_silu", "layout",
        ("more than one sample and group: the statistics kernel writes each (sample, group)'s mean and rstd at "
         "n * G + g, but the elementwise pass reads them at g * N + n: p, y from another row's statistics; the "
         "saved mean and rstd and the gradients (their own kernel, reading right) right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward reading another group's saved "
        "mean and rstd)"),
    "gns_dbias_from_dp_xhat": (
        "group_norm_silu", "backward",
        ("with a bias: dbias = per-channel sum of dp * x_hat (the weight's reduction line copied), dp = dy * "
         "silu'(p), instead of sum dp; dx, dweight and the forward right"),
        "pattern: the two parameter reductions written from one copied line"),
    "gns_bwd_sums_channel_pairs_tail_dropped": (
        "group_norm_silu", "block",
        ("an odd channel count per group above one: the backward's group sums of g and g * x_hat walk the group's "
         "channels in pairs (loop bound (C / G) // 2), the last channel never entering them, the sums still "
         "divided by the group's count: dx; dweight, dbias and the forward right"),
        "pattern: a loop over pairs whose bound floors an odd count"),
    "gns_welford_m2_old_mean_delta_squared": (
        "group_norm_silu", "one_pass",
        ("each group's variance by a Welford loop whose M2 update adds delta * delta (the deviation from the mean "
         "before the update, squared) where delta * (x - new mean) belongs: rstd, y, the saved rstd and the "
         "backward on it; the mean right"),
        WELFORD),
    "gns_bwd_sigmoid_from_stored_y": (
        "group_norm_silu", "precision",
        ("the backward recovers sigmoid(p) as y / p from the stored output y (rounded to the input dtype; 1/2 "
         "where p is 0) instead of recomputing it in float32: dp = dy * s * (1 + p * (1 - s)) from that s, dx, "
         "dweight and dbias; the forward right"),
        "pattern: an activation's derivative rebuilt from the saved low-precision output"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_group_amax_first_warp_only": (
        "norm_quant_block", "block",
        ("fp8_group with blocks of more than 32 values: each block's amax reduced within warps of 32 lanes and "
         "the first warp's result taken (the cross-warp step through shared memory missing), so the amax is that "
         "of the block's first 32 values: the amax output, the scale, and q (clipped at qmax where larger values "
         "overflow it)"),
        "cf. " + GH + "turboderp-org/exllamav3/pull/363 (a norm reduction's warp partial taken from a lane that "
        "does not hold the complete sum)"),
    "nqb_weight_loaded_per_block_start": (
        "norm_quant_block", "layout",
        ("with a weight, H above the block size: the fused kernel loads the weight once per quantization block, "
         "at the block's first column, and scales every value of the block by it: y, each block's amax, the "
         "scales and q"),
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a LayerNorm kernel loading gamma at the wrong index in "
        "its recomputation)"),
    "nqb_xhat_rounded_before_weight": (
        "norm_quant_block", "precision",
        ("16-bit inputs with a weight: the normalized value x_hat rounded to the input dtype before the weight "
         "multiply (Llama's hidden_states.to(input_dtype) * weight), then y, each block's amax, the scales and "
         "q from it"),
        "cf. " + GH + "huggingface/transformers/pull/29402 (Llama casts x_hat to half before the weight, Gemma "
        "after)"),
    "nqb_residual_out_of_next_row": (
        "norm_quant_block", "layout",
        ("with a residual, more than one row: the residual_out store pointer advanced before the store, so "
         "row i of residual_out holds row i + 1's sum x + residual (the last row keeps its own); q, the scales "
         "and amax right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding its batches wrong)"),
    "nqb_nvfp4_amax_over_mx_window": (
        "norm_quant_block", "quant_scale",
        ("nvfp4: each 16-value block's amax taken over the aligned 32-value window holding it (the MXFP4 "
         "kernel's block width, the scales still written per 16): each pair of blocks shares the larger amax: "
         "the amax output, the block scales and q"),
        "pattern: a quantizer specialised from another format keeping that format's reduction width"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_eps_added_twice": (
        "adaptive_layer_norm", "eps",
        ("eps > 0: the statistics pass hands the normalize pass var + eps and the normalize pass adds eps again: "
         "rstd = 1 / sqrt(var + 2 eps), the returned rstd, y, dx and dscale from it; the mean right"),
        "pattern: eps added in a helper and again by its caller"),
    "aln_dmod_sample_offset_one_token": (
        "adaptive_layer_norm", "layout",
        ("more than one sample: the modulation gradients' per-sample reduction starts sample b at row b (its "
         "offset b * H: the sample stride written H where T * H belongs), so dscale and dshift of sample b sum "
         "the T token rows b .. b + T - 1; sample 0, dx and the forward right"),
        "cf. " + GH + "ModelTC/LightLLM/issues/1467 (a norm kernel indexing one of its passes with the wrong "
        "stride)"),
    "aln_dshift_times_rstd": (
        "adaptive_layer_norm", "backward",
        ("with a shift: dshift = per-sample sum of dy * rstd (the dscale line, sum of dy * (x - mean) * rstd, "
         "copied with its deviation removed but its rstd kept) instead of dy; dx, dscale and the forward right"),
        "pattern: a vectorised epilogue applying one factor to both reductions it stores"),
    "aln_welford_m2_old_mean_delta_squared": (
        "adaptive_layer_norm", "one_pass",
        ("each token's variance by a Welford loop whose M2 update adds delta * delta (the deviation from the mean "
         "before the update, squared) where delta * (x - new mean) belongs: rstd, y, dx and dscale; the mean "
         "right"),
        WELFORD),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _welford_old_delta(x, acc):
    """(mean, M2) per row of ``x`` (rows, n) by a Welford loop whose M2 adds delta * delta (delta about the mean
    before the update)."""
    R, n = x.shape
    mean = np.zeros(R, acc)
    m2 = np.zeros(R, acc)
    for k in range(n):
        v = x[:, k]
        delta = v - mean
        mean = mean + delta / acc(k + 1)
        m2 = m2 + delta * delta                                  # delta * (v - mean) belongs
    return mean.reshape(R, 1), m2.reshape(R, 1)


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


def _even_tiles(j):
    return (j // 32) % 2 == 0


def _masked_sum(a, mask):
    return _rsum(np.where(mask, a, a.dtype.type(0)))


def _channels_last_rows(x0, acc):
    """x0 (N, C, *) NCHW-contiguous read with channels-last strides, as channel rows (C, N * S)."""
    Nb, C = x0.shape[0], x0.shape[1]
    S = x0.size // (Nb * C)
    flat = np.ascontiguousarray(x0.astype(acc)).reshape(-1)
    n, c, s = np.meshgrid(np.arange(Nb), np.arange(C), np.arange(S), indexing="ij")
    return flat[(n * S + s) * C + c]                              # (N, C, S)


def _halving_tree_sum(a):
    """Row sums of ``a`` (R, n) by a halving tree that drops the unpaired last element of an odd level."""
    v = np.ascontiguousarray(a)
    while v.shape[1] > 1:
        h = v.shape[1] // 2
        v = v[:, :h] + v[:, h:2 * h]                               # element 2h (odd length) dropped
    return v[:, :1] if v.shape[1] else np.zeros((a.shape[0], 1), a.dtype)


class Blind41Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind41"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn41(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    @staticmethod
    def _bn_batch_stats41(x, x0, acc, b, d):
        """Each channel's batch (mean, biased var), (C, 1), of the channel rows x (C, n)."""
        C, n = x.shape
        Nb = x0.shape[0]
        S = n // Nb
        if b == "bn_chan_merge_weight_of_own_count" and Nb > 1 and S:
            xs = x.reshape(C, Nb, S)
            na = acc(S)
            mean = _rsum(xs[:, 0]) / S
            m2 = _rsum((xs[:, 0] - mean) ** 2)
            for i in range(1, Nb):
                mb = _rsum(xs[:, i]) / S
                m2b = _rsum((xs[:, i] - mb) ** 2)
                nb_ = acc(S)
                tot = na + nb_
                delta = mb - mean
                mean = mean + delta * (na / tot)                       # nb_ / tot belongs
                m2 = m2 + m2b + delta * delta * (na * nb_ / tot)
                na = tot
            return mean, m2 / n
        if b == "bn_stats_pairs_added_in_half" and d in _HALF and S:
            xs = x.reshape(C * Nb, S)
            k = (S // 2) * 2
            pairs = _half(xs[:, 0:k:2] + xs[:, 1:k:2], d)              # __hadd2: the pair's sum rounded
            part = _rsum(pairs) + (xs[:, k:].sum(axis=1, keepdims=True) if k < S else acc(0))
            mean = part.reshape(C, Nb).sum(axis=1, keepdims=True) / n
            return mean, _rsum((x - mean) ** 2) / n
        if b == "bn_stats_sample_split_middle_twice" and Nb > 1 and Nb % 2:
            xs = x.reshape(C, Nb, S)
            h = Nb // 2
            first = np.ascontiguousarray(xs[:, :Nb - h]).reshape(C, -1)    # samples 0 .. ceil(N / 2) - 1
            second = np.ascontiguousarray(xs[:, h:]).reshape(C, -1)        # from floor(N / 2): the middle again
            mean = (_rsum(first) + _rsum(second)) / n
            var = (_rsum((first - mean) ** 2) + _rsum((second - mean) ** 2)) / n
            return mean, var
        mean = _rsum(x) / n
        return mean, _rsum((x - mean) ** 2) / n

    def _bn41(self, call, acc, b):
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
            if n:
                bmean, bvar = self._bn_batch_stats41(x, x0, acc, b, d)
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
                nbt = nbt + 1
                mom = None if b == "bn_momentum_never_read" else cfg["momentum"]
                m = bn_momentum(mom, nbt, acc)
                if n > 0:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        k = S if (b == "bn_bessel_factor_from_plane_size" and x0.ndim >= 3) else n
                        bv = bv * (acc(k / (k - 1)) if k > 1 else acc(np.inf))
                    keep, take = (1 - m, m) if torch else (m, 1 - m)
                    rm, rv = keep * rm + take * bm, keep * rv + take * bv
            state = running_state(rm, rv, nbt, d)
        wl, bl = w, bias
        cl = b == "bn_affine_channel_index_channels_last" and x0.ndim >= 3 and C > 1 and S > 1
        if cl:
            ch = (np.arange(S)[None, None, :] + np.arange(C)[None, :, None] * S) % C     # (1, C, S) per sample
            ch = np.broadcast_to(ch, (Nb, C, S)).transpose(1, 0, 2).reshape(C, n)
            wl = None if w is None else w.reshape(C)[ch]
            bl = None if bias is None else bias.reshape(C)[ch]
        y = affine(xhat, wl, bl)
        out = {"y": _store(from_channel_rows(y, x0.shape), d), "mean": mean.reshape(C).astype(acc),
               "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if wl is None else dy * wl
            xb, rb = xhat, rstd
            if batch and b == "bn_bwd_x_read_channels_last" and x0.ndim >= 3 and C > 1 and S > 1:
                xcl = _channels_last_rows(x0, acc)
                xb = (np.ascontiguousarray(xcl.transpose(1, 0, 2)).reshape(C, n) - mean) * rstd
            if batch and b == "bn_bwd_rstd_eps_outside_sqrt":
                rb = 1 / (np.sqrt(bvar) + eps)
                xb = (x - mean) * rb
            if batch:
                if b == "bn_dx_elementwise_term_unweighted" and w is not None:
                    dx = rb * (dy - _rsum(g) / n - xb * (_rsum(g * xb) / n))
                else:
                    dx = _centred_dx(g, xb, rb)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            zero = b == "bn_eval_dparams_not_computed" and not call.training and has_run
            if w is not None:
                dw = _rsum(dy * xb).reshape(C)
                grads["weight"] = _store(np.zeros_like(dw) if zero else dw, d)
            if bias is not None:
                db = _rsum(dy).reshape(C)
                grads["bias"] = _store(np.zeros_like(db) if zero else db, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in41(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in41(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        imean = None
        if inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        if b == "in_row_pair_shared_mean" and inst and Nb * C > 1 and S:
            R = Nb * C
            pm = mean.reshape(-1).copy()
            odd = np.arange(1, R, 2)
            pm[odd] = pm[odd - 1]                                         # the pair's first row's mean
            out["y"] = _store(affine((x - pm.reshape(R, 1)) * rstd, wr, br).reshape(x0.shape), d)
        if b == "in_f16_y_through_bf16" and d == "float16":
            out["y"] = _store(_store(affine(xhat, wr, br).reshape(x0.shape), "bfloat16").astype(acc), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_read_repeat_interleaved" and Nb > 1 and C > 1:
                    r = np.arange(Nb * C)
                    rmi, rvi = rm.reshape(-1)[r // Nb], rv.reshape(-1)[r // Nb]
                    nm = ((1 - m) * rmi + m * imean.reshape(-1)).reshape(Nb, C)
                    nv = ((1 - m) * rvi + m * ub.reshape(-1)).reshape(Nb, C)
                    rm, rv = nm.mean(axis=0), nv.mean(axis=0)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            xb = xhat
            if inst and b == "in_bwd_x_read_channels_last" and C > 1 and S > 1:
                xb = (_channels_last_rows(x0, acc).reshape(Nb * C, S) - mean) * rstd
            if inst and b == "in_bwd_projection_rstd_twice":
                dx = rstd * (g - _rsum(g) / S - xb * rstd * (_rsum(g * xb) / S))
            elif inst:
                dx = _centred_dx(g, xb, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xb, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn41(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn41(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn41(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        w, bias = group_params(call.inputs, acc, C)
        pre = b == "gn_affine_before_normalization" and (w is not None or bias is not None)
        if pre:                                                           # the affine as a prologue
            xr = affine(x, w, bias).reshape(Nb * G, n)
        if b == "gn_stats_loop_unrolled_body_once" and n > 32:
            mask = _lanes(n, _even_tiles)
            mean = _masked_sum(xr, mask) / n
            var = _masked_sum((xr - mean) ** 2, mask) / n
        elif b == "gns_welford_m2_old_mean_delta_squared":
            mean, m2 = _welford_old_delta(xr, acc)
            var = m2 / n
        else:
            mean = _rsum(xr) / n
            var = _rsum((xr - mean) ** 2) / n
        if b == "gn_rstd_rsqrt_estimate" and d == "float32":
            rstd = _rsqrt_estimate(var + eps)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = ((xr - mean) * rstd).reshape(Nb, C, S)
        wf, bf = (None, None) if pre else (w, bias)
        p = affine(xhat, wf, bf)
        if b == "gns_fwd_stats_read_group_major" and Nb > 1 and G > 1:
            k = (np.arange(G)[None, :] * Nb + np.arange(Nb)[:, None]).reshape(-1)   # row n * G + g reads g * N + n
            mw, rw = mean.reshape(-1)[k].reshape(-1, 1), rstd.reshape(-1)[k].reshape(-1, 1)
            p = affine(((xr - mw) * rw).reshape(Nb, C, S), wf, bf)
        if silu:
            sg, _ = _sigmoids(p)
            y = p * sg
        else:
            y = p
        if b == "gn_store_mask_spills_into_next_group" and G > 1 and pow2(cg) != cg:
            y = y.copy()
            P = pow2(cg)
            for gi in range(G - 1):
                c1 = min(gi * cg + P, C)
                for c in range((gi + 1) * cg, c1):                        # the padding lanes' channels
                    rows = np.arange(Nb) * G + gi
                    v = (x[:, c, :] - mean[rows]) * rstd[rows]
                    y[:, c, :] = affine(v, None if w is None else w[0, c, 0],
                                        None if bias is None else bias[0, c, 0])
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        xb = (xr - mean) * rstd
        if silu and b == "gns_bwd_sigmoid_from_stored_y":
            ys = out["y"].astype(acc).reshape(Nb, C, S)
            sg = np.where(p == 0, acc(0.5), ys / np.where(p == 0, acc(1), p))
            dp = dy * (sg * (1 + p * (1 - sg)))
        elif silu:
            sg, rest = _sigmoids(p)
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        wg = wf
        if b == "gn_bwd_weight_of_next_channel" and wf is not None and C > 1:
            wg = wf[:, (np.arange(C) + 1) % C, :]
        g = dp if wg is None else dp * wg
        gr = g.reshape(Nb * G, n)
        if b == "gns_bwd_sums_channel_pairs_tail_dropped" and cg > 1 and cg % 2:
            keep = _lanes(n, lambda j: j < (cg - 1) * S)                 # the last channel of the group left out
            sg_ = _masked_sum(gr, keep)
            sgx = _masked_sum(gr * xb, keep)
        else:
            sg_ = _rsum(gr)
            sgx = _rsum(gr * xb)
        dxr = rstd * (gr - sg_ / n - xb * (sgx / n))
        if b == "gn_bwd_c3_mean_term_sign_flipped":
            c2 = -sgx * rstd * rstd / n                                 # (db * mean - ds) * rstd^3 / n
            dxr = dxr + 2 * c2 * mean
        dx = dxr.reshape(Nb, C, S)
        xpv = xb.reshape(Nb, C, S)
        grads = {}
        if pre:
            grads["x"] = _store((dx if w is None else dx * w).reshape(x0.shape), d)
            src_w, src_b = dx * x, dx
        else:
            grads["x"] = _store(dx.reshape(x0.shape), d)
            src_w, src_b = dp * xpv, dp
            if b == "gn_dweight_from_g" and w is not None:
                src_w = dp * w * xpv
            if b == "gns_dbias_from_dp_xhat":
                src_b = dp * xpv
        for key, t, given in (("weight", src_w, w), ("bias", src_b, bias)):
            if given is None:
                continue
            grads[key] = _store(_channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs41(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows41(x, ddof, eps, acc, b):
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
        if m <= 0:
            return mean, np.full((R, 1), np.nan, acc), dev
        if b == "zs_welford_m2_old_mean_delta_squared" and n:
            _, m2 = _welford_old_delta(x, acc)
            return mean, np.sqrt(m2 / acc(m) + eps), dev
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        if b == "zs_inv_std_rsqrt_estimate" and x.dtype == np.float32:
            std = 1 / _rsqrt_estimate(std * std)
        return mean, std, dev

    def _zs41(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, std, dev = self._zs_rows41(x, ddof, eps, acc, b)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        y = affine(xhat, w, bias)
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
                two = acc(2) if b == "zs_bwd_var_derivative_two_dropped" else acc(1)
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / (two * acc(m)))
                dx = np.where(zero, acc(0), inner / safe)
            grads["x"] = _store(back(dx), d)
            src = dx if b == "zs_dparams_from_dx_in_dy_buffer" else dy       # dy's buffer holds dx by now
            for key, t in (("weight", src * xhat), ("bias", src)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp41(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm41(v, p, acc, b):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|."""
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = np.abs(v) / s
        tot = _halving_tree_sum if b == "lp_sum_halving_tree_drops_odd" else _rsum
        f32 = b == "lp_f64_root_in_float32" and acc is np.float64

        def root(a, e):
            if f32:
                a = a.astype(np.float32)
                return (a ** np.float32(e)).astype(acc) if e != 0.5 else np.sqrt(a).astype(acc)
            return a ** e if e != 0.5 else np.sqrt(a)
        if p == 1.0:
            return s * tot(t)
        if p == 2.0:
            return s * root(tot(t * t), 0.5)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * root(tot(t ** acc(p)), inv)

    def _lp41(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        norm = self._lp_norm41(x, p, acc, b)
        if torch_rule:
            den = np.maximum(norm, eps)
        else:
            den = np.where(norm == 0, acc(1), norm)
        if b == "lp_reciprocal_in_input_dtype" and d in _HALF:
            r = _half(1 / den, d)
            y = x * r
        else:
            y = x / den
        if not torch_rule:
            y = np.where(norm == 0, acc(0), y)
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            if b == "lp_bwd_dot_loop_unrolled_body_once" and n > 32:
                dot = _masked_sum(dy * u, _lanes(n, _even_tiles))
            else:
                dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        if b == "lp_y_dims_restored_transposed" and isinstance(dims, (list, tuple)) and len(dims) > 1:
            nd = x0.ndim
            ax = sorted(a % nd for a in dims)
            I, J = x0.shape[ax[-2]], x0.shape[ax[-1]]
            if I > 1 and J > 1:
                yb = y.reshape(y.shape[0], -1, I, J)                      # the slice's last two axes
                y = np.ascontiguousarray(yb.transpose(0, 1, 3, 2)).reshape(y.shape)   # (i, j) at j * I + i
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb41(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized41(self, call, cfg, acc, b, B):
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
        if b == "nqb_weight_loaded_per_block_start" and w is not None and H > B:
            w = w[:, (np.arange(H) // B) * B]                             # the block's first column's weight
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        if b == "nqb_xhat_rounded_before_weight" and d in _HALF and w is not None:
            y = _half(y, d)
        y = y if w is None else y * w
        y = y if bias is None else y + bias
        return s, y

    def _nqb41(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized41(call, cfg, acc, b, B)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_group_amax_first_warp_only" and fmt == "fp8_group" and B > 32:
            amax = np.max(np.abs(yb[..., :32]), axis=-1, initial=0.0)
        if b == "nqb_nvfp4_amax_over_mx_window" and fmt == "nvfp4" and B == 16:
            R, nb = amax.shape
            pad = np.concatenate([amax, np.zeros((R, nb % 2), acc)], axis=1)
            win = np.max(pad.reshape(R, -1, 2), axis=-1)                  # each aligned 32-value window
            amax = np.repeat(win, 2, axis=1)[:, :nb]
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        r = nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)
        if b == "nqb_residual_out_of_next_row" and "residual_out" in r.outputs and s.shape[0] > 1:
            ro = r.outputs["residual_out"]
            H = ro.shape[-1]
            rows = ro.reshape(-1, H)
            shifted = np.concatenate([rows[1:], rows[-1:]], axis=0)       # row i holds row i + 1's sum
            return Returned({**r.outputs, "residual_out": shifted.reshape(ro.shape)})
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln41(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln41(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        mean = _rsum(x) / H
        if b == "aln_welford_m2_old_mean_delta_squared" and H:
            _, m2 = _welford_old_delta(x, acc)
            var = m2 / H
        else:
            var = _rsum((x - mean) ** 2) / H
        if b == "aln_eps_added_twice":
            var = var + eps                                               # handed over with eps in it
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        ts, tb = dy * xhat, dy
        if b == "aln_dshift_times_rstd":
            tb = dy * rstd

        def reduce(t):
            if b == "aln_dmod_sample_offset_one_token" and B > 1 and T > 0:
                R = t.shape[0]
                ext = np.concatenate([t, np.zeros((T, H), acc)], axis=0)  # rows past the end read as 0
                return np.stack([ext[i:i + T].sum(axis=0) for i in range(B)]) if R else per_sample(t, B, T, H)
            return per_sample(t, B, T, H)
        if scale is not None:
            grads["scale"] = _store(reduce(ts), d)
        if shift is not None:
            grads["shift"] = _store(reduce(tb), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_bwd_x_read_channels_last": ("batch_norm/normal_f32_6x4x25", "grad.x"),
    "bn_dx_elementwise_term_unweighted": ("batch_norm/normal_f64_7x3", "grad.x"),
    "bn_bessel_factor_from_plane_size": ("batch_norm/normal_train3_eval_f32_6x3x5", "state.running_var"),
    "bn_chan_merge_weight_of_own_count": ("batch_norm/normal_f32_6x4x25", "output.mean"),
    "bn_stats_pairs_added_in_half": ("batch_norm/mean1e3_f16_16x3x4x5", "output.y"),
    "bn_momentum_never_read": ("batch_norm/normal_train3_eval_f32_6x3x5", "state.running_mean"),
    "bn_stats_sample_split_middle_twice": ("batch_norm/normal_f64_7x3", "output.mean"),
    "bn_bwd_rstd_eps_outside_sqrt": ("batch_norm/normal_eps0.3_f32_7x3", "grad.x"),
    "bn_eval_dparams_not_computed": ("batch_norm/normal_eval_bf16_2x3x4", "grad.weight"),
    "bn_affine_channel_index_channels_last": ("batch_norm/normal_f32_6x4x25", "output.y"),
    "gn_store_mask_spills_into_next_group": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_bwd_c3_mean_term_sign_flipped": ("group_norm/mean1e3_g4_f32_2x8x5x7", "grad.x"),
    "gn_dweight_from_g": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "gn_affine_before_normalization": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_stats_loop_unrolled_body_once": ("group_norm/normal_g4_f32_2x8x5x7", "output.mean"),
    "gn_rstd_rsqrt_estimate": ("group_norm/normal_g4_f32_2x8x5x7", "output.rstd"),
    "gn_bwd_weight_of_next_channel": ("group_norm/normal_g2_f32_3x6", "grad.x"),
    "in_bwd_x_read_channels_last": ("instance_norm/normal_f32_2x3x100", "grad.x"),
    "in_running_read_repeat_interleaved": ("instance_norm/normal_train3_eval_f32_4x3x6", "state.running_mean"),
    "in_f16_y_through_bf16": ("instance_norm/normal_f16_2x2x8x8", "output.y"),
    "in_bwd_projection_rstd_twice": ("instance_norm/std1e-3_f32_3x2x7", "grad.x"),
    "in_row_pair_shared_mean": ("instance_norm/normal_f32_2x3x100", "output.y"),
    "zs_dparams_from_dx_in_dy_buffer": ("z_score/normal_f64_9x7", "grad.weight"),
    "zs_inv_std_rsqrt_estimate": ("z_score/normal_f32_6x100", "output.std"),
    "zs_welford_m2_old_mean_delta_squared": ("z_score/normal_f64_9x7", "output.std"),
    "zs_bwd_var_derivative_two_dropped": ("z_score/normal_f64_9x7", "grad.x"),
    "lp_bwd_dot_loop_unrolled_body_once": ("lp_normalize/normal_f32_6x100", "grad.x"),
    "lp_reciprocal_in_input_dtype": ("lp_normalize/normal_f16_6x100", "output.y"),
    "lp_y_dims_restored_transposed": ("lp_normalize/normal_dim12_bf16_2x6x3x4", "output.y"),
    "lp_f64_root_in_float32": ("lp_normalize/normal_f64_9x7", "output.norm"),
    "lp_sum_halving_tree_drops_odd": ("lp_normalize/normal_f32_9x7", "output.norm"),
    "gns_fwd_stats_read_group_major": ("group_norm_silu/normal_g4_f32_2x8x5x7", "output.y"),
    "gns_dbias_from_dp_xhat": ("group_norm_silu/normal_g2_f32_3x6", "grad.bias"),
    "gns_bwd_sums_channel_pairs_tail_dropped": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_welford_m2_old_mean_delta_squared": ("group_norm_silu/normal_g3_f64_3x6x7", "output.rstd"),
    "gns_bwd_sigmoid_from_stored_y": ("group_norm_silu/normal_g4_bf16_2x8x5x7", "grad.x"),
    "nqb_group_amax_first_warp_only": ("norm_quant_block/normal_rms_g_f32_3x200", "output.amax"),
    "nqb_weight_loaded_per_block_start": ("norm_quant_block/normal_rms_g_wdecades_f32_4x512", "output.amax"),
    "nqb_xhat_rounded_before_weight": ("norm_quant_block/normal_rms_g_bf16_8x512", "output.amax"),
    "nqb_residual_out_of_next_row": ("norm_quant_block/normal_rms_g_res_f64_2x96", "output.residual_out"),
    "nqb_nvfp4_amax_over_mx_window": ("norm_quant_block/normal_rms_nvfp4_f32_3x200", "output.amax"),
    "aln_eps_added_twice": ("adaptive_layer_norm/normal_eps0.3_f32_1x10x24", "output.rstd"),
    "aln_dmod_sample_offset_one_token": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.scale"),
    "aln_dshift_times_rstd": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.shift"),
    "aln_welford_m2_old_mean_delta_squared": ("adaptive_layer_norm/normal_f64_2x5x7", "output.rstd"),
}
