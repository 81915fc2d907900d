"""Pitfall variants of dyt (the specification, refnorm/specs/dyt.py, with one change each).

* R-dytrow: alpha's gradient reduced over the last dimension only: each row's partial sum of
  g * tanh' * x written to alpha's one slot, the last row's kept (a kernel that reduces dalpha per program
  like a row statistic and stores it without the reduction over the rows, or an atomic add).
* R-dytmean: alpha's gradient averaged over the elements instead of summed (the partials divided by
  their count, as for a mean statistic).
* R-dytdx: dx without alpha, the inner derivative of tanh(alpha x): dx = g * tanh'.
* R-dyt16: tanh' formed as 1 - t^2 from t rounded to the case dtype d (t saved in d for the backward):
  where alpha x saturates, 1 - t^2 loses every bit (t = 1 in d) and elsewhere errs by ~2 u_d.
"""
from __future__ import annotations

import numpy as np

from ..norms._dyt_check import check
from ..spec import Result
from ..specs import dyt as S
from . import Variant as V
from ._engine import in_w, to_d
from ._rounding import truncate_out

OP = "dyt"


def _evaluate(inputs, config, cot, dtype, *, dalpha="sum", dx_alpha=True, t_in_d=False):
    inputs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items() if v is not None}
    check(inputs)
    x, alpha, w, b = inputs["x"], inputs["alpha"], inputs.get("weight"), inputs.get("bias")
    y, t = S.dyt(x, alpha, w, b)
    grads = {}
    if cot and "y" in cot:
        dy = np.asarray(cot["y"], dtype=np.float64)
        dx, da, dw, db = S.dyt_backward(dy, x, alpha, t, w, b is not None)
        a = float(alpha.reshape(()))
        g = dy if w is None else dy * w
        D = S.sech2(a * x)
        if t_in_d:                                  # 1 - t^2 from t rounded to d
            td = to_d(in_w(t, dtype), dtype).astype(np.float64)
            D = 1.0 - td * td
        gd = g * D
        dx = gd * a if dx_alpha else gd
        terms = gd * x
        if dalpha == "row":                          # the last row's partial only
            total = terms.reshape(-1, x.shape[-1])[-1].sum() if x.size else 0.0
        elif dalpha == "mean":
            total = terms.mean() if x.size else 0.0
        else:
            total = terms.sum()
        da = np.reshape(total, alpha.shape)
        grads = {k: v for k, v in {"x": dx, "alpha": da, "weight": dw, "bias": db}.items() if v is not None}
    return Result({"y": y}, grads, {})


def _fn(**mods):
    return lambda inputs, config, cot, dtype, state, training: _evaluate(inputs, config, cot, dtype, **mods)


def _grad(c, t, i, s, cot):
    return bool(cot)


def _rows(c, t, i, s, cot):
    return bool(cot) and np.size(i["x"]) > np.shape(i["x"])[-1]


VARIANTS = (
    V("dyt_dalpha_row", ("R-dytrow",), "alpha's gradient reduced over the last dimension only (the last row's "
      "partial kept, the rows not summed)", OP, fn=_fn(dalpha="row"), when=_rows),
    V("dyt_dalpha_mean", ("R-dytmean",), "alpha's gradient averaged over the elements instead of summed", OP,
      fn=_fn(dalpha="mean"), when=_grad),
    V("dyt_dx_no_alpha", ("R-dytdx",), "dx without alpha (tanh(alpha x)'s inner derivative dropped)", OP,
      fn=_fn(dx_alpha=False), when=_grad),
    V("dyt_sech_in_d", ("R-dyt16",), "tanh' as 1 - t^2 from t rounded to {d}", OP, fn=_fn(t_in_d=True),
      when=_grad, low_precision=True),
    truncate_out(OP),
)
