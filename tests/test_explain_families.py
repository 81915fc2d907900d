"""The arithmetic families of the diagnosis (issue 33, refnorm/check/explain.py and consistent.py), each on a
kernel planted here: the float64 specification, correctly rounded to the case dtype, with one deviation. Each
test fails if its family stops naming the mechanism (or names another), and the correct kernel names nothing."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from refnorm import registry  # noqa: E402
from refnorm.check import Returned, consistent, explain, localize  # noqa: E402
from refnorm.check.backends.base import Contract  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.golden import load_case  # noqa: E402

GOLDEN = os.path.join(ROOT, "golden")
NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


class Spec:
    """The specification as a kernel: ``change(call) -> (config, inputs, cotangents, training)`` before it,
    ``post(call, result_dict) -> result_dict`` after it ({"outputs", "grads", "state"}, float64), then each
    floating array rounded to nearest in the case dtype (float32 for statistics and state)."""

    name = "spec-kernel"

    def __init__(self, change=None, post=None):
        self.change, self.post = change, post

    def available(self):
        return None

    def supports(self, call):
        return None

    def contract(self, call):
        return Contract("strict")

    def run(self, call):
        cfg, inputs, cot, training = dict(call.config), dict(call.inputs), dict(call.cotangents), call.training
        if self.change is not None:
            cfg, inputs, cot, training = self.change(call)
        with np.errstate(all="ignore"):
            r = registry.evaluate(call.op, inputs, config=cfg, grad_outputs=cot or None, state=dict(call.state) or None,
                                  training=training)
        d = {"outputs": dict(r.outputs), "grads": dict(r.grads) if call.cotangents else {}, "state": dict(r.state)}
        if self.post is not None:
            with np.errstate(all="ignore"):
                d = self.post(call, d)
        dt = NP[call.dtype]

        def cast(part, k, v):
            v = np.asarray(v)
            if v.dtype.kind != "f":
                return v
            if call.op == "norm_quant" and k == "q":
                from refnorm.norms.norm_quant import quantize
                return quantize(v, call.config["quant_dtype"])
            if part == "state" or (part == "outputs" and k not in ("y", "q", "w", "residual_out")):
                return v.astype(np.float32) if call.dtype != "float64" else v
            return v.astype(dt)
        return Returned(*({k: cast(p, k, v) for k, v in d[p].items()} for p in ("outputs", "grads", "state")))


def diag(kernel, case_id):
    r = check_case(kernel, load_case(GOLDEN, case_id))
    assert r.status == "failed", (case_id, r.status)
    return r.diagnosis


def expect(kernel, case_id, mechanism, words):
    """The kernel fails the case, and the diagnosis names ``mechanism`` with ``words`` in its message."""
    d = diag(kernel, case_id)
    assert d["mechanism"] == mechanism and words in d["message"], d["message"]


def test_the_correct_spec_kernel_passes():
    for case_id in ("layer_norm/mean1e3_f32_6x100", "group_norm/normal_g4_f32_2x8x5x7", "rms_norm/normal_eps1e-05_f32_6x100"):
        assert check_case(Spec(), load_case(GOLDEN, case_id)).status == "passed", case_id


# ---------------------------------------------------------------- one rounding error per row (consistent.py)
def test_rstd_returned_as_std_is_not_a_one_pass_variance():
    """On mean-shifted rows the one-pass variance's spread holds an rstd returned as std; but y is right, so
    no single variance error per row explains both: explained as rstd's reciprocal instead (a returned statistic
    at another stage of its finalization: no mechanism of the list names it)."""
    post = lambda call, d: {**d, "outputs": {**d["outputs"], "rstd": 1 / d["outputs"]["rstd"]}}   # noqa: E731
    expect(Spec(post=post), "layer_norm/mean1e3_f32_6x100", None, "rstd is its reciprocal")


def test_one_s_per_row():
    """Two rows; the variant moves y and rstd linearly in s. Row 0's arrays agree on s = 1/2; row 1's y needs
    s = 0 while its rstd needs s = 1: no single s."""
    class Case:
        op, config = "layer_norm", {"normalized_shape": [2]}
    s = np.array(consistent.grid())
    base_y, dy = np.array([[1.0, -1.0], [1.0, -1.0]]), np.array([[0.1, -0.1], [0.1, -0.1]])
    base_r, dr = np.array([1.0, 1.0]), np.array([0.2, 0.2])
    vy = base_y[None] + s[:, None, None] * dy[None]
    vr = base_r[None] + s[:, None] * dr[None]
    E_y, E_r = np.full((2, 2), 1e-3), np.full(2, 1e-3)
    got_y = base_y + 0.5 * dy
    assert consistent.one_s_per_row(Case, (2, 2), [("y", got_y, E_y, vy), ("rstd", base_r + 0.5 * dr, E_r, vr)])
    bad_r = base_r + np.array([0.5, 1.0]) * dr
    assert not consistent.one_s_per_row(Case, (2, 2), [("y", got_y, E_y, vy), ("rstd", bad_r, E_r, vr)])


# ---------------------------------------------------------------- powers, statistics, the forward naming the failure
def test_rms_norm_dividing_by_rsqrt_is_rstd_squared_away():
    """y = x / rsqrt(ms + eps) * w: y is the expected value times rstd^-2; dx and dweight follow from it."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        ms = (x * x).mean(axis=-1, keepdims=True) + call.config["eps"]
        return {**d, "outputs": {**d["outputs"], "y": d["outputs"]["y"] * ms}}
    expect(Spec(post=post), "rms_norm/normal_eps1e-05_f32_6x100", "semantics", "rstd^-2")


def test_rstd_rounded_to_bfloat16_in_the_backward_is_precision():
    """rms_norm's dx computed with rstd rounded to bfloat16 (saved in the input dtype), y exact."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        w = np.asarray(call.inputs["weight"], np.float64)
        dy = np.asarray(call.cotangents["y"], np.float64)
        r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + call.config["eps"])
        r2 = r.astype(ml_dtypes.bfloat16).astype(np.float64)
        xh, g = x * r2, dy * w
        dx = r2 * (g - xh * (g * xh).mean(axis=-1, keepdims=True))
        return {**d, "grads": {**d["grads"], "x": dx, "weight": (dy * xh).sum(axis=0)}}
    expect(Spec(post=post), "rms_norm/normal_eps1e-05_f32_6x100", "precision", "rstd rounded to bfloat16")


def test_layer_norm_statistics_over_a_prefix_is_a_tail_block_dropped():
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        m = 64
        mean = x[:, :m].mean(axis=1, keepdims=True)
        rstd = 1 / np.sqrt(((x[:, :m] - mean) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        y = (x - mean) * rstd * call.inputs["weight"] + call.inputs["bias"]
        return {**d, "outputs": {**d["outputs"], "y": y, "mean": mean, "rstd": rstd}}
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "block", "first 64 of 100")


# ---------------------------------------------------------------- configuration, mode, layout
def test_gated_norm_group_size_ignored_is_group():
    change = lambda c: ({**c.config, "group_size": None}, dict(c.inputs), dict(c.cotangents), c.training)  # noqa: E731
    expect(Spec(change=change), "gated_norm/normal_gs4_f64_3x7x12", "group", "group_size None")


def test_eval_backward_by_the_training_formula_is_mode():
    def post(call, d):
        if call.training:
            return d
        t = registry.evaluate(call.op, call.inputs, config=call.config, grad_outputs=call.cotangents,
                              state=dict(call.state), training=True)
        return {**d, "grads": {**d["grads"], "x": t.grads["x"]}}
    from refnorm.golden import store
    ids = [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "batch_norm"
           and "eval" in e["id"]]
    named = 0
    for cid in ids[:6]:
        r = check_case(Spec(post=post), load_case(GOLDEN, cid))
        if r.status == "failed":
            assert r.diagnosis["mechanism"] in ("mode", None), r.diagnosis["message"]
            named += r.diagnosis["mechanism"] == "mode"
    assert named, ids[:6]


def test_channels_last_memory_read_as_nchw_is_layout():
    def change(call):
        x = np.asarray(call.inputs["x"])
        N, C = x.shape[:2]
        S = x[0, 0].size
        rd = lambda a: np.ascontiguousarray(np.asarray(a).reshape(N, S, C).transpose(0, 2, 1)).reshape(x.shape)  # noqa: E731
        ins = {k: (rd(v) if np.shape(v) == x.shape else v) for k, v in call.inputs.items()}
        cot = {k: (rd(v) if np.shape(v) == x.shape else v) for k, v in call.cotangents.items()}
        return dict(call.config), ins, cot, call.training

    def post(call, d):
        x = np.asarray(call.inputs["x"])
        N, C = x.shape[:2]
        S = x[0, 0].size
        back = lambda a: np.ascontiguousarray(np.asarray(a).reshape(N, C, S).transpose(0, 2, 1)).reshape(x.shape)  # noqa: E731
        return {p: {k: (back(v) if np.shape(v) == x.shape else v) for k, v in a.items()} for p, a in d.items()}
    d = diag(Spec(change=change, post=post), "group_norm/normal_g4_f32_2x8x5x7")
    assert d["mechanism"] == "layout", d["message"]


def test_norm_quant_scale_ub_ignored_is_quant_scale():
    from refnorm.golden import store
    ids = [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "norm_quant"
           and e["case"]["config"].get("scale_ub")]
    change = lambda c: ({**c.config, "scale_ub": None}, dict(c.inputs), dict(c.cotangents), c.training)  # noqa: E731
    named = [r.diagnosis for r in (check_case(Spec(change=change), load_case(GOLDEN, cid)) for cid in ids)
             if r.status == "failed"]
    assert named and all(d["mechanism"] == "quant_scale" for d in named), [d["message"] for d in named]


# ---------------------------------------------------------------- gradients: slices, counts, sums
def test_group_norm_dweight_from_the_first_sample_is_reduction():
    def post(call, d):
        one = registry.evaluate(call.op, {k: (np.asarray(v)[:1] if k == "x" else v) for k, v in call.inputs.items()},
                                config=call.config, grad_outputs={"y": np.asarray(call.cotangents["y"])[:1]})
        return {**d, "grads": {**d["grads"], "weight": one.grads["weight"]}}
    expect(Spec(post=post), "group_norm/normal_g4_f32_2x8x5x7", "reduction", "samples")


def test_group_norm_backward_means_over_one_channel_is_group():
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        N, C = x.shape[:2]
        G = call.config["num_groups"]
        xs = x.reshape(N * G, -1)
        mean = xs.mean(axis=1, keepdims=True)
        rstd = 1 / np.sqrt(((xs - mean) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        w = np.asarray(call.inputs["weight"], np.float64).reshape(1, C, *([1] * (x.ndim - 2)))
        g = (np.asarray(call.cotangents["y"], np.float64) * w).reshape(N * G, -1)
        xh = (xs - mean) * rstd
        k = C // G                           # the means divided by one channel's count: k times too large
        dx = rstd * (g - k * g.mean(axis=1, keepdims=True) - k * xh * (g * xh).mean(axis=1, keepdims=True))
        return {**d, "grads": {**d["grads"], "x": dx.reshape(x.shape)}}
    expect(Spec(post=post), "group_norm/normal_g4_f32_2x8x5x7", "group", "one channel's count")


def test_twice_a_parameter_gradient_is_constant():
    """Every partial of dweight repeated, the whole array twice its value: rule 14's constant (docs/verdicts.md;
    some partials repeated are rule 11's reduction)."""
    post = lambda call, d: {**d, "grads": {**d["grads"], "weight": 2 * d["grads"]["weight"]}}   # noqa: E731
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "constant", "counted twice")


def test_missing_rows_of_a_short_sum_tries_only_power_of_two_blocks():
    """A sum of two values: among the first/last-k sums of many rows, one lands near any error by chance;
    there only k a power of two (and the tiles) is tried."""
    rng = np.random.default_rng(0)
    c = rng.standard_normal((1000, 2))
    err = -c[:7545 % 1000].sum(axis=0)              # the first 545 rows missing: not a power of two
    assert localize.missing_rows(err, c) == ""
    assert "the first 512 rows" in localize.missing_rows(-c[:512].sum(axis=0), c)
    c4 = rng.standard_normal((10, 6))
    assert "last 3 rows" in localize.missing_rows(-c4[7:].sum(axis=0), c4)


def test_reduction_rows_without_x_is_none():
    """weight_norm has no input x: the per-slice search declines (it raised KeyError: 'x')."""
    class R:
        inputs, got, E, cotangents, training, state, step = {"v": np.ones((3, 4))}, {"grads": {"g": np.ones(3)}}, \
            {"grads": {"g": np.ones(3)}}, {"w": np.ones((3, 4))}, True, {}, 0

    class C:
        op, config = "weight_norm", {"dim": 0}
    ref = registry.evaluate("weight_norm", {"v": np.ones((3, 4)), "g": np.ones((3, 1))}, config={"dim": 0},
                            grad_outputs={"w": np.ones((3, 4))})
    assert explain.reduction_rows(C, R, ref, "grads", "g", lambda *a: ref) is None


def test_a_failing_search_costs_no_localization(monkeypatch):
    """An arithmetic family that raises is reported (explain_error) and the failure is still localized."""
    def boom(*a, **k):
        raise TypeError("planted")
    monkeypatch.setattr(explain, "explain", boom)
    post = lambda call, d: {**d, "grads": {**d["grads"], "weight": 2 * d["grads"]["weight"]}}   # noqa: E731
    d = diag(Spec(post=post), "layer_norm/normal_f32_6x100")
    assert d["explain_error"] == "TypeError: planted" and d["where"], d


def test_param_sum_over_a_multi_axis_normalized_shape():
    class C:
        op, config = "layer_norm", {"normalized_shape": [5, 6]}
    assert explain._param_sum(C, np.zeros((2, 3, 5, 6)), np.ones((2, 3, 5, 6))).shape == (5, 6)


def test_weight_and_bias_swapped_is_affine():
    change = lambda c: (dict(c.config), {**c.inputs, "weight": c.inputs["bias"], "bias": c.inputs["weight"]},  # noqa: E731
                        dict(c.cotangents), c.training)
    expect(Spec(change=change), "layer_norm/normal_f32_6x100", "affine", "bias and weight swapped")


def test_a_parameter_gradient_averaged_over_rows_is_reduction():
    post = lambda call, d: {**d, "grads": {**d["grads"], "bias": d["grads"]["bias"] / 6}}   # noqa: E731
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "reduction", "averaged over")


def test_a_quantization_scale_returned_as_its_reciprocal_is_quant_scale():
    from refnorm.golden import store
    ids = [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "norm_quant"
           and "dyn" in e["id"]][:3]
    post = lambda call, d: {**d, "outputs": {**d["outputs"], "scale": 1 / d["outputs"]["scale"]}}   # noqa: E731
    for cid in ids:
        d = diag(Spec(post=post), cid)
        assert d["mechanism"] == "quant_scale" and "scale is its reciprocal" in d["message"], d["message"]


def test_dweight_from_the_returned_output_is_backward():
    def post(call, d):
        y = d["outputs"]["y"].astype(NP[call.dtype]).astype(np.float64)
        dw = (np.asarray(call.cotangents["y"], np.float64) * y).sum(axis=0)
        return {**d, "grads": {**d["grads"], "weight": dw}}
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "backward", "the returned output y")


def test_running_var_with_the_batch_count_bessel_factor_is_bessel():
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        N, C = x.shape[:2]
        xs = np.moveaxis(x, 1, 0).reshape(C, -1)
        m = call.config["momentum"] if call.config["momentum"] is not None else \
            1 / (float(call.state["num_batches_tracked"]) + 1)
        rv = (1 - m) * np.asarray(call.state["running_var"], np.float64) + m * xs.var(axis=1) * N / (N - 1)
        return {**d, "state": {**d["state"], "running_var": rv}}
    expect(Spec(post=post), "batch_norm/normal_f32_6x4x25", "bessel", "Bessel factor of 6 values")


def test_group_norm_silu_bias_after_the_silu_is_affine():
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        bare = {"x": call.inputs["x"]}
        xh = registry.evaluate("group_norm", bare, config=call.config).outputs["y"]
        sh = (1, -1) + (1,) * (x.ndim - 2)
        p = xh * np.asarray(call.inputs["weight"], np.float64).reshape(sh)
        return {**d, "outputs": {**d["outputs"], "y": p / (1 + np.exp(-p)) +
                                 np.asarray(call.inputs["bias"], np.float64).reshape(sh)}}
    expect(Spec(post=post), "group_norm_silu/normal_g4_f32_2x8x5x7", "affine", "the bias added after the SiLU")


def test_group_norm_silu_backward_ignoring_the_silu_is_backward():
    def post(call, d):
        gn = registry.evaluate("group_norm", call.inputs, config=call.config, grad_outputs=call.cotangents)
        return {**d, "grads": {k: gn.grads[k] for k in d["grads"]}}
    expect(Spec(post=post), "group_norm_silu/normal_g4_f32_2x8x5x7", "backward", "ignores the SiLU")


def test_a_dx_term_without_its_rstd_is_backward():
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        g = np.asarray(call.cotangents["y"], np.float64) * np.asarray(call.inputs["weight"], np.float64)
        mean = x.mean(axis=1, keepdims=True)
        r = 1 / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        xh = (x - mean) * r
        dx = r * (g - g.mean(axis=1, keepdims=True)) - xh * (g * xh).mean(axis=1, keepdims=True)
        return {**d, "grads": {**d["grads"], "x": dx}}
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "backward", "without its rstd factor")


def test_a_per_channel_gradient_summed_over_its_group_is_group():
    def post(call, d):
        G = call.config["num_groups"]
        dw = d["grads"]["weight"]
        return {**d, "grads": {**d["grads"], "weight": np.repeat(dw.reshape(G, -1).sum(axis=1), dw.size // G)}}
    expect(Spec(post=post), "group_norm/normal_g4_f32_2x8x5x7", "group", "summed over its group")


def test_dweight_partials_rounded_to_the_input_dtype_is_precision():
    from refnorm.golden import store
    ids = [e["id"] for e in store.read_manifest(GOLDEN)["cases"] if e["case"]["op"] == "rms_norm"
           and e["case"]["dtype"] == "bfloat16" and "normal" in e["id"]][:3]

    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        x2 = x.reshape(-1, x.shape[-1])
        r = 1 / np.sqrt((x2 * x2).mean(axis=1, keepdims=True) + call.config["eps"])
        t = np.asarray(call.cotangents["y"], np.float64).reshape(x2.shape) * x2 * r
        pad = np.zeros(((-t.shape[0]) % 4, t.shape[1]))
        blocks = np.concatenate([t, pad]).reshape(-1, 4, t.shape[1]).sum(axis=1)
        dw = blocks.astype(ml_dtypes.bfloat16).astype(np.float64).sum(axis=0)
        return {**d, "grads": {**d["grads"], "weight": dw.reshape(np.shape(d["grads"]["weight"]))}}
    failed = [r.diagnosis for r in (check_case(Spec(post=post), load_case(GOLDEN, c)) for c in ids) if r.status == "failed"]
    # a case failing by less than diagnosis.MARGIN x its bound is reported as consistent with it, not named
    named = [d for d in failed if "consistent with the arithmetic" not in d["message"]]
    assert named and all(d["mechanism"] == "precision" and "blocks of" in d["message"] for d in named), \
        [d["message"] for d in named]
    assert all(d["mechanism"] is None and "blocks of" in d["message"] for d in failed if d not in named)


def test_two_gradients_in_each_others_place_are_said_so():
    post = lambda call, d: {**d, "grads": {**d["grads"], "weight": d["grads"]["bias"],   # noqa: E731
                                           "bias": d["grads"]["weight"]}}
    # explained, but not named: returning two arrays in each other's place is no mechanism of refnorm's list
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", None, "returned in each other's place")
    assert "no mechanism of refnorm's list" in diag(Spec(post=post), "layer_norm/normal_f32_6x100")["message"]


def test_one_gradient_equal_to_its_neighbour_is_not_a_swap():
    """dweight1 summed from dy where dy1 belongs equals dweight on a parallel add_norm with one x_hat: only one
    of the pair is wrong, so the gradients did not trade places (not named affine)."""
    post = lambda call, d: {**d, "grads": {**d["grads"], "weight1": d["grads"]["weight"]}}   # noqa: E731
    d = diag(Spec(post=post), "add_norm/mean1e3_nobias_rms_zc_xnormal_par_bf16_4x64")
    assert "each other's place" not in d["message"] and d["mechanism"] != "affine", d["message"]


def test_a_deviation_the_forward_cannot_see_is_named_by_the_backward():
    """x = 0: y does not depend on the weight, so "the weight left out" reproduces every array whether the
    kernel drops it everywhere or in dx only; the evidence is dx's: named backward, not affine."""
    def change(c):
        return dict(c.config), {**c.inputs, "weight": np.ones_like(c.inputs["weight"])}, dict(c.cotangents), c.training
    expect(Spec(change=change), "rms_norm/zero_eps1e-06_f32_3x10", "backward", "the weight left out")


def test_a_failure_barely_beyond_its_bound_is_not_named():
    """eps added twice moves float32 y by 1.44 x its bound on this case: the deviation fits, but so would many
    small ones; reported as consistent with it (diagnosis.MARGIN), unnamed. On a case where the reference
    misses clearly the same kernel is named."""
    from refnorm.check.core import check_case as run
    from refnorm.check.diagnosis import MARGIN
    change = lambda c: ({**c.config, "eps": 2 * c.config["eps"]}, dict(c.inputs), dict(c.cotangents), c.training)  # noqa: E731
    r = run(Spec(change=change), load_case(GOLDEN, "layer_norm/heavy_tail_f32_6x100"))
    assert r.status == "failed" and max(a.ratio for a in r.arrays if not a.passed) < MARGIN
    d = r.diagnosis
    assert d["mechanism"] is None and "consistent with the arithmetic" in d["message"] \
        and "eps added twice" in d["message"], d["message"]
    expect(Spec(change=change), "layer_norm/normal_f64_9x7", "eps", "eps added twice")


def test_a_failure_by_overflow_alone_is_not_named():
    """A constant float16 row with eps 1e-12: rstd = 1e6, and any deviation of the backward overflows dx to
    inf there, as the catalogue's eps-outside variant does. Normalizing with the updated running statistics
    (tests/planted/blind4.py) fails only by infinite dx: localized, not named eps."""
    from planted.blind4 import Blind4Kernel
    d = diag(Blind4Kernel("bn_train_output_from_new_running"), "batch_norm/const_eps1e-12_f16_7x3")
    assert d["mechanism"] is None and "fails only by +-inf" in d["message"] \
        and "first non-finite" in d["message"], d["message"]


def test_a_quantized_nan_is_evidence():
    """float8_e4m3fn codes saturating to NaN (the format's overflow code) where +-448 belongs: q fails only by
    NaN, but that NaN is a value of the format, so the saturation variant that reproduces it is named."""
    from planted import report
    failed = [c for c in report.run("q_e4m3_nan", "norm_quant").cases if c.status == "failed"]
    assert failed and all(c.diagnosis["mechanism"] == "saturation" for c in failed), \
        [c.diagnosis["message"] for c in failed]


def test_a_nan_from_a_negative_one_pass_variance_is_evidence():
    """Constant groups: the one-pass variance E[x^2] - E[x]^2 comes out negative, y = NaN (onnxruntime's
    GroupNormalization, known_failures/onnxruntime.txt). A NaN is an invalid operation the unclamped one-pass
    variant reproduces at the same elements: evidence, named one_pass (an overflow to inf would not be)."""
    from planted import report
    c = next(c for c in report.run("one_pass_noclamp", "group_norm").cases if c.id == "group_norm/const_g4_f32_2x8x5x7")
    assert c.status == "failed" and "not finite where the expected value is" in c.diagnosis["message"]
    assert c.diagnosis["mechanism"] == "one_pass", c.diagnosis["message"]


def test_the_other_ddof_is_bessel():
    """z_score's ddof (default 1) taken as 0: the configuration search tries the other Bessel convention of
    an op's ddof option, its default included."""
    change = lambda c: ({**c.config, "ddof": 0}, dict(c.inputs), dict(c.cotangents), c.training)   # noqa: E731
    expect(Spec(change=change), "z_score/normal_f64_9x7", "bessel", "ddof=0 where 1 belongs")


def test_running_var_about_the_updated_running_mean_is_running():
    """batch_norm's running_var fed the variance about the just-updated running_mean, not the batch mean."""
    def post(call, d):
        if not call.training or "running_var" not in call.state:
            return d
        x = np.asarray(call.inputs["x"], np.float64)
        ax = tuple(i for i in range(x.ndim) if i != 1)
        n = x.size // x.shape[1]
        m = call.config.get("momentum", 0.1)
        rm = np.asarray(d["state"]["running_mean"], np.float64).reshape((1, -1) + (1,) * (x.ndim - 2))
        v = ((x - rm) ** 2).mean(axis=ax) * n / (n - 1)
        rv = (1 - m) * np.asarray(call.state["running_var"], np.float64) + m * v
        return {**d, "state": {**d["state"], "running_var": rv}}
    expect(Spec(post=post), "batch_norm/normal_f64_7x3", "running", "about the updated running_mean")


def test_the_bias_ignored_is_affine():
    """y without the bias (its gradient still returned): the computation without the bias input."""
    post = lambda call, d: {**d, "outputs": {**d["outputs"], "y": d["outputs"]["y"] - call.inputs["bias"]}}  # noqa: E731
    expect(Spec(post=post), "layer_norm/normal_f32_6x100", "affine", "the input bias ignored")


def test_dweight_from_the_statistics_of_the_blocks_first_row_is_layout():
    """dweight's x_hat recomputed with the mean and rstd loaded at the first row of each block of 4 rows."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], np.float64)
        dy = np.asarray(call.cotangents["y"], np.float64)
        mean = x.mean(axis=1, keepdims=True)
        rstd = 1 / np.sqrt(x.var(axis=1, keepdims=True) + call.config.get("eps", 1e-5))
        first = np.arange(x.shape[0]) // 4 * 4
        dw = (dy * (x - mean[first]) * rstd[first]).sum(axis=0)
        return {**d, "grads": {**d["grads"], "weight": dw}}
    expect(Spec(post=post), "layer_norm/normal_f64_9x7", "layout", "first row of its block of 4 rows")


def test_the_last_rows_never_processed_is_block():
    """A grid of 4-row programs rounded down: rows 8 on of 9 left at 0 (y, rstd, dx), dweight without their terms."""
    def post(call, d):
        out = {k: np.array(v, np.float64) for k, v in d["outputs"].items()}
        gr = {k: np.array(v, np.float64) for k, v in d["grads"].items()}
        out["y"][8:] = 0.0
        out["rstd"].reshape(-1)[8:] = 0.0
        gr["x"][8:] = 0.0
        x = np.asarray(call.inputs["x"], np.float64)
        xh = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + call.config["eps"])
        gr["weight"] = (np.asarray(call.cotangents["y"], np.float64) * xh)[:8].sum(axis=0)
        return {**d, "outputs": out, "grads": gr}
    expect(Spec(post=post), "rms_norm/normal_eps1e-05_f64_9x7", "block", "rows 8-8 never processed")


def test_an_input_read_from_another_inputs_buffer_is_layout():
    """The gate z read from x's buffer (the wrong pointer): the specification with z = x reproduces it."""
    change = lambda c: (dict(c.config), {**c.inputs, "z": c.inputs["x"]}, dict(c.cotangents), c.training)  # noqa: E731
    expect(Spec(change=change), "gated_norm/normal_gs4_f64_3x7x12", "layout", "the input z read from x's buffer")


def test_an_ignored_input_explains_no_failure_of_its_own_gradient():
    """dbias from g = dy * weight: the computation without the bias has no dbias to compare, so "the bias
    ignored" must not claim the failing dbias (it did, vacuously, on a constant case)."""
    def post(call, d):
        g = np.asarray(call.cotangents["y"], np.float64) * np.asarray(call.inputs["weight"], np.float64)
        return {**d, "grads": {**d["grads"], "bias": g.sum(axis=0)}}
    d = diag(Spec(post=post), "layer_norm/normal_f32_6x100")
    assert "the input bias ignored" not in d["message"], d["message"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", ["zero", "down", "up"])
def test_directed_shift_rounds_to_nearest_as_the_directed_conversion(dtype, mode):
    """pitfalls._rounding.directed_shift: the shifted value, rounded to nearest in the 16-bit dtype, is the
    value converted toward zero, down or up (each computed here from NumPy's nearest conversion and one
    nextafter), for values of both signs across many binades, values of the grid kept."""
    from refnorm.pitfalls._rounding import directed_shift
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(7)
    v = np.concatenate([rng.standard_normal(4000) * 10, rng.standard_normal(500) * 1e-3, [1.0, -1.0, 0.5, -3.0]])
    r = v.astype(dt)
    below = np.where(r.astype(np.float64) > v, np.nextafter(r, np.array(-np.inf, dt)), r).astype(np.float64)
    above = np.where(r.astype(np.float64) < v, np.nextafter(r, np.array(np.inf, dt)), r).astype(np.float64)
    want = {"down": below, "up": above, "zero": np.where(v > 0, below, above)}[mode]
    got = directed_shift(v, dtype, mode).astype(dt).astype(np.float64)
    assert np.array_equal(got, want)
    assert np.array_equal(directed_shift(np.array([1.0, -0.5]), dtype, mode), [1.0, -0.5])
