"""Pitfall variants of norm_quant_block (refnorm.norms.norm_quant_block with one change each; forward only).

* R-bq-prenorm: the block scales (and amax) from the pre-norm value s = x (+ residual), not from the norm's
  output y: a kernel that reads its amax from the input tile before normalizing it.
* R-bq-round: the exponent of a power-of-two scale rounded DOWN (floor) where the rule promises round-up
  (MXFP8 round_up, the fp8_group pow2 scale): the block's largest values saturate.
* R-bq-drop: the partial last block dropped: its q left 0 and its scale that of an empty block.
* R-bq-pad: the partial last block padded wrongly: its amax taken over a full block of B values, the missing
  ones read on into the next row (the last row reads zeros), as an unmasked vector load does.
* R-bq-240: the float8 e4m3 maximum taken as 240 (e4m3fnuz's / an IEEE-style e4m3's) instead of 448: the scales
  amax / 240 (NVFP4: 240 * 6 / g), every q at most 240.
* R-bq-global: NVFP4 without its tensor scale: S_enc = 1, the E4M3 block scale amax / 6 itself (it saturates
  at 448 and underflows to 0 where the block's amax is small), tensor_scale 1.
"""
from __future__ import annotations

import numpy as np

from ..norms import norm_quant_block as NB
from ..spec import Result
from . import Variant as V

OP = "norm_quant_block"


def _parts(inputs, config):
    """(s, y, resolved config, H) of one call."""
    x, r, w, b = inputs["x"], inputs.get("residual"), inputs.get("weight"), inputs.get("bias")
    c, H, eps = NB.check(x, r, w, b, {**NB.SPEC.options, **config}, inputs.get("global_scale"))
    s = x if r is None else x + r
    return s, NB.norm_of(s, w, b, c, H, eps), c, H


def _result(q, scale, amax, ts, s, inputs):
    out = {"q": q, "scale": scale, "amax": amax, "tensor_scale": ts}
    if inputs.get("residual") is not None:
        out["residual_out"] = s
    return Result(out)


def _from_amax(y, amax, c, qm=None, enc=None):
    """(q, v) from the blocks of y with the given per-block amax (the scale rules of the reference)."""
    v, S, _ = NB.block_scales(amax, c, enc)
    q = NB.divide_clip(NB.blocked(y, c["block_size"]), S[..., None], NB.qmax(c["element_dtype"]) if qm is None
                       else qm)
    return q.reshape(y.shape[:-1] + (-1,))[..., :y.shape[-1]], v


def scale_from_prenorm(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    amax = np.max(np.abs(NB.blocked(s, c["block_size"])), axis=-1, initial=0.0)    # of s, not of y
    enc = NB.tensor_encode(amax, c, inputs.get("global_scale"))
    q, v = _from_amax(y, amax, c, enc=enc)
    return _result(q, v, amax, np.full((1,) * y.ndim, 1.0 if enc is None else 1.0 / enc), s, inputs)


def exponent_rounded_down(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    q, v, amax, ts = NB.quantized(y, c)
    lo, hi = NB.E8M0_EXP if c["format"] == "mxfp8" else NB.F32_POW2_EXP
    S = NB.pow2_floor(v, lo, hi)                                           # floor where the rule rounds up
    if c["format"] == "fp8_group":
        S = np.where(v == 0, 0.0, S)
    qb = NB.divide_clip(NB.blocked(y, c["block_size"]), S[..., None], NB.qmax(c["element_dtype"]))
    # the scale returned is the floor's power of two (its pre-rounding value is what the backend rounds)
    return _result(qb.reshape(y.shape[:-1] + (-1,))[..., :H], S, amax, ts, s, inputs)


def partial_block_dropped(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    full = (H // c["block_size"]) * c["block_size"]
    y0 = np.concatenate([y[..., :full], np.zeros(y.shape[:-1] + (H - full,))], axis=-1)   # the tail never read
    q, v, amax, ts = NB.quantized(y0, c, inputs.get("global_scale"))
    return _result(q, v, amax, ts, s, inputs)


def partial_block_misread(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    B = c["block_size"]
    nb = NB.num_blocks(H, B)
    flat = np.concatenate([y.reshape(-1), np.zeros(nb * B)])                 # rows back to back, then zeros
    rows = y.reshape(-1, H)
    amax = np.max(np.abs(NB.blocked(rows, B)), axis=-1, initial=0.0)        # (rows, nb)
    start = np.arange(rows.shape[0]) * H + (nb - 1) * B
    last = np.abs(flat[start[:, None] + np.arange(B)]).max(axis=-1, initial=0.0)   # B values, on into the next row
    amax[:, -1] = last
    amax = amax.reshape(y.shape[:-1] + (nb,))
    enc = NB.tensor_encode(amax, c, inputs.get("global_scale"))
    q, v = _from_amax(y, amax, c, enc=enc)
    return _result(q, v, amax, np.full((1,) * y.ndim, 1.0 if enc is None else 1.0 / enc), s, inputs)


def e4m3_max_240(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    yb = NB.blocked(y, c["block_size"])
    amax = np.max(np.abs(yb), axis=-1, initial=0.0)
    if c["format"] == "nvfp4":                          # the block scale's e4m3: 240 * 6 / g, saturating at 240
        g = np.max(amax, initial=0.0)
        enc = 1.0 if g == 0 else 240.0 * 6.0 / g
        if inputs.get("global_scale") is not None:                  # a static encode scale: given
            enc = NB.tensor_encode(amax, c, inputs["global_scale"])
        v = amax / 6.0 * enc
        S = np.clip(NB.round_e4m3(v), 0, 240.0) / enc
        qm, ts = 6.0, 1.0 / enc
    else:
        qm = 240.0
        v = np.maximum(amax / qm, c["min_scale"]) if c["format"] == "fp8_group" else amax / qm
        if c["format"] == "mxfp8" and c["scale_rule"] == "floor":
            v = amax / 2.0 ** 7                                              # 240 = 1.875 * 2^7: emax 7
        S = v if (c["format"], c["scale_rule"]) == ("fp8_group", "exact") else (
            NB.pow2_ceil(v, *NB.F32_POW2_EXP, zero=0.0) if c["format"] == "fp8_group" else
            NB.pow2_floor(v, *NB.E8M0_EXP) if c["scale_rule"] == "floor" else NB.pow2_ceil(v, *NB.E8M0_EXP))
        ts = 1.0
    q = NB.divide_clip(yb, S[..., None], qm).reshape(y.shape[:-1] + (-1,))[..., :H]
    return _result(q, v, amax, np.full((1,) * y.ndim, ts), s, inputs)


def nvfp4_no_tensor_scale(inputs, config, cot, dtype, state, training):
    s, y, c, H = _parts(inputs, config)
    yb = NB.blocked(y, c["block_size"])
    amax = np.max(np.abs(yb), axis=-1, initial=0.0)
    v = amax / 6.0                                                           # S_enc = 1
    q = NB.divide_clip(yb, NB.round_e4m3(v)[..., None], 6.0).reshape(y.shape[:-1] + (-1,))[..., :H]
    return _result(q, v, amax, np.ones((1,) * y.ndim), s, inputs)


def _fmt(*fmts):
    return lambda c, t, i, s, cot: NB.resolve(c)["format"] in fmts


def _rounds_up(c, t, i, s, cot):
    r = NB.resolve(c)
    return (r["format"], r["scale_rule"]) in (("mxfp8", "round_up"), ("fp8_group", "pow2"))


def _partial(c, t, i, s, cot):
    r = NB.resolve(c)
    return i["x"].shape[-1] % r["block_size"] != 0


def _e4m3(c, t, i, s, cot):
    r = NB.resolve(c)
    return r["element_dtype"] == "float8_e4m3fn" or r["format"] == "nvfp4"


VARIANTS = (
    V("block_scale_from_prenorm", ("R-bq-prenorm",), "the block scales from the pre-norm value x (+ residual), not "
      "from the norm's output", OP, fn=scale_from_prenorm),
    V("scale_exponent_rounded_down", ("R-bq-round",), "the power-of-two scale's exponent rounded down (floor) where "
      "the rule promises round-up: the block's largest values saturate", OP, fn=exponent_rounded_down,
      when=_rounds_up),
    V("partial_block_dropped", ("R-bq-drop",), "the partial last block dropped (its q 0, its scale an empty "
      "block's)", OP, fn=partial_block_dropped, when=_partial),
    V("partial_block_misread", ("R-bq-pad",), "the partial last block's amax over a full block, read on into the "
      "next row", OP, fn=partial_block_misread, when=_partial),
    V("e4m3_max_240", ("R-bq-240",), "the float8 e4m3 maximum taken as 240 instead of 448", OP, fn=e4m3_max_240,
      when=_e4m3),
    V("nvfp4_no_tensor_scale", ("R-bq-global",), "NVFP4 without its float32 tensor scale: the E4M3 block scale "
      "amax / 6 itself", OP, fn=nvfp4_no_tensor_scale, when=_fmt("nvfp4")),
)
