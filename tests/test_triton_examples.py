"""examples/triton_norms.py: Triton LayerNorm, RMSNorm and residual add + norm kernels, wrapped with from_torch,
pass refnorm's check in Triton's interpreter (TRITON_INTERPRET=1, no GPU), and a planted bug in each fails it.

Kept fast for CI: the golden cases of at most 1000 elements (the 65537-row and 65536-wide ones take
minutes in the interpreter) and one generated case per planted bug. Needs triton (CI: triton==3.9.0);
skipped with the reason without it.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from helpers import GOLDEN, small_case_ids as _small, triton_example

torch, _tn = triton_example("examples.triton_norms")

from refnorm.check.core import run_check, run_generated  # noqa: E402
from refnorm.golden import generate  # noqa: E402
from refnorm.testing import assert_backend_passes  # noqa: E402

OPS = ("layer_norm", "rms_norm")


@pytest.fixture(scope="module")
def E():
    import examples.triton_norms as mod
    return mod


def _backend(E, op):
    return E.layer_norm_backend if op == "layer_norm" else E.rms_norm_backend


def test_runs_in_the_interpreter_without_a_gpu(E):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the example runs compiled, not interpreted")
    assert os.environ.get("TRITON_INTERPRET") == "1" and E.DEVICE == "cpu"


@pytest.mark.parametrize("op", OPS)
def test_example_passes_the_golden_cases(E, op):
    ids = _small(op)
    assert len(ids) >= 40, ids                      # every dtype and regime of the small cases
    rep = assert_backend_passes(_backend(E, op), case_ids=ids, golden=GOLDEN, allow_partial=True)
    s = rep.summary()
    assert s["failed"] == 0 and s["errors"] == 0
    # judged in all four dtypes, bfloat16 included (the interpreter's truncation is not relied on)
    judged = {c.dtype for c in rep.cases if c.status in ("passed", "partial")}
    assert judged == {"float64", "float32", "float16", "bfloat16"}, judged
    assert s["passed"] >= 35, s
    skipped = [c for c in rep.cases if c.status == "skipped"]
    # rms_norm's eps outside the sqrt and (both ops) weight_offset are options the kernels do not take:
    # skipped, by name, never judged against a kernel that ignored them
    assert all(f"not passed to triton-{op}" in c.message for c in skipped), [c.message for c in skipped]


def test_example_keeps_working_on_strided_inputs(E):
    """The checker hands strided views (--layout strided); the wrapper makes them contiguous itself."""
    ids = [i for i in _small("layer_norm") if "_f32_" in i or "_bf16_" in i][:6]
    assert_backend_passes(E.layer_norm_backend, case_ids=ids, golden=GOLDEN, layout="strided", allow_partial=True)


@pytest.mark.parametrize("op", OPS)
def test_planted_masked_lanes_in_the_variance_fail(E, op):
    # widths 100 and 7 are not powers of two: the last column block has masked lanes
    ids = [i for i in _small(op) if ("normal_f32_6x100" in i or "mean1e3_bf16_9x7" in i
                                     or "normal_eps1e-05_f32_6x100" in i or "mean1e3_eps1e-05_bf16_9x7" in i)]
    assert ids, _small(op)
    rep = run_check(E.buggy(op, "masked_variance"), GOLDEN, case_ids=ids, diagnose=False)
    assert [c.status for c in rep.cases] == ["failed"] * len(ids), [(c.id, c.status, c.message) for c in rep.cases]
    assert all("output y" in c.message for c in rep.cases)
    # and the same cases pass without the bug
    assert run_check(_backend(E, op), GOLDEN, case_ids=ids, diagnose=False).verdict in ("ok", "partial")


@pytest.mark.parametrize("op", OPS)
def test_planted_weight_gradient_partials_in_the_input_dtype_fail(E, op):
    # 512 rows of 48: 8 row blocks of 64, one program each; each program's partial sum is held in bfloat16,
    # so 8 roundings of partials (that largely cancel) enter dweight where the strict contract allows one
    recipe = generate.parse(f"{op} shape=512x48 dtype=bfloat16")
    bad = run_generated(E.buggy(op, "dw_input_dtype"), [recipe], diagnose=False).cases[0]
    assert bad.status == "failed" and "grad weight" in bad.message, (bad.status, bad.message)
    good = run_generated(_backend(E, op), [recipe], diagnose=False).cases[0]
    assert good.status == "passed", (good.status, good.message)
    if op == "rms_norm":
        # the contract decides: stats_d allows parameter-gradient accumulators in the case dtype (README,
        # "Choosing the contract"), so declared stats_d the same kernel passes
        from refnorm.check.backends import from_torch
        b = E.buggy(op, "dw_input_dtype")
        weak = from_torch(b.fn, op, contract="stats_d", signature=b.signature, options=b.keywords, device=E.DEVICE)
        res = run_generated(weak, [recipe], diagnose=False).cases[0]
        assert res.status == "passed", (res.status, res.message)


def test_residual_add_example_passes_and_its_planted_bugs_fail_and_are_named(E):
    """The fused add + norm (add_norm: x + residual held in float32, normalized; the new residual returned,
    its cotangent joining the residual's gradient under prenorm) passes every golden add_norm case it takes
    in all four dtypes; the residual added in the activation dtype and a backward that drops the returned
    residual's gradient each fail, and the diagnosis names them."""
    rep = assert_backend_passes(E.add_norm_backend, ops=["add_norm"], golden=GOLDEN, allow_partial=True)
    s = rep.summary()
    judged = {c.dtype for c in rep.cases if c.status in ("passed", "partial")}
    assert s["failed"] == 0 and s["errors"] == 0 and s["passed"] >= 8 and len(judged) == 4, (s, judged)
    assert all("not passed to triton-add_norm" in c.message for c in rep.cases if c.status == "skipped")
    for bug, mechanism, array in (("sum_in_d", "residual_add_in_d", "output y"),
                                  ("no_dresidual_out", "no_dresidual_out", "grad residual")):
        failed = [c for c in run_check(E.buggy("add_norm", bug), GOLDEN, ops=["add_norm"]).cases
                  if c.status == "failed"]
        assert len(failed) >= 4, bug
        assert any(array in c.message for c in failed), (bug, [c.message for c in failed])
        named = [(c.diagnosis or {}).get("matched") for c in failed]
        assert all(n == mechanism for n in named), (bug, named)


def test_bfloat16_rounding_is_to_nearest_even(E):
    """The kernels' own float32 -> bfloat16 rounding equals torch's (nearest even) on ties, near-ties,
    infinities and NaN, where triton 3.9.0's interpreter would truncate."""
    import triton
    import triton.language as tl

    @triton.jit
    def roundtrip(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        _tn._store(dst, offs, tl.load(src + offs, mask=m, other=0.0), m, 2)

    vals = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, -(1.0 + 2 ** -8 + 2 ** -20),
                         3.3961e38, 3.4e38, float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e-40],
                        dtype=torch.float32)
    bits = torch.from_numpy(np.random.default_rng(19).integers(0, 2 ** 32, 4096, dtype=np.uint64).astype(np.uint32)
                            .view(np.int32))
    vals = torch.cat([vals, bits.view(torch.float32)])            # every exponent, ties and NaN payloads
    out = torch.empty(vals.shape, dtype=torch.bfloat16)
    roundtrip[(1,)](vals, out.view(torch.int16), vals.numel(), BLOCK=8192)
    ref = vals.to(torch.bfloat16)
    same = (out.view(torch.int16) == ref.view(torch.int16)) | (torch.isnan(out) & torch.isnan(ref))
    assert bool(same.all()), (vals, out, ref)
