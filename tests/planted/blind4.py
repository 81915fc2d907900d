"""A fourth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind4Kernel(None)`` is a correct NumPy kernel for thirteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to
float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the
output dtype at the end (round to nearest even), statistics (mean, rstd, amax, scales) returned in float32.
It declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Its arithmetic follows tests/planted/blind3.py (the same conventions); the correct
pieces the sets share are in tests/planted/_blind_math.py, and each bug is planted here, where a kernel
author would make it.

``Blind4Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy,
the same tuple as blind3's), or None where none fits. ``source`` is a public bug report or fix where the
mistake really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same
mistake in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic and public bug reports only, by an author who did not
read refnorm's diagnosis (issue 33) nor its planted-pitfall catalogue. None of its bugs repeats one of
tests/planted/blind.py, blind2.py or blind3.py.
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, aln_inputs, aln_modulation, BlindKernelBase,
                          bn_running_update, centred_dx as _centred_dx, channel_dy_and_g, channel_grads,
                          channel_outputs, channel_params, channel_rows, channel_running_stats, dy_and_g, dyt_gd,
                          dyt_inputs, eps_value as _eps, from_channel_rows, FUSED_OPTIONS, gate_group_size, gated_dn,
                          gated_dx, gated_dx_dz, gated_grads, gated_inputs, gated_stats, group_outputs,
                          group_param_grads, group_params, group_rows, group_scales, GroupNormPair, half as _half,
                          instance_grads, instance_momentum_value, instance_outputs, instance_params, instance_rows,
                          instance_running_update, instance_stats, instance_unbiased_var, kept, ln_rows, ln_stats,
                          mx_scales, nan_running, norm_outputs, norm_quant_returned, normalized_rows, nqb_format,
                          nqb_normalized, nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_instance,
                          per_sample, poly_combine, poly_grads, poly_inputs, poly_normalize, QUANT as _QUANT,
                          quant_quotients, quantize, rms_dx, rms_norm_dx, rms_rows, rms_stats, row_affine,
                          row_param_grads, row_weight_bias, rsum as _rsum, running_in, running_setup, running_state,
                          scale_floor, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale, store as _store,
                          weight_offset)
from .blind3 import LABELS

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind4Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_var_eps_rounded_to_half": (
        "layer_norm", "precision",
        "var + eps stored in the 16-bit input dtype before the rsqrt (float16: an eps of 1e-12 is lost and a "
        "constant row gives rstd = inf, y = NaN)",
        GH + "deepspeedai/DeepSpeed/issues/581 (layernorm kernel: epsilon added to the variance, then the "
        "variance converted to float16, which loses eps)"),
    "ln_bwd_rstd_without_eps": (
        "layer_norm", "eps",
        "the backward recomputes rstd from the saved variance as 1 / sqrt(var), without eps",
        "pattern: a backward kernel recomputing the statistics instead of loading the saved rstd"),
    "ln_bwd_sums_across_row_block": (
        "layer_norm", "block",
        "the backward handles blocks of 4 rows per program and its sums of g and g * x_hat run over the whole "
        "2-D block (every row of the block) instead of each row",
        GH + "flagos-ai/FlagGems/pull/59 (layer_norm_backward_kernel wrong with BLOCK_ROW_SIZE > 1: tl.sum over "
        "the 2-D tile instead of axis=1)"),
    "ln_mean_last_column_block": (
        "layer_norm", "block",
        "the mean's accumulator re-initialised inside the loop over column blocks of 64: the mean is the last "
        "block's sum divided by N (rows of at most 64 values are right)",
        "pattern: _sum = tl.zeros(...) placed inside the for-loop over column blocks"),
    "ln_param_grads_swapped": (
        "layer_norm", None,
        "the weight's and the bias's gradients returned in each other's place",
        GH + "Oneflow-Inc/oneflow/pull/6149 (LayerNorm backward: the weight and bias gradients assigned the "
        "wrong way round, 'fix backward index for gamma beta')"),
    "ln_weight_column_major": (
        "layer_norm", "layout",
        "a multi-axis normalized_shape: weight and bias flattened in column-major (Fortran) order while x's "
        "normalized axes are row-major",
        "pattern: a parameter made contiguous with a transposed stride (weight.t().contiguous())"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_dx_without_weight": (
        "rms_norm", "backward",
        "dx = rstd * (dy - x_hat * mean(dy * x_hat)): the weight left out of g (dweight is right)",
        GH + "karpathy/llm.c/pull/763 (review: 'I forgot to multiply by the weight in the backward pass' of "
        "an RMSNorm)"),
    "rms_rsqrt_estimate_one_newton": (
        "rms_norm", "precision",
        "float32 compute: rstd from an 8-bit hardware reciprocal-square-root estimate (NEON vrsqrteq_f32) "
        "refined by a single Newton step, r (1.5 - 0.5 v r^2) (relative error about 2^-16), instead of a "
        "correctly rounded 1 / sqrt",
        GH + "Tencent/ncnn/pull/6903 (layernorm/rmsnorm: the hardware rsqrt estimate refined by too few "
        "Newton-Raphson steps, now 2); cf. ohdearquant/lattice/pull/232 (vrsqrteq_f32: one step ~2^-16.5, "
        "two needed) and blue-oil/blueoil/issues/81"),
    "rms_eps_added_to_sum": (
        "rms_norm", "eps",
        "rstd = sqrt(N) / sqrt(sum(x^2) + eps): eps added to the sum of squares instead of to their mean "
        "(the effective eps is eps / N)",
        "pattern: rsqrt(tl.sum(x * x) + eps) * sqrt(N) to save a division"),
    # ------------------------------------------------------------------ add_norm
    "an_residual_out_undropped": (
        "add_norm", "dropout",
        "residual_out = x (+ x1) + residual with x and x1 before dropout (and the rowscale), while the norm "
        "reads the dropped sum",
        "pattern: residual_out stored from the loaded x before the keep-mask is applied"),
    "an_x1_dropped_with_mask": (
        "add_norm", "dropout",
        "the parallel input x1 dropped with x's keep-mask (mask) instead of its own (mask1)",
        "pattern: one mask pointer passed for both branches of a parallel-residual dropout-add-norm"),
    "an_dweight1_from_dy": (
        "add_norm", "backward",
        "weight1 and bias1's gradients summed from the cotangent of y (dy) instead of that of y1 (dy1)",
        "pattern: the parallel branch's parameter reductions fed the first branch's cotangent"),
    "an_rms_bwd_centred": (
        "add_norm", "backward",
        "norm='rms_norm': the backward is LayerNorm's centred formula (the -mean(g) term included)",
        "pattern: the IS_RMS_NORM constexpr honoured in the forward only"),
    # ------------------------------------------------------------------ norm_quant
    "nq_static_scale_multiplied": (
        "norm_quant", "quant_scale",
        "static quantization: q = y * static_scale (the scale taken as the inverse scale) instead of "
        "y / static_scale",
        GH + "vllm-project/vllm/pull/36297 (review: the static fp8 kernels treated the scale as the inverted "
        "scale, multiplying instead of dividing)"),
    "nq_int8_scale_over_128": (
        "norm_quant", "quant_scale",
        "int8 dynamic scale = amax / 128 (the full range's magnitude) while the values are clipped to 127",
        "cf. " + GH + "IntelLabs/distiller/pull/463 (symmetric int8: the scale computed for one range and the "
        "saturation done for the other)"),
    "nq_fp8_via_float16": (
        "norm_quant", "rounding",
        "float8 outputs: y / scale converted to float16 first and then to float8 (two roundings: a value just "
        "above an fp8 midpoint can land on it and round to the even neighbour below)",
        GH + "triton-lang/triton/pull/2583 (prevent double rounding when doing f32 -> fp8); "
        "cf. triton-lang/triton/pull/10846 (the fp32 -> fp8 conversion through an f16 intermediate removed)"),
    "nq_scale_ub_on_amax": (
        "norm_quant", "quant_scale",
        "scale_ub applied to the amax before the division: scale = min(amax, scale_ub) / qmax instead of "
        "min(amax / qmax, scale_ub)",
        "cf. " + GH + "vllm-project/vllm/blob/main/csrc/quantization/fused_kernels/layernorm_utils.cuh "
        "(compute_dynamic_per_token_symmetric_quant_qparams: scale = min(absmax, *scale_ub) / qmax, the other "
        "convention, ported)"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_mean_g_unweighted": (
        "group_norm", "backward",
        "the backward's mean(g) term computed from dy instead of g = dy * weight (the other terms use g)",
        "pattern: the row sum of dy reused from the dbias reduction"),
    "gn_channel_partials_in_half": (
        "group_norm", "precision",
        "16-bit inputs: the group statistics merged from per-channel partials (mean_c and the sum of squared "
        "deviations M2_c) stored in the input dtype",
        "cf. " + GH + "NVIDIA/apex/pull/144 (normalization moments kept in half precision 'hurts the accuracy "
        "of the moment estimators'); pattern: a two-kernel GroupNorm's partial buffer in x's dtype"),
    "gn_stats_group_major": (
        "group_norm", "layout",
        "mean and rstd written at index g * N + n (group-major) into the (N, G) buffers",
        "pattern: the statistics' store offset computed with the grid's axes swapped"),
    # ------------------------------------------------------------------ gated_norm
    "gated_silu_in_input_dtype": (
        "gated_norm", "precision",
        "silu(z) evaluated on the 16-bit z and rounded to the input dtype before the float32 product "
        "(two roundings)",
        "cf. " + GH + "sgl-project/sglang/pull/26473 (silu_and_mul: the gate cast to the input dtype before the "
        "product, moved after it) and vllm-project/vllm/pull/18500 (Mixer2RMSNormGated keeps silu(gate) in fp32)"),
    "gated_bias_after_gate": (
        "gated_norm", "affine",
        "norm_before_gate=True: y = (x_hat * w) * silu(z) + bias instead of (x_hat * w + bias) * silu(z)",
        "pattern: the epilogue's bias add placed after the gate's product"),
    "gated_ln_as_rms": (
        "gated_norm", "semantics",
        "norm='layer_norm' computed as an RMS norm (the mean never subtracted), forward and backward",
        "pattern: a gated RMSNorm kernel (Mamba2's) reused for the LayerNorm variant without its IS_RMS_NORM "
        "flag"),
    # ------------------------------------------------------------------ batch_norm
    "bn_fast_variance": (
        "batch_norm", "one_pass",
        "training: the batch variance as E[x^2] - E[x]^2 from one pass of float32 sums (clamped at 0)",
        GH + "tenstorrent/tt-metal/issues/45968 (batch_norm training: catastrophic cancellation of "
        "E[x^2] - E[x]^2); cf. keras-team/keras-core/pull/866 (Flax's use_fast_variance default)"),
    "bn_cumavg_count_before_increment": (
        "batch_norm", "running",
        "momentum=None: the cumulative-average factor 1 / num_batches_tracked taken from the count before its "
        "increment",
        "pattern: the factor computed before num_batches_tracked += 1"),
    "bn_train_output_from_new_running": (
        "batch_norm", "mode",
        "training with running statistics: y normalized with the just-updated running mean and var instead "
        "of the batch statistics (the saved mean and rstd are the batch's)",
        "cf. " + GH + "tenstorrent/tt-metal/pull/45578 (batch_norm updated the running statistics before the "
        "normalization, which then read the updated buffers; fixed by normalizing first)"),
    "bn_eval_folded_in_half": (
        "batch_norm", "precision",
        "eval with running statistics, 16-bit inputs: the folded per-channel scale w * rstd and shift "
        "b - mean * w * rstd rounded to the input dtype, then y = x * scale + shift",
        GH + "pytorch/TensorRT/pull/1450 (batch_norm converter: the folded scale and bias computed in fp16, "
        "'improve batch_norm fp16 accuracy' by computing them in float); cf. apple/coreai-torch/pull/54"),
    "bn_nostats_input_as_running_buffer": (
        "batch_norm", None,
        "training without running statistics: the kernel passes x itself as the running_mean / running_var "
        "scratch buffers, so the update overwrites x's first C elements before the normalization reads x "
        "again (those elements of y are wrong)",
        GH + "flagos-ai/FlagGems/issues/6332 (native_batch_norm mutates its input and gives wrong output when "
        "the running statistics are None; fixed by PR #6435)"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_sum_over_batch": (
        "instance_norm", "running",
        "the running statistics' update sums the instances' momentum terms over the batch instead of "
        "averaging them",
        "pattern: atomic_add of every (n, c) program's update into running[c]"),
    "in_weight_block_local_index": (
        "instance_norm", "layout",
        "channels handled in blocks of 2 per program, the affine parameters read at the block-local index: "
        "channel c takes weight[c % 2] and bias[c % 2]",
        "cf. " + GH + "tile-ai/tilelang-mlir-ascend/pull/106 (review: the norm example kernel read weight[i] and "
        "bias[i] with the block-local channel index instead of pid_c * block_c + i)"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_via_sigmoid": (
        "dyt", "precision",
        "tanh(alpha x) evaluated as 2 * sigmoid(2 alpha x) - 1 in float32 (cancellation for small arguments)",
        GH + "tinygrad/tinygrad/pull/107 (tanh = 2 * sigmoid(2x) - 1 matches torch.tanh to 6-7 digits "
        "only); cf. ROCm/triton/pull/910 (fast_tanhf reformulations)"),
    "dyt_dweight_summed_over_all": (
        "dyt", "reduction",
        "dweight and dbias summed over every element (one scalar broadcast to each channel) instead of over "
        "the rows per channel",
        "cf. " + GH + "nntrainer/nntrainer/issues/1202 (a layer's weight gradient reduced over the wrong axes); "
        "pattern: (dy * t).sum() without axis=0, broadcast into the (C,) gradient"),
    "dyt_dalpha_missing_x": (
        "dyt", "backward",
        "dalpha = sum(g * (1 - tanh^2(alpha x))): the factor x of d(alpha x)/d alpha left out",
        "pattern: the same sech^2 product reused for dx and dalpha"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_grad_sign_flipped": (
        "group_norm_silu", "backward",
        "the SiLU derivative as s * (1 - p * (1 - s)) instead of s * (1 + p * (1 - s))",
        "cf. " + GH + "sausheong/gonn/issues/8 (a sigmoid derivative written with '-' for the product: "
        "s - (1 - s) instead of s (1 - s)); pattern: a sign slip in a hand-derived silu'(p)"),
    "gns_gate_from_xhat": (
        "group_norm_silu", "affine",
        "y = p * sigmoid(x_hat): the gate's sigmoid taken of the normalized value before the affine, "
        "p = x_hat * w + b",
        "pattern: the activation reading the pre-affine register"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_emax_fixed_e4m3": (
        "norm_quant_block", "quant_scale",
        "mxfp8 floor rule: the element's largest exponent hard-coded to e4m3's 8 for float8_e5m2 elements too",
        "cf. " + GH + "kohya-ss/musubi-tuner/issues/192 (fp8 e5m2 scaling computed with the wrong format "
        "constant); pattern: an MX kernel written for e4m3 reused for e5m2 without its emax"),
    "nqb_nvfp4_encode_without_fp4_max": (
        "norm_quant_block", "quant_scale",
        "nvfp4: the tensor encode factor 448 / amax instead of 448 * 6 / amax (the FP4 maximum 6 left out)",
        "pattern: the global scale derived from the block scale's E4M3 range only"),
    "nqb_group_scale_in_input_dtype": (
        "norm_quant_block", "precision",
        "fp8_group (exact rule), 16-bit inputs: the block scale amax / qmax stored in the input dtype, and q "
        "divided by that rounded scale",
        "pattern: the scale tensor allocated with the activation's dtype (torch.empty(..., dtype=x.dtype))"),
    "nqb_amax_per_tensor": (
        "norm_quant_block", "quant_scale",
        "every block's amax (and scale) taken as the whole tensor's amax instead of the block's own",
        GH + "NVIDIA/Model-Optimizer/issues/193 (FP8 blockwise quantization fed the per-tensor amax as the "
        "block scales; fixed by PR #522, 'instead of using amax, compute block_scale on the fly')"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_dx_unmodulated": (
        "adaptive_layer_norm", "backward",
        "dx computed from g = dy instead of dy * (1 + scale)",
        "pattern: a LayerNorm backward without affine reused for adaLN"),
    "aln_gain_in_input_dtype": (
        "adaptive_layer_norm", "affine",
        "16-bit inputs: the gain 1 + scale computed in (rounded to) the input dtype before the float32 "
        "multiply, losing scale's low bits",
        "cf. " + GH + "NVIDIA/TransformerEngine/issues/789 (maintainer: DiT's x * (1 + scale) in BF16 loses "
        "precision, BF16 being precise near 0, not near 1)"),
    "aln_stats_over_tokens": (
        "adaptive_layer_norm", "semantics",
        "the statistics taken per (sample, channel) over the tokens instead of per token over H, forward and "
        "backward (the saved per-token mean and rstd: the sample's channel averages of them)",
        "cf. " + GH + "jadore801120/attention-is-all-you-need-pytorch/pull/17 (a LayerNormalization computing "
        "mean and std along seq_len instead of the feature dimension)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_dweight_unnormalized": (
        "poly_norm", "backward",
        "dweight[k] = sum(dy * x^p) (the power before its normalization) instead of sum(dy * h_p)",
        "pattern: the loaded power reused for the weight gradient"),
    "poly_powers_centred": (
        "poly_norm", "semantics",
        "each power normalized as a LayerNorm (its row mean subtracted, divided by its standard deviation) "
        "instead of by its root mean square",
        "pattern: a LayerNorm helper called for the three normalizations"),
}


class Blind4Kernel(GroupNormPair, BlindKernelBase):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct);
    ``options``: see BlindKernelBase."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind4"
    options = dict.fromkeys(FUSED_OPTIONS)

    # ------------------------------------------------------------ shared row statistics (2-D: rows x n)
    _ln_stats, _rms_stats = staticmethod(ln_stats), staticmethod(rms_stats)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        off = weight_offset(call, acc)
        w, bias = call.inputs.get("weight"), call.inputs.get("bias")
        order = "F" if b == "ln_weight_column_major" else "C"
        w = None if w is None else w.astype(acc).reshape((1, N), order=order) + off
        bias = None if bias is None else bias.astype(acc).reshape((1, N), order=order)
        eps = _eps(call.config["eps"], acc)
        if b == "ln_mean_last_column_block" and N > 64:
            start = (N - 1) // 64 * 64                                   # the last column block
            mean = _rsum(x[:, start:]) / N
        else:
            mean = _rsum(x) / N
        xc = x - mean
        var = _rsum(xc * xc) / N
        ve = var + eps
        if b == "ln_var_eps_rounded_to_half":
            ve = _half(ve, d)
        rstd = 1 / np.sqrt(ve)
        xhat = xc * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            r = 1 / np.sqrt(var) if b == "ln_bwd_rstd_without_eps" else rstd
            xh = xc * r
            if b == "ln_bwd_sums_across_row_block":
                R = g.shape[0]

                def block_sums(t):                                     # each row: its 4-row block's sum
                    if R == 0:
                        return np.zeros((0, 1), acc)
                    sums = np.add.reduceat(_rsum(t).reshape(R), np.arange(0, R, 4))
                    return np.repeat(sums, 4)[:R].reshape(R, 1).astype(acc)
                dx = r * (g - block_sums(g) / N - xh * (block_sums(g * xh) / N))
            else:
                dx = _centred_dx(g, xh, r)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            dw = None if w is None else (dy * xhat).sum(axis=0).reshape(ns, order=order)
            db = None if bias is None else dy.sum(axis=0).reshape(ns, order=order)
            if b == "ln_param_grads_swapped" and dw is not None and db is not None:
                dw, db = db, dw
            if dw is not None:
                grads["weight"] = _store(dw, d)
            if db is not None:
                grads["bias"] = _store(db, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        placement = call.config.get("eps_placement", "inside")
        w, _ = row_weight_bias(call, acc, N, weight_offset(call, acc))
        eps = _eps(call.config["eps"], acc)
        if b == "rms_rsqrt_estimate_one_newton" and acc is np.float32 and placement != "outside":
            ms = _rsum(x * x) / N
            rms = np.sqrt(ms)
            v = ms + eps
            m, e = np.frexp(1 / np.sqrt(v))
            r0 = np.ldexp(np.floor(m * 2.0 ** 9) / 2.0 ** 9, e).astype(acc)       # an 8-bit estimate
            rstd = r0 * (acc(1.5) - acc(0.5) * v * r0 * r0)
        elif b == "rms_eps_added_to_sum" and placement != "outside":
            ss = _rsum(x * x)
            rms = np.sqrt(ss / N)
            rstd = np.sqrt(acc(N)) / np.sqrt(ss + eps)
        else:
            rms, rstd = self._rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), None if b == "rms_bwd_dx_without_weight" else w)
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            grads.update(row_param_grads(dy, xhat, w, None, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        """(out, grads) of group_norm, or of group_norm_silu when ``silu``."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "gn_channel_partials_in_half" and d in ("float16", "bfloat16") and S > 0:
            xc = x.reshape(Nb * C, S)
            mc = _rsum(xc) / S
            dc = xc - mc
            m2 = _half(_rsum(dc * dc), d).reshape(Nb * G, cg)
            mc = _half(mc, d).reshape(Nb * G, cg)
            mean = mc.mean(axis=1, keepdims=True)
            var = (m2.sum(axis=1, keepdims=True) + S * _rsum((mc - mean) ** 2)) / (cg * S)
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean, rstd = self._ln_stats(xv, eps)
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        y = p
        if silu:
            s, _ = _sigmoids(xhat if b == "gns_gate_from_xhat" else p)
            y = p * s
        if b == "gn_stats_group_major":
            ms, rs = mean.reshape(Nb, G).T.reshape(Nb, G), rstd.reshape(Nb, G).T.reshape(Nb, G)
        else:
            ms, rs = mean.reshape(Nb, G), rstd.reshape(Nb, G)
        out = group_outputs(y, ms, rs, x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            if silu:
                if b == "gns_gate_from_xhat":                    # d(p * sig(xhat)) by the chain rule
                    s, rest = _sigmoids(xhat)
                    dp, dxh_extra = dy * s, dy * p * s * rest
                else:
                    s, rest = _sigmoids(p)
                    sign = -1 if b == "gns_silu_grad_sign_flipped" else 1
                    dp, dxh_extra = dy * (s * (1 + sign * p * rest)), None
            else:
                dp, dxh_extra = dy, None
            g = dp if w is None else dp * w
            if dxh_extra is not None:
                g = g + dxh_extra
            g = g.reshape(Nb * G, cg * S)
            xh = xhat.reshape(Nb * G, cg * S)
            if b == "gn_bwd_mean_g_unweighted":
                dpr = dp.reshape(Nb * G, cg * S)
                n = cg * S
                dx = rstd * (g - _rsum(dpr) / n - xh * (_rsum(g * xh) / n))
            else:
                dx = _centred_dx(g, xh, rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            grads.update(group_param_grads(dp * xhat, dp, w, bias, C, d))
        return out, grads

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        if b == "bn_nostats_input_as_running_buffer" and call.training and not has_run and n > 0:
            mean, rstd = self._ln_stats(x, eps)
            m = acc(0.1 if cfg["momentum"] is None else cfg["momentum"])
            bv = _rsum((x - mean) ** 2) / n
            ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
            flat = x0.astype(acc).reshape(-1).copy()               # x in memory, overwritten in place
            k = min(C, flat.size)
            flat[:k] = (1 - m) * flat[:k] + m * mean.reshape(C)[:k]
            flat[:k] = (1 - m) * flat[:k] + m * ub.reshape(C)[:k]
            x_read = channel_rows(flat.reshape(x0.shape), acc)     # what the normalization pass reads
            xhat_y = (x_read - mean) * rstd
        elif batch and b == "bn_fast_variance":
            mean = _rsum(x) / n
            var = np.maximum(_rsum(x * x) / n - mean * mean, 0)
            rstd = 1 / np.sqrt(var + eps)
        elif batch:
            mean, rstd = self._ln_stats(x, eps)
        else:
            mean, rstd = channel_running_stats(st, C, eps, acc)
        xhat = (x - mean) * rstd
        w, bias = channel_params(call.inputs, acc, C)
        folded = None
        if b == "bn_eval_folded_in_half" and not batch and d in ("float16", "bfloat16"):
            sc = _half(rstd if w is None else w * rstd, d)
            sh = _half(-mean * sc if bias is None else bias - mean * sc, d)
            folded = x * sc + sh
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                mom = cfg["momentum"]
                if mom is None and b == "bn_cumavg_count_before_increment":
                    m = acc(1.0 / float(nbt)) if nbt > 0 else acc(np.inf)
                nbt = nbt + 1
                if mom is not None:
                    m = acc(mom)
                elif b != "bn_cumavg_count_before_increment":
                    m = acc(1.0 / float(nbt))
                rm, rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc)
                if b == "bn_train_output_from_new_running":
                    xhat = (x - rm.reshape(C, 1)) / np.sqrt(rv.reshape(C, 1) + eps)
            state = running_state(rm, rv, nbt, d)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        if folded is not None:
            out["y"] = _store(from_channel_rows(folded, x0.shape), d)
        if b == "bn_nostats_input_as_running_buffer" and call.training and not has_run and n > 0:
            out["y"] = _store(from_channel_rows(affine(xhat_y, w, bias), x0.shape), d)
        grads = {}
        if "y" in call.cotangents:
            dy, g = channel_dy_and_g(call, acc, w)
            dx = _centred_dx(g, xhat, rstd) if batch else g * rstd
            grads = channel_grads(dx, dy, xhat, w, bias, x0.shape, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        cfg, st, eps, has_run = running_setup(call, acc)
        inst = call.training or not has_run
        mean, rstd, xhat = instance_stats(x, st, Nb, eps, acc, inst)
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        if b == "in_weight_block_local_index":
            local = np.arange(C) % 2                             # the channel's index within its block
            wr = None if w is None else per_instance(w.astype(acc)[local], Nb)
            br = None if bias is None else per_instance(bias.astype(acc)[local], Nb)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                m = instance_momentum_value(cfg, acc)
                mi = mean
                ub = instance_unbiased_var(x, mi, acc)
                if b == "in_running_sum_over_batch":
                    rm = (1 - m) * rm + (m * mi.reshape(Nb, C)).sum(axis=0)
                    rv = (1 - m) * rv + (m * ub.reshape(Nb, C)).sum(axis=0)
                else:
                    rm, rv = instance_running_update(rm, rv, m, mi, ub, Nb, C)
            state = running_state(rm, rv, nbt, d)
        return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, inst, acc), state)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        nbg = bool(cfg["norm_before_gate"])
        norm = "rms_norm" if b == "gated_ln_as_rms" else cfg["norm"]
        s, ds = silu_gate(z)
        if b == "gated_silu_in_input_dtype":
            s = _half(s, d)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        mean, rstd = gated_stats(vg, _eps(cfg["eps"], acc), norm, self._ln_stats)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        late_bias = nbg and bias is not None and b == "gated_bias_after_gate"
        nrm = vhat * w if (bias is None or late_bias) else vhat * w + bias
        y = nrm * s if nbg else nrm
        if late_bias:
            y = y + bias
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            dv = gated_dx(norm, g, vhat.reshape(-1, K), rstd).reshape(R, H)
            dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
            db_from = None if bias is None else (dy if late_bias else dn)
            grads = gated_grads(dx, dz, dn, db_from, vhat, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_via_sigmoid":
            sg, _ = _sigmoids(acc(2) * (a * x))
            t = acc(2) * sg - acc(1)
        y = affine(t, w, bias)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(x.shape)
            gd = dyt_gd(dy, w, a, x)
            grads["x"] = _store((gd * a).reshape(x0.shape), d)
            da = _rsum(gd if b == "dyt_dalpha_missing_x" else gd * x).sum()
            grads["alpha"] = _store(np.reshape(da, np.shape(inp["alpha"])), d)
            for k, t_ in (("weight", dy * t), ("bias", dy)):
                if (w if k == "weight" else bias) is None:
                    continue
                v = t_.sum(axis=0)
                if b == "dyt_dweight_summed_over_all":
                    v = np.full(v.shape, t_.sum(), acc)
                grads[k] = _store(v, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        powers = (3, 2, 1)
        us = [x ** p for p in powers]
        if b == "poly_powers_centred":
            us = [u - _rsum(u) / H for u in us]
        hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            du = _centred_dx if b == "poly_powers_centred" else rms_dx
            src = [x ** p for p in powers] if b == "poly_dweight_unnormalized" else None
            grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du, dw_from=src)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        if b == "nqb_mx_emax_fixed_e4m3" and fmt == "mxfp8":
            emax = 8
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        yb, amax = padded_blocks(y, B, acc)                              # amax: (R, nb)
        if b == "nqb_amax_per_tensor":
            amax = np.full(amax.shape, np.max(amax, initial=0.0), acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            if b == "nqb_group_scale_in_input_dtype" and rule != "pow2":
                S = _half(S, call.dtype)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            gs = inp.get("global_scale")
            if b == "nqb_nvfp4_encode_without_fp4_max" and gs is None:
                g = acc(np.max(amax, initial=0.0))
                enc = acc(1.0) if g == 0 else acc(min(acc(448.0) / g, np.finfo(np.float32).max))
            else:
                enc = nvfp4_encode(gs, amax, acc)
            ts, S, scale_out = nvfp4_scales(amax, enc, acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        if b == "an_x1_dropped_with_mask" and mask1 is not None and mask is not None:
            mask1 = mask
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        s_out = s
        if b == "an_residual_out_undropped":
            s_out = x if x1 is None else x + x1
            s_out = s_out if res is None else s_out + res
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        _, rstd, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(s, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s_out, x0.shape, cfg, d)
        grads = {}
        if "y" in call.cotangents:
            centred = cfg["norm"] == "layer_norm" or b == "an_rms_bwd_centred"
            ds, dy, dy1 = add_norm_ds(call, xhat, rstd, centred, we, we1, cfg["prenorm"], acc)
            dyp = dy if (b == "an_dweight1_from_dy" and dy1 is not None) else dy1
            grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dyp, xhat, (w, bias, w1, b1),
                                   x, mask, keep, p, ns, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, eps)
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        else:
            qmax = acc(128.0) if (b == "nq_int8_scale_over_128" and qdt.kind == "i") else acc(hi)
            ub = cfg["scale_ub"]
            if ub is not None and b == "nq_scale_ub_on_amax":
                scale = np.minimum(amax, acc(ub)) / qmax
            else:
                scale = amax / qmax
                if ub is not None:
                    scale = np.minimum(scale, acc(ub))
            scale = scale_floor(scale, cfg, hi, acc)
        if static is not None and b == "nq_static_scale_multiplied":
            v = np.clip(y * scale, lo, hi)
        else:
            v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_fp8_via_float16" and qdt.kind != "i":
            q = v.astype(np.float16).astype(qdt)
        else:
            q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)     # T: tokens per sample
        eps = _eps(call.config["eps"], acc)
        if b == "aln_stats_over_tokens" and B and T:
            xt = np.ascontiguousarray(x.reshape(B, T, H).transpose(0, 2, 1)).reshape(B * H, T)
            mt, rt = self._ln_stats(xt, eps)
            xhat = ((xt - mt) * rt).reshape(B, H, T).transpose(0, 2, 1).reshape(-1, H)
            mean = np.repeat(mt.reshape(B, H).mean(axis=1), T).reshape(-1, 1)   # a per-token view of them
            rstd = np.repeat(rt.reshape(B, H).mean(axis=1), T).reshape(-1, 1)
        else:
            mean, rstd = self._ln_stats(x, eps)
            xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        if gain is not None and b == "aln_gain_in_input_dtype":
            gain = _half(gain, d)
        y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, H), None if b == "aln_dx_unmodulated" else gain)
            if b == "aln_stats_over_tokens" and B and T:
                def tok(a):                                 # (B * T, H) -> (B * H, T)
                    return np.ascontiguousarray(a.reshape(B, T, H).transpose(0, 2, 1)).reshape(B * H, T)
                dx = _centred_dx(tok(g), tok(xhat), rt).reshape(B, H, T).transpose(0, 2, 1)
            else:
                dx = _centred_dx(g, xhat, rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if scale is not None:
                grads["scale"] = _store(per_sample(dy * xhat, B, T, H), d)
            if shift is not None:
                grads["shift"] = _store(per_sample(dy, B, T, H), d)
        return Returned(out, grads)
