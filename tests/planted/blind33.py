"""A thirty-third held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind33Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn33``, ``_in33``, ``_gn33`` for group_norm and
group_norm_silu, ``_zs33``, ``_lp33``, ``_nqb33``, ``_aln33``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind33Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind31.py (the same mistake on the same op; the thirty-second set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import ml_dtypes
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
    np_dtype,
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
from .blind27 import _toward_zero

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind33Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_running_update_on_clone": (
        "batch_norm", "running",
        ("training with running statistics: the wrapper hands the kernel contiguous copies of the running "
         "buffers and the kernel's momentum update lands in those copies, never written back: running_mean "
         "and running_var returned as they came in; num_batches_tracked still incremented; y, the saved "
         "statistics and the gradients right"),
        GH + "pytorch/pytorch/issues/33867 (cuDNN batchnorm handed .contiguous() copies of non-contiguous "
        "running statistics silently discards their updates)"),
    "bn_dparams_from_overwritten_dy": (
        "batch_norm", "backward",
        ("batch statistics with a weight or a bias: the dx kernel writes dx in place over the dy buffer (to "
         "save memory) before the parameter-gradient kernel reads it: dweight = sum(dx * x_hat) and dbias = "
         "sum(dx) per channel; dx and the forward right"),
        "cf. " + GH + "linkedin/Liger-Kernel/issues/272 (a Triton kernel's in-place gradient write corrupting a "
        "tensor another backward still reads)"),
    "bn_bwd_rstd_from_unbiased_var": (
        "batch_norm", "bessel",
        ("batch statistics: the backward kernel recomputes invstd from the channel's unbiased variance (the "
         "value computed for running_var) as 1 / sqrt(var * n / (n - 1) + eps): x_hat, dx and dweight from "
         "it; the forward, the saved statistics and dbias right"),
        "cf. " + GH + "pytorch/pytorch/issues/19902 (the biased batch variance normalizes while running_var "
        "takes the unbiased one, two values easily taken for each other)"),
    "bn_dparams_last_sample_wins": (
        "batch_norm", "reduction",
        ("more than one sample: each sample's program stores its partial dweight and dbias to the output "
         "instead of adding it (a plain store where an atomic add belongs), so the last sample's partial "
         "sums are returned; dx and the forward right"),
        "cf. " + GH + "linkedin/Liger-Kernel/pull/815 (a norm backward's parameter gradients accumulated by "
        "atomic adds into the final tensors, where per-block partials were stored before)"),
    "bn_mean_output_is_channel_sum": (
        "batch_norm", None,
        ("batch statistics: the returned mean holds each channel's sum over the batch and positions (the "
         "accumulator before its division by the count); y, rstd, the gradients and the running update right"),
        "pattern: a saved statistic written from the reduction's register one step before its finalization"),
    "bn_affine_index_from_sample": (
        "batch_norm", "layout",
        ("more than one sample, with a weight or a bias: the elementwise kernel loads weight and bias at the "
         "sample index mod C (the n of the (n, c) loop where c belongs): y = x_hat * weight[n % C] + "
         "bias[n % C] and dx from g = dy * weight[n % C]; the statistics, dweight and dbias right"),
        "pattern: the two loop indices of an (N, C) launch exchanged in one parameter load"),
    "bn_eps_cast_to_input_dtype": (
        "batch_norm", "eps",
        ("16-bit inputs: eps passed to the kernel as a scalar of the input dtype (1e-5 rounded, 1e-12 flushed "
         "to 0 in float16: a constant channel's rstd infinite), batch and running statistics, forward and "
         "backward; the running update right"),
        "cf. " + GH + "pytorch/pytorch/issues/32137 (an epsilon of 1e-12 evaluated as zero in half precision)"),
    # ------------------------------------------------------------------ group_norm
    "gn_y_stored_channels_last": (
        "group_norm", "layout",
        ("more than one channel and spatial position: y computed right but written into the NCHW-contiguous "
         "output with channels-last strides (element (n, c, s) stored at n * C * S + s * C + c), the output "
         "allocated with one memory format and written in the other; the statistics and the gradients right"),
        "cf. " + GH + "pytorch/pytorch/issues/111824 (GroupNorm's output memory format not the channels_last "
        "layout of its input)"),
    "gn_welford_count_in_half": (
        "group_norm", "precision",
        ("16-bit inputs, groups longer than the dtype counts exactly (2048 values in float16, 256 in "
         "bfloat16): each group's statistics by a Welford loop whose element count is held in the input dtype, "
         "so the count sticks there, every later value moves the mean by delta / that count and the variance "
         "is M2 / that count: the mean, rstd, y and the backward on them"),
        "cf. " + GH + "intel/torch-xpu-ops/pull/3072 (review: a Welford element count kept in a floating "
        "accumulator loses integer precision on large reductions)"),
    "gn_dweight_without_rstd": (
        "group_norm", "backward",
        ("with a weight: dweight per channel = the sum over the samples of (ds - db * mean) (the ds / db "
         "form's partials sum(dy * x) and sum(dy)) without the closing multiply by each group's rstd; dx, "
         "dbias and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the factors of the saved "
        "inverse std wrong in its gradients)"),
    "gn_saved_rstd_unbiased": (
        "group_norm", "bessel",
        ("the returned rstd is 1 / sqrt(var * n / (n - 1) + eps), n the group's count (the unbiased variance "
         "of the reference the kernel's statistics output was ported from); y and the gradients use the "
         "biased one"),
        "cf. " + GH + "pytorch/pytorch/issues/60528 (biased variance to normalize, unbiased for the stored "
        "statistic)"),
    "gn_dx_accumulated_twice": (
        "group_norm", "constant",
        ("dx added into the grad-input buffer that the first pass of the kernel already filled with dx (the "
         "final store written +=): dx twice its value; dweight, dbias and the forward right"),
        "cf. " + GH + "itskonrad/miniMNIST-c/issues/7 (a backward adding into input_grad twice)"),
    "gn_stats_vec4_tail_overlap": (
        "group_norm", "block",
        ("a spatial size above 4 and not a multiple of 4: each channel's positions read in four-wide vectors "
         "whose tail is handled by one more full vector at S - 4 (the overlap trick) without masking the lanes "
         "the previous vector already counted: those positions enter the sums for the mean and the variance "
         "twice, still divided by the group's count; y, the saved statistics and the backward on them"),
        "cf. " + GH + "OpenNMT/CTranslate2/issues/351 (a vectorised map-reduce whose remainder iteration "
        "reduces a whole vector, lanes beyond the remainder included)"),
    "gn_bias_added_twice": (
        "group_norm", "affine",
        ("with a bias: the fused epilogue adds the bias inside its folded shift and once more at the store: y = "
         "x_hat * weight + 2 bias; the statistics, dx, dweight and dbias right"),
        "pattern: a bias folded into the fused shift and also added by the epilogue's separate bias step"),
    # ------------------------------------------------------------------ instance_norm
    "in_dparams_reduced_by_interleaved_index": (
        "instance_norm", "layout",
        ("more than one sample and channel, N != C: the per-instance partial sums of dy * x_hat and dy (row r = "
         "n * C + c) reduced into dweight and dbias at index r // N (repeat_interleave's mapping) instead of "
         "r mod C; dx and the forward right"),
        "pattern: the inverse of the per-instance expansion written with repeat_interleave's index"),
    "in_var_floored_at_eps": (
        "instance_norm", "eps",
        ("instance statistics: rstd = 1 / sqrt(max(var, eps)) (eps as a floor of the variance) instead of 1 / "
         "sqrt(var + eps): y, the saved rstd and dx from it; the eval path and the running update right"),
        "cf. " + GH + "jax-ml/jax/pull/30428 (a standardization's variance + epsilon replaced with "
        "maximum(variance, epsilon))"),
    "in_bwd_dx_without_rstd": (
        "instance_norm", "backward",
        ("instance statistics: dx = g - mean(g) - x_hat * mean(g * x_hat), the closing multiply by the "
         "instance's rstd left out; dweight, dbias and the forward right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a norm backward getting the powers of the saved "
        "inverse std wrong)"),
    "in_running_update_in_input_dtype": (
        "instance_norm", "running",
        ("16-bit inputs, training with running statistics: the running-statistics kernel computes in the "
         "buffers' dtype: each instance's (1 - m) * running and m * statistic rounded to it, their sum "
         "rounded, and the mean over the batch accumulated left to right in it; y, the saved statistics and "
         "the gradients right"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (a norm's arithmetic done in the input dtype instead of "
        "float32)"),
    "in_affine_before_normalization": (
        "instance_norm", "semantics",
        ("with a weight or a bias: the per-channel affine applied to x before the normalization and none "
         "after: y = IN(x * weight + bias), the statistics those of the affine input (saved and fed to the "
         "running update), forward and the backward of that function"),
        "pattern: the affine epilogue moved to a prologue when fusing the norm into a preceding kernel"),
    "in_tile_reads_next_instance": (
        "instance_norm", "block",
        ("a spatial size S not a power of two: each instance loaded into a tile of pow2(S) lanes masked only "
         "by the end of the buffer, so the padded lanes read the next instance's first values into the sums "
         "for the mean and the variance, still divided by S: y, the saved statistics, the backward and the "
         "running update on them"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/4984 (a group norm's padding lanes addressing the next group's "
        "channels pass the mask)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_half2_pair_straddles_groups": (
        "group_norm_silu", "block",
        ("an odd number of channels a group: the statistics kernel loads channels in pairs (half2) and credits "
         "each pair's sums to the group of its first channel, so a pair straddling two groups adds its second "
         "channel to the earlier group; the sums still divided by the group's count: the mean, rstd, y and "
         "the backward on them"),
        "cf. " + GH + "flagos-ai/FlagGems/pull/4985 (a group norm's vector lanes over a group's channels "
        "summing the next group's channels into the statistics)"),
    "gns_bwd_p_recomputed_without_bias": (
        "group_norm_silu", "affine",
        ("with a bias: the backward recomputes the pre-activation for silu'(p) as x_hat * weight, the bias "
         "flag not passed to the backward kernel: dp = dy * silu'(x_hat * weight), and dx, dweight and dbias "
         "from it; the forward right"),
        "cf. " + GH + "ROCm/TransformerEngine/pull/171 (a norm flag honoured by the forward kernel and not "
        "passed to the backward's recomputation)"),
    "gns_tail_positions_without_silu": (
        "group_norm_silu", None,
        ("a spatial size above 4 and not a multiple of 4: the vectorised main loop stores silu(p) but the "
         "scalar remainder loop stores p itself, the last S mod 4 positions of each (sample, channel) left "
         "without the activation; the statistics and the gradients (their own kernel) right"),
        "cf. " + GH + "llvm/llvm-project/issues/136838 (a vectorised loop whose trailing section computes "
        "differently from its main part)"),
    "gns_bwd_stats_read_group_major": (
        "group_norm_silu", "layout",
        ("more than one sample and group: the backward loads the saved mean and rstd of (sample n, group g) at "
         "g * N + n of the (N, G) buffers the forward wrote sample-major: x_hat, the SiLU's input p, dx and "
         "dweight from another row's statistics; the forward right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward reading another group's saved mean "
        "and rstd)"),
    "gns_var_shifted_by_first_value_uncorrected": (
        "group_norm_silu", "one_pass",
        ("each group's variance from the shifted-data sums about K = the group's first value, sum (x - K)^2 / "
         "n, without the correction - (mean - K)^2 (the mean itself right): rstd, y and the backward on it"),
        "cf. " + GH + "pytorch/helion/pull/3268 (a Welford example's variance from raw second moments "
        "replaced by centred squared differences)"),
    "gns_silu_grad_tanh_chain_half_dropped": (
        "group_norm_silu", "backward",
        ("the SiLU derivative written through the tanh form of the sigmoid, s = (1 + t) / 2, t = tanh(p / 2), "
         "as s + p * (1 - t^2) / 2 (the inner derivative 1 / 2 of p / 2 dropped) instead of s + p * (1 - t^2) "
         "/ 4: dp, dx, dweight and dbias; the forward right"),
        "cf. " + GH + "yzhao062/MetaOD/issues/6 (a sigmoid derivative missing the factor of its argument's "
        "scale)"),
    # ------------------------------------------------------------------ z_score
    "zs_with_mean_flag_off": (
        "z_score", "semantics",
        ("the kernel's centring flag read as off: y = x / std * weight + bias (x not centred; std still taken "
         "about the mean), the mean and std outputs right, dx the derivative of that function"),
        "pattern: a with_mean / center flag inverted between the wrapper and the kernel"),
    "zs_dweight_summed_over_slice_axis": (
        "z_score", "reduction",
        ("with a weight or a bias: dweight and dbias reduced over the normalized axis as well as the slices "
         "(the whole array summed) and that one total broadcast to every entry; dx and the forward right"),
        "pattern: a parameter gradient summed over one axis too many and broadcast back"),
    "zs_bwd_g_rounded_to_input_dtype": (
        "z_score", "precision",
        ("16-bit inputs with a weight: the backward's g = dy * weight written to a buffer of the input dtype "
         "(rounded) before the row sums and dx; dweight, dbias and the forward right"),
        "cf. " + GH + "deepspeedai/DeepSpeed/issues/581 (a norm kernel's intermediate converted to float16 "
        "between two steps of the float32 computation)"),
    "zs_bwd_projection_from_dy": (
        "z_score", "backward",
        ("with a weight: dx = (g - mean(g) - x_hat * sum(dy * x_hat) / (n - ddof)) / std, the projection's "
         "reduction fed the raw dy where g = dy * weight belongs (kept in the other terms); dweight, dbias and "
         "the forward right"),
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward whose weight factor was missing from one of its "
        "terms)"),
    "zs_chunk_merge_delta_unweighted": (
        "z_score", "merge",
        ("slices longer than 64: each chunk of 64 values reduced to (count, mean, M2) and the chunks merged "
         "with the mean weighted by the counts but the spread term not: M2 = sum M2_k + sum (mean_k - mean)^2, "
         "the count factor n_k dropped: std, y and dx from that variance; the mean right"),
        "cf. " + GH + "ryankurte/rust-rolling-stats/issues/2 (partial statistics merged with the parallel "
        "algorithm's mean-difference term wrong)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_split_partials_stored_not_added": (
        "lp_normalize", "block",
        ("slices longer than 512: each slice's sum of (|x| / s)^p split over programs of 512 values that "
         "store their partial sum into the slice's accumulator instead of adding it (the last program's "
         "partial survives): the norm, y = x / that norm and the backward at it"),
        "cf. " + GH + "hw-native-sys/pypto/issues/1864 (a row reduction split over two sub-blocks whose "
        "partial sums are never combined: a row normalization silently wrong)"),
    "lp_dx_stored_without_axis_restore": (
        "lp_normalize", "layout",
        ("dim a single axis that is not the last: dx computed on the rows with dim moved last but stored from "
         "that (rows, n) buffer as it is (the inverse permute left out of the backward's store); the forward "
         "right"),
        "cf. " + GH + "gpu-mode/reference-kernels/pull/39 (a reshape where a permute belongs)"),
    "lp_norm_output_recomputed_from_y": (
        "lp_normalize", None,
        ("the norm output computed after the normalization, from the stored output slice: ||y||_p (1 for a "
         "slice that was not clamped) instead of ||x||_p; y and dx right"),
        "pattern: a statistic recomputed from the buffer the kernel has already overwritten in place"),
    "lp_total_rounded_to_input_dtype": (
        "lp_normalize", "precision",
        ("16-bit inputs: the scaled sum of powers sum (|x| / s)^p written to a scratch buffer of the input "
         "dtype (rounded) between the reduction and the root: the norm, y = x / it and the backward at it"),
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm statistics kept in the input dtype instead of "
        "float32)"),
    "lp_powers_squared_root_p": (
        "lp_normalize", "semantics",
        ("p other than 2: the reduction's power taken by the p = 2 fast path (the squares of |x| / s, the "
         "kernel's P constexpr left at its default) while the root uses the runtime 1 / p: norm = s * (sum "
         "(|x| / s)^2)^(1/p), y = x / it and the backward at it"),
        "pattern: a specialised fast path selected by a compile-time default while the runtime value feeds "
        "the rest"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_zero_block_scale_one": (
        "norm_quant_block", "quant_scale",
        ("mxfp8: an all-zero block (amax 0) given the scale 2^0 = 1 (the E8M0 byte 127 the log2(0) guard "
         "writes) instead of the smallest scale 2^-127; q (0) and the other blocks right"),
        "cf. " + GH + "HomericIntelligence/Odyssey/issues/2379 (an MX block of zeros encoded with scale 1.0)"),
    "nqb_q_via_bf16": (
        "norm_quant_block", "precision",
        ("fp8 elements: each clipped quotient y / S rounded to bfloat16 first and then converted to float8 "
         "(two roundings, a value near a float8 tie pushed onto it); the scales and amax right"),
        GH + "flashinfer-ai/flashinfer/issues/5128 (a fused layernorm-quant kernel's fp8 e4m3 cast rounding "
        "through bf16)"),
    "nqb_ln_eps_fixed_1e-6": (
        "norm_quant_block", "eps",
        ("norm='layer_norm': the configured eps not passed to the layer-norm path, which uses its hard-coded "
         "1e-6 (the rms path right): rstd, y, the blocks' amax, scales and q"),
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a normalization kernel whose configured eps never reached "
        "it)"),
    "nqb_amax_output_of_quotients": (
        "norm_quant_block", None,
        ("the amax output holds each block's max |q| (the register reused after the division by the scale) "
         "instead of max |y|; the scales and q right"),
        "pattern: an output written from a register the kernel has already rescaled"),
    "nqb_scale_row_stride_floor": (
        "norm_quant_block", "layout",
        ("fp8_group, H not a multiple of the block size, more than one row: the scale and amax outputs written "
         "with the row stride H // block_size (floor) instead of the block count: row r's block j stored at "
         "r * (H // B) + j, later rows overwriting earlier rows' last blocks, the trailing slots left 0; q "
         "right"),
        "cf. " + GH + "ROCm/aiter/pull/2900 (a kernel writing a buffer with one row stride while its reader uses "
        "another)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_halves_merged_delta_unweighted": (
        "adaptive_layer_norm", "merge",
        ("H above 1: each token's row reduced in two halves (ceil(H / 2) and floor(H / 2) values) whose "
         "(mean, M2) are merged with the count-weighted mean but M2 = M2_a + M2_b + (mean_b - mean_a)^2 (the "
         "weight n_a n_b / H of the spread dropped): rstd, y and the backward on it"),
        "cf. " + GH + "ryankurte/rust-rolling-stats/issues/2 (partial statistics merged with the parallel "
        "algorithm's mean-difference term wrong)"),
    "aln_float64_via_float32": (
        "adaptive_layer_norm", "precision",
        ("float64 inputs computed by the float32 instantiation of the kernel (x, the modulation, the "
         "statistics, y and the gradients in float32, the results widened back to float64)"),
        "cf. " + GH + "google/flax/issues/612 (a LayerNorm casting its input to float32 regardless of dtype)"),
    "aln_bwd_gain_from_shift_ptr": (
        "adaptive_layer_norm", "layout",
        ("with a scale and a shift: the backward's gain loaded through the shift's pointer: g = dy * (1 + "
         "shift) for dx; dscale, dshift and the forward right"),
        "pattern: two same-shaped inputs' pointers confused in one kernel of a pair"),
    "aln_f16_y_round_toward_zero": (
        "adaptive_layer_norm", "rounding",
        ("float16 inputs: y converted from float32 with the round-toward-zero conversion (__float2half_rz) "
         "instead of round to nearest even; the statistics and the gradients right"),
        "cf. " + GH + "agenium-scale/nsimd/issues/38 (f32 -> f16 conversions in another rounding mode than to "
        "nearest)"),
    "aln_rstd_output_without_eps": (
        "adaptive_layer_norm", "eps",
        ("the returned rstd computed as 1 / sqrt(var) (eps left out of the line that fills the output); y and "
         "the gradients use 1 / sqrt(var + eps)"),
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (1 / sqrt(var) without eps in a normalization kernel)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _welford_count_in(xr, dtype, acc):
    """(mean, var) of the rows of ``xr`` by a Welford loop whose count is held in the 16-bit ``dtype``."""
    npdt = np_dtype(dtype)
    R = xr.shape[0]
    mean = np.zeros((R, 1), acc)
    m2 = np.zeros((R, 1), acc)
    cnt = np.zeros((R, 1), npdt)
    one = np.ones((R, 1), npdt)
    for j in range(xr.shape[1]):
        cnt = (cnt + one).astype(npdt)
        c = cnt.astype(acc)
        v = xr[:, j:j + 1]
        delta = v - mean
        mean = mean + delta / c
        m2 = m2 + delta * (v - mean)
    return mean, m2 / cnt.astype(acc)


def _half_seq_mean(a, dtype):
    """The mean over axis 0 of ``a`` (N, C), accumulated left to right and divided in the 16-bit ``dtype``."""
    s = _half(a[0], dtype)
    for k in range(1, a.shape[0]):
        s = _half(s + _half(a[k], dtype), dtype)
    return _half(s / a.dtype.type(a.shape[0]), dtype)


class Blind33Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind33"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn33(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn33(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb = x0.shape[0]
        x = channel_rows(x0, acc)
        C, n = x.shape
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        if b == "bn_eps_cast_to_input_dtype" and d in _HALF:
            eps = acc(_half(np.asarray(eps, acc), d))
        batch = call.training or not has_run
        bmean = None
        if batch:
            bmean, rstd = self._ln_stats(x, eps)
            mean = bmean
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        mean_out, rstd_out = mean, rstd
        if b == "bn_mean_output_is_channel_sum" and batch and n:
            mean_out = _rsum(x)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        wf, bf = w, bias
        if b == "bn_affine_index_from_sample" and Nb > 1 and S:
            idx = (np.arange(n) // S) % C                               # the sample index, mod C
            wf = None if w is None else np.broadcast_to(w.reshape(C)[idx], (C, n))
            bf = None if bias is None else np.broadcast_to(bias.reshape(C)[idx], (C, n))
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0 and b != "bn_running_update_on_clone":
                    bm = bmean.reshape(C)
                    bv = (_rsum((x - bmean) ** 2) / n).reshape(C)
                    if cfg["convention"] == "torch":
                        f = acc(n / (n - 1)) if n > 1 else acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        out = {"y": _store(from_channel_rows(affine(xhat, wf, bf), x0.shape), d),
               "mean": mean_out.reshape(C).astype(acc), "rstd": rstd_out.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if wf is None else dy * wf
            xb, rb = xhat, rstd
            if b == "bn_bwd_rstd_from_unbiased_var" and batch and n > 1:
                var = _rsum((x - mean) ** 2) / n
                rb = 1 / np.sqrt(var * acc(n / (n - 1)) + eps)
                xb = (x - mean) * rb
            dx = _centred_dx(g, xb, rb) if batch else g * rb
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            src = dy
            if b == "bn_dparams_from_overwritten_dy" and batch:
                src = _store(dx, d).astype(acc)                     # dx written over dy's buffer
            cols = slice(None)
            if b == "bn_dparams_last_sample_wins" and Nb > 1:
                cols = slice((Nb - 1) * S, n)                        # the last sample's partial stored last
            if w is not None:
                grads["weight"] = _store(_rsum((src * xb)[:, cols]).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(src[:, cols]).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in33(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    @staticmethod
    def _in_tile_stats33(x, eps, acc):
        """in_tile_reads_next_instance: (mean, rstd) of each instance over a pow2(S)-lane tile masked by the
        end of the buffer only (the padded lanes read the next instance), divided by S."""
        R, S = x.shape
        P = pow2(S)
        flat = x.reshape(-1)
        idx = np.arange(R)[:, None] * S + np.arange(P)[None, :]
        valid = idx < flat.size
        tile = np.where(valid, flat[np.minimum(idx, flat.size - 1)], acc(0))
        mean = _rsum(tile) / S
        dev = np.where(valid, tile - mean, acc(0))
        return mean, 1 / np.sqrt(_rsum(dev * dev) / S + eps)

    @staticmethod
    def _in_running_half33(rm, rv, m, mi, ub, Nb, C, d):
        """in_running_update_in_input_dtype: instance_running_update computed in the 16-bit dtype ``d``."""
        h = lambda a: _half(np.asarray(a, rm.dtype), d)            # noqa: E731
        mh, om = h(m), h(1 - h(m))
        new_m = h(h(om * h(rm)[None, :]) + h(mh * h(mi.reshape(Nb, C))))
        new_v = h(h(om * h(rv)[None, :]) + h(mh * h(ub.reshape(Nb, C))))
        return _half_seq_mean(new_m, d), _half_seq_mean(new_v, d)

    def _in33(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        first = b == "in_affine_before_normalization" and (wr is not None or br is not None)
        if first:                                                # x * weight + bias normalized, no affine after
            x = affine(x, wr, br)
            wr_in, wr, br = wr, None, None
        imean = None
        if inst:
            if b == "in_var_floored_at_eps" and S:
                imean = _rsum(x) / S
                var = _rsum((x - imean) ** 2) / S
                rstd = 1 / np.sqrt(np.maximum(var, eps))
            elif b == "in_tile_reads_next_instance" and S > 1 and S & (S - 1):
                imean, rstd = self._in_tile_stats33(x, eps, acc)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_update_in_input_dtype" and d in _HALF:
                    rm, rv = self._in_running_half33(rm, rv, m, imean, ub, Nb, C, d)
                else:
                    rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_dx_without_rstd" and S:
                dx = g - _rsum(g) / S - xhat * (_rsum(g * xhat) / S)
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            if first:                                            # through p = x * weight + bias
                dp = dx
                dx = dp if wr_in is None else dp * wr_in
                x_in = call.inputs["x"].astype(acc).reshape(Nb * C, S)
                pairs = (("weight", dp * x_in, w), ("bias", dp, bias))
            else:
                pairs = (("weight", dy * xhat, w), ("bias", dy, bias))
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in pairs:
                if given is None:
                    continue
                part = _rsum(t)
                if b == "in_dparams_reduced_by_interleaved_index" and Nb > 1 and C > 1 and Nb != C:
                    v = part.reshape(C, Nb).sum(axis=1)              # row r into r // N
                else:
                    v = part.reshape(Nb, C).sum(axis=0)
                grads[k] = _store(v, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn33(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn33(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    @staticmethod
    def _gn_stats33(x, xr, Nb, C, G, S, cg, d, acc, b):
        """(mean, var) per (sample, group) row, (N * G, 1), with the statistics bugs of this set."""
        n = xr.shape[1]
        limit = {"float16": 2048, "bfloat16": 256}.get(d)
        if b == "gn_welford_count_in_half" and limit is not None and n > limit:
            return _welford_count_in(xr, d, acc)
        if b == "gn_stats_vec4_tail_overlap" and S > 4 and S % 4:
            dup = np.ascontiguousarray(x[:, :, S - 4:(S // 4) * 4]).reshape(Nb * G, -1)
            mean = (_rsum(xr) + _rsum(dup)) / n
            var = (_rsum((xr - mean) ** 2) + _rsum((dup - mean) ** 2)) / n
            return mean, var
        if b == "gns_half2_pair_straddles_groups" and cg % 2 and G > 1:
            owner = (2 * (np.arange(C) // 2)) // cg                     # the group of each pair's first channel
            cs = _rsum(np.ascontiguousarray(x).reshape(Nb * C, S)).reshape(Nb, C)
            sums = np.stack([cs[:, owner == g].sum(axis=1) for g in range(G)], axis=1)
            mean = (sums / n).reshape(Nb * G, 1)
            mg = mean.reshape(Nb, G)[:, owner][:, :, None]             # (Nb, C, 1): the owning group's mean
            ss = _rsum(np.ascontiguousarray((x - mg) ** 2).reshape(Nb * C, S)).reshape(Nb, C)
            var = np.stack([ss[:, owner == g].sum(axis=1) for g in range(G)], axis=1).reshape(Nb * G, 1) / n
            return mean, var
        mean = _rsum(xr) / n
        if b == "gns_var_shifted_by_first_value_uncorrected":
            return mean, _rsum((xr - xr[:, :1]) ** 2) / n
        return mean, _rsum((xr - mean) ** 2) / n

    def _gn33(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        mean, var = self._gn_stats33(x, xr, Nb, C, G, S, cg, d, acc, b)
        rstd = 1 / np.sqrt(var + eps)
        xhr = (xr - mean) * rstd
        xhat = xhr.reshape(Nb, C, S)
        ms, rs = mean, rstd
        if b == "gn_saved_rstd_unbiased" and n > 1:
            rs = 1 / np.sqrt(var * acc(n / (n - 1)) + eps)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        if silu:
            sg, _ = _sigmoids(p)
            y = p * sg
        else:
            y = p
        if b == "gn_bias_added_twice" and bias is not None:
            y = p + bias
        if b == "gns_tail_positions_without_silu" and S > 4 and S % 4:
            y = y.copy()
            y[:, :, (S // 4) * 4:] = p[:, :, (S // 4) * 4:]            # the remainder loop stores p
        out = group_outputs(y, ms.reshape(Nb, G), rs.reshape(Nb, G), x0.shape, d, acc)
        if b == "gn_y_stored_channels_last" and S > 1 and C > 1:
            out["y"] = _store(np.ascontiguousarray(y.transpose(0, 2, 1)).reshape(x0.shape), d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        xb, rb, mb = xhr, rstd, mean
        if b == "gns_bwd_stats_read_group_major" and Nb > 1 and G > 1:
            idx = (np.arange(G)[None, :] * Nb + np.arange(Nb)[:, None]).reshape(-1)
            mb, rb = mean.reshape(-1)[idx].reshape(-1, 1), rstd.reshape(-1)[idx].reshape(-1, 1)
            xb = (xr - mb) * rb
        xbv = xb.reshape(Nb, C, S)
        if silu:
            pb = affine(xbv, w, None if b == "gns_bwd_p_recomputed_without_bias" else bias)
            sg, rest = _sigmoids(pb)
            if b == "gns_silu_grad_tanh_chain_half_dropped":
                act_d = sg + pb * (2 * sg * rest)                      # s + p (1 - t^2) / 2 = s + 2 p s (1 - s)
            else:
                act_d = sg * (1 + pb * rest)
            dp = dy * act_d
        else:
            dp = dy
        g = dp if w is None else dp * w
        gr = g.reshape(Nb * G, cg * S)
        dxr = rb * (gr - _rsum(gr) / n - xb * (_rsum(gr * xb) / n))
        if b == "gn_dx_accumulated_twice":
            dxr = dxr + dxr
        grads = {"x": _store(dxr.reshape(x0.shape), d)}
        dw_from = xbv
        if b == "gn_dweight_without_rstd":
            dw_from = (xr - mb).reshape(Nb, C, S)
        for key, t, given in (("weight", dp * dw_from, w), ("bias", dp, bias)):
            if given is None:
                continue
            grads[key] = _store(_channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs33(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_rows33(x, ddof, eps, acc, b):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
        m = n - ddof
        if b == "zs_chunk_merge_delta_unweighted" and n > 64 and m > 0:
            parts = []
            for k in range(0, n, 64):                                # (count, mean, M2) of each chunk
                xk = np.ascontiguousarray(x[:, k:k + 64])
                mk = _rsum(xk) / xk.shape[1]
                parts.append((xk.shape[1], mk, _rsum((xk - mk) ** 2)))
            mean = sum(c * mk for c, mk, _ in parts) / n
            m2 = sum(q for _, _, q in parts) + sum((mk - mean) ** 2 for _, mk, _ in parts)
            std = np.hypot(np.sqrt(m2 / acc(m)), np.sqrt(eps))
            return mean, std, x - mean
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        return mean, std, dev

    def _zs33(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, std, dev = self._zs_rows33(x, ddof, eps, acc, b)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        nocentre = b == "zs_with_mean_flag_off"
        xf = np.where(zero, acc(0), x / safe) if nocentre else xhat     # what the affine is applied to
        y = affine(xf, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), dims)
            g = dy if w is None else dy * w
            if b == "zs_bwd_g_rounded_to_input_dtype" and d in _HALF and w is not None:
                g = _half(g, d)
            if g.size == 0:
                dx = np.zeros_like(g)
            elif m <= 0:
                dx = np.full(g.shape, np.nan, acc)
            else:
                sg, sgx = _rsum(g), _rsum(g * xhat)
                if nocentre:                                     # d(x / std)
                    inner = g - xhat * (_rsum(g * xf) / acc(m))
                elif b == "zs_bwd_projection_from_dy" and w is not None:
                    inner = g - sg / n - xhat * (_rsum(dy * xhat) / acc(m))
                else:
                    inner = g - sg / n - xhat * (sgx / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            grads["x"] = _store(back(dx), d)
            for key, t in (("weight", dy * xf), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                v = t.sum(axis=0)
                if b == "zs_dweight_summed_over_slice_axis":
                    v = np.full(v.shape, t.sum(), acc)
                grads[key] = _store(v.reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp33(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm33(v, p, acc, b, d):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|."""
        n = v.shape[1]
        fast2 = b == "lp_powers_squared_root_p"

        def powsum(t):
            if p == 1.0 and not fast2:
                return _rsum(t)
            if p == 2.0 or fast2:
                return _rsum(t * t)
            return _rsum(t ** acc(p))
        s = np.max(np.abs(v), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = np.abs(v) / s
        if b == "lp_split_partials_stored_not_added" and n > 512:
            t = np.ascontiguousarray(t[:, ((n - 1) // 512) * 512:])   # the last program's partial survives
        total = powsum(t)
        if b == "lp_total_rounded_to_input_dtype" and d in _HALF:
            total = _half(total, d)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)

    def _lp33(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        norm = self._lp_norm33(x, p, acc, b, d)
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        ys = _store(back(y), d)
        norm_out = norm
        if b == "lp_norm_output_recomputed_from_y":
            yr, _, _ = _axes_rows(ys.astype(acc), dims)
            norm_out = self._lp_norm33(yr, p, acc, None, d)
        out = {"y": ys, "norm": back(norm_out, True).astype(acc)}
        if dx is None:
            return Returned(out, {})
        several = isinstance(dims, (list, tuple)) and len(dims) > 1
        dxs = back(dx)
        if b == "lp_dx_stored_without_axis_restore" and not several and dxs.shape == x0.shape:
            axis = (dims[0] if isinstance(dims, (list, tuple)) else dims) % x0.ndim
            if axis != x0.ndim - 1:
                dxs = np.ascontiguousarray(dx).reshape(x0.shape)      # the (rows, n) buffer as it is
        return Returned(out, {"x": _store(dxs, d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb33(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized33(self, call, cfg, acc, b):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            if b == "nqb_ln_eps_fixed_1e-6":
                eps = acc(1e-6)
            mean = _rsum(s) / H
            var = _rsum((s - mean) ** 2) / H
            y = (s - mean) * (1 / np.sqrt(var + eps))
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb33(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized33(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
            if b == "nqb_mx_zero_block_scale_one":
                S = np.where(amax == 0, acc(1), S)
                scale_out = S.astype(ml_dtypes.float8_e8m0fnu)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        qv = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
        amax_out = amax
        if b == "nqb_amax_output_of_quotients":
            amax_out = np.max(np.abs(qv), axis=-1, initial=0.0)
        if b == "nqb_q_via_bf16" and qdt.itemsize == 1 and fmt != "nvfp4":
            qv = qv.astype(ml_dtypes.bfloat16).astype(acc)
        R, nb = amax.shape
        H = y.shape[1]
        if b == "nqb_scale_row_stride_floor" and fmt == "fp8_group" and H % B and R > 1:
            stride = H // B
            bufs = []
            for v in (scale_out, amax_out):
                flat = np.zeros(R * nb, v.dtype)
                for r in range(R):
                    flat[r * stride:r * stride + nb] = v[r]
                bufs.append(flat.reshape(R, nb))
            scale_out, amax_out = bufs
        return nqb_returned(qv, qdt, scale_out, amax_out, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln33(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln33(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        wide = b == "aln_float64_via_float32" and d == "float64"
        if wide:
            acc = np.float32                                     # the float32 instantiation
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if b == "aln_halves_merged_delta_unweighted" and H > 1:
            ha = -(-H // 2)
            xa, xb = np.ascontiguousarray(x[:, :ha]), np.ascontiguousarray(x[:, ha:])
            ma, mb = _rsum(xa) / ha, _rsum(xb) / (H - ha)
            mean = (ha * ma + (H - ha) * mb) / H
            m2 = _rsum((xa - ma) ** 2) + _rsum((xb - mb) ** 2) + (mb - ma) ** 2
            rstd = 1 / np.sqrt(m2 / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        sdt = np.float64 if wide else acc
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, sdt)
        if b == "aln_f16_y_round_toward_zero" and d == "float16":
            out["y"] = _toward_zero(y.reshape(x0.shape), np_dtype(d))
        if b == "aln_rstd_output_without_eps":
            var = _rsum((x - mean) ** 2) / H
            out["rstd"] = (1 / np.sqrt(var)).reshape(x0.shape[:-1] + (1,)).astype(sdt)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_gain_from_shift_ptr" and scale is not None and shift is not None:
            g = dy * (acc(1) + sh)
        dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)

