"""Values computed once while a scope is active: the diagnosis judges dozens of pitfall variants against one
backend's arrays, and most variants share terms with each other (x_hat of the same statistics, dy * x_hat,
their column sums) and with the judgement (the bias test's counts of the returned values). Outside a scope
nothing is kept and ``once`` just computes.

Arrays are named by their memory (address, shape, strides, dtype) and each entry holds them, so that memory
cannot be reused by another array while the entry lives; the ``keep`` latest entries of each kind are kept.
Thread-safe for the diagnosis's two worker threads: one computes a value while the other waits for it (never
gets another's).
"""
from __future__ import annotations

import contextlib
import threading

_ACTIVE = None   # {kind: [(key, arrays the key names, value), ...]} while ``scope`` is active
_LOCK = threading.Lock()
_BUSY = object()  # the key, in the active memo, of {(kind, key): Event} for the values being computed
_LOCAL = threading.local()  # depth: how many make() calls this thread is inside


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
    """make() once per (the arrays ``held``, the hashable ``extra``) within ``scope``; else make(). A thread
    asking for a value another thread is computing waits for it (unless it is itself inside a make(), so
    no two threads can wait on each other), then takes it, or computes it if it was not kept."""
    memo = _ACTIVE
    if memo is None:
        return make()
    key = (tuple(_where(a) for a in held), extra)
    while True:
        with _LOCK:
            for k, _, value in memo.setdefault(kind, []):
                if k == key:
                    return value
            busy = memo.setdefault(_BUSY, {})
            ev = busy.get((kind, key))
            if ev is None or getattr(_LOCAL, "depth", 0):
                mine = ev is None
                if mine:
                    ev = busy[(kind, key)] = threading.Event()
                break
        ev.wait()
    _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
    try:
        value = make()
        with _LOCK:
            entries = memo.setdefault(kind, [])
            entries.append((key, held, value))
            del entries[:-keep]
    finally:
        _LOCAL.depth -= 1
        if mine:
            with _LOCK:
                memo[_BUSY].pop((kind, key), None)
            ev.set()
    return value
