"""Backends the checker can judge, by name (``refnorm check --backend NAME``).

    numpy        refnorm's reference itself (the control; every op and dtype)
    torch-cpu    torch on device "cpu"          (optional: pip install torch==2.13.0)
    torch-cuda   torch on device "cuda"         (reports unavailable without a CUDA device)
    torch-cpu-caseparams, torch-cuda-caseparams: the same with parameters and running statistics in
                 the case dtype too (default: float32 parameters for float16/bfloat16 activations)
    jax          jax.nn.standardize and jax.numpy normalizers with jax.vjp, CPU (optional: pip install jax);
                 jax-stable: the same with jax.nn.standardize's two-pass variance (algorithm="stable");
                 jax-gpu: on jax's GPU device (reports unavailable without one); compiled programs are kept
                 in jax's persistent compilation cache, ~/.cache/refnorm/jax (``--backend-option
                 compilation_cache=DIR|off``, or $REFNORM_JAX_CACHE; jax_backend.py, "Compilation cache")
    onnxruntime  a one-node ONNX model per call on onnxruntime's CPU execution provider, forward only
                 (optional: pip install onnx onnxruntime); onnxruntime-cuda: the CUDA execution
                 provider (reports unavailable without it)
    torch-dist-cpu  distributed (``--world-size N``): torch ops and torch.distributed collectives on a gloo
                 group (SyncBatchNorm, sequence- and tensor-parallel layer_norm/rms_norm; torch_dist.py);
                 torch-dist-cuda: torch's nn.SyncBatchNorm, one GPU per rank (reports unavailable without)

A user's kernel: ``package.module:attr`` or an entry point (``plugin.py``), with ``--backend-option
KEY=VALUE`` for its factory; a torch callable or ``torch.autograd.Function`` in one line:
``from_torch(fn, op, contract=...)`` (``torch_function.py``); an ``nn.Module`` instance:
``from_module(module, op, contract=...)`` (``torch_module.py``).

Frameworks are imported only inside the adapters' methods, never by ``import refnorm``.
"""
from __future__ import annotations

import shlex
import weakref
from functools import partial

from ...errors import UnknownNameError
from .base import Backend, Call, Contract, Returned, complete_config


def _torch(device, param_dtype="float32"):
    from .torch_backend import TorchBackend
    return TorchBackend(device=device, param_dtype=param_dtype)


def _numpy():
    from .numpy_backend import NumpyBackend
    return NumpyBackend()


def _jax(platform="cpu", variance="fast", compilation_cache="default"):
    from .jax_backend import JaxBackend
    return JaxBackend(platform=platform, variance=variance, compilation_cache=compilation_cache)


def _onnxruntime(provider="cpu"):
    from .onnxruntime_backend import OnnxruntimeBackend
    return OnnxruntimeBackend(provider=provider)


def _torch_dist(device):
    from .torch_dist import TorchDistBackend
    return TorchDistBackend(device)


BUILTIN = {"numpy": _numpy, "torch-cpu": partial(_torch, "cpu"), "torch-cuda": partial(_torch, "cuda"),
           "torch-cpu-caseparams": partial(_torch, "cpu", "case"),
           "torch-cuda-caseparams": partial(_torch, "cuda", "case")}
BUILTIN.update({"jax": _jax, "jax-stable": partial(_jax, variance="stable"), "jax-gpu": partial(_jax, "gpu"),
                "onnxruntime": _onnxruntime, "onnxruntime-cuda": partial(_onnxruntime, "cuda")})
BUILTIN.update({"torch-dist-cpu": partial(_torch_dist, "cpu"), "torch-dist-cuda": partial(_torch_dist, "cuda")})


def names():
    return tuple(BUILTIN)


def get_backend(name: str, options=None):
    """The backend called ``name``: a built-in (see the module docstring), ``package.module:attr`` or a
    name in the ``refnorm.backends`` entry-point group (a user's kernel: ``plugin.py``). ``options``
    (``--backend-option KEY=VALUE``): keyword arguments for the factory or class that makes it, e.g.
    ``get_backend("torch-cpu", {"param_dtype": "case"})``; a wrong one is a ``BackendLoadError``."""
    from . import plugin
    options = dict(options or {})
    given = dict(options)
    declared = options.pop("contract", None)       # refnorm's own option: the contract, for any backend
    if name in BUILTIN:
        backend = plugin.build(BUILTIN[name], repr(name), options)
    elif ":" in name:
        backend = plugin.load_import_path(name, options)
    else:
        backend = plugin.load_entry_point(name, options)
    if backend is not None:
        if declared is not None:
            backend = with_contract(backend, declared)
        _remember(backend, name, given)
        return backend
    known = ", ".join((*BUILTIN, *plugin.entry_point_names()))
    raise UnknownNameError(f"unknown backend {name!r}; expected one of: {known}, "
                           "or package.module:attr (a backend object, class or factory)")


class DeclaredContract:
    """A backend with the contract the user declared for it (``--backend-option contract=...``,
    ``with_contract``) in place of its own; every other member is the backend's."""

    def __init__(self, backend, contract):
        self._backend, self._contract = backend, contract

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_backend", "_contract"):   # copy/pickle probing a bare instance
            raise AttributeError(name)
        return getattr(self._backend, name)

    def contract(self, call):
        return self._contract


def with_contract(backend, contract):
    """``backend`` declaring ``contract`` (a ``Contract`` or its one-line string, refnorm/check/contracts.py,
    e.g. "rounds xhat=input, dy_xhat=input") for every call: what ``--backend-option contract=...`` does for
    any backend. A malformed string is a ``BackendLoadError`` naming the bad part."""
    from .base import Contract, parse_contract
    if not isinstance(contract, Contract):
        from ...errors import ConfigError
        try:
            contract = parse_contract(contract)
        except ConfigError as e:
            raise plugin_error(f"--backend-option contract={contract!r}: {e}") from None
    return DeclaredContract(backend, contract)


def plugin_error(message):
    from .plugin import BackendLoadError
    return BackendLoadError(message)


_LOADED = weakref.WeakValueDictionary()       # id -> a backend get_backend made (while it lives)
_LOADED_AS = {}                                # id -> the --backend argument that loads it again


def _remember(backend, name, options) -> None:
    import json
    def text(v):                               # as parse_options reads it back
        if isinstance(v, str):
            try:
                json.loads(v)
            except ValueError:
                return v
        return json.dumps(v)
    arg = name + "".join(f" --backend-option {shlex.quote(f'{k}={text(v)}')}" for k, v in options.items())
    try:
        _LOADED[id(backend)] = backend
    except TypeError:                          # not weak-referenceable: reproduced in Python instead
        return
    _LOADED_AS[id(backend)] = arg


def loaded_as(backend) -> str | None:
    """The ``refnorm check --backend`` argument (with its ``--backend-option``s) that loads ``backend``
    again when ``get_backend`` made it; None for a backend built in Python (``from_torch`` in a script),
    which no command line can name."""
    return _LOADED_AS.get(id(backend)) if _LOADED.get(id(backend)) is backend else None


def from_torch(fn, op, **kw):
    """A backend from a torch callable or ``torch.autograd.Function`` (``torch_function.py``, imported lazily:
    ``import refnorm`` never imports torch)."""
    from .torch_function import from_torch as make
    return make(fn, op, **kw)


def from_module(module, op, **kw):
    """A backend from a torch ``nn.Module`` instance, its parameters set from each case (``torch_module.py``,
    imported lazily)."""
    from .torch_module import from_module as make
    return make(module, op, **kw)


__all__ = ["Backend", "Call", "Contract", "Returned", "complete_config", "from_module", "from_torch", "get_backend",
           "names"]
