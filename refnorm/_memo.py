"""Values computed once while a scope is active: the diagnosis judges dozens of pitfall variants against one
backend's arrays, and most variants share terms with each other (x_hat of the same statistics, dy * x_hat,
their column sums) and with the judgement (the bias test's counts of the returned values). Outside a scope
nothing is kept and ``once`` just computes.

Arrays are named by their memory (address, shape, strides, dtype) and each entry holds them, so that memory
cannot be reused by another array while the entry lives; the ``keep`` latest entries of each kind are kept.
Thread-safe for the diagnosis's two worker threads (two may compute the same value, never get another's).
"""
from __future__ import annotations

import contextlib
import threading

_ACTIVE = None   # {kind: [(key, arrays the key names, value), ...]} while ``scope`` is active
_LOCK = threading.Lock()


@contextlib.contextmanager
def scope():
    """Within it, ``once`` computes each value once (nested scopes share the outer one's values)."""
    global _ACTIVE
    outer, _ACTIVE = _ACTIVE, ({} if _ACTIVE is None else _ACTIVE)
    try:
        yield
    finally:
        _ACTIVE = outer


def active() -> bool:
    return _ACTIVE is not None


def _where(a):
    i = a.__array_interface__
    return (i["data"][0], a.shape, a.strides, a.dtype.str)


def once(kind, held, extra, make, keep=2):
    """make() once per (the arrays ``held``, the hashable ``extra``) within ``scope``; else make()."""
    memo = _ACTIVE
    if memo is None:
        return make()
    key = (tuple(_where(a) for a in held), extra)
    with _LOCK:
        entries = memo.setdefault(kind, [])
        for k, _, value in entries:
            if k == key:
                return value
    value = make()
    with _LOCK:
        entries.append((key, held, value))
        del entries[:-keep]
    return value
