"""Pitfall variants of group_norm_silu (the specification, refnorm/specs/group_norm_silu.py, with one change).

Own (the SiLU and where it sits):
* R-siluaff: SiLU applied before the affine: y = silu(x_hat) * weight + bias (the activation fused into the
  normalization's epilogue on the wrong side of the affine); its backward is that function's.
* R-silugrad: silu' evaluated at the normalized value x_hat, without the affine (dp = dy * silu'(x_hat) where
  silu'(p) belongs, p = x_hat * weight + bias); the forward is right.
* R-silugrady: silu' evaluated at the output y = silu(p) (dp = dy * silu'(y)), the forward right.
* R-gnstride: the groups taken over the wrong channel order: group g holds the channels c with c % G == g
  (a channels_last kernel's group index c % G) instead of the C/G consecutive channels c // (C/G) == g.
And the variants of group_norm (refnorm/pitfalls/group_norm.py: the one-pass variance of a fused kernel,
statistics in d, the missing backward term, ...; all but LEFT_TO_GROUP_NORM), run on the pre-activation:
group_norm's equations with its one change, then the SiLU and its exact derivative (the same ids, so the
diagnosis names their mechanism).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..norms.group_norm_silu import check
from ..spec import Result
from ..specs.group_norm import group_norm, group_norm_backward
from ..specs.group_norm_silu import silu, silu_grad
from . import Variant as V
from . import group_norm as GNV
from ._engine import OPS as _ENGINE
from ._rounding import truncate_out

OP = "group_norm_silu"


def _args(inputs, config):
    x = np.asarray(inputs["x"], dtype=np.float64)
    w, b = (None if inputs.get(k) is None else np.asarray(inputs[k], dtype=np.float64) for k in ("weight", "bias"))
    G, _, eps = check(x, w, b, config["num_groups"], config.get("eps", 1e-5))
    return x, w, b, G, eps


def _bc(p, x):
    return p.reshape((1, -1) + (1,) * (x.ndim - 2))


def _evaluate(inputs, config, cot, dtype, *, where="p"):
    """The specification with the SiLU (where="before_affine") or its derivative's argument ("xhat", "y")
    changed; where="p": the specification itself."""
    x, w, b, G, eps = _args(inputs, config)
    _, mean, rstd, xhat = group_norm(x, None, None, G, eps)
    p = xhat if w is None else xhat * _bc(w, x)
    p = p if b is None else p + _bc(b, x)
    if where == "before_affine":
        y = silu(xhat) if w is None else silu(xhat) * _bc(w, x)
        y = y if b is None else y + _bc(b, x)
    else:
        y = silu(p)
    grads = {}
    dy = None if not cot or cot.get("y") is None else np.asarray(cot["y"], dtype=np.float64)
    if dy is not None:
        if where == "before_affine":
            g = dy if w is None else dy * _bc(w, x)
            dx, _, _ = group_norm_backward(g * silu_grad(xhat), xhat, rstd, None, False, G)
            other = (0,) + tuple(range(2, x.ndim))
            grads = {"x": dx, "weight": None if w is None else (dy * silu(xhat)).sum(axis=other),
                     "bias": None if b is None else dy.sum(axis=other)}
        else:
            at = {"p": p, "xhat": xhat, "y": y}[where]
            dx, dw, db = group_norm_backward(dy * silu_grad(at), xhat, rstd, w, b is not None, G)
            grads = {"x": dx, "weight": dw, "bias": db}
    return Result({"y": y, "mean": mean, "rstd": rstd}, {k: v for k, v in grads.items() if v is not None}, {})


def strided_order(C, G):
    """The channel order of R-gnstride: group g's members c % G == g, listed group after group."""
    return np.arange(C).reshape(C // G, G).T.reshape(-1)


def _strided_groups(inputs, config, cot, dtype, state, training):
    """The specification on the channels permuted so that group g holds the channels c % G == g, the
    results permuted back (mean and rstd: the statistics of those groups)."""
    x, w, b, G, eps = _args(inputs, config)
    perm = strided_order(x.shape[1], G)
    inv = np.argsort(perm)
    take = lambda a: None if a is None else np.asarray(a, dtype=np.float64)[:, perm]      # noqa: E731
    pin = {"x": take(x), "weight": None if w is None else w[perm], "bias": None if b is None else b[perm]}
    r = _evaluate({k: v for k, v in pin.items() if v is not None}, config,
                  {"y": take(cot["y"])} if cot and cot.get("y") is not None else {}, dtype)
    outs = {"y": r.outputs["y"][:, inv], "mean": r.outputs["mean"], "rstd": r.outputs["rstd"]}
    grads = {k: (v[:, inv] if k == "x" else v[inv]) for k, v in r.grads.items()}
    return Result(outs, grads, {})


def _fn(where):
    return lambda inputs, config, cot, dtype, state, training: _evaluate(inputs, config, cot, dtype, where=where)


def _on_pre_activation(mods):
    """group_norm's engine with ``mods`` on the pre-activation p, then the SiLU and its exact derivative."""
    def fn(inputs, config, cot, dtype, state, training, mods=mods):
        gn = _ENGINE["group_norm"]
        fwd = gn(inputs, config, {}, dtype, mods, state, training)
        p = fwd.outputs["y"]
        outs = {"y": silu(p), **{k: v for k, v in fwd.outputs.items() if k != "y"}}
        grads = {}
        if cot and cot.get("y") is not None:
            grads = dict(gn(inputs, config, {"y": np.asarray(cot["y"], dtype=np.float64) * silu_grad(p)}, dtype,
                            mods, state, training).grads)
        return Result(outs, grads, {})
    return fn


def _grads(c, t, i, s, cot):
    return bool(cot)


def _params(c, t, i, s, cot):
    return i.get("weight") is not None or i.get("bias") is not None


def _strided_differs(c, t, i, s, cot):
    G, C = int(c["num_groups"]), np.shape(i["x"])[1]
    return 1 < G < C


OWN = (
    V("silu_before_affine", ("R-siluaff",), "SiLU applied before the affine: silu(x_hat) * weight + bias", OP,
      fn=_fn("before_affine"), when=_params),
    V("silu_grad_at_xhat", ("R-silugrad",), "silu' evaluated at the normalized value x_hat, without the affine "
      "(dp = dy * silu'(x_hat))", OP, fn=_fn("xhat"), when=lambda c, t, i, s, cot: _grads(c, t, i, s, cot)
      and _params(c, t, i, s, cot)),
    V("silu_grad_at_output", ("R-silugrady",), "silu' evaluated at the output y = silu(p) (dp = dy * silu'(y))", OP,
      fn=_fn("y"), when=_grads),
    V("gns_strided_groups", ("R-gnstride",), "groups over the wrong channel order: group g holds the channels "
      "c % G == g (a channels_last kernel's c % G) instead of C/G consecutive channels", OP, fn=_strided_groups,
      when=_strided_differs),
)

# group_norm's own variants on the pre-activation (those written as an engine change; R-trunc is added below),
# but for two whose exposing shapes are group_norm's golden cases and not this op's (its statistics are
# group_norm's): serial_acc (A11, a constant group of 65792 values) and gn_wave64 (F14, N > 128 with C > 32)
LEFT_TO_GROUP_NORM = ("serial_acc", "gn_wave64")
FROM_GROUP_NORM = tuple(dataclasses.replace(v, op=OP, fn=_on_pre_activation(v.mods))
                        for v in GNV.VARIANTS if v.fn is None and v.id not in LEFT_TO_GROUP_NORM)

VARIANTS = OWN + FROM_GROUP_NORM + (truncate_out(OP),)
