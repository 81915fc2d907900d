"""A complete refnorm backend in plain NumPy: layer_norm and rms_norm, forward and backward.

It is the kind of kernel a user brings: float32 internals (float64 for float64 inputs), two-pass
statistics, one rounding to the input dtype at the end. Everything else is declined by
``supports``, and the checker reports those cases as skipped with the reason.

    refnorm check --backend examples.tiny_backend:TinyBackend --ops layer_norm rms_norm

The protocol (refnorm/check/backends/base.py): ``name``; ``available()`` -> None or why not;
``supports(call)`` -> None or why not; ``contract(call)`` -> the precision it promises;
``run(call)`` -> ``Returned(outputs, grads, state)``. Arrays in and out are NumPy arrays.
"""
from __future__ import annotations

import numpy as np

from refnorm.check import Contract, Returned


class TinyBackend:
    name = "tiny"

    def available(self):
        return None                                     # nothing to install, no device to find

    def supports(self, call):
        if call.op not in ("layer_norm", "rms_norm"):
            return f"tiny backend: {call.op} is not implemented (only layer_norm and rms_norm)"
        if call.config.get("eps_placement", "inside") != "inside":
            return "tiny backend: rms_norm with eps outside the square root is not implemented"
        return None

    def contract(self, call):
        return Contract("strict", "block")              # float32 internals, one final rounding

    def run(self, call):
        acc = np.float64 if call.dtype == "float64" else np.float32
        out_dtype = call.inputs["x"].dtype
        ns = call.config["normalized_shape"]
        k = 1 if isinstance(ns, int) else len(ns)
        axes = tuple(range(-k, 0))                      # the normalized (trailing) axes
        lead = tuple(range(call.inputs["x"].ndim - k))  # parameter gradients sum over these
        x = call.inputs["x"].astype(acc)
        w = call.inputs.get("weight")
        w = None if w is None else w.astype(acc) + acc(call.config.get("weight_offset", 0.0))
        b = call.inputs.get("bias")
        eps = call.config.get("eps")
        eps = acc(np.finfo(acc).eps if eps is None else eps)   # eps=None: the eps of the compute dtype (torch's)

        if call.op == "layer_norm":
            mean = x.mean(axis=axes, keepdims=True)
            xc = x - mean
            rstd = 1 / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)
        else:
            mean = None
            rstd = 1 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
            xc = x
        xhat = xc * rstd
        y = xhat if w is None else xhat * w
        if b is not None:
            y = y + b.astype(acc)
        outputs = {"y": y, "rstd": rstd} if mean is None else {"y": y, "mean": mean, "rstd": rstd}

        grads = {}
        if "y" in call.cotangents:
            dy = call.cotangents["y"].astype(acc)
            g = dy if w is None else dy * w
            proj = (g * xhat).mean(axis=axes, keepdims=True)
            centre = g.mean(axis=axes, keepdims=True) if call.op == "layer_norm" else 0
            grads["x"] = rstd * (g - centre - xhat * proj)
            if w is not None:
                grads["weight"] = (dy * xhat).sum(axis=lead)
            if b is not None:
                grads["bias"] = dy.sum(axis=lead)
        # y and the gradients in the input dtype (beyond its range, inf is the correct rounding);
        # the statistics stay in float32, as torch returns them
        with np.errstate(over="ignore"):
            return Returned({k: v if k in ("mean", "rstd") else v.astype(out_dtype) for k, v in outputs.items()},
                            {k: v.astype(out_dtype) for k, v in grads.items()})
