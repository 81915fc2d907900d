"""Residual add + LayerNorm or RMSNorm, fused (flash-attention's ``layer_norm_fn``, vLLM's ``fused_add_rms_norm``).

    c            = mask * rowscale / (1 - dropout_p)          (each factor 1 when absent; rowscale per row)
    residual_out = x * c + residual                           (the new residual stream, s)
    y            = norm(residual_out) * (weight + weight_offset) + bias
The parallel branch (flash-attention's x1, weight1, bias1: GPT-J / PaLM parallel blocks), each part optional:
    c1           = mask1 / (1 - dropout_p)                    (x1's own keep-mask; no rowscale)
    residual_out = x * c + x1 * c1 + residual
    y1           = norm(residual_out) * (weight1 + weight_offset) + bias1      (the same x_hat as y)

norm = ``layer_norm`` (mean removed, biased variance, eps inside the sqrt) or ``rms_norm`` (no mean
removed, eps inside the sqrt), over the trailing ``len(normalized_shape)`` axes (A); both as the plain
ops (refnorm/norms/layer_norm.py, rms_norm.py). ``mask`` (x.shape) is the dropout keep-mask, 0/1, given
(the reference draws nothing; a backend that draws its own, from a seed, returns it and is judged with it:
refnorm/check/masks.py); ``dropout_p`` in [0, 1) scales the kept values by 1/(1 - p) (inverted
dropout); a ``dropout_p`` > 0 without a mask is a ConfigError. ``rowscale`` has the leading shape
x.shape[:-k] (one factor per token: stochastic depth). ``residual`` (x.shape) is optional: without it
residual_out = x * c. ``weight``/``bias`` have shape normalized_shape, each optional; ``weight_offset``
1.0 is the zero-centred weight.

Outputs ``y`` and ``residual_out`` (x.shape), and ``y1`` (x.shape) when weight1 is given, all
differentiable. ``prenorm=True`` (default) is the call that returns the new residual to the model: its
cotangent ``dresidual_out`` flows back,
    dresidual = d norm / d s (dy) + dresidual_out,     dx = dresidual * c,
    drowscale = sum_A(dresidual * x * mask) / (1 - p),  dweight, dbias as the plain op (at s).
``prenorm=False``: residual_out is not returned to the model; the reference still gives its value (the
kernel saves it for the backward) and ignores a cotangent given for it. ``mask`` is a 0/1 sample, not
differentiable: its gradient is zeros (filling the evaluate contract; golden cases do not compare it).

Precision contract (``residual_in_fp32``). The reference is the exact function above in float64: the
option does not change one value it computes. It is a dtype contract the checker applies: with
``residual_in_fp32=True`` and a float16/bfloat16 case, residual_out is a float32 output (the exact sum
rounded once to float32, judged in float32); otherwise it is returned in the case dtype (the exact sum
rounded once to it). Either way ``y`` is the norm of the EXACT sum: a kernel holds the sum in its float32
accumulator and normalizes that; normalizing the sum after rounding it to float16/bfloat16 (adding "in
the activation dtype") loses the small branch on a mean-shifted residual stream and is a pitfall, not the
contract. The checker's declared ``epi_d`` contract (a few pointwise roundings to the case dtype) admits
the sum rounded to the residual dtype once, in the forward or the backward: flash-attention's prenorm
with a float16 residual (the forward normalizes the float32 sum, the backward recomputes x_hat from the
stored float16 residual) is judged against the gradient of the exact function under the default
``strict`` contract (it fails on mean-shifted rows), and passes only under a declared ``epi_d``; the
report names the contract applied. docs/tolerances.md section "Fused residual add".

Parallel branch (flash-attention's ``layer_norm_fn`` x1/weight1/bias1, followed where it asserts). ``x1``
(x.shape) is a second branch summed into the residual stream with its own keep-mask ``mask1`` (x.shape;
flash-attention draws a separate mask for x1) and the same ``dropout_p``; a ``dropout_p`` > 0 with x1 needs
mask1, and mask1 without x1 is a ConfigError. ``rowscale`` with x1 is a ConfigError (flash-attention
asserts "rowscale is not supported with parallel LayerNorm"). ``weight1``/``bias1`` (normalized_shape)
give the second output ``y1`` from the same x_hat; weight1 works with or without x1 (as in
flash-attention); ``weight_offset`` applies to weight1 too (flash-attention adds 1 to both with
zero_centered_weight). ``bias1`` without ``weight1`` is a ConfigError: y1 exists only when weight1 is
given (flash-attention silently ignores such a bias1 in the forward). Backward: the norm's backward is
linear in its cotangent, so y1's adds to y's,
    ds += d norm / d s (dy1; weight1),   dx1 = ds * c1,   dweight1 = sum dy1 * xhat,   dbias1 = sum dy1,
and dmask1 is zeros like dmask.

The arguments are checked in _add_norm_check.py (imported here and by the specification); the equations
are the specification's (refnorm/specs/add_norm.py, whole-array NumPy, which is fast enough: no separate
fast path).
"""
from __future__ import annotations

from ..spec import REQUIRED, NormSpec
from ..specs import add_norm as S
from ._add_norm_check import NAME, NORMS, check  # noqa: F401 (check: the argument checks, re-exported)


SPEC = NormSpec(
    name=NAME,
    summary="residual_out = x * mask * rowscale / (1 - p) + residual; y = layer_norm or rms_norm of residual_out",
    inputs=("x", "residual", "weight", "bias", "mask", "rowscale", "x1", "mask1", "weight1", "bias1"),
    required=("x",),
    outputs=("y", "residual_out", "y1"),
    options={"normalized_shape": REQUIRED, "norm": "layer_norm", "eps": 1e-5, "dropout_p": 0.0, "prenorm": True,
             "residual_in_fp32": False, "weight_offset": 0.0},
    forward=S.forward, backward=S.backward,
    differentiable=("y", "residual_out", "y1"), produced_by={"y1": "weight1"}, masks=("mask", "mask1"),
    drawn_masks={"mask": ("x", "dropout_p"), "mask1": ("x1", "dropout_p")},
)
