"""Issue 20: distributed normalizers, checked across real processes.

* the merge of refnorm/norms/distributed.py (Chan/Golub/LeVeque, count-weighted) equals the global op
  for any split, unequal and empty shards included (forward, backward, running statistics);
* the splits and the bad-input errors (world size, port, a backend that is not distributed: exit 2);
* the runner on torch.distributed (gloo, 4 ranks): the correct torch-dist-cpu passes every distributed
  case with one process group; every planted pitfall (tests/planted/distributed.py) is caught by at least
  two cases and named by the diagnosis; faults (raise, hang, death, wrong shape) make that case an error,
  the group is rebuilt, the other cases still run, and no rank process is left;
* the JSON/JUnit reports and the pytest plugin carry distributed cases.
"""
from __future__ import annotations

import json
import os
import socket

import numpy as np
import pytest

from refnorm import registry
from refnorm.golden import distributed as D
from refnorm.norms import distributed as M
from refnorm.pitfalls import distributed as PD

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLITS7 = [[7], [3, 4], [1, 6], [0, 7], [2, 0, 5], [0, 0, 7], [1, 1, 5], [7, 0]]


def _cut(a, sizes, axis=0):
    return np.split(a, np.cumsum(sizes)[:-1], axis=axis)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------- the merge reference
@pytest.mark.parametrize("sizes", SPLITS7)
def test_chan_merge_equals_the_global_moments_for_any_split(sizes):
    x = 1e3 + _rng().standard_normal((7, 3, 4))
    n, mean, m2 = M.merge_all(M.shard_moments(s, (0, 2)) for s in _cut(x, sizes))
    g = x.mean(axis=(0, 2))
    assert n == 28
    np.testing.assert_allclose(mean, g, rtol=1e-14)
    np.testing.assert_allclose(m2, ((x - g[None, :, None]) ** 2).sum(axis=(0, 2)), rtol=1e-11)


@pytest.mark.parametrize("sizes", SPLITS7)
@pytest.mark.parametrize("training", [True, False])
def test_sync_batch_norm_merge_equals_the_global_op(sizes, training):
    r = _rng(1)
    x, dy = r.standard_normal((7, 3, 4)) * 2 + 0.5, r.standard_normal((7, 3, 4))
    w, b = r.standard_normal(3), r.standard_normal(3)
    state = {"running_mean": r.standard_normal(3), "running_var": r.random(3) + 0.5,
             "num_batches_tracked": np.asarray(2, dtype=np.int64)}
    cfg = {"eps": 1e-5, "momentum": 0.1}
    want = registry.evaluate("batch_norm", {"x": x, "weight": w, "bias": b}, config=cfg, grad_outputs={"y": dy},
                             state=state, training=training)
    ys, mean, rstd, st, used = M.sync_batch_norm_forward(_cut(x, sizes), w, b, state["running_mean"],
                                                         state["running_var"], 2, training=training, momentum=0.1,
                                                         eps=1e-5)
    dxs, dw, db = M.sync_batch_norm_backward(_cut(dy, sizes), _cut(x, sizes), w, mean, rstd, used_batch_stats=used)
    np.testing.assert_allclose(np.concatenate(ys), want.outputs["y"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(dxs), want.grads["x"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, want.grads["weight"], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(db, want.grads["bias"], rtol=1e-12, atol=1e-12)
    for k in ("running_mean", "running_var"):
        np.testing.assert_allclose(st[k], want.state[k], rtol=1e-13)
    # the diagnosis's correct merge (the variants' common code) is the global op as well
    got = PD.reference("batch", sizes)({"x": x, "weight": w, "bias": b}, cfg, {"y": dy}, "float64", state, training)
    for part in ("outputs", "grads", "state"):
        for k, v in getattr(want, part).items():
            np.testing.assert_allclose(np.asarray(getattr(got, part)[k], dtype=float), np.asarray(v, dtype=float),
                                       rtol=1e-10, atol=1e-12, err_msg=f"{part} {k}")


@pytest.mark.parametrize("sizes", SPLITS7)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_sequence_parallel_parameter_gradients_merge_to_the_global_ones(sizes, op):
    r = _rng(2)
    x, dy, w = r.standard_normal((7, 5)), r.standard_normal((7, 5)), r.standard_normal(5)
    inputs = {"x": x, "weight": w, **({"bias": r.standard_normal(5)} if op == "layer_norm" else {})}
    cfg = {"normalized_shape": [5], "eps": 1e-5}
    want = registry.evaluate(op, inputs, config=cfg, grad_outputs={"y": dy})
    parts = [registry.evaluate(op, {**inputs, "x": xs}, config=cfg, grad_outputs={"y": d})
             for xs, d in zip(_cut(x, sizes), _cut(dy, sizes))]
    for k in inputs:
        if k != "x":
            np.testing.assert_allclose(M.merge_sums([p.grads[k] for p in parts]), want.grads[k], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.concatenate([p.outputs["y"] for p in parts]), want.outputs["y"], rtol=1e-13)


@pytest.mark.parametrize("sizes", SPLITS7)
def test_tensor_parallel_rms_norm_merge_equals_the_global_op(sizes):
    r = _rng(3)
    x, dy, w = r.standard_normal((4, 2, 7)), r.standard_normal((4, 2, 7)), r.standard_normal(7)
    want = registry.evaluate("rms_norm", {"x": x, "weight": w}, config={"normalized_shape": [7], "eps": 1e-5},
                             grad_outputs={"y": dy})
    ys, rstd, dxs, dws = M.tensor_parallel_rms_norm(_cut(x, sizes, 2), _cut(w, sizes), _cut(dy, sizes, 2), eps=1e-5)
    np.testing.assert_allclose(np.concatenate(ys, axis=2), want.outputs["y"], rtol=1e-12)
    np.testing.assert_allclose(rstd, want.outputs["rstd"], rtol=1e-13)
    np.testing.assert_allclose(np.concatenate(dxs, axis=2), want.grads["x"], rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(np.concatenate(dws), want.grads["weight"], rtol=1e-12, atol=1e-13)


def test_every_distributed_variant_differs_from_the_global_op_on_an_unequal_split():
    """A variant equal to the reference could never be told apart: each must move some array."""
    r = _rng(4)
    sizes = [1, 2, 3, 6]
    cases = {"batch": ("batch_norm", {"x": r.standard_normal((12, 3, 2)), "weight": r.random(3), "bias": r.random(3)},
                       {"eps": 1e-5}),
             "sequence": (None, {"x": r.standard_normal((12, 5)), "weight": r.random(5), "bias": r.random(5)},
                          {"normalized_shape": [5], "eps": 1e-5}),
             "tensor": ("rms_norm", {"x": r.standard_normal((3, 12)), "weight": r.random(12)},
                        {"normalized_shape": [12], "eps": 1e-5})}
    state = {"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.asarray(0)}
    seen = set()
    for parallel, (op, inputs, cfg) in cases.items():
        for v in PD.bound(parallel, sizes):
            ins = inputs if v.op != "rms_norm" or parallel == "tensor" else {k: a for k, a in inputs.items() if k != "bias"}
            st = state if v.op == "batch_norm" else {}
            cot = {"y": r.standard_normal(ins["x"].shape)}
            want = registry.evaluate(v.op, ins, config=cfg, grad_outputs=cot, state=st, training=True)
            got = v.evaluate(ins, cfg, st, True, cot, "float64")
            moved = [f"{p}.{k}" for p in ("outputs", "grads", "state") for k, a in getattr(want, p).items()
                     if k in getattr(got, p) and not np.allclose(np.asarray(getattr(got, p)[k], dtype=float),
                                                                 np.asarray(a, dtype=float), rtol=1e-6)]
            assert moved, v.id
            seen.add(v.pitfall_ids[0])
    assert seen == set(PD.IDS)


# ------------------------------------------------------------------------------------- splits
def test_the_splits_of_a_case():
    assert D.split_sizes("equal", 20, 4) == [5, 5, 5, 5]
    assert D.split_sizes("unequal", 20, 4) == [2, 4, 6, 8]
    assert D.split_sizes("single", 20, 4) == [1, 7, 6, 6]
    assert D.split_sizes("empty", 20, 4) == [7, 7, 6, 0]
    for d in D.cases():
        for world in (2, 3, 4):
            s = d.sizes(world)
            assert len(s) == world and sum(s) == d.axis_length and min(s) >= 0
    kinds = {(d.parallel, d.split) for d in D.cases()}
    assert kinds == {(p, s) for p in D.PARALLEL for s in D.SPLITS}
    with pytest.raises(D.SplitError, match=r"world size 40: .* cannot be split 'equal' into 40 ranks \(needs >= 40\)"):
        D.check_world(D.cases(), 40)
    with pytest.raises(D.SplitError, match="world size 1: expected an integer >= 2"):
        D.split_sizes("equal", 20, 1)
    with pytest.raises(D.SplitError, match="tensor parallelism applies to rms_norm, not layer_norm"):
        D.parse("tensor equal layer_norm shape=4x8")


# ------------------------------------------------------------------------- the runner (processes)
def _all_gone(pids):
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                if "\nState:\tZ" not in f.read():
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return not alive


def test_the_correct_backend_passes_every_distributed_case_with_one_group():
    from planted.distributed import run
    from refnorm.check.backends.torch_dist import TorchDistBackend
    rep = run(TorchDistBackend(), world_size=4)
    bad = [(c.id, c.status, c.message[:200]) for c in rep.cases if c.status != "passed"]
    assert not bad, bad
    assert len(rep.cases) == len(D.CASES) and rep.ok
    assert rep.group_starts == 1 and len(rep.rank_pids) == 4 and _all_gone(rep.rank_pids)
    assert sum(a.verdict == "verified" for c in rep.cases for a in c.arrays) > 200


@pytest.mark.parametrize("cls,pid", [(p[0], p[1]) for p in __import__("planted.distributed").distributed.PLANTED],
                         ids=lambda v: getattr(v, "__name__", v))
def test_every_planted_distributed_pitfall_is_caught_twice_and_named(cls, pid):
    from planted.distributed import run
    from refnorm.check.diagnosis import matched_ids
    parallel = {"E08": "batch", "E09": "batch", "DP-RS1": "batch", "DP-RS2": "batch", "DP-SP1": "sequence",
                "DP-TP1": "tensor"}[pid]
    rep = run(cls(), world_size=3, texts=[t for t, _ in D.CASES if t.startswith(parallel + " ")])
    caught = [c for c in rep.cases if c.status in ("failed", "error")]
    named = [c.id for c in caught if pid in matched_ids(c.diagnosis)]
    assert len(named) >= 2, [(c.id, c.status, (c.diagnosis or {}).get("message")) for c in rep.cases]
    assert _all_gone(rep.rank_pids)


@pytest.mark.parametrize("fault", ["raise", "hang", "die", "shape"])
def test_a_faulty_rank_errors_its_case_and_the_rest_still_run(fault):
    from planted.distributed import Faulty, run
    texts = ["sequence equal rms_norm shape=8x16 eps=1e-05", "sequence unequal layer_norm shape=12x16",
             "tensor equal rms_norm shape=4x16 eps=1e-05"]
    rep = run(Faulty(fault, rank=1, op="layer_norm"), world_size=2, texts=texts, timeout=5.0)
    st = {c.id.split("/")[0]: c for c in rep.cases}
    assert [c.status for c in rep.cases] == ["passed", "error", "passed"], [(c.id, c.message) for c in rep.cases]
    msg = st["layer_norm"].message
    want = {"raise": "rank 1 raised RuntimeError: planted fault", "hang": "did not return within the time limit",
            "die": "rank 1 died (exit code 7)",
            "shape": "rank 1 returned output 'y' of shape (3,): the ranks' shards [(4, 16), (3,)] do not join"}[fault]
    assert want in msg and msg.endswith("[split [4, 8] over 2 ranks]"), msg
    if fault == "hang":                     # the hung rank named first, where it hangs; its peer waits for it
        assert msg.startswith("step 0: rank 1 did not return within the time limit (--timeout): it is in run, "
                              "planted/distributed.py:"), msg
        assert "rank 0 waits for a peer in a collective: all_reduce" in msg, msg
        assert st["layer_norm"].seconds < 5.0 + 2.0     # the time limit, not the group's (re)start
    assert rep.group_starts == (1 if fault == "shape" else 2)
    assert _all_gone(rep.rank_pids), rep.rank_pids


def test_ranks_disagreeing_on_a_replicated_array_fail_the_case_naming_the_step():
    from planted.distributed import Faulty, run
    rep = run(Faulty("disagree", rank=1, op="layer_norm"), world_size=2,
              texts=["sequence unequal layer_norm shape=12x16"], timeout=30.0)
    (c,) = rep.cases
    assert c.status == "failed", (c.status, c.message)
    assert "the ranks disagree on replicated arrays (rank 0's judged): step 0: grads weight: rank 1" in c.message
    assert _all_gone(rep.rank_pids)


def test_a_gradient_the_ranks_declare_not_computed_is_unchecked_with_their_reason():
    from planted.distributed import NoWeightGrad, run
    rep = run(NoWeightGrad("cpu"), world_size=2, texts=["sequence unequal layer_norm shape=12x16"], timeout=30.0)
    (c,) = rep.cases
    assert c.status == "partial", (c.status, c.message)
    text = json.dumps(c.to_json())
    assert "grad" in text and "dweight is left to the optimizer's kernel" in text and "rank 0" in text, text
    assert not any(a.name == "weight" and a.part == "grads" for a in c.arrays)


# --------------------------------------------------------------------------------- bad input
def _cli(*args):
    from refnorm.cli import main
    return main(["check", *args, "--no-progress"])


def test_bad_input_is_a_clear_error_exit_2(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cases = [(["--backend", "torch-dist-cpu", "--world-size", "1"], "--world-size 1: expected an integer >= 2"),
                 (["--backend", "torch-dist-cpu", "--world-size", "40"], "cannot be split 'equal' into 40 ranks"),
                 (["--backend", "torch-dist-cpu", "--world-size", "2", "--port", str(port)],
                  f"--port {port}: already in use"),
                 (["--backend", "torch-cpu", "--world-size", "2"], "'torch-cpu' is not distributed"),
                 (["--backend", "torch-dist-cpu"], "a distributed backend: give --world-size N"),
                 (["--backend", "torch-dist-cpu", "--world-size", "2", "--suite", "production"],
                  "--suite does not apply with --world-size"),
                 (["--backend", "torch-dist-cpu", "--world-size", "2", "--generate", "sideways equal rms_norm shape=4x4"],
                  "expected 'PARALLEL SPLIT RECIPE'")]
        for args, want in cases:
            assert _cli(*args) == 2, args
            err = capsys.readouterr().err
            assert want in err, (args, err)


def test_a_distributed_backend_loads_by_import_path_like_any_other():
    from refnorm.check import get_backend
    from refnorm.check.backends.dist import DistributedBackend, is_distributed
    b = get_backend("planted.distributed:E08")
    assert is_distributed(b) and isinstance(b, DistributedBackend) and b.name == "torch-dist-cpu+E08"
    assert not is_distributed(get_backend("numpy"))


def test_json_and_junit_reports_carry_distributed_cases(tmp_path, capsys):
    js, xml = tmp_path / "r.json", tmp_path / "r.xml"
    rc = _cli("--backend", "torch-dist-cpu", "--world-size", "2", "--generate", "batch single batch_norm shape=6x3",
              "--generate", "tensor empty rms_norm shape=3x8 eps=1e-05", "--json", str(js), "--junit-xml", str(xml))
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(js.read_text())
    ids = [c["id"] for c in data["cases"]]
    assert ids == ["batch_norm/dist_batch_single_normal_f32_6x3", "rms_norm/dist_tensor_empty_normal_eps1e-05_f32_3x8"]
    assert [c["status"] for c in data["cases"]] == ["passed", "passed"]
    assert [c["recipe"] for c in data["cases"]] == ["batch single batch_norm shape=6x3",
                                                     "tensor empty rms_norm shape=3x8 eps=1e-05"]
    assert all(c["verdicts"]["verified"] >= 4 and not c["verdicts"]["failed"] for c in data["cases"])
    assert data["summary"]["golden"] == "2 distributed case(s), world size 2"
    text = xml.read_text()
    assert all(i in text for i in ids) and 'failures="0"' in text


def test_the_pytest_plugin_collects_distributed_cases(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    r = pytester.runpytest_subprocess("--refnorm-backend", "torch-dist-cpu",
                                      "--refnorm-world-size", "2", "--refnorm-generate",
                                      "sequence unequal layer_norm shape=6x8", "--refnorm-generate",
                                      "batch empty batch_norm shape=5x2")
    r.assert_outcomes(passed=3)
    r = pytester.runpytest_subprocess("--refnorm-backend", "torch-cpu",
                                      "--refnorm-world-size", "2")
    assert r.ret == 4 and "is not distributed" in r.stderr.str()


pytest_plugins = ["pytester"]


# ------------------------------------------------------------------------------- the derivation
def test_the_merge_is_proven_with_sympy():
    from refnorm.derivations import distributed as P
    claims = P.prove(sizes=(1, 2, 3))      # the full prove() runs m = 1..5 (derivations/distributed.md)
    assert len(claims) == 3 and "for any n_a, n_b > 0" in claims[0] and "splits of m" in claims[1]
    with open(os.path.join(ROOT, P.DOC), encoding="utf-8") as f:
        doc = f.read()
    assert "refnorm/derivations/distributed.py" in doc and "Chan" in doc


def test_the_proof_fails_for_a_merge_that_is_not_count_weighted(monkeypatch):
    """The proof can fail: with every rank's count taken as 1 (E08's merge) it raises."""
    from refnorm.derivations import _proof
    from refnorm.derivations import distributed as P
    real = P._merge
    monkeypatch.setattr(P, "_merge", lambda parts: real([(1 if n else 0, a, b) for n, a, b in parts]))
    with pytest.raises(_proof.ProofError, match=r"split \(1, 2\)"):
        P._sync_bn(3, (1, 2))
    P._sync_bn(2, (1, 1))              # equal shards: the same statistics, no error (E08 needs unequal counts)


@pytest.mark.parametrize("sig", ["SIGKILL", pytest.param("SIGTERM", marks=pytest.mark.thorough)])
def test_no_rank_outlives_a_killed_runner(sig):
    """Issue 35: the runner killed while a rank hangs (and its peer waits in a collective) leaves no
    process behind within 5 s: not the ranks, the fork server nor the resource tracker (before: all four
    lived on until gloo's own timeout, the ranks holding the fork server's "alive" pipe)."""
    import signal

    from helpers import kill_runner_and_count_survivors
    code = ("import sys; sys.path.insert(0, 'tests')\n"
            "from planted.distributed import Faulty, run\n"
            "run(Faulty('hang', rank=1, op='layer_norm'), world_size=2,"
            " texts=['sequence unequal layer_norm shape=12x16'], timeout=600.0)\n")
    left = kill_runner_and_count_survivors(code, cwd=ROOT, workers=4, sig=getattr(signal, sig))
    assert left == [], f"processes left 5 s after the runner got {sig}: {left}"
