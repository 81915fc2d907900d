"""Pitfall variants of weight_standardization (issue 21). WS is layer_norm over the fan-in (x.shape[1:])
without weight and bias (refnorm/norms/weight_standardization.py), so each variant is _engine's
layer_norm on that view with one change. No catalogue row is about WS; its mechanisms are the centred
normalizers' (mechanisms.py):

* ws_authors: the authors' code (joe-siyuan-qiao/WeightStandardization): (x - mean) / (std + eps) with
  the unbiased std, eps added to the std (the docstring of refnorm.norms.weight_standardization);
* ws_ddof1: the unbiased variance (torch.var's default), eps inside; ws_eps_outside: eps added to the
  biased std;
* ws_one_pass: E[x^2] - E[x]^2 in W, clamped (judged, as the centred ops' one-pass, within its summation
  order's spread when it does not fit the check's own bounds); ws_stats_in_d: the statistics accumulated in d;
  ws_one_pass_in_d: E[x^2] - E[x]^2 with both sums in d (C08's, as jax.nn.standardize's default on float16);
* ws_no_A_term, ws_no_B_term: a hand-written dx missing -mean(g), or -x_hat * mean(g * x_hat).
The backward of each is the exact derivative of its forward where that is what autograd would give
(ws_authors, ws_ddof1, ws_eps_outside), else the reference's formula at the variant's statistics.
"""
from __future__ import annotations

import numpy as np

from . import Variant as V
from ._centered import (bwd_in_d, eps_outside_bounds, flat_rows, one_pass, one_pass_in_d, one_pass_spread, stats_in_d,
                        stats_rounded_d)
from ._engine import Mods
from ._engine import layer_norm as _ln
from ._rounding import truncate_out

OP = "weight_standardization"


def _as_ln(mods):
    def fn(inputs, config, cot, dtype, state, training, mods=mods):
        # ``mods``: the variant's own change, or one of its spread's (Variant.evaluate passes those)
        x = np.asarray(inputs["x"], dtype=np.float64)
        r = _ln({"x": x}, {"normalized_shape": x.shape[1:], "eps": config.get("eps", 1e-5)}, cot, dtype, mods)
        return type(r)(r.outputs, r.grads, {})
    return fn


def _flat(i):
    x = np.asarray(i["x"])
    return flat_rows(x, tuple(range(1, x.ndim)))


def _grads(c, t, i, s, cot):
    return bool(cot)


def _v(vid, ids, title, mods, **kw):
    return V(vid, ids, title, OP, fn=_as_ln(mods), **kw)


VARIANTS = (
    _v("ws_authors", ("WS-authors",), "(x - mean)/(std + eps) with the unbiased std (the authors' code)",
       Mods(unbiased=True, unbiased_bwd=True, placement="outside"), bounds_as=eps_outside_bounds),
    _v("ws_ddof1", ("H06", "E02"), "normalized with the unbiased variance (n - 1)",
       Mods(unbiased=True, unbiased_bwd=True)),
    _v("ws_eps_outside", ("B01",), "eps outside the sqrt: (x - mean)/(sqrt(var) + eps)", Mods(placement="outside"),
       when=lambda c, *a: float(c.get("eps", 1e-5)) > 0, bounds_as=eps_outside_bounds),
    _v("ws_authors_autograd", ("WS-authors",), "the authors' (x - mean)/(std + eps), unbiased std, differentiated "
       "through the std (autograd: a NaN gradient on rows whose variance is 0)",
       Mods(unbiased=True, unbiased_bwd=True, placement="outside", nan_if_flat=True),
       when=lambda c, t, i, s, cot: bool(cot) and _flat(i), bounds_as=eps_outside_bounds),
    _v("ws_eps_outside_autograd", ("B01",), "eps outside the sqrt, differentiated through sqrt(var) (autograd: a "
       "NaN gradient on rows whose variance is 0)", Mods(placement="outside", nan_if_flat=True),
       when=lambda c, t, i, s, cot: float(c.get("eps", 1e-5)) > 0 and bool(cot) and _flat(i),
       bounds_as=eps_outside_bounds),
    _v("ws_one_pass", ("A01", "A02"), "variance as E[x^2]-E[x]^2 in {W}, clamped at 0", Mods(stats=one_pass),
       spread=one_pass_spread("clamp")),
    _v("ws_stats_in_d", ("C06", "C09"), "mean and variance accumulated in the input dtype {d}",
       Mods(stats=stats_in_d), low_precision=True, slack=bwd_in_d(Mods(stats=stats_in_d))),
    _v("ws_stats_rounded_d", ("C06",), "mean and variance computed in {d} by {W}-accumulating reductions (each "
       "result, the deviations and their squares rounded to {d})", Mods(stats=stats_rounded_d), low_precision=True,
       slack=bwd_in_d(Mods(stats=stats_rounded_d))),
    _v("ws_one_pass_in_d", ("C08",), "sum and sum of squares accumulated in {d}, one-pass variance",
       Mods(stats=one_pass_in_d), low_precision=True),
    _v("ws_no_A_term", ("R-noA",), "dx without the -mean(g) term", Mods(no_A=True), when=_grads),
    _v("ws_no_B_term", ("R-noB",), "dx without the -x_hat*mean(g*x_hat) term", Mods(no_B=True), when=_grads),
    truncate_out(OP),
)
