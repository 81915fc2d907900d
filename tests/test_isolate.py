"""`refnorm check --isolate` (refnorm/check/isolate.py): a backend that crashes or hangs makes that case
an error, the remaining cases still run, and no worker process is left behind."""
import os
import signal
import sys
import time

import pytest

from refnorm.check.core import run_generated
from refnorm.check.isolate import Isolated
from refnorm.cli import main
from refnorm.golden import generate as G

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from examples.tiny_backend import TinyBackend  # noqa: E402


class Fragile(TinyBackend):
    """TinyBackend that dies of a segmentation fault on 5 rows, hangs on 6, and raises on 7."""
    name = "fragile"

    def run(self, call):
        rows = call.inputs["x"].shape[0]
        if rows == 5:
            os.kill(os.getpid(), signal.SIGSEGV)
        if rows == 6:
            time.sleep(600)
        if rows == 7:
            raise ValueError("seven rows")
        return super().run(call)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_crash_and_a_hang_are_errors_of_their_cases_and_the_rest_still_run():
    recipes = [G.parse(f"layer_norm shape={r}x16 dtype=float32") for r in (4, 5, 6, 7, 8)]
    iso = Isolated(Fragile(), timeout=5.0)
    try:
        rep = run_generated(iso, recipes, timeout=30.0)
        pids = iso.starts
    finally:
        last = iso.pid()
        iso.close()
    status = [c.status for c in rep.cases]
    assert status == ["passed", "error", "error", "error", "passed"], [(c.status, c.message) for c in rep.cases]
    assert "died" in rep.cases[1].message and "SIGSEGV" in rep.cases[1].message
    assert "did not return within 5 s" in rep.cases[2].message
    assert "ValueError" in rep.cases[3].message and "seven rows" in rep.cases[3].message
    assert pids == 3                      # a fresh worker after the crash and after the hang, none after a raise
    assert last is None or not _alive(last)


def test_cli_isolate(capsys):
    rc = main(["check", "--backend", "examples.tiny_backend:TinyBackend", "--isolate", "--no-progress",
               "--generate", "layer_norm shape=4x16 dtype=float32", "--generate", "rms_norm shape=3x8 dtype=bfloat16"])
    assert rc == 0, capsys.readouterr()
    assert "2 passed" in capsys.readouterr().out


def test_isolate_refuses_what_cannot_reach_a_worker():
    class Local(TinyBackend):                  # a class defined in a function cannot be pickled
        pass
    with pytest.raises(Exception, match="cannot be sent to a worker process"):
        Isolated(Local())


@pytest.mark.parametrize("sig", ["SIGKILL", pytest.param("SIGTERM", marks=pytest.mark.thorough)])
def test_no_worker_outlives_a_killed_runner(sig):
    """Issue 35: the runner killed (SIGKILL: an OOM kill; SIGTERM: subprocess.run's timeout) while its
    worker hangs in a call leaves no process behind within 5 s (the fork server, the resource tracker
    and the worker: refnorm/check/supervise.py)."""
    from helpers import kill_runner_and_count_survivors
    code = ("import sys; sys.path[:0] = ['tests', '.']\n"
            "from test_isolate import Fragile\n"
            "from refnorm.check.core import run_generated\n"
            "from refnorm.check.isolate import Isolated\n"
            "from refnorm.golden import generate as G\n"
            "run_generated(Isolated(Fragile(), timeout=600.0), [G.parse('layer_norm shape=6x16 dtype=float32')],"
            " timeout=600.0)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    left = kill_runner_and_count_survivors(code, cwd=root, workers=2, sig=getattr(signal, sig))
    assert left == [], f"processes left 5 s after the runner got {sig}: {left}"
