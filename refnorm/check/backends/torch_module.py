"""A torch ``nn.Module`` instance as a backend in one line: ``from_module(module, op, contract=...)``.

    from refnorm.check.backends import from_module
    backend = from_module(LlamaRMSNorm(4096, eps=1e-6), "rms_norm", contract="strict")
    backend = from_module(GemmaRMSNorm(4096), "rms_norm", contract="strict", fixed={"weight_offset": 1.0})

Each call runs ``module(x)`` with the module's parameters replaced by the case's arrays
(``torch.func.functional_call``): ``params`` maps refnorm input names to the module's parameter names
(default: the op's parameter inputs, weight and bias, that the module has as parameters), each made a
tensor as ``from_torch`` makes it (the case dtype, or float32 with ``param_dtype="float32"``), and the
gradients are taken by autograd on those very tensors. The module itself is never changed.

The options the module fixes are its own, never guessed from a case: ``fixed`` {option: value} declares
them; by default an option is read from the module attribute of the same name (``eps``,
``normalized_shape``, ``num_groups``, ...) or a known alias (``variance_epsilon``, HF's LlamaRMSNorm;
``epsilon``), and ``normalized_shape`` from the weight's shape. A case whose value differs is SKIPPED
with the reason; an option neither fixed nor read is taken to be the module's default (from_torch:
cases that set another value are skipped). A case without a parameter the module has (a case without
weight for a module with one) is skipped: the module would apply its own. Stateful ops (running
statistics) are not supported. Other keywords go to ``from_torch`` (torch_function.py): ``contract``,
``dtypes``, ``param_dtype``, ``not_computed``, ``name``, ...
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ... import registry
from . import _translate as T
from .torch_function import _same as same, from_torch

ALIASES = {"eps": ("eps", "variance_epsilon", "epsilon")}      # option -> module attributes that hold it
PARAMS = ("weight", "bias", "weight1", "bias1", "scale", "shift", "g")


def from_module(module, op: str, *, contract, params: Mapping[str, str] | None = None,
                fixed: Mapping | None = None, inputs: Sequence[str] = ("x",), **kw):
    """A refnorm backend running the ``nn.Module`` instance ``module`` as refnorm's ``op`` (module
    docstring); ``inputs``: the refnorm inputs passed to ``module(...)`` positionally. A bad argument is
    a ``ValueError``/``TypeError`` naming it."""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_module: {module!r} is not a torch.nn.Module instance")
    spec = registry.get(op)
    if spec.state:
        raise ValueError(f"from_module: {op} carries state ({', '.join(spec.state)}), which from_module does not "
                         "pass; wrap the functional form with from_torch")
    own = dict(module.named_parameters())
    params = dict(params) if params is not None else {k: k for k in PARAMS if k in spec.inputs and k in own}
    bad = [f"{k!r} -> {p!r}" for k, p in params.items() if k not in spec.inputs or p not in own]
    if bad:
        raise ValueError(f"from_module: params {', '.join(bad)}: expected {op}'s input names "
                         f"({', '.join(spec.inputs)}) mapped to the module's parameters ({', '.join(own) or 'none'})")
    bad = [k for k in inputs if k not in spec.inputs or k in params]
    if bad:
        raise ValueError(f"from_module: inputs {bad}: expected {op}'s inputs other than the parameters {list(params)}")
    fixed = _fixed_options(module, spec, own.get(params.get("weight", "")), fixed)
    names = (*inputs, *params)
    label = kw.pop("name", None) or f"torch:{type(module).__name__}"
    user = kw.pop("supports", None)

    def fn(*args, **options):                 # options: checked against ``fixed`` by supports, never used
        given = dict(zip(names, args))
        swap = {p: given[k] for k, p in params.items()}
        return torch.func.functional_call(module, swap, tuple(given[k] for k in inputs))

    def supports(call):
        for k, v in fixed.items():
            if not _same(k, call.config[k], v):
                return f"option {k}={call.config[k]!r}: {label} fixes {k}={v!r}"
        absent = [k for k in params if k not in call.inputs]
        if absent:
            return f"input(s) {absent} not given: {label} always applies its own parameter(s) {absent}"
        return user(call) if user is not None else None
    return from_torch(fn, op, contract=contract, name=label, signature=names, options=tuple(fixed),
                      supports=supports, **kw)


def _fixed_options(module, spec, weight, declared) -> dict:
    """The options ``module`` fixes: ``declared`` over those read from its attributes (module docstring).
    ValueError for a declared name that is not an option of the op."""
    declared = dict(declared or {})
    bad = [k for k in declared if k not in spec.options]
    if bad:
        raise ValueError(f"from_module: fixed {bad}: expected options of {spec.name} ({', '.join(spec.options)})")
    out = {}
    for k in spec.options:
        for attr in ALIASES.get(k, (k,)):
            v = getattr(module, attr, None)
            if isinstance(v, (int, float, str, tuple, list)) and not isinstance(v, bool):
                out[k] = list(v) if isinstance(v, tuple) else v
                break
    if "normalized_shape" in spec.options and "normalized_shape" not in out and weight is not None:
        out["normalized_shape"] = list(weight.shape)
    out.update(declared)
    return out


def _same(k, a, b) -> bool:
    if k == "normalized_shape":
        return T.int_list(a) == T.int_list(b)
    return same(a, b)
