"""A thirteenth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind13Kernel(None)`` is a correct NumPy kernel for seven ops (norm_quant, gated_norm, dyt, group_norm_silu,
norm_quant_block, adaptive_layer_norm, poly_norm) written the way a fused float32 GPU kernel computes them:
inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one
rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its correct
arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_nq13``, ``_nqb13``, ``_gated13``, ``_gns13``,
``_dyt13``, ``_aln13``, ``_poly13``, each the correct kernel's arithmetic step for step when no bug of its
op is set) with the one mistake in place.

``Blind13Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind11.py (the twelfth set, written at the same time for the other ops, shares none of these ops).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (affine, aln_inputs, aln_modulation, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx,
                          gated_dx_dz, gated_grads, gated_inputs, group_outputs, group_param_grads,
                          group_params, group_rows, half as _half, ln_stats, mx_scales, norm_outputs,
                          nqb_format, nqb_quantized, norm_quant_returned, normalized_rows, nvfp4_encode,
                          nvfp4_scales, padded_blocks, per_sample, poly_combine, poly_grads, poly_inputs,
                          poly_normalize, pow2, pow2_scale, QUANT as _QUANT, group_scales, quant_quotients,
                          quantize, rms_dx, row_affine, rsum as _rsum, sigmoids as _sigmoids, silu_gate,
                          static_scale, store as _store)
from .blind3 import LABELS
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("norm_quant", "gated_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm",
       "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind13Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_shuffle_from_offset_8": (
        "norm_quant", "block",
        "dynamic or static: the row's amax reduced with a warp butterfly whose first shuffle offset is 8 instead "
        "of 16 (columns strided over 32 lanes), so lane 0 ends with the maximum of lanes 0-15 only: the columns j "
        "with j mod 32 >= 16 never enter amax (the returned amax, and the dynamic scale and q from it)",
        "cf. " + GH + "vllm-project/vllm-xpu-kernels/pull/521 (a group absmax reduced with a sub-group XOR "
        "shuffle over the wrong lane span, giving wrong scales)"),
    "nq_weight_read_at_tile_column": (
        "norm_quant", "layout",
        "with a weight, N > 128: the weight loaded at the column's index within its 128-wide tile (j mod 128) "
        "instead of j (the tile offset added to x's pointer only), then quantized",
        "pattern: a per-tile column offset applied to the activation pointer and not to the parameter's"),
    "nq_rstd_in_input_dtype": (
        "norm_quant", "precision",
        "16-bit inputs: the row's rstd computed and held in the input dtype (rounded to it) before y = x_hat * "
        "weight (+ bias) is formed in float32 and quantized",
        "pattern: a statistic's register declared with the activation's scalar type"),
    "nq_ln_eps_added_to_std": (
        "norm_quant", "eps",
        "norm='layer_norm': rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), then quantized",
        "cf. " + GH + "codertimo/BERT-pytorch/issues/30 (a LayerNorm dividing by std + eps where nn.LayerNorm "
        "takes sqrt(var + eps))"),
    "nq_zero_min_scale_read_as_unset": (
        "norm_quant", "quant_scale",
        "dynamic scale with min_scale = 0 given: the option tested for truth (`min_scale or default`), so the "
        "explicit 0 falls back to the default floor 1 / (qmax * 512)",
        "cf. " + GH + "andymai/stackchan-kai/pull/541 (a quantization parameter of 0 replaced by the default "
        "through a falsy `or` fallback)"),
    "nq_ln_flag_compared_to_wrong_name": (
        "norm_quant", "semantics",
        "norm='layer_norm' dispatched to the RMS path (the flag compared with another spelling of the name): the "
        "row neither centred nor divided by its standard deviation but by its root mean square, then quantized",
        "pattern: a string flag compared with a misspelt constant, the else-branch taken silently"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_residual_out_fp32_flag_dropped": (
        "norm_quant_block", "precision",
        "residual_in_fp32 with 16-bit inputs and a residual: the sum x + residual stored to residual_out rounded "
        "to the input dtype (the flag not forwarded to the store); the normalization uses the float32 sum",
        "cf. " + GH + "ROCm/aiter/issues/5151 (a fused add + rmsnorm kernel storing residual_out with the wrong "
        "conversion)"),
    "nqb_nvfp4_tensor_amax_of_input": (
        "norm_quant_block", "quant_scale",
        "nvfp4 without a global_scale: the tensor amax behind the encode factor 2688 / amax taken over |x + "
        "residual| (the pre-norm sum the kernel already holds) instead of over the normalized y",
        "cf. " + GH + "NVIDIA/Model-Optimizer/issues/193 (block scales derived from the wrong amax)"),
    "nqb_mx_exponent_clamped_at_zero": (
        "norm_quant_block", "quant_scale",
        "mxfp8: the scale's unbiased exponent clamped at 0 (the E8M0 byte's lower bound applied before the "
        "bias 127 is added): every block whose scale would be below 1 gets scale 1, and q = y unscaled",
        "pattern: a biased-exponent clamp applied to the unbiased exponent"),
    "nqb_group_grid_floor_blocks": (
        "norm_quant_block", "block",
        "fp8_group, H not a multiple of the block size: the grid launched with H // block_size programs per row, "
        "so the partial last block is never processed: its scale and amax stay 0 and its q 0",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton layer norm kernel ignoring the columns "
        "beyond its block)"),
    "nqb_pow2_scale_rounded_to_nearest": (
        "norm_quant_block", "scale_rounding",
        "fp8_group scale_rule='pow2': the scale 2^round(log2(amax / qmax)) (the exponent rounded to nearest) "
        "instead of the smallest power of two >= amax / qmax, so about half the blocks saturate",
        GH + "Pushkinist/rMLX/issues/463 (an mxfp8 encoder rounding the E8M0 exponent to nearest instead of up: "
        "46.7% of the groups clip)"),
    "nqb_mx_e5m2_clamped_at_448": (
        "norm_quant_block", "saturation",
        "mxfp8 with float8_e5m2 elements: y / scale clamped to +-448 (e4m3's largest value, hard-coded) before "
        "the conversion instead of +-57344; the scales right",
        "cf. " + GH + "flashinfer-ai/flashinfer/issues/4053 (an RMSNorm quantization kernel clipping E5M2 output "
        "to the E4M3 range)"),
    "nqb_ln_bias_before_weight": (
        "norm_quant_block", "affine",
        "norm='layer_norm' with a weight and a bias: y = (x_hat + bias) * weight instead of x_hat * weight + "
        "bias, then quantized",
        "pattern: an epilogue's fused multiply-add written with its operands in the wrong order"),
    "nqb_scale_amax_outputs_swapped": (
        "norm_quant_block", None,
        "fp8_group: the scale and amax output pointers passed in each other's slot: the scale output holds each "
        "block's amax and the amax output its scale; q right",
        "pattern: two output pointers of the same type swapped at the launch"),
    # ------------------------------------------------------------------ gated_norm
    "gated_pad_lanes_read_next_group": (
        "gated_norm", "block",
        "norm='rms_norm', group_size not a power of two: each group's values loaded into a power-of-two tile with "
        "the mask comparing against the tile width instead of group_size, so the padded lanes read the next "
        "group's first values (zero past the end) into the sum of squares, still divided by group_size; forward "
        "and the backward from that rstd",
        "pattern: a load mask `offs < BLOCK` where `offs < group_size` belongs"),
    "gated_rms_group_divided_by_hidden": (
        "gated_norm", "group",
        "norm='rms_norm' with group_size < H: each group's sum of squares divided by H (the ungrouped kernel's "
        "row length) instead of group_size, forward and backward",
        "cf. " + GH + "state-spaces/mamba/pull/547 (a gated norm kernel where group_size was not carried into "
        "one of its reductions)"),
    "gated_bwd_rstd_recomputed_without_eps": (
        "gated_norm", "eps",
        "the backward recomputes rstd from v without eps (1 / sqrt(var) or 1 / sqrt(mean(v^2))) and x_hat from "
        "it: dx, dz, dweight from those; the forward right",
        "pattern: a statistic recomputed in the backward from a copy of the formula that lost a term"),
    "gated_dz_from_gated_input": (
        "gated_norm", "gate",
        "norm_before_gate=False: dz = dv * (x * silu(z)) * silu'(z) (the gated input v that was normalized) "
        "instead of dv * x * silu'(z)",
        "pattern: the saved tensor v reused where the raw input x belongs"),
    "gated_dz_from_gated_output": (
        "gated_norm", "gate",
        "norm_before_gate=True: dz = dy * y * silu'(z) (the gated output n * silu(z)) instead of dy * n * "
        "silu'(z)",
        "pattern: the kernel's output recomputed where the pre-gate value belongs"),
    "gated_dweight_rows_in_half": (
        "gated_norm", "precision",
        "16-bit inputs: dweight's sum over the rows of dn * x_hat accumulated left to right in the input dtype",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (an RMSNorm backward whose dW reduction ran in bfloat16)"),
    "gated_bwd_stats_read_row_major": (
        "gated_norm", "layout",
        "group_size < H: the forward stores mean and rstd group-major (group * rows + row, as the grouped kernel "
        "lays them out) and the backward reads them row-major (row * groups + group): dx, dz and dweight from "
        "another group's statistics",
        "pattern: a saved-statistics buffer written and read with different index orders"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_var_merge_without_mean_spread": (
        "group_norm_silu", "one_pass",
        "each group's variance taken as the average of its channels' own variances (each about its channel "
        "mean), the spread of the channel means left out of the merge; the group mean right; forward and the "
        "backward's formula on that rstd",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (a group norm's partial statistics merged by the law of "
        "total variance: average of partial variances plus the variance of the partial means)"),
    "gns_eps_fixed_1e-6": (
        "group_norm_silu", "eps",
        "the configured eps ignored: 1e-6 hard-coded (the diffusers ResnetBlock's GroupNorm eps), forward and "
        "backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/8818 (a group_norm kernel whose eps was a constant until it was "
        "made a parameter)"),
    "gns_dparams_last_sample_wins": (
        "group_norm_silu", "reduction",
        "more than one sample: each sample's program stores its partial dweight and dbias instead of adding it, "
        "so the last sample's partial is returned",
        "cf. " + GH + "kvark/meganeura/pull/56 (a GroupNorm weight-gradient race between programs)"),
    "gns_bwd_mean_term_dropped": (
        "group_norm_silu", "backward",
        "dx = rstd * (g - x_hat * mean(g * x_hat)) per group: the - mean(g) term of the centred backward left out "
        "(dweight and dbias right)",
        "pattern: an RMSNorm backward template reused for a centred norm"),
    "gns_xhat_rounded_before_affine": (
        "group_norm_silu", "precision",
        "16-bit inputs: x_hat stored in the input dtype (the normalized tensor written out) and the affine and "
        "SiLU applied to that; the backward from the rounded x_hat",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/1132 (a norm's output cast to bfloat16 before the "
        "weight multiply in one implementation and after it in the other)"),
    "gns_stats_stored_group_major": (
        "group_norm_silu", "layout",
        "more than one sample and group: the mean and rstd outputs written at group * N + sample into the (N, G) "
        "buffer (group-major); y and the gradients right",
        "pattern: a (sample, group) program grid whose store index swaps the two"),
    # ------------------------------------------------------------------ dyt
    "dyt_dparams_tail_row_block_dropped": (
        "dyt", "reduction",
        "more than 32 rows, not a multiple of 32: dweight and dbias reduced over blocks of 32 rows with the "
        "partial last block skipped (the loop bound rows // 32)",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel wrong once a program covers more than "
        "one row)"),
    "dyt_float64_computed_in_float32": (
        "dyt", "precision",
        "float64 inputs: tanh, the affine and the backward computed in float32 (the kernel instantiated for "
        "float32 only, its results widened to float64)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/49600 (a norm op on wider inputs computed in a narrower "
        "format internally)"),
    "dyt_alpha_loaded_from_weight": (
        "dyt", "layout",
        "with a weight: alpha loaded from the weight's pointer (weight[0]) instead of alpha's, forward and "
        "backward (alpha's gradient for the value used)",
        "pattern: two pointer arguments passed in each other's slot"),
    "dyt_bwd_alpha_initial_value": (
        "dyt", "backward",
        "the backward uses alpha's initial value 0.5 (stored at construction) instead of the current alpha, in "
        "tanh'(alpha x), dx's chain factor and dalpha; the forward right",
        "pattern: a module attribute captured at init read in the backward instead of the parameter"),
    "dyt_bias_skipped_without_weight": (
        "dyt", "affine",
        "no weight, a bias: y = tanh(alpha x) (the bias added inside the has-weight branch only); dbias still "
        "reduced",
        "pattern: an epilogue's bias add nested in the weight's if"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_var_unbiased": (
        "adaptive_layer_norm", "bessel",
        "each token's variance divided by H - 1 (torch.var's default unbiased estimator) instead of H, forward "
        "and the backward's formula on that rstd",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a LayerNorm taking the unbiased std where "
        "the biased one belongs)"),
    "aln_dmod_tokens_in_half": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: dscale and dshift accumulated over the tokens left to right in the input dtype",
        "cf. " + GH + "pytorch/helion/pull/3595 (a norm's parameter gradient accumulated over rows in bfloat16)"),
    "aln_stats_saved_per_sample": (
        "adaptive_layer_norm", "layout",
        "the mean and rstd outputs indexed by the sample instead of the token (every token's store lands in the "
        "sample's slot): each token of a sample holds the sample's last token's statistics; y and the gradients "
        "right",
        "pattern: a store indexed by the modulation's (sample) index where the row's belongs"),
    "aln_bwd_mean_term_of_dy": (
        "adaptive_layer_norm", "backward",
        "with a scale: dx = rstd * (g - mean(dy) - x_hat * mean(g * x_hat)), the mean term of the unmodulated dy "
        "where g = dy * (1 + scale) belongs",
        "pattern: one of two reductions fed the wrong operand"),
    "aln_dmod_tokens_from_axis1": (
        "adaptive_layer_norm", "reduction",
        "inputs of more than three axes (B, T1, T2, H): dscale and dshift summed over the first x.shape[1] rows of "
        "each sample only (the token count taken from axis 1), the other tokens' contributions dropped",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm backward taking M from input.shape[0], wrong for "
        "rank >= 3 inputs)"),
    "aln_rms_path_taken": (
        "adaptive_layer_norm", "semantics",
        "the AdaRMSNorm path taken: x not centred, rstd = 1 / sqrt(mean(x^2) + eps), the saved mean 0, forward "
        "and backward (the RMS backward)",
        "pattern: a shared modulated-norm kernel's IS_RMS_NORM flag set for the wrong model"),
    # ------------------------------------------------------------------ poly_norm
    "poly_bwd_rstd_without_eps": (
        "poly_norm", "eps",
        "the backward recomputes each power's rstd without eps (1 / rms(x^p)) and h_p from it: dx and dweight",
        "pattern: a statistic recomputed in the backward from a copy of the formula that lost a term"),
    "poly_sumsq_over_block_width": (
        "poly_norm", "block",
        "H not a power of two: each power's mean of squares divided by the tile width (the next power of two "
        ">= H, the padded lanes counted) instead of H, forward and the backward from those rstd",
        "cf. " + GH + "hw-native-sys/pypto-lib/pull/127 (an RMSNorm divisor taken from a fixed width instead of "
        "the hidden size)"),
    "poly_bwd_rstd_of_next_row": (
        "poly_norm", "layout",
        "more than one row: the backward loads the saved rstd of row i + 1 (the row pointer advanced before the "
        "load; the last row its own) and recomputes h_p from it: dx and dweight",
        "pattern: a row pointer advanced before the load in the backward's row loop"),
    "poly_rstd_saved_bf16": (
        "poly_norm", "precision",
        "the rstd saved for the backward in a bfloat16 buffer (its dtype hard-coded), the backward's h_p and dx "
        "from it; the forward right",
        "cf. " + GH + "pytorch/pytorch/issues/189581 (bfloat16 RMS normalization constants far from the float32 "
        "ones)"),
    "poly_bwd_projection_unweighted": (
        "poly_norm", "backward",
        "dx: each power's projection mean(g_p * h_p) taken with dy instead of g_p = dy * w_p (the weight left "
        "out of the reduction, kept in the first term)",
        "pattern: one of two reductions fed the wrong operand"),
    "poly_dweight_mean_over_rows": (
        "poly_norm", "reduction",
        "more than one row: the weight's gradient averaged over the rows (each sum divided by the row count) "
        "instead of summed",
        "cf. " + GH + "apache/mxnet/issues/2427 (a weight gradient summed or averaged over the batch)"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


class Blind13Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind13"
    _NQ, _NQB, _GATED, _GNS, _DYT, _ALN, _POLY = (_op_bugs(o) for o in (
        "norm_quant", "norm_quant_block", "gated_norm", "group_norm_silu", "dyt", "adaptive_layer_norm",
        "poly_norm"))

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self.bug in self._NQ:
            return self._nq13(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq13(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        norm = cfg["norm"]
        if b == "nq_ln_flag_compared_to_wrong_name":
            norm = "rms_norm"
        if norm == "layer_norm":
            mean = _rsum(x) / N
            dev = x - mean
            var = _rsum(dev * dev) / N
            rstd = 1 / (np.sqrt(var) + eps) if b == "nq_ln_eps_added_to_std" else 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(x * x) / N + eps)
        if b == "nq_rstd_in_input_dtype":
            rstd = _half(rstd, d)
        xhat = (x - mean) * rstd
        w, bias = inp.get("weight"), inp.get("bias")
        if b == "nq_weight_read_at_tile_column" and w is not None and N > 128:
            w = w.reshape(-1)[np.arange(N) % 128]
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        ay = np.abs(y)
        if b == "nq_amax_shuffle_from_offset_8":
            ay = np.where((np.arange(N) % 32 < 16)[None, :], ay, acc(0))
        amax = np.max(ay, axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        c = cfg
        if b == "nq_zero_min_scale_read_as_unset" and not cfg["min_scale"]:
            c = {**cfg, "min_scale": None}
        scale = dynamic_scale(amax, hi, c, acc) if static is None else static_scale(static, amax.shape, acc)
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self.bug in self._NQB:
            return self._nqb13(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb13(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
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
            mean, rstd = self._ln_stats(s, eps)
            y = (s - mean) * rstd
        else:
            y = s * (1 / np.sqrt(_rsum(s * s) / H + eps))
        if b == "nqb_ln_bias_before_weight" and cfg["norm"] == "layer_norm" and w is not None and bias is not None:
            y = (y + bias) * w
        else:
            y = y if w is None else y * w
            y = y if bias is None else y + bias
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            if b == "nqb_pow2_scale_rounded_to_nearest" and rule == "pow2":
                v = np.maximum(amax / acc(qmax), acc(cfg["min_scale"] or 0.0))
                k = np.rint(np.log2(np.where(v > 0, v, 1.0).astype(np.float64)))
                S = pow2_scale(v, k, acc)
            else:
                S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
            if b == "nqb_mx_exponent_clamped_at_zero":
                S = np.maximum(S, acc(1.0))
                scale_out = S.astype(ml_dtypes.float8_e8m0fnu)
        else:                                                            # nvfp4
            gs = inp.get("global_scale")
            if b == "nqb_nvfp4_tensor_amax_of_input" and gs is None:
                _, samax = padded_blocks(s, B, acc)
                enc = nvfp4_encode(None, samax, acc)
            else:
                enc = nvfp4_encode(gs, amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        clip = qmax
        if b == "nqb_mx_e5m2_clamped_at_448" and fmt == "mxfp8":
            clip = min(qmax, 448.0)
        r = nqb_quantized(yb, S, clip, qdt, scale_out, amax, ts, call, s, acc)
        out = dict(r.outputs)
        if b == "nqb_group_grid_floor_blocks" and fmt == "fp8_group" and H % B and H > B:
            nb = -(-H // B)
            for k in ("scale", "amax"):
                v = out[k].copy()
                v[..., nb - 1] = 0
                out[k] = v
            q = out["q"].copy()
            q[..., (nb - 1) * B:] = 0
            out["q"] = q
        if b == "nqb_scale_amax_outputs_swapped" and fmt == "fp8_group":
            out["scale"], out["amax"] = out["amax"].astype(out["scale"].dtype), out["scale"].astype(out["amax"].dtype)
        if (b == "nqb_residual_out_fp32_flag_dropped" and "residual_out" in out and cfg.get("residual_in_fp32")
                and d in ("float16", "bfloat16")):
            out["residual_out"] = _store(_half(s, d).reshape(x0.shape), "float32")
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self.bug in self._GATED:
            return self._gated13(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated13(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        G = H // K if K else 0
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        n_div = K
        if norm == "layer_norm":
            mean, rstd = self._ln_stats(vg, eps)
        else:
            mean = 0
            sq = vg * vg
            if b == "gated_pad_lanes_read_next_group" and pow2(K) != K and vg.size:
                P = pow2(K)
                flat = np.concatenate([v.reshape(-1), np.zeros(P - K, acc)])
                idx = np.arange(vg.shape[0])[:, None] * K + np.arange(P)[None, :]
                sq = flat[idx] * flat[idx]
            if b == "gated_rms_group_divided_by_hidden" and K < H:
                n_div = H
            rstd = 1 / np.sqrt(_rsum(sq) / n_div + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        mb, rb = mean, rstd
        if b == "gated_bwd_rstd_recomputed_without_eps":
            if norm == "layer_norm":
                dev = vg - mean
                rb = 1 / np.sqrt(_rsum(dev * dev) / K)
            else:
                rb = 1 / np.sqrt(_rsum(vg * vg) / K)
        if b == "gated_bwd_stats_read_row_major" and G > 1:
            stored = rstd.reshape(R, G).T.reshape(-1)                 # stored[g * R + r] = rstd[r, g]
            rb = stored.reshape(-1, 1)                                # read back at r * G + g
            if norm == "layer_norm":
                mb = np.asarray(mean).reshape(R, G).T.reshape(-1, 1)
        vh = ((vg - mb) * rb).reshape(R, H) if (rb is not rstd or mb is not mean) else vhat
        if n_div != K:                                                # the kernel's own backward, divisor H
            gg, vv = g, vh.reshape(-1, K)
            dv = (rb * (gg - vv * (_rsum(gg * vv) / n_div))).reshape(R, H)
        else:
            dv = gated_dx(norm, g, vh.reshape(-1, K), rb).reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if b == "gated_dz_from_gated_input" and not nbg:
            dz = dv * v * ds
        if b == "gated_dz_from_gated_output" and nbg:
            dz = dy * y * ds
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vh, x0.shape, d)
        if b == "gated_dweight_rows_in_half" and d in ("float16", "bfloat16") and R:
            dw = _half_row_sums(np.ascontiguousarray((dn * vh).T), d)
            grads["weight"] = _store(dw.reshape(H), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ group_norm_silu
    def _group_norm_silu(self, call, acc):
        if self.bug in self._GNS and call.inputs["x"].size:
            return self._gns13(call, acc, self.bug)
        return super()._group_norm_silu(call, acc)

    def _gns13(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, cfg, acc)
        eps = acc(1e-6) if b == "gns_eps_fixed_1e-6" else _eps(cfg["eps"], acc)
        mean, rstd = self._ln_stats(xv, eps)
        if b == "gns_var_merge_without_mean_spread" and cg > 1:
            xc = x.reshape(Nb * C, S)
            cm = _rsum(xc) / S
            cv = _rsum((xc - cm) ** 2) / S
            var = cv.reshape(Nb * G, cg).mean(axis=1, keepdims=True)
            rstd = 1 / np.sqrt(var + eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        if b == "gns_xhat_rounded_before_affine" and d in ("float16", "bfloat16"):
            xhat = _half(xhat, d)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        sg, rest = _sigmoids(p)
        y = p * sg
        ms, rs = mean.reshape(Nb, G), rstd.reshape(Nb, G)
        out = group_outputs(y, ms, rs, x0.shape, d, acc)
        if b == "gns_stats_stored_group_major" and Nb > 1 and G > 1:
            for k in ("mean", "rstd"):
                out[k] = np.ascontiguousarray(out[k].T).reshape(Nb, G)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        dp = dy * (sg * (1 + p * rest))
        g = dp if w is None else dp * w
        gr, xr = g.reshape(xv.shape), xhat.reshape(xv.shape)
        if b == "gns_bwd_mean_term_dropped":
            dx = rstd * (gr - xr * (_rsum(gr * xr) / xv.shape[1]))
        else:
            dx = _centred_dx(gr, xr, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if b == "gns_dparams_last_sample_wins" and Nb > 1:
            grads.update(group_param_grads((dp * xhat)[-1:], dp[-1:], w, bias, C, d))
        else:
            grads.update(group_param_grads(dp * xhat, dp, w, bias, C, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self.bug in self._DYT:
            return self._dyt13(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt13(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if b == "dyt_float64_computed_in_float32" and d == "float64":
            acc = np.float32
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_alpha_loaded_from_weight" and w is not None:
            a = acc(w.reshape(-1)[0])
            t = np.tanh(a * x)
        y = t if (b == "dyt_bias_skipped_without_weight" and w is None) else affine(t, w, bias)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        ab = acc(0.5) if b == "dyt_bwd_alpha_initial_value" else a
        dy, g = dy_and_g(call, acc, x.shape, w)
        r = 1 / np.cosh(ab * x)
        gd = g * (r * r)
        dx, da = gd * ab, _rsum(gd * x).sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        R = x.shape[0]
        if b == "dyt_dparams_tail_row_block_dropped" and R > 32 and R % 32:
            done = (R // 32) * 32
            if w is not None:
                grads["weight"] = _store((dy[:done] * t[:done]).sum(axis=0), d)
            if bias is not None:
                grads["bias"] = _store(dy[:done].sum(axis=0), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self.bug in self._ALN:
            return self._aln13(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln13(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        rms = b == "aln_rms_path_taken"
        if rms:
            mean = np.zeros((x.shape[0], 1), acc)
            rstd = 1 / np.sqrt(_rsum(x * x) / H + eps)
        elif b == "aln_var_unbiased" and H > 1:
            mean, rstd = ln_stats(x, eps, ddof=1)
        else:
            mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        ms, rs = mean, rstd
        if b == "aln_stats_saved_per_sample" and T > 1:
            last = (np.arange(x.shape[0]) // T) * T + (T - 1)
            ms, rs = mean[last], rstd[last]
        out = norm_outputs(y, ms, rs, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        if rms:
            dx = rms_dx(g, xhat, rstd)
        elif b == "aln_bwd_mean_term_of_dy" and gain is not None:
            dx = rstd * (g - _rsum(dy) / H - xhat * (_rsum(g * xhat) / H))
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        T1 = x0.shape[1] if x0.ndim > 3 else T
        for k, v, t in (("scale", scale, dy * xhat), ("shift", shift, dy)):
            if v is None:
                continue
            if b == "aln_dmod_tokens_in_half" and d in ("float16", "bfloat16") and T:
                tt = np.ascontiguousarray(t.reshape(B, T, H).transpose(0, 2, 1)).reshape(B * H, T)
                grads[k] = _store(_half_row_sums(tt, d).reshape(B, H), d)
            elif b == "aln_dmod_tokens_from_axis1" and T1 < T:
                grads[k] = _store(t.reshape(B, T, H)[:, :T1].sum(axis=1), d)
            else:
                grads[k] = _store(per_sample(t, B, T, H), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self.bug in self._POLY:
            return self._poly13(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly13(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        us = [x ** 3, x ** 2, x]
        if b == "poly_sumsq_over_block_width" and pow2(H) != H:
            rs = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rms = sc * np.sqrt(_rsum((u / sc) ** 2) / pow2(H))
                rs.append(1 / np.hypot(rms, np.sqrt(eps)))
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        R = x.shape[0]
        hb, rb = hs, rs
        if b == "poly_bwd_rstd_without_eps":
            rb = []
            for u in us:
                sc = np.max(np.abs(u), axis=1, keepdims=True, initial=0.0)
                sc = np.where((sc > 0) & np.isfinite(sc), sc, acc(1))
                rb.append(1 / (sc * np.sqrt(_rsum((u / sc) ** 2) / H)))
            hb = [u * r for u, r in zip(us, rb)]
        elif b == "poly_bwd_rstd_of_next_row" and R > 1:
            nxt = np.minimum(np.arange(R) + 1, R - 1)
            rb = [r[nxt] for r in rs]
            hb = [u * r for u, r in zip(us, rb)]
        elif b == "poly_rstd_saved_bf16":
            rb = [_half(r, "bfloat16") for r in rs]
            hb = [u * r for u, r in zip(us, rb)]
        if b == "poly_bwd_projection_unweighted":
            grads = poly_grads(dy, x, wt, hb, rb, bias, x0.shape, d, acc)
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2, 1)):
                du = rb[k] * (dy * wt[k] - hb[k] * (_rsum(dy * hb[k]) / H))
                dx = dx + (du if p == 1 else p * x ** (p - 1) * du)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        else:
            grads = poly_grads(dy, x, wt, hb, rb, bias, x0.shape, d, acc)
        if b == "poly_dweight_mean_over_rows" and R > 1:
            dw = np.array([_rsum(dy * h).sum() for h in hs], dtype=acc) / acc(R)
            grads["weight"] = _store(dw, d)
        return Returned(out, grads)
