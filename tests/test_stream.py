"""The streaming judge (refnorm/check/stream.py): a call judged in blocks of rows gets the verdicts and
figures of the same call judged whole (within rounding), for correct and for wrong results, for every
array: outputs, row statistics, the input's gradient and the parameters' (summed) gradients."""
import math
import zlib

import numpy as np
import pytest

import refnorm
from refnorm.check import stream
from refnorm.check.backends.base import Contract
from refnorm.check.core import judge_call
from refnorm.check.precision import round_to

CASES = [
    ("layer_norm", (3, 40, 48), {"normalized_shape": [48]}, True),
    ("rms_norm", (64, 64), {"normalized_shape": [64], "eps": 1e-6}, True),     # as many rows as features
    ("group_norm", (9, 8, 5, 7), {"num_groups": 4}, True),
    ("weight_standardization", (33, 4, 3, 3), {}, False),
    ("batch_norm", (6, 11, 5, 4), {}, True),                    # channel by channel, running statistics too
    ("group_norm_silu", (9, 8, 5, 7), {"num_groups": 4}, True),  # group_norm's rows, its bounds plus the SiLU's
]


def _call(op, shape, cfg, params, dt, rng, shift=0.0):
    x = (rng.standard_normal(shape) + shift).astype(np.float64)
    ins = {"x": round_to(x, dt)}
    state = {}
    if op == "batch_norm":
        state = {"running_mean": rng.standard_normal(shape[1]), "running_var": rng.random(shape[1]) + 0.5,
                 "num_batches_tracked": np.array(3)}
    if params:
        n = shape[-1] if op in ("layer_norm", "rms_norm") else shape[1]
        ins["weight"] = round_to(rng.standard_normal(n), dt)
        if op != "rms_norm":
            ins["bias"] = round_to(rng.standard_normal(n), dt)
    cot = {"y": round_to(rng.standard_normal(shape), dt)}
    r = refnorm.evaluate(op, {k: v.astype(np.float64) for k, v in ins.items()}, config=cfg,
                         grad_outputs={"y": cot["y"].astype(np.float64)}, state=state)
    got = {"outputs": {k: round_to(v, dt) for k, v in r.outputs.items()},
           "grads": {k: round_to(v, dt) for k, v in r.grads.items()},
           "state": {k: (v if v.dtype.kind in "iu" else round_to(v, "float32")) for k, v in r.state.items()}}
    return ins, cot, got, state


def _judge(op, cfg, dt, ins, cot, state, got, contract, blocks):
    arrays, unchecked = [], []
    compare = {"outputs": tuple(got["outputs"]), "grads": tuple(got["grads"]), "state": tuple(got["state"])}
    ref, _, _ = judge_call(0, op, dt, cfg, True, ins, cot, state, got, compare, True, contract, arrays, unchecked,
                           blocks=blocks)
    return ref, {(a.part, a.name): a for a in arrays}


def _close(x, y, rel=1e-9):
    """Equal within ``rel`` of the larger, or of 1 (the ratios are read against 1: a ratio of sums that
    cancel, such as the bias test's, is small and moves more than its terms)."""
    return (math.isnan(x) and math.isnan(y)) or x == y or abs(x - y) <= rel * max(abs(x), abs(y), 1.0)


@pytest.mark.parametrize("op,shape,cfg,params", CASES)
@pytest.mark.parametrize("dt,contract", [("float32", Contract("strict", "block")),
                                         ("bfloat16", Contract("stats_d", "block"))])
@pytest.mark.parametrize("bug", [None, "row", "scale"])
def test_blocks_judge_as_the_whole(monkeypatch, op, shape, cfg, params, dt, contract, bug):
    rng = np.random.default_rng(zlib.crc32(f"{op} {dt} {bug}".encode()))
    ins, cot, got, state = _call(op, shape, cfg, params, dt, rng, shift=3.0)
    low = dt == "bfloat16"
    if bug == "row":          # one row (the middle one) off by 1% (bfloat16: 10%): beyond the bound of that row only
        y = got["outputs"]["y"].astype(np.float64)
        y.reshape(shape[0], -1)[shape[0] // 2] *= 1.1 if low else 1.01
        got["outputs"]["y"] = round_to(y, dt)
    elif bug == "scale":      # every input gradient scaled by (1 + 2^-9) (bfloat16: 2^-4)
        got["grads"]["x"] = round_to(got["grads"]["x"].astype(np.float64) * (1 + 2.0 ** (-4 if low else -9)), dt)
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    ref, whole = _judge(op, cfg, dt, ins, cot, state, got, contract, blocks=False)
    assert ref is not None
    ref_b, blocked = _judge(op, cfg, dt, ins, cot, state, got, contract, blocks=True)
    assert ref_b is None                                   # judged in blocks
    assert whole.keys() == blocked.keys()
    for key, a in whole.items():
        b = blocked[key]
        assert a.verdict == b.verdict, key
        # a parameter gradient's reference is summed over the blocks in another order, and batch_norm's
        # statistics of a channel block are summed in another grouping: float64 rounding of ~1e-16 moves
        # the error figures (errors of ~u, u = 2^-24 or 2^-8) by ~1e-9 relative
        rel = 1e-7
        for f in ("ratio", "err_u", "bias", "scale", "max_bound"):
            assert _close(getattr(a, f), getattr(b, f), rel), (key, f, getattr(a, f), getattr(b, f))
        assert (a.unconstrained, a.over, a.size, a.dtype) == (b.unconstrained, b.over, b.size, b.dtype)
        assert [w[0] for w in a.worst] == [w[0] for w in b.worst], key
        assert (a.strict_ratio is None) == (b.strict_ratio is None)
        if a.strict_ratio is not None:
            assert _close(a.strict_ratio, b.strict_ratio, rel)
    if bug:
        assert any(a.verdict == "failed" for a in blocked.values())
    else:
        assert all(a.verdict != "failed" for a in blocked.values())


@pytest.mark.parametrize("bug", [None, "row", "scale"])
def test_channel_blocks_read_as_they_lie(monkeypatch, bug):
    """batch_norm's blocks of channels: the compiled comparison reads the returned array's slice and the
    bounds (laid out by channel) as they lie, run by run (compare.STRIDED_RUN), and judges as it does with
    contiguous copies: the same figures (the bias sums within rounding: the runs split otherwise) and the
    same worst elements, their values included."""
    from refnorm.check import compare as C
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    op, shape, cfg, params = CASES[4]
    ins, cot, got, state = _call(op, shape, cfg, params, "float32", np.random.default_rng(9), shift=3.0)
    if bug == "row":
        y = got["outputs"]["y"].astype(np.float64)
        y[2] *= 1.01
        got["outputs"]["y"] = round_to(y, "float32")
    elif bug == "scale":
        got["grads"]["x"] = round_to(got["grads"]["x"].astype(np.float64) * (1 + 2.0 ** -9), "float32")
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    strided_calls = []
    real = C._inner_contiguous
    monkeypatch.setattr(C, "_inner_contiguous", lambda a, axis: strided_calls.append(a.flags.c_contiguous) or
                        real(a, axis))
    monkeypatch.setattr(C, "STRIDED_RUN", 1)
    _, views = _judge(op, cfg, "float32", ins, cot, state, got, Contract("strict", "block"), blocks=True)
    assert strided_calls and not all(strided_calls)           # some views were not contiguous, and were read so
    monkeypatch.setattr(C, "STRIDED_RUN", 1 << 60)
    _, copies = _judge(op, cfg, "float32", ins, cot, state, got, Contract("strict", "block"), blocks=True)
    assert views.keys() == copies.keys()
    for key, a in copies.items():
        b = views[key]
        assert (a.verdict, a.ratio, a.over, a.unconstrained, a.err_u, a.worst, a.scale, a.max_bound) == \
            (b.verdict, b.ratio, b.over, b.unconstrained, b.err_u, b.worst, b.scale, b.max_bound), key
        assert _close(a.bias, b.bias, 1e-12), key
    assert any(a.verdict == "failed" for a in views.values()) == bool(bug)


def test_plan_needs_rows_and_size(monkeypatch):
    x = np.zeros((4, 300))
    assert stream.plan("layer_norm", {"normalized_shape": [300]}, True, {"x": x}, {}, block_elements=1000)
    assert stream.plan("layer_norm", {"normalized_shape": [4, 300]}, True, {"x": x}, {}, block_elements=10) is None
    assert stream.plan("batch_norm", {}, True, {"x": x}, {}, block_elements=10).kind == "channels"
    assert stream.plan("instance_norm", {}, True, {"x": x}, {"running_mean": np.zeros(300)}, block_elements=10) is None
    assert stream.plan("layer_norm", {"normalized_shape": [300]}, True, {"x": x}, {}) is None     # small: whole


@pytest.mark.parametrize("bug", ["ln_no_mean_g", "ln_ddof1"])
def test_a_case_judged_in_blocks_is_diagnosed_on_its_failing_rows(monkeypatch, bug):
    """A failing case judged in blocks is diagnosed on DIAGNOSED_UNITS of its rows (those of the worst
    elements, and rows spread over the rest), and names what the whole-case diagnosis names."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from planted.torch_kernel import BUGS, TorchKernel
    from refnorm.check.core import check_case
    from refnorm.golden import generate
    if bug not in BUGS:
        pytest.skip(f"no planted bug {bug}")
    case = generate.materialize(generate.parse("layer_norm shape=300x256 dtype=float32 regime=normal"))
    whole = check_case(TorchKernel(bug), case)
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 256 * 40)
    blocked = check_case(TorchKernel(bug), case)
    assert whole.status == blocked.status == "failed"
    assert whole.diagnosis["matched"] is not None, whole.diagnosis
    assert blocked.diagnosis["matched"] == whole.diagnosis["matched"], (blocked.diagnosis, whole.diagnosis)


def test_too_many_candidates_judge_again_with_the_scales(monkeypatch):
    """The one pass with running scales keeps the elements it cannot decide; when they are too many,
    the call is judged again with the scales known: the same verdicts and figures as the whole path."""
    from refnorm.check import compare
    op, shape, cfg, params = CASES[0]
    rng = np.random.default_rng(2)
    ins, cot, got, state = _call(op, shape, cfg, params, "float32", rng)
    contract = Contract("strict", "block")
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    _, whole = _judge(op, cfg, "float32", ins, cot, state, got, contract, blocks=False)
    made = []
    real = compare.ArrayAccumulator

    class Spy(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

        def add(self, *a, **k):
            super().add(*a, **k)
            if self.running:                    # as if every block had too many candidates
                self.overflowed = True
    monkeypatch.setattr(stream, "ArrayAccumulator", Spy)
    _, blocked = _judge(op, cfg, "float32", ins, cot, state, got, contract, blocks=True)
    assert any(a.overflowed for a in made) and any(not a.running for a in made)
    assert whole.keys() == blocked.keys()
    for key, a in whole.items():
        b = blocked[key]
        assert (a.verdict, a.unconstrained, a.over) == (b.verdict, b.unconstrained, b.over), key
        for f in ("ratio", "err_u", "scale"):
            assert _close(getattr(a, f), getattr(b, f), 1e-7), (key, f)


@pytest.mark.parametrize("op,shape,cfg,params", [
    ("layer_norm", (7, 33), {"normalized_shape": [33]}, True),
    ("layer_norm", (6, 20), {"normalized_shape": [20]}, False),            # no parameters: two calls
    ("rms_norm", (5, 4, 17), {"normalized_shape": [17], "eps": 1e-6}, True),
    ("group_norm", (3, 8, 5), {"num_groups": 4}, True),
    ("batch_norm", (6, 4, 5), {}, True),                                   # without running statistics
    ("batch_norm", (6, 4, 5), {}, False),
    ("instance_norm", (3, 4, 7), {}, True)])
@pytest.mark.parametrize("contract,dt", [(Contract("strict", "block"), "float32"),
                                         (Contract("stats_d", "block"), "bfloat16"),
                                         (Contract("epi_d", "serial"), "float16")])
def test_bounds_in_one_pass_are_the_two_contracts_summed(monkeypatch, op, shape, cfg, params, contract, dt):
    """bounds.ONE_PASS (E_acc + E_ref from one compiled pass over the rows) gives the sum of the two
    calls, within rounding (the two contracts' coefficients are added before they multiply the formula's
    brackets: refnorm/check/_judge.c, ey_strict)."""
    from refnorm.check import bounds as B
    rng = np.random.default_rng(zlib.crc32(f"{op} {dt} {params}".encode()))
    ins = {"x": rng.standard_normal(shape) + 2}
    if params:
        n = shape[1] if op in ("group_norm", "batch_norm", "instance_norm") else shape[-1]
        ins["weight"] = rng.standard_normal(n)
        if op != "rms_norm":
            ins["bias"] = rng.standard_normal(n)
    kw = dict(inputs=ins, config=cfg, training=True, cotangents={"y": rng.standard_normal(shape)}, state={},
              ref_state={}, contract=contract, case_dtype=dt)
    assert B.one_pass(op, {}) and not B.one_pass("batch_norm", {"running_mean": np.zeros(1)})
    one = B.bounds(op, **kw)
    monkeypatch.setattr(B, "ONE_PASS", ())
    monkeypatch.setattr(B, "ONE_PASS_STATELESS", ())
    two = B.bounds(op, **kw)
    assert {p: set(d) for p, d in one.items()} == {p: set(d) for p, d in two.items()}
    for part, d in two.items():
        for k, v in d.items():
            np.testing.assert_allclose(one[part][k], v, rtol=1e-13, atol=0, err_msg=f"{part}.{k}")


@pytest.mark.parametrize("op,shape,cfg", [
    ("layer_norm", (7, 33), {"normalized_shape": [33]}),
    ("rms_norm", (5, 4, 17), {"normalized_shape": [17], "eps": 1e-6}),
    ("group_norm", (3, 8, 5, 2), {"num_groups": 4}),              # its view (N, G, -1): the compiled path too
    ("batch_norm", (6, 5, 3), {}),
    ("adaptive_layer_norm", (3, 4, 17), {}),                     # per-sample parameters: a pattern row a sample
    ("adaptive_layer_norm", (2, 3, 2, 9), {}),
    ("group_norm_silu", (3, 8, 5, 2), {"num_groups": 4})])
@pytest.mark.parametrize("contract,dt", [(Contract("strict", "block"), "float32"),
                                         (Contract("strict", "tree"), "float64"),
                                         (Contract("stats_d", "block"), "float16"),
                                         (Contract("epi_d", "serial"), "bfloat16")])
def test_compiled_bounds_are_the_numpy_definition(monkeypatch, op, shape, cfg, contract, dt):
    """The compiled row bounds (sums in a plain loop) equal the NumPy definition within rounding, for
    every op whose parameters have a pattern; REFNORM_NATIVE=0 runs the definition."""
    from refnorm.check import bounds as B
    from refnorm.check import compare
    if compare.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    rng = np.random.default_rng(zlib.crc32(f"{op} {dt}".encode()))
    n = shape[1] if op in ("group_norm", "batch_norm", "group_norm_silu") else shape[-1]
    ins = {"x": rng.standard_normal(shape) + 2, "weight": rng.standard_normal(n)}
    if op != "rms_norm":
        ins["bias"] = rng.standard_normal(n)
    if op == "adaptive_layer_norm":
        ins = {"x": ins["x"], "scale": rng.standard_normal((shape[0], n)), "shift": rng.standard_normal((shape[0], n))}
    kw = dict(inputs=ins, config=cfg, training=True, cotangents={"y": rng.standard_normal(shape)}, state={},
              ref_state={}, contract=contract, case_dtype=dt)
    mod = compare.native()
    was = mod.set_isa()
    try:                    # the compiled rows in every instruction set this CPU runs: the same bits
        fasts = [B.bounds(op, **kw) for isa in mod.isas() if mod.set_isa(isa)]
    finally:
        mod.set_isa(was)
    fast = fasts[0]
    for other in fasts[1:]:
        for part, d in fast.items():
            for k, v in d.items():
                assert np.array_equal(other[part][k], v), (part, k)
    monkeypatch.setenv("REFNORM_NATIVE", "0")
    assert compare.native() is None
    slow = B.bounds(op, **kw)
    assert {p: set(d) for p, d in fast.items()} == {p: set(d) for p, d in slow.items()}
    for part, d in slow.items():
        for k, v in d.items():
            np.testing.assert_allclose(fast[part][k], v, rtol=1e-12, atol=0, err_msg=f"{part}.{k}")


def test_reuse_blocks_recycles_memory_and_nothing_else():
    """stream.reuse_blocks (refnorm/check/_reuse.c): inside, a freed large NumPy block is handed to the next
    array of its size (kept, then taken), small ones are not kept; values are the program's; the handler in
    use before comes back on leaving, and every kept block is freed once no thread is inside any more."""
    import threading

    try:
        from refnorm.check import _reuse
    except ImportError:
        if __import__("os").environ.get("CI"):
            pytest.fail("refnorm.check._reuse is not built; under CI it must be")
        pytest.skip("refnorm.check._reuse is not built")
    try:
        from numpy._core.multiarray import get_handler_name
    except ImportError:                                 # NumPy 1.x
        from numpy.core.multiarray import get_handler_name
    before = get_handler_name()
    with stream.reuse_blocks():
        assert get_handler_name() == "refnorm_reuse"
        a = np.arange(1 << 17, dtype=np.float64)          # 1 MiB
        addr = a.ctypes.data
        del a
        assert _reuse.kept() == (1, 1 << 20)
        b = np.empty(1 << 17)
        assert b.ctypes.data == addr and _reuse.kept() == (0, 0)
        b[:] = 2.5
        assert float(b.sum()) == 2.5 * (1 << 17)
        del b
        small = np.ones(1000)
        del small
        assert _reuse.kept() == (1, 1 << 20)            # only blocks of 256 KiB and more
        seen = []

        def worker():                                   # another thread inside and out: nothing is freed
            with stream.reuse_blocks():
                c = np.empty(1 << 16)
                del c
            seen.append(_reuse.kept())
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert seen == [(2, (1 << 20) + (1 << 19))]
        kept_array = np.zeros(1 << 16)                  # calloc'd: never taken from, freed after the scope
    assert get_handler_name() == before and _reuse.kept() == (0, 0)
    del kept_array
    assert _reuse.kept() == (0, 0)

class HalfRepeated:       # x's first half along axis 0 one repeated slice: values that repeat, correctly
    def __init__(self, seed):
        self.rng, self.first = np.random.default_rng(seed), True

    def standard_normal(self, shape):
        a = self.rng.standard_normal(shape)
        if self.first:
            self.first = False
            a[: shape[0] // 2] = a[0]
        return a

    def random(self, n):
        return self.rng.random(n)


@pytest.mark.parametrize("op,shape,cfg,params", CASES)
@pytest.mark.parametrize("bug", [None, "scale"])
def test_multiplicities_taken_as_one_first(monkeypatch, op, shape, cfg, params, bug):
    """stream.py, "Multiplicities": with every count taken as 1 first, every verdict is the exact counts'
    one; a passing bias figure is an upper bound of the exact figure (and says so); an array whose figure
    exceeds 1 is counted and judged again, and its figures are exactly those of the exact counts."""
    dt, contract = "float32", Contract("strict", "block")
    ins, cot, got, state = _call(op, shape, cfg, params, dt, HalfRepeated(zlib.crc32(f"{op} unit {bug}".encode())),
                                 shift=3.0)
    if bug:                   # every input gradient scaled by (1 + 2^-9): the bias test fails it too
        got["grads"]["x"] = round_to(got["grads"]["x"].astype(np.float64) * (1 + 2.0 ** -9), dt)
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    _, exact = _judge(op, cfg, dt, ins, cot, state, got, contract, blocks=True)
    assert not any(a.bias_bound for a in exact.values())
    monkeypatch.setattr(stream, "UNIT_FIRST_ELEMENTS", 1)
    calls = []
    real = stream._multiplicities
    monkeypatch.setattr(stream, "_multiplicities", lambda arrays: calls.append(len(arrays)) or real(arrays))
    _, unit = _judge(op, cfg, dt, ins, cot, state, got, contract, blocks=True)
    assert exact.keys() == unit.keys()
    recounted = 0
    for key, a in exact.items():
        b = unit[key]
        assert a.verdict == b.verdict, key
        assert (a.ratio, a.over, a.unconstrained, a.err_u) == (b.ratio, b.over, b.unconstrained, b.err_u), key
        if not b.bias_bound:          # counted (a failing figure), or judged whole (a summed parameter gradient)
            assert b.bias == a.bias, key
            recounted += b.bias > 1
        else:
            assert b.bias <= 1.0 and b.bias >= a.bias * (1 - 1e-12), (key, a.bias, b.bias)
    if bug:
        assert recounted and exact[("grads", "x")].bias > 1 and calls[-1] >= 1
    else:
        assert recounted == 0 and all(n == 0 for n in calls)
    assert any(b.bias_bound for b in unit.values())


@pytest.mark.parametrize("bug", [None, "scale"])
def test_bucket_count_tables_judge_as_the_counts_per_element(monkeypatch, bug):
    """Arrays of more than EXACT_SLOTS 32-bit values: the stream keeps their bucket counts as a table
    (compare.BucketCounts, looked up per block) instead of per element; the figures are bit for bit those
    of the same counts held per element, the failing array counted again as well."""
    from refnorm.check import compare as C
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    op, shape, cfg, params = CASES[1]             # 64 rows, 32 of them one repeated row: values that repeat
    ins, cot, got, state = _call(op, shape, cfg, params, "float32", HalfRepeated(8), shift=3.0)
    if bug:                   # y (whose values repeat) scaled: counted again
        got["outputs"]["y"] = round_to(got["outputs"]["y"].astype(np.float64) * (1 + 2.0 ** -9), "float32")
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    monkeypatch.setattr(stream, "UNIT_FIRST_ELEMENTS", 1)
    monkeypatch.setattr(C, "EXACT_SLOTS", 1000)
    monkeypatch.setattr(stream, "EXACT_SLOTS", 1000)
    kinds = []
    real = stream._multiplicities
    monkeypatch.setattr(stream, "_multiplicities", lambda arrays: kinds.extend(map(type, real(arrays))) or real(arrays))
    _, tables = _judge(op, cfg, "float32", ins, cot, state, got, Contract("strict", "block"), blocks=True)
    assert (C.BucketCounts in kinds) == bool(bug)
    monkeypatch.setattr(stream, "_multiplicities", lambda arrays: [C.multiplicities(a) for a in arrays])
    _, per_element = _judge(op, cfg, "float32", ins, cot, state, got, Contract("strict", "block"), blocks=True)
    assert repr(tables) == repr(per_element)
    assert (tables[("outputs", "y")].verdict == "failed") == bool(bug)


@pytest.mark.parametrize("bug", [None, "scale"])
def test_capped_counts_judge_as_the_counts_per_element(monkeypatch, bug):
    """Exact counts held in 2 bytes an element (compare.SaturatedCounts: capped at 65535, the capped
    values' exact counts beside): with y = 1.5 on 7 of 8 columns (a value held ~115K times) the figures
    are bit for bit those of the uint32 counts per element."""
    from refnorm.check import compare as C
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    op, shape, cfg = "layer_norm", (512, 256), {"normalized_shape": [256]}
    rng = np.random.default_rng(12)
    x = round_to(rng.standard_normal(shape) + 3.0, "float32")
    w = np.zeros(256)
    w[::8] = round_to(rng.standard_normal(32), "float32")
    ins = {"x": x, "weight": w, "bias": np.full(256, 1.5)}
    cot = {"y": round_to(rng.standard_normal(shape), "float32")}
    r = refnorm.evaluate(op, ins, config=cfg, grad_outputs=cot)
    got = {"outputs": {"y": round_to(r.outputs["y"], "float32")},
           "grads": {k: round_to(v, "float32") for k, v in r.grads.items()}, "state": {}}
    if bug:
        got["outputs"]["y"] = round_to(r.outputs["y"] * (1 + 2.0 ** -9), "float32")
    assert C.multiplicities(got["outputs"]["y"]).max() > 65535
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 5)
    _, capped = _judge(op, cfg, "float32", ins, cot, {}, got, Contract("strict", "block"), blocks=True)
    monkeypatch.setattr(stream, "_multiplicities", lambda arrays: [C.multiplicities(a) for a in arrays])
    _, per_element = _judge(op, cfg, "float32", ins, cot, {}, got, Contract("strict", "block"), blocks=True)
    assert repr(capped) == repr(per_element)
    assert (capped[("outputs", "y")].verdict == "failed") == bool(bug)


def test_unit_counts_bound_the_exact_figure():
    """compare.ArrayAccumulator(unit_counts=True): the bias figure with every multiplicity 1 is above the
    exact one, strictly when values repeat (a 1-d array: the group "all" only)."""
    from refnorm.check.compare import ArrayAccumulator
    rng = np.random.default_rng(5)
    got = round_to(rng.standard_normal(5000), "float32")
    got[:2500] = got[0]                                   # one value held 2501 times
    ref = got.astype(np.float64) * (1 - 2.0 ** -22)       # a systematic error of a few ulps (got is not the
    #                                                       correctly rounded ref, against which the test measures)
    E = np.full(got.shape, 2.0 ** -30)
    figs = []
    for unit in (False, True):
        acc = ArrayAccumulator(got.astype(np.float32), None, "float32", unit_counts=unit)
        acc.add(ref, E, 0)
        figs.append(acc.figures())
    exact, bound = figs
    assert bound["bias_bound"] and not exact["bias_bound"]
    assert bound["bias"] > exact["bias"] > 0
    assert {k: v for k, v in bound.items() if k not in ("bias", "bias_bound")} == \
        {k: v for k, v in exact.items() if k not in ("bias", "bias_bound")}


@pytest.mark.parametrize("op,shape,cfg,params", CASES)
def test_blocked_figures_do_not_depend_on_the_thread_count(monkeypatch, op, shape, cfg, params):
    """The blocks go to two fixed partitions (even, odd) whose figures are merged in a fixed order:
    one thread or two, every figure of every array is the same, bit for bit."""
    rng = np.random.default_rng(zlib.crc32(f"{op} threads".encode()))
    ins, cot, got, state = _call(op, shape, cfg, params, "float32", rng, shift=1.0)
    got["grads"]["x"] = round_to(got["grads"]["x"].astype(np.float64) * (1 + 2.0 ** -9), "float32")
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 7)
    runs = []
    for threads in ("1", "2"):
        monkeypatch.setenv("REFNORM_NUM_THREADS", threads)
        ref, res = _judge(op, cfg, "float32", ins, cot, state, got, Contract("strict", "block"), blocks=True)
        assert ref is None                                   # judged in blocks
        runs.append({k: repr(vars(a)) for k, a in res.items()})
    assert runs[0] == runs[1]
    from refnorm.norms._common import num_threads
    assert num_threads() == 2                          # the second run had two threads
