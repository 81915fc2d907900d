"""Derived per-element tolerances: for one call, the bound E on |backend - reference| before the
backend's final rounding, for every output, gradient and state array (docs/tolerances.md).

    bounds(op, call, contract) -> {"outputs": {name: E}, "grads": {name: E}, "state": {name: E}}

E = E_acc + E_ref: E_acc is the error a correct implementation under ``contract`` may commit (unit
roundoff of its accumulation dtype, its reduction model); E_ref bounds the float64 reference's own
error (u = 2^-53, pairwise sums), so |backend - reference| <= E_acc + E_ref when both are right.
Arrays without an entry are not judged (the report lists them as unchecked); ``NotBounded`` means
no tolerance has been derived for the op or configuration, and the case is skipped, never passed.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ...errors import RefnormError
from ...norms.rms_norm import default_eps
from ..precision import UNIT_ROUNDOFF, acc_dtype, gamma
from . import standardize as S


BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}     # significand bits


class NotBounded(RefnormError):
    """No tolerance is derived for this op or configuration (the case is skipped with this reason)."""


def _f64(a):
    return None if a is None else np.asarray(a, dtype=np.float64)


def _layer_like(op, x, cfg, w, b, dy, u, red, contract, dt, centered):
    axes, pb, stat_shape = S.trailing(x.shape, cfg["normalized_shape"])
    kw = _eps_mode(cfg)
    if centered:
        eps = float(cfg.get("eps", 1e-5))
        names = ("mean", "rstd")
    else:
        eps = cfg.get("eps", None)
        eps = default_eps(dt) if eps is None else float(eps)          # rms_norm's eps=None: by the case dtype
        names = (None, "rstd")
    off = float(cfg.get("weight_offset", 0.0))       # rms_norm's (1 + w), layer_norm's zero-centred gamma
    if off and w is not None:
        w = w + off
    o, g, _, _ = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=dy, eps=eps, u=u, reduction=red,
                               contract=contract, case_dtype=dt, centered=centered, stat_shape=stat_shape,
                               stat_names=names, **kw)
    return o, g, {}


def _eps_mode(cfg):
    """rms_norm's eps_placement "outside" (rstd = 1 / (sqrt(var) + eps)) as standardize's eps_mode; the
    other standardizing ops read it too, for the diagnosis's variants that place eps there (their bounds:
    pitfalls.Variant.bounds_as)."""
    return {"eps_mode": "std"} if cfg.get("eps_placement", "inside") == "outside" else {}


def _channel_pb(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _running_update(rb, n_slice, n_inst, p, c, rm, rv, rm_new, rv_new, u, red, contract="strict", dt="float64"):
    """Bounds of running_mean/var after rm' = (1-p) rm + p mean, rv' = (1-p) rv + p c var, where
    mean and var average ``n_inst`` slices of ``n_slice`` values each (rows of ``rb`` in channel-
    major order: row = instance * C + channel for instance norm, row = channel for batch norm)."""
    if n_slice == 0:
        return np.zeros_like(rm), np.zeros_like(rv)
    C = rm.shape[0]
    Sv = rb.S.reshape(-1, C).mean(axis=0)
    mu = np.abs(rb.mu).reshape(-1, C).mean(axis=0)
    vk = (rb.var * (1 + rb.K)).reshape(-1, C).mean(axis=0)
    var = rb.var.reshape(-1, C).mean(axis=0)
    gsum = gamma(n_slice, red) + (gamma(n_inst, red) if n_inst > 1 else 0)
    E_rm = u * (gsum * p * Sv + 4 * (np.abs((1 - p) * rm) + np.abs(p) * mu + np.abs(rm_new)))
    E_rv = u * (gsum * abs(p) * c * vk + 4 * (abs(p) * c * var + np.abs((1 - p) * rv) + np.abs(rv_new))) \
        + (gsum * u) ** 2 * abs(p) * c * Sv ** 2
    if contract in ("stats_d", "epi_d"):
        # the batch mean and variance held in the case dtype, the variance about the rounded mean
        ud = UNIT_ROUNDOFF[dt]
        E_rm = E_rm + ud * 2 * np.abs(p) * mu
        E_rv = E_rv + ud * 4 * abs(p) * c * var + 2 * ud ** 2 * abs(p) * c * mu ** 2
        if contract == "epi_d":
            # the update's own arithmetic in the case dtype ((1 - p) rounded, products, the sum)
            E_rm = E_rm + 2 * ud * 4 * (np.abs((1 - p) * rm) + np.abs(p) * mu + np.abs(rm_new))
            E_rv = E_rv + 2 * ud * 4 * (abs(p) * c * var + np.abs((1 - p) * rv) + np.abs(rv_new))
    return E_rm, E_rv


def _batch_like(op, x, cfg, w, b, dy, st, training, ref_state, u, red, contract, dt):
    C = x.shape[1]
    pb = _channel_pb(x)
    eps = float(cfg.get("eps", 1e-5))
    tracking = "running_mean" in st and st["running_mean"] is not None
    if not training and tracking:
        rm = st["running_mean"].reshape(pb)
        rv = st["running_var"].reshape(pb)
        wb = None if w is None else w.reshape(pb)
        bb = None if b is None else b.reshape(pb)
        o, g = S.affine_bounds(x, None, None, wb, bb, dy, rm, rv, eps, u, red, dt, contract, pb,
                               None if w is None else w.shape, None if b is None else b.shape)
        with np.errstate(all="ignore"):
            r = 1.0 / np.sqrt(st["running_var"] + eps)
        shape = (C,) if op == "batch_norm" else (x.shape[0], C)
        o["mean"] = np.zeros(shape)
        o["rstd"] = np.broadcast_to(3 * u * r, shape).copy()
        return o, g, {k: np.zeros_like(np.asarray(v, dtype=np.float64)) for k, v in st.items()}
    if op == "batch_norm":
        axes = (0,) + tuple(range(2, x.ndim))
        o, g, rb, L = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=dy, eps=eps, u=u, reduction=red,
                                    contract=contract, case_dtype=dt, stat_shape=(C,), **_eps_mode(cfg))
        n_slice, n_inst = L.n, 1
    else:
        axes = tuple(range(2, x.ndim))
        o, g, rb, L = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=dy, eps=eps, u=u, reduction=red,
                                    contract=contract, case_dtype=dt, stat_shape=x.shape[:2], **_eps_mode(cfg))
        n_slice, n_inst = L.n, x.shape[0]
    sb = {}
    if training and tracking:
        rm, rv = st["running_mean"], st["running_var"]
        if op == "batch_norm":
            conv = cfg.get("convention", "torch")
            mom = cfg.get("momentum", "default")
            if conv == "onnx":
                m = 0.9 if mom in ("default", None) or not isinstance(mom, (int, float)) else float(mom)
                p, c = 1.0 - m, 1.0
            else:
                if mom is None:
                    p = 1.0 / (float(np.asarray(st.get("num_batches_tracked", 0))) + 1.0)
                else:
                    p = 0.1 if not isinstance(mom, (int, float)) or isinstance(mom, bool) else float(mom)
                c = n_slice / (n_slice - 1) if n_slice > 1 else 1.0
        else:
            mom = cfg.get("momentum", 0.1)
            p = 0.0 if mom is None else float(mom)
            c = n_slice / (n_slice - 1) if n_slice > 1 else 1.0
        E_rm, E_rv = _running_update(rb, n_slice, n_inst, p, c, rm, rv, ref_state["running_mean"],
                                     ref_state["running_var"], u, red, contract, dt)
        sb = {"running_mean": E_rm, "running_var": E_rv}
        if "num_batches_tracked" in st:
            sb["num_batches_tracked"] = np.zeros(np.shape(st["num_batches_tracked"]))
    return o, g, sb


def _offline_batch_norm(x, cfg, w, b, dy, st, training, ref_state, u, red, contract, dt):
    """offline_batch_norm is batch_norm (refnorm/norms/offline_batch_norm.py; tests/norms/test_offline.py: equal
    in both modes, outputs, gradients and running statistics), torch convention (momentum weighs the new
    value, running_var unbiased): batch_norm's bounds, with its state's ``iters`` in place of
    num_batches_tracked (exact, as that is) and the output r (the compensation factor, exactly 1) exact."""
    bn = {"eps": cfg.get("eps", 1e-5), "momentum": cfg.get("momentum", 0.1), "convention": "torch"}
    o, g, sb = _batch_like("batch_norm", x, bn, w, b, dy, {k: v for k, v in st.items() if k != "iters"}, training,
                           ref_state, u, red, contract, dt)
    o["r"] = np.zeros(x.shape[1])
    if "iters" in st:
        sb["iters"] = np.zeros(np.shape(st["iters"]))
    return o, g, sb


def _one(op, inputs, cfg, training, dy, st, ref_state, u, red, contract, dt, cots=None):
    if op in ("add_norm", "adaptive_layer_norm"):
        from . import add_norm as AN
        return getattr(AN, op)(inputs, cfg, cots or {}, u, red, contract, dt)
    if op == "gated_norm":
        from .gated_norm import gated_norm
        return gated_norm(inputs, cfg, cots or {}, u, red, contract, dt)
    if op in ("dyt", "poly_norm"):
        from . import pointwise as PW
        return getattr(PW, op)(inputs, cfg, cots or {}, u, red, contract, dt)
    x = _f64(inputs.get("x"))
    w, b = _f64(inputs.get("weight")), _f64(inputs.get("bias"))
    if op == "layer_norm":
        return _layer_like(op, x, cfg, w, b, dy, u, red, contract, dt, True)
    if op == "rms_norm":
        return _layer_like(op, x, cfg, w, b, dy, u, red, contract, dt, False)
    if op == "group_norm":
        G = int(cfg["num_groups"])
        N, C = x.shape[:2]
        o, g, _, _ = S.standardize(x, (2,), view=(N, G, -1) if x.size else (N, G, 0), weight=w, bias=b,
                                   pshape_bcast=_channel_pb(x), dy=dy, eps=float(cfg.get("eps", 1e-5)), u=u,
                                   reduction=red, contract=contract, case_dtype=dt, stat_shape=(N, G), groups=G,
                                   **_eps_mode(cfg))
        return o, g, {}
    if op == "group_norm_silu":
        from .group_norm_silu import bound
        return bound(inputs, cfg, training, dy, u, red, contract, dt)
    if op in ("batch_norm", "instance_norm"):
        return _batch_like(op, x, cfg, w, b, dy, st, training, ref_state, u, red, contract, dt)
    if op == "offline_batch_norm":
        return _offline_batch_norm(x, cfg, w, b, dy, st, training, ref_state, u, red, contract, dt)
    if op == "weight_standardization":
        axes = tuple(range(1, x.ndim))
        o, g, _, _ = S.standardize(x, axes, dy=dy, eps=float(cfg.get("eps", 1e-5)), u=u, reduction=red,
                                   contract=contract, case_dtype=dt, stat_shape=(x.shape[0],) + (1,) * (x.ndim - 1),
                                   **_eps_mode(cfg))
        return o, g, {}
    if op == "mean_variance_norm":
        axes = tuple(a % x.ndim for a in cfg.get("axes", (0, 2, 3)))
        stat = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        o, g, _, _ = S.standardize(x, axes, dy=dy, eps=float(cfg.get("eps", 1e-9)), u=u, reduction=red,
                                   contract=contract, case_dtype=dt, eps_mode="std", stat_shape=stat,
                                   stat_names=("mean", "std"))
        return o, g, {}
    if op == "z_score":
        dim = cfg.get("dim", -1)
        axes = tuple(a % x.ndim for a in ((dim,) if isinstance(dim, int) else dim))
        stat = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        pb = tuple(s if i in axes else 1 for i, s in enumerate(x.shape))
        o, g, _, _ = S.standardize(x, axes, weight=w, bias=b, pshape_bcast=pb, dy=dy, eps=float(cfg.get("eps", 0.0)),
                                   u=u, reduction=red, contract=contract, case_dtype=dt, ddof=int(cfg.get("ddof", 1)),
                                   stat_shape=stat, stat_names=("mean", "std"))
        return o, g, {}
    if op in ("lp_normalize", "local_response_norm", "weight_norm", "min_max_scale", "norm_quant", "norm_quant_block"):
        import importlib
        return importlib.import_module(f".{op}", __name__).bound(inputs, cfg, training, dy, u, red, contract, dt)
    raise NotBounded(f"no derived tolerance for {op!r} yet: its cases are skipped, not passed")


BOUNDED = ("layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "weight_standardization",
           "mean_variance_norm", "z_score", "lp_normalize", "local_response_norm", "weight_norm", "min_max_scale",
           "norm_quant", "add_norm", "adaptive_layer_norm", "offline_batch_norm", "gated_norm", "dyt", "poly_norm",
           "norm_quant_block", "group_norm_silu")


def array_dtypes(op, config, case_dtype) -> dict:
    """{(part, name): dtype} for the arrays judged in a dtype other than the case dtype: add_norm's
    residual_out with residual_in_fp32 on a float16/bfloat16 case is a float32 output."""
    if op == "add_norm":
        from .add_norm import residual_dtype
        dt = residual_dtype(config, case_dtype)
        if dt != case_dtype:
            return {("outputs", "residual_out"): dt}
    return {}


# the ops whose bounds come from standardize alone (mean and rstd statistics; group_norm_silu: standardize
# and its SiLU terms, computed from E_acc + E_ref of the pre-activation): bounds() asks for
# E_acc + E_ref in one call (standardize.plus_strict); batch_norm and instance_norm too when the call has
# no running statistics (their update's bounds are computed apart: one_pass)
ONE_PASS = ("layer_norm", "rms_norm", "group_norm", "group_norm_silu")
ONE_PASS_STATELESS = ("batch_norm", "instance_norm")


def one_pass(op, state) -> bool:
    """Whether bounds() computes E_acc + E_ref of ``op`` in one call (ONE_PASS, ONE_PASS_STATELESS)."""
    return op in ONE_PASS or (op in ONE_PASS_STATELESS and (state or {}).get("running_mean") is None)


def bounds(op, *, inputs, config, training, cotangents, state, ref_state, contract, case_dtype):
    """E for every judged array of one call (module docstring). ``ref_state``: the reference's new state.
    A contract declaring points beyond its preset (``contract.custom``): the preset's bound plus their
    terms (points.py), for the ops ``contracts.OP_POINTS`` names (a ``ConfigError`` for another)."""
    kw = dict(op=op, inputs=inputs, config=config, training=training, cotangents=cotangents, state=state,
              ref_state=ref_state, contract=contract, case_dtype=case_dtype)
    if not getattr(contract, "custom", False):
        return _bounds(**kw)
    from .. import contracts
    from .points import add_extras
    contracts.validate(op, contract)
    if op == "add_norm" and "x1" in inputs:
        raise NotBounded("add_norm with the parallel branch (x1): a contract beyond the presets is not derived "
                         "for it yet; the case is skipped, not passed")
    with contextlib.ExitStack() as stack:
        if contracts.plain_statistics(contract):  # two-pass plain sums declared: the mean's exact-sum refinement
            from ._rows import plain_statistics
            acc = acc_dtype(case_dtype, contract.acc)
            orders = [contract.accs[k][1:] for k in ("mean", "var")]
            stack.enter_context(plain_statistics(UNIT_ROUNDOFF[acc], BITS[case_dtype], BITS[acc], orders))
        if op == "norm_quant":                    # the points' terms on y, carried through the quantizer
            from .norm_quant import extra_y
            from .points import y_extra
            terms, factor = y_extra(op, contract, inputs=inputs, config=_config(op, config), case_dtype=case_dtype)
            stack.enter_context(extra_y(terms, factor))
        E = _bounds(**kw)
    return add_extras(op, E, contract, inputs=inputs, config=_config(op, config), cotangents=cotangents,
                      case_dtype=case_dtype)


def _config(op, config):
    from ... import registry
    spec = registry.get(op)
    return {**{k: v for k, v in spec.options.items() if isinstance(v, (int, float, str, list, tuple)) or v is None},
            **dict(config)}


def _bounds(op, *, inputs, config, training, cotangents, state, ref_state, contract, case_dtype):
    if op not in BOUNDED:
        raise NotBounded(f"no derived tolerance for {op!r} yet: its cases are skipped, not passed")
    from ... import registry
    spec = registry.get(op)
    cfg = {k: v for k, v in spec.options.items() if isinstance(v, (int, float, str, list, tuple)) or v is None}
    cfg = {**{k: v for k, v in cfg.items()}, **dict(config)}
    for k, v in spec.options.items():
        if k not in config and not isinstance(v, (int, float, str, list, tuple, type(None))):
            cfg[k] = "default"
    dyk = spec.differentiable[0] if spec.differentiable else None       # None: a forward-only op
    dy = _f64(cotangents.get(dyk)) if cotangents and dyk else None
    st = {k: _f64(v) for k, v in (state or {}).items()}
    u = UNIT_ROUNDOFF[acc_dtype(case_dtype, contract.acc)]
    cots = {k: _f64(v) for k, v in (cotangents or {}).items()}
    if one_pass(op, st):            # E_acc + E_ref from one pass over the rows (the same sums)
        with S.plus_strict(UNIT_ROUNDOFF["float64"], "tree"):
            both = _one(op, inputs, cfg, training, dy, st, ref_state, u, contract.reduction, contract.kind,
                        case_dtype, cots)
        return {part: {k: np.asarray(v, dtype=np.float64) for k, v in d.items()}
                for part, d in zip(("outputs", "grads", "state"), both)}
    acc = _one(op, inputs, cfg, training, dy, st, ref_state, u, contract.reduction, contract.kind, case_dtype, cots)
    ref = _one(op, inputs, cfg, training, dy, st, ref_state, UNIT_ROUNDOFF["float64"], "tree", "strict", "float64",
               cots)
    out = {}
    for part, a, r in zip(("outputs", "grads", "state"), acc, ref):
        out[part] = {k: np.asarray(a[k], dtype=np.float64) + np.asarray(r[k], dtype=np.float64) for k in a}
    return out
