"""A fifth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind5Kernel(None)`` is a correct NumPy kernel for fifteen ops (layer_norm, rms_norm, add_norm, norm_quant,
group_norm, gated_norm, batch_norm, instance_norm, dyt, group_norm_silu, norm_quant_block,
adaptive_layer_norm, poly_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes
them: inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise,
one rounding to the output dtype at the end (round to nearest even), statistics (mean, rstd, std, norm, amax,
scales) returned in float32. It declares the "strict" contract and must pass refnorm's check on the golden
cases of its ops (tests/test_blind.py). Its arithmetic follows tests/planted/blind4.py (the same
conventions); the correct pieces the sets share are in tests/planted/_blind_math.py; z_score and
lp_normalize (no earlier set has them) follow their specifications (refnorm/specs: the deviations
re-centred, the sums of squares scaled by the slice's largest magnitude). Each bug is planted here, where a
kernel author would make it.

``Blind5Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

    BUGS[name] = (op, mechanism, description, source)

``mechanism`` is the label its author believes names the bug, one of ``LABELS`` (the project's taxonomy,
the same tuple as blind3's), or None where none fits. ``source`` is a public bug report or fix where the
mistake really happened (a GitHub issue or pull request), "cf. ..." where a public report shows the same
mistake in a neighbouring kernel, or "pattern: ..." for a mistake common in hand-written kernels.

The set is held out: it was written from the specifications (refnorm/specs), the registry, the backend
protocol, the earlier blind sets' correct arithmetic and public bug reports only, by an author who did not
read refnorm's diagnosis (issue 33) nor its planted-pitfall catalogue, and who never ran the diagnosis on
these bugs. None of its bugs repeats one of tests/planted/blind.py, blind2.py, blind3.py or blind4.py.
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, aln_inputs, aln_modulation, BlindKernelBase,
                          bn_momentum, bn_normalize, bn_running_update, centred_dx as _centred_dx, channel_dy_and_g,
                          channel_grads, channel_outputs, channel_params, channel_rows, dy_and_g, dynamic_scale,
                          dyt_grads, dyt_inputs, e8m0_scale, eps_value as _eps, frexp_exp as _frexp_exp,
                          FUSED_OPTIONS, gate_group_size, gated_dn, gated_dx, gated_dx_dz, gated_grads, gated_inputs,
                          gated_stats, group_outputs, group_param_grads, group_params, group_rows, group_scales,
                          GroupNormPair, half as _half, instance_grads, instance_momentum_value, instance_outputs,
                          instance_params, instance_rows, instance_running_update, instance_stats,
                          instance_unbiased_var, kept, ln_rows, ln_stats, mx_scales, nan_running, norm_dx,
                          norm_outputs, norm_quant_returned, normalized_rows, np_dtype, nqb_format, nqb_normalized,
                          nqb_quantized, nvfp4_encode, nvfp4_scales, padded_blocks, per_sample, poly_combine,
                          poly_grads, poly_inputs, poly_normalize, pow2, pow2_up, QUANT as _QUANT, quant_quotients,
                          quantize, rms_dx, rms_norm_dx, rms_rows, rms_stats, row_affine, row_param_grads,
                          row_weight_bias, rsum as _rsum, running_in, running_setup, running_state,
                          sigmoids as _sigmoids, silu_gate, stat_shape, static_scale, store as _store, weight_offset)
from .blind3 import LABELS

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "group_norm", "gated_norm", "batch_norm",
       "instance_norm", "dyt", "group_norm_silu", "norm_quant_block", "adaptive_layer_norm", "poly_norm",
       "z_score", "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind5Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_cols_beyond_fused_block_ignored": (
        "layer_norm", "block",
        "one program per row with a single column block of BLOCK = min(64 KiB / element size, next_pow2(N)) "
        "lanes and no loop over column blocks: for N > BLOCK the mean and variance sum only the first BLOCK "
        "columns (still divided by N) and the columns beyond are never written (zeros)",
        GH + "facebookresearch/xformers/issues/785 (Triton layer norm kernel does not include columns greater "
        "than BLOCK_SIZE_N: the offsets are never advanced by BLOCK_SIZE_N)"),
    "ln_bwd_projection_sign_flipped": (
        "layer_norm", "backward",
        "dx = rstd * (g - mean(g) + x_hat * mean(g * x_hat)): the projection term added instead of subtracted",
        "cf. " + GH + "sausheong/gonn/issues/8 (a hand-derived derivative written with the wrong sign); "
        "pattern: a sign slip in the hand-derived d rstd / dx term"),
    "ln_dweight_stats_of_block_first_row": (
        "layer_norm", "layout",
        "the dweight/dbias kernel handles blocks of 4 rows and recomputes x_hat with the mean and rstd loaded at "
        "the block's first row (the row offset within the block not added): dweight is wrong, dx and dbias right",
        "cf. " + GH + "deepspeedai/DeepSpeed/pull/692 (LayerNormBackward1: gamma and beta loaded at the "
        "threadIdx.y-based index instead of the column index in the dgamma kernel's recomputation)"),
    "ln_eps_added_to_count": (
        "layer_norm", "eps",
        "rstd = rsqrt(sum((x - mean)^2) / (N + eps)): eps added to the divisor N instead of to the variance",
        GH + "xlite-dev/LeetCUDA/issues/309 (layer_norm_f32_kernel: s_variance = rsqrtf(variance / ((float)K + "
        "epsilon)), eps added to the feature count K)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_bwd_projection_halved": (
        "rms_norm", "backward",
        "dx = rstd * (g - 0.5 * x_hat * mean(g * x_hat)): the factor 2 of d(x^2)/dx lost against the 1/2 of the "
        "rsqrt's derivative (eps inside)",
        "pattern: d rsqrt(ms) = -1/2 ms^(-3/2) d ms written without d ms / dx = 2 x / N"),
    "rms_grid_floor_rows": (
        "rms_norm", "block",
        "programs of 4 rows launched on grid = n_rows // 4 (floor) instead of cdiv: the last n_rows % 4 rows "
        "are never processed (y, rstd and dx left at zero)",
        "cf. " + GH + "pytorch/pytorch/pull/195546 (a Triton launch grid covering 64 of 128 elements: the rest "
        "of the torch.empty output never written)"),
    "rms_weight_read_as_last_axis": (
        "rms_norm", "layout",
        "a multi-axis normalized_shape: the weight indexed by the column's position in the last axis only, "
        "weight.flat[j % normalized_shape[-1]] (the kernel assumes a 1-D weight of the last axis)",
        "cf. " + GH + "pytorch/pytorch/pull/192016 (LayerNorm backward used dgamma.size(-1), the last dimension "
        "of a multi-dim normalized_shape, where the full N was meant)"),
    # ------------------------------------------------------------------ add_norm
    "an_dropout_scaled_by_inverse_p": (
        "add_norm", "dropout",
        "the kept values scaled by 1 / p instead of 1 / (1 - p), forward and backward",
        GH + "lmjohns3/theanets/pull/123 (BernoulliDropout divided the activations by the drop weight instead "
        "of 1 - weight); cf. kaldi-asr/kaldi/issues/2814"),
    "an_prenorm_dres_through_norm_bwd": (
        "add_norm", "backward",
        "prenorm=True: the cotangent of residual_out added to dy before the normalization's backward, "
        "ds = dnorm(dy + dres_out), instead of ds = dnorm(dy) + dres_out",
        GH + "Dao-AILab/quack/pull/53 (RMS PreNorm backward: dres_out = (dres_out + dout) * dnorm(out), 'addition "
        "before normalization')"),
    "an_dx_missing_keep_mask": (
        "add_norm", "dropout",
        "the backward's dx = ds * (rowscale) / (1 - p): the keep-mask left out (dropped elements get a gradient); "
        "the forward is right",
        "cf. " + GH + "state-spaces/mamba/pull/1023 (the layer_norm backward did not reuse the forward's dropout "
        "mask)"),
    "an_weight1_offset_missing": (
        "add_norm", "affine",
        "weight_offset (zero-centred gamma) added to weight but not to weight1: y1 = x_hat * weight1 + bias1, "
        "and the backward of y1 likewise",
        "cf. " + GH + "NVIDIA/Megatron-LM/pull/6859 (the batch-invariant RMSNorm computed weight + 1 for "
        "zero_centered_gamma and never read it)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_without_abs": (
        "norm_quant", "quant_scale",
        "dynamic scale: amax = max(y) per row (signed, from -FLT_MAX) instead of max(|y|): negative values "
        "beyond the largest positive one saturate",
        GH + "ModelTC/LightLLM/pull/943 (per-token fp8 quant kernel: 'add fabsf() to general kernel when compare "
        "max values'); cf. ModelTC/LightLLM/pull/939 (the int8 kernel's review)"),
    "nq_fp8_cast_truncates": (
        "norm_quant", "rounding",
        "float8 outputs: y / scale converted by dropping the low mantissa bits (round toward zero) instead of "
        "round to nearest even",
        "cf. " + GH + "NVlabs/cutile-rs/issues/250 (the f8 encoder truncates the mantissa instead of rounding to "
        "nearest even) and ROCm/rocm-systems/pull/6877 (f32_to_fp8_e4m3 used truncation)"),
    "nq_ln_welford_unbiased": (
        "norm_quant", "bessel",
        "norm='layer_norm': the Welford finalization divides M2 by count - 1 (the unbiased variance) instead of "
        "count",
        "cf. " + GH + "kakaobrain/trident/pull/125 (an instance-norm kernel's variance and its n / (n - 1) "
        "correction mixed up); pattern: welford_finalize copied from a running-variance helper"),
    "nq_static_scale_ignored": (
        "norm_quant", "quant_scale",
        "a static_scale is given, but the kernel takes the dynamic per-token path (its scale computed from the "
        "row's amax and returned)",
        "pattern: the static / dynamic dispatch keyed on the wrong argument (scale_ub instead of scale)"),
    # ------------------------------------------------------------------ norm_quant_block
    "nqb_mx_exponent_of_amax_over_qmax": (
        "norm_quant_block", "quant_scale",
        "mxfp8 floor rule: the E8M0 exponent taken as floor(log2(amax / qmax)) instead of floor(log2 amax) - emax "
        "(one too small for most blocks: the largest values saturate)",
        GH + "vllm-project/vllm/pull/43557 (MXFP4 MoE kernel: the E8M0 scale from the exponent of vecMax / 6.0, "
        "'floor(log2(a / b)) != floor(log2(a)) - floor(log2(b))')"),
    "nqb_mx_round_up_without_qmax": (
        "norm_quant_block", "quant_scale",
        "mxfp8 round-up rule: the scale 2^(ceil(log2 amax) - emax) instead of the smallest power of two >= "
        "amax / qmax (the element maximum taken as 2^emax, not qmax)",
        "cf. " + GH + "gHashTag/trinity/pull/694 (three MX scale conventions: dividing by the element maximum "
        "does not commute with the power-of-two rounding)"),
    "nqb_nvfp4_tensor_amax_first_row": (
        "norm_quant_block", "quant_scale",
        "nvfp4 without a global_scale: the tensor amax (for the encode factor 2688 / amax) reduced over the first "
        "row only (the first program's partial), so larger rows' block scales clip at 448",
        "pattern: a tensor-wide amax written by program 0 before the other programs' atomic max"),
    # ------------------------------------------------------------------ group_norm
    "gn_g1_per_channel_stats": (
        "group_norm", "semantics",
        "num_groups == 1 normalized per channel (instance statistics) instead of over all channels and "
        "positions; the saved (N, 1) mean and rstd are the last channel's",
        GH + "onnx/onnx-tensorrt/pull/1052 (GroupNormalization with num_groups=1 silently produced per-channel "
        "instance normalization: the channel axis left out of the reduction)"),
    "gn_bwd_stats_index_mod_groups": (
        "group_norm", "layout",
        "the backward loads the mean and rstd of channel c at group c % G instead of c // (C / G) (dx and dweight "
        "use them; the forward is right)",
        "cf. " + GH + "linkedin/Liger-Kernel/issues/883 (GroupNorm backward: the loads computed with the wrong "
        "addresses); pattern: the group index taken modulo instead of divided"),
    "gn_dbias_from_g": (
        "group_norm", "backward",
        "dbias summed from g = dy * weight instead of dy",
        "pattern: the bias reduction fed the weighted cotangent the dx sums use"),
    # ------------------------------------------------------------------ group_norm_silu
    "gns_dbias_from_dy": (
        "group_norm_silu", "backward",
        "dbias summed from the incoming dy instead of dp = dy * silu'(p) (dweight and dx right)",
        "pattern: the bias reduction placed before the activation's backward"),
    "gns_activation_gelu_tanh": (
        "group_norm_silu", None,
        "the fused activation is the tanh-approximated GELU instead of SiLU, forward and backward",
        "pattern: the kernel's ACTIVATION constexpr dispatched to the wrong branch"),
    "gns_silu_grad_at_input": (
        "group_norm_silu", "backward",
        "the SiLU derivative evaluated at the group norm's input x instead of at the pre-activation p",
        GH + "ooples/AiDotNet.Tensors/pull/187 (FusedGroupNormActivationOp backward: SwishBackward fed the "
        "GroupNorm's input instead of its output)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dz_from_x_not_normed": (
        "gated_norm", "gate",
        "norm_before_gate=True: dz = dy * x * silu'(z) (the raw input) instead of dy * (x_hat * w + b) * silu'(z)",
        "pattern: the norm_before_gate=False branch's product reused"),
    "gated_bwd_rstd_per_row": (
        "gated_norm", "layout",
        "the forward stores one mean/rstd per group (row * ngroups + group); the backward loads them at the "
        "row index (one per row, as the ungrouped kernel does)",
        "pattern: the statistics' offset in the backward left from the kernel without group_size"),
    "gated_gate_reads_x": (
        "gated_norm", "layout",
        "the gate's pointer passed as x's: silu(x) gates instead of silu(z), forward and backward",
        "pattern: Z_ptr = X_ptr in the launch arguments"),
    # ------------------------------------------------------------------ batch_norm
    "bn_cumavg_integer_division": (
        "batch_norm", "running",
        "momentum=None: the cumulative-average factor computed as 1 // num_batches_tracked (integer division): "
        "0 after the first batch, so the running statistics stop moving",
        "pattern: exponential_average_factor = 1 / num_batches_tracked with an integer counter in C"),
    "bn_bwd_sums_per_position": (
        "batch_norm", "backward",
        "training backward: dx's mean(g) and mean(g * x_hat) taken over the batch axis only, per channel and "
        "spatial position, instead of over the batch and the spatial axes",
        "pattern: the BatchNorm1d (N, C) backward applied to the (N, C, L) view"),
    "bn_eval_dweight_from_batch_xhat": (
        "batch_norm", "mode",
        "eval with running statistics: dweight = sum(dy * x_hat) with x_hat from the batch statistics (y and dx "
        "use the running ones)",
        "cf. " + GH + "torch/nn/pull/768 (BatchNormalization's backward read save_mean and save_std, the batch "
        "statistics, in evaluation mode)"),
    "bn_running_var_about_new_mean": (
        "batch_norm", "running",
        "training: the batch variance fed to running_var taken about the just-updated running mean instead of "
        "the batch mean",
        "pattern: running_mean updated in place before the variance pass reads it"),
    # ------------------------------------------------------------------ instance_norm
    "in_stats_over_channels": (
        "instance_norm", "semantics",
        "instance statistics taken per sample over all channels and positions (GroupNorm(1)) instead of per "
        "(sample, channel)",
        "cf. " + GH + "onnx/onnx-tensorrt/pull/1052 (the converse confusion of GroupNorm(1) and instance norm) and "
        "keras-team/tf-keras/issues/195"),
    "in_weight_repeat_interleaved": (
        "instance_norm", "layout",
        "the per-instance affine rows built with repeat_interleave (row r takes weight[r // N]) instead of "
        "repeat (weight[r % C]), forward and backward",
        "pattern: weight.repeat_interleave(N) where weight.repeat(N) was meant"),
    "in_running_var_pooled": (
        "instance_norm", "running",
        "running_var updated with each channel's unbiased variance pooled over the batch and positions (batch "
        "norm's) instead of the mean of the instances' unbiased variances",
        "pattern: the running update delegated to the batch-norm helper on the (N, C, S) input"),
    # ------------------------------------------------------------------ dyt
    "dyt_tanh_approx": (
        "dyt", "precision",
        "float32 compute: tanh from the hardware approximation tanh.approx.f32 (about 11 significant bits) "
        "instead of an accurate tanh",
        "cf. " + GH + "triton-lang/triton/issues/5692 (fast approximations of tanh in Triton kernels) and "
        "facebookexperimental/triton/pull/1633 (tanh.approx inline PTX in production kernels)"),
    "dyt_alpha_x_in_input_dtype": (
        "dyt", "precision",
        "16-bit inputs: the argument alpha * x computed in (rounded to) the input dtype before the float32 tanh, "
        "forward and backward",
        "pattern: torch.tanh(self.alpha * x) under autocast, the product taken in bfloat16 / float16"),
    "dyt_bwd_sech_at_x": (
        "dyt", "backward",
        "dx and dalpha use 1 - tanh^2(x) instead of 1 - tanh^2(alpha x)",
        "pattern: the saved input reloaded in the backward without its alpha"),
    "dyt_alpha_outside_tanh": (
        "dyt", "semantics",
        "y = weight * (alpha * tanh(x)) + bias instead of weight * tanh(alpha * x) + bias, forward and backward",
        "pattern: the equation misread (alpha as an output gain)"),
    # ------------------------------------------------------------------ adaptive_layer_norm
    "aln_shift_before_scale": (
        "adaptive_layer_norm", "affine",
        "y = (x_hat + shift) * (1 + scale) instead of x_hat * (1 + scale) + shift, forward and backward",
        "cf. " + GH + "apple/coremltools/issues/1639 ('(value * scale) + bias or (value + bias) * scale?')"),
    "aln_eps_fixed_1e-6": (
        "adaptive_layer_norm", "eps",
        "the configured eps ignored: 1e-6 hard-coded (DiT's nn.LayerNorm(..., eps=1e-6))",
        "pattern: a DiT kernel's constant kept when eps became an option"),
    "aln_dshift_times_gain": (
        "adaptive_layer_norm", "backward",
        "dshift = sum over tokens of dy * (1 + scale) instead of dy",
        "pattern: the gained cotangent g reused for the shift's reduction"),
    # ------------------------------------------------------------------ z_score
    "zs_ddof_ignored": (
        "z_score", "bessel",
        "the ddof option ignored: the variance always divides by n (NumPy's std default), forward and backward",
        "cf. " + GH + "dotnet/TorchSharp/issues/971 (std's 'unbiased' argument ignored by the native code) and "
        "pytorch/pytorch/issues/50010 (torch.std's and np.std's defaults differ)"),
    "zs_bwd_count_n": (
        "z_score", "backward",
        "dx's projection term divides sum(g * x_hat) by n (LayerNorm's backward reused) instead of n - ddof",
        "pattern: a layer-norm backward reused for a standardization with Bessel's correction"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_eps_inside_norm": (
        "lp_normalize", "eps",
        "the norm taken as (sum |x|^p + eps)^(1/p) (eps inside the root) and y = x / that, instead of "
        "y = x / max(||x||_p, eps); the returned norm is that value",
        "cf. " + GH + "PaddlePaddle/Paddle/issues/12053 (norm_op: y = x / sqrt(sum(x * x) + epsilon))"),
    "lp_bwd_p2_formula": (
        "lp_normalize", "backward",
        "the backward's derivative of the norm taken as u (the p = 2 formula) for every p instead of "
        "sign(u) |u|^(p - 1)",
        "cf. " + GH + "torch/DEPRECEATED-torch7-distro/issues/48 (nn.PairwiseDistance's backward right only for "
        "p = 1 and 2)"),
    # ------------------------------------------------------------------ poly_norm
    "poly_pow_nan_for_negative": (
        "poly_norm", None,
        "x^3 and x^2 computed by a float pow lowered to exp(p * log(x)): NaN wherever x < 0, forward and "
        "backward",
        GH + "iree-org/iree/issues/19996 (math.powf(x, 3.0) returns NaN when x < 0)"),
    "poly_bwd_one_rstd": (
        "poly_norm", "backward",
        "the backward uses one saved rstd, that of x, for all three powers (x^3 and x^2 normalized and "
        "differentiated with x's rstd); dweight right",
        "pattern: a single rstd buffer saved for three normalizations"),
    "poly_eps_dropped": (
        "poly_norm", "eps",
        "eps passed to the kernel as 0 (the argument's type wrong): rstd = 1 / rms, forward and backward",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (LayerNormalization's eps never set, always 0, because of a "
        "wrong data type: NaN outputs)"),
}


def _toward_zero(v, qdt):
    """v converted to the float8 dtype ``qdt`` rounding toward zero (the bit pattern of the nearest-even
    result stepped one toward zero where it rounded up in magnitude)."""
    q = v.astype(qdt)
    up = np.abs(q.astype(v.dtype)) > np.abs(v)
    bits = q.view(np.uint8).copy()
    bits[up] -= 1                                        # the magnitude bits count up monotonically
    return bits.view(qdt)


def _tanh_approx(t):
    """tanh rounded to 11 significant bits (the relative error of tanh.approx.f32)."""
    m, e = np.frexp(t)
    return np.ldexp(np.round(m * 2.0 ** 11) / 2.0 ** 11, e).astype(t.dtype)


def _axes_rows(x, dim):
    """(x as (rows, n) with the ``dim`` axes moved last, n, back): ``back(r, keep)`` takes (rows, n) back to
    x's layout, or (rows, 1) to the keepdims shape of a statistic (1 on the ``dim`` axes) when ``keep``."""
    nd = x.ndim
    axes = tuple(sorted(a % nd for a in (dim if isinstance(dim, (list, tuple)) else [dim])))
    k = len(axes)
    last = tuple(range(nd - k, nd))
    moved = np.moveaxis(x, axes, last)
    n = int(np.prod(moved.shape[nd - k:], dtype=np.int64))

    def back(r, keep=False):
        tail = (1,) * k if keep else moved.shape[nd - k:]
        return np.moveaxis(r.reshape(moved.shape[:nd - k] + tail), last, axes)
    return np.ascontiguousarray(moved).reshape(-1, n), n, back


def _gelu_tanh(p):
    """(gelu_tanh(p), its derivative)."""
    k = np.sqrt(2 / np.pi).astype(p.dtype)
    c = p.dtype.type(0.044715)
    t = np.tanh(k * (p + c * p ** 3))
    y = p.dtype.type(0.5) * p * (1 + t)
    dy = p.dtype.type(0.5) * (1 + t) + p.dtype.type(0.5) * p * (1 - t * t) * k * (1 + 3 * c * p * p)
    return y, dy


class Blind5Kernel(GroupNormPair, BlindKernelBase):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct);
    ``options``: see BlindKernelBase."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind5"
    options = dict.fromkeys(FUSED_OPTIONS + ("dim", "ddof", "p", "zero_rule"))

    _ln_stats, _rms_stats = staticmethod(ln_stats), staticmethod(rms_stats)

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        R = x.shape[0]
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        eps = _eps(call.config["eps"], acc)
        cols = N
        if b == "ln_cols_beyond_fused_block_ignored":
            cols = min(N, 65536 // np_dtype(d).itemsize, pow2(N))
        xs = x[:, :cols]
        mean = _rsum(xs) / N
        xc = x - mean
        dev = xs - mean
        ss = _rsum(dev * dev)
        if b == "ln_eps_added_to_count":
            rstd = 1 / np.sqrt(ss / (N + eps))
        else:
            rstd = 1 / np.sqrt(ss / N + eps)
        xhat = xc * rstd
        y = affine(xhat, w, bias)
        if cols < N:
            y[:, cols:] = 0                                  # never written
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            if b == "ln_bwd_projection_sign_flipped":
                dx = rstd * (g - _rsum(g) / N + xhat * (_rsum(g * xhat) / N))
            else:
                dx = _centred_dx(g, xhat, rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            xh = xhat
            if b == "ln_dweight_stats_of_block_first_row" and R and w is not None:
                first = np.arange(R) - np.arange(R) % 4
                xh = (x - mean[first]) * rstd[first]
            grads.update(row_param_grads(dy, xh, w, bias, ns, d))
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        ns, N, x = normalized_rows(call, acc)
        R = x.shape[0]
        placement = call.config.get("eps_placement", "inside")
        off = weight_offset(call, acc)
        w0 = call.inputs.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        if b == "rms_weight_read_as_last_axis" and w0 is not None and len(ns) > 1:
            w = w0.astype(acc).reshape(-1)[np.arange(N) % ns[-1]].reshape(1, N) + off
        eps = _eps(call.config["eps"], acc)
        rms, rstd = self._rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        done = R // 4 * 4 if b == "rms_grid_floor_rows" else R   # the rows the launched programs cover
        y[done:] = 0
        rs_out = rstd.copy()
        rs_out[done:] = 0
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rs_out.reshape(stat_shape(x0, ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, N), w)
            if b == "rms_bwd_projection_halved" and placement != "outside":
                dx = rstd * (g - acc(0.5) * xhat * (_rsum(g * xhat) / N))
            else:
                dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
            dx[done:] = 0
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if w is not None:
                dw = dy[:done] * xhat[:done]
                grads["weight"] = _store(dw.sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ group_norm (and group_norm_silu)
    def _gn_core(self, call, acc, silu):
        """(out, grads) of group_norm, or of group_norm_silu when ``silu``."""
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, G, S, cg, x, xv = group_rows(x0, call.config, acc)
        eps = _eps(call.config["eps"], acc)
        per_channel = b == "gn_g1_per_channel_stats" and not silu and G == 1
        rows = x.reshape(Nb * C, S) if per_channel else xv      # the rows the statistics span
        mean, rstd = self._ln_stats(rows, eps)
        xhat = ((rows - mean) * rstd).reshape(Nb, C, S)
        w, bias = group_params(call.inputs, acc, C)
        p = affine(xhat, w, bias)
        y = p
        act_grad = None
        if silu and b == "gns_activation_gelu_tanh":
            y, act_grad = _gelu_tanh(p)
        elif silu:
            s, _ = _sigmoids(p)
            y = p * s
        if per_channel:
            ms, rs = mean.reshape(Nb, C)[:, -1:], rstd.reshape(Nb, C)[:, -1:]    # the last channel's store wins
        else:
            ms, rs = mean.reshape(Nb, G), rstd.reshape(Nb, G)
        out = group_outputs(y, ms, rs, x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
            if act_grad is not None:
                dp = dy * act_grad
            elif silu:
                at = x if b == "gns_silu_grad_at_input" else p
                s, rest = _sigmoids(at)
                dp = dy * (s * (1 + at * rest))
            else:
                dp = dy
            g = dp if w is None else dp * w
            xh = xhat
            if b == "gn_bwd_stats_index_mod_groups" and not silu and C:
                gi = np.arange(C) % G                             # the group index the backward loads
                mc = mean.reshape(Nb, G)[:, gi][..., None]
                rc = rstd.reshape(Nb, G)[:, gi][..., None]
                xh = (x - mc) * rc
                n = cg * S
                gr, xr = g.reshape(Nb * G, n), xh.reshape(Nb * G, n)
                inner = gr - _rsum(gr) / n - xr * (_rsum(gr * xr) / n)
                dx = inner.reshape(Nb, C, S) * rc
            else:
                shape = rows.shape
                dx = _centred_dx(g.reshape(shape), xhat.reshape(shape), rstd)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            src = dp
            if b == "gn_dbias_from_g" and not silu and w is not None:
                src = dp * w
            elif b == "gns_dbias_from_dy" and silu:
                src = dy
            grads.update(group_param_grads(dp * xh, src, w, bias, C, d))
        return out, grads

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        x = channel_rows(x0, acc)                                # (C, n)
        C, n = x.shape
        cfg, st, eps, has_run = running_setup(call, acc)
        batch = call.training or not has_run
        mean, rstd, xhat = bn_normalize(x, st, eps, batch, acc, self._ln_stats)
        w, bias = channel_params(call.inputs, acc, C)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                mom = cfg["momentum"]
                nbt = nbt + 1
                m = bn_momentum(mom, nbt, acc)
                if mom is None and b == "bn_cumavg_integer_division":
                    m = acc(1 // int(nbt))
                old_rv = rv
                rm, rv = bn_running_update(rm, rv, m, x, mean, cfg["convention"], acc)
                if b == "bn_running_var_about_new_mean" and n > 0:
                    dv = x - rm.reshape(C, 1)
                    bv = (_rsum(dv * dv) / n).reshape(C)
                    if cfg["convention"] == "torch":
                        ub = bv * acc(n / (n - 1)) if n > 1 else bv * acc(np.inf)
                        rv = (1 - m) * old_rv + m * ub
                    else:
                        rv = m * old_rv + (1 - m) * bv
            state = running_state(rm, rv, nbt, d)
        out = channel_outputs(xhat, w, bias, mean, rstd, x0.shape, d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = channel_dy_and_g(call, acc, w)
            if batch and b == "bn_bwd_sums_per_position" and n:
                Nn = x0.shape[0]
                g3, x3 = g.reshape(C, Nn, -1), xhat.reshape(C, Nn, -1)
                dx = (rstd.reshape(C, 1, 1) * (g3 - g3.mean(axis=1, keepdims=True)
                                               - x3 * (g3 * x3).mean(axis=1, keepdims=True))).reshape(C, n)
            elif batch:
                dx = _centred_dx(g, xhat, rstd)
            else:
                dx = g * rstd
            xh_w = xhat
            if b == "bn_eval_dweight_from_batch_xhat" and not batch and n:
                bm, br = self._ln_stats(x, eps)
                xh_w = (x - bm) * br
            grads = channel_grads(dx, dy, xh_w, w, bias, x0.shape, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        cfg, st, eps, has_run = running_setup(call, acc)
        inst = call.training or not has_run
        over_channels = b == "in_stats_over_channels" and inst and Nb and C * S
        if over_channels:
            xs = x.reshape(Nb, C * S)
            ms, rs = self._ln_stats(xs, eps)
            mean, rstd = np.repeat(ms, C, axis=0), np.repeat(rs, C, axis=0)     # per instance rows
            xhat = (x - mean) * rstd
        else:
            mean, rstd, xhat = instance_stats(x, st, Nb, eps, acc, inst)
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        interleaved = b == "in_weight_repeat_interleaved"
        if interleaved:
            wr = None if w is None else np.repeat(w.astype(acc), Nb).reshape(-1, 1)
            br = None if bias is None else np.repeat(bias.astype(acc), Nb).reshape(-1, 1)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if has_run:
            rm, rv, nbt = running_in(st, acc)
            if call.training and Nb == 0:
                rm, rv = nan_running(C, acc)
            elif call.training and S > 0:
                m = instance_momentum_value(cfg, acc)
                ub = instance_unbiased_var(x, mean, acc)
                rm, rv = instance_running_update(rm, rv, m, mean, ub, Nb, C)
                if b == "in_running_var_pooled":
                    xc = np.ascontiguousarray(x.reshape(Nb, C, S).transpose(1, 0, 2)).reshape(C, Nb * S)
                    pm = _rsum(xc) / (Nb * S)
                    pv = _rsum((xc - pm) ** 2) / (Nb * S)
                    k = Nb * S
                    pu = pv * acc(k / (k - 1)) if k > 1 else pv * acc(np.inf)
                    rv = (1 - m) * running_in(st, acc)[1] + m * pu.reshape(C)
            state = running_state(rm, rv, nbt, d)
        grads = {}
        if "y" in call.cotangents:
            if over_channels:
                dy = call.cotangents["y"].astype(acc).reshape(Nb, C * S)
                g = dy if wr is None else dy * wr.reshape(Nb, C, 1).repeat(S, axis=2).reshape(Nb, C * S)
                dx = _centred_dx(g, xhat.reshape(Nb, C * S), rs)
                dyr = dy.reshape(Nb * C, S)
                grads = {"x": _store(dx.reshape(x0.shape), d)}
                if w is not None:
                    grads["weight"] = _store(_rsum(dyr * xhat).reshape(Nb, C).sum(axis=0), d)
                if bias is not None:
                    grads["bias"] = _store(_rsum(dyr).reshape(Nb, C).sum(axis=0), d)
            else:
                grads = instance_grads(call, xhat, rstd, w, bias, wr, inst, acc)
                if interleaved and grads:
                    dy = call.cotangents["y"].astype(acc).reshape(xhat.shape)
                    owner = np.arange(Nb * C) // Nb if Nb else np.zeros(0, int)
                    for k, t in (("weight", dy * xhat), ("bias", dy)):
                        if k in grads:
                            v = np.zeros(C, acc)
                            np.add.at(v, owner, _rsum(t).reshape(-1))
                            grads[k] = _store(v, d)
        return Returned(out, grads, state)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        if b == "gated_gate_reads_x":
            z = x
        K = gate_group_size(cfg, H)
        ng = H // K if K else 0
        nbg = bool(cfg["norm_before_gate"])
        norm = cfg["norm"]
        s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        mean, rstd = gated_stats(vg, _eps(cfg["eps"], acc), norm, self._ln_stats)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        nrm = vhat * w if bias is None else vhat * w + bias
        y = nrm * s if nbg else nrm
        grads = {}
        if "y" in call.cotangents:
            dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
            mb, rb, vh = mean, rstd, vhat
            if b == "gated_bwd_rstd_per_row" and ng > 1:
                idx = np.repeat(np.arange(R), ng)                # the row index, for every group of the row
                rb = rstd[idx]
                mb = mean[idx] if norm == "layer_norm" else 0
                vh = ((vg - mb) * rb).reshape(R, H)
            dv = gated_dx(norm, g, vh.reshape(-1, K), rb).reshape(R, H)
            dz_from = x if b == "gated_dz_from_x_not_normed" else nrm
            dx, dz = gated_dx_dz(dv, dy, dz_from, x, s, ds, nbg)
            grads = gated_grads(dx, dz, dn, None if bias is None else dn, vh, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        x, a, w, bias, t = dyt_inputs(inp, acc)
        arg = a * x
        if b == "dyt_alpha_x_in_input_dtype":
            arg = _half(arg, d)
            t = np.tanh(arg)
        outside = b == "dyt_alpha_outside_tanh"
        if outside:
            th = np.tanh(x)
            t = a * th
        if b == "dyt_tanh_approx" and acc is np.float32:
            t = _tanh_approx(t)
        y = affine(t, w, bias)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, x.shape, w)
            r = 1 / np.cosh(x if (b == "dyt_bwd_sech_at_x" or outside) else arg)
            gd = g * (r * r)
            if outside:
                dx, da = gd * a, _rsum(g * th).sum()
            else:
                dx, da = gd * a, _rsum(gd * x).sum()
            grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        b, d = self.bug, call.dtype
        x0 = call.inputs["x"]
        H, x, wt, bias, eps = poly_inputs(call, acc)
        if b == "poly_eps_dropped":
            eps = acc(0)
        powers = (3, 2, 1)

        def power(v, p):
            if b == "poly_pow_nan_for_negative" and p > 1:
                return np.exp(acc(p) * np.log(v))           # NaN for v < 0
            return v ** p
        us = [power(x, p) for p in powers]
        hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(-1, H)
            if b == "poly_bwd_one_rstd":
                rb = [rs[2]] * 3
                hb = [u * rs[2] for u in us]
                grads = poly_grads(dy, x, wt, hb, rb, bias, x0.shape, d, acc, dw_from=hs)
            elif b == "poly_pow_nan_for_negative":
                dx = np.zeros_like(x)
                for k, p in enumerate(powers):
                    dp = rms_dx(dy * wt[k], hs[k], rs[k])
                    dx = dx + (dp if p == 1 else p * power(x, p - 1) * dp)
                grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
                grads["x"] = _store(dx.reshape(x0.shape), d)
            else:
                grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc)
        return Returned({"y": _store(y.reshape(x0.shape), d)}, grads)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        ddof = 0 if b == "zs_ddof_ignored" else int(cfg["ddof"])
        eps = acc(cfg["eps"])
        m = n - ddof
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
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
        if m > 0:
            std = np.hypot(a * np.sqrt(_rsum(q * q) / acc(m)), np.sqrt(eps))
        else:
            std = np.full(a.shape, np.nan, acc)
        xhat = np.where(std == 0, acc(0), dev / np.where(std == 0, acc(1), std))
        y = affine(xhat, w, bias)
        out = {"y": _store(back(y), d), "mean": back(mean, True).astype(acc), "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            g = dy if w is None else dy * w
            if dy.size == 0:
                dx = np.zeros_like(dy)
            elif m <= 0:
                dx = np.full(dy.shape, np.nan, acc)
            else:
                cnt = acc(n) if b == "zs_bwd_count_n" else acc(m)
                inner = g - _rsum(g) / n - xhat * (_rsum(g * xhat) / cnt)
                dx = np.where(std == 0, acc(0), inner / np.where(std == 0, acc(1), std))
            grads["x"] = _store(back(dx), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        x0 = call.inputs["x"]
        x, n, back = _axes_rows(x0.astype(acc), cfg["dim"])
        p, eps, torch_rule = float(cfg["p"]), acc(cfg["eps"]), cfg["zero_rule"] == "torch"
        s = np.max(np.abs(x), axis=1, keepdims=True, initial=0.0)
        s = np.where((s > 0) & np.isfinite(s), s, acc(1))
        q = np.abs(x) / s
        if p == 1.0:
            total = _rsum(q)
        elif p == 2.0:
            total = _rsum(q * q)
        else:
            total = _rsum(q ** acc(p))
        if b == "lp_eps_inside_norm" and torch_rule:
            total = total + eps / s ** acc(p)
        norm = s * (total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** acc(1.0 / p))
        if b == "lp_eps_inside_norm" and torch_rule:
            y = x / norm
        elif torch_rule:
            y = x / np.maximum(norm, eps)
        else:
            y = np.where(norm == 0, acc(0), x / np.where(norm == 0, acc(1), norm))
        out = {"y": _store(back(y), d), "norm": back(norm, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy, _, _ = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])
            if b == "lp_eps_inside_norm" and torch_rule:
                used = np.ones(norm.shape, bool)
            else:
                used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            if b == "lp_bwd_p2_formula":
                wv = u
            else:
                wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy - wv * _rsum(dy * u)) / safe
            small = dy / eps if torch_rule and eps > 0 else np.zeros_like(dy)
            grads["x"] = _store(back(np.where(used, proj, small)), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant_block
    def _norm_quant_block(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        fmt, B, rule, qdt, qmax, emax = nqb_format(cfg)
        s, y = nqb_normalized(inp, cfg, acc, self._ln_stats)
        yb, amax = padded_blocks(y, B, acc)                              # amax: (R, nb)
        ts = acc(1.0)
        if fmt == "fp8_group":
            S = group_scales(amax, qmax, rule, cfg, acc)
            scale_out = S.astype(acc)
        elif fmt == "mxfp8" and rule == "floor" and b == "nqb_mx_exponent_of_amax_over_qmax":
            v = amax / acc(qmax)
            m, e = _frexp_exp(v)
            S, scale_out = e8m0_scale(v, e - 1, acc)
        elif fmt == "mxfp8" and rule != "floor" and b == "nqb_mx_round_up_without_qmax":
            m, e = _frexp_exp(amax)
            S, scale_out = e8m0_scale(amax, pow2_up(m, e) - emax, acc)
        elif fmt == "mxfp8":
            S, scale_out = mx_scales(amax, rule, emax, qmax, acc)
        else:                                                            # nvfp4
            gs = inp.get("global_scale")
            if b == "nqb_nvfp4_tensor_amax_first_row" and gs is None and amax.shape[0]:
                enc = nvfp4_encode(None, amax[:1], acc)
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
        if b == "an_dropout_scaled_by_inverse_p" and p:
            keep = acc(1.0 / p)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        if b == "an_weight1_offset_missing" and w1 is not None:
            we1 = w1
        _, rstd, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(s, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        grads = {}
        if "y" in call.cotangents:
            centred = cfg["norm"] == "layer_norm"
            ds, dy, dy1 = add_norm_ds(call, xhat, rstd, centred, we, we1, cfg["prenorm"], acc)
            if (b == "an_prenorm_dres_through_norm_bwd" and cfg["prenorm"]
                    and "residual_out" in call.cotangents):
                dr = call.cotangents["residual_out"].astype(acc).reshape(R, N)
                ds = norm_dx(dy + dr, we, xhat, rstd, centred)
                if dy1 is not None:
                    ds = ds + norm_dx(dy1, we1, xhat, rstd, centred)
            cx = c
            if b == "an_dx_missing_keep_mask" and mask is not None:
                cx = kept(None, rs, keep, p, (R, N), acc)
            grads = add_norm_grads(inp, ds, None if res is None else ds, cx, c1, dy, dy1, xhat, (w, bias, w1, b1),
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
        if b == "nq_ln_welford_unbiased" and cfg["norm"] == "layer_norm":
            mean, rstd = ln_stats(x, eps, ddof=1)
            xhat = (x - mean) * rstd
        else:
            _, _, xhat = (ln_rows if cfg["norm"] == "layer_norm" else rms_rows)(x, eps)
        y = row_affine(xhat, w, bias, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        if b == "nq_amax_without_abs":
            amax = np.max(y, axis=1, keepdims=True, initial=-np.finfo(np.float32).max)
        else:
            amax = np.max(np.abs(y), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if b == "nq_static_scale_ignored":
            static = None
        scale = dynamic_scale(amax, hi, cfg, acc) if static is None else static_scale(static, amax.shape, acc)
        v = quant_quotients(y, scale, lo, hi, acc)
        if b == "nq_fp8_cast_truncates" and qdt.kind != "i":
            q = _toward_zero(v, qdt)
        else:
            q = quantize(v, qdt)
        return norm_quant_returned(q, scale, amax, x0, ns, acc)

    # ------------------------------------------------------------ adaptive_layer_norm
    def _adaptive_layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        B, H, T, x, scale, shift = aln_inputs(inp, acc)     # T: tokens per sample
        eps = acc(1e-6) if b == "aln_eps_fixed_1e-6" else _eps(call.config["eps"], acc)
        mean, rstd = self._ln_stats(x, eps)
        xhat = (x - mean) * rstd
        gain, sh = aln_modulation(scale, shift, B, H, T, acc)
        early = b == "aln_shift_before_scale" and gain is not None and sh is not None
        if early:
            y = (xhat + sh) * gain
        else:
            y = affine(xhat, gain, sh)
        out = norm_outputs(y, mean, rstd, x0, x0.shape[:-1] + (1,), d, acc)
        grads = {}
        if "y" in call.cotangents:
            dy, g = dy_and_g(call, acc, (-1, H), gain)
            grads["x"] = _store(_centred_dx(g, xhat, rstd).reshape(x0.shape), d)
            if scale is not None:
                grads["scale"] = _store(per_sample(dy * (xhat + sh) if early else dy * xhat, B, T, H), d)
            if shift is not None:
                from_g = early or (b == "aln_dshift_times_gain" and gain is not None)
                grads["shift"] = _store(per_sample(g if from_g else dy, B, T, H), d)
        return Returned(out, grads)
