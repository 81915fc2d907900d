"""A backend run in its own process, so that a crash or a hang is the error of one case, not the end of
the check (``refnorm check --isolate``).

``Isolated(backend, timeout)`` is a backend: ``supports`` and ``contract`` are asked of the backend in
this process (they only read the call); ``run`` sends the call to a worker process that holds the
backend and waits at most ``timeout`` seconds for the result. When the worker dies (a segmentation
fault, an abort, the kernel's out-of-memory killer) the call raises ``BackendCrashed`` naming the
signal or exit status; when it does not answer in time the worker is killed and the call raises
``core.CaseTimeout``. ``check_case`` makes either an error of that case, and the next call starts a
fresh worker, so the remaining cases still run. A worker dies with this process, even when it hangs
and this process is SIGKILLed (``supervise.worker_setup``), and ``close`` joins it; no process is left
behind.

Workers start from multiprocessing's "forkserver" with torch imported once (every later start forks
from it: no torch thread pool has run there), "spawn" where there is no forkserver. The backend object
is pickled to the worker; calls and results cross as pickles (each array is copied once each way).
"""
from __future__ import annotations

import pickle

from ..errors import RefnormError
from .supervise import describe_exit, last_line, runner_pid, serve, worker_context, worker_setup


class BackendCrashed(Exception):
    """The backend's process died while it ran a call."""


def _worker(blob, conn, parent_pid=None):
    worker_setup(parent_pid)
    backend = pickle.loads(blob)
    serve(conn, backend.run, lambda e: ("notimpl", str(e)) if isinstance(e, NotImplementedError)
          else ("raised", (type(e).__name__, f"{e}".strip(), last_line())))


def _context():
    """The worker's context (supervise.worker_context): a forkserver that imported torch once."""
    return worker_context(["torch"])


class Isolated:
    """``backend`` run in a worker process (module docstring)."""

    def __init__(self, backend, timeout: float = 60.0):
        try:
            self._blob = pickle.dumps(backend)
        except Exception as e:                       # noqa: BLE001
            raise RefnormError(f"--isolate: the backend {getattr(backend, 'name', backend)!r} cannot be sent to "
                               f"a worker process ({type(e).__name__}: {e}); run it without --isolate") from None
        self.backend = backend
        self.timeout = float(timeout)
        self.name = getattr(backend, "name", type(backend).__name__)
        self.forward_only = getattr(backend, "forward_only", False)
        self.options = getattr(backend, "options", None)      # declared options (base.py), if any
        self.proc = self.conn = None
        self.starts = 0

    def supports(self, call):
        return self.backend.supports(call)

    def contract(self, call):
        return self.backend.contract(call)

    def _start(self):
        ctx = _context()
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(self._blob, child, runner_pid()), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        self.starts += 1

    def run(self, call):
        from .core import CaseTimeout
        if self.proc is None or not self.proc.is_alive():
            self._start()
        done = False
        try:
            self.conn.send(call)
            if not self.conn.poll(self.timeout):
                raise CaseTimeout(f"backend did not return within {self.timeout:g} s (its process was killed)")
            try:
                kind, payload = self.conn.recv()
            except (EOFError, OSError):
                self.proc.join(5)
                raise BackendCrashed(f"the backend's process died while it ran the call "
                                     f"({describe_exit(self.proc.exitcode)})") from None
            done = True
        finally:
            if not done:
                self._kill()
        if kind == "ok":
            return payload
        if kind == "notimpl":
            raise NotImplementedError(payload)
        name, text, tb = payload                     # the backend's own exception, by its name
        raise type(name, (Exception,), {})(text + ("" if tb.startswith(name) else f" ({tb})"))

    def _kill(self):
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self):
        """Stop the worker (asked, then killed) and join it."""
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
            except OSError:
                pass
            self.proc.join(2)
        self._kill()

    def pid(self):
        return None if self.proc is None else self.proc.pid
