"""The index-order, other-axes, updated-running-statistics and partial-reduction families of the diagnosis
(refnorm/check/explain_index.py, issue 33), each on a kernel planted here with tests/test_explain_families.py's
``Spec`` (the float64 specification, rounded to the case dtype, with one deviation). Each test fails if its
family stops naming the mechanism (or names another); the correct kernel names nothing, and a bug of another
mechanism is not named a layout misread."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from test_explain_families import GOLDEN, Spec, diag, expect  # noqa: E402

from refnorm import registry  # noqa: E402
from refnorm.check.core import check_case  # noqa: E402
from refnorm.check.explain_index import index_orders  # noqa: E402
from refnorm.golden import load_case  # noqa: E402

GN, IN = "group_norm/normal_g4_f32_2x8x5x7", "instance_norm/normal_f32_2x3x100"
LN_K2 = "layer_norm/normal_k2_f32_2x3x5x6"
BN, LN, ALN = "batch_norm/normal_f32_6x4x25", "layer_norm/normal_f32_6x100", "adaptive_layer_norm/normal_f32_3x20x12"
ALN16 = "adaptive_layer_norm/normal_bf16_2x8x32"


def test_the_correct_kernel_passes_the_cases_used_here():
    for case_id in (GN, IN, LN_K2, BN, LN, ALN, ALN16):
        assert check_case(Spec(), load_case(GOLDEN, case_id)).status == "passed", case_id


def test_index_orders_hold_the_transposed_factorizations():
    orders = {m.tobytes(): what for m, what in index_orders((2, 4))}
    group_major = np.arange(8).reshape(2, 4).T.ravel()          # (N, G) written at g * N + n
    assert group_major.tobytes() in orders
    assert np.arange(8).tobytes() not in orders                  # never the identity
    assert len(index_orders((2, 3, 4, 5))) <= 64


# ---------------------------------------------------------------- a returned array in another index order
def test_group_norm_statistics_written_group_major_are_a_layout_misread():
    def post(call, d):
        o = dict(d["outputs"])
        for k in ("mean", "rstd"):
            a = np.asarray(o[k])
            o[k] = a.reshape(a.shape[0], -1).T.reshape(a.shape)
        return {**d, "outputs": o}
    expect(Spec(post=post), GN, "layout", "mean is the expected array with")


# ---------------------------------------------------------------- a parameter read at another index
def _params(call, f):
    ins = dict(call.inputs)
    for k in ("weight", "bias"):
        if ins.get(k) is not None:
            ins[k] = f(np.asarray(ins[k]))
    return dict(call.config), ins, dict(call.cotangents), call.training


def test_instance_norm_weight_at_the_block_local_index():
    change = lambda call: _params(call, lambda v: v[np.arange(v.size) % 2])      # noqa: E731
    expect(Spec(change=change), IN, "layout", "weight[i % 2]")


def test_layer_norm_multi_axis_weight_flattened_column_major():
    change = lambda call: _params(call, lambda v: v.ravel(order="F").reshape(v.shape))   # noqa: E731
    expect(Spec(change=change), LN_K2, "layout", "column-major")


def test_adaptive_layer_norm_gain_rounded_to_the_input_dtype_is_the_cast_order():
    def change(call):
        ins = dict(call.inputs)
        s = np.asarray(ins["scale"], dtype=np.float64)
        ins["scale"] = (1.0 + s).astype(ml_dtypes.bfloat16).astype(np.float64) - 1.0
        return dict(call.config), ins, dict(call.cotangents), call.training
    expect(Spec(change=change), ALN16, "affine", "rounded to bfloat16")


def test_a_weight_off_by_noise_is_not_named_a_layout_misread():
    rng = np.random.default_rng(0)
    change = lambda call: _params(call, lambda v: v * (1 + 0.3 * rng.standard_normal(v.shape)))   # noqa: E731
    assert diag(Spec(change=change), IN).get("mechanism") != "layout"


def test_eps_changed_is_not_named_a_layout_misread():
    for case_id in (IN, LN_K2, GN):
        change = lambda call: ({**call.config, "eps": 2 * call.config["eps"]}, dict(call.inputs),  # noqa: E731
                               dict(call.cotangents), call.training)
        d = diag(Spec(change=change), case_id)
        assert d.get("mechanism") == "eps", (case_id, d["message"])


# ---------------------------------------------------------------- statistics over other axes
def test_adaptive_layer_norm_statistics_over_the_tokens_are_another_normalizers_axes():
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        m = x.mean(axis=1, keepdims=True)
        r = 1 / np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        s = np.asarray(call.inputs["scale"], dtype=np.float64)[:, None, :]
        b = np.asarray(call.inputs["shift"], dtype=np.float64)[:, None, :]
        o = dict(d["outputs"])
        o["y"] = (x - m) * r * (1 + s) + b
        o["mean"] = np.broadcast_to(m, x.shape).mean(axis=-1, keepdims=True)
        o["rstd"] = np.broadcast_to(r, x.shape).mean(axis=-1, keepdims=True)
        return {**d, "outputs": o}
    expect(Spec(post=post), ALN, "semantics", "over x's axes (1) where (2) belong")


# ---------------------------------------------------------------- the mode: the running statistics after the update
def test_batch_norm_training_normalized_by_the_updated_running_statistics():
    def post(call, d):
        r = registry.evaluate(call.op, dict(call.inputs), config=dict(call.config), state=dict(d["state"]),
                              training=False)
        return {**d, "outputs": {**d["outputs"], "y": r.outputs["y"]}}
    expect(Spec(post=post), BN, "mode", "running statistics after this call's update")


# ---------------------------------------------------------------- a partial reduction
def test_layer_norm_mean_from_the_last_column_block_only():
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        n = x.shape[-1]
        m = x[:, (n - 1) // 64 * 64:].sum(axis=-1, keepdims=True) / n
        r = 1 / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + call.config["eps"])
        w, b = np.asarray(call.inputs["weight"], np.float64), np.asarray(call.inputs["bias"], np.float64)
        o = {**d["outputs"], "y": (x - m) * r * w + b, "mean": m.reshape(np.shape(d["outputs"]["mean"])),
             "rstd": r.reshape(np.shape(d["outputs"]["rstd"]))}
        return {**d, "outputs": o}
    expect(Spec(post=post), LN, "block", "the last block of 64")


def test_adaptive_layer_norm_modulation_read_at_row_mod_batch():
    """x as (B * T, H) rows, the per-sample scale and shift read at row % B where row // T belongs."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        B, T, H = x.shape
        m = x.mean(axis=-1, keepdims=True)
        r = 1 / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + call.config["eps"])
        rows = np.arange(B * T) % B                                    # the sample row r reads
        s = np.asarray(call.inputs["scale"], dtype=np.float64)[rows].reshape(B, T, H)
        b = np.asarray(call.inputs["shift"], dtype=np.float64)[rows].reshape(B, T, H)
        return {**d, "outputs": {**d["outputs"], "y": (x - m) * r * (1 + s) + b}}
    expect(Spec(post=post), ALN, "layout", "scale and shift as x's elements read them")


def test_layer_norm_backward_sums_over_a_block_of_rows():
    """dx's sums of g and g x_hat over each 2-D tile of 4 rows (divided by n) where each row's belong."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        R, n = x.shape
        m = x.mean(axis=1, keepdims=True)
        r = 1 / np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True) + call.config["eps"])
        xh = (x - m) * r
        g = np.asarray(call.cotangents["y"], np.float64) * np.asarray(call.inputs["weight"], np.float64)
        block = lambda t: np.repeat(np.add.reduceat(t.sum(axis=1), np.arange(0, R, 4)), 4)[:R, None]  # noqa: E731
        dx = r * (g - block(g) / n - xh * block(g * xh) / n)
        return {**d, "grads": {**d["grads"], "x": dx}}
    expect(Spec(post=post), LN, "block", "each block of 4 rows")


def _bn_record(momentum, y):
    """A batch_norm training step (x 8x3, running statistics 0 and 1, nothing tracked yet) whose kernel
    returned ``y`` (a function of the reference and its new state), every other array the reference's."""
    from refnorm.check.diagnosis import StepRecord
    from refnorm.check.judge import reference

    class Case:
        op, config, dtype = "batch_norm", {"eps": 1e-5, "momentum": momentum}, "float64"
    x = np.random.default_rng(3).standard_normal((8, 3)) * 2 + 1
    state = {"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.asarray(0)}
    ref = reference("batch_norm", Case.config, True, {"x": x}, {}, state)
    got = {"outputs": {**ref.outputs, "y": y(x, ref)}, "grads": {}, "state": dict(ref.state)}
    E = {"outputs": {k: np.full(np.shape(v), 1e-9) for k, v in ref.outputs.items()}, "grads": {},
         "state": {k: np.full(np.shape(v), 1e-9) for k, v in ref.state.items()}}
    compare = {"outputs": list(ref.outputs), "grads": [], "state": [k for k in ref.state if k != "num_batches_tracked"]}
    rec = StepRecord(0, True, {"x": x}, {}, state, got, compare, E, (("outputs", "y"),), ref)
    return Case, rec, ref, reference


def test_updated_running_statistics_named_a_mode_but_not_when_they_are_the_batchs():
    from refnorm.check import explain
    from refnorm.check.explain_index import updated_running

    def by_new_running(x, ref):
        rm, rv = ref.state["running_mean"], ref.state["running_var"]
        return (x - rm) / np.sqrt(rv + 1e-5)
    case, rec, ref, reference = _bn_record(0.1, by_new_running)
    assert [e["mechanism"] for e in updated_running(explain, case, rec, ref, reference)] == ["mode"]
    # momentum None on the first call: the running statistics become the batch mean and unbiased variance,
    # so y normalized by the unbiased variance (the Bessel convention) is the same arithmetic: not a mode
    case, rec, ref, reference = _bn_record(None, by_new_running)
    assert updated_running(explain, case, rec, ref, reference) == []


def _group_norm_over(view_of, R, strided=False):
    """group_norm's y, mean and rstd with the statistics over the axes R of x seen as view_of(N, G, cg, S)."""
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        N, C = x.shape[:2]
        G = call.config["num_groups"]
        v = view_of(N, G, C // G, x.size // (N * C))
        xv = x.reshape(v)
        m = xv.mean(axis=R, keepdims=True)
        r = 1 / np.sqrt(((xv - m) ** 2).mean(axis=R, keepdims=True) + call.config["eps"])
        shape = (1, -1) + (1,) * (x.ndim - 2)
        w = np.asarray(call.inputs["weight"], np.float64).reshape(shape)
        b = np.asarray(call.inputs["bias"], np.float64).reshape(shape)
        y = ((xv - m) * r).reshape(x.shape) * w + b
        o = {**d["outputs"], "y": y}
        if strided:                                          # the kernel's own (strided) groups' statistics
            o["mean"], o["rstd"] = m.reshape(N, G), r.reshape(N, G)
        else:                                                # averaged over each group
            o["mean"] = np.broadcast_to(m, v).reshape(N, G, -1).mean(axis=2)
            o["rstd"] = np.broadcast_to(r, v).reshape(N, G, -1).mean(axis=2)
        return {**d, "outputs": o}
    return Spec(post=post)


def test_group_norm_statistics_pooled_over_the_batch_are_a_reduction():
    # the op's own axes and more (docs/verdicts.md, "Which mechanism a bug is": reduction, not semantics)
    expect(_group_norm_over(lambda N, G, cg, S: (N, G, cg, S), (0, 2, 3)), GN, "reduction",
           "pooled over the axes of x seen as (2, 4, 2, 35) (0, 2, 3) where (2, 3)")


def test_group_norm_strided_groups_are_a_layout_misread():
    d = diag(_group_norm_over(lambda N, G, cg, S: (N, cg, G, S), (1, 3), strided=True), GN)
    assert d["mechanism"] == "layout", d["message"]


def test_batch_norm_eval_without_running_statistics_normalized_by_the_initial_buffers():
    def post(call, d):
        C = np.shape(call.inputs["x"])[1]
        fresh = {"running_mean": np.zeros(C), "running_var": np.ones(C), "num_batches_tracked": np.asarray(0)}
        r = registry.evaluate(call.op, dict(call.inputs), config=dict(call.config), state=fresh, training=False,
                              grad_outputs=dict(call.cotangents) or None)
        return {**d, "outputs": {**d["outputs"], "y": r.outputs["y"]}, "grads": {**d["grads"], **r.grads}}
    assert check_case(Spec(), load_case(GOLDEN, "batch_norm/normal_eval_nostats_f32_4x3x5")).status == "passed"
    expect(Spec(post=post), "batch_norm/normal_eval_nostats_f32_4x3x5", "mode", "initial values (mean 0, var 1)")


def test_layer_norm_multi_axis_normalized_over_its_last_axis_only_is_the_group_its_statistics_span():
    def post(call, d):
        x = np.asarray(call.inputs["x"], dtype=np.float64)
        m = x.mean(axis=-1, keepdims=True)
        r = 1 / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + call.config["eps"])
        w, b = np.asarray(call.inputs["weight"], np.float64), np.asarray(call.inputs["bias"], np.float64)
        return {**d, "outputs": {"y": (x - m) * r * w + b}}      # no mean and rstd returned
    expect(Spec(post=post), LN_K2, "group", "groups of 6 of each slice's values")
