"""Process supervision shared by the two runners that put a backend in other processes: the isolated
runner (``isolate.py``, ``refnorm check --isolate``) and the distributed runner (``distributed.py``,
``--world-size N``).

What a worker process does (``worker_setup``, first thing in the worker):

* **It dies with the runner.** A worker started by multiprocessing's "forkserver" is a child of the
  fork server, not of the runner, and (CPython's ``forkserver._serve_one``) it inherits the server's
  "alive" pipe, whose end of file is how the server learns that the runner has gone. A worker that
  hangs (a rank waiting in a collective for a peer that never comes) then keeps the server alive, the
  server keeps the worker's parent-death signal from firing, and all of them (with the resource tracker)
  outlived a SIGKILLed runner until gloo's own 600 s timeout. So each worker closes its copy of the
  alive pipe (the server then exits as soon as the runner is gone) and asks the kernel for SIGKILL
  when its parent dies (Linux ``PR_SET_PDEATHSIG``); and a watchdog thread polls the runner itself
  (its process id, handed down by ``runner_pid``) and kills the worker when it has gone, whoever the
  worker's parent is. tests/test_isolate.py and tests/test_distributed.py SIGKILL a runner with a hung
  worker and find no process left within 5 s.
* **It starts from a fork server** (``worker_context``) that imported the framework once.
* **It answers calls** (``serve``) until told to stop or until its pipe closes.
* **It says where it is** when asked (``stack_file``, ``where``): a worker that did not answer in time
  is sent SIGUSR1, Python's ``faulthandler`` writes its main thread's stack to a file the runner reads,
  and the runner tells a rank hung in the backend's own code from a rank waiting in a collective for
  it ("rank 1 did not return ...: it is in run, planted/distributed.py:109; rank 0 waits for a peer
  in a collective: all_reduce, torch/distributed/distributed_c10d.py:3252").

Nothing here imports a framework.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import threading
import time
import traceback

WATCH_INTERVAL = 0.25          # seconds between two looks at the runner's process


def describe_exit(exitcode) -> str:
    """A process's exit code in words: "killed by SIGSEGV", "exit status 7", "it did not exit"."""
    if exitcode is None:
        return "it did not exit"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def last_line() -> str:
    """The last line of the exception being handled, as ``traceback`` prints it."""
    return traceback.format_exc(limit=2).strip().splitlines()[-1]


def runner_pid() -> int:
    """The runner's process id, to hand to its workers (``worker_setup``)."""
    return os.getpid()


def _close_forkserver_lifeline() -> None:
    try:
        from multiprocessing import forkserver
        server = forkserver._forkserver                       # CPython's module-level ForkServer
        fd = getattr(server, "_forkserver_alive_fd", None)
    except Exception:                                         # noqa: BLE001 - another Python: nothing to close
        return
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None


def _die_with_parent() -> None:
    try:                                                      # Linux: SIGKILL this process when its parent dies
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG = 1
    except Exception:                                         # noqa: BLE001 - best effort elsewhere
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                                   # exists, owned by someone else: pid reused
        return False
    try:                                                      # a zombie has gone too (its parent has not reaped it)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True                                           # no /proc: trust os.kill


def _watch(pid: int) -> None:
    while _alive(pid):
        time.sleep(WATCH_INTERVAL)
    os.kill(os.getpid(), signal.SIGKILL)


def worker_context(preload):
    """The multiprocessing context the workers start from: "forkserver", whose server imports the modules
    ``preload`` once and every worker of the check forks from it (no torch thread pool has run there yet),
    so the process start is paid once per check; "spawn" where there is no forkserver."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx


def worker_setup(parent_pid: int | None) -> None:
    """Make this worker process die with the runner ``parent_pid`` (module docstring)."""
    _close_forkserver_lifeline()
    _die_with_parent()
    if parent_pid is not None:
        threading.Thread(target=_watch, args=(parent_pid,), name="refnorm-runner-watch", daemon=True).start()


def serve(conn, run, failed) -> None:
    """A worker's loop: answer each call from ``conn`` with ("ok", run(call)), or with ``failed(e)`` when
    it raises (any exception: reported to the parent, never hidden), until None or the pipe closes. The
    last line of the exception's traceback is ``last_line()`` within ``failed``."""
    while True:
        try:
            call = conn.recv()
        except (EOFError, OSError):
            break
        if call is None:
            break
        try:
            try:
                answer = ("ok", run(call))
            except BaseException as e:               # noqa: BLE001 - reported to the parent, never hidden
                answer = failed(e)
            conn.send(answer)
        except OSError:                              # the runner has gone (its end of the pipe closed)
            break


# ------------------------------------------------------------------ where is a worker?
STACK_SIGNAL = getattr(signal, "SIGUSR1", None)
COLLECTIVE = ("torch/distributed/", "torch\\distributed\\")     # a frame there: waiting for a peer
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def stack_file(path):
    """In a worker: write this process's main thread's stack to ``path`` when it gets STACK_SIGNAL
    (``faulthandler``, from its C signal handler, so a worker stuck in C code holding the GIL still
    answers). Returns the open file, which the worker must keep; None where there is no such signal."""
    if STACK_SIGNAL is None or path is None:
        return None
    import faulthandler
    f = open(path, "w")                               # noqa: SIM115 - kept open for the worker's life
    f.write(f"main 0x{threading.main_thread().ident:016x}\n")
    f.flush()
    faulthandler.register(STACK_SIGNAL, file=f, all_threads=True, chain=False)
    return f


def ask_stack(pid) -> None:
    """In the runner: ask the worker ``pid`` for its stack (``stack_file``)."""
    if STACK_SIGNAL is not None:
        try:
            os.kill(pid, STACK_SIGNAL)
        except OSError:
            pass


def where(path) -> str | None:
    """What the worker's stack file at ``path`` says of its main thread, in words: "waits for a peer in a
    collective: FUNC, FILE:LINE" when its innermost frame is in torch.distributed, else "it is in FUNC,
    FILE:LINE" (the innermost frame of the code it hangs in). None when nothing was written."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    head, _, dumps = text.partition("\n")
    main = head.split()[-1] if head.startswith("main ") else None
    block = None
    for chunk in re.split(r"\n(?=(?:Current thread|Thread) 0x)", dumps):
        first = chunk.strip().splitlines()[:1]
        if first and main and main in first[0]:
            block = chunk
    if block is None:
        return None
    frames = [m for m in map(_FRAME.match, block.splitlines()) if m]
    if not frames:
        return None
    inner = frames[0]
    spot = f"{inner['func']}, {_short(inner['file'])}:{inner['line']}"
    if any(c in inner["file"] for c in COLLECTIVE):
        return f"waits for a peer in a collective: {spot}"
    own = next((m for m in frames if not any(c in m["file"] for c in COLLECTIVE) and "/threading.py" not in m["file"]
                and "/multiprocessing/" not in m["file"]), inner)
    return f"it is in {own['func']}, {_short(own['file'])}:{own['line']}"


def _short(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-3:]) if "site-packages" in parts else "/".join(parts[-2:])
