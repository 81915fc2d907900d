"""Backends the checker can judge, by name (``refnorm check --backend NAME``).

    numpy        refnorm's reference itself (the control; every op and dtype)
    torch-cpu    torch on device "cpu"          (optional: pip install torch==2.13.0)
    torch-cuda   torch on device "cuda"         (reports unavailable without a CUDA device)
    torch-cpu-caseparams, torch-cuda-caseparams: the same with parameters and running statistics in
                 the case dtype too (default: float32 parameters for float16/bfloat16 activations)

Frameworks are imported only inside the adapters' methods, never by ``import refnorm``.
"""
from __future__ import annotations

from ...errors import UnknownNameError
from .base import Backend, Call, Contract, Returned


def _torch(device, param_dtype="float32"):
    from .torch_backend import TorchBackend
    return TorchBackend(device=device, param_dtype=param_dtype)


def _numpy():
    from .numpy_backend import NumpyBackend
    return NumpyBackend()


BUILTIN = {"numpy": _numpy, "torch-cpu": lambda: _torch("cpu"), "torch-cuda": lambda: _torch("cuda"),
           "torch-cpu-caseparams": lambda: _torch("cpu", "case"), "torch-cuda-caseparams": lambda: _torch("cuda", "case")}


def names():
    return tuple(BUILTIN)


def get_backend(name: str):
    """The backend called ``name`` (see the module docstring)."""
    if name in BUILTIN:
        return BUILTIN[name]()
    raise UnknownNameError(f"unknown backend {name!r}; expected one of: {', '.join(BUILTIN)}")


__all__ = ["Backend", "Call", "Contract", "Returned", "get_backend", "names"]
