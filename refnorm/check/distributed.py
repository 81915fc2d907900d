"""The distributed runner: N processes on torch.distributed, one process group for the whole check.

``run_distributed(backend, dcases, world_size=N)`` starts N rank processes (multiprocessing "forkserver", ``_context``),
each of which joins one torch.distributed group (``backends/torch_group.py``: gloo on CPU, nccl where
each rank has its own GPU) and then serves calls until told to stop. For every step of every distributed
case (refnorm.golden.distributed) the runner sends each rank its shard (``ShardCall``), collects every
rank's ``Returned`` and joins them (``distributed.gather``) into the arrays of one call of the global
op, which ``core.check_case`` judges with the existing bounds, as any single-process call; the
diagnosis tries the distributed pitfall variants (refnorm.pitfalls.distributed) bound to the case's
split, and the op's ordinary variants (a mistake every rank makes alike is the global op's). A replicated array (dweight under sequence parallelism, SyncBatchNorm's running statistics) is
judged as rank 0 returned it, and a rank whose copy is not bit for bit rank 0's fails the case.

Faults. A rank that raises, does not answer within ``timeout`` seconds (per case: every step of it,
from its first call; starting a group has its own limit, 120 s), or dies makes that case an error
naming the rank; the group is then torn down (every rank process asked to stop, then terminated,
killed, and joined) and a fresh one is started before the next case, so the remaining cases still run. A rank returning a wrongly shaped array is an error of the case too; every
rank answered then, so the group is healthy and kept. Rank processes are daemonic, die with the
runner, even a hung rank of a SIGKILLed runner (``supervise.worker_setup``), and are always joined
before ``run_distributed`` returns.
Bad input (exit 2 at the command line): a world size below 2 or larger than a case can be split into,
a port already in use, a backend that is not distributed (``DistError``, ``SplitError``).
"""
from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import socket
import tempfile
import time
from multiprocessing.connection import wait

from .. import pitfalls
from ..errors import RefnormError
from ..golden import distributed as D
from ..golden import generate
from . import core
from .backends.base import Returned
from .backends.dist import ShardCall, is_distributed
from .supervise import ask_stack, last_line, runner_pid, serve, stack_file, where, worker_context, worker_setup


class DistError(RefnormError):
    """Bad input to the distributed runner: the message names the value and what was expected."""


class RankFault(Exception):
    """A rank raised, timed out or died: the case is an error and the group is rebuilt."""


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, device, blob, conn, parent_pid=None, stack_path=None):
    """One rank: join the group, then run calls from ``conn`` until None (or the pipe closes)."""
    worker_setup(parent_pid)
    keep = stack_file(stack_path)                   # noqa: F841 - faulthandler writes to it on request
    try:
        from .backends import torch_group
        group = torch_group.init(rank, world, port, device)
        backend = pickle.loads(blob)
        conn.send(("ready", None))
    except BaseException as e:                      # noqa: BLE001
        conn.send(("raised", f"rank {rank} could not join the group: {type(e).__name__}: {e}"))
        return
    def failed(e):
        tb = last_line()
        return ("raised", f"{type(e).__name__}: {e}".strip() + ("" if tb.startswith(type(e).__name__) else f" ({tb})"))
    serve(conn, lambda call: backend.run(call, rank=rank, group=group), failed)
    try:
        torch_group.destroy()
    except Exception:                               # noqa: BLE001
        pass


def _context():
    """The rank processes' context (supervise.worker_context): every rank process, of every group the
    check starts, forks from one forkserver that imported torch once (torch_group.PRELOAD)."""
    from .backends import torch_group
    return worker_context(torch_group.PRELOAD)


class Pool:
    """N rank processes holding one process group; ``call`` runs one step on every rank."""

    def __init__(self, backend, world, *, port=None, start_timeout=120.0):
        self.world, self.device = world, getattr(backend, "device", "cpu")
        self.fixed_port, self.start_timeout = port, start_timeout
        try:
            self.blob = pickle.dumps(backend)
        except Exception as e:                      # noqa: BLE001
            raise DistError(f"backend {getattr(backend, 'name', backend)!r} cannot be sent to the rank processes: "
                            f"{type(e).__name__}: {e} (a distributed backend must be picklable: a module-level "
                            "class or instance)") from None
        self.procs, self.conns, self.starts, self.pids = [], [], 0, []
        self.stacks = None                          # the ranks' stack files (supervise.stack_file)

    @property
    def up(self) -> bool:
        return bool(self.procs)

    def start(self):
        port = self.fixed_port or free_port()
        if self.fixed_port and not self.starts and not port_free(port):     # a rebuild reuses it (TIME_WAIT)
            raise DistError(f"--port {port}: already in use; expected a free TCP port on 127.0.0.1")
        ctx = _context()
        self.stacks = tempfile.mkdtemp(prefix="refnorm-ranks-")
        for r in range(self.world):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_rank_main, args=(r, self.world, port, self.device, self.blob, child, runner_pid(),
                                                     os.path.join(self.stacks, f"rank{r}.stack")),
                            daemon=True, name=f"refnorm-rank{r}")
            p.start()
            self.pids.append(p.pid)
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        self.starts += 1
        try:
            replies = self._collect(time.monotonic() + self.start_timeout, "join the process group")
        except RankFault as e:
            self.stop()
            raise DistError(f"the {self.world} rank processes could not start a process group on port {port}: {e}") from None
        bad = [m for kind, m in replies if kind != "ready"]
        if bad:
            self.stop()
            raise DistError(f"the process group could not start on port {port}: {bad[0]}")

    def _collect(self, deadline, what):
        """Every rank's reply, in rank order; RankFault at the first raise, death or the deadline. A fault
        is reported with what the other ranks did within a short grace (a rank's death makes its peers'
        collectives fail: the death is named first, as the cause)."""
        replies = [None] * self.world
        pending = {c: r for r, c in enumerate(self.conns)}
        sentinels = {p.sentinel: r for r, p in enumerate(self.procs)}
        faults, grace_end = {}, None
        while pending:
            now = time.monotonic()
            if grace_end is not None and now >= grace_end:
                break
            left = (grace_end if grace_end is not None else deadline) - now
            if left <= 0:
                faults.update(self._late(sorted(pending.values()), what))
                break
            ready = wait(list(pending) + [s for s, r in sentinels.items() if r in pending.values()], timeout=left)
            for obj in ready:
                r = pending.get(obj, sentinels.get(obj))
                if r is None or r not in pending.values():
                    continue
                conn = self.conns[r]
                if conn.poll():
                    try:
                        kind, payload = conn.recv()
                    except (EOFError, OSError):
                        kind, payload = "died", None
                else:
                    kind, payload = "died", None
                del pending[conn]
                if kind == "died":
                    self.procs[r].join(1)
                    faults[r] = f"rank {r} died (exit code {self.procs[r].exitcode})"
                elif kind == "raised":
                    faults[r] = f"rank {r} raised {payload}"
                else:
                    replies[r] = (kind, payload)
            if faults and grace_end is None:
                grace_end = time.monotonic() + 0.5
        if faults:
            order = sorted(faults, key=lambda r: ("died" not in faults[r], "in a collective" in faults[r],
                                                  "within" in faults[r], r))
            raise RankFault("; ".join(faults[r] for r in order))
        return replies

    def _late(self, ranks, what) -> dict:
        """The ranks that did not answer in time, each with where it is (``supervise.where``): the rank
        hung in the backend's own code is told from the ranks waiting for it in a collective."""
        for r in ranks:
            ask_stack(self.procs[r].pid)
        time.sleep(0.3)
        out = {}
        for r in ranks:
            at = where(os.path.join(self.stacks, f"rank{r}.stack")) if self.stacks else None
            if at and at.startswith("waits"):
                out[r] = f"rank {r} {at} (the time limit passed)"
            else:
                out[r] = f"rank {r} did not {what} within the time limit (--timeout)" + (f": {at}" if at else "")
        return out

    def call(self, calls, deadline):
        if not self.up:
            self.start()
        try:
            for r, (c, call) in enumerate(zip(self.conns, calls)):
                try:
                    c.send(call)
                except OSError:                     # BrokenPipeError: it died after its last answer
                    self.procs[r].join(1)
                    raise RankFault(f"rank {r} died (exit code {self.procs[r].exitcode})") from None
            replies = self._collect(deadline, "return")
        except BaseException:
            self.stop(grace=0.2)                    # a rank in a collective may wait for ever: tear down
            raise
        return [payload for _, payload in replies]

    def stop(self, grace=2.0):
        """Tear the group down: ask every rank to stop, give them ``grace`` seconds, then terminate, kill and
        join what is left."""
        for c in self.conns:
            try:
                c.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + grace
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns:
            c.close()
        self.procs, self.conns = [], []
        if self.stacks:
            shutil.rmtree(self.stacks, ignore_errors=True)
            self.stacks = None


class _Gathered:
    """The distributed backend seen by ``core.check_case`` as one single-process backend: ``run`` shards
    the call, runs it on every rank and gathers the parts (module docstring)."""

    def __init__(self, backend, pool, dcase, sizes, timeout):
        self.backend, self.pool, self.d, self.sizes = backend, pool, dcase, sizes
        self.name = getattr(backend, "name", type(backend).__name__)
        self.forward_only = getattr(backend, "forward_only", False)
        self.options = getattr(backend, "options", None)      # declared options (base.py), if any
        self.timeout, self.deadline = timeout or 1e9, None
        self.disagree, self.steps, self.start_seconds = [], 0, 0.0

    def _shards(self, call):
        parts = {p: D.shard(self.d, p, getattr(call, a), self.sizes)
                 for p, a in (("inputs", "inputs"), ("cotangents", "cotangents"), ("state", "state"))}
        axis = self.d.axis(call.inputs["x"].ndim)
        return [ShardCall(call.op, call.dtype, dict(call.config), call.training, parts["inputs"][r],
                          parts["cotangents"][r], parts["state"][r], parallel=self.d.parallel, axis=axis)
                for r in range(len(self.sizes))]

    def supports(self, call):
        return self.backend.supports(self._shards(call)[0])

    def contract(self, call):
        return self.backend.contract(self._shards(call)[0])

    def run(self, call):
        if not self.pool.up:
            t0 = time.perf_counter()
            self.pool.start()                       # its own limit (start_timeout), not the case's
            self.start_seconds += time.perf_counter() - t0      # nor its time
        if self.deadline is None:                   # the case's limit runs from its first call
            self.deadline = time.monotonic() + self.timeout
        rets = self.pool.call(self._shards(call), self.deadline)
        for r, ret in enumerate(rets):
            if not isinstance(ret, Returned):
                raise TypeError(f"rank {r} returned a {type(ret).__name__}, expected a Returned")
        out = {}
        for part in ("outputs", "grads", "state"):
            out[part], bad = D.gather(self.d, part, [dict(getattr(ret, part)) for ret in rets])
            self.disagree += [f"step {self.steps}: {b}" for b in bad]
        self.steps += 1
        not_computed = {}                           # an array some rank declares not computed (any rank's reason)
        for r, ret in enumerate(rets):
            for k, why in dict(getattr(ret, "not_computed", None) or {}).items():
                not_computed.setdefault(k, f"rank {r}: {why}")
        return Returned(out["outputs"], out["grads"], out["state"], not_computed)


def check_world_size(world) -> int:
    if not isinstance(world, int) or isinstance(world, bool) or world < 2:
        raise DistError(f"--world-size {world!r}: expected an integer >= 2 (one process per rank)")
    return world


def check_backend(backend) -> None:
    if not is_distributed(backend):
        raise DistError(f"backend {getattr(backend, 'name', backend)!r} is not distributed: --world-size needs a "
                        "backend with distributed = True and run(call, *, rank, group) "
                        "(refnorm/check/backends/dist.py), e.g. torch-dist-cpu")


class Session:
    """One process group for many cases: ``check(dcase)`` judges one distributed case (the pytest plugin
    judges one item at a time with it); ``close()`` tears the group down (a context manager too)."""

    def __init__(self, backend, world_size, *, timeout=60.0, port=None, diagnose=True):
        check_world_size(world_size)
        check_backend(backend)
        if port is not None and not port_free(port):
            raise DistError(f"--port {port}: already in use; expected a free TCP port on 127.0.0.1")
        self.backend, self.world, self.timeout, self.diagnose = backend, world_size, timeout, diagnose
        self.pool = Pool(backend, world_size, port=port)

    def check(self, d) -> core.CaseResult:
        from ..pitfalls import distributed as PD
        sizes = d.sizes(self.world)
        case = dataclasses.replace(generate.materialize(d.recipe), id=d.id)
        g = _Gathered(self.backend, self.pool, d, sizes, self.timeout)
        # the distributed variants bound to the split, and the op's ordinary ones (a mistake every rank
        # makes alike, e.g. running_var updated with the biased variance, is the global op's mistake)
        variants = PD.bound(d.parallel, sizes) + pitfalls.variants(case.op) if self.diagnose else None
        res = core.check_case(g, case, timeout=None, diagnose=self.diagnose, variants=variants)
        res.seconds = max(0.0, res.seconds - g.start_seconds)     # a case's time excludes starting its group
        if res.status == "error" and "RankFault" in res.message:
            res.message = res.message.replace("backend raised RankFault: ", "")
            res.message += "; the process group was torn down and rebuilt"
        if g.disagree:
            note = "the ranks disagree on replicated arrays (rank 0's judged): " + ", ".join(g.disagree[:6])
            if res.status in ("passed", "partial"):
                res.status, res.message = "failed", note
            elif res.status == "failed":
                res.message += "; " + note
        res.recipe, res.world_size = d.text, self.world      # reproduce: --world-size N --generate 'TEXT'
        if res.status != "passed":
            res.message += f" [split {sizes} over {self.world} ranks]"
        return res

    @property
    def starts(self) -> int:
        """How many times a process group was started (1 + the rebuilds after faults)."""
        return self.pool.starts

    @property
    def pids(self) -> list:
        return list(self.pool.pids)

    def close(self):
        self.pool.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_distributed(backend, dcases, *, world_size, timeout=60.0, progress=None, diagnose=True, port=None,
                    ops=None, dtypes=None, name="distributed cases") -> core.Report:
    """Judge a distributed ``backend`` on ``dcases`` (refnorm.golden.distributed.DistRecipe) with
    ``world_size`` ranks; the process group is started once and rebuilt only after a fault.
    ``report.group_starts`` and ``report.rank_pids`` say how many groups were started and which processes
    ran (every one of them has ended when this returns)."""
    check_world_size(world_size)
    check_backend(backend)
    todo = [d for d in dcases if (not ops or d.op in set(ops)) and (not dtypes or d.recipe.case.dtype in set(dtypes))]
    D.check_world(todo, world_size)
    t0 = time.perf_counter()
    report = core.Report(getattr(backend, "name", type(backend).__name__), f"{name}, world size {world_size}")
    with Session(backend, world_size, timeout=timeout, port=port, diagnose=diagnose) as session:
        for j, d in enumerate(todo):
            if progress:
                progress(j, len(todo), d.id)
            report.cases.append(session.check(d))
    if progress:
        progress(len(todo), len(todo), "")
    report.seconds = time.perf_counter() - t0
    report.group_starts, report.rank_pids = session.starts, session.pids
    return report
