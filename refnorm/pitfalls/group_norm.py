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
* R-gnstride: groups over channels c % G (a channels-last kernel's grouping, as group_norm_silu's variant).
* R-gnaffine: weight and bias indexed by the group, not the channel (their gradients summed per group).
"""
from __future__ import annotations

import numpy as np

from . import _engine
from . import Variant as V
from ..spec import Result
from ._centered import common
from ._engine import Mods
from ._rounding import truncate_out

OP = "group_norm"


def _grads_4d(c, t, i, s, cot):
    return bool(cot) and np.ndim(i["x"]) > 2


def _params(c, t, i, s, cot):
    return bool(cot) and (i.get("weight") is not None or i.get("bias") is not None)


def _permuted(perm, inputs, config, cot, dtype, state, training):
    """The reference on x's channels permuted by ``perm`` (weight and bias with them), results permuted back;
    mean and rstd: the statistics of the permuted groups."""
    inv = np.argsort(perm)
    take = lambda a: None if a is None else np.asarray(a, dtype=np.float64)[:, perm]      # noqa: E731
    ins = {"x": take(inputs["x"])}
    for k in ("weight", "bias"):
        if inputs.get(k) is not None:
            ins[k] = np.asarray(inputs[k], dtype=np.float64)[perm]
    dy = (cot or {}).get("y")
    r = _engine.group_norm(ins, config, {} if dy is None else {"y": take(dy)}, dtype, Mods(), state, training)
    outs = {"y": r.outputs["y"][:, inv], "mean": r.outputs["mean"], "rstd": r.outputs["rstd"]}
    return Result(outs, {k: (v[:, inv] if k == "x" else v[inv]) for k, v in r.grads.items()}, {})


def _strided_groups(inputs, config, cot, dtype, state, training):
    """Groups over channels c % G == g (an (N, C/G, G, *) view where (N, G, C/G, *) belongs)."""
    C, G = np.shape(inputs["x"])[1], int(config["num_groups"])
    return _permuted(np.arange(C).reshape(C // G, G).T.reshape(-1), inputs, config, cot, dtype, state, training)


def _per_group_affine(inputs, config, cot, dtype, state, training):
    """weight and bias indexed by the channel's group (weight[c // (C/G)]) where they are per channel; their
    gradients summed into those G entries (the others zero)."""
    x = np.asarray(inputs["x"], dtype=np.float64)
    C, G = x.shape[1], int(config["num_groups"])
    idx = np.arange(C) // (C // G)
    ins = dict(inputs)
    for k in ("weight", "bias"):
        if inputs.get(k) is not None:
            ins[k] = np.asarray(inputs[k], dtype=np.float64)[idx]
    r = _engine.group_norm(ins, config, cot or {}, dtype, Mods(), state, training)
    grads = dict(r.grads)
    for k in ("weight", "bias"):
        if k in grads:
            gsum = np.zeros(C)
            np.add.at(gsum, idx, grads[k])
            grads[k] = gsum
    return Result(r.outputs, grads, {})


def _groups_differ(c, t, i, s, cot):
    G, C = int(c["num_groups"]), np.shape(i["x"])[1]
    return 1 < G < C


def _group_params(c, t, i, s, cot):
    G, C = int(c["num_groups"]), np.shape(i["x"])[1]
    return G < C and (i.get("weight") is not None or i.get("bias") is not None)


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
    V("gn_strided_groups", ("R-gnstride",), "groups over the wrong channel order: group g holds the channels "
      "c % G == g (an (N, C/G, G, *) view) instead of C/G consecutive channels", OP, fn=_strided_groups,
      when=_groups_differ),
    V("gn_per_group_affine", ("R-gnaffine",), "weight and bias indexed per group (weight[c // (C/G)]) where they "
      "are per channel", OP, fn=_per_group_affine, when=_group_params),
    truncate_out(OP),
)
