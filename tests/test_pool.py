"""The output pool (refnorm/norms/_pool.py): reused memory never changes a result and is never shared.

The pool hands out views of buffers it keeps, and reuses a buffer only when nothing but the pool
refers to it. Checked here: reuse happens when (and only when) the caller has let go of every view;
results with a reused buffer full of NaN (every element must be written) equal the results without a
pool, for each normalizer that uses it, compiled and NumPy paths; outputs alive at the same time never
share memory, also across threads; the limit and release(); a bad REFNORM_POOL_MB is refused by name.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import refnorm
from refnorm.errors import ConfigError
from refnorm.norms import _pool

BIG = (4, 64, 32, 32)           # 2 MiB of float64: above _pool.MIN_BYTES


@pytest.fixture(autouse=True)
def _fresh_pool(monkeypatch):
    monkeypatch.delenv("REFNORM_POOL_MB", raising=False)
    _pool.release()
    yield
    _pool.release()


def _owner(a: np.ndarray) -> np.ndarray:
    return a if a.base is None else a.base


def test_a_released_buffer_is_reused_and_a_held_one_is_not():
    a = _pool.empty(BIG)
    owner = id(_owner(a))
    b = _pool.empty(BIG)                                  # a still held: a new buffer
    assert not np.shares_memory(a, b)
    del a
    c = _pool.empty(BIG)                                  # a's buffer is idle again
    assert id(_owner(c)) == owner
    assert c.shape == BIG and c.dtype == np.float64 and c.flags.c_contiguous and c.flags.writeable


@pytest.mark.parametrize("keep", ["slice", "reshape", "memoryview", "ravel"])
def test_anything_derived_from_an_output_keeps_its_buffer_busy(keep):
    a = _pool.empty(BIG)
    held = {"slice": lambda: a[1:, ::2], "reshape": lambda: a.reshape(-1, 8),
            "memoryview": lambda: memoryview(a), "ravel": lambda: a.ravel()}[keep]()
    del a
    b = _pool.empty(BIG)
    assert not np.shares_memory(np.asarray(held), b)


def test_small_requests_and_a_zero_limit_bypass_the_pool(monkeypatch):
    small = _pool.empty((10, 10))
    assert small.base is None and _pool.stats()["buffers"] == 0
    monkeypatch.setenv("REFNORM_POOL_MB", "0")
    big = _pool.empty(BIG)
    assert big.base is None and _pool.stats()["buffers"] == 0


@pytest.mark.parametrize("value", ["-1", "lots", "nan", "inf"])
def test_a_bad_limit_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("REFNORM_POOL_MB", value)
    with pytest.raises(ConfigError, match=f"REFNORM_POOL_MB='{value}'.*MiB >= 0"):
        _pool.empty(BIG)


def test_the_pool_keeps_at_most_its_limit_and_release_frees_the_idle_part(monkeypatch):
    monkeypatch.setenv("REFNORM_POOL_MB", "5")            # room for two 2 MiB buffers
    held = [_pool.empty(BIG) for _ in range(4)]           # 8 MiB: the pool keeps what fits
    st = _pool.stats()
    assert st["buffers"] == 2 and st["busy_bytes"] == 4 << 20
    assert len({id(_owner(h)) for h in held}) == 4
    del held
    assert _pool.stats()["idle_bytes"] == 4 << 20
    other = _pool.empty((4, 64, 32, 33))                  # another size: an idle one makes room
    st = _pool.stats()
    assert st["busy_bytes"] == other.nbytes and st["idle_bytes"] == 2 << 20
    assert st["busy_bytes"] + st["idle_bytes"] <= 5 << 20
    del other
    assert _pool.release() == (2 << 20) + 4 * 64 * 32 * 33 * 8
    assert _pool.stats() == {"buffers": 0, "idle": 0, "idle_bytes": 0, "busy_bytes": 0,
                             "limit_bytes": 5 << 20}


def test_threads_never_get_the_same_buffer():
    got, errors = [], []

    def take():
        try:
            for _ in range(50):
                a = _pool.empty(BIG)
                a.fill(threading.get_ident())
                got.append(a)                             # held: must never be handed out again
                assert (a == threading.get_ident()).all()
        except AssertionError as e:                       # pragma: no cover - the failure itself
            errors.append(e)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    owners = [id(_owner(a)) for a in got]
    assert len(set(owners)) == len(owners) == 200


CASES = [
    ("layer_norm", (64, 4096), {"normalized_shape": [4096]}, (4096,)),
    ("rms_norm", (64, 4096), {"normalized_shape": [4096]}, (4096,)),
    ("group_norm", BIG, {"num_groups": 8}, (64,)),
    ("instance_norm", BIG, {}, (64,)),
    ("batch_norm", BIG, {}, (64,)),
]


@pytest.mark.parametrize("native", ["1", "0"], ids=["compiled", "numpy"])
@pytest.mark.parametrize("op,shape,config,pshape", CASES, ids=[c[0] for c in CASES])
def test_results_with_a_poisoned_reused_buffer_equal_those_without_a_pool(monkeypatch, native, op, shape,
                                                                         config, pshape):
    monkeypatch.setenv("REFNORM_NATIVE", native)
    rng = np.random.default_rng(3)
    inputs = {"x": 3 + 2 * rng.standard_normal(shape), "weight": 1 + 0.1 * rng.standard_normal(pshape)}
    if op != "rms_norm":
        inputs["bias"] = 0.1 * rng.standard_normal(pshape)
    cot = {"y": rng.standard_normal(shape)}

    def run():
        r = refnorm.evaluate(op, inputs, config=config, grad_outputs=cot)
        return {**{k: np.array(v) for k, v in r.outputs.items()}, **{"d" + k: v for k, v in r.grads.items()}}

    monkeypatch.setenv("REFNORM_POOL_MB", "0")
    expected = run()
    monkeypatch.setenv("REFNORM_POOL_MB", "256")
    poison = [_pool.empty(shape) for _ in range(2)]       # y's and dx's buffers, full of NaN
    for p in poison:
        p.fill(np.nan)
    del poison, p
    assert _pool.stats()["idle"] == 2
    first = run()
    assert _pool.stats()["buffers"] == 2                  # y and dx went into the poisoned buffers
    second = run()
    for got in (first, second):
        assert got.keys() == expected.keys()
        for k in expected:
            np.testing.assert_array_equal(got[k], expected[k], err_msg=f"{op} {k}", strict=True)
    assert not np.shares_memory(first["y"], second["y"]) or first["y"] is second["y"]


def test_outputs_alive_together_never_share_memory():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 4096))
    cfg = {"normalized_shape": [4096]}
    results = [refnorm.evaluate("layer_norm", {"x": x}, config=cfg, grad_outputs={"y": np.ones_like(x)})
               for _ in range(3)]
    arrays = [a for r in results for a in (r.outputs["y"], r.grads["x"])]
    for i in range(len(arrays)):
        for j in range(i):
            assert not np.shares_memory(arrays[i], arrays[j])
    np.testing.assert_array_equal(arrays[0], arrays[2])


_FORK_CHILD = """
import os, signal
from refnorm.norms import _pool
with _pool._lock:                        # held at the fork, as another thread might hold it
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)                 # a deadlock ends the child, not the test run
        a = _pool.empty((4, 64, 32, 32))
        a.fill(1.0)
        os._exit(0 if a.sum() == a.size else 1)
_, status = os.waitpid(pid, 0)
raise SystemExit(0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 3)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_can_use_the_pool_even_if_a_thread_held_its_lock():
    """In a fresh interpreter (forking pytest's own process, with jax's threads, would warn)."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
