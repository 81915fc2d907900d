"""Small helpers shared by the framework adapters (jax, onnxruntime): option defaults, name checks,
and the translation of refnorm's running-statistics conventions. Nothing here imports a framework."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ... import registry
from ...spec import DEFAULT
from .base import complete_config


def config(op: str, cfg: Mapping) -> dict:
    """refnorm's options of ``op`` with the defaults filled in; KeyError on unknown or missing ones
    (``base.complete_config``, the public helper)."""
    return complete_config(op, cfg)


def preamble(op: str, dtype: str, cfg: Mapping, *, supported, unsupported: Mapping, dtypes,
             backend: str) -> tuple[str | None, dict | None]:
    """The checks every adapter's ``supports_config`` starts with: (reason, None) when ``op`` is not
    refnorm's, has no implementation in this adapter (``unsupported`` gives the reason; an op the
    adapter neither implements nor lists is refused too, so a newly registered normalizer is never
    run by an adapter that does not know it), ``dtype`` is not one of ``dtypes`` or the options are
    not valid; else (None, the options with defaults filled in)."""
    if op not in registry.names():
        return f"unknown op {op!r}", None
    if op in unsupported:
        return unsupported[op], None
    if op not in supported:
        return f"the {backend} backend has no implementation of {op}", None
    if dtype not in dtypes:
        return f"dtype {dtype!r}: the {backend} backend handles {', '.join(dtypes)}", None
    try:
        return None, config(op, cfg)
    except KeyError as e:
        return str(e.args[0]), None


def start_run(backend, call) -> dict:
    """What every adapter's ``run`` checks first: the backend is available (RuntimeError otherwise), it
    supports the call (ValueError), the call's names are refnorm's (KeyError); returns the options with
    their defaults filled in."""
    reason = backend.available()
    if reason:
        raise RuntimeError(f"{backend.name} is not available: {reason}")
    reason = backend.supports(call)
    if reason:
        raise ValueError(f"{backend.name} does not support this call: {reason}")
    check_names(call)
    return config(call.op, call.config)


# the inputs of each op that are activations (held in the case dtype in every parameter layout); the
# other floating inputs are parameters (weight, bias: float32 under param_dtype="float32"). Default: x
ACTIVATIONS = {"weight_norm": ("v", "g"), "add_norm": ("x", "residual", "mask", "rowscale", "x1", "mask1"),
               "adaptive_layer_norm": ("x", "scale", "shift"), "gated_norm": ("x", "z"),
               "norm_quant_block": ("x", "residual")}


def flowing_outputs(spec, cfg: Mapping, cotangents: Mapping, returned) -> list:
    """The differentiable outputs whose cotangents flow back, in the spec's order: the first always; a
    further one (add_norm's residual_out, y1) when it was returned and has a cotangent, unless the call
    does not return it to the model (add_norm's residual_out with prenorm=False: the reference ignores
    its cotangent)."""
    first, *rest = spec.differentiable
    if spec.name == "add_norm" and not cfg.get("prenorm", True):
        rest = [k for k in rest if k != "residual_out"]
    return [first] + [k for k in rest if k in cotangents and k in returned]


def split_state(call, spec, convert) -> tuple[dict, np.ndarray | None]:
    """The call's state as (its float entries, each ``convert(what, array)``; its integer entry, the
    count num_batches_tracked, as int64, or None). An integer entry holding a fraction is a ValueError."""
    floats, count = {}, None
    for k, a in call.state.items():
        if k in spec.integer_state:
            arr = np.asarray(a)
            if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
                raise ValueError(f"{call.op}: state {k!r} must hold whole numbers, got {arr!r}")
            count = arr.astype(np.int64)
        else:
            floats[k] = convert(f"state {k!r}", a)
    return floats, count


def int_list(v) -> list[int]:
    return [int(v)] if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else [int(s) for s in v]


def is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check_names(call) -> None:
    """The call's input, state and cotangent names are refnorm's for the op (KeyError otherwise)."""
    spec = registry.get(call.op)
    if unknown := _outside(call.inputs, spec.inputs):
        raise KeyError(f"{call.op}: unknown input(s) {unknown}; expected {spec.inputs}")
    if missing := _outside(spec.required, call.inputs):
        raise KeyError(f"{call.op}: missing required input(s) {missing}")
    if bad := _outside(call.state, spec.state):
        raise KeyError(f"{call.op}: unknown state {bad}; expected {spec.state or '(none)'}")
    if bad := _outside(call.cotangents, spec.differentiable):
        raise KeyError(f"{call.op}: cotangents for {bad}; differentiable outputs: {spec.differentiable}")


def _outside(names, allowed) -> list:
    """The names that are not among ``allowed``, in order."""
    return [k for k in names if k not in allowed]


def momentum_rule(op: str, cfg: Mapping, nbt_after: int | None):
    """(a, p, unbiased): the running update is ``running = a * running + p * batch`` under refnorm's
    conventions (norms/batch_norm.py, norms/instance_norm.py), with ``unbiased`` telling whether
    running_var takes the unbiased batch variance. torch: a = 1 - p, p = momentum (default 0.1;
    momentum=None: p = 1 / num_batches_tracked after this call's increment, ``nbt_after``); onnx: a = m,
    p = 1 - m (default m = 0.9), the biased variance; instance_norm: torch's rule, momentum=None is 0."""
    mom = cfg["momentum"]
    if op == "instance_norm":
        p = 0.0 if mom is None else float(mom)
        return 1.0 - p, p, True
    if cfg["convention"] == "onnx":
        m = 0.9 if mom is DEFAULT else float(mom)
        return m, 1.0 - m, False
    p = 1.0 / float(nbt_after) if mom is None else (0.1 if mom is DEFAULT else float(mom))
    return 1.0 - p, p, True


def bfloat16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def np_dtype(name: str):
    return bfloat16() if name == "bfloat16" else np.dtype(name)
