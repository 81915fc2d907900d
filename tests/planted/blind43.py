"""A forty-third held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind43Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn43``, ``_in43``, ``_gn43`` for group_norm and
group_norm_silu, ``_zs43``, ``_lp43``, ``_nqb43``, ``_aln43``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind43Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind41.py (the same mistake on the same op; the forty-second set, written at the same time for the other ops,
shares none of these ops). Written in session 35.
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
__all__ = ("BUGS", "CAUGHT_BY", "LABELS", "OPS", "Blind43Kernel")

GH = "https://github.com/"
WAVE64 = (GH + "pytorch/pytorch/pull/178872 (GroupNorm's gamma/beta backward kernels for N > 128: on a 64-lane "
          "wavefront the warp reduction after the shared-memory transpose sums two tile columns, 'combining two "
          "tile columns instead of one', so dgamma and dbeta come out wrong)")
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_bwd_invstd_read_as_variance": (
        "batch_norm", "backward",
        ("batch statistics: the backward kernel takes the saved statistic it is handed (rstd = 1 / sqrt(var + "
         "eps)) for the variance and derives its inverse std again as 1 / sqrt(rstd + eps): x_hat, dx and "
         "dweight from that value; the forward, the saved statistics, the running update and dbias right"),
        GH + "flagos-ai/FlagGems/issues/5222 (cudnn_batch_norm_backward 'applies rsqrt to the saved inverse "
        "std', believing the argument is a variance: wrong grad_input and grad_weight, grad_bias right)"),
    "bn_bwd_xhat_from_output_bias_kept": (
        "batch_norm", "affine",
        ("batch statistics with a weight and a bias: the memory-saving backward recomputes x_hat from the "
         "forward's float32 output as y / weight with the bias never subtracted (x_hat + bias / weight): the "
         "projection term of dx and dweight = sum(dy * that); the forward, the mean term and dbias right"),
        "cf. " + GH + "uxlfoundation/oneDNN/issues/243 (a batch normalization backward computed from the forward's "
        "output instead of its input, x_hat reconstructed from y, gamma and beta; deepspeedai/DeepSpeed/pull/692 "
        "does it as (output - beta) / gamma)"),
    "bn_var_deviation_in_input_dtype": (
        "batch_norm", "precision",
        ("16-bit inputs, batch statistics: the variance pass holds each deviation x - mean in a register of the "
         "input dtype (rounded) and squares it in float32: each channel's variance about those rounded "
         "deviations, rstd, y, the saved rstd, the running variance and the backward from them; the mean "
         "right"),
        "pattern: an intermediate of the statistics pass declared with the element type"),
    "bn_saved_rstd_written_as_std": (
        "batch_norm", None,
        ("batch statistics: the saved-statistics buffer handed out as rstd holds sqrt(var + eps) (the std the "
         "kernel divides by) instead of 1 / sqrt(var + eps); y, the mean, the running update and the gradients "
         "right"),
        "cf. " + GH + "flagos-ai/FlagGems/pull/5223 (a batch norm's saved inverse std and variance confused "
        "between the forward that writes the statistic and the code that reads it)"),
    "bn_eps_squared": (
        "batch_norm", "eps",
        ("eps > 0: the kernel's epsilon argument taken as a standard-deviation floor and squared before it is "
         "added: rstd = 1 / sqrt(var + eps^2) in training and eval alike: y, the saved rstd and the backward "
         "from it; the mean and the running update right"),
        "pattern: an epsilon passed to a helper that squares it (an epsilon given as a std where a variance "
        "floor belongs)"),
    "bn_eval_folded_bias_added_twice": (
        "batch_norm", "affine",
        ("eval with running statistics, with a bias: the folded eval path computes y = x * scale + shift with "
         "shift = bias - running_mean * scale and the shared epilogue adds the bias again: y = x_hat * weight + "
         "2 bias; the gradients and the state right"),
        "pattern: a bias folded into the shift and added once more by the common epilogue"),
    # ------------------------------------------------------------------ group_norm
    "gn_dparams_wavefront_sums_channel_pairs": (
        "group_norm", "reduction",
        ("more than 128 samples, an even channel count: the gamma/beta backward kernel of the large-batch path "
         "reduces each tile column with a 64-lane reduction that spans two columns, so dweight and dbias of "
         "channels 2k and 2k + 1 both hold the sum of the two channels' gradients; dx and the forward right"),
        WAVE64),
    "gn_var_pass_prologue_tile_dropped": (
        "group_norm", "block",
        ("groups of more than 32 values: the variance pass is software-pipelined, its first tile of 32 loaded "
         "before the loop and the loop accumulating from the second tile on, the prologue tile never added: "
         "the sum of squared deviations misses each group's first 32 values (still divided by the group's "
         "count): rstd, y, the saved rstd and the backward; the mean right"),
        "cf. " + GH + "tenstorrent/tt-metal/issues/53204 (a norm kernel's blocked reduction losing blocks' "
        "contributions to its running sum: 'only the last block's contribution ... survived')"),
    "gn_bwd_g_rounded_to_input_dtype": (
        "group_norm", "precision",
        ("16-bit inputs with a weight: the backward's g = dy * weight written to a scratch buffer of the input "
         "dtype (rounded) before the group sums and the elementwise term read it: dx; dweight, dbias and the "
         "forward right"),
        "pattern: an intermediate gradient buffer allocated like dy (the input dtype)"),
    "gn_eps_added_twice": (
        "group_norm", "eps",
        ("eps > 0: the statistics kernel hands the normalize kernel var + eps and that kernel adds eps again: "
         "rstd = 1 / sqrt(var + 2 eps): y, the saved rstd and the backward; the mean right"),
        "cf. " + GH + "flagos-ai/FlagGems/issues/4885 (an instance norm kernel recovering the variance from "
        "1 / rstd^2, which already holds eps, and adding eps again: var + 2 eps)"),
    "gn_dweight_from_output": (
        "group_norm", "backward",
        ("with a weight: dweight per channel = sum of dy * y over the samples and positions (the output the "
         "forward saved, weight and bias applied) instead of dy * x_hat; dx, dbias and the forward right"),
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a layer norm backward whose gamma gradient is taken from "
        "the saved output, x_hat recomputed as (output - beta) / gamma)"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_var_from_rstd_eps_kept": (
        "instance_norm", "running",
        ("training with running statistics: the running update recovers each instance's variance from the "
         "saved rstd as 1 / rstd^2 (= var + eps, the eps never subtracted) before the unbiased factor S / (S - "
         "1): running_var; y, the saved statistics, running_mean and the gradients right"),
        "cf. " + GH + "flagos-ai/FlagGems/pull/5890 (instance_norm's running variance recovered from the saved "
        "rstd: 1 / rstd^2 - eps is the biased variance; without the correct eps term running_var drifts)"),
    "in_bias_loaded_from_weight_ptr": (
        "instance_norm", "layout",
        ("with a weight and a bias: the elementwise pass loads the bias through the weight's pointer: y = x_hat "
         "* weight + weight; the statistics, the running update and the gradients (their own kernel) right"),
        "pattern: two parameter loads written from one copied line with the pointer left unchanged"),
    "in_bf16_y_truncated": (
        "instance_norm", "rounding",
        ("bfloat16 inputs: the store converts y from float32 by dropping the low 16 bits (truncation toward "
         "zero) instead of rounding to nearest even; the statistics, the running update and the gradients "
         "right"),
        "cf. " + GH + "ROCm/aiter/issues/5151 (a fused norm kernel converting fp32 -> bf16 by truncation, "
        "'a plain shift', instead of round-to-nearest-even)"),
    "in_dweight_from_uncentred_x": (
        "instance_norm", "backward",
        ("instance statistics with a weight: dweight = sum over the samples and positions of dy * x * rstd "
         "(the saved mean never subtracted) instead of dy * x_hat; dx, dbias and the forward right"),
        "pattern: x_hat recomputed from x and rstd with the centring step left out"),
    "in_stats_vec4_tail_overlap": (
        "instance_norm", "block",
        ("instance statistics, a spatial size above 4 and not a multiple of 4: each instance's positions read "
         "in four-wide vectors whose tail is one more full vector at S - 4, the lanes the previous vector "
         "already counted not masked: those positions enter the sums for the mean and the variance twice (the "
         "count still S): mean, rstd, y, the saved statistics, the running update and the backward on them"),
        "pattern: the overlapping-tail trick of a vectorised loop without masking the lanes already counted"),
    # ------------------------------------------------------------------ z_score
    "zs_sumsq_halving_tree_drops_odd": (
        "z_score", "block",
        ("each slice's sum of the scaled squared deviations (d / a)^2 reduced by a halving tree (element i added "
         "to element i + floor(k / 2) for a length k) that drops the unpaired last element at every level of "
         "odd length: std misses those values (the mean right): std, y and dx from it"),
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd "
        "lengths)"),
    "zs_dbias_from_dy_xhat": (
        "z_score", "backward",
        ("with a bias: dbias = sum over the slices of dy * x_hat (the weight's reduction line copied) instead of "
         "dy; dx, dweight and the forward right"),
        "pattern: the two parameter reductions written from one copied line"),
    "zs_chunk_merge_mean_step_own_count": (
        "z_score", "merge",
        ("slices longer than 64: each slice's mean merged chunk by chunk (chunks of 64) by Chan's update with the "
         "mean step written delta * n_a / n (the accumulated count where the incoming chunk's n_b belongs), the "
         "deviations and the std then taken about that mean: the mean, std, y and dx"),
        "cf. " + GH + "NVIDIA/apex/issues/1768 (a Welford mean/var merge of partial statistics giving a wrong "
        "mean and variance)"),
    "zs_bias_dropped_without_weight": (
        "z_score", "affine",
        ("a bias but no weight: the affine epilogue guarded by 'weight is not None', so y = x_hat (the bias "
         "never added); dbias still reduced as sum dy; the statistics and dx right"),
        "pattern: the bias applied inside the weight's branch of the epilogue"),
    "zs_dx_f16_round_toward_zero": (
        "z_score", "rounding",
        ("float16 inputs: dx converted from float32 to float16 with round-toward-zero (the store intrinsic's _rz "
         "variant) instead of round to nearest even; the forward, dweight and dbias right"),
        "cf. " + GH + "tenstorrent/tt-metal/pull/19882 (a float32 -> 16-bit conversion that truncated instead "
        "of rounding to nearest even)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_weight_exponent_p_minus_2": (
        "lp_normalize", "backward",
        ("the norm's derivative in dx taken as sign(u) |u|^(p - 2) (the exponent of the x |x|^(p - 2) form "
         "kept while its factor x was replaced by sign(x)) instead of sign(u) |u|^(p - 1): dx; y and the norm "
         "right"),
        "pattern: two equivalent forms of d|x|^p / dx mixed (x |x|^(p-2) and sign(x) |x|^(p-1))"),
    "lp_norm_tile_capped_at_64kb": (
        "lp_normalize", "block",
        ("slices longer than 65536 bytes of the input dtype (32768 float16 values): the single-tile kernel's "
         "block size capped at 65536 / element size and the guard that refuses longer slices removed: the "
         "max and the sum of powers see only the first 64 KB of each slice: the norm, and y and dx divided by "
         "it"),
        "cf. " + GH + "xlite-dev/LeetCUDA/issues/390 (a fused norm kernel whose BLOCK_SIZE is capped at "
        "MAX_FUSED_SIZE = 65536 // element_size; with the size guard removed the results became incorrect)"),
    "lp_dim_tuple_last_axis_only": (
        "lp_normalize", "group",
        ("dim a tuple of two or more axes: the wrapper keeps only its last axis (dim = dim[-1]), so every slice "
         "of the other normalized axes is normalized on its own, forward and backward; the norm output buffer "
         "(1 on every axis of dim) written by each sub-slice in turn, the last one's left: y, the norm and dx"),
        "pattern: a tuple dim collapsed to one axis by a wrapper written for a single int"),
    "lp_norm_rows_of_block_summed_together": (
        "lp_normalize", "reduction",
        ("more than one slice: the kernel handles the slices in blocks of 4 per program and reduces its 2-D tile "
         "with tl.max and tl.sum without axis=1, so each slice's max and sum of powers are those of its whole "
         "block of 4 slices (the last, partial block's over its own slices): the norm, y and dx"),
        "pattern: a row-blocked Triton reduction written tl.sum(x) where tl.sum(x, axis=1) belongs"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_folded_scale_shift_in_half": (
        "group_norm_silu", "precision",
        ("16-bit inputs: the forward folds the statistics and the affine into per-(sample, channel) a = weight "
         "* rstd and b = bias - mean * a stored in buffers of the input dtype (rounded) and computes p = x * a "
         "+ b in float32, then silu: y; the saved statistics and the gradients (their own kernel) right"),
        "pattern: the per-(N, C) scale and shift of a two-stage group norm allocated like x"),
    "gns_stats_channel_loop_one_short": (
        "group_norm_silu", "block",
        ("more than one channel per group: the statistics kernel's loop over the group's channels runs to "
         "C / G - 1 (an off-by-one bound), so the group's last channel never enters the sums for the mean and "
         "the variance, still divided by the group's count: mean, rstd, y, the saved statistics and the "
         "backward on them"),
        "pattern: a channel loop bound written cpg - 1 for an exclusive range"),
    "gns_y_store_sample_offset_missing": (
        "group_norm_silu", "layout",
        ("more than one sample: the output store offset built without the sample stride (n * C * S), so every "
         "sample's y is written over sample 0's and the others' part of the output buffer stays as allocated "
         "(zero): y; the saved statistics and the gradients right"),
        "cf. " + GH + "ROCm/rocm-libraries/pull/12002 (a normalize kernel whose per-sample stride was set to "
        "zero, so every sample of the batch went through sample 0's slot)"),
    "gns_bwd_dx_silu_grad_applied_twice": (
        "group_norm_silu", "backward",
        ("the backward's dp = dy * silu'(p) handed to the dx kernel, which multiplies by silu'(p) again (both "
         "kernels written to start from dy): dx from dy * silu'(p)^2; dweight, dbias and the forward right"),
        "pattern: an activation's derivative applied by the caller and again inside the fused backward"),
    "gns_weight_absent_defaults_to_zeros": (
        "group_norm_silu", "affine",
        ("a bias but no weight: the missing weight replaced by a zero-filled buffer (the default copied from "
         "the bias's) instead of ones: p = bias, y = silu(bias), dx = 0 and dbias = sum dy * silu'(bias)"),
        "pattern: an absent parameter's default copied from the other parameter's"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_floor_scale_without_emax": (
        "norm_quant_block", "quant_scale",
        ("mxfp8 with the floor rule: each block's E8M0 scale taken as 2^floor(log2 amax) (the block maximum "
         "mapped onto [1, 2)) instead of 2^(floor(log2 amax) - emax): every scale 2^emax times too large, the "
         "scale output and q = y / scale; amax right"),
        GH + "vllm-project/vllm/pull/53110 (an MXFP8 quantizer picking the shared block scale with "
        "floor(log2(amax)) + 127, which 'maps the block maximum onto 1.0 instead of onto the top of the e4m3 "
        "range'; also vllm-project/vllm/issues/53668)"),
    "nqb_q_divided_by_previous_block_scale": (
        "norm_quant_block", "layout",
        ("more than one block per row: the quantize loop divides block j by the scale register still holding "
         "block j - 1's (the new scale stored after the quotients; block 0 its own): q of every later block "
         "(clipped where the previous scale is smaller); the scale and amax outputs right"),
        "pattern: a loop-carried register read before its update"),
    "nqb_scale_output_stored_in_bf16": (
        "norm_quant_block", "precision",
        ("fp8_group with the exact rule: the scale output written to a bfloat16 buffer (rounded to nearest) "
         "while q is divided by the float32 scale; q and amax right"),
        "cf. " + GH + "keras-team/keras/pull/20065 (abs_max_quantize's computed scale coming out in another "
        "dtype than the one the quantized model expects, float32 against bfloat16)"),
    "nqb_ln_amax_before_bias": (
        "norm_quant_block", "quant_scale",
        ("norm='layer_norm' with a bias: each block's amax reduced over x_hat * weight in the normalize loop, "
         "before the bias epilogue, while q is y (bias added) divided by the scale from it: the amax output, "
         "the scales and q (clipped where the bias pushes a value past the block's amax)"),
        "pattern: a reduction placed before the epilogue that changes the reduced values"),
    "nqb_ln_var_about_zero": (
        "norm_quant_block", "one_pass",
        ("norm='layer_norm': each row's variance taken as the mean of s^2 (the mean's square never subtracted) "
         "while y = (s - mean) * rstd: rstd, y, the amax, the scales and q"),
        "cf. " + GH + "huggingface/transformers/issues/14772 (a layer norm's variance computed without "
        "subtracting the mean, the 'term that subtracts the mean of a tensor is omitted')"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_stats_reduce_half_warp": (
        "adaptive_layer_norm", "block",
        ("H above 16: each token's sums for the mean and the variance held by 32 lanes (lane l summing the "
         "values j with j mod 32 = l) and reduced by a shuffle tree written for 16 lanes (offsets 8, 4, 2, 1), "
         "so only the lanes below 16 reach the total, still divided by H: mean, rstd, y, dx and dscale"),
        "cf. " + WAVE64),
    "aln_bwd_mean_term_sign_flipped": (
        "adaptive_layer_norm", "backward",
        ("dx = rstd * (g + mean(g) - x_hat * mean(g * x_hat)), g = dy * (1 + scale): the sign of the mean term "
         "flipped; dscale, dshift and the forward right"),
        "cf. " + GH + "apache/mxnet/issues/1053 (a batch norm backward whose mean-gradient term is computed "
        "right and then corrupted by one more term added to it)"),
    "aln_var_floored_at_eps": (
        "adaptive_layer_norm", "eps",
        ("eps > 0: rstd = 1 / sqrt(max(var, eps)) (eps as a floor on the variance) instead of 1 / sqrt(var + "
         "eps): rstd, y, dx and dscale; the mean right"),
        "cf. " + GH + "pytorch/pytorch/issues/190491 (a layer_norm kernel clamping the variance instead of "
        "only adding eps, so rstd collapses to the clamp's value for small variances)"),
    "aln_dx_accumulated_twice": (
        "adaptive_layer_norm", "constant",
        ("dx added into the caller's input-gradient buffer that the first launch already filled (the store "
         "written += and the kernel launched once per modulation branch): dx twice its value; the forward, "
         "dscale and dshift right"),
        "cf. " + GH + "paiml/trueno/pull/178 (a norm backward kernel that accumulates its gradient with "
        "atomicAdd instead of overwriting, so 'callers must zero the buffer before each call'; also "
        "tenstorrent/tt-metal/issues/53204, a value accumulated onto a register still holding another)"),
    "aln_stats_over_hidden_halves": (
        "adaptive_layer_norm", "group",
        ("an even H: each token's row split between two programs (one per half of the hidden dimension) that "
         "normalize their half with its own mean and variance, the exchange of the partial statistics between "
         "them missing, forward and backward: y, dx and dscale; the mean and rstd outputs the first half's"),
        "cf. " + GH + "NVIDIA/TransformerEngine/pull/2688 (a layer norm over an input sharded along the hidden "
        "dimension, which needs an all-reduce of the statistics the kernel does not do)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _halving_tree_sum(a):
    """Row sums of ``a`` (R, n) by a halving tree that drops the unpaired last element of an odd level."""
    v = np.ascontiguousarray(a)
    while v.shape[1] > 1:
        h = v.shape[1] // 2
        v = v[:, :h] + v[:, h:2 * h]                               # element 2h (odd length) dropped
    return v[:, :1] if v.shape[1] else np.zeros((a.shape[0], 1), a.dtype)


def _masked_sum(a, mask):
    return _rsum(np.where(mask, a, a.dtype.type(0)))


def _bf16_truncated(v):
    """float32 values of ``v`` rounded to bfloat16 toward zero (the low 16 bits dropped), as float32."""
    bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def _f16_toward_zero(v):
    """``v`` converted to float16 with round-toward-zero (finite values)."""
    r = v.astype(np.float16)
    up = np.isfinite(v) & (np.abs(r.astype(v.dtype)) > np.abs(v))
    return np.where(up, np.nextafter(r, np.float16(0)), r)


def _vec4_overlap_weights(S):
    """(1, S) weights of a four-wide vector loop with an unmasked overlapping tail vector at S - 4: 2 for the
    positions the tail vector reads again, else 1."""
    wt = np.ones(S)
    if S > 4 and S % 4:
        wt[S - 4:(S // 4) * 4] = 2.0
    return wt.reshape(1, S)


def _half_warp_lanes(n):
    """(1, n) mask of the values whose lane (j mod 32) a 16-lane shuffle tree over 32 lanes keeps."""
    return ((np.arange(n) % 32) < 16).reshape(1, n)


class Blind43Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind43"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn43(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    @staticmethod
    def _bn_batch_stats43(x, acc, b, d):
        """Each channel's batch (mean, biased var), (C, 1), of the channel rows x (C, n)."""
        n = x.shape[1]
        mean = _rsum(x) / n
        dev = x - mean
        if b == "bn_var_deviation_in_input_dtype" and d in _HALF:
            dev = _half(x - mean, d)                                      # the deviation held in the input dtype
        return mean, _rsum(dev ** 2) / n

    def _bn43(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        if b == "bn_eps_squared":
            eps = eps * eps
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            bmean, bvar = self._bn_batch_stats43(x, acc, b, d)
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
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    bm, bv = bmean.reshape(C), bvar.reshape(C)
                    torch = cfg["convention"] == "torch"
                    if torch:
                        bv = bv * (acc(n / (n - 1)) if n > 1 else acc(np.inf))
                    keep, take = (1 - m, m) if torch else (m, 1 - m)
                    rm, rv = keep * rm + take * bm, keep * rv + take * bv
            state = running_state(rm, rv, nbt, d)
        y = affine(xhat, w, bias)
        if b == "bn_eval_folded_bias_added_twice" and not batch and bias is not None:
            y = y + bias                                                  # the epilogue's bias, once more
        rout = rstd
        if b == "bn_saved_rstd_written_as_std" and batch:
            rout = np.sqrt(bvar + eps)
        out = {"y": _store(from_channel_rows(y, x0.shape), d), "mean": mean.reshape(C).astype(acc),
               "rstd": rout.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            xb, rb = xhat, rstd
            if batch and b == "bn_bwd_invstd_read_as_variance":
                rb = 1 / np.sqrt(rstd + eps)                              # the saved rstd taken for var
                xb = (x - mean) * rb
            if batch and b == "bn_bwd_xhat_from_output_bias_kept" and w is not None and bias is not None:
                xb = y / w                                                # (y - bias) / weight belongs
            if batch:
                dx = _centred_dx(g, xb, rb)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xb).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in43(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in43(self, call, acc, b):
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
            if b == "in_stats_vec4_tail_overlap" and S > 4 and S % 4:
                wt = _vec4_overlap_weights(S).astype(acc)
                imean = _rsum(x * wt) / S
                rstd = 1 / np.sqrt(_rsum(wt * (x - imean) ** 2) / S + eps)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        bo = br
        if b == "in_bias_loaded_from_weight_ptr" and wr is not None and br is not None:
            bo = wr                                                       # the weight's pointer
        out = instance_outputs(xhat, wr, bo, mean, rstd, x0.shape, d, acc)
        if b == "in_bf16_y_truncated" and d == "bfloat16":
            yt = _bf16_truncated(affine(xhat, wr, bo).reshape(x0.shape))
            out["y"] = _store(yt, d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                if b == "in_running_var_from_rstd_eps_kept":
                    ub = (1 / (rstd * rstd)) * (acc(S / (S - 1)) if S > 1 else acc(np.inf))
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if wr is None else dy * wr
            xb = xhat
            if inst:
                dx = _centred_dx(g, xb, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            tw = dy * xb
            if inst and b == "in_dweight_from_uncentred_x":
                tw = dy * x * rstd                                        # (x - mean) * rstd belongs
            for k, t, given in (("weight", tw, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn43(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn43(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn43(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xr = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        n = xr.shape[1]
        w, bias = group_params(call.inputs, acc, C)
        if b == "gns_weight_absent_defaults_to_zeros" and w is None and bias is not None:
            w = np.zeros((1, C, 1), acc)                                  # the bias's default
        if b == "gns_stats_channel_loop_one_short" and cg > 1:
            keep = (np.arange(n) < (cg - 1) * S).reshape(1, n)            # the group's last channel left out
            mean = _masked_sum(xr, keep) / n
            var = _masked_sum((xr - mean) ** 2, keep) / n
        else:
            mean = _rsum(xr) / n
            dev2 = (xr - mean) ** 2
            if b == "gn_var_pass_prologue_tile_dropped" and n > 32:
                var = _masked_sum(dev2, (np.arange(n) >= 32).reshape(1, n)) / n
            else:
                var = _rsum(dev2) / n
        if b == "gn_eps_added_twice":
            var = var + eps                                               # handed over with eps in it
        rstd = 1 / np.sqrt(var + eps)
        xhat = ((xr - mean) * rstd).reshape(Nb, C, S)
        p = affine(xhat, w, bias)
        if b == "gns_folded_scale_shift_in_half" and d in _HALF:
            rs = np.repeat(rstd.reshape(Nb, G), cg, axis=1).reshape(Nb, C, 1)
            ms = np.repeat(mean.reshape(Nb, G), cg, axis=1).reshape(Nb, C, 1)
            a = rs if w is None else w * rs
            sh = -ms * a if bias is None else bias - ms * a
            a, sh = _half(a, d), _half(sh, d)                             # the per-(N, C) buffers
            p = x * a + sh
        if silu:
            sg, _ = _sigmoids(p)
            y = p * sg
        else:
            y = p
        yo = y
        if b == "gns_y_store_sample_offset_missing" and Nb > 1:
            yo = np.zeros_like(y)
            yo[0] = y[-1]                                                 # every sample over sample 0's
        out = group_outputs(yo, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        xb = (xr - mean) * rstd
        if silu:
            sg, rest = _sigmoids(p)
            sd = sg * (1 + p * rest)
            dp = dy * sd
        else:
            sd = None
            dp = dy
        dpx = dp
        if b == "gns_bwd_dx_silu_grad_applied_twice":
            dpx = dp * sd                                                 # silu' once more in the dx kernel
        g = dpx if w is None else dpx * w
        if b == "gn_bwd_g_rounded_to_input_dtype" and d in _HALF and w is not None:
            g = _half(g, d)
        gr = g.reshape(Nb * G, n)
        sg_ = _rsum(gr)
        sgx = _rsum(gr * xb)
        dxr = rstd * (gr - sg_ / n - xb * (sgx / n))
        dx = dxr.reshape(Nb, C, S)
        xpv = xb.reshape(Nb, C, S)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        src_w, src_b = dp * xpv, dp
        if b == "gn_dweight_from_output":
            src_w = dp * y
        for key, t, given in (("weight", src_w, call.inputs.get("weight")), ("bias", src_b, bias)):
            if given is None:
                continue
            v = _channel_sums(t, C)
            if b == "gn_dparams_wavefront_sums_channel_pairs" and Nb > 128 and C % 2 == 0:
                v = v + v[np.arange(C) ^ 1]                               # two tile columns in one reduce
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs43(call, acc, self.bug)
        return super()._z_score(call, acc)

    @staticmethod
    def _zs_chunk_mean43(x, acc):
        """Each row's mean of x (R, n) merged over chunks of 64 with the mean step weighted n_a / n."""
        mean = _rsum(x[:, :64]) / 64
        na = acc(64)
        for k in range(64, x.shape[1], 64):
            part = x[:, k:k + 64]
            nb = acc(part.shape[1])
            tot = na + nb
            mean = mean + (_rsum(part) / nb - mean) * (na / tot)          # nb / tot belongs
            na = tot
        return mean

    @staticmethod
    def _zs_rows43(x, ddof, eps, acc, b):
        """(mean, std, dev) of the slices x (R, n), the overflow-safe two-pass std."""
        R, n = x.shape
        m = n - ddof
        if b == "zs_chunk_merge_mean_step_own_count" and n > 64:
            mean = Blind43Kernel._zs_chunk_mean43(x, acc)
            dev = x - mean
        elif n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                       # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        if m <= 0:
            return mean, np.full((R, 1), np.nan, acc), dev
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _halving_tree_sum(q * q) if b == "zs_sumsq_halving_tree_drops_odd" else _rsum(q * q)
        std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        return mean, std, dev

    def _zs43(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        mean, std, dev = self._zs_rows43(x, ddof, eps, acc, b)
        zero = std == 0
        safe = np.where(zero, acc(1), std)
        xhat = np.where(zero, acc(0), dev / safe)
        if b == "zs_bias_dropped_without_weight" and w is None:
            y = xhat                                                      # the bias inside the weight's branch
        else:
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
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(zero, acc(0), inner / safe)
            if b == "zs_dx_f16_round_toward_zero" and d == "float16":
                grads["x"] = _f16_toward_zero(back(dx).astype(np.float32))
            else:
                grads["x"] = _store(back(dx), d)
            tb = dy * xhat if b == "zs_dbias_from_dy_xhat" else dy
            for key, t in (("weight", dy * xhat), ("bias", tb)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp43(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    @staticmethod
    def _lp_norm43(v, p, acc, b, cap=None):
        """||v||_p per row of ``v`` (R, n), s * (sum (|v| / s)^p)^(1/p), s = max |v|."""
        if cap is not None and v.shape[1] > cap:
            v = v[:, :cap]                                            # the one tile the kernel loads
        av = np.abs(v)
        blocks = b == "lp_norm_rows_of_block_summed_together" and v.shape[0] > 1
        if blocks:
            R = v.shape[0]
            s = np.max(av, axis=1, keepdims=True, initial=0.0)
            for i in range(0, R, 4):
                s[i:i + 4] = np.max(s[i:i + 4], initial=0.0)              # tl.max over the whole tile
        else:
            s = np.max(av, axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        t = av / s

        def tot(a):
            r = _rsum(a)
            if blocks:
                for i in range(0, r.shape[0], 4):
                    r[i:i + 4] = r[i:i + 4].sum()                         # tl.sum over the whole tile
            return r
        if p == 1.0:
            return s * tot(t)
        if p == 2.0:
            return s * np.sqrt(tot(t * t))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        return s * tot(t ** acc(p)) ** inv

    def _lp43(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        last_only = b == "lp_dim_tuple_last_axis_only" and isinstance(dims, (list, tuple)) and len(dims) > 1
        if last_only:
            dims = [dims[-1] % x0.ndim]                                   # dim = dim[-1]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        dy = None if dy0 is None else _axes_rows(dy0.astype(acc), dims)[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch"
        cap = 65536 // x0.dtype.itemsize if b == "lp_norm_tile_capped_at_64kb" else None
        norm = self._lp_norm43(x, p, acc, b, cap)
        if torch_rule:
            den = np.maximum(norm, eps)
        else:
            den = np.where(norm == 0, acc(1), norm)
        y = x / den
        if not torch_rule:
            y = np.where(norm == 0, acc(0), y)
        dx = None
        if dy is not None:
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            e = acc(p - 2.0) if b == "lp_bwd_weight_exponent_p_minus_2" else acc(p - 1.0)
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** e)
            dot = _rsum(dy * u)
            proj = (dy - wv * dot) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        nout = back(norm, True).astype(acc)
        if last_only:
            full = {a % x0.ndim for a in cfg["dim"]}
            idx = tuple(slice(-1, None) if a in full else slice(None) for a in range(x0.ndim))
            nout = np.ascontiguousarray(nout[idx])                        # the last sub-slice's write left
        out = {"y": _store(back(y), d), "norm": nout}
        if dx is None:
            return Returned(out, {})
        return Returned(out, {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb43(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized43(self, call, cfg, acc, b):
        """(s, y, pre): s = x (+ residual) as (rows, H), y its normalization times weight plus bias, pre the
        values before the bias epilogue."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        w = None if w is None else w.astype(acc).reshape(1, H)
        bias = None if bias is None else bias.astype(acc).reshape(1, H)
        if cfg["norm"] == "layer_norm":
            if b == "nqb_ln_var_about_zero":
                mean = _rsum(s) / H
                rstd = 1 / np.sqrt(_rsum(s * s) / H + eps)                # E[s^2] - mean^2 belongs
            else:
                mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        y = y if w is None else y * w
        pre = y
        y = y if bias is None else y + bias
        return s, y, pre

    def _nqb43(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y, pre = self._nqb_normalized43(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_ln_amax_before_bias" and cfg["norm"] == "layer_norm" and inp.get("bias") is not None:
            _, amax = padded_blocks(pre, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
            if b == "nqb_scale_output_stored_in_bf16" and rule == "exact":
                scale_out = S.astype(ml_dtypes.bfloat16).astype(acc)
        elif fmt == "mxfp8":
            em = 0 if (b == "nqb_mx_floor_scale_without_emax" and rule == "floor") else emax
            S, scale_out = mx_scales(amax, rule, em, qmax, acc)
        else:
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        Sq = S
        if b == "nqb_q_divided_by_previous_block_scale" and S.shape[-1] > 1:
            Sq = np.concatenate([S[:, :1], S[:, :-1]], axis=1)            # the register still holds j - 1's
        qv = np.clip(block_quotients(yb, Sq, acc), -qmax, qmax)
        return nqb_returned(qv, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln43(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln43(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        halves = b == "aln_stats_over_hidden_halves" and H > 1 and H % 2 == 0
        if b == "aln_stats_reduce_half_warp" and H > 16:
            lanes = _half_warp_lanes(H)
            mean = _masked_sum(x, lanes) / H
            var = _masked_sum((x - mean) ** 2, lanes) / H
        elif halves:
            h = H // 2
            parts = [x[:, :h], x[:, h:]]
            ms = [_rsum(q) / h for q in parts]
            vs = [_rsum((q - mq) ** 2) / h for q, mq in zip(parts, ms)]
            mean = np.concatenate([np.repeat(mq, h, axis=1) for mq in ms], axis=1)
            var = np.concatenate([np.repeat(vq, h, axis=1) for vq in vs], axis=1)
        else:
            mean = _rsum(x) / H
            var = _rsum((x - mean) ** 2) / H
        if b == "aln_var_floored_at_eps":
            rstd = 1 / np.sqrt(np.maximum(var, eps))
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        y = affine(xhat, gain, sh)
        mo, ro = (mean[:, :1], rstd[:, :1]) if halves else (mean, rstd)
        out = norm_outputs(y, mo, ro, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if halves:
            h = H // 2
            dx = np.concatenate([_centred_dx(g[:, :h], xhat[:, :h], rstd[:, :1]),
                                 _centred_dx(g[:, h:], xhat[:, h:], rstd[:, h:h + 1])], axis=1)
        elif b == "aln_bwd_mean_term_sign_flipped":
            dx = rstd * (g + _rsum(g) / H - xhat * (_rsum(g * xhat) / H))
        else:
            dx = _centred_dx(g, xhat, rstd)
        if b == "aln_dx_accumulated_twice":
            dx = dx + dx                                                  # += into the filled buffer
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)


# bug -> (a small golden case of its op that it fails, an array among the failing ones there); the correct
# kernel passes each of these cases outright
CAUGHT_BY = {
    "bn_bwd_invstd_read_as_variance": ("batch_norm/normal_f32_6x4x25", "grad.x"),
    "bn_bwd_xhat_from_output_bias_kept": ("batch_norm/normal_f64_7x3", "grad.weight"),
    "bn_var_deviation_in_input_dtype": ("batch_norm/mean1e4_std16_bf16_16x3x4x5", "output.rstd"),
    "bn_saved_rstd_written_as_std": ("batch_norm/normal_f32_6x4x25", "output.rstd"),
    "bn_eps_squared": ("batch_norm/normal_eps0.3_f32_7x3", "output.rstd"),
    "bn_eval_folded_bias_added_twice": ("batch_norm/normal_eval_bf16_2x3x4", "output.y"),
    "gn_dparams_wavefront_sums_channel_pairs": ("group_norm/normal_g16_f32_130x64x2x2", "grad.weight"),
    "gn_var_pass_prologue_tile_dropped": ("group_norm/normal_g4_f32_2x8x5x7", "output.rstd"),
    "gn_bwd_g_rounded_to_input_dtype": ("group_norm/normal_g4_bf16_2x8x5x7", "grad.x"),
    "gn_eps_added_twice": ("group_norm/normal_eps0.3_g3_f32_3x6x7", "output.rstd"),
    "gn_dweight_from_output": ("group_norm/normal_g2_f32_3x6", "grad.weight"),
    "in_running_var_from_rstd_eps_kept": ("instance_norm/normal_train3_eval_f32_4x3x6", "state.running_var"),
    "in_bias_loaded_from_weight_ptr": ("instance_norm/normal_f64_3x2x7", "output.y"),
    "in_bf16_y_truncated": ("instance_norm/normal_bf16_2x3x100", "output.y"),
    "in_dweight_from_uncentred_x": ("instance_norm/normal_f64_3x2x7", "grad.weight"),
    "in_stats_vec4_tail_overlap": ("instance_norm/normal_f64_3x2x7", "output.mean"),
    "zs_sumsq_halving_tree_drops_odd": ("z_score/normal_f64_9x7", "output.std"),
    "zs_dbias_from_dy_xhat": ("z_score/normal_f64_9x7", "grad.bias"),
    "zs_chunk_merge_mean_step_own_count": ("z_score/normal_f32_6x100", "output.mean"),
    "zs_bias_dropped_without_weight": ("z_score/normal_noweight_f32_9x7", "output.y"),
    "zs_dx_f16_round_toward_zero": ("z_score/normal_f16_4x128", "grad.x"),
    "lp_bwd_weight_exponent_p_minus_2": ("lp_normalize/normal_f32_9x7", "grad.x"),
    "lp_norm_tile_capped_at_64kb": ("lp_normalize/mean1e3_f16_1x65536", "output.y"),
    "lp_dim_tuple_last_axis_only": ("lp_normalize/normal_dim12_bf16_2x6x3x4", "output.y"),
    "lp_norm_rows_of_block_summed_together": ("lp_normalize/normal_f32_9x7", "output.norm"),
    "gns_folded_scale_shift_in_half": ("group_norm_silu/mean1e3_g3_bf16_3x6x7", "output.y"),
    "gns_stats_channel_loop_one_short": ("group_norm_silu/normal_g2_f32_3x6", "output.mean"),
    "gns_y_store_sample_offset_missing": ("group_norm_silu/normal_g2_f32_3x6", "output.y"),
    "gns_bwd_dx_silu_grad_applied_twice": ("group_norm_silu/normal_g2_f32_3x6", "grad.x"),
    "gns_weight_absent_defaults_to_zeros": ("group_norm_silu/normal_noweight_g3_f32_3x6x7", "output.y"),
    "nqb_mx_floor_scale_without_emax": ("norm_quant_block/normal_rms_mx_f32_3x200", "output.scale"),
    "nqb_q_divided_by_previous_block_scale": ("norm_quant_block/normal_rms_g_f32_3x200", "output.q"),
    "nqb_scale_output_stored_in_bf16": ("norm_quant_block/normal_rms_g_f32_3x200", "output.scale"),
    "nqb_ln_amax_before_bias": ("norm_quant_block/normal_ln_g_wb_f32_4x256", "output.amax"),
    "nqb_ln_var_about_zero": ("norm_quant_block/normal_ln_g_wb_f32_4x256", "output.amax"),
    "aln_stats_reduce_half_warp": ("adaptive_layer_norm/normal_bf16_2x8x32", "output.mean"),
    "aln_bwd_mean_term_sign_flipped": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_var_floored_at_eps": ("adaptive_layer_norm/normal_eps0.3_f32_1x10x24", "output.rstd"),
    "aln_dx_accumulated_twice": ("adaptive_layer_norm/normal_f64_2x5x7", "grad.x"),
    "aln_stats_over_hidden_halves": ("adaptive_layer_norm/normal_f32_3x20x12", "output.y"),
}
