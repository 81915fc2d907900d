"""Reused memory for the large outputs of the normalizers (y, dx), so that a call does not fault in
fresh pages.

Why: an output of several MiB is a fresh ``mmap`` (or a heap region glibc has just trimmed), and the
kernel clears every page of it on first touch. On the benchmark machine (a VM) that costs about
0.8 us per 4 KiB page: group_norm 8x256x28x28 forward + backward took 5.2-5.4 ms with its two 12 MiB
outputs faulted in on every call and 2.3 ms without (docs/performance.md, "Output buffers"). torch's
CPU allocator does not reuse memory either; how often it faults depends on the state glibc's heap is
in, which is why both libraries' faults per call are in the benchmark's table.

How: ``empty(shape)`` hands out a *view* of a float64 buffer the pool keeps a reference to. While the
caller holds the view, or anything derived from it (NumPy views keep a reference to the buffer that
owns the data; so do memoryviews and torch.from_numpy), the buffer's reference count is above the
pool's own, and it is not reused. Once all of them are gone the buffer is idle and the next request
of the same size gets it back (contents undefined, as ``np.empty``'s). Outputs are never shared:
a buffer is reused only when nothing but the pool refers to it.

Limits: only requests of at least ``MIN_BYTES`` go through the pool; the buffers it keeps (busy or
idle) are at most ``REFNORM_POOL_MB`` MiB (default 256) in all: idle ones are dropped, oldest first,
to make room, and a buffer that still does not fit is not kept (it is freed when the caller lets go
of it). So the pool never holds more than the limit of memory nobody uses. ``REFNORM_POOL_MB=0``
turns it off (plain ``np.empty``); ``release()`` drops every idle buffer now. A free-threaded Python runs without the pool.

Reusing memory does not change a value: every caller writes every element of what it gets (these
were ``np.empty`` before), and tests/test_pool.py checks results with and without the pool.
"""
from __future__ import annotations

import math
import os
import sys
import threading

import numpy as np

from ..errors import ConfigError

MIN_BYTES = 1 << 20
"""Requests below 1 MiB go to NumPy directly (malloc reuses those from its own free lists)."""

DEFAULT_MB = 256

_lock = threading.Lock()
_bufs: list[np.ndarray] = []        # oldest first; each owns its data; the pool's reference is this list


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()        # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _baseline() -> int:
    """The reference count of a buffer that only this pool's list refers to (as getrefcount sees it)."""
    probe = [np.empty(1)]
    return sys.getrefcount(probe[0])


_IDLE_REFS = _baseline()


_COUNTS_ARE_EXACT = getattr(sys, "_is_gil_enabled", lambda: True)()
"""Free-threaded CPython defers some reference counts, so idleness cannot be read off them: no pool."""


def limit_bytes() -> int:
    """REFNORM_POOL_MB as bytes (default 256 MiB); 0 turns the pool off (so does a free-threaded
    Python, where reference counts may lag)."""
    if not _COUNTS_ARE_EXACT:
        return 0
    env = os.environ.get("REFNORM_POOL_MB", "").strip()
    if not env:
        return DEFAULT_MB << 20
    try:
        mb = float(env)
    except ValueError:
        mb = -1.0
    if not math.isfinite(mb) or mb < 0:
        raise ConfigError(f"REFNORM_POOL_MB={env!r}; expected a number of MiB >= 0 (0: no pool)")
    return int(mb * (1 << 20))


def _idle(i: int) -> bool:
    return sys.getrefcount(_bufs[i]) == _IDLE_REFS


def _flags() -> list[bool]:
    """Which buffers are idle (by index: no other local reference may exist while counting)."""
    return [_idle(i) for i in range(len(_bufs))]


def _drop_idle(flags: list[bool], target: int) -> tuple[int, int]:
    """Drop idle buffers, oldest first, while the pool holds more than ``target`` bytes; returns
    (bytes dropped, bytes still held). Holds ``_lock``."""
    held = sum(_bufs[i].nbytes for i in range(len(_bufs)))
    drop = set()
    for i in range(len(_bufs)):
        if held <= target:
            break
        if flags[i]:
            held -= _bufs[i].nbytes
            drop.add(i)
    freed = sum(_bufs[i].nbytes for i in drop)
    _bufs[:] = [_bufs[i] for i in range(len(_bufs)) if i not in drop]
    return freed, held


def empty(shape) -> np.ndarray:
    """An uninitialised float64 array of ``shape``, C-contiguous, writeable, shared with no one."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    limit = limit_bytes()
    if 8 * n < MIN_BYTES or limit == 0:
        return np.empty(shape)
    with _lock:
        flags = _flags()
        for i in range(len(_bufs)):
            if flags[i] and _bufs[i].size == n:
                buf = _bufs.pop(i)
                _bufs.append(buf)                  # most recently used last
                return buf.reshape(shape)          # a view: its .base holds the buffer
        _, held = _drop_idle(flags, limit - 8 * n)   # make room for this one
        buf = np.empty(n)
        if held + 8 * n <= limit:                  # else not kept: freed when the caller lets go
            _bufs.append(buf)
        return buf.reshape(shape)


def release() -> int:
    """Drop every idle buffer now; returns the bytes released to the allocator."""
    with _lock:
        return _drop_idle(_flags(), 0)[0]


def stats() -> dict:
    """{'buffers', 'idle', 'idle_bytes', 'busy_bytes', 'limit_bytes'}: what the pool holds now."""
    with _lock:
        flags = _flags()
        sizes = [_bufs[i].nbytes for i in range(len(_bufs))]
    return {"buffers": len(sizes), "idle": sum(flags),
            "idle_bytes": sum(s for s, f in zip(sizes, flags) if f),
            "busy_bytes": sum(s for s, f in zip(sizes, flags) if not f),
            "limit_bytes": limit_bytes()}
