"""The held-out blind kernel (tests/planted/blind.py): the correct kernel passes the golden cases of its
ops, and each planted bug fails a chosen golden case, on the array the bug corrupts, which the correct
kernel passes. The diagnosis is not looked at here (the lead measures it on this held-out set)."""
from __future__ import annotations

import pytest

from planted import blind_checks as H
from planted.blind import BUGS, MECHANISMS, OPS, BlindKernel

# bug -> (a small golden case it fails, an array that must be among the failed ones there)
CAUGHT_BY = {
    "ln_unbiased_var": ("layer_norm/mean1e3_nobias_f16_2x3x7", "output.rstd"),
    "ln_one_pass": ("layer_norm/mean1e3_nobias_f16_2x3x7", "output.rstd"),
    "ln_pad_lanes_in_var": ("layer_norm/mean1e3_nobias_f16_2x3x7", "output.rstd"),
    "ln_bwd_mean_detached": ("layer_norm/normal_f64_3x1", "grad.x"),
    "ln_dweight_drops_tail_rows": ("layer_norm/normal_f32_260x3", "grad.weight"),
    "ln_zc_bwd_no_offset": ("layer_norm/normal_zc_f16_4x128", "grad.x"),
    "rms_sq_in_half": ("rms_norm/normal_eps1e-05_bf16_2x3x7", "grad.x"),
    "rms_eps_outside": ("rms_norm/zero_eps1e-06_f32_3x10", "output.rstd"),
    "rms_gemma_no_offset": ("rms_norm/normal_eps1e-05_gemma_f16_4x128", "output.y"),
    "rms_bwd_weight_twice": ("rms_norm/normal_eps1e-05_bf16_2x3x7", "grad.x"),
    "rms_bf16_truncation": ("rms_norm/normal_eps1e-05_bf16_2x3x7", "output.y"),
    "rms_eps_none_input_dtype": ("rms_norm/std1e-4_f16_4x128", "output.rstd"),
    "gn_one_pass": ("group_norm/mean1e3_g3_bf16_3x6x7", "output.rstd"),
    "gn_pad_lanes_next_group": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "gn_per_group_affine": ("group_norm/normal_g2_f32_3x6", "output.y"),
    "gn_interleaved_groups": ("group_norm/normal_g2_f32_3x6", "output.mean"),
    "bn_running_var_biased": ("batch_norm/normal_eps0.3_n2_f64_2x2", "state.running_var"),
    "bn_momentum_tf_convention": ("batch_norm/normal_eps0.3_n2_f64_2x2", "state.running_mean"),
    "bn_eval_uses_batch_stats": ("batch_norm/normal_eval_bf16_2x3x4", "output.y"),
    "bn_bwd_stats_detached": ("batch_norm/normal_eps0.3_n2_f64_2x2", "grad.x"),
    "an_residual_out_in_input_dtype": ("add_norm/normal_eps0.3_noweight_fp32res_bf16_1x50", "output.residual_out"),
    "an_dropout_not_rescaled": ("add_norm/heavy_tail_p_f64_3x12", "output.residual_out"),
    "an_rowscale_after_norm": ("add_norm/normal_p_rs_f64_9x7", "output.y"),
    "an_drowscale_without_mask": ("add_norm/normal_p_rs_f64_9x7", "grad.rowscale"),
    "nq_fnuz_max_240": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.scale"),
    "nq_e5m2_clamp_448": ("norm_quant/sq_overflow_rms_e5m2_dyn_f16_4x64", "output.q"),
    "nq_no_saturation": ("norm_quant/one_std1e-3_eps1e-12_ln_e4m3_static_f32_4x64", "output.q"),
    "nq_int8_truncation": ("norm_quant/pm1_eps0_rms_i8_static_ties_f32_4x64", "output.q"),
    "nq_scale_ub_ignored": ("norm_quant/outlier_rms_e4m3_dyn_ub8_bf16_8x256", "output.scale"),
    "nq_scale_from_rounded_y": ("norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "output.amax"),
}

# the correct kernel on the hard cases of each op (mean-shifted, constant, 16-bit, multi-step, fused options)
# besides every case a bug is caught on
CORRECT_CASES = sorted({c for c, _ in CAUGHT_BY.values()} | {
    "layer_norm/mean1e3_f32_6x100", "layer_norm/const_eps1e-12_f16_9x7", "layer_norm/normal_zc_bf16_24x40",
    "rms_norm/sq_overflow_eps1e-05_f16_6x100", "rms_norm/std1e-3_eps1e-05_outside_f32_6x100",
    "rms_norm/std1e-3_bf16_6x100", "group_norm/mean1e3_g4_f32_2x8x5x7", "group_norm/normal_g16_f32_130x64x2x2",
    "batch_norm/normal_train3_eval_f32_6x3x5", "batch_norm/normal_cumavg_nbt2_train3_f32_5x3x4",
    "batch_norm/normal_onnx_train3_eval_f16_4x2x3x3", "add_norm/mean1e3_p_fp32res_xnormal_par_f16_4x64",
    "add_norm/mean1e3_rs_noprenorm_xnormal_f32_6x40", "norm_quant/normal_rms_e4m3_dyn_bf16_8x256",
    "norm_quant/zero_rms_e4m3_dyn_f32_2x64", "norm_quant/mean1e3_ln_i8_dyn_f16_8x256"})


def test_catalogue_is_well_formed():
    H.check_catalogue(BUGS, CAUGHT_BY, OPS, MECHANISMS, (20, 30))


def test_unknown_bug_is_refused():
    H.check_unknown_bug_is_refused(BlindKernel)


def test_correct_kernel_passes():
    H.check_correct_kernel(BlindKernel(None), CAUGHT_BY, case_ids=CORRECT_CASES)


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught(bug):
    H.check_bug_is_caught(BlindKernel, bug, CAUGHT_BY)
