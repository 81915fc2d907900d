"""The compiled block pipeline (refnorm/check/pipeline.py, _judge.judge_rows): the blocks it judges get the
figures the stage-by-stage path gives them, for correct and for wrong results, in every instruction set:
the counts, maxima and worst elements equal, the sums (bias test, parameter gradients) within rounding."""
import math
import zlib

import numpy as np
import pytest

from refnorm.check import _judge, pipeline, stream
from refnorm.check.backends.base import Contract
from test_stream import _call, _close, _judge as judge

pytestmark = pytest.mark.skipif(getattr(_judge, "judge_rows", None) is None, reason="no compiled judge")

STRICT, STATS_D, EPI_D = Contract("strict", "block"), Contract("stats_d", "block"), Contract("epi_d", "tree")


def _both(monkeypatch, cfg, dt, ins, cot, got, contract, block_elements, op="layer_norm"):
    """(figures stage by stage, figures through the pipeline, how many blocks the pipeline judged)"""
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", block_elements)
    monkeypatch.setattr(stream, "PIPELINE", False)
    ref, plain = judge(op, cfg, dt, ins, cot, {}, got, contract, blocks=True)
    assert ref is None                                  # judged in blocks
    runs = []
    real = pipeline.Pipeline.run
    monkeypatch.setattr(pipeline.Pipeline, "run", lambda self, *a: (runs.append(a[:2]), real(self, *a))[1])
    monkeypatch.setattr(stream, "PIPELINE", True)
    _, piped = judge(op, cfg, dt, ins, cot, {}, got, contract, blocks=True)
    return plain, piped, len(runs)


def _same(plain, piped):
    assert plain.keys() == piped.keys()
    for key, a in plain.items():
        b = piped[key]
        assert (a.verdict, a.unconstrained, a.over, a.size, a.dtype, a.bias_where) == \
            (b.verdict, b.unconstrained, b.over, b.size, b.dtype, b.bias_where), key
        for f in ("ratio", "err_u", "scale", "max_bound"):
            assert getattr(a, f) == getattr(b, f) or (math.isnan(getattr(a, f)) and math.isnan(getattr(b, f))), (key, f)
        assert _close(a.bias, b.bias, 1e-9), (key, a.bias, b.bias)
        assert len(a.worst) == len(b.worst), key
        for u, v in zip(a.worst, b.worst):         # (index, returned, reference, bound): the same, NaN as NaN
            assert u[0] == v[0] and np.array_equal(u[1:], v[1:], equal_nan=True), (key, u, v)


def _plant(got, bug, dt, shape):
    from refnorm.check.precision import round_to
    if bug == "late":           # one element of a late row off: a block the pipeline judges
        y = got["outputs"]["y"].astype(np.float64)
        y.reshape(-1)[-shape[-1] - 1] += 0.5
        got["outputs"]["y"] = round_to(y, dt)
    elif bug == "scale":        # every input gradient scaled by (1 + 2^-9) (16-bit: 2^-4)
        low = dt != "float32"
        got["grads"]["x"] = round_to(got["grads"]["x"].astype(np.float64) * (1 + 2.0 ** (-4 if low else -9)), dt)
    elif bug == "dweight":      # the weight gradient's last element off by 10% of the largest
        dw = got["grads"]["weight"].astype(np.float64)
        dw[-1] += 0.1 * np.abs(dw).max()
        got["grads"]["weight"] = round_to(dw, dt)


CASES = [("layer_norm", (300, 48), {"normalized_shape": [48]}),
         ("layer_norm", (3, 40, 48), {"normalized_shape": [48]}),
         ("layer_norm", (24, 5137), {"normalized_shape": [5137]}),        # rows longer than a piece
         ("layer_norm", (900, 2), {"normalized_shape": [2]}),
         ("group_norm", (21, 8, 16, 16), {"num_groups": 4}),               # two channels of 256 values a group
         ("group_norm", (14, 4, 16), {"num_groups": 4}),                   # a channel a group
         ("group_norm", (5, 4, 64, 64), {"num_groups": 2}),                # rows longer than a piece
         ("batch_norm", (6, 12, 5, 4), {}),                                # channels, from N runs each
         ("batch_norm", (3, 10, 2000), {}),                                # a channel longer than a piece
         ("batch_norm", (60, 8), {})]                                      # one value a run


@pytest.mark.parametrize("op,shape,cfg", CASES)
@pytest.mark.parametrize("dt,contract", [("float32", STRICT), ("bfloat16", STATS_D), ("float16", EPI_D)])
@pytest.mark.parametrize("bug", [None, "late", "scale", "dweight"])
def test_pipeline_judges_as_the_stages(monkeypatch, op, shape, cfg, dt, contract, bug):
    rng = np.random.default_rng(zlib.crc32(f"{op} {shape} {dt} {bug}".encode()))
    ins, cot, got, _ = _call(op, shape, cfg, True, dt, rng, shift=2.0)
    got["state"] = {}                   # batch_norm: batch statistics only (no running statistics)
    _plant(got, bug, dt, shape)
    # batch_norm: blocks of two channels (a block of one channel is, stage by stage, judged against the
    # reference of a one-channel array, which NumPy sums in one run: the whole call's within rounding)
    block = 2 * math.prod(shape) // shape[1] if op == "batch_norm" else math.prod(shape) // 7
    plain, piped, runs = _both(monkeypatch, cfg, dt, ins, cot, got, contract, block, op)
    assert runs >= 2                     # 4 to 8 blocks: all but each partition's first
    _same(plain, piped)
    failed = {k for k, a in piped.items() if a.verdict == "failed"}
    want = {None: set(), "late": {("outputs", "y")}, "scale": {("grads", "x")}, "dweight": {("grads", "weight")}}[bug]
    if shape[-1] == 2:      # rows of two values: dx is 0 up to rounding, a row's bound can be vacuous (r huge)
        want = set()
    if dt != "float32" and bug == "dweight":  # stats_d, epi_d: 16-bit accumulators allowed, the bound is vacuous
        want = set()
    assert want <= failed and (bug is not None or not failed)


@pytest.mark.parametrize("params", ["weight", "bias", None])
def test_pipeline_without_some_parameters(monkeypatch, params):
    rng = np.random.default_rng(7)
    shape, cfg = (200, 64), {"normalized_shape": [64]}
    ins, cot, got, _ = _call("layer_norm", shape, cfg, True, "float32", rng, shift=1.0)
    for k in ("weight", "bias"):
        if k != params:
            del ins[k]
    import refnorm
    r = refnorm.evaluate("layer_norm", {k: v.astype(np.float64) for k, v in ins.items()}, config=cfg,
                         grad_outputs={"y": cot["y"].astype(np.float64)})
    got = {"outputs": {"y": r.outputs["y"].astype(np.float32)},
           "grads": {k: v.astype(np.float32) for k, v in r.grads.items()}, "state": {}}
    plain, piped, runs = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, 200 * 64 // 6)
    # without parameters the bounds layer computes its row bounds in NumPy: nothing for the pipeline to run
    assert runs >= 3 if params else runs == 0
    _same(plain, piped)


@pytest.mark.parametrize("isa", _judge.isas())
def test_pipeline_in_every_instruction_set(monkeypatch, isa):
    """The pipeline's loops run in the ISA the judge uses (and the reference's in _fused's): each gives
    the figures of the stages."""
    from refnorm.norms import _common
    fused = _common.native()
    before, fbefore = _judge.set_isa(isa), fused.isa()
    try:
        if isa in fused.isas():
            fused.set_isa(isa)
        rng = np.random.default_rng(3)
        shape, cfg = (120, 200), {"normalized_shape": [200]}
        ins, cot, got, _ = _call("layer_norm", shape, cfg, True, "float32", rng, shift=2.0)
        _plant(got, "late", "float32", shape)
        plain, piped, runs = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, math.prod(shape) // 6)
        assert runs >= 3
        _same(plain, piped)
    finally:
        _judge.set_isa(before)
        fused.set_isa(fbefore)


def test_pipeline_keeps_the_candidates_of_the_running_scale(monkeypatch):
    """Late rows whose bounds exceed the running scale (ill-conditioned: a large mean, a tiny spread): the
    pipeline keeps those elements for the final scale as the stages do, and the verdicts agree."""
    rng = np.random.default_rng(11)
    shape, cfg = (240, 64), {"normalized_shape": [64]}
    ins, cot, got, _ = _call("layer_norm", shape, cfg, True, "float32", rng)
    from refnorm.check.precision import round_to
    x = ins["x"].astype(np.float64)
    x[200:] = 1e5 + 4e-3 * rng.standard_normal((40, 64))
    ins["x"] = round_to(x, "float32")
    import refnorm
    r = refnorm.evaluate("layer_norm", {k: v.astype(np.float64) for k, v in ins.items()}, config=cfg,
                         grad_outputs={"y": cot["y"].astype(np.float64)})
    got = {"outputs": {"y": round_to(r.outputs["y"], "float32")},
           "grads": {k: round_to(v, "float32") for k, v in r.grads.items()}, "state": {}}
    got["outputs"]["y"][230, 5] += 40.0          # beyond its own (large) bound
    kept = []
    real = pipeline.Pipeline.run

    def spy(self, lo, hi, accs, *a):
        n0 = accs[("outputs", "y")][0].n_cand
        real(self, lo, hi, accs, *a)
        kept.append(accs[("outputs", "y")][0].n_cand - n0)
    plain, _, _ = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, math.prod(shape) // 6)
    monkeypatch.setattr(pipeline.Pipeline, "run", spy)
    _, piped = judge("layer_norm", cfg, "float32", ins, cot, {}, got, STRICT, blocks=True)
    assert sum(kept) > 0                          # the pipeline did keep candidates
    _same(plain, piped)
    assert piped[("outputs", "y")].unconstrained > 0


def test_pipeline_only_where_it_applies(monkeypatch):
    """Another op, a layout that is not C-contiguous rows, two contracts: every block stage by stage."""
    rng = np.random.default_rng(5)
    shape, cfg = (200, 64), {"normalized_shape": [64]}
    ins, cot, got, _ = _call("layer_norm", shape, cfg, True, "float32", rng)
    ins["x"] = np.asfortranarray(ins["x"])
    plain, piped, runs = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, 200 * 64 // 6)
    assert runs == 0
    _same(plain, piped)


@pytest.mark.parametrize("op", ["layer_norm", "group_norm"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64"])
def test_pipeline_reference_and_bounds_are_the_stages_bits(op, dt):
    """Over rows given in several pieces (SUB_ELEMENTS), judge_rows' reference statistics and parameter
    sums are the bits of refnorm.evaluate on the whole block, and its bounds those of row_bounds."""
    import ml_dtypes

    import refnorm
    from refnorm.check.bounds._rows import row_bounds, seen_calls
    from refnorm.check.compare import ArrayAccumulator
    from refnorm.norms import _common, group_norm, layer_norm
    rng = np.random.default_rng(9)
    ndt = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float64": np.float64}[dt]
    if op == "layer_norm":
        shape, cfg, G, C = (50, 1000), {"normalized_shape": [1000]}, 1, 1000
    else:
        shape, cfg, G, C = (3, 8, 32, 64), {"num_groups": 2}, 2, 8
    x, dy = ((rng.standard_normal(shape) + 3).astype(ndt) for _ in range(2))
    w, b = (rng.standard_normal(C).astype(ndt).astype(np.float64) for _ in range(2))
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    ins = {"x": x64, "weight": w, "bias": b}
    r = refnorm.evaluate(op, ins, config=cfg, grad_outputs={"y": dy64})
    kernel = (layer_norm if op == "layer_norm" else group_norm).row_kernel(ins, cfg)
    units = shape[0]
    m = units * kernel.rows_per_unit
    n = x.size // m
    with seen_calls() as seen:
        rb = row_bounds(x64.reshape(m, n), g=dy64.reshape(m, n), eps=1e-5, u=2.0 ** -24, reduction="block",
                        m_param=m, contract="strict", case_dtype="float32",
                        pattern=(w.reshape(G, -1), b.reshape(G, -1), 1), second=(2.0 ** -53, 3.0, 7.0))
    got_y, got_dx = r.outputs["y"].astype(np.float32), r.grads["x"].astype(np.float32)
    ay, adx = (ArrayAccumulator(a, None, "float32", unit_counts=True) for a in (got_y, got_dx))
    slen = m * kernel.P if kernel.merged else n
    sxy, sy, tw, tb, st = np.empty(slen), np.empty(slen), np.zeros(w.size), np.zeros(w.size), np.empty((4, m))
    bits = (lambda a: a.view(np.uint16)) if x.dtype.itemsize == 2 else (lambda a: a)
    kind = {"float32": 1, "bfloat16": 3, "float64": 0}[dt]
    ay.scale = adx.scale = 1.0
    tile = (lambda a: np.tile(a, units)) if kernel.merged else (lambda a: a)
    (fy, fdx), = _judge.judge_rows(_common.native().api, bits(x).reshape(m, n), bits(dy).reshape(m, n), kind,
                                   kernel.P, kernel.merged, tile(kernel.w), tile(kernel.b), kernel.eps, sxy, sy,
                                   w, b, G, C // G,
                                   ((seen[0]["scalars"], tw, tb, st, ay.block_args(0, m * n),
                                     adx.block_args(0, m * n)),))
    same = lambda a, c: np.array_equal(np.asarray(a).reshape(-1).view(np.uint64),       # noqa: E731
                                       np.asarray(c, dtype=np.float64).reshape(-1).view(np.uint64))
    assert same(st[0], r.outputs["mean"]) and same(st[1], r.outputs["rstd"])
    assert same(kernel.fold(sxy, units), r.grads["weight"]) and same(kernel.fold(sy, units), r.grads["bias"])
    assert same(st[2], rb.mean) and same(st[3], rb.rstd)
    assert same(tw, rb.t_w_pat) and same(tb, rb.t_b_pat)
    assert fy[0][1] == 0 and fdx[0][1] == 0            # the reference rounded: nothing over its bound


@pytest.mark.parametrize("op,shape,cfg", [CASES[0], CASES[4], CASES[7]])
@pytest.mark.parametrize("where", ["input", "returned"])
def test_pipeline_with_values_that_are_not_finite(monkeypatch, op, shape, cfg, where):
    """NaN and infinity in a late block, in an input (the reference of its rows is NaN) or in the returned
    values (the comparison's slow path): the pipeline's figures are still the stages'."""
    import refnorm
    from refnorm.check.precision import round_to
    rng = np.random.default_rng(zlib.crc32(f"{op} {where}".encode()))
    ins, cot, got, _ = _call(op, shape, cfg, True, "float32", rng)
    got["state"] = {}
    if where == "input":
        x = ins["x"].astype(np.float64)
        x.reshape(-1)[-3] = np.nan
        x.reshape(-1)[-shape[-1] * 2] = np.inf
        ins["x"] = round_to(x, "float32")
        r = refnorm.evaluate(op, {k: v.astype(np.float64) for k, v in ins.items()}, config=cfg,
                             grad_outputs={"y": cot["y"].astype(np.float64)})
        got["outputs"] = {k: round_to(v, "float32") for k, v in r.outputs.items()}
        got["grads"] = {k: round_to(v, "float32") for k, v in r.grads.items()}
    else:
        for k, v in (("y", np.nan), ("x", np.inf)):
            part = "outputs" if k == "y" else "grads"
            a = got[part][k].astype(np.float64)
            a.reshape(-1)[-7] = v
            got[part][k] = round_to(a, "float32")
    block = 2 * math.prod(shape) // shape[1] if op == "batch_norm" else math.prod(shape) // 7
    plain, piped, runs = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, block, op)
    assert runs >= 2
    _same(plain, piped)
    assert any(a.verdict == "failed" for a in piped.values()) == (where == "returned")


def test_calls_the_pipeline_cannot_take_are_not_probed(monkeypatch):
    """rms_norm (no compiled reference) and batch_norm with running statistics: no first unit judged apart,
    every block stage by stage."""
    probed = []
    monkeypatch.setattr(pipeline, "prepare", lambda *a: probed.append(a) or None)
    monkeypatch.setattr(stream, "PIPELINE", True)
    rng = np.random.default_rng(13)
    for op, shape, cfg, keep_state in [("rms_norm", (200, 64), {"normalized_shape": [64], "eps": 1e-6}, False),
                                       ("batch_norm", (6, 12, 5, 4), {}, True)]:
        ins, cot, got, state = _call(op, shape, cfg, True, "float32", rng)
        if not keep_state:
            state = {}
        monkeypatch.setattr(stream, "BLOCK_ELEMENTS", math.prod(shape) // 4)
        ref, figures = judge(op, cfg, "float32", ins, cot, state, got, STRICT, blocks=True)
        assert ref is None and figures
    assert probed == []


def test_judge_rows_refuses_arguments_that_do_not_fit():
    """judge_rows checks what it is given (never trusts a size): wrong modes, parameter lengths, a returned
    block of channels of the wrong shape are ValueErrors."""
    from refnorm.check.compare import ArrayAccumulator
    from refnorm.norms import _common
    api = _common.native().api
    x = np.ones((4, 16))
    acc = ArrayAccumulator(np.ones((4, 16), np.float32), 1.0, "float32", unit_counts=True)
    scalars = (1e-5, 2.0 ** -24, 1.0, 1.0, 2.0 ** -24, 1e-45, 1, 0, 0, 0, 0, 0.0, 0.0, 0.0)
    one = lambda: (scalars, np.zeros(16), np.zeros(16), None, acc.block_args(0, 64), acc.block_args(0, 64))  # noqa: E731
    w = np.ones(16)
    with pytest.raises(ValueError):      # mode 3
        _judge.judge_rows(api, x, x, 0, 1, 3, w, w, 1e-5, np.empty(16), np.empty(16), w, w, 1, 16, (one(),))
    with pytest.raises(ValueError):      # a weight of 15 values for rows of 16
        _judge.judge_rows(api, x, x, 0, 1, 0, w[:15], w, 1e-5, np.empty(16), np.empty(16), w, w, 1, 16, (one(),))
    with pytest.raises(ValueError):      # xkind 1 (float32) for float64 rows
        _judge.judge_rows(api, x, x, 1, 1, 0, w, w, 1e-5, np.empty(16), np.empty(16), w, w, 1, 16, (one(),))
    assert len(_judge.judge_rows(api, x + np.arange(16), x, 0, 1, 0, w, w, 1e-5, np.empty(16), np.empty(16), w, w,
                                 1, 16, (one(),))) == 1          # the same arguments, fitting: one contract judged
    # channels: a returned block that is not the (N, m, S) view of the whole array
    x3 = np.ones((2, 4, 8)) + np.arange(8)
    got = ArrayAccumulator(np.ones((2, 4, 8), np.float32), 1.0, "float32", unit_counts=True)
    bad = got.block_args(0, 4, channels=True)
    bad = (bad[0].reshape(2, 8, 4),) + bad[1:]
    with pytest.raises(ValueError):
        _judge.judge_rows(api, x3, x3, 0, 2, 2, np.ones(4), np.ones(4), 1e-5, np.empty(8), np.empty(8),
                          np.ones(4), np.ones(4), 4, 1, ((scalars, np.zeros(4), np.zeros(4), None, bad, bad),))


def test_the_first_unit_is_made_once_and_probed_once(monkeypatch):
    """The first unit's reference and (dry: seen, not computed) row bounds serve both the names judged (core)
    and the pipeline's probe, made once; partition 0 probes, partition 1 waits for it and judges all its
    blocks with the same Pipeline (two threads): every block, unit 0's too, through the pipeline, the
    figures those of the stages."""
    rng = np.random.default_rng(17)
    op, shape, cfg = "group_norm", (12, 8, 16, 16), {"num_groups": 4}
    ins, cot, got, _ = _call(op, shape, cfg, True, "float32", rng)
    monkeypatch.setenv("REFNORM_NUM_THREADS", "2")
    plain, _, _ = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, 8 * 16 * 16, op=op)
    made, probes, runs = [], [], []
    real_stages, real_prepare, real_run = stream.block_stages, pipeline.prepare, pipeline.Pipeline.run
    monkeypatch.setattr(stream, "block_stages",
                        lambda *a, **k: made.append((*a[-2:], k.get("dry"))) or real_stages(*a, **k))
    monkeypatch.setattr(pipeline, "prepare", lambda *a: probes.append(1) or real_prepare(*a))
    monkeypatch.setattr(pipeline.Pipeline, "run", lambda self, *a: runs.append(a[:2]) or real_run(self, *a))
    _, piped = judge(op, cfg, "float32", ins, cot, {}, got, STRICT, blocks=True)
    assert made == [(0, 1, True)] and probes == [1]
    assert sorted(runs) == [(u, u + 1) for u in range(12)]        # one unit a block, every one
    _same(plain, piped)


def test_a_probe_that_fails_leaves_no_partition_waiting(monkeypatch):
    """Partition 0's probe raising: partition 1 (in the other thread) stops waiting and judges its blocks
    stage by stage; the error reaches the caller, nothing hangs."""
    import threading
    rng = np.random.default_rng(19)
    op, shape, cfg = "layer_norm", (400, 32), {"normalized_shape": [32]}
    ins, cot, got, _ = _call(op, shape, cfg, True, "float32", rng)
    monkeypatch.setenv("REFNORM_NUM_THREADS", "2")
    monkeypatch.setattr(stream, "BLOCK_ELEMENTS", 400 * 32 // 6)
    monkeypatch.setattr(stream, "PIPELINE", True)

    def broken(*a):
        raise RuntimeError("probe failed")
    monkeypatch.setattr(pipeline, "prepare", broken)
    out = []

    def run():
        try:
            judge(op, cfg, "float32", ins, cot, {}, got, STRICT, blocks=True)
            out.append(None)
        except RuntimeError as e:
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "the judgement hung"
    assert len(out) == 1 and isinstance(out[0], RuntimeError) and "probe failed" in str(out[0])


def test_a_dry_first_unit_is_never_judged(monkeypatch):
    """Unit 0's row bounds were only seen (dry, zeros): when the probe makes no Pipeline, unit 0 is judged
    stage by stage anew, with real bounds: the figures are those of the stage-by-stage path, a planted bug in
    unit 0 is found as there."""
    rng = np.random.default_rng(23)
    op, shape, cfg = "group_norm", (6, 8, 16, 16), {"num_groups": 4}
    ins, cot, got, _ = _call(op, shape, cfg, True, "float32", rng)
    y = got["outputs"]["y"].astype(np.float64)
    y[0, 0, 0, :3] += 0.25                                      # in unit 0
    got["outputs"]["y"] = y.astype(np.float32)
    plain, _, _ = _both(monkeypatch, cfg, "float32", ins, cot, got, STRICT, 8 * 16 * 16, op=op)
    monkeypatch.setattr(pipeline, "prepare", lambda *a: None)
    _, none = judge(op, cfg, "float32", ins, cot, {}, got, STRICT, blocks=True)
    _same(plain, none)
    assert none[("outputs", "y")].verdict == "failed" and none[("outputs", "y")].over == 3


@pytest.mark.parametrize("op,shape,cfg", [("layer_norm", (6, 40), {"normalized_shape": [40]}),
                                          ("group_norm", (3, 8, 4, 4), {"num_groups": 4}),
                                          ("batch_norm", (5, 6, 3, 4), {})])
@pytest.mark.parametrize("contract", [STRICT, STATS_D])
def test_dry_row_bounds_see_the_calls_and_compute_nothing(op, shape, cfg, contract):
    """seen_calls(dry=True): the same calls seen, the same names and shapes of bounds, every bound zero (read-only:
    nothing was computed, nothing can be written into)."""
    from refnorm.check import bounds as B
    from refnorm.check.bounds._rows import seen_calls
    rng = np.random.default_rng(29)
    ins, cot, _, _ = _call(op, shape, cfg, True, "float32", rng)
    ins = {k: v.astype(np.float64) for k, v in ins.items()}
    cot = {k: v.astype(np.float64) for k, v in cot.items()}
    kw = dict(inputs=ins, config=cfg, training=True, cotangents=cot, state={}, ref_state={}, contract=contract,
              case_dtype="float32")
    with seen_calls() as real_calls:
        real = B.bounds(op, **kw)
    with seen_calls(dry=True) as dry_calls:
        dry = B.bounds(op, **kw)
    assert len(real_calls) == len(dry_calls) >= 1
    for a, b in zip(real_calls, dry_calls):
        assert a["scalars"] == b["scalars"] and a["pattern"] == b["pattern"] and a["shape"] == b["shape"]
    assert {p: set(d) for p, d in real.items()} == {p: set(d) for p, d in dry.items()}
    for part, d in real.items():
        for k, v in d.items():
            assert np.shape(dry[part][k]) == np.shape(v) and not np.any(dry[part][k]), (part, k)
            assert np.any(v), (part, k)                     # the real bounds are not zero
