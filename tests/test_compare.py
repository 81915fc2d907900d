"""The streaming comparison (refnorm/check/compare.py): the compiled loop gives the NumPy definition's
figures, blocks give the whole array's figures, and both give what precision.excess and bias.bias_test
say of the whole array."""
import math

import ml_dtypes
import numpy as np
import pytest

from refnorm.check import compare as C
from refnorm.check.bias import P_CASE, bias_test
from refnorm.check.precision import NP, excess, ratio

DTYPES = ["float64", "float32", "float16", "bfloat16"]


def _special(dt, rng, shape):
    """Returned values with the edge cases: +-0, subnormals, powers of two, +-max, +-inf, NaN."""
    fi = ml_dtypes.finfo(NP[dt]) if dt == "bfloat16" else np.finfo(NP[dt])
    ref = rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], size=shape)
    got = ref.astype(NP[dt])
    flat = got.reshape(-1)
    picks = [0.0, -0.0, float(fi.smallest_subnormal), -float(fi.smallest_subnormal), float(fi.tiny), 2.0, -0.5,
             float(fi.max), -float(fi.max), np.inf, -np.inf, np.nan]
    idx = rng.choice(flat.size, size=len(picks), replace=False)
    flat[idx] = np.array(picks).astype(NP[dt])
    r = ref.reshape(-1)
    r[idx[:6]] = flat[idx[:6]].astype(np.float64) * (1 + 1e-3)
    r[idx[-1]] = np.nan if rng.random() < 0.5 else 1.0
    r[idx[-3]] = np.inf
    E = np.abs(ref) * 1e-3
    E.reshape(-1)[rng.choice(flat.size, size=3, replace=False)] = [np.inf, 0.0, 1e300]
    return got, ref, E


def _run(got, ref, E, dt, blocks, native):
    acc = C.ArrayAccumulator(got, float(np.max(np.where(np.isfinite(ref), np.abs(ref), 0.0))), dt)
    if not native:
        acc.mod = None
    edges = np.linspace(0, got.size, blocks + 1).astype(int)      # flat ranges, not whole rows
    for s, e in zip(edges[:-1], edges[1:]):
        acc.add(ref.reshape(-1)[s:e], E.reshape(-1)[s:e], int(s))
    return acc.figures()


def _same(a, b, rel=1e-12):
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float):
            # the bias ratio is a ratio of sums, summed in another order: equal within rounding of its terms
            tol = rel * max(abs(x), abs(y)) + (1e-12 if k == "bias" else 0.0)
            assert (math.isnan(x) and math.isnan(y)) or x == y or abs(x - y) <= tol, (k, x, y)
        elif k != "bias_where" or a["bias"] > 1e-9:     # where a ratio of ~0 (noise) is worst: no matter
            assert repr(x) == repr(y), (k, x, y)      # repr: NaN equals NaN


@pytest.fixture(params=["avx512", "avx2", "base"])
def isa(request):
    """The compiled comparison's element loop in each instruction set this CPU runs."""
    mod = C.native()
    if mod is None:
        pytest.skip("refnorm.check._judge is not built")
    was = mod.set_isa()
    if request.param not in mod.isas():
        pytest.skip(f"this CPU does not run {request.param}")
    mod.set_isa(request.param)
    yield request.param
    mod.set_isa(was)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(37, 5), (6, 4, 9), (200,), (3, 700)])
def test_native_blocks_and_numpy_agree(dt, shape, isa):
    rng = np.random.default_rng(len(shape) * 10 + DTYPES.index(dt))
    got, ref, E = _special(dt, rng, shape)
    whole = _run(got, ref, E, dt, 1, native=False)
    _same(_run(got, ref, E, dt, 1, native=True), whole)
    _same(_run(got, ref, E, dt, 4, native=True), whole)
    _same(_run(got, ref, E, dt, 3, native=False), whole)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_native_finite_values_whose_error_overflows(dt, isa):
    """Finite values only, but in one chunk |g - ref| overflows (float64: g, ref near +-max, opposite
    signs): the vector loop's shortcut (no finiteness mask on the bias terms) must not take that chunk
    (float32: a float32 g never makes it overflow; ref near float64's max goes the slow way all the
    same). A chunk whose reference is 0 must sum its signed errors as 0 whatever their sign. The same
    figures as the NumPy path."""
    rng = np.random.default_rng(5)
    ref = rng.standard_normal((8, 600))
    got = (ref * (1 + rng.standard_normal(ref.shape) * 1e-6)).astype(NP[dt])
    big = float(np.finfo(np.float64).max) * 0.75
    if dt == "float64":
        got[2, 10], ref[2, 10] = big, -big
    else:
        ref[2, 10] = -big
    ref[5, :300] = 0.0                       # sign(ref) = 0: err * 0 is -0 where err < 0
    E = np.abs(ref) * 1e-5 + 1e-9
    _same(_run(got, ref, E, dt, 3, native=True), _run(got, ref, E, dt, 1, native=False))


@pytest.mark.parametrize("dt", DTYPES)
def test_figures_are_those_of_excess_and_the_bias_test(dt):
    """The whole-array definitions (precision.excess, precision.ratio, bias.bias_test) on finite data."""
    rng = np.random.default_rng(7)
    ref = rng.standard_normal((64, 33)) * 3
    got = (ref * (1 + 2.0 ** -9)).astype(NP[dt])        # a planted bias: the test must see it
    E = np.abs(ref) * 2.0 ** -12
    fig = _run(got, ref, E, dt, 3, native=C.native() is not None)
    assert fig["ratio"] == pytest.approx(float(np.max(ratio(excess(got, ref), E))), rel=1e-12)
    want, where, _, _ = bias_test(got, ref, E, P_CASE / C.MAX_ARRAYS)
    assert fig["bias"] == pytest.approx(want, rel=1e-9) and fig["bias_where"] == where
    assert fig["bias"] > 1 or dt == "float64" and fig["ratio"] > 1


@pytest.mark.parametrize("dt", ["float32", "float64", "float16"])
def test_multiplicities_exact_and_bucketed(dt, monkeypatch):
    rng = np.random.default_rng(3)
    got = rng.integers(-50, 50, size=(300, 7)).astype(NP[dt]) / 8
    got[0, 0], got[0, 1] = 0.0, -0.0
    _, inv, cnt = np.unique(np.where(got == 0, 0.0, got.astype(np.float64)), return_inverse=True,
                            return_counts=True)
    exact = cnt[inv.reshape(got.shape)]
    assert np.array_equal(C.multiplicities(got), exact)
    if C.native() is not None and got.itemsize > 2:
        monkeypatch.setattr(C, "EXACT_SLOTS", 16)           # too small: bucket counts, never below exact
        assert (C.multiplicities(got) >= exact).all()


def _growing(dt, rng):
    """Rows whose reference grows row by row (the running scale grows block by block), with bounds
    planted above the early running scale but below the final one, above the final one, infinite and
    zero, and errors at them (the largest constrained error sits at a planted element)."""
    rows, n = 40, 9
    ref = rng.standard_normal((rows, n)) * (2.0 ** (np.arange(rows) / 4))[:, None]
    got = ref.astype(NP[dt])
    E = np.abs(ref) * 1e-2
    final = float(np.max(np.abs(ref)))
    E[1, 2] = 0.5 * final                       # above the running scale then, constrained in the end
    E[2, 3] = 0.9 * final
    E[3, 0] = 2.0 * final                       # unconstrained
    E[0, 5], E[4, 4] = np.inf, 0.0
    got[1, 2] = (ref[1, 2] + 0.25 * final)      # the largest error of a constrained element
    got[3, 0] = (ref[3, 0] + 0.5 * final)       # larger, but unconstrained
    return got, ref, E


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("native", [False, True])
def test_running_scale_gives_the_known_scale_figures(dt, native):
    """scale=None (the streaming judge's one pass): the figures of the scale known in advance, exactly."""
    if native and C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    rng = np.random.default_rng(11 + DTYPES.index(dt))
    for got, ref, E in (_growing(dt, rng), _special(dt, rng, (30, 7))):
        scale = float(np.max(np.where(np.isfinite(ref), np.abs(ref), 0.0)))
        figs = []
        for s in (scale, None):
            acc = C.ArrayAccumulator(got, s, dt)
            if not native:
                acc.mod = None
            for lo in range(0, got.shape[0], 4):
                acc.add(ref[lo:lo + 4], E[lo:lo + 4], lo * got.shape[1])
            figs.append(acc.figures())
        assert figs[1]["scale"] == scale
        _same(figs[1], figs[0], rel=0.0)
    assert figs[0]["unconstrained"] >= 1


def test_too_many_candidates_are_refused(monkeypatch):
    """Beyond MAX_CANDIDATES the running scale gives no figures (the caller judges again, stream.py)."""
    got, ref, E = _growing("float32", np.random.default_rng(5))
    monkeypatch.setattr(C, "MAX_CANDIDATES", 1)
    acc = C.ArrayAccumulator(got, None, "float32")
    for lo in range(0, got.shape[0], 4):
        acc.add(ref[lo:lo + 4], E[lo:lo + 4], lo * got.shape[1])
    assert acc.overflowed
    with pytest.raises(RuntimeError, match="too many candidates"):
        acc.figures()


@pytest.mark.parametrize("n", [1 << 16, 300_007])
def test_multiplicities_of_many_float32_values(n):
    """From 2^16 32-bit values the compiled count takes its radix path: exact, -0 with +0, against
    np.unique."""
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    rng = np.random.default_rng(n)
    got = rng.standard_normal(n).astype(np.float32)
    got[::5] = np.round(got[::5] * 16) / 16          # many repeated values
    got[1::97], got[2::89] = 0.0, -0.0
    got[3::1001] = np.nan                             # NaN: one bit pattern, counted like any value
    bits = got.view(np.uint32).copy()
    bits[bits == 0x80000000] = 0
    _, inv, cnt = np.unique(bits, return_inverse=True, return_counts=True)
    assert np.array_equal(C.multiplicities(got), cnt[inv.reshape(-1)])


def test_multiplicities_with_one_value_held_by_most_elements():
    """A value held by most of 2M float32 elements swells one hash partition of the compiled count past
    its scratch (PART_CAP in _judge.c): that part is counted in a table of its distinct hashes (grown
    as they come: ~100K of them here), exact as np.unique says; and the streaming judge's 2-byte counts
    (SaturatedCounts) give the same counts, the capped ones restored."""
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    n = (1 << 21) + 12_345
    rng = np.random.default_rng(11)
    got = rng.standard_normal(n).astype(np.float32)
    got[: 3 * n // 4] = 0.0                              # one value ~1.6M times (-0 among them)
    got[: n // 8: 3] = -0.0
    got[n // 2: n // 2 + 200_000] = 1.5                  # another, 200K times
    rng.shuffle(got)
    bits = got.view(np.uint32).copy()
    bits[bits == 0x80000000] = 0
    _, inv, cnt = np.unique(bits, return_inverse=True, return_counts=True)
    want = cnt[inv.reshape(-1)]
    assert np.array_equal(C.multiplicities(got), want)
    sc = C.SaturatedCounts(got)
    one_half = int(np.array(1.5, dtype=np.float32).view(np.uint32))
    assert sc.per.dtype == np.uint16 and sorted(sc.keys) == [0, one_half, 0x80000000]     # -0 looked up as +0
    assert (got[1000:300_000].view(np.uint32) == 0x80000000).any()
    assert np.array_equal(sc.fix(sc.per[1000:300_000], got[1000:300_000]), want[1000:300_000])


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@pytest.mark.parametrize("n", [1000, 70_000])
def test_multiplicities_uint16_unless_a_count_does_not_fit(dt, n):
    """Counts come back as uint16 when they all fit; a value held by more than 65535 elements gives
    uint32 counts (the compiled count refuses the uint16 array and counts again), exact either way;
    the comparison's figures do not depend on the width."""
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    rng = np.random.default_rng(n)
    got = rng.standard_normal(n).astype(NP[dt])
    m = C.multiplicities(got)
    assert m.dtype == np.uint16
    big = np.concatenate([got, np.full(65536, 1.5, dtype=NP[dt])])
    mb = C.multiplicities(big)
    assert mb.dtype == np.uint32 and int(mb[-1]) == 65536 + int((got == 1.5).sum())
    assert np.array_equal(mb[:n].astype(np.int64), m.astype(np.int64) + 65536 * (got == 1.5))
    ref = got.astype(np.float64) * (1 + 1e-3)
    E = np.abs(ref) * 1e-4
    figs = []
    for mult in (m, m.astype(np.uint32)):
        acc = C.ArrayAccumulator(got, float(np.max(np.abs(ref))), dt, mult=mult)
        acc.add(ref, E, 0)
        figs.append(acc.figures())
    _same(figs[0], figs[1], rel=0.0)


def test_set_isa_names_its_choices():
    """An unknown instruction set, or one this CPU does not run, is refused with the choices named; the
    one in use stays."""
    mod = C.native()
    if mod is None:
        pytest.skip("refnorm.check._judge is not built")
    was = mod.set_isa()
    assert mod.isas()[-1] == "base" and was == mod.isas()[0]
    with pytest.raises(ValueError, match="isa=sse9; expected 'avx512', 'avx2' or 'base'"):
        mod.set_isa("sse9")
    for name in {"avx512", "avx2"} - set(mod.isas()):
        with pytest.raises(ValueError, match=f"does not run {name}"):
            mod.set_isa(name)
    assert mod.set_isa() == was


@pytest.mark.parametrize("dt", DTYPES)
def test_native_abs_max_finite_and_widened_values(dt, isa):
    """The compiled running scale (abs_max_finite, and compare's last figure) is compare._abs_max_finite;
    float32 values read as they are give the figures of their float64 widening, and mult None those of
    multiplicities 1."""
    rng = np.random.default_rng(11 + DTYPES.index(dt))
    got, ref, E = _special(dt, rng, (5, 300))
    mod = C.native()
    for a in (ref.reshape(-1), E.reshape(-1), np.array([]), np.array([np.nan, -np.inf]), -np.abs(ref).reshape(-1)):
        assert mod.abs_max_finite(np.ascontiguousarray(a)) == C._abs_max_finite(a)
    if got.dtype != np.float32:
        return
    shape, acc1, acc2 = got.shape, np.zeros(3 * (1 + 5 + 300)), np.zeros(3 * (1 + 5 + 300))
    flat, r, e = got.reshape(-1), ref.reshape(-1), E.reshape(-1)
    a = mod.compare(flat, r, e, None, C.KIND[dt], 2.0, shape, 0, acc1)
    b = mod.compare(flat.astype(np.float64), r, e, np.ones(flat.size, np.uint16), C.KIND[dt], 2.0, shape, 0, acc2)
    assert repr(a) == repr(b) and np.array_equal(acc1, acc2)
    assert a[-1] == C._abs_max_finite(r)          # the block's max |ref| (the next block's running scale)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_pattern_counts_are_the_multiplicities(dt, monkeypatch):
    """16-bit arrays' multiplicities as a table of bit-pattern counts (the streaming judge's, looked up
    per block) equal the per-element ones, -0 with +0, NaN patterns each their own."""
    rng = np.random.default_rng(5)
    got = (rng.integers(-40, 40, size=(70, 9)) / 4).astype(NP[dt])
    flat = got.reshape(-1)
    flat[:6] = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, -0.0]).astype(NP[dt])
    monkeypatch.setattr(C.PatternCounts, "CHUNK", 100)           # the counts summed over chunks
    for compiled in dict.fromkeys([C.native() is not None, False]):
        if not compiled:                                          # NumPy's bincount
            monkeypatch.setattr(C, "native", lambda: None)
        pc = C.PatternCounts(got)
        assert np.array_equal(pc.take(got), C.multiplicities(got).reshape(-1))
        assert np.array_equal(pc.take(got[:, 3:5]), C.multiplicities(got)[:, 3:5].reshape(-1))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_compiled_16bit_patterns_read_as_numpy_widens_them(dt, isa):
    """The compiled comparison reads 16-bit values as their bit patterns, through a table of the 65536
    values built from integers: every finite pattern is NumPy's float64 widening exactly (max |g - ref|
    is 0 against it, with bounds 0, subnormals and -0 included); and the multiplicities looked up by
    pattern (mtab, the streaming judge's PatternCounts) give the figures of the per-element ones, whole
    and along an axis."""
    mod = C.native()
    bits = np.arange(65536, dtype=np.uint16)
    vals = bits.view(NP[dt])
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals.astype(np.float64))
    b, ref = bits[ok], vals[ok].astype(np.float64)
    acc = np.zeros(3)
    res = mod.compare(b, ref, np.zeros(b.size), None, C.KIND[dt], 1.0, (b.size,), 0, acc)
    assert res[0] == 0.0 and res[3] == 0.0 and res[2] == 0          # ratio, max |g - ref|, unconstrained
    rng = np.random.default_rng(12)
    got, ref, E = _special(dt, rng, (6, 40, 7))
    pc = C.PatternCounts(got)
    for axis, blocks in ((None, 1), (None, 3), (1, 4)):
        figs = []
        for mult in (C.multiplicities(got), pc):
            acc = C.ArrayAccumulator(got, float(np.nanmax(np.where(np.isinf(ref), np.nan, np.abs(ref)))), dt, mult=mult)
            edges = np.linspace(0, got.shape[1] if axis else got.size, blocks + 1).astype(int)
            for s, e in zip(edges[:-1], edges[1:]):
                if axis is None:
                    acc.add(ref.reshape(-1)[s:e], E.reshape(-1)[s:e], int(s))
                else:
                    acc.add(ref[:, s:e], E[:, s:e], int(s), axis=axis)
            figs.append((acc.figures(), acc.acc.copy()))
        _same(figs[0][0], figs[1][0], rel=0.0)
        assert np.array_equal(figs[0][1], figs[1][1])            # the bias test's sums, multiplicities in them


def test_compiled_pattern_counts():
    """_judge.pattern_counts adds the counts of 16-bit patterns (any length, a run of one pattern
    included) into a table of 65536 uint64, and names a wrong table."""
    mod = C.native()
    if mod is None:
        pytest.skip("refnorm.check._judge is not built")
    rng = np.random.default_rng(8)
    for n in (0, 1, 7, 4099):
        bits = rng.integers(0, 65536, size=n).astype(np.uint16)
        bits[: n // 2] = 123                                      # a run of one pattern
        table = np.full(65536, 5, dtype=np.uint64)
        mod.pattern_counts(bits, table)
        assert np.array_equal(table, np.bincount(bits, minlength=65536) + 5)
    with pytest.raises(ValueError, match="holds 100 counts; expected 65536"):
        mod.pattern_counts(np.zeros(3, np.uint16), np.zeros(100, np.uint64))
    with pytest.raises(TypeError, match="'bits' has format"):
        mod.pattern_counts(np.zeros(3, np.uint32), np.zeros(65536, np.uint64))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_bucket_counts_are_the_multiplicities_beyond_the_exact_limit(dt, monkeypatch):
    """An array of more than EXACT_SLOTS 32/64-bit values: its multiplicities as a table of 2^24 bucket
    counts (the streaming judge's, looked up per block) equal the per-element ones, which count those
    same buckets (never below the exact counts), -0 with +0; and the stream takes the table for it."""
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    from refnorm.check import stream
    rng = np.random.default_rng(6)
    got = (rng.integers(-40, 40, size=(70, 9)) / 4).astype(NP[dt])
    flat = got.reshape(-1)
    flat[:6] = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, -0.0]).astype(NP[dt])
    exact = C._count(got)
    monkeypatch.setattr(C, "EXACT_SLOTS", 100)                   # 630 values: bucketed
    monkeypatch.setattr(stream, "EXACT_SLOTS", 100)
    monkeypatch.setattr(C.PatternCounts, "CHUNK", 100)           # the counts summed over chunks
    want = C._count(got)
    assert np.all(want >= exact) and want[0, 0] == want[0, 1] == want[0, 5]
    bc = C.BucketCounts(got)
    assert np.array_equal(bc.take(got), want.reshape(-1))
    assert np.array_equal(bc.take(got[:, 3:5]), want[:, 3:5].reshape(-1))
    tables = stream._multiplicities([got, got[:10]])
    assert isinstance(tables[0], C.BucketCounts) and not isinstance(tables[1], C.TABLES)


@pytest.mark.parametrize("high", [True, False])
@pytest.mark.parametrize("blocks", [1, 5])
def test_ratios_taken_only_where_they_matter(blocks, high, isa):
    """The compiled comparison divides only for the elements whose ratio can exceed the running
    threshold (min of the largest so far, the third worst, 1): with ratios that tie exactly, sit at 1,
    just above and below it, and a bound of 0, the maximum, the count over 1 and the worst three (ties
    to the lowest index) are the NumPy definition's."""
    rng = np.random.default_rng(17)
    n = 3000
    ref = np.zeros(n)
    E = 2.0 ** rng.integers(-30, -10, size=n)
    k = rng.choice([0.0, 0.25, 0.5, 1.0, 1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, 3.0], size=n)
    k[[100, 900, 2500]] = 7.0                           # three equal worst, after smaller ones
    k[[50, 2999]] = 7.0 - 2.0 ** -50
    if not high:                                        # every ratio below 1: the worst three decide
        k = k / 8
    got = k * E                                         # float64: the excess is |got|, the ratio k exactly
    if high:
        E[[10, 20]] = 0.0                               # ratio inf (got > 0) or 0 (got = 0)
        got[10], got[20] = 1e-9, 0.0
        k[10], k[20] = math.inf, 0.0
    got = got.reshape(60, 50)
    fig = _run(got, ref.reshape(60, 50), E.reshape(60, 50), "float64", blocks, native=True)
    want = _run(got, ref.reshape(60, 50), E.reshape(60, 50), "float64", blocks, native=False)
    _same(fig, want)
    assert fig["ratio"] == k.max() and fig["over"] == int(np.sum(k > 1))
    worst = [(0, 10), (2, 0), (18, 0)] if high else [(2, 0), (18, 0), (50, 0)]   # inf, then the first 7s
    assert [w[0] for w in fig["worst"]] == worst


@pytest.fixture(scope="module")
def plain_judge(tmp_path_factory):
    """refnorm/check/_judge.c built with -DREFNORM_NO_VECTOR_EXT: the plain-C loops a compiler without
    GCC's vector extensions gets (skipped without a C compiler, or without the installed module)."""
    import importlib.util
    import pathlib
    import shutil
    import subprocess
    import sysconfig
    if C.native() is None:
        pytest.skip("refnorm.check._judge is not built")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = pathlib.Path(C.__file__).with_name("_judge.c")
    out = tmp_path_factory.mktemp("plain") / ("_judge" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cc, "-O1", "-std=gnu11", "-shared", "-fPIC", "-ffp-contract=off", "-DREFNORM_NO_VECTOR_EXT",
                    "-I" + sysconfig.get_paths()["include"], str(src), "-o", str(out)], check=True)
    spec = importlib.util.spec_from_file_location("_judge", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dt", DTYPES)
def test_plain_c_loops_give_the_same_bits(dt, plain_judge, monkeypatch):
    """The plain-C loops (no vector extensions) take the same lanes in the same order: the same
    figures and the same row bounds, bit for bit, as the vectorized build. Compared: a long last axis and a
    short one (whole segments in one loop, W = 28), rows whose parameter runs are whole vectors (33 values
    a channel: not; 32: read once a run) and not."""
    from refnorm.check import bounds as B
    from refnorm.check.backends.base import Contract
    rng = np.random.default_rng(23 + DTYPES.index(dt))
    cases = [_special(dt, rng, shape) for shape in ((37, 203), (3, 2, 40, 28))]
    fast = [repr(_run(got, ref, E, dt, 3, native=True)) for got, ref, E in cases]
    calls = []
    for op, shape, cfg in [("batch_norm", (6, 4, 33), {}), ("instance_norm", (6, 4, 33), {}),
                           ("batch_norm", (6, 4, 32), {}), ("group_norm", (6, 8, 4, 8), {"num_groups": 4})]:
        ins = {"x": rng.standard_normal(shape) + 2, "weight": rng.standard_normal(shape[1]),
               "bias": rng.standard_normal(shape[1])}
        kw = dict(inputs=ins, config=cfg, training=True, cotangents={"y": rng.standard_normal(shape)}, state={},
                  ref_state={}, contract=Contract("stats_d", "block"), case_dtype="bfloat16")
        calls.append((op, kw, B.bounds(op, **kw)))
    monkeypatch.setattr(C, "native", lambda: plain_judge)
    assert [repr(_run(got, ref, E, dt, 3, native=True)) for got, ref, E in cases] == fast
    for op, kw, want in calls:
        plain = B.bounds(op, **kw)
        for part, d in want.items():
            for k, v in d.items():
                assert np.array_equal(plain[part][k], v), (op, part, k)
