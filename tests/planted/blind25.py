"""A twenty-fifth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind25Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn25``, ``_in25``, ``_gn25`` for group_norm and
group_norm_silu, ``_zs25``, ``_lp25``, ``_nqb25``, ``_aln25``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind25Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind23.py (the same mistake on the same op; the twenty-fourth set, written at the same time for the other
ops, shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, bn_momentum, centred_dx as _centred_dx,
                          channel_params, channel_rows, channel_running_stats, channel_sums, dy_and_g,
                          eps_value as _eps, from_channel_rows, group_outputs, group_params, group_rows,
                          group_scales, half as _half, instance_momentum_value, instance_outputs,
                          instance_params, instance_running_stats, instance_running_update,
                          instance_unbiased_var, mx_scales, nan_running, norm_outputs, nqb_format,
                          nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_sample, pow2,
                          np_dtype, rsum as _rsum, running_in, running_setup, running_state,
                          sigmoids as _sigmoids, store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind25Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_eval_running_stats_of_channel0": (
        "batch_norm", "running",
        "eval with running statistics: the inference kernel loads running_mean and running_var at offset 0 for "
        "every channel (the channel index never added to the buffers' pointers): every channel normalized with "
        "channel 0's running statistics, y and dx = g * rstd from them",
        "cf. " + GH + "tenstorrent/tt-metal/pull/57223 (a norm kernel's per-channel offset into a statistics "
        "buffer wrong)"),
    "bn_bwd_proj_over_count_minus_1": (
        "batch_norm", "bessel",
        "batch statistics: the backward's projection mean(g * x_hat) divides its per-channel sum by n - 1 (the "
        "count the running variance's unbiased factor uses) instead of n; mean(g), dweight, dbias and the "
        "forward right",
        "cf. " + GH + "pytorch/pytorch/issues/3122 (biased and unbiased variances mixed between a norm's code "
        "paths)"),
    "bn_var_pad_lanes_unmasked": (
        "batch_norm", "block",
        "batch statistics, inputs of three or more axes whose spatial size S is not a power of two: each "
        "sample's positions loaded into a tile of pow2(S) lanes, the mean's sum masked but the deviations x - "
        "mean of the padded lanes not, so each padded lane adds mean^2 to the channel's sum of squares: the "
        "variance, rstd, y, dx and the running variance",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/518 (the padded lanes of a power-of-two block entering a "
        "norm's statistics)"),
    "bn_xhat_rounded_before_affine": (
        "batch_norm", "precision",
        "16-bit inputs: the normalize pass writes x_hat in the input dtype and the affine pass computes y = "
        "x_hat * weight + bias from that rounded x_hat; the statistics and the gradients right",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/1132 (a norm's output cast to bfloat16 before the weight "
        "multiply in one implementation and after it in the other)"),
    "bn_bwd_rstd_recomputed_with_default_eps": (
        "batch_norm", "eps",
        "batch statistics: the backward kernel recomputes rstd from the channel's variance with its own default "
        "eps 1e-5 (the configured eps not passed to it): x_hat, dx and dweight from that rstd; the forward right",
        "cf. " + GH + "ggml-org/llama.cpp/pull/8818 (a group_norm kernel whose eps was a constant until it was made "
        "a parameter)"),
    "bn_weight_loaded_from_bias_ptr": (
        "batch_norm", "layout",
        "with a weight and a bias: the weight loaded through the bias's pointer (y = x_hat * bias + bias, and "
        "dx from g = dy * bias); dweight and dbias reduced as usual",
        "cf. " + GH + "NVIDIA/FasterTransformer/pull/466 (a norm kernel loading one input's buffer where "
        "another's was meant)"),
    # ------------------------------------------------------------------ instance_norm
    "in_bwd_dy_read_channels_last": (
        "instance_norm", "layout",
        "more than one channel and spatial position: the backward kernel reads the contiguous (N, C, *) dy "
        "buffer with channels-last strides (element (n, c, s) from flat position (n * S + s) * C + c): dx, "
        "dweight and dbias; the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/111824 (a normalization not handling its inputs' memory layout as "
        "their strides say)"),
    "in_bwd_projection_from_dy": (
        "instance_norm", "backward",
        "instance statistics with a weight: dx = rstd * (g - mean(g) - x_hat * mean(dy * x_hat)), the "
        "projection's reduction fed the raw dy where g = dy * weight belongs; dweight, dbias and the forward "
        "right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "in_eps_added_to_sum_of_squares": (
        "instance_norm", "eps",
        "instance statistics: eps added to each instance's sum of squared deviations before the division by S: "
        "rstd = 1 / sqrt((sum (x - mean)^2 + eps) / S), y, the saved rstd and dx from it",
        "cf. " + GH + "openvinotoolkit/openvino/pull/12077 (a normalization applying eps at a different place "
        "in some paths)"),
    "in_rstd_output_before_sqrt": (
        "instance_norm", None,
        "instance statistics: the rstd output written as 1 / (var + eps) (the reciprocal taken before the "
        "square root) while y and the gradients use the right rstd",
        "pattern: an output written from an intermediate of the statistic's finalization"),
    "in_sq_dev_sum_in_half": (
        "instance_norm", "precision",
        "16-bit inputs, instance statistics: each instance's sum of squared deviations accumulated left to "
        "right in the input dtype (the mean in float32): rstd, y and the backward",
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm kernels accumulating mean and variance in the input "
        "dtype)"),
    # ------------------------------------------------------------------ group_norm
    "gn_float64_via_float32": (
        "group_norm", "precision",
        "float64 inputs computed by the float32 instantiation of the kernel (x, the statistics, y and the "
        "gradients in float32, the results widened back to float64)",
        "cf. " + GH + "google/flax/pull/1804 (normalization layers computing in float32 whatever the input "
        "dtype, a float64 input downcast)"),
    "gn_dparams_sample_loop_from_one": (
        "group_norm", "reduction",
        "more than one sample: dweight and dbias reduced from per-(sample, channel) partials by a second stage "
        "whose loop over the samples starts at 1 (sample 0's partial never added); dx and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/53215 (a fused norm backward losing block partial sums in its "
        "final reduction)"),
    "gn_y_store_sample_offset_missing": (
        "group_norm", "layout",
        "more than one sample: the output pointer not advanced by the sample offset, every sample's y written "
        "over sample 0's (the last sample's values left there, the other samples never written); the saved "
        "statistics and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding batches wrong)"),
    "gn_uncentred_rms_flag_default": (
        "group_norm", "semantics",
        "the fused kernel's RMS-variant flag left at its default (on) by the group_norm entry: each group "
        "normalized without centring, rstd = 1 / sqrt(mean(x^2) + eps), the saved mean 0, forward and the "
        "RMS backward",
        "cf. " + GH + "Comfy-Org/comfy-kitchen/pull/175 (a group-norm kernel's dispatch selecting the wrong "
        "variant of its fused path)"),
    "gn_bwd_ds_from_xhat_in_x_form": (
        "group_norm", "backward",
        "backward in the ds / db form (c2 = (db * mean - ds) * rstd^3 / n, c3 = -c2 * mean - db * rstd / n, "
        "dx = rstd * g + c2 * x + c3) with ds reduced from g * x_hat (the saved normalized value) instead of "
        "g * x; dweight, dbias and the forward right",
        "pattern: a backward's reduction fed the saved value of another formulation"),
    "gn_bias_dropped_without_weight": (
        "group_norm", "affine",
        "a bias without a weight: the affine epilogue guarded by 'weight is not None' alone, so y = x_hat (the "
        "bias never added); dbias and dx right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/323 (group_norm and layer_norm kernels that do not support a "
        "weight or a bias given alone)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_spatial_vec4_tail_dropped": (
        "group_norm_silu", "block",
        "a spatial size above 4 and not a multiple of 4: each channel's positions read with four-wide vector "
        "loads only, the last S mod 4 positions never entering the group's sums, which are still divided by "
        "the group's count: the mean, the variance, y and the backward",
        "cf. " + GH + "ROCm/aiter/issues/5044 (a vectorised path mishandling the row's tail for sizes not a "
        "multiple of its vector width)"),
    "gns_group_halves_not_merged": (
        "group_norm_silu", "group",
        "an even number of channels a group: each group split between two programs of half its channels whose "
        "partial statistics are never combined, each half normalized with its own mean and rstd (the returned "
        "statistics the second half's), forward and backward",
        "pattern: a split reduction whose second stage is never launched"),
    "gns_channel_block_partials_equal_weight": (
        "group_norm_silu", "merge",
        "more than four channels a group, not a multiple of four: each group reduced in blocks of four channels "
        "whose (mean, M2) partials are merged as if every block held four channels (the short last block "
        "weighted like the others): the mean, the variance, y, the saved statistics and the backward",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count merge of partial statistics, right only "
        "when every partial holds the same count)"),
    "gns_silu_grad_sigmoid_for_complement": (
        "group_norm_silu", "backward",
        "the SiLU derivative written s * (1 + p * s) (the sigmoid's complement 1 - s written s) instead of "
        "s * (1 + p * (1 - s)): dp, dx, dweight and dbias; the forward right",
        "pattern: a sign slip in a hand-derived activation derivative"),
    "gns_activation_hardswish": (
        "group_norm_silu", None,
        "the fused activation computed as the hard-swish approximation p * relu6(p + 3) / 6 instead of "
        "p * sigmoid(p), forward and the backward's derivative of that function",
        "pattern: a mobile kernel's hard-swish approximation used for SiLU"),
    # ------------------------------------------------------------------ z_score
    "zs_bwd_row_sums_in_half": (
        "z_score", "precision",
        "16-bit inputs: the backward's row sums of g and g * x_hat (for mean(g) and the projection) "
        "accumulated left to right in the input dtype; dweight, dbias and the forward right",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's row sum accumulated in the fp16 input type)"),
    "zs_bessel_factor_outside_root": (
        "z_score", "bessel",
        "ddof > 0: the standard deviation computed from the biased variance and multiplied by n / (n - ddof) "
        "(the variance's correction factor applied to the std): std = sqrt(sum (x - mean)^2 / n + eps) * n / "
        "(n - ddof), y, the returned std and dx",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a normalization's biased and unbiased std "
        "confused)"),
    "zs_bwd_mean_term_of_dy": (
        "z_score", "backward",
        "with a weight: dx = (g - mean(dy) - x_hat * sum(g * x_hat) / (n - ddof)) / std, the mean term "
        "reduced from the raw dy where g = dy * weight belongs; dweight, dbias and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (a norm backward that forgot to multiply by the weight)"),
    "zs_stats_row_pointer_not_advanced": (
        "z_score", "layout",
        "more than one slice: the mean and std stores not advanced by the slice index, every slice's "
        "statistics written to slot 0 (the last slice's left there, the other slots never written); y and dx "
        "right",
        "cf. " + GH + "NVIDIA/Model-Optimizer/issues/193 (per-row values stored at the wrong offset)"),
    "zs_var_about_first_value_uncorrected": (
        "z_score", "one_pass",
        "the variance from the shifted-data sums about K = the slice's first value, sum (x - K)^2 / (n - "
        "ddof), without the correction term (the mean itself right): std, y and dx",
        "pattern: the shifted-data variance algorithm with its correction term left out"),
    "zs_bf16_outputs_truncated": (
        "z_score", "rounding",
        "bfloat16 inputs: y and dx converted from float32 by dropping the low 16 bits (rounding toward zero) "
        "instead of round to nearest even; the statistics right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_rows_grid_floor_quads": (
        "lp_normalize", "block",
        "more than 4 slices, not a multiple of 4: the kernel takes 4 slices per program on R // 4 programs "
        "(floor instead of cdiv), so the last R mod 4 slices are never processed: their y, norm and dx left "
        "unwritten (zero)",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering only part of its output: the "
        "rest of the torch.empty buffer never written)"),
    "lp_bwd_jacobian_not_transposed": (
        "lp_normalize", "backward",
        "p other than 2: the backward applies the Jacobian instead of its transpose: dx = (dy - u * sum(dy * "
        "w)) / norm, w = sign(u) |u|^(p - 1), where (dy - w * sum(dy * u)) / norm belongs; p = 2 (w = u) and "
        "the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/113527 (a hand-derived gradient of x / ||x|| disagreeing with "
        "autograd)"),
    "lp_onnx_rule_clamped_by_eps": (
        "lp_normalize", "eps",
        "zero_rule='onnx': the torch rule's clamp applied (y = x / max(norm, eps), dx = dy / eps where the norm "
        "is below eps) instead of the zero guard (0 for a zero slice, no clamp)",
        "cf. " + GH + "onnx/onnx/pull/1330 (LpNormalization's eps rule differing from the frameworks')"),
    "lp_bwd_norm_of_next_row": (
        "lp_normalize", "layout",
        "more than one slice: the backward loads the saved norm at the next slice's index ((r + 1) mod R, the "
        "norm pointer advanced before the load): u = x / that norm and dx divided by it; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's saved "
        "statistics)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_nvfp4_scale_output_includes_tensor_scale": (
        "norm_quant_block", "quant_scale",
        "nvfp4: the scale output written from the full dequantization scale (the E4M3 block scale times the "
        "tensor scale 1 / encode, converted to float8_e4m3fn) instead of the E4M3 block scale alone; q, amax "
        "and tensor_scale right",
        "cf. " + GH + "modular/modular/issues/6600 (NVFP4 per-tensor global scale applied where it does not "
        "belong)"),
    "nqb_mx_block_amax_of_prenorm": (
        "norm_quant_block", "quant_scale",
        "mxfp8: each block's amax reduced over the pre-norm values x (+ residual) the statistics pass holds "
        "instead of the normalized y: the amax output, the E8M0 scales from it and q = y / scale (clipped)",
        "cf. " + GH + "ROCm/TransformerEngine/pull/230 (a fused norm + FP8 kernel's amax taken at the wrong "
        "point)"),
    "nqb_nvfp4_clip_before_scale": (
        "norm_quant_block", "saturation",
        "nvfp4: the values clipped to the element range [-6, 6] before the division by the block scale instead "
        "of the quotients after it: q = clip(y, -6, 6) / scale; the scales and amax right",
        "cf. " + GH + "huggingface/transformers/pull/42775 (an FP8 quantization's clamp to the float8 range "
        "misplaced around the downcast)"),
    "nqb_rms_sumsq_in_half": (
        "norm_quant_block", "precision",
        "norm='rms_norm', 16-bit inputs: each row's sum of squares accumulated left to right in the input "
        "dtype: rstd, y, the blocks' amax, scales and q",
        "cf. " + GH + "Xilinx/mlir-air/pull/1679 (a norm kernel's sum of squares accumulated in bf16)"),
    "nqb_ln_weight_loaded_from_bias_ptr": (
        "norm_quant_block", "layout",
        "norm='layer_norm' with a weight and a bias: the weight loaded through the bias's pointer (y = x_hat * "
        "bias + bias), then the blocks' amax, scales and q",
        "pattern: two parameter pointers of the same shape, one passed for both"),
    "nqb_amax_loop_bound_inclusive": (
        "norm_quant_block", "block",
        "each block's amax loop bound written <= block_size (one lane too many): a block's amax also sees the "
        "next block's first value (for a row's last block, the next row's first value), and its scale and q "
        "from it",
        "pattern: an off-by-one loop bound in a block reduction"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dmod_token_blocks_from_second": (
        "adaptive_layer_norm", "reduction",
        "more than four tokens a sample: dscale and dshift reduced from per-block partials of four tokens by a "
        "second stage whose loop starts at block 1 (the first block's partial never added); dx and the forward "
        "right",
        "cf. " + GH + "BobMcDear/attorch/issues/18 (per-program weight-gradient partials whose row blocks and "
        "buffer disagree)"),
    "aln_bwd_g_rounded_to_input_dtype": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: the backward's g = dy * (1 + scale) written to a buffer of the input dtype (rounded) "
        "before the reductions and dx; dscale, dshift and the forward right",
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's intermediate truncated from the "
        "accumulation type to the input type)"),
    "aln_bwd_projection_of_output": (
        "adaptive_layer_norm", "backward",
        "dx = rstd * (g - mean(g) - x_hat * mean(g * y)), the projection's reduction fed the modulated output y "
        "= x_hat * (1 + scale) + shift (the register the epilogue kept) instead of x_hat; dscale, dshift and "
        "the forward right",
        "pattern: a backward's reduction fed the wrong saved register"),
    "aln_eps_squared": (
        "adaptive_layer_norm", "eps",
        "eps squared before it reaches the kernel (the module's eps taken for the std's epsilon and squared to "
        "go under the root): rstd = 1 / sqrt(var + eps^2), y, the saved rstd and the backward",
        "cf. " + GH + "131250208/TPlinker-joint-extraction/issues/37 (a layer norm's epsilon and its power "
        "confused)"),
    "aln_row_tail_tile_dropped": (
        "adaptive_layer_norm", "block",
        "H above 16 and not a multiple of 16: the statistics loop over tiles of 16 columns stops at H // 16 "
        "tiles (the tail never loaded) while the sums are divided by H: the mean, the variance, y and the "
        "backward",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond "
        "its block)"),
    "aln_dscale_dshift_outputs_swapped": (
        "adaptive_layer_norm", None,
        "with a scale and a shift: dscale and dshift written to each other's output; dx and the forward right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a LayerNorm backward assigning the weight and bias "
        "gradients the wrong way round)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _toward_zero(a, npdt):
    """``a`` converted to the 16-bit float ``npdt`` rounding toward zero (one step toward zero wherever the
    nearest-even conversion rounded away)."""
    r = np.asarray(np.asarray(a).astype(npdt))
    rv, av = r.astype(np.float64), np.asarray(a, np.float64)
    away = (np.abs(rv) > np.abs(av)) & np.isfinite(rv) & (rv != 0)
    bits = r.view(np.uint16).copy()
    bits[away] -= 1
    return bits.view(npdt)


def _widened(ret):
    """A Returned computed in float32 with every floating array widened to float64."""
    def wide(m):
        return {k: (v.astype(np.float64) if np.asarray(v).dtype.kind == "f" else v) for k, v in m.items()}
    return Returned(wide(ret.outputs), wide(ret.grads), dict(ret.state))


class Blind25Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind25"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn25(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn25(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                          # (C, n)
        C, n = x.shape
        Nb = x0.shape[0]
        S = n // Nb if Nb else 0
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_var_pad_lanes_unmasked" and x0.ndim >= 3 and n and pow2(S) != S:
                bmean = _rsum(x) / n
                bvar = (_rsum((x - bmean) ** 2) + acc(Nb * (pow2(S) - S)) * bmean * bmean) / n
                rstd = 1 / np.sqrt(bvar + eps)
            else:
                bmean, rstd = self._ln_stats(x, eps)
            mean = bmean
        elif b == "bn_eval_running_stats_of_channel0":
            rm0 = st["running_mean"].astype(acc).reshape(C)[:1]
            rv0 = st["running_var"].astype(acc).reshape(C)[:1]
            mean = np.repeat(rm0, C).reshape(C, 1)
            rstd = np.repeat(1 / np.sqrt(rv0 + eps), C).reshape(C, 1)
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        wf = bias if b == "bn_weight_loaded_from_bias_ptr" and w is not None and bias is not None else w
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                nbt = nbt + 1
                m = bn_momentum(cfg["momentum"], nbt, acc)
                if n > 0:
                    bm = bmean.reshape(C)
                    bv = (_rsum((x - bmean) ** 2) / n if bvar is None else bvar).reshape(C)
                    if cfg["convention"] == "torch":
                        f = acc(n / (n - 1)) if n > 1 else acc(np.inf)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        xa = xhat
        if b == "bn_xhat_rounded_before_affine" and d in _HALF:
            xa = _half(xhat, d)
        out = {"y": _store(from_channel_rows(affine(xa, wf, bias), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if wf is None else dy * wf
            if batch and b == "bn_bwd_rstd_recomputed_with_default_eps" and n:
                rstd = 1 / np.sqrt(_rsum((x - mean) ** 2) / n + acc(1e-5))
                xhat = (x - mean) * rstd
            if batch and b == "bn_bwd_proj_over_count_minus_1" and n > 1:
                dx = rstd * (g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(n - 1)))
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in25(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in25(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        inst = call.training or not has_run
        imean = None
        var_out = None
        if inst:
            if b == "in_eps_added_to_sum_of_squares" and S:
                imean = _rsum(x) / S
                dev = x - imean
                rstd = 1 / np.sqrt((_rsum(dev * dev) + eps) / S)
            elif b == "in_sq_dev_sum_in_half" and d in _HALF and S:
                imean = _rsum(x) / S
                dev = x - imean
                rstd = 1 / np.sqrt(_half_row_sums(dev * dev, d) / acc(S) + eps)
            else:
                imean, rstd = self._ln_stats(x, eps)
            mean = imean
            if b == "in_rstd_output_before_sqrt" and S:
                var_out = 1 / (_rsum((x - imean) ** 2) / S + eps)
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd if var_out is None else var_out, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                ub = instance_unbiased_var(x, imean, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy0 = call.cotangents["y"]
            if b == "in_bwd_dy_read_channels_last" and x0.ndim >= 3 and C > 1 and S > 1:
                dy0 = np.moveaxis(np.ascontiguousarray(dy0).reshape((Nb,) + x0.shape[2:] + (C,)), -1, 1)
            dy = dy0.astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_projection_from_dy":
                dx = rstd * (g - _rsum(g) / acc(S) - xhat * (_rsum(dy * xhat) / acc(S)))
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            if self.bug == "gn_float64_via_float32" and call.dtype == "float64":
                return _widened(self._gn25(call, np.float32, self.bug, silu=False))
            return self._gn25(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn25(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn25(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        eps = _eps(call.config["eps"], acc)
        rms = b == "gn_uncentred_rms_flag_default"
        halves = b == "gns_group_halves_not_merged" and cg >= 2 and cg % 2 == 0
        if rms:
            mean = np.zeros((Nb * G, 1), acc)
            rstd = 1 / np.sqrt(_rsum(xv * xv) / n + eps)
        elif b == "gns_spatial_vec4_tail_dropped" and S > 4 and S % 4:
            xt = x.reshape(Nb, G, cg, S)[..., :(S // 4) * 4].reshape(Nb * G, -1)
            mean = _rsum(xt) / n
            rstd = 1 / np.sqrt(_rsum((xt - mean) ** 2) / n + eps)
        elif b == "gns_channel_block_partials_equal_weight" and cg > 4 and cg % 4:
            xc = x.reshape(Nb * G, cg, S)
            ms, m2s = [], []
            for k in range(0, cg, 4):
                blk = xc[:, k:k + 4, :].reshape(Nb * G, -1)
                mk = _rsum(blk) / acc(blk.shape[1])
                ms.append(mk)
                m2s.append(_rsum((blk - mk) ** 2))
            mean = sum(ms) / acc(len(ms))
            m2 = sum(m2s) + acc(4 * S) * sum((mk - mean) ** 2 for mk in ms)
            rstd = 1 / np.sqrt(m2 / n + eps)
        elif halves:
            hv = xv.reshape(Nb * G * 2, n // 2)                # one row per half group
            mh, rh = self._ln_stats(hv, eps)
            mean, rstd = mh, rh
        else:
            mean, rstd = self._ln_stats(xv, eps)
        if halves:
            xr = ((hv - mh) * rh).reshape(Nb * G, n)
            ms_out = mh.reshape(Nb, G, 2)[..., 1]
            rs_out = rh.reshape(Nb, G, 2)[..., 1]
        else:
            xr = (xv - mean) * rstd
            ms_out, rs_out = mean.reshape(Nb, G), rstd.reshape(Nb, G)
        xhat = xr.reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        if b == "gn_bias_dropped_without_weight" and w is None:
            p = affine(xhat, None, None)
        else:
            p = affine(xhat, w, bias)
        hs = b == "gns_activation_hardswish" and silu
        if hs:
            r6 = np.clip(p + 3, 0, 6)
            y = p * r6 / 6
        elif silu:
            sg, rest = _sigmoids(p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, ms_out, rs_out, x0.shape, d, acc)
        if b == "gn_y_store_sample_offset_missing" and Nb > 1:
            yo = np.zeros_like(out["y"])
            yo[0] = out["y"][-1]
            out["y"] = yo
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if hs:
            dact = np.where(p < -3, acc(0), np.where(p > 3, acc(1), (2 * p + 3) / 6))
            dp = dy * dact
        elif silu and b == "gns_silu_grad_sigmoid_for_complement":
            dp = dy * (sg * (1 + p * sg))
        elif silu:
            dp = dy * (sg * (1 + p * rest))
        else:
            dp = dy
        g = dp if w is None else dp * w
        if b == "gn_bwd_ds_from_xhat_in_x_form":
            wc = np.ones(C, acc) if w is None else w.reshape(C)
            ds_nc = _rsum(dp.reshape(Nb * C, S) * xhat.reshape(Nb * C, S)).reshape(Nb, C)
            db_nc = _rsum(dp.reshape(Nb * C, S)).reshape(Nb, C)
            ds_g = (ds_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            db_g = (db_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            mg, rg = mean.reshape(Nb, G), rstd.reshape(Nb, G)
            c2 = (db_g * mg - ds_g) * rg * rg * rg / acc(n)
            c3 = -c2 * mg - db_g * rg / acc(n)

            def per_channel(v):
                return np.repeat(v, cg, axis=1).reshape(Nb, C, 1)
            dx = per_channel(rg) * g + per_channel(c2) * x + per_channel(c3)
            grads = {"x": _store(dx.reshape(x0.shape), d)}
        elif rms:
            gr = g.reshape(Nb * G, n)
            dxr = rstd * (gr - xr * (_rsum(gr * xr) / n))
            grads = {"x": _store(dxr.reshape(x0.shape), d)}
        elif halves:
            dxr = _centred_dx(g.reshape(Nb * G * 2, n // 2), xr.reshape(Nb * G * 2, n // 2), rh)
            grads = {"x": _store(dxr.reshape(x0.shape), d)}
        else:
            dxr = _centred_dx(g.reshape(Nb * G, n), xr, rstd)
            grads = {"x": _store(dxr.reshape(x0.shape), d)}
        for key, t, given in (("weight", dp * xhat, w), ("bias", dp, bias)):
            if given is None:
                continue
            if b == "gn_dparams_sample_loop_from_one" and Nb > 1:
                v = channel_sums(t[1:], C)
            else:
                v = channel_sums(t, C)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs25(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs25(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        m = n - ddof
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((R, 1), np.nan, acc), x
        sdev = dev
        if b == "zs_var_about_first_value_uncorrected" and n:
            sdev = x - x[:, :1]
        a = np.max(np.abs(sdev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = sdev / a
        sumsq = _rsum(q * q)
        if b == "zs_bessel_factor_outside_root" and ddof > 0 and m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(n)), np.sqrt(eps)) * acc(n / m)
        elif m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        mo, so = back(mean, True).astype(acc), back(std, True).astype(acc)
        if b == "zs_stats_row_pointer_not_advanced" and R > 1:
            mo = np.zeros_like(mo).reshape(-1)
            so = np.zeros_like(so).reshape(-1)
            mo[0], so[0] = mean.reshape(-1)[-1], std.reshape(-1)[-1]
            mo, so = mo.reshape(back(mean, True).shape), so.reshape(back(std, True).shape)
        trunc = b == "zs_bf16_outputs_truncated" and d == "bfloat16"

        def put(v):
            return _toward_zero(back(v), np_dtype(d)) if trunc else _store(back(v), d)
        out = {"y": put(y), "mean": mo, "std": so}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                if b == "zs_bwd_row_sums_in_half" and d in _HALF:
                    sg, sgx = _half_row_sums(g, d), _half_row_sums(g * xhat, d)
                else:
                    sg, sgx = _rsum(g), _rsum(g * xhat)
                if b == "zs_bwd_mean_term_of_dy" and w is not None:
                    sg = _rsum(dy)
                inner = g - sg / n - xhat * (sgx / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = put(dx)
            for key, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp25(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp25(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        R = x.shape[0]
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        torch_rule = cfg["zero_rule"] == "torch" or b == "lp_onnx_rule_clamped_by_eps"

        def powsum(v):
            if p == 1.0:
                return _rsum(v)
            if p == 2.0:
                return _rsum(v * v)
            return _rsum(v ** acc(p))
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        total = powsum(np.abs(x) / s)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        scaled = total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv
        norm = s * scaled
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            nb = norm
            if b == "lp_bwd_norm_of_next_row" and R > 1:
                nb = np.roll(norm, -1, axis=0)
            used = ((nb >= eps) if torch_rule else (nb != 0)) | np.isnan(nb)
            safe = np.where(used, nb, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            if b == "lp_bwd_jacobian_not_transposed" and p != 2.0:
                proj = (dy - u * _rsum(dy * wv)) / safe
            else:
                proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = np.where(used, proj, small)
        nout = norm
        if b == "lp_rows_grid_floor_quads" and R > 4 and R % 4:
            done = (R // 4) * 4
            y = y.copy()
            y[done:] = 0
            nout = norm.copy()
            nout[done:] = 0
            if dx is not None:
                dx = dx.copy()
                dx[done:] = 0
        out = {"y": _store(back(y), d), "norm": back(nout, True).astype(acc)}
        return Returned(out, {} if dx is None else {"x": _store(back(dx), d)})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb25(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized25(self, call, cfg, acc, b):
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
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
            if b == "nqb_ln_weight_loaded_from_bias_ptr" and w is not None and bias is not None:
                w = bias
        else:
            if b == "nqb_rms_sumsq_in_half" and call.dtype in _HALF and H:
                ms = _half_row_sums(s * s, call.dtype) / acc(H)
            else:
                ms = _rsum(s * s) / H
            y = s * (1 / np.sqrt(ms + eps))
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb25(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized25(call, cfg, acc, b)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_mx_block_amax_of_prenorm" and fmt == "mxfp8":
            _, amax = padded_blocks(s, B, acc)
        if b == "nqb_amax_loop_bound_inclusive":
            R, nb = amax.shape
            flat = yb.reshape(R * nb, B)
            nxt = np.concatenate([flat[1:, :1], np.zeros((1, 1), acc)], axis=0).reshape(R, nb)
            amax = np.maximum(amax, np.abs(nxt))
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
            if b == "nqb_nvfp4_scale_output_includes_tensor_scale":
                scale_out = np.clip(S, -448.0, 448.0).astype(scale_out.dtype)
            if b == "nqb_nvfp4_clip_before_scale":
                yb = np.clip(yb, -qmax, qmax)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln25(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln25(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "aln_eps_squared":
            eps = eps * eps
        if b == "aln_row_tail_tile_dropped" and H > 16 and H % 16:
            xt = x[:, :(H // 16) * 16]
            mean = _rsum(xt) / H
            rstd = 1 / np.sqrt(_rsum((xt - mean) ** 2) / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if b == "aln_bwd_g_rounded_to_input_dtype" and d in _HALF:
            g = _half(g, d)
        if b == "aln_bwd_projection_of_output":
            dx = rstd * (g - _rsum(g) / H - xhat * (_rsum(g * y) / H))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}

        def to_samples(t):
            if b == "aln_dmod_token_blocks_from_second" and T > 4:
                return t.reshape(B, T, H)[:, 4:, :].sum(axis=1)
            return per_sample(t, B, T, H)
        if scale is not None:
            grads["scale"] = _store(to_samples(dy * xhat), d)
        if shift is not None:
            grads["shift"] = _store(to_samples(dy), d)
        if b == "aln_dscale_dshift_outputs_swapped" and scale is not None and shift is not None:
            grads["scale"], grads["shift"] = grads["shift"], grads["scale"]
        return Returned(out, grads)
