"""The correct arithmetic the three held-out blind kernels share (tests/planted/blind.py, blind2.py, blind3.py).

Each blind set was written from the previous one's conventions: a fused float32 kernel written in NumPy, inputs
upcast to float32 (float64 for a float64 case), two-pass statistics, each row summed pairwise, one rounding to
the output dtype at the end (round to nearest even). What the sets' correct kernels compute alike lives here,
once. Nothing here is a planted bug: every bug (its ``BUGS`` entry and every ``if self.bug == ...`` branch)
stays in its own set's file, where its author wrote it, and the sets stay held-out measurements.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from refnorm.check.backends.base import Contract

# norm_quant's quantized dtypes: name -> (NumPy dtype, lowest, highest)
QUANT = {"float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), -448.0, 448.0),
         "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), -57344.0, 57344.0),
         "int8": (np.dtype(np.int8), -128.0, 127.0)}
# norm_quant_block's element dtypes: name -> (NumPy dtype, qmax, emax)
STD_ELEMENTS = {
    "float8_e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), 448.0, 8),
    "float8_e5m2": (np.dtype(ml_dtypes.float8_e5m2), 57344.0, 15),
    "float4_e2m1fn": (np.dtype(ml_dtypes.float4_e2m1fn), 6.0, 2),
}
# norm_quant_block's formats: name -> (block size, element dtype, scale rule)
FORMAT_DEFAULTS = {"fp8_group": (128, "float8_e4m3fn", "exact"), "mxfp8": (32, "float8_e4m3fn", "floor"),
                   "nvfp4": (16, "float4_e2m1fn", "e4m3")}


def rsum(a):
    """Row sums of a 2-D array, keepdims (NumPy sums a contiguous row pairwise)."""
    return np.ascontiguousarray(a).sum(axis=1, keepdims=True)


def pow2(n):
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def np_dtype(dtype):
    """The NumPy dtype of a case dtype's name ("bfloat16" through ml_dtypes)."""
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def store(a, dtype):
    """One rounding to ``dtype`` (a name: the case dtype, "float32", ...), nearest even."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(a).astype(np_dtype(dtype))


def half(a, dtype):
    """``a`` rounded to a 16-bit ``dtype`` and back to its own dtype (unchanged for 32/64-bit cases)."""
    if dtype not in ("float16", "bfloat16"):
        return a
    return store(a, dtype).astype(a.dtype)


def normalized_shape(config):
    """The config's normalized_shape as a tuple."""
    ns = config["normalized_shape"]
    return (ns,) if isinstance(ns, int) else tuple(ns)


def eps_value(value, acc):
    """The configured eps in the compute dtype ``acc``; None: ``acc``'s machine epsilon."""
    return acc(np.finfo(acc).eps) if value is None else acc(value)


def sigmoids(z):
    """(sigmoid(z), 1 - sigmoid(z)) from e = exp(-|z|), without overflow or cancellation."""
    e = np.exp(-np.abs(z))
    big, small = 1 / (1 + e), e / (1 + e)
    return np.where(z >= 0, big, small), np.where(z >= 0, small, big)


def centred_dx(g, xhat, rstd):
    """rstd * (g - mean(g) - xhat * mean(g * xhat)) per row of 2-D arrays."""
    n = g.shape[1]
    return rstd * (g - rsum(g) / n - xhat * (rsum(g * xhat) / n))


def frexp_exp(v):
    """(m, e) with v = m 2^e, m in [0.5, 1), for v > 0 (float64 arithmetic on the float32 values)."""
    return np.frexp(np.where(v > 0, v, 1.0).astype(np.float64))


class BlindKernelBase:
    """The backend protocol of a blind kernel: ``bug`` is a key of the subclass's ``BUGS`` or None (correct);
    ``run`` computes in float32 (float64 for a float64 case) by the method ``_<op>``. A subclass sets ``BUGS``,
    ``OPS``, ``LABEL`` (its name: "blind", "blind2", ...) and ``options``."""

    BUGS: dict = {}
    OPS: tuple = ()
    LABEL = ""

    def __init__(self, bug=None):
        if bug is not None and bug not in self.BUGS:
            raise ValueError(f"unknown bug {bug!r}; expected None or one of {', '.join(self.BUGS)}")
        self.bug = bug
        self.name = self.LABEL if bug is None else f"{self.LABEL}:{bug}"

    def available(self):
        return None

    def supports(self, call):
        if call.op not in self.OPS:
            return f"{self.LABEL} kernel: {call.op} is not implemented (only {', '.join(self.OPS)})"
        return None

    def contract(self, call):
        return Contract("strict")

    def run(self, call):
        acc = np.float64 if call.dtype == "float64" else np.float32
        with np.errstate(all="ignore"):      # a planted bug may overflow or divide by zero: judged, not raised
            return getattr(self, "_" + call.op)(call, acc)
