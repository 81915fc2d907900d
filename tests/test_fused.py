"""The compiled row kernels (refnorm/norms/_fused.c) give the NumPy path's results, bit for bit.

refnorm's reference is the NumPy code of refnorm/norms/; ``_common.native()`` swaps in compiled loops
that fuse its passes over each row (docs/performance.md). That is only allowed because every result
is the same bits: checked here on every golden case of the four normalizers that use them, and on
random shapes and values (NaN, Inf, -0.0, constant and one-element rows, rows from 1 to 100003
values, across the 8/128 boundaries of NumPy's pairwise sum), for each instruction set this CPU has,
and with 1 and 3 threads.

The kernels are built by ``pip install`` when a C compiler is present (setup.py, optional). Without
them these tests are skipped with that reason, except under CI (CI set), where a missing build fails:
the CI machine has gcc, and a silently missing build would make the speed figures false.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refnorm
from refnorm import golden
from refnorm.golden import store
from refnorm.norms import _common as C

CHECKED_IN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")
OPS = ("layer_norm", "group_norm", "instance_norm", "batch_norm")


def _fused_module():
    os.environ.pop("REFNORM_NATIVE", None)
    mod = C.native()
    if mod is None:
        why = ("refnorm.norms._fused is not built (pip install -e . builds it when a C compiler is "
               "present; setup.py)")
        if os.environ.get("CI"):
            pytest.fail(why + "; under CI it must be")
        pytest.skip(why)
    return mod


@pytest.fixture(params=["avx512", "avx2", "base"])
def isa(request):
    mod = _fused_module()
    if request.param not in mod.isas():
        pytest.skip(f"this CPU does not support {request.param} (it has {mod.isas()})")
    old = mod.isa()
    mod.set_isa(request.param)
    yield request.param
    mod.set_isa(old)


def _evaluate(native: bool, op, inputs, config, cot, state=None, training=True):
    old = os.environ.get("REFNORM_NATIVE")
    os.environ["REFNORM_NATIVE"] = "1" if native else "0"
    try:
        return refnorm.evaluate(op, inputs, config=config, grad_outputs=cot, state=state, training=training)
    finally:
        if old is None:
            os.environ.pop("REFNORM_NATIVE", None)
        else:
            os.environ["REFNORM_NATIVE"] = old


def _same_bits(a, b) -> bool:
    """Equal bit patterns, NaN for NaN (a NaN's payload is not part of the result)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind != "f":
        return np.array_equal(a, b)
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        return False
    return np.array_equal(a[~na].view(np.uint64), b[~nb].view(np.uint64))


def _assert_same(r_fused, r_numpy, what):
    for part in ("outputs", "grads", "state"):
        got, want = getattr(r_fused, part), getattr(r_numpy, part)
        assert sorted(got) == sorted(want), f"{what}: {part} keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert _same_bits(got[k], want[k]), (
                f"{what}: {part} {k!r} differs between the compiled and the NumPy path "
                f"(max |diff| {np.nanmax(np.abs(np.asarray(got[k], float) - np.asarray(want[k], float)))})")


def test_the_kernels_are_used_and_can_be_turned_off():
    mod = _fused_module()
    assert mod.isa() in mod.isas()
    os.environ["REFNORM_NATIVE"] = "0"
    try:
        assert C.native() is None
    finally:
        os.environ.pop("REFNORM_NATIVE")
    assert C.native() is mod


def test_every_golden_case_of_the_four_normalizers(isa):
    man = store.read_manifest(CHECKED_IN)
    n = 0
    for e in man["cases"]:
        if e["case"]["op"] not in OPS:
            continue
        case = golden.load_case(CHECKED_IN, e["id"], manifest=man)
        s_f = s_n = dict(case.init_state)
        for i, step in enumerate(case.steps):
            a = _evaluate(True, case.op, step.inputs, case.config, step.cotangents, s_f, step.training)
            b = _evaluate(False, case.op, step.inputs, case.config, step.cotangents, s_n, step.training)
            _assert_same(a, b, f"{e['id']} step {i} ({isa})")
            s_f, s_n = dict(a.state), dict(b.state)
            n += 1
    assert n > 200, f"only {n} golden steps of {OPS}"


# ------------------------------------------------------------------------------ random inputs
SPECIAL = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e-310)


@st.composite
def problems(draw):
    op = draw(st.sampled_from(OPS))
    q = draw(st.sampled_from((1, 2, 7, 8, 9, 15, 16, 127, 128, 129, 130, 136, 255, 257, 1000, 1031)))
    if op == "layer_norm":
        rows = draw(st.integers(1, 9))
        shape, config, pshape = (rows, q), {"normalized_shape": [q]}, (q,)
    else:
        nb = draw(st.integers(1, 4))
        g = draw(st.integers(1, 3))
        nc = g * draw(st.integers(1, 3))
        if op == "batch_norm" and nb * q == 1:
            nb = 2                      # one value per channel: an error in training (as torch)
        if op == "instance_norm" and q == 1:
            q = 2                       # one value per instance: an error (as torch)
        shape, pshape = (nb, nc, q), (nc,)
        config = {"num_groups": g} if op == "group_norm" else {}
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4) + rng.choice([0.0, 1e4, -7.0])
    dy = rng.standard_normal(shape)
    kind = draw(st.sampled_from(("plain", "special", "constant", "zeros")))
    if kind == "special":
        flat = x.reshape(-1)
        idx = rng.integers(0, flat.size, size=min(3, flat.size))
        flat[idx] = rng.choice(SPECIAL, size=idx.size)
    elif kind == "constant":
        x[...] = 3.25
    elif kind == "zeros":
        x[...] = -0.0
        dy[...] = -0.0
    inputs = {"x": x}
    if draw(st.booleans()):
        inputs["weight"] = rng.standard_normal(pshape)
    if draw(st.booleans()):
        inputs["bias"] = rng.standard_normal(pshape)
    return op, inputs, config, {"y": dy}


@settings(max_examples=150, deadline=None)
@given(problems())
def test_random_problems_same_bits(problem):
    _fused_module()
    op, inputs, config, cot = problem
    with np.errstate(all="ignore"):
        a = _evaluate(True, op, inputs, config, cot)
        b = _evaluate(False, op, inputs, config, cot)
    _assert_same(a, b, f"{op} {inputs['x'].shape} {sorted(inputs)}")


@pytest.mark.parametrize("op,shape,config", [
    ("layer_norm", (3, 100003), {"normalized_shape": [100003]}),
    ("layer_norm", (300, 1000), {"normalized_shape": [1000]}),
    ("group_norm", (3, 6, 3001), {"num_groups": 2}),
    ("group_norm", (3, 6, 196), {"num_groups": 3}),      # row sums not split at the segments
    ("group_norm", (2, 16, 784), {"num_groups": 2}),     # split at the segments: one pass for the sums
    ("layer_norm", (9000, 1), {"normalized_shape": [1]}),  # column sums NumPy takes pairwise
    ("instance_norm", (5, 7, 9000), {}),
    ("batch_norm", (7, 300, 130), {}),
    ("batch_norm", (9000, 1, 3), {}),
])
@pytest.mark.parametrize("threads", ["1", "3"])
def test_long_rows_many_blocks_and_threads(isa, op, shape, config, threads, monkeypatch):
    monkeypatch.setenv("REFNORM_NUM_THREADS", threads)
    rng = np.random.default_rng(sum(shape))
    pshape = tuple(config["normalized_shape"]) if op == "layer_norm" else (shape[1],)
    inputs = {"x": rng.standard_normal(shape) * 3 + 1e3, "weight": rng.standard_normal(pshape),
              "bias": rng.standard_normal(pshape)}
    cot = {"y": rng.standard_normal(shape)}
    _assert_same(_evaluate(True, op, inputs, config, cot), _evaluate(False, op, inputs, config, cot),
                 f"{op} {shape} threads={threads} ({isa})")


# ------------------------------------------------------------------------------ the C interface
def test_bad_arguments_are_errors_not_crashes():
    mod = _fused_module()
    x, out, st4 = np.zeros(12), np.zeros(12), [np.zeros(3) for _ in range(4)]
    with pytest.raises(ValueError, match="'x' has 11 values; expected at least 12"):
        mod.forward(np.zeros(11), out, None, None, *st4, 0, 3, 3, 1, 4, 0, 1, 1e-5)
    with pytest.raises(TypeError, match="expected float64"):
        mod.forward(np.zeros(12, np.float32), out, None, None, *st4, 0, 3, 3, 1, 4, 0, 1, 1e-5)
    with pytest.raises(ValueError, match="rows 0..4; expected 0 <= s <= e <= R=3"):
        mod.forward(x, out, None, None, *st4, 0, 4, 3, 1, 4, 0, 1, 1e-5)
    with pytest.raises(ValueError, match="row_axis=2"):
        mod.forward(x, out, None, None, *st4, 0, 3, 3, 1, 4, 2, 1, 1e-5)
    with pytest.raises(ValueError, match="wkind=2 with P=2"):
        mod.forward(x, out, np.zeros(2), None, *st4, 0, 3, 3, 2, 2, 0, 2, 1e-5)
    with pytest.raises(ValueError, match="not writable|read-only"):
        ro = np.zeros(12)
        ro.flags.writeable = False
        mod.forward(x, ro, None, None, *st4, 0, 3, 3, 1, 4, 0, 1, 1e-5)
    with pytest.raises(ValueError, match="'dx' must not share memory"):
        mod.backward(x, out, x, None, *st4[:3], None, None, False, 0, 3, 3, 1, 4, 0, 1)
    with pytest.raises(ValueError, match="isa=sse9"):
        mod.set_isa("sse9")


@pytest.mark.parametrize("op,shape,config", [
    ("layer_norm", (2, 5), {"normalized_shape": [5]}),
    ("layer_norm", (2, 200), {"normalized_shape": [200]}),
    ("group_norm", (1, 4, 9), {"num_groups": 2}),
    ("instance_norm", (1, 3, 200), {}),
    ("batch_norm", (1, 3, 5), {}),
    ("batch_norm", (1, 3, 200), {}),
    ("batch_norm", (2, 3, 5), {}),
])
@pytest.mark.parametrize("params", ["", "w", "b", "wb"])
def test_signed_zeros(op, shape, config, params):
    """All -0.0 in x and dy: where a sum's sign of zero reaches y or dx, both paths agree."""
    _fused_module()
    pshape = tuple(config["normalized_shape"]) if op == "layer_norm" else (shape[1],)
    inputs = {"x": np.full(shape, -0.0)}
    if "w" in params:
        inputs["weight"] = np.full(pshape, -1.5)
    if "b" in params:
        inputs["bias"] = np.full(pshape, -0.0)
    cot = {"y": np.full(shape, -0.0)}
    _assert_same(_evaluate(True, op, inputs, config, cot), _evaluate(False, op, inputs, config, cot),
                 f"{op} {shape} {params}")


def test_a_weight_per_segment_needs_rows_that_split_at_the_segments():
    """The backward's one-weight-per-segment form is only for rows whose pairwise sum splits at the
    segments; elsewhere the C entry refuses it (the caller spreads the weight over the row)."""
    mod = _fused_module()
    R, P, Q = 2, 2, 196                                   # 392 values split at 192: not at 196
    assert not mod.segments_aligned(P * Q, Q) and mod.segments_aligned(8 * 784, 784)
    x, dy, dx = np.zeros(R * P * Q), np.zeros(R * P * Q), np.zeros(R * P * Q)
    st3 = [np.zeros(R) for _ in range(3)]
    with pytest.raises(ValueError, match="wkind=1.*splits at the segments"):
        mod.backward(x, dy, dx, np.ones(R * P), *st3, None, None, False, 0, R, R, P, Q, 0, 1)
