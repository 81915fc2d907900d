"""The jax programs of the jax adapter (jax_backend.py, whose docstring says what each op is
translated to and why): ``forward`` builds one call's forward as a function of the differentiable
inputs, the constants and eps, with jax.nn.standardize where jax has the op and a re-implementation
where it has none. jax is imported inside, never at import time."""
from __future__ import annotations

import math

from . import _translate as T


def _eps_value(op: str, cfg) -> float | None:
    """The eps the forward of ``op`` adds, or None (``cfg``: rms_norm's eps=None already resolved for the
    case dtype, ``registry.resolve_options``)."""
    if op in ("local_response_norm", "weight_norm"):
        return None
    return float(cfg["eps"])


def forward(jax, op, cfg, training, tracking, nbt_after, traced_eps, variance):
    """The forward f(diff, const, e) -> (differentiable output, new float state) of one call; ``e`` is
    eps as a traced 0-d array when ``traced_eps`` (``JaxBackend._key``), else unused (eps is a constant);
    ``variance``: "fast" or "stable", jax.nn.standardize's algorithm."""
    import jax.numpy as jnp
    from jax import lax
    alg = variance
    eps0 = _eps_value(op, cfg)

    def eps(e):
        return e if traced_eps else eps0

    def affine(y, d, pshape):
        if "weight" in d:
            y = y * d["weight"].reshape(pshape)
        if "bias" in d:
            y = y + d["bias"].reshape(pshape)
        return y

    if op == "layer_norm":
        ns = T.int_list(cfg["normalized_shape"])

        def f(d, c, e):
            x = d["x"]
            axes = tuple(range(x.ndim - len(ns), x.ndim))
            y = jax.nn.standardize(x, axis=axes, epsilon=eps(e), algorithm=alg)
            return affine(y, d, tuple(ns)), {}
        return f

    if op == "group_norm":
        G = int(cfg["num_groups"])

        def f(d, c, e):
            x = d["x"]
            N, C = x.shape[0], x.shape[1]
            y = jax.nn.standardize(x.reshape(N, G, -1), axis=-1, epsilon=eps(e), algorithm=alg).reshape(x.shape)
            return affine(y, d, (1, C) + (1,) * (x.ndim - 2)), {}
        return f

    if op == "weight_standardization":
        def f(d, c, e):
            x = d["x"]
            return jax.nn.standardize(x, axis=tuple(range(1, x.ndim)), epsilon=eps(e), algorithm=alg), {}
        return f

    if op in ("batch_norm", "instance_norm"):
        use_batch = training or not tracking
        if training and tracking:
            a, p, unbiased = T.momentum_rule(op, cfg, nbt_after)
        else:
            a = p = unbiased = None

        def f(d, c, e):
            x = d["x"]
            C = x.shape[1]
            pb = (1, C) + (1,) * (x.ndim - 2)
            axes = ((0,) if op == "batch_norm" else ()) + tuple(range(2, x.ndim))
            if not use_batch:            # eval with running statistics: the per-channel affine map
                y = jax.nn.standardize(x, axis=axes, mean=c["running_mean"].reshape(pb),
                                       variance=c["running_var"].reshape(pb), epsilon=eps(e))
                return affine(y, d, pb), {"running_mean": c["running_mean"], "running_var": c["running_var"]}
            y = jax.nn.standardize(x, axis=axes, epsilon=eps(e), algorithm=alg)
            new = {}
            if tracking:
                new = {"running_mean": c["running_mean"], "running_var": c["running_var"]}
                if training:
                    # re-implemented (no jax op has running statistics): the statistics standardize
                    # computes, by the same formulas, then refnorm's update rule
                    xs = lax.stop_gradient(x)
                    mean = jnp.mean(xs, axis=axes, keepdims=True)
                    if alg == "fast":
                        var = jnp.clip(jnp.mean(jnp.square(xs), axis=axes, keepdims=True) - jnp.square(mean), 0)
                    else:
                        var = jnp.mean(jnp.square(xs - mean), axis=axes, keepdims=True)
                    n = math.prod(x.shape[i] for i in axes)
                    if unbiased:
                        var = var * (n / (n - 1)) if n > 1 else var
                    if op == "instance_norm":            # the N per-instance updates, averaged
                        mean_c, var_c = jnp.mean(mean.reshape(x.shape[:2]), axis=0), jnp.mean(var.reshape(x.shape[:2]), axis=0)
                    else:
                        mean_c, var_c = mean.reshape(C), var.reshape(C)
                    if n > 0:
                        new = {"running_mean": a * c["running_mean"] + p * mean_c,
                               "running_var": a * c["running_var"] + p * var_c}
            return affine(y, d, pb), new
        return f

    if op == "rms_norm":
        ns = T.int_list(cfg["normalized_shape"])
        inside = cfg["eps_placement"] == "inside"
        off = float(cfg["weight_offset"])

        def f(d, c, e):
            x = d["x"]
            axes = tuple(range(x.ndim - len(ns), x.ndim))
            ms = jnp.mean(jnp.square(x), axis=axes, keepdims=True)
            y = x * lax.rsqrt(ms + eps(e)) if inside else x / (jnp.sqrt(ms) + eps(e))
            if "weight" in d:
                y = y * ((d["weight"] + off) if off else d["weight"])
            return y, {}
        return f

    if op == "local_response_norm":
        size, alpha, beta, k = int(cfg["size"]), float(cfg["alpha"]), float(cfg["beta"]), float(cfg["k"])
        pad = (size // 2, (size - 1) // 2) if cfg["window"] == "torch" else ((size - 1) // 2, size // 2)

        def f(d, c, e):
            x = d["x"]
            nd = x.ndim
            s = lax.reduce_window(jnp.square(x), 0.0, lax.add, (1, size) + (1,) * (nd - 2),
                                  (1,) * nd, [(0, 0), pad] + [(0, 0)] * (nd - 2))
            return x / (k + alpha / size * s) ** beta, {}
        return f

    if op == "lp_normalize":
        p = float(cfg["p"])
        dim = cfg["dim"]
        dims = int(dim) if T.is_int(dim) else tuple(int(a) for a in dim)
        ordp = int(p) if p in (1.0, 2.0) else p

        def f(d, c, e):
            x = d["x"]
            nrm = jnp.linalg.vector_norm(x, ord=ordp, axis=dims, keepdims=True)
            return x / jnp.maximum(nrm, eps(e)), {}
        return f

    if op == "weight_norm":
        dim = cfg["dim"]

        def f(d, c, e):
            v, g = d["v"], d["g"]
            if dim is None:
                axes, keep = tuple(range(v.ndim)), (1,) * v.ndim
            else:
                dd = int(dim) % v.ndim
                axes = tuple(i for i in range(v.ndim) if i != dd)
                keep = tuple(s if i == dd else 1 for i, s in enumerate(v.shape))
            nrm = jnp.linalg.vector_norm(v, axis=axes, keepdims=True)
            return v * (g.reshape(keep) / nrm), {}
        return f

    if op == "mean_variance_norm":
        axes0 = tuple(int(a) for a in cfg["axes"])

        def f(d, c, e):
            x = d["x"]
            axes = tuple(a % x.ndim for a in axes0)
            return (x - jnp.mean(x, axis=axes, keepdims=True)) / (jnp.std(x, axis=axes, keepdims=True) + eps(e)), {}
        return f

    raise NotImplementedError(f"the jax backend has no implementation of {op!r}")   # pragma: no cover
