"""Every row of the catalogue in docs/pitfalls.md, classified for the five ops the emulated kernel covers
(layer_norm, rms_norm, group_norm, batch_norm, instance_norm):

* ``PLANTED``: the row applies; ``Planted(pitfall_id, description, mutation, ops)`` is the emulated
  backend with that one mutation (emulated.MUTATIONS), run on the golden cases of ``ops``. The first op
  is the row's own; further ops are listed where the same mechanism lives in their kernels too.
  ``caught=False`` marks a row the golden set cannot catch today, with the reason and, where one exists,
  a golden case that would (``proposal``; tests/test_planted.py builds it and checks both ways).
* ``NOT_APPLICABLE``: the row cannot be planted in a single-process value check of these ops, and why.
* ``SUPPLEMENTARY``: bug classes of the tolerance research's mutant study (docs/tolerances.md
  section 11) that are not catalogue rows, planted the same way (``R-`` ids, docs/pitfalls.md section 2).

Every catalogue id (``ALL_ROWS``) is in exactly one of PLANTED / NOT_APPLICABLE. docs/pitfalls.md section 3
is generated from this classification (tests/planted/catalogue.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

LN, RMS, GN, BN, IN, AN = "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "add_norm"
NQ = "norm_quant"
DYT, PN = "dyt", "poly_norm"
GNS = "group_norm_silu"
CENTERED = (LN, GN, BN, IN)

ALL_ROWS = (
    "A01 A02 A03 A04 A05 A06 A07 A08 A09 A10 A11 A12 B01 B04 B05 B06 B07 "
    "C01 C02 C03 C04 C05 C06 C07 C08 C09 C10 C12 D01 D02 D04 D06 "
    "E01 E02 E03 E04 E05 E07 E08 E09 E10 E11 E12 E13 "
    "F01 F02 F03 F04 F05 F06 F07 F08 F09 F10 F11 F12 F13 F14 F15 G01 G03 "
    "H02 H03 H04 H05 H06 H07 H08 H09 H10").split()


@dataclass(frozen=True)
class Planted:
    pitfall_id: str
    description: str                 # the row's bug, as planted
    mutation: str                    # emulated.MUTATIONS key
    ops: tuple = ()
    caught: bool = True              # False: the golden set cannot catch it (see why_not)
    why_not: str = ""
    proposal: Callable | None = field(default=None, compare=False)   # () -> refnorm.golden.cases.Case

    @property
    def key(self):
        return f"{self.pitfall_id}-{self.mutation}"


P = Planted
PLANTED = (
    # ------------------------------------------------------------------ A: statistics
    P("A01", "one-pass variance E[x^2]-E[x]^2 in fp32, clamped at 0 (torch CPU 1.7 LayerNorm)",
      "one_pass_clamp", CENTERED),
    P("A02", "one-pass variance in fp32: var cancels to 0 on 0.01*randn+100 (same mutation as A01)",
      "one_pass_clamp", (LN,)),
    P("A03", "one-pass variance, then var < 1e-6 -> 0 (MPS LayerNorm)", "one_pass_thresh", (LN,)),
    P("A04", "folded affine y = fma(x, rstd, -mean*rstd) (*w + b): constant row [14,14], eps 1e-6 gives "
             "1.2e-4, not 0 (the issue's symptom, reproduced)", "folded_affine", (LN,),
      caught=False,
      why_not="below the error any fp32 kernel may commit on such a row: the shift -mean*rstd rounds at "
              "u*|mean|*rstd, which is of the size of E_y's mean-error term g(n)*u*|w|*K (K = rstd*mean|x| = "
              "1.4e4 on the issue's row [14, 14]: 1.2e-4 against E_y ~ 4e-3), not only of its kappa term: "
              "with kappa replaced by |x_hat| in E_y (measured by patching a scratch copy of the bound) it is "
              "still caught in 0 cases, worst ratio 0.35. No per-element tolerance can see it; 'a constant "
              "slice gives exactly y = bias' is a property test, valid only for kernels that promise it"),
    P("A05", "one-pass variance goes negative, sqrt(var+eps) = NaN (ORT CPU LayerNormalization)",
      "one_pass_noclamp", (LN,)),
    P("A06", "one-pass variance on a constant row -> NaN (ORT, full((256,),1234.0))", "one_pass_noclamp", (LN,)),
    P("A07", "one-pass variance without clamp (MLX Metal LayerNorm, inferred)", "one_pass_noclamp", (LN,)),
    P("A08", "rsqrt(var+eps) with var = mean(x^2)-mean(x)^2 < -eps (jax.nn.standardize = layer_norm "
             "without affine)", "one_pass_noclamp", (LN,)),
    P("A09", "var = mean2 - mean^2 without max(0, .) (flax BatchNorm)", "one_pass_noclamp", (BN,)),
    P("A10", "masked lanes of the power-of-two block loaded as 0 enter sum((x-mean)^2) (Triton LayerNorm)",
      "pad_lanes", CENTERED),
    P("A10", "the other reading of a padded block: the block length next_pow2(n) used as the divisor",
      "pow2_divisor", (LN, RMS)),
    P("A11", "per-group reduction accumulated naively (serially) in fp32 (GroupNorm CUDA vs CPU)",
      "serial_acc", (GN,)),
    P("A12", "Welford partials merged with the nominal per-lane count (apex welford_mean_var_c_last; "
             "inferred: wrong when the per-lane counts are unequal)", "welford_merge_counts", (BN,)),
    # ------------------------------------------------------------------ B: eps
    P("B01", "RMSNorm eps outside the sqrt: x/(sqrt(mean x^2)+eps) (TransformerEngine)", "eps_outside", (RMS,)),
    P("B04", "eps cast to fp16 before the fp32 upcast: 1e-12 -> 0 (keras GroupNormalization "
             "mixed_float16)", "eps_in_d", (GN,)),
    P("B05", "variance_epsilon=1e-12 below the fp16 range (TF contrib layer_norm fp16)", "eps_in_d", (LN,)),
    P("B06", "eps silently raised to max(eps, 1.001e-5) (TF fused_batch_norm, CUDNN_BN_MIN_EPSILON)",
      "eps_min", (BN,)),
    P("B07", "(x-mean)/(var+eps)**2: square instead of sqrt (stax.BatchNorm)", "eps_square", (BN,)),
    # ------------------------------------------------------------------ C: precision
    P("C01", "x^2 (RMS) / (x-mean)^2 (LN) computed in fp16 before the fp32 stash (ONNX reference)",
      "sq_in_d", (RMS, LN)),
    P("C02", "variance kept in fp16, stash_type ignored (ORT DirectML LayerNormalization)", "var_in_d", (LN,)),
    P("C03", "sum of x^2 reduced in half (ORT SkipSimplifiedLayerNormalization)", "sumsq_in_d", (RMS,)),
    P("C04", "sum of squares accumulated and rsqrt taken in bf16 (torch nn.RMSNorm bf16 CUDA)",
      "ms_rstd_in_d", (RMS,)),
    P("C05", "x^2 computed in the input dtype (MLX fast RMSNorm)", "sq_in_d", (RMS,)),
    P("C06", "InstanceNorm mean/var in the input dtype (MLX)", "stats_in_d", (IN,)),
    P("C07", "whole InstanceNorm in fp16 (ORT)", "all_in_d", (IN,)),
    P("C08", "sum and square_sum accumulated in fp16 (ORT WebGPU InstanceNorm)", "one_pass_in_d", (IN,)),
    P("C09", "fp16 LayerNorm statistics (XLA, inferred)", "stats_in_d", (LN,)),
    P("C10", "dW partials reduced over bf16 products in bf16 (Liger RMSNorm backward; torch CPU LN "
             "does the same, research finding 1)", "dw_acc_in_d", (RMS, LN)),
    # ------------------------------------------------------------------ D: affine conventions
    P("D01", "Llama x_hat*w where Gemma needs x_hat*(1+w) (Liger)", "no_offset", (RMS,)),
    P("D02", "Llama cast order (x_hat cast to d, then * w in d) where Gemma's fp32 x_hat*(1+w) is "
             "expected (Liger casting modes)", "llama_cast", (RMS,)),
    P("D04", "zero-centred gamma: forward uses (1+w), dx uses w (TransformerEngine LN1p; refnorm's "
             "offset lives in rms_norm's weight_offset)", "dx_no_offset", (RMS,)),
    P("D06", "gamma and beta assumed to come as a pair: with bias=None the weight is not applied "
             "(torch CUDA vectorized layer_norm, inferred)", "no_bias_drops_weight", (LN,)),
    # ------------------------------------------------------------------ E: running statistics, modes
    P("E01", "running_var updated with the biased batch variance (MLX BatchNorm)", "running_var_biased", (BN, IN)),
    P("E02", "the biased/unbiased asymmetry flipped: normalize with the unbiased variance", "normalize_unbiased",
      (BN,)),
    P("E03", "Bessel correction applied to the moving variance where the convention keeps it biased "
             "(keras fused vs non-fused; planted on refnorm's ONNX convention)", "onnx_bessel", (BN,)),
    P("E05", "momentum convention crossed at the torch/ONNX boundary (ONNX momentum = 1 - torch "
             "momentum): ONNX momentum applied to the new value", "onnx_momentum_flip", (BN,)),
    P("E07", "moving_variance not updated in training (keras-core)", "rv_not_updated", (BN, IN)),
    P("E10", "eval-mode backward uses batch statistics (cuDNN v5)", "eval_bwd_batch", (BN,)),
    P("E11", "InstanceNorm eval with track_running_stats normalizes with instance statistics", "in_eval_instance",
      (IN,)),
    # ------------------------------------------------------------------ F: layout, indexing, sizes
    P("F01", "NHWC buffer, per-channel params indexed with NCHW strides (BatchNorm2d channels_last)",
      "nhwc_param_index", (BN,)),
    P("F05", "GroupNorm weight-gradient reduction wrong for channels_last (inferred: the NHWC product "
             "buffer read with NCHW indexing)", "gn_dgamma_layout", (GN,)),
    P("F06", "GroupNorm backward with grad and input in different memory formats (inferred: dy's "
             "channels-last memory read with x's indexing)", "dy_layout", (GN,)),
    P("F07", "32-bit offsets in the vectorized layer_norm kernel (numel > 2^32)", "offset_int32", (LN,),
      caught=False, why_not="needs numel > 2^32 (16 GiB of float32); no golden case can hold it: a stress "
                            "test outside the golden set"),
    P("F08", "large-M indexing bug when C % 4 != 0 (rows >= 2^23 zero/garbage)", "rows_2_23_mod4", (LN,),
      caught=False, why_not="needs >= 2^23 rows (>= 100 MB with n = 3); beyond the golden set's size budget"),
    P("F09", "row index limited by the grid dim: rows >= 65536 wrong (apex FusedLayerNorm)", "row_index_2_16",
      (LN,)),
    P("F10", "int32 H*W*C index overflow in NHWC GroupNorm", "gn_hwc_int32", (GN,), caught=False,
      why_not="needs > 2^31 elements (8 GiB of float32); a stress test outside the golden set"),
    P("F12", "LayerNorm backward, M > 65536: dgamma scratch sized normalized_shape[-1] (wrong-shape dgamma "
             "for a multi-dim normalized_shape)", "dgamma_shape_huge_m", (LN,)),
    P("F13", "gamma/beta backward partial sums: warp size 64 hard-coded on 32-wide hardware (inferred: "
             "half of each 64-row tile dropped)", "dgamma_warp32", (LN, RMS)),
    P("F14", "GroupNorm gamma/beta backward, wave64 WarpReduceSum sums two 32-wide tile columns (N > 128 "
             "path)", "gn_wave64", (GN,)),
    P("F15", "GroupNorm backward with hidden_size = dY.shape[-1]: W used where H*W belongs (Liger)", "gn_bwd_W",
      (GN,)),
    # ------------------------------------------------------------------ G: backward reductions, buffers
    P("G01", "missing barrier before the lock release: a stale partial dW/dB read, one update lost per "
             "buffer (Triton LayerNorm backward)", "lost_partial", (LN,)),
    P("G03", "dX written into the dY buffer while dY is still needed (Liger RMSNorm in_place)", "dx_into_dy",
      (RMS,)),
    # ------------------------------------------------------------------ H: semantic conventions
    P("H04", "LayerNormalization(rms_scaling=True): x * rsqrt(var(x) + eps), the centred variance "
             "(keras)", "rms_centered_var", (RMS,)),
    P("H05", "GroupNorm(1, C) implemented as LayerNorm over C at every position", "gn1_as_ln", (GN,)),
    P("H06", "GroupNorm normalizing with the unbiased variance", "gn_unbiased", (GN,)),
    P("H10", "'LayerNorm' that does not subtract the mean (T5LayerNorm): LN computed as RMSNorm",
      "ln_as_rms", (LN,)),
    P("H10", "the swap the other way: RMSNorm computed as LayerNorm", "rms_as_ln", (RMS,)),
)

# research mutant classes (docs/tolerances.md section 11) that are not catalogue rows
SUPPLEMENTARY = (
    P("R-noB", "layer/group/batch/instance norm dx without the -x_hat*mean(g*x_hat) term", "no_B_term", CENTERED),
    P("R-trunc", "fp32 -> d conversion by truncation instead of round-to-nearest", "truncate_out",
      (LN, RMS, GN, BN, IN)),
    P("R-rstd16", "rstd rounded to bfloat16 before the multiply", "rstd_bf16", (LN, RMS, GN, BN, IN)),
    P("R-veps16", "rsqrt(var + eps) with var + eps rounded to the case dtype (float16: below its smallest normal "
                  "it keeps few bits, below 3e-8 it is 0)", "var_eps_in_d", (LN, RMS, GN, BN, IN)),
    P("R-nbt", "num_batches_tracked not incremented by a training call", "nbt_not_incremented", (BN,)),
    P("R-mom", "torch convention with the momentum applied to the old value", "torch_momentum_flip", (BN, IN)),
    P("R-axes", "dweight/dbias summed over the batch axis but averaged over the spatial axes (wrong "
                "reduction)", "param_mean_spatial", (GN, BN, IN)),
    P("R-1pw", "Gemma's (1 + w) rounded to the case dtype before the multiply", "one_plus_in_d", (RMS,)),
    P("R-eps64", "rms_norm eps=None taken as float64's machine epsilon where torch's rule gives the compute "
                 "dtype's (float32's for float32/float16/bfloat16 input)", "eps_none_f64", (RMS,)),
    P("R-qround", "norm_quant: the dynamic scale from the output rounded to the case dtype, not the float32 one",
      "q_scale_rounded", (NQ,)),
    P("R-qnan", "norm_quant: float8 e4m3fn overflow gives NaN instead of saturating", "q_e4m3_nan", (NQ,)),
    P("R-qub", "norm_quant: the scale's upper bound scale_ub ignored", "q_ub_ignored", (NQ,)),
    P("R-qrcp16", "norm_quant: the reciprocal of the scale multiplied in float16", "q_rcp_f16", (NQ,)),
    # fused residual add (issue 18): flash-attention / vLLM / Liger add + norm kernels
    P("R-resadd", "the residual added in the activation dtype (the sum rounded to it, then normalized and "
                  "returned)", "residual_add_in_d", (AN,)),
    P("R-resround", "residual_out rounded to the activation dtype where residual_in_fp32 asks for the float32 "
                    "sum", "residual_out_in_d", (AN,)),
    P("R-dropscale", "dropout without the 1/(1 - p) scale", "dropout_unscaled", (AN,)),
    P("R-dresout", "the residual's gradient without the gradient through the returned residual",
      "no_dresidual_out", (AN,)),
    P("R-parmask", "the parallel branch x1 dropped with x's keep-mask instead of its own", "parallel_shared_mask",
      (AN,)),
    P("R-pardy1", "the backward without the gradient through the parallel output y1", "no_dy1", (AN,)),
    # element-wise replacements of a norm (issue 36): DyT, PolyNorm
    P("R-dytrow", "DyT: alpha's gradient reduced over the last dimension only (the rows not summed)",
      "dyt_dalpha_row", (DYT,)),
    P("R-dytmean", "DyT: alpha's gradient averaged over the elements instead of summed", "dyt_dalpha_mean", (DYT,)),
    P("R-dytdx", "DyT: dx without alpha, tanh(alpha x)'s inner derivative", "dyt_dx_no_alpha", (DYT,)),
    P("R-dyt16", "DyT: tanh' as 1 - t^2 from t rounded to the activation dtype", "dyt_sech_in_d", (DYT,)),
    P("R-pneps", "PolyNorm: eps outside the square root", "pn_eps_outside", (PN,)),
    P("R-pnpow16", "PolyNorm: x^2 and x^3 formed in the activation dtype (float16's x^3 overflows beyond 40.3)",
      "pn_pow_in_d", (PN,)),
    P("R-pnwrev", "PolyNorm: the weight read in reverse order (w0 on x, w2 on x^3)", "pn_w_reversed", (PN,)),
    P("R-pnchain", "PolyNorm: dx without the chain rule through the powers", "pn_no_chain", (PN,)),
    # GroupNorm + SiLU fused (issue 36): diffusion UNet/VAE kernels
    P("R-siluaff", "SiLU applied before the affine: silu(x_hat) * weight + bias", "silu_before_affine", (GNS,)),
    P("R-silugrad", "silu' evaluated at the normalized value x_hat, without the affine", "silu_grad_at_xhat",
      (GNS,)),
    P("R-silugrady", "silu' evaluated at the output y = silu(p)", "silu_grad_at_output", (GNS,)),
    P("R-gnstride", "groups over the wrong channel order: group g holds the channels c % G == g (a channels_last "
                    "kernel's group index)", "gns_strided_groups", (GNS,)),
    P("R-gns1pass", "the fused GroupNorm + SiLU kernel's variance as E[x^2]-E[x]^2 in fp32, clamped at 0 "
                    "(A01's mechanism in the fused kernel)", "one_pass_clamp", (GNS,)),
)

NOT_APPLICABLE = {
    "C12": "dtype contract only (output dtype promote(weight, input) = fp32 for bf16 input): a Call hands "
           "every input in the case dtype, and the checker accepts any output dtype at least as precise "
           "as the case dtype, so no value is wrong",
    "E04": "Bessel factor n/(n-1) with n = 1 (moving_variance NaN): refnorm's contract is that training "
           "with one value per channel raises (E12); the golden set holds value cases only, no call with "
           "n = 1 in training exists to judge",
    "E08": "SyncBatchNorm across ranks with different N*H*W: a single-process Call has no ranks (planted in the "
           "distributed torch-dist-cpu instead: tests/planted/distributed.py, section 9)",
    "E09": "SyncBatchNorm backward mean_dy / mean_dy_xmu not count-weighted across ranks: no ranks in a Call "
           "(planted in the distributed torch-dist-cpu instead: tests/planted/distributed.py, section 9)",
    "E12": "error contract (training with 1 value per channel must raise): the checker judges values; "
           "no golden case is an expected-error case",
    "E13": "save_mean/save_invstd populated or empty in eval: a contract divergence; golden eval steps "
           "compare only y by design (eval_outputs)",
    "F02": "channels_last fp16 CPU backward gives NaN: mechanism not reported, so no mutation can be "
           "written beyond 'dx is NaN' (any golden backward case catches that); the layout is the adapter's",
    "F03": "native NCHW mixed-bf16 ROCm kernel wrong dW/dB/dX: mechanism not reported",
    "F04": "layout contract of the returned gradient (channels_last_3d returned contiguous): NumPy "
           "arrays carry no memory-format contract in the backend API",
    "F11": "strided (non-contiguous) input read as dense: the checker hands contiguous NumPy arrays; "
           "strides are the adapter's concern (a non-contiguous-view option in the checker would cover it)",
    "H02": "local_response_norm (even-size window): not one of these ops",
    "H03": "local_response_norm TF->ONNX conversion: not one of these ops",
    "H07": "weight_norm (dim=1 axis): not one of these ops",
    "H08": "weight_norm decomposition broadcasting: not one of these ops",
    "H09": "weight_norm backward, zero-size reduction: not one of these ops",
}


def all_planted():
    return PLANTED + SUPPLEMENTARY


def pairs(planted=None):
    """(Planted, op) for every op each mutation is run on."""
    return [(p, op) for p in (planted or all_planted()) for op in p.ops]
