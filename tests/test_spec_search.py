"""The specification search of the diagnosis (refnorm/check/spec_search.py): the instrumented
specification computes the same bits as the plain one; a kernel holding one named intermediate in a
lower precision, or changing one operation, operand, input or statistic, is named by it (kernels of the
blind sets, written without the search; blind5 and blind6 are development sets since their measurement)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from refnorm import registry  # noqa: E402
from refnorm.check import spec_search as rp  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.golden import load_case, store  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")


def _first(op, words=""):
    return next(e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == op and words in e["id"])


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "gated_norm", "add_norm", "group_norm", "batch_norm",
                                "adaptive_layer_norm", "dyt", "poly_norm", "norm_quant", "norm_quant_block"])
def test_the_instrumented_spec_computes_the_same_bits(op):
    case = load_case(GOLDEN, _first(op))
    step = case.steps[0]
    inputs = {k: np.asarray(v) for k, v in step.inputs.items()}
    cot = {k: np.asarray(v, np.float64) for k, v in (step.cotangents or {}).items()}
    ns = rp._rp_module(op)
    seen = {}
    kw = dict(config=dict(case.config), grad_outputs=cot or None, training=step.training,
              state={k: np.asarray(v, np.float64) for k, v in (case.init_state or {}).items()} or None)
    plain = registry.evaluate(op, inputs, engine="spec", **kw)
    rp._TARGET.t = ("record", seen)
    try:
        traced = registry.evaluate(op, inputs, engine=(ns.forward, ns.backward), **kw)
    finally:
        rp._TARGET.t = None
    assert seen, "no intermediate recorded"
    for part in ("outputs", "grads"):
        for k, v in getattr(plain, part).items():
            w = getattr(traced, part)[k]
            assert np.array_equal(np.asarray(v), np.asarray(w), equal_nan=True), (part, k)


@pytest.mark.parametrize("bug, case_id, mechanism, words", [
    ("gated_silu_in_input_dtype", "gated_norm/normal_gs64_f16_4x128", "precision", "gated_norm.s"),
    # bfloat16 inputs (ml_dtypes' kind "V") moved too: silu(z) depends on z, not the parameters alone
    ("gated_silu_in_input_dtype", "gated_norm/normal_gs32_bf16_4x128", "precision", "gated_norm.s"),
    # a value of the parameters alone (the gain 1 + scale) rounded: the affine convention's cast order
    ("aln_gain_in_input_dtype", "adaptive_layer_norm/normal_bf16_2x8x32", "affine", ".gain"),
])
def test_a_rounded_intermediate_is_named(bug, case_id, mechanism, words, monkeypatch):
    from planted.blind4 import Blind4Kernel
    from refnorm.check import explain_index
    monkeypatch.setattr(explain_index, "explain", lambda *a: None)     # (it names a rounded parameter first)
    r = check_case(Blind4Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == mechanism and words in d["message"] and "rounded to nearest" in d["message"], d["message"]


def test_the_correct_kernel_is_not_explained():
    from planted.blind4 import Blind4Kernel
    assert check_case(Blind4Kernel(None), load_case(GOLDEN, "gated_norm/normal_gs64_f16_4x128")).status == "passed"


@pytest.mark.parametrize("bug, case_id, words", [
    ("gns_silu_grad_sign_flipped", "group_norm_silu/normal_g3_f64_3x6x7", "the sign of `p * rest` flipped"),
    ("dyt_dalpha_missing_x", "dyt/normal_f64_2x5x7", "`x` left out in `gd * x`"),
    ("aln_dx_unmodulated", "adaptive_layer_norm/normal_f32_3x20x12", "left out in `1.0 + per_sample(scale, dy)`"),
])
def test_one_operation_of_the_backward_changed_is_named(bug, case_id, words, monkeypatch):
    from planted.blind4 import Blind4Kernel
    from refnorm.check import explain_terms
    monkeypatch.setattr(explain_terms, "backward_terms", lambda *a, **k: [])   # (its decompositions name them first)
    r = check_case(Blind4Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == "backward" and words in d["message"], d["message"]


def test_a_changed_gate_factor_of_the_backward_is_the_gate(monkeypatch):
    """dx = dv where dv * silu(z) belongs (tests/planted/blind3.py): the operand left out is a value of the gate
    input alone, so the mechanism is the gate's factor in the backward, not the backward formula in general."""
    from planted.blind3 import Blind3Kernel
    from refnorm.check import explain_terms
    monkeypatch.setattr(explain_terms, "backward_terms", lambda *a, **k: [])
    r = check_case(Blind3Kernel("gated_bwd_dx_ungated"), load_case(GOLDEN, "gated_norm/normal_gs4_f64_3x7x12"))
    d = r.diagnosis
    assert d["mechanism"] == "gate" and "`s` left out in `dv * s`" in d["message"], d["message"]


@pytest.mark.parametrize("bug, case_id, mechanism, words", [
    # an operand read from another value of its function (the backward's projection of x where u belongs)
    ("lp_bwd_projection_of_x", "lp_normalize/normal_f64_9x7", "backward", "`u` read from `x` in `dy * u`"),
    # an operand read as its square root, on a line that updates a running statistic (a forward change)
    ("bn_running_var_from_std", "batch_norm/normal_f64_7x3", "running", "read as its square root"),
    # the gate input's gradient alone changed: the gate's factor in the backward
    ("gated_dz_from_vhat", "gated_norm/normal_gs4_f64_3x7x12", "gate", "`x` read from `vhat` in `dv * x`"),
    # a keep-mask read as a drop-mask, forward and backward
    ("an_keep_mask_inverted", "add_norm/mean1e3_rms_p_fp32res_xnormal_bf16_4x128", "dropout",
     "`mask` read as its complement"),
    # a function of the specification evaluated in the lower precision (its argument and result rounded)
    ("gns_sigmoid_in_input_dtype", "group_norm_silu/normal_g2_f16_2x8x4x4", "precision",
     "the function sigmoid evaluated in the lower precision"),
])
def test_one_change_of_the_specification_is_named(bug, case_id, mechanism, words):
    """Kernels of tests/planted/blind6.py (a development set since its measurement): one operation,
    operand, input or function of the specification changed, forward or backward, named by the mechanism the
    changed operand or line says."""
    from planted.blind6 import Blind6Kernel
    r = check_case(Blind6Kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == mechanism and words in d["message"], d["message"]


@pytest.mark.parametrize("src, bug, case_id, mechanism, words", [
    # one expression written the same wrong way at each of its places (forward and backward): 1 / p
    ("blind5", "an_dropout_scaled_by_inverse_p", "add_norm/normal_p_rs_f64_9x7", "dropout",
     "the keep and drop probabilities exchanged"),
    # a returned statistic computed apart (eps left out of the saved rstd; y and the gradients right): blind7,
    # a development set since its measurement
    ("blind7", "ln_rstd_saved_without_eps", "layer_norm/normal_f64_9x7", "eps", "the returned rstd computed apart"),
    # eps moved from the variance to the divisor n
    ("blind5", "ln_eps_added_to_count", "layer_norm/normal_f64_9x7", "eps", "eps moved from `var + eps` to `n`"),
    # the weight and bias pointers exchanged at the launch, each gradient that of the input read
    ("blind6", "ln_weight_bias_swapped", "layer_norm/normal_f64_9x7", "affine", "bias and weight swapped (each"),
    # int8 codes rounded down (floor), judged at the kernel's own scale
    ("blind6", "nq_int8_floor", "norm_quant/normal_rms_i8_dyn_f64_4x100", "rounding", "down (floor)"),
    # e8m0 block scales (a quantized array) written in column-major order
    ("blind6", "nqb_scales_column_major", "norm_quant_block/normal_rms_mx_f32_3x200", "layout", "column-major"),
    # a power-of-two block's masked lanes loaded as 1.0 entering sum(x^2)
    ("blind6", "rms_pad_lanes_loaded_as_one", "rms_norm/normal_eps1e-05_f32_6x100", "block", "loaded as 1.0"),
    # the mean's count n - ddof (z_score's mean divided by n - 1): the Bessel divisor where n belongs
    ("blind7", "zs_mean_divided_by_n_minus_ddof", "z_score/normal_f64_9x7", "bessel", "sum divided by 6 where n = 7"),
    # the instance sums divided by one spatial axis's size (a count of 8 where 64 belongs)
    ("blind7", "in_count_last_spatial_axis", "instance_norm/normal_f16_2x2x8x8", "reduction",
     "sum divided by 8 where n = 64"),
    # num_batches_tracked counted up by the batch size: an integer operand of a state line read as x.shape[0]
    ("blind7", "bn_nbt_plus_batch_size", "batch_norm/normal_f64_7x3", "running", "`1` = 1 read as 7"),
    # the backward reading every sample's statistics at sample 0 (x_hat recomputed from them)
    ("blind6", "gn_bwd_stats_of_first_sample", "group_norm/normal_g3_f64_3x6x7", "layout",
     "read at the first index of"),
    # rstd stored at row * the row length: rows 0 and 1 land at 0 and 7 of 9, the rest never written
    ("blind7", "rms_rstd_stored_at_row_stride", "rms_norm/normal_eps1e-05_f64_9x7", "layout",
     "written at a stride of 7"),
    # eps passed to hypot(., sqrt(eps)) moved to the standard deviation it builds (std = sqrt(var) + eps)
    ("blind6", "zs_eps_added_to_std", "z_score/normal_eps0.3_f32_9x7", "eps", "to `z_score.std` + eps"),
    # the gate sigmoid(z) where silu(z) belongs: the gate's function as another activation, its value and slope
    # (every failing array, the gradients by the backward of that function)
    ("blind3", "gated_sigmoid_gate", "gated_norm/normal_gs4_f64_3x7x12", "gate",
     "the SiLU computed as sigmoid (its value and slope) reproduces every failing array"),
    # a gradient never written (zeros; its row sums are ~0 too, so "summed over the row" is no evidence)
    ("blind7", "an_dresidual_only_with_prenorm", "add_norm/normal_p_noprenorm_f32_9x7", "backward",
     "dresidual is zero everywhere"),
    # the fused activation applied twice (the kernel's and the caller's)
    ("blind7", "gns_silu_applied_twice", "group_norm_silu/normal_g3_f64_3x6x7", "semantics", "SiLU applied twice"),
    # blind8 (a development set since its measurement): the backward's rstd of the next row, the last row its own
    # (x - mean the row's own), and every row of a block of 4 reading the block's first row's
    ("blind8", "ln_bwd_rstd_of_next_row", "layer_norm/normal_f64_9x7", "layout",
     "rstd read at the next index of its axis 0 (the last its own)"),
    ("blind8", "rms_bwd_rstd_hoisted_per_block", "rms_norm/normal_eps1e-05_f64_9x7", "layout",
     "read at the first index of each block of 4 (j // 4 * 4)"),
    # the variance about the slice's first value, the shift never corrected: an expansion's term lost
    ("blind8", "ln_var_about_first_value", "layer_norm/normal_f32_6x100", "one_pass",
     "about each slice's first value x0"),
    # dweight from x_hat saved in the 16-bit input dtype (dx from the float32 one)
    ("blind8", "rms_dweight_from_saved_half_xhat", "rms_norm/normal_eps1e-05_bf16_6x100", "precision",
     "`xhat` read from a buffer of bfloat16 (rounded to nearest) in `dy * xhat`"),
    # where the failure is decides between neighbouring mechanisms (docs/verdicts.md, "Which mechanism a bug
    # is"): the counter alone -> running (not a constant factor); dz alone -> gate (not backward); a flag read
    # the other way in the backward alone -> backward (not semantics); statistics pooled over the batch -> reduction
    ("blind8", "bn_nbt_reset_to_one", "batch_norm/normal_mom0.5_train3_f64_5x3x4", "running", "num_batches_tracked"),
    ("blind8", "gated_dz_from_xhat_without_affine", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "gate",
     "dz matches the formula with v_hat"),
    ("blind8", "an_prenorm_dres_after_dx", "add_norm/normal_f32_6x100", "backward", "prenorm=False where True"),
    ("blind8", "gn_stats_pooled_over_batch", "group_norm/normal_g3_f64_3x6x7", "reduction", "pooled over the axes"),
    # the backward's two row sums accumulated left to right in the 16-bit input dtype
    ("blind8", "ln_bwd_row_sums_in_half", "layer_norm/normal_bf16_6x100", "precision",
     "accumulated left to right in bfloat16 (each partial sum rounded to nearest), and its function's 1 other"),
    # the amax loop over column blocks stopping one block early
    ("blind8", "nq_amax_loop_skips_last_block", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "block",
     "columns 0-127 only (the last block of 128 columns left out of the loop)"),
    # eps added a second time, to the running variance's batch variance (the state alone fails: running)
    ("blind8", "bn_running_var_includes_eps", "batch_norm/normal_f64_7x3", "running", "eps added to `var` too"),
    # the bias added before the weight multiplies
    ("blind8", "dyt_bias_inside_weight", "dyt/normal_f64_2x5x7", "affine", "bias inside the weight's product"),
    # a backward's operand read from a value of the op's own forward (dweight from the pre-activation p)
    ("blind8", "gns_dweight_from_p", "group_norm_silu/normal_g3_f64_3x6x7", "backward",
     "`xhat` read from the forward's `group_norm_silu.p`"),
    # each power's rms over the whole tensor (every reduction over the slice's axes, the max-based scale too)
    ("blind7", "poly_rms_over_tensor", "poly_norm/normal_f64_3x7", "reduction",
     "forward and backward) taken over the whole array"),
    # a parameter gradient's loop over a block of rows running into the next block's first row
    ("blind7", "rms_dweight_block_boundary_row_twice", "rms_norm/normal_eps1e-05_f64_9x7", "reduction",
     "row 0 of every 4 after the first"),
    # blind9 (a development set since its measurement): ddof's sign flipped (n + ddof): the Bessel convention
    ("blind9", "zs_ddof_sign_flipped", "z_score/normal_f64_9x7", "bessel", "the sign of `ddof` flipped"),
    # a row's sum of squares without its last column (a mask off by one), still divided by N
    ("blind9", "rms_last_column_masked_out", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "without the row's last 1 column (of 100)"),
    # a gradient that is another array of the step (dresidual written as the cotangents)
    ("blind9", "an_dresidual_is_dy", "add_norm/normal_f32_6x100", "backward", "dresidual is dresidual_out + dy"),
    # each group's statistics from its first channel only (a loop bound off): the group's slice losing its tail
    # channels, rule 9's block before rule 10's group (session 32; blind9's author said group, blind39's block)
    ("blind9", "gn_stats_of_groups_first_channel", "group_norm/normal_g3_f64_3x6x7", "block",
     "the statistics over the first 7 of 14 values only"),
    ("blind9", "gn_stats_of_groups_first_channel", "group_norm/normal_g2_f16_2x8x4x4", "block",
     "the group's first 1 channel(s)"),
    # the backward's x_hat read uncentred in its projection, sum(g x) where sum(g (x - mean)) belongs
    ("blind9", "gn_bwd_ds_not_centred", "group_norm/normal_g3_f64_3x6x7", "backward", "`xhat` read uncentred"),
    # a training backward's rstd from the just-updated running variance: the modes mixed
    ("blind9", "bn_train_bwd_rstd_from_running", "batch_norm/normal_f64_7x3", "mode",
     "rstd taken from the new running variance"),
    # a group norm's backward means over every group of the sample: the group count read as 1
    ("blind9", "gns_bwd_sums_over_all_groups", "group_norm_silu/normal_g4_f32_2x8x5x7", "group", "over axis 1 too"),
    # the norm's statistics per quantization block of 16 (the last block partial)
    ("blind9", "nqb_stats_per_quant_block", "norm_quant_block/normal_ln_g_wb_f32_4x256", "group",
     "taken over each block of"),
    # blind10 (a development set since its measurement): the group count and size swapped, the statistics of
    # the other shape written in the kernel's own order
    ("blind10", "gn_group_count_and_size_swapped", "group_norm/normal_g2_f16_2x8x4x4", "group",
     "the count and the size swapped"),
    # the saved statistics stored without the sample offset (row 0 the last sample's, the rest never written)
    ("blind10", "gn_stats_stored_without_sample_offset", "group_norm/normal_g2_f16_2x8x4x4", "layout",
     "written without its leading index's offset"),
    # the weight multiplying x before the statistics
    ("blind10", "rms_weight_before_stats", "rms_norm/normal_eps1e-05_f16_4x128", "affine",
     "the weight applied to x before the statistics"),
    # the backward's g = dy * weight moved after the projection
    ("blind10", "zs_bwd_weight_after_projection", "z_score/normal_f32_6x100", "backward",
     "applied to dx after the projection"),
    # batch statistics over the first sample alone: the channel's reduction losing its tail samples (rule 9)
    ("blind10", "bn_stats_first_sample_only", "batch_norm/normal_f16_8x2x4x4", "block",
     "the batch's first 1 sample(s)"),
    # a parameter gradient averaged over the samples (1/N): the reduction's count before a bare 1/2
    ("blind10", "in_dbias_averaged_over_batch", "instance_norm/normal_f32_2x3x100", "reduction", "averaged over"),
    # the mean's sum in the 16-bit dtype, never re-centred; a sum of squares in a 16-bit accumulator
    ("blind10", "zs_mean_sum_in_half", "z_score/normal_f16_4x128", "precision", "its correction pass left out"),
    ("blind10", "gn_sq_dev_sum_in_half", "group_norm/normal_g2_f16_2x8x4x4", "precision",
     "each term and partial sum rounded"),
    # the backward's statistics read at the sample's first group (x_hat and the SiLU's input recomputed)
    ("blind10", "gns_bwd_stats_of_first_group", "group_norm_silu/normal_g4_f32_2x8x5x7", "layout",
     "the backward, recomputing the forward's values, with the statistics (mean, variance) read at the first"),
    # batch statistics merged from per-sample partials, the between-samples term unweighted
    ("blind10", "bn_merge_delta_count_one", "batch_norm/normal_f32_6x4x25", "merge", "not weighted by the sample's count"),
    # a channel's statistics merged from chunks of 64 with equal weights (the last chunk partial)
    ("blind9", "bn_cta_partials_merged_unweighted", "batch_norm/normal_f32_6x4x25", "merge",
     "merged from chunks of 64 values with equal weights"),
    # a group's variance merged from per-channel partials without the between-channels term (one_pass, rule 7, since
    # session 19; its author's merge accepted beside it), or with the partials stored in the 16-bit dtype (precision)
    ("blind2", "gn_merge_without_delta", "group_norm/normal_g3_f64_3x6x7", "one_pass", "between-channels term left out"),
    ("blind4", "gn_channel_partials_in_half", "group_norm/normal_g2_f16_2x8x4x4", "precision",
     "merged from per-channel partials (mean_i, M2_i) stored in float16"),
    # poly_norm (refnorm/check/explain_poly.py): one rms for every power; the powers of the normalized x; each
    # power normalized as a LayerNorm; 3 bias; the backward with x's rstd for every power, or its chain at x r_1
    ("blind3", "poly_shared_rms", "poly_norm/normal_f64_3x7", "semantics", "one rms, that of x^3, for every power"),
    ("blind8", "poly_powers_of_normalized_x", "poly_norm/normal_f64_3x7", "semantics", "the powers of the normalized x"),
    ("blind4", "poly_powers_centred", "poly_norm/normal_f64_3x7", "semantics", "normalized as a LayerNorm"),
    ("blind9", "poly_bias_added_per_power", "poly_norm/normal_f64_3x7", "affine", "(3 bias)"),
    ("blind5", "poly_bwd_one_rstd", "poly_norm/normal_f64_3x7", "backward", "one saved rstd, x's, for every power"),
    ("blind9", "poly_bwd_chain_at_normalized_x", "poly_norm/normal_f64_3x7", "backward",
     "evaluated at the normalized x"),
    ("blind10", "poly_bwd_linear_term_dropped", "poly_norm/normal_f64_3x7", "backward", "the term of x^1 left out"),
    # group_norm_silu's gate sigmoid taken of x_hat before the affine
    ("blind4", "gns_gate_from_xhat", "group_norm_silu/normal_g3_f64_3x6x7", "affine", "the SiLU's sigmoid taken of x_hat"),
    # the deviations x - mean computed in the 16-bit dtype (the mean rounded to it)
    ("blind10", "ln_centred_in_input_dtype", "layer_norm/normal_bf16_6x100", "precision",
     "the deviations x - mean computed in bfloat16"),
    # add_norm's dropout elsewhere: dx without the keep-mask; the mask on x + residual; 1 / mean(mask) for 1 / (1 - p)
    ("blind5", "an_dx_missing_keep_mask", "add_norm/normal_p_rs_f64_9x7", "dropout", "dx without the keep-mask"),
    ("blind3", "an_mask_on_residual", "add_norm/normal_p_rs_f64_9x7", "dropout", "applied to x + residual"),
    ("blind9", "an_keep_scale_from_mask_density", "add_norm/heavy_tail_p_f64_3x12", "dropout", "1 / mean(mask)"),
    # dyt's alpha outside the tanh; its bias read at the row's index; eps added to the sum of squares (eps / n)
    ("blind5", "dyt_alpha_outside_tanh", "dyt/normal_f64_2x5x7", "semantics", "alpha outside the tanh"),
    ("blind9", "dyt_bias_indexed_by_row", "dyt/normal_f32_3x20x12", "layout", "bias[r % C]"),
    ("blind4", "rms_eps_added_to_sum", "rms_norm/zero_eps1e-06_f32_3x10", "eps", "eps added to the sum"),
    # blind11 (a development set since its measurement): poly_norm's chain factor p x^p; its dbias 3 sum(dy); a
    # tile's padded zeros counted; a gradient's rows one row early; a statistic averaged over the batch; a
    # gated_norm mean over the whole row (the group count read as 1); the gate z of the first group for every one
    ("blind11", "poly_bwd_power_not_decremented", "poly_norm/normal_f64_3x7", "backward", "the power not decremented"),
    ("blind11", "poly_dbias_per_power", "poly_norm/normal_f64_3x7", "reduction", "3 sum(dy)"),
    ("blind11", "gn_count_padded_to_tile", "group_norm/normal_g4_f32_2x8x5x7", "block", "padded zeros"),
    ("blind11", "an_dresidual_row_pointer_early", "add_norm/normal_f32_6x100", "layout", "the expected next row's"),
    ("blind11", "in_mean_output_averaged_over_batch", "instance_norm/normal_f32_2x3x100", "reduction",
     "averaged over axis 0"),
    ("blind11", "gated_ln_mean_over_row", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "group", "over axis"),
    ("blind11", "gated_z_group_pointer_not_advanced", "gated_norm/normal_gs4_f64_3x7x12", "layout",
     "the first group's columns"),
    # the dropout keep-mask read column-major
    ("blind10", "an_mask_read_column_major", "add_norm/mean1e3_rms_p_fp32res_xnormal_bf16_4x128", "dropout",
     "the input mask read in column-major"),
    # session 18: a running buffer read from another's, or every channel's from the first channel's (an eval
    # call: running); one affine input read from another's buffer (layout, rule 12; the two swapped stay affine);
    # 1 + weight kept in float64 on a float16 case (the kernel adds in its compute dtype); a bfloat16 gradient's
    # rows one row early (failing elements as the judge tests them: by got's rounding interval)
    ("blind11", "bn_eval_mean_from_var_buffer", "batch_norm/normal_train3_eval_f32_6x3x5", "running",
     "running_mean read from running_var's"),
    ("blind11", "in_eval_running_of_channel0", "instance_norm/normal_train3_eval_f32_4x3x6", "running",
     "read at the first channel for every channel"),
    ("blind11", "nq_weight_loaded_from_bias_ptr", "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "layout",
     "the input weight read from bias's buffer"),
    ("blind6", "ln_weight_bias_swapped", "layer_norm/normal_f64_9x7", "affine", "swapped"),
    ("blind11", "dyt_weight_offset_one", "dyt/normal_f16_8x64", "affine", "1 + weight where weight belongs"),
    ("blind11", "an_dresidual_row_pointer_early", "add_norm/std1e-3_p_bf16_4x32", "layout", "the expected next row's"),
    # a returned statistic computed without eps where eps enters by a function (hypot(std, sqrt(eps)))
    ("blind11", "zs_std_output_without_eps", "z_score/normal_eps0.3_f32_9x7", "eps", "eps left out"),
    # a float32 case's input loaded through a bfloat16 pointer (forward and backward alike)
    ("blind11", "dyt_alpha_loaded_as_bf16", "dyt/normal_f32_3x20x12", "precision", "the input alpha loaded as bfloat16"),
    # a lower precision than the declared contract: a float64 backward in float32; dweight's partial sums in float16
    ("blind9", "ln_bwd_float64_in_float32", "layer_norm/normal_f64_9x7", "precision",
     "within the bounds of a kernel with float32 arithmetic"),
    ("blind2", "rms_dweight_sum_in_half", "rms_norm/normal_eps1e-05_f16_4x128", "precision",
     "partial sums held in float16 (contract stats_d"),
    # blind12 (held out, measured once; a development set since): the backward's mean read from rstd's buffer
    ("blind12", "ln_bwd_mean_from_rstd_ptr", "layer_norm/normal_f32_6x100", "layout",
     "the mean read from rstd's buffer"),
    # blind13 (held out, measured once; a development set since): dyt's alpha read from the weight's buffer
    # (layout), its backward with alpha's initial value 0.5 (backward)
    ("blind13", "dyt_alpha_loaded_from_weight", "dyt/normal_f32_3x20x12", "layout", "the input alpha read from weight's"),
    ("blind13", "dyt_bwd_alpha_initial_value", "dyt/normal_f32_3x20x12", "backward", "alpha read as its initial value"),
    # a row's amax by a 32-lane warp butterfly whose first step (offset 16) is missing (block)
    ("blind13", "nq_amax_shuffle_from_offset_8", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "block",
     "the first shuffle step (offset 16) missing"),
    # x never centred (an RMS norm's statistics: semantics); a mean of squares divided by the tile's width (block)
    ("blind13", "aln_rms_path_taken", "adaptive_layer_norm/normal_f64_2x5x7", "semantics", "x never centred"),
    ("blind13", "poly_sumsq_over_block_width", "poly_norm/normal_f32_2x3x40", "block", "the tile's width"),
    # a per-sample parameter's gradient missing the terms of some of each sample's tokens
    ("blind11", "aln_dmod_partial_overwritten", "adaptive_layer_norm/normal_f64_2x5x7", "reduction",
     "the first 4 tokens of each sample (0-3) missing"),
    # batch statistics over the first 4 of 6 samples (the tail block skipped), the sums divided by the whole count
    ("blind11", "bn_stats_tail_samples_dropped", "batch_norm/normal_f32_6x4x25", "block",
     "from the first 4 samples (of 6) alone, its sums divided by the whole count"),
    # an eval call's running variance read as a std: a value of the running statistics alone (not a parameter's)
    ("blind8", "in_eval_running_var_read_as_std", "instance_norm/normal_train3_eval_f32_4x3x6", "running",
     "a value of the running statistics alone"),
    # session 19: a group's variance merged from its channels' variances without the spread of their means
    # (one_pass); every mean over a group, forward and backward, divided by the row's length (group); a returned
    # statistic at every token the sample's last token's (layout); a cotangent's term counted twice (backward)
    ("blind13", "gns_var_merge_without_mean_spread", "group_norm_silu/normal_g4_f32_2x8x5x7", "one_pass",
     "each block of 35 values"),
    ("blind13", "gated_rms_group_divided_by_hidden", "gated_norm/normal_gs4_f64_3x7x12", "group",
     "its sum divided by 12"),
    ("blind13", "aln_stats_saved_per_sample", "adaptive_layer_norm/normal_f32_3x20x12", "layout",
     "the expected value at its last index"),
    ("blind12", "an_dres_out_added_twice", "add_norm/normal_p_rs_f64_9x7", "backward", "counted twice"),
    # the backward's statistics, unpacked from the saved tuple, read at the transposed index (stored group-major)
    ("blind13", "gated_bwd_stats_read_row_major", "gated_norm/normal_gs32_f32_8x96", "layout", "the transposed index"),
    # poly_norm's per-power statistics (lists, hooked stacked): rstd of the next row (layout), saved in bfloat16
    ("blind13", "poly_bwd_rstd_of_next_row", "poly_norm/normal_f32_4x64", "layout", "the next index of its axis 1"),
    ("blind13", "poly_rstd_saved_bf16", "poly_norm/normal_f32_4x64", "precision", "saved in a bfloat16 buffer"),
    # the backward's x_hat recomputed from the output, y / weight, the weight at a 32-wide tile's local index
    ("blind11", "rms_bwd_weight_tile_index", "rms_norm/mean1e3_eps1e-05_f32_6x100", "layout", "index j % 32"),
    # a tail block's mask block-local: the lanes past the row load the next row's leading values (block)
    ("blind12", "ln_tail_block_mask_local", "layer_norm/normal_f32_6x100", "block", "the next slice's leading values"),
    # blind14 / blind15 (held out, measured once; development sets since): a slice's sum of squares never divided
    # by its count (the L2 norm's equation: semantics); a warp's strided Welford lanes merged without their means'
    # spread (one_pass); a row sum by a warp butterfly missing a step (block; the forward's statistics alike, the
    # mean of one pass), and a block amax over a pair load's first components (block)
    ("blind14", "rms_sum_of_squares_not_averaged", "rms_norm/normal_eps1e-05_f32_6x100", "semantics",
     "`count(x, A)` left out"),
    ("blind14", "ln_lane_welford_merge_drops_spread", "layer_norm/normal_f32_6x100", "one_pass", "each of 32 lanes"),
    ("blind14", "rms_bwd_dot_shuffle_missing_16", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "without its offset-16 step"),
    ("blind15", "gn_sum_shuffle_half_warp", "group_norm/normal_g4_f32_2x8x5x7", "block", "the mean of one pass"),
    ("blind15", "nqb_mx_amax_of_even_lanes", "norm_quant_block/normal_ln_mx_wb_f32_4x256", "block",
     "the first value of each pair"),
    # dbias summed from dy * weight (backward); y stored in the 16-bit dtype before the block quantizer (precision)
    ("blind15", "zs_dbias_times_weight", "z_score/normal_f32_6x100", "backward", "(sum(dy * weight)"),
    ("blind15", "nqb_y_stored_in_input_dtype", "norm_quant_block/normal_rms_g_bf16_8x512", "precision",
     "q from that rounded y"),
    # one norm over the whole tensor (every reduction over it, its sums as they are: reduction); a tail block of
    # rows clamped to the last row in dweight's reduction (that row's terms counted 55 more times: reduction)
    ("blind15", "lp_dim_none_whole_tensor", "lp_normalize/normal_f32_6x100", "reduction", "its sums as they are"),
    ("blind14", "rms_dweight_clamped_rows_repeat_last", "rms_norm/normal_eps1e-05_f64_9x7", "reduction",
     "counted 55 more times"),
    # partial sums rounded to the 16-bit dtype before they are added: the mean's per 64-column block (its
    # correction pass left out); each sample's, of the mean and the variance (precision)
    ("blind14", "ln_mean_block_partials_in_half", "layer_norm/normal_f16_4x128", "precision", "each block of 64"),
    ("blind15", "bn_channel_sums_in_half", "batch_norm/normal_bf16_6x4x25", "precision",
     "in the mean and the variance alike"),
    # an nvfp4 block scale converted to E4M3 rounding up (its own rounding rule: scale_rounding, rule 5)
    ("blind15", "nqb_nvfp4_block_scale_rounded_up", "norm_quant_block/normal_rms_nvfp4_bf16_8x512", "scale_rounding",
     "rounding up (the next value above)"),
    # an mxfp8 block scale's exponent clamped at 0 (scales below 1 left at 1)
    ("blind13", "nqb_mx_exponent_clamped_at_zero", "norm_quant_block/normal_rms_mx_bf16_8x512", "quant_scale",
     "clamped below at 1"),
    # session 20, on blind14 and blind15 (development sets since their measurement): dx's projection term's
    # mean over n - 1 (bessel, rule 1); two keep-masks exchanged (another branch's mask: dropout, rule 4)
    ("blind14", "ln_bwd_proj_unbiased_count", "layer_norm/normal_f32_260x3", "bessel",
     "mean taken over n - 1 = 2 where n = 3 belongs"),
    ("blind14", "an_branch_masks_swapped", "add_norm/normal_p_par_f64_5x12", "dropout", "the inputs mask and mask1 "
     "swapped"),
    # a deviation fitting within the bound derived at its own point (SiLU's slope at the deviated p, mean 1e3)
    ("blind15", "gns_bias_loaded_from_weight_ptr", "group_norm_silu/mean1e3_g4_f32_2x8x5x7", "layout",
     "the input bias read from weight's buffer"),
    # a block quantizer's explained e8m0 scale judged on the check's grid (its rounding rule)
    ("blind15", "nqb_rms_weight_offset_applied", "norm_quant_block/normal_rms_mx_f32_3x200", "affine",
     "1 + weight where weight belongs"),
    # the mean of squares held in bfloat16 before its root (rms's square rounded)
    ("blind14", "rms_mean_square_in_input_dtype", "rms_norm/normal_eps1e-05_bf16_6x100", "precision",
     "its square of its intermediate"),
    # a scalar's gradient summed over one column only; the eps-outside backward's u = x / rms (rule 6)
    ("blind14", "dyt_dalpha_first_column_only", "dyt/normal_f64_2x5x7", "reduction", "over index 0 of axis 2 only"),
    ("blind14", "rms_bwd_proj_on_x_over_rms", "rms_norm/normal_eps1e-05_f64_9x7", "eps",
     "backward with backward.placement = 'outside' where 'inside' belongs"),
    # a near miss judged within the changed arithmetic's own conditioning (the mean read from rstd's buffer at
    # mean 1e3: x_hat' about 1000 rstd, its backward cancelling far beyond the reference's bound)
    ("blind12", "ln_bwd_mean_from_rstd_ptr", "layer_norm/mean1e3_bf16_9x7", "layout", "the mean read from rstd's "
     "buffer"),
    # the gate input's gradient alone wrong (rule 3 names any deviation of dz alone: gate); tanh's derivative
    # written 1 - t
    ("blind11", "gated_silu_grad_missing_one_minus_s", "gated_norm/normal_f32_4x64", "gate",
     "only the gate input's gradient dz fails"),
    ("blind7", "dyt_dtanh_as_one_minus_t", "dyt/normal_f64_2x5x7", "backward", "taken as 1 - t (t = tanh(alpha x))"),
    # a quantizer's static scale taken another way (ignored: the dynamic path; read as an amax), an absent
    # scale_ub loaded as 0 (every scale its floor)
    ("blind5", "nq_static_scale_ignored", "norm_quant/normal_rms_e4m3_static_bf16_8x256", "quant_scale",
     "the static scale ignored"),
    ("blind14", "nq_static_scale_read_as_amax", "norm_quant/normal_rms_e4m3_static_bf16_8x256", "quant_scale",
     "read as a calibrated amax"),
    ("blind9", "nq_absent_scale_ub_loaded_as_zero", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "quant_scale",
     "the absent scale_ub read as 0"),
    # nvfp4's tensor amax alone taken from the pre-norm x + residual (the block amaxes y's)
    ("blind13", "nqb_nvfp4_tensor_amax_of_input", "norm_quant_block/normal_rms_nvfp4_bf16_8x512", "quant_scale",
     "the tensor encode factor from the amax of the pre-norm"),
    # the backward's grid of 108 programs taking floor(M / 108) rows each (rows 216-259 never processed)
    ("blind14", "ln_bwd_rows_per_program_floored", "layer_norm/normal_f32_260x3", "block",
     "a grid of P programs each taking floor(260 / P) rows"),
    # a power-of-two tile's padded lanes counted in the variance (their deviations -mean not masked)
    ("blind15", "aln_var_pad_lanes_counted", "adaptive_layer_norm/normal_f64_2x5x7", "block",
     "padded lanes of a 8-wide tile counted"),
    # the one-pass variance E[x^2] - E[x]^2 in float32 in ops without a catalogue variant of it
    ("blind12", "an_ln_var_one_pass", "add_norm/mean1e3_fp32res_xnormal_f16_6x100", "one_pass", "E[x^2] - E[x]^2 from one pass"),
    # one sample's terms alone in an instance norm's dweight (the other 39 samples' missing)
    ("blind6", "in_dweight_last_sample", "instance_norm/normal_f32_40x3x2x3", "reduction", "the first 39"),
    # session 21, on blind16 and blind17 (development sets since their measurement): the rstd's root left out
    # (1 / (ms + eps): another equation, rule 16, though eps sits under the root)
    ("blind16", "rms_rstd_reciprocal_without_root", "rms_norm/normal_eps1e-05_f64_9x7", "semantics",
     "`np.hypot(rms, np.sqrt(eps))` read as its square"),
    # the running statistics updated twice with one batch's (the old value weighted (1 - m)^2)
    ("blind17", "bn_running_updated_twice", "batch_norm/normal_f64_7x3", "running", "updated twice"),
    # the backward indexing NCHW dy with channels_last strides (an input read in another index order)
    ("blind17", "gn_bwd_dy_read_channels_last", "group_norm/normal_g4_f32_2x8x5x7", "layout",
     "dy read as the (35, 8) index order of axes 1..3"),
    # a SiLU the call did not ask for after the norm, forward and backward (a fused kernel's flag on)
    ("blind17", "gn_silu_flag_default_on", "group_norm/normal_g3_f64_3x6x7", "semantics", "a SiLU applied to y"),
    # one sum of the backward averaged (its projection's mean where its sum belongs: the formula's term)
    ("blind17", "lp_bwd_projection_mean_not_sum", "lp_normalize/normal_f64_9x7", "backward",
     "divided by its count 7 (a mean where the sum belongs)"),
    # the last channel never processed (a grid of two-channel programs rounded down); the parameter
    # gradients without the last samples' terms (batch_norm's per-sample terms)
    ("blind17", "bn_channel_grid_floor_pairs", "batch_norm/normal_f64_7x3", "block", "slice 2 (of 3) never processed"),
    ("blind17", "bn_dparams_tail_samples_dropped", "batch_norm/normal_f64_7x3", "reduction",
     "the terms of the last 3 samples (4-6) missing"),
    # a parameter gradient's accumulator never reset (running sums); partials in a buffer of a group's width
    ("blind16", "poly_dweight_accumulator_not_reset", "poly_norm/normal_f64_3x7", "reduction", "running sums"),
    ("blind16", "gated_dparams_buffer_of_group_width", "gated_norm/normal_gs32_f32_8x96", "reduction",
     "a partial buffer of 32 entries"),
    # a warp's strided lanes merged with equal weights (merge); one warp's slot of a block's partials read (block)
    ("blind16", "ln_warp_welford_merge_equal_counts", "layer_norm/normal_f64_9x7", "merge",
     "means are averaged with equal weights"),
    ("blind16", "rms_sumsq_second_warp_dropped", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "the columns j mod 64 < 32 only"),
    # values a grid never processes: a vector load's tail (explain_grid), slices past floor(R / 128) programs
    ("blind17", "lp_vec4_tail_columns_dropped", "lp_normalize/normal_f64_9x7", "block",
     "4-wide vector loads without the tail's 3"),
    ("blind17", "zs_rows_grid_floor_blocks", "z_score/normal_f32_260x3", "block",
     "floor(260 / B) where ceil belongs (B = 8, 16, 32, 64, 128 or 256)"),
    # a row's block scales stored at row 0 (judged on the check's grid); eps itself rounded (its value, rule
    # 6); dy * weight rounded in the backward (a value of the activations: precision, not the affine's cast)
    ("blind17", "nqb_scale_row_offset_missing", "norm_quant_block/normal_rms_g_bf16_8x512", "layout",
     "without its leading index's offset"),
    ("blind16", "nq_eps_in_input_dtype", "norm_quant/std1e-6_rms_i8_dyn_bf16_4x256", "eps",
     "forward.eps (refnorm/specs/norm_quant.py) rounded to nearest to bfloat16"),
    ("blind16", "ln_bwd_weighted_dy_in_input_dtype", "layer_norm/normal_f16_4x128", "precision",
     "layer_norm_backward.g (refnorm/specs/layer_norm.py) rounded to nearest to float16"),
    # session 22, on blind18 and blind19 (development sets since their measurement): a parameter gradient zero
    # everywhere is explained, its reduction's partial sums all dropped (rule 11's) or a column grid of no program
    # (rule 9's: blind30's dyt_dparams_column_grid_floor on C < 32 leaves the same zeros): session 28 names neither
    ("blind18", "rms_dweight_first_partial_skipped", "rms_norm/normal_eps1e-05_f64_9x7", None,
     "none of the slices' contributions reaches it"),
    # two floating options exchanged (eps and momentum in each other's positional slot): eps's value
    ("blind19", "in_eps_momentum_swapped", "instance_norm/normal_f64_3x2x7", "eps", "the options eps and momentum exchanged"),
    # tile families for every op: a (scaled) sum of squared deviations with a power-of-two tile's padded lanes, or
    # merged from partial variances without their means' spread; every lane of the tile counted; statistics or a
    # backward's row sums over whole tiles only (the trailing positions' tail never entered)
    ("blind19", "zs_pad_lanes_in_sum_of_squares", "z_score/normal_f64_9x7", "block", "padded lanes of a 8-wide tile"),
    ("blind19", "zs_chunk_merge_without_mean_spread", "z_score/normal_f32_6x100", "one_pass",
     "the spread of the partial means left out"),
    ("blind19", "gns_stats_over_pow2_tile", "group_norm_silu/normal_g3_f64_3x6x7", "block", "every lane counted"),
    ("blind19", "bn_spatial_tail_tile_dropped", "batch_norm/normal_f32_6x4x25", "block", "a loop over whole tiles only"),
    ("blind18", "ln_bwd_row_sums_tail_block_skipped", "layer_norm/normal_f32_6x100", "block",
     "a loop over whole tiles only"),
    # partials merged with wrong weights within a kernel (merge, rule 14): tiles merged as if every tile full; a
    # running Welford state's spread term weighted n_b
    ("blind19", "in_tile_partials_merged_unweighted", "instance_norm/normal_f32_2x3x100", "merge",
     "merged as if every chunk held"),
    ("blind18", "ln_block_welford_combine_spread_by_nb", "layer_norm/normal_f32_6x100", "merge",
     "running Welford state"),
    # returned statistics read from a buffer packing the two (pairs split as halves: layout); the affine folded
    # into one scale and shift, the shift without the weight (affine); running_mean with the unbiased factor
    ("blind18", "ln_packed_stats_split_as_halves", "layer_norm/normal_f64_9x7", "layout",
     "written as (mean, rstd) pairs slice by slice and read as the buffer's first half"),
    ("blind19", "gn_fused_shift_without_gamma", "group_norm/normal_g3_f64_3x6x7", "affine", "the shift without the weight"),
    ("blind19", "bn_running_mean_bessel_scaled", "batch_norm/normal_f64_7x3", "bessel", "times n / (n - 1) = 7/6"),
    # the backward's statistics of another instance (each candidate bound to its own function's values); the
    # backward's gate values of the next row
    ("blind19", "in_bwd_stats_channel_major", "instance_norm/normal_f64_3x2x7", "layout",
     "the backward's mean and rstd read at the transposed index"),
    ("blind18", "gated_bwd_z_of_next_row", "gated_norm/normal_f32_4x64", "layout",
     "the backward's values of z alone (ds_dz, s) read at the next row's"),
    # poly_norm: the bias inside one term's product; the projection on the power before its normalization
    ("blind18", "poly_bias_inside_linear_term", "poly_norm/normal_f64_3x7", "affine", "w2 (h_1 + bias)"),
    ("blind18", "poly_bwd_proj_on_unnormalized_power", "poly_norm/normal_f64_3x7", "backward", "mean(g_p x^p)"),
    # a forward slice's own sum averaged: another normalizer's equation (the p-norm as a power mean)
    ("blind19", "lp_norm_as_power_mean", "lp_normalize/normal_f64_9x7", "semantics", "divided by its count 7"),
    # session 23, on blind20 and blind21 (development sets since their measurement): one backward operation's x_hat
    # from the statistics at another index (the next channel's rstd; a column-parallel kernel's j mod R)
    ("blind21", "bn_dweight_rstd_of_next_channel", "batch_norm/normal_f16_8x2x4x4", "layout",
     "x_hat recomputed from the rstd read at the next index of its axis 0 (wrapping) in `dy * xhat`"),
    ("blind20", "ln_dweight_stats_at_column_index", "layer_norm/normal_f32_6x100", "layout",
     "read at the column index j (mod the row count 6)"),
    # n - ddof read as the tile's width (8 for 7: n + 1, not the Bessel convention); a count read as n - 1
    ("blind20", "ln_var_over_block_width", "layer_norm/normal_f64_9x7", "block", "= 7 read as 8 (the tile's width"),
    ("blind20", "poly_mean_square_over_h_minus_1", "poly_norm/normal_f32_4x64", "bessel", "= 64 read as 63"),
    # the running variance's Bessel factor written upside down (bessel, rule 1, not running)
    ("blind21", "bn_running_var_bessel_inverted", "batch_norm/normal_f32_6x4x25", "bessel", "written upside down"),
    # the backward's means over the batch too (an instance norm's, the batch norm kernel reused): reduction
    ("blind21", "in_bwd_means_over_batch", "instance_norm/normal_f32_2x3x100", "reduction", "over axis 0 too"),
    # the weight and bias read at the row's index; a factor distributed over a sum, missing from one term
    ("blind21", "zs_weight_indexed_by_row", "z_score/normal_f64_9x7", "layout", "read at the row's index"),
    ("blind21", "gns_silu_grad_sigmoid_prime_without_s", "group_norm_silu/normal_g3_f64_3x6x7", "backward",
     "`s` applied to `1.0` alone in `s * (1.0 + p * rest)`"),
    # each block's amax as max(y) (the absolute value left out): the quantizer's scale
    ("blind21", "nqb_amax_signed_max", "norm_quant_block/normal_ln_g_wb_f32_4x256", "quant_scale",
     "each block's max(y)"),
    # the count from some of the reduced axes (N * W where N * H * W belongs); a dynamic scale rounded up to a
    # power of two where the raw quotient belongs (scale_rounding)
    ("blind21", "bn_count_from_last_axis", "batch_norm/normal_f32_16x3x4x5", "reduction",
     "taken as the sum divided by 80 where n = 320 belongs"),
    ("blind20", "nq_dyn_scale_rounded_up_pow2", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "scale_rounding",
     "rounded up to a power of two"),
    # a forward statistic of each pair of rows the first row's (a program of two rows loading it once)
    ("blind21", "aln_rstd_of_first_row_in_pair", "adaptive_layer_norm/normal_f32_3x20x12", "layout",
     "read at the first index of each block of 2 (a program of 2 slices"),
    # session 24, on blind22 and blind23 (development sets since their measurement): two weights of one role
    # exchanged in the backward alone (which parameter multiplies: affine, rule 13 before 15); a row's statistic
    # from its whole block of rows (a tile reduced without its axis); dx's two row sums exchanged; poly_norm's
    # powers differentiated as centred norms; group_norm_silu's group sums without the SiLU's derivative
    ("blind22", "poly_bwd_weights_reversed", "poly_norm/normal_f64_3x7", "affine", "the weights in reversed order"),
    ("blind22", "rms_sumsq_over_row_block", "rms_norm/normal_eps1e-05_f64_9x7", "block",
     "from the sum over its block of 4 rows"),
    ("blind22", "ln_bwd_row_sums_swapped", "layer_norm/normal_f64_9x7", "backward", "the row sums exchanged"),
    ("blind22", "poly_bwd_centred", "poly_norm/normal_f32_4x64", "backward", "by a centred norm's formula"),
    ("blind23", "gns_bwd_proj_sums_without_silu_grad", "group_norm_silu/normal_g3_f64_3x6x7", "backward",
     "the SiLU's derivative left out of them"),
    # a second program's row offset left out of a parameter gradient's reduction; a pipelined loop's prologue
    # tile never accumulated; the positions' count padded to whole tiles; the last columns of a parameter
    # gradient never written (a column grid rounded down)
    ("blind23", "bn_dparams_second_program_offset_missing", "batch_norm/normal_f64_7x3", "reduction",
     "the first 3 samples (0-2) counted twice and the last 3 (4-6) missing"),
    ("blind23", "lp_prologue_tile_not_accumulated", "lp_normalize/normal_f32_6x100", "block",
     "without the row's first 64 columns"),
    ("blind23", "bn_count_padded_to_spatial_tile", "batch_norm/normal_f16_8x2x4x4", "block", "padded to whole tiles"),
    ("blind22", "ln_dparams_column_grid_floor", "layer_norm/normal_f32_6x100", "block",
     "entries 64-99 (of 100) never written (0)"),
    # x loaded again by the backward at the next row (the forward's saved tanh(alpha x) right)
    ("blind22", "dyt_bwd_x_of_next_row", "dyt/normal_f64_2x5x7", "layout",
     "the backward's values of x alone (backward.x) read at the next row's (the last its own"),
    # fp8 codes truncated at per-block scales; MX elements clipped at 2^emax
    ("blind23", "nqb_fp8_q_truncated", "norm_quant_block/normal_ln_g_wb_f32_4x256", "rounding",
     "rounded to float8_e4m3fn toward zero"),
    ("blind23", "nqb_mx_clip_at_pow2_emax", "norm_quant_block/normal_ln_mx_wb_f32_4x256", "saturation",
     "saturated at 256 (2^emax = 256"),
    # session 25, on blind24 and blind25 (development sets since their measurement): dx off by one factor (alpha
    # applied twice) and a parameter gradient twice its value: rule 14's constant; a group norm never centred
    # (not every mean's count halved: the same values); dy read at the next row, the last masked to 0
    ("blind24", "dyt_dx_alpha_squared", "dyt/normal_f64_2x5x7", "constant", "`gd` read from `dx` in `gd * a`"),
    ("blind24", "rms_dweight_atomic_and_host_sum", "rms_norm/normal_eps1e-05_f64_9x7", "constant",
     "twice the sum"),
    ("blind25", "gn_uncentred_rms_flag_default", "group_norm/normal_g3_f64_3x6x7", "semantics", "x never centred"),
    ("blind24", "ln_bwd_dy_of_next_row", "layer_norm/normal_f64_9x7", "layout",
     "read at the next row's (the last row's load masked out of bounds: 0)"),
    # the ds / db form's ds from g x_hat; a scaled sum of squares about the first value; a backward mean's
    # operand read from dy; the residual added after the norm; poly_norm's weights folded before the norm;
    # dyt's weight inside the tanh; gated_norm's backward v_hat without the gate
    ("blind25", "gn_bwd_ds_from_xhat_in_x_form", "group_norm/normal_g3_f64_3x6x7", "backward",
     "with ds = sum(g x_hat) where sum(g x) belongs"),
    ("blind25", "zs_var_about_first_value_uncorrected", "z_score/normal_f64_9x7", "one_pass",
     "about each slice's first value x0"),
    ("blind25", "zs_bwd_mean_term_of_dy", "z_score/normal_f64_9x7", "backward", "`g` read from `dy` in `g.mean("),
    # (two values a slice: the expected dx within its bound of 0, so no whole factor: still the backward's)
    ("blind25", "zs_bwd_mean_term_of_dy", "z_score/normal_n2_f64_4x2", "backward", "`g` read from `dy` in `g.mean("),
    ("blind24", "an_residual_added_after_norm", "add_norm/normal_f32_6x100", "semantics",
     "the residual added after the norm"),
    ("blind24", "poly_weight_folded_before_rms", "poly_norm/normal_f64_3x7", "affine", "folded into its power"),
    ("blind24", "dyt_weight_inside_tanh", "dyt/normal_f64_2x5x7", "affine", "folded into the tanh's argument"),
    ("blind24", "gated_bwd_vhat_recomputed_without_gate", "gated_norm/normal_gs4_f64_3x7x12", "gate",
     "v_hat recomputed in the backward from the loaded x"),
    # a scalar tail loop reading the tail's first square at every tail index (a row of 100: 8-wide loads, 4 left)
    ("blind24", "rms_sumsq_scalar_tail_index_not_advanced", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "read as the tail's first"),
    # (session 26, on blind26 / blind27) one value stored or read at another index: a row's mean stored one
    # slot late (the first slot 0); the running buffers' stores exchanged; every channel's y at channel 0; the
    # backward's std at the next slice (x_hat from it); x's rows loaded at a pitch padded to 8
    ("blind26", "ln_mean_stored_one_row_late", "layer_norm/normal_f64_9x7", "layout", "stored one slot late"),
    ("blind27", "bn_running_stores_swapped", "batch_norm/normal_f64_7x3", "running", "returned in its place"),
    ("blind27", "in_y_store_channel_offset_missing", "instance_norm/normal_f64_3x2x7", "layout",
     "written without axis 1's offset"),
    ("blind27", "zs_bwd_std_of_next_slice", "z_score/normal_f64_9x7", "layout", "the backward's std read at the next index"),
    ("blind26", "ln_row_pitch_padded_to_8", "layer_norm/normal_f32_260x3", "layout", "at a row pitch of 8"),
    # a per-value Welford update with (x - mean_k)^2 in M2; the backward's two row sums under one column mask
    # off by one; the last row never processed (a persistent loop's bound rows - 1)
    ("blind26", "ln_welford_m2_update_new_delta_squared", "layer_norm/normal_f32_6x100", "merge", "Welford"),
    ("blind26", "ln_bwd_row_sums_last_column_masked", "layer_norm/normal_f32_6x100", "block",
     "a column mask off by one"),
    ("blind26", "rms_persistent_loop_drops_last_row", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "(off by one)"),
    # each group's statistics pooled over the batch (the mean's, the variance's reductions across functions);
    # z_score's parameter gradients without the last slice's terms (its slices along axis 0 independent)
    # (session 28: group_norm_silu in explain_index's axes families, which say it first: the axes (0, 2, 3) of its
    # (N, G, C / G, positions) view where (2, 3) belong)
    ("blind27", "gns_stats_pooled_over_batch", "group_norm_silu/normal_g4_f32_2x8x5x7", "reduction",
     "pooled over the axes of x seen as (2, 4, 2, 35) (0, 2, 3) where (2, 3) belong"),
    ("blind27", "zs_dparams_last_row_dropped", "z_score/normal_f64_9x7", "reduction", "the last 1"),
    # dx's stores skipped on the last samples (a grid of 4 samples rounded down, the sums right); a row's sum
    # of squares over its first tile of 128 only; poly_norm's linear term not normalized; add_norm's dweight
    # from x - mean (rstd left out of x_hat)
    ("blind27", "bn_dx_sample_grid_floor_quads", "batch_norm/normal_f32_6x4x25", "block", "never written"),
    ("blind27", "nqb_rms_sumsq_first_tile_only", "norm_quant_block/normal_rms_g_bf16_8x512", "block",
     "first 128 columns only"),
    ("blind26", "poly_linear_term_unnormalized", "poly_norm/normal_f32_4x64", "semantics", "x^1 term not normalized"),
    ("blind26", "an_dweight_unnormalized", "add_norm/normal_f32_6x100", "backward", "read unnormalized"),
    # y converted to float16 rounded down, to bfloat16 rounded up (a directed intrinsic): rounding, not the
    # lower precision whose error is two-sided
    ("blind26", "rms_f16_y_rounded_down", "rms_norm/normal_eps1e-05_f16_4x128", "rounding", "toward -inf"),
    ("blind26", "dyt_bf16_y_rounded_up", "dyt/normal_bf16_6x96", "rounding", "toward +inf"),
    ("blind27", "gns_silu_before_norm", "group_norm_silu/normal_g4_f32_2x8x5x7", "semantics",
     "the SiLU applied before the norm"),
    # lp_normalize's y divided by max|x|; its eps clamp as min (y = x / eps: 1e12 times the normalized values)
    ("blind27", "lp_divided_by_max_abs", "lp_normalize/normal_f32_6x100", "semantics", "max|x|"),
    ("blind27", "lp_eps_clamp_as_min", "lp_normalize/normal_f64_9x7", "eps", "clamp as min"),
    # group_norm's dweight / dbias each without its positions' tail (partial sums across the slices: rule 11);
    # group_norm_silu's dbias summed from g = dp w (a parameter gradient's operand searched first)
    ("blind27", "gn_dparams_spatial_tail_dropped", "group_norm/normal_g4_f32_2x8x5x7", "reduction",
     "partial sums across the slices"),
    ("blind27", "gns_dbias_from_g", "group_norm_silu/normal_g4_f32_2x8x5x7", "backward", "read from `g`"),
    ("blind26", "gated_group_loop_last_skipped", "gated_norm/normal_gs32_f32_8x96", "block", "last group"),
    # (session 27, on blind28 / blind29) a slice's mean over the tile's width n + 1 (block); the variance as
    # the raw mean of squares (one_pass); a root statistic as another normalizer's: its root left out, the L1
    # mean |x| (rms_norm: the L1 variant with its own backward, explain.rms_l1)
    ("blind28", "ln_mean_over_pow2_block", "layer_norm/normal_f64_9x7", "block", "divided by 8 where n = 7"),
    ("blind28", "ln_var_as_raw_mean_square", "layer_norm/normal_f64_9x7", "one_pass", "taken about 0"),
    ("blind28", "rms_normalized_by_mean_abs", "rms_norm/normal_eps1e-05_f32_6x100", "semantics",
     "the L1 variant's: rstd = 1 / (mean|x| + eps)"),
    # a forward change whose gradients differentiate the kernel's own forward: every failing output reproduced,
    # the gradients not by the specification's backward
    ("blind13", "aln_rms_path_taken", "adaptive_layer_norm/normal_f64_2x5x7", "semantics",
     "reproduces every failing output (the failing gradients are not"),
    ("blind29", "lp_root_dropped", "lp_normalize/normal_f64_9x7", "semantics", "the root left out"),
    ("blind29", "zs_divided_by_variance", "z_score/normal_f64_9x7", "semantics", "the root left out of `z_score`"),
    # returned statistics stored one slot on, wrapping; x_hat normalized twice; a channel's spatial tail unstored
    ("blind29", "gn_stats_stored_next_slot", "group_norm/normal_g3_f64_3x6x7", "layout", "wrapping"),
    ("blind28", "nq_amax_output_of_next_row", "norm_quant/normal_rms_e4m3_dyn_bf16_8x256", "layout", "next element"),
    ("blind29", "bn_dweight_rstd_applied_twice", "batch_norm/normal_f64_7x3", "backward", "normalized twice"),
    ("blind29", "gn_dx_spatial_tail_unstored", "group_norm/normal_g4_f32_2x8x5x7", "block", "4-wide vector"),
    # Keras' default eps; the SiLU computed as another activation (a gate's: gate; an activation: no name)
    ("blind29", "in_eps_fixed_keras_default", "instance_norm/normal_f64_3x2x7", "eps", "eps 0.001 (a default)"),
    ("blind28", "gated_gate_quick_gelu", "gated_norm/normal_gs4_f64_3x7x12", "gate", "computed as quick-GELU"),
    ("blind29", "gns_activation_mish", "group_norm_silu/normal_g4_f32_2x8x5x7", None, "computed as Mish"),
    ("blind28", "poly_bwd_cube_factor_from_square_factor", "poly_norm/normal_f32_4x64", "backward",
     "another power's register"),
    ("blind28", "nq_dyn_scale_rounded_up_to_bf16", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "scale_rounding",
     "rounded up (toward +inf) to a bfloat16"),
    ("blind29", "aln_modulated_before_norm", "adaptive_layer_norm/normal_noshift_f32_2x6x9", "semantics",
     "before the normalization"),
    # a bfloat16 scalar twice its value (the factor within a unit of its dtype); one option before two exchanged
    ("blind28", "dyt_dalpha_accumulated_twice", "dyt/normal_bf16_6x96", "constant", "twice the sum"),
    ("blind28", "an_zc_bwd_offset_missing", "add_norm/mean1e3_nobias_rms_zc_xnormal_par_bf16_4x64", "affine",
     "weight_offset 0 where 1 belongs"),
    # the forward kernel alone without its affine (the gradients passing); an eval call's rstd as the running
    # variance; a group's variance pooled over the row; a branch's gradient from its own cotangent alone; a
    # float64 case in float32 with three channels' statistics (too few to tell a side)
    ("blind29", "in_eval_affine_dropped", "instance_norm/normal_train3_eval_f32_4x3x6", "affine",
     "the forward alone with the affine left out"),
    ("blind29", "in_eval_running_var_read_as_invstd", "instance_norm/normal_train3_eval_f32_4x3x6", "running",
     "taken as the running variance itself"),
    ("blind28", "gated_ln_var_over_row_about_group_means", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "group",
     "divided by its 3 slices too"),
    ("blind28", "an_dx1_from_y1_branch_only", "add_norm/normal_p_par_f64_5x12", "backward", "from dy1 alone"),
    ("blind29", "bn_float64_via_float32", "batch_norm/normal_f64_7x3", "precision", "float32 arithmetic"),
    # rms_norm's L1 variant with its own backward, the forward within its bounds on rows near 1e4: semantics
    ("blind28", "rms_normalized_by_mean_abs", "rms_norm/mean1e4_eps1e-05_f32_260x3", "semantics", "the L1 variant's"),
    # session 28, on blind30 and blind31 (development sets since their measurement): a cotangent read without its
    # sample offset; the gain applied twice; the backward's saved mean alone of the next group; batch statistics
    # per sample; a backward projection fed a forward value (p for x_hat); y and q stored at a padded row pitch
    ("blind31", "bn_dy_sample_offset_missing", "batch_norm/normal_f32_6x4x25", "layout", "holding index 0's values"),
    ("blind30", "rms_weight_applied_twice", "rms_norm/normal_eps1e-05_f32_6x100", "affine", "applied twice"),
    ("blind31", "gn_bwd_mean_of_next_group", "group_norm/normal_g4_f32_2x8x5x7", "layout",
     "the backward's mean read at the next flat index"),
    ("blind31", "bn_stats_per_sample", "batch_norm/normal_f32_6x4x25", "group", "over groups of 25"),
    ("blind31", "gns_bwd_projection_of_p", "group_norm_silu/normal_g4_f32_2x8x5x7", "backward",
     "read from the forward's `group_norm_silu.p`"),
    ("blind31", "lp_y_store_row_pitch_padded", "lp_normalize/normal_f32_6x100", "layout", "at a row pitch of 104"),
    ("blind30", "nq_q_rows_at_padded_pitch", "norm_quant/normal_eps0.3_rms_e4m3_dyn_noaffine_bf16_4x64", "layout",
     "at a row pitch of 128"),
    # padded lanes loaded as 1 in the mean; a count without one of x's axes; chunk means averaged, the variance
    # about them; chunk norms added; the weight before a gated norm; a power's register loaded with another
    ("blind30", "ln_mean_pad_lanes_loaded_as_one", "layer_norm/normal_f32_6x100", "block", "loaded as 1"),
    ("blind31", "gn_count_from_last_axis", "group_norm/normal_g4_f32_2x8x5x7", "reduction", "divided by 14"),
    ("blind30", "ln_chunk_means_averaged", "layer_norm/normal_f32_6x100", "merge", "the variance about it"),
    ("blind31", "lp_chunk_norms_added", "lp_normalize/normal_f32_6x100", "merge", "the chunks' norms added"),
    ("blind30", "gated_weight_folded_before_norm", "gated_norm/normal_f32_4x64", "affine", "before the statistics"),
    ("blind30", "poly_cube_term_from_square_register", "poly_norm/normal_f32_4x64", "semantics",
     "the x^3 term computed from x^2"),
    # 1 / n held in bfloat16; a scale floored at another value; an unwritten amax (no mechanism); a parameter
    # indexed channels-last before a SiLU; dbias from dweight's product where x_hat is 0 (no grid's zeros)
    ("blind30", "ln_inv_n_in_input_dtype", "layer_norm/normal_bf16_6x100", "precision", "1 / n held in bfloat16"),
    ("blind30", "nq_default_floor_precedence", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "quant_scale",
     "the scale floored at"),
    ("blind30", "nq_static_amax_output_unwritten", "norm_quant/pm1_eps0_rms_i8_static_ties_f32_4x64", None,
     "never written"),
    ("blind31", "gns_weight_index_channels_last", "group_norm_silu/normal_g4_f32_2x8x5x7", "layout",
     "stored in the axis order (0, 2, 3, 1)"),
    ("blind31", "bn_dbias_from_dy_xhat", "batch_norm/const_eps1e-12_f16_7x3", "backward", "dbias"),
    # session 29, on blind33 (a development set since its measurement): a value of the parameters alone
    # broadcast by the specification's reshaping helper (per_channel(bias, x)) is the affine's
    ("blind33", "gn_bias_added_twice", "group_norm/normal_g4_f32_2x8x5x7", "affine", "`per_channel(bias, x)` doubled"),
    # the backward's statistics read at another index with a saved affine of x_hat (group_norm_silu's p) recomputed too
    ("blind33", "gns_bwd_stats_read_group_major", "group_norm_silu/normal_g4_f32_2x8x5x7", "layout",
     "mean and rstd read at the transposed index"),
    # the whole per-channel affine before the normalization (instance_norm's: rule 16, another equation)
    ("blind33", "in_affine_before_normalization", "instance_norm/normal_f32_2x3x100", "semantics",
     "affine applied to x before the normalization"),
    # session 30, on blind32/33 (development sets since their measurement): the folded affine's factor distributed
    # over the bias too
    ("blind32", "ln_bias_folded_times_rstd", "layer_norm/normal_f32_6x100", "affine", "the bias multiplied by rstd"),
    # dx written over dy's buffer before the parameter gradients read it (batch_norm's; dyt's from dx's exact value)
    ("blind33", "bn_dparams_from_overwritten_dy", "batch_norm/normal_f64_7x3", "backward", "dx written over dy's"),
    ("blind32", "dyt_dparams_from_dx_in_dy_buffer", "dyt/normal_bf16_6x96", "backward", "dx written over dy's"),
    # x read where x - mean belongs, the statistics about the mean (z_score's centring flag off): rule 16
    ("blind33", "zs_with_mean_flag_off", "z_score/normal_f32_6x100", "semantics", "x not centred where x - mean"),
    # a per-channel parameter read at the sample's index mod C (an (N, C) launch's indices exchanged in one load)
    ("blind33", "bn_affine_index_from_sample", "batch_norm/normal_f32_6x4x25", "layout",
     "channel read as the index of axis 0 (the sample's) mod 4"),
    # per-instance partials of dweight / dbias reduced at repeat_interleave's index r // N (read as (C, N))
    ("blind33", "in_dparams_reduced_by_interleaved_index", "instance_norm/normal_f32_2x3x100", "layout",
     "dweight is the sum of its per-sample partials read in another index order"),
    # a tile's padded lanes reading the next instance (the buffer's end masked); a vector remainder overlapping
    ("blind33", "in_tile_reads_next_instance", "instance_norm/normal_f32_2x3x100", "block",
     "the next slice's leading values in the statistics"),
    ("blind33", "gn_stats_vec4_tail_overlap", "group_norm/normal_g4_f32_2x8x5x7", "block", "counted twice"),
    ("blind30", "rms_sumsq_overlapping_vector_tail", "rms_norm/normal_eps1e-05_f64_9x7", "block", "counted twice"),
    # a scalar parameter loaded with the per-column offsets (column 0 alpha, the others the mask's 0)
    ("blind32", "dyt_alpha_loaded_per_column", "dyt/normal_f32_3x20x12", "layout", "alpha loaded with the per-column"),
    # one of poly_norm's weight gradients reduced on a line copied from another's (its operand not updated)
    ("blind32", "poly_dweight_cube_slot_from_square", "poly_norm/normal_f16_8x32", "backward",
     "dweight[0] holds dweight[1]'s value"),
    # a one-pass mean rounded to the 16-bit input dtype, the deviations about it (no two-pass correction)
    ("blind31", "gns_mean_rounded_to_input_dtype", "group_norm_silu/normal_g4_bf16_2x8x5x7", "precision",
     "deviations taken about that rounded mean"),
    # the five bugs whose names disagreed with their labels at the measurement, each decided by docs/verdicts.md's
    # rules: a bias left out of the backward's recomputed p (13 before 15); codes through bfloat16 (8: precision);
    # codes clamped at 0 (5: the clamp); a gain read through the offset's pointer (12: one read, not an exchange);
    # a static scale loaded per row (5: the scale)
    ("blind33", "gns_bwd_p_recomputed_without_bias", "group_norm_silu/normal_g4_f32_2x8x5x7", "affine",
     "p recomputed without the bias"),
    ("blind33", "nqb_q_via_bf16", "norm_quant_block/normal_rms_g_f32_3x200", "precision", "rounded to bfloat16 first"),
    ("blind32", "nq_int8_unsigned_lower_bound", "norm_quant/normal_rms_i8_dyn_f64_4x100", "saturation",
     "clamped below at 0"),
    ("blind33", "aln_bwd_gain_from_shift_ptr", "adaptive_layer_norm/normal_f64_2x5x7", "layout",
     "scale read from shift's buffer"),
    ("blind32", "nq_static_scale_indexed_by_row", "norm_quant/normal_rms_e4m3_static_bf16_8x256", "quant_scale",
     "loaded at each row's index"),
    # eps floored at 1e-4 (a half eps argument's); dbias from dweight's accumulator (judged within dweight's own
    # bound); float16 inputs converted to bfloat16 for a kernel of that dtype alone
    ("blind32", "ln_half_eps_floored_1e-4", "layer_norm/normal_f16_4x128", "eps", "eps 0.0001"),
    ("blind32", "ln_dbias_from_dweight_accumulator", "layer_norm/mean1e3_f32_6x100", "backward", "the expected dweight"),
    ("blind32", "rms_f16_input_through_bf16", "rms_norm/normal_eps1e-05_f16_4x128", "precision",
     "every input converted to bfloat16"),
    # the forward alone normalizing the ungated x with v's statistics (the backward its own kernel, right): the gate's
    # factor left out of the normalized value; norm_before_gate's dx multiplied by silu(z) again
    ("blind32", "gated_norm_of_ungated_x", "gated_norm/normal_f32_4x64", "gate", "`d` read from `x`"),
    ("blind32", "gated_nbg_dx_gated_twice", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "gate",
     "the gate's factor applied again to dx"),
    # chunk partials merged with the spread's count weight dropped: z_score's sum of squares, the halves of a row
    ("blind33", "zs_chunk_merge_delta_unweighted", "z_score/normal_f32_6x100", "merge", "chunks of 64 values"),
    ("blind33", "aln_halves_merged_delta_unweighted", "adaptive_layer_norm/normal_f64_2x5x7", "merge",
     "two halves merged"),
    # a batch_norm eval call (train3_eval's last step): its samples' parameter-gradient terms (the last sample's
    # partial stored alone), its parameters read at the sample's index (x_hat from the running statistics)
    ("blind33", "bn_dparams_last_sample_wins", "batch_norm/normal_train3_eval_f32_6x3x5", "reduction",
     "terms of the first 5 samples"),
    ("blind33", "bn_affine_index_from_sample", "batch_norm/normal_train3_eval_f32_6x3x5", "layout",
     "the eval formula's with weight and bias"),
    # lp_normalize's sum of powers held in the 16-bit dtype (the specification names it `total`)
    ("blind33", "lp_total_rounded_to_input_dtype", "lp_normalize/normal_bf16_6x100", "precision", "lp_norm.total"),
    # a Welford merge's mean moved by the other count's weight (M2 right); eps inside a max-rescaled root (poly_norm)
    ("blind32", "ln_welford_merge_mean_weights_swapped", "layer_norm/normal_f32_6x100", "merge",
     "the counts swapped in the mean's update"),
    ("blind32", "poly_eps_inside_rescaled_mean_square", "poly_norm/normal_f32_4x64", "eps", "an effective eps m^2"),
    # a quantizer's amax held in a bfloat16 register: the dynamic scale from it; a static scale's returned amax
    ("blind32", "nq_amax_in_bf16", "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "precision",
     "amax rounded to bfloat16"),
    ("blind32", "nq_amax_in_bf16", "norm_quant/normal_ln_e4m3_static_wb_f16_8x256", "precision",
     "amax is rounded to bfloat16"),
    # a grid capped at 48 programs of one row, no loop over the rest (rows from 48 on never processed)
    ("blind32", "rms_rows_grid_capped_48", "rms_norm/normal_eps1e-05_f32_260x3", "block", "a grid capped at 48"),
    # after blind34/35's measurement (development sets since): batch_norm's dx means per sample (rule 10's group);
    # float8 codes through float16 truncated (the first conversion's mode: rounding); dyt's backward alpha read from
    # the zeroed dalpha buffer (layout); a block scale amax / 240 (the scale first: quant_scale)
    ("blind35", "bn_bwd_sums_per_sample", "batch_norm/normal_f32_6x4x25", "group", "over the axes"),
    ("blind34", "nq_fp8_via_f16_truncated_then_rne", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "rounding",
     "toward zero first"),
    ("blind34", "dyt_bwd_alpha_from_dalpha_buffer", "dyt/normal_f32_3x20x12", "layout", "alpha read as zeros"),
    ("blind35", "nqb_group_scale_over_fnuz_240", "norm_quant_block/normal_rms_g_bf16_8x512", "quant_scale", "240"),
    # the normalization pass reading the next row's x; halves merged with delta^2 n_b; silu' with sigmoid(x_hat) and
    # p kept; per-sample partials merged with the mean step over the count before the merge
    ("blind34", "rms_normalize_pass_x_of_next_row", "rms_norm/normal_eps1e-05_f32_6x100", "layout", "row r + 1"),
    ("blind35", "gns_halves_merge_delta_weight_nb", "group_norm_silu/normal_g4_f32_2x8x5x7", "merge",
     "adding delta^2 n_b where"),
    ("blind35", "gns_silu_grad_sigmoid_of_xhat", "group_norm_silu/normal_g4_f32_2x8x5x7", "backward",
     "sigmoid(x_hat) where sigmoid(p) belongs"),
    ("blind35", "bn_chan_merge_mean_over_old_count", "batch_norm/normal_f32_6x4x25", "merge", "delta n_b / n_a"),
    # q from x_hat (the affine left out of the quantizing pass); x and z in each other's slot (layout); batch_norm's
    # second stage over the per-sample partials starting at 1 (reduction)
    ("blind34", "nq_q_from_xhat_without_affine", "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "affine",
     "the affine left out of the quantizing pass"),
    ("blind35", "bn_stats_sample_partials_from_one", "batch_norm/normal_f32_6x4x25", "reduction",
     "sample 0's partial sums never added"),
    ("blind34", "gated_x_z_swapped", "gated_norm/normal_gs4_f64_3x7x12", "layout", "the inputs x and z swapped"),
    # session 31: eps added to rstd after the root; a quantizer's amax over a tile of two rows; a statistic operand
    # read at the first slice of each pair; z_score's projection term over std once more; a vector input read
    # through a scalar's pointer with stride 0; batch_norm's planes read in tiles masked by the buffer's end only;
    # a gradient negated
    ("blind34", "ln_eps_added_to_rstd", "layer_norm/normal_f64_9x7", "eps", "added after it is computed"),
    ("blind35", "in_eps_added_to_rstd", "instance_norm/normal_f64_3x2x7", "eps", "added after it is computed"),
    ("blind34", "nq_amax_over_row_pair_tile", "norm_quant/normal_rms_i8_dyn_f64_4x100", "quant_scale",
     "over its block of 2 slices"),
    ("blind35", "lp_pair_rows_first_norm", "lp_normalize/normal_f32_6x100", "layout",
     "read at the first index of each block of 2 along its leading axis"),
    ("blind35", "zs_bwd_projection_over_std_twice", "z_score/normal_f64_9x7", "backward", "by 1 / std once more"),
    ("blind34", "dyt_bias_read_from_alpha_ptr", "dyt/normal_f64_2x5x7", "layout", "with stride 0"),
    ("blind35", "bn_spatial_tile_mask_local", "batch_norm/normal_f32_6x4x25", "block", "the next plane's leading"),
    ("blind34", "dyt_dtanh_operands_swapped", "dyt/normal_f32_3x20x12", "constant", "its sign flipped"),
    # the SiLU applied twice; a bias added to the residual sum; a grouped axis's groups interleaved; the statistics'
    # mask against the row count
    ("blind34", "gated_silu_applied_twice", "gated_norm/normal_f32_4x64", "gate", "the SiLU applied twice"),
    ("blind34", "an_norm_bias_added_into_sum", "add_norm/normal_p_noprenorm_f32_9x7", "affine",
     "`bias` added to `s + residual`"),
    ("blind34", "gated_groups_interleaved", "gated_norm/normal_gs4_f64_3x7x12", "layout", "taken interleaved"),
    ("blind34", "ln_stats_mask_against_row_count", "layer_norm/normal_f32_6x100", "block",
     "over the first 6 of 100 values"),
    # parameter gradients over the first row of each plane (the count from x's last axis); lp's chunk partials merged
    # with the rescale inverted; a block scale's exponent biased 125 (a quarter of the scale, on its E8M0 grid)
    ("blind35", "gn_dparams_first_row_only", "group_norm/normal_g4_f32_2x8x5x7", "reduction",
     "the count taken from x's last axis"),
    ("blind35", "lp_chunk_rescale_inverted", "lp_normalize/normal_f32_6x100", "merge", "(s / s_k)^p where"),
    ("blind35", "nqb_mx_e8m0_bias_125", "norm_quant_block/normal_rms_mx_bf16_8x512", "quant_scale",
     "the scale's exponent off by -2"),
    # after blind36/37's measurement: rstd stored at slot 0 (the backward from it); group_norm_silu's folded shift
    # without the weight; dbias times rstd; the ds / db form's c2 times x_hat; |w| + eps (rule 13); a float64 weight
    # through a float32 pointer (rule 8)
    ("blind36", "rms_rstd_store_without_row_offset", "rms_norm/normal_eps1e-05_f64_9x7", "layout",
     "stored at slot 0"),
    ("blind37", "gns_fused_shift_without_weight", "group_norm_silu/normal_g3_f64_3x6x7", "affine",
     "the shift without the weight"),
    ("blind37", "bn_dbias_times_invstd", "batch_norm/normal_f64_7x3", "backward", "dy rstd where dy belongs"),
    ("blind37", "gn_bwd_c2_times_xhat", "group_norm/normal_g3_f64_3x6x7", "backward", "c2 multiplying x_hat"),
    ("blind37", "bn_weight_abs_plus_eps", "batch_norm/normal_f64_7x3", "affine", "eps added to `per_channel(weight"),
    # (session 36: named by explain_index.params_through, the parameters read through a narrower dtype)
    ("blind36", "rms_f64_weight_loaded_as_float", "rms_norm/normal_eps1e-05_f64_9x7", "precision",
     "weight read through float32 (rounded to nearest)"),
    # x's buffers addressed column-major; a persistent loop bounded by R - 1; the sigmoid through tanh without its
    # halving; dalpha with the weight twice; the mean pass over the branch before the residual is added
    ("blind37", "lp_rows_read_column_major", "lp_normalize/normal_f64_9x7", "layout", "addressed as"),
    ("blind36", "poly_persistent_loop_drops_last_row", "poly_norm/normal_f32_4x64", "block", "bounded by 4 - 1"),
    ("blind36", "gated_sigmoid_via_tanh_half_dropped", "gated_norm/normal_gs4_f64_3x7x12", "gate", "sigmoid(2 p)"),
    ("blind36", "dyt_dalpha_weight_applied_twice", "dyt/normal_f64_2x5x7", "backward", "the weight applied twice"),
    ("blind36", "an_ln_mean_of_branch_without_residual", "add_norm/normal_p_rs_f64_9x7", "layout",
     "the mean taken over"),
    # parameter gradients added into the slot of the channel's index within its group
    ("blind37", "gn_dparams_stored_at_channel_in_group", "group_norm/normal_g3_f64_3x6x7", "layout",
     "each added into the slot at i % 2"),
    # y stored in whole tiles of 64 columns only; the backward's projection sum per chunk of 64 (the last partial)
    ("blind36", "ln_y_tail_tile_unwritten", "layer_norm/normal_f32_6x100", "block", "whole tiles of 64 columns"),
    ("blind37", "lp_bwd_dot_per_chunk", "lp_normalize/normal_f32_6x100", "group", "over each chunk of 64 values"),
    # norm_quant's weight applied to x before the statistics (rule 13's affine, as layer_norm's)
    ("blind36", "nq_rms_stats_of_weighted_x", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "affine",
     "the weight applied to x before the statistics"),
    # the backward's saved statistics one flat slot late (the last its own); tiles merged by Chan's update with each
    # tile's mean over the tile width
    ("blind36", "gated_bwd_stats_of_next_group", "gated_norm/normal_gs4_f64_3x7x12", "layout",
     "the next flat index (the last its own"),
    ("blind37", "in_tail_tile_mean_over_tile_width", "instance_norm/normal_f32_2x3x100", "block",
     "each tile's mean taken as its sum / 32"),
    ("blind36", "an_eps_slot_given_dropout_p", "add_norm/normal_p_rs_f64_9x7", "eps", "eps's slot given dropout_p"),
    ("blind36", "nq_amax_as_xhat_amax_times_weight_amax", "norm_quant/normal_rms_i8_dyn_f64_4x100", "quant_scale",
     "max|x_hat| max|weight|"),
    ("blind37", "aln_gain_exp_of_scale", "adaptive_layer_norm/normal_f64_2x5x7", "affine",
     "the gain exp(scale) where 1 + scale belongs"),
    ("blind37", "nqb_fp4_via_e4m3_double_rounding", "norm_quant_block/normal_rms_nvfp4_f32_3x200", "precision",
     "rounded to float8_e4m3fn first"),
    # session 32, after blind38/39's measurement
    ("blind35", "lp_pair_rows_first_norm", "lp_normalize/mean1e3_f32_6x100", "layout", "each block of 2"),
    ("blind38", "gated_sumsq_row_pair_tile", "gated_norm/normal_gs4_f64_3x7x12", "block",
     "over the same slice of its block of 2 rows"),
    ("blind38", "an_stats_before_x1_added", "add_norm/normal_par_f64_5x12", "layout",
     "the mean and the variance taken over `x less forward.x1`"),
    ("blind39", "zs_eps_scaled_by_bessel_factor", "z_score/normal_eps0.3_f32_9x7", "eps",
     "eps added before the unbiased factor"),
    ("blind38", "an_rowscale_after_residual_add", "add_norm/mean1e4_rs_xnormal_f32_130x3", "dropout",
     "the row scale applied to the whole sum"),
    ("blind38", "nq_amax_as_row_range", "norm_quant/normal_rms_i8_static_f32_8x256", "quant_scale",
     "amax is the range max(y) - min(y)"),
    ("blind38", "ln_row_split_halves_own_stats", "layer_norm/normal_f32_6x100", "block",
     "split between 2 programs of 50 columns"),
    ("blind38", "nq_static_scale_applied_twice", "norm_quant/normal_rms_i8_static_f32_8x256", "quant_scale",
     "divided by the scale twice"),
    ("blind39", "lp_p2_rsqrt_estimate", "lp_normalize/normal_f32_9x7", "precision", "each slice's 1 / norm off by"),
    ("blind39", "aln_bwd_sums_over_sample", "adaptive_layer_norm/normal_f32_3x20x12", "reduction",
     "over each sample's 20 tokens"),
    ("blind39", "bn_welford_m2_old_mean_delta_squared", "batch_norm/normal_f64_7x3", "one_pass", "(x - mean_k-1)^2"),
    ("blind39", "gn_stats_channel_loop_one_short", "group_norm/normal_g2_f16_2x8x4x4", "block",
     "the group's first 3 channel(s)"),
    ("blind38", "an_dres_out_cotangent_from_dy_ptr", "add_norm/normal_p_rs_f64_9x7", "layout",
     "the cotangent dresidual_out read from dy's buffer"),
    ("blind38", "ln_bwd_first_term_unweighted", "layer_norm/normal_f64_9x7", "backward", "the elementwise term from dy"),
    ("blind39", "gn_bwd_rstd_on_g_term_only", "group_norm/normal_g3_f64_3x6x7", "backward",
     "terms multiplied by rstd once less"),
    ("blind38", "ln_bwd_xhat_from_y_bias_kept", "layer_norm/normal_f64_9x7", "affine", "the bias never subtracted"),
    ("blind35", "aln_bwd_xhat_from_y_shift_dropped", "adaptive_layer_norm/mean1e3_f64_2x3x8", "affine",
     "the shift never subtracted"),
    ("blind38", "dyt_dtanh_precedence", "dyt/normal_f64_2x5x7", "backward", "g * 1 - t * t"),
    ("blind38", "nq_amax_as_row_range", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "quant_scale", "max(y) - min(y)"),
    ("blind39", "gns_weight_half2_halves_swapped", "group_norm_silu/normal_g2_f16_2x8x4x4", "layout",
     "each block of 2 elements reversed"),
    ("blind38", "ln_bias_loaded_at_row_index", "layer_norm/normal_f64_9x7", "layout", "bias read at the row's index"),
    ("blind38", "poly_bwd_proj_over_whole_tensor", "poly_norm/normal_f64_3x7", "reduction", "over the whole tensor"),
    ("blind38", "rms_bwd_renormalizes_saved_xhat", "rms_norm/normal_eps1e-05_f64_9x7", "backward",
     "x read as the saved x_hat"),
    ("blind39", "bn_bwd_x_read_after_inplace_y", "batch_norm/normal_f64_7x3", "backward", "from y's buffer"),
    ("blind38", "ln_bwd_dy_loaded_as_bf16", "layer_norm/normal_f64_9x7", "precision", "dy loaded as bfloat16"),
    ("blind39", "bn_dx_tail_positions_fixed_stats_formula", "batch_norm/normal_f32_6x4x25", "backward",
     "the last 1 of every 25 positions"),
    ("blind38", "dyt_dweight_t_of_previous_row", "dyt/normal_f64_2x5x7", "layout", "t of the previous row"),
    ("blind39", "in_rstd_rsqrt_estimate", "instance_norm/normal_f32_2x3x100", "precision",
     "an approximate reciprocal square root"),
    ("blind39", "bn_half2_stats_high_lane_dropped", "batch_norm/normal_f16_8x2x4x4", "block",
     "from the even positions of each run"),
    ("blind39", "gn_bwd_partials_read_channel_major", "group_norm/normal_g3_f64_3x6x7", "layout", "read back at c N + n"),
    ("blind38", "poly_linear_weight_from_bias_ptr", "poly_norm/normal_f64_3x7", "layout",
     "weight[2] loaded through bias's pointer"),
    ("blind39", "in_tile_instance_from_first_element", "instance_norm/normal_f32_2x3x100", "layout",
     "statistics and parameters of its flat tile's first element"),
    ("blind39", "zs_tile_slice_from_first_element", "z_score/normal_f64_9x7", "layout",
     "the statistics of its flat tile's first element"),
    # session 34
    ("blind36", "rms_vec_row_start_aligned_down", "rms_norm/normal_eps1e-05_f64_9x7", "layout",
     "start aligned down to a multiple of 4"),
    ("blind35", "gn_sample_stride_group_span", "group_norm/normal_g4_f32_2x8x5x7", "layout",
     "each sample's start at s * 1 * 70"),
    ("blind38", "gated_ln_bwd_vhat_uncentred", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "backward",
     "read uncentred, x * rstd"),
    ("blind38", "rms_bwd_renormalizes_saved_xhat", "rms_norm/mean1e3_eps1e-05_f32_6x100", "backward",
     "x read as the saved x_hat"),
    ("blind39", "nqb_rms_rsqrt_estimate", "norm_quant_block/normal_rms_g_wdecades_f32_4x512", "precision",
     "an approximate reciprocal square root"),
    ("blind39", "nqb_nvfp4_encode_per_row", "norm_quant_block/normal_ln_nvfp4_wb_f32_4x256", "quant_scale",
     "per row, g the row's own amax"),
    ("blind41", "in_row_pair_shared_mean", "instance_norm/normal_f32_2x3x100", "layout",
     "the mean of the first slice of each tile of 2 slices"),
    ("blind41", "zs_welford_m2_old_mean_delta_squared", "z_score/normal_f32_6x100", "one_pass",
     "adding (x - mean_k-1)^2 to M2"),
    ("blind40", "ln_stats_over_row_pair_tile", "layer_norm/normal_f32_6x100", "block",
     "each tile of 2 slices reduced whole"),
    ("blind41", "bn_bwd_x_read_channels_last", "batch_norm/normal_f32_16x3x4x5", "layout",
     "its backward reading x as NCHW memory indexed with channels_last strides"),
    ("blind41", "gn_bwd_c3_mean_term_sign_flipped", "group_norm/normal_g4_f32_2x8x5x7", "backward",
     "with c3's c2 mean term's sign flipped"),
    ("blind41", "nqb_weight_loaded_per_block_start", "norm_quant_block/normal_rms_g_wdecades_f32_4x512", "layout",
     "block's first index (loaded once per block)"),
    ("blind41", "lp_bwd_dot_loop_unrolled_body_once", "lp_normalize/normal_f32_6x100", "block",
     "without the columns j with (j // 32) odd"),
    ("blind41", "lp_sum_halving_tree_drops_odd", "lp_normalize/normal_f32_6x100", "block",
     "dropping the unpaired last value of every level of odd length"),
    ("blind41", "in_f16_y_through_bf16", "instance_norm/normal_f16_2x2x8x8", "precision",
     "rounded to bfloat16 before its store in float16"),
    ("blind41", "lp_reciprocal_in_input_dtype", "lp_normalize/normal_f16_4x128", "precision",
     "the reciprocal 1 / `np.maximum(norm, eps)` held in float16"),
    ("blind41", "bn_stats_pairs_added_in_half", "batch_norm/normal_bf16_6x4x25", "precision",
     "(each block of 2 values) rounded to bfloat16"),
    ("blind41", "zs_inv_std_rsqrt_estimate", "z_score/normal_f32_6x100", "precision",
     "an approximate reciprocal square root"),
    ("blind40", "nq_rstd_rsqrt_estimate_11_bits", "norm_quant/normal_rms_e4m3_dyn_bf16_8x256", "precision",
     "each row's rstd off by up to"),
    ("blind41", "aln_dshift_times_rstd", "adaptive_layer_norm/normal_f64_2x5x7", "backward",
     "dshift summed from dy * rstd"),
    ("blind41", "aln_dmod_sample_offset_one_token", "adaptive_layer_norm/normal_f64_2x5x7", "layout",
     "the sample's offset b where b * 5 belongs"),
    ("blind40", "nq_stats_mask_against_row_count", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "block",
     "a column mask against the row count 8"),
    ("blind40", "poly_cube_sumsq_of_fifth_power", "poly_norm/normal_f32_4x64", "semantics",
     "mean square accumulated as mean(x^3 * x^2)"),
    ("blind41", "gns_fwd_stats_read_group_major", "group_norm_silu/normal_g3_f64_3x6x7", "layout",
     "read in (3, 3) order"),
    ("blind41", "gns_bwd_sigmoid_from_stored_y", "group_norm_silu/normal_g2_f16_2x8x4x4", "precision",
     "recovered as y / p from the stored output"),
    ("blind40", "gated_gate_on_both_sides", "gated_norm/normal_f32_4x64", "gate",
     "the gate on both sides of the norm"),
    ("blind39", "lp_y_from_abs_register", "lp_normalize/normal_f64_9x7", None, "|x| where x belongs"),
    ("blind41", "gn_stats_loop_unrolled_body_once", "group_norm/mean1e4_g2_f16_2x8x4x4", "block",
     "mean is the formula's with the statistics over the first 32 of 64 values only"),
    # session 35
    ("blind40", "nq_stats_mask_against_row_count", "norm_quant/normal_ln_e4m3_dyn_wb_f16_8x256", "block",
     "over the first 8 of each slice's 256 trailing positions only (a column mask against the row count 8"),
    ("blind40", "nq_ln_bias_loaded_at_row_index", "norm_quant/normal_ln_e4m3_dyn_wb_bf16_16x64", "layout",
     "q is the specification's with bias read at the row's index"),
    ("blind43", "gns_stats_channel_loop_one_short", "group_norm_silu/normal_g3_f64_3x6x7", "block",
     "without the group's last 1 of its 2 channels"),
    ("blind43", "bn_bwd_xhat_from_output_bias_kept", "batch_norm/normal_f64_7x3", "affine",
     "x_hat recomputed from the output as y / weight, the bias never subtracted"),
    ("blind42", "nq_q_scale_of_previous_row", "norm_quant/normal_rms_i8_dyn_f64_4x100", "layout",
     "q of each row is y divided by the previous row's scale"),
    ("blind43", "nqb_q_divided_by_previous_block_scale", "norm_quant_block/normal_ln_g_wb_f32_4x256", "layout",
     "q of each block is y divided by the previous block's block scale"),
    ("blind42", "nq_qmax_from_input_dtype_finfo", "norm_quant/std1e-6_rms_e4m3_dyn_f32_4x256", "quant_scale",
     "for the division and the default floor 1 / (qmax 512) alike"),
    ("blind42", "ln_weight_loaded_one_column_late", "layer_norm/normal_f64_9x7", "layout",
     "weight read one element late"),
    ("blind42", "ln_bwd_mean_term_over_rows", "layer_norm/normal_f64_9x7", "backward",
     "mean(g) of the backward taken as each column's sum over every row"),
    ("blind42", "rms_dweight_from_dx_in_x_buffer", "rms_norm/normal_eps1e-05_f64_9x7", "backward",
     "x_hat recomputed from x's buffer after the returned dx was written over it"),
    ("blind43", "gns_bwd_dx_silu_grad_applied_twice", "group_norm_silu/normal_g3_f64_3x6x7", "backward",
     "silu'(p) applied twice"),
    ("blind42", "nq_x_rows_at_q_byte_pitch", "norm_quant/std1e-6_rms_e4m3_dyn_f32_4x256", "layout",
     "each row of x read from each slice's start at r * 256 / 4"),
    ("blind42", "dyt_dtanh_one_minus_t_squared", "dyt/normal_f64_2x5x7", "backward", "(1 - t)^2"),
    ("blind43", "gns_folded_scale_shift_in_half", "group_norm_silu/const_eps1e-12_g2_bf16_2x8x4x4", "precision",
     "a and b stored in bfloat16 (rounded) before the product"),
    ("blind43", "gns_folded_scale_shift_in_half", "group_norm_silu/mean1e3_g3_bf16_3x6x7", "precision",
     "stored in bfloat16 (rounded) before p = x a + b, the backward's silu'(p) at that p"),
    ("blind42", "an_residual_tail_tile_zero", "add_norm/normal_f32_6x100", "block",
     "residual read as 0 in its last 4 columns"),
    # (rule 11: a parameter gradient's per-row partials without their tail positions; blind42's author said block)
    ("blind42", "dyt_dalpha_row_tail_tile_dropped", "dyt/heavy_tail_abig_f32_8x40", "reduction",
     "each row's partial sum without its last 8 of 40 columns"),
    ("blind43", "zs_chunk_merge_mean_step_own_count", "z_score/normal_f32_6x100", "merge",
     "the mean merged from chunks of 64 values by Chan's update"),
    ("blind42", "rms_outside_rsqrt_of_rms_plus_eps", "rms_norm/normal_eps0.3_outside_bf16_6x100", "semantics",
     "`(rms + eps)` read as its square root"),
    ("blind42", "an_ln_two_cta_means_averaged", "add_norm/normal_noprenorm_f32_9x7", "merge",
     "the two means averaged, their counts not weighted"),
    ("blind43", "gns_y_store_sample_offset_missing", "group_norm_silu/normal_g4_f32_2x8x5x7", "layout",
     "written without its leading index's offset"),
    # session 36, on blind44/45 after their measurement
    ("blind44", "rms_dweight_xhat_of_previous_row", "rms_norm/normal_eps1e-05_f32_6x100", "layout",
     "parameter gradients with x read as each row holding the previous row's values, the first row 0"),
    ("blind44", "poly_dweight_h_of_previous_row", "poly_norm/normal_f32_4x64", "layout",
     "each row holding the previous row's values"),
    ("blind44", "rms_bwd_dy_from_output_buffer", "rms_norm/normal_eps1e-05_f32_6x100", "layout",
     "`rms_norm_backward.dy` read from `rms_norm.y`"),
    ("blind44", "rms_bwd_dy_from_output_buffer", "rms_norm/normal_eps1e-05_f16_4x128", "layout",
     "read from the returned `y` (as stored, in float16)"),
    ("blind45", "bn_count_from_batch_axis", "batch_norm/normal_f32_6x4x25", "reduction",
     "the op's own count n (its running variance's unbiased factor) 100 too"),
    ("blind45", "gn_count_whole_sample", "group_norm/normal_g4_f32_2x8x5x7", "reduction", "divided by 280"),
    ("blind45", "gns_bwd_count_one_channel", "group_norm_silu/normal_g4_f32_2x8x5x7", "group",
     "one channel's count where its group's belongs"),
    ("blind45", "gns_silu_grad_after_norm_backward", "group_norm_silu/normal_g3_f64_3x6x7", "backward",
     "silu'(p) multiplied after group_norm's backward"),
    ("blind45", "bn_stats_sample_loop_stride_two", "batch_norm/normal_f32_6x4x25", "block",
     "from samples 0, 2, 4, ... alone"),
    ("blind45", "bn_stats_sample_loop_stride_two", "batch_norm/normal_f64_7x3", "block", "samples 0, 2, 4"),
    ("blind44", "rms_row_split_halves_own_stats", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "the backward (its own kernel) on the saved statistics for the whole row"),
    ("blind44", "rms_rms_from_norm_over_n", "rms_norm/normal_eps1e-05_f32_6x100", "constant", "sqrt(n) with n = 100"),
    ("blind45", "nqb_weight_applied_twice", "norm_quant_block/normal_ln_g_wb_f32_4x256", "affine", ""),
    ("blind45", "nqb_weight_applied_twice", "norm_quant_block/normal_rms_g_bf16_8x512", "affine",
     "`xhat` read from `y`"),
    ("blind45", "zs_ddof_eps_positional_swap", "z_score/normal_f32_6x100", "bessel",
     "the options ddof and eps exchanged (ddof = 0, eps = 1"),
    ("blind45", "zs_dev_about_previous_slice_mean", "z_score/normal_f32_6x100", "layout",
     "the deviations x - mean taken about the previous index's mean"),
    ("blind45", "gns_y_store_group_offset_missing", "group_norm_silu/normal_g4_f32_2x8x5x7", "layout",
     "written without axis 1's block offset (blocks of 2 indices)"),
    ("blind44", "ln_dparams_column_mask_against_row_count", "layer_norm/normal_f16_4x128", "block",
     "written for the first 4 of its 128 entries of its last axis alone (x's row count 4)"),
    ("blind45", "gn_fwd_stats_row_from_c_div_G", "group_norm/normal_g4_f32_2x8x5x7", "layout",
     "statistics read at row n G + c // 4"),
    ("blind45", "nqb_fp8_quotient_rint", "norm_quant_block/normal_ln_g_wb_f32_4x256", "precision",
     "rounded to an integer first"),
    ("blind44", "nq_int8_trunc_after_half", "norm_quant/normal_rms_i8_dyn_f64_4x100", "rounding",
     "(int)(v + 0.5)"),
    ("blind44", "gated_sigmoid_exp2_without_log2e", "gated_norm/normal_f32_4x64", "gate", "p sigmoid(p ln 2)"),
    ("blind44", "poly_dbias_from_linear_dweight_product", "poly_norm/normal_f32_4x64", "backward",
     "sum(dy h_1) (dweight[2]'s product)"),
    ("blind44", "gated_dx_adds_gate_derivative", "gated_norm/normal_f32_4x64", "gate",
     "dx = dv (silu(z) + x silu'(z))"),
    ("blind44", "ln_dparams_row_block_offset_missing", "layer_norm/normal_f32_6x100", "reduction",
     "taken over its first 4 rows alone, 2 times"),
    ("blind44", "poly_bwd_proj_over_row_pair_tile", "poly_norm/normal_f32_4x64", "block", "over each tile of 2 rows"),
    ("blind45", "bn_running_var_tracks_invstd", "batch_norm/normal_f32_6x4x25", "running",
     "`var * (n / (n - 1))` read from `rstd`"),
    ("blind45", "aln_folded_shift_without_gain", "adaptive_layer_norm/normal_f32_3x20x12", "affine",
     "the shift without the weight"),
    ("blind44", "an_norm_pass_rereads_inplace_residual", "add_norm/normal_f32_6x100", "layout",
     "the branch added twice"),
    ("blind45", "gn_weight_bias_read_as_bf16", "group_norm/normal_g4_f32_2x8x5x7", "precision",
     "read through bfloat16"),
    ("blind44", "dyt_fwd_inplace_bwd_reads_y", "dyt/normal_f32_3x20x12", "backward",
     "x read from its buffer after the returned y was written over it in place"),
    ("blind44", "nq_quant_pass_tile_offset_missing", "norm_quant/normal_rms_e4m3_dyn_f32_8x256", "layout",
     "column j's codes those of column j mod 64"),
    ("blind45", "gns_saved_stats_in_input_dtype", "group_norm_silu/normal_g2_f16_2x8x4x4", "precision",
     "the saved mean and rstd stored in float16 (rounded), the backward recomputing x_hat and p"),
    ("blind44", "gated_ln_centre_with_previous_group_mean", "gated_norm/normal_ln_nbg_gs16_f32_6x48", "layout",
     "the returned y computed apart (the backward right), with the normalized deviations x - mean taken about the "
     "previous index's mean"),
    # session 37, on blind46/47 after their measurement
    ("blind46", "rms_bwd_reads_rstd_as_rms", "rms_norm/normal_eps1e-05_f64_9x7", "backward",
     "multiplied where it divides in `1.0 / np.hypot(rms, np.sqrt(eps))`"),
    ("blind46", "rms_sumsq_accumulator_not_reset_per_row", "rms_norm/normal_eps1e-05_f32_6x100", "block",
     "accumulated onto the earlier slices of its program (4 programs"),
    ("blind46", "gated_group_sums_not_reset_per_group", "gated_norm/normal_gs4_f64_3x7x12", "block",
     "accumulated onto the row's earlier slices'"),
    ("blind47", "bn_running_var_blends_updated_running_mean", "batch_norm/normal_f32_6x4x25", "running",
     "`running_var` read from `running_mean` as updated"),
    ("blind47", "nqb_amax_store_pointer_advanced", "norm_quant_block/normal_ln_g_wb_f32_4x256", "layout",
     "each row's entry j the expected entry j - 1 of that row"),
    ("blind46", "gated_stable_sigmoid_sign_branch_dropped", "gated_norm/normal_f32_4x64", "gate", "p sigmoid(|p|)"),
    ("blind46", "gated_bias_added_before_norm", "gated_norm/normal_f32_4x64", "affine",
     "y = norm(x + bias) * weight"),
    ("blind46", "ln_bwd_var_term_without_eps", "layer_norm/normal_eps0.3_f32_9x7", "eps", "written var^(-3/2)"),
    ("blind47", "lp_norm_vec4_tail_overlap", "lp_normalize/normal_f32_9x7", "block",
     "whose last one is a whole vector at 7 - 4 = 3"),
    ("blind47", "nqb_nvfp4_block_scale_clamped_at_fnuz_240", "norm_quant_block/normal_rms_nvfp4_f32_3x200",
     "saturation", "clamped at 240"),
    ("blind47", "gn_group_halves_not_merged", "group_norm/normal_g2_f32_3x6", "group",
     "each group's values split between 2 programs"),
])
def test_families_of_the_development_sets_are_named(src, bug, case_id, mechanism, words):
    """Families added on the development sets (blind5 ... blind33, each since its measurement), each on one
    of their kernels: the mechanism and the explanation's words."""
    import importlib
    mod = importlib.import_module(f"planted.{src}")
    kernel = getattr(mod, src.capitalize() + "Kernel")
    r = check_case(kernel(bug), load_case(GOLDEN, case_id))
    assert r.status == "failed"
    d = r.diagnosis
    assert d["mechanism"] == mechanism and words in d["message"], d["message"]


def test_a_lower_precision_as_loose_as_the_values_names_nothing():
    """layer_norm's backward row sums exchanged (blind22), on float16 rows of mean 1e4 and std 16: the saved
    statistics held in float16 (a mean's rounding of 4 against a std of 16) bound dx about as wide as dx
    itself, wide enough for the changed formula; that fit names no precision (diagnosis.LOOSE)."""
    from planted.blind22 import Blind22Kernel
    r = check_case(Blind22Kernel("ln_bwd_row_sums_swapped"), load_case(GOLDEN, "layer_norm/mean1e4_std16_f16_6x100"))
    d = r.diagnosis
    assert r.status == "failed" and d["mechanism"] != "precision", d["message"]
    assert "within the bounds of a kernel with" not in d["message"], d["message"]


def test_a_returned_running_mean_with_y_right_is_explained_unnamed():
    """batch_norm returning the updated running_mean as its mean output in training, y right (blind21's
    bn_mean_output_is_running_mean, unlabelled): an array returned for another, explained with no mechanism named
    (rule 14's mode is a call computing with the running statistics)."""
    from planted.blind21 import Blind21Kernel
    r = check_case(Blind21Kernel("bn_mean_output_is_running_mean"), load_case(GOLDEN, "batch_norm/normal_f32_6x4x25"))
    d = r.diagnosis
    assert r.status == "failed" and r.failing_arrays() == ["output.mean"]
    assert d["mechanism"] is None and "no mechanism of refnorm's list names" in d["message"], d["message"]


def test_outputs_returned_in_each_others_place_are_explained_unnamed():
    """group_norm's mean and rstd handed out in each other's place (tests/planted/blind7.py): explained, with no
    mechanism of the list named (its author labelled it none)."""
    from planted.blind7 import Blind7Kernel
    r = check_case(Blind7Kernel("gn_mean_rstd_outputs_swapped"), load_case(GOLDEN, "group_norm/normal_g3_f64_3x6x7"))
    d = r.diagnosis
    assert r.status == "failed" and d["mechanism"] is None and "no mechanism of refnorm's list names" in d["message"]
    assert "mean is the expected rstd, returned in its place" in d["message"], d["message"]


def test_the_mechanism_of_a_change_follows_its_operand_and_line():
    """A forward change is named by what it changes: eps -> "eps", a parameter -> "affine", a line updating a
    running statistic -> "running"; a change of an activation value in the forward (x - mean, x_hat) is no
    mechanism of the list: explained, not named (None). Where only gradients fail it is the backward's."""
    rp._rp_module("layer_norm"), rp._rp_module("batch_norm")

    def op(mod, func, left, right):
        return next(i for i, v in rp._SOURCES.items() if v[:2] == (mod, func) and v[4:] == (left, right))

    class Fwd:
        failing, state = (("outputs", "y"), ("grads", "x")), {}

    class Bwd:
        failing, state = (("grads", "x"),), {}

    class Train:
        failing, state = (("state", "num_batches_tracked"),), {"num_batches_tracked": 0, "running_mean": 0}
    params = {"weight", "bias"}
    assert rp._mechanism(None, Fwd, op("layer_norm", "layer_norm", "var", "eps"), "eps", set(), params) == "eps"
    assert rp._mechanism(None, Fwd, op("layer_norm", "layer_norm", "xhat", "weight"), "weight", set(), params) \
        == "affine"
    assert rp._mechanism(None, Fwd, op("layer_norm", "layer_norm", "d", "rstd"), "rstd", set(), params) is None
    assert rp._mechanism(None, Bwd, op("layer_norm", "layer_norm", "d", "rstd"), "rstd", set(), params) \
        == "backward"
    assert rp._mechanism(None, Fwd, op("batch_norm", "batch_norm", "m", "mean"), "mean", set(), params) \
        == "running"
    # a line assigning a name of the call's state (the counter): the running-statistics update
    assert rp._mechanism(None, Train, op("batch_norm", "batch_norm", "num_batches_tracked", "1"), "1", set(),
                         params) == "running"


def test_every_change_keeps_the_unchanged_operations():
    """A change targets one operation id; the others compute as written (the instrumented spec with a change
    of an operation the call never reaches gives the plain spec's bits)."""
    case = load_case(GOLDEN, _first("layer_norm"))
    step = case.steps[0]
    inputs = {k: np.asarray(v) for k, v in step.inputs.items()}
    ns = rp._rp_module("layer_norm")
    plain = registry.evaluate("layer_norm", inputs, config=dict(case.config), engine="spec")
    rp._TARGET.t = ("mutate", frozenset((-1,)), "flip")
    try:
        traced = registry.evaluate("layer_norm", inputs, config=dict(case.config), engine=(ns.forward, ns.backward))
    finally:
        rp._TARGET.t = None
    assert np.array_equal(plain.outputs["y"], traced.outputs["y"])


def test_a_backward_reduction_over_groups_of_a_slice_is_the_group_it_spans():
    """layer_norm's dx with its means (mean(g), mean(g x_hat)) over groups of 4 contiguous columns where the
    whole row belongs (a kernel reducing per tile and never across tiles): the reductions of the spec's
    backward changed over a part of the slice are "group" (docs/verdicts.md, "Which mechanism a bug is")."""
    from test_explain_families import Spec

    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        R, N = x.shape
        mean = x.mean(axis=1, keepdims=True)
        rstd = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        xhat = (x - mean) * rstd
        g = np.asarray(call.cotangents["y"], np.float64) * np.asarray(call.inputs["weight"], np.float64)

        def gmean(a):
            return np.repeat(a.reshape(R, N // 4, 4).mean(axis=2), 4, axis=1)
        return {**d, "grads": {**d["grads"], "x": rstd * (g - gmean(g) - xhat * gmean(g * xhat))}}
    r = check_case(Spec(post=post), load_case(GOLDEN, "layer_norm/normal_f32_6x100"))
    d = r.diagnosis
    assert r.status == "failed" and d["mechanism"] == "group", d["message"]
    assert "over groups of 4 contiguous values (of 100)" in d["message"], d["message"]



def test_a_backward_reading_dy_at_the_next_row_is_layout():
    """A layer_norm backward reading each row's dy from the next row (its pointer advanced before the load,
    the last row its own): named layout, the cotangent's misread said (the forward right)."""
    from planted.blind10 import _with
    from planted.blind11 import Blind11Kernel

    class NextRowDy(Blind11Kernel):
        def _layer_norm(self, call, acc):
            dy = call.cotangents.get("y")
            if dy is None:
                return super()._layer_norm(call, acc)
            r = np.asarray(dy).reshape(-1, np.shape(dy)[-1])
            return super()._layer_norm(_with(call, cotangents={"y": np.concatenate([r[1:], r[-1:]]).reshape(
                np.shape(dy))}), acc)

    r = check_case(NextRowDy(None), load_case(GOLDEN, "layer_norm/normal_f32_6x100"))
    assert r.status == "failed" and set(r.failing_arrays()) <= {"grad.x", "grad.weight", "grad.bias"}
    d = r.diagnosis
    assert d["mechanism"] == "layout" and "the cotangent dy read with each row from the next row" in d["message"], \
        d["message"]


def test_a_backward_reading_the_weight_at_a_tile_index_is_layout():
    """A layer_norm backward loading the weight at j % 32 (a 32-wide tile's local index; the forward right):
    named layout, by the backward with that misread."""
    from planted.blind10 import _with
    from planted.blind11 import Blind11Kernel
    from refnorm.check.backends.base import Returned

    class TileWeight(Blind11Kernel):
        def _layer_norm(self, call, acc):
            right = super()._layer_norm(call, acc)
            w = call.inputs.get("weight")
            if w is None or "y" not in call.cotangents:
                return right
            v = np.asarray(w)
            misread = super()._layer_norm(_with(call, inputs={"weight": v[np.arange(v.size) % 32]}), acc)
            return Returned(right.outputs, {**misread.grads, "weight": right.grads.get("weight"),
                                            "bias": right.grads.get("bias")}, right.state)

    r = check_case(TileWeight(None), load_case(GOLDEN, "layer_norm/normal_f32_6x100"))
    assert r.status == "failed" and r.failing_arrays() == ["grad.x"], r.failing_arrays()
    d = r.diagnosis
    assert d["mechanism"] == "layout" and "weight read at index j % 32" in d["message"], d["message"]


def test_two_returned_gradients_in_each_others_place_name_nothing():
    """add_norm's dx and dresidual returned in each other's place (blind36, unlabelled): explained as the swap, before
    any change of the arithmetic that reproduces both (the branch scale on the other gradient), and named nothing."""
    from planted.blind36 import Blind36Kernel
    r = check_case(Blind36Kernel("an_dx_dresidual_swapped"), load_case(GOLDEN, "add_norm/normal_p_rs_f64_9x7"))
    d = r.diagnosis
    assert d["mechanism"] is None and "returned in each other's place" in d["message"], d["message"]


def test_a_swap_whose_partner_passes_names_nothing():
    """group_norm's dweight and dbias returned in each other's place (blind37, unlabelled) on float16 rows of mean
    1e4, where dweight's bound is wide enough for dbias's values to pass in its place: dbias alone fails, and it is
    the swap (dweight's returned value dbias's expected one too), named nothing, not a backward formula."""
    from planted.blind37 import Blind37Kernel
    r = check_case(Blind37Kernel("gn_param_grads_swapped"), load_case(GOLDEN, "group_norm/mean1e4_g2_f16_2x8x4x4"))
    d = r.diagnosis
    assert r.failing_arrays() == ["grad.bias"], r.failing_arrays()
    assert d["mechanism"] is None and "returned in each other's place" in d["message"], d["message"]


def test_a_defect_of_the_search_itself_is_said_not_silently_skipped(monkeypatch):
    """An exception of the candidates' own code (a division by zero in a new family) warns, naming the case,
    instead of turning the whole mutation search off unseen; the check's verdict is unchanged."""
    from planted.blind42 import Blind42Kernel
    case = load_case(GOLDEN, "rms_norm/normal_eps0.3_outside_bf16_6x100")

    def broken(*a, **k):
        return 1 // 0
    monkeypatch.setattr(rp, "_candidates", broken)
    with pytest.warns(RuntimeWarning, match="mutation search failed on rms_norm/normal_eps0.3_outside_bf16_6x100"):
        r = check_case(Blind42Kernel("rms_outside_rsqrt_of_rms_plus_eps"), case)
    assert r.status == "failed" and r.diagnosis["mechanism"] is None      # (the search named it: now nothing)
