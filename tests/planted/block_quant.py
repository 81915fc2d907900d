"""Planted pitfalls of norm_quant_block (issue 36): a backend that computes one pitfall variant of
refnorm/pitfalls/norm_quant_block.py on the calls it applies to (the reference elsewhere), its outputs rounded
as a kernel stores them (q to the element dtype, the scales by their rule: float32, a power of two rounded
up, E8M0, E4M3; amax and tensor_scale to float32; residual_out to the case dtype). The emulated kernel of
emulated.py does not cover this op: the variant IS the planted kernel here.

``PLANTED``: (pitfall id, variant id, what the kernel does wrong). tests/test_norm_quant_block.py runs each
on every golden case of the op: it must fail at least two cases and be named on every failure.
"""
from __future__ import annotations

import numpy as np

from refnorm import registry
from refnorm.check.backends.base import Contract, Returned
from refnorm.check.precision import NP, quantize_to, round_to

OP = "norm_quant_block"
PLANTED = (
    ("R-bq-prenorm", "block_scale_from_prenorm", "the block scale computed from the pre-norm value"),
    ("R-bq-round", "scale_exponent_rounded_down", "E8M0 (and the pow2 group scale) rounded down where the kernel "
                                                  "promises round-up"),
    ("R-bq-drop", "partial_block_dropped", "the partial last block dropped"),
    ("R-bq-pad", "partial_block_misread", "the partial last block padded wrongly (read on into the next row)"),
    ("R-bq-240", "e4m3_max_240", "the fp8 e4m3 max taken as 240 instead of 448"),
    ("R-bq-global", "nvfp4_no_tensor_scale", "the NVFP4 global (tensor) scale missing"),
)


def _f64(d):
    return {k: np.asarray(v, dtype=np.float64) for k, v in d.items()}


def stored(op, outputs, config, dtype):
    """The float64 ``outputs`` rounded as a kernel returns them (module docstring)."""
    dts = registry.get(op).output_dtypes(config, dtype)
    out = {}
    for k, a in outputs.items():
        t = dts.get(k, dtype)
        out[k] = quantize_to(a, t) if t not in NP else round_to(np.asarray(a, dtype=np.float64), t)
    return out


class VariantKernel:
    """A backend computing ``variant`` where it applies, the reference elsewhere (None: always the reference)."""

    def __init__(self, variant=None):
        self.variant = variant
        self.name = f"planted-{variant.id}" if variant else "planted-none"

    def available(self):
        return None

    def supports(self, call):
        return None if call.op == OP else f"only {OP}"

    def contract(self, call):
        return Contract("strict", "block")

    def run(self, call):
        x = _f64(call.inputs)
        v = self.variant
        if v is not None and v.applies(call.config, call.training, x, {}, {}, call.dtype):
            r = v.evaluate(x, call.config, {}, call.training, {}, call.dtype)
        else:
            r = registry.evaluate(call.op, x, config=call.config)
        return Returned(stored(call.op, r.outputs, call.config, call.dtype), {}, {})
