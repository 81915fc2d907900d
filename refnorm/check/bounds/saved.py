"""The backward judged at the kernel's own saved statistics: a contract's ``recompute xhat=saved_stats``
(docs/tolerances.md, "Saved statistics"), for layer_norm and rms_norm.

A kernel declaring it forms x_hat per element, before any sum, from the mean and rstd it returns (its
saved statistics mu_s, r_s: exactly the returned values, so a statistic rounded before it is saved is read
back rounded, and substituting it is exact). Its gradients are those of the backward formula at those
statistics, in float64 (rows as in _rows.py; rms_norm: mu_s = 0 and no A):

    xh = (x - mu_s) r_s   g = dy w   A = mean(g)   B = mean(g xh)
    dx = r_s (g - A - xh B)          dweight = the sum over the rows of dy xh       (dbias: no statistic)

and their bound carries no error of the statistics (judged on mean and rstd themselves): it is the strict
bound (_rows.py) with the terms of the mean's and rstd's errors (K, rho) dropped:

    E_dx = u [g(n) r (Ag + |xh| (Bg + Kg)) + 4 r (|g| + |A| + |xh||B| + |B| kap + |xh| Kg) + 4 g(n) u r Kg kap]
    T_w  = u [g(m) |dy| (|xh| + 4 u kap) + 4 |dy| kap]

(kap = r_s (|x| + |mu_s|), rms |xh|: x_hat formed as x r - mu r at magnitude kap; Kg = mean(|g| kap): B's sum
split as sum(g x) - mu sum(g), as torch CPU computes it: its coefficient b = -B r^2 then errs by up to
g(n) u r^2 Kg, and dx = b x + c (c = -b mu - r A) rounds b x and b mu at that magnitude, the
second-order 4 g(n) u^2 r Kg kap: on constant rows (B = 0, x_hat = 0) at |x| ~ 1e3, r ~ 316, it is the
whole error), plus the same with u = 2^-53 and the tree model
(the float64 reference's own error), plus the terms of the contract's other points (points.extra_rows at
these statistics; the statistics' own points, rounds mean and rstd, acc mean and var, are dropped: the
backward reads the returned values), all times (1 + U) (points.total_u).

``substitute`` decides whether a call is judged so: only where the backend returned every statistic, finite,
of the reference's shape, and each passed its own bound with some element constrained; otherwise the
ordinary bound stands, and the note says why.
"""
from __future__ import annotations

import numpy as np

from .. import contracts as K
from ..precision import UNIT_ROUNDOFF, acc_dtype, gamma
from .points import _layer_rows, extra_rows, total_u

OPS = {"layer_norm": ("mean", "rstd"), "rms_norm": ("rstd",)}
STATS_POINTS = {"rounds": ("mean", "rstd"), "acc": ("mean", "var")}


def _mean(a):
    return a.mean(axis=1, keepdims=True)


def _rows_bound(R, us):
    """(E_dx, T_w) rows of the backward at R's (substituted) statistics (module docstring), summed over
    ``us``: (u, g(n), g(m)) triples (the kernel's and the float64 reference's), the arrays formed once."""
    axh, ady, agw = np.abs(R.xh), np.abs(R.dy), np.abs(R.g)
    kap = R.r * (np.abs(R.x) + np.abs(R.mu)) if R.centered else axh
    Ag = _mean(agw) if R.centered else 0.0
    Bg, Kg = _mean(agw * axh), _mean(agw * kap)
    aA, aB = np.abs(R.A), np.abs(R.B)
    c_sum = sum(u * gn for u, gn, _ in us)              # the row sums' u g(n)
    c_pt = sum(4 * u for u, _, _ in us)                 # the pointwise 4 u
    c_2 = sum(4 * gn * u * u for u, gn, _ in us)        # the split coefficient's second order
    E_dx = R.r * (c_sum * (Ag + axh * (Bg + Kg)) + c_pt * (agw + aA + axh * aB + aB * kap + axh * Kg)
                  + c_2 * Kg * kap)
    T_w = ady * (sum(u * gm for u, _, gm in us) * axh + sum(4 * u * (u * gm + 1) for u, _, gm in us) * kap)
    return E_dx, T_w


def backward_at(op, contract, *, inputs, config, cotangents, case_dtype, stats):
    """{"x": (reference, bound, strict bound), "weight": (...)} (weight when the call has one) of the
    backward at the statistics ``stats`` ({"mean", "rstd"}: arrays of one value per row, float64; the strict
    bound: no point of the contract, its reduction model and accumulation dtype), or a string saying why it
    is not derived (then the ordinary bound stands)."""
    if op not in OPS:
        return f"{op}: the backward at the saved statistics is derived for {', '.join(OPS)} only"
    if config.get("eps_placement", "inside") != "inside":
        return "eps_placement 'outside': the backward at the saved statistics is derived for eps inside the sqrt"
    dy = cotangents.get("y")
    if dy is None:
        return "no cotangent of y"
    x = np.asarray(inputs["x"], dtype=np.float64)
    centered = op == "layer_norm"
    ns = config["normalized_shape"]
    n = int(np.prod((ns,) if isinstance(ns, int) else tuple(ns)))
    m = x.size // max(n, 1)
    mu = np.asarray(stats["mean"], dtype=np.float64).reshape(m, 1) if centered else None
    r = np.asarray(stats["rstd"], dtype=np.float64).reshape(m, 1)
    cots = {"y": np.asarray(dy, dtype=np.float64)}
    ins = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    L, R, ns = _layer_rows(ins, config, cots, case_dtype, centered, stats=(mu, r))
    u = UNIT_ROUNDOFF[acc_dtype(case_dtype, contract.acc)]
    f = 1 + total_u(contract, case_dtype)
    with np.errstate(all="ignore"):
        red = contract.reduction
        E_dx, T_w = _rows_bound(R, ((u, gamma(n, red), gamma(L.m, red)),
                                    (UNIT_ROUNDOFF["float64"], gamma(n, "tree"), gamma(L.m, "tree"))))
        rounds = {k: v for k, v in contract.rounds.items() if k not in STATS_POINTS["rounds"]}
        accs = {k: v for k, v in contract.accs.items() if k not in STATS_POINTS["acc"]}
        t = extra_rows(R, rounds, accs, case_dtype, u, red, L.m)
        lead = tuple(range(x.ndim - len(ns)))
        out = {"x": (L.back(R.dn), f * L.back(E_dx + t["dx"]), L.back(E_dx))}
        if "weight" in inputs:
            wshape = np.shape(inputs["weight"])
            param = lambda a: L.back(a).sum(axis=lead).reshape(wshape)       # noqa: E731
            out["weight"] = (param(R.dy * R.xh), f * param(T_w + t["t_w"]), param(T_w))
    return out


def substitute(op, contract, *, inputs, config, cotangents, case_dtype, got, ref, E, judge_stat, E_strict=None):
    """(reference grads, bounds' grads, strict bounds' grads, note) of a call under a contract declaring saved
    statistics (contracts.saved_statistics): the gradients x and weight at the statistics the backend returned
    (``got["outputs"]``) when each is returned, finite, of the reference's shape, and passes its own bound
    (``judge_stat(name, array, reference, bound)`` -> ArrayResult) constrained somewhere; else the ordinary
    ones (``ref.grads``, ``E["grads"]``, ``E_strict["grads"]`` when given) and a note saying why. The strict
    bounds (the strict contract's at the same statistics, for an array's strict ratio) are None without
    ``E_strict``."""
    why = None
    stats = {}
    for name in OPS.get(op, ()):
        a = got.get("outputs", {}).get(name)
        if a is None:
            why = f"the backend returned no {name}"
            break
        a = np.asarray(a)
        if name not in E["outputs"] or name not in ref.outputs:
            why = f"no bound is derived for the returned {name}"
            break
        if a.shape != np.shape(ref.outputs[name]):
            why = f"the returned {name} has shape {a.shape}, expected {np.shape(ref.outputs[name])}"
            break
        with np.errstate(all="ignore"):
            v = a.astype(np.float64)
        if not np.isfinite(v).all():
            why = f"the returned {name} is not finite everywhere"
            break
        res = judge_stat(name, a, ref.outputs[name], E["outputs"][name])
        if not res.passed or res.verdict == "unconstrained":
            why = (f"the returned {name} fails its own bound" if not res.passed else
                   f"the returned {name} is unconstrained within its own bound (it verifies nothing)")
            break
        stats[name] = v
    if why is None:
        at = backward_at(op, contract, inputs=inputs, config=config, cotangents=cotangents, case_dtype=case_dtype,
                         stats=stats)
        if isinstance(at, str):
            why = at
    strict = None if E_strict is None else dict(E_strict["grads"])
    if why is not None:
        return dict(ref.grads), dict(E["grads"]), strict, f"ordinary bound, not at the saved statistics: {why}"
    grads, bounds = dict(ref.grads), dict(E["grads"])
    for k, (r, e, e_strict) in at.items():
        grads[k], bounds[k] = r, e
        if strict is not None:
            strict[k] = e_strict
    return grads, bounds, strict, f"judged at the returned {' and '.join(OPS[op])} (recompute xhat=saved_stats)"
