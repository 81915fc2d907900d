"""A fifteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind15Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn15``, ``_in15``, ``_gn15`` for group_norm and
group_norm_silu, ``_zs15``, ``_lp15``, ``_nqb15``, ``_aln15``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind15Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind13.py (the fourteenth set, written at the same time for the other ops, shares none of these ops).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, bn_momentum, bn_running_update,
                          centred_dx as _centred_dx, channel_grads, channel_outputs, channel_params, channel_rows,
                          channel_running_stats, channel_sums, dy_and_g, eps_value as _eps, group_outputs,
                          group_params, group_rows, group_scales, half as _half, instance_momentum_value,
                          instance_outputs, instance_params, instance_running_stats, instance_running_update,
                          instance_unbiased_var, mx_scales, nan_running, norm_outputs, nqb_format, nqb_normalized,
                          nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_sample, pow2,
                          rsum as _rsum, running_in, running_setup, running_state, sigmoids as _sigmoids,
                          store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind15Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_bwd_proj_factor_single_rstd": (
        "batch_norm", "backward",
        "training backward written in the dot / k form (dot = sum(g * (x - mean)), k = dot * invstd^2 / n, dx = "
        "(g - mean(g) - (x - mean) * k) * invstd) with k = dot * invstd / n (one factor invstd instead of its "
        "square): the projection term divided by rstd; dweight and dbias right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5222 (a batch norm backward getting the powers of the saved inverse "
        "std wrong: grad_input carries inv_std cubed)"),
    "bn_saved_invstd_without_eps": (
        "batch_norm", "eps",
        "batch statistics: the saved rstd output computed as 1 / sqrt(var) (a second line from the variance, eps "
        "left out); y, the gradients and the running statistics use 1 / sqrt(var + eps)",
        "pattern: a returned statistic recomputed from the variance by a copy of the formula without eps"),
    "bn_onnx_flag_mean_torch_rule": (
        "batch_norm", "running",
        "convention='onnx', training: running_mean updated with torch's rule (1 - m) * running + m * batch (the "
        "convention flag read in running_var's update line only); running_var right",
        "pattern: a convention flag tested in one of two parallel update lines"),
    "bn_batch_of_one_takes_running": (
        "batch_norm", "mode",
        "training with running statistics and a batch of one sample (x.shape[0] == 1, several spatial positions): "
        "the kernel's single-sample guard sends the call down the inference path, normalizing with the running "
        "statistics (the saved mean and rstd theirs, the backward dx = g * rstd); the running update itself right",
        "cf. " + GH + "pyg-team/pytorch_geometric/pull/5530 (a BatchNorm handling batches of a single element "
        "as in evaluation, with the running statistics)"),
    "bn_bias_dropped_without_weight": (
        "batch_norm", "affine",
        "a bias but no weight: y = x_hat (the bias added inside the has-weight branch of the epilogue); dbias "
        "still reduced",
        "cf. " + GH + "pytorch/pytorch/issues/69208 (a fused norm assuming its two affine inputs come in pairs)"),
    "bn_channel_sums_in_half": (
        "batch_norm", "precision",
        "16-bit inputs, batch statistics: each sample's partial sums over the spatial positions (of x for the "
        "mean, of (x - mean)^2 for the variance) stored in the input dtype before the sum over the batch, forward "
        "and the backward on those statistics",
        "cf. " + GH + "pytorch/executorch/pull/16727 (norm kernels accumulating mean and variance in the input "
        "dtype diverge from ATen for large values)"),
    # ------------------------------------------------------------------ group_norm
    "gn_eps_outside_sqrt": (
        "group_norm", "eps",
        "rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), forward and the backward's formula on that "
        "rstd",
        "cf. " + GH + "codertimo/BERT-pytorch/issues/30 (a norm dividing by std + eps where sqrt(var + eps) "
        "belongs)"),
    "gn_mean_rounded_to_input_dtype": (
        "group_norm", "precision",
        "16-bit inputs: each group's mean stored in the input dtype (rounded) and the deviations, the variance, "
        "x_hat and the saved mean taken about that rounded mean, forward and backward",
        "cf. " + GH + "pytorch/pytorch/issues/77507 (bfloat16 group_norm computing its moments in bfloat16)"),
    "gn_shifted_var_without_correction": (
        "group_norm", "one_pass",
        "the variance accumulated about a shift, the group's first value K (sums of (x - K)^2), and divided by "
        "the count without the correction - (mean - K)^2: var' = E[(x - K)^2]; the mean right; forward and the "
        "backward's formula on that rstd",
        "pattern: the shifted-data variance algorithm with its correction term dropped"),
    "gn_dparams_averaged_over_samples": (
        "group_norm", "reduction",
        "more than one sample: dweight and dbias reduced over the samples' partials as a mean (divided by N) "
        "instead of a sum",
        "cf. " + GH + "apache/mxnet/issues/2427 (a weight gradient averaged over the batch where it is summed)"),
    "gn_bwd_projection_from_dy": (
        "group_norm", "backward",
        "with a weight: dx = rstd * (g - mean(g) - x_hat * mean(dy * x_hat)): the projection's reduction fed the "
        "raw dy instead of g = dy * weight (kept in the other terms); dweight and dbias right",
        "pattern: one of two reductions fed the wrong operand"),
    "gn_sum_shuffle_half_warp": (
        "group_norm", "block",
        "each group's sums reduced by 32-lane warps (elements strided over the lanes) whose butterfly starts at "
        "offset 8 instead of 16: the elements j with j mod 32 >= 16 never enter the sums for the mean and the "
        "variance, still divided by the group's count; forward and the backward from those statistics",
        "cf. " + GH + "vllm-project/vllm-xpu-kernels/pull/521 (a sub-group shuffle reduction over the wrong lane "
        "span)"),
    # ------------------------------------------------------------------ instance_norm
    "in_nbt_incremented_like_batch_norm": (
        "instance_norm", "running",
        "training with running statistics: num_batches_tracked returned incremented by one (the batch norm "
        "training path the kernel reuses counts the call); the running mean and var right",
        "pattern: instance norm routed through batch norm's training code and its counter update"),
    "in_train_normalizes_with_running": (
        "instance_norm", "mode",
        "training with running statistics: use_input_stats taken as `not track_running_stats`, so the call "
        "normalizes every instance with the running statistics (the saved mean and rstd theirs, dx = g * rstd); "
        "the running update (its own reduction) right",
        GH + "openvinotoolkit/openvino/pull/37978 (instance_norm used the running statistics where "
        "use_input_stats asked for the per-instance ones)"),
    "in_dweight_sample_partials_in_half": (
        "instance_norm", "precision",
        "16-bit inputs: dweight and dbias reduced from the per-instance partial sums accumulated over the samples "
        "left to right in the input dtype",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm backward whose weight-gradient reduction ran in "
        "bfloat16)"),
    "in_bwd_rstd_outside_projection": (
        "instance_norm", "backward",
        "instance statistics: dx = rstd * (g - mean(g)) - x_hat * mean(g * x_hat), the closing parenthesis "
        "misplaced so the projection term is not multiplied by rstd; dweight and dbias right",
        "pattern: a misplaced parenthesis in a hand-written backward"),
    "in_stats_over_pow2_tile": (
        "instance_norm", "block",
        "instance statistics, S not a power of two: each instance loaded into a zero-padded tile of P = pow2(S) "
        "lanes and every lane counted: mean = sum / P, variance over the P lanes (the padded ones deviating by "
        "-mean) divided by P; forward and the backward's formula on those statistics",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/518 (the padded lanes of a power-of-two block entering a norm's "
        "statistics)"),
    # ------------------------------------------------------------------ z_score
    "zs_row_tail_tile_dropped": (
        "z_score", "block",
        "slices of more than 256 values, not a multiple of 256: the row reductions (the mean, its re-centring "
        "pass, the scale max and the sum of squares) loop over whole tiles of 256 only (loop bound n // 256), "
        "still dividing by n and n - ddof; forward and the backward on those statistics",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel ignoring the columns beyond its "
        "block)"),
    "zs_dbias_times_weight": (
        "z_score", "backward",
        "with a weight and a bias: dbias = sum over the rows of dy * weight (the weighted g the dx pass forms) "
        "instead of dy",
        "pattern: the weighted gradient g reused for the bias reduction"),
    "zs_std_output_is_rstd": (
        "z_score", None,
        "the returned std is 1 / std (the multiplier the kernel keeps); y and the gradients right",
        "pattern: the saved reciprocal statistic stored in the output slot of the statistic"),
    "zs_weight_read_column_major": (
        "z_score", "layout",
        "dim a tuple of several axes: weight and bias (shaped like those axes) read with their strides reversed "
        "(element k of the flattened slice takes the parameter's column-major element k), forward and backward; "
        "their gradients written back the same way",
        "pattern: a multi-axis parameter indexed with reversed strides"),
    "zs_zero_eps_falls_back_to_default": (
        "z_score", "eps",
        "eps = 0 given: the option read as `eps or 1e-5`, so an explicit 0 becomes 1e-5, forward and backward",
        "cf. " + GH + "andymai/stackchan-kai/pull/541 (a parameter of 0 replaced by its default through a falsy "
        "`or` fallback)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_bwd_sum_over_last_axis_of_dims": (
        "lp_normalize", "group",
        "dim a tuple of several axes: the backward's projection sum(dy * u) taken over the last of them only "
        "(each run of the last axis its own sum); the forward right",
        "pattern: a backward reduction launched over the innermost axis where the forward flattened several"),
    "lp_p_truncated_to_int": (
        "lp_normalize", "semantics",
        "p converted to an integer (the kernel's template parameter): p = 0.5 becomes 0, the norm (sum |x|^0)^(1/0) "
        "infinite and y zero, forward and backward; integer p right",
        "cf. " + GH + "unifyai/ivy/pull/10317 (an lp_normalize whose p was changed from float to int, breaking "
        "p < 1)"),
    "lp_dim_none_whole_tensor": (
        "lp_normalize", "reduction",
        "the dim option not forwarded (None, torch.norm's default): the norm taken over the whole tensor, every "
        "slice divided by it, the one norm written to every slice's slot; forward and backward",
        "pattern: a reduction axis argument dropped, the whole-tensor default taken"),
    "lp_channels_last_read_as_nchw": (
        "lp_normalize", "layout",
        "dim=1 on inputs of three or more axes: the kernel reads the NCHW-contiguous buffers as channels-last "
        "(each sample's memory as (spatial, channel)) and normalizes along the last memory axis; y, the norm and "
        "dx written back in that reading",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (a normalization kernel giving wrong results when its input's "
        "memory layout is not the one it indexes with)"),
    "lp_norm_output_in_input_dtype": (
        "lp_normalize", "precision",
        "16-bit inputs: the norms buffer between the reduction and the scaling launches allocated in the input "
        "dtype: the norm rounded to it, and y and dx computed with the rounded norm",
        "cf. " + GH + "flagos-ai/FlagGems/pull/4237 (renorm's norms buffer allocated in the input dtype, "
        "truncating the float32 norms between its two kernel launches)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_sigmoid_exponent_sign": (
        "group_norm_silu", None,
        "the sigmoid written 1 / (1 + exp(p)) (the minus sign of the exponent lost): y = p * sigmoid(-p), forward "
        "and the backward's derivative of that function",
        "cf. " + GH + "sausheong/gonn/issues/8 (a sign slip in a hand-written sigmoid formula)"),
    "gns_eps_added_to_sum_of_squares": (
        "group_norm_silu", "eps",
        "rstd = 1 / sqrt((sum (x - mean)^2 + eps) / n): eps added to the group's sum of squares before the "
        "division by the count instead of to the variance, forward and backward",
        "pattern: eps added one line too early"),
    "gns_bwd_proj_over_n_minus_1": (
        "group_norm_silu", "bessel",
        "the backward's projection mean(g * x_hat) divides its sum by n - 1 (the group's count minus one) instead "
        "of n; mean(g) right",
        "pattern: an unbiased-variance count carried into the backward's projection"),
    "gns_dweight_mean_over_spatial": (
        "group_norm_silu", "reduction",
        "dweight and dbias: each channel's sum over the spatial positions divided by their count (a mean) before "
        "the sum over the samples",
        "pattern: a mean taken where the gradient's sum belongs"),
    "gns_bias_loaded_from_weight_ptr": (
        "group_norm_silu", "layout",
        "with a weight and a bias: the bias loaded from the weight's pointer (p = x_hat * w + w), forward and "
        "backward (dbias reduced as usual)",
        "pattern: two pointer arguments of the same shape passed in each other's slot"),
    "gns_silu_grad_sigmoid_only": (
        "group_norm_silu", "backward",
        "the SiLU's derivative taken as sigmoid(p) (the product rule's p * sigmoid'(p) term dropped): dp = dy * "
        "sigmoid(p), dx, dweight and dbias from it",
        "cf. " + GH + "ooples/AiDotNet.Tensors/pull/185 (a fused norm + activation backward with the "
        "activation's derivative simplified away)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_clamped_at_fnuz_240": (
        "norm_quant_block", "saturation",
        "mxfp8 with float8_e4m3fn elements: y / scale clamped to +-240 (the e4m3fnuz largest value of another "
        "platform's build) before the conversion instead of +-448; the scales right",
        "cf. " + GH + "vllm-project/vllm/pull/50467 (FP8 e4m3fn platforms' quantization kernels using the e4m3fnuz "
        "maximum 240 instead of 448)"),
    "nqb_nvfp4_block_scale_rounded_up": (
        "norm_quant_block", "scale_rounding",
        "nvfp4: each block scale amax / 6 * encode converted to float8_e4m3fn rounding up (the next E4M3 value "
        "above when inexact) instead of to nearest even; q divided by the rounded-up scales",
        "cf. " + GH + "triton-lang/triton/pull/11668 (NVFP4 E4M3 block scales: the kernels' round-up modes, and "
        "round to nearest added as its own mode)"),
    "nqb_mx_amax_of_even_lanes": (
        "norm_quant_block", "block",
        "mxfp8: each block loaded as pairs of values (a two-element vector load) and the amax reduced over the "
        "first component of each pair only: the odd positions of a block never enter its amax (scale and q from "
        "it)",
        "pattern: a vectorized load whose second component is left out of the reduction"),
    "nqb_mx_scales_row_stride_padded_to_4": (
        "norm_quant_block", "layout",
        "mxfp8, more than one row and a block count per row not a multiple of 4: the scales written with the row "
        "stride round_up(blocks, 4) (the GEMM's padded scale layout) into the packed (rows, blocks) output, so "
        "row r's scales land r * (stride - blocks) entries late and the last ones are lost; q right",
        "cf. " + GH + "ROCm/aiter/pull/2900 (a quantization kernel writing its scale buffer with the valid column "
        "count as row stride while the reader uses the padded one)"),
    "nqb_y_stored_in_input_dtype": (
        "norm_quant_block", "precision",
        "16-bit inputs: the normalized, weighted y rounded to the input dtype (the norm's output written out) "
        "before the blocks' amax, scales and quotients",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/1132 (a norm's output cast to the 16-bit dtype before the "
        "next step in one implementation and not in the other)"),
    "nqb_rms_weight_offset_applied": (
        "norm_quant_block", "affine",
        "norm='rms_norm' with a weight: the weight applied as (1 + weight) (the Gemma zero-centred path's flag "
        "left set), then quantized",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/74 (a norm kernel's weight offset convention applied to the "
        "wrong model)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_var_pad_lanes_counted": (
        "adaptive_layer_norm", "block",
        "H not a power of two: the row loaded into a power-of-two tile with zero padding and the deviations x - "
        "mean not masked, so each padded lane adds mean^2 to the sum of squares (still divided by H); forward "
        "and the backward's formula on that rstd",
        "cf. " + GH + "triton-lang/triton/issues/9838 (a Triton layer-norm kernel whose variance counts the "
        "zero-padded lanes as -mean)"),
    "aln_saved_stats_in_input_dtype": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: the mean and rstd saved for the backward in buffers of the input dtype (rounded), "
        "returned so, and the backward's x_hat, dx, dscale from them; the forward's y right",
        "pattern: saved-statistics buffers allocated like the input"),
    "aln_rstd_output_is_std": (
        "adaptive_layer_norm", None,
        "the returned rstd is sqrt(var + eps) (the std, before the reciprocal); y and the gradients right",
        "cf. " + GH + "131250208/TPlinker-joint-extraction/issues/37 (a norm's std and its power confused in "
        "the statistic a layer keeps)"),
    "aln_bwd_stats_of_first_token": (
        "adaptive_layer_norm", "layout",
        "more than one token a sample: the backward loads the saved mean and rstd at the sample's offset (the "
        "token index left out): every token's x_hat and dx from its sample's first token's statistics, dscale "
        "too; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward loading the statistics at the wrong "
        "index: every channel read group 0's)"),
    "aln_dshift_accumulated_twice": (
        "adaptive_layer_norm", "reduction",
        "dshift's per-sample partials added into an output the first pass already filled (the final reduction's "
        "store written +=): dshift twice its value; dscale right",
        "cf. " + GH + "karpathy/llm.c/pull/163 (a bias-gradient kernel's store switched between = and +=)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


def _e4m3_round_up(v):
    """v (> 0, at most 448) converted to float8_e4m3fn rounding up in magnitude (the nearest-even result stepped
    one up where it rounded down)."""
    q = np.clip(v, -448.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
    down = (np.abs(q.astype(v.dtype)) < np.abs(v)) & (np.abs(v) < 448.0)
    bits = q.view(np.uint8).copy()
    bits[down] += 1                                      # the magnitude bits count up monotonically
    return bits.view(ml_dtypes.float8_e4m3fn)


class Blind15Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind15"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn15(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn15(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        if b == "bn_batch_of_one_takes_running" and call.training and has_run and x0.shape[0] == 1:
            batch = False                                        # the single-sample guard: inference path
        bmean = None
        if call.training or not has_run:
            if b == "bn_channel_sums_in_half" and d in _HALF and n:
                x3 = x.reshape(C, x0.shape[0], -1)
                bmean = _half(x3.sum(axis=2), d).sum(axis=1, keepdims=True) / n
                dev = x3 - bmean[:, :, None]
                var = _half((dev * dev).sum(axis=2), d).sum(axis=1, keepdims=True) / n
                brstd = 1 / np.sqrt(var + eps)
            else:
                bmean, brstd = self._ln_stats(x, eps)
        if batch:
            mean, rstd = bmean, brstd
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
                old_rm = rm
                rm, rv = bn_running_update(rm, rv, m, x, bmean, cfg["convention"], acc)
                if b == "bn_onnx_flag_mean_torch_rule" and cfg["convention"] != "torch" and n > 0:
                    rm = (1 - m) * old_rm + m * bmean.reshape(C)
            state = running_state(rm, rv, nbt, d)
        if b == "bn_bias_dropped_without_weight" and w is None and bias is not None:
            out = channel_outputs(xhat, None, None, mean, rstd, x0.shape, d, acc)
        else:
            out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        if b == "bn_saved_invstd_without_eps" and batch and n:
            var = _rsum((x - mean) ** 2) / n
            out["rstd"] = (1 / np.sqrt(var)).reshape(C).astype(acc)
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            if batch and b == "bn_bwd_proj_factor_single_rstd" and n:
                dev = x - mean
                k = _rsum(g * dev) * rstd / n
                dx = (g - _rsum(g) / n - dev * k) * rstd
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = channel_grads(dx, dy, xhat, w, bias, x0.shape, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in15(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in15(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        inst = call.training or not has_run
        if b == "in_train_normalizes_with_running" and call.training and has_run:
            inst = False
        imean = irstd = None
        if call.training or not has_run:
            if b == "in_stats_over_pow2_tile" and pow2(S) != S and S:
                P = pow2(S)
                imean = _rsum(x) / P
                dev = x - imean
                irstd = 1 / np.sqrt((_rsum(dev * dev) + (P - S) * imean * imean) / P + eps)
            else:
                imean, irstd = self._ln_stats(x, eps)
        if inst:
            mean, rstd = imean, irstd
        else:
            mean, rstd = instance_running_stats(st, Nb, eps, acc)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                m = instance_momentum_value(cfg, acc)
                ub = instance_unbiased_var(x, imean, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            if b == "in_nbt_incremented_like_batch_norm" and call.training:
                nbt = nbt + 1
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            if inst and b == "in_bwd_rstd_outside_projection" and S:
                dx = rstd * (g - _rsum(g) / S) - xhat * (_rsum(g * xhat) / S)
            elif inst:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for k, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
                if given is None:
                    continue
                part = _rsum(t).reshape(Nb, C)
                if b == "in_dweight_sample_partials_in_half" and d in _HALF and Nb:
                    grads[k] = _store(_half_row_sums(np.ascontiguousarray(part.T), d).reshape(C), d)
                else:
                    grads[k] = _store(part.sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn15(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn15(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn15(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        eps = _eps(call.config["eps"], acc)
        if b == "gn_mean_rounded_to_input_dtype" and d in _HALF:
            mean = _half(_rsum(xv) / n, d)
            dev = xv - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / n + eps)
        elif b == "gn_shifted_var_without_correction":
            mean = _rsum(xv) / n
            dev = xv - xv[:, :1]
            rstd = 1 / np.sqrt(_rsum(dev * dev) / n + eps)
        elif b == "gn_sum_shuffle_half_warp" and n > 16:
            lanes = (np.arange(n) % 32 < 16)[None, :]
            mean = _rsum(np.where(lanes, xv, acc(0))) / n
            dev = np.where(lanes, xv - mean, acc(0))
            rstd = 1 / np.sqrt(_rsum(dev * dev) / n + eps)
        elif b in ("gn_eps_outside_sqrt", "gns_eps_added_to_sum_of_squares"):
            mean = _rsum(xv) / n
            dev = xv - mean
            ss = _rsum(dev * dev)
            rstd = 1 / (np.sqrt(ss / n) + eps) if b == "gn_eps_outside_sqrt" else 1 / np.sqrt((ss + eps) / n)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        pb = bias
        if b == "gns_bias_loaded_from_weight_ptr" and w is not None and bias is not None:
            pb = w
        p = affine(xhat, w, pb)
        if silu:
            sg, rest = _sigmoids(-p if b == "gns_sigmoid_exponent_sign" else p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if not silu:
            dp = dy
        elif b == "gns_sigmoid_exponent_sign":
            dp = dy * (sg * (1 - p * rest))
        elif b == "gns_silu_grad_sigmoid_only":
            dp = dy * sg
        else:
            dp = dy * (sg * (1 + p * rest))
        g = dp if w is None else dp * w
        gr, xr = g.reshape(xv.shape), xhat.reshape(xv.shape)
        if b == "gn_bwd_projection_from_dy" and w is not None:
            dx = rstd * (gr - _rsum(gr) / n - xr * (_rsum(dy.reshape(xv.shape) * xr) / n))
        elif b == "gns_bwd_proj_over_n_minus_1" and n > 1:
            dx = rstd * (gr - _rsum(gr) / n - xr * (_rsum(gr * xr) / (n - 1)))
        else:
            dx = _centred_dx(gr, xr, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        for k, t, given in (("weight", dp * xhat, w), ("bias", dp, bias)):
            if given is None:
                continue
            if b == "gn_dparams_averaged_over_samples" and Nb > 1:
                grads[k] = _store(channel_sums(t, C) / acc(Nb), d)
            elif b == "gns_dweight_mean_over_spatial" and S > 1:
                grads[k] = _store(channel_sums(t / acc(S), C), d)
            else:
                grads[k] = _store(channel_sums(t, C), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs15(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs15(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        ddof = int(cfg["ddof"])
        eps = acc((cfg["eps"] or 1e-5) if b == "zs_zero_eps_falls_back_to_default" else cfg["eps"])
        m = n - ddof
        cols = (n // 256) * 256 if (b == "zs_row_tail_tile_dropped" and n > 256 and n % 256) else n
        multi = isinstance(cfg["dim"], (list, tuple)) and len(cfg["dim"]) > 1
        params = {}
        for k in ("weight", "bias"):
            v = inp.get(k)
            if v is None:
                params[k] = None
            elif b == "zs_weight_read_column_major" and multi and v.ndim > 1:
                params[k] = v.astype(acc).ravel(order="F").reshape(1, n)
            else:
                params[k] = v.astype(acc).reshape(1, n)
        w, bias = params["weight"], params["bias"]
        if n:
            mean = _rsum(x[:, :cols]) / n
            dev = x - mean
            c = _rsum(dev[:, :cols]) / n                         # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((x.shape[0], 1), np.nan, acc), x
        a = np.max(np.abs(dev[:, :cols]), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        if m > 0:
            std = np.hypot(a * np.sqrt(_rsum((q * q)[:, :cols]) / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        std_out = 1 / std if b == "zs_std_output_is_rstd" else std
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std_out, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / acc(m))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is None:
                    continue
                if k == "bias" and b == "zs_dbias_times_weight" and w is not None:
                    t = g
                s = t.sum(axis=0)
                if b == "zs_weight_read_column_major" and multi and inp[k].ndim > 1:
                    grads[k] = _store(s.reshape(inp[k].shape, order="F"), d)
                else:
                    grads[k] = _store(s.reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp15(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp15(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        if b == "lp_channels_last_read_as_nchw" and x0.ndim >= 3 and not isinstance(dims, (list, tuple)) \
                and dims % x0.ndim == 1:
            cl = (x0.shape[0],) + x0.shape[2:] + (x0.shape[1],)   # the memory read as (N, *spatial, C)
            y, norm, dx = self._lp_core(x0.reshape(cl), None if dy0 is None else dy0.reshape(cl), -1, cfg, d, acc,
                                        b)
            nshape = (x0.shape[0], 1) + x0.shape[2:]
            out = {"y": y.reshape(x0.shape), "norm": np.ascontiguousarray(norm).reshape(nshape)}
            return Returned(out, {} if dx is None else {"x": dx.reshape(x0.shape)})
        if b == "lp_dim_none_whole_tensor" and x0.ndim:
            _, _, back = _axes_rows(x0, dims)
            y, norm, dx = self._lp_core(x0.reshape(1, -1), None if dy0 is None else dy0.reshape(1, -1), -1, cfg, d,
                                        acc, b)
            rows = x0.size // max(1, _axes_rows(x0, dims)[1])
            nrm = back(np.full((rows, 1), norm.reshape(()), acc), True)
            out = {"y": y.reshape(x0.shape), "norm": np.ascontiguousarray(nrm)}
            return Returned(out, {} if dx is None else {"x": dx.reshape(x0.shape)})
        y, norm, dx = self._lp_core(x0, dy0, dims, cfg, d, acc, b)
        return Returned({"y": y, "norm": norm}, {} if dx is None else {"x": dx})

    def _lp_core(self, x0, dy0, dims, cfg, d, acc, b):
        """lp_normalize of x0 over ``dims``: (y rounded to d, the norm in keepdims shape, dx or None)."""
        x, n, back = _axes_rows(x0.astype(acc), dims)
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        if b == "lp_p_truncated_to_int":
            p = float(int(p))
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        q = np.abs(x) / s
        if p == 1.0:
            total = _rsum(q)
        elif p == 2.0:
            total = _rsum(q * q)
        else:
            total = _rsum(q ** acc(p))
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        norm = s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)
        if b == "lp_norm_output_in_input_dtype" and d in _HALF:
            norm = _half(norm, d)
        if torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        dx = None
        if dy0 is not None:
            dy, _, _ = _axes_rows(dy0.astype(acc), dims)
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            t = dy * u
            if b == "lp_bwd_sum_over_last_axis_of_dims" and isinstance(dims, (list, tuple)) and len(dims) > 1:
                L = x0.shape[max(a % x0.ndim for a in dims)]
                proj_sum = np.repeat(t.reshape(t.shape[0], -1, L).sum(axis=2), L, axis=1)
            else:
                proj_sum = _rsum(t)
            proj = (dy - wv * proj_sum) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = _store(back(np.where(used, proj, small)), d)
        return _store(back(y), d), back(norm, True).astype(acc), dx

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb15(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb15(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        if b == "nqb_rms_weight_offset_applied" and cfg["norm"] != "layer_norm" and inp.get("weight") is not None:
            inp = {**inp, "weight": inp["weight"].astype(acc) + acc(1)}
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        if b == "nqb_y_stored_in_input_dtype" and d in _HALF:
            y = _half(y, d)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_mx_amax_of_even_lanes" and fmt == "mxfp8":
            amax = np.max(np.abs(yb[..., ::2]), axis=-1, initial=0.0)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
            if b == "nqb_nvfp4_block_scale_rounded_up":
                scale_out = _e4m3_round_up(amax / acc(6.0) * enc)
                S = scale_out.astype(acc) * ts
        clip = qmax
        if b == "nqb_mx_clamped_at_fnuz_240" and fmt == "mxfp8" and qmax == 448.0:
            clip = 240.0
        r = nqb_quantized(yb, S, clip, qdt, scale_out, amax, ts, call, s, acc)
        out = dict(r.outputs)
        R, nb = amax.shape
        if b == "nqb_mx_scales_row_stride_padded_to_4" and fmt == "mxfp8" and R > 1 and nb % 4:
            sc = out["scale"]
            stride = -(-nb // 4) * 4
            flat = np.zeros(R * nb, sc.dtype)
            src = sc.reshape(R, nb)
            for r in range(R):
                lo = r * stride
                k = max(0, min(nb, R * nb - lo))
                flat[lo:lo + k] = src[r, :k]
            out["scale"] = flat.reshape(sc.shape)
        return Returned(out)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln15(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln15(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "aln_var_pad_lanes_counted" and pow2(H) != H and x.size:
            mean = _rsum(x) / H
            dev = x - mean
            rstd = 1 / np.sqrt((_rsum(dev * dev) + (pow2(H) - H) * mean * mean) / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        ms, rs = mean, rstd
        if b == "aln_saved_stats_in_input_dtype" and d in _HALF:
            ms, rs = _half(mean, d), _half(rstd, d)
        rs_out = 1 / rs if b == "aln_rstd_output_is_std" else rs
        out = norm_outputs(y, ms, rs_out, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        mb, rb = ms, rs
        if b == "aln_bwd_stats_of_first_token" and T > 1:
            first = (np.arange(x.shape[0]) // T) * T
            mb, rb = mean[first], rstd[first]
        xh = xhat if (mb is mean and rb is rstd) else (x - mb) * rb
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        grads = {"x": _store(_centred_dx(g, xh, rb).reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xh, B, T, H), d)
        if shift is not None:
            ds = per_sample(dy, B, T, H)
            if b == "aln_dshift_accumulated_twice":
                ds = ds + ds
            grads["shift"] = _store(ds, d)
        return Returned(out, grads)
