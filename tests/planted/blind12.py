"""A twelfth held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind12Kernel(None)`` is a correct NumPy kernel for eight ops (layer_norm, rms_norm, add_norm, batch_norm,
group_norm, instance_norm, z_score, lp_normalize) written the way a fused float32 GPU kernel computes them:
inputs upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one
rounding to the output dtype at the end (round to nearest even), statistics returned in float32. Its correct
arithmetic is tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches,
and those of the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's.
It declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it.

``Blind12Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind11.py (the same mistake on the same op).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (add_norm_dims, add_norm_ds, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, channel_params,
                          channel_rows, eps_value as _eps, from_channel_rows, group_rows, half as _half,
                          instance_grads, instance_momentum_value, instance_outputs, instance_params,
                          instance_rows, instance_running_update, instance_unbiased_var, kept, ln_rows, ln_stats,
                          normalized_rows, rms_dx, rms_rows, row_weight_bias, rowscale_grad, rsum as _rsum,
                          running_in, running_state, stat_shape, store as _store, weight_offset)
from .blind3 import LABELS
from .blind5 import _axes_rows
from .blind10 import _with
from .blind11 import Blind11Kernel

OPS = ("layer_norm", "rms_norm", "add_norm", "batch_norm", "group_norm", "instance_norm", "z_score",
       "lp_normalize")
__all__ = ("BUGS", "LABELS", "OPS", "Blind12Kernel")

GH = "https://github.com/"
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_tail_block_mask_local": (
        "layer_norm", "block",
        "N above 64 and not a multiple of it: the statistics loop over 64-wide column blocks masks each load with "
        "the block-local offsets (offs < N instead of start + offs < N), so the tail block loads all 64 lanes: "
        "the lanes past the row read the next row's leading values (the last row: zeros), and they enter the "
        "mean and the variance, still divided by N; the backward's formula on those statistics",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a layer_norm kernel's loads masked with the wrong mask "
        "expression for its block shape)"),
    "ln_bwd_proj_sum_of_dy": (
        "layer_norm", "backward",
        "with a weight: dx = rstd * (g - mean(g) - x_hat * mean(dy * x_hat)), g = dy * weight: the projection "
        "term's row sum taken of dy instead of g (the mean(g) term right); dweight and dbias right",
        "pattern: one of two row reductions fed the unweighted cotangent"),
    "ln_bwd_mean_from_rstd_ptr": (
        "layer_norm", "layout",
        "the backward kernel's Mean argument given the rstd buffer: x_hat recomputed as (x - rstd) * rstd for dx "
        "and dweight (dbias and the forward right)",
        "pattern: two pointer arguments of the same type passed in each other's slot"),
    "ln_dweight_last_lock_group_dropped": (
        "layer_norm", "reduction",
        "dweight and dbias: row r accumulates into the partial buffer r % 8 (GROUP_SIZE_M = 8) and the final "
        "reduction loops over the first 7 partial buffers only: rows with r % 8 == 7 never reach the parameter "
        "gradients (dx right)",
        "cf. " + GH + "meta-pytorch/tritonbench/pull/1266 (the layer-norm tutorial's per-group dw/db partial "
        "buffers losing some rows' contributions)"),
    "ln_dweight_stats_truncated_to_half": (
        "layer_norm", "precision",
        "16-bit inputs: the dweight/dbias partial kernel loads the saved mean and rstd into registers of the input "
        "dtype (truncated from the float32 accumulator type), so dweight is summed from x_hat recomputed with "
        "the 16-bit mean and rstd; y, dx and dbias right",
        GH + "pytorch/pytorch/pull/140259 (the LayerNorm backward's partial-gradient helper truncated mean and "
        "rstd from T_ACC to T)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_outside_flag_dropped": (
        "rms_norm", "eps",
        "eps_placement='outside': the flag not forwarded to the kernel, which computes rstd = 1 / sqrt(mean(x^2) "
        "+ eps) (eps inside the root), forward, returned rstd and backward",
        "cf. " + GH + "fla-org/flash-linear-attention/pull/508 (a norm kernel's eps moved between inside and "
        "outside the square root)"),
    "rms_dweight_last_sample_only": (
        "rms_norm", "reduction",
        "inputs of three or more axes: dweight's partial buffer written per sample (one program per sample, a store "
        "instead of an accumulate), so dweight holds the last sample's rows only; dx right",
        "cf. " + GH + "paiml/trueno/pull/178 (an RMSNorm backward's grad_gamma not accumulated across rows)"),
    "rms_bwd_proj_rstd_squared": (
        "rms_norm", "backward",
        "eps inside: dx = rstd * (g - x_hat * mean(g * x)) (the projection's row sum taken of g * x, one factor "
        "rstd short of rstd^3 x mean(g x)); dweight right",
        "pattern: a power of rstd lost in a hand-derived RMSNorm backward"),
    "rms_sumsq_warp_partials_in_half": (
        "rms_norm", "precision",
        "16-bit inputs: the sum of squares accumulated in float32 per lane of a 32-lane warp (lane l takes the "
        "columns j = l mod 32) and the 32 lane partials written to shared memory of the input dtype before the "
        "final float32 sum (float16: a partial above 65504 becomes inf), forward and backward",
        "cf. " + GH + "karpathy/llm.c/issues/144 (reduction partials kept in a narrower type than the "
        "accumulation needs)"),
    "rms_k2_rows_of_last_axis": (
        "rms_norm", "group",
        "normalized_shape of two or more axes: the kernel's row length taken from x.shape[-1], so the mean square "
        "is taken over each run of the last axis; y, dx and dweight from those rstd; the saved rstd per row is "
        "its last run's",
        "cf. " + GH + "huggingface/diffusers/issues/11387 (an RMSNorm averaging over the last axis only where "
        "other axes belong)"),
    "rms_rstd_output_is_mean_square": (
        "rms_norm", None,
        "the returned rstd is mean(x^2) (the accumulator stored before the rsqrt); y and the gradients right",
        "pattern: a statistic stored at the wrong stage of its finalization"),
    # ------------------------------------------------------------------ add_norm
    "an_rms_flag_dropped": (
        "add_norm", "semantics",
        "norm='rms_norm': the IS_RMS_NORM flag not passed to the fused kernel, which normalizes the sum as a "
        "layer norm (centred, its variance), forward and backward",
        "pattern: a constexpr flag left at its default at one call site"),
    "an_drowscale_reads_residual": (
        "add_norm", "layout",
        "with a rowscale: its gradient sum(ds * x * mask) / (1 - p) read the residual's buffer in place of x "
        "(sum(ds * residual * mask) / (1 - p)); the forward and the other gradients right",
        "pattern: two pointer arguments of the same type passed in each other's slot"),
    "an_dres_out_added_twice": (
        "add_norm", "backward",
        "prenorm=True: residual_out's cotangent added to ds (right) and again when the residual's gradient is "
        "stored: dresidual = ds + d residual_out; dx right",
        "cf. " + GH + "Dao-AILab/quack/pull/53 (an RMS prenorm backward adding residual_out's gradient at the "
        "wrong place)"),
    "an_ln_var_one_pass": (
        "add_norm", "one_pass",
        "norm='layer_norm': the variance of the fused sum s = x + residual as E[s^2] - E[s]^2 from one pass of "
        "float32 sums (clamped at 0), forward and backward",
        "cf. " + GH + "tracel-ai/burn/issues/5607 (a fused float32 layer_norm computing E[x^2] - E[x]^2)"),
    "an_rms_path_drops_weight_offset": (
        "add_norm", "affine",
        "norm='rms_norm' with weight_offset (zero-centred gamma): the offset applied in the layer-norm branch "
        "only, so the RMS branch scales by the raw weight (and weight1), forward and backward",
        "pattern: an option handled in one branch of a kernel template only"),
    # ------------------------------------------------------------------ batch_norm
    "bn_channels_last_as_nchw": (
        "batch_norm", "layout",
        "inputs of three or more axes: the kernel reads x (and dy) as channels-last, each sample's memory as "
        "(spatial, channel), while the buffers are NCHW-contiguous: statistics, y, the gradients and the running "
        "update land on the wrong elements",
        "cf. " + GH + "pytorch/pytorch/issues/62594 (BatchNorm2d wrong for a channels-last tensor: its strides "
        "misread)"),
    "bn_eps_floored_cudnn_min": (
        "batch_norm", "eps",
        "eps raised to at least 1.001e-5 (the old CUDNN_BN_MIN_EPSILON floor) before the kernel, forward and "
        "backward, batch or running statistics",
        GH + "tensorflow/tensorflow/issues/37768 (fused_batch_norm's min_epsilon floor applied to every eps)"),
    "bn_momentum_for_mean_only": (
        "batch_norm", "running",
        "training with running statistics and a momentum other than 0.1: the configured momentum passed for "
        "running_mean only; running_var updated with the default 0.1",
        "pattern: a second hyper-parameter left at its default in a kernel call"),
    "bn_eval_rstd_from_batch": (
        "batch_norm", "mode",
        "eval with running statistics: x centred by running_mean but scaled by the batch's rstd "
        "(1 / sqrt(batch var + eps), the invstd buffer the training path fills), forward and backward; the "
        "returned rstd that one",
        "pattern: an eval path reading one statistic from the training path's buffer"),
    "bn_dbias_is_mean_dy": (
        "batch_norm", "reduction",
        "dbias stored as the per-channel mean of dy (the mean(g) term the dx formula uses, sum / count) instead "
        "of its sum; dx and dweight right",
        "cf. " + GH + "kvfrans/notes/issues/5 (a bias gradient taken as the mean over the batch where the sum "
        "belongs)"),
    "bn_saved_stats_in_input_dtype": (
        "batch_norm", "precision",
        "16-bit inputs, batch statistics: the saved mean and rstd written to buffers of the input dtype (returned "
        "so) and read back by the backward for x_hat, dx and dweight; y and the running update from the float32 "
        "ones",
        "cf. " + GH + "flagos-ai/FlagGems/pull/221 (a norm kernel saving mean and rstd in the half-precision "
        "input dtype instead of float32)"),
    # ------------------------------------------------------------------ group_norm
    "gn_dweight_uncentred": (
        "group_norm", "backward",
        "dweight per channel = sum over samples of rstd * sum(dy * x) (the ds - db * mean form with its db * mean "
        "term dropped): x_hat uncentred in dweight only; dx and dbias right",
        "cf. " + GH + "BVLC/caffe/issues/4110 (a normalization backward missing its mean-correction term)"),
    "gn_eps_fixed_default": (
        "group_norm", "eps",
        "the configured eps not forwarded: the kernel's default 1e-5 used, forward and backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/8818 (group_norm's compute kernel not taking eps from its "
        "parameters)"),
    "gn_channel_tail_block_dropped": (
        "group_norm", "block",
        "more than 4 channels a group, not a multiple of 4: the statistics loop over the group's channels in "
        "blocks of 4 and the last partial block is never loaded; the sums still divided by the group's count, "
        "forward and backward",
        "pattern: a loop bound rounded down to whole blocks"),
    "gn_affine_at_channel_in_group": (
        "group_norm", "layout",
        "the per-channel weight and bias loaded at the channel's index within its group (c % (C / G)) instead "
        "of c, forward and dx; dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a group norm backward deriving an index from the "
        "block-local channel instead of the global one)"),
    "gn_dparams_last_sample_dropped": (
        "group_norm", "reduction",
        "dweight and dbias: the loop over the samples' partial sums stops one short (n < N - 1): the last "
        "sample never enters the parameter gradients",
        "pattern: an off-by-one loop bound in a cross-sample reduction"),
    "gn_bwd_sums_over_sample": (
        "group_norm", "group",
        "the backward kernel launched with num_groups = 1 (the group count not passed to it): dx's mean(g) and "
        "mean(g * x_hat) taken over the whole sample instead of each group (x_hat and rstd per group right)",
        "cf. " + GH + "state-spaces/mamba/pull/547 (a norm backward whose group size defaulted to the whole row)"),
    # ------------------------------------------------------------------ instance_norm
    "in_momentum_none_as_default": (
        "instance_norm", "running",
        "training with running statistics, momentum=None: read as the default 0.1 (the running statistics move) "
        "instead of 0",
        "pattern: None replaced by a module default on the way into the kernel"),
    "in_eval_bwd_instance_formula": (
        "instance_norm", "mode",
        "eval with running statistics: the forward uses them, but dx is the training formula at each instance's "
        "own statistics (centred, rstd of the instance); dweight and dbias right",
        "cf. " + GH + "pytorch/pytorch/pull/4444 (InstanceNorm's choice between running and instance statistics "
        "read from the wrong flag)"),
    "in_float64_via_float32": (
        "instance_norm", "precision",
        "float64 inputs computed by the float32 instantiation (inputs and statistics in float32, results "
        "widened back), forward, backward and running update",
        "pattern: a dispatch covering float only, double routed through it"),
    "in_eps_outside_sqrt": (
        "instance_norm", "eps",
        "instance statistics: rstd = 1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps), forward and the "
        "backward's formula on it",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/317 (a norm kernel's eps grouped at the wrong place of its "
        "rsqrt expression)"),
    "in_stats_stored_channel_major": (
        "instance_norm", "layout",
        "the saved mean and rstd written at index c * N + n (channel-major) into the (N, C) buffers; y and the "
        "gradients right",
        "pattern: a 2-D statistic buffer indexed with its strides swapped"),
    # ------------------------------------------------------------------ z_score
    "zs_dim_tuple_last_axis_only": (
        "z_score", "group",
        "dim a tuple of several axes: the statistics taken over the last of them only (each run of the last axis "
        "its own slice), y and dx from those; the mean and std outputs hold each slice's last run",
        "pattern: a dim tuple read as its last element"),
    "zs_eps_inside_divisor": (
        "z_score", "eps",
        "std = sqrt((sum (x - mean)^2 + eps) / (n - ddof)): eps added to the sum of squares before the division "
        "instead of to the variance, forward and backward",
        "cf. " + GH + "xlite-dev/LeetCUDA/pull/317 (eps inside the wrong parenthesis of a variance "
        "expression)"),
    "zs_dweight_from_deviation": (
        "z_score", "backward",
        "dweight = sum over rows of dy * (x - mean) (the deviation the kernel holds, not divided by std); dx and "
        "dbias right",
        "pattern: the normalized value replaced by an intermediate in a parameter gradient"),
    "zs_stats_in_input_dtype": (
        "z_score", "precision",
        "16-bit inputs: the mean and std buffers allocated in the input dtype (empty_like(x) shaped for the "
        "statistic): the statistics rounded to it, returned so, and read back from there for y and dx",
        "cf. " + GH + "gabrieldemarmiesse/torch-mojo-backend/pull/363 (a norm's mean/rstd outputs returned "
        "in the input dtype)"),
    "zs_dparams_first_block_dropped": (
        "z_score", "reduction",
        "more than 128 rows: dweight and dbias reduced from partials of 128-row blocks by a final loop starting "
        "at block 1 (block 0's partial never added); dx right",
        "pattern: a reduction loop started at 1 after the accumulator was initialised to 0"),
    # ------------------------------------------------------------------ lp_normalize
    "lp_eps_fixed_default": (
        "lp_normalize", "eps",
        "zero_rule='torch': the configured eps not forwarded; the clamp max(||x||, 1e-12) (F.normalize's "
        "default), forward and backward",
        "cf. " + GH + "ybubnov/metalchat/issues/81 (a norm eps left at its default instead of passed down the "
        "call chain)"),
    "lp_dim_ignored_last_axis": (
        "lp_normalize", "layout",
        "dim a single axis that is not the last: the kernel normalizes along the last axis (contiguous rows) "
        "anyway; y and dx from those rows; the norm buffer filled in row order from them",
        "cf. " + GH + "torch/nn/pull/767 (Normalize first supporting the last dimension only)"),
    "lp_bwd_projection_added": (
        "lp_normalize", "backward",
        "slices not clamped: dx = (dy + w * sum(dy * u)) / norm, the projection added instead of subtracted",
        "pattern: a sign flipped in a hand-derived projection"),
    "lp_powers_in_input_dtype": (
        "lp_normalize", "precision",
        "16-bit inputs: |x|^p computed (unscaled) and rounded in the input dtype before the float32 sum (float16: "
        "values above 256 square to inf, the norm inf and y 0), forward and backward",
        "cf. " + GH + "apache/mxnet/issues/14073 (a norm's reduction done in float16)"),
}


def _ln_from_stats(call, acc, mean, rstd, bwd=None):
    """layer_norm's Returned from given statistics (rows, 1): y, mean, rstd and the gradients (centred dx,
    dweight, dbias); ``bwd``: other (mean, rstd) for the backward's x_hat and dx."""
    d, x0 = call.dtype, call.inputs["x"]
    ns, N, x = normalized_rows(call, acc)
    w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
    xhat = (x - mean) * rstd
    out = {"y": _store(affine(xhat, w, bias).reshape(x0.shape), d),
           "mean": mean.reshape(stat_shape(x0, ns)).astype(acc), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
    grads = {}
    if "y" in call.cotangents:
        bm, br = (mean, rstd) if bwd is None else bwd
        xb = (x - bm) * br
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        g = dy if w is None else dy * w
        grads["x"] = _store(_centred_dx(g, xb, br).reshape(x0.shape), d)
        if w is not None:
            grads["weight"] = _store((dy * xb).sum(axis=0).reshape(ns), d)
        if bias is not None:
            grads["bias"] = _store(dy.sum(axis=0).reshape(ns), d)
    return Returned(out, grads)


class Blind12Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind12"

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        b, d = self.bug, call.dtype
        inp = call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        eps = _eps(call.config["eps"], acc)
        if b == "ln_tail_block_mask_local" and N > 64 and N % 64 and x.size:
            nb = -(-N // 64) * 64
            flat = np.concatenate([x.reshape(-1), np.zeros(nb - N, acc)])
            R = x.shape[0]
            loaded = np.stack([flat[r * N:r * N + nb] for r in range(R)])
            mean = _rsum(loaded) / acc(N)
            dev = loaded - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / acc(N) + eps)
            return _ln_from_stats(call, acc, mean, rstd)
        r = super()._layer_norm(call, acc)
        if "y" not in call.cotangents or not N or not x.size:
            return r
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        mean, rstd, xhat = ln_rows(x, eps)
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        if b == "ln_bwd_proj_sum_of_dy" and w is not None and "x" in r.grads:
            g = dy * w
            dx = rstd * (g - _rsum(g) / acc(N) - xhat * (_rsum(dy * xhat) / acc(N)))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        if b == "ln_bwd_mean_from_rstd_ptr":
            return _ln_from_stats(call, acc, mean, rstd, bwd=(rstd, rstd))
        if b == "ln_dweight_last_lock_group_dropped" and x.shape[0] > 7 and ("weight" in r.grads or "bias" in r.grads):
            keep = (np.arange(x.shape[0]) % 8 != 7)[:, None]
            grads = dict(r.grads)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if k in grads:
                    grads[k] = _store((t * keep).sum(axis=0).reshape(ns), d)
            return Returned(r.outputs, grads)
        if b == "ln_dweight_stats_truncated_to_half" and d in ("float16", "bfloat16") and "weight" in r.grads:
            xh = (x - _half(mean, d)) * _half(rstd, d)
            return Returned(r.outputs, {**r.grads, "weight": _store((dy * xh).sum(axis=0).reshape(ns), d)})
        return r

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        placement = cfg.get("eps_placement", "inside") or "inside"
        ns, N, x = normalized_rows(call, acc)
        if b == "rms_outside_flag_dropped" and placement == "outside":
            return super()._rms_norm(_with(call, config={"eps_placement": "inside"}), acc)
        if b == "rms_sumsq_warp_partials_in_half" and d in ("float16", "bfloat16") and N and x.size:
            def stats(xx, eps, pl="inside"):
                sq = xx * xx
                lanes = [_rsum(sq[:, j::32]) for j in range(min(32, xx.shape[1]))]
                ss = sum(_half(v, d) for v in lanes)
                ms = ss / acc(xx.shape[1])
                rms = np.sqrt(ms)
                return rms, (1 / (rms + eps) if pl == "outside" else 1 / np.sqrt(ms + eps))
            self._rms_stats = stats
            try:
                return super()._rms_norm(call, acc)
            finally:
                del self._rms_stats
        if b == "rms_k2_rows_of_last_axis" and len(ns) >= 2 and placement != "outside" and x.size:
            return self._rms_last_axis_runs(call, acc, ns, N, x)
        r = super()._rms_norm(call, acc)
        if not N or not x.size:
            return r
        eps = _eps(cfg["eps"], acc)
        if b == "rms_rstd_output_is_mean_square" and "rstd" in r.outputs:
            ro = r.outputs["rstd"]
            return Returned({**r.outputs, "rstd": (_rsum(x * x) / acc(N)).reshape(ro.shape).astype(ro.dtype)}, r.grads)
        if "y" not in call.cotangents:
            return r
        dy = call.cotangents["y"].astype(acc).reshape(-1, N)
        _, rstd, xhat = rms_rows(x, eps)
        if b == "rms_dweight_last_sample_only" and x0.ndim >= 3 and x0.shape[0] > 1 and "weight" in r.grads:
            per = x.shape[0] // x0.shape[0]
            dw = (dy[-per:] * xhat[-per:]).sum(axis=0)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(ns), d)})
        if b == "rms_bwd_proj_rstd_squared" and placement != "outside" and "x" in r.grads:
            w = inp.get("weight")
            g = dy if w is None else dy * (w.astype(acc).reshape(1, N) + weight_offset(call, acc))
            dx = rstd * (g - xhat * (_rsum(g * x) / acc(N)))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    def _rms_last_axis_runs(self, call, acc, ns, N, x):
        """rms_k2_rows_of_last_axis: the mean square over each run of the last axis."""
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        L = ns[-1]
        R = x.shape[0]
        eps = _eps(call.config["eps"], acc)
        xs = x.reshape(-1, L)
        _, rs, xh = rms_rows(xs, eps)
        xhat = xh.reshape(R, N)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + weight_offset(call, acc)
        y = xhat if w is None else xhat * w
        rstd = rs.reshape(R, N // L)[:, -1:]
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc).reshape(R, N)
            g = dy if w is None else dy * w
            dx = rms_dx(g.reshape(-1, L), xh, rs).reshape(R, N)
            grads["x"] = _store(dx.reshape(x0.shape), d)
            if w is not None:
                grads["weight"] = _store((dy * xhat).sum(axis=0).reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        b = self.bug
        cfg, inp = call.config, call.inputs
        off = float(cfg.get("weight_offset", 0.0) or 0.0)
        if b == "an_rms_flag_dropped" and cfg["norm"] == "rms_norm":
            return super()._add_norm(_with(call, config={"norm": "layer_norm"}), acc)
        if b == "an_rms_path_drops_weight_offset" and cfg["norm"] == "rms_norm" and off:
            return super()._add_norm(_with(call, config={"weight_offset": 0.0}), acc)
        if b == "an_ln_var_one_pass" and cfg["norm"] == "layer_norm" and inp["x"].size:
            def stats(s, eps):
                n = s.shape[1]
                mean = _rsum(s) / acc(n)
                var = np.maximum(_rsum(s * s) / acc(n) - mean * mean, 0)
                rstd = 1 / np.sqrt(var + eps)
                return mean, rstd, (s - mean) * rstd
            return self._an_full(call, acc, stats)
        if b == "an_drowscale_reads_residual" and inp.get("rowscale") is not None and inp.get("residual") is not None:
            return self._an_full(call, acc, rowscale_from="residual")
        r = super()._add_norm(call, acc)
        if (b == "an_dres_out_added_twice" and cfg["prenorm"] and "residual" in r.grads
                and "residual_out" in call.cotangents):
            g = r.grads["residual"]
            dro = call.cotangents["residual_out"].astype(acc).reshape(g.shape)
            return Returned(r.outputs, {**r.grads, "residual": _store(g.astype(acc) + dro, call.dtype)}, r.state)
        return r

    def _an_full(self, call, acc, stats=None, rowscale_from="x"):
        """add_norm written out: the statistics by ``stats(s, eps)`` -> (mean, rstd, x_hat) when given, the
        rowscale's gradient from the input named ``rowscale_from``."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        c = kept(mask, rs, keep, p, (R, N), acc)
        s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if stats is not None:
            _, rstd, xhat = stats(s, eps)
        else:
            _, rstd, xhat = (ln_rows if centred else rms_rows)(s, eps)
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        grads = {}
        if "y" in call.cotangents:
            ds, dy, dy1 = add_norm_ds(call, xhat, rstd, centred, we, we1, cfg["prenorm"], acc)
            grads = add_norm_grads(inp, ds, None if res is None else ds, c, c1, dy, dy1, xhat, (w, bias, w1, b1),
                                   x, mask, keep, p, ns, d)
            if rowscale_from != "x" and inp.get("rowscale") is not None:
                src = res if rowscale_from == "residual" else x
                grads["rowscale"] = rowscale_grad(ds, src, mask, keep, p, inp["rowscale"].shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ batch_norm
    def _batch_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, st = call.config, call.state
        x0 = call.inputs["x"]
        has_run = st.get("running_mean") is not None
        batch = call.training or not has_run
        if b == "bn_channels_last_as_nchw" and x0.ndim >= 3 and x0.size:
            Nn, C = x0.shape[0], x0.shape[1]

            def cl(a):
                return np.ascontiguousarray(np.moveaxis(a.reshape(Nn, -1, C), -1, 1)).reshape(a.shape)

            def back(a):
                return np.ascontiguousarray(np.moveaxis(a.reshape(Nn, C, -1), 1, -1)).reshape(a.shape)
            cot = {k: cl(v) for k, v in call.cotangents.items()}
            r = super()._batch_norm(_with(call, inputs={"x": cl(x0)}, cotangents=cot), acc)
            grads = dict(r.grads)
            if "x" in grads:
                grads["x"] = back(grads["x"])
            return Returned({**r.outputs, "y": back(r.outputs["y"])}, grads, r.state)
        if b == "bn_eps_floored_cudnn_min" and cfg["eps"] is not None and float(cfg["eps"]) < 1.001e-5:
            return super()._batch_norm(_with(call, config={"eps": 1.001e-5}), acc)
        if (b == "bn_momentum_for_mean_only" and has_run and call.training and cfg["momentum"] is not None
                and float(cfg["momentum"]) != 0.1):
            r = super()._batch_norm(call, acc)
            r2 = super()._batch_norm(_with(call, config={"momentum": 0.1}), acc)
            return Returned(r.outputs, r.grads, {**r.state, "running_var": r2.state["running_var"]})
        r = super()._batch_norm(call, acc)
        x = channel_rows(x0, acc)
        C, n = x.shape
        if not n:
            return r
        eps = _eps(cfg["eps"], acc)
        w, bias = channel_params(call.inputs, acc, C)
        if b == "bn_eval_rstd_from_batch" and not batch:
            rm = st["running_mean"].astype(acc).reshape(C, 1)
            _, rstd = ln_stats(x, eps)
            xhat = (x - rm) * rstd
            out = {**r.outputs, "y": _store(from_channel_rows(affine(xhat, w, bias), x0.shape), d),
                   "rstd": rstd.reshape(C).astype(acc)}
            grads = dict(r.grads)
            if "y" in call.cotangents:
                dy = channel_rows(call.cotangents["y"], acc)
                g = dy if w is None else dy * w
                grads["x"] = _store(from_channel_rows(g * rstd, x0.shape), d)
                if w is not None:
                    grads["weight"] = _store(_rsum(dy * xhat).reshape(C), d)
            return Returned(out, grads, r.state)
        if b == "bn_dbias_is_mean_dy" and "bias" in r.grads and n > 1:
            dy = channel_rows(call.cotangents["y"], acc)
            return Returned(r.outputs, {**r.grads, "bias": _store((_rsum(dy) / acc(n)).reshape(C), d)}, r.state)
        if b == "bn_saved_stats_in_input_dtype" and batch and d in ("float16", "bfloat16"):
            mean, rstd = ln_stats(x, eps)
            mh, rh = _half(mean, d), _half(rstd, d)
            out = {**r.outputs, "mean": mh.reshape(C).astype(acc), "rstd": rh.reshape(C).astype(acc)}
            grads = dict(r.grads)
            if "y" in call.cotangents:
                xb = (x - mh) * rh
                dy = channel_rows(call.cotangents["y"], acc)
                g = dy if w is None else dy * w
                grads["x"] = _store(from_channel_rows(_centred_dx(g, xb, rh), x0.shape), d)
                if w is not None:
                    grads["weight"] = _store(_rsum(dy * xb).reshape(C), d)
            return Returned(out, grads, r.state)
        return r

    # ------------------------------------------------------------ group_norm
    def _group_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        if call.op != "group_norm" or not x0.size:
            return super()._group_norm(call, acc)
        Nb, C, G, S, cg, x, xv = group_rows(x0, cfg, acc)
        if b == "gn_eps_fixed_default" and cfg["eps"] is not None and float(cfg["eps"]) != 1e-5:
            return super()._group_norm(_with(call, config={"eps": 1e-5}), acc)
        if b == "gn_channel_tail_block_dropped" and cg > 4 and cg % 4:
            kc = (cg // 4) * 4 * S

            def stats(rows, eps):
                n = rows.shape[1]
                ks = rows[:, :kc]
                mean = _rsum(ks) / acc(n)
                dev = ks - mean
                return mean, 1 / np.sqrt(_rsum(dev * dev) / acc(n) + eps)
            return self._patched_stats(stats, super()._group_norm, call, acc)
        if b == "gn_affine_at_channel_in_group" and cg < C:
            idx = np.arange(C) % cg
            new = {k: np.ascontiguousarray(inp[k].reshape(-1)[idx]).reshape(inp[k].shape)
                   for k in ("weight", "bias") if inp.get(k) is not None}
            if new:
                ok = super()._group_norm(call, acc)
                r = super()._group_norm(_with(call, inputs=new), acc)
                grads = dict(r.grads)
                for k in ("weight", "bias"):
                    if k in ok.grads:
                        grads[k] = ok.grads[k]
                return Returned(r.outputs, grads)
        if b == "gn_dparams_last_sample_dropped" and Nb > 1 and "y" in call.cotangents and (
                inp.get("weight") is not None or inp.get("bias") is not None):
            r = super()._group_norm(call, acc)
            cot = {k: np.ascontiguousarray(v[:-1]) for k, v in call.cotangents.items()}
            sub = dataclasses.replace(call, inputs={**inp, "x": np.ascontiguousarray(x0[:-1])}, cotangents=cot)
            rs = super()._group_norm(sub, acc)
            grads = dict(r.grads)
            for k in ("weight", "bias"):
                if k in grads:
                    grads[k] = rs.grads[k]
            return Returned(r.outputs, grads)
        r = super()._group_norm(call, acc)
        if "y" not in call.cotangents:
            return r
        eps = _eps(cfg["eps"], acc)
        mean, rstd = ln_stats(xv, eps)
        dy = call.cotangents["y"].astype(acc).reshape(Nb, C, S)
        w = inp.get("weight")
        if b == "gn_dweight_uncentred" and "weight" in r.grads:
            rc = np.repeat(rstd.reshape(Nb, G), cg, axis=1)[..., None]
            dw = (dy * x * rc).sum(axis=(0, 2))
            return Returned(r.outputs, {**r.grads, "weight": _store(dw, d)})
        if b == "gn_bwd_sums_over_sample" and G > 1 and "x" in r.grads:
            xhat = ((xv - mean) * rstd).reshape(Nb, C * S)
            g = dy if w is None else dy * w.astype(acc).reshape(1, C, 1)
            g = g.reshape(Nb, C * S)
            rs = np.repeat(rstd.reshape(Nb, G), cg * S, axis=1)
            n = C * S
            dx = rs * (g - _rsum(g) / acc(n) - xhat * (_rsum(g * xhat) / acc(n)))
            return Returned(r.outputs, {**r.grads, "x": _store(dx.reshape(x0.shape), d)})
        return r

    # ------------------------------------------------------------ instance_norm
    def _instance_norm(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, st = call.config, call.state
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        has_run = st.get("running_mean") is not None
        inst = call.training or not has_run
        if b == "in_momentum_none_as_default" and has_run and call.training and cfg["momentum"] is None:
            return super()._instance_norm(_with(call, config={"momentum": 0.1}), acc)
        if b == "in_float64_via_float32" and d == "float64":
            r = super()._instance_norm(call, np.float32)
            return Returned({k: (v.astype(np.float64) if k != "y" else v) for k, v in r.outputs.items()},
                            {k: v.astype(np.float64) for k, v in r.grads.items()},
                            {k: (v.astype(np.float64) if k != "num_batches_tracked" else v)
                             for k, v in r.state.items()})
        if b == "in_eps_outside_sqrt" and inst and Nb and S:
            return self._in_full(call, acc)
        r = super()._instance_norm(call, acc)
        if b == "in_eval_bwd_instance_formula" and not inst and "x" in r.grads and S > 1:
            rt = super()._instance_norm(dataclasses.replace(call, training=True), acc)
            return Returned(r.outputs, {**r.grads, "x": rt.grads["x"]}, r.state)
        if b == "in_stats_stored_channel_major" and Nb > 1 and C > 1:
            out = dict(r.outputs)
            for k in ("mean", "rstd"):
                if k in out:
                    m = out[k]
                    out[k] = np.ascontiguousarray(m.reshape(Nb, C).T).reshape(m.shape)
            return Returned(out, r.grads, r.state)
        return r

    def _in_full(self, call, acc):
        """in_eps_outside_sqrt: instance_norm (instance statistics) with rstd = 1 / (sqrt(var) + eps)."""
        d, st, cfg = call.dtype, call.state, call.config
        x0 = call.inputs["x"]
        Nb, C, S, x = instance_rows(x0, acc)
        eps = _eps(cfg["eps"], acc)
        mean = _rsum(x) / acc(S)
        var = _rsum((x - mean) ** 2) / acc(S)
        rstd = 1 / (np.sqrt(var) + eps)
        xhat = (x - mean) * rstd
        w, bias, wr, br = instance_params(call.inputs, Nb, acc)
        out = instance_outputs(xhat, wr, br, mean, rstd, x0.shape, d, acc)
        state = {}
        if st.get("running_mean") is not None:
            rm, rv, nbt = running_in(st, acc)
            if call.training:
                m = instance_momentum_value(cfg, acc)
                rm, rv = instance_running_update(rm, rv, m, mean, instance_unbiased_var(x, mean, acc), Nb, C)
            state = running_state(rm, rv, nbt, d)
        return Returned(out, instance_grads(call, xhat, rstd, w, bias, wr, True, acc), state)

    # ------------------------------------------------------------ z_score
    def _z_score(self, call, acc):
        b, d = self.bug, call.dtype
        cfg, inp = call.config, call.inputs
        x0 = inp["x"]
        dims = cfg["dim"]
        x, n, back = _axes_rows(x0.astype(acc), dims)
        ddof = int(cfg["ddof"])
        if b == "zs_dim_tuple_last_axis_only" and isinstance(dims, (list, tuple)) and len(dims) > 1 and n:
            L = x0.shape[max(int(a) % x0.ndim for a in dims)]
            if L - ddof > 0 and L < n:
                return self._zs_runs(call, acc, x, n, back, L, ddof)
        if b == "zs_eps_inside_divisor" and cfg["eps"] and n - ddof > 0:
            return self._zs_full(call, acc, x, n, back, lambda ss, m, eps: np.sqrt((ss + eps) / m))
        if b == "zs_stats_in_input_dtype" and d in ("float16", "bfloat16") and n - ddof > 0:
            return self._zs_full(call, acc, x, n, back, lambda ss, m, eps: np.sqrt(ss / m + eps),
                                 post=lambda v: _half(v, d))
        r = super()._z_score(call, acc)
        if "y" not in call.cotangents or not n or not x.size:
            return r
        dy = _axes_rows(call.cotangents["y"].astype(acc), dims)[0]
        if b == "zs_dweight_from_deviation" and "weight" in r.grads:
            mean = _axes_rows(r.outputs["mean"].astype(acc), dims)[0]
            dw = (dy * (x - mean)).sum(axis=0)
            return Returned(r.outputs, {**r.grads, "weight": _store(dw.reshape(inp["weight"].shape), d)})
        if b == "zs_dparams_first_block_dropped" and x.shape[0] > 128 and ("weight" in r.grads or "bias" in r.grads):
            mean = _axes_rows(r.outputs["mean"].astype(acc), dims)[0]
            std = _axes_rows(r.outputs["std"].astype(acc), dims)[0]
            xhat = np.where(std == 0, acc(0), (x - mean) / np.where(std == 0, acc(1), std))
            grads = dict(r.grads)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if k in grads:
                    grads[k] = _store(t[128:].sum(axis=0).reshape(inp[k].shape), d)
            return Returned(r.outputs, grads)
        return r

    def _zs_full(self, call, acc, x, n, back, std_fn, post=None):
        """z_score (two-pass) with std = std_fn(sum of squared deviations, n - ddof, eps); ``post``: applied to
        the mean and std before they are stored and read back (y and dx from the stored values)."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        m = n - int(cfg["ddof"])
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        mean = _rsum(x) / acc(n)
        dev = x - mean
        std = std_fn(_rsum(dev * dev), acc(m), acc(cfg["eps"]))
        if post is not None:
            mean, std = post(mean), post(std)
            dev = x - mean
        safe = np.where(std == 0, acc(1), std)
        xhat = np.where(std == 0, acc(0), dev / safe)
        out = {"y": _store(back(affine(xhat, w, bias)), d), "mean": back(mean, True).astype(acc),
               "std": back(std, True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])[0]
            g = dy if w is None else dy * w
            inner = g - _rsum(g) / acc(n) - xhat * (_rsum(g * xhat) / acc(m))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / safe)), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    def _zs_runs(self, call, acc, x, n, back, L, ddof):
        """zs_dim_tuple_last_axis_only: each run of L values (the last dim axis) normalized on its own."""
        d, cfg, inp = call.dtype, call.config, call.inputs
        R = x.shape[0]
        w, bias = (None if inp.get(k) is None else inp[k].astype(acc).reshape(1, n) for k in ("weight", "bias"))
        xs = x.reshape(-1, L)
        mean = _rsum(xs) / acc(L)
        dev = xs - mean
        std = np.sqrt(_rsum(dev * dev) / acc(L - ddof) + acc(cfg["eps"]))
        safe = np.where(std == 0, acc(1), std)
        xh = np.where(std == 0, acc(0), dev / safe)
        xhat = xh.reshape(R, n)
        last = (slice(None), slice(n // L - 1, n // L))
        out = {"y": _store(back(affine(xhat, w, bias)), d),
               "mean": back(mean.reshape(R, n // L)[last], True).astype(acc),
               "std": back(std.reshape(R, n // L)[last], True).astype(acc)}
        grads = {}
        if "y" in call.cotangents:
            dy = _axes_rows(call.cotangents["y"].astype(acc), cfg["dim"])[0]
            g = (dy if w is None else dy * w).reshape(-1, L)
            inner = g - _rsum(g) / acc(L) - xh * (_rsum(g * xh) / acc(L - ddof))
            grads["x"] = _store(back(np.where(std == 0, acc(0), inner / safe).reshape(R, n)), d)
            for k, t in (("weight", dy * xhat), ("bias", dy)):
                if inp.get(k) is not None:
                    grads[k] = _store(t.sum(axis=0).reshape(inp[k].shape), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ lp_normalize
    def _lp_normalize(self, call, acc):
        b, d = self.bug, call.dtype
        cfg = call.config
        x0 = call.inputs["x"]
        dims = cfg["dim"]
        torch_rule = cfg["zero_rule"] == "torch"
        if b == "lp_eps_fixed_default" and torch_rule and float(cfg["eps"]) != 1e-12:
            return super()._lp_normalize(_with(call, config={"eps": 1e-12}), acc)
        if (b == "lp_dim_ignored_last_axis" and not isinstance(dims, (list, tuple)) and x0.ndim > 1
                and int(dims) % x0.ndim != x0.ndim - 1 and x0.size):
            r = super()._lp_normalize(_with(call, config={"dim": -1}), acc)
            ok = super()._lp_normalize(call, acc)
            want = ok.outputs["norm"]
            flat = r.outputs["norm"].reshape(-1)
            fill = np.zeros(want.size, flat.dtype)
            fill[:min(want.size, flat.size)] = flat[:want.size]
            return Returned({**r.outputs, "norm": fill.reshape(want.shape)}, r.grads)
        x, n, back = _axes_rows(x0.astype(acc), dims)
        if b == "lp_powers_in_input_dtype" and d in ("float16", "bfloat16") and n:
            p = float(cfg["p"])
            total = _rsum(_half(np.abs(x) ** acc(p), d))
            norm = total if p == 1.0 else np.sqrt(total) if p == 2.0 else total ** acc(1.0 / p)
            return self._lp_with_norm(call, acc, x, back, norm)
        r = super()._lp_normalize(call, acc)
        if b == "lp_bwd_projection_added" and "x" in r.grads and n:
            p, eps = float(cfg["p"]), acc(cfg["eps"])
            norm = _axes_rows(r.outputs["norm"].astype(acc), dims)[0]
            dy = _axes_rows(call.cotangents["y"].astype(acc), dims)[0]
            used = ((norm >= eps) if torch_rule else (norm != 0)) | np.isnan(norm)
            safe = np.where(used, norm, acc(1))
            u = x / safe
            wv = np.where(u == 0, acc(0), np.sign(u) * np.abs(u) ** acc(p - 1.0))
            proj = (dy + wv * _rsum(dy * u)) / safe
            gx = _axes_rows(r.grads["x"].astype(acc), dims)[0]
            return Returned(r.outputs, {**r.grads, "x": _store(back(np.where(used, proj, gx)), d)})
        return r
