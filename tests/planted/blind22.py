"""A twenty-second held-out set of normalization-kernel bugs, written without reading refnorm's diagnosis rules.

``Blind22Kernel(None)`` is a correct NumPy kernel for seven ops (layer_norm, rms_norm, add_norm, norm_quant,
gated_norm, dyt, poly_norm) written the way a fused float32 GPU kernel computes them: inputs upcast to float32
(float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to the output dtype at
the end (round to nearest even), statistics returned in float32. Its correct arithmetic is
tests/planted/blind11.py's (the class derives from ``Blind11Kernel``, whose own planted branches, and those of
the earlier sets, are keyed on their names and never taken here) and tests/planted/_blind_math.py's. It
declares the "strict" contract and must pass refnorm's check on the golden cases of its ops
(tests/test_blind.py). Each bug is planted in an override of the op's method here, where a kernel author would
make it: the op written out once more (``_ln22``, ``_rms22``, ``_an22``, ``_nq22``, ``_gated22``, ``_dyt22``,
``_poly22``, each the correct kernel's arithmetic step for step when no bug of its op is set) with the one
mistake in place.

``Blind22Kernel(name)`` is the same kernel with ONE realistic mistake planted, ``name`` a key of ``BUGS``:

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
blind21.py (the same mistake on the same op; the twenty-third set, written at the same time for the other ops,
shares none of these ops).
"""
from __future__ import annotations

import numpy as np

from refnorm.check.backends.base import Returned

from ._blind_math import (QUANT as _QUANT, add_norm_dims, add_norm_grads, add_norm_outputs, add_norm_params,
                          add_norm_rows, add_norm_sum, affine, centred_dx as _centred_dx, dy_and_g, dyt_grads,
                          dyt_inputs, dynamic_scale, eps_value as _eps, gate_group_size, gated_dn, gated_dx_dz,
                          gated_grads, gated_inputs, half as _half, kept, norm_outputs, norm_quant_returned,
                          normalized_rows, poly_combine, poly_grads, poly_inputs, poly_normalize, quant_quotients,
                          quantize, rms_dx, rms_norm_dx, rms_stats, row_affine, row_weight_bias,
                          rsum as _rsum, sigmoids as _sigmoids, silu_gate, stat_shape, static_scale,
                          store as _store, weight_offset)
from .blind3 import LABELS
from .blind11 import Blind11Kernel
from .blind20 import _bf16_toward_zero, _next_row, _norm_dx

OPS = ("layer_norm", "rms_norm", "add_norm", "norm_quant", "gated_norm", "dyt", "poly_norm")
__all__ = ("BUGS", "LABELS", "OPS", "Blind22Kernel")

GH = "https://github.com/"
HALF = ("float16", "bfloat16")
BUGS = {
    # ------------------------------------------------------------------ layer_norm
    "ln_bwd_row_sums_swapped": (
        "layer_norm", "backward",
        "dx = rstd * (g - x_hat * mean(g) - mean(g * x_hat)): the two row sums of the backward (of g and of "
        "g * x_hat) held in registers used in each other's term; y, the statistics, dweight and dbias right",
        "cf. " + GH + "BVLC/caffe/issues/4110 (a normalization backward whose mean-correction terms were "
        "assembled wrong while the forward was right)"),
    "ln_eps_hardcoded_1e-5": (
        "layer_norm", "eps",
        "the launch wrapper passes the literal 1e-5 (the module's default) instead of the configured eps: rstd "
        "= 1 / sqrt(var + 1e-5), forward, the returned rstd and the backward's formula on that rstd",
        "cf. " + GH + "THUDM/SwissArmyTransformer/pull/40 (a layer norm's eps fixed: the configured value not "
        "the one used)"),
    "ln_dparams_column_grid_floor": (
        "layer_norm", "block",
        "N > 64, not a multiple of 64: the column-parallel dweight/dbias kernel launched on N // 64 column "
        "blocks of 64 (floor, not cdiv): the last N mod 64 entries of dweight and dbias never written (left 0); "
        "dx and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/pull/59 (a norm backward kernel's grid not covering every block)"),
    "ln_mean_rstd_outputs_swapped": (
        "layer_norm", None,
        "the returned mean and rstd in each other's place (the kernel's statistics outputs unpacked in the "
        "wrong order); y and the gradients right",
        "cf. " + GH + "llvm/torch-mlir/pull/674 (native_layer_norm's mean and rstd outputs returned wrong)"),
    "ln_f64_rstd_from_float_rsqrt": (
        "layer_norm", "precision",
        "float64 inputs: rstd taken by the single-precision rsqrtf of (var + eps) converted to float (rounded to "
        "float32), then widened and used in float64 for y, the returned rstd and the backward",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a templated kernel calling single-precision math for "
        "double inputs)"),
    "ln_bf16_y_truncated": (
        "layer_norm", "rounding",
        "bfloat16 outputs: y converted from float32 by dropping the low 16 bits (round toward zero) instead of "
        "to nearest even; mean, rstd and the gradients right",
        "cf. " + GH + "tenstorrent/tt-metal/issues/57408 (kernels storing fp32 -> bf16 by truncation)"),
    # ------------------------------------------------------------------ rms_norm
    "rms_dweight_rows_of_first_axis": (
        "rms_norm", "reduction",
        "with a weight, inputs of three or more axes: the dweight kernel's row count M taken from x.shape[0] (a "
        "2-D input assumed), so dweight sums dy * x_hat over the first x.shape[0] rows of the flattened input "
        "only; dx and the forward right",
        "cf. " + GH + "flagos-ai/FlagGems/issues/5392 (a norm kernel taking a count from one axis of the "
        "input, wrong for inputs of higher rank)"),
    "rms_dweight_float32_for_float64": (
        "rms_norm", "precision",
        "float64 inputs with a weight: dweight's products dy * x_hat rounded to float32 and summed over the rows "
        "in a float32 accumulator (the partial buffer allocated as float32), widened at the store; dx and the "
        "forward right",
        "cf. " + GH + "pytorch/pytorch/pull/140259 (a norm backward's partial-gradient buffer of a narrower "
        "type than the accumulation type)"),
    "rms_sumsq_over_row_block": (
        "rms_norm", "block",
        "programs of 4 rows loading a (4, BLOCK_N) tile: the sum of squares reduced over the whole tile (tl.sum "
        "without axis=1), so every row of a block takes the block's total sum of squares, divided by N: rstd, y "
        "and the backward's formula on that rstd",
        "pattern: a 2-D tile reduced without its axis"),
    "rms_outside_bwd_proj_on_u": (
        "rms_norm", "eps",
        "eps_placement='outside': dx = rstd * (g - u * mean(g * u)), u = x / rms, the projection's row sum "
        "taken of g * u where g * x_hat = g * x / (rms + eps) belongs (eps left out of that term); y, rstd and "
        "dweight right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (review of an RMSNorm backward's factors)"),
    "rms_k2_row_stride_of_last_axis": (
        "rms_norm", "layout",
        "normalized_shape of two or more axes: x's row stride taken as x.stride(-2) (the last axis's length) "
        "instead of the product N: row r reads the N values from flat offset r * shape[-1], overlapping the "
        "next rows; rstd, y, dx and dweight from those values (each stored at its own row)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding rows wrong)"),
    # ------------------------------------------------------------------ add_norm
    "an_ln_block_welford_half_delta": (
        "add_norm", "merge",
        "norm='layer_norm', N > 64: the sum s read in column blocks of 64, each block's (count, mean, M2) "
        "folded into the running state by a Welford combine whose mean moves by delta / 2 (the counts taken "
        "equal) instead of delta * n_b / (n_a + n_b); M2's correction term weighted right: mean, var, y and the "
        "backward on those statistics",
        "cf. " + GH + "tenstorrent/tt-metal/pull/50624 (an equal-count merge of partial statistics, right only "
        "when every partial holds the same count)"),
    "an_rms_dbias_not_written": (
        "add_norm", "backward",
        "norm='rms_norm' with a bias: the backward's RMS branch never stores dbias (the buffer left at its "
        "zero initialisation); dx, dresidual, dweight and the forward right",
        "cf. " + GH + "vllm-project/vllm-ascend/pull/5666 (an RMSNorm kernel extended with a bias)"),
    "an_dresidual_before_y1_branch": (
        "add_norm", "backward",
        "with y1's cotangent: the residual's gradient stored from ds before the parallel branch's term "
        "dnorm(dy1 * (weight1 + offset)) is added (residual_out's cotangent included); dx, dx1 and the "
        "parameter gradients from the full ds",
        "pattern: a store placed before the last accumulation into the stored value"),
    "an_eps_in_input_dtype": (
        "add_norm", "eps",
        "16-bit inputs: eps converted to the input dtype (a kernel argument of the activation's scalar type) "
        "before it is added to the float32 variance or mean square (float16: 1e-12 becomes 0), forward and "
        "backward",
        "cf. " + GH + "VeriSilicon/TIM-VX/pull/589 (a normalization's eps passed through a parameter of the "
        "wrong data type)"),
    "an_rowscale_hoisted_per_row_block": (
        "add_norm", "layout",
        "with a rowscale: programs of 4 rows load the rowscale once before their row loop, so every row of a "
        "block is scaled by the block's first row's rowscale: s, residual_out, y and the backward (dx, and "
        "drowscale's formula on those values)",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm kernel reading another row's per-row value)"),
    "an_f64_residual_add_in_float32": (
        "add_norm", "precision",
        "float64 inputs: the residual add s = x * c (+ x1 * c1) + residual done in float32 (the add kernel "
        "instantiated for float only) and widened: residual_out, and the norm of that s",
        "cf. " + GH + "google/flax/pull/1804 (layers computing in float32 whatever the input dtype)"),
    # ------------------------------------------------------------------ norm_quant
    "nq_amax_before_bias": (
        "norm_quant", "quant_scale",
        "norm='layer_norm' with a weight and a bias: the row's amax reduced from x_hat * weight (the register "
        "before the bias is added), the dynamic scale from it; q = (x_hat * weight + bias) / that scale",
        "cf. " + GH + "ROCm/TransformerEngine/pull/230 (a fused norm + FP8 kernel's amax taken at the wrong "
        "point)"),
    "nq_ln_bias_before_weight": (
        "norm_quant", "affine",
        "norm='layer_norm' with a weight and a bias: y = (x_hat + bias) * weight (the fused multiply-add's "
        "operands in the wrong order), then amax, scale and q from it",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm's weight and bias applied the wrong way)"),
    "nq_scale_stored_column_major": (
        "norm_quant", "layout",
        "inputs of three or more axes: the per-token scale written column-major (the leading axes reversed, "
        "the layout the fp8 GEMM consumes) and handed out as a row-major view: scale values at the wrong "
        "tokens; q and amax right",
        GH + "ROCm/aiter/pull/4506 (fused_rms_fp8_group_quant: the scale written column-major and returned "
        "through a row-major view)"),
    "nq_rms_eps_dropped": (
        "norm_quant", "eps",
        "norm='rms_norm': rstd = 1 / sqrt(mean(x^2)), the eps never added in the RMS branch (the layer-norm "
        "branch adds it), then amax, scale and q from y",
        "pattern: one of two branches missing a term"),
    "nq_scale_amax_outputs_swapped": (
        "norm_quant", None,
        "the returned scale and amax in each other's place (the kernel's two per-row outputs bound to the wrong "
        "pointers); q right",
        "pattern: two outputs of the same shape unpacked in the wrong order"),
    "nq_f64_dyn_scale_in_float32": (
        "norm_quant", "precision",
        "float64 inputs, dynamic scale: amax / qmax and its clamps computed in float32 (the scale buffer "
        "float32), q divided by that scale and it returned",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (single-precision arithmetic in a double path)"),
    # ------------------------------------------------------------------ gated_norm
    "gated_dz_without_x": (
        "gated_norm", "gate",
        "norm_before_gate=False: dz = dv * silu'(z) (the factor x of d(x * silu(z))/dz left out); dx, dweight, "
        "dbias and the forward right",
        "pattern: an input factor dropped from a product rule"),
    "gated_bwd_stats_of_first_group": (
        "gated_norm", "layout",
        "group_size < H: the backward loads the saved mean and rstd at the row's first group for every group "
        "(the group offset left out of the statistics pointer): v_hat, dx, dz and dweight from them; the "
        "forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a norm backward loading another group's saved "
        "statistics)"),
    "gated_f64_sigmoid_in_float32": (
        "gated_norm", "precision",
        "float64 inputs: the gate's sigmoid evaluated by the float32 expf (z rounded to float32, the sigmoid "
        "rounded), then silu(z) and its derivative in float64 from it, forward and backward",
        "cf. " + GH + "scverse/rapids-singlecell/pull/658 (a kernel calling single-precision math for double "
        "inputs)"),
    "gated_rms_bias_dropped": (
        "gated_norm", "affine",
        "norm='rms_norm' with a bias: the RMS branch never loads the bias: n = v_hat * weight, y and the "
        "backward from that n (dz's factor); dbias still reduced",
        "cf. " + GH + "vllm-project/vllm-ascend/pull/5666 (an RMSNorm kernel's bias handled in some paths "
        "only)"),
    "gated_bwd_g_without_weight": (
        "gated_norm", "backward",
        "the normalization's backward takes g = dn (the weight not multiplied in) for dv: dx and dz (norm after "
        "the gate); dweight, dbias and the forward right",
        "cf. " + GH + "karpathy/llm.c/pull/763 (an RMSNorm backward that forgot to multiply by the weight)"),
    "gated_rows_grid_floor": (
        "gated_norm", "block",
        "programs of 4 rows launched on a grid of rows // 4 (floor, not cdiv): the last rows mod 4 never "
        "processed: y, dx and dz left 0 there, their terms missing from dweight and dbias",
        "pattern: a grid size written with a floor division"),
    "gated_rms_as_layer_norm": (
        "gated_norm", "semantics",
        "norm='rms_norm': the IS_RMS_NORM flag not passed to the kernel, which centres each group and divides by "
        "its standard deviation (the layer-norm path), forward and backward",
        "cf. " + GH + "ggml-org/llama.cpp/pull/15507 (a grouped norm kernel configured the other way)"),
    # ------------------------------------------------------------------ dyt
    "dyt_weight_bias_swapped": (
        "dyt", "affine",
        "with a weight and a bias: the launch passes them in each other's slots: y = tanh(alpha x) * bias + "
        "weight, and the backward's g = dy * bias for dx and dalpha; the slots' gradients (sum dy * tanh, sum "
        "dy) written in the slots' order",
        "cf. " + GH + "Oneflow-Inc/oneflow/pull/6149 (a norm's weight and bias taken the wrong way round)"),
    "dyt_affine_rounded_between_ops": (
        "dyt", "precision",
        "16-bit inputs with a weight and a bias: tanh(alpha x) * weight rounded to the input dtype before the "
        "bias is added (a 16-bit multiply then a 16-bit add); the gradients right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/618 (the DyT kernel's forward, computed in float32 and "
        "rounded once)"),
    "dyt_dweight_from_alpha_x": (
        "dyt", "backward",
        "with a weight: dweight = sum over the rows of dy * alpha x (the tanh's argument register reduced where "
        "tanh(alpha x) belongs); dx, dalpha, dbias and the forward right",
        "pattern: the argument register reduced where the function's value belongs"),
    "dyt_bwd_x_of_next_row": (
        "dyt", "layout",
        "more than one row: the backward loads x after advancing the row pointer: row r's sech^2(alpha x), dx "
        "and dalpha's terms from row r + 1's x (the last row its own); dweight, dbias and the forward right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/56202 (a backward kernel loading another row's values)"),
    "dyt_single_column_tile_64": (
        "dyt", "block",
        "C > 64: one column tile of 64 per row and no loop over tiles: the columns from 64 on never processed "
        "(y and dx left 0 there, their terms missing from dalpha, their dweight and dbias 0)",
        "cf. " + GH + "facebookresearch/xformers/issues/785 (a Triton kernel ignoring the columns beyond its "
        "block)"),
    "dyt_activation_sigmoid": (
        "dyt", None,
        "the elementwise template instantiated with the sigmoid functor: y = weight * sigmoid(alpha x) + bias "
        "and the backward of that function (sigmoid' = s (1 - s))",
        "pattern: the activation template instantiated with the wrong functor"),
    # ------------------------------------------------------------------ poly_norm
    "poly_rows_of_first_sample": (
        "poly_norm", "layout",
        "inputs of three or more axes: row r of x loaded at its index within its sample (r mod rows-per-sample, "
        "the batch stride left out): every sample computes sample 0's powers, forward and backward (dx stored "
        "at its own row)",
        "cf. " + GH + "tenstorrent/tt-metal/issues/56955 (a normalization kernel striding batches wrong)"),
    "poly_bwd_weights_reversed": (
        "poly_norm", "affine",
        "the backward loads the three weights in ascending power order (w2 for x^3's g_p, w0 for x's) while the "
        "forward applies them in descending order: dx; the forward, dweight and dbias right",
        "cf. " + GH + "tenstorrent/tt-metal/pull/40449 (PolyNorm3's fused backward: each weight paired with its "
        "branch's power)"),
    "poly_bwd_centred": (
        "poly_norm", "backward",
        "dx: each power's normalization gradient written with the layer norm's formula r_p (g_p - mean(g_p) - "
        "h_p mean(g_p h_p)) (the - mean(g_p) term of a centred norm included); dweight, dbias and the forward "
        "right",
        "cf. " + GH + "linkedin/Liger-Kernel/pull/1114 (a poly_norm backward kernel's per-power terms)"),
    "poly_chunk_mean_squares_averaged": (
        "poly_norm", "merge",
        "H > 32: each power's mean of squares taken per 32-wide column chunk (divided by the chunk's own count) "
        "and the chunks merged by a plain average (unweighted by their counts, wrong when the last chunk is "
        "shorter): r_p, y and the backward's formula on them",
        "pattern: partial means merged without their counts"),
    "poly_weight_loaded_as_bf16": (
        "poly_norm", "precision",
        "32/64-bit inputs: the three weights loaded through a bfloat16 pointer (rounded to bfloat16), forward and "
        "backward (dx's g_p); dweight right",
        "pattern: a parameter pointer typed as the 16-bit build's dtype"),
    "poly_dweight_first_partial_skipped": (
        "poly_norm", "reduction",
        "the weight's gradient reduced in two stages, one partial per block of 4 rows, the second stage's loop "
        "starting at partial 1: rows 0..3 never reach dweight; dx and dbias right",
        "pattern: a reduction loop starting at 1 over partials initialised to 0"),
}


def _op_bugs(op):
    return frozenset(n for n, (o, *_) in BUGS.items() if o == op)


def _f32(a):
    """``a`` rounded to float32 and back to its own dtype (a float64 value through a float32 register)."""
    return np.asarray(a).astype(np.float32).astype(np.asarray(a).dtype)


class Blind22Kernel(Blind11Kernel):
    """A float32 NumPy kernel for OPS (module docstring); ``bug``: a key of BUGS, or None (correct)."""

    BUGS, OPS, LABEL = BUGS, OPS, "blind22"
    _LN, _RMS, _AN, _NQ, _GATED, _DYT, _POLY = (_op_bugs(o) for o in OPS)
    _ALL = False                     # True: every call through this file's written-out ops (their own check)

    def _mine(self, names):
        return self._ALL or self.bug in names

    # ------------------------------------------------------------ layer_norm
    def _layer_norm(self, call, acc):
        if self._mine(self._LN):
            return self._ln22(call, acc, self.bug)
        return super()._layer_norm(call, acc)

    def _ln22(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._layer_norm(call, acc)
        eps = acc(1e-5) if b == "ln_eps_hardcoded_1e-5" else _eps(call.config["eps"], acc)
        w, bias = row_weight_bias(call, acc, N, weight_offset(call, acc))
        mean = _rsum(x) / N
        dev = x - mean
        var = _rsum(dev * dev) / N
        if b == "ln_f64_rstd_from_float_rsqrt" and d == "float64":
            v32 = (var + eps).astype(np.float32)
            rstd = (np.float32(1) / np.sqrt(v32)).astype(acc)
        else:
            rstd = 1 / np.sqrt(var + eps)
        xhat = dev * rstd
        y = affine(xhat, w, bias)
        out = norm_outputs(y, mean, rstd, x0, stat_shape(x0, ns), d, acc)
        if b == "ln_bf16_y_truncated" and d == "bfloat16":
            out["y"] = _bf16_toward_zero(y).reshape(x0.shape)
        if b == "ln_mean_rstd_outputs_swapped":
            out["mean"], out["rstd"] = out["rstd"], out["mean"]
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "ln_bwd_row_sums_swapped":
            dx = rstd * (g - xhat * (_rsum(g) / N) - _rsum(g * xhat) / N)
        else:
            dx = _centred_dx(g, xhat, rstd)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        k = N
        if b == "ln_dparams_column_grid_floor" and N > 64 and N % 64:
            k = (N // 64) * 64                               # the columns the dparams grid covers
        for key, t, given in (("weight", dy * xhat, w), ("bias", dy, bias)):
            if given is None:
                continue
            v = t.sum(axis=0)
            v[k:] = 0
            grads[key] = _store(v.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ rms_norm
    def _rms_norm(self, call, acc):
        if self._mine(self._RMS):
            return self._rms22(call, acc, self.bug)
        return super()._rms_norm(call, acc)

    def _rms22(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._rms_norm(call, acc)
        R = x.shape[0]
        if b == "rms_k2_row_stride_of_last_axis" and len(ns) >= 2 and R > 1:
            flat = x.reshape(-1)
            x = flat[np.arange(R)[:, None] * ns[-1] + np.arange(N)[None, :]]
        placement = cfg.get("eps_placement", "inside") or "inside"
        inside = placement != "outside"
        off = weight_offset(call, acc)
        w0 = inp.get("weight")
        w = None if w0 is None else w0.astype(acc).reshape(1, N) + off
        eps = _eps(cfg["eps"], acc)
        if b == "rms_sumsq_over_row_block":
            ss = _rsum(x * x)
            for r0 in range(0, R, 4):
                ss[r0:r0 + 4] = ss[r0:r0 + 4].sum()
            ms = ss / acc(N)
            rms = np.sqrt(ms)
            rstd = 1 / np.sqrt(ms + eps) if inside else 1 / (rms + eps)
        else:
            rms, rstd = rms_stats(x, eps, placement)
        xhat = x * rstd
        y = xhat if w is None else xhat * w
        out = {"y": _store(y.reshape(x0.shape), d), "rstd": rstd.reshape(stat_shape(x0, ns)).astype(acc)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, (-1, N), w)
        if b == "rms_outside_bwd_proj_on_u" and not inside:
            u = np.where(rms == 0, acc(0), x / np.where(rms == 0, acc(1), rms))
            dx = rstd * (g - u * (_rsum(g * u) / N))
        else:
            dx = rms_norm_dx(g, x, xhat, rstd, rms, placement)
        grads = {"x": _store(dx.reshape(x0.shape), d)}
        if w is not None:
            t = dy * xhat
            if b == "rms_dweight_rows_of_first_axis" and x0.ndim >= 3 and x0.shape[0] < R:
                dw = t[:x0.shape[0]].sum(axis=0)
            elif b == "rms_dweight_float32_for_float64" and d == "float64":
                dw = t.astype(np.float32).sum(axis=0, dtype=np.float32).astype(acc)
            else:
                dw = t.sum(axis=0)
            grads["weight"] = _store(dw.reshape(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ add_norm
    def _add_norm(self, call, acc):
        if self._mine(self._AN):
            return self._an22(call, acc, self.bug)
        return super()._add_norm(call, acc)

    def _an22(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, R, p, keep, off = add_norm_dims(call, acc)
        if not N or not R:
            return super()._add_norm(call, acc)
        x, res, mask, x1, mask1, rs = add_norm_rows(inp, R, N, acc)
        rsl = rs                                             # the rowscale the forward loads
        if b == "an_rowscale_hoisted_per_row_block" and rs is not None and R > 1:
            rsl = rs[(np.arange(R) // 4) * 4]
        c = kept(mask, rsl, keep, p, (R, N), acc)
        if b == "an_f64_residual_add_in_float32" and d == "float64":
            f = np.float32
            c1f = None if x1 is None else kept(mask1, None, keep, p, (R, N), acc)
            s, _ = add_norm_sum(x.astype(f), None if res is None else res.astype(f),
                                None if x1 is None else x1.astype(f), None if mask1 is None else mask1.astype(f),
                                c.astype(f), f(keep), p, f)
            s = s.astype(acc)
            c1 = c1f
        else:
            s, c1 = add_norm_sum(x, res, x1, mask1, c, keep, p, acc)
        eps = _eps(cfg["eps"], acc)
        if b == "an_eps_in_input_dtype" and d in HALF:
            eps = _half(np.asarray(eps, dtype=acc), d)[()]
        w, bias, w1, b1, we, we1 = add_norm_params(inp, acc, N, off)
        centred = cfg["norm"] == "layer_norm"
        if centred:
            if b == "an_ln_block_welford_half_delta" and N > 64:
                n_a, mean, m2 = 0, None, None
                for k in range(0, N, 64):
                    blk = s[:, k:k + 64]
                    n_b = blk.shape[1]
                    m_b = _rsum(blk) / acc(n_b)
                    m2_b = _rsum((blk - m_b) ** 2)
                    if mean is None:
                        n_a, mean, m2 = n_b, m_b, m2_b
                        continue
                    delta = m_b - mean
                    mean = mean + delta / acc(2)
                    m2 = m2 + m2_b + delta * delta * acc(n_a * n_b / (n_a + n_b))
                    n_a += n_b
                dev = s - mean
                rstd = 1 / np.sqrt(m2 / N + eps)
            else:
                mean = _rsum(s) / N
                dev = s - mean
                rstd = 1 / np.sqrt(_rsum(dev * dev) / N + eps)
        else:
            dev = s
            rstd = 1 / np.sqrt(_rsum(s * s) / N + eps)
        xhat = dev * rstd
        out = add_norm_outputs(xhat, we, bias, we1, b1, s, x0.shape, cfg, d)
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(R, N)
        ds = _norm_dx(dy, we, xhat, rstd, centred, _rsum)
        if cfg["prenorm"] and "residual_out" in call.cotangents:
            ds = ds + call.cotangents["residual_out"].astype(acc).reshape(R, N)
        ds_early = ds                                        # before the parallel branch's term
        dy1 = None
        if we1 is not None and "y1" in call.cotangents:
            dy1 = call.cotangents["y1"].astype(acc).reshape(R, N)
            ds = ds + _norm_dx(dy1, we1, xhat, rstd, centred, _rsum)
        dres = ds_early if b == "an_dresidual_before_y1_branch" else ds
        params = (w, bias, w1, b1)
        grads = add_norm_grads(inp, ds, None if res is None else dres, c, c1, dy, dy1, xhat, params, x, mask,
                               keep, p, ns, d)
        if b == "an_rms_dbias_not_written" and not centred and "bias" in grads:
            grads["bias"] = _store(np.zeros(ns), d)
        return Returned(out, grads)

    # ------------------------------------------------------------ norm_quant
    def _norm_quant(self, call, acc):
        if self._mine(self._NQ):
            return self._nq22(call, acc, self.bug)
        return super()._norm_quant(call, acc)

    def _nq22(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        x0 = inp["x"]
        ns, N, x = normalized_rows(call, acc)
        if not N or not x.size:
            return super()._norm_quant(call, acc)
        eps = _eps(cfg["eps"], acc)
        w, bias = inp.get("weight"), inp.get("bias")
        if cfg["norm"] == "layer_norm":
            mean = _rsum(x) / N
            var = _rsum((x - mean) ** 2) / N
            rstd = 1 / np.sqrt(var + eps)
        else:
            mean = acc(0)
            ms = _rsum(x * x) / N
            rstd = 1 / np.sqrt(ms) if b == "nq_rms_eps_dropped" else 1 / np.sqrt(ms + eps)
        xhat = (x - mean) * rstd
        ya = None                                            # the values amax is reduced from, when not y
        if b == "nq_ln_bias_before_weight" and w is not None and bias is not None and cfg["norm"] == "layer_norm":
            y = (xhat + bias.astype(acc).reshape(1, N)) * w.astype(acc).reshape(1, N)
        else:
            y = row_affine(xhat, w, bias, acc)
            if b == "nq_amax_before_bias" and w is not None and bias is not None:
                ya = row_affine(xhat, w, None, acc)
        qdt, lo, hi = _QUANT[cfg["quant_dtype"]]
        amax = np.max(np.abs(y if ya is None else ya), axis=1, keepdims=True, initial=0.0)
        static = inp.get("static_scale")
        if static is not None:
            scale = static_scale(static, amax.shape, acc)
        elif b == "nq_f64_dyn_scale_in_float32" and d == "float64":
            scale = dynamic_scale(amax.astype(np.float32), hi, cfg, np.float32).astype(acc)
        else:
            scale = dynamic_scale(amax, hi, cfg, acc)
        q = quantize(quant_quotients(y, scale, lo, hi, acc), qdt)
        r = norm_quant_returned(q, scale, amax, x0, ns, acc)
        out = dict(r.outputs)
        if b == "nq_scale_amax_outputs_swapped":
            out["scale"], out["amax"] = out["amax"], out["scale"]
        lead = x0.shape[:x0.ndim - len(ns)]
        if b == "nq_scale_stored_column_major" and len(lead) >= 2:
            sc = out["scale"]
            buf = np.ascontiguousarray(sc.reshape(lead).transpose(tuple(range(len(lead)))[::-1])).reshape(-1)
            out["scale"] = buf.reshape(sc.shape)
        return Returned(out)

    # ------------------------------------------------------------ gated_norm
    def _gated_norm(self, call, acc):
        if self._mine(self._GATED):
            return self._gated22(call, acc, self.bug)
        return super()._gated_norm(call, acc)

    def _gated22(self, call, acc, b):
        d, cfg, inp = call.dtype, call.config, call.inputs
        nbg, norm = bool(cfg["norm_before_gate"]), cfg["norm"]
        x0 = inp["x"]
        if not x0.size:
            return super()._gated_norm(call, acc)
        if b == "gated_rms_as_layer_norm":
            norm = "layer_norm"
        R, H, x, z, w, bias = gated_inputs(inp, acc)
        K = gate_group_size(cfg, H)
        if b == "gated_f64_sigmoid_in_float32" and d == "float64":
            sig, rest = _sigmoids(z.astype(np.float32))
            sig, rest = sig.astype(acc), rest.astype(acc)
            s, ds = z * sig, sig * (1 + z * rest)
        else:
            s, ds = silu_gate(z)
        v = x if nbg else x * s
        vg = v.reshape(-1, K)
        eps = _eps(cfg["eps"], acc)
        if norm == "layer_norm":
            mean = _rsum(vg) / K
            dev = vg - mean
            rstd = 1 / np.sqrt(_rsum(dev * dev) / K + eps)
        else:
            mean = acc(0)
            rstd = 1 / np.sqrt(_rsum(vg * vg) / K + eps)
        vhat = ((vg - mean) * rstd).reshape(R, H)
        bl = bias                                            # the bias the forward adds
        if b == "gated_rms_bias_dropped" and norm == "rms_norm":
            bl = None
        nrm = vhat * w if bl is None else vhat * w + bl
        y = nrm * s if nbg else nrm
        kr = R                                               # the rows the grid processes
        if b == "gated_rows_grid_floor" and R % 4:
            kr = (R // 4) * 4
            y = np.where((np.arange(R) < kr)[:, None], y, acc(0))
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, dn, g = gated_dn(call, acc, w, s, nbg, K)
        if b == "gated_bwd_g_without_weight":
            g = dn.reshape(-1, K)
        vv, rb = vhat.reshape(-1, K), rstd
        G = H // K
        if b == "gated_bwd_stats_of_first_group" and G > 1:
            first = (np.arange(R * G) // G) * G
            mb = mean[first] if norm == "layer_norm" else mean
            rb = rstd[first]
            vv = (vg - mb) * rb
        if norm == "layer_norm":
            dv = _centred_dx(g, vv, rb)
        else:
            dv = rms_dx(g, vv, rb)
        dv = dv.reshape(R, H)
        vb = vv.reshape(R, H)
        dx, dz = gated_dx_dz(dv, dy, nrm, x, s, ds, nbg)
        if b == "gated_dz_without_x" and not nbg:
            dz = dv * ds
        rows = (np.arange(R) < kr)[:, None]
        if kr < R:
            dx, dz, dn = (np.where(rows, a, acc(0)) for a in (dx, dz, dn))
        grads = gated_grads(dx, dz, dn, None if bias is None else dn, vb, x0.shape, d)
        return Returned(out, grads)

    # ------------------------------------------------------------ dyt
    def _dyt(self, call, acc):
        if self._mine(self._DYT):
            return self._dyt22(call, acc, self.bug)
        return super()._dyt(call, acc)

    def _dyt22(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._dyt(call, acc)
        x, a, w, bias, t = dyt_inputs(inp, acc)
        if b == "dyt_weight_bias_swapped" and w is not None and bias is not None:
            w, bias = bias, w
        sig = None
        if b == "dyt_activation_sigmoid":
            sig, rest = _sigmoids(a * x)
            t = sig
        if b == "dyt_affine_rounded_between_ops" and d in HALF and w is not None and bias is not None:
            y = _half(_half(t * w, d) + bias, d)
        else:
            y = affine(t, w, bias)
        C = x.shape[1]
        kc = 64 if b == "dyt_single_column_tile_64" and C > 64 else C     # the columns processed
        if kc < C:
            y[:, kc:] = 0
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy, g = dy_and_g(call, acc, x.shape, w)
        xb = x
        if b == "dyt_bwd_x_of_next_row" and x.shape[0] > 1:
            xb = _next_row(x)
        if sig is not None:
            D = sig * rest
        else:
            r = 1 / np.cosh(a * xb)
            D = r * r
        gd = g * D
        dx = gd * a
        if kc < C:
            dx[:, kc:] = 0
            gd = gd[:, :kc]
        rows = _rsum(gd * xb[:, :gd.shape[1]])
        da = rows.sum()
        grads = dyt_grads(dx, da, dy, t, w, bias, inp, x0.shape, d)
        if b == "dyt_dweight_from_alpha_x" and w is not None:
            grads["weight"] = _store((dy * (a * x)).sum(axis=0), d)
        if kc < C:
            for key in ("weight", "bias"):
                if key in grads:
                    v = grads[key].copy()
                    v[kc:] = 0
                    grads[key] = v
        return Returned(out, grads)

    # ------------------------------------------------------------ poly_norm
    def _poly_norm(self, call, acc):
        if self._mine(self._POLY):
            return self._poly22(call, acc, self.bug)
        return super()._poly_norm(call, acc)

    def _poly22(self, call, acc, b):
        d, inp = call.dtype, call.inputs
        x0 = inp["x"]
        if not x0.size:
            return super()._poly_norm(call, acc)
        H, x, wt, bias, eps = poly_inputs(call, acc)
        R = x.shape[0]
        if b == "poly_rows_of_first_sample" and x0.ndim >= 3 and x0.shape[0] > 1:
            x = x[np.arange(R) % (R // x0.shape[0])]
        if b == "poly_weight_loaded_as_bf16" and d not in HALF:
            wt = _half(wt, "bfloat16")
        us = [x ** 3, x ** 2, x]
        if b == "poly_chunk_mean_squares_averaged" and H > 32:
            rs = []
            for u in us:
                parts = [_rsum(u[:, k:k + 32] ** 2) / acc(min(32, H - k)) for k in range(0, H, 32)]
                ms = np.concatenate(parts, axis=1).mean(axis=1, keepdims=True)
                rs.append(1 / np.sqrt(ms + eps))
            hs = [u * r for u, r in zip(us, rs)]
        else:
            hs, rs = poly_normalize(us, eps, acc)
        y = poly_combine(wt, hs, bias, acc)
        out = {"y": _store(y.reshape(x0.shape), d)}
        if "y" not in call.cotangents:
            return Returned(out, {})
        dy = call.cotangents["y"].astype(acc).reshape(-1, H)
        du = rms_dx
        if b == "poly_bwd_centred":
            def du(g, h, r):
                return _centred_dx(g, h, r)
        grads = poly_grads(dy, x, wt, hs, rs, bias, x0.shape, d, acc, du=du)
        if b == "poly_bwd_weights_reversed":
            dx = np.zeros_like(x)
            for k, pp in enumerate((3, 2, 1)):
                dp = du(dy * wt[2 - k], hs[k], rs[k])
                dx = dx + (dp if pp == 1 else pp * x ** (pp - 1) * dp)
            grads["x"] = _store(dx.reshape(x0.shape), d)
        if b == "poly_dweight_first_partial_skipped":
            dw = np.array([(dy[4:] * h[4:]).sum() for h in hs], dtype=acc)
            grads["weight"] = _store(dw.reshape(inp["weight"].shape), d)
        return Returned(out, grads)
