"""Pitfall variants of offline_batch_norm: batch_norm's (refnorm/pitfalls/batch_norm.py), on the call read
as batch_norm's.

offline_batch_norm is batch_norm in the offline framework's terms (refnorm/norms/offline_batch_norm.py;
tests/norms/test_offline.py: equal in both modes, outputs, gradients and running statistics) with the torch
convention (momentum weighs the new value, running_var unbiased); its state calls num_batches_tracked
``iters`` (shape (1,)) and it has one more output, r (the gradient-compensation factor, exactly 1). Each
variant here is a batch_norm variant evaluated on the call translated to batch_norm (config: momentum,
eps, convention torch; state: iters -> num_batches_tracked), its result translated back (r = 1). Left
out: E03 (onnx_bessel: the ONNX convention, which offline_batch_norm does not have) and A11 (serial_acc:
no golden offline_batch_norm case, the largest 5x3x12, tells serial sums from the reference within the
bound, tests/test_pitfalls.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..spec import Result
from . import batch_norm as BN

OP = "offline_batch_norm"


def _config(c):
    return {"momentum": c.get("momentum", 0.1), "eps": c.get("eps", 1e-5), "convention": "torch"}


def _state(s):
    """batch_norm's state from offline_batch_norm's (num_batches_tracked a scalar, as batch_norm's)."""
    out = {k: v for k, v in (s or {}).items() if k != "iters"}
    if (s or {}).get("iters") is not None:
        out["num_batches_tracked"] = np.asarray(s["iters"]).reshape(())
    return out


def _back(res, state):
    st = {k: v for k, v in res.state.items() if k != "num_batches_tracked"}
    if "num_batches_tracked" in res.state:
        st["iters"] = np.asarray(res.state["num_batches_tracked"]).reshape(np.shape(state.get("iters", [0])))
    rstd = res.outputs.get("rstd")
    outs = {**res.outputs, **({} if rstd is None else {"r": np.ones(np.shape(rstd))})}
    return Result(outs, res.grads, st)


def _wrap(v):
    def fn(inputs, config, cot, dtype, state, training, mods=None):
        return _back(v.evaluate(inputs, _config(config), _state(state), training, cot, dtype, mods=mods), state or {})
    when = None if v.when is None else (
        lambda c, t, i, s, cot: v.when(_config(c), t, i, _state(s), cot))
    return replace(v, op=OP, fn=fn, when=when)


VARIANTS = tuple(_wrap(v) for v in BN.VARIANTS if v.id not in ("onnx_bessel", "serial_acc"))
