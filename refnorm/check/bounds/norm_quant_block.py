"""Bounds for norm_quant_block (docs/block_quant.md, "Bounds"): norm_quant's quantized-output rule
(bounds/norm_quant.py) extended to block scales that are themselves rounded by their own rule.

u: the unit roundoff of the accumulation dtype; E_y: the bound on y (per element) of the norm
(standardize: layer_norm / rms_norm), or of add_norm's y with a residual (the sum's rounding carried
through the norm: bounds/add_norm.py, which also gives E_residual_out).

Per block j (values y_j, the padded lanes of a partial last block are zeros with E_y = 0):
    E_amax = max_j E_y                        (|max|y_b| - max|y|| <= max |y_b - y|: the max is exact)
    v, E_v: the pre-rounding scale of the rule and its bound:
      fp8_group   v = max(amax / qmax, min_scale)   E_v = E_amax / qmax + 3u (v + E_amax / qmax)
                  (amax / qmax or amax * fl(1/qmax): two roundings, 2u + u^2 <= 3u; max(., min_scale)
                  is 1-Lipschitz)
      mxfp8 floor v = amax / 2^emax                 E_v = E_amax / 2^emax + u v  (an exponent read off
                  amax: exact; u of slack)
      mxfp8 up    v = amax / qmax                   E_v as fp8_group
      nvfp4       v = 448 amax / g  (g the tensor's amax, E_g = max E_amax over the tensor)
                  E_v = 448 (E_amax g + amax E_g) / (g (g - E_g)) + 4u (v + that)   (2688 / g, the product
                  with fl(1/6) and with S_enc: four roundings); g <= E_g: no bound
                  tensor_scale ts = g / 2688, E_ts = E_g / 2688 + 3u (ts + E_g / 2688)
      nvfp4 static  v = amax S_enc / 6 (S_enc the input global_scale, exact)  E_v = E_amax S_enc / 6 + 3u (v + that);
                  E_ts = u ts (its reciprocal), the decode scale's range from the block scale's alone
    The backend's scale must be its rule's rounding of some value within E_v of v (the judge's directed
    or nearest interval test with bound E_v); so its decode scale D' lies in [D_lo, D_hi]:
      D_lo = rule(v - E_v), D_hi = rule(v + E_v)  (every rule is monotone; exact: the values themselves;
      nvfp4: times ts -+ E_ts, the kernel's own tensor scale)
    q's bound, per element, over every admissible D' (the reference uses D = rule(v)):
      E_q = max(|clip(y / D_lo) - q|, |clip(y / D_hi) - q|)      the spread of the admissible scales
          + E_y / D_pos + 3u (|y| / D_pos + E_y / D_pos)          y's error at the smallest positive one
                                                                  (the division or the reciprocal and the
                                                                  product, rounded)
      (y / 0 taken as 0: a zero scale gives q = 0. Every admissible scale 0 (an NVFP4 block scale that
      rounds to 0 wherever v may lie): q = 0 exactly, E_q = 0. A continuous scale range reaching 0 (exact
      fp8_group, v <= E_v): E_q = inf unless y and E_y are 0.) The spread is 0 wherever the scale is
      unambiguous (v not within E_v of a rounding boundary of its rule): a one-step-off scale is accepted only
      where it is not, and there q may be the one computed with any admissible scale (q is not paired with
      the returned scale).
q is judged in its element dtype by the rounding-interval test (one element step off only within E_q of
an element rounding boundary or of the saturation point).
"""
from __future__ import annotations

import numpy as np

from ...norms import norm_quant_block as NB
from . import standardize as S


def _norm_bound(x, res, w, b, c, H, eps, u, red, contract, dt):
    """(E_y, E_residual_out or None) of the norm (of x + residual)."""
    centered = c.get("norm", "rms_norm") == "layer_norm"
    if res is not None:
        from .add_norm import add_norm
        cfg = {"normalized_shape": [H], "norm": c.get("norm", "rms_norm"), "eps": eps, "dropout_p": 0.0,
               "weight_offset": 0.0, "residual_in_fp32": bool(c.get("residual_in_fp32", False))}
        o, _, _ = add_norm({"x": x, "residual": res, "weight": w, "bias": b}, cfg, {}, u, red, contract, dt)
        return o["y"], o["residual_out"]
    A = (x.ndim - 1,)
    pb = (1,) * (x.ndim - 1) + (H,)
    o, _, _, _ = S.standardize(x, A, weight=w, bias=b, pshape_bcast=pb, dy=None, eps=eps, u=u, reduction=red,
                               contract=contract, case_dtype=dt, centered=centered,
                               stat_shape=x.shape[:-1] + (1,), stat_names=(None, "rstd"))
    return o["y"], None


def _over(y, D, qm):
    """clip(y / D, -qm, qm), 0 where D = 0 (D broadcast over the block's lanes)."""
    return NB.divide_clip(y, D, qm)


def scale_range(v, E_v, c):
    """(D_lo, D_hi) of the rule: its rounding of v - E_v and v + E_v (module docstring), no tensor scale."""
    fmt, rule = c["format"], c["scale_rule"]
    lo, hi = np.maximum(v - E_v, 0.0), v + E_v
    if fmt == "fp8_group":
        if rule == "exact":
            return lo, hi
        return NB.pow2_ceil(lo, *NB.F32_POW2_EXP, zero=0.0), NB.pow2_ceil(hi, *NB.F32_POW2_EXP, zero=0.0)
    if fmt == "mxfp8":
        f = NB.pow2_floor if rule == "floor" else NB.pow2_ceil
        return f(lo, *NB.E8M0_EXP), f(hi, *NB.E8M0_EXP)
    return NB.round_e4m3(lo), NB.round_e4m3(hi)


def smallest_positive(D_lo, D_hi, c):
    """The smallest positive decode scale in [D_lo, D_hi] that the rule can produce (0: none)."""
    if c["format"] == "fp8_group" and c["scale_rule"] == "exact":
        return np.where(D_lo > 0, D_lo, 0.0)
    tiny = {"fp8_group": 2.0 ** NB.F32_POW2_EXP[0], "mxfp8": 2.0 ** NB.E8M0_EXP[0], "nvfp4": 2.0 ** -9}[c["format"]]
    return np.where(D_hi > 0, np.maximum(D_lo, tiny), 0.0)


def bound(inputs, cfg, training, dy, u, red, contract, dt):
    x = np.asarray(inputs["x"], dtype=np.float64)
    res, w, b, gs = (None if inputs.get(k) is None else np.asarray(inputs[k], dtype=np.float64)
                     for k in ("residual", "weight", "bias", "global_scale"))
    c, H, eps = NB.check(x, res, w, b, cfg, gs)
    E_y, E_res = _norm_bound(x, res, w, b, c, H, eps, u, red, contract, dt)
    E_y = np.broadcast_to(E_y, x.shape)
    s = x if res is None else x + res
    with np.errstate(all="ignore"):
        y = NB.norm_of(s, w, b, c, H, eps)
        B, qm, fmt = c["block_size"], NB.qmax(c["element_dtype"]), c["format"]
        yb, Eb = NB.blocked(y, B), NB.blocked(np.asarray(E_y, dtype=np.float64), B)    # (..., nb, B)
        amax = np.max(np.abs(yb), axis=-1, initial=0.0)
        E_amax = np.max(Eb, axis=-1, initial=0.0)
        out = {"amax": E_amax}
        ts_lo = ts_hi = 1.0
        if fmt == "nvfp4" and gs is not None:            # a static encode scale: exact, an input
            enc = NB.tensor_encode(amax, c, gs)
            ts = ts_lo = ts_hi = 1.0 / enc
            v = amax / 6.0 * enc
            E_v = E_amax / 6.0 * enc + 3 * u * (v + E_amax / 6.0 * enc)
            out["tensor_scale"] = np.full((1,) * x.ndim, u * ts)
        elif fmt == "nvfp4":
            g, E_g = float(np.max(amax, initial=0.0)), float(np.max(E_amax, initial=0.0))
            _, ts = NB.nvfp4_tensor(g)
            ts = float(ts)
            v = 448.0 * amax / g if g > 0 else np.zeros(amax.shape)
            if g == 0 and E_g == 0:
                E_v, E_ts = np.zeros(amax.shape), 0.0
            elif g > E_g:
                E_v = 448.0 * (E_amax * g + amax * E_g) / (g * (g - E_g))
                E_v = E_v + 4 * u * (v + E_v)
                E_ts = E_g / NB.NVFP4_GLOBAL + 3 * u * (ts + E_g / NB.NVFP4_GLOBAL)
            else:
                E_v, E_ts = np.full(amax.shape, np.inf), np.inf
            ts_lo, ts_hi = max(ts - E_ts, 0.0), ts + E_ts
            out["tensor_scale"] = np.full((1,) * x.ndim, E_ts)
        else:
            v, _, _ = NB.block_scales(amax, c)
            div = 2.0 ** NB.ELEMENTS[c["element_dtype"]][2] if (fmt, c["scale_rule"]) == ("mxfp8", "floor") else qm
            E_v = E_amax / div + (u * v if div != qm else 3 * u * (v + E_amax / div))
            out["tensor_scale"] = np.zeros((1,) * x.ndim)
        out["scale"] = E_v
        _, D, _ = NB.block_scales(amax, c, NB.tensor_encode(amax, c, gs))
        lo, hi = scale_range(v, E_v, c)
        D_lo, D_hi = lo * ts_lo, hi * ts_hi
        D_pos = smallest_positive(lo, hi, c) * ts_lo
        q = _over(yb, D[..., None], qm)
        spread = np.maximum(np.abs(_over(yb, D_lo[..., None], qm) - q), np.abs(_over(yb, D_hi[..., None], qm) - q))
        Dp = D_pos[..., None]
        prop = np.where(Dp > 0, Eb / np.where(Dp > 0, Dp, 1.0), np.inf)
        prop = prop + 3 * u * np.where(Dp > 0, np.abs(yb) / np.where(Dp > 0, Dp, 1.0), np.inf) + 3 * u * prop
        prop = np.where(((yb == 0) & (Eb == 0)) | (D_hi[..., None] == 0), 0.0, prop)     # every admissible S 0: q = 0
        E_q = np.where(np.isnan(spread), np.inf, spread) + prop
        out["q"] = E_q.reshape(x.shape[:-1] + (-1,))[..., :H]
        if res is not None:
            out["residual_out"] = E_res
    return out, {}, {}
