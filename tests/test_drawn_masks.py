"""A backend that draws its own dropout keep-mask (from a seed, as Philox kernels do) returns it
(``Returned.masks``) and is judged against the reference computed with it (refnorm/check/masks.py)."""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pytest

import refnorm.golden as golden
from refnorm.check.backends.base import Returned
from refnorm.check.core import check_case
from refnorm.check.masks import ALPHA, drawn_mask, keep_rate_bound

from helpers import Wrapping

torch = pytest.importorskip("torch", reason="the own-mask kernels are torch composites")
from refnorm.check.backends.torch_backend import TorchBackend  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "golden")
MANIFEST = golden.store.read_manifest(GOLDEN)
DROPOUT_IDS = [e["id"] for e in MANIFEST["cases"]
               if e["id"].startswith("add_norm/") and e["case"]["config"].get("dropout_p", 0) > 0]


class OwnMaskKernel(Wrapping):
    """torch's add_norm composite (the torch-cpu adapter) with a dropout that draws its keep-masks itself,
    with torch.rand from a seeded generator, ignoring the call's; it returns what ``report`` makes of the
    masks it used (by default the masks themselves)."""
    name = "own-mask-add-norm"

    def __init__(self, report=None, draw=None, seed=1234):
        self.inner, self.report, self.seed = TorchBackend(), report, seed
        self.draw = draw or (lambda shape, p, gen: torch.rand(shape, generator=gen, dtype=torch.float64) >= p)

    def run(self, call):
        gen = torch.Generator().manual_seed(self.seed)
        p = float(call.config["dropout_p"])
        used = {k: self.draw(np.shape(call.inputs[k]), p, gen).numpy() for k in ("mask", "mask1") if k in call.inputs}
        ins = {**call.inputs, **{k: m.astype(call.inputs[k].dtype) for k, m in used.items()}}
        r = self.inner.run(dataclasses.replace(call, inputs=ins))
        told = used if self.report is None else {k: self.report(m) for k, m in used.items()}
        return Returned(r.outputs, r.grads, r.state, masks=told)


def _case(cid):
    return golden.load_case(GOLDEN, cid, manifest=MANIFEST)


def test_the_golden_set_has_dropout_cases_with_both_masks():
    assert len(DROPOUT_IDS) >= 10
    assert any("mask1" in e["case"]["inputs"] for e in MANIFEST["cases"] if e["id"] in DROPOUT_IDS)


@pytest.mark.parametrize("cid", DROPOUT_IDS)
def test_a_kernel_drawing_its_own_mask_passes_on_it(cid):
    case = _case(cid)
    res = check_case(OwnMaskKernel(), case)
    assert res.status == "passed", res.message
    names = [k for k in ("mask", "mask1") if k in case.steps[0].inputs]
    assert res.own_masks == [f"step0.input.{k}" for k in names]
    assert "the backend's own dropout mask" in res.message and res.to_json()["masks_drawn_by_backend"] == res.own_masks
    # its masks are not the case's: judged against the golden values, the same kernel fails
    assert check_case(OwnMaskKernel(report=lambda m: None), case).status in ("failed", "error")


@pytest.mark.parametrize("cid", DROPOUT_IDS)
def test_a_kernel_reporting_another_mask_than_it_used_fails(cid):
    res = check_case(OwnMaskKernel(report=lambda m: np.roll(m, 1, axis=-1)), _case(cid))
    assert res.status == "failed", res.message
    assert "own dropout mask" in res.message


def _large_case(p):
    """add_norm/mean1e3_p_rs_xnormal_f16_4x128 (512 values per mask) with dropout_p = ``p``."""
    case = _case("add_norm/mean1e3_p_rs_xnormal_f16_4x128")
    return dataclasses.replace(case, config={**case.config, "dropout_p": p})


def test_an_all_ones_mask_at_p_one_half_is_refused():
    # the kernel skips dropout (keeps everything) and says so: its outputs match that mask, but a fair
    # dropout at p = 0.5 keeps 512 of 512 with probability 2^-512
    ones = OwnMaskKernel(draw=lambda shape, p, gen: torch.ones(shape, dtype=torch.bool))
    res = check_case(ones, _large_case(0.5))
    assert res.status == "error"
    assert "'mask'" in res.message and "keeps 512 of 512" in res.message and "dropout_p=0.5" in res.message
    assert "binomial test" in res.message
    # a fair draw at p = 0.5 of the same case passes
    assert check_case(OwnMaskKernel(), _large_case(0.5)).status == "passed"


def test_a_fair_draw_is_accepted_and_a_biased_one_refused():
    shape, rng = (300, 400), np.random.default_rng(0)
    inputs = {"x": np.zeros(shape), "mask": np.ones(shape)}
    for p in (0.1, 0.25, 0.5, 0.9):
        for _ in range(20):
            m = rng.random(shape) >= p
            drawn_mask(0, "add_norm", {"dropout_p": p}, inputs, "mask", m)
        biased = rng.random(shape) >= p * 0.9        # 10% fewer drops than p: 1.2e5 values tell (> 11 sd)
        with pytest.raises(ValueError, match="inconsistent with dropout_p"):
            drawn_mask(0, "add_norm", {"dropout_p": p}, inputs, "mask", biased)


def test_the_keep_rate_bound_is_above_twice_the_exact_binomial_tail():
    # the refusal rule's false-alarm rate is at most ALPHA (ALPHA / 2 per side) because the bound is never
    # below twice the exact tail on the observed count's side
    for n, p in ((20, 0.25), (63, 0.25), (100, 0.5), (200, 0.1)):
        q = 1 - p
        pmf = [math.comb(n, k) * q ** k * p ** (n - k) for k in range(n + 1)]
        for k in range(n + 1):
            tail = sum(pmf[k:]) if k >= n * q else sum(pmf[:k + 1])
            assert keep_rate_bound(k, n, p) >= min(1.0, 2 * tail) * (1 - 1e-9), (n, p, k)
    assert keep_rate_bound(63, 63, 0.25) > ALPHA       # too few values to refuse keeping everything
    assert keep_rate_bound(75, 75, 0.25) < ALPHA
    assert keep_rate_bound(31, 31, 0.5) < ALPHA < keep_rate_bound(30, 30, 0.5)


@pytest.mark.parametrize("name,mask,config,message", [
    ("mask", np.ones((3, 5)), {"dropout_p": 0.25}, "has shape"),
    ("mask", np.full((4, 5), 0.5), {"dropout_p": 0.25}, "holds 0.5"),
    ("mask", np.full((4, 5), np.nan), {"dropout_p": 0.25}, "holds nan"),
    ("mask", [[1] * 5] * 4, {"dropout_p": 0.25}, "expected a numpy.ndarray"),
    ("mask", np.array([["1"] * 5] * 4), {"dropout_p": 0.25}, "expected bool, integer or float"),
    ("mask1", np.ones((4, 5)), {"dropout_p": 0.25}, "no input 'x1'"),
    ("rowscale", np.ones(4), {"dropout_p": 0.25}, "no mask a backend may draw"),
    ("mask", np.eye(4, 5), {"dropout_p": 0.0}, "inconsistent with dropout_p=0"),
])
def test_a_bad_mask_is_refused_with_the_reason(name, mask, config, message):
    inputs = {"x": np.zeros((4, 5)), "mask": np.ones((4, 5), np.float32)}
    with pytest.raises(ValueError, match=message):
        drawn_mask(0, "add_norm", config, inputs, name, mask)


def test_a_mask_is_returned_in_the_case_masks_dtype_as_zeros_and_ones():
    inputs = {"x": np.zeros((2, 3)), "mask": np.ones((2, 3), np.float16)}
    m = drawn_mask(1, "add_norm", {"dropout_p": 0.0}, inputs, "mask", np.ones((2, 3), bool))
    assert m.dtype == np.float16 and np.all(m == 1)
    with pytest.raises(ValueError, match="step 1: the mask 'mask'"):
        drawn_mask(1, "layer_norm", {"eps": 1e-5}, inputs, "mask", np.ones((2, 3)))
