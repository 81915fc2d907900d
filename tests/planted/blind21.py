"""A twenty-first held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind21Kernel(None)`` is a correct NumPy kernel for eight ops (batch_norm, group_norm, instance_norm, z_score,
lp_normalize, group_norm_silu, norm_quant_block, adaptive_layer_norm) written the way a fused float32 GPU kernel
computes them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed
pairwise, one rounding to the output dtype at the end (round to nearest even), statistics returned in float32.
Its correct arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it: the op written out once more (``_bn21``, ``_in21``, ``_gn21`` for group_norm and
group_norm_silu, ``_zs21``, ``_lp21``, ``_nqb21``, ``_aln21``, each the correct kernel's arithmetic step for step
when no bug of its op is set) with the one mistake in place.

``Blind21Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind19.py (the same mistake on the same op; the twentieth set, written at the same time for the other ops,
shares none of these ops).
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
                          nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_instance, per_sample,
                          pow2, rsum as _rsum, running_in, running_setup, running_state,
                          sigmoids as _sigmoids, store as _store)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _half_row_sums
from .blind11 import Blind11Kernel

OPS = ("batch_norm", "group_norm", "instance_norm", "z_score", "lp_normalize", "group_norm_silu",
       "norm_quant_block", "adaptive_layer_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind21Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ batch_norm
    "bn_dx_mean_term_sign_flipped": (
        "batch_norm", "backward",
        "batch statistics: dx = rstd * (g + mean(g) - x_hat * mean(g * x_hat)), the mean(g) term added instead of "
        "subtracted (a sign slip in the hand-derived formula); dweight, dbias and the forward right",
        "cf. " + GH + "apache/mxnet/issues/1053 (a BatchNorm backward whose mean-gradient term was assembled "
        "wrong while the forward was right)"),
    "bn_running_var_bessel_inverted": (
        "batch_norm", "bessel",
        "torch convention, training: the batch variance fed to running_var scaled by (n - 1) / n instead of "
        "n / (n - 1) (the correction factor written upside down); running_mean, y and the gradients right",
        "pattern: a ratio of counts written upside down"),
    "bn_count_from_last_axis": (
        "batch_norm", "reduction",
        "batch statistics on inputs of four or more axes: the per-channel sums over every sample and position "
        "divided by N * x.shape[-1] (the count taken from the last axis) instead of N times the spatial size: "
        "the mean and the variance, y, the saved statistics, the backward's formula on them and the running "
        "update",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm kernel taking its count from one axis of the "
        "input, wrong for inputs of higher rank)"),
    "bn_eval_weight_bias_swapped": (
        "batch_norm", "affine",
        "eval with running statistics, a weight and a bias: the inference kernel is handed (bias, weight) in "
        "its (scale, shift) slots: y = x_hat * bias + weight and dx = dy * bias * rstd; dweight and dbias right; "
        "the training path right",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm's weight and bias taken the wrong way round)"),
    "bn_dweight_rstd_of_next_channel": (
        "batch_norm", "layout",
        "batch statistics, more than one channel: the backward-reduce kernel loads the saved rstd of channel "
        "(c + 1) mod C for dweight = sum dy * (x - mean) * rstd (the invstd pointer advanced before the load); "
        "dx, dbias and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward reading another row's or group's saved "
        "statistics)"),
    "bn_xhat_saved_in_half": (
        "batch_norm", "precision",
        "16-bit inputs, batch statistics: x_hat saved for the backward in the input dtype (rounded) and dx "
        "and dweight computed from that saved x_hat; the forward and dbias right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/950 (a norm's dW reduced from dY * (X * rstd).to(X_dtype), "
        "the normalized input rounded to the input dtype)"),
    "bn_mean_output_is_running_mean": (
        "batch_norm", None,
        "training with running statistics: the returned mean output holds the just-updated running_mean (the "
        "buffer the kernel wrote last) instead of the batch mean; y, rstd, the gradients and the state right",
        "pattern: an output pointer bound to the wrong one of two buffers of the same shape"),
    # ------------------------------------------------------------------ instance_norm
    "in_bwd_stats_of_first_channel": (
        "instance_norm", "layout",
        "instance statistics, more than one channel: the backward loads the saved mean and rstd of instance "
        "(n, c) at index n * C (the channel offset left out): every channel of a sample takes channel 0's "
        "statistics for x_hat, dx and dweight; the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward loading the mean and rstd of the wrong "
        "group)"),
    "in_eps_squared": (
        "instance_norm", "eps",
        "eps squared before it reaches the kernel (the module's eps taken for the std's epsilon and squared to "
        "go under the root): rstd = 1 / sqrt(var + eps^2), forward and backward, instance or running statistics",
        "pattern: an epsilon converted between the std and the variance conventions"),
    "in_dbias_from_weighted_dy": (
        "instance_norm", "backward",
        "with a weight and a bias: dbias = sum over the samples and positions of dy * weight (the weighted g the "
        "dx pass forms) instead of dy; dx and dweight right",
        "pattern: the weighted gradient reused for the bias reduction"),
    "in_running_var_about_running_mean": (
        "instance_norm", "running",
        "training with running statistics: each instance's unbiased variance for the running_var update taken "
        "about the running_mean loaded from the buffer (before its update) instead of the instance's own mean; "
        "running_mean, y and the gradients right",
        "pattern: a deviation taken about the wrong one of two means in scope"),
    "in_bwd_means_over_batch": (
        "instance_norm", "reduction",
        "instance statistics, more than one sample: the backward's mean(g) and mean(g * x_hat) reduced per "
        "channel over the samples and positions (the batch norm backward-reduce kernel reused) instead of per "
        "instance; x_hat and rstd per instance; dweight, dbias and the forward right",
        "pattern: a backward-reduce kernel reused from a neighbouring normalization with its own axes"),
    "in_eval_dweight_from_instance_xhat": (
        "instance_norm", "mode",
        "eval with running statistics: dweight = sum dy * x_hat with x_hat from each instance's own statistics "
        "(the training path's saved values) while y and dx use the running ones",
        "cf. " + GH + "pytorch/pytorch/pull/4444 (InstanceNorm's choice between running and instance "
        "statistics read from the wrong flag)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bias_before_weight": (
        "group_norm", "affine",
        "with a weight and a bias: y = (x_hat + bias) * weight (the bias added before the scale), and its "
        "gradients: dweight = sum dy * (x_hat + bias), dbias = sum dy * weight; dx and the statistics right",
        "pattern: the shift applied before the scale in a fused epilogue"),
    "gn_bwd_partials_in_half": (
        "group_norm", "precision",
        "16-bit inputs: the backward's per-(sample, channel) partials ds = sum dy * x and db = sum dy (the "
        "ds / db formulation) stored in buffers of the input dtype; dweight = sum (ds - db * mean) * rstd, "
        "dbias = sum db and dx from the rounded partials; the forward right",
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's partial-gradient helper truncating its "
        "accumulators from the accumulation type to the input type)"),
    "gn_bwd_c2_sign_flipped": (
        "group_norm", "backward",
        "backward in the ds / db form (ds = sum g x, db = sum g, c2 = (db * mean - ds) * rstd^3 / n, c3 = -c2 "
        "* mean - db * rstd / n, dx = rstd * g + c2 * x + c3) with c2 written (ds - db * mean) * rstd^3 / n and "
        "c3 from it; dweight, dbias and the forward right",
        "cf. " + GH + "uxlfoundation/oneDNN/issues/3543 (a group normalization backward whose diff_src is wrong "
        "while the forward is right)"),
    "gn_affine_channel_index_mod_C": (
        "group_norm", "layout",
        "more than one spatial position: the elementwise epilogue loads weight and bias at (flat index within "
        "the sample) mod C (the channels-last channel index) instead of index // S: y and dx (g = dy * that "
        "weight); the statistics, dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (a normalization kernel's channel index taken with the "
        "other memory format's strides)"),
    "gn_dparams_sample_blocks_floor": (
        "group_norm", "reduction",
        "more than 16 samples, not a multiple of 16: dweight and dbias reduced over the samples in blocks of 16 "
        "whose loop bound is N // 16, so the last N mod 16 samples never enter the parameter gradients; dx and "
        "the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel wrong once a program covers more than "
        "one row block)"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_grad_sigmoid_prime_without_s": (
        "group_norm_silu", "backward",
        "the SiLU derivative written s + p * (1 - s) (the sigmoid's derivative s * (1 - s) missing its factor "
        "s) instead of s * (1 + p * (1 - s)): dp, dx, dweight and dbias from it; the forward right",
        "cf. " + GH + "sausheong/gonn/issues/8 (a sigmoid derivative written wrong in a hand-written kernel)"),
    "gns_var_one_pass": (
        "group_norm_silu", "one_pass",
        "each group's variance as E[x^2] - E[x]^2 from one pass of float32 sums (clamped at 0), forward and the "
        "backward's formula on that rstd",
        "pattern: the variance from one pass of sums and sums of squares"),
    "gns_groups_interleaved": (
        "group_norm_silu", "layout",
        "more than one group and channel a group: channel c assigned to group c mod G (a (N, C / G, G, *) view) "
        "instead of c // (C / G): the statistics, the saved (N, G) mean and rstd, y and the backward over those "
        "groups",
        "cf. " + GH + "ggml-org/llama.cpp/pull/15507 (a grouped norm's group count and group length laid out "
        "the other way)"),
    "gns_dparams_reduced_per_group": (
        "group_norm_silu", "group",
        "dweight and dbias reduced over every channel of a group (one value per group, stored to each of its "
        "channels) instead of per channel; dx and the forward right",
        "pattern: a parameter-gradient reduction over the statistics' group instead of the parameter's channel"),
    "gns_eps_outside_sqrt": (
        "group_norm_silu", "eps",
        "rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), forward and the backward's formula on "
        "that rstd",
        "cf. " + GH + "codertimo/BERT-pytorch/issues/30 (a norm dividing by std + eps where sqrt(var + eps) "
        "belongs)"),
    # ------------------------------------------------------------------ z_score
    "zs_bwd_xhat_from_stored_output": (
        "z_score", "precision",
        "16-bit inputs with a weight and a bias: the backward recomputes x_hat from the stored 16-bit output as "
        "(y - bias) / weight (the memory-saving recompute), dx and dweight from it; the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm backward recomputing x_hat from the stored "
        "output)"),
    "zs_weight_indexed_by_row": (
        "z_score", "layout",
        "with a weight or a bias: the epilogue loads weight and bias at the slice's row index (mod the slice "
        "length) instead of the column: y = x_hat * weight[r] + bias[r] and dx from g = dy * weight[r]; the "
        "statistics, dweight and dbias right",
        "cf. " + GH + "kraiskil/onnx2c/issues/7 (a bias addition indexed along the wrong dimension)"),
    "zs_bwd_ddof_not_forwarded": (
        "z_score", "bessel",
        "ddof = 0: the backward kernel not given ddof (its default 1): the projection term divides "
        "sum(g * x_hat) by n - 1 instead of n; the forward right",
        "cf. " + GH + "El3ssar/ResDAG/issues/247 (a standardization's std taken with another ddof than the "
        "convention expected)"),
    "zs_hypot_eps_not_rooted": (
        "z_score", "eps",
        "eps > 0: the overflow-safe std written hypot(a * sqrt(sum (d / a)^2 / (n - ddof)), eps) (eps where "
        "sqrt(eps) belongs): std = sqrt(var + eps^2), y, the returned std and dx from it",
        "pattern: a term of a hypot form left unrooted"),
    "zs_long_row_split_stats": (
        "z_score", "group",
        "slices longer than 32768 values (a multiple of it): each slice split over programs of 32768 values, "
        "each normalizing its chunk with the chunk's own mean and std (the cross-program reduction missing); "
        "the last chunk's statistics returned; dx per chunk",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton norm kernel whose row is longer than its "
        "block)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_pad_lanes_loaded_as_one": (
        "lp_normalize", "block",
        "slice length not a power of two: the slice loaded into a tile of pow2(n) lanes whose masked load fills "
        "the padded lanes with 1.0 (other=1.0) instead of 0, each adding 1 to sum |x|^p: the norm, y and the "
        "backward on that norm",
        "cf. " + GH + "triton-lang/triton/issues/9838 (a Triton norm kernel whose reduction counts the padded "
        "lanes)"),
    "lp_norm_output_spatial_transposed": (
        "lp_normalize", "layout",
        "inputs whose last two axes are not normalized, both longer than one: the norm buffer written with "
        "those axes' strides exchanged (element (h, w) stored at w * H + h); y and dx right",
        "cf. " + GH + "ROCm/aiter/pull/4506 (a buffer written column-major and read row-major)"),
    "lp_bwd_projection_dropped": (
        "lp_normalize", "backward",
        "slices not clamped: dx = dy / norm, the projection term - w * sum(dy * u) / norm left out; clamped "
        "slices and the forward right",
        "cf. " + GH + "facebookarchive/caffe2/issues/1429 (a Normalize op's GPU gradient wrong)"),
    "lp_bwd_u_from_stored_y": (
        "lp_normalize", "precision",
        "16-bit inputs: the backward reads u = x / norm back from the stored 16-bit output y (rounded) for the "
        "projection sum(dy * u) and the derivative sign(u) |u|^(p - 1); the forward right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (a norm backward recomputing from the stored output)"),
    "lp_chunk_scaled_sums_merged_without_rescale": (
        "lp_normalize", "merge",
        "slices longer than 64: each chunk of 64 values scaled by its own max |x| (the overflow-safe form), its "
        "partial sum of (|x| / s_k)^p added to the others without the rescale (s_k / s)^p to the slice's max s: "
        "the norm, y and the backward on that norm",
        "cf. " + GH + "deepseek-ai/FlashMLA/pull/177 (online rescaling factors of partial accumulators "
        "when the running max changes)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_amax_signed_max": (
        "norm_quant_block", "quant_scale",
        "each block's amax reduced as max(y) (the signed maximum) instead of max |y|: the amax output, the "
        "block scales from it and q divided by them (clipped)",
        GH + "NVIDIA/TransformerEngine/pull/534 (an amax taken with torch.amax, not the absolute maximum, for a "
        "layernorm's FP8 scale)"),
    "nqb_amax_clamped_1e-4": (
        "norm_quant_block", "quant_scale",
        "fp8_group: each block's amax clamped at 1e-4 before the division by qmax (DeepGEMM's per-token cast "
        "margin), so a block of amax below 1e-4 (an all-zero block) gets the scale 1e-4 / qmax; the amax "
        "output the block's own",
        "cf. " + GH + "deepseek-ai/DeepGEMM/issues/109 (per_token_cast_to_fp8 clamping amax at 1e-4)"),
    "nqb_rms_count_padded_block": (
        "norm_quant_block", "block",
        "norm='rms_norm', H not a multiple of the block size: the mean of squares divided by the padded row "
        "length blocks * block_size instead of H, then normalized and quantized",
        "cf. " + GH + "tenstorrent/tt-metal/issues/50682 (a norm's statistics over tile-padded rows)"),
    "nqb_weight_index_mod_block": (
        "norm_quant_block", "layout",
        "with a weight, H above the block size: the weight loaded at the column's index within its block "
        "(j mod block_size) instead of j, then quantized",
        "pattern: a parameter pointer offset by the block-local column"),
    "nqb_residual_sum_rounded_before_norm": (
        "norm_quant_block", "precision",
        "16-bit inputs with a residual (no residual_in_fp32): the normalization reads the sum x + residual back "
        "from residual_out, rounded to the input dtype, instead of the float32 sum; residual_out right",
        "cf. " + GH + "vllm-project/vllm/issues/52104 (fused_add_rms_norm computing its statistics from "
        "another (rounded) sum than the residual it returns)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_bwd_proj_over_h_minus_1": (
        "adaptive_layer_norm", "bessel",
        "the backward's projection mean(g * x_hat) divides its sum by H - 1 instead of H; mean(g), dscale, "
        "dshift and the forward right",
        "cf. " + GH + "harvardnlp/annotated-transformer/pull/119 (a LayerNorm taking the unbiased count where "
        "the biased one belongs)"),
    "aln_mean_sum_in_half": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: each token's sum for the mean accumulated left to right in the input dtype, the "
        "deviations and the variance in float32 about that mean; forward and backward",
        "cf. " + GH + "ROCm/triton/pull/633 (a norm kernel's row sum accumulated in the fp16 input type)"),
    "aln_rstd_of_first_row_in_pair": (
        "adaptive_layer_norm", "layout",
        "more than one token row: the kernel takes two rows per program and scales both with the first row's "
        "rstd (each row's own mean): y, the returned rstd and the backward from it",
        "pattern: a per-row statistic loaded once per program of several rows"),
    "aln_dx_gain_after_projection": (
        "adaptive_layer_norm", "backward",
        "with a scale: dx = (1 + scale) * rstd * (dy - mean(dy) - x_hat * mean(dy * x_hat)), the gain applied "
        "after the projection instead of g = dy * (1 + scale) entering it; dscale, dshift and the forward right",
        "pattern: a per-column factor moved out of the row reductions it belongs in"),
    "aln_bwd_rstd_without_eps": (
        "adaptive_layer_norm", "eps",
        "the backward recomputes each token's rstd from x as 1 / sqrt(var) (eps left out of its copy of the "
        "formula): x_hat, dx and dscale from it; the forward right",
        "pattern: a backward recomputing a statistic by a copy of the forward's formula without eps"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


_HALF = ("float16", "bfloat16")


class Blind21Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind21"
    _BN, _GN, _IN, _ZS, _LP, _GNS, _NQB, _ALN = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        if self._mine(self._BN):
            return self._bn21(call, acc, self.bug)
        return super()._batch_norm(call, acc)

    def _bn21(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                          # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        bmean = bvar = None
        if batch:
            if b == "bn_count_from_last_axis" and x0.ndim >= 4 and n:
                cnt = acc(x0.shape[0] * x0.shape[-1])
                bmean = _rsum(x) / cnt
                bvar = _rsum((x - bmean) ** 2) / cnt
                rstd = 1 / np.sqrt(bvar + eps)
            else:
                bmean, rstd = self._ln_stats(x, eps)
            mean = bmean
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        yw, yb = w, bias
        if b == "bn_eval_weight_bias_swapped" and not batch and w is not None and bias is not None:
            yw, yb = bias, w
        state = {}
        rm = None
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
                        if b == "bn_running_var_bessel_inverted" and n > 1:
                            f = acc((n - 1) / n)
                        rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * (bv * f)
                    else:
                        rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        out = {"y": _store(from_channel_rows(affine(xhat, yw, yb), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        if b == "bn_mean_output_is_running_mean" and call.training and has_run and n > 0:
            out["mean"] = rm.reshape(C).astype(acc)
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if yw is None else dy * yw
            xb = xhat
            if batch and b == "bn_xhat_saved_in_half" and d in _HALF:
                xb = _half(xhat, d)
            dw_sum, db_sum = _rsum(dy * xb), _rsum(dy)
            if batch and b == "bn_dweight_rstd_of_next_channel" and C > 1:
                dw_sum = _rsum(dy * ((x - mean) * np.roll(rstd, -1, axis=0)))
            if batch and b == "bn_dx_mean_term_sign_flipped":
                dx = rstd * (g + _rsum(g) / n - xb * (_rsum(g * xb) / n))
            elif batch:
                dx = _centred_dx(g, xb, rstd)
            else:
                dx = g * rstd
            grads = {"x": _store(from_channel_rows(dx, x0.shape), d)}
            if w is not None:
                grads["weight"] = _store(dw_sum.reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(db_sum.reshape(C), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        if self._mine(self._IN):
            return self._in21(call, acc, self.bug)
        return super()._instance_norm(call, acc)

    def _in21(self, call, acc, b):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C = x0.shape[0], x0.shape[1]
        S = x0.size // (Nb * C) if Nb * C else 0
        x = x0.astype(acc).reshape(Nb * C, S)
        cfg, st, eps, has_run = running_setup(call, acc)
        m = instance_momentum_value(cfg, acc)
        if b == "in_eps_squared":
            eps = eps * eps
        inst = call.training or not has_run
        imean = None
        if inst:
            imean, rstd = self._ln_stats(x, eps)
            mean = imean
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
                about = imean
                if b == "in_running_var_about_running_mean":
                    about = per_instance(rm, Nb)
                ub = instance_unbiased_var(x, about, acc)
                rm, rv = instance_running_update(rm, rv, m, imean, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
            g = dy if wr is None else dy * wr
            xh, rb = xhat, rstd
            if inst and b == "in_bwd_stats_of_first_channel" and C > 1:
                idx = (np.arange(Nb * C) // C) * C
                mb, rb = mean.reshape(-1)[idx].reshape(-1, 1), rstd.reshape(-1)[idx].reshape(-1, 1)
                xh = (x - mb) * rb
            if inst and b == "in_bwd_means_over_batch" and Nb > 1 and S > 0:
                gc = np.ascontiguousarray(g.reshape(Nb, C, S).transpose(1, 0, 2)).reshape(C, -1)
                xc = np.ascontiguousarray(xh.reshape(Nb, C, S).transpose(1, 0, 2)).reshape(C, -1)
                mg = per_instance((_rsum(gc) / acc(Nb * S)).reshape(C), Nb)
                mgx = per_instance((_rsum(gc * xc) / acc(Nb * S)).reshape(C), Nb)
                dx = rb * (g - mg - xh * mgx)
            elif inst:
                dx = _centred_dx(g, xh, rb)
            else:
                dx = g * rstd
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            dw_from = dy * xh
            if not inst and b == "in_eval_dweight_from_instance_xhat" and S > 0:
                im, ir = self._ln_stats(x, eps)
                dw_from = dy * ((x - im) * ir)
            db_from = g if b == "in_dbias_from_weighted_dy" and wr is not None else dy
            for k, t, given in (("weight", dw_from, w), ("bias", db_from, bias)):
                if given is None:
                    continue
                grads[k] = _store(_rsum(t).reshape(Nb, C).sum(axis=0), d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ group_norm, group_norm_silu
    def _group_norm(self, call, acc):
        if call.op == "group_norm" and self._mine(self._GN) and call.inputs["x"].size:
            return self._gn21(call, acc, self.bug, silu=False)
        return super()._group_norm(call, acc)

    def _group_norm_silu(self, call, acc):
        if self._mine(self._GNS) and call.inputs["x"].size:
            return self._gn21(call, acc, self.bug, silu=True)
        return super()._group_norm_silu(call, acc)

    def _gn21(self, call, acc, b, silu):
        d = call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        n = cg * S
        perm = None
        if b == "gns_groups_interleaved" and G > 1 and cg > 1:
            perm = np.argsort(np.arange(C) % G, kind="stable")     # the channels of group g: c mod G == g

        def to_rows(a):                                  # (N, C, S) -> one row per (sample, group)
            a = a if perm is None else a[:, perm, :]
            return np.ascontiguousarray(a).reshape(Nb * G, n)

        def from_rows(r):                                # to_rows undone
            t = r.reshape(Nb, C, S)
            if perm is None:
                return t
            o = np.empty_like(t)
            o[:, perm, :] = t
            return o
        xv = to_rows(x)
        eps = _eps(call.config["eps"], acc)
        if b == "gns_var_one_pass":
            mean = _rsum(xv) / n
            var = np.maximum(_rsum(xv * xv) / n - mean * mean, 0)
            rstd = 1 / np.sqrt(var + eps)
        elif b == "gns_eps_outside_sqrt":
            mean = _rsum(xv) / n
            dev = xv - mean
            rstd = 1 / (np.sqrt(_rsum(dev * dev) / n) + eps)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xr = (xv - mean) * rstd
        xhat = from_rows(xr)
        w, bias = group_params(call.inputs, acc, C)
        wl, bl = w, bias                                 # the weight and bias the epilogue loads
        if b == "gn_affine_channel_index_mod_C" and S > 1:
            idx = (np.arange(C * S) % C).reshape(1, C, S)
            wl = None if w is None else w.reshape(C)[idx]
            bl = None if bias is None else bias.reshape(C)[idx]
        fold = b == "gn_bias_before_weight" and w is not None and bias is not None
        p = (xhat + bias) * w if fold else affine(xhat, wl, bl)
        if silu:
            sg, rest = _sigmoids(p)
            y = p * sg
        else:
            y = p
        out = group_outputs(y, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        if silu and b == "gns_silu_grad_sigmoid_prime_without_s":
            dp = dy * (sg + p * rest)
        else:
            dp = dy * (sg * (1 + p * rest)) if silu else dy
        g = dp if wl is None else dp * wl
        if b in ("gn_bwd_partials_in_half", "gn_bwd_c2_sign_flipped"):
            ds_nc, db_nc = _rsum(dp.reshape(Nb * C, S) * x.reshape(Nb * C, S)), _rsum(dp.reshape(Nb * C, S))
            if b == "gn_bwd_partials_in_half" and d in _HALF:
                ds_nc, db_nc = _half(ds_nc, d), _half(db_nc, d)
            ds_nc, db_nc = ds_nc.reshape(Nb, C), db_nc.reshape(Nb, C)
            wc = np.ones(C, acc) if w is None else w.reshape(C)
            ds_g = (ds_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            db_g = (db_nc * wc).reshape(Nb, G, cg).sum(axis=2)
            mg, rg = mean.reshape(Nb, G), rstd.reshape(Nb, G)
            c2 = (db_g * mg - ds_g) * rg * rg * rg / acc(n)
            if b == "gn_bwd_c2_sign_flipped":
                c2 = -c2
            c3 = -c2 * mg - db_g * rg / acc(n)

            def per_channel(v):
                return np.repeat(v, cg, axis=1).reshape(Nb, C, 1)
            dx = per_channel(rg) * g + per_channel(c2) * x + per_channel(c3)
            mc, rc = per_channel(mg).reshape(Nb, C), per_channel(rg).reshape(Nb, C)
            dws, dbs = ((ds_nc - db_nc * mc) * rc).sum(axis=0), db_nc.sum(axis=0)
            grads = {"x": _store(dx.reshape(x0.shape), d)}
            for key, v, given in (("weight", dws, w), ("bias", dbs, bias)):
                if given is not None:
                    grads[key] = _store(v, d)
            return Returned(out, grads)
        dxr = _centred_dx(to_rows(g), xr, rstd)
        grads = {"x": _store(from_rows(dxr).reshape(x0.shape), d)}
        dw_from, db_from = dp * xhat, dp
        if fold:
            dw_from, db_from = dp * (xhat + bias), dp * w
        for key, t, given in (("weight", dw_from, w), ("bias", db_from, bias)):
            if given is None:
                continue
            if b == "gn_dparams_sample_blocks_floor" and Nb > 16 and Nb % 16:
                t = t[:(Nb // 16) * 16]
            v = channel_sums(t, C)
            if b == "gns_dparams_reduced_per_group":
                v = np.repeat(v.reshape(G, cg).sum(axis=1), cg)
            grads[key] = _store(v, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        if self._mine(self._ZS):
            return self._zs21(call, acc, self.bug)
        return super()._z_score(call, acc)

    def _zs21(self, call, acc, b):
        d = call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n0, back = _axes_rows(x0.astype(acc), cfg["dim"])
        R = x.shape[0]
        ddof = int(cfg["ddof"])
        eps = acc(cfg["eps"])
        params = {}
        for k in ("weight", "bias"):
            v = inp.get(k)
            params[k] = None if v is None else v.astype(acc).reshape(1, n0)
        L, k_ = n0, 1                                    # the length a program reduces, programs per slice
        if b == "zs_long_row_split_stats" and n0 > 32768 and n0 % 32768 == 0:
            L, k_ = 32768, n0 // 32768
            x = x.reshape(R * k_, L)
            for key, v in params.items():
                params[key] = None if v is None else np.tile(v.reshape(k_, L), (R, 1))
        w, bias = params["weight"], params["bias"]
        if b == "zs_weight_indexed_by_row" and n0:
            rows = np.arange(R) % n0
            w = None if w is None else w.reshape(n0)[rows].reshape(R, 1)
            bias = None if bias is None else bias.reshape(n0)[rows].reshape(R, 1)
        n = L
        m = n - ddof
        if n:
            mean = _rsum(x) / n
            dev = x - mean
            c = _rsum(dev) / n                                   # the first pass's error, re-centred
            mean, dev = mean + c, dev - c
        else:
            mean, dev = np.full((x.shape[0], 1), np.nan, acc), x
        a = np.max(np.abs(dev), axis=1, keepdims=True, initial=0.0)
        a = np.where((a > 0) & np.isfinite(a), a, acc(1))
        q = dev / a
        sumsq = _rsum(q * q)
        root_eps = eps if b == "zs_hypot_eps_not_rooted" else np.sqrt(eps)
        if m > 0:
            std = np.hypot(a * np.sqrt(sumsq / acc(m)), root_eps)
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        ms, ss = mean, std
        if k_ > 1:
            ms, ss = mean.reshape(R, k_)[:, -1:], std.reshape(R, k_)[:, -1:]
        out = {"y": _store(back(y.reshape(R, n0)), d), "mean": back(ms, True).astype(acc),
               "std": back(ss, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            dy = dy.reshape(x.shape)
            g = dy if w is None else dy * w
            xb = xhat
            if (b == "zs_bwd_xhat_from_stored_output" and d in _HALF and w is not None
                    and bias is not None):
                xb = (_store(y, d).astype(acc) - bias) / w
            mb = m
            if b == "zs_bwd_ddof_not_forwarded":
                mb = n - 1
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0 or mb <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                inner = g - _rsum(g) / n - xb * (_rsum(g * xb) / acc(mb))
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx.reshape(R, n0)), d)
            for key, t in (("weight", dy * xb), ("bias", dy)):
                if inp.get(key) is None:
                    continue
                grads[key] = _store(t.reshape(R, n0).sum(axis=0).reshape(inp[key].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        if self._mine(self._LP):
            return self._lp21(call, acc, self.bug)
        return super()._lp_normalize(call, acc)

    def _lp21(self, call, acc, b):
        d, cfg = call.dtype, call.config
        x0 = call.inputs["x"]
        dy0 = call.cotangents.get("y")
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"

        def powsum(v):
            if p == 1.0:
                return _rsum(v)
            if p == 2.0:
                return _rsum(v * v)
            return _rsum(v ** acc(p))
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        if b == "lp_chunk_scaled_sums_merged_without_rescale" and n > 64:
            total = acc(0)
            for k in range(0, n, 64):
                xc = x[:, k:k + 64]
                sk = np.max(np.abs(xc), axis=1, keepdims=True, initial=0.0)
                sk = np.where((sk > 0) & np.isfinite(sk), sk, acc(1))
                total = total + powsum(np.abs(xc) / sk)
        else:
            total = powsum(np.abs(x) / s)
        if b == "lp_pad_lanes_loaded_as_one" and pow2(n) != n:
            total = total + acc(pow2(n) - n) * (acc(1) / s) ** acc(p)
        inv = acc(np.inf) if p == 0 else acc(1.0 / p)
        norm = s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** inv)
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
            if b == "lp_bwd_u_from_stored_y" and d in _HALF:
                u = np.where(used, _store(y, d).astype(acc), u)
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            if b == "lp_bwd_projection_dropped":
                proj = dy / safe
            else:
                proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            dx = _store(back(np.where(used, proj, small)), d)
        nout = back(norm, True).astype(acc)
        if b == "lp_norm_output_spatial_transposed" and nout.ndim >= 3 and min(nout.shape[-2:]) > 1:
            nout = np.ascontiguousarray(nout.swapaxes(-1, -2)).reshape(nout.shape)
        out = {"y": _store(back(y), d), "norm": nout}
        return Returned(out, {} if dx is None else {"x": dx})

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        if self._mine(self._NQB):
            return self._nqb21(call, acc, self.bug)
        return super()._norm_quant_block(call, acc)

    def _nqb_normalized21(self, call, cfg, acc, b, B):
        """(s, y): s = x (+ residual) as (rows, H), y its normalization times weight plus bias."""
        inp = call.inputs
        x0 = inp["x"]
        H = x0.shape[-1]
        x = x0.astype(acc).reshape(-1, H)
        res = inp.get("residual")
        s = x if res is None else x + res.astype(acc).reshape(-1, H)
        sn = s
        if (b == "nqb_residual_sum_rounded_before_norm" and res is not None and call.dtype in _HALF
                and not cfg.get("residual_in_fp32")):
            sn = _half(s, call.dtype)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean, rstd = self._ln_stats(sn, eps)
            y = (sn - mean) * rstd
        else:
            cnt = H
            if b == "nqb_rms_count_padded_block" and H % B:
                cnt = -(-H // B) * B
            y = sn * (1 / np.sqrt(_rsum(sn * sn) / acc(cnt) + eps))
        if w is not None:
            wv = w.astype(acc).reshape(H)
            if b == "nqb_weight_index_mod_block" and H > B:
                wv = wv[np.arange(H) % B]
            y = y * wv.reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        return s, y

    def _nqb21(self, call, acc, b):
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = self._nqb_normalized21(call, cfg, acc, b, B)
        yb, amax = padded_blocks(y, B, acc)
        if b == "nqb_amax_signed_max":
            amax = np.max(yb, axis=-1)
        ts = acc(1.0)
        if fmt == "fp8_group":
            am = np.maximum(amax, acc(1e-4)) if b == "nqb_amax_clamped_1e-4" else amax
            S = group_scales(am, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            enc = nvfp4_encode(inp.get("global_scale"), amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        if self._mine(self._ALN):
            return self._aln21(call, acc, self.bug)
        return super()._adaptive_layer_norm(call, acc)

    def _aln21(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        eps = _eps(call.config["eps"], acc)
        R = x.shape[0]
        if b == "aln_mean_sum_in_half" and d in _HALF and x.size:
            mean = _half_row_sums(x, d) / acc(H)
            dev = x - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / H + eps)
        else:
            mean, rstd = self._ln_stats(x, eps)
        if b == "aln_rstd_of_first_row_in_pair" and R > 1:
            rstd = rstd[np.arange(R) - np.arange(R) % 2]
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, H), gain)
        xb, rb = xhat, rstd
        if b == "aln_bwd_rstd_without_eps" and x.size:
            rb = 1 / np.sqrt(_rsum((x - mean) ** 2) / H)
            xb = (x - mean) * rb
        if b == "aln_bwd_proj_over_h_minus_1" and H > 1:
            dx = rb * (g - _rsum(g) / H - xb * (_rsum(g * xb) / acc(H - 1)))
        elif b == "aln_dx_gain_after_projection" and gain is not None and H:
            dx = gain * _centred_dx(dy, xb, rb)
        else:
            dx = _centred_dx(g, xb, rb)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if scale is not None:
            grads["scale"] = _store(per_sample(dy * xb, B, T, H), d)
        if shift is not None:
            grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)
