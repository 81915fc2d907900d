"""Pitfall variants of group_norm (refnorm.norms.group_norm with one change each).

Shared centred-statistics variants (_centered.common, see layer_norm). Own:

* F05 (torch #140913, inferred): dweight reduced from a channels-last (NHWC) product buffer read with
  NCHW indexing.
* F06 (torch PR #92671, inferred): backward with dy's channels-last memory read with x's indexing.
* F14 (torch PR #178872): wave64 WarpReduceSum: dgamma/dbeta of channel c also sums channel c + 32
  (N > 128, C > 32).
* F15 (Liger #1375): backward with hidden_size = dY.shape[-1]: the means, dweight and dbias over the
  first row (W values) of each channel instead of all H*W (4-D/5-D inputs).
* H05 (torch #75862): GroupNorm(1, C) computed as LayerNorm over C at every position (y, dx, dweight,
  dbias; its statistics have another shape and are not compared).
* H06 (torch #22617): normalizing with the unbiased variance.
* R-axes: dweight, dbias summed over the batch axis but averaged over the spatial axes.
"""
from __future__ import annotations

import numpy as np

from . import Variant as V
from ._centered import common
from ._engine import Mods
from ._rounding import truncate_out

OP = "group_norm"


def _grads_4d(c, t, i, s, cot):
    return bool(cot) and np.ndim(i["x"]) > 2


def _params(c, t, i, s, cot):
    return bool(cot) and (i.get("weight") is not None or i.get("bias") is not None)


VARIANTS = tuple(common(OP, V, skip=("ddof1",))) + (
    V("gn_dgamma_layout", ("F05",), "dweight reduced from an NHWC buffer read with NCHW indexing", OP,
      Mods(dweight_nhwc=True), when=lambda c, t, i, s, cot: _grads_4d(c, t, i, s, cot) and i.get("weight") is not None),
    V("dy_layout", ("F06",), "dy's channels-last memory read with x's (NCHW) indexing", OP, Mods(dy_nhwc=True),
      when=_grads_4d),
    V("gn_wave64", ("F14",), "dgamma/dbeta of channel c also sum channel c + 32 (wave64 reduce)", OP,
      Mods(wave64=True), when=lambda c, t, i, s, cot: _params(c, t, i, s, cot) and np.shape(i["x"])[0] > 128
      and np.shape(i["x"])[1] > 32),
    V("gn_bwd_W", ("F15",), "backward over W values per channel where H*W belong", OP, Mods(bwd_first_row=True),
      when=lambda c, t, i, s, cot: bool(cot) and np.ndim(i["x"]) >= 4),
    V("gn1_as_ln", ("H05",), "GroupNorm(1, C) computed as LayerNorm over C at every position", OP,
      Mods(gn1_as_ln=True), when=lambda c, *a: int(c["num_groups"]) == 1 and np.ndim(a[1]["x"]) > 2),
    V("gn_unbiased", ("H06",), "normalized with the unbiased variance (n - 1)", OP, Mods(unbiased=True)),
    V("param_mean_spatial", ("R-axes",), "dweight, dbias averaged (not summed) over the spatial axes", OP,
      Mods(param_mean_spatial=True), when=lambda c, t, i, s, cot: _params(c, t, i, s, cot) and np.ndim(i["x"]) > 2),
    truncate_out(OP),
)
