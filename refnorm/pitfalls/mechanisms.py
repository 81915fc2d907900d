"""Mechanisms: the families the pitfall variants belong to (issue 21).

A catalogue row is one instance of a mechanism (where the statistics are computed and in which dtype,
one-pass vs two-pass, eps placement, the affine convention, which reduction dropped a block, ...); a
variant is that mechanism with its parameters fixed (its title says which). The diagnosis names the
*mechanism* of the variant that explains a failure, with the variant as the instance and its rows as
examples, and it separates only mechanisms: two variants of one mechanism that fit a case alike are
the same answer, two of different mechanisms that fit alike are no answer (diagnosis.py).

``MECHANISMS``: key -> what the mechanism is. ``FAMILY``: variant id -> key (every variant has one:
tests/test_pitfalls.py checks it).
"""
from __future__ import annotations

MECHANISMS = {
    "one_pass": "one-pass variance E[x^2] - E[x]^2 (cancellation), or a variance about a shift without its "
                "correction",
    "precision": "a statistic computed, accumulated or stored in a lower precision",
    "block": "the reduction's block: padded lanes, the block length or per-lane counts",
    "eps": "eps: its placement or its value",
    "bessel": "the Bessel (n - 1) convention of the variance",
    "running": "the running statistics: their update rule (momentum, what is updated or stored) or how an eval "
               "call reads them",
    "mode": "which statistics a call uses (batch or running, the mode)",
    "backward": "the backward formula: a term missing or the wrong product",
    "reduction": "a reduction dropping or repeating blocks, counting its values wrong, or on the wrong axes (a "
                 "parameter gradient's, a statistic's)",
    "layout": "a layout, stride or index misread",
    "affine": "the affine convention (which weight, the offset, the cast order)",
    "semantics": "another normalizer's equation or axes",
    "window": "the window rule (position of the window, alpha's scaling)",
    "quant_scale": "the quantization scale: computed from the rounded output or the pre-norm value, its upper "
                   "bound or the tensor scale ignored",
    "saturation": "saturation of the quantized dtype: overflow to NaN/inf instead of the largest value, or the "
                  "wrong largest value",
    "merge": "partial statistics merged (across ranks, or a kernel's partials): counts not weighted, or a "
             "rank's local count or statistic used for the global one",
    "collective": "a missing all-reduce: a rank's partial sums returned for the global ones",
    "dropout": "dropout: the kept values not scaled by 1/(1 - p), or a branch dropped with another's keep-mask",
    "rounding": "rounding mode: a conversion (the output's to the case dtype, or an intermediate's) rounds toward "
                "zero (or down, up), not to nearest even",
    "gate": "the gate: on which side of the norm it multiplies, or its factor in the backward (silu'(z), silu(z))",
    "group": "the group a statistic or a backward reduction spans (group_size, ngroups)",
    "scale_rounding": "a block scale's own rounding rule: a power-of-two exponent rounded down where up is promised, "
                      "an E4M3 block scale truncated or rounded up",
}
# mechanisms the diagnosis's arithmetic search (refnorm/check/explain.py) names that no catalogue variant has
ARITHMETIC = {"constant": "a constant factor: a value counted twice or halved"}

_BY = {
    "one_pass": "one_pass_clamp one_pass_thresh one_pass_noclamp one_pass_in_d ws_one_pass ws_one_pass_in_d",
    "precision": "sq_in_d var_in_d stats_in_d serial_acc sumsq_in_d ms_rstd_in_d rstd_bf16 all_in_d lrn_sq_in_d "
                 "lp_norm_in_d dw_acc_in_d ws_stats_in_d wn_norm_in_d reciprocal_f16 residual_add_in_d "
                 "residual_out_in_d bwd_from_stored_residual dyt_sech_in_d pn_pow_in_d "
                 "stats_rounded_d ws_stats_rounded_d "
                 "rp_mean_bf16_rn rp_mean_f16_rn rp_rstd_f16_rn rp_xhat_bf16_rn rp_xhat_f16_rn",
    "block": "pad_lanes pow2_divisor welford_lanes partial_block_dropped partial_block_misread",
    "eps": "eps_in_d eps_min eps_square eps_outside ws_eps_outside eps_none_f64 pn_eps_outside eps_outside_autograd "
           "ws_eps_outside_autograd",
    "bessel": "ddof1 ddof1_exact gn_unbiased normalize_unbiased running_var_biased onnx_bessel ws_ddof1 "
              "ws_authors ws_authors_autograd",
    "running": "momentum_flip rv_not_updated nbt_not_incremented",
    "mode": "eval_bwd_batch in_eval_instance",
    "backward": "no_B_term no_A_term dweight_from_dy ws_no_B_term ws_no_A_term wn_dv_no_projection "
                "no_dresidual_out no_dy1 dyt_dx_no_alpha pn_no_chain silu_grad_at_xhat silu_grad_at_output",
    "reduction": "dgamma_warp32 lost_partial gn_wave64 param_mean_spatial gn_bwd_W dyt_dalpha_row dyt_dalpha_mean",
    "layout": "nhwc_param_index gn_dgamma_layout dy_layout row_index_2_16 gns_strided_groups gn_strided_groups",
    "affine": "no_bias_drops_weight no_offset llama_cast dx_no_offset one_plus_in_d pn_w_reversed silu_before_affine "
              "gn_per_group_affine",
    "semantics": "ln_as_rms rms_as_ln rms_centered_var gn1_as_ln wn_other_axis",
    "window": "lrn_window_shift lrn_alpha_not_divided lrn_alpha_divided_twice",
    # (e4m3_max_240: the scale amax / 240 and its clip, rule 5's scale first: session 30, as two blind authors read it)
    "quant_scale": "scale_from_rounded scale_ub_ignored block_scale_from_prenorm nvfp4_no_tensor_scale e4m3_max_240",
    "saturation": "e4m3_overflow_nan",
    "merge": "E08 E09 DP-RS1 DP-RS2 DP-TP1",
    "collective": "DP-SP1-layer_norm DP-SP1-rms_norm",
    "dropout": "dropout_unscaled parallel_shared_mask",
    "rounding": "truncate_out rp_mean_bf16_rz rp_mean_f16_rz rp_rstd_bf16_rz rp_rstd_f16_rz rp_xhat_bf16_rz "
                "rp_xhat_f16_rz",
    "gate": "gate_wrong_side no_dsilu dweight_no_gate",
    "group": "bwd_group_size",
    "scale_rounding": "scale_exponent_rounded_down",
}
FAMILY = {vid: key for key, ids in _BY.items() for vid in ids.split()}
