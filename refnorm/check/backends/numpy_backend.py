"""The ``numpy`` backend: refnorm's own float64 reference, each result rounded once to the case dtype.

It is the checker's control: under the ``exact`` contract it must pass every golden case (a failure
would mean the golden data and the installed reference disagree). Supports every op and dtype.
"""
from __future__ import annotations

import numpy as np

from ... import registry
from ..bounds import array_dtypes
from ..precision import NP, quantize_to, round_to
from .base import Call, Contract, Returned


def _round(a, dtype):
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.copy()
    if dtype not in NP:                  # a quantized dtype (norm_quant's q): saturate, round by the grid's rule
        return quantize_to(a, dtype)
    return round_to(a, dtype)        # correctly rounded (ml_dtypes' float64 -> bfloat16 cast rounds twice)


class NumpyBackend:
    name = "numpy"

    def available(self):
        return None

    def supports(self, call):
        return None if call.op in registry.names() else f"unknown op {call.op!r}"

    def contract(self, call):
        return Contract("exact", "tree")

    def run(self, call: Call) -> Returned:
        spec = registry.get(call.op)
        cot = {k: v for k, v in call.cotangents.items()} or None
        state = {k: (np.asarray(v) if np.asarray(v).dtype.kind in "iu" else np.asarray(v, dtype=np.float64))
                 for k, v in call.state.items()}
        res = registry.evaluate(call.op, {k: np.asarray(v, dtype=np.float64) for k, v in call.inputs.items()},
                                config=registry.resolve_options(call.op, call.config, call.dtype),  # eps=None
                                grad_outputs=cot, state=state, training=call.training)
        d = call.dtype
        dts = {} if spec.output_dtypes is None else dict(spec.output_dtypes(call.config, d))
        # an output the contract returns in another dtype (add_norm's float32 residual_out) is rounded to that
        dts.update({k: t for (part, k), t in array_dtypes(call.op, call.config, d).items() if part == "outputs"})
        return Returned({k: _round(v, dts.get(k, d)) for k, v in res.outputs.items()},
                        {k: _round(v, d) for k, v in res.grads.items()} if cot else {},
                        {k: _round(v, d) for k, v in res.state.items()} if spec.state else {})
