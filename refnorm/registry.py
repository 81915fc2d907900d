"""Layer 2: the registry of normalizers and the ``evaluate`` contract.

Every normalizer is one module ``refnorm.norms.<name>`` with a ``SPEC`` (``refnorm.spec.NormSpec``);
``NAMES`` lists them explicitly (to add a normalizer, write the module and add its name here).
``evaluate`` validates names, dtypes, options and state, converts everything to float64 (nothing
passed in is ever mutated), runs the forward and, given cotangents, the backward. Inputs and
cotangents that already are float64 arrays are not copied: the normalizer gets a read-only view
(NumPy refuses any write to it), and a returned array that shares memory with one is copied.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Mapping

import numpy as np

from .errors import InputTypeError, RefnormError, ShapeError, UnknownNameError
from .spec import REQUIRED, NormSpec, Result

NAMES: tuple[str, ...] = (
    "batch_norm",
    "layer_norm",
    "instance_norm",
    "group_norm",
    "rms_norm",
    "local_response_norm",
    "lp_normalize",
    "mean_variance_norm",
    "weight_norm",
    "weight_standardization",
    "min_max_scale",
    "z_score",
    "unified_norm",
    "offline_batch_norm",
    "power_norm",
    "batch_renorm",
    "norm_quant",
    "add_norm",
    "adaptive_layer_norm",
    "gated_norm",
    "dyt",
    "poly_norm",
    "norm_quant_block",
    "group_norm_silu",
)


def names() -> tuple[str, ...]:
    """The names of every normalizer refnorm implements."""
    return NAMES


def get(name: str) -> NormSpec:
    """The ``NormSpec`` of normalizer ``name``."""
    if not isinstance(name, str) or name not in NAMES:
        raise UnknownNameError(
            f"unknown normalizer {name!r}; expected one of: {', '.join(NAMES)}")
    spec = importlib.import_module(f"refnorm.norms.{name}").SPEC
    assert spec.name == name, (spec.name, name)
    return spec


def _is_float_dtype(dtype: np.dtype) -> bool:
    """NumPy floats, and ml_dtypes' bfloat16 / float8 types (numpy "void"-kind dtypes)."""
    if dtype.kind == "f":
        return True
    return (dtype.kind == "V" and getattr(dtype.type, "__module__", "").startswith("ml_dtypes")
            and "float" in dtype.name)


def as_float64(what: str, value: Any, *, view: bool = False) -> np.ndarray:
    """A float64 copy of ``value``; integers, booleans, complex and objects are refused.

    view=True: a float64 ndarray is returned as a read-only view instead of a copy (no time or
    memory spent on a copy of a large input; nothing can write through it).
    """
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if not _is_float_dtype(arr.dtype):
        raise InputTypeError(
            f"{what} has dtype {arr.dtype}; expected a floating dtype "
            "(float16, bfloat16, float32, float64); integer inputs are not normalized")
    if view and arr.dtype == np.float64:
        out = np.asarray(arr).view()
        out.flags.writeable = False
        return out
    return np.array(arr, dtype=np.float64, copy=True)


def _mask_as_float(spec: NormSpec, name: str, value: Any) -> Any:
    """A boolean array given for a mask input (``spec.masks``, e.g. unified_norm's ``pad_mask``) as
    float64 0/1 (True = 1); anything else unchanged (then checked as every input is)."""
    if name in spec.masks:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        if arr.dtype == np.bool_:
            return arr.astype(np.float64)
    return value


def _bases(a) -> list:
    """``a`` and the chain of objects whose memory it views (ndarray.base, base.base, ...)."""
    chain = []
    while a is not None:
        chain.append(a)
        a = getattr(a, "base", None)
    return chain


def _unshared(arrays: dict, owners: set) -> dict:
    """``arrays`` with a copy of any array viewing memory of ``owners`` (ids of the caller's inputs,
    their bases and our views of them: NumPy gives every view the memory's owner as its base)."""
    return {k: v.copy() if isinstance(v, np.ndarray) and any(id(b) in owners for b in _bases(v)) else v
            for k, v in arrays.items()}


def _check_mapping(what: str, value: Any) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RefnormError(f"{what} must be a mapping of name -> value, got {type(value).__name__}")
    return value


def _check_names(spec: NormSpec, what: str, given, allowed) -> None:
    unknown = [k for k in given if k not in allowed]
    if unknown:
        raise UnknownNameError(
            f"{spec.name}: unknown {what} {', '.join(map(repr, unknown))}; "
            f"expected {what}s: {', '.join(allowed) if allowed else '(none)'}")


def _check_config_value(spec: NormSpec, key: str, value: Any) -> None:
    """Options are plain JSON-able values; NaN and infinities are refused."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not math.isfinite(float(value)):
            raise RefnormError(f"{spec.name}: option {key}={value!r} must be finite")
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_config_value(spec, key, v)
        return
    raise RefnormError(
        f"{spec.name}: option {key}={value!r} has type {type(value).__name__}; "
        "expected a number, string, bool, None or a list of those")


ENGINES = ("fast", "spec")


def engine_functions(spec: NormSpec, engine: str):
    """(forward, backward) of ``engine``: "fast" the normalizer module's (blocks, threads, compiled row
    kernels), "spec" its plain specification (``refnorm.specs.<name>``: whole-array NumPy, the definition)."""
    if isinstance(engine, tuple):           # a (forward, backward) pair of the same contract (an instrumented spec)
        return engine
    if engine == "fast":
        return spec.forward, spec.backward
    if engine == "spec":
        mod = importlib.import_module(f"refnorm.specs.{spec.name}")
        return mod.forward, mod.backward
    raise UnknownNameError(f"engine {engine!r}; expected one of: {', '.join(ENGINES)}")


def resolve_options(name: str, config: Mapping[str, Any], dtype) -> dict:
    """``config`` with the options whose default depends on the input dtype resolved for inputs of the
    (case) ``dtype`` (a NumPy dtype or a name: "float32", "bfloat16", ...), as ``evaluate`` resolves them
    from the dtype its input x is given in (rms_norm's eps=None: finfo(float32).eps for float32,
    float16 and bfloat16, finfo(float64).eps for float64, torch's rule). Options already set are kept;
    the other options are left as given (defaults are not filled in). A caller that widens a case's
    arrays to float64 before ``evaluate`` resolves the config with the case dtype first."""
    spec = get(name)
    config = dict(config)
    if spec.dtype_options is None:
        return config
    full = {**spec.options, **config}
    resolved = spec.dtype_options(full, {k: dtype for k in spec.inputs})
    return {**config, **{k: v for k, v in resolved.items() if v is not full[k] and v != full[k]}}


def evaluate(name: str, inputs: Mapping[str, Any], *, config: Mapping[str, Any] | None = None,
             grad_outputs: Mapping[str, Any] | None = None,
             state: Mapping[str, Any] | None = None, training: bool = True, engine: str = "fast") -> Result:
    """Run normalizer ``name`` in float64: forward, and backward when ``grad_outputs`` is given.

    inputs:       input name -> array (any floating dtype; computed in float64). ``x`` is the
                  activation (the weight tensor for weight_standardization, ``v`` and ``g`` for
                  weight_norm), ``weight`` and ``bias`` the affine parameters.
    config:       option name -> JSON-able value; torch's keyword names and defaults where torch
                  has the op. An unknown option is an error. A default that depends on the input
                  dtype (rms_norm's eps=None) is resolved from the dtype x is given in, before it is
                  widened to float64 (``resolve_options``).
    grad_outputs: output name -> cotangent. Then ``Result.grads`` has the gradient of
                  sum(cotangent * output) for every input given, keyed by input name.
    state:        stateful normalizers only (batch_norm, instance_norm: ``running_mean``,
                  ``running_var``, ``num_batches_tracked``). ``Result.state`` is the new state.
    training:     train mode (batch statistics) or eval mode (running statistics).
    engine:       "fast" (default) or "spec": the plain specification of ``refnorm/specs/`` (whole-array
                  NumPy, the definition the fast path is tested against; the same validation); or a
                  (forward, backward) pair with the specification's contract (the diagnosis's instrumented
                  specification, refnorm/check/spec_search.py).
    """
    spec = get(name)
    forward, backward = engine_functions(spec, engine)
    inputs = _check_mapping("inputs", inputs)
    config = _check_mapping("config", config)
    state = _check_mapping("state", state)
    _check_names(spec, "input", inputs, spec.inputs)
    missing = [k for k in spec.required if k not in inputs or inputs[k] is None]
    if missing:
        raise RefnormError(f"{spec.name}: missing required input(s) {', '.join(map(repr, missing))}")
    arrays = {k: as_float64(f"{spec.name}: input {k!r}", _mask_as_float(spec, k, v), view=True)
              for k, v in inputs.items() if v is not None}

    _check_names(spec, "option", config, tuple(spec.options))
    for k, v in config.items():
        _check_config_value(spec, k, v)
    cfg = {**spec.options, **config}
    absent = [k for k, v in cfg.items() if v is REQUIRED]
    if absent:
        raise RefnormError(f"{spec.name}: missing required option(s) {', '.join(map(repr, absent))}")
    if spec.dtype_options is not None:           # defaults that depend on the dtype the inputs were given in
        cfg = dict(spec.dtype_options(cfg, {k: np.asarray(v).dtype for k, v in inputs.items() if v is not None}))

    if state and not spec.state:
        raise RefnormError(f"{spec.name} is stateless, but state {', '.join(map(repr, state))} was given")
    _check_names(spec, "state entry", state, spec.state)
    st = {}
    for k, v in state.items():
        if k in spec.integer_state:
            arr = np.array(v, copy=True)
            if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not np.all(arr == np.round(arr))):
                raise InputTypeError(f"{spec.name}: state {k!r} must hold whole numbers, got {arr!r}")
            st[k] = arr.astype(np.int64)
        else:
            st[k] = as_float64(f"{spec.name}: state {k!r}", v)

    if not isinstance(training, (bool, np.bool_)):
        raise RefnormError(f"training must be True or False, got {training!r}")

    with np.errstate(all="ignore"):  # NaN/Inf propagate by design; see each module's docstring
        fwd = forward(arrays, cfg, st, bool(training))
        outputs, new_state, grads = fwd.outputs, fwd.state, {}
        if grad_outputs is not None:
            grad_outputs = _check_mapping("grad_outputs", grad_outputs)
            bad = [k for k in grad_outputs if k not in spec.differentiable]
            if bad:
                stats = [k for k in bad if k in spec.outputs]
                why = (f"{', '.join(map(repr, stats))} are statistics, not differentiable outputs"
                       if stats else f"unknown output(s) {', '.join(map(repr, bad))}")
                raise UnknownNameError(
                    f"{spec.name}: grad_outputs: {why}; differentiable outputs: "
                    f"{', '.join(spec.differentiable) or '(none: the op is forward-only)'}")
            cot = {}
            for k in spec.differentiable:
                if k not in outputs:            # an output this call does not produce (NormSpec.produced_by)
                    if grad_outputs.get(k) is not None:
                        raise RefnormError(f"{spec.name}: grad_outputs[{k!r}] is given, but output {k!r} is "
                                           f"produced only with input {spec.produced_by[k]!r}; expected no "
                                           f"cotangent for it")
                    continue
                if k in grad_outputs and grad_outputs[k] is not None:
                    c = as_float64(f"{spec.name}: grad_outputs[{k!r}]", grad_outputs[k], view=True)
                    if c.shape != outputs[k].shape:
                        raise ShapeError(
                            f"{spec.name}: grad_outputs[{k!r}] has shape {c.shape}; "
                            f"expected the shape of output {k!r}, {outputs[k].shape}")
                    cot[k] = c
                else:
                    cot[k] = np.zeros_like(outputs[k])
            if spec.differentiable:             # a forward-only op (no differentiable output): no backward
                bwd = backward(fwd.ctx, cot)
                grads = bwd.grads
                assert set(grads) == set(arrays), (spec.name, sorted(grads), sorted(arrays))
                if bwd.state is not None:
                    new_state = bwd.state
    views = [a for a in arrays.values() if not a.flags.owndata]
    if grad_outputs is not None:
        views += [c for c in cot.values() if not c.flags.owndata]
    if views:
        owners = {id(b) for u in views for b in _bases(u)}
        outputs, grads, new_state = (_unshared(d, owners) for d in (outputs, grads, new_state))
    return Result(outputs=outputs, grads=grads, state=new_state)
