"""User backends: load a kernel under test by import path or by entry point.

    refnorm check --backend package.module:attr       attr: a backend object, a class, or a
                                                       factory returning one (called with no arguments,
                                                       or with the --backend-option keywords)
    refnorm check --backend NAME                       NAME registered in the entry-point group
                                                       ``refnorm.backends`` of an installed package
    refnorm check --backend X --backend-option K=V     keyword arguments for X's factory or class
                                                       (repeatable; V is read as JSON when it parses:
                                                       eps=1e-6, dims=[1,2], flag=true; else a string)

An import path is resolved with the current directory first on ``sys.path`` (as ``python -m`` and
uvicorn do), so ``--backend examples.tiny_backend:TinyBackend`` works from a checkout. The object is
checked for the protocol of ``base.py`` (``name``, ``available``, ``supports``, ``contract``, ``run``);
an import error, a missing attribute or a missing member is a ``BackendLoadError`` naming it (the CLI
exits with status 2).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys

from ...errors import RefnormError

GROUP = "refnorm.backends"
MEMBERS = ("available", "supports", "contract", "run")      # methods; plus the attribute ``name``
SIGNATURES = {"name": "name: str", "available": "available()", "supports": "supports(call)",
              "contract": "contract(call)", "run": "run(call)"}


class BackendLoadError(RefnormError):
    """A user backend that cannot be imported, built, or lacks members of the backend protocol."""


def missing_members(obj) -> list:
    """The protocol members ``obj`` lacks (an empty list: it is a backend)."""
    out = [] if isinstance(getattr(obj, "name", None), str) else ["name"]
    return out + [m for m in MEMBERS if not callable(getattr(obj, m, None))]


def build(obj, where: str, options=None):
    """A backend from ``obj``: the object itself, an instance of a class, or a factory's result, the
    class or factory called with ``options`` as keyword arguments (none: with no arguments)."""
    options = dict(options or {})
    if not isinstance(obj, type) and not missing_members(obj):
        if options:
            raise BackendLoadError(f"backend {where}: --backend-option {', '.join(sorted(options))} given, but "
                                   f"{where} is a backend object, not a class or factory taking options")
        return obj
    if callable(obj):
        kind = "class" if isinstance(obj, type) else "factory"
        label = getattr(obj, "__name__", None) or getattr(getattr(obj, "func", None), "__name__", None) or repr(obj)
        try:
            made = obj(**options)
        except TypeError as e:
            if options:
                raise BackendLoadError(f"backend {where}: the {kind} {label!r} does not take the options "
                                       f"{_show(options)}: {e}") from e
            raise BackendLoadError(f"backend {where}: calling the {kind} {label!r} with no arguments raised "
                                   f"TypeError: {e}") from e
        except Exception as e:                                  # noqa: BLE001 - the user's code failed
            args = f"with {_show(options)}" if options else "with no arguments"
            raise BackendLoadError(f"backend {where}: calling the {kind} {label!r} {args} raised "
                                   f"{type(e).__name__}: {e}") from e
        obj = made
    elif options:
        raise BackendLoadError(f"backend {where}: --backend-option given, but {type(obj).__name__} is not "
                               "callable")
    missing = missing_members(obj)
    if missing:
        raise BackendLoadError(
            f"backend {where}: {type(obj).__name__} object is not a refnorm backend: it lacks "
            f"{', '.join(SIGNATURES[m] for m in missing)} (the protocol: refnorm/check/backends/base.py; "
            "expected a backend object, a class, or a factory returning one)")
    return obj


def _show(options) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items())


def parse_options(items) -> dict:
    """``KEY=VALUE`` strings (``--backend-option``) as keyword arguments: VALUE read as JSON when it
    parses (1e-6, 3, true, null, [1, 2], "text"), else kept as the string (cpu, float32). A malformed
    item, a key that is not a Python identifier, or a key given twice is a ``BackendLoadError``."""
    import json
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise BackendLoadError(f"--backend-option {item!r}: expected KEY=VALUE with KEY a keyword argument "
                                   "name, e.g. device=cuda or eps=1e-6")
        if key in out:
            raise BackendLoadError(f"--backend-option {key!r} given twice")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def load_import_path(spec: str, options=None):
    """The backend named by ``package.module:attr`` (attr may be dotted: ``module:Class.factory``);
    ``options``: keyword arguments for a class or factory (``build``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise BackendLoadError(f"--backend {spec!r}: expected package.module:attr")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:                                      # noqa: BLE001 - ImportError or the module's own
        raise BackendLoadError(f"--backend {spec!r}: cannot import module {module_name!r}: "
                               f"{type(e).__name__}: {e}") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise BackendLoadError(f"--backend {spec!r}: {getattr(obj, '__name__', module_name)!r} has no "
                                   f"attribute {part!r}")
        obj = getattr(obj, part)
    return build(obj, repr(spec), options)


def entry_point_names() -> tuple:
    """Backend names registered by installed packages in the ``refnorm.backends`` group."""
    return tuple(sorted({ep.name for ep in importlib.metadata.entry_points(group=GROUP)}))


def load_entry_point(name: str, options=None):
    """The backend registered as ``name`` in the ``refnorm.backends`` group, or None when none is."""
    eps = [ep for ep in importlib.metadata.entry_points(group=GROUP) if ep.name == name]
    if not eps:
        return None
    ep = eps[0]
    try:
        obj = ep.load()
    except Exception as e:                                      # noqa: BLE001
        raise BackendLoadError(f"backend {name!r} (entry point {ep.value!r} in group {GROUP!r}): cannot load: "
                               f"{type(e).__name__}: {e}") from e
    return build(obj, f"{name!r} (entry point {ep.value!r})", options)
