"""Pitfall variants of layer_norm (refnorm.norms.layer_norm with one change each).

Shared centred-statistics variants (_centered.common): A01/A02, A03, A05-A09 one-pass variance,
A10 padded lanes / power-of-two divisor, A12 Welford lanes (not A11's serial sums: no golden
layer_norm case tells them from the reference within the bound), B04/B05 eps in d,
B06 eps floor, B07 eps squared, C01 squares in d, C02 variance in d, C06/C09 statistics in d, C08,
C10 dweight in d, R-rstd16, R-noB. Own:

* D06 (torch #69208): gamma and beta assumed to come as a pair, so with bias=None the weight is not
  applied in the forward (dweight still reported as the reference's).
* F09 (apex #411): the row index limited by the grid dimension: rows >= 65536 repeat row r mod 65536.
* F13 (torch #183861): dweight/dbias partial sums with warp size 64 on 32-wide hardware: each 64-row
  tile contributes only its first 32 rows.
* G01 (tritonbench PR #1266): the Triton tutorial's backward without the barrier before the lock
  release: one partial dW/dB update lost per buffer. Rows are spread over GROUP_SIZE_M buffers (256 if
  n <= 1024, 128 if n <= 4096, 96 if n <= 8192, else 64, as the tutorial); the first holder's partial
  (row r < GROUP_SIZE_M, when a row r + GROUP_SIZE_M exists) is the one overwritten.
* H10 (transformers #14772): "LayerNorm" that does not subtract the mean (T5LayerNorm): rms_norm's
  equation with layer_norm's eps, weight and bias.
"""
from __future__ import annotations

import numpy as np

from . import Variant as V
from ._centered import common
from ._engine import Mods
from ._rounding import truncate_out


def _no_bias_with_w(c, t, i, s, cot):
    return i.get("weight") is not None and i.get("bias") is None


def _lost_partial(m, n):
    """G01's rows that reach dweight/dbias (see the module docstring)."""
    group = 256 if n <= 1024 else 128 if n <= 4096 else 96 if n <= 8192 else 64
    r = np.arange(m)
    return ~((r < group) & (r + group < m))


def _rows(c, t, i, s, cot):
    ns = c["normalized_shape"]
    k = 1 if np.ndim(ns) == 0 else len(ns)
    x = np.shape(i["x"])
    return int(np.prod(x[:len(x) - k], dtype=np.int64))


VARIANTS = tuple(common("layer_norm", V, skip=("serial_acc",))) + (
    V("no_bias_drops_weight", ("D06",), "weight not applied when bias is None (affine assumed in pairs)",
      "layer_norm", Mods(drop_weight_without_bias=True), when=_no_bias_with_w),
    V("row_index_2_16", ("F09",), "rows >= 65536 repeat row r mod 65536 (row index limited to 2^16)",
      "layer_norm", Mods(repeat_rows=65536), when=lambda *a: _rows(*a) > 65536),
    V("dgamma_warp32", ("F13",), "dweight/dbias: each 64-row tile sums only its first 32 rows", "layer_norm",
      Mods(rows_mask=lambda m, n: (np.arange(m) % 64) < 32), when=lambda c, t, i, s, cot: bool(cot) and _rows(
          c, t, i, s, cot) > 32 and (i.get("weight") is not None or i.get("bias") is not None)),
    V("lost_partial", ("G01",), "one partial dweight/dbias update lost per buffer (missing barrier)",
      "layer_norm", Mods(rows_mask=_lost_partial), when=lambda c, t, i, s, cot: bool(cot) and (
          i.get("weight") is not None or i.get("bias") is not None)),
    V("ln_as_rms", ("H10",), "layer_norm computed as rms_norm (the mean not subtracted)", "layer_norm",
      Mods(centered=False)),
    truncate_out("layer_norm"),
)
