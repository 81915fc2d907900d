"""Shared pieces of the reference core: option checks, axes, two-pass moments, the centred backward, and
the SPEC glue the modules share (affine_ctx / affine_backward, x_forward / x_backward, affine_grads).

Conventions used throughout refnorm:
* Everything is computed in float64. Statistics are two-pass (mean first, then the mean of squared
  deviations), never E[x^2] - E[x]^2. The deviations x - mean are re-centred (``centered``), so
  normalized values keep full float64 accuracy even when |mean| is 1e6 times the std, and a
  constant slice has exactly zero deviation and exactly zero variance.
* An empty reduction (a slice with no elements) gives mean 0 and variance NaN, as torch does.
* NaN or Inf in a slice makes that slice's statistics NaN (or Inf), so it reaches only the outputs
  and gradients of that slice.

Speed (docs/performance.md). layer_norm, rms_norm, group_norm, instance_norm and batch_norm (batch
statistics) run the arithmetic of ``centered_moments`` / ``centered_backward`` block by block
(``blocks``, ``run_blocks``, ``Grouped``): a block is a run of whole slices ("rows"), about
``BLOCK_BYTES`` of x, whose temporaries live in per-thread work buffers that stay in the CPU cache,
and the blocks are shared out over ``num_threads()`` threads (NumPy releases the GIL inside its
loops). Every row goes through the same operations in the same order as the unblocked formulas, so
outputs and x-gradients are bit-for-bit those of the plain NumPy expressions; only the parameter
gradients of layer_norm / rms_norm (sums over rows) are summed block by block, then over blocks
(more accurate than one running sum). The partition depends only on the shape, never on the thread
count, so every result is the same with any number of threads (REFNORM_NUM_THREADS=1: no threads).

Compiled row kernels (``native()``): where refnorm/norms/_fused.c was built at install, the row passes
of layer_norm, group_norm, instance_norm and batch_norm run as a few fused C loops per row instead of
~23 NumPy passes (rms_norm keeps NumPy's). They are an accelerator, not a second reference: the same
operations in the same order (NumPy's pairwise sums reproduced exactly), so the same bits, checked by
tests/test_fused.py. This NumPy code stays the definition; REFNORM_NATIVE=0 runs it.
"""
from __future__ import annotations

from typing import Callable

from ..spec import Backward, Forward

# the argument checks, the moments and the blocked row passes, one module each; the normalizer modules
# use them through this one (``from . import _common as C``)
from ._blocks import (BLOCK_BYTES, FUSED_BLOCK_BYTES, MAX_THREADS, Grouped, RowKernel, block_moments,  # noqa: F401
                      block_xhat, blocks, contiguous, flat, native, num_threads, one_thread, run_blocks, scratch,
                      shaped, sum_over_batch)
from ._checks import (check_channels, check_choice, check_eps, check_int, check_ndim, check_param,  # noqa: F401
                      check_real, check_state_pair, normalize_axes, normalized_shape)
from ._stats import (block_sum, centered, centered_backward, centered_moments, count, elementwise, mean,  # noqa: F401
                     moments, reduce_to)


def affine_grads(dx, dw, db, has_weight: bool, has_bias: bool) -> dict:
    """The gradients of an affine normalizer's backward: {"x": dx, "weight": dw, "bias": db}, without the
    entry of a parameter the call was not given (its contract: a gradient for each input given)."""
    grads = {"x": dx}
    if has_weight:
        grads["weight"] = dw
    if has_bias:
        grads["bias"] = db
    return grads


def affine_ctx(x, weight, bias, *saved, **options) -> tuple:
    """The ctx an affine normalizer's forward keeps for ``affine_backward``: x, the weight (or None), whether
    a bias was given, then the other arguments of the module's ``backward`` (positional ``saved``, keyword
    ``options``)."""
    return x, weight, bias is not None, saved, options


def affine_backward(backward: Callable) -> Callable:
    """``SPEC.backward`` of a normalizer of x with an optional weight and bias, from the module's
    ``backward(dy, x, weight, *saved, with_bias=..., **options) -> (dx, dweight or None, dbias or None)``
    and a forward ctx made by ``affine_ctx``: the gradients of the inputs given (``affine_grads``)."""
    def spec_backward(ctx, cot):
        x, weight, has_bias, saved, options = ctx
        dx, dw, db = backward(cot["y"], x, weight, *saved, with_bias=has_bias, **options)
        return Backward(affine_grads(dx, dw, db, weight is not None, has_bias))
    return spec_backward


def channel_affine(d, rstd, weight, bias, bcast):
    """y = d * rstd * weight + bias in that order, rstd (and the weight and bias when given) reshaped by
    ``bcast`` (the module's per-channel broadcast against x): batch_norm's and instance_norm's affine."""
    xhat = d * bcast(rstd)
    y = xhat if weight is None else xhat * bcast(weight)
    return y if bias is None else y + bcast(bias)


def channel_backward(dy, x, weight, mean, rstd, with_bias, own, axes, param_axes, bcast):
    """The plain backward of batch_norm and instance_norm (their module docstrings give the formulas):
    x_hat = (x - mean) rstd, g = dy weight; dx = rstd (g - mean(g) - x_hat mean(g x_hat)) over ``axes``
    when the call normalized by its ``own`` statistics (recentred here), else g rstd (running ones, constants);
    dweight = sum(dy x_hat), dbias = sum(dy) over ``param_axes``; ``bcast`` reshapes a statistic or
    parameter against x. Returns (dx, dweight or None, dbias or None)."""
    r = bcast(rstd)
    d = centered(x, axes)[1] if own else x - bcast(mean)
    xhat = d * r
    g = dy if weight is None else dy * bcast(weight)
    dx = centered_backward(g, xhat, r, axes) if own else g * r
    dweight = None if weight is None else reduce_to(dy * xhat, param_axes)
    dbias = reduce_to(dy, param_axes) if with_bias else None
    return dx, dweight, dbias


def running_forward(name: str, forward: Callable, own_stats: str) -> Callable:
    """``SPEC.forward`` of a normalizer with running statistics (batch_norm, instance_norm), from the module's
    ``forward(x, weight, bias, running_mean, running_var, num_batches_tracked, training=..., **config,
    _centre=[]) -> (y, mean, rstd, new_state, used_own)``: outputs y, mean, rstd, the new state, and the
    ``affine_backward`` ctx whose keyword ``own_stats`` says whether the call normalized by its own
    statistics (then the backward differentiates through them) or by the running ones."""
    def spec_forward(inputs, config, state, training):
        x, w, b = inputs["x"], inputs.get("weight"), inputs.get("bias")
        check_state_pair(name, state)
        centre = []
        y, mean, rstd, new_state, own = forward(
            x, w, b, state.get("running_mean"), state.get("running_var"), state.get("num_batches_tracked", 0),
            training=training, **config, _centre=centre)
        return Forward({"y": y, "mean": mean, "rstd": rstd}, new_state,
                       affine_ctx(x, w, b, mean, rstd, centre=centre or None, **{own_stats: own}))
    return spec_forward


def x_forward(forward: Callable, stat: str) -> Callable:
    """``SPEC.forward`` of a normalizer whose only input is x, from the module's ``forward(x, **config) ->
    (y, s)``, s the one statistic its backward needs (output ``stat``); the ctx is ``x_backward``'s, for
    ``backward(dy, x, s, **config)``."""
    def spec_forward(inputs, config, state, training):
        x = inputs["x"]
        y, s = forward(x, **config)
        return Forward({"y": y, stat: s}, {}, ((x, s), dict(config)))
    return spec_forward


def x_backward(backward: Callable) -> Callable:
    """``SPEC.backward`` of a normalizer whose only input is x, from the module's
    ``backward(dy, *saved, **options) -> dx`` and a forward ctx ``(saved, options)``."""
    def spec_backward(ctx, cot):
        saved, options = ctx
        return Backward({"x": backward(cot["y"], *saved, **options)})
    return spec_backward
