"""Bounds for the normalizers that standardize slices: layer_norm, rms_norm, group_norm,
instance_norm, batch_norm, weight_standardization, mean_variance_norm, z_score.

Each maps its input to rows (``_rows.row_bounds``: one row per reduction slice), and maps the row
bounds back to its outputs, gradients and state. Eval-mode batch/instance norm with running
statistics is a per-channel affine map and has its own (pointwise) bound, ``affine_bounds``.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from ..precision import ETA, UNIT_ROUNDOFF, gamma
from ._rows import row_bounds


def _resolve(view, shape):
    """``view`` with its -1 (at most one, as in reshape) replaced by the size it stands for."""
    view = [int(v) for v in view]
    if -1 in view:
        known = math.prod(v for v in view if v != -1)
        view[view.index(-1)] = math.prod(shape) // known if known else 0
    return tuple(view)


def trailing(shape, normalized_shape):
    """layer_norm's layout of an x of ``shape`` normalized over its trailing ``normalized_shape`` (an int or a
    tuple): (the reduced axes, the parameters' broadcast shape, the statistics' keepdims shape)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    lead = len(shape) - len(ns)
    return tuple(range(lead, len(shape))), (1,) * lead + ns, tuple(shape[:lead]) + (1,) * len(ns)


class Layout:
    """Rows of ``shape`` (optionally viewed as ``view``) reducing over ``axes`` of the view; row
    order is the C order of the kept axes, so per-row values reshape to any keepdims stat shape."""

    def __init__(self, shape, axes, view=None):
        self.shape = tuple(shape)
        self.view = _resolve(view, self.shape) if view is not None else self.shape
        self.axes = tuple(a % len(self.view) for a in axes)
        keep = [i for i in range(len(self.view)) if i not in self.axes]
        self.perm = keep + list(self.axes)
        self.m = math.prod(self.view[i] for i in keep)
        self.n = math.prod(self.view[i] for i in self.axes)

    def rows(self, a):
        if a is None:
            return None
        full = np.broadcast_to(np.asarray(a, dtype=np.float64), self.shape).reshape(self.view)
        return full.transpose(self.perm).reshape(self.m, self.n)

    def back(self, t):
        tv = t.reshape([self.view[i] for i in self.perm]).transpose(np.argsort(self.perm))
        return tv.reshape(self.shape)


def _param_sum(layout: Layout, t, pshape_bcast, pshape):
    """Sum per-element terms ``t`` (rows) over the axes a parameter is broadcast along."""
    full = layout.back(t)
    axes = tuple(i for i, (p, s) in enumerate(zip(pshape_bcast, layout.shape)) if p == 1 and s != 1)
    return full.sum(axis=axes, keepdims=True).reshape(pshape)


_ROWS_FACTOR = contextvars.ContextVar("param_rows", default=1.0)


@contextlib.contextmanager
def param_rows(factor: float):
    """Within: the parameter gradients' contributions are ``factor`` times those of the rows at hand
    (the streaming judge bounds one block of the rows at a time; g(m) is that of all rows)."""
    token = _ROWS_FACTOR.set(float(factor))
    try:
        yield
    finally:
        _ROWS_FACTOR.reset(token)


_SECOND = contextvars.ContextVar("second_contract", default=None)


@contextlib.contextmanager
def plus_strict(u: float, reduction: str):
    """Within: ``standardize`` returns its contract's bounds plus those of the strict contract of unit
    roundoff ``u`` and ``reduction`` (bounds.bounds' E_acc + E_ref), the same sums as two calls added
    (the compiled row bounds compute both in one pass; otherwise two calls)."""
    token = _SECOND.set((float(u), reduction))
    try:
        yield
    finally:
        _SECOND.reset(token)


def second_u() -> float:
    """Within ``plus_strict``: the unit roundoff of the strict contract it adds (the float64 reference's);
    0 outside it. For a bound that adds terms of its own to standardize's (group_norm_silu's SiLU)."""
    second = _SECOND.get()
    return 0.0 if second is None else second[0]


def _m_param(layout, pshape_bcast):
    m = max(1, math.prod(s for p, s in zip(pshape_bcast, layout.shape) if p == 1))
    return max(1, round(m * _ROWS_FACTOR.get()))


def _pattern(L, pb, wb, bb, weight, bias, groups):
    """The parameters as row_bounds' pattern (w, b, back: pattern sums -> parameter-shaped sums, wdiv: rows
    per pattern row), or None: rows over the leading axes with parameters on the trailing ones (layer_norm:
    one pattern row, a value per column); the same per sample (adaptive_layer_norm's (N, n) parameters, a
    pattern row for each sample's rows); parameters constant within a row, varying along the last kept
    axes (batch_norm, instance_norm: a value per row, period C); group_norm's (G, Cg) pattern, each value
    over its channel's run of spatial elements in the row."""
    if pb is None or (weight is None and bias is None):
        return None
    given = wb if wb is not None else bb
    shape, nd = L.shape, len(L.shape)
    if groups:                                            # group_norm: view (N, G, Cg * spatial)
        C, G = shape[1], groups
        if C % G or L.view[:2] != (shape[0], G):
            return None
        def per_group(a):          # (G, Cg): value k of group row i is channel i * Cg + k, over its spatial run
            return None if a is None else np.asarray(a, dtype=np.float64).reshape(G, C // G)
        return per_group(wb), per_group(bb), lambda t: t.reshape(G, C // G), 1
    if L.view != shape:
        return None
    keep = L.perm[:nd - len(L.axes)]
    if L.perm == list(range(nd)) and math.prod(pb) == L.n and np.size(given) == L.n:     # per column
        return (None if wb is None else wb.reshape(1, -1), None if bb is None else bb.reshape(1, -1),
                lambda t: t.reshape(-1), 1)
    k = nd - len(L.axes)                                  # per sample and column: (N, 1, ..., 1, *reduced)
    if (L.perm == list(range(nd)) and k >= 1 and pb[0] == shape[0] > 1 and all(p == 1 for p in pb[1:k])
            and tuple(pb[k:]) == tuple(shape[k:]) and np.size(given) == shape[0] * L.n):
        return (None if wb is None else wb.reshape(shape[0], L.n), None if bb is None else bb.reshape(shape[0], L.n),
                lambda t: t.reshape(-1), L.m // shape[0])
    varying = [i for i in keep if pb[i] != 1]
    if any(pb[i] != 1 for i in L.axes) or varying != keep[len(keep) - len(varying):]:
        return None
    period = math.prod(shape[i] for i in varying)
    if np.size(given) != period:
        return None
    return (None if wb is None else wb.reshape(period, 1), None if bb is None else bb.reshape(period, 1),
            lambda t: t.reshape(-1), 1)


def standardize(x, axes, *, view=None, weight=None, bias=None, pshape_bcast=None, dy=None, eps, u, reduction,
                contract, case_dtype, centered=True, ddof=0, eps_mode="inside", stat_shape=None,
                stat_names=("mean", "rstd"), groups=None):
    """Bounds {outputs, grads} for a slice standardization; also returns the RowBounds. ``groups``:
    group_norm's G (its parameters' pattern within a row). Under ``plus_strict``: plus the strict
    contract's bounds (the RowBounds returned are then those of the first contract, or of both summed)."""
    second = _SECOND.get()
    if second is not None:
        token = _SECOND.set(None)
        try:
            return _standardize_plus(second, x, axes, view=view, weight=weight, bias=bias, pshape_bcast=pshape_bcast,
                                     dy=dy, eps=eps, u=u, reduction=reduction, contract=contract,
                                     case_dtype=case_dtype, centered=centered, ddof=ddof, eps_mode=eps_mode,
                                     stat_shape=stat_shape, stat_names=stat_names, groups=groups)
        finally:
            _SECOND.reset(token)
    return _standardize(x, axes, view=view, weight=weight, bias=bias, pshape_bcast=pshape_bcast, dy=dy, eps=eps,
                        u=u, reduction=reduction, contract=contract, case_dtype=case_dtype, centered=centered,
                        ddof=ddof, eps_mode=eps_mode, stat_shape=stat_shape, stat_names=stat_names, groups=groups)


def _standardize_plus(second, x, axes, **kw):
    """standardize(...) + standardize(..., u=u2, reduction=red2, contract=strict, case_dtype=float64),
    array by array: in one compiled pass when the parameters have a pattern and no "std" statistic is
    asked for (the same sums), else as two calls."""
    u2, red2 = second
    if kw["stat_names"][1] != "std":
        kw["_second"] = second
        fused = _standardize(x, axes, **kw)
        if fused is not None:
            return fused
        del kw["_second"]
    a = _standardize(x, axes, **kw)
    b = _standardize(x, axes, **{**kw, "u": u2, "reduction": red2, "contract": "strict", "case_dtype": "float64"})
    add = lambda d, e: {k: np.asarray(v, dtype=np.float64) + np.asarray(e[k], dtype=np.float64)   # noqa: E731
                        for k, v in d.items()}
    return add(a[0], b[0]), add(a[1], b[1]), a[2], a[3]


def _standardize(x, axes, *, view=None, weight=None, bias=None, pshape_bcast=None, dy=None, eps, u, reduction,
                 contract, case_dtype, centered=True, ddof=0, eps_mode="inside", stat_shape=None,
                 stat_names=("mean", "rstd"), groups=None, _second=None):
    """standardize's body; ``_second`` (u2, red2): both contracts in one compiled pass, or None when
    that pass cannot run (no parameter pattern, or the module is not built)."""
    L = Layout(x.shape, axes, view)
    pb = pshape_bcast
    wb = None if weight is None else np.asarray(weight, dtype=np.float64).reshape(pb)
    bb = None if bias is None else np.asarray(bias, dtype=np.float64).reshape(pb)
    m_param = _m_param(L, pb) if pb is not None else 1
    from ..compare import native
    from ._rows import _PLAIN
    pat = _pattern(L, pb, wb, bb, weight, bias, groups) \
        if native() is not None and L.n >= 1 and L.m >= 1 and _PLAIN.get() is None else None
    if _second is not None and pat is None:
        return None
    second = None if _second is None else (_second[0], gamma(L.n, _second[1]), gamma(m_param, _second[1]))
    kw = dict(eps=eps, u=u, reduction=reduction, m_param=m_param, centered=centered, ddof=ddof, eps_mode=eps_mode,
              contract=contract, case_dtype=case_dtype, pattern=pat and (pat[0], pat[1], pat[3]), second=second)
    nd = len(L.view)
    if pat and nd >= 3 and L.perm == [1, 0] + list(range(2, nd)) and L.view[0] > 1:
        # rows over axis 1 of (P, m, rest) (batch_norm's channels): the compiled loop gathers each row from
        # its P runs as x and dy lie, instead of a transposed copy of each
        lie = lambda a: None if a is None else np.ascontiguousarray(   # noqa: E731
            np.broadcast_to(np.asarray(a, dtype=np.float64), L.shape)).reshape(L.m, L.n)
        rb = row_bounds(lie(x), None, None, lie(dy), runs=L.view[0], **kw)
    else:
        rb = row_bounds(L.rows(x), None if pat else L.rows(wb), None if pat else L.rows(bb), L.rows(dy), **kw)
    outs = {"y": L.back(rb.y)}
    if stat_shape is not None:
        mean_name, r_name = stat_names
        if mean_name:
            outs[mean_name] = rb.mean.reshape(stat_shape)
        if r_name == "rstd":
            outs["rstd"] = rb.rstd.reshape(stat_shape)
        elif r_name == "std":      # std = 1/r (or sqrt(var)): the same relative error as rstd
            with np.errstate(all="ignore"):     # a zero variance with eps 0: r = inf, and inf / inf here
                r = 1.0 / np.sqrt(rb.var + (eps if eps_mode == "inside" else 0.0))
                outs["std"] = (rb.rstd / (r * r)).reshape(stat_shape)
    grads = {}
    if dy is not None:
        grads["x"] = L.back(rb.dx)
        # the compiled row bounds sum the parameter terms per element of the pattern already
        for name, given, t, t_pat in (("weight", weight, rb.t_w, rb.t_w_pat), ("bias", bias, rb.t_b, rb.t_b_pat)):
            if given is None:
                continue
            grads[name] = (pat[2](t_pat).reshape(np.shape(given)) if t_pat is not None
                           else _param_sum(L, t, pb, np.shape(given)))
    return outs, grads, rb, L


def affine_bounds(x, scale_rows, shift_rows, weight_b, bias_b, dy, rm_b, rv_b, eps, u, reduction, case_dtype,
                  contract, pshape_bcast, pshape_w, pshape_b):
    """Eval-mode batch/instance norm: y = (x - rm) r w + b, r = (rv + eps)^-1/2, all broadcast to x.

    E_y  = u[4(|w| r (|x| + |rm|) + |b| + |y|) + 3|w||x - rm| r]   (rsqrt: 3 roundings, relative)
    E_dx = u 6 |dy w| r          E_dw = u(g(m) + 6) sum|dy| r |x - rm|      E_db = u g(m) sum|dy|
    stats_d/epi_d add 2 u_d (|w xh| + |y|) to E_y, 2 u_d |dy w| r to E_dx (r held in d) and u_d g(m) sum|...|
    to E_dw, E_db (accumulators in d); epi_d adds 2 u_d times E_y's 4-bracket plus 2 eta_d (1 + |w|) to E_y
    and another 2 u_d |dy w| r to E_dx (the pointwise products rounded to d), as bounds/_rows.py does.
    """
    with np.errstate(all="ignore"):
        r = 1.0 / np.sqrt(rv_b + eps)
        aw = 1.0 if weight_b is None else np.abs(weight_b)
        ab = 0.0 if bias_b is None else np.abs(bias_b)
        xh = (x - rm_b) * r
        y = xh * (1.0 if weight_b is None else weight_b) + (0.0 if bias_b is None else bias_b)
        E_y = u * (4 * (aw * r * (np.abs(x) + np.abs(rm_b)) + ab + np.abs(y)) + 3 * aw * np.abs(xh))
        if contract in ("stats_d", "epi_d"):
            E_y = E_y + 2 * UNIT_ROUNDOFF[case_dtype] * (aw * np.abs(xh) + np.abs(y))
        if contract == "epi_d":          # the pointwise roundings to d (bounds/_rows.py's epi_d terms)
            E_y = E_y + 2 * UNIT_ROUNDOFF[case_dtype] * (aw * r * (np.abs(x) + np.abs(rm_b)) + ab + np.abs(y)) \
                + 2 * ETA[case_dtype] * (1 + aw)
        out = {"y": E_y}
        grads = {}
        if dy is not None:
            grads["x"] = u * 6 * np.abs(dy) * aw * r
            if contract in ("stats_d", "epi_d"):     # r held in d; epi_d: dy * w and * r rounded to d too
                grads["x"] = grads["x"] + (2 if contract == "stats_d" else 4) * UNIT_ROUNDOFF[case_dtype] \
                    * np.abs(dy) * aw * r
            axes = tuple(i for i, (p, s) in enumerate(zip(pshape_bcast, x.shape)) if p == 1 and s != 1)
            m = max(1, math.prod(x.shape[i] for i in axes))
            # stats_d: the parameter-gradient accumulators may be held in the case dtype (u_d g(m))
            ud = UNIT_ROUNDOFF[case_dtype] if contract in ("stats_d", "epi_d") else 0.0
            if weight_b is not None:
                grads["weight"] = ((u * (gamma(m, reduction) + 6) + ud * gamma(m, reduction)) * np.abs(dy)
                                   * np.abs(xh)).sum(axis=axes, keepdims=True).reshape(pshape_w)
            if bias_b is not None:
                grads["bias"] = ((u + ud) * gamma(m, reduction) * np.abs(dy)).sum(
                    axis=axes, keepdims=True).reshape(pshape_b)
    return out, grads
