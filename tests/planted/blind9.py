"""A ninth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind9Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its
correct arithmetic is tests/planted/blind8.py's (the class derives from ``Blind8Kernel``, whose own planted
branches, and those of the earlier sets, are keyed on their names and never taken here) and
tests/planted/_blind_math.py's. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Each bug is planted in an override of the op's method here, where a
kernel author would make it.

``Blind9Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind8.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_rows, add_norm_sum, affine, aln_inputs, centred_dx as _centred_dx,
                          channel_rows, dy_and_g, dyt_grads, dyt_inputs, eps_value as _eps,
                          from_channel_rows, gate_group_size, gated_dn, gated_dx, gated_dx_dz, gated_grads,
                          gated_inputs, gated_normalize, group_outputs, group_param_grads, group_params, group_rows,
                          group_scales, half as _half, instance_momentum_value, instance_rows, instance_unbiased_var,
                          kept, ln_rows, ln_stats, mx_scales, normalized_rows, nqb_format, nqb_normalized,
                          nqb_quantized, nqb_returned, nvfp4_encode, nvfp4_scales, padded_blocks, per_token,
                          poly_combine, poly_grads, poly_inputs, poly_normalize, QUANT as _QUANT, block_quotients,
                          quant_quotients, quantize, dynamic_scale, norm_quant_returned, rms_dx,
                          rms_rows, rms_stats, row_affine, row_param_grads, rsum as _rsum, running_in, running_state,
                          bn_momentum, sigmoids as _sigmoids, stat_shape, store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind8 import Blind8Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind9Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_eps_cast_to_input_dtype": (
        "layer_norm", "eps",
        "16-bit inputs: eps converted to the input dtype before it is added to the float32 variance (bfloat16: "
        "0.3 becomes 0.30078; float16: 1e-12 becomes 0), forward and backward",
        "cf. " + GH + "pytorch/pytorch/issues/86580 (a LayerNorm's small eps exported as 0.0 in fp16 mode)"),
    "ln_dweight_partial_reset_per_block": (
        "layer_norm", "reduction",
        "dweight and dbias: two programs stride over blocks of 64 rows (pid, pid + 2, ...) with the partial "
        "accumulator initialised inside the block loop: each program keeps only its last block's partial",
        "cf. " + GH + "tenstorrent/tt-metal/pull/34760 (a LayerNorm backward accumulation where only the last tile "
        "contributed to the sum)"),
    "ln_bwd_float64_in_float32": (
        "layer_norm", "precision",
        "float64 inputs: the backward (dx, dweight, dbias) computed in float32 arithmetic (the forward in float64)",
        "cf. " + GH + "google/flax/issues/612 (a LayerNorm casting its input to float32 regardless of the dtype)"),
    "ln_mean_output_times_rstd": (
        "layer_norm", None,
        "the saved mean is mean * rstd (the shift of the FMA y = x * rstd - mean * rstd) instead of the mean; y, "
        "rstd and the gradients right",
        "pattern: the FMA's precomputed shift term stored to the mean output"),
    # ------------------------------------------------------------------ rms_norm
    "rms_last_column_masked_out": (
        "rms_norm", "block",
        "eps inside: the sum of squares loaded with the mask cols < N - 1 (off by one): the last column never "
        "enters mean(x^2) (still divided by N), every column normalized by that rstd; the backward's formula on "
        "it",
        "pattern: an off-by-one column mask in the statistics loop"),
    "rms_noweight_reads_x_as_weight": (
        "rms_norm", "layout",
        "no weight: the kernel's weight pointer given x's buffer, so y = x_hat * x[first row] (the weight "
        "gradient not returned, dx with g = dy * that row)",
        "pattern: an absent parameter's pointer replaced by another input's data pointer"),
    "rms_dweight_tree_drops_odd_row": (
        "rms_norm", "reduction",
        "dweight = sum over rows of dy * x_hat by a pairwise tree that halves the row count each level and "
        "drops the last partial whenever the count is odd",
        "cf. " + GH + "modular/modular/issues/340 (a halving reduce_add that returns a wrong sum for odd lengths)"),
    # ------------------------------------------------------------------ add_norm
    "an_dweight_from_dy_plus_dy1": (
        "add_norm", "backward",
        "with the parallel branch y1: weight's and bias's gradients summed from dy + dy1 (the shared "
        "normalization's combined cotangent) instead of dy alone (dx, weight1's and bias1's gradients right)",
        "pattern: the combined cotangent buffer reused for the first branch's parameter gradients"),
    "an_dresidual_is_dy": (
        "add_norm", "backward",
        "the residual's gradient written as dy (plus residual_out's cotangent with prenorm), as if the residual "
        "skipped to y, instead of the normalization's input gradient ds",
        "cf. " + GH + "Dao-AILab/quack/pull/52 (an RMSNorm returning the wrong residual gradient when there is no "
        "residual_out)"),
    "an_keep_scale_from_mask_density": (
        "add_norm", "dropout",
        "the kept values scaled by 1 / mean(mask) (the realised keep rate of the given mask) instead of "
        "1 / (1 - p), forward and backward",
        "cf. " + GH + "lmjohns3/theanets/pull/123 (dropout rescaled by the wrong factor)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_int8_default_floor_from_e4m3": (
        "norm_quant", "quant_scale",
        "int8, min_scale not given: the dynamic scale's default floor taken as 1 / (448 * 512) (float8_e4m3fn's "
        "largest value) instead of 1 / (127 * 512)",
        "pattern: the default floor computed from the fp8 path's constant"),
    "nq_absent_scale_ub_loaded_as_zero": (
        "norm_quant", "quant_scale",
        "dynamic scale without a scale_ub: the missing upper bound loaded as 0, so min(amax / qmax, 0) = 0 is "
        "raised to the floor: every row's scale is the floor and q saturates",
        "cf. " + GH + "guoqingbao/attention.rs/pull/93 (an optional scale pointer passed as null and read "
        "unconditionally)"),
    "nq_quant_pass_reads_first_row_scale": (
        "norm_quant", "quant_scale",
        "dynamic scale: the quantizing pass loads the scale with a row stride of 0 (the per-tensor static "
        "path's load): every row divided by row 0's scale; the scale and amax outputs right",
        "pattern: a per-row buffer read through the per-tensor (stride 0) load"),
    # ------------------------------------------------------------------ group_norm
    "gn_bwd_ds_not_centred": (
        "group_norm", "backward",
        "the backward's projection term from sum(g * x) instead of sum(g * (x - mean)) (the db * mean "
        "correction of the ds/db formulation dropped): dx = rstd (g - mean(g) - x_hat rstd mean(g x))",
        "cf. " + GH + "BVLC/caffe/issues/4110 (a normalization backward's formula questioned for a missing mean "
        "term)"),
    "gn_stats_of_groups_first_channel": (
        "group_norm", "group",
        "each group's mean and variance taken over its first channel only (the channel loop's bound c < c0 + 1), "
        "applied to every channel of the group, forward and backward",
        "pattern: a loop bound covering one channel of the group"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_silu_input_clamped": (
        "group_norm_silu", None,
        "the SiLU's input clamped to [-10, 10] before exp (to avoid its overflow): y = silu(clamp(p)) and the "
        "backward's silu' at the clamped value",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/37 (a sigmoid kernel clamping its input range to avoid exp "
        "overflow)"),
    "gns_bwd_sums_over_all_groups": (
        "group_norm_silu", "group",
        "the backward's mean(g) and mean(g * x_hat) taken over the whole sample (every group) instead of each "
        "group (each group's own rstd kept)",
        "pattern: the backward's reduction launched with one group per sample"),
    # ------------------------------------------------------------------ gated_norm
    "gated_normed_rounded_before_gate": (
        "gated_norm", "precision",
        "norm_before_gate=True, 16-bit inputs: the normalized value x_hat * w + b rounded to the input dtype "
        "before it is multiplied by silu(z) (two roundings of y); the gradients right",
        "pattern: the norm's output stored in the activation dtype, then gated"),
    "gated_sigmoid_exp_overflow": (
        "gated_norm", "gate",
        "the gate's sigmoid computed as exp(z) / (1 + exp(z)): NaN once exp(z) overflows (z > 88 in float32), "
        "forward and backward",
        "cf. " + GH + "antirez/ds4/pull/498 (a naive SiLU producing NaN on a large-magnitude gate)"),
    "gated_dweight_vhat_ungrouped": (
        "gated_norm", "group",
        "with group_size: dweight recomputes the normalized value with one group over the whole row (group_size "
        "not passed to the weight-gradient kernel); dx and dz right",
        "pattern: an option not forwarded to a second kernel"),
    # ------------------------------------------------------------------ batch_norm
    "bn_train_bwd_rstd_from_running": (
        "batch_norm", "mode",
        "training with running statistics: the backward's rstd taken from the (just updated) running_var, "
        "1 / sqrt(running_var + eps), and x_hat from it (dx, dweight); y and the saved statistics right",
        "cf. " + GH + "torch/nn/pull/768 (a BatchNormalization backward's saved batch statistics confused with the "
        "running ones)"),
    # labelled block by its author; relabelled merge in session 22: docs/verdicts.md rule 14 names partials
    # merged with counts not weighted "within a kernel" (rule 9 now says so of a block's partials)
    "bn_cta_partials_merged_unweighted": (
        "batch_norm", "merge",
        "batch statistics: each channel reduced in chunks of 64 values whose (mean, variance) partials are merged "
        "with equal weights, as if every chunk were full (the last one is not), forward, backward and running "
        "update",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count Welford merge, valid only when every partial "
        "has the same count)"),
    "bn_running_mean_of_output": (
        "batch_norm", "running",
        "training: running_mean updated with the per-channel mean of the output y instead of the batch mean",
        "pattern: the running update fed the wrong tensor"),
    # ------------------------------------------------------------------ instance_norm
    "in_running_updated_per_sample_in_turn": (
        "instance_norm", "running",
        "training: the running statistics updated once per sample in turn, r = (1 - m) r + m stat_n for n = 0, "
        "1, ..., instead of once with the mean of the instances' momentum terms",
        "pattern: batch norm's running update called in a loop over the samples"),
    "in_bwd_means_over_s_minus_1": (
        "instance_norm", "bessel",
        "training backward: mean(g) and mean(g * x_hat) divide the sums over the instance by S - 1 instead of S",
        "pattern: the unbiased count of the running update reused in the backward"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_exp_formula_overflows": (
        "dyt", None,
        "tanh(v) computed as (exp(2v) - 1) / (exp(2v) + 1): NaN once exp(2v) overflows (v > 44 in float32), "
        "forward and backward",
        "cf. " + GH + "triton-lang/triton/pull/8551 (fast_tanhf's exp formula overflowing to NaN)"),
    "dyt_dalpha_without_sech2": (
        "dyt", "backward",
        "dalpha = sum(g * x): the factor 1 - tanh^2(alpha x) left out of alpha's gradient (dx right)",
        "pattern: a chain-rule factor dropped in one reduction"),
    "dyt_bias_indexed_by_row": (
        "dyt", "layout",
        "the bias read at the row index (bias[r % C]) instead of the column's; dbias right",
        "cf. " + GH + "kraiskil/onnx2c/issues/7 (a bias addition indexed along the wrong dimension)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_fp4_elements_truncated": (
        "norm_quant_block", "rounding",
        "nvfp4: the elements y / scale converted to float4_e2m1 by truncation toward zero (the representable "
        "magnitude below) instead of round to nearest even",
        GH + "tile-ai/tilelang/pull/1580 (fp4 conversions changed from truncation to nearest rounding)"),
    "nqb_stats_per_quant_block": (
        "norm_quant_block", "group",
        "the normalization's statistics taken over each quantization block (the tile the kernel loads) instead "
        "of the whole row, then quantized",
        "pattern: a row statistic reduced over the tile only"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_bwd_gain_without_one": (
        "adaptive_layer_norm", "affine",
        "with a scale: the backward's g = dy * scale instead of dy * (1 + scale) (the forward right)",
        "pattern: the gain's 1 + left out of the hand-written backward"),
    "aln_xhat_rounded_before_modulation": (
        "adaptive_layer_norm", "precision",
        "16-bit inputs: x_hat rounded to the input dtype (an unfused layer norm) before the modulation x_hat * "
        "(1 + scale) + shift",
        "cf. " + GH + "NVIDIA/TensorRT-LLM/pull/17987 (a layernorm + shift/scale fusion's math bumped to FP32)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_cube_of_abs": (
        "poly_norm", None,
        "x^3 computed as |x|^3 (a pow through exp(3 log |x|)), forward and backward",
        "cf. " + GH + "luminal-ai/luminal/pull/491 (pow read the base through abs: odd powers lost their sign)"),
    "poly_bias_added_per_power": (
        "poly_norm", "affine",
        "the scalar bias added to each of the three power terms (3 bias), and its gradient 3 sum(dy)",
        "pattern: the bias inside the per-power loop"),
    "poly_bwd_chain_at_normalized_x": (
        "poly_norm", "backward",
        "dx: the chain factor p x^(p - 1) of each power evaluated at the normalized x (x * rstd) instead of x",
        "pattern: the saved normalized activation reused for the chain rule"),
    # ------------------------------------------------------------------ z_score
    "zs_dim_rows_by_plain_reshape": (
        "z_score", "layout",
        "dim not the last axis: x taken as rows of n by a plain reshape(-1, n) (dim never moved last), "
        "statistics, y and dx over those rows, the statistics written in row order",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a normalization backward hard-coding a 2-D view of its "
        "input)"),
    "zs_bwd_dx_not_divided_by_std": (
        "z_score", "backward",
        "dx = g - mean(g) - x_hat mean'(g x_hat): the final division by std left out",
        "pattern: a scale factor lost in the backward"),
    "zs_ddof_sign_flipped": (
        "z_score", "bessel",
        "the variance divides by n + ddof instead of n - ddof, forward and backward",
        "pattern: the correction's sign flipped"),
    "zs_var_one_pass": (
        "z_score", "one_pass",
        "the variance as (sum(x^2) - n mean^2) / (n - ddof) from one pass of sums (clamped at 0), forward and "
        "the backward on those statistics",
        "cf. " + GH + "gnuradio/volk/issues/290 (a stddev kernel's E[X^2] - E[X]^2 failing with NaN)"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_onnx_zero_slice_nan": (
        "lp_normalize", None,
        "zero_rule='onnx': y = x / ||x|| without the zero guard: an all-zero slice gives 0 / 0 = NaN, forward "
        "and backward",
        GH + "openvinotoolkit/openvino/issues/35887 (ONNX LpNormalization returning NaN on zero vectors)"),
    "lp_sum_in_input_dtype": (
        "lp_normalize", "precision",
        "16-bit inputs: sum |x|^p accumulated left to right in the input dtype (float16 overflows to inf, the "
        "norm inf and y 0), forward and backward",
        "cf. " + GH + "microsoft/onnxruntime/pull/32574 (LpNormalization's norm overflowing in the input's range)"),
    "lp_bwd_not_divided_by_norm": (
        "lp_normalize", "backward",
        "dx = dy - w sum(dy * u): the final division by the norm left out",
        "cf. " + GH + "zhreshold/mxnet-ssd/issues/48 (an L2Normalization backward dividing by the norm the wrong "
        "number of times)"),
}


def _with(call, config=None, inputs=None, cotangents=None):
    """``call`` with some config entries, inputs or cotangents replaced."""
    return dataclasses.replace(call, config={**call.config, **(config or {})},
                               inputs={**call.inputs, **(inputs or {})},
                               cotangents={**call.cotangents, **(cotangents or {})})


def _half_row_sums(a, d):
    """Row sums (rows, 1) of ``a`` accumulated left to right in the 16-bit ``d`` (lp_sum_in_input_dtype)."""
    t = np.zeros((a.shape[0], 1), a.dtype)
    for j in range(a.shape[1]):
        t = _half(t + _half(a[:, j:j + 1], d), d)
    return t


def _odd_dropping_tree(t):
    """The sum over axis 0 by a halving tree that drops the last partial of an odd count (rms_dweight_...)."""
    while t.shape[0] > 1:
        if t.shape[0] % 2:
            t = t[:-1]
        t = t[0::2] + t[1::2]
    return t[0] if t.shape[0] else np.zeros(t.shape[1:], t.dtype)


FP4_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])   # float4_e2m1's magnitudes
ROW_BLOCK, PROGRAMS = 64, 2                                       # ln_dweight_partial_reset_per_block
CHUNK = 64                                                        # bn_cta_partials_merged_unweighted
SILU_CLAMP = 10.0                                                 # gns_silu_input_clamped


class Blind9Kernel(Blind8Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind9"

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        eps0 = call.config["eps"]
        if b == "ln_eps_cast_to_input_dtype" and d in ("float16", "bfloat16") and eps0 is not None:
            return super()._layer_norm(_with(call, config={"eps": float(_store(np.float32(eps0), d))}), acc)
        r = super()._layer_norm(call, acc)
        if b == "ln_bwd_float64_in_float32" and d == "float64" and r.grads:
            return Returned(r.outputs, super()._layer_norm(call, np.float32).grads)
        ns, N, x = normalized_rows(call, acc)
        if b == "ln_mean_output_times_rstd" and N:
            mean = r.outputs["mean"].astype(acc)
            return Returned({**r.outputs, "mean": (mean * r.outputs["rstd"].astype(acc)).astype(acc)}, r.grads)
        R = x.shape[0]
        if b == "ln_dweight_partial_reset_per_block" and r.grads and R > PROGRAMS * ROW_BLOCK:
            _, _, xhat = ln_rows(x, _eps(eps0, acc))
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            nb = -(-R // ROW_BLOCK)
            last = [max(range(p, nb, PROGRAMS)) for p in range(PROGRAMS)]   # each program's last block
            keep = np.zeros(R, bool)
            for blk in last:
                keep[blk * ROW_BLOCK:(blk + 1) * ROW_BLOCK] = True
            w = call.inputs.get("weight")
            grads = dict(r.grads)
            grads.update(row_param_grads(dy[keep], xhat[keep], w, call.inputs.get("bias"), ns, d))
            return Returned(r.outputs, grads)
        return r

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        placement = call.config.get("eps_placement", "inside")
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "rms_noweight_reads_x_as_weight" and call.inputs.get("weight") is None and x.shape[0] and N:
            r = super()._rms_norm(_with(call, inputs={"weight": x0.reshape(-1, N)[0].reshape(ns)}), acc)
            return Returned(r.outputs, {k: v for k, v in r.grads.items() if k != "weight"})
        if b == "rms_last_column_masked_out" and placement != "outside" and N > 1:
            w0 = call.inputs.get("weight")
            w = None if w0 is None else w0.astype(acc).reshape(1, N) + weight_offset(call, acc)
            rstd = 1 / np.sqrt(_rsum(x[:, :N - 1] ** 2) / N + eps)
            xhat = x * rstd
            out = {"y": _store(affine(xhat, w, None).reshape(x0.shape), d),
                   "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
            grads = {}
            if "y" in call.cotangents:
                dy, g = dy_and_g(call, acc, (-1, N), w)
                grads["x"] = _store(rms_dx(g, xhat, rstd).reshape(x0.shape), d)
                grads.update(row_param_grads(dy, xhat, w, None, ns, d))
            return Returned(out, grads)
        r = super()._rms_norm(call, acc)
        if b == "rms_dweight_tree_drops_odd_row" and "weight" in r.grads and placement != "outside":
            _, rstd = rms_stats(x, eps, placement)
            dy = call.cotangents["y"].astype(acc).reshape(-1, N)
            dw = _odd_dropping_tree(dy * (x * rstd))
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(ns), d)})
        return r

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        p = float(cfg["dropout_p"] or 0.0)
        if b == "an_keep_scale_from_mask_density" and p and inp.get("mask") is not None:
            density = float(np.mean(inp["mask"].astype(np.float64)))
            if 0 < density:
                return super()._add_norm(_with(call, config={"dropout_p": 1.0 - density}), acc)
        r = super()._add_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        ns, N, R, _, keep, off = add_norm_dims(call, acc)
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        if b == "an_dresidual_is_dy" and inp.get("residual") is not None:
            dres = dy
            if cfg["prenorm"] and "residual_out" in call.cotangents:
                dres = dres + call.cotangents["residual_out"].astype(acc).reshape(R, N)
            return Returned(r.outputs, {**r.grads, "residual": _store(dres.reshape(inp["x"].shape), d)}, r.state)
        if (b == "an_dweight_from_dy_plus_dy1" and "y1" in call.cotangents and inp.get("weight1") is not None
                and inp.get("weight") is not None):
            x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
            c = kept(mask, rs, keep, p, (R, N), acc)
            s, _ = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
            _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(s, _eps(cfg["eps"], acc))
            dsum = dy + call.cotangents["y1"].astype(acc).reshape(R, N)
            grads = dict(r.grads)
            grads.update(row_param_grads(dsum, xhat, inp["weight"], inp.get("bias"), ns, d))
            return Returned(r.outputs, grads, r.state)
        return r

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        dynamic = inp.get("static_scale") is None
        if (b == "nq_int8_default_floor_from_e4m3" and dynamic and cfg["quant_dtype"] == "int8"
                and cfg["min_scale"] is None):
            return super()._norm_quant(_with(call, config={"min_scale": 1.0 / (448.0 * 512.0)}), acc)
        if b == "nq_absent_scale_ub_loaded_as_zero" and dynamic and cfg["scale_ub"] is None:
            return super()._norm_quant(_with(call, config={"scale_ub": 0.0}), acc)
        if b == "nq_quant_pass_reads_first_row_scale" and dynamic:
            x0 = inp["x"]
            ns, N, x = normalized_rows(call, acc)
            _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, _eps(cfg["eps"], acc))
            y = row_affine(xhat, inp.get("weight"), inp.get("bias"), acc)
            qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
            scale = dynamic_scale(amax, hi, cfg, acc)
            q = quantize(quant_quotients(y, scale[:1], lo, hi, acc), qdt)
            return norm_quant_returned(q, scale, amax, x0, ns, acc)
        return super()._norm_quant(call, acc)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b, cfg, inp = self.bug, call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        if b == "nqb_stats_per_quant_block":
            s, _ = nqb_normalized(inp, cfg, acc, self._ln_stats)
            return self._nqb_quantize(call, acc, s, self._blockwise_normalized(s, cfg, B, acc))
        if b == "nqb_fp4_elements_truncated" and fmt == "nvfp4":
            s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
            yb, amax = padded_blocks(y, B, acc)
            ts, S, scale_out = nvfp4_scales(amax, nvfp4_encode(inp.get("global_scale"), amax, acc), acc)
            q = np.clip(block_quotients(yb, S, acc), -qmax, qmax)
            mag = np.abs(q).astype(np.float64)
            idx = np.clip(np.searchsorted(FP4_GRID, mag, side="right") - 1, 0, len(FP4_GRID) - 1)
            qt = np.where(np.isnan(q), q, np.sign(q) * FP4_GRID[idx]).astype(acc)
            return nqb_returned(qt, qdt, scale_out, amax, ts, call, s, acc)
        return super()._norm_quant_block(call, acc)

    def _blockwise_normalized(self, s, cfg, B, acc):
        """nqb_stats_per_quant_block: s (rows, H) normalized per block of B columns (no weight, no bias)."""
        H = s.shape[1]
        eps = _eps(cfg["eps"], acc)
        y = np.empty_like(s)
        for j in range(0, H, B):
            blk = s[:, j:j + B]
            if cfg["norm"] == "layer_norm":
                mean, rstd = self._ln_stats(blk, eps)
                y[:, j:j + B] = (blk - mean) * rstd
            else:
                y[:, j:j + B] = blk * (1 / np.sqrt(_rsum(blk * blk) / blk.shape[1] + eps))
        return y

    def _nqb_quantize(self, call, acc, s, y):
        """norm_quant_block's quantization of the normalized y (rows, H) (weight and bias applied here)."""
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        H = y.shape[1]
        w, bias = inp.get("weight"), inp.get("bias")
        y = y if w is None else y * w.astype(acc).reshape(1, H)
        y = y if bias is None else y + bias.astype(acc).reshape(1, H)
        yb, amax = padded_blocks(y, B, acc)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:
            ts, S, scale_out = nvfp4_scales(amax, nvfp4_encode(inp.get("global_scale"), amax, acc), acc)
        return nqb_quantized(yb, S, qmax, qdt, scale_out, amax, ts, call, s, acc)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _group_norm(self, call, acc):
        b, d = self.bug, call.dtype
        if b == "gn_stats_of_groups_first_channel" and call.op == "group_norm":
            return self._gn_first_channel(call, acc)
        r = super()._group_norm(call, acc)
        if b == "gn_bwd_ds_not_centred" and call.op == "group_norm" and "x" in r.grads:
            x0 = call.inputs["x"]
            Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
            mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
            xhat = (xv - mean) * rstd
            w, _ = group_params(call.inputs, acc, C)
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            g = (dy if w is None else dy * w).reshape(xv.shape)
            n = xv.shape[1]
            dx = rstd * (g - _rsum(g) / n - xhat * (rstd * _rsum(g * xv) / n))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    def _gn_first_channel(self, call, acc):
        """gn_stats_of_groups_first_channel: each group's statistics over its first channel only."""
        d, x0 = call.dtype, call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        first = np.ascontiguousarray(x.reshape(Nb * G, cg, S)[:, 0, :])
        mean, rstd = ln_stats(first, _eps(call.config["eps"], acc))
        xhat = (xv - mean) * rstd
        w, bias = group_params(call.inputs, acc, C)
        out = group_outputs(affine(xhat.reshape(Nb, C, S), w, bias), mean.reshape(Nb, G), rstd.reshape(Nb, G),
                            x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            g = (dy if w is None else dy * w).reshape(xv.shape)
            grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)
            grads.update(group_param_grads(dy * xhat.reshape(Nb, C, S), dy, w, bias, C, d))
        return Returned(out, grads)

    def _group_norm_silu(self, call, acc):
        b, d = self.bug, call.dtype
        r = super()._group_norm_silu(call, acc)
        if b == "gns_silu_input_clamped":
            return self._gns_clamped(call, acc)
        if b != "gns_bwd_sums_over_all_groups" or "y" not in call.cotangents:
            return r
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        sg, rest = _sigmoids(p)
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        dp = dy * (sg * (1 + p * rest))
        g = dp if w is None else dp * w
        gs, xs = g.reshape(Nb, -1), xhat.reshape(Nb, -1)
        n = gs.shape[1]
        rs = np.repeat(rstd.reshape(Nb, G), cg * S, axis=1)
        dx = rs * (gs - _rsum(gs) / n - xs * (_rsum(gs * xs) / n))
        return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})

    def _gns_clamped(self, call, acc):
        """gns_silu_input_clamped: group_norm_silu with the SiLU's input clamped to [-10, 10]."""
        d, x0 = call.dtype, call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        mean, rstd = ln_stats(xv, _eps(call.config["eps"], acc))
        xhat = ((xv - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        pc = np.clip(affine(xhat, w, bias), acc(-SILU_CLAMP), acc(SILU_CLAMP))
        sg, rest = _sigmoids(pc)
        out = group_outputs(pc * sg, mean.reshape(Nb, G), rstd.reshape(Nb, G), x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dp = call.cotangents["y"].astype(acc).reshape(Nb, C, S) * (sg * (1 + pc * rest))
            g = dp if w is None else dp * w
            grads["x"] = _store(_centred_dx(g.reshape(xv.shape), xhat.reshape(xv.shape), rstd).reshape(x0.shape), d)
            grads.update(group_param_grads(dp * xhat, dp, w, bias, C, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        nbg = bool(cfg["norm_before_gate"])
        if b == "gated_sigmoid_exp_overflow":
            return self._gated_naive_sigmoid(call, acc)
        r = super()._gated_norm(call, acc)
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        sg, _ = _sigmoids(z)
        s = z * sg
        if b == "gated_normed_rounded_before_gate" and nbg and d in ("float16", "bfloat16") and K:
            _, _, nrm = gated_normalize(x, w, bias, _eps(cfg["eps"], acc), K, cfg["norm"], self._ln_stats)
            return Returned({**r.outputs, "y": _store((_half(nrm, d) * s).reshape(inp["x"].shape), d)}, r.grads)
        if "y" not in call.cotangents:
            return r
        dy = call.cotangents["y"].astype(acc).reshape(R, H)
        if b == "gated_dweight_vhat_ungrouped" and K and K < H:
            v = x if nbg else x * s
            _, vhat, _ = gated_normalize(v, w, bias, _eps(cfg["eps"], acc), H, cfg["norm"], self._ln_stats)
            dn = dy * s if nbg else dy
            return Returned(r.outputs, {**r.grads, "weight": _store((dn * vhat).sum(axis=0), d)})
        return r

    def _gated_naive_sigmoid(self, call, acc):
        """gated_sigmoid_exp_overflow: the gated norm with sigmoid(z) = exp(z) / (1 + exp(z))."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg = bool(cfg["norm_before_gate"])
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        e = np.exp(z)
        sg = e / (1 + e)
        s, ds = z * sg, sg * (1 + z * (1 - sg))
        v = x if nbg else x * s
        rstd, vhat, nrm = gated_normalize(v, w, bias, _eps(cfg["eps"], acc), K, cfg["norm"], self._ln_stats)
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            dv = gated_dx(cfg["norm"], g, vhat.reshape(-1, K), rstd).reshape(R, H)
            dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
            grads = gated_grads(dx, dz, dn, None if bias is None else dn, vhat, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        has_run = st.get("running_mean") is not None
        x0 = call.inputs["x"]
        batch = call.training or not has_run
        x = channel_rows(x0, acc)
        C, n = x.shape
        if b == "bn_cta_partials_merged_unweighted" and batch and n > CHUNK and n % CHUNK:
            return self._bn_chunks(call, acc, x, has_run)
        r = super()._batch_norm(call, acc)
        if b == "bn_train_bwd_rstd_from_running" and has_run and call.training and n and "x" in r.grads:
            w = None if call.inputs.get("weight") is None else call.inputs["weight"].astype(acc).reshape(C, 1)
            rstd = 1 / np.sqrt(r.state["running_var"].astype(acc).reshape(C, 1) + _eps(cfg["eps"], acc))
            xhat = (x - _rsum(x) / n) * rstd
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            grads = {**r.grads, "x": _store(from_channel_rows(_centred_dx(g, xhat, rstd), x0.shape), d)}
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            return Returned(r.outputs, grads, r.state)
        if (b == "bn_running_mean_of_output" and has_run and call.training and n
                and cfg["convention"] == "torch"):
            rm, rv, nbt = running_in(st, acc)
            m = bn_momentum(cfg["momentum"], nbt + 1, acc)
            ym = _rsum(channel_rows(r.outputs["y"], acc)).reshape(C) / n
            return Returned(r.outputs, r.grads, {**r.state, "running_mean": _store((1 - m) * rm + m * ym, d)})
        return r

    def _bn_chunks(self, call, acc, x, has_run):
        """bn_cta_partials_merged_unweighted: batch statistics merged from chunks of CHUNK values with equal
        weights (the planted bug), and the forward, backward and running update on them."""
        d, cfg, st = call.dtype, call.config, call.state
        x0 = call.inputs["x"]
        C, n = x.shape
        cms, cvs = [], []
        for j in range(0, n, CHUNK):
            m_j, r_j = ln_stats(x[:, j:j + CHUNK], acc(0))
            cms.append(m_j)
            cvs.append(1 / (r_j * r_j))
        cm, cv = np.concatenate(cms, axis=1), np.concatenate(cvs, axis=1)
        k = cm.shape[1]
        mean = _rsum(cm) / k
        var = _rsum(cv + (cm - mean) ** 2) / k
        rstd = 1 / np.sqrt(var + _eps(cfg["eps"], acc))
        xhat = (x - mean) * rstd
        w, bias = (None if call.inputs.get(q) is None else call.inputs[q].astype(acc).reshape(C, 1)
                   for q in ("weight", "bias"))
        out = {"y": _store(from_channel_rows(affine(xhat, w, bias), x0.shape), d),
               "mean": mean.reshape(C).astype(acc), "rstd": rstd.reshape(C).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = channel_rows(call.cotangents["y"], acc)
            g = dy if w is None else dy * w
            grads["x"] = _store(from_channel_rows(_centred_dx(g, xhat, rstd), x0.shape), d)
            if w is not None:
                grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            if bias is not None:
                grads["bias"] = _store(_rsum(dy).reshape(C), d)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            nbt = nbt + 1
            m = bn_momentum(cfg["momentum"], nbt, acc)
            bm, bv = mean.reshape(C), var.reshape(C)
            if cfg["convention"] == "torch":
                rm, rv = (1 - m) * rm + m * bm, (1 - m) * rv + m * bv * acc(n / (n - 1))
            else:
                rm, rv = m * rm + (1 - m) * bm, m * rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        st, cfg = call.state, call.config
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        r = super()._instance_norm(call, acc)
        if (b == "in_running_updated_per_sample_in_turn" and st.get("running_mean") is not None and call.training
                and Nb > 1 and S > 1):
            rm, rv, _ = running_in(st, acc)
            m = instance_momentum_value(cfg, acc)
            mi = _rsum(x) / S
            ub = instance_unbiased_var(x, mi, acc).reshape(Nb, C)
            mi = mi.reshape(Nb, C)
            for i in range(Nb):
                rm, rv = (1 - m) * rm + m * mi[i], (1 - m) * rv + m * ub[i]
            return Returned(r.outputs, r.grads, {**r.state, "running_mean": _store(rm, d),
                                                 "running_var": _store(rv, d)})
        inst = call.training or st.get("running_mean") is None
        if b == "in_bwd_means_over_s_minus_1" and inst and "x" in r.grads and Nb and S > 1:
            mean, rstd = ln_stats(x, _eps(cfg["eps"], acc))
            xhat = (x - mean) * rstd
            w = call.inputs.get("weight")
            dy = call.cotangents["y"].astype(acc).reshape(Nb * C, S)
            g = dy if w is None else dy * np.tile(w.astype(acc), Nb).reshape(-1, 1)
            dx = rstd * (g - _rsum(g) / (S - 1) - xhat * (_rsum(g * xhat) / (S - 1)))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)}, r.state)
        return r

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_tanh_exp_formula_overflows":
            e = np.exp(2 * (a * x))
            t = (e - 1) / (e + 1)
            grads = {}
            if "y" in call.cotangents:
                dy, g = dy_and_g(call, acc, x.shape, w)
                gd = g * (1 - t * t)
                grads = dyt_grads(gd * a, _rsum(gd * x).sum(), dy, t, w, bias, inp, x0.shape, d)
            return Returned({"y": _store(affine(t, w, bias).reshape(x0.shape), d)}, grads)
        r = super()._dyt(call, acc)
        if b == "dyt_bias_indexed_by_row" and bias is not None and x.shape[0] > 1:
            C = x.shape[1]
            br = bias.reshape(-1)[np.arange(x.shape[0]) % C].reshape(-1, 1)
            return Returned({"y": _store(affine(t, w, br).reshape(x0.shape), d)}, r.grads)
        if b == "dyt_dalpha_without_sech2" and "alpha" in r.grads:
            dy, g = dy_and_g(call, acc, x.shape, w)
            da = _rsum(g * x).sum()
            return Returned(r.outputs, {**r.grads, "alpha": _store(np.reshape(da, np.shape(inp["alpha"])), d)})
        return r

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        r = super()._adaptive_layer_norm(call, acc)
        B, H, T, x, scale, shift = aln_inputs(inp, acc)
        if b == "aln_bwd_gain_without_one" and scale is not None and "x" in r.grads:
            _, rstd, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            dx = _centred_dx(dy * per_token(scale, B, H, T, acc), xhat, rstd)
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(inp["x"].shape), d)})
        if b == "aln_xhat_rounded_before_modulation" and d in ("float16", "bfloat16") and x.size:
            _, _, xhat = ln_rows(x, _eps(call.config["eps"], acc))
            y = _half(xhat, d)
            if scale is not None:
                y = y * (acc(1) + per_token(scale, B, H, T, acc))
            if shift is not None:
                y = y + per_token(shift, B, H, T, acc)
            return Returned({**r.outputs, "y": _store(y.reshape(inp["x"].shape), d)}, r.grads)
        return r

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        if b == "poly_cube_of_abs":
            hs, rs = poly_normalize([np.abs(x) ** 3, x ** 2, x], eps, acc)
            grads = {}
            if "y" in call.cotangents:
                dy = call.cotangents["y"].astype(acc).reshape(-1, H)
                grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
            return Returned({"y": _store(poly_combine(wt, hs, bias, acc).reshape(x0.shape), d)}, grads)
        r = super()._poly_norm(call, acc)
        if b == "poly_bias_added_per_power" and bias is not None:
            hs, rs = poly_normalize([x ** 3, x ** 2, x], eps, acc)
            bb = acc(np.asarray(bias).astype(acc).reshape(()))
            y = poly_combine(wt, hs, None, acc) + 3 * bb
            grads = dict(r.grads)
            if "bias" in grads:
                dy = call.cotangents["y"].astype(acc).reshape(-1, H)
                grads["bias"] = _store(np.reshape(3 * _rsum(dy).sum(), np.shape(bias)), d)
            return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)
        if b == "poly_bwd_chain_at_normalized_x" and "x" in r.grads:
            hs, rs = poly_normalize([x ** 3, x ** 2, x], eps, acc)
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            dx = np.zeros_like(x)
            for k, p in enumerate((3, 2, 1)):
                dp = rms_dx(dy * wt[k], hs[k], rs[k])
                dx = dx + (dp if p == 1 else p * hs[2] ** (p - 1) * dp)
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        ddof = int(cfg["ddof"])
        if b == "zs_ddof_sign_flipped" and ddof:
            return super()._z_score(_with(call, config={"ddof": -ddof}), acc)
        if b == "zs_dim_rows_by_plain_reshape":
            r = self._zs_plain_reshape(call, acc)
            if r is not None:
                return r
        if b == "zs_var_one_pass":
            return self._zs_one_pass(call, acc)
        r = super()._z_score(call, acc)
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        if b == "zs_bwd_dx_not_divided_by_std" and "x" in r.grads and n and n - ddof > 0:
            mean = _axes_rows(r.outputs["mean"].astype(acc), cfg["dim"])[0]
            std = _axes_rows(r.outputs["std"].astype(acc), cfg["dim"])[0]
            w = None if inp.get("weight") is None else inp["weight"].astype(acc).reshape(1, n)
            xhat = np.where(std == 0, acc(0), (x - mean) / np.where(std == 0, acc(1), std))
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            inner = g - _rsum(g) / acc(n) - xhat * (_rsum(g * xhat) / acc(n - ddof))
            return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(std == 0, acc(0), inner)), d)})
        return r

    def _zs_plain_reshape(self, call, acc):
        """zs_dim_rows_by_plain_reshape: rows of n taken by reshape(-1, n) whatever dim (None: dim is last)."""
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        xr, n, back = _axes_rows(x0, cfg["dim"])
        if not n or not xr.size or np.array_equal(xr.reshape(-1), x0.reshape(-1)):
            return None
        fake = back(x0.reshape(-1, n))                      # moved-last rows equal to the plain reshape's
        cot = {k: back(v.reshape(-1, n)) for k, v in call.cotangents.items()}
        r = super()._z_score(_with(call, inputs={"x": fake}, cotangents=cot), acc)

        def rows(a, keep=False):
            return _axes_rows(a, cfg["dim"])[0].reshape(x0.shape if not keep else a.shape)
        outputs = {"y": rows(r.outputs["y"]), "mean": rows(r.outputs["mean"], True),
                   "std": rows(r.outputs["std"], True)}
        grads = dict(r.grads)
        if "x" in grads:
            grads["x"] = rows(grads["x"])
        return Returned(outputs, grads)

    def _zs_one_pass(self, call, acc):
        """zs_var_one_pass: the variance from one pass of sums (the planted bug), forward and backward."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        x, n, back = _axes_rows(inp["x"].astype(acc), cfg["dim"])
        m = n - int(cfg["ddof"])
        if n == 0 or m <= 0:
            return super()._z_score(call, acc)
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        mean = _rsum(x) / acc(n)
        var = np.maximum((_rsum(x * x) - acc(n) * mean * mean) / acc(m), acc(0))
        std = np.sqrt(var + acc(cfg["eps"]))
        xhat = np.where(std == 0, acc(0), (x - mean) / np.where(std == 0, acc(1), std))
        out = {"y": _store(back(affine(xhat, w, bias)), d), "mean": back(mean, True).astype(acc),
               "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            inner = g - _rsum(g) / acc(n) - xhat * (_rsum(g * xhat) / acc(m))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        r = super()._lp_normalize(call, acc)
        torch_rule = cfg["zero_rule"] == "torch"
        x, n, back = _axes_rows(call.inputs["x"].astype(acc), cfg["dim"])
        p, eps = float(cfg["p"]), acc(cfg["eps"])
        if b == "lp_onnx_zero_slice_nan" and not torch_rule:
            norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
            y = x / norm
            grads = dict(r.grads)
            if "x" in grads:
                dx = _axes_rows(grads["x"].astype(acc), cfg["dim"])[0] + acc(0) / norm
                grads["x"] = _store(back(dx), d)
            return Returned({**r.outputs, "y": _store(back(y), d)}, grads)
        if b == "lp_sum_in_input_dtype" and d in ("float16", "bfloat16") and n:
            norm = _half_row_sums(np.abs(x) ** acc(p), d) ** acc(1.0 / p)
            return self._lp_with_norm(call, acc, x, back, norm)
        if b == "lp_bwd_not_divided_by_norm" and "x" in r.grads:
            norm = _axes_rows(r.outputs["norm"].astype(acc), cfg["dim"])[0]
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = dy - wv * _rsum(dy * u)
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(used, proj, small)), d)})
        return r

    def _lp_with_norm(self, call, acc, x, back, norm):
        """lp_normalize's outputs and dx from a given (planted) norm, the rest as the correct kernel."""
        d, cfg = call.dtype, call.config
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
        safe = np.where(used, norm, acc(1))
        y = x / np.maximum(norm, eps) if torch_rule else np.where(norm == 0, acc(0), x / safe)
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            grads["x"] = _store(back(np.where(used, proj, small)), d)
        return Returned(out, grads)
